// The searches of a mesh's BVH (mesh_layout.h), written once for the host
// and the device: the OpenMP engine (openmp/mesh) and the CUDA engine
// (cuda/mesh) both answer a point with answer_point below, so they visit the
// same triangles in the same order and give the same bits.
//
// The nearest triangle (nearest_leaf): the tree is walked depth first, at
// each node the leaves among its children first (one triangle each: they
// tighten the bound), nearer box first, then the nearer internal child, the
// farther one kept on the stack with its box distance. The bound is the
// least squared distance found so far (starting at max_distance squared): a
// child whose box is strictly farther than the bound is skipped, so every
// triangle at the bound's distance is measured and the tie rule (is_closer,
// the smaller id) decides as it would over all triangles. The box distance
// (common/float_math.h box_distance) never exceeds the exact distance of a
// point of the box; the rounded distance of a triangle (triangle.h) may fall
// below its exact one by a few ulps, so the order of the visits matters in
// rare ties at that scale, and there is exactly one order: this one.
//
// The solid-angle sum (solid_angle_sum): mesh_winding_tree.h's order.
//
// How the arrays are read is the Mesh parameter's: MeshArrays reads plain
// pointers (host memory, or device memory in a kernel); another reader (say,
// through a texture path) needs node(i), leaf(i), cluster(i), normals(i),
// vertex_normal(v), n and closed_oriented.
#pragma once

#include <cstdint>

#include "../float_math.h"
#include "../host_device.h"
#include "mesh_bvh.h"
#include "mesh_layout.h"
#include "mesh_winding_tree.h"
#include "triangle.h"
#include "winding.h"

namespace knn {
namespace geometry {

template <typename Scalar>
struct MeshArrays {
  const MeshNode<Scalar>* nodes;       // n - 1
  const LeafTriangle<Scalar>* leaves;  // n
  const LeafNormals<Scalar>* normals;  // n: closed and oriented meshes, else null
  const Scalar* vertex_normals;        // n_vertices x 3: likewise
  const WindingCluster* clusters;      // n - 1: other meshes, else null
  int64_t n;
  bool closed_oriented;

