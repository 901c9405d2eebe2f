// What the CUDA mesh engine computes per triangle, per node and per point,
// written once for the host and the device (KNN_HD): the kernels of
// mesh_build.cu and mesh_query.cu call these, and so does a host test
// (tests/test_mesh_walk.cpp) that replays the GPU build and queries on the
// CPU against the OpenMP engine, bit for bit, where there is no GPU.
#pragma once

#include <cstdint>

#include "../../common/float_math.h"
#include "../../common/geometry/mesh_bvh.h"
#include "../../common/geometry/mesh_winding_tree.h"
#include "../../common/geometry/triangle.h"
#include "../../common/geometry/winding.h"
#include "../../common/host_device.h"
#include "mesh_layout.h"

namespace knn {
namespace cuda {
namespace mesh_walk {

using geometry::Vec3;

// What the queries read of a mesh (device memory in the engine).
template <typename Scalar>
struct MeshView {
  const MeshNode<Scalar>* nodes;             // n - 1
  const LeafTriangle<Scalar>* leaves;        // n
  const LeafNormals<Scalar>* normals;        // n; closed and oriented meshes, else null
  const Scalar* vertex_normals;              // n_vertices x 3; likewise
  const geometry::WindingCluster* clusters;  // n - 1; other meshes, else null
  int64_t n;
  bool closed_oriented;
  MeshBox<Scalar> bounds;  // of every vertex of every triangle
};

// ---- The build ----------------------------------------------------------------
// The Morton code of triangle t's centroid in the centroids' box [lo, hi].
template <typename Scalar>
KNN_HD uint64_t triangle_code(const Scalar* vertices, const int32_t* triangles, int64_t t,
                              const double* lo, const double* hi) {
  uint32_t cell[3];
  for (int d = 0; d < 3; ++d) {
    const double c = geometry::triangle_centroid(vertices[3 * int64_t{triangles[3 * t]} + d],
                                                 vertices[3 * int64_t{triangles[3 * t + 1]} + d],
                                                 vertices[3 * int64_t{triangles[3 * t + 2]} + d]);
    cell[d] = geometry::morton_cell(c, lo[d], hi[d]);
  }
  return geometry::morton_code3(cell[0], cell[1], cell[2]);
}

// Triangle t as leaf: its corners and id, and (normals not null) its edges'
// pseudonormals and corners' vertex numbers.
template <typename Scalar>
KNN_HD void gather_leaf(const Scalar* vertices, const int32_t* triangles,
                        const Scalar* edge_normals, int64_t t, LeafTriangle<Scalar>* leaf,
                        LeafNormals<Scalar>* normals) {
  for (int k = 0; k < 3; ++k)
    for (int d = 0; d < 3; ++d)
      leaf->corner[k][d] = vertices[3 * static_cast<int64_t>(triangles[3 * t + k]) + d];
  leaf->id = static_cast<int32_t>(t);
  if (normals == nullptr) return;
  for (int k = 0; k < 3; ++k) {
    for (int d = 0; d < 3; ++d) normals->edge[k][d] = edge_normals[9 * t + 3 * k + d];
    normals->vertex[k] = triangles[3 * t + k];
  }
}

// std::min and std::max: the first argument unless the second is strictly
// less (greater), so that the zeros' signs follow the host's rule too.
template <typename Scalar>
KNN_HD Scalar lesser(Scalar a, Scalar b) {
  return b < a ? b : a;
}
template <typename Scalar>
KNN_HD Scalar greater(Scalar a, Scalar b) {
  return a < b ? b : a;
}

template <typename Scalar>
KNN_HD MeshBox<Scalar> leaf_box(const LeafTriangle<Scalar>& leaf) {
  MeshBox<Scalar> box;
  for (int d = 0; d < 3; ++d) {
    box.lo[d] = lesser(lesser(leaf.corner[0][d], leaf.corner[1][d]), leaf.corner[2][d]);
    box.hi[d] = greater(greater(leaf.corner[0][d], leaf.corner[1][d]), leaf.corner[2][d]);
  }
  return box;
}

// A node's box from its children's, left then right.
template <typename Scalar>
KNN_HD MeshBox<Scalar> join_boxes(const MeshBox<Scalar>& left, const MeshBox<Scalar>& right) {
  MeshBox<Scalar> box;
  for (int d = 0; d < 3; ++d) {
    box.lo[d] = lesser(left.lo[d], right.lo[d]);
    box.hi[d] = greater(left.hi[d], right.hi[d]);
  }
  return box;
}

template <typename Scalar>
KNN_HD Vec3<Scalar> corner(const LeafTriangle<Scalar>& leaf, int k) {
  return {leaf.corner[k][0], leaf.corner[k][1], leaf.corner[k][2]};
}

template <typename Scalar>
KNN_HD geometry::WindingMoments leaf_moments(const LeafTriangle<Scalar>& leaf) {
  return geometry::triangle_moments(corner(leaf, 0), corner(leaf, 1), corner(leaf, 2));
}

// A node's winding cluster from its moments and its box.
template <typename Scalar>
KNN_HD geometry::WindingCluster node_cluster(const geometry::WindingMoments& moments,
                                             const MeshBox<Scalar>& box) {
  return geometry::make_winding_cluster(
      moments,
      {static_cast<double>(box.lo[0]), static_cast<double>(box.lo[1]),
       static_cast<double>(box.lo[2])},
      {static_cast<double>(box.hi[0]), static_cast<double>(box.hi[1]),
       static_cast<double>(box.hi[2])});
}

// ---- The queries -----------------------------------------------------------------
template <typename Scalar>
KNN_HD Scalar infinity_of() {
  return scalar_of_bits<Scalar>(FloatLayout<Scalar>::kExponent);
}
// The quiet NaN of std::numeric_limits (the OpenMP engine's bits).
template <typename Scalar>
KNN_HD Scalar quiet_nan_of() {
  return scalar_of_bits<Scalar>(FloatLayout<Scalar>::kExponent |
                                (FloatBits<Scalar>{1} << (FloatLayout<Scalar>::kMantissaBits - 1)));
}

// Per-point outputs (device memory in the engine), each may be null.
template <typename Scalar>
struct PointOutputs {
  int32_t* ids;
  Scalar* sq_distances;
  Scalar* closest;
  Scalar* barycentric;
  Scalar* signed_distances;
};

template <typename Scalar>
KNN_HD geometry::TrianglePoint<Scalar> point_on_leaf(const LeafTriangle<Scalar>& leaf,
                                                     const Vec3<Scalar>& q) {
  return geometry::closest_point_on_triangle(q, corner(leaf, 0), corner(leaf, 1), corner(leaf, 2));
}

// The leaf (sorted position) of the closest triangle within max_sq, or -1.
// Sets *overflow when the walk would overflow its stack (never, by the depth
// bound of mesh_layout.h).
template <typename Scalar>
KNN_HD int32_t nearest_leaf(const MeshView<Scalar>& mesh, const Vec3<Scalar>& q, Scalar max_sq,
                            bool* overflow) {
  Scalar best = max_sq;
  int32_t best_id = -1, best_leaf = -1;
  const auto try_leaf = [&](int32_t leaf_index) {
    const LeafTriangle<Scalar> leaf = mesh.leaves[leaf_index];
    const Scalar sq = point_on_leaf(leaf, q).sq_distance;
    if (geometry::is_closer(sq, leaf.id, best, best_id)) {
      best = sq;
      best_id = leaf.id;
      best_leaf = leaf_index;
    }
  };
  if (mesh.n == 1) {
    try_leaf(0);
    return best_leaf;
  }
  const Scalar qc[3] = {q.x, q.y, q.z};
  int32_t stack[kMeshStackCapacity];
  Scalar stack_distance[kMeshStackCapacity];
  int top = 0;
  stack[top] = 0;
  stack_distance[top++] = Scalar(0);
  while (top > 0) {
    --top;
    if (stack_distance[top] > best) continue;
    const MeshNode<Scalar> node = mesh.nodes[stack[top]];
    Scalar d[2];
    for (int c = 0; c < 2; ++c) d[c] = box_distance(qc, node.box[c].lo, node.box[c].hi, 3);
    const int near = d[1] < d[0] ? 1 : 0;
    // Leaves now, nearer first; internal children onto the stack, the
    // nearer on top.
    for (int k = 0; k < 2; ++k) {
      const int c = k == 0 ? near : 1 - near;
      if (geometry::is_leaf_ref(node.child[c]) && !(d[c] > best))
        try_leaf(geometry::leaf_of_ref(node.child[c]));
    }
    for (int k = 0; k < 2; ++k) {
      const int c = k == 0 ? 1 - near : near;
      if (geometry::is_leaf_ref(node.child[c]) || d[c] > best) continue;
      if (top == kMeshStackCapacity) {
        *overflow = true;
        return best_leaf;
      }
      stack[top] = node.child[c];
      stack_distance[top++] = d[c];
    }
  }
  return best_leaf;
}

// The solid angles of the mesh seen from q, summed in mesh_winding_tree.h's
// order: depth first, left before right, far clusters as dipoles.
template <typename Scalar>
KNN_HD double solid_angle_sum(const MeshView<Scalar>& mesh, const Vec3<double>& q, bool* overflow) {
  const auto leaf_angle = [&](int32_t leaf_index) {
    const LeafTriangle<Scalar> leaf = mesh.leaves[leaf_index];
    return geometry::solid_angle(q, geometry::to_double3(corner(leaf, 0)),
                                 geometry::to_double3(corner(leaf, 1)),
                                 geometry::to_double3(corner(leaf, 2)));
  };
  if (mesh.n == 1) return add_rn(0.0, leaf_angle(0));
  double sum = 0.0;
  int32_t stack[kMeshStackCapacity];
  int top = 0;
  stack[top++] = 0;
  while (top > 0) {
    const int32_t ref = stack[--top];
    if (geometry::is_leaf_ref(ref)) {
      sum = add_rn(sum, leaf_angle(geometry::leaf_of_ref(ref)));
      continue;
    }
    const geometry::WindingCluster cluster = mesh.clusters[ref];
    if (geometry::is_far_enough(q, cluster)) {
      sum = add_rn(sum, geometry::dipole_solid_angle(q, cluster.centre, cluster.area_normal));
      continue;
    }
    if (top + 2 > kMeshStackCapacity) {
      *overflow = true;
      return sum;
    }
    const MeshNode<Scalar>& node = mesh.nodes[ref];
    stack[top++] = node.child[1];
    stack[top++] = node.child[0];
  }
  return sum;
}

// Whether q, off the surface at its closest point p on leaf `leaf_index`
// (feature f), lies inside the mesh.
template <typename Scalar>
KNN_HD bool is_inside(const MeshView<Scalar>& mesh, const Vec3<Scalar>& q, int32_t leaf_index,
                      const geometry::TrianglePoint<Scalar>& p, bool* overflow) {
  if (!mesh.closed_oriented) {
    const Vec3<double> qd = geometry::to_double3(q);
    return geometry::winding_says_inside(solid_angle_sum(mesh, qd, overflow));
  }
  Vec3<Scalar> normal;
  if (p.feature == geometry::TriangleFeature::kFace) {
    const LeafTriangle<Scalar> leaf = mesh.leaves[leaf_index];
    const Vec3<Scalar> a = corner(leaf, 0);
    normal =
        geometry::cross3(geometry::sub3(corner(leaf, 1), a), geometry::sub3(corner(leaf, 2), a));
  } else if (geometry::is_edge(p.feature)) {
    const Scalar* e = mesh.normals[leaf_index].edge[geometry::edge_of(p.feature)];
    normal = {e[0], e[1], e[2]};
  } else {
    const int64_t v = mesh.normals[leaf_index].vertex[geometry::corner_of(p.feature)];
    const Scalar* e = mesh.vertex_normals + 3 * v;
    normal = {e[0], e[1], e[2]};
  }
  return geometry::pseudonormal_says_inside(q, p.closest, normal);
}

// Point i's "beyond" values in every output there is.
template <typename Scalar>
KNN_HD void write_beyond(const PointOutputs<Scalar>& out, int64_t i) {
  const Scalar inf = infinity_of<Scalar>(), nan = quiet_nan_of<Scalar>();
  if (out.ids) out.ids[i] = -1;
  if (out.sq_distances) out.sq_distances[i] = inf;
  if (out.signed_distances) out.signed_distances[i] = inf;
  for (int d = 0; d < 3; ++d) {
    if (out.closest) out.closest[3 * i + d] = nan;
    if (out.barycentric) out.barycentric[3 * i + d] = nan;
  }
}

// Answers point i of `points` into `out`.
template <typename Scalar>
KNN_HD void answer_point(const MeshView<Scalar>& mesh, const Scalar* points, int64_t i,
                         Scalar max_sq, const PointOutputs<Scalar>& out, bool* overflow) {
  const Vec3<Scalar> q{points[3 * i], points[3 * i + 1], points[3 * i + 2]};
  const int32_t leaf_index = nearest_leaf(mesh, q, max_sq, overflow);
  if (leaf_index < 0) return write_beyond(out, i);
  const LeafTriangle<Scalar> leaf = mesh.leaves[leaf_index];
  const geometry::TrianglePoint<Scalar> p = point_on_leaf(leaf, q);
  if (out.ids) out.ids[i] = leaf.id;
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
    const bool inside = distance > Scalar(0) && is_inside(mesh, q, leaf_index, p, overflow);
    out.signed_distances[i] = inside ? -distance : distance;
  }
}

}  // namespace mesh_walk
}  // namespace cuda
}  // namespace knn
