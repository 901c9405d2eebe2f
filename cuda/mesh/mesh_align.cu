// The CUDA engine's alignment step (engine/mesh_engine.h align_step; the
// terms and the block rule: common/geometry/align_terms.h), on the device:
// the points (in place, or staged chunk by chunk) are moved by a kernel,
// searched by the engine's closest() on device arrays (triangle ids and
// squared distances for every point kept on the device), and summed a
// thread per block of kAlignSumBlock points; only the blocks' sums come
// back, added in order on the host as the OpenMP engine adds its blocks.
// A kept fraction below 1 sorts the squared distances on the device (CUB)
// for its threshold, then sums in a second pass over the chunks.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <vector>

#include "../../common/geometry/align_terms.h"
#include "../../engine/cancel.h"
#include "../core/pinned_pool.h"
#include "../core/radix_sort_temp.cuh"
#include "../cuda_engine.h"
#include "cuda_mesh.cuh"

namespace knn {
namespace cuda {
namespace {

constexpr int64_t kAlignChunkPoints = int64_t{1} << 22;  // a multiple of kAlignSumBlock

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

template <typename Scalar>
__global__ void move_points(const Scalar* points, int64_t count, geometry::AlignFrame frame,
                            Scalar* moved) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const Vec3<Scalar> q = geometry::rounded3<Scalar>(geometry::move_point(frame, points + 3 * i));
    moved[3 * i] = q.x;
    moved[3 * i + 1] = q.y;
    moved[3 * i + 2] = q.z;
  }
}

// sums[b]: block b of the chunk's `count` points (arrays from the chunk's
// first point).
template <typename Scalar>
__global__ void block_terms(const Scalar* points, const int32_t* ids, const Scalar* sq,
                            int64_t count, double threshold, geometry::AlignFrame frame,
                            IdCorners<Scalar> corners, AlignSums* sums) {
  const int64_t blocks = (count + geometry::kAlignSumBlock - 1) / geometry::kAlignSumBlock;
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b < blocks;
       b += int64_t{gridDim.x} * blockDim.x) {
    const int64_t first = b * geometry::kAlignSumBlock;
    sums[b] = geometry::align_block_sums(points, ids, sq, first,
                                         min(geometry::kAlignSumBlock, count - first), threshold,
                                         frame, corners);
  }
}

template <typename Scalar>
using Key = typename OrderedKey<Scalar>::type;

// Squared distances (>= 0) as keys: their bits order as they do. A point
// without a triangle gets the greatest key (NaN's bits), which no threshold
// counts, as the OpenMP engine counts only points with a triangle.
template <typename Scalar>
__global__ void keys_of(const Scalar* sq, const int32_t* ids, int64_t m, Key<Scalar>* keys) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < m;
       i += int64_t{gridDim.x} * blockDim.x)
    keys[i] = ids[i] < 0 ? ~Key<Scalar>{0} : OrderedKey<Scalar>::of(sq[i]);
}

// How many sorted values are <= max_sq (compared in double).
template <typename Scalar>
__global__ void count_at_most(const Key<Scalar>* sorted, int64_t m, double max_sq, int64_t* count) {
  int64_t lo = 0, hi = m;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (static_cast<double>(scalar_from_ordered_key<Scalar>(sorted[mid])) <= max_sq)
      lo = mid + 1;
    else
      hi = mid;
  }
  *count = lo;
}

}  // namespace

