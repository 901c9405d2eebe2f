// GPU quadtree build (see quadtree.cuh for the layout).
//
//   1. bounding box of the points: one CUB reduction;
//   2. Morton keys of the quantised points (common/quadtree_layout.h) and a
//      stable CUB radix sort of (key, index) over exactly the key bits;
//   3. nodes level by level: every node of a level that must split finds its
//      children's ranges by binary search in the sorted keys (the quadrant is
//      monotone within a node), one CUB scan places the children of the whole
//      level; the host reads back one number per level, never per point;
//   4. boxes: the leaves partition the sorted points into runs; one scan names
//      each point's leaf, one CUB reduce-by-key gives every leaf the box of
//      its points (reading each point once), then unions upwards.
// One template over the points' scalar P (float or double) builds both
// precisions. The host reads the caller's cancel flag between the steps and
// at every level, where it waits for the device anyway.
#include <thrust/iterator/transform_iterator.h>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>

#include <vector>

#include "../../common/quadtree_layout.h"
#include "../../engine/cancel.h"
#include "quadtree.cuh"

namespace knn {
namespace cuda {
namespace {

template <class P>
struct BoxUnion {
  __host__ __device__ Box4<P> operator()(const Box4<P>& a, const Box4<P>& b) const {
    return Box4<P>{min_of(a.x, b.x), min_of(a.y, b.y), max_of(a.z, b.z), max_of(a.w, b.w)};
  }
};

template <class P>
struct PointAsBox {
  __host__ __device__ Box4<P> operator()(const Coord2<P>& p) const {
    return Box4<P>{p.x, p.y, p.x, p.y};
  }
};

// The identity of BoxUnion.
template <class P>
__host__ __device__ Box4<P> empty_box() {
  const P inf = static_cast<P>(__builtin_huge_val());
  return Box4<P>{inf, inf, -inf, -inf};
}

template <class P>
__global__ void make_keys(const Coord2<P>* xy, int64_t n, const Box4<P>* bbox, uint32_t* keys,
                          int32_t* ids) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const Box4<P> b = *bbox;
  const quadtree::Quantiser q = quadtree::make_quantiser(b.x, b.y, b.z, b.w);
  const Coord2<P> p = xy[i];
  keys[i] = quadtree::point_key(q, p.x, p.y);
  ids[i] = static_cast<int32_t>(i);
}

template <class P>
__global__ void gather_points(const Coord2<P>* xy, const int32_t* order, int64_t n,
                              Coord2<P>* sorted) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (j >= n) return;
  sorted[j] = xy[order[j]];
}

// First position in [lo, hi) whose key lies in quadrant >= `quadrant` below a
// node at `depth`; the keys of one node share their top 2*depth bits, so the
// quadrant never decreases along the range.
__device__ int64_t quadrant_start(const uint32_t* keys, int64_t lo, int64_t hi, int depth,
                                  uint32_t quadrant) {
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (quadtree::child_quadrant(keys[mid], depth) < quadrant)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

struct ChildRanges {
  int64_t start[5];  // quadrant q spans [start[q], start[q+1])
};

template <class P>
__device__ bool splits(const QuadNode<P>& node, int depth, int leaf_capacity) {
  return node.end - node.begin > leaf_capacity && depth < quadtree::kMaxDepth;
}

template <class P>
__device__ ChildRanges child_ranges(const QuadNode<P>& node, const uint32_t* keys, int depth) {
  ChildRanges r;
  r.start[0] = node.begin;
  r.start[4] = node.end;
  for (uint32_t q = 1; q < 4; ++q)
    r.start[q] = quadrant_start(keys, r.start[q - 1], node.end, depth, q);
  return r;
}

template <class P>
__global__ void count_children(const QuadNode<P>* level, int64_t m, const uint32_t* keys, int depth,
                               int leaf_capacity, int32_t* child_counts) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= m) return;
  const QuadNode<P> node = level[i];
  int count = 0;
  if (splits(node, depth, leaf_capacity)) {
    const ChildRanges r = child_ranges(node, keys, depth);
    for (int q = 0; q < 4; ++q) count += r.start[q + 1] > r.start[q];
  }
  child_counts[i] = count;
}

