// Entry points of the index API (contract section 3): argument checks with
// precise messages, options, the index handle, and the moves of arrays between
// host and device that an engine on the other side needs. Which backend and
// structure serve an index is the planner's (src/index_planner.*).
//
// Two precisions: knn_index_build makes a float32 index, knn_index_build_f64
// a float64 one, and each call of the _f64 family is its float twin's code
// (one template over the scalar type) on double arrays. A call of the other
// family is refused before it touches anything.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "../cuda/cuda_engine.h"
#include "../cuda/cuda_index.h"
#include "../cuda/index_memory_model.h"
#include "../cuda/peer_copy.h"
#include "../engine/cancel.h"
#include "../engine/progress.h"
#include "abi_barrier.h"
#include "device_arrays.h"
#include "device_choice.h"
#include "device_replicas.h"
#include "device_scope.h"
#include "index_format.h"
#include "index_planner.h"
#include "lazy_kdtree.h"
#include "live_handles.h"
#include "options.h"
#include "validate.h"

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
    if constexpr (std::is_same_v<Scalar, double>)
      return engine64.get();
    else
      return engine32.get();
  }
  template <typename Scalar>
  void set_engine(std::unique_ptr<knn::BasicIndexEngine<Scalar>> e) {
    if constexpr (std::is_same_v<Scalar, double>)
      engine64 = std::move(e);
    else
      engine32 = std::move(e);
  }
  template <typename Scalar>
  const knn::BasicLazyKdTree<Scalar>& lazy_kdtree() const {
    if constexpr (std::is_same_v<Scalar, double>)
      return kdtree64;
    else
      return kdtree32;
  }
  template <typename Scalar>
  const knn::BasicDeviceReplicas<Scalar>& replicas() const {
    if constexpr (std::is_same_v<Scalar, double>)
      return replicas64;
    else
      return replicas32;
  }
  template <typename Scalar>
  knn::BasicDeviceReplicas<Scalar>& replicas() {
    if constexpr (std::is_same_v<Scalar, double>)
      return replicas64;
    else
      return replicas32;
  }
  // The precision-free facts, from whichever engine is set.
  int64_t size() const { return engine64 ? engine64->size() : engine32->size(); }
  int dim() const { return engine64 ? engine64->dim() : engine32->dim(); }
  int backend() const { return engine64 ? engine64->backend() : engine32->backend(); }
  int structure() const { return engine64 ? engine64->structure() : engine32->structure(); }
};

