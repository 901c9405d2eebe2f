// The engine's device memory: every DeviceBuffer and peer staging buffer
// takes its block from one BlockCache per device (block_cache.h), so that a
// call reuses the blocks of the call before it instead of asking the driver.
// cudaMalloc and cudaFree serialize the host threads of a process: on two
// H200s the shares of one call (10^7 x 10^7, k = 8, device arrays) ran 1.8 ms
// slower side by side than alone, waiting for each other's allocations, and
// the split reached 1.78x; with the blocks reused, 1.99x.
//
// A block given back may still be read or written by work in flight (an
// error path unwinds before its stream is done). Waiting for the device
// would make one thread wait for another's search, and a pipeline for its
// own other stream; instead the block carries a fence, an event recorded on
// every stream the engine has open on its device, and is handed out again
// only once they have all passed. Every stream of the engine is known here
// (Stream and PeerStream open theirs through open_stream), and no engine
// work runs on any other.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include "block_cache.h"
#include "cuda_support.h"
#include "memory_model.h"

namespace knn {
namespace cuda {
namespace {

// Idle bytes a device keeps at most: the temporaries of the calls one
// expects to repeat (a share of 10^7 queries takes about 140 MB), small next
// to the memory of a device, and at most a sixteenth of it.
constexpr size_t kIdleCap = size_t{1} << 30;
constexpr size_t kIdleShareOfDevice = 16;

// Runs f with `device` current, restoring the current device after.
template <class F>
void on_device(int device, F f) {
  int current = -1;
  cudaGetDevice(&current);
  if (current != device) cudaSetDevice(device);
  f();
  if (current != device && current >= 0) cudaSetDevice(current);
}

void release_idle_blocks();

// The engine's open streams, by device.
class OpenStreams {
 public:
  void note(cudaStream_t stream, int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    open_.push_back(Open{stream, device});
  }
  void forget(cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    open_.erase(std::remove_if(open_.begin(), open_.end(),
                               [&](const Open& o) { return o.stream == stream; }),
                open_.end());
  }
  // Events recorded on every open stream of `device` (the current device);
  // NULL when there is none. Under the lock, so that no stream is
  // destroyed while an event is recorded on it.
  std::vector<cudaEvent_t>* fence(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<std::vector<cudaEvent_t>> events(new std::vector<cudaEvent_t>);
    for (const Open& o : open_) {
      if (o.device != device) continue;
      cudaEvent_t event = nullptr;
      if (cudaEventCreateWithFlags(&event, cudaEventDisableTiming) == cudaSuccess) {
        events->push_back(event);
        if (cudaEventRecord(event, o.stream) == cudaSuccess) continue;
      }
      for (cudaEvent_t e : *events) cudaEventDestroy(e);
      throw Unfenced();
    }
    if (events->empty()) return nullptr;
    return events.release();
  }
  struct Unfenced {};

 private:
  struct Open {
    cudaStream_t stream;
    int device;
  };
  std::mutex mutex_;
  std::vector<Open> open_;
};

OpenStreams& open_streams() {
  static OpenStreams* instance = new OpenStreams;
  return *instance;
}

using Fence = std::vector<cudaEvent_t>;

bool fence_passed(void* fence) {
  for (cudaEvent_t event : *static_cast<Fence*>(fence))
    if (cudaEventQuery(event) != cudaSuccess) {
      cudaGetLastError();  // not ready (or a failed device): not passed, no error left behind
      return false;
    }
  return true;
}

void drop_fence(void* fence) {
  Fence* events = static_cast<Fence*>(fence);
  for (cudaEvent_t event : *events) cudaEventDestroy(event);
  delete events;
}

class DeviceCaches {
 public:
  // The cache of `device` (the current device), made at its first block.
  BlockCache& of(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (static_cast<size_t>(device) >= caches_.size()) caches_.resize(device + 1);
    std::unique_ptr<BlockCache>& cache = caches_[static_cast<size_t>(device)];
    if (!cache) {
      size_t free_bytes = 0, total = 0;
      check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
      const BlockCache::Policy policy{kAllocAlignment,
                                      std::min(kIdleCap, total / kIdleShareOfDevice), 1.0};
      cache.reset(new BlockCache(
          policy, BlockCache::Owner{[](size_t bytes) {
                                      void* p = nullptr;
                                      check(cudaMalloc(&p, bytes), "cudaMalloc");
                                      return p;
                                    },
                                    [device](void* p) { on_device(device, [p] { cudaFree(p); }); },
                                    fence_passed, drop_fence}));
      release_at_exit<release_idle_blocks>();
    }
    return *cache;
  }

  // The cache of `device` if it has one (never allocates).
  BlockCache* find(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    return device >= 0 && static_cast<size_t>(device) < caches_.size()
               ? caches_[static_cast<size_t>(device)].get()
               : nullptr;
  }

  void release_idle() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& cache : caches_)
      if (cache) cache->release_idle();
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<BlockCache>> caches_;
};

DeviceCaches& caches() {
  static DeviceCaches* instance = new DeviceCaches;
  return *instance;
}

void release_idle_blocks() { caches().release_idle(); }

}  // namespace

DeviceBlock take_device_block(size_t bytes) {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  const BlockCache::Block b = caches().of(device).take(bytes);
  return DeviceBlock{b.ptr, b.bytes, device};
}

void give_back_device_block(const DeviceBlock& b) noexcept {
  if (b.ptr == nullptr) return;
  BlockCache* cache = caches().find(b.device);
  if (cache) {
    Fence* fence = nullptr;
    try {
      on_device(b.device, [&] { fence = open_streams().fence(b.device); });
      cache->give_back(BlockCache::Block{b.ptr, b.bytes, fence});
      return;
    } catch (...) {
      // No fence or no room to note the block: freed below, as before.
      if (fence) drop_fence(fence);
      cudaGetLastError();
    }
  }
  on_device(b.device, [&] { cudaFree(b.ptr); });
}

cudaStream_t open_stream() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  try {
    open_streams().note(stream, device);
  } catch (...) {
    cudaStreamDestroy(stream);
    throw;
  }
  return stream;
}

void close_stream(cudaStream_t stream) noexcept {
  if (stream == nullptr) return;
  cudaStreamSynchronize(stream);
  try {
    open_streams().forget(stream);
  } catch (...) {
    // A mutex that cannot lock: the stream stays listed, and the fences
    // recorded on it fail, so blocks given back meanwhile are freed.
  }
  cudaStreamDestroy(stream);
  cudaGetLastError();  // a failed stream's error was reported where it arose
}

size_t idle_device_bytes(int device) {
  BlockCache* cache = caches().find(device);
  return cache ? cache->idle_bytes() : 0;
}

}  // namespace cuda
}  // namespace knn
