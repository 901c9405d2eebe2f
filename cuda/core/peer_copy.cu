#include <algorithm>
#include <mutex>
#include <set>
#include <utility>

#include "../peer_copy.h"
#include "cuda_support.h"

namespace knn {
namespace cuda {

namespace {
// Opens the direct route (NVLink or PCIe peer-to-peer) between two devices
// where the hardware has one, in both directions: without peer access the
// driver stages every peer copy through host memory, which made the shares
// of a multi-device call wait on the host link. Tried once per pair per
// process; a pair without a route, or a context already at its peer limit,
// keeps the staged route (the copies are correct either way). A pair the
// host enabled itself reports "already enabled", which is success here.
void open_peer_route(int a, int b) {
  if (a == b || a < 0 || b < 0) return;
  static std::mutex mutex;
  static std::set<std::pair<int, int>> tried;
  std::lock_guard<std::mutex> lock(mutex);
  if (!tried.insert({std::min(a, b), std::max(a, b)}).second) return;
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  for (const auto& [from, to] : {std::pair<int, int>{a, b}, std::pair<int, int>{b, a}}) {
    int possible = 0;
    if (cudaDeviceCanAccessPeer(&possible, from, to) != cudaSuccess || !possible) continue;
    if (cudaSetDevice(from) == cudaSuccess) cudaDeviceEnablePeerAccess(to, 0);
  }
  cudaSetDevice(current);
  cudaGetLastError();  // "already enabled" or "too many peers": the staged route stays
}
}  // namespace

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
  open_peer_route(dst_device, src_device);
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