// Writes the children of the level's splitting nodes into the next level,
// at their scanned offsets, and links them from their parent.
template <class P>
__global__ void write_children(QuadNode<P>* level, int64_t m, const uint32_t* keys, int depth,
                               int leaf_capacity, const int32_t* child_offsets,
                               int64_t next_level_base, QuadNode<P>* next_level) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= m) return;
  QuadNode<P> node = level[i];
  if (!splits(node, depth, leaf_capacity)) return;
  const ChildRanges r = child_ranges(node, keys, depth);
  int32_t slot = child_offsets[i];
  node.first_child = static_cast<int32_t>(next_level_base + slot);
  for (int q = 0; q < 4; ++q) {
    if (r.start[q + 1] == r.start[q]) continue;
    next_level[slot++] = QuadNode<P>{empty_box<P>(), r.start[q], r.start[q + 1], -1, 0};
  }
  node.child_count = slot - child_offsets[i];
  level[i] = node;
}

// Each leaf's node index at the sorted position of its first point.
template <class P>
__global__ void mark_leaf_starts(const QuadNode<P>* nodes, int64_t count, int32_t* owner) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= count) return;
  if (nodes[i].first_child < 0) owner[nodes[i].begin] = static_cast<int32_t>(i);
}

// Scan operator carrying the latest mark forward (-1 = no mark): associative,
// so one inclusive scan gives every sorted point the leaf that holds it.
struct LatestMark {
  __host__ __device__ int32_t operator()(int32_t earlier, int32_t later) const {
    return later >= 0 ? later : earlier;
  }
};

template <class P>
__global__ void scatter_leaf_boxes(const int32_t* leaves, const Box4<P>* boxes, int64_t count,
                                   QuadNode<P>* nodes) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= count) return;
  nodes[leaves[i]].box = boxes[i];
}

// Internal nodes of one level take the union of their children's boxes.
template <class P>
__global__ void union_child_boxes(QuadNode<P>* nodes, int64_t first, int64_t count) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= count) return;
  QuadNode<P>& node = nodes[first + i];
  if (node.first_child < 0) return;
  Box4<P> box = nodes[node.first_child].box;
  for (int c = 1; c < node.child_count; ++c)
    box = BoxUnion<P>()(box, nodes[node.first_child + c].box);
  node.box = box;
}

