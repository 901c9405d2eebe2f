// Entry points of the triangle meshes (contract section 6,
// include/knn_gpgpu_mesh.h): the handle, the checks of meshes, points and
// options with precise messages, the choice of backend, serialization, and
// the "outputs untouched or fully written" rule around the engines. What
// every engine shares (the closed-and-oriented test, the pseudonormals) is
// src/mesh_prepare.*; the format, src/mesh_format.*.
//
// Two precisions: knn_mesh_build makes a float32 mesh, _f64 a float64 one;
// each call is one template over the scalar type, and a call of the other
// family is refused before it touches anything.
//
// One device per mesh: a CUDA mesh answers on the device it was built on
// (the header's "every device of the call's device list" is not done yet).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "../cuda/cuda_engine.h"
#include "../cuda/peer_copy.h"
#include "../engine/cancel.h"
#include "../engine/mesh_engine.h"
#include "../engine/progress.h"
#include "abi_barrier.h"
#include "device_arrays.h"
#include "device_choice.h"
#include "device_scope.h"
#include "index_format.h"
#include "live_handles.h"
#include "mesh_format.h"
#include "mesh_handle.h"
#include "mesh_prepare.h"
#include "options.h"
#include "validate.h"

namespace knn {

// Runs inside knn_mesh_free or at the end of the mesh's last call in flight
// (src/live_handles.h); the engine frees its memory on its device.
template <>
void destroy_handle(knn_mesh* mesh) noexcept {
  try {
    const DeviceScope scope(mesh->device);
    delete mesh;
    return;
  } catch (...) {
    // The device could not be made current: the memory goes all the same.
  }
  delete mesh;
}

namespace {

void check_max_distance(double max_distance) {
  if (std::isnan(max_distance) || max_distance < 0)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("max_distance is %g; it must be a non-negative number (+infinity: no limit)",
                max_distance));
}

// Writes `count` copies of `value` to a device array, a host piece at a time.
template <class T>
void fill_on_device(T* device_array, int64_t count, T value) {
  const std::vector<T> piece(static_cast<size_t>(std::min<int64_t>(count, 1 << 18)), value);
  for (int64_t done = 0; done < count;) {
    const int64_t part = std::min<int64_t>(count - done, static_cast<int64_t>(piece.size()));
    cuda::copy_to_device(device_array + done, piece.data(), static_cast<size_t>(part) * sizeof(T));
    done += part;
  }
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
      fill(r.triangle_ids, m, int32_t{-1});
      fill(r.sq_distances, m, inf);
      fill(r.closest, 3 * m, nan);
      fill(r.barycentric, 3 * m, nan);
      fill(r.signed_distances, m, inf);
    } catch (...) {
    }
  }

 private:
  template <class T>
  void fill(T* array, int64_t count, T value) const {
    if (array == nullptr) return;
    if (on_device)
      fill_on_device(array, count, value);
    else
      std::fill(array, array + count, value);
  }
};

// ---- Build ------------------------------------------------------------------

template <typename Scalar>
knn_mesh* build(const Scalar* vertices, int64_t n_vertices, const int32_t* triangles,
                int64_t n_triangles, const knn_options* opt) {
  const knn_options o = read_options(opt);
  check_host_array(vertices, "vertices");
  check_host_array(triangles, "triangles");
  check_mesh(vertices, n_vertices, triangles, n_triangles, o.threads);
  const bool may_use_device = o.backend != KNN_BACKEND_OPENMP;
  if (may_use_device) check_device_environment(false, o.device_memory_limit == 0);
  const int backend = choose_one_device_backend(o, "the mesh");

  const ProgressStage stage(KNN_PROGRESS_BUILD, 1);
  auto mesh = std::make_unique<knn_mesh>();
  PreparedMesh<Scalar>& prepared = mesh->prepared<Scalar>();
  prepared = prepare_mesh(vertices, n_vertices, triangles, n_triangles, o.threads);
  MeshParams params;
  params.threads = o.threads;
  params.device_memory_limit = o.device_memory_limit;
  mesh->set_engine(backend == KNN_BACKEND_CUDA ? cuda::build_mesh(prepared.geometry(), params)
                                               : omp::build_mesh(prepared.geometry(), params));
  // The engine holds the pseudonormals it uses; the handle keeps the input.
  std::vector<Scalar>().swap(prepared.vertex_normals);
  std::vector<Scalar>().swap(prepared.edge_normals);
  mesh->device = backend == KNN_BACKEND_CUDA ? cuda::current_device() : -1;
  mesh->threads = o.threads;
  mesh->device_memory_limit = o.device_memory_limit;
  mesh->may_use_device = may_use_device;
  LiveHandles<knn_mesh>::instance().add(mesh.get());
  stage.finish();
  return mesh.release();
}

