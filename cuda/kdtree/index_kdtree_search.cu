// GPU search of the bucket kd-tree (index_kdtree.cuh): kNN and radius.
//
// Queries of a chunk run in leaf order (each query's key is the leaf it
// descends to, its home leaf, then its part of that leaf), so that
// neighbouring threads want the same nodes and bucket points; the lanes of a
// warp walk together. With one thread per query, each first scans its home
// leaf (ThreadVisitor::seed). A walk is depth-first with an explicit stack,
// nearer child first; a node is skipped only when its box distance (a lower
// bound of every point's distance in it, common/float_math.h) is greater
// than the bound (the k-th distance for kNN, the squared radius for radius
// calls), or for kNN equal to the k-th distance with no id below the node
// (BucketTreeView::min_ids) that could beat the k-th's, so the answer is
// exact and equals the CPU engine's bit for bit.
//
// k-lists (list_kind_for): k <= 16 in registers and up to kKdTreeMaxSharedHeapK a
// heap in shared memory, one thread per query; up to kMaxWarpK one warp per
// query with a shared-memory list (a leaf is scanned 32 points at a time);
// beyond that a heap in device scratch. The distance loop is unrolled
// for dim 1..kMaxStaticDim (static_dim.h) with the query in registers, with a
// run-time-dim fallback for higher dims. Everything is a template over the
// scalar type (float or double, index_kdtree.cuh), instantiated for both at
// the end of this file.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <type_traits>

#include "../../common/static_dim.h"
#include "../core/float4_point.cuh"
#include "../core/knn_lists.cuh"
#include "../core/launch_policy.h"
#include "../core/radix_sort_temp.cuh"
#include "../core/warp_list.cuh"
#include "index_kdtree.cuh"
#include "index_kdtree_walk.cuh"

namespace knn {
namespace cuda {
namespace {

using Policy = KdTreeSearchPolicy;

// Bits of a query's sort key below its home leaf (leaf_keys).
__host__ __device__ constexpr int part_bits(int levels) { return levels > 29 ? 32 - levels : 3; }

// What every search kernel gets.
template <typename Scalar>
struct KernelArgs {
  BucketTreeView<Scalar> tree;
  const Scalar* queries;
  const int32_t* order;      // chunk positions in leaf order
  const uint32_t* home_key;  // home_key[t]: query order[t]'s key (leaf_keys)
  int64_t m;
  int k;
  Scalar radius_sq;  // < 0: kNN
  int32_t* indices;
  Scalar* sq_distances;
  int32_t* counts;
  int row_width;
  int32_t* heap_index;
  Scalar* heap_dist;
};

// Whether the lanes of a warp take turns over a leaf (ThreadVisitor): with
// lists of up to 8 in registers. With 16 slots the turns' extra live values
// raise the kernel to about 146 registers and k = 11 ran 1.45x slower on the
// H100; the heap lists keep the simpler scan too.
template <class List>
struct TakesTurns : std::false_type {};
template <typename Scalar, int K>
struct TakesTurns<RegisterList<Scalar, K>> : std::integral_constant<bool, (K <= 8)> {};
// ...and only when at most max_turns(dim) lanes want the leaf: turns cost a
// round per wanting lane plus the hand-over of every winner, while a point's
// distance costs little in few dimensions, where a leaf also holds more
// winners. Measured on the H100 (k = 5 unless said, ms of query): 3-D
// all-kNN of 10^7, k = 8: 388 with turns always, 185 with up to 8, 145
// without; 5-D 2^21: 44.5 always, 36.1 up to 8, 45.3 without; 7-D 2^21:
// 119.6 always, 127.8 up to 8; 9-D 2^20: 168 always, 172 up to 8; 12-D 2^20:
// 780 always, 822 up to 8.
__host__ __device__ constexpr int max_turns(int dim) { return dim <= 4 ? 0 : (dim <= 6 ? 8 : 32); }

// One thread per query, with its own list.
//
// kNN (lists of TakesTurns, at most max_turns lanes wanting the leaf): the
// lanes whose bound admits a leaf take turns, and in each turn every lane
// measures one of the leaf's points from the turn's query; the points that
// beat that query's bound go to its lane's list. Lanes of a warp walk
// together, so a leaf is reached by all of them but often wanted by few
// (about 3 of 32 in 5-D, k = 5): scanned by those alone, one point after the
// other, it keeps the other lanes idle through leaf-size steps (H100, n = m
// = 2^20, k = 5: 9-D 283.6 -> 167.9 ms; 7-D 2^21 350 -> 120 ms). Otherwise,
// and for radius calls (every point in range is kept), each lane that wants
// the leaf scans it.
template <class Query, class List>
struct ThreadVisitor {
  using Scalar = typename Query::Value;
  const BucketTreeView<Scalar>& t;
  const Query& q;
  List& list;
  Scalar radius_sq;
  int k;
  int32_t count = 0;
  int64_t home_begin = -1;  // the home leaf's first slot once seed() has scanned it

