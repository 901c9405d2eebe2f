// The CUDA engines of the index API and the memory helpers the API layer
// needs to serve host and device arrays alike. Plain C++ like cuda_engine.h;
// a build without CUDA links the stubs in src/no_cuda_engine.cpp (no device
// pointers exist there, and every engine reports KNN_ERR_NO_DEVICE).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "../engine/index_engine.h"

namespace knn {
namespace cuda {

// True when p is device (or managed) memory the current device can read;
// false for host memory, NULL, and in builds without CUDA.
bool is_device_pointer(const void* p);
// Synchronous copies between a device array and host memory.
void copy_to_host(void* host_dst, const void* device_src, size_t bytes);
void copy_to_device(void* device_dst, const void* host_src, size_t bytes);
// Writes the "missing" value (index -1, squared distance +infinity) into
// `count` slots of device arrays; either pointer may be NULL.
void fill_missing_on_device(int32_t* indices, float* sq_distances, int64_t count);
void fill_missing_on_device(int32_t* indices, double* sq_distances, int64_t count);
// Index of the first of count scalars (float or double) of a device array
// whose magnitude is not at most `limit` (NaN and infinities included), or -1
// when there is none.
int64_t first_beyond_on_device(const float* values, int64_t count, float limit);
int64_t first_beyond_on_device(const double* values, int64_t count, double limit);

// The device engines. `points` is host or device memory as
// params.points_on_device says; the engine keeps its own copy on the device.
std::unique_ptr<IndexEngine> build_kdtree_index(const float* points, int64_t n, int dim,
                                                const IndexParams& params);
std::unique_ptr<IndexEngine> build_brute_force_index(const float* points, int64_t n, int dim,
                                                     const IndexParams& params);
// dim == 3 only; nullptr when the data would make a poor grid.
std::unique_ptr<IndexEngine> build_grid_index(const float* points, int64_t n,
                                              const IndexParams& params);
// The float64 engines: the same templates over double.
std::unique_ptr<IndexEngine64> build_kdtree_index(const double* points, int64_t n, int dim,
                                                  const IndexParams& params);
std::unique_ptr<IndexEngine64> build_brute_force_index(const double* points, int64_t n, int dim,
                                                       const IndexParams& params);
std::unique_ptr<IndexEngine64> build_grid_index(const double* points, int64_t n,
                                                const IndexParams& params);

}  // namespace cuda
}  // namespace knn