namespace knn {

// Runs inside knn_index_free or at the end of the index's last call in
// flight (src/live_handles.h), on that call's thread.
template <>
void destroy_handle(knn_index* index) noexcept {
  try {
    const DeviceScope scope(index->device);  // the engine frees its memory on its device
    delete index;
    return;
  } catch (...) {
    // The device could not be made current: the memory goes all the same,
    // each device block on the device it came from (give_back_device_block).
  }
  delete index;
}

namespace {

// ---- Arrays on the host or the device --------------------------------------

void check_dim(int dim) {
  if (dim < 1 || dim > kIndexMaxDim)
    fail(KNN_ERR_INVALID_ARGUMENT, format("dim is %d; it must be from 1 to %d", dim, kIndexMaxDim));
}

template <typename Scalar>
std::vector<Scalar> copy_rows_to_host(const Scalar* device_rows, int64_t n, int dim) {
  std::vector<Scalar> host(static_cast<size_t>(n) * static_cast<size_t>(dim));
  if (!host.empty()) cuda::copy_to_host(host.data(), device_rows, host.size() * sizeof(Scalar));
  return host;
}

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
  void fill_missing() const noexcept {
    try {
      if (!on_device) {
        if (indices) std::fill(indices, indices + slots, -1);
        if (sq_distances)
          std::fill(sq_distances, sq_distances + slots, std::numeric_limits<Scalar>::infinity());
        if (counts) std::fill(counts, counts + rows, 0);
        return;
      }
      cuda::fill_missing_on_device(indices, sq_distances, slots);
      if (counts) {
        const std::vector<int32_t> zeros(static_cast<size_t>(std::min<int64_t>(rows, 1 << 20)), 0);
        for (int64_t done = 0; done < rows;) {
          const int64_t part = std::min<int64_t>(rows - done, static_cast<int64_t>(zeros.size()));
          cuda::copy_to_device(counts + done, zeros.data(), static_cast<size_t>(part) * 4);
          done += part;
        }
      }
    } catch (...) {
    }
  }
};

// Runs one call of an engine on the caller's arrays. The CUDA engines take
// every array where it lives; the OpenMP engines get host copies of device
// queries and write device outputs through host buffers. On a failure after
// the engine started, every output slot gets the missing value.
CallParams call_params(const knn_index& index, const knn_options& call_opt) {
  CallParams params;
  params.threads = call_opt.threads > 0 ? call_opt.threads : index.threads;
  params.device_memory_limit =
      call_opt.device_memory_limit > 0 ? call_opt.device_memory_limit : index.device_memory_limit;
  return params;
}

template <typename Scalar>
void run_on_engine(const knn_index& index, const BasicIndexEngine<Scalar>& engine,
                   const Scalar* queries, int64_t m, int row_width, const Outputs<Scalar>& out,
                   const knn_options& call_opt, const BasicShareWork<Scalar>& work) {
  CallParams params = call_params(index, call_opt);
  const bool queries_dev = on_device(queries);
  try {
    if (engine.backend() == KNN_BACKEND_CUDA) {
      params.queries_on_device = queries_dev;
      params.outputs_on_device = out.on_device;
      return work(engine, queries, m, row_width, out.indices, out.sq_distances, out.counts, params);
    }
    std::vector<Scalar> host_queries;
    if (queries_dev) host_queries = copy_rows_to_host(queries, m, index.dim());
    const Scalar* q = queries_dev ? host_queries.data() : queries;
    if (!out.on_device)
      return work(engine, q, m, row_width, out.indices, out.sq_distances, out.counts, params);
    std::vector<int32_t> indices(out.indices ? static_cast<size_t>(out.slots) : 0);
    std::vector<Scalar> sq(out.sq_distances ? static_cast<size_t>(out.slots) : 0);
    std::vector<int32_t> counts(out.counts ? static_cast<size_t>(out.rows) : 0);
    work(engine, q, m, row_width, out.indices ? indices.data() : nullptr,
         out.sq_distances ? sq.data() : nullptr, out.counts ? counts.data() : nullptr, params);
    if (out.indices) cuda::copy_to_device(out.indices, indices.data(), indices.size() * 4);
    if (out.sq_distances)
      cuda::copy_to_device(out.sq_distances, sq.data(), sq.size() * sizeof(Scalar));
    if (out.counts) cuda::copy_to_device(out.counts, counts.data(), counts.size() * 4);
  } catch (...) {
    out.fill_missing();
    throw;
  }
}

// The build options of the index's primary structure (`primary`), or of the
// kd-tree an AUTO index adds: the library's leaf size (the index's leaf_size
// was asked of its primary structure; for a grid it is the cell occupancy),
// on the GPU the one for the long lists that alone reach that kd-tree.
IndexParams build_params(const knn_index& index, bool primary) {
  IndexParams params;
  params.leaf_size = primary ? index.leaf_size
                     : index.backend() == KNN_BACKEND_CUDA
                         ? cuda::kdtree_long_list_leaf_size(index.dim())
                         : 0;
  params.threads = index.threads;
  params.device_memory_limit = index.device_memory_limit;
  return params;
}

// An engine of `structure` on `backend` over a host copy of `source`'s points.
template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> build_from_host_copy(
    const BasicIndexEngine<Scalar>& source, int backend, int structure, const IndexParams& params) {
  std::vector<Scalar> points(static_cast<size_t>(source.size()) *
                             static_cast<size_t>(source.dim()));
  if (!points.empty()) source.copy_points(points.data());
  return build_index_engine(backend, structure, points.data(), source.size(), source.dim(), params);
}

// The engine that serves a call with lists of list_k entries per query
// (src/index_planner.h, serving_structure): the index's own, or for an AUTO
// index the kd-tree it adds, built here on first use from the index's points
// on its backend and device (the caller has made that device current): a
// CUDA index's points go device to device, an OpenMP index's are copied on
// the host. On a failure the outputs get the missing values. A kNN call
// passes its m queries, whose placement may decide (serving_structure).
template <typename Scalar>
const BasicIndexEngine<Scalar>& serving_engine(const knn_index& ix, int list_k, CallKind kind,
                                               const Outputs<Scalar>& out,
                                               const Scalar* queries = nullptr, int64_t m = 0) {
  const BasicIndexEngine<Scalar>& primary = *ix.engine<Scalar>();
  if (!ix.automatic) return primary;
  const int backend = primary.backend(), structure = primary.structure();
  const bool primary_serves = !primary_refuses(backend, structure, ix.size(), list_k);
  try {
    const int serving = structure_serving_call(primary, ix.size(), list_k, kind, queries, m);
    return ix.lazy_kdtree<Scalar>().serving(primary, serving, primary_serves, [&] {
      if (backend == KNN_BACKEND_CUDA)
        return cuda::build_kdtree_index_of(primary, build_params(ix, false));
      return build_from_host_copy(primary, backend, KNN_STRUCTURE_KDTREE, build_params(ix, false));
    });
  } catch (...) {
    out.fill_missing();
    throw;
  }
}

// A CUDA index's call on several devices (src/device_replicas.h), when the
// device choice for m queries names more than the index's own device; false
// when the one-engine path serves it. On a failure once the shares started,
// every output slot gets the missing value.
template <typename Scalar>
bool run_on_devices(const knn_index& index, const BasicIndexEngine<Scalar>& home,
                    const Scalar* queries, int64_t m, const Outputs<Scalar>& out, int row_width,
                    bool exclude_self, const knn_options& call_opt,
                    const BasicShareWork<Scalar>& work) {
  const BasicDeviceReplicas<Scalar>& replicas = index.replicas<Scalar>();
  // Copies of the engine that serves the call: the index's own with its
  // options, or AUTO's kd-tree as serving_engine builds it.
  const BasicCopyBuilder<Scalar> build_copy = [&index, &home](const Scalar* host_points) {
    return build_index_engine(KNN_BACKEND_CUDA, home.structure(), host_points, index.size(),
                              index.dim(), build_params(index, &home == index.engine<Scalar>()));
  };
  std::vector<int> devices = replicas.devices_for_call(home, index.device, call_opt, m, build_copy);
  // One device, but arrays that another device holds: the engine cannot read
  // them in place, so its one share is staged by peer copies.
  const auto elsewhere = [&index](const void* p) {
    const int owner = cuda::device_of(p);
    return owner >= 0 && owner != index.device;
  };
  if (devices.empty() && index.backend() == KNN_BACKEND_CUDA &&
      (elsewhere(queries) || elsewhere(out.indices) || elsewhere(out.sq_distances) ||
       elsewhere(out.counts)))
    devices = {index.device};
  if (devices.empty()) return false;
  BasicSplitCall<Scalar> split;
  split.queries = queries ? queries : replicas.host_points(home);
  split.m = m;
  split.dim = index.dim();
  split.row_width = row_width;
  split.exclude_self = exclude_self;
  split.indices = out.indices;
  split.sq_distances = out.sq_distances;
  split.counts = out.counts;
  split.call = call_params(index, call_opt);
  split.call.queries_on_device = on_device(queries);
  split.call.outputs_on_device = out.on_device;
  try {
    split_over_devices(devices, replicas, home, index.device, split, work);
  } catch (...) {
    out.fill_missing();
    throw;
  }
  return true;
}

// The CPU engine that answers the calls of an index KNN_BACKEND_AUTO put on
// the GPU when its device has no memory for them: the structure the index
// was built with (AUTO: the CPU's own choice), over a host copy of the
// points, built at the call's first need and freed when the call returns.
// A later call tries the device again.
template <typename Scalar>
class CpuFallback {
 public:
  explicit CpuFallback(const knn_index& index) : index_(index) {}

