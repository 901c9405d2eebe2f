#include "../peer_copy.h"
#include "cuda_support.h"

namespace knn {
namespace cuda {

int device_of(const void* p) {
  if (p == nullptr) return -1;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();  // host memory CUDA does not know: no error left behind
    return -1;
  }
  return attributes.type == cudaMemoryTypeDevice ? attributes.device : -1;
}

PeerStream::PeerStream() {
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  stream_ = stream;
}

PeerStream::~PeerStream() {
  const cudaStream_t stream = static_cast<cudaStream_t>(stream_);
  cudaStreamSynchronize(stream);  // no copy may outlive its staging buffer
  cudaStreamDestroy(stream);
  cudaGetLastError();  // the call's status already reports a failed copy
}

void PeerStream::copy(void* dst, int dst_device, const void* src, int src_device, size_t bytes) {
  if (bytes == 0) return;
  check(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes,
                            static_cast<cudaStream_t>(stream_)),
        "cudaMemcpyPeerAsync");
}

void PeerStream::wait() {
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "cudaStreamSynchronize");
}

PeerStaging::PeerStaging(size_t bytes) {
  check(cudaGetDevice(&device_), "cudaGetDevice");
  if (bytes == 0) return;
  inject_device_alloc_fault(bytes);
  check(cudaMalloc(&ptr_, bytes), "cudaMalloc (peer staging)");
}

PeerStaging::~PeerStaging() {
  if (ptr_ == nullptr) return;
  int current = -1;
  cudaGetDevice(&current);
  if (current != device_) cudaSetDevice(device_);
  cudaFree(ptr_);
  if (current != device_) cudaSetDevice(current);
}

}  // namespace cuda
}  // namespace knn
