#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "../peer_copy.h"
#include "cuda_support.h"

namespace knn {
namespace cuda {

namespace {
// Opens the direct route (NVLink or PCIe peer-to-peer) between two devices
// where the hardware has one, in both directions: without peer access the
// driver stages every peer copy through host memory, and kernels cannot
// reach the other device's memory at all. Tried once per pair per process;
// a pair without a route, or a context already at its peer limit, keeps the
// staged route (the copies are correct either way). A pair the host enabled
// itself reports "already enabled", which is success here. Returns whether
// `from` reaches `to`'s memory in place.
bool open_peer_route(int from, int to) {
  if (from == to || from < 0 || to < 0) return false;
  static std::mutex mutex;
  static std::map<std::pair<int, int>, bool> reaches;  // (from, to) -> enabled
  std::lock_guard<std::mutex> lock(mutex);
  const auto known = reaches.find({from, to});
  if (known != reaches.end()) return known->second;
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  for (const auto& [a, b] : {std::pair<int, int>{from, to}, std::pair<int, int>{to, from}}) {
    int possible = 0;
    bool enabled = false;
    if (cudaDeviceCanAccessPeer(&possible, a, b) == cudaSuccess && possible &&
        cudaSetDevice(a) == cudaSuccess) {
      const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
      enabled = e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled;
    }
    reaches[{a, b}] = enabled;
  }
  cudaSetDevice(current);
  cudaGetLastError();  // "already enabled" or "too many peers": not the caller's error
  return reaches[{from, to}];
}
}  // namespace

bool reaches_in_place(int device, int owner) { return open_peer_route(device, owner); }

int device_of(const void* p) {
  if (p == nullptr) return -1;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();  // host memory CUDA does not know: no error left behind
    return -1;
  }
  return attributes.type == cudaMemoryTypeDevice ? attributes.device : -1;
}

PeerStream::PeerStream() : stream_(open_stream()) {}

// No copy may outlive its staging buffer; the call's status already reports
// a failed copy.
PeerStream::~PeerStream() { close_stream(static_cast<cudaStream_t>(stream_)); }

void PeerStream::copy(void* dst, int dst_device, const void* src, int src_device, size_t bytes) {
  if (bytes == 0) return;
  open_peer_route(dst_device, src_device);  // the route, where there is one
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
  const DeviceBlock block = take_device_block(bytes);
  ptr_ = block.ptr;
  bytes_ = block.bytes;
}

PeerStaging::~PeerStaging() { give_back_device_block(DeviceBlock{ptr_, bytes_, device_}); }

}  // namespace cuda
}  // namespace knn
