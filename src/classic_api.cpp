// Entry points of the classic 3-D API (contract section 2): validation, then
// the planner. Every function runs inside the exception barrier.
#include <algorithm>
#include <cmath>
#include <limits>

#include "../common/first_index.h"
#include "../engine/progress.h"
#include "abi_barrier.h"
#include "backends.h"
#include "device_choice.h"
#include "query_planner.h"
#include "validate.h"

namespace knn {
namespace {

// The classic API has no options: its calls run on the default team
// (common/team_size.h: OMP_NUM_THREADS, at most max_threads()).
constexpr int kDefaultThreads = 0;

// Refusals the planner gives before any output is written: the tree is not
// a tree, no engine of this build can serve the call, or the device list
// (KNN_DEVICES) is not one.
bool refused_before_computing(int status) {
  return status == KNN_ERR_INVALID_TREE || status == KNN_ERR_NO_DEVICE ||
         status == KNN_ERR_UNSUPPORTED || status == KNN_ERR_INVALID_ARGUMENT;
}

// Runs `compute` once the arguments are valid. A failure once computing has
// started (a cancel, a device error) leaves the outputs fully written with
// the missing value, never half-written, as the header promises; a refusal
// leaves them untouched, as a failed validation does.
template <class Compute, class FillMissing>
void run_or_fill(Compute&& compute, FillMissing&& fill_missing) {
  try {
    compute();
  } catch (const Error& e) {
    if (!refused_before_computing(e.status())) fill_missing();
    throw;
  } catch (...) {
    fill_missing();
    throw;
  }
}

void check_build_args(const Point* points, int n, const Node* tree) {
  check_array(points, n, "points", "n");
  check_array(tree, n, "tree", "n");
  check_coordinates(reinterpret_cast<const float*>(points), n, 3, "point", kDefaultThreads);
}

int build(const char* function, const Point* points, int n, Node* tree, Engine engine) {
  return guarded(function, [&] {
    check_build_args(points, n, tree);
    if (engine != Engine::OpenMP) check_device_environment(false, true);
    const ProgressStage stage(KNN_PROGRESS_BUILD, 1);
    run_or_fill([&] { build_tree(points, n, tree, engine); },
                [&] {
                  const float inf = std::numeric_limits<float>::infinity();
                  std::fill(tree, tree + n, Node{{inf, inf, inf}, -1, -1, -1});
                });
    stage.finish();
  });
}

// A caller's tree may be a saved one edited by hand: its points obey the
// coordinate rule as the build's input does, or squared distances could
// overflow and order neighbours wrongly. One pass over the array; non-finite
// coordinates are left to the tree check, which names them. One parallel
// pass over the array; the first offending node is named.
void check_tree_coordinates(const Node* tree, int n_tree) {
  const float limit = coordinate_limit(3);
  auto beyond = [&](float v) { return std::isfinite(v) && std::fabs(v) > limit; };
  const int64_t i = first_index_where(n_tree, kDefaultThreads, [&](int64_t j) {
    return beyond(tree[j].p[0]) || beyond(tree[j].p[1]) || beyond(tree[j].p[2]);
  });
  if (i == n_tree) return;
  const int d = beyond(tree[i].p[0]) ? 0 : (beyond(tree[i].p[1]) ? 1 : 2);
  fail(KNN_ERR_INVALID_TREE,
       format("tree node %d has coordinate %g (dimension %d); coordinates must lie within "
              "+-%g, as buildKdTree's input must (squared distances would overflow float32)",
              static_cast<int>(i), static_cast<double>(tree[i].p[d]), d,
              static_cast<double>(limit)));
}

int query(const char* function, const Point* queries, const Node* tree, int n_qp, int n_tree, int k,
          int* result, Engine engine) {
  return guarded(function, [&] {
    check_array(queries, n_qp, "query_points", "n_qp");
    check_array(tree, n_tree, "tree", "n_tree");
    check_k(k);
    check_array(result, n_qp, "result", "n_qp");
    check_slots(n_qp, k, sizeof(int), "n_qp * k");
    check_coordinates(reinterpret_cast<const float*>(queries), n_qp, 3, "query point",
                      kDefaultThreads);
    check_tree_coordinates(tree, n_tree);
    if (engine != Engine::OpenMP) check_device_environment(true, true);
    const ProgressStage stage(KNN_PROGRESS_QUERY, n_qp);
    run_or_fill(
        [&] {
          query_tree(queries, n_qp, tree, n_tree, k, reinterpret_cast<int32_t*>(result), engine);
        },
        [&] { std::fill(result, result + static_cast<int64_t>(n_qp) * k, -1); });
    stage.finish();
  });
}

size_t nonnegative(int v) { return v < 0 ? 0 : static_cast<size_t>(v); }

}  // namespace
}  // namespace knn

using knn::Engine;

