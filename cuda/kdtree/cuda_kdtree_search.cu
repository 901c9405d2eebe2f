// GPU kNN search of the heap-ordered kd-tree: queries sorted by Morton code
// for locality; small k in registers, one thread per query; larger k one warp
// per query with a shared-memory list; beyond that a heap in device memory.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>

#include "../core/float4_point.cuh"
#include "../core/knn_lists.cuh"
#include "../core/radix_sort_temp.cuh"
#include "../core/warp_list.cuh"
#include "cuda_kdtree_search.h"

namespace knn {
namespace cuda {
namespace {

constexpr int kMortonBitsPerAxis = 10;

__global__ void convert_nodes_kernel(const Node* nodes, int64_t n, float4* out, uint32_t* box,
                                     TreeCheck check) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const Node nd = nodes[i];
  out[i] = make_float4(nd.p[0], nd.p[1], nd.p[2], __int_as_float(nd.id));
  if (check.first_bad) {
    const int64_t global = check.offset + i;
    if (check_node_fields(nd, check.shape, global) != kTreeOk)
      atomicMin(check.first_bad, static_cast<unsigned long long>(global));
    else
      atomicMin(&check.first_node[nd.id], static_cast<uint32_t>(global));
  }
  for (int d = 0; d < 3; ++d) {
    const uint32_t key = ordered_key(nd.p[d]);
    atomicMin(&box[d], key);
    atomicMax(&box[3 + d], key);
  }
}

__global__ void reset_box_kernel(uint32_t* box) {
  if (threadIdx.x < 3) box[threadIdx.x] = 0xffffffffu, box[3 + threadIdx.x] = 0u;
}

__device__ __forceinline__ uint32_t spread_bits(uint32_t v) {
  v = (v | (v << 16)) & 0x030000ffu;
  v = (v | (v << 8)) & 0x0300f00fu;
  v = (v | (v << 4)) & 0x030c30c3u;
  v = (v | (v << 2)) & 0x09249249u;
  return v;
}

__global__ void morton_keys(const Point* queries, int64_t m, const uint32_t* box, uint32_t* keys,
                            int32_t* order) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= m) return;
  uint32_t code = 0;
  for (int d = 0; d < 3; ++d) {
    const float lo = scalar_from_ordered_key<float>(box[d]),
                hi = scalar_from_ordered_key<float>(box[3 + d]);
    const float extent = hi - lo;
    float t = extent > 0.0f ? (queries[i].p[d] - lo) / extent : 0.0f;
    t = fminf(fmaxf(t, 0.0f), 1.0f);
    const uint32_t cell =
        min(static_cast<uint32_t>(t * (1 << kMortonBitsPerAxis)), (1u << kMortonBitsPerAxis) - 1);
    code |= spread_bits(cell) << d;
  }
  keys[i] = code;
  order[i] = static_cast<int32_t>(i);
}

__device__ __forceinline__ float4 load_query(const Point* queries, int32_t i) {
  const Point p = queries[i];
  return make_float4(p.p[0], p.p[1], p.p[2], 0.0f);
}

__global__ void gather_buckets(const float4* nodes, int64_t n, int bucket_level, TreeShape shape,
                               float4* buckets) {
  const int64_t top = (int64_t{1} << bucket_level) - 1;
  const int64_t i = top + blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const int below = node_level(i) - bucket_level;  // levels under the bucket root
  const int64_t b = i + 1;                         // 1-based heap number
  const int64_t q = (b >> below) - (int64_t{1} << bucket_level);
  const int64_t in_bucket = ((b & ((int64_t{1} << below) - 1)) | (int64_t{1} << below)) - 1;
  buckets[shape.segment_start(bucket_level, q) + in_bucket] = nodes[i];
}

