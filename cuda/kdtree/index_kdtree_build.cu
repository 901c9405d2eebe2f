// GPU build of the bucket kd-tree (index_kdtree.cuh), all on the device with
// no host round trip per level.
//
// Each dimension's order (ids sorted by (coordinate, index): a stable CUB
// radix sort of order-preserving keys over ids in index order; 32-bit keys
// for float, 64-bit for double: OrderedKey) is kept in
// node order: at every level, the positions of node q's segment in every
// dimension's order hold node q's points, sorted by that dimension. So:
//   - a node's tight box is read off the first and last entry of its segment
//     in every order (no reduction), and its widest dimension is the largest
//     last - first;
//   - the median split needs no search: in the split dimension's order the
//     first half of the segment goes left;
//   - one flag per point (left or right) and one scan over all orders give
//     every entry its slot in the child segments (a stable partition), so
//     every order stays sorted within the new, smaller segments.
// After the last level any order lists the points leaf by leaf: the bucket
// order.
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <climits>

#include "../core/knn_lists.cuh"
#include "../core/radix_sort_temp.cuh"
#include "index_kdtree.cuh"
#include "index_kdtree_memory.h"

namespace knn {
namespace cuda {
namespace {

constexpr int kBlock = 256;

template <typename Scalar>
__global__ void make_dimension_keys(const Scalar* points, int64_t n, int dim, int d,
                                    typename OrderedKey<Scalar>::type* keys, int32_t* ids) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (j >= n) return;
  keys[j] = OrderedKey<Scalar>::of(points[j * dim + d]);
  ids[j] = static_cast<int32_t>(j);
}

// One thread per node of `level`: its box from the ends of its segment in
// every order, and (when split_dim is given) the dimension of widest spread,
// ties to the smaller dimension. Empty segments get the empty box.
template <typename Scalar>
__global__ void node_boxes_and_splits(const Scalar* points, int64_t n, int dim, int level,
                                      const int32_t* order, Scalar* boxes, int32_t* split_dim) {
  const int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (q >= (int64_t{1} << level)) return;
  const int64_t start = segment_start(n, level, q);
  const int64_t end = segment_start(n, level, q + 1);
  Scalar* lo = boxes + (first_node_of_level(level) + q) * 2 * dim;
  Scalar* hi = lo + dim;
  Scalar widest = -infinity<Scalar>();
  int widest_dim = 0;
  for (int d = 0; d < dim; ++d) {
    if (start == end) {
      lo[d] = infinity<Scalar>(), hi[d] = -infinity<Scalar>();
      continue;
    }
    const Scalar first = points[int64_t{order[d * n + start]} * dim + d];
    const Scalar last = points[int64_t{order[d * n + end - 1]} * dim + d];
    lo[d] = first, hi[d] = last;
    const Scalar spread = sub_rn(last, first);
    if (spread > widest) widest = spread, widest_dim = d;
  }
  if (split_dim) split_dim[q] = widest_dim;
}

// left[id] = whether point id goes to its node's left child: the first half
// of the node's segment in the order of its split dimension.
__global__ void mark_sides(int64_t n, int level, const int32_t* order, const int32_t* split_dim,
                           uint8_t* left) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (j >= n) return;
  const int64_t q = segment_of(n, level, j);
  const int32_t id = order[split_dim[q] * n + j];
  left[id] = j < segment_start(n, level + 1, 2 * q + 1);
}

// The flag of the entry at position g of a run of concatenated orders.
struct SideOf {
  const uint8_t* left;
  const int32_t* order;
  __host__ __device__ uint32_t operator()(int64_t g) const { return left[order[g]]; }
};

// Stable partition of every node's segment, in `dims` concatenated orders of
// n entries: lefts to the left child's segment, rights to the right child's,
// each in their current order. `left_before` is the exclusive scan of the
// flags over the run; differences within one segment are exact in uint32
// arithmetic because a segment holds fewer than 2^32 entries.
__global__ void partition_orders(int64_t n, int dims, int level, const int32_t* order,
                                 const uint32_t* left_before, const uint8_t* left, int32_t* out) {
  const int64_t g = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (g >= n * dims) return;
  const int64_t base = g / n * n;
  const int64_t j = g - base;
  const int64_t q = segment_of(n, level, j);
  const int64_t start = segment_start(n, level, q);
  const int32_t id = order[g];
  const int64_t lefts = left_before[g] - left_before[base + start];
  const int64_t dst =
      left[id] ? start + lefts : segment_start(n, level + 1, 2 * q + 1) + (j - start - lefts);
  out[base + dst] = id;
}

template <typename Scalar>
__global__ void gather_buckets(const Scalar* input, int64_t n, int dim, const int32_t* order,
                               Scalar* points, int32_t* ids) {
  const int64_t g = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (g >= n * dim) return;
  const int64_t j = g / dim;
  const int c = static_cast<int>(g - j * dim);
  const int32_t id = order[j];
  points[g] = input[int64_t{id} * dim + c];
  if (c == 0) ids[j] = id;
}

template <typename Scalar>
void launch_node_boxes(const BucketTree<Scalar>& t, int level, const int32_t* order, Scalar* boxes,
                       int32_t* split_dim, cudaStream_t stream) {
  const int64_t nodes = int64_t{1} << level;
  node_boxes_and_splits<Scalar><<<grid_for(nodes, kBlock), kBlock, 0, stream>>>(
      t.input.get(), t.n, t.dim, level, order, boxes, split_dim);
  check_launch("node_boxes_and_splits");
}

using Sides = thrust::transform_iterator<SideOf, thrust::counting_iterator<int64_t>>;

Sides sides(const uint8_t* left, const int32_t* order) {
  return Sides(thrust::counting_iterator<int64_t>(0), SideOf{left, order});
}

size_t scan_temp_bytes(int64_t items) {
  size_t bytes = 0;
  check(cub::DeviceScan::ExclusiveSum(nullptr, bytes, sides(nullptr, nullptr),
                                      static_cast<uint32_t*>(nullptr), static_cast<int>(items)),
        "cub::DeviceScan::ExclusiveSum (size)");
  return checked_cub_temp(bytes, cub_temp_bytes(items));
}

// The build's temporaries, all in one arena: two copies of every dimension's
// order, then the sort phase (keys twice, ids, CUB) and, in the same bytes
// after it, the split phase (split dims, side flags, the scan and its CUB
// temporaries). Each phase fits within the memory model's figure for it
// (kdtree_build_bytes counts every buffer in whole pages).
template <typename Scalar>
struct BuildScratch {
  using Key = typename OrderedKey<Scalar>::type;
  int64_t n;
  int dim, levels;
  int scan_dims;  // dimensions whose orders one scan covers
  int64_t scan_items;
  size_t sort_temp, scan_temp;