  KNN_HD const MeshNode<Scalar>& node(int32_t i) const { return nodes[i]; }
  // A hint that the walk may read reference `ref` next (a node or a leaf).
  KNN_HD void prefetch(int32_t ref) const {
#if !defined(__CUDA_ARCH__)
    if (is_leaf_ref(ref))
      __builtin_prefetch(leaves + leaf_of_ref(ref));
    else
      __builtin_prefetch(nodes + ref);
#else
    (void)ref;
#endif
  }
  KNN_HD const LeafTriangle<Scalar>& leaf(int32_t i) const { return leaves[i]; }
  KNN_HD const WindingCluster& cluster(int32_t i) const { return clusters[i]; }
  KNN_HD const LeafNormals<Scalar>& leaf_normals(int32_t i) const { return normals[i]; }
  KNN_HD Vec3<Scalar> vertex_normal(int64_t v) const {
    return {vertex_normals[3 * v], vertex_normals[3 * v + 1], vertex_normals[3 * v + 2]};
  }
};

template <typename Scalar>
KNN_HD TrianglePoint<Scalar> closest_on_leaf(const Vec3<Scalar>& q,
                                             const LeafTriangle<Scalar>& leaf) {
  return closest_point_on_triangle(q, leaf_corner(leaf, 0), leaf_corner(leaf, 1),
                                   leaf_corner(leaf, 2), leaf_shape(leaf));
}

template <typename Scalar>
struct Nearest {
  Scalar sq_distance;
  int32_t id;    // the triangle's number; -1: none within the limit
  int32_t leaf;  // its position in the tree
};

// The nearest triangle of q within squared distance limit_sq. Sets
// *overflow when the walk would overflow its stack (never, by the depth
// bound of mesh_layout.h).
template <typename Scalar, typename Mesh>
KNN_HD Nearest<Scalar> nearest_leaf(const Mesh& mesh, const Vec3<Scalar>& q, Scalar limit_sq,
                                    bool* overflow) {
  Nearest<Scalar> best{limit_sq, -1, -1};
  const auto measure = [&](int32_t leaf_index) {
    const LeafTriangle<Scalar>& leaf = mesh.leaf(leaf_index);
    const Scalar sq = closest_on_leaf(q, leaf).sq_distance;
    if (is_closer(sq, leaf.id, best.sq_distance, best.id)) best = {sq, leaf.id, leaf_index};
  };
  if (mesh.n == 1) {
    measure(0);
    return best;
  }
  const Scalar qc[3] = {q.x, q.y, q.z};
  struct Pending {
    int32_t node;
    Scalar bound;
  };
  Pending stack[kMeshStackCapacity];
  int top = 0;
  int32_t node_index = 0;
  for (;;) {
    const MeshNode<Scalar>& node = mesh.node(node_index);
    mesh.prefetch(node.child[0]);
    mesh.prefetch(node.child[1]);
    const Scalar bound[2] = {box_distance(qc, node.box[0].lo, node.box[0].hi, 3),
                             box_distance(qc, node.box[1].lo, node.box[1].hi, 3)};
    const int near = bound[1] < bound[0] ? 1 : 0;
    const int far = 1 - near;
    if (is_leaf_ref(node.child[near]) && !(bound[near] > best.sq_distance))
      measure(leaf_of_ref(node.child[near]));
    if (is_leaf_ref(node.child[far]) && !(bound[far] > best.sq_distance))
      measure(leaf_of_ref(node.child[far]));
    const bool go_near = !is_leaf_ref(node.child[near]) && !(bound[near] > best.sq_distance);
    const bool go_far = !is_leaf_ref(node.child[far]) && !(bound[far] > best.sq_distance);
    if (go_near || go_far) {
      if (go_near && go_far) {
        if (top == kMeshStackCapacity) {
          *overflow = true;
          return best;
        }
        stack[top++] = Pending{node.child[far], bound[far]};
      }
      node_index = node.child[go_near ? near : far];
      continue;
    }
    while (top > 0 && stack[top - 1].bound > best.sq_distance) --top;
    if (top == 0) return best;
    node_index = stack[--top].node;
  }
}

template <typename Scalar, typename Mesh>
KNN_HD double leaf_solid_angle(const Mesh& mesh, const Vec3<double>& q, int32_t leaf_index) {
  const LeafTriangle<Scalar>& leaf = mesh.leaf(leaf_index);
  return solid_angle(q, to_double3(leaf_corner(leaf, 0)), to_double3(leaf_corner(leaf, 1)),
                     to_double3(leaf_corner(leaf, 2)));
}

// The solid angles of the mesh seen from q, summed in mesh_winding_tree.h's
// order: depth first, left before right, far clusters as dipoles.
template <typename Scalar, typename Mesh>
KNN_HD double solid_angle_sum(const Mesh& mesh, const Vec3<double>& q, bool* overflow) {
  if (mesh.n == 1) return add_rn(0.0, leaf_solid_angle<Scalar>(mesh, q, 0));
  double sum = 0.0;
  int32_t stack[kMeshStackCapacity];
  int top = 0;
  stack[top++] = 0;
  while (top > 0) {
    const int32_t ref = stack[--top];
    if (is_leaf_ref(ref)) {
      sum = add_rn(sum, leaf_solid_angle<Scalar>(mesh, q, leaf_of_ref(ref)));
      continue;
    }
    const WindingCluster& cluster = mesh.cluster(ref);
    if (is_far_enough(q, cluster)) {
      sum = add_rn(sum, dipole_solid_angle(q, cluster.centre, cluster.area_normal));
      continue;
    }
    if (top + 2 > kMeshStackCapacity) {
      *overflow = true;
      return sum;
    }
    const MeshNode<Scalar>& node = mesh.node(ref);
    stack[top++] = node.child[1];
    stack[top++] = node.child[0];
  }
  return sum;
}

// Whether q, off the surface at its closest point p on leaf `leaf_index`,
// lies inside the mesh: by the pseudonormal of p's feature (closed, oriented
// meshes) or by the winding number (others).
template <typename Scalar, typename Mesh>
KNN_HD bool is_inside(const Mesh& mesh, const Vec3<Scalar>& q, int32_t leaf_index,
                      const TrianglePoint<Scalar>& p, bool* overflow) {
  if (!mesh.closed_oriented)
    return winding_says_inside(solid_angle_sum<Scalar>(mesh, to_double3(q), overflow));
  Vec3<Scalar> normal;
  if (p.feature == TriangleFeature::kFace) {
    normal = leaf_shape(mesh.leaf(leaf_index)).normal;  // (b - a) x (c - a)
  } else if (is_edge(p.feature)) {
    const Scalar* e = mesh.leaf_normals(leaf_index).edge[edge_of(p.feature)];
    normal = {e[0], e[1], e[2]};
  } else {
    normal = mesh.vertex_normal(mesh.leaf_normals(leaf_index).vertex[corner_of(p.feature)]);
  }
  return pseudonormal_says_inside(q, p.closest, normal);
}

template <typename Scalar>
KNN_HD Scalar infinity_of() {
  return scalar_of_bits<Scalar>(FloatLayout<Scalar>::kExponent);
}
// The quiet NaN of std::numeric_limits.
template <typename Scalar>
KNN_HD Scalar quiet_nan_of() {
  return scalar_of_bits<Scalar>(FloatLayout<Scalar>::kExponent |
                                (FloatBits<Scalar>{1} << (FloatLayout<Scalar>::kMantissaBits - 1)));
}

// Point i's "beyond" values in every output there is. Outputs: pointers
// triangle_ids, sq_distances, closest, barycentric, signed_distances, each
// may be null.
template <typename Scalar, typename Outputs>
KNN_HD void write_beyond(const Outputs& out, int64_t i) {
  const Scalar inf = infinity_of<Scalar>(), nan = quiet_nan_of<Scalar>();
  if (out.triangle_ids) out.triangle_ids[i] = -1;
  if (out.sq_distances) out.sq_distances[i] = inf;
  if (out.signed_distances) out.signed_distances[i] = inf;
  for (int d = 0; d < 3; ++d) {
    if (out.closest) out.closest[3 * i + d] = nan;
    if (out.barycentric) out.barycentric[3 * i + d] = nan;
  }
}

// Answers point i of `points` into `out`: what both engines run per point.
template <typename Scalar, typename Mesh, typename Outputs>
KNN_HD void answer_point(const Mesh& mesh, const Scalar* points, int64_t i, Scalar limit_sq,
                         const Outputs& out, bool* overflow) {
  const Vec3<Scalar> q{points[3 * i], points[3 * i + 1], points[3 * i + 2]};
  const Nearest<Scalar> nearest = nearest_leaf(mesh, q, limit_sq, overflow);
  if (nearest.id < 0) return write_beyond<Scalar>(out, i);
  // Measured again (the same bits) for what the search did not keep.
  const TrianglePoint<Scalar> p = closest_on_leaf(q, mesh.leaf(nearest.leaf));
  if (out.triangle_ids) out.triangle_ids[i] = nearest.id;
  if (out.sq_distances) out.sq_distances[i] = p.sq_distance;
  if (out.closest) {
    out.closest[3 * i] = p.closest.x;
    out.closest[3 * i + 1] = p.closest.y;
    out.closest[3 * i + 2] = p.closest.z;
  }
  if (out.barycentric)
    for (int d = 0; d < 3; ++d) out.barycentric[3 * i + d] = p.weights[d];
  if (out.signed_distances) {
    // A point on the surface (distance 0) gets +0, inside or not.
    const Scalar distance = sqrt_rn(p.sq_distance);
    const bool inside = distance > Scalar(0) && is_inside(mesh, q, nearest.leaf, p, overflow);
    out.signed_distances[i] = inside ? -distance : distance;
  }
}

}  // namespace geometry
}  // namespace knn
