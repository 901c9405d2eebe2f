// The OpenMP engine of triangle meshes (engine/mesh_engine.h): closest
// points, signed distances and the deviation report over the BVH of
// mesh_tree.h, one point per loop iteration, blocks of points shared by the
// threads (omp_index_support.h for_each_block: cancellation between blocks,
// progress per block, exceptions kept off the OpenMP region).
// The searches themselves are the CUDA engine's too:
// common/geometry/mesh_walk.h.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "../../common/error.h"
#include "../../common/float_math.h"
#include "../../common/geometry/deviation.h"
#include "../../common/geometry/mesh_bvh.h"
#include "../../common/geometry/mesh_walk.h"
#include "../../common/geometry/mesh_winding_tree.h"
#include "../../common/geometry/triangle.h"
#include "../../common/geometry/winding.h"
#include "../../common/team_size.h"
#include "../../engine/cancel.h"
#include "../../engine/mesh_engine.h"
#include "../omp_index_support.h"
#include "../point_order.h"
#include "mesh_tree.h"
#include "omp_mesh_align.h"

namespace knn {
namespace omp {
namespace {

using geometry::Vec3;

// Points per block of the parallel loops: a cancel check and a progress
// report each.
constexpr int64_t kPointsPerBlock = 256;

// The points are answered in chunks of kOrderChunk, each in its Morton order
// in the mesh's box (point_order.h); the chunks bound the order's memory.
// Starting each search from the previous point's triangle saved no node.
constexpr int64_t kOrderChunk = int64_t{1} << 20;

template <typename Scalar>
Scalar squared_limit(Scalar max_distance) {
  return mul_rn(max_distance, max_distance);  // +infinity stays +infinity
}

template <typename Scalar>
class OmpMesh final : public MeshEngine<Scalar> {
 public:
  OmpMesh(const MeshGeometry<Scalar>& mesh, const MeshParams& params)
      : tree_(build_mesh_tree(mesh, team_size(params.threads))) {
    const MeshBox<Scalar> box = mesh_box(tree_);
    for (int d = 0; d < 3; ++d) box_.lo[d] = box.lo[d], box_.hi[d] = box.hi[d];
  }

  int backend() const override { return KNN_BACKEND_OPENMP; }
  int64_t n_triangles() const override { return tree_.n_triangles; }
  bool closed_oriented() const override { return tree_.closed_oriented; }

  void closest(const Scalar* points, int64_t m, Scalar max_distance, const MeshResults<Scalar>& out,
               const MeshParams& call) const override {
    answer(points, m, squared_limit(max_distance), out, call);
  }

  void deviation(const Scalar* points, int64_t m, Scalar max_distance,
                 const DeviationRequest& request, DeviationSummary* summary,
                 Scalar* signed_distances, const MeshParams& call) const override;

  geometry::AlignSums align_step(const Scalar* points, int64_t m, const AlignStep& step,
                                 const MeshParams& call) const override {
    return omp::align_step(tree_, points, m, step, call);
  }

 private:
  // Every point's outputs (those of `out` not NULL). A failure (the cancel
  // flag included) leaves every output with the "beyond" values.
  void answer(const Scalar* points, int64_t m, Scalar limit_sq, const MeshResults<Scalar>& out,
              const MeshParams& call) const {
    const int threads = team_size(call.threads);
    const volatile int* cancel = cancel_flag();
    try {
      PointOrder order(std::min(m, kOrderChunk), cancel);
      for (int64_t first = 0; first < m; first += kOrderChunk) {
        const int64_t count = std::min(kOrderChunk, m - first);
        const uint32_t* sorted = order.sort(points + 3 * first, count, box_, threads, cancel);
        struct NoState {};
        for_each_block(
            count, kPointsPerBlock, threads, cancel, [] { return NoState{}; },
            [&](NoState&, int64_t b) {
              const int64_t end = std::min(count, (b + 1) * kPointsPerBlock);
              for (int64_t i = b * kPointsPerBlock; i < end; ++i)
                answer_point(points, first + sorted[i], limit_sq, out);
            });
      }
    } catch (...) {
#pragma omp parallel for num_threads(team_size(call.threads))
      for (int64_t i = 0; i < m; ++i) geometry::write_beyond<Scalar>(out, i);
      throw;
    }
  }

  void answer_point(const Scalar* points, int64_t i, Scalar limit_sq,
                    const MeshResults<Scalar>& out) const {
    bool overflow = false;  // never: the stack holds the deepest path (mesh_layout.h)
    geometry::answer_point(tree_.arrays(), points, i, limit_sq, out, &overflow);
  }