__global__ void bucket_boxes(const float4* buckets, int bucket_level, TreeShape shape,
                             float4* boxes) {
  const int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (q >= (int64_t{1} << bucket_level)) return;
  const int64_t start = shape.segment_start(bucket_level, q);
  const int64_t size = shape.subtree_size(bucket_level, q);
  float4 lo = make_float4(INFINITY, INFINITY, INFINITY, 0.0f);
  float4 hi = make_float4(-INFINITY, -INFINITY, -INFINITY, 0.0f);
  for (int64_t j = start; j < start + size; ++j) {
    const float4 p = buckets[j];
    lo.x = fminf(lo.x, p.x), lo.y = fminf(lo.y, p.y), lo.z = fminf(lo.z, p.z);
    hi.x = fmaxf(hi.x, p.x), hi.y = fmaxf(hi.y, p.y), hi.z = fmaxf(hi.z, p.z);
  }
  boxes[2 * q] = lo;
  boxes[2 * q + 1] = hi;
}

// The least id of node i's subtree from its children's (already done).
__global__ void subtree_min_ids_of_level(const float4* nodes, int64_t n, int level,
                                         int32_t* min_ids) {
  const int64_t i = (int64_t{1} << level) - 1 + blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n || i >= (int64_t{2} << level) - 1) return;
  int32_t least = id_of(nodes[i]);
  for (int64_t child = 2 * i + 1; child <= 2 * i + 2 && child < n; ++child)
    least = min(least, min_ids[child]);
  min_ids[i] = least;
}

// The least id of the subtree of 1-based heap number b (b > n: none).
__device__ __forceinline__ int32_t least_id_below(const TreeView& tree, uint32_t b) {
  return b <= tree.n ? __ldg(&tree.min_ids[b - 1]) : kNoIndex;
}

// Whether the subtree of heap number b, none of whose points is nearer than
// lower_bound, may hold a point that enters `list`: a bound below the k-th
// distance may, one above it may not, and at a tie the subtree's least id
// decides (read only then, so untied walks load nothing more).
template <class List>
__device__ __forceinline__ bool subtree_may_enter(const List& list, const TreeView& tree,
                                                  float lower_bound, uint32_t b) {
  const float kth = list.bound();
  if (lower_bound != kth) return lower_bound < kth;
  return list.admits(lower_bound, least_id_below(tree, b));
}

__device__ __forceinline__ uint32_t bucket_root(const TreeView& tree, int64_t bucket) {
  return static_cast<uint32_t>((int64_t{1} << tree.bucket_level) + bucket);
}

// box_distance (common/float_math.h) of float4 points: a lower bound of the
// distance of every point inside, so pruning on it is exact.
__device__ __forceinline__ float box_bound(const float4& q, const float4& lo, const float4& hi) {
  const float qc[3] = {q.x, q.y, q.z}, loc[3] = {lo.x, lo.y, lo.z}, hic[3] = {hi.x, hi.y, hi.z};
  return box_distance(qc, loc, hic, 3);
}

// The walk of one query over the tree. In heap order the parent of node b
// (1-based) is b/2, so the walk needs no stack: the node it came from tells
// whether it arrives from above (visit the node, go to the near child), from
// the near child (go to the far child unless the splitting plane is farther
// than the k-th candidate, else up) or from the far child (up). At the bucket
// level the visitor decides whether to enter the subtree (it may scan the
// bucket itself and decline). The plane bound is computed in the distance's
// own float arithmetic and prunes only where neither it nor, at a tie, the
// subtree's least id can beat the k-th (subtree_may_enter), so the answer is
// exact and equal to the CPU engine's.
template <class Visitor>
__device__ void walk_tree(const TreeView& tree, const float4& q, Visitor& visitor) {
  const uint32_t n = static_cast<uint32_t>(tree.n);
  const uint32_t first_bucket = 1u << tree.bucket_level;  // 1-based heap number
  const uint32_t last_bucket = 2 * first_bucket - 1;
  uint32_t b = 1, from = 0;  // 0 = above the root
  while (b != 0) {
    const bool arriving = from < b;
    if (b > n || (arriving && b >= first_bucket && b <= last_bucket &&
                  !visitor.enter_bucket(b - first_bucket))) {
      from = b, b >>= 1;  // a missing child or a bucket not entered: back up
      continue;
    }
    const float4 node = __ldg(&tree.nodes[b - 1]);
    if (arriving) visitor.node(node);
    const int dim = (31 - __clz(b) + tree.root_dim) % 3;
    const float diff = sub_rn(coord(q, dim), coord(node, dim));
    const uint32_t near_child = 2 * b + (diff <= 0.0f ? 0u : 1u);
    uint32_t next = b >> 1;
    if (arriving)
      next = near_child;
    else if (from == near_child && visitor.may_enter(mul_rn(diff, diff), near_child ^ 1u))
      next = near_child ^ 1u;
    from = b, b = next;
  }
}

