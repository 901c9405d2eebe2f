// The memory layout of a mesh's BVH (mesh_bvh.h), shared by the OpenMP and
// the CUDA engines so that one walk (mesh_walk.h) reads both, and the
// per-triangle and per-node steps of their builds, written once for the
// host and the device:
//   - n - 1 internal nodes (node 0 the root; none for one triangle), each
//     with its two children's references and boxes, so that a visit reads
//     one node and decides both children (a leaf's box is its triangle's,
//     checked before the triangle is);
//   - the triangles in leaf order, corners, shape (triangle.h) and original
//     id side by side, so that the leaves of one subtree are contiguous;
//   - closed and oriented meshes: per leaf the pseudonormals of its edges and
//     its corners' vertex numbers, and the vertex pseudonormals;
//   - other meshes: per internal node its winding cluster
//     (mesh_winding_tree.h).
#pragma once

#include <cstdint>

#include "../float_math.h"
#include "../host_device.h"
#include "mesh_bvh.h"
#include "mesh_winding_tree.h"
#include "triangle.h"

namespace knn {
namespace geometry {

template <typename Scalar>
struct MeshBox {
  Scalar lo[3], hi[3];
};

template <typename Scalar>
struct MeshNode {
  MeshBox<Scalar> box[2];  // of the left and the right child
  int32_t child[2];        // references (leaf_ref for leaves)
};

// A triangle with what the closest-point definition computes of it alone
// (triangle.h TriangleShape, the same bits), so that a query measures it
// with fewer ops; 64 bytes in float (one cache line), 128 in double.
template <typename Scalar>
struct alignas(32) LeafTriangle {
  Scalar corner[3][3];  // a, b, c
  Scalar normal[3];     // (b - a) x (c - a)
  Scalar normal2;       // its squared norm when the triangle has an area, else 0
  int32_t id;           // the triangle's number in the mesh
  int32_t well_shaped;  // 0 or 1
};

// What a closed, oriented mesh's signs read of a leaf (engine/mesh_engine.h
// MeshGeometry).
template <typename Scalar>
struct LeafNormals {
  Scalar edge[3][3];  // edge i from corner i to corner (i + 1) % 3
  int32_t vertex[3];  // the corners' vertex numbers
};

// The deepest path from the root: each internal node's 127-bit keys (code,
// position) share a longer prefix than its parent's, so a path has at most
// 128 internal nodes, and a depth-first walk that keeps at most one pending
// child per level (two for the winding sum's) never holds more.
constexpr int kMeshStackCapacity = 160;

template <typename Scalar>
KNN_HD Vec3<Scalar> leaf_corner(const LeafTriangle<Scalar>& leaf, int k) {
  return {leaf.corner[k][0], leaf.corner[k][1], leaf.corner[k][2]};
}

template <typename Scalar>
KNN_HD TriangleShape<Scalar> leaf_shape(const LeafTriangle<Scalar>& leaf) {
  return {{leaf.normal[0], leaf.normal[1], leaf.normal[2]}, leaf.normal2, leaf.well_shaped != 0};
}

// Triangle t as leaf: its corners, shape and id, and (normals not null) its edges'
// pseudonormals and corners' vertex numbers.
template <typename Scalar>
KNN_HD void gather_leaf(const Scalar* vertices, const int32_t* triangles,
                        const Scalar* edge_normals, int64_t t, LeafTriangle<Scalar>* leaf,
                        LeafNormals<Scalar>* normals) {
  for (int k = 0; k < 3; ++k)
    for (int d = 0; d < 3; ++d)
      leaf->corner[k][d] = vertices[3 * static_cast<int64_t>(triangles[3 * t + k]) + d];
  const TriangleShape<Scalar> shape =
      triangle_shape(leaf_corner(*leaf, 0), leaf_corner(*leaf, 1), leaf_corner(*leaf, 2));
  leaf->normal[0] = shape.normal.x;
  leaf->normal[1] = shape.normal.y;
  leaf->normal[2] = shape.normal.z;
  leaf->normal2 = shape.normal2;
  leaf->well_shaped = shape.well_shaped ? 1 : 0;
  leaf->id = static_cast<int32_t>(t);
  if (normals == nullptr) return;
  for (int k = 0; k < 3; ++k) {
    for (int d = 0; d < 3; ++d) normals->edge[k][d] = edge_normals[9 * t + 3 * k + d];
    normals->vertex[k] = triangles[3 * t + k];
  }
}

// std::min and std::max: the first argument unless the second is strictly
// less (greater), so that the zeros' signs are the same everywhere.
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
KNN_HD WindingMoments leaf_moments(const LeafTriangle<Scalar>& leaf) {
  return triangle_moments(leaf_corner(leaf, 0), leaf_corner(leaf, 1), leaf_corner(leaf, 2));
}

// A node's winding cluster from its moments and its box.
template <typename Scalar>
KNN_HD WindingCluster node_cluster(const WindingMoments& moments, const MeshBox<Scalar>& box) {
  return make_winding_cluster(moments,
                              {static_cast<double>(box.lo[0]), static_cast<double>(box.lo[1]),
                               static_cast<double>(box.lo[2])},
                              {static_cast<double>(box.hi[0]), static_cast<double>(box.hi[1]),
                               static_cast<double>(box.hi[2])});
}

}  // namespace geometry
}  // namespace knn
