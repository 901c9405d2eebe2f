// The searches of the OpenMP mesh engine over its BVH (mesh_tree.h): the
// nearest triangle of a point, and the solid angle of the mesh seen from a
// point (the winding number's sum). Headers, so that the tests can check the
// sum against the exact one.
//
// The nearest triangle: the tree is walked depth first, the nearer child
// first, with the least squared distance found so far as the bound (starting
// at max_distance squared): a child whose box is strictly farther than the
// bound is skipped, so every triangle at the bound's distance is measured
// and the tie rule (geometry::is_closer, the smaller id) decides as it would
// over all triangles. The box distance never exceeds the distance of a
// point of the box (common/float_math.h box_distance), so the answer is
// exact whatever the tree; it needs no allocation (a fixed stack).
#pragma once

#include <cstdint>

#include "../../common/float_math.h"
#include "../../common/geometry/mesh_bvh.h"
#include "../../common/geometry/mesh_winding_tree.h"
#include "../../common/geometry/triangle.h"
#include "../../common/geometry/winding.h"
#include "mesh_tree.h"

namespace knn {
namespace omp {

template <typename Scalar>
geometry::TrianglePoint<Scalar> closest_on_leaf(const geometry::Vec3<Scalar>& q,
                                                const LeafTriangle<Scalar>& t) {
  return geometry::closest_point_on_triangle(q, leaf_corner(t, 0), leaf_corner(t, 1),
                                             leaf_corner(t, 2));
}

template <typename Scalar>
struct Nearest {
  Scalar sq_distance;
  int32_t id;    // the triangle's number; -1: none within the limit
  int32_t leaf;  // its position in the tree
};

// The nearest triangle of q within squared distance limit_sq.
template <typename Scalar>
Nearest<Scalar> nearest_triangle(const MeshTree<Scalar>& tree, const Scalar* q, Scalar limit_sq) {
  const geometry::Vec3<Scalar> point{q[0], q[1], q[2]};
  Nearest<Scalar> best{limit_sq, -1, -1};
  const auto measure = [&](int32_t leaf) {
    const LeafTriangle<Scalar>& t = tree.leaves[leaf];
    const Scalar sq = closest_on_leaf(point, t).sq_distance;
    if (geometry::is_closer(sq, t.id, best.sq_distance, best.id)) best = {sq, t.id, leaf};
  };
  if (tree.nodes.empty()) {
    measure(0);
    return best;
  }
  struct Pending {
    int32_t node;
    Scalar bound;
  };
  Pending stack[kMeshStackCapacity];
  int top = 0;
  int32_t node = 0;
  for (;;) {
    const MeshNode<Scalar>& n = tree.nodes[node];
    const Scalar bound[2] = {box_distance(q, n.box[0].lo, n.box[0].hi, 3),
                             box_distance(q, n.box[1].lo, n.box[1].hi, 3)};
    const int near = bound[1] < bound[0] ? 1 : 0;
    const int far = 1 - near;
    // Leaves first: one triangle each, and they tighten the bound.
    for (const int side : {near, far})
      if (geometry::is_leaf_ref(n.child[side]) && !(bound[side] > best.sq_distance))
        measure(geometry::leaf_of_ref(n.child[side]));
    const bool go_near = !geometry::is_leaf_ref(n.child[near]) && !(bound[near] > best.sq_distance);
    const bool go_far = !geometry::is_leaf_ref(n.child[far]) && !(bound[far] > best.sq_distance);
    if (go_near || go_far) {
      if (go_near && go_far) stack[top++] = Pending{n.child[far], bound[far]};
      node = n.child[go_near ? near : far];
      continue;
    }
    while (top > 0 && stack[top - 1].bound > best.sq_distance) --top;
    if (top == 0) return best;
    node = stack[--top].node;
  }
}

// The solid angles of the mesh seen from q, summed as
// common/geometry/mesh_winding_tree.h orders them.
template <typename Scalar>
double solid_angle_sum(const MeshTree<Scalar>& tree, const Scalar* q) {
  const geometry::Vec3<double> point{static_cast<double>(q[0]), static_cast<double>(q[1]),
                                     static_cast<double>(q[2])};
  const auto leaf_angle = [&](int32_t leaf) {
    const LeafTriangle<Scalar>& t = tree.leaves[leaf];
    return geometry::solid_angle(point, geometry::to_double3(leaf_corner(t, 0)),
                                 geometry::to_double3(leaf_corner(t, 1)),
                                 geometry::to_double3(leaf_corner(t, 2)));
  };
  double sum = 0.0;
  if (tree.nodes.empty()) return add_rn(sum, leaf_angle(0));
  int32_t stack[kMeshStackCapacity];
  int top = 0;
  stack[top++] = 0;
  while (top > 0) {
    const int32_t ref = stack[--top];
    if (geometry::is_leaf_ref(ref)) {
      sum = add_rn(sum, leaf_angle(geometry::leaf_of_ref(ref)));
      continue;
    }
    const geometry::WindingCluster& cluster = tree.clusters[ref];
    if (geometry::is_far_enough(point, cluster)) {
      sum = add_rn(sum, geometry::dipole_solid_angle(point, cluster.centre, cluster.area_normal));
      continue;
    }
    stack[top++] = tree.nodes[ref].child[1];
    stack[top++] = tree.nodes[ref].child[0];
  }
  return sum;
}

}  // namespace omp
}  // namespace knn
