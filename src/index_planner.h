// The planner of the index API: which backend and which structure serve an
// index, and the build of the chosen engine with its fallbacks (a grid the
// data makes poor -> the kd-tree; an automatic device build that runs out of
// device memory -> the CPU). src/index_api.cpp validates first, then asks.
//
// The thresholds are first choices from the engines' designs, to be re-tuned
// from H100 and CPU measurements (bench/bench_index_cpu.cpp, bench/gpu/);
// include/knn_gpgpu.h documents them for users.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "../engine/index_engine.h"
#include "../include/knn_gpgpu.h"

namespace knn {

// Largest dimension the index API accepts (every structure on the CPU; the
// kd-tree stops pruning long before, so AUTO picks brute force there).
constexpr int kIndexMaxDim = KNN_INDEX_MAX_DIM;
// AUTO structure: brute force up to this many points (a tree's build and
// traversal cost more than scanning so few) ...
constexpr int64_t kCpuBruteForceMaxPoints = 2048;
// ... and on the GPU, where one pass over the points is one coalesced sweep
// per query block, up to this many ...
constexpr int64_t kGpuBruteForceMaxPoints = 16384;
// ... and above this dimension, where the boxes of a kd-tree over data of
// practical sizes are too wide to prune (2^dim >> n).
constexpr int kKdTreeMaxUsefulDim = 16;
// On the GPU the tiled brute force stays ahead longer: from dim 13 to 16 the
// kd-tree wins only from 2^(dim + 4) points. Measured on the H100 (uniform,
// n = m, k = 5, build included, ms of kd-tree vs brute force, 2026-11-25):
// the kd-tree wins at every size 2^17..2^21 up to d = 12 (d = 12: 26.4 vs
// 40.4 at 2^17); d = 13, 2^17: 41.9 vs 42.9; d = 14: 47.6 vs 44.6 at 2^17,
// 112 vs 172 at 2^18; d = 15: 71.3 vs 46.7 at 2^17, 169 vs 181 at 2^18, 490
// vs 696 at 2^19; d = 16: 781 vs 721 at 2^19, 2378 vs 2839 at 2^20, 7260 vs
// 11239 at 2^21.
constexpr int kGpuKdTreeAnySizeMaxDim = 12;
inline bool gpu_kdtree_beats_brute_force(int64_t n, int dim) {
  if (dim <= kGpuKdTreeAnySizeMaxDim) return true;
  return dim <= kKdTreeMaxUsefulDim && n >= (int64_t{1} << (dim + 4));
}

// The structure AUTO means for n points of dim on `backend` (CUDA or OPENMP),
// chosen at build time: the index's primary structure.
int auto_structure(int backend, int64_t n, int dim);

// ---- AUTO at query time ---------------------------------------------------------
// An AUTO index keeps its primary structure and may add a kd-tree of the same
// backend and precision at the first call that the kd-tree serves better or
// that the primary cannot serve (src/lazy_kdtree.h); the answers are the same
// whichever serves. serving_structure says which, from the call's list length.

// The longest list per query the CUDA grid and brute force keep (their warp
// lists in shared memory); beyond it they refuse (KNN_ERR_UNSUPPORTED), the
// kd-tree has no limit. The brute force keeps at most n entries, so it
// refuses only above n points too; the grid's limit is the device's shared
// memory (never below this on a device with 48 KiB per block). The CUDA
// engine's kMaxWarpK (src/backends.cpp asserts it).
constexpr int kGpuMaxListK = 2048;
// On the GPU the grid leads at every list its thread search keeps (up to
// kGpuGridMaxLeadingK entries: registers, heaps, then binned rows from 45,
// cuda/grid/grid_memory.h) and the kd-tree beyond, where the grid's lists
// are a warp's each. H200, 2026-12-01, 10^7 x 10^7, device arrays, query ms
// (.peers/probe/ab.cpp), grid against kd-tree: uniform k = 100 77.7 against
// 184.9, k = 128 123.3 against 212.8; on a sphere k = 64 59.0 against 90.5,
// k = 100 75.7 against 123.1, k = 128 122.4 against 141.9, k = 200 152.2
// against 210.0, k = 256 273.4 against 267.2; 10^6 x 10^6 uniform, k = 256
// 27.0 against 34.5. (With the rows' kernel held to 80 registers, 5-15 %
// slower: uniform 10^7 k = 200 173.9 against 306.1, k = 256 294.8 against
// 387.0.) Before the binned rows the grid's heaps lost to the kd-tree from
// k = 65 (on a sphere, k = 100: 165.8 against 123.0). The CUDA engine's
// kMaxBinnedTake (src/backends.cpp asserts it).
constexpr int kGpuGridMaxLeadingK = 256;
// Nor does the grid lead for queries away from the points (inside a
// scanned object, off a surface, the outliers of a scan asking for their
// own neighbours): for a query with at most one point in the 3 x 3 x 3
// cells around its own the grid may walk row after row of empty cells, and
// for one with none then scan all n points (common/grid_walk.h,
// walk_shells), where the kd-tree descends to it; a query beyond the
// points' box walks a cap of its face that widens with its distance
// (grid_walk.h, beyond_the_box). So a kNN call whose sampled queries
// (share_of_isolated_queries; the indexed points for all-kNN) make share x
// n above this is served by the kd-tree. The outliers cost most: H100,
// 2026-12-07, 10^6 points of a scanned torus with 0.5 % of them sprayed
// over its box (bench/peers_stats), each point's 16 nearest, ms from host
// points to host rows: grid 76.3, kd-tree 11.5; the normals of those lists
// on the device 66.9 against 6.3. (Before the outliers counted, H100, 10^6
// points on a sphere, 10^5 queries, k = 8, build + query ms, bench/
// RESULTS.md "Queries away from a surface": all in its bounding cube, grid
// 389, kd-tree 46; 1 in 50 there, grid 12.7, kd-tree 19.7: the kd-tree
// serves that case now too, the smaller loss.)
constexpr double kGpuGridMaxIsolatedScan = 1024.0;
// On the CPU the OpenMP grid never lost to the OpenMP kd-tree at any k
// (2 cores, uniform 3-D, n = m = 10^6, query ms grid vs kd-tree, 2026-11-25:
// k = 8 1036 vs 2508, 16: 1542 vs 3743, 32: 2536 vs 6790, 64: 4046 vs
// 11734, 100: 5824 vs 17979; n = m = 10^5: k = 400 4189 vs 6699, k = 1000
// 9067 vs 17765), and neither CPU structure limits k, but its scan of all
// points for a query away from them costs as the GPU's does: 10^6 points on
// a sphere, 10^5 queries in its cube, k = 8, 2 cores: grid 157 s, kd-tree
// 6.2 s (2026-11-28), about 1.6 ns a point and query against 1.5 us a
// query the grid saves at k = 8 (12 at k = 100). So an OpenMP AUTO index
// adds its kd-tree for a kNN call whose isolated share x n is above this,
// the saving at k = 8 to 100 in points scanned. (An outlier of the points
// asking for its own neighbours walks shells instead: the torus above, 2
// cores, k = 16, 136 us a sprayed point on the grid against 2.2 us on the
// kd-tree, 0.80 against 0.53 us a point of the surface.)
constexpr double kCpuGridMaxIsolatedScan = 4096.0;

// A grid whose points are stacked at few locations (duplicates: a build
// that refuses curves finds so, common/grid_layout.h "Stacked points") scans
// crowded cells for every list, so for lists of fewer entries than a
// point's own cell holds on average (BasicIndexEngine::stacked_cell_points)
// the kd-tree an AUTO index adds serves instead, on both backends; longer
// lists need that many points anyway and the grid leads (2 loaded cores, 16
// points at each location, 19 points a cell: kd-tree 1.2-1.3x faster at k
// <= 8, the grid 1.6-2.1x at k >= 100, common/grid_layout.h).

// What a call needs of a structure: the k nearest (kNN, all-kNN: speed and
// the list limit decide) or radius rows (only the list limit: the grid's
// radius rows have none, and no measurement says the kd-tree's are faster).
enum class CallKind { Nearest, Radius };

// The structure that serves a call of an AUTO index on `backend` whose
// primary structure is `primary` (KDTREE, GRID or BRUTE_FORCE), over n
// points, with lists of list_k entries per query (k, k + 1 with
// exclude_self, max_neighbors of a radius row; 0 for counting), and for a
// kNN call the share of its queries away from the points (the primary's
// share_of_isolated_queries), and the primary's stacked_cell_points:
// `primary`, or KNN_STRUCTURE_KDTREE where that serves the call faster or
// `primary` cannot serve it at all (primary_refuses).
int serving_structure(int backend, int primary, int64_t n, int list_k, CallKind kind,
                      double isolated_share = 0.0, double stacked_cell_points = 0.0);
// Whether serving_structure may read the isolated share for such a call (it
// costs a pass over a sample of the queries): not where the grid would not
// serve a kNN call anyway, nor over n <= kGpuGridMaxIsolatedScan points
// (kCpuGridMaxIsolatedScan on the CPU), where no share can tip the choice.
bool reads_isolated_share(int backend, int primary, int64_t n, int list_k, CallKind kind);
// serving_structure for a call on an AUTO index of n points whose primary
// engine is `primary`, the isolated share read from the primary over the
// call's queries where reads_isolated_share allows (queries null: all-kNN,
// whose queries are the points; the queries may be host or device memory).
// Every AUTO call decides here: index calls and the classic queries that the
// grid of a tree's points may answer.
template <typename Scalar>
int structure_serving_call(const BasicIndexEngine<Scalar>& primary, int64_t n, int list_k,
                           CallKind kind, const Scalar* queries, int64_t m);
// True when `primary` on `backend` refuses lists of list_k over n points.
bool primary_refuses(int backend, int primary, int64_t n, int list_k);

// Device bytes of a build of `structure` over n points of dim coordinates of
// `scalar` (KNN_SCALAR_*): the CUDA memory model with the scalar's size
// (8-byte coordinates and distances for float64; indices, keys and offsets
// unchanged), saturating at SIZE_MAX.
// For AUTO the query figure also counts, from n > kGpuMaxListK points on
// (below, no call makes an AUTO index add one), the kd-tree that calls at
// long lists add beside the primary structure: the primary, and the
// kd-tree's build or its resident tree with the call.
size_t device_build_bytes(int structure, int64_t n, int dim, int scalar);
size_t device_query_bytes(int structure, int64_t m, int k, int64_t n, int dim, int scalar);

// The backend that serves a build asked with `requested`: OPENMP and CUDA as
// asked (CUDA without a usable device: KNN_ERR_NO_DEVICE); AUTO picks CUDA
// when a device is usable and the device estimate of the build fits the
// budget (device_budget(device_memory_limit) of the device backend), else OPENMP.
int resolve_backend(int requested, int64_t n, int dim, int structure, size_t device_memory_limit,
                    int scalar);

// Builds the engine of `structure` (AUTO resolved here) on `backend` (CUDA or
// OPENMP). GRID needs dim == 3 (else KNN_ERR_UNSUPPORTED); when the grid
// engine declines the data, the kd-tree of the same backend serves instead
// (the engine's structure() says which). `points` must be host memory for
// OPENMP; for CUDA, params.points_on_device says where it is. Scalar is float
// or double (the engine's precision).
template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> build_index_engine(int backend, int structure,
                                                             const Scalar* points, int64_t n,
                                                             int dim, const IndexParams& params);

}  // namespace knn
