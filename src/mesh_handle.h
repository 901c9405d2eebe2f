// The mesh handle (knn_mesh) and what every entry point of meshes does
// with it: hold the live mesh of a call, read the call's options, check
// host arrays and points. Shared by src/mesh_api.cpp (which defines
// destroy_handle<knn_mesh>) and src/mesh_align_api.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "../common/error.h"
#include "../engine/mesh_engine.h"
#include "device_arrays.h"
#include "device_choice.h"
#include "live_handles.h"
#include "mesh_prepare.h"
#include "options.h"
#include "validate.h"

// The handle behind knn_mesh*; live ones are registered in
// LiveHandles<knn_mesh> (src/live_handles.h).
struct knn_mesh {
  // Exactly one engine is set, with the host copy of its mesh (serialize
  // writes it): float32 (knn_mesh_build) or float64 (_f64).
  std::unique_ptr<knn::MeshEngine<float>> engine32;
  std::unique_ptr<knn::MeshEngine<double>> engine64;
  knn::PreparedMesh<float> mesh32;
  knn::PreparedMesh<double> mesh64;
  int device = -1;  // the CUDA device of a CUDA engine; -1 for the CPU
  int threads = 0;  // the build's options, defaults of every call
  size_t device_memory_limit = 0;
  // Built with a backend other than OPENMP: its calls check the device
  // environment as a GPU host would read it.
  bool may_use_device = false;

  int scalar() const { return engine64 ? KNN_SCALAR_FLOAT64 : KNN_SCALAR_FLOAT32; }
  int backend() const { return engine64 ? engine64->backend() : engine32->backend(); }
  template <typename Scalar>
  const knn::MeshEngine<Scalar>* engine() const {
    if constexpr (std::is_same_v<Scalar, double>)
      return engine64.get();
    else
      return engine32.get();
  }
  template <typename Scalar>
  knn::PreparedMesh<Scalar>& prepared() {
    if constexpr (std::is_same_v<Scalar, double>)
      return mesh64;
    else
      return mesh32;
  }
  template <typename Scalar>
  const knn::PreparedMesh<Scalar>& prepared() const {
    if constexpr (std::is_same_v<Scalar, double>)
      return mesh64;
    else
      return mesh32;
  }
  template <typename Scalar>
  void set_engine(std::unique_ptr<knn::MeshEngine<Scalar>> e) {
    if constexpr (std::is_same_v<Scalar, double>)
      engine64 = std::move(e);
    else
      engine32 = std::move(e);
  }
};

namespace knn {

// src/mesh_api.cpp
template <>
void destroy_handle(knn_mesh* mesh) noexcept;

template <typename Scalar>
constexpr const char* scalar_name() {
  return std::is_same_v<Scalar, double> ? "float64" : "float32";
}

[[noreturn]] inline void fail_not_live() {
  fail(KNN_ERR_INVALID_ARGUMENT,
       "mesh is not a live mesh (already freed, or not made by knn_mesh_build, "
       "knn_mesh_build_f64 or knn_mesh_deserialize)");
}

// Holds the live mesh of a call (src/live_handles.h) until the call returns.
inline HandleUse<knn_mesh> use_mesh(const knn_mesh* mesh) {
  if (mesh == nullptr) fail(KNN_ERR_INVALID_ARGUMENT, "mesh is NULL");
  HandleUse<knn_mesh> use(mesh);
  if (!use) fail_not_live();
  return use;
}

// Holds the live mesh of `call`, of precision Scalar; a mesh of the other
// precision is refused naming the call that serves it.
template <typename Scalar>
HandleUse<knn_mesh> use_mesh(const knn_mesh* mesh, const char* call) {
  HandleUse<knn_mesh> use = use_mesh(mesh);
  if (use->engine<Scalar>() != nullptr) return use;
  const std::string name(call);
  constexpr bool wide = std::is_same_v<Scalar, double>;
  const std::string twin = wide ? name.substr(0, name.size() - 4) : name + "_f64";
  fail(KNN_ERR_INVALID_ARGUMENT,
       format("mesh holds %s vertices (built by %s) and %s takes a %s mesh; call %s instead",
              wide ? "float32" : "float64", wide ? "knn_mesh_build" : "knn_mesh_build_f64", call,
              scalar_name<Scalar>(), twin.c_str()));
}

// The options of a call on `mesh`, with the device environment checked as a
// GPU host would read it: KNN_DEVICE_MEMORY_LIMIT unless the call or the
// build set a limit (one device: KNN_DEVICES is not read).
inline MeshParams call_params(const knn_mesh& mesh, const knn_options* opt) {
  const knn_options o = read_options(opt);
  if (mesh.may_use_device)
    check_device_environment(false, o.device_memory_limit == 0 && mesh.device_memory_limit == 0);
  MeshParams params;
  params.threads = o.threads > 0 ? o.threads : mesh.threads;
  params.device_memory_limit =
      o.device_memory_limit > 0 ? o.device_memory_limit : mesh.device_memory_limit;
  return params;
}

// Arrays the engines never read on the device: refused when they are.
inline void check_host_array(const void* p, const char* name) {
  if (on_device(p))
    fail(KNN_ERR_INVALID_ARGUMENT, format("%s is device memory; it must be host memory", name));
}

// The m points of a call: their placement against the engine's (the OpenMP
// engine takes host arrays only), then every coordinate finite and within
// the limit, wherever they live.
template <typename Scalar>
void check_points(const knn_mesh& mesh, const Scalar* points, int64_t m, bool outputs_on_device,
                  int threads) {
  const bool points_on_device = on_device(points);
  if (mesh.backend() != KNN_BACKEND_CUDA && (points_on_device || outputs_on_device))
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("%s device memory but the mesh is on the OpenMP engine, which takes host arrays "
                "only",
                points_on_device ? "points are" : "the outputs are"));
  check_coordinate_rows(points, m, 3, points_on_device, "point", threads);
}

}  // namespace knn
