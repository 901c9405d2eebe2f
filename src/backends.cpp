// The registration of the backends (src/backends.h): the one file of src/
// that names an engine (cmake/check_layering.cmake enforces it). A new
// backend (docs/ARCHITECTURE.md, "Adding a backend") is registered here.
#include "backends.h"

#include "../common/error.h"
#include "../cuda/core/memory_model.h"
#include "../cuda/cuda_backend.h"
#include "../include/knn_gpgpu.h"
#include "../openmp/omp_backend.h"
#include "index_planner.h"

namespace knn {

// The planners' constants of the device engines' lists (index_planner.h)
// are the CUDA engine's.
static_assert(kGpuMaxListK == cuda::kMaxWarpK, "index_planner.h: kGpuMaxListK");
static_assert(kGpuGridMaxLeadingK == cuda::kMaxBinnedTake, "index_planner.h: kGpuGridMaxLeadingK");

const Backend& host_backend() { return omp::omp_backend(); }
const Backend& device_backend() { return cuda::cuda_backend(); }

const Backend& backend_of(int kind) {
  if (kind == KNN_BACKEND_CUDA) return device_backend();
  if (kind == KNN_BACKEND_OPENMP) return host_backend();
  fail(KNN_ERR_INTERNAL, format("no backend of kind %d", kind));
}

}  // namespace knn
