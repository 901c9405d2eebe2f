// The query calls of a mesh (include/knn_gpgpu_mesh.h): closest points,
// signed distances and the deviation report, with the checks of points,
// outputs and options, and the "outputs untouched or fully written" rule
// around the engines. The handle: src/mesh_handle.h.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <vector>

#include "../engine/mesh_engine.h"
#include "../engine/progress.h"
#include "abi_barrier.h"
#include "backends.h"
#include "device_arrays.h"
#include "device_choice.h"
#include "device_replicas.h"
#include "device_scope.h"
#include "mesh_handle.h"
#include "mesh_prepare.h"
#include "options.h"
#include "validate.h"

namespace knn {
namespace {

// The per-point arrays of a call in split_points' terms: the points first,
// then the outputs of MeshResults in its order.
template <typename Scalar>
std::vector<PointArray> point_arrays(const Scalar* points, const MeshResults<Scalar>& r) {
  constexpr size_t s = sizeof(Scalar);
  return {{const_cast<Scalar*>(points), 3 * s, false},
          {r.triangle_ids, sizeof(int32_t), true},
          {r.sq_distances, s, true},
          {r.closest, 3 * s, true},
          {r.barycentric, 3 * s, true},
          {r.signed_distances, s, true}};
}

// The inverse of point_arrays, for the arrays of one share or piece.
template <typename Scalar>
MeshResults<Scalar> results_of(const std::vector<void*>& a) {
  return {static_cast<int32_t*>(a[1]), static_cast<Scalar*>(a[2]), static_cast<Scalar*>(a[3]),
          static_cast<Scalar*>(a[4]), static_cast<Scalar*>(a[5])};
}

// Whether any array is memory of a device other than `device` (the engine
// there reads its own device's memory and host memory only).
bool any_elsewhere(const std::vector<PointArray>& arrays, int device) {
  for (const PointArray& a : arrays) {
    const int owner = a.data ? device_backend().device_of(a.data) : -1;
    if (owner >= 0 && owner != device) return true;
  }
  return false;
}

// What a copy of `mesh` on another device is built from: the vertices and
// triangles the handle keeps, and the build's parameters.
template <typename Scalar>
typename DeviceCopies<MeshEngine<Scalar>>::BuilderSource copy_source(const knn_mesh& mesh) {
  return [&mesh] {
    // The arrays the handle keeps (it outlives its copies); the CUDA engine
    // derives its signs itself.
    const MeshGeometry<Scalar> geometry = mesh.prepared<Scalar>().geometry();
    MeshParams params;
    params.threads = mesh.threads;
    params.device_memory_limit = mesh.device_memory_limit;
    return [geometry, params] { return device_backend().build_mesh(geometry, params); };
  };
}

void check_max_distance(double max_distance) {
  if (std::isnan(max_distance) || max_distance < 0)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("max_distance is %g; it must be a non-negative number (+infinity: no limit)",
                max_distance));
}

// The per-point outputs of one call (any but triangle_ids may be NULL):
// all host memory or all device memory.
template <typename Scalar>
struct PointOutputs {
  MeshResults<Scalar> results;
  int64_t m = 0;
  bool on_device = false;

  PointOutputs(const MeshResults<Scalar>& r, int64_t count) : results(r), m(count) {
    const void* arrays[] = {r.triangle_ids, r.sq_distances, r.closest, r.barycentric,
                            r.signed_distances};
    int given = 0, device = 0;
    for (const void* p : arrays) {
      given += p != nullptr;
      device += knn::on_device(p);
    }
    on_device = device > 0;
    if (device > 0 && device < given)
      fail(KNN_ERR_INVALID_ARGUMENT,
           "the output arrays mix host and device memory; pass all of them in one kind");
  }

