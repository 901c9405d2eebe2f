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

}  // namespace

template <typename Scalar>
void build_bucket_tree(BucketTree<Scalar>& t, cudaStream_t stream) {
  using Key = typename OrderedKey<Scalar>::type;
  const int64_t n = t.n;
  t.boxes.allocate(bucket_tree_box_floats(t.levels, t.dim));
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
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (kd-tree build)");
    return;
  }
  const SplitBuildPlan plan =
      bucket_tree_build_plan(n, t.dim, t.levels, sizeof(Key),
                             split_build_shared_budget(device_limits().shared_bytes_optin));
  DeviceArena arena(split_build_scratch_bytes(n, t.dim, sizeof(Key), plan));
  median_split::build(splits, t.input.get(), n, t.dim, plan, arena, stream);
}

template void build_bucket_tree<float>(BucketTree<float>&, cudaStream_t);
template void build_bucket_tree<double>(BucketTree<double>&, cudaStream_t);

}  // namespace cuda
}  // namespace knn
