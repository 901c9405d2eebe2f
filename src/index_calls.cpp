// The path of one index call to its engines (src/index_calls.h): the
// arrays on the host or the device, the engine that serves the call, its
// devices, the CPU fallback of an AUTO index, and the radius search into CSR
// rows; then holding a live index and reading a call's options.
#include "index_calls.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "../common/index_leaf_size.h"
#include "../engine/progress.h"
#include "abi_barrier.h"
#include "backends.h"
#include "device_choice.h"
#include "index_planner.h"
#include "options.h"
#include "validate.h"

namespace knn {

// ---- Arrays on the host or the device --------------------------------------

void check_dim(int dim) {
  if (dim < 1 || dim > kIndexMaxDim)
    fail(KNN_ERR_INVALID_ARGUMENT, format("dim is %d; it must be from 1 to %d", dim, kIndexMaxDim));
}

template <typename Scalar>
std::vector<Scalar> copy_rows_to_host(const Scalar* device_rows, int64_t n, int dim) {
  std::vector<Scalar> host(static_cast<size_t>(n) * static_cast<size_t>(dim));
  if (!host.empty())
    device_backend().copy_to_host(host.data(), device_rows, host.size() * sizeof(Scalar));
  return host;
}

template <typename Scalar>
void Outputs<Scalar>::fill_missing() const noexcept {
  try {
    if (on_device) {
      device_backend().fill_missing_on_device(indices, sq_distances, slots);
    } else {
      fill_values(indices, slots, int32_t{-1}, false);
      fill_values(sq_distances, slots, std::numeric_limits<Scalar>::infinity(), false);
    }
    fill_values(counts, rows, int32_t{0}, on_device);
  } catch (...) {
  }
}

CallParams call_params(const knn_index& index, const knn_options& call_opt) {
  CallParams params;
  params.threads = call_opt.threads > 0 ? call_opt.threads : index.threads;
  params.device_memory_limit =
      call_opt.device_memory_limit > 0 ? call_opt.device_memory_limit : index.device_memory_limit;
  return params;
}

namespace {

// Runs one call of an engine on the caller's arrays. The CUDA engines take
// every array where it lives; the OpenMP engines get host copies of device
// queries and write device outputs through host buffers. On a failure after
// the engine started, every output slot gets the missing value.
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
    if (out.indices)
      device_backend().copy_to_device(out.indices, indices.data(), indices.size() * 4);
    if (out.sq_distances)
      device_backend().copy_to_device(out.sq_distances, sq.data(), sq.size() * sizeof(Scalar));
    if (out.counts) device_backend().copy_to_device(out.counts, counts.data(), counts.size() * 4);
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
  params.leaf_size = primary                               ? index.leaf_size
                     : index.backend() == KNN_BACKEND_CUDA ? kdtree_long_list_leaf_size(index.dim())
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
      return backend_of(backend).build_kdtree_index_of(primary, build_params(ix, false));
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
    const int owner = device_backend().device_of(p);
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

template <typename Scalar>
constexpr const char* scalar_name() {
  return std::is_same_v<Scalar, double> ? "float64" : "float32";
}

}  // namespace

template <typename Scalar>
const BasicIndexEngine<Scalar>& CpuFallback<Scalar>::engine() {
  if (!engine_) {
    const BasicIndexEngine<Scalar>& primary = *index_.engine<Scalar>();
    engine_ = build_from_host_copy(primary, KNN_BACKEND_OPENMP,
                                   index_.automatic ? KNN_STRUCTURE_AUTO : primary.structure(),
                                   build_params(index_, true));
  }
  return *engine_;
}

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

  // ---- The live index and a call's options -----------------------------------
}

HandleUse<knn_index> use_index(const knn_index* index) { return use_live(index, kIndexNames); }

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

knn_options read_call_options(const knn_index& ix, const knn_options* opt) {
  const knn_options o = read_options(opt);
  if (ix.may_use_device)
    check_device_environment(ix.devices_from_environment && o.device_count == 0,
                             o.device_memory_limit == 0 && ix.device_memory_limit == 0);
  return o;
}

// ---- Radius search into CSR rows ---------------------------------------------

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

