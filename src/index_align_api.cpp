// Entry points of the alignment of a scan to an index's points
// (knn_index_align, include/knn_gpgpu_stats.h): the checks, then the ICP
// loop of src/align_fit.h, whose every step takes the moved points' nearest
// index points through the index's one query path (answer_call, k = 1: the
// same lists on every backend, structure and device list) and sums the
// terms of common/geometry/align_terms.h (cloud_block_sums) on the host, so
// the fit is the same transform bit for bit wherever the index lives.
// Summing on the device, as the statistics' list reducers do
// (engine/stats_engine.h), would keep the lists there; not done yet.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../common/error.h"
#include "../engine/cancel.h"
#include "abi_barrier.h"
#include "align_fit.h"
#include "device_arrays.h"
#include "device_scope.h"
#include "index_calls.h"
#include "index_handle.h"
#include "validate.h"

namespace knn {
namespace {

// The shared ICP loop (src/align_fit.h).
using namespace align;

// Rows of 3 scalars on the host: the caller's host array itself, or a copy
// of a device array.
template <typename Scalar>
class HostRows {
 public:
  HostRows(const Scalar* rows, int64_t n) : rows_(rows) {
    if (rows != nullptr && on_device(rows)) {
      copy_ = copy_rows_to_host(rows, n, 3);
      rows_ = copy_.data();
    }
  }
  const Scalar* data() const { return rows_; }

 private:
  const Scalar* rows_;
  std::vector<Scalar> copy_;
};

// The threshold of the kept points: max_sq, lowered to the squared distance
// at the trimming rank among the points within it (as the mesh engines'
// threshold, omp_mesh_align.cpp).
template <typename Scalar>
double kept_threshold(const std::vector<int32_t>& nearest, const std::vector<Scalar>& sq,
                      const Settings& settings) {
  if (!(settings.kept_fraction < 1.0)) return settings.max_sq;
  std::vector<Scalar> measured;
  measured.reserve(sq.size());
  for (size_t i = 0; i < sq.size(); ++i)
    if (nearest[i] >= 0 && static_cast<double>(sq[i]) <= settings.max_sq) measured.push_back(sq[i]);
  if (measured.empty()) return settings.max_sq;
  const auto at = measured.begin() + geometry::trim_position(settings.kept_fraction,
                                                             static_cast<int64_t>(measured.size()));
  std::nth_element(measured.begin(), at, measured.end());
  return static_cast<double>(*at);
}

// One step's correspondences and sums: the scan moved by `motion` and
// rounded to the index's scalar, its k = 1 lists through answer_call, the
// threshold, then the blocks of kAlignSumBlock points in order.
template <typename Scalar>
class CloudSteps {
 public:
  CloudSteps(const knn_index& ix, const knn_options& o, const Scalar* scan, int64_t m,
             const Scalar* targets, const Scalar* normals, const Frame& frame,
             const Settings& settings)
      : ix_(ix),
        o_(o),
        scan_(scan),
        m_(m),
        targets_(targets),
        normals_(normals),
        frame_(frame),
        settings_(settings),
        moved_(static_cast<size_t>(3 * m)),
        nearest_(static_cast<size_t>(m)),
        sq_(static_cast<size_t>(m)),
        fallback_(ix) {}

  geometry::AlignSums operator()(const Motion& motion) {
    throw_if_cancelled(cancel_flag());
    const geometry::AlignFrame f = frame_of(motion, frame_);
    for (int64_t i = 0; i < m_; ++i) {
      const geometry::Vec3<Scalar> q =
          geometry::rounded3<Scalar>(geometry::move_point(f, scan_ + 3 * i));
      moved_[static_cast<size_t>(3 * i)] = q.x;
      moved_[static_cast<size_t>(3 * i + 1)] = q.y;
      moved_[static_cast<size_t>(3 * i + 2)] = q.z;
    }
    const Outputs<Scalar> lists(nearest_.data(), sq_.data(), nullptr, m_, m_);
    const BasicShareWork<Scalar> share =
        [](const BasicIndexEngine<Scalar>& e, const Scalar* q, int64_t count, int row, int32_t* i,
           Scalar* d, int32_t*, const CallParams& call) { e.knn(q, count, row, i, d, call); };
    answer_call(ix_, CallShape<Scalar>{moved_.data(), m_, 1, 1, CallKind::Nearest, false}, lists,
                o_, share, share, fallback_);
    const double threshold = kept_threshold(nearest_, sq_, settings_);
    geometry::AlignSums total = geometry::no_align_sums();
    for (int64_t first = 0; first < m_; first += geometry::kAlignSumBlock)
      geometry::add_block(total,
                          geometry::cloud_block_sums(scan_, nearest_.data(), sq_.data(), first,
                                                     std::min(geometry::kAlignSumBlock, m_ - first),
                                                     threshold, f, targets_, normals_));
    return total;
  }

