// Device discovery and selection, what memory a device may use in place, and
// the mapping of CUDA errors to statuses.
#include "../cuda_engine.h"
#include "cuda_support.h"

namespace knn {
namespace cuda {

void throw_cuda_error(cudaError_t err, const char* what) {
  cudaGetLastError();  // clear a non-sticky error so that the next call works
  int status = KNN_ERR_DEVICE;
  if (err == cudaErrorMemoryAllocation) status = KNN_ERR_DEVICE_OUT_OF_MEMORY;
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver ||
      err == cudaErrorInvalidDevice)
    status = KNN_ERR_NO_DEVICE;
  fail(status, format("%s failed: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err)));
}

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

void set_device(int device) {
  const int count = device_count();
  if (count == 0) fail(KNN_ERR_NO_DEVICE, "no usable CUDA device");
  if (device < 0 || device >= count)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("device %d does not exist; devices are 0..%d", device, count - 1));
  check(cudaSetDevice(device), "cudaSetDevice");
}

int current_device() {
  if (device_count() == 0) return -1;
  int device = -1;
  check(cudaGetDevice(&device), "cudaGetDevice");
  return device;
}

size_t free_device_bytes() {
  if (device_count() == 0) return 0;
  size_t free_bytes = 0, total = 0;
  check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  return free_bytes + idle_device_bytes(device);
}

bool device_may_use_in_place(const void* p, int device) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();  // a non-sticky error must not fail the next CUDA call
    return false;
  }
  return attributes.type == cudaMemoryTypeManaged ||
         (attributes.type == cudaMemoryTypeDevice && (device < 0 || attributes.device == device));
}

}  // namespace cuda
}  // namespace knn