  // The "beyond" values in every output, after a failure once the engine
  // started. Best effort: the call's status reports the first failure.
  void fill_beyond() const noexcept {
    constexpr Scalar inf = std::numeric_limits<Scalar>::infinity();
    constexpr Scalar nan = std::numeric_limits<Scalar>::quiet_NaN();
    const MeshResults<Scalar>& r = results;
    try {
      fill_values(r.triangle_ids, m, int32_t{-1}, on_device);
      fill_values(r.sq_distances, m, inf, on_device);
      fill_values(r.closest, 3 * m, nan, on_device);
      fill_values(r.barycentric, 3 * m, nan, on_device);
      fill_values(r.signed_distances, m, inf, on_device);
    } catch (...) {
    }
  }
};

// ---- Queries ----------------------------------------------------------------
// `call` is the entry point's name (messages, and the twin a refusal names).

// The devices that answer a closest-point call: for a CUDA mesh, those of
// the call's device list (copies made where missing), or its own device
// alone where an array is memory of another device (one share staged by
// peer copies); empty where the mesh's engine answers alone. Chosen before
// any output is written, so that a refused list leaves them untouched.
template <typename Scalar>
std::vector<int> answering_devices(const knn_mesh& mesh, const Scalar* points,
                                   const MeshResults<Scalar>& results, int64_t m,
                                   const MeshCall& c) {
  if (mesh.backend() != KNN_BACKEND_CUDA) return {};
  std::vector<int> devices = mesh.copies<Scalar>().devices_for_call(mesh.device, c.options, m, 0,
                                                                    copy_source<Scalar>(mesh));
  if (devices.empty() && any_elsewhere(point_arrays(points, results), mesh.device))
    devices = {mesh.device};
  return devices;
}

// The engine's closest() over m points into `results`: a signed distance
// call requires signed_distances (its triangle ids, when not asked for, go
// to scratch of the outputs' kind), a closest call triangle_ids.
template <typename Scalar>
void closest_points(const char* call, const knn_mesh* handle, const Scalar* points, int64_t m,
                    Scalar max_distance, MeshResults<Scalar> results, bool signed_call,
                    const knn_options* opt) {
  const HandleUse<knn_mesh> use = use_mesh<Scalar>(handle, call);
  const knn_mesh& mesh = *use;
  const MeshCall c = read_call(mesh, opt, true);
  check_max_distance(static_cast<double>(max_distance));
  check_array(points, m, "points", "m");
  check_slots(m, 3, sizeof(Scalar), "m * 3");
  if (signed_call)
    check_array(results.signed_distances, m, "signed_distances", "m");
  else
    check_array(results.triangle_ids, m, "triangle_ids", "m");
  if (m == 0) return;
  const DeviceScope scope(mesh.device);
  const PointOutputs<Scalar> out(results, m);
  check_points(mesh, points, m, out.on_device, c.params.threads);
  const std::vector<int> devices = answering_devices(mesh, points, results, m, c);
  std::vector<int32_t> host_ids;
  std::unique_ptr<DeviceAllocation> device_ids;
  if (results.triangle_ids == nullptr) {
    if (out.on_device) {
      device_ids = device_backend().allocate(sizeof(int32_t) * static_cast<size_t>(m));
      results.triangle_ids = static_cast<int32_t*>(device_ids->get());
    } else {
      host_ids.resize(static_cast<size_t>(m));
      results.triangle_ids = host_ids.data();
    }
  }
  const ProgressStage stage(KNN_PROGRESS_QUERY, m);
  try {
    const MeshEngine<Scalar>& home = *mesh.engine<Scalar>();
    if (devices.empty())
      home.closest(points, m, max_distance, results, c.params);
    else
      closest_on_devices(devices, mesh.copies<Scalar>(), home, mesh.device, points, m, max_distance,
                         results, c.params);
  } catch (...) {
    out.fill_beyond();
    throw;
  }
  stage.finish();
}

// Sets one field of the caller's report when it lies within
// report->struct_size (an older, shorter struct keeps working).
template <class T>
void set_within(knn_deviation_report* report, T knn_deviation_report::*field, T value) {
  const size_t end = static_cast<size_t>(reinterpret_cast<const char*>(&(report->*field)) -
                                         reinterpret_cast<const char*>(report)) +
                     sizeof(T);
  if (report->struct_size >= end) report->*field = value;
}

void write_report(knn_deviation_report* report, int64_t m, const DeviationSummary& s) {
  using R = knn_deviation_report;
  set_within(report, &R::n_points, m);
  set_within(report, &R::n_measured, s.measured);
  set_within(report, &R::n_beyond, s.beyond);
  set_within(report, &R::n_within_tolerance, s.within_tolerance);
  set_within(report, &R::n_above_tolerance, s.above_tolerance);
  set_within(report, &R::n_below_tolerance, s.below_tolerance);
  set_within(report, &R::n_below_bins, s.below_bins);
  set_within(report, &R::n_above_bins, s.above_bins);
  set_within(report, &R::min, s.min);
  set_within(report, &R::max, s.max);
  set_within(report, &R::mean, s.mean);
  set_within(report, &R::rms, s.rms);
}

// The summary of no measured point: every point beyond, NaN statistics and
// percentiles, empty bins (also what a failed engine run leaves).
DeviationSummary nothing_measured(int64_t m, const DeviationRequest& request,
                                  double* percentile_values, int64_t* bin_counts) {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  DeviationSummary s;
  s.beyond = m;
  s.min = s.max = s.mean = s.rms = nan;
  std::fill(percentile_values, percentile_values + request.n_percentiles, nan);
  std::fill(bin_counts, bin_counts + request.n_bins, int64_t{0});
  return s;
}

// The request's arrays: counts, NULLs, host memory, percentiles in
// [0, 100], edges finite and strictly ascending, tolerance >= 0.
void check_request(const DeviationRequest& r, const double* percentile_values,
                   const int64_t* bin_counts) {
  if (std::isnan(r.tolerance) || r.tolerance < 0)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("tolerance is %g; it must be a non-negative number", r.tolerance));
  check_array(r.percentiles, r.n_percentiles, "percentiles", "n_percentiles");
  check_array(percentile_values, r.n_percentiles, "percentile_values", "n_percentiles");
  check_array(r.bin_edges, r.n_bins, "bin_edges", "n_bins");
  check_array(bin_counts, r.n_bins, "bin_counts", "n_bins");
  check_host_array(r.percentiles, "percentiles");
  check_host_array(percentile_values, "percentile_values");
  check_host_array(r.bin_edges, "bin_edges");
  check_host_array(bin_counts, "bin_counts");
  for (int i = 0; i < r.n_percentiles; ++i)
    if (!(r.percentiles[i] >= 0 && r.percentiles[i] <= 100))
      fail(KNN_ERR_INVALID_ARGUMENT,
           format("percentiles[%d] is %g; percentiles must lie in [0, 100]", i, r.percentiles[i]));
  if (r.n_bins == 0) return;
  for (int64_t b = 0; b <= r.n_bins; ++b) {
    if (!std::isfinite(r.bin_edges[b]))
      fail(KNN_ERR_INVALID_ARGUMENT, format("bin_edges[%lld] is %g; bin edges must be finite",
                                            static_cast<long long>(b), r.bin_edges[b]));
    if (b > 0 && !(r.bin_edges[b] > r.bin_edges[b - 1]))
      fail(KNN_ERR_INVALID_ARGUMENT,
           format("bin_edges[%lld] is %g, not above bin_edges[%lld] = %g; bin edges must be "
                  "strictly ascending",
                  static_cast<long long>(b), r.bin_edges[b], static_cast<long long>(b - 1),
                  r.bin_edges[b - 1]));
  }
}

