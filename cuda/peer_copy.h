// Moving a share of a call between the device that holds the caller's
// arrays and the device that answers the share (src/device_replicas.cpp, through
// Backend::allocate and Backend::copy_stream: cuda/cuda_backend.cpp).
// Plain C++ like cuda_engine.h; a build without CUDA links
// cuda/no_cuda/no_cuda_peer_copy.cpp (no device memory exists there).
#pragma once

#include <cstddef>

#include "../common/non_copyable.h"

namespace knn {
namespace cuda {

// The device whose memory p is; -1 for host memory, managed memory (any
// device reads it in place), NULL, and in builds without CUDA.
int device_of(const void* p);

// Whether kernels and copies on `device` read and write memory of `owner` in
// place (peer access, NVLink or PCIe peer-to-peer), after enabling peer access
// between the two where the hardware allows it (both directions, once per
// pair per process). False for the same device, a negative one, and in builds
// without CUDA.
bool reaches_in_place(int device, int owner);

// A stream of the current device for copies between devices, so that a
// share's transfers overlap its search. copy() first enables peer access
// between the two devices (both directions, once per pair per process), so
// that the copy takes NVLink or PCIe peer-to-peer where the devices have it;
// where they have not, the driver stages it through the host. Destruction
// waits for the copies still in flight.
class PeerStream : NonCopyable {
 public:
  PeerStream();
  ~PeerStream();
  // Enqueues a copy of `bytes` from src (memory of src_device) to dst (memory
  // of dst_device): cudaMemcpyPeerAsync.
  void copy(void* dst, int dst_device, const void* src, int src_device, size_t bytes);
  // Waits for every copy enqueued so far.
  void wait();

 private:
  // Unused by the stubs of a build without CUDA (cuda/no_cuda/no_cuda_peer_copy.cpp).
  [[maybe_unused]] void* stream_ = nullptr;  // cudaStream_t
};

// Device memory on the current device for the life of the object (freed on
// that device). Throws KNN_ERR_DEVICE_OUT_OF_MEMORY when it does not fit.
class PeerStaging : NonCopyable {
 public:
  explicit PeerStaging(size_t bytes);
  ~PeerStaging();
  void* get() const { return ptr_; }
  int device() const { return device_; }

 private:
  void* ptr_ = nullptr;
  // The block's, in whole allocation pages; unused by the stubs of a build
  // without CUDA.
  [[maybe_unused]] size_t bytes_ = 0;
  int device_ = -1;
};

}  // namespace cuda
}  // namespace knn
