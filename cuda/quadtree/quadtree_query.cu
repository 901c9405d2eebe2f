// Point-in-polygon queries against the GPU quadtree (layout: quadtree.cuh).
//
// Each (polygon, node) visit takes one of the decisions of classify_node
// (quadtree_node_class.cuh): the node whole (in or out), its points one by
// one, or its children that meet the polygon's box. Two paths make those
// visits:
//   - many polygons of few edges: a thread per polygon walks the tree depth
//     first (quadtree_thread_walk.cuh);
//   - the others: work items are (polygon, node) pairs, one warp each, with
//     the polygon's edges spread over the lanes (crossing parity is a XOR
//     over edges), so polygons of 10^5 vertices run as fast as the warp
//     allows. A pair starts at the root for every polygon whose box meets the
//     tree's box; the children kept become pairs of the next level.
//
// Memory stays bounded: pairs are visited in slices of kSlicePairs, and the
// children of one slice are visited (recursively, depth first over slices)
// before the next slice, so each level holds at most 4 * kSlicePairs pairs.
// Results do not depend on the path or the visiting order: counts are
// integer sums, and fill sorts each polygon's indices afterwards (CUB
// segmented sort), so the answer is the OpenMP engine's, bit for bit.
//
// Every kernel is a template over the points' scalar P and the vertices'
// scalar V (float or double each): one code path for all precisions.
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <cub/device/device_segmented_sort.cuh>

#include <algorithm>
#include <vector>

#include "../../common/pip_predicate.h"
#include "../../common/quadtree_layout.h"
#include "../../engine/cancel.h"
#include "../cuda_engine.h"
#include "quadtree.cuh"
#include "quadtree_node_class.cuh"
#include "quadtree_thread_walk.cuh"

namespace knn {
namespace cuda {
namespace {

using namespace pip_query;

// Pairs visited per launch; also the most polygons started at once.
constexpr int64_t kSlicePairs = int64_t{1} << 18;
// Emitted indices of one fill chunk: int32 out and sorted, int64 widened
// (unless the output is on the device), and (less than) a byte for the
// deferred ranges.
constexpr size_t kFillBytesPerItem = 4 + 4 + 8 + 1;
static_assert(sizeof(DeferredRange) <= kDeferredRangeMin,
              "a deferred range costs under a byte per item");
constexpr int64_t kMinFillChunkItems = int64_t{1} << 20;

struct Pair {
  int32_t polygon;
  int32_t node;
};

// Counting: sums per polygon.
struct CountSink {
  unsigned long long* counts;

  __device__ void whole_range(int32_t polygon, int64_t begin, int64_t end, const int32_t*,
                              int lane) const {
    if (lane == 0) atomicAdd(counts + polygon, static_cast<unsigned long long>(end - begin));
  }
  // `inside`: ballot of the lanes whose point (sorted position j) is inside.
  __device__ void points(int32_t polygon, unsigned inside, int64_t, const int32_t*,
                         int lane) const {
    if (lane == 0 && inside != 0)
      atomicAdd(counts + polygon, static_cast<unsigned long long>(__popc(inside)));
  }
};

// Filling: the warp appends at its polygon's cursor, reserved atomically (the
// polygon's pairs run on many warps).
struct FillSink {
  FillTarget target;

