// The engines of a classic query (queryAll, cuQueryAll) on the device, and
// the device budget of the classic calls: shared by the planner
// (src/query_planner.cpp) and the split of a tree that does not fit
// (src/classic_split_tree.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "../engine/index_engine.h"
#include "../include/knn_gpgpu.h"
#include "backends.h"

namespace knn {

// Chunks smaller than this do not amortise a kernel launch and a transfer.
constexpr int64_t kMinChunkQueries = int64_t{1} << 12;

// The classic calls have no options: their budget on the current device is
// KNN_DEVICE_MEMORY_LIMIT's, else the free memory's (Backend::device_budget).
size_t classic_budget();

// Device bytes of a classic call on the tree's points with at most a small
// chunk of queries at a time: whether the device can serve it at all (the
// tree split serves it otherwise).
bool device_holds(int64_t m, int k, int64_t n, size_t budget);

// The kd-tree's leaves for lists of k: the index API's (index_leaf_size.h),
// whose long lists (the warp lists) want larger leaves.
int classic_leaf_size(int k);

// A classic call's engine on the current device and what it keeps there.
struct ClassicEngine {
  std::unique_ptr<IndexEngine> engine;
  size_t resident_bytes = 0;
};

// The engine of the tree's points that serves m queries with k neighbours
// within `budget` device bytes: the grid where it serves (the upload goes
// before the grid answers: classic_grid_query_bytes), else the kd-tree.
ClassicEngine classic_engine(const UploadedClassicTree& uploaded, const Point* queries, int64_t m,
                             int k, size_t budget);

// The rows of the queries `source` hands out (all m where it is null), on
// the current device, within `budget` less what the engine keeps there.
void classic_knn(const ClassicEngine& on, const Point* queries, int64_t m, int k, int32_t* indices,
                 float* sq_distances, size_t budget, QuerySource* source);

}  // namespace knn
