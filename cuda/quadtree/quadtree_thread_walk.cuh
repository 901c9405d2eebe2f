// Point-in-polygon for many polygons of few edges: one thread per polygon
// walks the quadtree depth first with a stack in registers/local memory,
// classifying nodes as the warp path does (quadtree_node_class.cuh).
//
// Why: the warp-per-pair path spreads a polygon's edges over 32 lanes, so a
// 4-edge rectangle leaves 28 lanes idle on every (polygon, node) pair, and
// it materialises every level of pairs in global memory with a host round
// trip per level. A thread walking its polygon alone keeps every lane busy
// (32 polygons per warp), needs no pair lists and no launches per level, and
// sums counts in a register. Up to 32 edges the thread does per node at most
// the lane-steps the warp path spends on it, so the split point is there.
//
// Results are the warp path's: the same classification, the same predicate;
// counts are sums, and fill output is sorted per polygon afterwards.
#pragma once

#include <cstdint>

#include "../../common/quadtree_layout.h"
#include "quadtree.cuh"
#include "quadtree_node_class.cuh"

namespace knn {
namespace cuda {
namespace pip_query {

// Polygons with at most this many edges (all rings) take the thread path...
constexpr int64_t kThreadPathMaxEdges = 32;
// ...when a call has at least this many of them. With fewer, too few threads
// run and the longest walk sets the time, while the warp path's pairs
// multiply by up to 4 per level and soon fill the device. (Reasoned, not
// measured: tune on the device.)
constexpr int64_t kThreadPathMinPolygons = 4096;

// The stack bound: children are pushed only when their parent is popped, so
// along the current path at most 3 siblings wait per depth 1 .. kMaxDepth-1
// and at most 4 at the deepest (nodes at kMaxDepth are leaves: the build
// splits no further), 3 * kMaxDepth + 1 in all.
constexpr int kThreadStack = 3 * quadtree::kMaxDepth + 1;

// Counting: a per-thread sum, stored once (each polygon has one thread).
struct ThreadCount {
  unsigned long long* counts;
  unsigned long long sum = 0;

  __device__ void start(int32_t) {}
  __device__ void whole_range(int64_t begin, int64_t end, const int32_t*) {
    sum += static_cast<unsigned long long>(end - begin);
  }
  __device__ void point(int64_t, const int32_t*) { ++sum; }
  __device__ void finish(int32_t polygon) { counts[polygon] = sum; }
};

// A whole node of at least this many points is copied after the walk
// (copy_deferred_ranges) rather than by the thread or warp that found it: a
// few polygons covering millions of points would otherwise be written one
// index (thread path) or 32 (warp path) at a time while the rest of the
// device waits.
constexpr int64_t kDeferredRangeMin = 128;
// Deferred ranges are cut into pieces of at most this many points, a warp
// each, so one huge node does not hold up the copy either.
constexpr int64_t kDeferredPiece = 4096;

struct DeferredRange {
  int64_t at;     // output position, relative to the chunk
  int64_t begin;  // sorted points [begin, end)
  int64_t end;
};

// The deferred pieces of one fill chunk. A range of L >= kDeferredRangeMin
// points makes ceil(L / kDeferredPiece) <= L / kDeferredRangeMin pieces, so
// a chunk of `items` outputs has at most items / kDeferredRangeMin of them.
struct DeferredRanges {
  DeferredRange* pieces;
  unsigned long long* count;