  const BasicIndexEngine<Scalar>& engine() {
    if (!engine_) {
      const BasicIndexEngine<Scalar>& primary = *index_.engine<Scalar>();
      engine_ = build_from_host_copy(primary, KNN_BACKEND_OPENMP,
                                     index_.automatic ? KNN_STRUCTURE_AUTO : primary.structure(),
                                     build_params(index_, true));
    }
    return *engine_;
  }

 private:
  const knn_index& index_;
  std::unique_ptr<BasicIndexEngine<Scalar>> engine_;
};

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
                 const BasicShareWork<Scalar>& whole, CpuFallback<Scalar>& fallback) {
  knn_progress* const stage = progress();
  const int64_t done_before = progress_done(stage);
  try {
    const BasicIndexEngine<Scalar>& engine =
        serving_engine(ix, call.list_k, call.kind, out, call.queries, call.m);
    if (share && run_on_devices(ix, engine, call.queries, call.m, out, call.row_width,
                                call.exclude_self, o, share))
      return;
    return run_on_engine(ix, engine, call.queries, call.m, call.row_width, out, o, whole);
  } catch (const Error& e) {
    if (!ix.cpu_fallback || e.status() != KNN_ERR_DEVICE_OUT_OF_MEMORY) throw;
  }
  const BasicIndexEngine<Scalar>* cpu = nullptr;
  try {
    cpu = &fallback.engine();
  } catch (...) {
    out.fill_missing();  // the device attempt may have failed before it began
    throw;
  }
  // The CPU answers the whole call again: its stage begins again where the
  // device attempt began, so that the units the attempt reported are not
  // counted twice.
  progress_restart(stage, done_before);
  run_on_engine(ix, *cpu, call.queries, call.m, call.row_width, out, o, whole);
}

[[noreturn]] void fail_not_live() {
  fail(KNN_ERR_INVALID_ARGUMENT,
       "index is not a live index (already freed, or not made by knn_index_build, "
       "knn_index_build_f64 or knn_index_deserialize)");
}

// Holds the live index of a call (src/live_handles.h) until the call returns.
HandleUse<knn_index> use_index(const knn_index* index) {
  if (index == nullptr) fail(KNN_ERR_INVALID_ARGUMENT, "index is NULL");
  HandleUse<knn_index> use(index);
  if (!use) fail_not_live();
  return use;
}

template <typename Scalar>
constexpr const char* scalar_name() {
  return std::is_same_v<Scalar, double> ? "float64" : "float32";
}

// Holds the live index of `call`, of precision Scalar; an index of the other
// precision is refused with the name of the call that serves it (the float
// name with "_f64" appended, or the _f64 name without it).
template <typename Scalar>
HandleUse<knn_index> use_index(const knn_index* index, const char* call) {
  HandleUse<knn_index> use = use_index(index);
  if (use->engine<Scalar>() != nullptr) return use;
  const std::string name(call);
  constexpr bool wide = std::is_same_v<Scalar, double>;
  const std::string twin = wide ? name.substr(0, name.size() - 4) : name + "_f64";
  fail(KNN_ERR_INVALID_ARGUMENT,
       format("index holds %s points (built by %s) and %s takes a %s index; call %s instead",
              wide ? "float32" : "float64", wide ? "knn_index_build" : "knn_index_build_f64", call,
              scalar_name<Scalar>(), twin.c_str()));
}

// The options of a call on `ix` (NULL: the defaults), with the device
// environment checked as a GPU host would read it for this index, before
// any output is touched (check_device_environment): KNN_DEVICE_MEMORY_LIMIT
// unless the call or the build set a limit, KNN_DEVICES unless either named
// devices.
knn_options read_call_options(const knn_index& ix, const knn_options* opt) {
  const knn_options o = read_options(opt);
  if (ix.may_use_device)
    check_device_environment(ix.devices_from_environment && o.device_count == 0,
                             o.device_memory_limit == 0 && ix.device_memory_limit == 0);
  return o;
}

// ---- Radius search into CSR rows ---------------------------------------------

// The number of points within the radius of each query (host int32: a
// query's count is at most the index's size), from the engine's counting call.
template <typename Scalar>
std::vector<int32_t> radius_counts(const knn_index& ix, const Scalar* queries, int64_t m,
                                   Scalar radius, const knn_options& o) {
  std::vector<int32_t> counts(static_cast<size_t>(m));
  const Outputs<Scalar> out(nullptr, nullptr, counts.data(), 0, m);
  const ProgressStage stage(KNN_PROGRESS_QUERY, m);
  const BasicShareWork<Scalar> share = [&](const BasicIndexEngine<Scalar>& e, const Scalar* q,
                                           int64_t count, int, int32_t*, Scalar*, int32_t* c,
                                           const CallParams& call) {
    e.radius(q, count, radius, 0, nullptr, nullptr, c, call);
  };
  CpuFallback<Scalar> fallback(ix);
  answer_call(ix, CallShape<Scalar>{queries, m, 0, 0, CallKind::Radius, false}, out, o, share,
              share, fallback);
  stage.finish();
  return counts;
}

// Queries are staged in runs whose padded rows (run length x longest row)
// stay within this many slots, or one query when its row alone is longer.
constexpr int64_t kCsrStagingSlots = int64_t{1} << 22;

