// The CUDA mesh engine's device layout (mesh_build.cu builds it,
// mesh_query.cu searches it) and its device memory as a function of the
// sizes alone. Host-only C++: knn_estimate_mesh_bytes answers from it
// without a device and in builds without CUDA (mesh_memory.cpp).
//
// The tree is common/geometry/mesh_bvh.h's LBVH in the layout of
// common/geometry/mesh_layout.h, the OpenMP engine's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../common/geometry/mesh_layout.h"
#include "../../common/geometry/mesh_winding_tree.h"
#include "../core/memory_model.h"

namespace knn {
namespace cuda {

using geometry::kMeshStackCapacity;
using geometry::LeafNormals;
using geometry::LeafTriangle;
using geometry::MeshBox;
using geometry::MeshNode;

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

// The device preparation's scratch (mesh_prepare.cu) beside the mesh's
// arrays and its results (the pseudonormals, counted above for closed
// meshes): per half-edge its key and number twice (the sort's double
// buffer) and its partner, per triangle its unit normal (3 doubles), a flag,
// and CUB's temporaries for the half-edges.
inline size_t mesh_prepare_scratch_bytes(int64_t n_triangles) {
  const size_t n = static_cast<size_t>(n_triangles < 0 ? 0 : n_triangles);
  const size_t halves = saturating_mul(n, 3);
  size_t bytes = 2 * aligned(saturating_mul(halves, 8));
  bytes = saturating_add(bytes, 3 * aligned(saturating_mul(halves, 4)));
  bytes = saturating_add(bytes, aligned(saturating_mul(n, 3 * sizeof(double))));
  bytes = saturating_add(bytes, aligned(sizeof(int)));
  return saturating_add(bytes, cub_temp_bytes(static_cast<int64_t>(halves)));
}

// A query chunk (mesh_query.cu): per point its ordering (Morton code and
// position, twice for the sort, and a byte of the sort's temporaries) plus
// its arrays staged from the host; fixed, a page for every buffer that may
// take one of its own (six staged arrays, the fault flag, the ordering's
// four, the sort's temporaries) and the sort's base.
constexpr size_t kMeshChunkOrderBytesPerPoint = kPointOrderBytesPerPoint;
constexpr size_t kMeshChunkFixedBytes = 12 * kAllocAlignment + kCubTempBase;

}  // namespace cuda
}  // namespace knn