  BuildScratch(int64_t n_, int dim_, int levels_)
      : n(n_),
        dim(dim_),
        levels(levels_),
        scan_dims(bucket_tree_scan_dims(n_, dim_)),
        scan_items(n_ * scan_dims),
        sort_temp(checked_cub_temp(pair_sort_temp_bytes<Key>(n_), cub_temp_bytes(n_))),
        scan_temp(levels_ > 0 ? scan_temp_bytes(scan_items) : 0) {}

  size_t orders_bytes() const { return 2 * DeviceArena::piece(sizeof(int32_t) * n * dim); }
  size_t sort_phase_bytes() const {
    return 2 * DeviceArena::piece(sizeof(Key) * n) + DeviceArena::piece(sizeof(int32_t) * n) +
           DeviceArena::piece(sort_temp);
  }
  size_t split_phase_bytes() const {
    if (levels == 0) return 0;
    return DeviceArena::piece(sizeof(int32_t) << (levels - 1)) + DeviceArena::piece(n) +
           DeviceArena::piece(sizeof(uint32_t) * scan_items) + DeviceArena::piece(scan_temp);
  }
  size_t bytes() const {
    return orders_bytes() + std::max(sort_phase_bytes(), split_phase_bytes());
  }
};

// Every dimension's order of the points, stably by (coordinate, index). The
// double-buffer form of the sort keeps CUB's temporaries to its histograms
// (the other form would double the keys and ids inside them); the order's own
// slot is the ids' second buffer.
template <typename Scalar>
void sort_dimensions(const BucketTree<Scalar>& t, const BuildScratch<Scalar>& sizes,
                     int32_t* orders, DeviceArena& arena, cudaStream_t stream) {
  using Key = typename BuildScratch<Scalar>::Key;
  const int64_t n = t.n;
  Key* keys = arena.take<Key>(n);
  Key* spare_keys = arena.take<Key>(n);
  int32_t* ids = arena.take<int32_t>(n);
  unsigned char* temp = arena.take<unsigned char>(sizes.sort_temp);
  for (int d = 0; d < t.dim; ++d) {
    int32_t* order = orders + d * n;
    make_dimension_keys<Scalar>
        <<<grid_for(n, kBlock), kBlock, 0, stream>>>(t.input.get(), n, t.dim, d, keys, ids);
    check_launch("make_dimension_keys");
    cub::DoubleBuffer<Key> k(keys, spare_keys);
    cub::DoubleBuffer<int32_t> v(ids, order);
    size_t temp_bytes = sizes.sort_temp;
    check(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, k, v, n, 0,
                                          static_cast<int>(8 * sizeof(Key)), stream),
          "cub::DeviceRadixSort::SortPairs");
    if (v.Current() != order)
      check(cudaMemcpyAsync(order, v.Current(), sizeof(int32_t) * n, cudaMemcpyDeviceToDevice,
                            stream),
            "cudaMemcpyAsync (sorted order)");
  }
}

}  // namespace

