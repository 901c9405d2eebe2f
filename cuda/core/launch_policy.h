// Launch configuration from the device: what the current device holds, read
// once per device, and the policy every engine derives its grid sizes and
// "enough threads to fill the device" figures from, so that one build is
// right on an H100, an H200, an A100 or a laptop GPU. Host C++ (the CUDA
// runtime only); the tuning numbers live here and nowhere else.
#pragma once

#include <cstddef>
#include <cstdint>

namespace knn {
namespace cuda {

// The current device's limits (cudaGetDeviceProperties and attributes).
struct DeviceLimits {
  int sm_count = 0;            // streaming multiprocessors
  int max_threads_per_sm = 0;  // threads one SM holds at once
  int shared_bytes_optin = 0;  // dynamic + static shared memory a block may opt in to
  // Threads the whole device holds at once.
  int64_t resident_threads() const { return int64_t{sm_count} * max_threads_per_sm; }
};

// The calling thread's current device's limits: read at the first call for
// that device, then served from a cache (thread-safe). Throws knn::Error on a
// CUDA failure.
DeviceLimits device_limits();

// ---- Policy (tuning by measurement belongs here) ------------------------------
// Waves of resident blocks a grid-stride kernel gets at most: several, so that
// blocks finishing early find work and the last wave's tail is short, few
// enough that a block's per-launch setup stays negligible. Four waves of
// 256-thread blocks is the 4096 blocks these kernels ran with on the H100
// (132 SMs x 8 blocks x 4 = 4224).
constexpr int kGridStrideWaves = 4;

// Blocks for a grid-stride launch of `kernel` (a __global__ function) with
// `block` threads and no dynamic shared memory over `items` items: enough to
// give each item a thread, at most kGridStrideWaves x the blocks of this
// kernel the device holds at once (occupancy API: registers and shared
// memory counted). The kernel's results must not depend on the grid size.
unsigned grid_stride_blocks(const void* kernel, int block, int64_t items);
template <class Kernel>
unsigned grid_stride_blocks(Kernel* kernel, int block, int64_t items) {
  return grid_stride_blocks(reinterpret_cast<const void*>(kernel), block, items);
}

// ---- Block sizes: every kernel launch's threads come from here -------------
// Per-item kernels of every structure (keys, gathers, scatters, fills,
// counts, the median split's passes, the quadtree's build and pair walks):
// 8 warps. The median split's digit histogram runs one thread per bin of a
// 256-bin digit (median_split.cuh asserts it).
constexpr int kBlock = 256;
constexpr int kBlockWarps = kBlock / 32;

// The searches of each structure: kThreads per block where each thread
// answers a query (its list in registers or shared memory), and at most
// kMaxWarps warps per block where each warp answers one (WarpList: fewer
// where the block's shared memory holds fewer lists). The kd-tree's thread
// search also asks the compiler for a number of resident blocks
// (search_min_blocks, cuda/kdtree/index_kdtree_search.cu), measured with
// these 128 threads.
struct KdTreeSearchPolicy {
  static constexpr int kThreads = 128;
  static constexpr int kMaxWarps = 4;
};
struct BruteForcePolicy {
  static constexpr int kThreads = 128;
  static constexpr int kMaxWarps = 4;
  // The pairwise merge of the parts' sorted lists: a thread per entry.
  static constexpr int kMergeThreads = 256;
};
struct GridSearchPolicy {
  static constexpr int kThreads = 128;
  static constexpr int kMaxWarps = 4;
};
// The mesh's closest-point search (cuda/mesh/mesh_query.cu): a thread per
// point; its traversal stack lives in local memory, so smaller blocks keep
// more of them resident.
struct MeshSearchPolicy {
  static constexpr int kThreads = 128;
};
// The neighbourhood statistics (cuda/stats/neighbourhood_stats.cu): a thread
// per point whose float64 Jacobi solve holds its 3 x 3 matrices in
// registers; smaller blocks keep more of them resident.
struct NeighbourhoodStatsPolicy {
  static constexpr int kThreads = 128;
};
// The chunk lists of the statistics take at most 1 / kStatsListBudgetShare
// of the device budget left after the points: the search of each chunk
// plans its own scratch within the rest.
constexpr int64_t kStatsListBudgetShare = 4;
// Likewise the moved scan points of a chunk of an alignment to an index's
// points (cuda/stats/cloud_align.cu) take at most 1 / kAlignChunkBudgetShare
// of the budget left after the call's fixed arrays; the chunk's search plans
// within the rest.
constexpr int64_t kAlignChunkBudgetShare = 4;
// The sort of binned rows (cuda/core/binned_rows.cu): a warp per row, at most
// this many per block, fewer where shared memory holds fewer rows.
constexpr int kBinnedSortMaxWarps = 4;
// The median split: tiles of a segment whose digit histogram one block
// accumulates (fewer global atomics on the segment's bins).
constexpr int kHistogramTiles = 8;

// Blocks for a grid-stride launch of kBlock threads (grid_stride_blocks).
template <class Kernel>
unsigned blocks_for(Kernel* kernel, int64_t items) {
  return grid_stride_blocks(kernel, kBlock, items);
}

// Both kd-tree builds (cuda/kdtree/median_split.cuh) split large segments
// level by level in global memory and finish a subtree in one block's shared
// memory once its segment holds at most this many points and takes at most
// 1/kKdBuildSharedFraction of the shared memory a block may opt in to (two
// buffers of the segment's keys and ids), so that several blocks share an
// SM. Every device lets a block take 48 KB, so the memory model
// (split_build_plan, memory_model.h), which knows no device, plans with that
// floor.
constexpr int64_t kKdBuildSharedSegmentPoints = 2048;
constexpr int kKdBuildSharedFraction = 2;
constexpr size_t kMinSharedBytesPerBlock = 48 * 1024;

// Threads of a block whose threads each keep a list of `bytes_per_thread` in
// shared memory (HeapList), out of the `allowance` bytes of dynamic shared
// memory the block may take: whole warps, at most `preferred`; 0 when not
// even one warp's lists fit (the caller then takes a warp per query).
constexpr int shared_list_threads(size_t bytes_per_thread, size_t allowance, int preferred) {
  const size_t fit = bytes_per_thread > 0 ? allowance / bytes_per_thread / 32 * 32 : 0;
  return static_cast<int>(fit < static_cast<size_t>(preferred) ? fit : preferred);
}

// Threads a search wants in flight to hide memory latency: half of what the
// device holds at once (on the H100, 132 SMs x 2048 / 2 = 135,168).
int64_t latency_hiding_threads();

}  // namespace cuda
}  // namespace knn