// One thread per query: the list is the thread's own; a bucket's subtree is
// entered only when its box is not farther than the k-th candidate.
template <class List>
struct ThreadVisitor {
  const TreeView& tree;
  const float4& q;
  List& list;

  __device__ void node(const float4& p) {
    list.offer(squared_distance3(q.x, q.y, q.z, p.x, p.y, p.z), id_of(p));
  }
  __device__ bool may_enter(float lower_bound, uint32_t b) const {
    return subtree_may_enter(list, tree, lower_bound, b);
  }
  __device__ bool enter_bucket(int64_t bucket) const {
    return subtree_may_enter(list, tree,
                             box_bound(q, tree.boxes[2 * bucket], tree.boxes[2 * bucket + 1]),
                             bucket_root(tree, bucket));
  }
};

// One warp per query: top nodes are offered one at a time, bucket points 32
// at a time, one per lane; the list gathers the winners into batches of 32
// before it merges them (warp_list.cuh).
struct WarpVisitor {
  const TreeView& tree;
  const float4& q;
  WarpList<float>& list;
  TreeShape shape;

  __device__ void node(const float4& p) {
    list.offer_uniform(Neighbor{squared_distance3(q.x, q.y, q.z, p.x, p.y, p.z), id_of(p)});
  }
  __device__ bool may_enter(float lower_bound, uint32_t b) const {
    return subtree_may_enter(list, tree, lower_bound, b);
  }
  __device__ bool enter_bucket(int64_t bucket) {
    if (!subtree_may_enter(list, tree,
                           box_bound(q, tree.boxes[2 * bucket], tree.boxes[2 * bucket + 1]),
                           bucket_root(tree, bucket)))
      return false;
    const int64_t start = shape.segment_start(tree.bucket_level, bucket);
    const int64_t size = shape.subtree_size(tree.bucket_level, bucket);
    for (int64_t base = 0; base < size; base += 32) {
      Neighbor c{infinity<float>(), kNoIndex};
      if (base + list.lane < size) {
        const float4 p = __ldg(&tree.buckets[start + base + list.lane]);
        c = Neighbor{squared_distance3(q.x, q.y, q.z, p.x, p.y, p.z), id_of(p)};
      }
      list.offer(c);
    }
    return false;
  }
};

template <int K>
__global__ void __launch_bounds__(128)
    search_register_lists(TreeView tree, const Point* __restrict__ queries,
                          const int32_t* __restrict__ order, int64_t m, int k, int32_t* indices,
                          float* sq_distances) {
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (t >= m) return;
  const int32_t qi = order[t];
  const float4 q = load_query(queries, qi);
  RegisterList<float, K> list(k);
  ThreadVisitor<RegisterList<float, K>> visitor{tree, q, list};
  walk_tree(tree, q, visitor);
  const int64_t row = int64_t{qi} * k;
  list.write(indices + row, sq_distances ? sq_distances + row : nullptr);
}

// One warp per query, for k beyond the register lists: the warp walks the
// top of the tree together (every lane takes the same decisions), offers the
// top nodes it visits to the list, and scans each bucket it enters 32 points
// at a time, one per lane.
__global__ void search_warp_lists(TreeView tree, const Point* __restrict__ queries,
                                  const int32_t* __restrict__ order, int64_t m, int k,
                                  int32_t* indices, float* sq_distances) {
  extern __shared__ Neighbor warp_storage[];
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t = blockIdx.x * int64_t{warps} + warp;
  if (t >= m) return;
  WarpList<float> list(warp_storage + warp * (WarpList<float>::bytes(k) / sizeof(Neighbor)), k,
                       lane);
  const int32_t qi = order[t];
  const float4 q = load_query(queries, qi);
  WarpVisitor visitor{tree, q, list, TreeShape(tree.n)};
  walk_tree(tree, q, visitor);
  const int64_t row = int64_t{qi} * k;
  list.write(indices + row, sq_distances ? sq_distances + row : nullptr);
}

