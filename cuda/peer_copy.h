// Moving a share of a call between the device that holds the caller's
// arrays and the device that answers the share (src/device_replicas.cpp).
// Plain C++ like cuda_engine.h; a build without CUDA links
// src/no_cuda_peer_copy.cpp (no device memory exists there).
#pragma once

#include <cstddef>

namespace knn {
namespace cuda {

// The device whose memory p is; -1 for host memory, managed memory (any
// device reads it in place), NULL, and in builds without CUDA.
int device_of(const void* p);

// Copies `bytes` from src (memory of src_device) to dst (memory of
// dst_device) with cudaMemcpyPeerAsync on a stream of the current device,
// and waits for it: the driver routes it over NVLink or PCIe peer-to-peer
// where the devices can, through the host where they cannot.
void copy_peer(void* dst, int dst_device, const void* src, int src_device, size_t bytes);

// Device memory on the current device for the life of the object (freed on
// that device). Throws KNN_ERR_DEVICE_OUT_OF_MEMORY when it does not fit.
class PeerStaging {
 public:
  explicit PeerStaging(size_t bytes);
  ~PeerStaging();
  PeerStaging(const PeerStaging&) = delete;
  PeerStaging& operator=(const PeerStaging&) = delete;
  void* get() const { return ptr_; }
  int device() const { return device_; }

 private:
  void* ptr_ = nullptr;
  int device_ = -1;
};

}  // namespace cuda
}  // namespace knn