  MeshTree<Scalar> tree_;
  OrderBox box_;  // the mesh's box, for the points' order
};

// The report's statistics over the measured values, sorted ascending
// (common/geometry/deviation.h).
template <typename Scalar>
void summarise(const Scalar* sorted, int64_t measured, const DeviationRequest& request,
               DeviationSummary* summary, int threads) {
  if (!summary->start(measured, request)) return;
  summary->min = static_cast<double>(sorted[0]);
  summary->max = static_cast<double>(sorted[measured - 1]);
  const int64_t block = geometry::kDeviationSumBlock;
  const int64_t blocks = (measured + block - 1) / block;
  std::vector<double> sums(static_cast<size_t>(blocks)), squares(static_cast<size_t>(blocks));
#pragma omp parallel for num_threads(threads)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t count = std::min(block, measured - b * block);
    sums[b] = geometry::block_sum(sorted, b * block, count, false);
    squares[b] = geometry::block_sum(sorted, b * block, count, true);
  }
  const double count = static_cast<double>(measured);
  summary->mean = div_rn(geometry::sum_of_block_sums(sums.data(), blocks), count);
  summary->rms = sqrt_rn(div_rn(geometry::sum_of_block_sums(squares.data(), blocks), count));
  for (int j = 0; j < request.n_percentiles; ++j)
    summary->percentile_values[j] = static_cast<double>(
        sorted[geometry::percentile_position(request.percentiles[j], measured)]);
  // How many values are below x, and how many at most x.
  const auto below = [&](double x) {
    return std::lower_bound(sorted, sorted + measured, x,
                            [](Scalar v, double bound) { return static_cast<double>(v) < bound; }) -
           sorted;
  };
  const auto at_most = [&](double x) {
    return std::upper_bound(sorted, sorted + measured, x,
                            [](double bound, Scalar v) { return bound < static_cast<double>(v); }) -
           sorted;
  };
  const double t = request.tolerance;
  summary->below_tolerance = below(-t);
  summary->above_tolerance = measured - at_most(t);
  summary->within_tolerance = at_most(t) - below(-t);
  if (request.n_bins == 0) return;
  const double* edges = request.bin_edges;
  const int n_bins = request.n_bins;
  summary->below_bins = below(edges[0]);
  summary->above_bins = measured - at_most(edges[n_bins]);
  for (int b = 0; b + 1 < n_bins; ++b)
    summary->bin_counts[b] = below(edges[b + 1]) - below(edges[b]);
  summary->bin_counts[n_bins - 1] = at_most(edges[n_bins]) - below(edges[n_bins - 1]);
}

template <typename Scalar>
void OmpMesh<Scalar>::deviation(const Scalar* points, int64_t m, Scalar max_distance,
                                const DeviationRequest& request, DeviationSummary* summary,
                                Scalar* signed_distances, const MeshParams& call) const {
  using Key = FloatBits<Scalar>;
  const int threads = team_size(call.threads);
  const volatile int* cancel = cancel_flag();
  // The values in point order (the caller's array, or ours), then their
  // ordered keys, sorted, then the sorted values (in our array once the keys
  // are taken, or in one more).
  std::vector<Scalar> own, sorted_values;
  resize_polling(signed_distances ? sorted_values : own, static_cast<size_t>(m), cancel);
  Scalar* values = signed_distances ? signed_distances : own.data();
  Scalar* sorted = signed_distances ? sorted_values.data() : own.data();
  std::vector<Key> keys, key_buffer;
  resize_polling(keys, static_cast<size_t>(m), cancel);
  resize_polling(key_buffer, static_cast<size_t>(m), cancel);
  MeshResults<Scalar> out;
  out.signed_distances = values;
  answer(points, m, squared_limit(max_distance), out, call);
  try {
    // Beyond: +infinity, sorted last.
#pragma omp parallel for num_threads(threads)
    for (int64_t i = 0; i < m; ++i) keys[i] = ordered_key(values[i]);
    radix_sort<Key, uint8_t>(keys.data(), nullptr, key_buffer.data(), nullptr, m,
                             static_cast<int>(8 * sizeof(Key)), threads, cancel);
#pragma omp parallel for num_threads(threads)
    for (int64_t i = 0; i < m; ++i) sorted[i] = scalar_from_ordered_key<Scalar>(keys[i]);
    const int64_t measured =
        std::lower_bound(sorted, sorted + m, std::numeric_limits<Scalar>::infinity()) - sorted;
    summary->beyond = m - measured;
    summarise(sorted, measured, request, summary, threads);
  } catch (...) {  // cancelled while sorting: the values say "beyond", as answer() leaves them
    if (signed_distances)
      std::fill(signed_distances, signed_distances + m, std::numeric_limits<Scalar>::infinity());
    throw;
  }
}

}  // namespace

template <typename Scalar>
std::unique_ptr<MeshEngine<Scalar>> build_mesh(const MeshGeometry<Scalar>& mesh,
                                               const MeshParams& params) {
  return std::make_unique<OmpMesh<Scalar>>(mesh, params);
}

KNN_INSTANTIATE_BUILDER(KNN_MESH_BUILDER);

}  // namespace omp
}  // namespace knn