// The engine's deviation() on the mesh's own device (the summary sorts
// all values together): arrays of another device are staged there whole by
// peer copies.
template <typename Scalar>
void summarise(const knn_mesh& mesh, const Scalar* points, int64_t m, Scalar max_distance,
               const DeviationRequest& request, DeviationSummary* summary, Scalar* signed_distances,
               const MeshParams& params) {
  const MeshEngine<Scalar>& engine = *mesh.engine<Scalar>();
  MeshResults<Scalar> wanted;
  wanted.signed_distances = signed_distances;
  const std::vector<PointArray> arrays = point_arrays(points, wanted);
  if (mesh.backend() != KNN_BACKEND_CUDA || !any_elsewhere(arrays, mesh.device))
    return engine.deviation(points, m, max_distance, request, summary, signed_distances, params);
  PointSplitRules rules;
  rules.whole_shares = true;
  split_points({mesh.device}, mesh.copies<Scalar>().ops(), m, arrays, params.device_memory_limit,
               rules, [&](const PointPiece& piece) {
                 MeshParams share = params;
                 share.device_memory_limit = piece.device_memory_limit;
                 engine.deviation(static_cast<const Scalar*>(piece.arrays[0]), piece.count,
                                  max_distance, request, summary,
                                  static_cast<Scalar*>(piece.arrays[5]), share);
               });
}

