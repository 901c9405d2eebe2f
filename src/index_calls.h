// The path of one index call to its engines, shared by the entry points of
// src/index_api.cpp: every call kind (kNN, all-kNN, radius rows, radius
// counts, CSR rows) goes through answer_call. Templates over the scalar,
// instantiated for float and double in src/index_calls.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "../common/error.h"
#include "device_arrays.h"
#include "device_replicas.h"
#include "index_handle.h"
#include "index_planner.h"

namespace knn {

// ---- Arrays on the host or the device --------------------------------------

void check_dim(int dim);
template <typename Scalar>
std::vector<Scalar> copy_rows_to_host(const Scalar* device_rows, int64_t n, int dim);

// The engine settings of a call: its own threads and device memory limit,
// else the build's.
CallParams call_params(const knn_index& index, const knn_options& call_opt);

// The output arrays of one call: `slots` entries of indices / sq_distances
// and `rows` counts. Any pointer may be NULL; those given must all be host
// memory or all device memory.
template <typename Scalar>
struct Outputs {
  int32_t* indices = nullptr;
  Scalar* sq_distances = nullptr;
  int32_t* counts = nullptr;
  int64_t slots = 0;
  int64_t rows = 0;
  bool on_device = false;

  Outputs(int32_t* i, Scalar* d, int32_t* c, int64_t s, int64_t r)
      : indices(i), sq_distances(d), counts(c), slots(s), rows(r) {
    const bool i_dev = on_device_or(i), d_dev = on_device_or(d), c_dev = on_device_or(c);
    on_device = i_dev || d_dev || c_dev;
    if ((i && i_dev != on_device) || (d && d_dev != on_device) || (c && c_dev != on_device))
      fail(KNN_ERR_INVALID_ARGUMENT,
           "the output arrays mix host and device memory; pass all of them in one kind");
  }
  static bool on_device_or(const void* p) { return knn::on_device(p); }

  // The "missing" value in every slot, after a failure once computing began.
  // Best effort: the call's status already reports the first failure.
  void fill_missing() const noexcept;
};

// The CPU engine that answers the calls of an index KNN_BACKEND_AUTO put on
// the GPU when its device has no memory for them: the structure the index
// was built with (AUTO: the CPU's own choice), over a host copy of the
// points, built at the call's first need and freed when the call returns.
// A later call tries the device again.
template <typename Scalar>
class CpuFallback {
 public:
  explicit CpuFallback(const knn_index& index) : index_(index) {}

  const BasicIndexEngine<Scalar>& engine();

 private:
  const knn_index& index_;
  std::unique_ptr<BasicIndexEngine<Scalar>> engine_;
};

// What make() makes on a CUDA index's device for one call (the statistics'
// list reducer, the alignment's aligner), or null where an index
// KNN_BACKEND_AUTO put on the GPU has no device memory for it: the caller
// then makes the host backend's, as answer_call then answers on the CPU, to
// the same bits. Any other failure, and any failure of an index placed on
// the GPU by the caller, is thrown.
template <class Make>
auto made_on_device_or_null(const knn_index& ix, Make&& make) -> decltype(make()) {
  try {
    return make();
  } catch (const Error& e) {
    if (!ix.cpu_fallback || e.status() != KNN_ERR_DEVICE_OUT_OF_MEMORY) throw;
  }
  return nullptr;
}

// What one call asks of the index: m queries (null: the index's points) with
// output rows of row_width slots, and the list length and kind by which
// serving_engine picks the structure.
template <typename Scalar>
struct CallShape {
  const Scalar* queries;
  int64_t m;
  int row_width;
  int list_k;
  CallKind kind;
  bool exclude_self;
};

// Answers one call: on the engine that serves it, over the devices the call
// names (run_on_devices, with `share` for each device's part; a null share
// keeps the call on one device) or on that engine alone with `whole`. An
// index KNN_BACKEND_AUTO put on the GPU whose device has no memory for the
// call answers it with `whole` on the CPU (CpuFallback), which writes every
// output; any other failure leaves the missing values and is reported.
template <typename Scalar>
void answer_call(const knn_index& ix, const CallShape<Scalar>& call, const Outputs<Scalar>& out,
                 const knn_options& o, const BasicShareWork<Scalar>& share,
                 const BasicShareWork<Scalar>& whole, CpuFallback<Scalar>& fallback);

// The engine for a search of the index's points against themselves that a
// kd-tree answers best (the pairs within a radius, each found once): the
// index's own, or for an AUTO index on the CPU whose own is another
// structure the kd-tree it adds (src/lazy_kdtree.h: built on first use,
// kept, answering bit-identically); the index's own when none can be built.
template <typename Scalar>
const BasicIndexEngine<Scalar>& self_join_engine(const knn_index& ix);

// ---- Radius search into CSR rows ---------------------------------------------

// The number of points within the radius of each query (host int32: a
// query's count is at most the index's size), from the engine's counting call.
template <typename Scalar>
std::vector<int32_t> radius_counts(const knn_index& ix, const Scalar* queries, int64_t m,
                                   Scalar radius, const knn_options& o);

// Fills the CSR rows of queries [0, m) from the engine's fixed-row radius
// call: each run of queries gets rows as wide as its longest one, in host
// staging, which are then packed to offsets[first] .. offsets[last) of the
// caller's arrays (host, or device by one copy per run). counts are the
// offsets' differences, checked against each run's own counts before it is
// packed: a row that disagrees is INVALID_ARGUMENT naming the first offset
// that differs from the running sum (earlier runs are already written).
template <typename Scalar>
void fill_radius_rows(const knn_index& ix, const Scalar* queries, int64_t m, Scalar radius,
                      const std::vector<int32_t>& counts, const std::vector<int64_t>& offsets,
                      int32_t* indices, Scalar* sq_distances, bool outputs_on_device,
                      const knn_options& o);

// An int64 array of `count` entries from host or device memory, on the host.
std::vector<int64_t> host_int64s(const int64_t* values, int64_t count);

void check_radius(double radius);

}  // namespace knn