  __device__ int64_t reserve(int32_t polygon, int64_t items, int lane) const {
    int64_t at = 0;
    if (lane == 0) {
      at = static_cast<int64_t>(atomicAdd(target.cursors + (polygon - target.first_polygon),
                                          static_cast<unsigned long long>(items)));
      if (at + items > target.out_offsets[polygon + 1] - target.chunk_base) {
        atomicExch(target.overflow, 1);
        at = -1;
      }
    }
    return __shfl_sync(kFullMask, at, 0);
  }
  __device__ void whole_range(int32_t polygon, int64_t begin, int64_t end, const int32_t* ids,
                              int lane) const {
    const int64_t at = reserve(polygon, end - begin, lane);
    if (at < 0) return;
    if (end - begin >= kDeferredRangeMin) {
      if (lane == 0) target.deferred.add(at, begin, end);
      return;
    }
    for (int64_t j = begin + lane; j < end; j += kWarp) target.out[at + (j - begin)] = ids[j];
  }
  __device__ void points(int32_t polygon, unsigned inside, int64_t j, const int32_t* ids,
                         int lane) const {
    if (inside == 0) return;
    const int64_t at = reserve(polygon, __popc(inside), lane);
    if (at < 0 || !(inside >> lane & 1u)) return;
    target.out[at + __popc(inside & ((1u << lane) - 1u))] = ids[j];
  }
};

// Tests the points of a leaf, one per lane, against only the edges that can
// cross their rays. pip::edge_crosses_ray counts an edge for a point at
// height y only when y lies in [min(a.y, b.y), max(a.y, b.y)), and every
// point of the node has y in [box.y, box.w]; an edge whose y-range misses
// that interval counts for none of them and is skipped, exactly. Near a small
// leaf that leaves a handful of a polygon's edges: the warp loads 32 edges at
// a time, one per lane, and broadcasts the ones that may count to every lane.
template <class P, class V, class Sink>
__device__ void test_leaf_points(const QuadtreeView<P>& tree, const PolygonsView<V>& polys,
                                 int64_t r0, int64_t r1, int32_t polygon, const QuadNode<P>& node,
                                 int lane, const Sink& sink) {
  const P y0 = node.box.y, y1 = node.box.w;
  for (int64_t base = node.begin; base < node.end; base += kWarp) {
    const int64_t j = base + lane;
    const bool has_point = j < node.end;
    const Coord2<P> p = tree.xy[has_point ? j : base];
    bool parity = false;
    for_warp_edge_steps(polys, r0, r1, lane, [&](bool has_edge, V ax, V ay, V bx, V by) {
      const bool may_count = has_edge && min_of(ay, by) <= y1 && max_of(ay, by) > y0;
      for (unsigned edges = __ballot_sync(kFullMask, may_count); edges != 0; edges &= edges - 1) {
        const int from = __ffs(edges) - 1;
        const V eax = __shfl_sync(kFullMask, ax, from), eay = __shfl_sync(kFullMask, ay, from);
        const V ebx = __shfl_sync(kFullMask, bx, from), eby = __shfl_sync(kFullMask, by, from);
        parity = parity != pip::edge_crosses_ray<pip::Common<P, V>>(eax, eay, ebx, eby, p.x, p.y);
      }
      return false;
    });
    sink.points(polygon, __ballot_sync(kFullMask, has_point && parity), j, tree.ids, lane);
  }
}

template <class P, class V, class Sink>
__global__ void __launch_bounds__(kBlock)
    visit_pairs(QuadtreeView<P> tree, PolygonsView<V> polys, const Pair* pairs, int64_t count,
                Pair* next, unsigned long long* next_count, Sink sink) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = int64_t{gridDim.x} * kBlockWarps;
  for (int64_t w = blockIdx.x * int64_t{kBlockWarps} + threadIdx.x / kWarp; w < count; w += warps) {
    const Pair pair = pairs[w];
    const QuadNode<P> node = tree.nodes[pair.node];
    const int64_t r0 = polys.polygon_offsets[pair.polygon];
    const int64_t r1 = polys.polygon_offsets[pair.polygon + 1];
    const WarpEdges<V> edges{polys, r0, r1, lane};
    const NodeClass kind = classify_node(edges, tree, node);
    if (kind == NodeClass::kInside) {
      sink.whole_range(pair.polygon, node.begin, node.end, tree.ids, lane);
    } else if (kind == NodeClass::kLeaf) {
      test_leaf_points(tree, polys, r0, r1, pair.polygon, node, lane, sink);
    } else if (kind == NodeClass::kDescend) {
      const Box4<V> polygon_box = polys.boxes[pair.polygon];
      const bool keep = lane < node.child_count &&
                        boxes_meet(tree.nodes[node.first_child + lane].box, polygon_box);
      const unsigned kept = __ballot_sync(kFullMask, keep);
      unsigned long long at = 0;
      if (lane == 0 && kept != 0) at = atomicAdd(next_count, __popc(kept));
      at = __shfl_sync(kFullMask, at, 0);
      if (keep)
        next[at + __popc(kept & ((1u << lane) - 1u))] = Pair{pair.polygon, node.first_child + lane};
    }
  }
}

// Box of each polygon's outer ring, a warp per polygon.
template <class V>
__global__ void polygon_boxes(PolygonsView<V> polys, int64_t n_polygons, Box4<V>* boxes) {
  const int lane = threadIdx.x % kWarp;
  const int64_t p = blockIdx.x * int64_t{kBlockWarps} + threadIdx.x / kWarp;
  if (p >= n_polygons) return;
  const V inf = static_cast<V>(__builtin_huge_val());
  Box4<V> box{inf, inf, -inf, -inf};
  const int64_t r0 = polys.polygon_offsets[p];
  if (r0 < polys.polygon_offsets[p + 1]) {
    for (int64_t v = polys.ring_offsets[r0] + lane; v < polys.ring_offsets[r0 + 1]; v += kWarp) {
      const V x = polys.xy[2 * v], y = polys.xy[2 * v + 1];
      box = Box4<V>{min_of(box.x, x), min_of(box.y, y), max_of(box.z, x), max_of(box.w, y)};
    }
  }
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    box.x = min_of(box.x, __shfl_xor_sync(kFullMask, box.x, offset));
    box.y = min_of(box.y, __shfl_xor_sync(kFullMask, box.y, offset));
    box.z = max_of(box.z, __shfl_xor_sync(kFullMask, box.z, offset));
    box.w = max_of(box.w, __shfl_xor_sync(kFullMask, box.w, offset));
  }
  if (lane == 0) boxes[p] = box;
}

// Root pairs of polygons [first, last) whose box meets the tree's, but for
// those of at most thread_max_edges edges (the thread path's).
template <class P, class V>
__global__ void root_pairs(const QuadNode<P>* nodes, PolygonsView<V> polys, int32_t first,
                           int32_t last, int64_t thread_max_edges, Pair* pairs,
                           unsigned long long* count) {
  const int64_t p = first + blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (p >= last || polygon_edges(polys, p) <= thread_max_edges) return;
  if (boxes_meet(nodes[0].box, polys.boxes[p]))
    pairs[atomicAdd(count, 1ull)] = Pair{static_cast<int32_t>(p), 0};
}

__global__ void start_cursors(const int64_t* out_offsets, int32_t first, int32_t last,
                              unsigned long long* cursors) {
  const int64_t p = first + blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (p >= last) return;
  cursors[p - first] = static_cast<unsigned long long>(out_offsets[p] - out_offsets[first]);
}

// The first polygon of the chunk whose cursor did not reach its segment's end
// (fewer points than out_offsets promise), into *first_short.
__global__ void find_short_polygon(const int64_t* out_offsets, int32_t first, int32_t last,
                                   const unsigned long long* cursors, int* first_short) {
  const int64_t p = first + blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (p >= last) return;
  if (static_cast<int64_t>(cursors[p - first]) != out_offsets[p + 1] - out_offsets[first])
    atomicMin(first_short, static_cast<int>(p));
}

__global__ void widen(const int32_t* in, int64_t count, int64_t* out) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < count) out[i] = in[i];
}

