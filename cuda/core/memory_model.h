// Device memory the CUDA engine allocates, as a function of the sizes alone.
// Host-only and header-only: the memory helpers of the C ABI answer from it
// without a device (and in builds without CUDA), and the engine allocates
// exactly these buffers, so the helpers are upper bounds of the real peak.
// A device test checks the peak against these figures.
#pragma once

#include <cstddef>
#include <cstdint>

namespace knn {
namespace cuda {

// The device allocator hands out memory in pages of this size: a buffer may
// occupy a whole page of its own, so every buffer is counted in whole pages.
constexpr size_t kAllocAlignment = size_t{2} << 20;
// CUB temporary storage of a radix sort or scan is a few histograms plus
// look-back state per tile of a few thousand items; this bound covers it
// with room to spare (a device test compares it with what CUB asks for).
constexpr size_t kCubTempBase = size_t{1} << 20;

// Byte counts saturate at SIZE_MAX instead of wrapping: the memory helpers
// take sizes from callers (2^30 queries of k = 2^30), and an estimate must
// never understate.
inline size_t saturating_add(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }
inline size_t saturating_mul(size_t a, size_t b) {
  return b != 0 && a > SIZE_MAX / b ? SIZE_MAX : a * b;
}

inline size_t aligned(size_t bytes) {
  if (bytes > SIZE_MAX - (kAllocAlignment - 1)) return SIZE_MAX;
  return (bytes + kAllocAlignment - 1) / kAllocAlignment * kAllocAlignment;
}

inline size_t cub_temp_bytes(int64_t items) {
  return aligned(kCubTempBase + static_cast<size_t>(items < 0 ? 0 : items));
}

// The build partitions its arrays in tiles of this many entries; each tile
// keeps two 12-byte counts (its total and the tiles before it).
constexpr int64_t kPartitionTile = 1024;

inline int64_t partition_tiles(int64_t n) {
  return n <= 0 ? 0 : (n + kPartitionTile - 1) / kPartitionTile;
}

// Build of n points: the points, four arrays of (x, y, z, id) entries (three
// sorted by one axis each, plus one to partition into), sort keys and ids
// (double-buffered), the partition tiles' counts, the tree itself and CUB's
// temporaries.
inline size_t build_bytes(int64_t n) {
  const size_t un = static_cast<size_t>(n < 0 ? 0 : n);
  const size_t tiles = static_cast<size_t>(partition_tiles(n));
  return aligned(un * 12) + 4 * aligned(un * 16) + 4 * aligned(un * 4) + 2 * aligned(tiles * 12) +
         aligned(un * 24) + cub_temp_bytes(n) + aligned(64) + aligned(24);
}

// Nodes are uploaded through a device staging buffer of at most this many.
constexpr int64_t kUploadNodes = int64_t{1} << 18;

// The warp search reads the subtrees below this many levels from the bottom
// as buckets of at most 2^kBucketLevels - 1 points.
constexpr int kBucketLevels = 6;

inline int bucket_level_for(int64_t n) {
  int levels = 0;
  while ((int64_t{1} << levels) - 1 < n) ++levels;
  return levels > kBucketLevels ? levels - kBucketLevels : 0;
}

// A tree as uploaded: one float4 (x, y, z, id) per node, the tree's bounding
// box, and while it is uploaded the staging buffer and the check's words (the
// first node of every id, two defect words).
inline size_t uploaded_tree_bytes(int64_t n) {
  const size_t un = static_cast<size_t>(n < 0 ? 0 : n);
  const size_t staging = static_cast<size_t>(n < kUploadNodes ? n : kUploadNodes) * 24;
  return aligned(un * 16) + aligned(64) + aligned(staging) + aligned(un * 4) + aligned(16);
}

// What the warp search lays out at a tree's first search of its own: the
// points again grouped by bucket and a box per bucket.
inline size_t bucket_bytes(int64_t n) {
  const size_t un = static_cast<size_t>(n < 0 ? 0 : n);
  const size_t boxes = (size_t{1} << bucket_level_for(n)) * 32;
  return aligned(un * 16) + aligned(boxes);
}

// A tree resident for its own searches.
inline size_t tree_bytes(int64_t n) { return uploaded_tree_bytes(n) + bucket_bytes(n); }

// The search keeps k-lists of up to this many entries in shared memory (one
// list per warp) and larger ones as heaps in device scratch.
constexpr int kMaxWarpK = 2048;

// Search scratch for one chunk of m queries: Morton keys and query order
// (double-buffered for the radix sort), the sort's temporaries, and for
// k > kMaxWarpK the heaps.
inline size_t search_scratch_bytes(int64_t m, int k) {
  const size_t um = static_cast<size_t>(m < 0 ? 0 : m);
  const size_t heaps =
      k > kMaxWarpK ? saturating_mul(2, aligned(saturating_mul(um * 4, static_cast<size_t>(k))))
                    : 0;
  return saturating_add(4 * aligned(um * 4) + cub_temp_bytes(m), heaps);
}

// One pipeline slot for a chunk of m queries and k neighbours: the queries,
// the result rows (indices and squared distances) and the search scratch.
inline size_t chunk_bytes(int64_t m, int k) {
  const size_t um = static_cast<size_t>(m < 0 ? 0 : m);
  const size_t uk = static_cast<size_t>(k < 0 ? 0 : k);
  const size_t rows = saturating_mul(2, aligned(saturating_mul(um * 4, uk)));
  return saturating_add(saturating_add(aligned(um * 12), rows), search_scratch_bytes(m, k));
}

// The queries of a call run in chunks of at most this many; two slots are in
// flight so that transfers overlap the search.
constexpr int64_t kMaxChunkQueries = int64_t{1} << 19;

inline int pipeline_slots(int64_t m, int64_t chunk) { return m > chunk ? 2 : 1; }

// Device bytes to answer m queries with chunks of `chunk` against n nodes.
inline size_t query_bytes(int64_t m, int k, int64_t n, int64_t chunk) {
  if (m <= 0) return tree_bytes(n);
  const int64_t c = chunk < m ? chunk : m;
  return saturating_add(
      tree_bytes(n), saturating_mul(static_cast<size_t>(pipeline_slots(m, c)), chunk_bytes(c, k)));
}

}  // namespace cuda
}  // namespace knn
