// The handle behind knn_mesh* and what every mesh entry point does with it
// (src/mesh_api.cpp: build, free, info, serialization; src/mesh_queries.cpp:
// the query calls; src/mesh_align_api.cpp: the alignment).
//
// Two precisions: knn_mesh_build makes a float32 mesh, _f64 a float64 one;
// each call is one template over the scalar type, and a call of the other
// family is refused before it touches anything.
//
// A CUDA mesh lives on the device it was built on; its closest-point and
// signed-distance calls also answer on the other devices of the call's
// device list, from copies of its engine built there on first use from the
// host copy kept here (DeviceCopies, src/device_replicas.h).
#pragma once

#include <memory>
#include <type_traits>
#include <vector>

#include "../common/error.h"
#include "../engine/mesh_engine.h"
#include "../include/knn_gpgpu.h"
#include "device_arrays.h"
#include "device_choice.h"
#include "device_replicas.h"
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
  // The build named no device and no device list: a call that names none
  // either reads KNN_DEVICES.
  bool devices_from_environment = false;
  // The engine's copies on other devices (CUDA meshes), freed before it.
  knn::DeviceCopies<knn::MeshEngine<float>> copies32;
  knn::DeviceCopies<knn::MeshEngine<double>> copies64;

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
  const knn::DeviceCopies<knn::MeshEngine<Scalar>>& copies() const {
    if constexpr (std::is_same_v<Scalar, double>)
      return copies64;
    else
      return copies32;
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

inline constexpr HandleNames kMeshNames{
    "mesh",
    "mesh is not a live mesh (already freed, or not made by knn_mesh_build, "
    "knn_mesh_build_f64 or knn_mesh_deserialize)"};

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

// The options of a call on `mesh` and the engine's parameters, with the
// device environment checked as a GPU host would read it, before any output
// is touched: KNN_DEVICE_MEMORY_LIMIT unless the call or the build set a
// limit, KNN_DEVICES (`device_list`: a call that may use several devices)
// unless the call or the build named devices.
struct MeshCall {
  knn_options options;
  MeshParams params;
};
inline MeshCall read_call(const knn_mesh& mesh, const knn_options* opt, bool device_list) {
  MeshCall c{read_options(opt), MeshParams{}};
  const knn_options& o = c.options;
  if (mesh.may_use_device)
    check_device_environment(device_list && mesh.devices_from_environment && o.device_count == 0,
                             o.device_memory_limit == 0 && mesh.device_memory_limit == 0);
  c.params.threads = o.threads > 0 ? o.threads : mesh.threads;
  c.params.device_memory_limit =
      o.device_memory_limit > 0 ? o.device_memory_limit : mesh.device_memory_limit;
  return c;
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

// The closest() of m points over contiguous shares, share s on devices[s]
// (split_points: arrays of another device staged by peer copies), answered
// whole by `home` on home_device and by copies.copy_on(device, 0)
// elsewhere (made beforehand: DeviceCopies::devices_for_call or prepare),
// so that every point's answer is the one engine's. Throws the first
// failure; the caller writes the "beyond" values.
template <typename Scalar>
void closest_on_devices(const std::vector<int>& devices,
                        const DeviceCopies<MeshEngine<Scalar>>& copies,
                        const MeshEngine<Scalar>& home, int home_device, const Scalar* points,
                        int64_t m, Scalar max_distance, const MeshResults<Scalar>& results,
                        const MeshParams& params);

}  // namespace knn