struct SegmentOffset {
  const int64_t* out_offsets;
  int64_t base;
  __host__ __device__ int64_t operator()(int64_t p) const { return out_offsets[p] - base; }
};

// Polygon ids are 32-bit in the work items.
void require_polygon_count(int64_t n_polygons) {
  if (n_polygons > int64_t{0x7ffffffe})
    fail(KNN_ERR_UNSUPPORTED, format("the CUDA quadtree takes fewer than 2^31 polygons per call, "
                                     "not %lld",
                                     static_cast<long long>(n_polygons)));
}

// The polygons of one call on the device, with their boxes.
template <class V>
class DevicePolygons {
 public:
  DevicePolygons(const PolygonSet<V>& set, cudaStream_t stream)
      : xy_(static_cast<size_t>(2 * set.n_vertices)),
        ring_offsets_(static_cast<size_t>(set.n_rings + 1)),
        polygon_offsets_(static_cast<size_t>(set.n_polygons + 1)),
        boxes_(static_cast<size_t>(set.n_polygons)) {
    copy(xy_.get(), set.xy, xy_.size() * sizeof(V), stream);
    copy(ring_offsets_.get(), set.ring_offsets, ring_offsets_.size() * sizeof(int64_t), stream);
    copy(polygon_offsets_.get(), set.polygon_offsets, polygon_offsets_.size() * sizeof(int64_t),
         stream);
    const PolygonsView<V> v = view();
    if (set.n_polygons > 0) {
      polygon_boxes<<<grid_for(set.n_polygons, kBlockWarps), kBlock, 0, stream>>>(v, set.n_polygons,
                                                                                  boxes_.get());
      check_launch("point in polygon: polygon_boxes");
    }
  }
  PolygonsView<V> view() const {
    return {xy_.get(), ring_offsets_.get(), polygon_offsets_.get(), boxes_.get()};
  }