  __device__ bool wants(Scalar lower_bound, uint32_t node) const {
    return wants_node(list, radius_sq, t, lower_bound, node);
  }

  // Scans the query's home leaf (the one it descends to) before the walk, each
  // lane its own, all lanes at once: every list starts full with a near
  // bound, so the walk prunes from its first node, and no lane's first leaf
  // hands the owner up to a leaf's worth of winners one by one in turns. The
  // walk then skips the home leaf.
  __device__ void seed(const BucketTreeView<Scalar>& tree, uint32_t home) {
    home_begin = segment_start(tree.n, tree.levels, home);
    scan(home_begin, segment_start(tree.n, tree.levels, int64_t{home} + 1));
  }

  __device__ void scan_leaf(int64_t begin, int64_t end, bool wanted, unsigned lanes) {
    wanted = wanted && begin != home_begin;
    const unsigned wanting = __ballot_sync(lanes, wanted);
    if (wanting == 0) return;  // wanted only as the home leaf, which seed() scanned
    if (!TakesTurns<List>::value || radius_sq >= Scalar(0) ||
        __popc(wanting) > max_turns(q.dim())) {
      if (wanted) scan(begin, end);
      return;
    }
    const int lane = threadIdx.x % 32;
    // Lanes outside `lanes` have left: the others share the points out.
    const int rank = __popc(lanes & ((1u << lane) - 1u));
    const int stride = __popc(lanes);
    // Each lane holds one point of a stretch of the leaf while the wanting
    // lanes take their turns over it, so a point is read once per warp, not
    // once per turn (H100, k = 5, n = m, query ms: 7-D 2^21 71.0 -> 65.0, 9-D
    // 2^20 113.9 -> 101.7, 12-D 2^19 221.5 -> 173.6). Every owner is still
    // offered its winners in leaf order. Measuring two turns' distances
    // together spilled and ran 1.3-1.8x slower.
    for (int64_t base = begin; base < end; base += stride) {
      const int64_t j = base + rank;
      const bool have = j < end;
      const BucketPoint<Scalar, Query::kDim> point(t, have ? j : begin);
      const int32_t id = have ? point.id(t, j) : kNoIndex;
      for (unsigned turns = wanting; turns != 0; turns &= turns - 1) {
        const int owner = __ffs(turns) - 1;
        const Scalar d = squared_distance(q.lane_coords(owner, lanes), point.coords(), q.dim());
        const Scalar owner_bound = __shfl_sync(lanes, list.bound(), owner);
        const bool may_win = have && d <= owner_bound;
        for (unsigned wins = __ballot_sync(lanes, may_win); wins != 0; wins &= wins - 1) {
          const int from = __ffs(wins) - 1;
          const Scalar wd = __shfl_sync(lanes, d, from);
          const int32_t wi = __shfl_sync(lanes, id, from);
          if (lane == owner) list.offer(wd, wi);
        }
      }
    }
  }