__global__ void __launch_bounds__(128)
    search_heap_lists(TreeView tree, const Point* __restrict__ queries,
                      const int32_t* __restrict__ order, int64_t m, int k, int32_t* heap_index,
                      float* heap_dist, int32_t* indices, float* sq_distances) {
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (t >= m) return;
  const int32_t qi = order[t];
  const float4 q = load_query(queries, qi);
  HeapList<float> list({heap_index + t, heap_dist + t, m}, k);
  ThreadVisitor<HeapList<float>> visitor{tree, q, list};
  walk_tree(tree, q, visitor);
  const int64_t row = int64_t{qi} * k;
  list.write(indices + row, sq_distances ? sq_distances + row : nullptr);
}

constexpr int kSearchBlock = 128;
constexpr int kWarpsPerBlock = 4;

template <int K>
void launch_register_search(const TreeView& tree, const Point* queries, const int32_t* order,
                            int64_t m, int k, int32_t* indices, float* sq_distances,
                            cudaStream_t stream) {
  search_register_lists<K><<<grid_for(m, kSearchBlock), kSearchBlock, 0, stream>>>(
      tree, queries, order, m, k, indices, sq_distances);
  check_launch("search_register_lists");
}

}  // namespace

PointTreeScratch::PointTreeScratch(int64_t capacity, int k) : capacity_(capacity), k_(k) {
  if (capacity == 0) return;
  for (auto& keys : keys_) keys.allocate(static_cast<size_t>(capacity));
  for (auto& o : order_) o.allocate(static_cast<size_t>(capacity));
  cub_temp_.allocate(checked_cub_temp(pair_sort_temp_bytes(capacity), cub_temp_bytes(capacity)));
  if (k > kMaxWarpK) {
    heap_index_.allocate(static_cast<size_t>(capacity) * k);
    heap_dist_.allocate(static_cast<size_t>(capacity) * k);
  }
}

void convert_nodes(const Node* nodes, int64_t n, float4* out, uint32_t* box_keys,
                   cudaStream_t stream, const TreeCheck& check) {
  if (n == 0) return;
  convert_nodes_kernel<<<grid_for(n, 256), 256, 0, stream>>>(nodes, n, out, box_keys, check);
  check_launch("convert_nodes");
}

struct Float4Coord {
  const float4* nodes;
  __device__ float operator()(int64_t j, int d) const { return coord(nodes[j], d); }
};

__global__ void check_order_and_ids(const float4* nodes, int64_t n, int root_dim, TreeCheck check) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  if (check_node_order(Float4Coord{nodes}, i, root_dim) != kTreeOk)
    atomicMin(check.first_bad, static_cast<unsigned long long>(i));
  const int id = id_of(nodes[i]);
  if (id >= 0 && id < n && check.first_node[id] < i)
    atomicMin(check.first_repeat, static_cast<unsigned long long>(i));
}

void check_tree_order_and_ids(const float4* nodes, int64_t n, int root_dim, const TreeCheck& check,
                              cudaStream_t stream) {
  if (n == 0) return;
  check_order_and_ids<<<grid_for(n, 256), 256, 0, stream>>>(nodes, n, root_dim, check);
  check_launch("check_order_and_ids");
}

void layout_buckets(const TreeView& tree, float4* buckets, float4* boxes, cudaStream_t stream) {
  if (tree.n == 0) return;
  const TreeShape shape(tree.n);
  const int64_t top = (int64_t{1} << tree.bucket_level) - 1;
  gather_buckets<<<grid_for(tree.n - top, 256), 256, 0, stream>>>(
      tree.nodes, tree.n, tree.bucket_level, shape, buckets);
  check_launch("gather_buckets");
  bucket_boxes<<<grid_for(top + 1, 256), 256, 0, stream>>>(buckets, tree.bucket_level, shape,
                                                           boxes);
  check_launch("bucket_boxes");
}

