// The CUDA engine's own preparation of a mesh (mesh_prepare.cu): whether it
// is closed and oriented, and then its pseudonormals, computed on the device
// from the vertices and triangles already there, by the definitions of
// common/geometry/pseudonormals.h (the host's for the OpenMP engine, bit for
// bit). The build (mesh_build.cu) takes these instead of host arrays.
#pragma once

#include <cstdint>

#include "../core/cuda_support.h"

namespace knn {
namespace cuda {

template <typename Scalar>
struct DerivedSigns {
  bool closed_oriented = false;
  // Closed and oriented meshes only (else empty): as MeshGeometry's
  // (engine/mesh_engine.h), on the device.
  DeviceBuffer<Scalar> edge_normals;    // n_triangles x 9
  DeviceBuffer<Scalar> vertex_normals;  // n_vertices x 3
};

// vertices (n_vertices x 3) and triangles (n_triangles x 3) are device
// arrays of the current device; the work is queued on `stream` and done on
// return. Polls the calling thread's cancel flag between the phases.
template <typename Scalar>
DerivedSigns<Scalar> derive_signs(const Scalar* vertices, int64_t n_vertices,
                                  const int32_t* triangles, int64_t n_triangles,
                                  cudaStream_t stream);

}  // namespace cuda
}  // namespace knn
