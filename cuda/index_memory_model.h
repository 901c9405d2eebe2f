// Device memory of the CUDA index engines, as functions of the sizes alone:
// what knn_estimate_build_bytes / knn_estimate_query_bytes answer and what the
// planner compares with the free memory. Header-only, plain C++ (no device
// needed, builds without CUDA too). Every buffer is counted in whole pages of
// the device allocator (memory_model.h: aligned), so the figures are upper
// bounds of the engines' real peaks; the engines' owners refine the buffer
// lists here when their engines change (a device test compares with the peak).
//
// Every function grows with every size (n, m, k, dim), so an estimate never
// shrinks when a caller asks for more. scalar_bytes is the size of a
// coordinate and a squared distance: 4 for the float32 engines (the
// default), 8 for the float64 ones (the _f64 entry points).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "../common/grid_layout.h"
#include "../include/knn_gpgpu.h"
#include "core/memory_model.h"
#include "grid/grid_memory.h"
#include "kdtree/index_kdtree_memory.h"

namespace knn {
namespace cuda {
namespace index_memory {

inline size_t count(int64_t v) { return static_cast<size_t>(v < 0 ? 0 : v); }

// The resident copy of n points of dim scalars and their original indices.
inline size_t points_bytes(int64_t n, int dim, size_t scalar_bytes = sizeof(float)) {
  return aligned(saturating_mul(count(n) * count(dim), scalar_bytes)) + aligned(count(n) * 4);
}

// kd-tree: the points twice (input order while building, bucket order kept),
// a box (2 * dim scalars) and a 16-byte node per node (at most 2n nodes),
// (key, index) pairs double-buffered for the radix sorts, CUB temporaries.
inline size_t kdtree_build_bytes(int64_t n, int dim, size_t scalar_bytes = sizeof(float)) {
  const size_t un = count(n), ud = count(dim);
  const size_t rough = 2 * points_bytes(n, dim, scalar_bytes) +
                       aligned(2 * un * (2 * ud * scalar_bytes + 16)) +
                       4 * aligned(un * (4 + scalar_bytes)) + cub_temp_bytes(n);
  // The engine's own buffer list (index_kdtree_memory.h), default leaf size.
  return std::max(rough, cuda::kdtree_build_bytes(n, dim, kKdTreeDefaultLeafSize, scalar_bytes));
}

// Uniform grid (3-D): the points in input order, the points in cell order
// with their ids (4 scalars a point: two points_bytes cover both), a cell
// key and index per point double-buffered for the sort (counted at 8 bytes
// each, which also covers the occupancy sums and the coarse counts of a
// grid being judged), 32-bit cell starts (grid_max_cells: a grid refined
// for a surface has up to 16 cells a point), CUB temporaries.
inline size_t grid_build_bytes(int64_t n, size_t scalar_bytes = sizeof(float)) {
  const size_t un = count(n);
  const size_t starts = (static_cast<size_t>(grid_max_cells(n)) + 1) * sizeof(uint32_t);
  return 2 * points_bytes(n, 3, scalar_bytes) + 4 * aligned(un * 8) + aligned(starts) +
         cub_temp_bytes(n);
}

// Brute force: the points, plus the upload staging of the same size, and a
// small block of launch parameters.
inline size_t brute_force_build_bytes(int64_t n, int dim, size_t scalar_bytes = sizeof(float)) {
  return 2 * points_bytes(n, dim, scalar_bytes) + aligned(64);
}

// Device bytes to build an index of `structure` (KNN_STRUCTURE_*). AUTO: the
// largest of all, since the planner may pick any; GRID: the grid or the
// kd-tree it falls back to.
inline size_t build_bytes(int structure, int64_t n, int dim, size_t scalar_bytes = sizeof(float)) {
  const size_t kd = kdtree_build_bytes(n, dim, scalar_bytes);
  const size_t grid = dim == 3 ? grid_build_bytes(n, scalar_bytes) : 0;
  const size_t bf = brute_force_build_bytes(n, dim, scalar_bytes);
  switch (structure) {
    case KNN_STRUCTURE_KDTREE: return kd;
    case KNN_STRUCTURE_BRUTE_FORCE: return bf;
    case KNN_STRUCTURE_GRID: return std::max(kd, grid);
    default: return std::max({kd, grid, bf});
  }
}

// One call of m queries with k neighbours, all at once: the queries, the
// result rows (indices and squared distances), sort keys and order of the
// queries double-buffered, CUB temporaries, and for k beyond the warp lists
// the per-query heaps.
inline size_t call_bytes(int64_t m, int k, int dim, size_t scalar_bytes = sizeof(float)) {
  const size_t um = count(m), uk = count(k), ud = count(dim);
  const size_t rows = aligned(um * uk * 4) + aligned(um * uk * scalar_bytes);
  const size_t heaps = k > kMaxWarpK ? rows : 0;
  return aligned(um * ud * scalar_bytes) + rows + 4 * aligned(um * 8) + cub_temp_bytes(m) + heaps;
}

// The index resident plus one call (the build's scratch is gone by then, so
// the resident index is counted as its build: an upper bound).
inline size_t query_bytes(int structure, int64_t m, int k, int64_t n, int dim,
                          size_t scalar_bytes = sizeof(float)) {
  // A grid's binned rows where a grid may serve (counted from dim 3 on, so
  // that no estimate falls as dim grows).
  const bool grid_may_serve =
      dim >= 3 && (structure == KNN_STRUCTURE_GRID || structure == KNN_STRUCTURE_AUTO);
  const size_t rough = build_bytes(structure, n, dim, scalar_bytes) +
                       call_bytes(m, k, dim, scalar_bytes) +
                       (grid_may_serve ? grid_binned_call_bytes(m, k, scalar_bytes) : 0);
  // Every structure but brute force may be served by the kd-tree (the grid
  // falls back to it): its exact bound, two pipeline slots and exclude_self
  // included (index_kdtree_memory.h).
  if (structure == KNN_STRUCTURE_BRUTE_FORCE) return rough;
  return std::max(rough,
                  cuda::kdtree_query_bytes(m, k, n, dim, kKdTreeDefaultLeafSize, scalar_bytes));
}

// A classic query (queryAll, cuQueryAll) that the grid of the tree's points
// answers (src/query_planner.cpp): while the points are binned, the uploaded
// tree (memory_model.h uploaded_tree_bytes) and the grid's build (whose
// points in input order are the tree's, scattered back); then the grid alone
// with the call's pipeline, two slots of at most kMaxChunkQueries queries.
inline size_t classic_grid_query_bytes(int64_t m, int k, int64_t n) {
  const size_t binning = saturating_add(uploaded_tree_bytes(n), grid_build_bytes(n));
  const int64_t chunk = std::min(m, kMaxChunkQueries);
  const size_t querying = saturating_add(
      saturating_add(grid_build_bytes(n), saturating_mul(kPipelineSlots, call_bytes(chunk, k, 3))),
      grid_binned_call_bytes(m, k, sizeof(float)));
  return std::max(binning, querying);
}

// A classic query that the bucket kd-tree of the tree's points answers, all
// m queries at once (getNeededBytesForQueryAll; the pipeline's chunks take
// less): while the tree is built, the uploaded tree and the kd-tree's build
// (whose input rows are the tree's points); then the kd-tree with every
// query's staging, rows and scratch (counted for two slots: an upper bound).
// The default leaf size counts the most nodes, so the figure bounds the
// leaves of every k (src/query_planner.cpp classic_leaf_size).
inline size_t classic_kdtree_query_bytes(int64_t m, int k, int64_t n) {
  const CallParams host_call{};
  const size_t building =
      saturating_add(uploaded_tree_bytes(n), kdtree_build_bytes(n, 3, sizeof(float)));
  const size_t per_query = cuda::kdtree_call_bytes_per_query(3, k, k, false, true, true, false,
                                                             host_call, sizeof(float));
  const size_t querying = saturating_add(cuda::kdtree_resident_bytes(n, 3, kKdTreeDefaultLeafSize) +
                                             cuda::kdtree_call_fixed_bytes(host_call),
                                         saturating_mul(count(m), per_query));
  return std::max(building, querying);
}

// The search's own scratch in such calls (getNeededBytesInSearch): the
// kd-tree's for all m queries at once, the grid's for its chunks.
inline size_t classic_kdtree_search_bytes(int64_t m, int k) {
  return saturating_add(saturating_mul(count(m), cuda::kdtree_scratch_bytes_per_query(k, false)),
                        cuda::kdtree_scratch_fixed_bytes());
}
inline size_t classic_grid_search_bytes(int64_t m, int k) {
  const size_t chunk = count(std::min(m, kMaxChunkQueries));
  return saturating_add(kPipelineSlots * (chunk * grid_scratch_bytes_per_query(0, sizeof(float)) +
                                          grid_scratch_fixed_bytes(std::min(k, kMaxBinnedTake))),
                        grid_binned_call_bytes(m, k, sizeof(float)));
}

// ---- Brute force: the search plan and its scratch (cuda/brute_force/index_brute_force.cu) ----
// Lists of up to this many neighbours are kept in registers, one thread per
// query; longer ones (up to kMaxWarpK) one warp per query in shared memory.
constexpr int kBruteRegisterK = 16;
// Threads the search wants busy before it stops splitting the points, at
// most: the engine asks for the device's latency_hiding_threads()
// (cuda/core/launch_policy.h), capped here so that the memory helpers, which
// answer without a device, stay upper bounds (2^17: about an H100's
// 132 SMs x 2048 threads / 2; a smaller device splits less).
constexpr int64_t kBruteBusyThreads = int64_t{1} << 17;
// A part of the points worth a block of its own.
constexpr int64_t kBruteMinSplitPoints = 1024;
// Parts at most: merging costs log2(parts) rounds over parts x list entries.
constexpr int64_t kBruteMaxThreadSplits = 1024;
constexpr int64_t kBruteMaxWarpSplits = 64;

// Neighbours each query's list keeps: the row, one more when the query's own
// point is dropped afterwards, never more than there are points.
inline int brute_force_list_k(int row_width, bool exclude_self, int64_t n) {
  const int64_t want = int64_t{row_width < 0 ? 0 : row_width} + (exclude_self ? 1 : 0);
  return static_cast<int>(std::min<int64_t>(want, n < 0 ? 0 : n));
}

// Parts the points are split into for a chunk of m queries: enough that
// m x parts x (threads per query) keeps busy_threads (at most
// kBruteBusyThreads) busy. Fewer busy threads never mean more parts.
inline int64_t brute_force_splits(int64_t m, int64_t n, int list_k,
                                  int64_t busy_threads = kBruteBusyThreads) {
  if (m <= 0 || n <= 0) return 1;
  busy_threads = std::max<int64_t>(1, std::min(busy_threads, kBruteBusyThreads));
  const bool warp = list_k > kBruteRegisterK;
  const int64_t threads_per_query = warp ? 32 : 1;
  const int64_t wanted = (busy_threads + m * threads_per_query - 1) / (m * threads_per_query);
  const int64_t by_points = (n + kBruteMinSplitPoints - 1) / kBruteMinSplitPoints;
  const int64_t cap = warp ? kBruteMaxWarpSplits : kBruteMaxThreadSplits;
  return std::max<int64_t>(1, std::min({wanted, by_points, cap}));
}

// Bytes of one list entry (common/neighbor.h BasicNeighbor: the squared
// distance and the index, padded to the distance's alignment): 8 for float,
// 16 for double.
inline size_t neighbor_bytes(size_t scalar_bytes) { return 2 * scalar_bytes; }

// Scratch of a split search, per query and fixed (whole-page slack of its
// three buffers): every part's list and count, and the first merge round's
// output (later rounds reuse the two list buffers).
inline size_t brute_force_scratch_per_query(int64_t splits, int list_k,
                                            size_t scalar_bytes = sizeof(float)) {
  if (splits <= 1) return 0;
  const size_t us = count(splits), uk = count(list_k), entry = neighbor_bytes(scalar_bytes);
  return us * uk * entry + (us + 1) / 2 * uk * entry + us * 4;
}
inline size_t brute_force_scratch_fixed(int64_t splits) {
  return splits <= 1 ? 0 : 3 * kAllocAlignment;
}

// Upper bound of a split search's scratch for chunks of up to m queries,
// growing with m and list_k: splitting happens only while m x parts x
// (threads per query) < 2 kBruteBusyThreads, and no list is longer than a
// row of register lists (kBruteRegisterK) or of warp lists (list_k).
inline size_t brute_force_scratch_bound(int64_t m, int list_k,
                                        size_t scalar_bytes = sizeof(float)) {
  const size_t entry = neighbor_bytes(scalar_bytes);
  auto bound = [m, entry](int64_t threads_per_query, int64_t max_splits, int len) {
    const int64_t lists = std::min(2 * kBruteBusyThreads / threads_per_query, m * max_splits);
    return count(lists) * (count(len) * (entry + entry / 2) + 4) + count(m) * count(len) * entry +
           brute_force_scratch_fixed(2);
  };
  const size_t in_registers = bound(1, kBruteMaxThreadSplits, std::min(list_k, kBruteRegisterK));
  return list_k > kBruteRegisterK ? std::max(in_registers, bound(32, kBruteMaxWarpSplits, list_k))
                                  : in_registers;
}

// One brute-force call of m queries (rows of row_width, counts for radius),
// queries and outputs staged on the device, in the pipeline's chunks of at
// most kMaxChunkQueries on up to two slots, each with its split scratch.
inline size_t brute_force_call_bytes(int64_t m, int row_width, bool exclude_self, int dim,
                                     size_t scalar_bytes = sizeof(float)) {
  const int64_t chunk = std::min<int64_t>(m < 1 ? 1 : m, kMaxChunkQueries);
  const size_t uc = count(chunk), uw = count(row_width);
  const int list_k = row_width + (exclude_self ? 1 : 0);
  const size_t slot = aligned(uc * count(dim) * scalar_bytes) + aligned(uc * uw * 4) +
                      aligned(uc * uw * scalar_bytes) + aligned(uc * 4) +
                      brute_force_scratch_bound(chunk, list_k, scalar_bytes);
  return static_cast<size_t>(pipeline_slots(m, chunk)) * slot;
}

}  // namespace index_memory
}  // namespace cuda
}  // namespace knn