// ---- Queries ----------------------------------------------------------------
// `call` is the entry point's name (messages, and the twin a refusal names).

// The engine's closest() over m points into `results`: a signed distance
// call requires signed_distances (its triangle ids, when not asked for, go
// to scratch of the outputs' kind), a closest call triangle_ids.
template <typename Scalar>
void closest_points(const char* call, const knn_mesh* handle, const Scalar* points, int64_t m,
                    Scalar max_distance, MeshResults<Scalar> results, bool signed_call,
                    const knn_options* opt) {
  const HandleUse<knn_mesh> use = use_mesh<Scalar>(handle, call);
  const knn_mesh& mesh = *use;
  const MeshParams params = call_params(mesh, opt);
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
  check_points(mesh, points, m, out.on_device, params.threads);
  std::vector<int32_t> host_ids;
  std::unique_ptr<cuda::PeerStaging> device_ids;
  if (results.triangle_ids == nullptr) {
    if (out.on_device) {
      device_ids.reset(new cuda::PeerStaging(sizeof(int32_t) * static_cast<size_t>(m)));
      results.triangle_ids = static_cast<int32_t*>(device_ids->get());
    } else {
      host_ids.resize(static_cast<size_t>(m));
      results.triangle_ids = host_ids.data();
    }
  }
  const ProgressStage stage(KNN_PROGRESS_QUERY, m);
  try {
    mesh.engine<Scalar>()->closest(points, m, max_distance, results, params);
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

template <typename Scalar>
void deviation_report(const char* call, const knn_mesh* handle, const Scalar* points, int64_t m,
                      Scalar max_distance, const DeviationRequest& request,
                      double* percentile_values, int64_t* bin_counts, Scalar* signed_distances,
                      knn_deviation_report* report, const knn_options* opt) {
  const HandleUse<knn_mesh> use = use_mesh<Scalar>(handle, call);
  const knn_mesh& mesh = *use;
  const MeshParams params = call_params(mesh, opt);
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
  check_points(mesh, points, m, out.on_device, params.threads);
  const ProgressStage stage(KNN_PROGRESS_QUERY, m);
  DeviationSummary summary;
  summary.percentile_values = percentile_values;
  summary.bin_counts = bin_counts;
  try {
    mesh.engine<Scalar>()->deviation(points, m, max_distance, request, &summary, signed_distances,
                                     params);
  } catch (...) {
    out.fill_beyond();
    write_report(report, m, nothing_measured(m, request, percentile_values, bin_counts));
    throw;
  }
  write_report(report, m, summary);
  stage.finish();
}

// ---- Serialization ----------------------------------------------------------

SavedMesh saved_of(const knn_mesh& mesh) {
  SavedMesh saved;
  saved.scalar = mesh.scalar();
  saved.n_vertices = mesh.engine64 ? mesh.mesh64.n_vertices() : mesh.mesh32.n_vertices();
  saved.n_triangles = mesh.engine64 ? mesh.mesh64.n_triangles() : mesh.mesh32.n_triangles();
  return saved;
}

// A new mesh of a checked buffer's arrays (unaligned: copied out a run at a
// time, reading the cancel flag), built and so validated as any build.
template <typename Scalar>
knn_mesh* deserialize(const SavedMesh& saved, const unsigned char* vertex_bytes,
                      const unsigned char* triangle_bytes, const knn_options* opt) {
  const auto copy_out = [](auto& into, const unsigned char* from, int64_t count) {
    using T = typename std::remove_reference_t<decltype(into)>::value_type;
    into.reserve(static_cast<size_t>(count));
    for_each_run(count, cancel_flag(), [&](int64_t begin, int64_t end) {
      into.resize(static_cast<size_t>(end));
      std::memcpy(into.data() + begin, from + begin * sizeof(T),
                  static_cast<size_t>(end - begin) * sizeof(T));
    });
  };
  std::vector<Scalar> vertices;
  std::vector<int32_t> triangles;
  copy_out(vertices, vertex_bytes, 3 * saved.n_vertices);
  copy_out(triangles, triangle_bytes, 3 * saved.n_triangles);
  return build(vertices.data(), saved.n_vertices, triangles.data(), saved.n_triangles, opt);
}

// Sizes no mesh has: the estimate says 0.
bool impossible_mesh(int64_t n_vertices, int64_t n_triangles, int scalar) {
  return n_vertices < 1 || n_vertices > INT32_MAX || n_triangles < 1 ||
         n_triangles > KNN_MESH_MAX_TRIANGLES ||
         (scalar != KNN_SCALAR_FLOAT32 && scalar != KNN_SCALAR_FLOAT64);
}

}  // namespace
}  // namespace knn

