// The engines of a classic query on the device (src/classic_engines.h).
#include "classic_engines.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "../common/index_leaf_size.h"
#include "backends.h"
#include "index_planner.h"

namespace knn {

size_t classic_budget() { return device_backend().device_budget(0).bytes(); }

bool device_holds(int64_t m, int k, int64_t n, size_t budget) {
  return device_backend().classic_kdtree_query_bytes(std::min(m, kMinChunkQueries), k, n) <= budget;
}

namespace {

// A classic query runs on an index engine of the tree's points, built on the
// device from the uploaded tree (Backend::upload_classic_tree) and served through the
// index API's query pipeline: the grid where an AUTO index of the points
// would serve the call on a grid, else the bucket kd-tree. Both answer with
// the tree's indices (Node.id) and its ties, so the answer is the CPU
// engine's whichever serves.
//
// The grid: it answers short lists 2-3x faster than the kd-tree (H200, 10^7
// x 10^7 uniform, device arrays, build + query ms: k = 8 11.2 against 33.4,
// k = 30 29.5 against 59.2; bench/RESULTS.md) where the points make a good
// grid and the queries lie on them (index_planner.h serving_structure: lists
// up to kGpuGridMaxLeadingK, more points than the GPU brute force takes),
// and it is also the cheaper build (10^7 points: 1.2 ms against 6.3), so it
// is tried whatever the number of queries: with 10^6 queries against 10^7
// points the kd-tree's build made a call 40 % slower than the classic point
// tree had been.
bool grid_may_serve(int k, int64_t n) {
  return auto_structure(KNN_BACKEND_CUDA, n, 3) == KNN_STRUCTURE_GRID &&
         serving_structure(KNN_BACKEND_CUDA, KNN_STRUCTURE_GRID, n, k, CallKind::Nearest) ==
             KNN_STRUCTURE_GRID;
}

}  // namespace

int classic_leaf_size(int k) {
  return k > 16 ? kdtree_long_list_leaf_size(3) : kdtree_default_leaf_size(3, LeafSizeFor::kGpu);
}

ClassicEngine classic_engine(const UploadedClassicTree& uploaded, const Point* queries, int64_t m,
                             int k, size_t budget) {
  const Backend& device = device_backend();
  const int64_t n = uploaded.size();
  if (grid_may_serve(k, n) && device.classic_grid_query_bytes(m, k, n) <= budget) {
    IndexParams params;  // the grid's default cell size, refined for surfaces, as AUTO's
    params.refine_grid = true;
    params.refuse_curves = true;
    params.device_memory_limit = budget;
    std::unique_ptr<IndexEngine> grid = uploaded.grid_of_points(params);
    if (grid &&
        structure_serving_call(*grid, n, k, CallKind::Nearest,
                               reinterpret_cast<const float*>(queries), m) == KNN_STRUCTURE_GRID)
      return ClassicEngine{std::move(grid), device.grid_build_bytes(n)};
  }
  // The build's budget leaves out the upload and the rows it adopts (counted
  // in the kd-tree's build bytes): the planner admitted all of them.
  const size_t held = device.classic_upload_bytes(n);
  IndexParams params;
  params.leaf_size = classic_leaf_size(k);
  params.device_memory_limit = budget > held ? budget - held : 1;
  return ClassicEngine{uploaded.kdtree_of_points(params),
                       device.kdtree_resident_bytes(n, 3, params.leaf_size)};
}

void classic_knn(const ClassicEngine& on, const Point* queries, int64_t m, int k, int32_t* indices,
                 float* sq_distances, size_t budget, QuerySource* source) {
  CallParams call;
  call.device_memory_limit = budget > on.resident_bytes ? budget - on.resident_bytes : 1;
  call.query_source = source;
  on.engine->knn(reinterpret_cast<const float*>(queries), m, k, indices, sq_distances, call);
}

}  // namespace knn
