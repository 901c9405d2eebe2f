// What the CUDA tests share: skipping where there is no device, and (in
// builds with the CUDA runtime, KNN_TEST_WITH_CUDA) device arrays that own
// their memory, for the paths that take device-resident inputs and outputs.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>

#include "knn_gpgpu.h"

#if defined(KNN_TEST_WITH_CUDA)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <vector>
#endif

// Skips the running test on a machine without a usable CUDA device.
#define SKIP_WITHOUT_DEVICE()                                      \
  do {                                                             \
    if (cuGetDeviceCount() == 0) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

namespace knn_test {

// Calls op(options) with the smallest device budget, to `resolution` bytes,
// that the call accepts (found by bisection between a refusal and 1 GiB; the
// last call made is the one with that budget), so that a device call runs
// in as many chunks as its fixed pages allow. Returns op's status.
template <class Op>
int with_smallest_budget(const knn_options& base, Op op, size_t resolution) {
  knn_options o = base;
  size_t refused = 0, accepted = size_t{1} << 30;
  while (accepted - refused > resolution) {
    o.device_memory_limit = refused + (accepted - refused) / 2;
    const int status = op(&o);
    if (status == KNN_ERR_DEVICE_OUT_OF_MEMORY) {
      refused = o.device_memory_limit;
    } else {
      if (status != KNN_OK) return status;
      accepted = o.device_memory_limit;
    }
  }
  o.device_memory_limit = accepted;
  return op(&o);
}

}  // namespace knn_test

#if defined(KNN_TEST_WITH_CUDA)
namespace knn_test {

// `count` elements of device memory (at least one, so that get() is never
// NULL), optionally copied from a host vector; a failed CUDA call fails the test.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&ptr_), std::max<size_t>(count, 1) * sizeof(T)),
              cudaSuccess);
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    EXPECT_EQ(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~DeviceArray() { cudaFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return ptr_; }
  std::vector<T> to_host(size_t count) const {
    std::vector<T> host(count);
    EXPECT_EQ(cudaMemcpy(host.data(), ptr_, count * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }

 private:
  T* ptr_ = nullptr;
};

}  // namespace knn_test
#endif