// Fills the CSR rows of queries [0, m) from the engine's fixed-row radius
// call: each run of queries gets rows as wide as its longest one, in host
// staging, which are then packed to offsets[first] .. offsets[last) of the
// caller's arrays (host, or device by one copy per run). counts are the
// recount the offsets were checked against, so every row fits exactly.
template <typename Scalar>
void fill_radius_rows(const knn_index& ix, const Scalar* queries, int64_t m, Scalar radius,
                      const std::vector<int32_t>& counts, const std::vector<int64_t>& offsets,
                      int32_t* indices, Scalar* sq_distances, bool outputs_on_device,
                      const knn_options& o) {
  const int dim = ix.dim();
  const ProgressStage stage(KNN_PROGRESS_QUERY, m);
  std::vector<int32_t> rows_index, packed_index;
  std::vector<Scalar> rows_sq, packed_sq;
  const BasicShareWork<Scalar> rows = [&](const BasicIndexEngine<Scalar>& e, const Scalar* q,
                                          int64_t count, int width, int32_t* i, Scalar* d, int32_t*,
                                          const CallParams& call) {
    e.radius(q, count, radius, width, i, d, nullptr, call);
  };
  CpuFallback<Scalar> fallback(ix);
  for (int64_t first = 0; first < m;) {
    int64_t last = first + 1;
    int64_t width = counts[static_cast<size_t>(first)];
    while (last < m) {
      const int64_t wider = std::max<int64_t>(width, counts[static_cast<size_t>(last)]);
      if ((last + 1 - first) * wider > kCsrStagingSlots) break;
      width = wider;
      ++last;
    }
    const int64_t run = last - first, begin = offsets[static_cast<size_t>(first)];
    const int64_t total = offsets[static_cast<size_t>(last)] - begin;
    if (total > 0) {
      const size_t slots = static_cast<size_t>(run * width);
      rows_index.resize(slots);
      if (sq_distances) rows_sq.resize(slots);
      const Outputs<Scalar> staged(rows_index.data(), sq_distances ? rows_sq.data() : nullptr,
                                   nullptr, run * width, run);
      const int row_width = static_cast<int>(width);
      answer_call(ix,
                  CallShape<Scalar>{queries + first * dim, run, row_width, row_width,
                                    CallKind::Radius, false},
                  staged, o, BasicShareWork<Scalar>(), rows, fallback);
      int32_t* index_dst = indices + begin;
      Scalar* sq_dst = sq_distances ? sq_distances + begin : nullptr;
      if (outputs_on_device) {
        packed_index.resize(static_cast<size_t>(total));
        index_dst = packed_index.data();
        if (sq_distances) {
          packed_sq.resize(static_cast<size_t>(total));
          sq_dst = packed_sq.data();
        }
      }
      for (int64_t r = 0; r < run; ++r) {
        const size_t from = static_cast<size_t>(r * width);
        const int64_t to = offsets[static_cast<size_t>(first + r)] - begin;
        const int64_t len = counts[static_cast<size_t>(first + r)];
        std::copy_n(rows_index.data() + from, len, index_dst + to);
        if (sq_dst) std::copy_n(rows_sq.data() + from, len, sq_dst + to);
      }
      if (outputs_on_device) {
        cuda::copy_to_device(indices + begin, packed_index.data(), static_cast<size_t>(total) * 4);
        if (sq_distances)
          cuda::copy_to_device(sq_distances + begin, packed_sq.data(),
                               static_cast<size_t>(total) * sizeof(Scalar));
      }
    } else {
      progress_add(stage.get(), run);  // rows of nothing: no engine call reports them
    }
    first = last;
  }
  stage.finish();
}

// An int64 array of `count` entries from host or device memory, on the host.
std::vector<int64_t> host_int64s(const int64_t* values, int64_t count) {
  if (!on_device(values)) return std::vector<int64_t>(values, values + count);
  std::vector<int64_t> host(static_cast<size_t>(count));
  cuda::copy_to_host(host.data(), values, host.size() * sizeof(int64_t));
  return host;
}

void check_radius(double radius) {
  if (std::isnan(radius) || radius < 0)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("radius is %g; it must be a non-negative number", radius));
}

// ---- Build ------------------------------------------------------------------

template <typename Scalar>
knn_index* build(const Scalar* points, int64_t n, int dim, const knn_options* opt) {
  const knn_options o = read_options(opt);
  check_array(points, n, "points", "n");
  if (n > INT32_MAX)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("n is %lld; an index holds at most 2147483647 points (indices are int32)",
                static_cast<long long>(n)));
  check_dim(dim);
  if (o.structure == KNN_STRUCTURE_GRID && dim != 3)
    fail(KNN_ERR_UNSUPPORTED,
         format("structure KNN_STRUCTURE_GRID needs dim 3, dim is %d; use KNN_STRUCTURE_KDTREE "
                "or KNN_STRUCTURE_AUTO",
                dim));
  const int devices = o.backend == KNN_BACKEND_OPENMP ? 0 : cuda::device_count();
  check_device_number(o.device, devices);
  check_device_list(o, devices);
  const bool may_use_device = o.backend != KNN_BACKEND_OPENMP;
  const bool devices_from_environment = o.device < 0 && o.device_count == 0;
  if (may_use_device)
    check_device_environment(devices_from_environment, o.device_memory_limit == 0);
  DeviceScope scope(devices > 0 ? o.device : -1);
  const bool points_dev = on_device(points);
  check_coordinate_rows(points, n, dim, points_dev, "point", o.threads);

  const ProgressStage stage(KNN_PROGRESS_BUILD, 1);  // the CPU kd-tree counts its levels
  IndexParams params;
  params.leaf_size = o.leaf_size;
  params.threads = o.threads;
  params.device_memory_limit = o.device_memory_limit;
  constexpr int scalar = std::is_same_v<Scalar, double> ? KNN_SCALAR_FLOAT64 : KNN_SCALAR_FLOAT32;
  std::unique_ptr<BasicIndexEngine<Scalar>> engine;
  const int backend =
      resolve_backend(o.backend, n, dim, o.structure, o.device_memory_limit, scalar);
  if (backend == KNN_BACKEND_CUDA) {
    params.points_on_device = points_dev;
    try {
      engine = build_index_engine(KNN_BACKEND_CUDA, o.structure, points, n, dim, params);
    } catch (const Error& e) {
      // An automatic choice that the device cannot serve after all goes to the CPU.
      const bool recoverable =
          e.status() == KNN_ERR_DEVICE_OUT_OF_MEMORY || e.status() == KNN_ERR_UNSUPPORTED;
      if (o.backend != KNN_BACKEND_AUTO || !recoverable) throw;
    }
  }
  if (!engine) {
    params.points_on_device = false;
    std::vector<Scalar> host_points;
    if (points_dev) host_points = copy_rows_to_host(points, n, dim);
    engine = build_index_engine(KNN_BACKEND_OPENMP, o.structure,
                                points_dev ? host_points.data() : points, n, dim, params);
  }
  auto index = std::make_unique<knn_index>();
  index->device = engine->backend() == KNN_BACKEND_CUDA ? cuda::current_device() : -1;
  index->set_engine(std::move(engine));
  index->threads = o.threads;
  index->device_memory_limit = o.device_memory_limit;
  index->leaf_size = o.leaf_size;
  index->automatic = o.structure == KNN_STRUCTURE_AUTO;
  index->cpu_fallback = o.backend == KNN_BACKEND_AUTO && index->device >= 0;
  index->may_use_device = may_use_device;
  index->devices_from_environment = devices_from_environment;
  index->replicas<Scalar>().remember_build(o);
  LiveHandles<knn_index>::instance().add(index.get());
  stage.finish();
  return index.release();
}

