// Device memory the CUDA engine allocates, as a function of the sizes alone.
// Host-only and header-only: the memory helpers of the C ABI answer from it
// without a device (and in builds without CUDA), and the engine allocates
// exactly these buffers, so the helpers are upper bounds of the real peak.
// A device test checks the peak against these figures.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "../../common/kdtree_layout.h"
#include "../../common/saturating.h"
#include "launch_policy.h"

namespace knn {
namespace cuda {

// The device allocator hands out memory in pages of this size: a buffer may
// occupy a whole page of its own, so every buffer is counted in whole pages.
constexpr size_t kAllocAlignment = size_t{2} << 20;
// CUB temporary storage of a radix sort or scan is a few histograms plus
// look-back state per tile of a few thousand items; this bound covers it
// with room to spare (a device test compares it with what CUB asks for).
constexpr size_t kCubTempBase = size_t{1} << 20;

inline size_t aligned(size_t bytes) {
  if (bytes > SIZE_MAX - (kAllocAlignment - 1)) return SIZE_MAX;
  return (bytes + kAllocAlignment - 1) / kAllocAlignment * kAllocAlignment;
}

inline size_t cub_temp_bytes(int64_t items) {
  return aligned(kCubTempBase + static_cast<size_t>(items < 0 ? 0 : items));
}

// A PointOrder (point_order.cuh) per point of its capacity: the Morton code
// and the position, twice for the sort, and a byte of the sort's
// temporaries; fixed, a page for each of its four buffers and the sort's
// temporaries (cub_temp_bytes).
constexpr size_t kPointOrderBytesPerPoint = 2 * (4 + 4) + 1;
constexpr size_t kPointOrderFixedBytes = 4 * kAllocAlignment + kCubTempBase;

// ---- The neighbourhood statistics' reducer (cuda/stats/neighbourhood_stats.cu) ----
// Per row of a chunk: its list (list_k indices and distances), its query and
// the query's point order, and where the outputs are host memory their
// staging (width values and a curvature).
inline size_t stats_row_bytes(int list_k, int width, bool outputs_on_device, size_t scalar_bytes) {
  return static_cast<size_t>(list_k) * (4 + scalar_bytes) + 3 * scalar_bytes +
         kPointOrderBytesPerPoint +
         (outputs_on_device ? 0 : static_cast<size_t>(width + 1) * scalar_bytes);
}
// Beside the chunks: the index's points (the queries' source) and the point
// order's fixed bytes.
inline size_t stats_fixed_bytes(int64_t n, size_t scalar_bytes) {
  return saturating_add(saturating_mul(static_cast<size_t>(n < 0 ? 0 : n), 3 * scalar_bytes),
                        kPointOrderFixedBytes);
}

// ---- The median-split build of both kd-trees (cuda/kdtree/median_split.cuh) ----
// Levels before shared_level are split in global memory, tile by tile; from
// shared_level on, one block builds each subtree in its shared memory
// (last_level + 1: every level in global memory).
constexpr int64_t kSplitTile = 4096;  // entries of a segment one block of a level handles
constexpr size_t kSplitRuleBytes = 16;
struct SplitBuildPlan {
  int shared_level = 0;
  int64_t shared_points = 0;    // most points of a segment at shared_level
  int64_t global_segments = 0;  // segments of the deepest level split in global memory
  int64_t global_tiles = 0;     // most tiles of a level split in global memory
};

// Shared memory of a block that builds the subtree of `points` points: every
// dimension's keys and the ids, twice (a stable partition reads one copy
// and writes the other).
inline size_t split_build_shared_bytes(int64_t points, int dims, size_t key_bytes) {
  return 2 * static_cast<size_t>(points) * (static_cast<size_t>(dims) * key_bytes + 4);
}

// The shared memory the build gives a block on a device that lets a block
// opt in to `optin` bytes (launch_policy.h).
inline size_t split_build_shared_budget(size_t optin) { return optin / kKdBuildSharedFraction; }

// Levels 0..last_level of a tree whose segments of level l hold at most
// most_at(l) points.
template <class MostAt>
SplitBuildPlan split_build_plan(int last_level, int dims, size_t key_bytes, size_t shared_budget,
                                MostAt most_at) {
  SplitBuildPlan plan;
  plan.shared_level = last_level + 1;
  for (int level = 0; level <= last_level; ++level) {
    const int64_t most = most_at(level);
    if (most <= kKdBuildSharedSegmentPoints &&
        split_build_shared_bytes(most, dims, key_bytes) <= shared_budget) {
      plan.shared_level = level;
      plan.shared_points = most;
      break;
    }
    plan.global_segments = int64_t{1} << level;
    plan.global_tiles =
        std::max(plan.global_tiles, plan.global_segments * ((most + kSplitTile - 1) / kSplitTile));
  }
  return plan;
}

// The build's scratch: every dimension's keys (key_bytes each) and the ids,
// twice, and per segment of the global levels its key ranges, split
// dimension, split rule and 256-bin digit histogram, and per tile two counts.
inline size_t split_build_scratch_bytes(int64_t n, int dims, size_t key_bytes,
                                        const SplitBuildPlan& plan) {
  const size_t un = static_cast<size_t>(n < 0 ? 0 : n);
  const size_t segments = static_cast<size_t>(plan.global_segments);
  return 2 * aligned(un * dims * key_bytes) + 2 * aligned(un * 4) +
         2 * aligned(segments * dims * key_bytes) + aligned(segments * 4) +
         aligned(segments * kSplitRuleBytes) + aligned(segments * 256 * 4) +
         aligned(static_cast<size_t>(plan.global_tiles) * 8);
}

// The classic tree's build runs levels 0..levels-1, and a segment of level l
// holds at most the leftmost node's subtree.
inline SplitBuildPlan classic_build_plan(int64_t n, size_t shared_budget) {
  const TreeShape shape(n < 0 ? 0 : n);
  return split_build_plan(shape.levels - 1, 3, sizeof(uint32_t), shared_budget,
                          [shape](int level) { return shape.subtree_size(level, 0); });
}

// Build of n points: the points, the tree itself and the build's scratch,
// planned with the shared memory every device gives a block (more segments
// in global memory than on any real device: an upper bound).
inline size_t build_bytes(int64_t n) {
  const size_t un = static_cast<size_t>(n < 0 ? 0 : n);
  const SplitBuildPlan plan =
      classic_build_plan(n, split_build_shared_budget(kMinSharedBytesPerBlock));
  return aligned(un * 12) + aligned(un * 24) +
         split_build_scratch_bytes(n, 3, sizeof(uint32_t), plan);
}

// Nodes are uploaded through a device staging buffer of at most this many.
constexpr int64_t kUploadNodes = int64_t{1} << 18;

// A classic tree as uploaded (kdtree/classic_tree_upload.cu): one float4
// (x, y, z, id) per node, and while it is uploaded the staging buffer and the
// check's words (the first node of every id, two defect words); then the
// rows of its points in input order, which the engine of the points keeps
// (counted with the engine's build).
inline size_t uploaded_tree_bytes(int64_t n) {
  const size_t un = static_cast<size_t>(n < 0 ? 0 : n);
  const size_t staging = static_cast<size_t>(n < kUploadNodes ? n : kUploadNodes) * 24;
  return aligned(un * 16) + aligned(staging) + aligned(un * 4) + aligned(16);
}

// Binned rows (binned_rows.cuh): the lists of thread searches that append
// their candidates unsorted to a row of device memory and sort it at the
// end. A row holds a power of two entries, at least twice the list (an
// append beyond the row hands the query to the warp lists) and at most
// kMaxBinnedRowCapacity, so lists of up to kMaxBinnedTake entries.
constexpr int kMaxBinnedRowCapacity = 512;
constexpr int kMaxBinnedTake = kMaxBinnedRowCapacity / 2;
constexpr int binned_row_capacity(int take) {
  int capacity = 64;
  while (capacity < 2 * take) capacity *= 2;
  return capacity;
}
// Device bytes a query of such a search takes: its row (a neighbour in two
// scalars' bytes, binned_rows.cuh NeighborKey: 8 for float, 16 for double)
// and how the row ends (the same size again).
constexpr size_t binned_rows_bytes_per_query(int take, size_t scalar_bytes) {
  return (static_cast<size_t>(binned_row_capacity(take)) + 1) * 2 * scalar_bytes;
}

// The searches keep k-lists of up to this many entries in shared memory (one
// list per warp) and larger ones as heaps in device scratch.
constexpr int kMaxWarpK = 2048;

// The queries of a call run in chunks of at most this many; two slots are in
// flight so that transfers overlap the search.
constexpr int64_t kMaxChunkQueries = int64_t{1} << 19;

inline int pipeline_slots(int64_t m, int64_t chunk) { return m > chunk ? 2 : 1; }

}  // namespace cuda
}  // namespace knn
