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

#include "../include/knn_gpgpu.h"
#include "index_engine.h"

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
// practical sizes are too wide to prune (2^dim >> n). On the GPU the tiled
// brute force overtakes the kd-tree earlier: measured on the H100 (uniform,
// n = m = 2^17..2^20, k = 5, build included) the kd-tree wins at every size
// up to d = 9 and from 2^18 at d = 12 (89 vs 157 ms at 2^18, 582 vs 2356 ms
// at 2^20; at 2^17 brute force is ahead, 40.0 vs 45.9 ms, 2026-11-25)
// and brute force at every size at d = 16 (48 vs 398 ms at 2^17, 2832 vs
// 6506 ms at 2^20); d = 13..15 were not measured.
constexpr int kKdTreeMaxUsefulDim = 16;
constexpr int kGpuKdTreeMaxUsefulDim = 12;

// The structure AUTO means for n points of dim on `backend` (CUDA or OPENMP).
int auto_structure(int backend, int64_t n, int dim);

// The backend that serves a build asked with `requested`: OPENMP and CUDA as
// asked (CUDA without a usable device: KNN_ERR_NO_DEVICE); AUTO picks CUDA
// when a device is usable and the device estimate of the build fits the
// budget (device_memory_limit when non-zero, else device_budget()), else
// OPENMP.
int resolve_backend(int requested, int64_t n, int dim, int structure, size_t device_memory_limit);

// Builds the engine of `structure` (AUTO resolved here) on `backend` (CUDA or
// OPENMP). GRID needs dim == 3 (else KNN_ERR_UNSUPPORTED); when the grid
// engine declines the data, the kd-tree of the same backend serves instead
// (the engine's structure() says which). `points` must be host memory for
// OPENMP; for CUDA, params.points_on_device says where it is.
std::unique_ptr<IndexEngine> build_index_engine(int backend, int structure, const float* points,
                                                int64_t n, int dim, const IndexParams& params);

}  // namespace knn
