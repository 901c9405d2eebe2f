// Device memory of the CUDA grid search (grid_search.cuh) as a function of
// the sizes alone. Host-only and header-only, like memory_model.h: the
// engine's chunks (grid_build.cu) and the memory helpers
// (index_memory_model.h) count the same bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "../core/memory_model.h"
#include "../core/query_chunks_memory.h"

namespace knn {
namespace cuda {

// The grid's lists by length (take: k, or k + 1 when the own index is
// dropped), one thread per query up to kMaxBinnedTake:
//   - up to kGridRegisterK in registers (knn_lists.cuh RegisterList; a
//     32-entry register list takes 238 registers and measured no faster
//     than the warp search at k = 32);
//   - up to kGridMaxHeapTake a heap in shared memory (HeapList), as many
//     threads a block as the device's shared memory holds heaps for;
//   - up to kMaxBinnedTake binned rows (core/binned_rows.cuh);
//   - beyond, one warp per query (warp_list.cuh WarpList).
// Binned rows against heaps, H200, 2026-12-01, 10^7 x 10^7 query ms, device
// arrays, every index equal (.peers/probe/ab.cpp): uniform k = 17 26.9
// against 17.9, k = 30 35.1 against 29.2, k = 48 45.5 against 48.6, k = 64
// 60.9 against 74.3, k = 100 77.7 against 155.7, k = 128 123.3 against
// 346.5; on a sphere, k = 30 34.2 against 25.2, k = 64 59.0 against 70.6,
// k = 100 75.7 against 149.7. A heap's insertions are few and shallow while
// k is small; the rows' appends, their bins and their sort cost about the
// same at any k.
constexpr int kGridRegisterK = 16;
constexpr int kGridMaxHeapTake = 44;

// Whether the grid's thread search keeps lists of `take` entries as binned
// rows (core/binned_rows.cuh).
constexpr bool grid_lists_are_binned(int take) {
  return take > kGridMaxHeapTake && take <= kMaxBinnedTake;
}

// Scratch a query of a chunk takes, with lists of `take` (k, or k + 1 when
// the own index is dropped): its cell key and position, double-buffered for
// the sort, and a handed-over position (20 bytes), and its binned row.
constexpr size_t grid_scratch_bytes_per_query(int take, size_t scalar_bytes) {
  return 20 + (grid_lists_are_binned(take) ? binned_rows_bytes_per_query(take, scalar_bytes) : 0);
}

// What a slot's scratch takes beyond that: the sort's temporaries and the
// whole-page slack of its buffers (memory_model.h: every buffer is counted
// in whole pages), two more with binned rows.
inline size_t grid_scratch_fixed_bytes(int take) {
  const size_t pages = grid_lists_are_binned(take) ? 6 : 4;
  return pages * kAllocAlignment + cub_temp_bytes(kMaxChunkQueries);
}

// The binned rows of a call's grid search of m queries with rows of k
// (exclude_self or not), as the memory helpers count them: both slots of
// chunks of at most kMaxChunkQueries, every row as for lists of
// min(k + 1, kMaxBinnedTake) entries from k + 1 > kGridMaxHeapTake on.
// Beyond kMaxBinnedTake the warp lists take no rows, but they are counted
// all the same, so that no estimate falls as k grows.
inline size_t grid_binned_call_bytes(int64_t m, int k, size_t scalar_bytes) {
  const int64_t widest = int64_t{k} + 1;  // k may be INT_MAX
  if (widest <= kGridMaxHeapTake || m <= 0) return 0;
  const size_t chunk = static_cast<size_t>(std::min(m, kMaxChunkQueries));
  const int take = static_cast<int>(std::min<int64_t>(widest, kMaxBinnedTake));
  const size_t rows = aligned(
      saturating_mul(chunk, static_cast<size_t>(binned_row_capacity(take)) * 2 * scalar_bytes));
  return kPipelineSlots * (rows + aligned(chunk * 2 * scalar_bytes));
}

}  // namespace cuda
}  // namespace knn
