// The device bytes of a CUDA mesh build (engine/mesh_engine.h), compiled in
// every build: knn_estimate_mesh_bytes answers without a device.
#include <algorithm>

#include "../../engine/mesh_engine.h"
#include "mesh_layout.h"

namespace knn {
namespace cuda {

size_t mesh_build_bytes(int64_t n_vertices, int64_t n_triangles, size_t scalar_bytes,
                        bool closed_oriented) {
  return saturating_add(
      saturating_add(
          mesh_resident_bytes(n_vertices, n_triangles, scalar_bytes, closed_oriented),
          mesh_build_scratch_bytes(n_vertices, n_triangles, scalar_bytes, closed_oriented)),
      mesh_prepare_scratch_bytes(n_triangles));
}

size_t mesh_build_bytes_either(int64_t n_vertices, int64_t n_triangles, size_t scalar_bytes) {
  return std::max(mesh_build_bytes(n_vertices, n_triangles, scalar_bytes, true),
                  mesh_build_bytes(n_vertices, n_triangles, scalar_bytes, false));
}

}  // namespace cuda
}  // namespace knn