// ---- The calls, one template each over the scalar type ------------------------
// `call` is the entry point's name (messages, and the twin a refusal names).

template <typename Scalar>
void query(const char* call, const knn_index* index, const Scalar* queries, int64_t m, int k,
           int32_t* indices, Scalar* sq_distances, const knn_options* opt) {
  const HandleUse<knn_index> use = use_index<Scalar>(index, call);
  const knn_index& ix = *use;
  const knn_options o = read_call_options(ix, opt);
  check_array(queries, m, "queries", "m");
  check_k(k);
  check_array(indices, m, "indices", "m");
  check_slots(m, k, sizeof(Scalar), "m * k");
  check_slots(m, ix.dim(), sizeof(Scalar), "m * dim");
  if (m == 0) return;
  DeviceScope scope(ix.device);
  const Outputs<Scalar> out(indices, sq_distances, nullptr, m * k, m);
  check_coordinate_rows(queries, m, ix.dim(), on_device(queries), "query",
                        call_params(ix, o).threads);
  const ProgressStage stage(KNN_PROGRESS_QUERY, m);
  const BasicShareWork<Scalar> share =
      [&](const BasicIndexEngine<Scalar>& e, const Scalar* q, int64_t count, int width, int32_t* i,
          Scalar* d, int32_t*, const CallParams& params) { e.knn(q, count, width, i, d, params); };
  CpuFallback<Scalar> fallback(ix);
  answer_call(ix, CallShape<Scalar>{queries, m, k, k, CallKind::Nearest, false}, out, o, share,
              share, fallback);
  stage.finish();
}

template <typename Scalar>
void query_self(const char* call, const knn_index* index, int k, int exclude_self, int32_t* indices,
                Scalar* sq_distances) {
  const HandleUse<knn_index> use = use_index<Scalar>(index, call);
  const knn_index& ix = *use;
  const knn_options defaults = read_call_options(ix, nullptr);
  check_k(k);
  const int64_t n = ix.size();
  check_array(indices, n, "indices", "the index's point count");
  check_slots(n, k, sizeof(Scalar), "n * k (the index's points times k)");
  if (n == 0) return;
  DeviceScope scope(ix.device);
  const Outputs<Scalar> out(indices, sq_distances, nullptr, n * k, n);
  const ProgressStage stage(KNN_PROGRESS_QUERY, n);
  // On several devices each share asks for the kNN of its points' rows.
  const BasicShareWork<Scalar> share =
      [&](const BasicIndexEngine<Scalar>& e, const Scalar* q, int64_t count, int width, int32_t* i,
          Scalar* d, int32_t*, const CallParams& params) { e.knn(q, count, width, i, d, params); };
  const Scalar* const no_queries = nullptr;  // the index's own points
  // The engine keeps k + 1 per row where it drops the point itself.
  const int list_k = exclude_self != 0 && k < INT32_MAX ? k + 1 : k;
  // On one engine, its own all-kNN.
  const BasicShareWork<Scalar> whole =
      [&](const BasicIndexEngine<Scalar>& e, const Scalar*, int64_t, int, int32_t* i, Scalar* d,
          int32_t*, const CallParams& params) { e.knn_self(k, exclude_self != 0, i, d, params); };
  CpuFallback<Scalar> fallback(ix);
  answer_call(ix, CallShape<Scalar>{no_queries, n, k, list_k, CallKind::Nearest, exclude_self != 0},
              out, defaults, share, whole, fallback);
  stage.finish();
}

template <typename Scalar>
void radius(const char* call, const knn_index* index, const Scalar* queries, int64_t m,
            Scalar radius, int max_neighbors, int32_t* indices, Scalar* sq_distances,
            int32_t* counts, const knn_options* opt) {
  const HandleUse<knn_index> use = use_index<Scalar>(index, call);
  const knn_index& ix = *use;
  const knn_options o = read_call_options(ix, opt);
  check_array(queries, m, "queries", "m");
  check_radius(radius);
  if (max_neighbors < 0)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("max_neighbors is %d; it must not be negative", max_neighbors));
  if (max_neighbors == 0) {
    if (m > 0 && counts == nullptr)
      fail(KNN_ERR_INVALID_ARGUMENT,
           "counts is NULL while max_neighbors is 0 (a counting call writes only counts)");
  } else {
    check_array(indices, m, "indices", "m");
  }
  check_slots(m, max_neighbors, sizeof(Scalar), "m * max_neighbors");
  check_slots(m, ix.dim(), sizeof(Scalar), "m * dim");
  if (m == 0) return;
  DeviceScope scope(ix.device);
  int32_t* const rows = max_neighbors > 0 ? indices : nullptr;
  Scalar* const dists = max_neighbors > 0 ? sq_distances : nullptr;
  const Outputs<Scalar> out(rows, dists, counts, m * max_neighbors, m);
  check_coordinate_rows(queries, m, ix.dim(), on_device(queries), "query",
                        call_params(ix, o).threads);
  const ProgressStage stage(KNN_PROGRESS_QUERY, m);
  const BasicShareWork<Scalar> share = [&](const BasicIndexEngine<Scalar>& e, const Scalar* q,
                                           int64_t count, int width, int32_t* i, Scalar* d,
                                           int32_t* c, const CallParams& params) {
    e.radius(q, count, radius, width, i, d, c, params);
  };
  CpuFallback<Scalar> fallback(ix);
  answer_call(ix,
              CallShape<Scalar>{queries, m, max_neighbors, max_neighbors, CallKind::Radius, false},
              out, o, share, share, fallback);
  stage.finish();
}

