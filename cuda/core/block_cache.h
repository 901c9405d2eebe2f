// Memory blocks kept for reuse between calls, up to a cap of idle bytes: the
// one cache behind the pinned staging buffers (pinned_pool.cu) and the
// engine's device memory (device_blocks.cu). Getting such memory from the
// driver costs more than the work that uses it: pinning hundreds of
// megabytes costs more than the transfers it speeds up, and cudaMalloc and
// cudaFree serialize the host threads of a process, so the shares of one
// call on two devices waited for each other's allocations.
//
// Plain C++ (no CUDA): the owner passes the functions that get and free a
// block, and a unit test drives the policy without a device.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "../../common/non_copyable.h"

namespace knn {
namespace cuda {

// Registers Release to run at exit, once. Caches are never destroyed (a
// destructor would run after the CUDA runtime has shut down); their owners
// call this after their first CUDA call instead, when the runtime has
// registered its own teardown: exit handlers run in reverse order, so the
// idle blocks go back while the runtime still works (and leak checkers such
// as compute-sanitizer's see none). glibc also runs a shared library's
// handlers when it is unloaded. Blocks a call still holds are not touched.
template <void (*Release)()>
void release_at_exit() {
  static std::once_flag registered;
  std::call_once(registered, [] { std::atexit(Release); });
}

class BlockCache : NonCopyable {
 public:
  // fence: where the owner records when the work that used the block has
  // passed (device blocks: events on the streams that may use it); NULL
  // when it has.
  struct Block {
    void* ptr = nullptr;
    size_t bytes = 0;
    void* fence = nullptr;
  };
  struct Policy {
    size_t granule;       // every block's size is a multiple of this
    size_t idle_cap;      // idle bytes kept at most
    double max_oversize;  // a block serves a request of up to this many times fewer bytes
  };
  // get(bytes) returns the new block's address or throws; release(ptr)
  // frees it; passed(fence) says whether a fence has passed, without
  // waiting; drop(fence) frees it. None of the last three throws; the last
  // two may be empty for an owner that never sets a fence.
  struct Owner {
    std::function<void*(size_t)> get;
    std::function<void(void*)> release;
    std::function<bool(void*)> passed;
    std::function<void(void*)> drop;
  };
  BlockCache(Policy policy, Owner owner) : policy_(policy), owner_(std::move(owner)) {}
  ~BlockCache() { release_idle(); }

  size_t rounded(size_t bytes) const {
    return (bytes + policy_.granule - 1) / policy_.granule * policy_.granule;
  }

  // The smallest idle block that serves `bytes` and whose fence has passed,
  // else a new one of rounded(bytes): a block still in use by work in
  // flight is never handed out, and never waited for. Where the new one
  // does not fit (get throws), the idle blocks are freed and it is asked
  // for once more.
  Block take(size_t bytes) {
    const size_t want = rounded(bytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto best = idle_.end();
      for (auto it = idle_.begin(); it != idle_.end(); ++it)
        if (serves(*it, want) && (best == idle_.end() || it->bytes < best->bytes) &&
            fence_passed(*it))
          best = it;
      if (best != idle_.end()) {
        const Block b = *best;
        idle_.erase(best);
        idle_bytes_ -= b.bytes;
        return Block{b.ptr, b.bytes, nullptr};
      }
    }
    try {
      return Block{owner_.get(want), want, nullptr};
    } catch (...) {
      if (release_idle() == 0) throw;
    }
    return Block{owner_.get(want), want, nullptr};
  }

  // Keeps b for reuse, freeing the oldest idle blocks as needed to stay
  // within the cap; a block larger than the cap is freed, and so is one that
  // there is no host memory to note. Never throws: destructors give blocks
  // back. Blocks over the cap are freed under the lock, which only threads
  // giving back to this cache wait for.
  void give_back(Block b) noexcept {
    if (b.ptr == nullptr) return;
    std::unique_lock<std::mutex> lock(mutex_);
    bool keep = b.bytes <= policy_.idle_cap;
    if (keep) {
      try {
        idle_.reserve(idle_.size() + 1);
      } catch (...) {
        keep = false;
      }
    }
    if (!keep) {
      lock.unlock();
      free(b);
      return;
    }
    while (idle_bytes_ + b.bytes > policy_.idle_cap) {
      const Block oldest = idle_.front();
      idle_.erase(idle_.begin());
      idle_bytes_ -= oldest.bytes;
      free(oldest);
    }
    idle_.push_back(b);  // reserved above
    idle_bytes_ += b.bytes;
  }

  // Frees every idle block; returns the bytes freed.
  size_t release_idle() {
    std::vector<Block> freed;
    size_t bytes = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      freed.swap(idle_);
      bytes = idle_bytes_;
      idle_bytes_ = 0;
    }
    for (const Block& f : freed) free(f);
    return bytes;
  }

  size_t idle_bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return idle_bytes_;
  }

 private:
  bool serves(const Block& b, size_t want) const {
    return b.bytes >= want && static_cast<double>(b.bytes) <= policy_.max_oversize * want;
  }
  // Drops a passed fence, so that it is asked about once.
  bool fence_passed(Block& b) {
    if (b.fence == nullptr) return true;
    if (!owner_.passed(b.fence)) return false;
    owner_.drop(std::exchange(b.fence, nullptr));
    return true;
  }
  void free(const Block& b) {
    if (b.fence) owner_.drop(b.fence);
    owner_.release(b.ptr);
  }

  Policy policy_;
  Owner owner_;
  mutable std::mutex mutex_;
  std::vector<Block> idle_;  // oldest first
  size_t idle_bytes_ = 0;
};

}  // namespace cuda
}  // namespace knn
