// What the CUDA mesh engine computes per triangle and per point beyond the
// shared layout and walk (common/geometry/mesh_layout.h, mesh_walk.h),
// written for the host and the device (KNN_HD): the kernels of
// mesh_build.cu and mesh_query.cu call these, and so does a host test
// (tests/engines/test_mesh_walk.cpp) that replays the GPU build and queries on the
// CPU against the OpenMP engine, bit for bit, where there is no GPU.
#pragma once

#include <cstdint>

#include "../../common/float_math.h"
#include "../../common/geometry/mesh_bvh.h"
#include "../../common/geometry/mesh_layout.h"
#include "../../common/geometry/mesh_walk.h"
#include "../../common/host_device.h"
#include "mesh_layout.h"

namespace knn {
namespace cuda {
namespace mesh_walk {

// What the queries read of a mesh (device memory in the engine) and the
// box of every vertex of every triangle.
template <typename Scalar>
struct MeshView : geometry::MeshArrays<Scalar> {
  MeshBox<Scalar> bounds;
};

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

// Per-point outputs (device memory in the engine), each may be null; the
// fields geometry::answer_point writes.
template <typename Scalar>
struct PointOutputs {
  int32_t* triangle_ids;
  Scalar* sq_distances;
  Scalar* closest;
  Scalar* barycentric;
  Scalar* signed_distances;
};

}  // namespace mesh_walk
}  // namespace cuda
}  // namespace knn
