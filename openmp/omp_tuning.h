// The OpenMP engine's tuning numbers, in one place (issue #47; the CUDA
// engine's are in cuda/core/launch_policy.h): the work items of its parallel
// regions, the classic query's bucket depth and the quadtree's leaf. The
// index kd-tree's default leaf sizes are the two engines' shared rule,
// common/index_leaf_size.h. None of them changes an answer, only its speed.
#pragma once

#include <cstdint>

namespace knn {
namespace omp {

// ---- Queries per work item --------------------------------------------------
// The kd-tree searches (openmp/kd_search.cpp): queries of one parallel work
// item; they are taken in leaf order, so the queries of a block walk the same
// part of the tree.
constexpr int64_t kKdSearchQueriesPerBlock = 256;
// The grid's searches (openmp/omp_grid.cpp).
constexpr int64_t kGridQueriesPerBlock = 256;
// The index brute force (openmp/omp_index_brute_force.cpp): queries per work
// item, each scanning the points in cache blocks of kPointBytesPerBlock
// (128 KiB: a typical L2 share per core).
constexpr int64_t kBruteForceQueriesPerBlock = 32;
constexpr int64_t kPointBytesPerBlock = 128 * 1024;

// ---- Builds -------------------------------------------------------------------
// The index kd-tree (openmp/omp_index_kdtree.cpp): subtrees of at most
// kTaskPoints points are built by one work item (one cancel check and one
// progress report each); nodes of more than kChunkedNodePoints points run
// their passes over chunks of kChunkPoints points, one work item per chunk,
// so that the first levels, where there are fewer nodes than threads, use
// every thread too.
constexpr int64_t kTaskPoints = 16384;
constexpr int64_t kChunkedNodePoints = 131072;
constexpr int64_t kChunkPoints = 32768;
// The classic kd-tree (openmp/omp_kdtree_build.cpp): subtrees of at most
// this many points are built by the work item that reaches them.
constexpr int64_t kTaskCutoff = 16384;

// ---- The classic query's search layout (openmp/omp_kdtree_query.cpp) ----------
// Buckets of 2^5 - 1 = 31 nodes (about 32 points with those pushed down):
// as long as a leaf of the index kd-tree (and of nanoflann at its best),
// short enough to scan. Measured on a shared 2-core AMD EPYC (mpQueryAll,
// 1 thread, n = 10^6 uniform, 2 * 10^5 queries, best of 3 in each of two
// alternating rounds, ms at k = 8 / k = 100): 4 levels (15 nodes) 262, 265
// / 1545, 1541; 5 (31) 248, 248 / 1554, 1488; 6 (63) 252, 258 / 1548,
// 1521 (with inner nodes that held their split point: 3 levels 512, 506 /
// 3222, 3323; 4 460, 473 / 3096, 3051; 5 452, 448 / 3025, 3019; 6 466,
// 459 / 3000, 3036). Shallower buckets put more inner nodes on every path;
// deeper ones scan more points per bucket. One depth serves every k.
constexpr int kBucketLevels = 5;
constexpr int kBucketNodes = (1 << kBucketLevels) - 1;
constexpr int kChunkBuckets = 64;
// The upper nodes above the buckets are finished a level at a time, bottom
// up: levels of at least this many nodes by the team (a barrier per level),
// those above by one thread (a node's finish is a few box merges).
constexpr int64_t kSharedUpperLevelNodes = 8192;

// ---- The quadtree (openmp/omp_quadtree.cpp) ---------------------------------
// Points per leaf by default; measured with bench_pip_cpu (uniform points,
// rectangles and 100-gons).
constexpr int kQuadtreeLeafCapacity = 64;

}  // namespace omp
}  // namespace knn