  __device__ void scan(int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      const BucketPoint<Scalar, Query::kDim> point(t, j);
      const Scalar d = point_distance(q, point);
      if (radius_sq < Scalar(0)) {
        list.offer(d, point.id(t, j));
      } else if (d <= radius_sq) {
        ++count;
        if (k > 0) list.offer(d, point.id(t, j));
      }
    }
  }
};

template <int DIM, typename Scalar, class List>
__device__ void thread_query(const KernelArgs<Scalar>& a, int32_t qi, uint32_t home, List& list,
                             Scalar* warp_rows, unsigned lanes) {
  QueryPoint<Scalar, DIM> q(a.queries + int64_t{qi} * a.tree.dim, a.tree.dim);
  if constexpr (TakesTurns<List>::value) q.publish(warp_rows, lanes);
  ThreadVisitor<QueryPoint<Scalar, DIM>, List> visitor{a.tree, q, list, a.radius_sq, a.k};
  visitor.seed(a.tree, home);
  walk_bucket_tree(a.tree, q, visitor, lanes);
  if (a.counts) a.counts[qi] = visitor.count;
  if (a.k > 0) {
    const int64_t row = int64_t{qi} * a.row_width;
    list.write(a.indices + row, a.sq_distances ? a.sq_distances + row : nullptr);
  }
}

// Blocks of Policy::kThreads threads per SM that the search of lists of K asks
// the compiler to fit. The search is bound by latency, not issue: the lists
// that take turns are held to 80 registers (6 blocks, 37.5 % occupancy, from
// 104 registers and 25 %), and the warps gained outweigh the few spills
// (H100, 2^21 queries, k = 5: 5-D 22.5 -> 19.3 ms, 7-D 96 -> 85 ms). The
// 16-slot lists keep their registers: held to 80, they spilled their slots
// and k = 11 ran 3x slower. Held to 64 registers (8 blocks), the turn lists
// spilled enough to run 1.4x (5-D) to 3.4x (7-D, 12-D) slower. A double
// takes two registers, so the double lists are held to 4 blocks (128
// registers), the same share of the register file per value (not measured).
template <typename Scalar, int K>
using ThreadList = std::conditional_t<(K > 0), RegisterList<Scalar, K>, HeapList<Scalar>>;
template <typename Scalar, int K>
constexpr int search_min_blocks = TakesTurns<ThreadList<Scalar, K>>::value
                                      ? (sizeof(Scalar) == sizeof(float) ? 6 : 4)
                                      : 1;

// K > 0: a register list of up to K; K == kSharedHeapK: a heap in shared
// memory; K == 0: a heap in device scratch.
constexpr int kSharedHeapK = -1;

template <typename Scalar, int DIM, int K>
__global__ void __launch_bounds__(Policy::kThreads, search_min_blocks<Scalar, K>)
    search_thread_lists(KernelArgs<Scalar> a) {
  // The published queries of the turns (QueryPoint::publish).
  constexpr int kWarpFloats = TakesTurns<ThreadList<Scalar, K>>::value ? 32 * DIM : 0;
  __shared__ Scalar query_rows[std::max(1, Policy::kThreads / 32 * kWarpFloats)];
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const unsigned lanes = __ballot_sync(kFullMask, t < a.m);
  if (t >= a.m) return;
  const int32_t qi = a.order[t];
  const uint32_t home = a.home_key[t] >> part_bits(a.tree.levels);
  Scalar* warp_rows = query_rows + threadIdx.x / 32 * kWarpFloats;
  if constexpr (K > 0) {
    RegisterList<Scalar, K> list(a.k);
    thread_query<DIM>(a, qi, home, list, warp_rows, lanes);
  } else if constexpr (K == kSharedHeapK) {
    // Raw bytes: an extern array has one type for every instantiation.
    extern __shared__ __align__(16) unsigned char heap_bytes[];
    SharedHeapList<Scalar> list = SharedHeapList<Scalar>::in_shared(heap_bytes, a.k);
    thread_query<DIM>(a, qi, home, list, warp_rows, lanes);
  } else {
    HeapList<Scalar> list({a.heap_index + t, a.heap_dist + t, a.m}, a.k);
    thread_query<DIM>(a, qi, home, list, warp_rows, lanes);
  }
}

// One warp per query: every lane walks the same path (the bound is the same
// in every lane) and a leaf is scanned 32 points at a time, one per lane.
template <class Query>
struct WarpVisitor {
  using Scalar = typename Query::Value;
  const BucketTreeView<Scalar>& t;
  const Query& q;
  WarpList<Scalar>& list;
  Scalar radius_sq;
  int k;
  int32_t count = 0;