template <typename Scalar>
void fill_radius_rows(const knn_index& ix, const Scalar* queries, int64_t m, Scalar radius,
                      const std::vector<int32_t>& counts, const std::vector<int64_t>& offsets,
                      int32_t* indices, Scalar* sq_distances, bool outputs_on_device,
                      const knn_options& o) {
  const int dim = ix.dim();
  const ProgressStage stage(KNN_PROGRESS_QUERY, m);
  std::vector<int32_t> rows_index, packed_index, found;
  std::vector<Scalar> rows_sq, packed_sq;
  const BasicShareWork<Scalar> rows = [&](const BasicIndexEngine<Scalar>& e, const Scalar* q,
                                          int64_t count, int width, int32_t* i, Scalar* d,
                                          int32_t* c, const CallParams& call) {
    e.radius(q, count, radius, width, i, d, c, call);
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
    // A run of empty rows is still searched (counted): its offsets are
    // checked like any others.
    const size_t slots = static_cast<size_t>(run * width);
    rows_index.resize(slots);
    if (sq_distances) rows_sq.resize(slots);
    found.resize(static_cast<size_t>(run));
    const bool rows_out = total > 0;
    const Outputs<Scalar> staged(rows_out ? rows_index.data() : nullptr,
                                 rows_out && sq_distances ? rows_sq.data() : nullptr, found.data(),
                                 run * width, run);
    const int row_width = static_cast<int>(width);
    answer_call(ix,
                CallShape<Scalar>{queries + first * dim, run, row_width, row_width,
                                  CallKind::Radius, false},
                staged, o, BasicShareWork<Scalar>(), rows, fallback);
    const auto bad = std::mismatch(found.begin(), found.end(), counts.begin() + first);
    if (bad.first != found.end()) {
      // The first row whose search disagrees with the offsets: the entry
      // after it is the first one that differs from the running sum.
      const int64_t row = first + (bad.first - found.begin());
      fail(KNN_ERR_INVALID_ARGUMENT,
           format("offsets[%lld] is %lld but the counts give %lld (offsets[p+1] - offsets[p] "
                  "must be query p's count)",
                  static_cast<long long>(row + 1),
                  static_cast<long long>(offsets[static_cast<size_t>(row + 1)]),
                  static_cast<long long>(offsets[static_cast<size_t>(row)] + *bad.first)));
    }
    if (rows_out) {
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
        device_backend().copy_to_device(indices + begin, packed_index.data(),
                                        static_cast<size_t>(total) * 4);
        if (sq_distances)
          device_backend().copy_to_device(sq_distances + begin, packed_sq.data(),
                                          static_cast<size_t>(total) * sizeof(Scalar));
      }
    }
    first = last;
  }
  stage.finish();
}

std::vector<int64_t> host_int64s(const int64_t* values, int64_t count) {
  if (!on_device(values)) return std::vector<int64_t>(values, values + count);
  std::vector<int64_t> host(static_cast<size_t>(count));
  device_backend().copy_to_host(host.data(), values, host.size() * sizeof(int64_t));
  return host;
}

void check_radius(double radius) {
  if (std::isnan(radius) || radius < 0)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("radius is %g; it must be a non-negative number", radius));
}

template <typename Scalar>
const BasicIndexEngine<Scalar>& self_join_engine(const knn_index& ix) {
  const BasicIndexEngine<Scalar>& primary = *ix.engine<Scalar>();
  const int backend = primary.backend();
  if (!ix.automatic || backend != KNN_BACKEND_OPENMP) return primary;
  return ix.lazy_kdtree<Scalar>().serving(primary, KNN_STRUCTURE_KDTREE, true, [&] {
    return backend_of(backend).build_kdtree_index_of(primary, build_params(ix, false));
  });
}

// Every template of index_calls.h and index_handle.h, for both scalars.
#define KNN_INDEX_CALLS_INSTANTIATE(Scalar)                                                     \
  template std::vector<Scalar> copy_rows_to_host(const Scalar*, int64_t, int);                  \
  template struct Outputs<Scalar>;                                                              \
  template class CpuFallback<Scalar>;                                                           \
  template void answer_call(const knn_index&, const CallShape<Scalar>&, const Outputs<Scalar>&, \
                            const knn_options&, const BasicShareWork<Scalar>&,                  \
                            const BasicShareWork<Scalar>&, CpuFallback<Scalar>&);               \
  template HandleUse<knn_index> use_index<Scalar>(const knn_index*, const char*);               \
  template const BasicIndexEngine<Scalar>& self_join_engine(const knn_index&);                  \
  template std::vector<int32_t> radius_counts(const knn_index&, const Scalar*, int64_t, Scalar, \
                                              const knn_options&);                              \
  template void fill_radius_rows(const knn_index&, const Scalar*, int64_t, Scalar,              \
                                 const std::vector<int32_t>&, const std::vector<int64_t>&,      \
                                 int32_t*, Scalar*, bool, const knn_options&);
KNN_INDEX_CALLS_INSTANTIATE(float)
KNN_INDEX_CALLS_INSTANTIATE(double)
#undef KNN_INDEX_CALLS_INSTANTIATE

}  // namespace knn
