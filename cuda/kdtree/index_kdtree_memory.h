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

// Nodes of a tree of `levels` split levels, inner and leaves.
inline size_t bucket_tree_nodes(int levels) { return (size_t{2} << levels) - 1; }

// Scalars of the node boxes: lo[dim], hi[dim] per node.
inline size_t bucket_tree_box_floats(int levels, int dim) {
  return bucket_tree_nodes(levels) * 2 * static_cast<size_t>(dim);
}

// The bucket tree's build (median_split.cuh) runs levels 0..levels.
inline SplitBuildPlan bucket_tree_build_plan(int64_t n, int dim, int levels, size_t key_bytes,
                                             size_t shared_budget) {
  return split_build_plan(levels, dim, key_bytes, shared_budget,
                          [n](int level) { return bucket_tree_most_points(n, level); });
}

// What the index keeps on the device: the points in input order and in
// bucket order with their ids, and the node boxes and least ids. A 3-D tree packs a bucket
// point with its id (bucket_tree_shape.h packs_bucket_points: four scalars,
// one allocation); it is counted as the larger of that and a row and an id
// allocated apart, so that the figure never falls below a lower dim's (the
// estimates grow with every argument, knn_gpgpu.h).
inline size_t kdtree_resident_bytes(int64_t n, int dim, int leaf_size,
                                    size_t scalar_bytes = sizeof(float)) {
  const size_t un = static_cast<size_t>(n < 0 ? 0 : n);
  const int levels = bucket_tree_levels(n, leaf_size);
  const size_t rows_and_ids = aligned(un * dim * scalar_bytes) + aligned(un * 4);
  const size_t bucket_points =
      packs_bucket_points(dim)
          ? std::max(aligned(un * kPackedPointScalars * scalar_bytes), rows_and_ids)
          : rows_and_ids;
  return aligned(un * dim * scalar_bytes) + bucket_points +
         aligned(bucket_tree_box_floats(levels, dim) * scalar_bytes) +
         aligned(bucket_tree_nodes(levels) * sizeof(int32_t));
}

// Peak of the build: the resident data and the build's scratch, planned with
// the shared memory every device gives a block (fewer points a block, more
// segments in global memory: an upper bound for every device).
inline size_t kdtree_build_bytes(int64_t n, int dim, int leaf_size,
                                 size_t scalar_bytes = sizeof(float)) {
  const int64_t points = n < 0 ? 0 : n;
  const SplitBuildPlan plan =
      bucket_tree_build_plan(points, dim, bucket_tree_levels(points, leaf_size), scalar_bytes,
                             split_build_shared_budget(kMinSharedBytesPerBlock));
  return kdtree_resident_bytes(n, dim, leaf_size, scalar_bytes) +
         split_build_scratch_bytes(points, dim, scalar_bytes, plan);
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
  // The search keeps k + 1 (exclude_self); k = INT_MAX saturates there.
  const int k_search = k < INT32_MAX ? k + 1 : k;
  const size_t per_query = kdtree_call_bytes_per_query(dim, k_search, k, true, true, true, true,
                                                       host_call, scalar_bytes);
  return kdtree_resident_bytes(n, dim, leaf_size, scalar_bytes) +
         kdtree_call_fixed_bytes(host_call) + static_cast<size_t>(chunk) * per_query;
}

}  // namespace cuda
}  // namespace knn
