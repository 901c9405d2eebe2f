// The neighbourhood statistics of an index (src/stats_calls.h): the checks
// of each call, then chunks of the index's own points through the index's
// one query path (answer_call: every structure, device list, the lazy
// kd-tree and the CPU fallback of an AUTO index) into an engine's list
// reducer (engine/stats_engine.h), which writes the statistics where the
// lists are. The orientation without a viewpoint runs on the host
// (src/normal_orientation.h); the inlier rules are applied on the host to the
// per-point values.
#include "stats_calls.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "../common/error.h"
#include "../common/saturating.h"
#include "../engine/cancel.h"
#include "../engine/progress.h"
#include "../engine/stats_engine.h"
#include "backends.h"
#include "device_arrays.h"
#include "index_calls.h"
#include "index_handle.h"
#include "normal_orientation.h"
#include "options.h"
#include "validate.h"

namespace knn {
namespace {

// ---- Checks -----------------------------------------------------------------

void check_three_dimensional(const knn_index& ix, const char* call) {
  if (ix.dim() != 3)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("the index has dim %d; %s computes neighbourhood statistics of 3-D points only",
                ix.dim(), call));
}

// The start of every statistics call: the index, held in use until the
// call returns and refused unless it is 3-D, and the call's options.
template <typename Scalar>
struct StatsCall {
  StatsCall(const char* call, const knn_index* index, const knn_options* opt)
      : use(use_index<Scalar>(index, call)),
        ix(*use),
        options(read_call_options(ix, opt)),
        n(ix.size()) {
    check_three_dimensional(ix, call);
  }
  const HandleUse<knn_index> use;
  const knn_index& ix;
  const knn_options options;
  const int64_t n;
};

// The outputs of one call (null pointers left out): all host memory, or all
// device memory (of the index's device, for a CUDA index: its kernels write
// them in place). Returns whether they are device memory.
bool outputs_on_device(const knn_index& ix, std::initializer_list<const void*> outputs) {
  bool any_host = false, any_device = false;
  for (const void* p : outputs) {
    if (p == nullptr) continue;
    const bool device = on_device(p);
    (device ? any_device : any_host) = true;
    if (device && ix.device >= 0 && device_backend().device_of(p) != ix.device)
      fail(KNN_ERR_INVALID_ARGUMENT,
           format("an output array is memory of device %d; pass host memory or memory of the "
                  "index's device (%d)",
                  device_backend().device_of(p), ix.device));
  }
  if (any_host && any_device)
    fail(KNN_ERR_INVALID_ARGUMENT,
         "the output arrays mix host and device memory; pass all of them in one kind");
  return any_device;
}

void check_host_pointer(const void* p, const char* name) {
  if (p != nullptr && on_device(p))
    fail(KNN_ERR_INVALID_ARGUMENT, format("%s is device memory; pass it in host memory", name));
}

// ---- Outputs on the host or the device ----------------------------------------

template <typename T>
std::vector<T> read_values(const T* src, int64_t count, bool device) {
  std::vector<T> host(static_cast<size_t>(count));
  if (count <= 0) return host;
  if (device)
    device_backend().copy_to_host(host.data(), src, static_cast<size_t>(count) * sizeof(T));
  else
    std::copy(src, src + count, host.begin());
  return host;
}

// ---- The search and the reduction ----------------------------------------------

// The kNN rows of some of the index's points as queries: the work of each
// device's share and of a call on one engine alike.
template <typename Scalar>
BasicShareWork<Scalar> nearest_rows() {
  return [](const BasicIndexEngine<Scalar>& e, const Scalar* q, int64_t count, int row, int32_t* i,
            Scalar* d, int32_t*, const CallParams& call) { e.knn(q, count, row, i, d, call); };
}

// Computes the request's statistic for every point into its outputs (where
// request.outputs_on_device says; the OpenMP reducer writes device outputs
// through host buffers). Outputs are written whole or, on a failure, not at
// all by this function (the caller writes the missing values).
template <typename Scalar>
void compute_statistic(const knn_index& ix, const knn_options& o, StatsRequest<Scalar> request) {
  const int64_t n = ix.size();
  const bool normals = request.what == NeighbourhoodStatistic::Normals;
  const int64_t width = normals ? 3 : 1;
  const CallParams params = call_params(ix, o);
  std::unique_ptr<BasicListReducer<Scalar>> reducer;
  // On a CUDA index the CUDA reducer; the CPU's where an AUTO index's device
  // has no memory for its points and lists.
  if (ix.backend() == KNN_BACKEND_CUDA)
    reducer = made_on_device_or_null(ix, [&] {
      return device_backend().make_list_reducer(*ix.engine<Scalar>(), request, params);
    });
  const bool staged = request.outputs_on_device && !reducer;
  Scalar* const values = request.values;
  Scalar* const curvature = request.curvature;
  std::vector<Scalar> host_values, host_curvature;
  if (staged) {
    host_values.resize(static_cast<size_t>(n * width));
    if (curvature) host_curvature.resize(static_cast<size_t>(n));
    request.values = host_values.data();
    request.curvature = curvature ? host_curvature.data() : nullptr;
    request.outputs_on_device = false;
  }
  if (!reducer) reducer = host_backend().make_list_reducer(*ix.engine<Scalar>(), request, params);
  const int list_k = request.list_k;
  const ProgressStage stage(KNN_PROGRESS_QUERY, n);
  const BasicShareWork<Scalar> share = nearest_rows<Scalar>();
  CpuFallback<Scalar> fallback(ix);
  const int64_t rows = reducer->chunk_rows();
  // Normals read only the neighbours' points, the others only distances.
  Scalar* const sq_distances = normals ? nullptr : reducer->list_sq_distances();
  for (int64_t first = 0; first < n; first += rows) {
    throw_if_cancelled(cancel_flag());
    const int64_t count = std::min(rows, n - first);
    const Outputs<Scalar> lists(reducer->list_indices(), sq_distances, nullptr, count * list_k,
                                count);
    answer_call(ix,
                CallShape<Scalar>{reducer->chunk_queries(first, count), count, list_k, list_k,
                                  CallKind::Nearest, false},
                lists, o, share, share, fallback);
    reducer->reduce(first, count);
  }
  stage.finish();
  if (staged) {
    write_values(values, host_values.data(), n * width, true);
    if (curvature) write_values(curvature, host_curvature.data(), n, true);
  }
}

// The orientation of knn_index_normals without a viewpoint: the graph's
// search (lists of g others, host memory), then the propagation.
template <typename Scalar>
void orient_without_viewpoint(const knn_index& ix, const knn_options& o, int k, Scalar* normals,
                              bool device) {
  const int64_t n = ix.size();
  const int g = std::min(k - 1, KNN_ORIENTATION_NEIGHBORS);
  std::vector<int32_t> neighbours;
  if (g > 0) {
    neighbours.resize(static_cast<size_t>(n * g));
    const Outputs<Scalar> out(neighbours.data(), nullptr, nullptr, n * g, n);
    const ProgressStage stage(KNN_PROGRESS_QUERY, n);
    const BasicShareWork<Scalar> share = nearest_rows<Scalar>();
    const BasicShareWork<Scalar> whole =
        [&](const BasicIndexEngine<Scalar>& e, const Scalar*, int64_t, int, int32_t* i, Scalar* d,
            int32_t*, const CallParams& call) { e.knn_self(g, true, i, d, call); };
    CpuFallback<Scalar> fallback(ix);
    const Scalar* const own_points = nullptr;
    answer_call(ix, CallShape<Scalar>{own_points, n, g, g + 1, CallKind::Nearest, true}, out, o,
                share, whole, fallback);
    stage.finish();
  }
  std::vector<double> z(static_cast<size_t>(n));
  {
    std::vector<Scalar> points(static_cast<size_t>(n * 3));
    ix.engine<Scalar>()->copy_points(points.data());
    for (int64_t i = 0; i < n; ++i)
      z[static_cast<size_t>(i)] = points[static_cast<size_t>(3 * i + 2)];
  }
  const std::vector<Scalar> written = read_values(normals, n * 3, device);
  std::vector<double> wide(written.begin(), written.end());
  const ProgressStage stage(KNN_PROGRESS_QUERY, n);
  orient_normals(wide, z, neighbours, std::max(g, 0), o.threads);
  stage.finish();
  // Negation is exact: the oriented normals are the written ones, signed.
  const std::vector<Scalar> oriented(wide.begin(), wide.end());
  write_values(normals, oriented.data(), n * 3, device);
}

// The list of the k nearest others holds the point itself too, and no more
// than the n points there are (larger k only pads it with missing slots).
int others_list_length(int k, int64_t n) {
  return static_cast<int>(std::min<int64_t>(int64_t{k} + 1, n));
}

// The per-point values of a list statistic into host memory.
template <typename Scalar>
std::vector<Scalar> host_statistic(const knn_index& ix, const knn_options& o, int k,
                                   NeighbourhoodStatistic what) {
  std::vector<Scalar> values(static_cast<size_t>(ix.size()));
  StatsRequest<Scalar> request;
  request.what = what;
  request.k = k;
  request.list_k = others_list_length(k, ix.size());
  request.n = ix.size();
  request.values = values.data();
  compute_statistic(ix, o, request);
  return values;
}

// The inlier calls' outputs: checks kept and n_kept, then writes the ids of
// the points i that keep(i) accepts (ascending, then -1 to n) and their
// number, where `keep` is what make_keep() returns once the index's device
// is current. On a failure kept is all -1 and *n_kept 0.
template <class MakeKeep>
void write_inliers(const knn_index& ix, int32_t* kept, int64_t* n_kept, MakeKeep&& make_keep) {
  const int64_t n = ix.size();
  check_array(kept, n, "kept", "the index's point count");
  if (n_kept == nullptr) fail(KNN_ERR_INVALID_ARGUMENT, "n_kept is NULL");
  check_host_pointer(n_kept, "n_kept");
  if (n == 0) {
    *n_kept = 0;
    return;
  }
  const DeviceScope scope(ix.device);
  const bool device = outputs_on_device(ix, {kept});
  try {
    const auto keep = make_keep();
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < n; ++i)
      if (keep(i)) ids.push_back(static_cast<int32_t>(i));
    const int64_t count = static_cast<int64_t>(ids.size());
    ids.resize(static_cast<size_t>(n), -1);
    write_values(kept, ids.data(), n, device);
    *n_kept = count;
  } catch (...) {
    try_fill_values(kept, n, int32_t{-1}, device);
    *n_kept = 0;
    throw;
  }
}

