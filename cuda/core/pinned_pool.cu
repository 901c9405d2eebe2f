#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <vector>

#include "../cuda_engine.h"
#include "block_cache.h"
#include "cuda_support.h"
#include "pinned_pool.h"

namespace knn {
namespace cuda {
namespace {

// Pinned bytes kept idle between calls at most; blocks are rounded up to
// whole granules so that similar calls reuse each other's, and a block
// serves any smaller request.
constexpr size_t kPoolCap = size_t{1} << 30;
constexpr size_t kGranule = size_t{4} << 20;

void release_idle_blocks();

void* pin(size_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    fail(KNN_ERR_HOST_OUT_OF_MEMORY, "cudaHostAlloc: pinned host memory exhausted");
  }
  check(err, "cudaHostAlloc");
  release_at_exit<release_idle_blocks>();
  return p;
}

BlockCache& pool() {
  // A lease ends after the copies that used it (the pipeline waits for its
  // stream before it gives a lease back): no fences.
  static BlockCache* instance = new BlockCache(
      BlockCache::Policy{kGranule, kPoolCap, std::numeric_limits<double>::infinity()},
      BlockCache::Owner{pin, [](void* p) { cudaFreeHost(p); }, nullptr, nullptr});
  return *instance;
}

void release_idle_blocks() { pool().release_idle(); }

}  // namespace

PinnedLease::PinnedLease(size_t bytes) {
  if (bytes == 0) return;
  const BlockCache::Block b = pool().take(bytes);
  ptr_ = b.ptr;
  bytes_ = b.bytes;
}

PinnedLease::~PinnedLease() {
  if (ptr_) pool().give_back(BlockCache::Block{ptr_, bytes_});
}

void staging_copy(void* dst, const void* src, size_t bytes) {
  constexpr size_t kPiece = size_t{1} << 22;
  const int64_t pieces = static_cast<int64_t>((bytes + kPiece - 1) / kPiece);
#pragma omp parallel for num_threads(kHostCopyThreads) schedule(static) if (pieces > 1)
  for (int64_t p = 0; p < pieces; ++p) {
    const size_t at = static_cast<size_t>(p) * kPiece;
    std::memcpy(static_cast<char*>(dst) + at, static_cast<const char*>(src) + at,
                std::min(kPiece, bytes - at));
  }
}

}  // namespace cuda
}  // namespace knn
