// How a point-in-polygon query decides what to do with one quadtree node for
// one polygon, shared by the two ways the query spreads the work
// (quadtree_query.cu: a warp per (polygon, node) pair, edges over the lanes;
// quadtree_thread_walk.cuh: a thread per small polygon). Both classify nodes
// with classify_node below, so they take the same decisions:
//   - no polygon edge touches the node's closed box (exact separating-axis
//     test with the exact orientation predicate): the node lies in one face
//     of the polygon, so its first point's answer is every point's answer;
//   - an edge touches and the node is a leaf: every point is tested with the
//     shared predicate (common/pip_predicate.h);
//   - an edge touches an internal node: its children that meet the polygon's
//     box are visited.
// The two differ only in who walks the edges: WarpEdges spreads them over the
// lanes of a warp (warp-uniform calls), ThreadEdges loops over them alone.
// P is the points' scalar and V the vertices' (float or double each); a mix
// is tested in pip::Common<P, V>, exactly.
#pragma once

#include <cstdint>

#include "../../common/pip_predicate.h"
#include "quadtree.cuh"
#include "quadtree_geometry.h"

namespace knn {
namespace cuda {
namespace pip_query {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;

template <class V>
struct PolygonsView {
  const V* xy;
  const int64_t* ring_offsets;
  const int64_t* polygon_offsets;
  const Box4<V>* boxes;  // of each polygon's outer ring; empty without rings
};

template <class A, class B>
__device__ bool boxes_meet(const Box4<A>& a, const Box4<B>& b) {
  return a.x <= b.z && b.x <= a.z && a.y <= b.w && b.y <= a.w;
}

// Vertices (= edges, the closing edge included) of all rings of polygon p.
template <class V>
__device__ int64_t polygon_edges(const PolygonsView<V>& polys, int64_t p) {
  return polys.ring_offsets[polys.polygon_offsets[p + 1]] -
         polys.ring_offsets[polys.polygon_offsets[p]];
}

// Walks the edges of rings [r0, r1) in warp-uniform steps of one edge per
// lane: step(has_edge, ax, ay, bx, by) runs on every lane at every step (a
// lane past its ring's end has no edge, and zeros), so that it may use warp
// intrinsics; its result, which must be warp-uniform, true stops the walk.
template <class V, class Step>
__device__ void for_warp_edge_steps(const PolygonsView<V>& polys, int64_t r0, int64_t r1, int lane,
                                    Step step) {
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = polys.ring_offsets[r];
    const int64_t e = polys.ring_offsets[r + 1];
    if (e - b < 2) continue;  // as pip::ring_crossing_parity
    for (int64_t base = b; base < e; base += kWarp) {
      const int64_t v = base + lane;
      const bool has_edge = v < e;
      V ax = 0, ay = 0, bx = 0, by = 0;
      if (has_edge) {
        const int64_t u = v == b ? e - 1 : v - 1;
        ax = polys.xy[2 * u], ay = polys.xy[2 * u + 1];
        bx = polys.xy[2 * v], by = polys.xy[2 * v + 1];
      }
      if (step(has_edge, ax, ay, bx, by)) return;
    }
  }
}

// Calls visit(ax, ay, bx, by) for the edges of rings [r0, r1), each edge on
// one lane, in warp-uniform steps; stops early when visit's results, OR-ed
// over the warp, say so (kStopOnAny). Returns the lane's XOR of the results.
template <bool kStopOnAny, class V, class Visit>
__device__ bool for_warp_edges(const PolygonsView<V>& polys, int64_t r0, int64_t r1, int lane,
                               Visit visit) {
  bool acc = false, stopped = false;
  for_warp_edge_steps(polys, r0, r1, lane, [&](bool has_edge, V ax, V ay, V bx, V by) {
    if (has_edge) {
      const bool hit = visit(ax, ay, bx, by);
      acc = kStopOnAny ? (acc || hit) : (acc != hit);
    }
    stopped = kStopOnAny && __any_sync(kFullMask, acc);
    return stopped;
  });
  return stopped || acc;
}

// The edges of one polygon (rings [r0, r1)) walked by a whole warp; every
// call must be made by all lanes with the same arguments.
template <class V>
struct WarpEdges {
  const PolygonsView<V>& polys;
  int64_t r0, r1;
  int lane;

  template <class P>
  __device__ bool meet_box(const Box4<P>& box) const {
    return for_warp_edges<true>(polys, r0, r1, lane, [&](V ax, V ay, V bx, V by) {
      return quadtree::segment_meets_box<pip::Common<P, V>>(ax, ay, bx, by, box.x, box.y, box.z,
                                                            box.w);
    });
  }
  // pip::inside_polygon, with the edges spread over the warp.
  template <class P>
  __device__ bool inside(P px, P py) const {
    const bool parity = for_warp_edges<false>(polys, r0, r1, lane, [&](V ax, V ay, V bx, V by) {
      return pip::edge_crosses_ray<pip::Common<P, V>>(ax, ay, bx, by, px, py);
    });
    return (__popc(__ballot_sync(kFullMask, parity)) & 1) != 0;
  }
};

// The edges of one polygon walked by one thread.
template <class V>
struct ThreadEdges {
  const PolygonsView<V>& polys;
  int64_t r0, r1;

  template <class P>
  __device__ bool meet_box(const Box4<P>& box) const {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = polys.ring_offsets[r];
      const int64_t e = polys.ring_offsets[r + 1];
      if (e - b < 2) continue;  // as pip::ring_crossing_parity
      for (int64_t v = b, u = e - 1; v < e; u = v++)
        if (quadtree::segment_meets_box<pip::Common<P, V>>(polys.xy[2 * u], polys.xy[2 * u + 1],
                                                           polys.xy[2 * v], polys.xy[2 * v + 1],
                                                           box.x, box.y, box.z, box.w))
          return true;
    }
    return false;
  }
  template <class P>
  __device__ bool inside(P px, P py) const {
    return pip::inside_polygon(px, py, polys.xy, polys.ring_offsets, r0, r1);
  }
};

enum class NodeClass {
  kOutside,  // no edge touches the node; its points are all outside
  kInside,   // no edge touches the node; its points are all inside
  kLeaf,     // an edge touches a leaf: test each point
  kDescend,  // an edge touches an internal node: visit its children
};

template <class Edges, class P>
__device__ NodeClass classify_node(const Edges& edges, const QuadtreeView<P>& tree,
                                   const QuadNode<P>& node) {
  if (!edges.meet_box(node.box)) {
    const Coord2<P> p = tree.xy[node.begin];
    return edges.inside(p.x, p.y) ? NodeClass::kInside : NodeClass::kOutside;
  }
  return node.first_child < 0 ? NodeClass::kLeaf : NodeClass::kDescend;
}

}  // namespace pip_query
}  // namespace cuda
}  // namespace knn