template <typename Scalar>
void deviation_report(const char* call, const knn_mesh* handle, const Scalar* points, int64_t m,
                      Scalar max_distance, const DeviationRequest& request,
                      double* percentile_values, int64_t* bin_counts, Scalar* signed_distances,
                      knn_deviation_report* report, const knn_options* opt) {
  const HandleUse<knn_mesh> use = use_mesh<Scalar>(handle, call);
  const knn_mesh& mesh = *use;
  const MeshCall c = read_call(mesh, opt, false);
  check_max_distance(static_cast<double>(max_distance));
  check_request(request, percentile_values, bin_counts);
  if (report == nullptr) fail(KNN_ERR_INVALID_ARGUMENT, "report is NULL");
  check_host_array(report, "report");
  constexpr size_t kLeast = offsetof(knn_deviation_report, n_points) + sizeof(int64_t);
  if (report->struct_size < kLeast)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("report->struct_size is %zu; it must be at least %zu (set it to "
                "sizeof(knn_deviation_report), %zu)",
                report->struct_size, kLeast, sizeof(knn_deviation_report)));
  check_array(points, m, "points", "m");
  check_slots(m, 3, sizeof(Scalar), "m * 3");
  if (m == 0) {
    write_report(report, 0, nothing_measured(0, request, percentile_values, bin_counts));
    return;
  }
  const DeviceScope scope(mesh.device);
  MeshResults<Scalar> wanted;
  wanted.signed_distances = signed_distances;
  const PointOutputs<Scalar> out(wanted, m);
  check_points(mesh, points, m, out.on_device, c.params.threads);
  const ProgressStage stage(KNN_PROGRESS_QUERY, m);
  DeviationSummary summary;
  summary.percentile_values = percentile_values;
  summary.bin_counts = bin_counts;
  try {
    summarise(mesh, points, m, max_distance, request, &summary, signed_distances, c.params);
  } catch (...) {
    out.fill_beyond();
    write_report(report, m, nothing_measured(m, request, percentile_values, bin_counts));
    throw;
  }
  write_report(report, m, summary);
  stage.finish();
}

}  // namespace

template <typename Scalar>
void closest_on_devices(const std::vector<int>& devices,
                        const DeviceCopies<MeshEngine<Scalar>>& copies,
                        const MeshEngine<Scalar>& home, int home_device, const Scalar* points,
                        int64_t m, Scalar max_distance, const MeshResults<Scalar>& results,
                        const MeshParams& params) {
  split_points(devices, copies.ops(), m, point_arrays(points, results), params.device_memory_limit,
               PointSplitRules(), [&](const PointPiece& piece) {
                 const MeshEngine<Scalar>& engine =
                     piece.device == home_device ? home : copies.copy_on(piece.device, 0);
                 MeshParams share = params;
                 share.device_memory_limit = piece.device_memory_limit;
                 engine.closest(static_cast<const Scalar*>(piece.arrays[0]), piece.count,
                                max_distance, results_of<Scalar>(piece.arrays), share);
               });
}