// The index's points as host queries (the radius calls' queries).
template <typename Scalar>
std::vector<int64_t> others_within(const knn_index& ix, const knn_options& o, Scalar radius) {
  const int64_t n = ix.size();
  std::vector<Scalar> points(static_cast<size_t>(n * 3));
  ix.engine<Scalar>()->copy_points(points.data());
  const std::vector<int32_t> found = radius_counts(ix, points.data(), n, radius, o);
  std::vector<int64_t> others(static_cast<size_t>(n));
  // Each point finds itself (distance 0 <= radius^2) besides its others.
  for (int64_t i = 0; i < n; ++i)
    others[static_cast<size_t>(i)] = int64_t{found[static_cast<size_t>(i)]} - 1;
  return others;
}

}  // namespace

// ---- The calls ------------------------------------------------------------------

template <typename Scalar>
void index_normals(const char* call, const knn_index* index, int k, const Scalar* viewpoint,
                   Scalar* normals, Scalar* curvature, const knn_options* opt) {
  const StatsCall<Scalar> stats(call, index, opt);
  check_k(k);
  check_array(normals, stats.n, "normals", "the index's point count");
  check_slots(stats.n, 3, sizeof(Scalar), "n * 3 (the normals)");
  check_host_pointer(viewpoint, "viewpoint");
  if (viewpoint)
    for (int c = 0; c < 3; ++c)
      if (!std::isfinite(viewpoint[c]))
        fail(KNN_ERR_INVALID_ARGUMENT, format("viewpoint[%d] is %g; the viewpoint must be finite",
                                              c, static_cast<double>(viewpoint[c])));
  if (stats.n == 0) return;
  const DeviceScope scope(stats.ix.device);
  const bool device = outputs_on_device(stats.ix, {normals, curvature});
  StatsRequest<Scalar> request;
  request.what = NeighbourhoodStatistic::Normals;
  request.k = k;
  request.list_k = static_cast<int>(std::min<int64_t>(k, stats.n));  // beyond n: all n
  request.n = stats.n;
  request.values = normals;
  request.curvature = curvature;
  request.has_viewpoint = viewpoint != nullptr;
  if (viewpoint) std::copy(viewpoint, viewpoint + 3, request.viewpoint);
  request.outputs_on_device = device;
  try {
    compute_statistic(stats.ix, stats.options, request);
    if (!viewpoint) orient_without_viewpoint(stats.ix, stats.options, k, normals, device);
  } catch (...) {
    const Scalar nan = std::numeric_limits<Scalar>::quiet_NaN();
    try_fill_values(normals, stats.n * 3, nan, device);
    try_fill_values(curvature, stats.n, nan, device);
    throw;
  }
}