template <class P>
std::unique_ptr<QuadtreeEngine> build_tree(const P* xy, int64_t n, const QuadtreeParams& params) {
  using Node = QuadNode<P>;
  using Point = Coord2<P>;
  using Box = Box4<P>;
  if (n > kMaxQuadtreePoints)
    fail(KNN_ERR_UNSUPPORTED,
         format("the CUDA quadtree holds at most %lld points, not %lld",
                static_cast<long long>(kMaxQuadtreePoints), static_cast<long long>(n)));
  if (params.leaf_capacity < 0)
    fail(KNN_ERR_INVALID_ARGUMENT, format("leaf capacity %d is negative", params.leaf_capacity));
  const int leaf_capacity = params.leaf_capacity > 0 ? params.leaf_capacity : kDefaultLeafCapacity;
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  Stream stream;
  const cudaStream_t s = stream.get();
  CubScratch scratch(s);
  const volatile int* cancel = cancel_flag();
  throw_if_cancelled(cancel);

  DeviceBuffer<Point> sorted_xy(static_cast<size_t>(n));
  DeviceBuffer<int32_t> sorted_ids(static_cast<size_t>(n));
  if (n == 0)
    return std::make_unique<CudaQuadtree<P>>(device, n, std::move(sorted_xy), std::move(sorted_ids),
                                             DeviceBuffer<Node>());
  const size_t un = static_cast<size_t>(n);
  const unsigned grid = grid_for(n, kBlock);

  // 1-2. Box, keys, stable sort of (key, index) over the 32 key bits.
  DeviceBuffer<uint32_t> keys_a(un), keys_b(un);
  DeviceBuffer<int32_t> ids_b(un);
  {
    DeviceBuffer<Point> input(un);
    check(cudaMemcpyAsync(input.get(), xy, un * sizeof(Point), cudaMemcpyDefault, s),
          "quadtree build: copying the points to the device");
    DeviceBuffer<Box> bbox(1);
    const auto boxes = thrust::make_transform_iterator(input.get(), PointAsBox<P>());
    scratch.run(
        [&](void* t, size_t& b) {
          return cub::DeviceReduce::Reduce(t, b, boxes, bbox.get(), n, BoxUnion<P>(),
                                           empty_box<P>(), s);
        },
        "quadtree build: bounding box");
    make_keys<<<grid, kBlock, 0, s>>>(input.get(), n, bbox.get(), keys_a.get(), sorted_ids.get());
    check_launch("quadtree build: make_keys");
    cub::DoubleBuffer<uint32_t> keys(keys_a.get(), keys_b.get());
    cub::DoubleBuffer<int32_t> ids(sorted_ids.get(), ids_b.get());
    scratch.run(
        [&](void* t, size_t& b) {
          return cub::DeviceRadixSort::SortPairs(t, b, keys, ids, n, 0, 2 * quadtree::kCellBits, s);
        },
        "quadtree build: radix sort");
    if (keys.Current() != keys_a.get()) std::swap(keys_a, keys_b);
    if (ids.Current() != sorted_ids.get()) std::swap(sorted_ids, ids_b);
    gather_points<<<grid, kBlock, 0, s>>>(input.get(), sorted_ids.get(), n, sorted_xy.get());
    check_launch("quadtree build: gather_points");
  }
  keys_b = DeviceBuffer<uint32_t>();
  ids_b = DeviceBuffer<int32_t>();
  const uint32_t* sorted_keys = keys_a.get();
  stream.synchronize();
  throw_if_cancelled(cancel);

  // 3. Nodes level by level.
  std::vector<DeviceBuffer<Node>> levels;
  std::vector<int64_t> level_base;
  levels.emplace_back(1);
  level_base.push_back(0);
  const Node root{empty_box<P>(), 0, n, -1, 0};
  check(cudaMemcpyAsync(levels[0].get(), &root, sizeof root, cudaMemcpyHostToDevice, s),
        "quadtree build: root");
  int64_t total_nodes = 1;
  DeviceBuffer<int32_t> counts, offsets;  // per node of a level, grown as levels widen
  for (int depth = 0; depth < quadtree::kMaxDepth; ++depth) {
    Node* level = levels.back().get();
    const int64_t m = static_cast<int64_t>(levels.back().size());
    // m + 1 entries: the scan's last entry is the size of the next level.
    if (counts.size() < static_cast<size_t>(m) + 1) {
      stream.synchronize();
      counts.allocate(2 * static_cast<size_t>(m) + 1);
      offsets.allocate(2 * static_cast<size_t>(m) + 1);
    }
    check(cudaMemsetAsync(counts.get() + m, 0, sizeof(int32_t), s), "quadtree build: memset");
    count_children<<<grid_for(m, kBlock), kBlock, 0, s>>>(level, m, sorted_keys, depth,
                                                          leaf_capacity, counts.get());
    check_launch("quadtree build: count_children");
    scratch.run(
        [&](void* t, size_t& b) {
          return cub::DeviceScan::ExclusiveSum(t, b, counts.get(), offsets.get(), m + 1, s);
        },
        "quadtree build: scan of children");
    const int64_t next = read_back(offsets.get() + m, s, "quadtree build");
    throw_if_cancelled(cancel);
    if (next == 0) break;
    if (total_nodes + next > int64_t{0x7fffffff})
      fail(KNN_ERR_UNSUPPORTED,
           format("the quadtree of %lld points with leaf capacity %d needs more than 2^31 - 1 "
                  "nodes; use a larger leaf capacity",
                  static_cast<long long>(n), leaf_capacity));
    DeviceBuffer<Node> next_level(static_cast<size_t>(next));
    write_children<<<grid_for(m, kBlock), kBlock, 0, s>>>(
        level, m, sorted_keys, depth, leaf_capacity, offsets.get(), total_nodes, next_level.get());
    check_launch("quadtree build: write_children");
    levels.push_back(std::move(next_level));
    level_base.push_back(total_nodes);
    total_nodes += next;
  }

  DeviceBuffer<Node> nodes(static_cast<size_t>(total_nodes));
  for (size_t l = 0; l < levels.size(); ++l)
    check(cudaMemcpyAsync(nodes.get() + level_base[l], levels[l].get(),
                          levels[l].size() * sizeof(Node), cudaMemcpyDeviceToDevice, s),
          "quadtree build: gathering the levels");
  const size_t level_count = levels.size();
  std::vector<int64_t> level_size(level_count);
  for (size_t l = 0; l < level_count; ++l) level_size[l] = static_cast<int64_t>(levels[l].size());
  levels.clear();

  // 4. Leaf boxes from their points, then unions from the bottom up. The
  // leaves partition the sorted points into runs; a scan names each point's
  // leaf and one reduce-by-key over the runs reads every point once (CUB's
  // segmented reduce would take a block per leaf).
  {
    int32_t* marks = reinterpret_cast<int32_t*>(keys_a.get());  // the keys are done with
    DeviceBuffer<int32_t> owner(un);
    check(cudaMemsetAsync(marks, 0xff, un * sizeof(int32_t), s), "quadtree build: memset");
    mark_leaf_starts<<<grid_for(total_nodes, kBlock), kBlock, 0, s>>>(nodes.get(), total_nodes,
                                                                      marks);
    check_launch("quadtree build: mark_leaf_starts");
    scratch.run(
        [&](void* t, size_t& b) {
          return cub::DeviceScan::InclusiveScan(t, b, marks, owner.get(), LatestMark(), n, s);
        },
        "quadtree build: owner scan");
    DeviceBuffer<int32_t> leaves(static_cast<size_t>(total_nodes));
    DeviceBuffer<Box> leaf_boxes(static_cast<size_t>(total_nodes));
    DeviceBuffer<int64_t> leaf_count(1);
    const auto point_boxes = thrust::make_transform_iterator(sorted_xy.get(), PointAsBox<P>());
    scratch.run(
        [&](void* t, size_t& b) {
          return cub::DeviceReduce::ReduceByKey(t, b, owner.get(), leaves.get(), point_boxes,
                                                leaf_boxes.get(), leaf_count.get(), BoxUnion<P>(),
                                                n, s);
        },
        "quadtree build: leaf boxes");
    const int64_t n_leaves = read_back(leaf_count.get(), s, "quadtree build");
    throw_if_cancelled(cancel);
    scatter_leaf_boxes<<<grid_for(n_leaves, kBlock), kBlock, 0, s>>>(leaves.get(), leaf_boxes.get(),
                                                                     n_leaves, nodes.get());
    check_launch("quadtree build: scatter_leaf_boxes");
    for (size_t l = level_count; l-- > 0;) {
      union_child_boxes<<<grid_for(level_size[l], kBlock), kBlock, 0, s>>>(
          nodes.get(), level_base[l], level_size[l]);
      check_launch("quadtree build: union_child_boxes");
    }
    stream.synchronize();
  }
  return std::make_unique<CudaQuadtree<P>>(device, n, std::move(sorted_xy), std::move(sorted_ids),
                                           std::move(nodes));
}

}  // namespace

template <typename Scalar>
std::unique_ptr<QuadtreeEngine> build_quadtree(const Scalar* xy, int64_t n,
                                               const QuadtreeParams& params) {
  return build_tree(xy, n, params);
}

KNN_INSTANTIATE_BUILDER(KNN_QUADTREE_BUILDER);

}  // namespace cuda
}  // namespace knn