  __device__ bool wants(Scalar lower_bound, uint32_t node) const {
    return wants_node(list, radius_sq, t, lower_bound, node);
  }

  // The lanes share one query, so `wanted` is the same in all of them.
  __device__ void scan_leaf(int64_t begin, int64_t end, bool wanted, unsigned) {
    if (wanted) scan(begin, end);
  }

  __device__ void scan(int64_t begin, int64_t end) {
    for (int64_t base = begin; base < end; base += 32) {
      const int64_t j = base + list.lane;
      BasicNeighbor<Scalar> c{infinity<Scalar>(), kNoIndex};
      if (j < end) {
        const BucketPoint<Scalar, Query::kDim> point(t, j);
        const Scalar d = point_distance(q, point);
        if (radius_sq < Scalar(0) || d <= radius_sq) c = BasicNeighbor<Scalar>{d, point.id(t, j)};
      }
      if (radius_sq >= Scalar(0)) count += __popc(__ballot_sync(kFullMask, c.index != kNoIndex));
      if (k > 0) list.offer(c);
    }
  }
};

template <typename Scalar, int DIM>
__global__ void search_warp_lists(KernelArgs<Scalar> a) {
  const int lane = threadIdx.x % 32;
  const int64_t t = grid_warp();
  if (t >= a.m) return;
  WarpList<Scalar> list(warp_list_storage<Scalar>(a.k), a.k, lane);
  const int32_t qi = a.order[t];
  const QueryPoint<Scalar, DIM> q(a.queries + int64_t{qi} * a.tree.dim, a.tree.dim);
  WarpVisitor<QueryPoint<Scalar, DIM>> visitor{a.tree, q, list, a.radius_sq, a.k};
  walk_bucket_tree(a.tree, q, visitor, kFullMask);
  if (a.counts && lane == 0) a.counts[qi] = visitor.count;
  const int64_t row = int64_t{qi} * a.row_width;
  list.write(a.indices + row, a.sq_distances ? a.sq_distances + row : nullptr);
}

// Each query's key is the leaf it reaches by descending to the nearer child
// (by box distance, ties left), then which part of that leaf's box it lies
// in: the box halved at the middle of its widest side, of its second widest,
// of its third (part_bits). Close queries get close keys, and where a leaf
// is home to more queries than a warp, its warps get compact parts of it and
// walk fewer nodes together (H100, k = 5, n = m, query ms: 7-D 2^21 65.0 ->
// 62.2, 5-D 2^21 19.3 -> 18.9, k = 11 65.4 -> 61.9). The descent keeps the
// query in registers where DIM is known; with the leaf scan that returns at
// once when only a home leaf is wanted (ThreadVisitor::scan_leaf), 3-D, 10^7
// points and queries, k = 1: 20.4-20.9 -> 19.3-19.7 ms of query (H100,
// 2026-11-27; k = 8: 44.2-44.6 -> 43.4-43.9).
template <typename Scalar, int DIM>
__global__ void leaf_keys(BucketTreeView<Scalar> t, const Scalar* queries, int64_t m,
                          uint32_t* keys, int32_t* order) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= m) return;
  const QueryPoint<Scalar, DIM> q(queries + i * t.dim, t.dim);
  uint32_t node = 0;
  for (int level = 0; level < t.levels; ++level) {
    const uint32_t left = 2 * node + 1;
    node = node_distance(q, t, left) <= node_distance(q, t, left + 1) ? left : left + 1;
  }
  const Scalar* lo = t.boxes + int64_t{node} * 2 * t.dim;
  const Scalar* hi = lo + t.dim;
  uint32_t key = node - first_node_of_level(t.levels);
  int halved[2] = {-1, -1};
  for (int bit = 0; bit < part_bits(t.levels); ++bit) {
    int widest = -1;
    Scalar width = Scalar(-1);
    for (int d = 0; d < t.dim; ++d) {
      const Scalar w = hi[d] - lo[d];
      if (d != halved[0] && d != halved[1] && w > width) widest = d, width = w;
    }
    if (bit < 2) halved[bit] = widest;
    const bool upper =
        widest >= 0 && q.c[widest] > Scalar(0.5) * lo[widest] + Scalar(0.5) * hi[widest];
    key = key << 1 | (upper ? 1u : 0u);
  }
  keys[i] = key;
  order[i] = static_cast<int32_t>(i);
}

