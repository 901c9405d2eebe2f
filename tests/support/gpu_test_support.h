// What the CUDA tests share: skipping where there is no device, and (in
// builds with the CUDA runtime, KNN_TEST_WITH_CUDA) device arrays that own
// their memory, for the paths that take device-resident inputs and outputs.
#pragma once

#include <gtest/gtest.h>

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
