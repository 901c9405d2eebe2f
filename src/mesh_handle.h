// The handle behind knn_mesh* and what every mesh entry point does with it
// (src/mesh_api.cpp: build, free, info, serialization; src/mesh_queries.cpp:
// the query calls; src/mesh_align_api.cpp: the alignment).
//
// Two precisions: knn_mesh_build makes a float32 mesh, _f64 a float64 one;
// each call is one template over the scalar type, and a call of the other
// family is refused before it touches anything.
//
// One device per mesh: a CUDA mesh answers on the device it was built on
// (the header's "every device of the call's device list" is not done yet).
#pragma once

#include <memory>
#include <type_traits>

#include "../common/error.h"
#include "../engine/mesh_engine.h"
#include "../include/knn_gpgpu.h"
#include "device_arrays.h"
#include "device_choice.h"
#include "live_handles.h"
#include "mesh_prepare.h"
#include "options.h"

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

// Defined in src/mesh_api.cpp; declared before any use of
// LiveHandles<knn_mesh> (src/live_handles.h).
template <>
void destroy_handle(knn_mesh* mesh) noexcept;

// Holds the live mesh of a call (src/live_handles.h) until the call returns.
HandleUse<knn_mesh> use_mesh(const knn_mesh* mesh);

// Refuses `call` (a float32 call when `wide`, else a float64 one) on a mesh
// of the other precision, naming the call that serves it.
[[noreturn]] void fail_other_precision(const char* call, bool wide);

// Holds the live mesh of `call`, of precision Scalar.
template <typename Scalar>
HandleUse<knn_mesh> use_mesh(const knn_mesh* mesh, const char* call) {
  HandleUse<knn_mesh> use = use_mesh(mesh);
  if (use->engine<Scalar>() == nullptr) fail_other_precision(call, std::is_same_v<Scalar, double>);
  return use;
}

// Arrays the engines never read on the device: refused when they are.
void check_host_array(const void* p, const char* name);

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