template <typename Scalar>
void index_list_statistic(const char* call, const knn_index* index, int k, ListStatistic what,
                          Scalar* values, const knn_options* opt) {
  const StatsCall<Scalar> stats(call, index, opt);
  check_k(k);
  check_array(values, stats.n, what == ListStatistic::MeanDistance ? "mean_distances" : "distances",
              "the index's point count");
  check_slots(stats.n, 1, sizeof(Scalar), "n (the outputs)");
  if (stats.n == 0) return;
  const DeviceScope scope(stats.ix.device);
  const bool device = outputs_on_device(stats.ix, {values});
  StatsRequest<Scalar> request;
  request.what = what == ListStatistic::MeanDistance ? NeighbourhoodStatistic::MeanDistance
                                                     : NeighbourhoodStatistic::KthDistance;
  request.k = k;
  request.list_k = others_list_length(k, stats.n);
  request.n = stats.n;
  request.values = values;
  request.outputs_on_device = device;
  try {
    compute_statistic(stats.ix, stats.options, request);
  } catch (...) {
    try_fill_values(values, stats.n, std::numeric_limits<Scalar>::infinity(), device);
    throw;
  }
}

template <typename Scalar>
void index_statistical_inliers(const char* call, const knn_index* index, int k, double std_ratio,
                               int32_t* kept, int64_t* n_kept, const knn_options* opt) {
  const StatsCall<Scalar> stats(call, index, opt);
  check_k(k);
  if (!std::isfinite(std_ratio))
    fail(KNN_ERR_INVALID_ARGUMENT, format("std_ratio is %g; it must be finite", std_ratio));
  write_inliers(stats.ix, kept, n_kept, [&] {
    std::vector<Scalar> scores =
        host_statistic<Scalar>(stats.ix, stats.options, k, NeighbourhoodStatistic::MeanDistance);
    double sum = 0;
    for (const Scalar s : scores) sum += double(s);
    const double mean = sum / double(stats.n);
    double squares = 0;
    for (const Scalar s : scores) {
      const double d = double(s) - mean;
      squares += d * d;
    }
    const double std_dev = stats.n > 1 ? std::sqrt(squares / double(stats.n - 1)) : 0.0;
    const double threshold = mean + std_ratio * std_dev;
    return [scores = std::move(scores), threshold](int64_t i) {
      return double(scores[static_cast<size_t>(i)]) <= threshold;
    };
  });
}