 private:
  const knn_index& ix_;
  const knn_options& o_;
  const Scalar* scan_;
  int64_t m_;
  const Scalar* targets_;
  const Scalar* normals_;
  const Frame& frame_;
  const Settings& settings_;
  std::vector<Scalar> moved_;
  std::vector<int32_t> nearest_;
  std::vector<Scalar> sq_;
  CpuFallback<Scalar> fallback_;
};

template <typename Scalar>
void index_align(const char* call, const knn_index* index, const Scalar* points, int64_t m,
                 const Scalar* normals, const double* initial, const knn_align_params* params,
                 knn_align_result* result, const knn_options* opt) {
  const HandleUse<knn_index> use = use_index<Scalar>(index, call);
  const knn_index& ix = *use;
  const knn_options o = read_call_options(ix, opt);
  if (ix.dim() != 3)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("the index has dim %d; %s aligns 3-D points only", ix.dim(), call));
  check_result(result);
  Settings settings = settings_of(params, sizeof(Scalar));
  const Motion start = initial_motion(initial);
  check_array(points, m, "points", "m");
  check_slots(m, 3, sizeof(Scalar), "m * 3 (the points)");
  const int64_t n = ix.size();
  check_slots(n, 3, sizeof(Scalar), "n * 3 (the normals)");
  const DeviceScope scope(ix.device);
  for (const void* p : {static_cast<const void*>(points), static_cast<const void*>(normals)})
    if (on_device(p) && ix.device >= 0 && device_backend().device_of(p) != ix.device)
      fail(KNN_ERR_INVALID_ARGUMENT,
           format("%s is memory of device %d; pass host memory or memory of the index's device "
                  "(%d)",
                  p == points ? "points" : "normals", device_backend().device_of(p), ix.device));
  check_coordinate_rows(points, m, 3, on_device(points), "point", call_params(ix, o).threads);
  Fit fit;
  fit.motion = start;
  if (m > 0 && n > 0) {
    std::vector<Scalar> targets(static_cast<size_t>(3 * n));
    ix.engine<Scalar>()->copy_points(targets.data());
    const HostRows<Scalar> scan(points, m), target_normals(normals, n);
    const double diagonal = bounding_diagonal(targets.data(), n);
    settings.default_translation(diagonal);
    const Moments scan_moments = point_moments(scan.data(), m, false);
    const Frame frame = scan_frame(scan_moments, diagonal);
    fit = best_fit(
        [&] {
          return CloudSteps<Scalar>(ix, o, scan.data(), m, targets.data(), target_normals.data(),
                                    frame, settings);
        },
        start, m, scan_moments, [&] { return point_moments(targets.data(), n, false); }, frame,
        settings);
  }
  write_result(fit, result);
}

}  // namespace
}  // namespace knn

extern "C" {

// An entry point and its _f64 twin are one definition over the scalar:
// a macro, since an extern "C" function cannot be a template, expanded for
// float and for double (the declarations stay in the public header).
#define KNN_INDEX_ALIGN_ENTRY(name, Scalar)                                                       \
  KNN_API int KNN_CALL name(const knn_index* index, const Scalar* points, int64_t m,              \
                            const Scalar* normals, const double* initial,                         \
                            const knn_align_params* params, knn_align_result* result,             \
                            const knn_options* opt) {                                             \
    return knn::guarded_call(#name, knn::index_align<Scalar>, index, points, m, normals, initial, \
                             params, result, opt);                                                \
  }
KNN_INDEX_ALIGN_ENTRY(knn_index_align, float)
KNN_INDEX_ALIGN_ENTRY(knn_index_align_f64, double)
#undef KNN_INDEX_ALIGN_ENTRY

}  // extern "C"
