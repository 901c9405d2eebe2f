// The CUDA engines of the index API and the memory helpers the API layer
// needs (through cuda/cuda_backend.cpp) to serve host and device arrays
// alike. Plain C++ like cuda_engine.h; a build without CUDA links the stubs
// in cuda/no_cuda/no_cuda_engine.cpp (no device pointers exist there, and
// every engine reports KNN_ERR_NO_DEVICE).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "../engine/cloud_align.h"
#include "../engine/index_engine.h"
#include "../engine/stats_engine.h"

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
// Scalar is float or double here and below (instantiated where defined;
// cuda/no_cuda/no_cuda_engine.cpp has the stubs of a build without CUDA).
template <typename Scalar>
void fill_missing_on_device(int32_t* indices, Scalar* sq_distances, int64_t count);
// Index of the first of count scalars of a device array whose magnitude is
// not at most `limit` (NaN and infinities included), or -1 when there is
// none.
template <typename Scalar>
int64_t first_beyond_on_device(const Scalar* values, int64_t count, Scalar limit);

// The device engines (engine/index_engine.h). `points` is host or device
// memory as params.points_on_device says; the engine keeps its own copy on
// the device.
KNN_DECLARE_INDEX_BUILDERS;
// The kd-tree of the points of `source`, a CUDA engine of the current
// device, built from a temporary device copy of them
// (copy_points_to_device), freed on return: the points never pass through
// host memory. The copy counts against params.device_memory_limit; a copy
// that cannot be allocated throws KNN_ERR_DEVICE_OUT_OF_MEMORY.
KNN_DECLARE_BUILDER(KNN_KDTREE_INDEX_OF_BUILDER);

// The list reducer of the neighbourhood statistics (engine/stats_engine.h)
// for a CUDA engine of the current device: a device copy of its points, the
// chunks' lists in device scratch sized from the call's device budget, and
// the kernels of cuda/stats/neighbourhood_stats.cu; outputs host or device.
KNN_DECLARE_BUILDER(KNN_LIST_REDUCER_BUILDER);

// The aligner of knn_index_align (engine/cloud_align.h) for a CUDA engine of
// the current device: its resident points read in place, the scan and the
// normals in place where they are memory of that device (else one device
// copy each for the call), every scan point's list and every block's sums
// on the device, the moved points in chunks within the call's device
// budget; cuda/stats/cloud_align.cu.
KNN_DECLARE_BUILDER(KNN_CLOUD_ALIGNER_BUILDER);

}  // namespace cuda
}  // namespace knn