extern "C" {

KNN_API int KNN_CALL buildKdTree(const Point* points, int n, Node* tree) {
  return knn::build("buildKdTree", points, n, tree, Engine::Auto);
}
KNN_API int KNN_CALL cuBuildKdTree(const Point* points, int n, Node* tree) {
  return knn::build("cuBuildKdTree", points, n, tree, Engine::Cuda);
}
KNN_API int KNN_CALL mpBuildKdTree(const Point* points, int n, Node* tree) {
  return knn::build("mpBuildKdTree", points, n, tree, Engine::OpenMP);
}

KNN_API int KNN_CALL queryAll(const Point* query_points, const Node* tree, int n_qp, int n_tree,
                              int k, int* result) {
  return knn::query("queryAll", query_points, tree, n_qp, n_tree, k, result, Engine::Auto);
}
KNN_API int KNN_CALL cuQueryAll(const Point* query_points, const Node* tree, int n_qp, int n_tree,
                                int k, int* result) {
  return knn::query("cuQueryAll", query_points, tree, n_qp, n_tree, k, result, Engine::Cuda);
}
KNN_API int KNN_CALL mpQueryAll(const Point* query_points, const Node* tree, int n_qp, int n_tree,
                                int k, int* result) {
  return knn::query("mpQueryAll", query_points, tree, n_qp, n_tree, k, result, Engine::OpenMP);
}

KNN_API size_t KNN_CALL getTreeSize(int n_tree) { return knn::nonnegative(n_tree) * sizeof(Node); }

KNN_API size_t KNN_CALL getNeededBytesForBuildingKdTree(int n_tree) {
  return n_tree < 0 ? 0 : knn::device_backend().classic_tree_build_bytes(n_tree);
}

KNN_API size_t KNN_CALL getNeededBytesForQueryAll(int n_qp, int k, int n_tree) {
  // The whole call at once: the tree and every query's result rows on the
  // device together (cuQueryAll streams smaller chunks, so it needs less),
  // or the grid of the tree's points where that may answer.
  if (n_qp < 0 || k < 0 || n_tree < 0) return 0;
  return knn::query_bytes_needed(n_qp, k, n_tree);
}

KNN_API size_t KNN_CALL getNeededBytesInSearch(int n_qp, int k, int n_tree, int thread_num,
                                               int block_num) {
  // The engine picks its own launch shape from the device; the search's own
  // storage depends on the queries and k (results are counted by the caller).
  if (n_qp < 0 || k < 0 || n_tree < 0 || thread_num < 0 || block_num < 0) return 0;
  return knn::search_bytes_needed(n_qp, k, n_tree);
}

KNN_API size_t KNN_CALL getFreeBytesOnGpu(void) {
  size_t bytes = 0;
  knn::guarded("getFreeBytesOnGpu", [&] { bytes = knn::device_backend().free_device_bytes(); });
  return bytes;
}

KNN_API int KNN_CALL cuSetDevice(int device) {
  return knn::guarded("cuSetDevice", [&] { knn::device_backend().set_device(device); });
}

KNN_API int KNN_CALL cuGetDevice(void) {
  int device = -1;
  knn::guarded("cuGetDevice", [&] { device = knn::device_backend().current_device(); });
  return device;
}

KNN_API int KNN_CALL cuGetDeviceCount(void) {
  int count = 0;
  knn::guarded("cuGetDeviceCount", [&] { count = knn::device_backend().device_count(); });
  return count;
}

KNN_API int KNN_CALL knn_brute_force(const float* ref, int n_ref, const float* query, int n_query,
                                     int dim, int k, float* sq_dist, int* ind) {
  return knn::guarded("knn_brute_force", [&] {
    knn::check_array(ref, n_ref, "ref", "n_ref");
    knn::check_array(query, n_query, "query", "n_query");
    if (dim < 1)
      knn::fail(KNN_ERR_INVALID_ARGUMENT, knn::format("dim is %d; it must be at least 1", dim));
    knn::check_k(k);
    knn::check_slots(n_ref, dim, sizeof(float), "n_ref * dim");
    knn::check_slots(n_query, dim, sizeof(float), "n_query * dim");
    knn::check_slots(n_query, k, sizeof(float), "n_query * k");
    knn::check_coordinates(ref, n_ref, dim, "reference point", knn::kDefaultThreads);
    knn::check_coordinates(query, n_query, dim, "query point", knn::kDefaultThreads);
    const size_t slots = static_cast<size_t>(n_query) * static_cast<size_t>(k);
    knn::run_or_fill(
        [&] {
          knn::host_backend().classic_brute_force(ref, n_ref, query, n_query, dim, k,
                                                  reinterpret_cast<int32_t*>(ind), sq_dist);
        },
        [&] {
          if (ind) std::fill(ind, ind + slots, -1);
          if (sq_dist) std::fill(sq_dist, sq_dist + slots, std::numeric_limits<float>::infinity());
        });
  });
}

}  // extern "C"
