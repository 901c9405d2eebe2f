// Devices that exist only as a number: DeviceOps (src/device_replicas.h) whose
// select() records the device in a thread-local "current device", so the
// multi-device code (run_shares, BasicDeviceReplicas, split_points) runs and
// can be watched on a machine without a GPU. Their memory is host memory
// registered as a stand-in device's (FakeDevices::array, ops().allocate):
// ops().owner names it, and the copy streams move bytes between such blocks
// only when each side is memory of the device the copy names, and only when
// waited for (or destroyed), so that a split that reads staged data before
// waiting for it reads the wrong bytes. Any other array is host memory.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "../../common/error.h"
#include "../../src/device_replicas.h"

namespace knn_test {

// The calling thread's selected fake device (-1: none yet).
inline thread_local int fake_current = -1;

class FakeDevices {
 public:
  // A block of `bytes` as memory of `device`, freed (and forgotten) with it.
  class Block : public knn::DeviceAllocation {
   public:
    Block(FakeDevices& owner, int device, size_t bytes)
        : owner_(owner), device_(device), bytes_(std::max<size_t>(bytes, 1), 0) {
      owner_.add(bytes_.data(), bytes_.size(), device_);
    }
    ~Block() override { owner_.remove(bytes_.data()); }
    void* get() const override { return const_cast<char*>(bytes_.data()); }
    int device() const override { return device_; }
    template <class T>
    T* as() const {
      return static_cast<T*>(get());
    }

   private:
    FakeDevices& owner_;
    int device_;
    std::vector<char> bytes_;
  };

  // n values of T on `device`, copied from `from` (n of them) where given.
  template <class T>
  std::unique_ptr<Block> array(int device, size_t n, const T* from = nullptr) {
    auto block = std::make_unique<Block>(*this, device, n * sizeof(T));
    if (from && n > 0) std::memcpy(block->get(), from, n * sizeof(T));
    return block;
  }

  // What a device reports free (the budget of a call without a limit).
  size_t free_bytes = size_t{1} << 30;
  // (device, owner) pairs with peer access.
  std::set<std::pair<int, int>> peers;
  // Devices whose allocate() fails with DEVICE_OUT_OF_MEMORY.
  std::set<int> full;

  knn::DeviceOps ops() {
    return knn::DeviceOps{
        [](int d) { fake_current = d; },
        [] { return fake_current; },
        [this](const void* p) { return owner(p); },
        [this](int device, int owner) {
          return peers.count({device, owner}) > 0;
        },
        [this](size_t limit) { return limit > 0 ? std::min(limit, free_bytes) : free_bytes; },
        [this](size_t bytes) -> std::unique_ptr<knn::DeviceAllocation> {
          if (full.count(fake_current))
            knn::fail(KNN_ERR_DEVICE_OUT_OF_MEMORY, "the stand-in device is full");
          EXPECT_GE(fake_current, 0) << "an allocation with no device selected";
          {
            std::lock_guard<std::mutex> lock(mutex_);
            allocated_[fake_current] += bytes;
          }
          return std::make_unique<Block>(*this, fake_current, bytes);
        },
        [this]() -> std::unique_ptr<knn::DeviceCopyStream> {
          return std::make_unique<Stream>(*this);
        }};
  }

  // The device whose block holds p, -1 for any other memory.
  int owner(const void* p) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const char* c = static_cast<const char*>(p);
    auto it = blocks_.upper_bound(c);
    if (it == blocks_.begin()) return -1;
    --it;
    return c < it->first + it->second.first ? it->second.second : -1;
  }

  // Bytes allocated through ops() on each device so far, and the bytes
  // copied between devices.
  std::map<int, size_t> allocated() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return allocated_;
  }
  size_t copied() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return copied_;
  }
  // Blocks alive (arrays and allocations).
  size_t live_blocks() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return blocks_.size();
  }

 private:
  // Copies run when waited for (or when the stream goes), in order.
  class Stream : public knn::DeviceCopyStream {
   public:
    explicit Stream(FakeDevices& owner) : owner_(owner) {}
    ~Stream() override { wait(); }
    void copy(void* dst, int dst_device, const void* src, int src_device, size_t bytes) override {
      EXPECT_EQ(owner_.owner(dst), dst_device) << "a copy into memory of another device";
      EXPECT_EQ(owner_.owner(src), src_device) << "a copy from memory of another device";
      EXPECT_GE(dst_device, 0);
      EXPECT_GE(src_device, 0);
      pending_.push_back({dst, src, bytes});
    }
    void wait() override {
      for (const Copy& c : pending_) {
        std::memcpy(c.dst, c.src, c.bytes);
        std::lock_guard<std::mutex> lock(owner_.mutex_);
        owner_.copied_ += c.bytes;
      }
      pending_.clear();
    }

   private:
    struct Copy {
      void* dst;
      const void* src;
      size_t bytes;
    };
    FakeDevices& owner_;
    std::vector<Copy> pending_;
  };

  void add(const char* at, size_t bytes, int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks_[at] = {bytes, device};
  }
  void remove(const char* at) {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks_.erase(at);
  }

  mutable std::mutex mutex_;
  std::map<const char*, std::pair<size_t, int>> blocks_;  // start -> (bytes, device)
  std::map<int, size_t> allocated_;
  size_t copied_ = 0;
};

// Stand-in devices with no memory of their own: every array is host memory
// and no device reaches another's.
inline knn::DeviceOps fake_ops() {
  static FakeDevices none;
  return none.ops();
}

}  // namespace knn_test
