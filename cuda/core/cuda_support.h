// CUDA plumbing shared by the engine's translation units: turning CUDA
// errors into knn::Error, and RAII owners for device memory, pinned host
// memory and streams, so that no error path leaks.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

#include "../../common/error.h"
#include "../../common/non_copyable.h"
#include "launch_policy.h"

namespace knn {
namespace cuda {

// Throws the knn::Error that matches a failed CUDA call; `what` says where.
void throw_cuda_error(cudaError_t err, const char* what);

inline void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw_cuda_error(err, what);
}

// One value copied back from the device on `stream`, waited for; `what`
// names the caller in the errors ("quadtree build").
template <class T>
T read_back(const T* device_value, cudaStream_t stream, const char* what) {
  T value{};
  const cudaError_t copied =
      cudaMemcpyAsync(&value, device_value, sizeof(T), cudaMemcpyDeviceToHost, stream);
  if (copied != cudaSuccess)
    throw_cuda_error(copied, (std::string(what) + ": cudaMemcpyAsync").c_str());
  const cudaError_t waited = cudaStreamSynchronize(stream);
  if (waited != cudaSuccess)
    throw_cuda_error(waited, (std::string(what) + ": cudaStreamSynchronize").c_str());
  return value;
}

// Checks the launch that was just made (configuration errors only; faults
// inside the kernel surface at the next synchronisation).
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

// Whether kernels on `device` (any device when device < 0) may read and write
// p in place: memory of that device, or managed memory. Host memory that CUDA
// does not know answers false, and the runtime's error for it is cleared.
bool device_may_use_in_place(const void* p, int device);

// Test hook (tests/gpu/test_fault_injection.cpp; not part of the API): with the
// environment variable KNN_FAULT_DEVICE_ALLOC=N, the N-th device allocation
// counted since the variable took that value fails as if the device were
// full; the others succeed. Unset or empty: no fault, at the cost of one
// getenv per allocation. Throws KNN_ERR_DEVICE_OUT_OF_MEMORY for the chosen
// one.
void inject_device_alloc_fault(size_t bytes);

// A block of device memory: the engine's one way to get it
// (device_blocks.cu). take_device_block gives at least `bytes` (in whole
// allocation pages) on the current device, reusing an idle block of the
// same size where the device keeps one; throws
// KNN_ERR_DEVICE_OUT_OF_MEMORY when none fits. give_back_device_block waits
// for the block's device, as cudaFree does, then keeps the block for reuse
// or frees it; it never throws.
struct DeviceBlock {
  void* ptr = nullptr;
  size_t bytes = 0;
  int device = -1;
};
DeviceBlock take_device_block(size_t bytes);
void give_back_device_block(const DeviceBlock& block) noexcept;
// Bytes that `device` keeps idle for reuse (free_device_bytes counts them).
size_t idle_device_bytes(int device);
// The engine's streams (Stream, PeerStream): a non-blocking stream of the
// current device, known to the block fences while it is open, so that a
// block given back is handed out again only after the work queued on it by
// then (device_blocks.cu). close_stream waits for the stream's work first,
// so that buffers given back after it may be reused at once.
cudaStream_t open_stream();
void close_stream(cudaStream_t stream) noexcept;

template <class T>
class DeviceBuffer : NonCopyable {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) { allocate(count); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : block_(std::exchange(o.block_, DeviceBlock{})), count_(std::exchange(o.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    release();
    block_ = std::exchange(o.block_, DeviceBlock{});
    count_ = std::exchange(o.count_, 0);
    return *this;
  }

  void allocate(size_t count) {
    release();
    if (count == 0) return;
    inject_device_alloc_fault(count * sizeof(T));
    block_ = take_device_block(count * sizeof(T));
    count_ = count;
  }
  T* get() const { return static_cast<T*>(block_.ptr); }
  size_t size() const { return count_; }

 private:
  void release() {
    give_back_device_block(std::exchange(block_, DeviceBlock{}));
    count_ = 0;
  }
  DeviceBlock block_;
  size_t count_ = 0;
};

// Pieces of one device allocation, handed out in order, each on a 256-byte
// boundary (what cudaMalloc itself guarantees). One allocation instead of
// one per temporary: cudaMalloc and cudaFree cost tens of microseconds each,
// and cudaFree waits for the device. Work on one stream may reuse a region
// (rewind) once the work that used it is queued: the stream orders them.
class DeviceArena {
 public:
  static constexpr size_t kAlignment = 256;
  static size_t piece(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

  explicit DeviceArena(size_t bytes) : buffer_(bytes) {}

  template <class T>
  T* take(size_t count) {
    const size_t bytes = piece(count * sizeof(T));
    if (bytes > buffer_.size() - used_)
      fail(KNN_ERR_INTERNAL, format("device arena of %zu bytes cannot give %zu more after %zu",
                                    buffer_.size(), bytes, used_));
    T* p = reinterpret_cast<T*>(buffer_.get() + used_);
    used_ += bytes;
    return p;
  }
  size_t mark() const { return used_; }
  void rewind(size_t mark) { used_ = mark; }

 private:
  DeviceBuffer<unsigned char> buffer_;
  size_t used_ = 0;
};

class Stream : NonCopyable {
 public:
  Stream() : stream_(open_stream()) {}
  ~Stream() { close_stream(stream_); }
  cudaStream_t get() const { return stream_; }
  void synchronize() const { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  cudaStream_t stream_ = nullptr;
};

// Makes an engine's device current for one call and restores the caller's
// afterwards.
class DeviceScope : NonCopyable {
 public:
  explicit DeviceScope(int device) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (device != previous_) check(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceScope() { cudaSetDevice(previous_); }

 private:
  int previous_ = 0;
};

// The memory helpers promise an upper bound of CUB's temporary storage
// (memory_model.h); a larger request is a bug in that bound, reported as such.
inline size_t checked_cub_temp(size_t requested, size_t bound) {
  if (requested > bound)
    fail(KNN_ERR_INTERNAL, format("CUB asks for %zu bytes of temporary storage, more than the %zu "
                                  "the memory model allows",
                                  requested, bound));
  return requested;
}

// Lets `kernel` take as much dynamic shared memory as the device allows a
// block beside the kernel's static shared memory (above 48 KB the limit must
// be raised per kernel), and returns that many bytes. Always the same value:
// when each call set its own size, threads launching the kernel at once
// lowered it under one another's launches, which then failed with
// cudaErrorInvalidValue.
template <class Kernel>
size_t allow_all_dynamic_shared(Kernel* kernel, const char* what) {
  const int optin = device_limits().shared_bytes_optin;
  cudaFuncAttributes attributes{};
  check(cudaFuncGetAttributes(&attributes, kernel), what);
  const int allowance = optin - static_cast<int>(attributes.sharedSizeBytes);
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, allowance), what);
  return static_cast<size_t>(allowance);
}

// Blocks for a one-dimensional launch over `items` threads of `block` each.
inline unsigned grid_for(long long items, int block) {
  return static_cast<unsigned>((items + block - 1) / block);
}

}  // namespace cuda
}  // namespace knn