void reset_box(uint32_t* box_keys, cudaStream_t stream) {
  reset_box_kernel<<<1, 32, 0, stream>>>(box_keys);
  check_launch("reset_box");
}

void subtree_min_ids(const TreeView& tree, int32_t* min_ids, cudaStream_t stream) {
  for (int level = tree_levels(tree.n) - 1; level >= 0; --level) {
    const int64_t nodes = int64_t{1} << level;
    subtree_min_ids_of_level<<<grid_for(nodes, 256), 256, 0, stream>>>(tree.nodes, tree.n, level,
                                                                       min_ids);
    check_launch("subtree_min_ids_of_level");
  }
}

void PointTree::lay_out_buckets(cudaStream_t stream) {
  const int64_t top = (int64_t{1} << bucket_level_for(n)) - 1;
  buckets.allocate(static_cast<size_t>(n - top));
  boxes.allocate(static_cast<size_t>(2 * (top + 1)));
  min_ids.allocate(static_cast<size_t>(n));
  layout_buckets(view(), buckets.get(), boxes.get(), stream);
  subtree_min_ids(view(), min_ids.get(), stream);
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (point tree buckets)");
}

void search_on_device(const TreeView& tree, const Point* queries, int64_t m, int k,
                      int32_t* indices, float* sq_distances, PointTreeScratch& scratch,
                      cudaStream_t stream) {
  if (m == 0) return;
  if (m > scratch.capacity() || k > scratch.k()) fail(KNN_ERR_INTERNAL, "search scratch too small");
  morton_keys<<<grid_for(m, 256), 256, 0, stream>>>(
      queries, m, tree.box_keys, scratch.keys_[0].get(), scratch.order_[0].get());
  check_launch("morton_keys");
  cub::DoubleBuffer<uint32_t> keys(scratch.keys_[0].get(), scratch.keys_[1].get());
  cub::DoubleBuffer<int32_t> order(scratch.order_[0].get(), scratch.order_[1].get());
  size_t temp_bytes = scratch.cub_temp_.size();
  check(cub::DeviceRadixSort::SortPairs(scratch.cub_temp_.get(), temp_bytes, keys, order, m, 0,
                                        3 * kMortonBitsPerAxis, stream),
        "cub::DeviceRadixSort::SortPairs");
  const int32_t* sorted = order.Current();
  if (k <= 1)
    return launch_register_search<1>(tree, queries, sorted, m, k, indices, sq_distances, stream);
  if (k <= 2)
    return launch_register_search<2>(tree, queries, sorted, m, k, indices, sq_distances, stream);
  if (k <= 4)
    return launch_register_search<4>(tree, queries, sorted, m, k, indices, sq_distances, stream);
  if (k <= 8)
    return launch_register_search<8>(tree, queries, sorted, m, k, indices, sq_distances, stream);
  if (k <= 16)
    return launch_register_search<16>(tree, queries, sorted, m, k, indices, sq_distances, stream);
  if (k <= kMaxWarpK) {
    const size_t shared_limit =
        allow_all_dynamic_shared(search_warp_lists, "cudaFuncSetAttribute (warp search)");
    const size_t per_warp = WarpList<float>::bytes(k);
    const int warps = static_cast<int>(std::min<size_t>(kWarpsPerBlock, shared_limit / per_warp));
    if (warps > 0) {
      const size_t shared = per_warp * warps;
      search_warp_lists<<<grid_for(m, warps), 32 * warps, shared, stream>>>(
          tree, queries, sorted, m, k, indices, sq_distances);
      return check_launch("search_warp_lists");
    }
    fail(KNN_ERR_UNSUPPORTED, format("this GPU's shared memory cannot hold a k-list of %d", k));
  }
  search_heap_lists<<<grid_for(m, kSearchBlock), kSearchBlock, 0, stream>>>(
      tree, queries, sorted, m, k, scratch.heap_index_.get(), scratch.heap_dist_.get(), indices,
      sq_distances);
  check_launch("search_heap_lists");
}

}  // namespace cuda
}  // namespace knn