template <typename Scalar>
void build_bucket_tree(BucketTree<Scalar>& t, cudaStream_t stream) {
  const int64_t n = t.n;
  const int dim = t.dim;
  const int levels = t.levels;
  t.boxes.allocate(bucket_tree_box_floats(levels, dim));
  if (n == 0) {  // one empty leaf
    launch_node_boxes(t, 0, nullptr, t.boxes.get(), nullptr, stream);
    return;
  }
  t.points.allocate(static_cast<size_t>(n) * dim);
  t.ids.allocate(static_cast<size_t>(n));

  const BuildScratch<Scalar> sizes(n, dim, levels);
  DeviceArena arena(sizes.bytes());
  int32_t* orders[2] = {arena.take<int32_t>(static_cast<size_t>(n) * dim),
                        arena.take<int32_t>(static_cast<size_t>(n) * dim)};
  const size_t phases = arena.mark();
  sort_dimensions(t, sizes, orders[0], arena, stream);
  arena.rewind(phases);  // the split phase reuses the sort phase's bytes

  int current = 0;
  if (levels > 0) {
    int32_t* split_dim = arena.take<int32_t>(size_t{1} << (levels - 1));
    uint8_t* left = arena.take<uint8_t>(static_cast<size_t>(n));
    uint32_t* left_before = arena.take<uint32_t>(static_cast<size_t>(sizes.scan_items));
    unsigned char* temp = arena.take<unsigned char>(sizes.scan_temp);
    for (int level = 0; level < levels; ++level) {
      const int32_t* order = orders[current];
      int32_t* next = orders[1 - current];
      launch_node_boxes(t, level, order, t.boxes.get(), split_dim, stream);
      mark_sides<<<grid_for(n, kBlock), kBlock, 0, stream>>>(n, level, order, split_dim, left);
      check_launch("mark_sides");
      for (int d0 = 0; d0 < dim; d0 += sizes.scan_dims) {
        const int dims = std::min(sizes.scan_dims, dim - d0);
        const int64_t items = n * dims;
        const int64_t offset = n * d0;
        size_t temp_bytes = sizes.scan_temp;
        check(cub::DeviceScan::ExclusiveSum(temp, temp_bytes, sides(left, order + offset),
                                            left_before, static_cast<int>(items), stream),
              "cub::DeviceScan::ExclusiveSum");
        partition_orders<<<grid_for(items, kBlock), kBlock, 0, stream>>>(
            n, dims, level, order + offset, left_before, left, next + offset);
        check_launch("partition_orders");
      }
      current = 1 - current;
    }
  }
  launch_node_boxes(t, levels, orders[current], t.boxes.get(), nullptr, stream);
  gather_buckets<Scalar><<<grid_for(n * dim, kBlock), kBlock, 0, stream>>>(
      t.input.get(), n, dim, orders[current], t.points.get(), t.ids.get());
  check_launch("gather_buckets");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (kd-tree build)");
}

template void build_bucket_tree<float>(BucketTree<float>&, cudaStream_t);
template void build_bucket_tree<double>(BucketTree<double>&, cudaStream_t);

}  // namespace cuda
}  // namespace knn