template <typename Scalar>
geometry::AlignSums CudaMesh<Scalar>::align_step(const Scalar* points, int64_t m,
                                                 const AlignStep& step,
                                                 const MeshParams& call) const {
  AlignSums total = geometry::no_align_sums();
  if (m <= 0) return total;
  DeviceScope scope(device_);
  Stream stream;
  const cudaStream_t s = stream.get();
  const size_t um = static_cast<size_t>(m);
  const bool trim = step.kept_fraction < 1.0;
  const bool staged = !device_may_use_in_place(points, device_);
  const int64_t blocks = (m + geometry::kAlignSumBlock - 1) / geometry::kAlignSumBlock;
  // For the whole call: every point's id and squared distance, every
  // triangle's leaf, every block's sums, and for a trim the sort's keys
  // twice and its temporaries.
  size_t fixed = aligned(um * sizeof(int32_t)) + aligned(um * sizeof(Scalar)) +
                 aligned(static_cast<size_t>(n_) * sizeof(int32_t)) +
                 aligned(static_cast<size_t>(blocks) * sizeof(AlignSums)) +
                 aligned(sizeof(int64_t));
  if (trim)
    fixed = saturating_add(fixed, 2 * aligned(um * sizeof(Key<Scalar>)) + cub_temp_bytes(m));
  // Per point of a chunk: the moved point, the staged one, and what the
  // search's own chunk takes.
  const size_t per_point = 3 * sizeof(Scalar) * (staged ? 2 : 1) + kMeshChunkOrderBytesPerPoint;
  const DeviceBudget budget = device_budget(call.device_memory_limit);
  int64_t chunk = std::min(
      m, queries_within_budget(budget, per_point,
                               saturating_add(fixed, kMeshChunkFixedBytes + 2 * kAllocAlignment),
                               kAlignChunkPoints));
  // Whole sum blocks per chunk, so that the chunks' blocks are the call's.
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
    const int64_t chunk_blocks = (count + geometry::kAlignSumBlock - 1) / geometry::kAlignSumBlock;
    block_terms<<<grid_stride_blocks(block_terms<Scalar>, kBlock, chunk_blocks), kBlock, 0, s>>>(
        x, ids.get() + first, sq.get() + first, count, threshold, step.frame, corners,
        sums.get() + first / geometry::kAlignSumBlock);
    check_launch("mesh align: block_terms");
  };

  const Scalar limit = geometry::search_limit<Scalar>(step.max_sq);
  MeshResults<Scalar> found;
  for (int64_t first = 0; first < m; first += chunk) {
    throw_if_cancelled(cancel_flag());
    const int64_t count = std::min(chunk, m - first);
    const Scalar* x = chunk_points(first, count);
    move_points<<<grid_stride_blocks(move_points<Scalar>, kBlock, count), kBlock, 0, s>>>(
        x, count, step.frame, moved.get());
    check_launch("mesh align: move_points");
    check(cudaStreamSynchronize(s), "mesh align: cudaStreamSynchronize");
    found.triangle_ids = ids.get() + first;
    found.sq_distances = sq.get() + first;
    closest_within_sq(moved.get(), count, limit, found, search);
    if (!trim) sum_chunk(x, first, count, step.max_sq);
  }
  if (trim) {
    DeviceBuffer<Key<Scalar>> keys(um), keys_alt(um);
    DeviceBuffer<int64_t> measured(1);
    keys_of<<<grid_stride_blocks(keys_of<Scalar>, kBlock, m), kBlock, 0, s>>>(sq.get(), ids.get(),
                                                                              m, keys.get());
    check_launch("mesh align: keys_of");
    cub::DoubleBuffer<Key<Scalar>> sorting(keys.get(), keys_alt.get());
    size_t temp_bytes = 0;
    const int bits = 8 * static_cast<int>(sizeof(Scalar));
    check(cub::DeviceRadixSort::SortKeys(nullptr, temp_bytes, sorting, m, 0, bits, s),
          "mesh align: radix sort (size)");
    DeviceBuffer<unsigned char> temp(checked_cub_temp(temp_bytes, cub_temp_bytes(m)));
    check(cub::DeviceRadixSort::SortKeys(temp.get(), temp_bytes, sorting, m, 0, bits, s),
          "mesh align: radix sort");
    count_at_most<Scalar><<<1, 1, 0, s>>>(sorting.Current(), m, step.max_sq, measured.get());
    check_launch("mesh align: count_at_most");
    int64_t within = 0;
    check(cudaMemcpyAsync(&within, measured.get(), sizeof within, cudaMemcpyDeviceToHost, s),
          "mesh align: cudaMemcpyAsync");
    check(cudaStreamSynchronize(s), "mesh align: cudaStreamSynchronize");
    double threshold = step.max_sq;
    if (within > 0) {
      Key<Scalar> key{};
      check(cudaMemcpyAsync(&key,
                            sorting.Current() + geometry::trim_position(step.kept_fraction, within),
                            sizeof key, cudaMemcpyDeviceToHost, s),
            "mesh align: cudaMemcpyAsync");
      check(cudaStreamSynchronize(s), "mesh align: cudaStreamSynchronize");
      threshold = static_cast<double>(scalar_from_ordered_key<Scalar>(key));
    }
    for (int64_t first = 0; first < m; first += chunk) {
      throw_if_cancelled(cancel_flag());
      const int64_t count = std::min(chunk, m - first);
      sum_chunk(chunk_points(first, count), first, count, threshold);
    }
  }
  std::vector<AlignSums> host(static_cast<size_t>(blocks));
  check(cudaMemcpyAsync(host.data(), sums.get(), host.size() * sizeof(AlignSums),
                        cudaMemcpyDeviceToHost, s),
        "mesh align: cudaMemcpyAsync");
  check(cudaStreamSynchronize(s), "mesh align: cudaStreamSynchronize");
  for (const AlignSums& b : host) geometry::add_block(total, b);
  return total;
}

template geometry::AlignSums CudaMesh<float>::align_step(const float*, int64_t, const AlignStep&,
                                                         const MeshParams&) const;
template geometry::AlignSums CudaMesh<double>::align_step(const double*, int64_t, const AlignStep&,
                                                          const MeshParams&) const;

}  // namespace cuda
}  // namespace knn
