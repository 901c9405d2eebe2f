// GPU build of the bucket kd-tree (index_kdtree.cuh) on the median-split
// machinery (median_split.cuh), all on the device with no host round trip
// per level.
//
// The tree. bucket_tree_shape.h fixes which positions every node holds; a
// node's points are split at the median of its widest side (the largest
// spread of its tight box, ties to the smaller dimension): the first half of
// them in (coordinate, index) order goes left, and every point ends in a
// leaf. Every node, inner or leaf, gets its tight box; the bucket order is
// the leaves' points, each leaf's in index order.
#include "../core/float4_point.cuh"
#include "../core/knn_lists.cuh"
#include "index_kdtree.cuh"
#include "index_kdtree_memory.h"
#include "median_split.cuh"

namespace knn {
namespace cuda {
namespace {

// The bucket tree for median_split::build.
template <typename Scalar>
struct BucketSplits {
  static constexpr bool kNodePoints = false;  // every point goes on to a child
  static constexpr bool kBoxes = true;        // node boxes; the widest side splits
  static constexpr bool kBucketOrder = true;  // the leaves' points are written out
  using Key = typename OrderedKey<Scalar>::type;

  int64_t n;
  int dim, levels;
  const Scalar* input;  // rows in the caller's order
  Scalar* points;       // rows in bucket order, or null when packed
  int32_t* ids;
  Scalar* packed;  // packs_bucket_points(dim): points with their ids in bucket order, else null
  Scalar* boxes;

  __host__ __device__ int64_t start(int level, int64_t q) const {
    return segment_start(n, level, q);
  }
  __host__ __device__ int64_t left_size(int level, int64_t q) const {
    return segment_start(n, level + 1, 2 * q + 1) - start(level, q);
  }
  __host__ __device__ int64_t most_points(int level) const {
    return bucket_tree_most_points(n, level);
  }
  __host__ __device__ bool splits(int level) const { return level < levels; }
  __host__ __device__ int last_level() const { return levels; }
  __device__ void write_box(int level, int64_t q, int d, bool empty, Key low, Key high) const {
    Scalar* lo = boxes + (first_node_of_level(level) + q) * 2 * dim;
    lo[d] = empty ? infinity<Scalar>() : scalar_from_ordered_key<Scalar>(low);
    lo[dim + d] = empty ? -infinity<Scalar>() : scalar_from_ordered_key<Scalar>(high);
  }
  // The caller's row, bit for bit (a key holds -0.0 as +0.0).
  __device__ void place_bucket_point(int64_t j, int32_t id) const {
    const Scalar* row = input + int64_t{id} * dim;
    if (packed != nullptr) {
      using Point = DevicePoint3<Scalar>;
      reinterpret_cast<typename Point::Stored*>(packed)[j] =
          Point::make(row[0], row[1], row[2], id);
      return;
    }
    for (int d = 0; d < dim; ++d) points[j * dim + d] = row[d];
    ids[j] = id;
  }
};

// The least id of each leaf's points (kNoIndex for an empty leaf).
template <typename Scalar>
__global__ void leaf_min_ids(BucketTreeView<Scalar> t, int32_t* min_ids) {
  const int64_t leaf = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (leaf >= (int64_t{1} << t.levels)) return;
  int32_t least = kNoIndex;
  for (int64_t j = segment_start(t.n, t.levels, leaf); j < segment_start(t.n, t.levels, leaf + 1);
       ++j) {
    const int32_t id =
        t.packed != nullptr
            ? DevicePoint3<Scalar>::id(
                  reinterpret_cast<const typename DevicePoint3<Scalar>::Stored*>(t.packed)[j])
            : t.ids[j];
    least = min(least, id);
  }
  min_ids[first_node_of_level(t.levels) + leaf] = least;
}

// The least ids of one level's nodes from their children's.
__global__ void inner_min_ids(int level, int32_t* min_ids) {
  const int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (q >= (int64_t{1} << level)) return;
  const int64_t node = first_node_of_level(level) + q;
  min_ids[node] = min(min_ids[2 * node + 1], min_ids[2 * node + 2]);
}

template <typename Scalar>
void fill_min_ids(const BucketTree<Scalar>& t, int32_t* min_ids, cudaStream_t stream) {
  const int64_t leaves = int64_t{1} << t.levels;
  leaf_min_ids<Scalar><<<grid_for(leaves, kBlock), kBlock, 0, stream>>>(t.view(), min_ids);
  check_launch("leaf_min_ids");
  for (int level = t.levels - 1; level >= 0; --level) {
    inner_min_ids<<<grid_for(int64_t{1} << level, kBlock), kBlock, 0, stream>>>(level, min_ids);
    check_launch("inner_min_ids");
  }
}

}  // namespace

template <typename Scalar>
void build_bucket_tree(BucketTree<Scalar>& t, cudaStream_t stream) {
  using Key = typename OrderedKey<Scalar>::type;
  const int64_t n = t.n;
  t.boxes.allocate(bucket_tree_box_floats(t.levels, t.dim));
  t.min_ids.allocate(bucket_tree_nodes(t.levels));
  if (n > 0 && packs_bucket_points(t.dim)) {
    t.packed.allocate(static_cast<size_t>(n) * kPackedPointScalars);
  } else if (n > 0) {
    t.points.allocate(static_cast<size_t>(n) * t.dim);
    t.ids.allocate(static_cast<size_t>(n));
  }
  const BucketSplits<Scalar> splits{
      n,           t.dim,          t.levels,     t.input.get(), t.points.get(),
      t.ids.get(), t.packed.get(), t.boxes.get()};
  if (n == 0) {  // one empty leaf: its empty box
    median_split::choose_splits<Scalar>
        <<<1, 1, 0, stream>>>(splits, t.dim, 0, nullptr, nullptr, nullptr, nullptr);
    check_launch("choose_splits");
    fill_min_ids(t, t.min_ids.get(), stream);
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (kd-tree build)");
    return;
  }
  const SplitBuildPlan plan =
      bucket_tree_build_plan(n, t.dim, t.levels, sizeof(Key),
                             split_build_shared_budget(device_limits().shared_bytes_optin));
  DeviceArena arena(split_build_scratch_bytes(n, t.dim, sizeof(Key), plan));
  median_split::build(splits, t.input.get(), n, t.dim, plan, arena, stream);
  fill_min_ids(t, t.min_ids.get(), stream);
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (kd-tree least ids)");
}

template void build_bucket_tree<float>(BucketTree<float>&, cudaStream_t);
template void build_bucket_tree<double>(BucketTree<double>&, cudaStream_t);

}  // namespace cuda
}  // namespace knn