 private:
  static void copy(void* to, const void* from, size_t bytes, cudaStream_t stream) {
    if (bytes > 0)
      check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, stream),
            "point in polygon: copying the polygons to the device");
  }
  DeviceBuffer<V> xy_;
  DeviceBuffer<int64_t> ring_offsets_;
  DeviceBuffer<int64_t> polygon_offsets_;
  DeviceBuffer<Box4<V>> boxes_;
};

// The thread path's edge limit for one call (quadtree_thread_walk.cuh); 0
// sends every polygon down the warp path.
template <class V>
int64_t thread_path_max_edges(const PolygonSet<V>& set) {
  int64_t small = 0;
  for (int64_t p = 0; p < set.n_polygons; ++p)
    if (set.ring_offsets[set.polygon_offsets[p + 1]] - set.ring_offsets[set.polygon_offsets[p]] <=
        kThreadPathMaxEdges)
      ++small;
  return small >= kThreadPathMinPolygons ? kThreadPathMaxEdges : 0;
}

// Visits one chunk of polygons: those of at most thread_max_edges edges a
// thread each (walk_small_polygons, with `Tally`), the others as (polygon,
// node) pairs slice by slice, depth first (visit_pairs, with `Sink`).
template <class P, class V, class Sink, class Tally>
class PolygonWalk {
 public:
  PolygonWalk(QuadtreeView<P> tree, PolygonsView<V> polys, int64_t thread_max_edges,
              cudaStream_t stream)
      : tree_(tree),
        polys_(polys),
        thread_max_edges_(thread_max_edges),
        stream_(stream),
        cancel_(cancel_flag()),
        counters_(quadtree::kMaxDepth + 2) {}

  void run(int32_t first, int32_t last, const Sink& sink, const Tally& tally) {
    throw_if_cancelled(cancel_);
    if (thread_max_edges_ > 0) {
      walk_small_polygons<<<grid_for(last - first, kBlock), kBlock, 0, stream_>>>(
          tree_, polys_, first, last, thread_max_edges_, tally);
      check_launch("point in polygon: walk_small_polygons");
    }
    Pair* roots = level(0, kSlicePairs);
    check(cudaMemsetAsync(counters_.get(), 0, sizeof(unsigned long long), stream_),
          "point in polygon: cudaMemsetAsync");
    root_pairs<<<grid_for(last - first, kBlock), kBlock, 0, stream_>>>(
        tree_.nodes, polys_, first, last, thread_max_edges_, roots, counters_.get());
    check_launch("point in polygon: root_pairs");
    visit(0, roots, static_cast<int64_t>(read_back(counters_.get(), stream_, "point in polygon")),
          sink);
  }

 private:
  Pair* level(size_t depth, int64_t capacity) {
    if (levels_.size() <= depth) levels_.resize(depth + 1);
    if (levels_[depth].size() < static_cast<size_t>(capacity))
      levels_[depth].allocate(static_cast<size_t>(capacity));
    return levels_[depth].get();
  }

  void visit(int depth, const Pair* pairs, int64_t count, const Sink& sink) {
    for (int64_t start = 0; start < count; start += kSlicePairs) {
      throw_if_cancelled(cancel_);
      const int64_t slice = std::min(kSlicePairs, count - start);
      Pair* next = level(static_cast<size_t>(depth) + 1, 4 * kSlicePairs);
      unsigned long long* next_count = counters_.get() + depth + 1;
      check(cudaMemsetAsync(next_count, 0, sizeof *next_count, stream_),
            "point in polygon: cudaMemsetAsync");
      const unsigned blocks = grid_for(slice, kBlockWarps);
      visit_pairs<<<blocks, kBlock, 0, stream_>>>(tree_, polys_, pairs + start, slice, next,
                                                  next_count, sink);
      check_launch("point in polygon: visit_pairs");
      const int64_t children =
          static_cast<int64_t>(read_back(next_count, stream_, "point in polygon"));
      if (children > 0) visit(depth + 1, next, children, sink);
    }
  }

  QuadtreeView<P> tree_;
  PolygonsView<V> polys_;
  int64_t thread_max_edges_;
  cudaStream_t stream_;
  const volatile int* cancel_;                 // read before every chunk and slice
  DeviceBuffer<unsigned long long> counters_;  // pairs found per depth
  std::vector<DeviceBuffer<Pair>> levels_;
};

}  // namespace

