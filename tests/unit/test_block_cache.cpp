// The reuse policy of cuda/core/block_cache.h (pinned staging and device
// memory), driven by counting get/free functions on the host: what is
// reused, what is freed, the cap on idle bytes, and the retry after a
// failed get, and a block given back when no host memory is left to note it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <map>
#include <new>
#include <stdexcept>

#include "../../cuda/core/block_cache.h"
#include "host_alloc_hook.h"

namespace {

using knn::cuda::BlockCache;

constexpr size_t kGranule = 1024;

// Host memory standing in for a device: each get is a real allocation,
// recorded with its size, so that the test sees which blocks are alive.
struct Memory {
  std::map<void*, size_t> live;
  int gets = 0, frees = 0;
  size_t limit = std::numeric_limits<size_t>::max();  // bytes alive at most

  size_t live_bytes() const {
    size_t sum = 0;
    for (const auto& block : live) sum += block.second;
    return sum;
  }
  // Fences are ints: 0 while the work is in flight, 1 once it has passed.
  std::map<void*, int> fences;
  void* fence(int passed) {
    int* f = new int(passed);
    fences[f] = passed;
    return f;
  }
  BlockCache cache(size_t idle_cap, double max_oversize) {
    return BlockCache(BlockCache::Policy{kGranule, idle_cap, max_oversize},
                      BlockCache::Owner{[this](size_t bytes) {
                                          if (live_bytes() + bytes > limit) throw std::bad_alloc();
                                          void* p = std::malloc(bytes);
                                          live[p] = bytes;
                                          ++gets;
                                          return p;
                                        },
                                        [this](void* p) {
                                          live.erase(p);
                                          std::free(p);
                                          ++frees;
                                        },
                                        [](void* f) { return *static_cast<int*>(f) != 0; },
                                        [this](void* f) {
                                          fences.erase(f);
                                          delete static_cast<int*>(f);
                                        }});
  }
};

TEST(BlockCache, ReusesABlockOfTheSameRoundedSize) {
  Memory m;
  BlockCache cache = m.cache(1 << 20, 1.0);
  BlockCache::Block a = cache.take(1000);
  EXPECT_EQ(a.bytes, kGranule);
  cache.give_back(a);
  EXPECT_EQ(cache.idle_bytes(), kGranule);
  const BlockCache::Block b = cache.take(kGranule);  // same rounded size
  EXPECT_EQ(b.ptr, a.ptr);
  EXPECT_EQ(m.gets, 1);
  EXPECT_EQ(cache.idle_bytes(), 0u);
  cache.give_back(b);
}

TEST(BlockCache, ExactPolicyNeverHandsOutALargerBlock) {
  Memory m;
  BlockCache cache = m.cache(1 << 20, 1.0);
  const BlockCache::Block big = cache.take(4 * kGranule);
  cache.give_back(big);
  const BlockCache::Block small = cache.take(kGranule);
  EXPECT_NE(small.ptr, big.ptr);
  EXPECT_EQ(small.bytes, kGranule);
  EXPECT_EQ(m.gets, 2);
  EXPECT_EQ(cache.idle_bytes(), 4 * kGranule);  // the big one still waits
  cache.give_back(small);
}

TEST(BlockCache, OversizePolicyTakesTheSmallestThatServes) {
  Memory m;
  BlockCache cache = m.cache(1 << 20, std::numeric_limits<double>::infinity());
  const BlockCache::Block b8 = cache.take(8 * kGranule);
  const BlockCache::Block b2 = cache.take(2 * kGranule);
  const BlockCache::Block b4 = cache.take(4 * kGranule);
  cache.give_back(b8);
  cache.give_back(b2);
  cache.give_back(b4);
  const BlockCache::Block got = cache.take(3 * kGranule);
  EXPECT_EQ(got.ptr, b4.ptr);
  EXPECT_EQ(got.bytes, 4 * kGranule);
  EXPECT_EQ(m.gets, 3);
  cache.give_back(got);
}

TEST(BlockCache, IdleBytesStayWithinTheCapOldestFreedFirst) {
  Memory m;
  BlockCache cache = m.cache(3 * kGranule, 1.0);
  const BlockCache::Block a = cache.take(kGranule);
  const BlockCache::Block b = cache.take(kGranule);
  const BlockCache::Block c = cache.take(2 * kGranule);
  cache.give_back(a);
  cache.give_back(b);
  EXPECT_EQ(cache.idle_bytes(), 2 * kGranule);
  cache.give_back(c);  // 4 granules: the oldest (a) goes
  EXPECT_EQ(cache.idle_bytes(), 3 * kGranule);
  EXPECT_EQ(m.live.count(a.ptr), 0u);
  EXPECT_EQ(m.live.count(b.ptr), 1u);
  EXPECT_EQ(m.live.count(c.ptr), 1u);
  const BlockCache::Block huge = cache.take(4 * kGranule);
  cache.give_back(huge);  // larger than the cap: freed at once
  EXPECT_EQ(m.live.count(huge.ptr), 0u);
  EXPECT_EQ(cache.idle_bytes(), 3 * kGranule);
  EXPECT_EQ(cache.release_idle(), 3 * kGranule);
  EXPECT_TRUE(m.live.empty());
  EXPECT_EQ(m.frees, m.gets);
}

TEST(BlockCache, AFailedGetFreesTheIdleBlocksAndTriesOnce) {
  Memory m;
  BlockCache cache = m.cache(1 << 20, 1.0);
  const BlockCache::Block a = cache.take(2 * kGranule);
  cache.give_back(a);
  m.limit = 3 * kGranule;  // the idle block leaves room for one granule only
  const BlockCache::Block b = cache.take(3 * kGranule);
  EXPECT_EQ(b.bytes, 3 * kGranule);
  EXPECT_EQ(cache.idle_bytes(), 0u);
  EXPECT_EQ(m.live.count(a.ptr), 0u);
  // Nothing idle to free: the failure reaches the caller, and nothing leaks.
  EXPECT_THROW(cache.take(kGranule), std::bad_alloc);
  cache.give_back(b);
  cache.release_idle();
  EXPECT_TRUE(m.live.empty());
}

// Destructors give blocks back, so give_back must not throw: with no host
// memory to note the block, it frees it.
TEST(BlockCache, ABlockThatCannotBeNotedIsFreed) {
  namespace hook = knn_test::alloc_hook;
  Memory m;
  BlockCache cache = m.cache(1 << 20, 1.0);
  const BlockCache::Block a = cache.take(kGranule);
  hook::arm(1, hook::Mode::Persistent);
  bool threw = false;
  try {
    cache.give_back(a);
  } catch (...) {
    threw = true;
  }
  const int64_t failed = hook::failed();
  hook::disarm();
  EXPECT_FALSE(threw);
  EXPECT_GT(failed, 0) << "give_back allocated nothing: the test proves nothing";
  EXPECT_EQ(m.live.count(a.ptr), 0u);
  EXPECT_EQ(cache.idle_bytes(), 0u);
  // With memory again, blocks are kept as before.
  const BlockCache::Block b = cache.take(kGranule);
  cache.give_back(b);
  EXPECT_EQ(cache.idle_bytes(), kGranule);
  cache.release_idle();
  EXPECT_TRUE(m.live.empty());
}

TEST(BlockCache, ABlockIsNotHandedOutBeforeItsFencePasses) {
  Memory m;
  BlockCache cache = m.cache(1 << 20, 1.0);
  BlockCache::Block a = cache.take(kGranule);
  a.fence = m.fence(0);
  int* in_flight = static_cast<int*>(a.fence);
  cache.give_back(a);
  const BlockCache::Block b = cache.take(kGranule);  // a is still in use: a new block
  EXPECT_NE(b.ptr, a.ptr);
  EXPECT_EQ(m.gets, 2);
  *in_flight = 1;  // the work has passed
  const BlockCache::Block c = cache.take(kGranule);
  EXPECT_EQ(c.ptr, a.ptr);
  EXPECT_EQ(c.fence, nullptr);
  EXPECT_TRUE(m.fences.empty());  // dropped once passed
  // A block freed with its fence (cap 0 keeps nothing) drops the fence too.
  BlockCache none = m.cache(0, 1.0);
  BlockCache::Block d = none.take(kGranule);
  d.fence = m.fence(0);
  none.give_back(d);
  EXPECT_TRUE(m.fences.empty());
  EXPECT_EQ(m.live.count(d.ptr), 0u);
  cache.give_back(b);
  cache.give_back(c);
  cache.release_idle();
  EXPECT_TRUE(m.live.empty());
}

}  // namespace
