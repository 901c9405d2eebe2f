// Entry points of the triangle meshes (contract section 6,
// include/knn_gpgpu_mesh.h) that make, describe, save and free a mesh: the
// checks of the mesh and the options with precise messages, the choice of
// backend, serialization, the estimate. What every engine shares (the
// closed-and-oriented test, the pseudonormals) is src/mesh_prepare.*; the
// format, src/mesh_format.*; the handle, src/mesh_handle.h; the queries,
// src/mesh_queries.cpp.
#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "../common/host_vector.h"
#include "../engine/cancel.h"
#include "../engine/mesh_engine.h"
#include "../engine/progress.h"
#include "abi_barrier.h"
#include "backends.h"
#include "device_arrays.h"
#include "device_choice.h"
#include "device_scope.h"
#include "framing.h"
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

HandleUse<knn_mesh> use_mesh(const knn_mesh* mesh) { return use_live(mesh, kMeshNames); }

void fail_other_precision(const char* call, bool wide) {
  const std::string name(call);
  const std::string twin = wide ? name.substr(0, name.size() - 4) : name + "_f64";
  fail(KNN_ERR_INVALID_ARGUMENT,
       format("mesh holds %s vertices (built by %s) and %s takes a %s mesh; call %s instead",
              wide ? "float32" : "float64", wide ? "knn_mesh_build" : "knn_mesh_build_f64", call,
              wide ? "float64" : "float32", twin.c_str()));
}

void check_host_array(const void* p, const char* name) {
  if (on_device(p))
    fail(KNN_ERR_INVALID_ARGUMENT, format("%s is device memory; it must be host memory", name));
}

namespace {

// ---- Build ------------------------------------------------------------------

// Makes the host copies of a checked mesh and what the engines share
// (prepare_mesh), for a backend that wants the signs or not.
template <typename Scalar>
using Prepare = std::function<PreparedMesh<Scalar>(int threads, bool with_signs)>;

// A mesh of the arrays, checked, then prepared by `prepare`.
template <typename Scalar>
knn_mesh* build_from(const Scalar* vertices, int64_t n_vertices, const int32_t* triangles,
                     int64_t n_triangles, const knn_options* opt, const Prepare<Scalar>& prepare) {
  const knn_options o = read_options(opt);
  check_host_array(vertices, "vertices");
  check_host_array(triangles, "triangles");
  check_mesh(vertices, n_vertices, triangles, n_triangles, o.threads);
  const bool may_use_device = o.backend != KNN_BACKEND_OPENMP;
  const bool devices_from_environment = o.device < 0 && o.device_count == 0;
  if (may_use_device)
    check_device_environment(devices_from_environment, o.device_memory_limit == 0);
  const int backend = choose_one_device_backend(o, "the mesh");

  const ProgressStage stage(KNN_PROGRESS_BUILD, 1);
  auto mesh = std::make_unique<knn_mesh>();
  PreparedMesh<Scalar>& prepared = mesh->prepared<Scalar>();
  prepared = prepare(o.threads, backend == KNN_BACKEND_OPENMP);
  MeshParams params;
  params.threads = o.threads;
  params.device_memory_limit = o.device_memory_limit;
  const Backend& engines = backend_of(backend);
  mesh->set_engine(engines.build_mesh(prepared.geometry(), params));
  // The engine holds the pseudonormals it uses (OpenMP); the handle keeps
  // the input.
  HostVector<Scalar>().swap(prepared.vertex_normals);
  HostVector<Scalar>().swap(prepared.edge_normals);
  mesh->device = engines.current_device();
  mesh->threads = o.threads;
  mesh->device_memory_limit = o.device_memory_limit;
  mesh->may_use_device = may_use_device;
  mesh->devices_from_environment = devices_from_environment;
  mesh->copies32.remember_build(o);
  mesh->copies64.remember_build(o);
  LiveHandles<knn_mesh>::instance().add(mesh.get());
  stage.finish();
  return mesh.release();
}

// A mesh of the caller's arrays, copied once checked.
template <typename Scalar>
knn_mesh* build(const Scalar* vertices, int64_t n_vertices, const int32_t* triangles,
                int64_t n_triangles, const knn_options* opt) {
  return build_from<Scalar>(
      vertices, n_vertices, triangles, n_triangles, opt, [&](int threads, bool with_signs) {
        return prepare_mesh(vertices, n_vertices, triangles, n_triangles, threads, with_signs);
      });
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
// time, reading the cancel flag), built and so validated as any build, which
// takes the copies over: the input is copied once.
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
  HostVector<Scalar> vertices;
  HostVector<int32_t> triangles;
  copy_out(vertices, vertex_bytes, 3 * saved.n_vertices);
  copy_out(triangles, triangle_bytes, 3 * saved.n_triangles);
  return build_from<Scalar>(vertices.data(), saved.n_vertices, triangles.data(), saved.n_triangles,
                            opt, [&](int threads, bool with_signs) {
                              return prepare_mesh(std::move(vertices), std::move(triangles),
                                                  threads, with_signs);
                            });
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

// An entry point and its _f64 twin are one definition over the scalar:
// a macro, since an extern "C" function cannot be a template, expanded for
// float and for double (the declarations stay in the public header).
#define KNN_MESH_BUILD_ENTRY(name, Scalar)                                                        \
  KNN_API int KNN_CALL name(const Scalar* vertices, int64_t n_vertices, const int32_t* triangles, \
                            int64_t n_triangles, const knn_options* opt, knn_mesh** out) {        \
    return knn::guarded(#name, [&] {                                                              \
      knn::clear_out(out);                                                                        \
      *out = knn::build(vertices, n_vertices, triangles, n_triangles, opt);                       \
    });                                                                                           \
  }
KNN_MESH_BUILD_ENTRY(knn_mesh_build, float)
KNN_MESH_BUILD_ENTRY(knn_mesh_build_f64, double)
#undef KNN_MESH_BUILD_ENTRY

KNN_API int KNN_CALL knn_mesh_free(knn_mesh* mesh) {
  return knn::guarded("knn_mesh_free", [&] { knn::free_live(mesh, knn::kMeshNames); });
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
          (use->engine64 ? use->engine64->closed_oriented() : use->engine32->closed_oriented()) ? 1
                                                                                                : 0;
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
    knn::check_serialize_buffer("mesh", buffer, bytes, needed);
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
    knn::clear_out(out);
    knn::read_options(opt);
    knn::check_deserialize_buffer(buffer, bytes);
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
  return knn::device_backend().mesh_build_bytes(n_vertices, n_triangles, knn::scalar_bytes(scalar));
}

}  // extern "C"