template <class P>
template <class V>
void CudaQuadtree<P>::count_polygons(const PolygonSet<V>& polygons, int64_t* counts,
                                     const QuadtreeParams&) const {
  if (polygons.n_polygons == 0) return;
  require_polygon_count(polygons.n_polygons);
  DeviceScope scope(device_);
  Stream stream;
  const cudaStream_t s = stream.get();
  const DevicePolygons<V> polys(polygons, s);
  DeviceBuffer<unsigned long long> sums(static_cast<size_t>(polygons.n_polygons));
  check(cudaMemsetAsync(sums.get(), 0, sums.size() * sizeof(unsigned long long), s),
        "point in polygon: cudaMemsetAsync");
  if (n_ > 0) {
    PolygonWalk<P, V, CountSink, ThreadCount> walk(view(), polys.view(),
                                                   thread_path_max_edges(polygons), s);
    for (int64_t first = 0; first < polygons.n_polygons; first += kSlicePairs) {
      const int64_t last = std::min(first + kSlicePairs, polygons.n_polygons);
      walk.run(static_cast<int32_t>(first), static_cast<int32_t>(last), CountSink{sums.get()},
               ThreadCount{sums.get()});
    }
  }
  static_assert(sizeof(unsigned long long) == sizeof(int64_t), "counts are copied as they are");
  check(cudaMemcpyAsync(counts, sums.get(), sums.size() * sizeof(int64_t), cudaMemcpyDefault, s),
        "point in polygon: copying the counts");
  stream.synchronize();
}

