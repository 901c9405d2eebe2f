// The CUDA engine's alignment step (engine/mesh_engine.h align_step; the
// terms and the block rule: common/geometry/align_terms.h), on the device:
// the points (in place, or staged chunk by chunk) are moved, searched by the
// engine's closest() on device arrays (triangle ids and squared distances
// for every point kept on the device), and summed a thread per block of
// kAlignSumBlock points; only the blocks' sums come back, added in order on
// the host as the OpenMP engine adds its blocks. A kept fraction below 1
// ranks its threshold by a sort on the device, then sums in a second pass
// over the chunks. The moving, the ranking and the block sums are the point
// cloud aligner's too (../core/align_sums.cuh).
#include <algorithm>

#include "../../common/geometry/align_terms.h"
#include "../../engine/cancel.h"
#include "../core/align_sums.cuh"
#include "../core/pinned_pool.h"
#include "../cuda_engine.h"
#include "cuda_mesh.cuh"

namespace knn {
namespace cuda {
namespace {

using geometry::AlignSums;
using geometry::Vec3;

// A triangle's corners by its id, through the leaf that holds it.
template <typename Scalar>
struct IdCorners {
  const LeafTriangle<Scalar>* leaves;
  const int32_t* leaf_of_id;
  KNN_HD void operator()(int32_t id, Vec3<Scalar>& a, Vec3<Scalar>& b, Vec3<Scalar>& c) const {
    const LeafTriangle<Scalar>& t = leaves[leaf_of_id[id]];
    a = {t.corner[0][0], t.corner[0][1], t.corner[0][2]};
    b = {t.corner[1][0], t.corner[1][1], t.corner[1][2]};
    c = {t.corner[2][0], t.corner[2][1], t.corner[2][2]};
  }
};

template <typename Scalar>
__global__ void index_leaves(const LeafTriangle<Scalar>* leaves, int64_t n, int32_t* leaf_of_id) {
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < n;
       k += int64_t{gridDim.x} * blockDim.x)
    leaf_of_id[leaves[k].id] = static_cast<int32_t>(k);
}

// The sums of a block of a chunk's points against their closest triangles.
template <typename Scalar>
struct MeshBlockSums {
  const Scalar* points;
  const int32_t* ids;
  const Scalar* sq;
  double threshold;
  geometry::AlignFrame frame;
  IdCorners<Scalar> corners;
  KNN_HD AlignSums operator()(int64_t first, int64_t count) const {
    return geometry::align_block_sums(points, ids, sq, first, count, threshold, frame, corners);
  }
};

}  // namespace

template <typename Scalar>
geometry::AlignSums CudaMesh<Scalar>::align_step(const Scalar* points, int64_t m,
                                                 const AlignStep& step,
                                                 const MeshParams& call) const {
  if (m <= 0) return geometry::no_align_sums();
  DeviceScope scope(device_);
  Stream stream;
  const cudaStream_t s = stream.get();
  const size_t um = static_cast<size_t>(m);
  const bool trim = step.kept_fraction < 1.0;
  const bool staged = !device_may_use_in_place(points, device_);
  const int64_t blocks = align_sum_blocks(m);
  // For the whole call: every point's id and squared distance, every
  // triangle's leaf, every block's sums, and for a trim the ranking's sort.
  size_t fixed = aligned(um * sizeof(int32_t)) + aligned(um * sizeof(Scalar)) +
                 aligned(static_cast<size_t>(n_) * sizeof(int32_t)) +
                 aligned(static_cast<size_t>(blocks) * sizeof(AlignSums));
  if (trim) fixed = saturating_add(fixed, TrimRanking<Scalar>::bytes(m));
  // Per point of a chunk: the moved point, the staged one, and what the
  // search's own chunk takes.
  const size_t per_point = 3 * sizeof(Scalar) * (staged ? 2 : 1) + kMeshChunkOrderBytesPerPoint;
  const DeviceBudget budget = device_budget(call.device_memory_limit);
  int64_t chunk = std::min(
      m, queries_within_budget(budget, per_point,
                               saturating_add(fixed, kMeshChunkFixedBytes + 2 * kAllocAlignment),
                               kAlignChunkPoints));
  // Whole sum blocks per chunk, so that the chunks' blocks are the call's:
  // each chunk's points are summed while staged, block by block.
  if (chunk < m)
    chunk = std::max(geometry::kAlignSumBlock,
                     chunk / geometry::kAlignSumBlock * geometry::kAlignSumBlock);
  const size_t uchunk = static_cast<size_t>(chunk);
  // The search's share: what the budget leaves beside ours.
  MeshParams search = call;
  const size_t ours =
      saturating_add(fixed, aligned(uchunk * 3 * sizeof(Scalar)) * (staged ? 2 : 1));
  search.device_memory_limit = budget.bytes() > ours ? budget.bytes() - ours : 1;

  DeviceBuffer<int32_t> ids(um), leaf_of_id(static_cast<size_t>(n_));
  DeviceBuffer<Scalar> sq(um), moved(uchunk * 3), staging(staged ? uchunk * 3 : 0);
  DeviceBuffer<AlignSums> sums(static_cast<size_t>(blocks));
  index_leaves<<<grid_stride_blocks(index_leaves<Scalar>, kBlock, n_), kBlock, 0, s>>>(
      leaves_.get(), n_, leaf_of_id.get());
  check_launch("mesh align: index_leaves");
  const IdCorners<Scalar> corners{leaves_.get(), leaf_of_id.get()};
  const auto chunk_points = [&](int64_t first, int64_t count) {
    if (!staged) return points + 3 * first;
    upload_staged(staging.get(), points + 3 * first, 3 * sizeof(Scalar) * count, s);
    return static_cast<const Scalar*>(staging.get());
  };
  const auto sum_chunk = [&](const Scalar* x, int64_t first, int64_t count, double threshold) {
    sum_blocks(count,
               MeshBlockSums<Scalar>{x, ids.get() + first, sq.get() + first, threshold, step.frame,
                                     corners},
               sums.get() + first / geometry::kAlignSumBlock, s);
  };

  const Scalar limit = geometry::search_limit<Scalar>(step.max_sq);
  MeshResults<Scalar> found;
  for (int64_t first = 0; first < m; first += chunk) {
    throw_if_cancelled(cancel_flag());
    const int64_t count = std::min(chunk, m - first);
    const Scalar* x = chunk_points(first, count);
    move_points(x, count, step.frame, moved.get(), s);
    check(cudaStreamSynchronize(s), "mesh align: cudaStreamSynchronize");
    found.triangle_ids = ids.get() + first;
    found.sq_distances = sq.get() + first;
    closest_within_sq(moved.get(), count, limit, found, search);
    if (!trim) sum_chunk(x, first, count, step.max_sq);
  }
  if (trim) {
    const double threshold =
        TrimRanking<Scalar>(m).threshold(ids.get(), sq.get(), step.max_sq, step.kept_fraction, s);
    for (int64_t first = 0; first < m; first += chunk) {
      throw_if_cancelled(cancel_flag());
      const int64_t count = std::min(chunk, m - first);
      sum_chunk(chunk_points(first, count), first, count, threshold);
    }
  }
  return blocks_in_order(sums.get(), blocks, s);
}

template geometry::AlignSums CudaMesh<float>::align_step(const float*, int64_t, const AlignStep&,
                                                         const MeshParams&) const;
template geometry::AlignSums CudaMesh<double>::align_step(const double*, int64_t, const AlignStep&,
                                                          const MeshParams&) const;

}  // namespace cuda
}  // namespace knn
