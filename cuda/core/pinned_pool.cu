#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <vector>

#include "../../common/non_copyable.h"
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
  // One part per thread, of at least 1 MiB (smaller parts cost more to
  // hand out than to copy).
  constexpr size_t kMinPart = size_t{1} << 20;
  const int64_t parts =
      std::clamp<int64_t>(static_cast<int64_t>(bytes / kMinPart), 1, kHostCopyThreads);
  const size_t part = (bytes + static_cast<size_t>(parts) - 1) / static_cast<size_t>(parts);
#pragma omp parallel for num_threads(kHostCopyThreads) schedule(static) if (parts > 1)
  for (int64_t p = 0; p < parts; ++p) {
    const size_t at = static_cast<size_t>(p) * part;
    if (at < bytes)
      std::memcpy(static_cast<char*>(dst) + at, static_cast<const char*>(src) + at,
                  std::min(part, bytes - at));
  }
}

namespace {

// Pieces of the staged copies: one staging_copy keeps every copy thread
// busy with a few MiB, and two pieces in flight are 64 MiB of the pool.
constexpr size_t kStagedPieceBytes = size_t{32} << 20;

// The two pinned pieces of a staged copy and the events that say when the
// stream is done with each. On an error the stream is waited for before the
// pieces go back to the pool: no transfer may land in a piece that another
// call has leased since.
class StagedPieces : NonCopyable {
 public:
  StagedPieces(size_t piece_bytes, size_t total, cudaStream_t stream)
      : stream_(stream),
        pinned_{PinnedLease(piece_bytes), PinnedLease(total > piece_bytes ? piece_bytes : 0)} {
    for (cudaEvent_t& e : done_) {
      const cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
      if (err != cudaSuccess) {
        destroy_events();
        check(err, "cudaEventCreate (staged copy)");
      }
    }
  }
  ~StagedPieces() {
    cudaStreamSynchronize(stream_);
    cudaGetLastError();  // an error here was the call's, already reported
    destroy_events();
  }

  char* piece(int slot) const { return pinned_[slot].as<char>(); }
  void mark_done(int slot) { check(cudaEventRecord(done_[slot], stream_), "cudaEventRecord"); }
  void wait(int slot) { check(cudaEventSynchronize(done_[slot]), "staged copy"); }

 private:
  void destroy_events() {
    for (cudaEvent_t& e : done_)
      if (e) cudaEventDestroy(e), e = nullptr;
  }

  cudaStream_t stream_;
  PinnedLease pinned_[2];
  cudaEvent_t done_[2] = {nullptr, nullptr};
};

}  // namespace

void upload_staged_pieces(const void* host_src, size_t bytes, size_t piece_bytes,
                          cudaStream_t stream,
                          const std::function<void(size_t, size_t, const void*)>& land) {
  if (bytes == 0) return;
  const size_t piece = std::min(piece_bytes, bytes);
  StagedPieces staged(piece, bytes, stream);
  const char* src = static_cast<const char*>(host_src);
  int slot = 0;
  for (size_t at = 0, pieces = 0; at < bytes; at += piece, ++pieces, slot ^= 1) {
    if (pieces >= 2) staged.wait(slot);
    const size_t length = std::min(piece, bytes - at);
    staging_copy(staged.piece(slot), src + at, length);
    land(at, length, staged.piece(slot));
    staged.mark_done(slot);
  }
  check(cudaStreamSynchronize(stream), "staged upload");
}

void upload_staged(void* device_dst, const void* host_src, size_t bytes, cudaStream_t stream) {
  char* dst = static_cast<char*>(device_dst);
  upload_staged_pieces(
      host_src, bytes, kStagedPieceBytes, stream,
      [&](size_t at, size_t length, const void* pinned) {
        check(cudaMemcpyAsync(dst + at, pinned, length, cudaMemcpyHostToDevice, stream),
              "cudaMemcpyAsync (staged upload)");
      });
}

void download_staged(void* host_dst, const void* device_src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  const size_t piece = std::min(kStagedPieceBytes, bytes);
  StagedPieces staged(piece, bytes, stream);
  char* dst = static_cast<char*>(host_dst);
  const char* src = static_cast<const char*>(device_src);
  // The piece each slot holds once its transfer is done (length 0: none).
  size_t held_at[2] = {0, 0}, held_length[2] = {0, 0};
  const auto drain = [&](int slot) {
    if (held_length[slot] == 0) return;
    staged.wait(slot);
    staging_copy(dst + held_at[slot], staged.piece(slot), held_length[slot]);
    held_length[slot] = 0;
  };
  int slot = 0;
  for (size_t at = 0; at < bytes; at += piece, slot ^= 1) {
    drain(slot);
    const size_t length = std::min(piece, bytes - at);
    check(cudaMemcpyAsync(staged.piece(slot), src + at, length, cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync (staged download)");
    staged.mark_done(slot);
    held_at[slot] = at, held_length[slot] = length;
    drain(slot ^ 1);  // the previous piece, while this one crosses the link
  }
  drain(slot ^ 1);
}

void copy_points_in(void* device_dst, const void* src, size_t bytes, bool src_on_device,
                    cudaStream_t stream) {
  if (!src_on_device) return upload_staged(device_dst, src, bytes, stream);
  check(cudaMemcpyAsync(device_dst, src, bytes, cudaMemcpyDeviceToDevice, stream),
        "cudaMemcpyAsync (points on the device)");
  check(cudaStreamSynchronize(stream), "cudaMemcpyAsync (points on the device)");
}

}  // namespace cuda
}  // namespace knn