// The float32 calls and their _f64 twins.
template void closest_on_devices(const std::vector<int>&, const DeviceCopies<MeshEngine<float>>&,
                                 const MeshEngine<float>&, int, const float*, int64_t, float,
                                 const MeshResults<float>&, const MeshParams&);
template void closest_on_devices(const std::vector<int>&, const DeviceCopies<MeshEngine<double>>&,
                                 const MeshEngine<double>&, int, const double*, int64_t, double,
                                 const MeshResults<double>&, const MeshParams&);

}  // namespace knn

extern "C" {

// An entry point and its _f64 twin are one definition over the scalar:
// a macro, since an extern "C" function cannot be a template, expanded for
// float and for double (the declarations stay in the public header).
#define KNN_MESH_CLOSEST_ENTRY(name, Scalar)                                                  \
  KNN_API int KNN_CALL name(const knn_mesh* mesh, const Scalar* points, int64_t m,            \
                            Scalar max_distance, int32_t* triangle_ids, Scalar* sq_distances, \
                            Scalar* closest, Scalar* barycentric, const knn_options* opt) {   \
    return knn::guarded_call(                                                                 \
        #name, knn::closest_points<Scalar>, mesh, points, m, max_distance,                    \
        knn::MeshResults<Scalar>{triangle_ids, sq_distances, closest, barycentric, nullptr},  \
        false, opt);                                                                          \
  }
KNN_MESH_CLOSEST_ENTRY(knn_mesh_closest, float)
KNN_MESH_CLOSEST_ENTRY(knn_mesh_closest_f64, double)
#undef KNN_MESH_CLOSEST_ENTRY

#define KNN_MESH_SIGNED_DISTANCE_ENTRY(name, Scalar)                                               \
  KNN_API int KNN_CALL name(const knn_mesh* mesh, const Scalar* points, int64_t m,                 \
                            Scalar max_distance, Scalar* signed_distances, int32_t* triangle_ids,  \
                            const knn_options* opt) {                                              \
    return knn::guarded_call(                                                                      \
        #name, knn::closest_points<Scalar>, mesh, points, m, max_distance,                         \
        knn::MeshResults<Scalar>{triangle_ids, nullptr, nullptr, nullptr, signed_distances}, true, \
        opt);                                                                                      \
  }
KNN_MESH_SIGNED_DISTANCE_ENTRY(knn_mesh_signed_distance, float)
KNN_MESH_SIGNED_DISTANCE_ENTRY(knn_mesh_signed_distance_f64, double)
#undef KNN_MESH_SIGNED_DISTANCE_ENTRY

#define KNN_MESH_DEVIATION_REPORT_ENTRY(name, Scalar)                                              \
  KNN_API int KNN_CALL name(const knn_mesh* mesh, const Scalar* points, int64_t m,                 \
                            Scalar max_distance, double tolerance, const double* percentiles,      \
                            int n_percentiles, double* percentile_values, const double* bin_edges, \
                            int n_bins, int64_t* bin_counts, Scalar* signed_distances,             \
                            knn_deviation_report* report, const knn_options* opt) {                \
    return knn::guarded_call(                                                                      \
        #name, knn::deviation_report<Scalar>, mesh, points, m, max_distance,                       \
        knn::DeviationRequest{tolerance, percentiles, n_percentiles, bin_edges, n_bins},           \
        percentile_values, bin_counts, signed_distances, report, opt);                             \
  }
KNN_MESH_DEVIATION_REPORT_ENTRY(knn_mesh_deviation_report, float)
KNN_MESH_DEVIATION_REPORT_ENTRY(knn_mesh_deviation_report_f64, double)
#undef KNN_MESH_DEVIATION_REPORT_ENTRY

}  // extern "C"