template <class P>
template <class V>
void CudaQuadtree<P>::fill_polygons(const PolygonSet<V>& polygons, const int64_t* out_offsets,
                                    int64_t* point_indices, const QuadtreeParams& call) const {
  const int64_t n_polygons = polygons.n_polygons;
  if (n_polygons == 0 || out_offsets[n_polygons] == out_offsets[0]) return;
  require_polygon_count(n_polygons);
  DeviceScope scope(device_);
  Stream stream;
  const cudaStream_t s = stream.get();
  const DevicePolygons<V> polys(polygons, s);
  DeviceBuffer<int64_t> offsets(static_cast<size_t>(n_polygons + 1));
  check(cudaMemcpyAsync(offsets.get(), out_offsets, offsets.size() * sizeof(int64_t),
                        cudaMemcpyDefault, s),
        "point in polygon: copying out_offsets");

  // Chunks of whole polygons whose output fits in half the call's budget.
  const size_t budget = device_budget(call.device_memory_limit).bytes();
  const int64_t chunk_items =
      std::max(kMinFillChunkItems, static_cast<int64_t>(budget / 2 / kFillBytesPerItem));

  const bool direct_output = device_may_use_in_place(point_indices, device_);
  DeviceBuffer<int32_t> out, sorted;
  DeviceBuffer<int64_t> wide;
  DeviceBuffer<unsigned long long> cursors(static_cast<size_t>(std::min(kSlicePairs, n_polygons)));
  DeviceBuffer<int> flags(2);  // overflow, first short polygon
  CubScratch scratch(s);
  DeviceBuffer<DeferredRange> deferred;
  DeviceBuffer<unsigned long long> deferred_count(1);
  PolygonWalk<P, V, FillSink, ThreadFill> walk(view(), polys.view(),
                                               thread_path_max_edges(polygons), s);
  for (int64_t first = 0; first < n_polygons;) {
    throw_if_cancelled(cancel_flag());
    int64_t last = first + 1;
    while (last < n_polygons && last - first < kSlicePairs &&
           out_offsets[last + 1] - out_offsets[first] <= chunk_items)
      ++last;
    const int64_t base = out_offsets[first];
    const int64_t items = out_offsets[last] - base;
    if (items > 0) {
      if (out.size() < static_cast<size_t>(items)) {
        stream.synchronize();
        out.allocate(static_cast<size_t>(items));
        sorted.allocate(static_cast<size_t>(items));
        deferred.allocate(static_cast<size_t>(items / kDeferredRangeMin + 1));
      }
      const int32_t f = static_cast<int32_t>(first), l = static_cast<int32_t>(last);
      const unsigned grid = grid_for(last - first, kBlock);
      start_cursors<<<grid, kBlock, 0, s>>>(offsets.get(), f, l, cursors.get());
      check_launch("point in polygon: start_cursors");
      const int no_short[2] = {0, 0x7fffffff};
      check(cudaMemcpyAsync(flags.get(), no_short, sizeof no_short, cudaMemcpyHostToDevice, s),
            "point in polygon: cudaMemcpyAsync");
      if (n_ > 0) {
        check(cudaMemsetAsync(deferred_count.get(), 0, sizeof(unsigned long long), s),
              "point in polygon: cudaMemsetAsync");
        const FillTarget target{f,
                                cursors.get(),
                                offsets.get(),
                                base,
                                out.get(),
                                flags.get(),
                                DeferredRanges{deferred.get(), deferred_count.get()}};
        walk.run(f, l, FillSink{target}, ThreadFill{target});
        const int64_t ranges =
            static_cast<int64_t>(read_back(deferred_count.get(), s, "point in polygon"));
        if (ranges > 0) {
          copy_deferred_ranges<<<grid_for(ranges, kBlockWarps), kBlock, 0, s>>>(
              deferred.get(), ranges, ids_.get(), out.get());
          check_launch("point in polygon: copy_deferred_ranges");
        }
      }
      find_short_polygon<<<grid, kBlock, 0, s>>>(offsets.get(), f, l, cursors.get(),
                                                 flags.get() + 1);
      check_launch("point in polygon: find_short_polygon");
      int found[2];
      check(cudaMemcpyAsync(found, flags.get(), sizeof found, cudaMemcpyDeviceToHost, s),
            "point in polygon: cudaMemcpyAsync");
      stream.synchronize();
      if (found[0] != 0 || found[1] != 0x7fffffff)
        fail(KNN_ERR_INVALID_ARGUMENT,
             format("out_offsets disagree with the number of points inside polygons %lld..%lld "
                    "(first short: %lld); take them from knn_points_in_polygons_count",
                    static_cast<long long>(first), static_cast<long long>(last - 1),
                    found[1] != 0x7fffffff ? static_cast<long long>(found[1]) : -1LL));
      const auto begins = thrust::make_transform_iterator(thrust::counting_iterator<int64_t>(first),
                                                          SegmentOffset{offsets.get(), base});
      const auto ends = thrust::make_transform_iterator(
          thrust::counting_iterator<int64_t>(first + 1), SegmentOffset{offsets.get(), base});
      scratch.run(
          [&](void* t, size_t& b) {
            return cub::DeviceSegmentedSort::SortKeys(t, b, out.get(), sorted.get(), items,
                                                      last - first, begins, ends, s);
          },
          "point in polygon: sorting each polygon's indices");
      // Output on this device is written in place; elsewhere it is staged.
      if (direct_output) {
        widen<<<grid_for(items, kBlock), kBlock, 0, s>>>(sorted.get(), items, point_indices + base);
        check_launch("point in polygon: widen");
      } else {
        if (wide.size() < static_cast<size_t>(items)) {
          stream.synchronize();
          wide.allocate(static_cast<size_t>(items));
        }
        widen<<<grid_for(items, kBlock), kBlock, 0, s>>>(sorted.get(), items, wide.get());
        check_launch("point in polygon: widen");
        check(cudaMemcpyAsync(point_indices + base, wide.get(),
                              static_cast<size_t>(items) * sizeof(int64_t), cudaMemcpyDefault, s),
              "point in polygon: copying the indices");
      }
      stream.synchronize();
    }
    first = last;
  }
}

template <class P>
void CudaQuadtree<P>::count(const PolygonSet<float>& polygons, int64_t* counts,
                            const QuadtreeParams& call) const {
  count_polygons(polygons, counts, call);
}

template <class P>
void CudaQuadtree<P>::count(const PolygonSet<double>& polygons, int64_t* counts,
                            const QuadtreeParams& call) const {
  count_polygons(polygons, counts, call);
}

template <class P>
void CudaQuadtree<P>::fill(const PolygonSet<float>& polygons, const int64_t* out_offsets,
                           int64_t* point_indices, const QuadtreeParams& call) const {
  fill_polygons(polygons, out_offsets, point_indices, call);
}

template <class P>
void CudaQuadtree<P>::fill(const PolygonSet<double>& polygons, const int64_t* out_offsets,
                           int64_t* point_indices, const QuadtreeParams& call) const {
  fill_polygons(polygons, out_offsets, point_indices, call);
}

template class CudaQuadtree<float>;
template class CudaQuadtree<double>;

}  // namespace cuda
}  // namespace knn
