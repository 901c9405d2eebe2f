// Pinned (page-locked) host staging buffers, kept for reuse across calls.
// Pinning hundreds of megabytes costs more than the transfers it speeds up,
// so the pool keeps what calls return, up to a cap, for the next call, and
// frees what it keeps idle at process exit.
#pragma once

#include <cstddef>

namespace knn {
namespace cuda {

class PinnedLease {
 public:
  explicit PinnedLease(size_t bytes);  // throws HOST_OUT_OF_MEMORY / DEVICE
  ~PinnedLease();
  PinnedLease(const PinnedLease&) = delete;
  PinnedLease& operator=(const PinnedLease&) = delete;

  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// memcpy between pageable and pinned host memory over a few threads
// (kHostCopyThreads): one core cannot keep up with the PCIe link. Serial
// when called from inside a parallel region.
void staging_copy(void* dst, const void* src, size_t bytes);

}  // namespace cuda
}  // namespace knn
