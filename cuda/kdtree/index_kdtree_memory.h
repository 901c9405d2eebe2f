// Device memory of the CUDA bucket kd-tree engine (index_kdtree.cuh) as a
// function of the sizes alone. Host-only and header-only, like
// memory_model.h: knn_estimate_* answer from it without a device, and the
// engine allocates exactly the buffers counted here (each in whole pages), so
// the figures are upper bounds of its real peak. scalar_bytes is the size of
// a coordinate and a squared distance: 4 for the float32 index, 8 for the
// float64 one.
#pragma once

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>

#include "../../common/index_leaf_size.h"
#include "../core/launch_policy.h"
#include "../core/memory_model.h"
#include "../core/query_chunks_memory.h"
#include "bucket_tree_shape.h"

namespace knn {
namespace cuda {

// The default leaf sizes and their rules by dim: common/index_leaf_size.h.
using knn::kdtree_long_list_leaf_size;
using knn::kKdTreeDefaultLeafSize;
inline int kdtree_default_leaf_size(int dim) {
  return knn::kdtree_default_leaf_size(dim, LeafSizeFor::kGpu);
}

// Scalars of the node boxes: 2^(levels+1) - 1 nodes of lo[dim], hi[dim].
inline size_t bucket_tree_box_floats(int levels, int dim) {
  return ((size_t{2} << levels) - 1) * 2 * static_cast<size_t>(dim);
}

// The plan of the build (index_kdtree_build.cu): the levels up to
// shared_level - 1 are split in global memory, tile by tile; from
// shared_level on, one block builds each subtree in its shared memory
// (levels + 1: every level in global memory). shared_budget is the shared
// memory the build may give a block.
constexpr int64_t kKdBuildTile = 4096;  // entries of a segment one block of a level handles
struct BucketTreeBuildPlan {
  int shared_level = 0;
  int64_t shared_points = 0;    // most points of a segment at shared_level
  int64_t global_segments = 0;  // segments of the deepest level split in global memory
  int64_t global_tiles = 0;     // most tiles of a level split in global memory
};

// Shared memory of a block that builds the subtree of `points` points:
// every dimension's keys and the ids, twice (a stable partition reads one
// copy and writes the other).
inline size_t kdtree_build_shared_bytes(int64_t points, int dim, size_t key_bytes) {
  return 2 * static_cast<size_t>(points) * (static_cast<size_t>(dim) * key_bytes + 4);
}

inline BucketTreeBuildPlan bucket_tree_build_plan(int64_t n, int dim, int levels, size_t key_bytes,
                                                  size_t shared_budget) {
  BucketTreeBuildPlan plan;
  plan.shared_level = levels + 1;
  for (int level = 0; level <= levels; ++level) {
    const int64_t most = (n + (int64_t{1} << level) - 1) >> level;
    if (most <= kKdBuildSharedSegmentPoints &&
        kdtree_build_shared_bytes(most, dim, key_bytes) <= shared_budget) {
      plan.shared_level = level;
      plan.shared_points = most;
      break;
    }
    plan.global_segments = int64_t{1} << level;
    plan.global_tiles = std::max(plan.global_tiles,
                                 plan.global_segments * ((most + kKdBuildTile - 1) / kKdBuildTile));
  }
  return plan;
}

// The shared memory the build gives a block on a device that lets a block
// opt in to `optin` bytes (launch_policy.h).
inline size_t kdtree_build_shared_budget(size_t optin) { return optin / kKdBuildSharedFraction; }

// Bytes of one split rule of the global levels (index_kdtree_build.cu).
constexpr size_t kKdBuildRuleBytes = 16;

// The build's scratch: every dimension's keys (key_bytes = scalar_bytes
// each) and the ids, twice, and per segment of the global levels its key box,
// split dimension, split rule and 256-bin digit histogram, and per tile two
// counts.
inline size_t kdtree_build_scratch_bytes(int64_t n, int dim, int levels, size_t key_bytes,
                                         size_t shared_budget) {
  const size_t un = static_cast<size_t>(n < 0 ? 0 : n);
  const BucketTreeBuildPlan plan =
      bucket_tree_build_plan(n < 0 ? 0 : n, dim, levels, key_bytes, shared_budget);
  const size_t segments = static_cast<size_t>(plan.global_segments);
  return 2 * aligned(un * dim * key_bytes) + 2 * aligned(un * 4) +
         2 * aligned(segments * dim * key_bytes) + aligned(segments * 4) +
         aligned(segments * kKdBuildRuleBytes) + aligned(segments * 256 * 4) +
         aligned(static_cast<size_t>(plan.global_tiles) * 8);
}

// What the index keeps on the device: the points in input order and in
// bucket order, the bucket ids and the node boxes.
inline size_t kdtree_resident_bytes(int64_t n, int dim, int leaf_size,
                                    size_t scalar_bytes = sizeof(float)) {
  const size_t un = static_cast<size_t>(n < 0 ? 0 : n);
  const int levels = bucket_tree_levels(n, leaf_size);
  return 2 * aligned(un * dim * scalar_bytes) + aligned(un * 4) +
         aligned(bucket_tree_box_floats(levels, dim) * scalar_bytes);
}

// Peak of the build: the resident data and the build's scratch, planned with
// the shared memory every device gives a block (fewer points a block, more
// segments in global memory: an upper bound for every device).
inline size_t kdtree_build_bytes(int64_t n, int dim, int leaf_size,
                                 size_t scalar_bytes = sizeof(float)) {
  const int levels = bucket_tree_levels(n, leaf_size);
  return kdtree_resident_bytes(n, dim, leaf_size, scalar_bytes) +
         kdtree_build_scratch_bytes(n, dim, levels, scalar_bytes,
                                    kdtree_build_shared_budget(kMinSharedBytesPerBlock));
}

// Search scratch of one pipeline slot, per query: leaf keys and query order
// (double-buffered for the radix sort), a byte of CUB temporaries, the heaps
// of k-lists beyond the warp lists, and for exclude_self the rows of k + 1.
inline size_t kdtree_scratch_bytes_per_query(int k_search, bool exclude_self,
                                             size_t scalar_bytes = sizeof(float)) {
  const size_t uk = static_cast<size_t>(k_search < 0 ? 0 : k_search);
  const size_t entry = 4 + scalar_bytes;  // an index and a squared distance
  return 4 * 4 + 1 + (k_search > kMaxWarpK ? entry * uk : 0) + (exclude_self ? entry * uk : 0);
}

// Per slot: the CUB base and one page of slack for each of its 9 buffers.
inline size_t kdtree_scratch_fixed_bytes() { return kCubTempBase + 9 * kAllocAlignment; }

// Bytes per query and fixed bytes of a call's chunks over all slots.
inline size_t kdtree_call_bytes_per_query(int dim, int k_search, int row_width, bool exclude_self,
                                          bool want_indices, bool want_sq, bool want_counts,
                                          const CallParams& call,
                                          size_t scalar_bytes = sizeof(float)) {
  return pipeline_bytes_per_query(dim, row_width, want_indices, want_sq, want_counts, call,
                                  scalar_bytes) +
         kPipelineSlots * kdtree_scratch_bytes_per_query(k_search, exclude_self, scalar_bytes);
}
inline size_t kdtree_call_fixed_bytes(const CallParams& call) {
  return pipeline_fixed_bytes(call) + kPipelineSlots * kdtree_scratch_fixed_bytes();
}

// The largest chunk of a call. With host arrays, kMaxChunkQueries: small
// enough that two slots overlap the transfers with the search. Device arrays
// need no staging, so their chunks grow until they take the device bytes of
// the same call from host arrays (kdtree_query_bytes stays an upper bound):
// a chunk's queries are sorted by leaf together, and the more there are, the
// more of its walk a warp's lanes share (H100, 2^21 queries in 5-D, k = 5:
// 28.6 ms in four chunks, 22.5 ms in one). Chunk positions are int32.
inline int64_t kdtree_max_chunk(int dim, int k_search, int row_width, bool exclude_self,
                                bool want_indices, bool want_sq, bool want_counts,
                                const CallParams& call, size_t scalar_bytes = sizeof(float)) {
  const CallParams host_call{};
  const size_t staged =
      kdtree_call_bytes_per_query(dim, k_search, row_width, exclude_self, want_indices, want_sq,
                                  want_counts, host_call, scalar_bytes);
  const size_t own =
      kdtree_call_bytes_per_query(dim, k_search, row_width, exclude_self, want_indices, want_sq,
                                  want_counts, call, scalar_bytes);
  const size_t ratio = staged / std::max<size_t>(own, 1);
  return std::min<int64_t>(INT32_MAX, kMaxChunkQueries * static_cast<int64_t>(ratio));
}

// Upper bound of a kNN or radius call with m queries and rows of k on an
// index of n points: host arrays (all staged), exclude_self, every output.
inline size_t kdtree_query_bytes(int64_t m, int k, int64_t n, int dim, int leaf_size,
                                 size_t scalar_bytes = sizeof(float)) {
  const CallParams host_call{};
  const int64_t chunk = std::min<int64_t>(m < 0 ? 0 : m, kMaxChunkQueries);
  const size_t per_query =
      kdtree_call_bytes_per_query(dim, k + 1, k, true, true, true, true, host_call, scalar_bytes);
  return kdtree_resident_bytes(n, dim, leaf_size, scalar_bytes) +
         kdtree_call_fixed_bytes(host_call) + static_cast<size_t>(chunk) * per_query;
}

}  // namespace cuda
}  // namespace knn
