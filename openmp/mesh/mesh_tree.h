// The OpenMP engine's BVH of a triangle mesh: the tree of
// common/geometry/mesh_bvh.h in a layout for the CPU search.
//
// An internal node holds its two children's references and boxes, so a
// visit reads one node (56 bytes in float, 104 in double) and decides both
// children; a leaf's box is its triangle's, checked before the triangle is.
// The triangles are stored in leaf order, corners and id side by side, so
// the leaves of one subtree are contiguous in memory. Meshes that are not
// closed and oriented also keep every internal node's winding cluster
// (common/geometry/mesh_winding_tree.h); closed ones keep the pseudonormals
// of every leaf's edges and corners.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../../common/geometry/mesh_winding_tree.h"
#include "../../common/geometry/triangle.h"
#include "../../engine/mesh_engine.h"

namespace knn {
namespace omp {

template <typename Scalar>
struct MeshBox {
  Scalar lo[3], hi[3];
};

template <typename Scalar>
struct MeshNode {
  MeshBox<Scalar> box[2];  // of the left and the right child
  int32_t child[2];        // references (geometry::leaf_ref for leaves)
};

template <typename Scalar>
struct LeafTriangle {
  Scalar corner[3][3];  // a, b, c
  int32_t id;           // the triangle's number in the mesh
};

template <typename Scalar>
geometry::Vec3<Scalar> leaf_corner(const LeafTriangle<Scalar>& t, int k) {
  return {t.corner[k][0], t.corner[k][1], t.corner[k][2]};
}

// What a closed, oriented mesh's signs read of a leaf (engine/mesh_engine.h
// MeshGeometry): its edges' pseudonormals and its corners' vertex numbers.
template <typename Scalar>
struct LeafNormals {
  Scalar edge[3][3];
  int32_t vertex[3];
};

template <typename Scalar>
struct MeshTree {
  int64_t n_triangles = 0;
  bool closed_oriented = false;
  std::vector<MeshNode<Scalar>> nodes;  // n - 1 internal nodes, 0 the root
  std::vector<LeafTriangle<Scalar>> leaves;
  std::vector<geometry::WindingCluster> clusters;  // per internal node; open meshes
  std::vector<LeafNormals<Scalar>> leaf_normals;   // per leaf; closed meshes
  std::vector<Scalar> vertex_normals;              // n_vertices x 3; closed meshes
};

template <typename Scalar>
MeshBox<Scalar> triangle_box(const LeafTriangle<Scalar>& t) {
  MeshBox<Scalar> box;
  for (int d = 0; d < 3; ++d) {
    box.lo[d] = std::min(std::min(t.corner[0][d], t.corner[1][d]), t.corner[2][d]);
    box.hi[d] = std::max(std::max(t.corner[0][d], t.corner[1][d]), t.corner[2][d]);
  }
  return box;
}

// The box of every triangle of the tree.
template <typename Scalar>
MeshBox<Scalar> mesh_box(const MeshTree<Scalar>& tree) {
  if (tree.nodes.empty()) return triangle_box(tree.leaves[0]);
  MeshBox<Scalar> box;
  for (int d = 0; d < 3; ++d) {
    box.lo[d] = std::min(tree.nodes[0].box[0].lo[d], tree.nodes[0].box[1].lo[d]);
    box.hi[d] = std::max(tree.nodes[0].box[0].hi[d], tree.nodes[0].box[1].hi[d]);
  }
  return box;
}

// Builds the tree of a validated mesh on `threads` threads, reading the
// calling thread's cancel flag between its passes and publishing its
// progress (KNN_PROGRESS_BUILD).
template <typename Scalar>
MeshTree<Scalar> build_mesh_tree(const MeshGeometry<Scalar>& mesh, int threads);

// The deepest path from the root: each internal node's keys share a longer
// prefix (of at most 127 bits) than its parent's, so a path has at most 128
// internal nodes; a depth-first walk keeps at most one pending child per
// level.
constexpr int kMeshStackCapacity = 160;

}  // namespace omp
}  // namespace knn
