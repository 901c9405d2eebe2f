// The OpenMP engine's BVH of a triangle mesh: the tree of
// common/geometry/mesh_bvh.h in the layout of common/geometry/mesh_layout.h
// (the CUDA engine's too, so that both run common/geometry/mesh_walk.h).
// Meshes that are not closed and oriented also keep every internal node's
// winding cluster (common/geometry/mesh_winding_tree.h); closed ones keep
// the pseudonormals of every leaf's edges and corners.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../../common/geometry/mesh_layout.h"
#include "../../common/geometry/mesh_walk.h"
#include "../../common/geometry/mesh_winding_tree.h"
#include "../../common/geometry/triangle.h"
#include "../../engine/mesh_engine.h"

namespace knn {
namespace omp {

using geometry::kMeshStackCapacity;
using geometry::LeafNormals;
using geometry::LeafTriangle;
using geometry::MeshBox;
using geometry::MeshNode;

template <typename Scalar>
struct MeshTree {
  int64_t n_triangles = 0;
  bool closed_oriented = false;
  std::vector<MeshNode<Scalar>> nodes;  // n - 1 internal nodes, 0 the root
  std::vector<LeafTriangle<Scalar>> leaves;
  std::vector<geometry::WindingCluster> clusters;  // per internal node; open meshes
  std::vector<LeafNormals<Scalar>> leaf_normals;   // per leaf; closed meshes
  std::vector<Scalar> vertex_normals;              // n_vertices x 3; closed meshes

  // What the walks (common/geometry/mesh_walk.h) read.
  geometry::MeshArrays<Scalar> arrays() const {
    return {nodes.data(),
            leaves.data(),
            closed_oriented ? leaf_normals.data() : nullptr,
            closed_oriented ? vertex_normals.data() : nullptr,
            closed_oriented ? nullptr : clusters.data(),
            n_triangles,
            closed_oriented};
  }
};

// The box of every triangle of the tree.
template <typename Scalar>
MeshBox<Scalar> mesh_box(const MeshTree<Scalar>& tree) {
  if (tree.nodes.empty()) return geometry::leaf_box(tree.leaves[0]);
  return geometry::join_boxes(tree.nodes[0].box[0], tree.nodes[0].box[1]);
}

// Builds the tree of a validated mesh on `threads` threads, reading the
// calling thread's cancel flag between its passes and publishing its
// progress (KNN_PROGRESS_BUILD).
template <typename Scalar>
MeshTree<Scalar> build_mesh_tree(const MeshGeometry<Scalar>& mesh, int threads);

}  // namespace omp
}  // namespace knn