extern "C" {

KNN_API int KNN_CALL knn_mesh_build(const float* vertices, int64_t n_vertices,
                                    const int32_t* triangles, int64_t n_triangles,
                                    const knn_options* opt, knn_mesh** out) {
  return knn::guarded("knn_mesh_build", [&] {
    if (out == nullptr) knn::fail(KNN_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = nullptr;
    *out = knn::build(vertices, n_vertices, triangles, n_triangles, opt);
  });
}

KNN_API int KNN_CALL knn_mesh_build_f64(const double* vertices, int64_t n_vertices,
                                        const int32_t* triangles, int64_t n_triangles,
                                        const knn_options* opt, knn_mesh** out) {
  return knn::guarded("knn_mesh_build_f64", [&] {
    if (out == nullptr) knn::fail(KNN_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = nullptr;
    *out = knn::build(vertices, n_vertices, triangles, n_triangles, opt);
  });
}

KNN_API int KNN_CALL knn_mesh_free(knn_mesh* mesh) {
  return knn::guarded("knn_mesh_free", [&] {
    if (mesh == nullptr) return;
    if (!knn::LiveHandles<knn_mesh>::instance().free(mesh)) knn::fail_not_live();
  });
}

KNN_API int KNN_CALL knn_mesh_info(const knn_mesh* mesh, int64_t* n_vertices, int64_t* n_triangles,
                                   int* scalar, int* backend, int* closed_oriented) {
  return knn::guarded("knn_mesh_info", [&] {
    const knn::HandleUse<knn_mesh> use = knn::use_mesh(mesh);
    const knn::SavedMesh saved = knn::saved_of(*use);
    if (n_vertices) *n_vertices = saved.n_vertices;
    if (n_triangles) *n_triangles = saved.n_triangles;
    if (scalar) *scalar = saved.scalar;
    if (backend) *backend = use->backend();
    if (closed_oriented)
      *closed_oriented =
          (use->engine64 ? use->mesh64.closed_oriented : use->mesh32.closed_oriented) ? 1 : 0;
  });
}

KNN_API int KNN_CALL knn_mesh_closest(const knn_mesh* mesh, const float* points, int64_t m,
                                      float max_distance, int32_t* triangle_ids,
                                      float* sq_distances, float* closest, float* barycentric,
                                      const knn_options* opt) {
  static const char* const call = "knn_mesh_closest";
  return knn::guarded(call, [&] {
    const knn::MeshResults<float> r{triangle_ids, sq_distances, closest, barycentric, nullptr};
    knn::closest_points(call, mesh, points, m, max_distance, r, false, opt);
  });
}

KNN_API int KNN_CALL knn_mesh_closest_f64(const knn_mesh* mesh, const double* points, int64_t m,
                                          double max_distance, int32_t* triangle_ids,
                                          double* sq_distances, double* closest,
                                          double* barycentric, const knn_options* opt) {
  static const char* const call = "knn_mesh_closest_f64";
  return knn::guarded(call, [&] {
    const knn::MeshResults<double> r{triangle_ids, sq_distances, closest, barycentric, nullptr};
    knn::closest_points(call, mesh, points, m, max_distance, r, false, opt);
  });
}

KNN_API int KNN_CALL knn_mesh_signed_distance(const knn_mesh* mesh, const float* points, int64_t m,
                                              float max_distance, float* signed_distances,
                                              int32_t* triangle_ids, const knn_options* opt) {
  static const char* const call = "knn_mesh_signed_distance";
  return knn::guarded(call, [&] {
    const knn::MeshResults<float> r{triangle_ids, nullptr, nullptr, nullptr, signed_distances};
    knn::closest_points(call, mesh, points, m, max_distance, r, true, opt);
  });
}

KNN_API int KNN_CALL knn_mesh_signed_distance_f64(const knn_mesh* mesh, const double* points,
                                                  int64_t m, double max_distance,
                                                  double* signed_distances, int32_t* triangle_ids,
                                                  const knn_options* opt) {
  static const char* const call = "knn_mesh_signed_distance_f64";
  return knn::guarded(call, [&] {
    const knn::MeshResults<double> r{triangle_ids, nullptr, nullptr, nullptr, signed_distances};
    knn::closest_points(call, mesh, points, m, max_distance, r, true, opt);
  });
}

KNN_API int KNN_CALL knn_mesh_deviation_report(
    const knn_mesh* mesh, const float* points, int64_t m, float max_distance, double tolerance,
    const double* percentiles, int n_percentiles, double* percentile_values,
    const double* bin_edges, int n_bins, int64_t* bin_counts, float* signed_distances,
    knn_deviation_report* report, const knn_options* opt) {
  static const char* const call = "knn_mesh_deviation_report";
  return knn::guarded(call, [&] {
    const knn::DeviationRequest request{tolerance, percentiles, n_percentiles, bin_edges, n_bins};
    knn::deviation_report(call, mesh, points, m, max_distance, request, percentile_values,
                          bin_counts, signed_distances, report, opt);
  });
}

KNN_API int KNN_CALL knn_mesh_deviation_report_f64(
    const knn_mesh* mesh, const double* points, int64_t m, double max_distance, double tolerance,
    const double* percentiles, int n_percentiles, double* percentile_values,
    const double* bin_edges, int n_bins, int64_t* bin_counts, double* signed_distances,
    knn_deviation_report* report, const knn_options* opt) {
  static const char* const call = "knn_mesh_deviation_report_f64";
  return knn::guarded(call, [&] {
    const knn::DeviationRequest request{tolerance, percentiles, n_percentiles, bin_edges, n_bins};
    knn::deviation_report(call, mesh, points, m, max_distance, request, percentile_values,
                          bin_counts, signed_distances, report, opt);
  });
}

KNN_API int KNN_CALL knn_mesh_serialized_size(const knn_mesh* mesh, size_t* bytes) {
  return knn::guarded("knn_mesh_serialized_size", [&] {
    const knn::HandleUse<knn_mesh> use = knn::use_mesh(mesh);
    if (bytes == nullptr) knn::fail(KNN_ERR_INVALID_ARGUMENT, "bytes is NULL");
    *bytes = knn::serialized_mesh_bytes(knn::saved_of(*use));
  });
}

KNN_API int KNN_CALL knn_mesh_serialize(const knn_mesh* mesh, void* buffer, size_t bytes) {
  return knn::guarded("knn_mesh_serialize", [&] {
    const knn::HandleUse<knn_mesh> use = knn::use_mesh(mesh);
    const knn::SavedMesh saved = knn::saved_of(*use);
    const size_t needed = knn::serialized_mesh_bytes(saved);
    if (buffer == nullptr) knn::fail(KNN_ERR_INVALID_ARGUMENT, "buffer is NULL");
    if (bytes < needed)
      knn::fail(KNN_ERR_INVALID_ARGUMENT,
                knn::format("buffer holds %zu bytes; this mesh serializes to %zu "
                            "(knn_mesh_serialized_size)",
                            bytes, needed));
    unsigned char* const out = static_cast<unsigned char*>(buffer);
    if (use->engine64)
      knn::write_serialized_mesh(saved, use->mesh64.vertices.data(), use->mesh64.triangles.data(),
                                 out);
    else
      knn::write_serialized_mesh(saved, use->mesh32.vertices.data(), use->mesh32.triangles.data(),
                                 out);
  });
}

KNN_API int KNN_CALL knn_mesh_deserialize(const void* buffer, size_t bytes, const knn_options* opt,
                                          knn_mesh** out) {
  return knn::guarded("knn_mesh_deserialize", [&] {
    if (out == nullptr) knn::fail(KNN_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = nullptr;
    knn::read_options(opt);
    if (buffer == nullptr && bytes > 0)
      knn::fail(KNN_ERR_INVALID_ARGUMENT, knn::format("buffer is NULL while bytes is %zu", bytes));
    if (bytes > static_cast<size_t>(PTRDIFF_MAX))
      knn::fail(KNN_ERR_INVALID_ARGUMENT,
                knn::format("bytes is %zu; no buffer holds more than %lld bytes", bytes,
                            static_cast<long long>(PTRDIFF_MAX)));
    const unsigned char *vertices = nullptr, *triangles = nullptr;
    const knn::SavedMesh saved = knn::read_serialized_mesh(
        static_cast<const unsigned char*>(buffer), bytes, &vertices, &triangles);
    *out = saved.scalar == KNN_SCALAR_FLOAT64
               ? knn::deserialize<double>(saved, vertices, triangles, opt)
               : knn::deserialize<float>(saved, vertices, triangles, opt);
  });
}

KNN_API size_t KNN_CALL knn_estimate_mesh_bytes(int64_t n_vertices, int64_t n_triangles, int scalar,
                                                const knn_options* opt) {
  static_cast<void>(opt);  // one model for every option (the header's signature keeps it)
  if (knn::impossible_mesh(n_vertices, n_triangles, scalar)) return 0;
  // The larger build, of a closed mesh (its pseudonormals resident too).
  return knn::cuda::mesh_build_bytes(n_vertices, n_triangles, knn::scalar_bytes(scalar), true);
}

}  // extern "C"