// Rows of k + 1 to rows of k without the query's own index (call index
// first + i), or without the last entry where it is absent.
template <typename Scalar>
__global__ void drop_self_kernel(const int32_t* wide_index, const Scalar* wide_dist, int64_t count,
                                 int64_t first, int k, int32_t* indices, Scalar* sq_distances) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= count) return;
  const int32_t self = static_cast<int32_t>(first + i);
  const int32_t* in = wide_index + i * (k + 1);
  int skip = k;
  for (int j = 0; j < k; ++j)
    if (in[j] == self) {
      skip = j;
      break;
    }
  for (int j = 0, out = 0; j <= k; ++j) {
    if (j == skip) continue;
    indices[i * k + out] = in[j];
    if (sq_distances) sq_distances[i * k + out] = wide_dist[i * (k + 1) + j];
    ++out;
  }
}

template <int DIM, int K, typename Scalar>
void launch_thread_search(const KernelArgs<Scalar>& a, cudaStream_t stream) {
  search_thread_lists<Scalar, DIM, K>
      <<<grid_for(a.m, Policy::kThreads), Policy::kThreads, 0, stream>>>(a);
  check_launch("search_thread_lists");
}

template <int DIM, typename Scalar>
void launch_warp_search(const KernelArgs<Scalar>& a, cudaStream_t stream);

// Heaps in shared memory: as many threads a block as the device's shared
// memory holds lists for, up to Policy::kThreads; a warp per query where not even
// a warp's lists fit.
template <int DIM, typename Scalar>
void launch_shared_heap_search(const KernelArgs<Scalar>& a, cudaStream_t stream) {
  const auto kernel = search_thread_lists<Scalar, DIM, kSharedHeapK>;
  const int threads = shared_heap_threads<Scalar>(
      kernel, a.k, Policy::kThreads, "cudaFuncSetAttribute (thread search, shared heaps)");
  if (threads == 0) return launch_warp_search<DIM>(a, stream);
  kernel<<<grid_for(a.m, threads), threads, SharedHeapList<Scalar>::bytes(a.k, threads), stream>>>(
      a);
  check_launch("search_thread_lists (shared heaps)");
}

template <int DIM, typename Scalar>
void launch_warp_search(const KernelArgs<Scalar>& a, cudaStream_t stream) {
  const size_t shared_limit = allow_all_dynamic_shared(search_warp_lists<Scalar, DIM>,
                                                       "cudaFuncSetAttribute (warp search)");
  const size_t per_warp = WarpList<Scalar>::bytes(a.k);
  const int warps = static_cast<int>(std::min<size_t>(Policy::kMaxWarps, shared_limit / per_warp));
  if (warps == 0)
    fail(KNN_ERR_UNSUPPORTED, format("this GPU's shared memory cannot hold a k-list of %d", a.k));
  const size_t shared = per_warp * warps;
  search_warp_lists<Scalar, DIM><<<grid_for(a.m, warps), 32 * warps, shared, stream>>>(a);
  check_launch("search_warp_lists");
}

template <class T>
void ensure_capacity(DeviceBuffer<T>& buffer, size_t count) {
  if (buffer.size() < count) buffer.allocate(count);
}

}  // namespace