  // Called by one thread for the range [begin, end) written at `at`.
  __device__ void add(int64_t at, int64_t begin, int64_t end) const {
    const int64_t n = (end - begin + kDeferredPiece - 1) / kDeferredPiece;
    const int64_t slot = static_cast<int64_t>(atomicAdd(count, static_cast<unsigned long long>(n)));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t from = begin + i * kDeferredPiece;
      pieces[slot + i] =
          DeferredRange{at + i * kDeferredPiece, from, min(end, from + kDeferredPiece)};
    }
  }
};

// Where a fill chunk writes, for both paths: polygon p of the chunk appends
// inside its segment of `out`, [out_offsets[p], out_offsets[p + 1]) less
// chunk_base; one that would run past its end (offsets that disagree with the
// points) raises `overflow` instead of writing. Whole nodes of
// kDeferredRangeMin points or more go to `deferred`, copied after the walk.
struct FillTarget {
  int32_t first_polygon;
  unsigned long long* cursors;  // per polygon of the chunk
  const int64_t* out_offsets;   // all polygons, n_polygons + 1
  int64_t chunk_base;           // out_offsets[first_polygon]
  int32_t* out;
  int* overflow;
  DeferredRanges deferred;
};

// Filling: the thread appends at its polygon's cursor and stops writing
// where its segment ends. The final cursor goes to `cursors` for the
// short-polygon check.
struct ThreadFill {
  FillTarget target;
  int64_t at = 0, end = 0;

  __device__ void start(int32_t polygon) {
    at = target.out_offsets[polygon] - target.chunk_base;
    end = target.out_offsets[polygon + 1] - target.chunk_base;
  }
  __device__ bool reserve(int64_t items) {
    if (at + items <= end) return true;
    atomicExch(target.overflow, 1);
    at = end + 1;  // stays past the end: later writes fail too
    return false;
  }
  __device__ void whole_range(int64_t begin, int64_t stop, const int32_t* ids) {
    if (!reserve(stop - begin)) return;
    if (stop - begin >= kDeferredRangeMin)
      target.deferred.add(at, begin, stop);
    else
      for (int64_t j = begin; j < stop; ++j) target.out[at + (j - begin)] = ids[j];
    at += stop - begin;
  }
  __device__ void point(int64_t j, const int32_t* ids) {
    if (reserve(1)) target.out[at++] = ids[j];
  }
  __device__ void finish(int32_t polygon) {
    target.cursors[polygon - target.first_polygon] = static_cast<unsigned long long>(at);
  }
};

// Polygons [first, last) with at most max_edges edges, a thread each.
template <class P, class V, class Tally>
__global__ void walk_small_polygons(QuadtreeView<P> tree, PolygonsView<V> polys, int32_t first,
                                    int32_t last, int64_t max_edges, Tally tally) {
  const int64_t p = first + blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (p >= last || polygon_edges(polys, p) > max_edges) return;
  const int32_t polygon = static_cast<int32_t>(p);
  const ThreadEdges<V> edges{polys, polys.polygon_offsets[p], polys.polygon_offsets[p + 1]};
  const Box4<V> polygon_box = polys.boxes[p];
  int32_t stack[kThreadStack];
  int top = 0;
  if (boxes_meet(tree.nodes[0].box, polygon_box)) stack[top++] = 0;
  tally.start(polygon);
  while (top > 0) {
    const QuadNode<P> node = tree.nodes[stack[--top]];
    switch (classify_node(edges, tree, node)) {
      case NodeClass::kOutside: break;
      case NodeClass::kInside: tally.whole_range(node.begin, node.end, tree.ids); break;
      case NodeClass::kLeaf:
        for (int64_t j = node.begin; j < node.end; ++j) {
          const Coord2<P> q = tree.xy[j];
          if (edges.inside(q.x, q.y)) tally.point(j, tree.ids);
        }
        break;
      case NodeClass::kDescend:
        // Reversed, so that children pop in Morton order.
        for (int c = node.child_count - 1; c >= 0; --c)
          if (boxes_meet(tree.nodes[node.first_child + c].box, polygon_box))
            stack[top++] = node.first_child + c;
        break;
    }
  }
  tally.finish(polygon);
}

// Copies the deferred pieces of a fill chunk, a warp per piece.
inline __global__ void copy_deferred_ranges(const DeferredRange* ranges, int64_t count,
                                            const int32_t* ids, int32_t* out) {
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / kWarp);
  const int lane = threadIdx.x % kWarp;
  for (int64_t r = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / kWarp; r < count;
       r += warps) {
    const DeferredRange range = ranges[r];
    for (int64_t j = range.begin + lane; j < range.end; j += kWarp)
      out[range.at + (j - range.begin)] = ids[j];
  }
}

}  // namespace pip_query
}  // namespace cuda
}  // namespace knn