template <typename Scalar>
void radius_count(const char* call, const knn_index* index, const Scalar* queries, int64_t m,
                  Scalar radius, int64_t* counts, const knn_options* opt) {
  const HandleUse<knn_index> use = use_index<Scalar>(index, call);
  const knn_index& ix = *use;
  const knn_options o = read_call_options(ix, opt);
  check_array(queries, m, "queries", "m");
  check_radius(radius);
  check_array(counts, m, "counts", "m");
  check_slots(m, ix.dim(), sizeof(Scalar), "m * dim");
  check_slots(m, 1, sizeof(int64_t), "m * 1 (the counts)");
  if (m == 0) return;
  DeviceScope scope(ix.device);
  const bool counts_on_device = on_device(counts);
  check_coordinate_rows(queries, m, ix.dim(), on_device(queries), "query",
                        call_params(ix, o).threads);
  std::vector<int64_t> wide;
  try {
    const std::vector<int32_t> found = radius_counts(ix, queries, m, radius, o);
    wide.assign(found.begin(), found.end());
  } catch (...) {
    wide.assign(static_cast<size_t>(m), 0);  // the documented counts after a failure
    try {
      if (counts_on_device)
        cuda::copy_to_device(counts, wide.data(), wide.size() * sizeof(int64_t));
      else
        std::copy(wide.begin(), wide.end(), counts);
    } catch (...) {
    }
    throw;
  }
  if (counts_on_device)
    cuda::copy_to_device(counts, wide.data(), wide.size() * sizeof(int64_t));
  else
    std::copy(wide.begin(), wide.end(), counts);
}

template <typename Scalar>
void radius_fill(const char* call, const knn_index* index, const Scalar* queries, int64_t m,
                 Scalar radius, const int64_t* offsets, int32_t* indices, Scalar* sq_distances,
                 const knn_options* opt) {
  const HandleUse<knn_index> use = use_index<Scalar>(index, call);
  const knn_index& ix = *use;
  const knn_options o = read_call_options(ix, opt);
  check_array(queries, m, "queries", "m");
  check_radius(radius);
  check_slots(m, ix.dim(), sizeof(Scalar), "m * dim");
  check_offsets_size(m, "offsets", "m");
  if (offsets == nullptr) fail(KNN_ERR_INVALID_ARGUMENT, "offsets is NULL");
  if (m == 0) return;
  DeviceScope scope(ix.device);
  const std::vector<int64_t> offs = host_int64s(offsets, m + 1);
  const int64_t total = offs[static_cast<size_t>(m)];
  if (total > 0 && indices == nullptr)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("indices is NULL while offsets[m] is %lld", static_cast<long long>(total)));
  const Outputs<Scalar> out(total > 0 ? indices : nullptr, total > 0 ? sq_distances : nullptr,
                            nullptr, total, 0);
  check_coordinate_rows(queries, m, ix.dim(), on_device(queries), "query",
                        call_params(ix, o).threads);
  const std::vector<int32_t> counts = radius_counts(ix, queries, m, radius, o);
  const std::vector<int64_t> wide(counts.begin(), counts.end());
  check_offsets_match_counts(offs.data(), wide.data(), m, "offsets", "query");
  try {
    fill_radius_rows(ix, queries, m, radius, counts, offs, out.indices, out.sq_distances,
                     out.on_device, o);
  } catch (...) {
    out.fill_missing();
    throw;
  }
}

// ---- Serialization ----------------------------------------------------------

template <typename Scalar>
void serialize(const knn_index& ix, const BasicIndexEngine<Scalar>& engine, unsigned char* buffer) {
  std::vector<Scalar> points(static_cast<size_t>(engine.size()) * engine.dim());
  if (!points.empty()) engine.copy_points(points.data());
  SavedIndex saved;
  saved.n = engine.size();
  saved.dim = engine.dim();
  saved.structure = engine.structure();
  saved.leaf_size = ix.leaf_size;
  saved.scalar = ix.scalar();
  write_serialized_index(saved, points.data(), buffer);
}

// The index of a checked buffer's points (`payload`, unaligned) of precision
// Scalar, rebuilt with the saved structure and leaf size. The format records
// the structure that served, not whether AUTO chose it: a load that asks for
// AUTO (the default) makes the loaded index automatic (its kd-tree, if a call
// wants one, is rebuilt on first use like any AUTO index's).
template <typename Scalar>
knn_index* deserialize(const SavedIndex& saved, const unsigned char* payload, knn_options o) {
  // Copied a run at a time, reading the cancel flag: the load of a large
  // file is a long call too.
  const size_t count = static_cast<size_t>(saved.n) * static_cast<size_t>(saved.dim);
  std::vector<Scalar> points;
  points.reserve(count);
  for_each_run(static_cast<int64_t>(count), cancel_flag(), [&](int64_t begin, int64_t end) {
    points.resize(static_cast<size_t>(end));
    std::memcpy(points.data() + begin, payload + begin * sizeof(Scalar),
                static_cast<size_t>(end - begin) * sizeof(Scalar));
  });
  const bool automatic = o.structure == KNN_STRUCTURE_AUTO;
  o.struct_size = sizeof o;
  o.structure = saved.structure;
  o.leaf_size = saved.leaf_size;
  knn_index* index = build(points.data(), saved.n, saved.dim, &o);
  index->automatic = automatic;  // not yet returned: no other thread sees it
  return index;
}

}  // namespace
}  // namespace knn