template <typename Scalar>
void search_bucket_tree(const BucketTreeView<Scalar>& tree, const SearchRequest<Scalar>& r,
                        SearchScratch<Scalar>& scratch, cudaStream_t stream) {
  if (r.m == 0) return;
  const size_t m = static_cast<size_t>(r.m);
  for (auto& keys : scratch.keys) ensure_capacity(keys, m);
  for (auto& order : scratch.order) ensure_capacity(order, m);
  const size_t temp_bytes = pair_sort_temp_bytes(r.m);
  ensure_capacity(scratch.cub_temp, checked_cub_temp(temp_bytes, cub_temp_bytes(r.m)));

  with_static_dim(tree.dim, [&](auto static_dim) {
    leaf_keys<Scalar, decltype(static_dim)::value><<<grid_for(r.m, kBlock), kBlock, 0, stream>>>(
        tree, r.queries, r.m, scratch.keys[0].get(), scratch.order[0].get());
  });
  check_launch("leaf_keys");
  const int32_t* order = scratch.order[0].get();
  const uint32_t* home_key = scratch.keys[0].get();
  const int key_bits = tree.levels + part_bits(tree.levels);
  if (tree.levels > 0) {
    cub::DoubleBuffer<uint32_t> keys(scratch.keys[0].get(), scratch.keys[1].get());
    cub::DoubleBuffer<int32_t> ids(scratch.order[0].get(), scratch.order[1].get());
    size_t bytes = scratch.cub_temp.size();
    check(cub::DeviceRadixSort::SortPairs(scratch.cub_temp.get(), bytes, keys, ids, r.m, 0,
                                          key_bits, stream),
          "cub::DeviceRadixSort::SortPairs (queries by leaf)");
    order = ids.Current();
    home_key = keys.Current();
  }

  KernelArgs<Scalar> a{tree,        r.queries,   order,     home_key,       r.m,
                       r.k,         r.radius_sq, r.indices, r.sq_distances, r.counts,
                       r.row_width, nullptr,     nullptr};
  const ListKind kind = list_kind_for(r.k);
  if (kind == ListKind::kHeap) {
    ensure_capacity(scratch.heap_index, m * r.k);
    ensure_capacity(scratch.heap_dist, m * r.k);
    a.heap_index = scratch.heap_index.get();
    a.heap_dist = scratch.heap_dist.get();
  }
  with_static_dim(tree.dim, [&](auto static_dim) {
    constexpr int D = decltype(static_dim)::value;
    switch (kind) {
      case ListKind::kRegister1: return launch_thread_search<D, 1>(a, stream);
      case ListKind::kRegister8: return launch_thread_search<D, 8>(a, stream);
      case ListKind::kRegister16: return launch_thread_search<D, 16>(a, stream);
      case ListKind::kSharedHeap: return launch_shared_heap_search<D>(a, stream);
      case ListKind::kWarp: return launch_warp_search<D>(a, stream);
      case ListKind::kHeap: return launch_thread_search<D, 0>(a, stream);
    }
  });
}

template <typename Scalar>
void drop_self(const int32_t* wide_index, const Scalar* wide_dist, int64_t count, int64_t first,
               int k, int32_t* indices, Scalar* sq_distances, cudaStream_t stream) {
  if (count == 0) return;
  drop_self_kernel<Scalar><<<grid_for(count, kBlock), kBlock, 0, stream>>>(
      wide_index, wide_dist, count, first, k, indices, sq_distances);
  check_launch("drop_self_kernel");
}

template void search_bucket_tree<float>(const BucketTreeView<float>&, const SearchRequest<float>&,
                                        SearchScratch<float>&, cudaStream_t);
template void search_bucket_tree<double>(const BucketTreeView<double>&,
                                         const SearchRequest<double>&, SearchScratch<double>&,
                                         cudaStream_t);
template void drop_self<float>(const int32_t*, const float*, int64_t, int64_t, int, int32_t*,
                               float*, cudaStream_t);
template void drop_self<double>(const int32_t*, const double*, int64_t, int64_t, int, int32_t*,
                                double*, cudaStream_t);

}  // namespace cuda
}  // namespace knn
