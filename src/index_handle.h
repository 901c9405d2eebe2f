// The handle behind knn_index* and what every file of the index API shares
// about it: the device scope of a call, holding a live index, the call's
// options. src/index_api.cpp (build and the calls), src/index_calls.cpp (the
// path of one call to its engines) and src/index_serialize.cpp (the saved
// format) include it.
#pragma once

#include <memory>
#include <type_traits>

#include "../engine/index_engine.h"
#include "device_replicas.h"
#include "device_scope.h"
#include "lazy_kdtree.h"
#include "live_handles.h"

// The handle behind knn_index*; live ones are registered in
// LiveHandles<knn_index> (src/live_handles.h).
struct knn_index {
  // Exactly one is set: the float32 engine (knn_index_build) or the float64
  // one (knn_index_build_f64).
  std::unique_ptr<knn::IndexEngine> engine32;
  std::unique_ptr<knn::IndexEngine64> engine64;
  int device = -1;  // the CUDA device of a CUDA engine; -1 for the CPU
  int threads = 0;  // the build's options, defaults of every call
  size_t device_memory_limit = 0;
  int leaf_size = 0;  // as asked (0: the engine's default); serialization saves it
  // Built with KNN_STRUCTURE_AUTO (or loaded asking for it): the engine is
  // the primary structure, and calls it serves worse or not at all are
  // served by a kd-tree the index adds on first use (src/lazy_kdtree.h).
  bool automatic = false;
  // Put on the GPU by KNN_BACKEND_AUTO: a call the device has no memory for
  // is answered on the CPU instead (answer_call).
  bool cpu_fallback = false;
  // Built with a backend other than OPENMP: its calls check the device
  // environment as a GPU host would read it (read_call_options), KNN_DEVICES
  // only when the build named no device and no device list.
  bool may_use_device = false;
  bool devices_from_environment = false;
  knn::BasicLazyKdTree<float> kdtree32;
  knn::BasicLazyKdTree<double> kdtree64;
  // Copies on other devices (several devices per call), of the engine's precision.
  knn::DeviceReplicas replicas32;
  knn::BasicDeviceReplicas<double> replicas64;

  int scalar() const { return engine64 ? KNN_SCALAR_FLOAT64 : KNN_SCALAR_FLOAT32; }
  // The engine of precision Scalar, or NULL when the index holds the other.
  template <typename Scalar>
  const knn::BasicIndexEngine<Scalar>* engine() const {
    return of_precision<Scalar>(engine32, engine64).get();
  }
  template <typename Scalar>
  void set_engine(std::unique_ptr<knn::BasicIndexEngine<Scalar>> e) {
    of_precision<Scalar>(engine32, engine64) = std::move(e);
  }
  template <typename Scalar>
  const knn::BasicLazyKdTree<Scalar>& lazy_kdtree() const {
    return of_precision<Scalar>(kdtree32, kdtree64);
  }
  template <typename Scalar>
  const knn::BasicDeviceReplicas<Scalar>& replicas() const {
    return of_precision<Scalar>(replicas32, replicas64);
  }
  template <typename Scalar>
  knn::BasicDeviceReplicas<Scalar>& replicas() {
    return of_precision<Scalar>(replicas32, replicas64);
  }
  // Of a member pair of each precision, the one of precision Scalar.
  template <typename Scalar, typename Float, typename Double>
  static decltype(auto) of_precision(Float& of_float, Double& of_double) {
    if constexpr (std::is_same_v<Scalar, double>)
      return (of_double);
    else
      return (of_float);
  }
  // The precision-free facts, from whichever engine is set.
  int64_t size() const { return engine64 ? engine64->size() : engine32->size(); }
  int dim() const { return engine64 ? engine64->dim() : engine32->dim(); }
  int backend() const { return engine64 ? engine64->backend() : engine32->backend(); }
  int structure() const { return engine64 ? engine64->structure() : engine32->structure(); }
};

namespace knn {

inline constexpr HandleNames kIndexNames{
    "index",
    "index is not a live index (already freed, or not made by knn_index_build, "
    "knn_index_build_f64 or knn_index_deserialize)"};

// Holds the live index of a call (src/live_handles.h) until the call returns.
HandleUse<knn_index> use_index(const knn_index* index);

// Holds the live index of `call`, of precision Scalar; an index of the other
// precision is refused with the name of the call that serves it (the float
// name with "_f64" appended, or the _f64 name without it).
template <typename Scalar>
HandleUse<knn_index> use_index(const knn_index* index, const char* call);

// The options of a call on `ix` (NULL: the defaults), with the device
// environment checked as a GPU host would read it for this index, before
// any output is touched (check_device_environment): KNN_DEVICE_MEMORY_LIMIT
// unless the call or the build set a limit, KNN_DEVICES unless either named
// devices.
knn_options read_call_options(const knn_index& ix, const knn_options* opt);

// The index of n points of dim scalars (knn_index_build, knn_index_build_f64,
// and the load of a saved index), registered live.
template <typename Scalar>
knn_index* build_index(const Scalar* points, int64_t n, int dim, const knn_options* opt);

}  // namespace knn