extern "C" {

KNN_API int KNN_CALL knn_index_build(const float* points, int64_t n, int dim,
                                     const knn_options* opt, knn_index** out) {
  return knn::guarded("knn_index_build", [&] {
    if (out == nullptr) knn::fail(KNN_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = nullptr;
    *out = knn::build(points, n, dim, opt);
  });
}

KNN_API int KNN_CALL knn_index_build_f64(const double* points, int64_t n, int dim,
                                         const knn_options* opt, knn_index** out) {
  return knn::guarded("knn_index_build_f64", [&] {
    if (out == nullptr) knn::fail(KNN_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = nullptr;
    *out = knn::build(points, n, dim, opt);
  });
}

KNN_API int KNN_CALL knn_index_free(knn_index* index) {
  return knn::guarded("knn_index_free", [&] {
    if (index == nullptr) return;
    if (!knn::LiveHandles<knn_index>::instance().free(index)) knn::fail_not_live();
  });
}

KNN_API int KNN_CALL knn_index_info(const knn_index* index, int64_t* n, int* dim, int* backend,
                                    int* structure) {
  return knn::guarded("knn_index_info", [&] {
    const knn::HandleUse<knn_index> use = knn::use_index(index);
    const knn_index& ix = *use;
    if (n) *n = ix.size();
    if (dim) *dim = ix.dim();
    if (backend) *backend = ix.backend();
    if (structure) *structure = ix.structure();
  });
}

KNN_API int KNN_CALL knn_index_scalar(const knn_index* index, int* scalar) {
  return knn::guarded("knn_index_scalar", [&] {
    const knn::HandleUse<knn_index> use = knn::use_index(index);
    const knn_index& ix = *use;
    if (scalar == nullptr) knn::fail(KNN_ERR_INVALID_ARGUMENT, "scalar is NULL");
    *scalar = ix.scalar();
  });
}

KNN_API int KNN_CALL knn_index_query(const knn_index* index, const float* queries, int64_t m, int k,
                                     int32_t* indices, float* sq_distances,
                                     const knn_options* opt) {
  static const char* const call = "knn_index_query";
  return knn::guarded(call,
                      [&] { knn::query(call, index, queries, m, k, indices, sq_distances, opt); });
}

KNN_API int KNN_CALL knn_index_query_f64(const knn_index* index, const double* queries, int64_t m,
                                         int k, int32_t* indices, double* sq_distances,
                                         const knn_options* opt) {
  static const char* const call = "knn_index_query_f64";
  return knn::guarded(call,
                      [&] { knn::query(call, index, queries, m, k, indices, sq_distances, opt); });
}

KNN_API int KNN_CALL knn_index_query_self(const knn_index* index, int k, int exclude_self,
                                          int32_t* indices, float* sq_distances) {
  static const char* const call = "knn_index_query_self";
  return knn::guarded(
      call, [&] { knn::query_self(call, index, k, exclude_self, indices, sq_distances); });
}

KNN_API int KNN_CALL knn_index_query_self_f64(const knn_index* index, int k, int exclude_self,
                                              int32_t* indices, double* sq_distances) {
  static const char* const call = "knn_index_query_self_f64";
  return knn::guarded(
      call, [&] { knn::query_self(call, index, k, exclude_self, indices, sq_distances); });
}

KNN_API int KNN_CALL knn_index_radius(const knn_index* index, const float* queries, int64_t m,
                                      float radius, int max_neighbors, int32_t* indices,
                                      float* sq_distances, int32_t* counts,
                                      const knn_options* opt) {
  static const char* const call = "knn_index_radius";
  return knn::guarded(call, [&] {
    knn::radius(call, index, queries, m, radius, max_neighbors, indices, sq_distances, counts, opt);
  });
}

KNN_API int KNN_CALL knn_index_radius_f64(const knn_index* index, const double* queries, int64_t m,
                                          double radius, int max_neighbors, int32_t* indices,
                                          double* sq_distances, int32_t* counts,
                                          const knn_options* opt) {
  static const char* const call = "knn_index_radius_f64";
  return knn::guarded(call, [&] {
    knn::radius(call, index, queries, m, radius, max_neighbors, indices, sq_distances, counts, opt);
  });
}

KNN_API int KNN_CALL knn_index_radius_count(const knn_index* index, const float* queries, int64_t m,
                                            float radius, int64_t* counts, const knn_options* opt) {
  static const char* const call = "knn_index_radius_count";
  return knn::guarded(call,
                      [&] { knn::radius_count(call, index, queries, m, radius, counts, opt); });
}

KNN_API int KNN_CALL knn_index_radius_count_f64(const knn_index* index, const double* queries,
                                                int64_t m, double radius, int64_t* counts,
                                                const knn_options* opt) {
  static const char* const call = "knn_index_radius_count_f64";
  return knn::guarded(call,
                      [&] { knn::radius_count(call, index, queries, m, radius, counts, opt); });
}

KNN_API int KNN_CALL knn_offsets_from_counts(const int64_t* counts, int64_t m, int64_t* offsets) {
  return knn::guarded("knn_offsets_from_counts", [&] {
    knn::check_array(counts, m, "counts", "m");
    knn::check_offsets_size(m, "offsets", "m");
    if (offsets == nullptr) knn::fail(KNN_ERR_INVALID_ARGUMENT, "offsets is NULL");
    // Checked in full before the first write: a refused call leaves offsets untouched.
    int64_t total = 0;
    for (int64_t i = 0; i < m; ++i) {
      if (counts[i] < 0)
        knn::fail(KNN_ERR_INVALID_ARGUMENT,
                  knn::format("counts[%lld] is %lld; counts must not be negative",
                              static_cast<long long>(i), static_cast<long long>(counts[i])));
      if (counts[i] > INT64_MAX - total)
        knn::fail(KNN_ERR_INVALID_ARGUMENT,
                  knn::format("the counts up to counts[%lld] sum beyond INT64_MAX",
                              static_cast<long long>(i)));
      total += counts[i];
    }
    offsets[0] = 0;
    for (int64_t i = 0; i < m; ++i) offsets[i + 1] = offsets[i] + counts[i];
  });
}

KNN_API int KNN_CALL knn_index_radius_fill(const knn_index* index, const float* queries, int64_t m,
                                           float radius, const int64_t* offsets, int32_t* indices,
                                           float* sq_distances, const knn_options* opt) {
  static const char* const call = "knn_index_radius_fill";
  return knn::guarded(call, [&] {
    knn::radius_fill(call, index, queries, m, radius, offsets, indices, sq_distances, opt);
  });
}

KNN_API int KNN_CALL knn_index_radius_fill_f64(const knn_index* index, const double* queries,
                                               int64_t m, double radius, const int64_t* offsets,
                                               int32_t* indices, double* sq_distances,
                                               const knn_options* opt) {
  static const char* const call = "knn_index_radius_fill_f64";
  return knn::guarded(call, [&] {
    knn::radius_fill(call, index, queries, m, radius, offsets, indices, sq_distances, opt);
  });
}

KNN_API int KNN_CALL knn_index_serialized_size(const knn_index* index, size_t* bytes) {
  return knn::guarded("knn_index_serialized_size", [&] {
    const knn::HandleUse<knn_index> use = knn::use_index(index);
    const knn_index& ix = *use;
    if (bytes == nullptr) knn::fail(KNN_ERR_INVALID_ARGUMENT, "bytes is NULL");
    *bytes = knn::serialized_index_bytes(ix.size(), ix.dim(), ix.scalar());
  });
}

KNN_API int KNN_CALL knn_index_serialize(const knn_index* index, void* buffer, size_t bytes) {
  return knn::guarded("knn_index_serialize", [&] {
    const knn::HandleUse<knn_index> use = knn::use_index(index);
    const knn_index& ix = *use;
    const size_t needed = knn::serialized_index_bytes(ix.size(), ix.dim(), ix.scalar());
    if (buffer == nullptr) knn::fail(KNN_ERR_INVALID_ARGUMENT, "buffer is NULL");
    if (bytes < needed)
      knn::fail(KNN_ERR_INVALID_ARGUMENT,
                knn::format("buffer holds %zu bytes; this index serializes to %zu "
                            "(knn_index_serialized_size)",
                            bytes, needed));
    knn::DeviceScope scope(ix.device);
    unsigned char* const out = static_cast<unsigned char*>(buffer);
    if (ix.engine64)
      knn::serialize(ix, *ix.engine64, out);
    else
      knn::serialize(ix, *ix.engine32, out);
  });
}

KNN_API int KNN_CALL knn_index_deserialize(const void* buffer, size_t bytes, const knn_options* opt,
                                           knn_index** out) {
  return knn::guarded("knn_index_deserialize", [&] {
    if (out == nullptr) knn::fail(KNN_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = nullptr;
    const knn_options o = knn::read_options(opt);
    // NULL with 0 bytes is an empty buffer: refused below as truncated.
    if (buffer == nullptr && bytes > 0)
      knn::fail(KNN_ERR_INVALID_ARGUMENT, knn::format("buffer is NULL while bytes is %zu", bytes));
    // Refused before the header is read: no buffer is that large.
    if (bytes > static_cast<size_t>(PTRDIFF_MAX))
      knn::fail(KNN_ERR_INVALID_ARGUMENT,
                knn::format("bytes is %zu; no buffer holds more than %lld bytes", bytes,
                            static_cast<long long>(PTRDIFF_MAX)));
    const unsigned char* payload = nullptr;
    const knn::SavedIndex saved =
        knn::read_serialized_index(static_cast<const unsigned char*>(buffer), bytes, &payload);
    *out = saved.scalar == KNN_SCALAR_FLOAT64 ? knn::deserialize<double>(saved, payload, o)
                                              : knn::deserialize<float>(saved, payload, o);
  });
}

// Estimates: the device model of the structure asked for (AUTO: the largest
// the planner may pick). An estimate has no status to report bad options
// with, so a structure field that is absent or out of range counts as AUTO.
namespace {
int estimate_structure(const knn_options* opt) {
  if (opt == nullptr || opt->struct_size < offsetof(knn_options, structure) + sizeof(int))
    return KNN_STRUCTURE_AUTO;
  const int s = opt->structure;
  return s >= KNN_STRUCTURE_AUTO && s <= KNN_STRUCTURE_BRUTE_FORCE ? s : KNN_STRUCTURE_AUTO;
}

// Sizes no index serves, or whose byte counts would not fit a size_t, need
// more than any device has: SIZE_MAX keeps the estimates non-decreasing and
// keeps the arithmetic below from overflowing (found by fuzz/fuzz_api_args).
bool beyond_any_index(int64_t n, int dim) { return n > INT32_MAX || dim > KNN_INDEX_MAX_DIM; }
bool query_bytes_overflow(int64_t m, int k, int dim) {
  // Generous per-query bound: rows of k indices and distances (twice, for
  // staging and sorting), the query, and scratch; 64x slack (float64 rows at
  // most double it, and the float64 figures saturate on their own).
  const long double per_query = (static_cast<long double>(k) + dim + 64) * 64;
  return static_cast<long double>(m) * per_query > static_cast<long double>(SIZE_MAX) / 2;
}

size_t estimate_build(int64_t n, int dim, const knn_options* opt, int scalar) {
  if (n < 0 || dim < 1) return 0;
  if (beyond_any_index(n, dim)) return SIZE_MAX;
  return knn::device_build_bytes(estimate_structure(opt), n, dim, scalar);
}

size_t estimate_query(int64_t m, int k, int64_t n, int dim, const knn_options* opt, int scalar) {
  if (m < 0 || k < 1 || n < 0 || dim < 1) return 0;
  if (beyond_any_index(n, dim) || query_bytes_overflow(m, k, dim)) return SIZE_MAX;
  return knn::device_query_bytes(estimate_structure(opt), m, k, n, dim, scalar);
}
}  // namespace

KNN_API size_t KNN_CALL knn_estimate_build_bytes(int64_t n, int dim, const knn_options* opt) {
  return estimate_build(n, dim, opt, KNN_SCALAR_FLOAT32);
}

KNN_API size_t KNN_CALL knn_estimate_build_bytes_f64(int64_t n, int dim, const knn_options* opt) {
  return estimate_build(n, dim, opt, KNN_SCALAR_FLOAT64);
}

KNN_API size_t KNN_CALL knn_estimate_query_bytes(int64_t m, int k, int64_t n, int dim,
                                                 const knn_options* opt) {
  return estimate_query(m, k, n, dim, opt, KNN_SCALAR_FLOAT32);
}

KNN_API size_t KNN_CALL knn_estimate_query_bytes_f64(int64_t m, int k, int64_t n, int dim,
                                                     const knn_options* opt) {
  return estimate_query(m, k, n, dim, opt, KNN_SCALAR_FLOAT64);
}

}  // extern "C"
