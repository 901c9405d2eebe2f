// Entry points of the alignment of a scan to an index's points
// (knn_index_align, include/knn_gpgpu_stats.h): the checks, then the ICP
// loop of src/align_fit.h, whose every step takes the moved points' nearest
// index points through the index's one query path (answer_call, k = 1: the
// same lists on every backend, structure and device list) and sums the
// terms of common/geometry/align_terms.h (cloud_block_sums) where the index
// keeps them: through an engine's aligner (engine/cloud_align.h), the CUDA
// one on a CUDA index (the lists stay on its device; only the blocks' sums
// come back), the OpenMP one on the host otherwise (and where an AUTO
// index's device has no memory for the call's lists). Both sum the same
// blocks in the same order, so the fit is the same transform bit for bit
// wherever the index lives.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "../common/error.h"
#include "../engine/cancel.h"
#include "../engine/cloud_align.h"
#include "abi_barrier.h"
#include "align_fit.h"
#include "backends.h"
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

// The aligner of one call: on a CUDA index the CUDA engine's, which takes
// the caller's arrays where they are; else (and where an AUTO index's device
// has no memory for it) the OpenMP engine's, over host arrays. It lives
// with the host copies it reads.
template <typename Scalar>
class CallAligner {
 public:
  CallAligner(const knn_index& ix, const CallParams& params, CloudAlignRequest<Scalar> request,
              const HostRows<Scalar>& host_scan) {
    const BasicIndexEngine<Scalar>& engine = *ix.engine<Scalar>();
    if (ix.backend() == KNN_BACKEND_CUDA)
      aligner_ = made_on_device_or_null(
          ix, [&] { return device_backend().make_cloud_aligner(engine, request, params); });
    if (aligner_) return;
    request.points = host_scan.data();
    request.normals = host_normals_.emplace(request.normals, engine.size()).data();
    aligner_ = host_backend().make_cloud_aligner(engine, request, params);
  }
  BasicCloudAligner<Scalar>& operator*() const { return *aligner_; }

 private:
  std::optional<HostRows<Scalar>> host_normals_;
  std::unique_ptr<BasicCloudAligner<Scalar>> aligner_;
};

// One step's correspondences and sums: the scan moved by `motion` and
// rounded to the index's scalar by the aligner, chunk by chunk, each chunk's
// k = 1 lists through answer_call into the aligner's arrays (within the
// device memory the aligner leaves the searches), then the aligner's
// threshold and sums.
template <typename Scalar>
class CloudSteps {
 public:
  CloudSteps(const knn_index& ix, const knn_options& o, BasicCloudAligner<Scalar>& aligner,
             int64_t m, const Frame& frame, const Settings& settings)
      : ix_(ix),
        o_(o),
        aligner_(aligner),
        m_(m),
        frame_(frame),
        settings_(settings),
        fallback_(ix) {
    o_.device_memory_limit = aligner.search_memory_limit();
  }

  geometry::AlignSums operator()(const Motion& motion) {
    const geometry::AlignFrame f = frame_of(motion, frame_);
    const BasicShareWork<Scalar> share =
        [](const BasicIndexEngine<Scalar>& e, const Scalar* q, int64_t count, int row, int32_t* i,
           Scalar* d, int32_t*, const CallParams& call) { e.knn(q, count, row, i, d, call); };
    const int64_t chunk = aligner_.chunk_points();
    for (int64_t first = 0; first < m_; first += chunk) {
      throw_if_cancelled(cancel_flag());
      const int64_t count = std::min(chunk, m_ - first);
      const Scalar* queries = aligner_.move(first, count, f);
      const Outputs<Scalar> lists(aligner_.nearest() + first, aligner_.sq_distances() + first,
                                  nullptr, count, count);
      answer_call(ix_, CallShape<Scalar>{queries, count, 1, 1, CallKind::Nearest, false}, lists, o_,
                  share, share, fallback_);
    }
    return aligner_.sums(f, settings_.max_sq, settings_.kept_fraction);
  }

 private:
  const knn_index& ix_;
  knn_options o_;
  BasicCloudAligner<Scalar>& aligner_;
  int64_t m_;
  const Frame& frame_;
  const Settings& settings_;
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
    const HostRows<Scalar> scan(points, m);
    const double diagonal = bounding_diagonal(targets.data(), n);
    settings.default_translation(diagonal);
    const Moments scan_moments = point_moments(scan.data(), m, false);
    const Frame frame = scan_frame(scan_moments, diagonal);
    CloudAlignRequest<Scalar> request;
    request.points = points;
    request.m = m;
    request.normals = normals;
    request.host_targets = targets.data();
    request.trims = settings.kept_fraction < 1.0;
    const CallAligner<Scalar> aligner(ix, call_params(ix, o), request, scan);
    fit = best_fit([&] { return CloudSteps<Scalar>(ix, o, *aligner, m, frame, settings); }, start,
                   m, scan_moments, [&] { return point_moments(targets.data(), n, false); }, frame,
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