template <typename Scalar>
void index_neighbor_counts(const char* call, const knn_index* index, Scalar radius, int64_t* counts,
                           const knn_options* opt) {
  const StatsCall<Scalar> stats(call, index, opt);
  check_radius(radius);
  check_array(counts, stats.n, "counts", "the index's point count");
  if (stats.n == 0) return;
  const DeviceScope scope(stats.ix.device);
  const bool device = outputs_on_device(stats.ix, {counts});
  try {
    const std::vector<int64_t> others = others_within(stats.ix, stats.options, radius);
    write_values(counts, others.data(), stats.n, device);
  } catch (...) {
    try_fill_values(counts, stats.n, int64_t{0}, device);
    throw;
  }
}

template <typename Scalar>
void index_radius_inliers(const char* call, const knn_index* index, Scalar radius,
                          int64_t min_neighbors, int32_t* kept, int64_t* n_kept,
                          const knn_options* opt) {
  const StatsCall<Scalar> stats(call, index, opt);
  check_radius(radius);
  if (min_neighbors < 0)
    fail(KNN_ERR_INVALID_ARGUMENT, format("min_neighbors is %lld; it must not be negative",
                                          static_cast<long long>(min_neighbors)));
  write_inliers(stats.ix, kept, n_kept, [&] {
    return [others = others_within(stats.ix, stats.options, radius), min_neighbors](int64_t i) {
      return others[static_cast<size_t>(i)] >= min_neighbors;
    };
  });
}

size_t estimate_stats_bytes(int64_t n, int k, const knn_options* opt, int scalar) {
  if (n < 0 || k < 1) return 0;
  if (n > INT32_MAX) return SIZE_MAX;
  const size_t search = scalar == KNN_SCALAR_FLOAT64 ? knn_estimate_query_bytes_f64(n, k, n, 3, opt)
                                                     : knn_estimate_query_bytes(n, k, n, 3, opt);
  // The reducer's points, chunk queries and their order, lists and staged
  // outputs (normals and curvature at most).
  const size_t reducer =
      device_backend().stats_reducer_bytes(n, k, scalar == KNN_SCALAR_FLOAT64 ? 8 : 4);
  return saturating_add(search, reducer);
}

#define KNN_STATS_INSTANTIATE(Scalar)                                                              \
  template void index_normals(const char*, const knn_index*, int, const Scalar*, Scalar*, Scalar*, \
                              const knn_options*);                                                 \
  template void index_list_statistic(const char*, const knn_index*, int, ListStatistic, Scalar*,   \
                                     const knn_options*);                                          \
  template void index_statistical_inliers<Scalar>(const char*, const knn_index*, int, double,      \
                                                  int32_t*, int64_t*, const knn_options*);         \
  template void index_neighbor_counts(const char*, const knn_index*, Scalar, int64_t*,             \
                                      const knn_options*);                                         \
  template void index_radius_inliers(const char*, const knn_index*, Scalar, int64_t, int32_t*,     \
                                     int64_t*, const knn_options*);
KNN_STATS_INSTANTIATE(float)
KNN_STATS_INSTANTIATE(double)

}  // namespace knn
