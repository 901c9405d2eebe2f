// The CUDA mesh engine's device layout (mesh_build.cu builds it,
// mesh_query.cu searches it) and its device memory as a function of the
// sizes alone. Host-only C++: knn_estimate_mesh_bytes answers from it
// without a device and in builds without CUDA (mesh_memory.cpp).
//
// The tree is common/geometry/mesh_bvh.h's LBVH:
//   - n - 1 internal nodes (node 0 the root; none for one triangle), each
//     with its two children's references and boxes, so that a visit reads
//     one node and decides both children;
//   - the triangles in leaf order, corners and original id side by side;
//   - closed and oriented meshes: per leaf the pseudonormals of its edges and
//     its corners' vertex numbers, and the vertex pseudonormals;
//   - other meshes: per internal node its winding cluster
//     (common/geometry/mesh_winding_tree.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../common/geometry/mesh_winding_tree.h"
#include "../core/memory_model.h"

namespace knn {
namespace cuda {

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
struct LeafNormals {
  Scalar edge[3][3];  // edge i from corner i to corner (i + 1) % 3
  int32_t vertex[3];  // the corners' vertex numbers
};

// The deepest path from the root: each internal node's 127-bit keys (code,
// position) share a longer prefix than its parent's, so a path has at most
// 128 internal nodes, and a depth-first walk that keeps at most one pending
// child per level never holds more.
constexpr int kMeshStackCapacity = 160;

// ---- Device memory (every buffer counted in whole pages: aligned()) -------
// What a built mesh keeps on its device.
inline size_t mesh_resident_bytes(int64_t n_vertices, int64_t n_triangles, size_t scalar_bytes,
                                  bool closed_oriented) {
  const size_t nv = static_cast<size_t>(n_vertices < 0 ? 0 : n_vertices);
  const size_t n = static_cast<size_t>(n_triangles < 0 ? 0 : n_triangles);
  const size_t internal = n > 0 ? n - 1 : 0;
  // The layouts of both scalars, from the float ones: a double doubles
  // every scalar, the ints keep their 4 bytes (alignment included).
  const size_t node = scalar_bytes == 4 ? sizeof(MeshNode<float>) : sizeof(MeshNode<double>);
  const size_t leaf =
      scalar_bytes == 4 ? sizeof(LeafTriangle<float>) : sizeof(LeafTriangle<double>);
  const size_t normals =
      scalar_bytes == 4 ? sizeof(LeafNormals<float>) : sizeof(LeafNormals<double>);
  size_t bytes =
      saturating_add(aligned(saturating_mul(internal, node)), aligned(saturating_mul(n, leaf)));
  if (closed_oriented)
    bytes = saturating_add(bytes, saturating_add(aligned(saturating_mul(n, normals)),
                                                 aligned(saturating_mul(nv, 3 * scalar_bytes))));
  else
    bytes =
        saturating_add(bytes, aligned(saturating_mul(internal, sizeof(geometry::WindingCluster))));
  return bytes;
}

// The build's scratch, all of it alive until the build returns: the mesh as
// given (vertices, triangles), the Morton codes and triangle ids twice (the
// sort's double buffer), the centroids' box, the parent of every node and
// leaf, a visit counter per internal node, the moments of every internal
// node (open meshes) or the edges' pseudonormals as given (closed ones),
// and CUB's temporary storage.
inline size_t mesh_build_scratch_bytes(int64_t n_vertices, int64_t n_triangles, size_t scalar_bytes,
                                       bool closed_oriented) {
  const size_t nv = static_cast<size_t>(n_vertices < 0 ? 0 : n_vertices);
  const size_t n = static_cast<size_t>(n_triangles < 0 ? 0 : n_triangles);
  const size_t internal = n > 0 ? n - 1 : 0;
  size_t bytes = aligned(saturating_mul(nv, 3 * scalar_bytes));
  bytes = saturating_add(bytes, aligned(saturating_mul(n, 12)));
  bytes = saturating_add(bytes, 2 * aligned(saturating_mul(n, 8)));
  bytes = saturating_add(bytes, 2 * aligned(saturating_mul(n, 4)));
  bytes = saturating_add(bytes, aligned(6 * sizeof(double)));
  bytes = saturating_add(bytes, aligned(saturating_mul(internal + n, 4)));
  bytes = saturating_add(bytes, aligned(saturating_mul(internal, 4)));
  if (closed_oriented)
    bytes = saturating_add(bytes, aligned(saturating_mul(n, 9 * scalar_bytes)));
  else
    bytes =
        saturating_add(bytes, aligned(saturating_mul(internal, sizeof(geometry::WindingMoments))));
  return saturating_add(bytes, cub_temp_bytes(n_triangles));
}

// A query chunk (mesh_query.cu): per point its ordering (Morton code and
// position, twice for the sort, and a byte of the sort's temporaries) plus
// its arrays staged from the host; fixed, a page for every buffer that may
// take one of its own (six staged arrays, the fault flag, the ordering's
// four, the sort's temporaries) and the sort's base.
constexpr size_t kMeshChunkOrderBytesPerPoint = 2 * (4 + 4) + 1;
constexpr size_t kMeshChunkFixedBytes = 12 * kAllocAlignment + kCubTempBase;

}  // namespace cuda
}  // namespace knn
