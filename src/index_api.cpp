// Entry points of the index API (contract section 3): argument checks with
// precise messages, options, the index handle, and the moves of arrays between
// host and device that an engine on the other side needs. Which backend and
// structure serve an index is the planner's (src/index_planner.*).
//
// Two precisions: knn_index_build makes a float32 index, knn_index_build_f64
// a float64 one, and each call of the _f64 family is its float twin's code
// (one template over the scalar type) on double arrays. A call of the other
// family is refused before it touches anything.
//
// This file: build, the calls and their entry points, the estimates; the
// path of a call to its engines is src/index_calls.*, the saved format's
// entry points src/index_serialize.cpp.
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

#include "../engine/cancel.h"
#include "../engine/progress.h"
#include "abi_barrier.h"
#include "backends.h"
#include "device_choice.h"
#include "index_calls.h"
#include "index_handle.h"
#include "index_planner.h"
#include "options.h"
#include "validate.h"

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

// ---- Build ------------------------------------------------------------------

template <typename Scalar>
knn_index* build_index(const Scalar* points, int64_t n, int dim, const knn_options* opt) {
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
  const int devices = o.backend == KNN_BACKEND_OPENMP ? 0 : device_backend().device_count();
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
  index->device = backend_of(engine->backend()).current_device();
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
template knn_index* build_index(const float*, int64_t, int, const knn_options*);
template knn_index* build_index(const double*, int64_t, int, const knn_options*);

namespace {

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
    try_fill_values(counts, m, int64_t{0}, counts_on_device);  // the documented counts
    throw;
  }
  write_values(counts, wide.data(), m, counts_on_device);
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
  // The rows are searched once: their widths come from the offsets, which
  // each run's search then checks. Offsets no search could give (a row
  // negative or beyond the index's size) are refused by a recount before
  // anything is written.
  std::vector<int32_t> counts(static_cast<size_t>(m));
  const int64_t n = ix.size();
  bool plausible = offs[0] == 0;
  for (int64_t i = 0; plausible && i < m; ++i) {
    const int64_t a = offs[static_cast<size_t>(i)], b = offs[static_cast<size_t>(i + 1)];
    plausible = b >= a && b - a <= n;
    if (plausible) counts[static_cast<size_t>(i)] = static_cast<int32_t>(b - a);
  }
  if (!plausible) {
    const std::vector<int32_t> found = radius_counts(ix, queries, m, radius, o);
    const std::vector<int64_t> wide(found.begin(), found.end());
    check_offsets_match_counts(offs.data(), wide.data(), m, "offsets", "query");
  }
  try {
    fill_radius_rows(ix, queries, m, radius, counts, offs, out.indices, out.sq_distances,
                     out.on_device, o);
  } catch (...) {
    out.fill_missing();
    throw;
  }
}

}  // namespace
}  // namespace knn

extern "C" {

// An entry point and its _f64 twin are one definition over the scalar:
// a macro, since an extern "C" function cannot be a template, expanded for
// float and for double (the declarations stay in the public header).
#define KNN_INDEX_BUILD_ENTRY(name, Scalar)                                                   \
  KNN_API int KNN_CALL name(const Scalar* points, int64_t n, int dim, const knn_options* opt, \
                            knn_index** out) {                                                \
    return knn::guarded(#name, [&] {                                                          \
      knn::clear_out(out);                                                                    \
      *out = knn::build_index(points, n, dim, opt);                                           \
    });                                                                                       \
  }
KNN_INDEX_BUILD_ENTRY(knn_index_build, float)
KNN_INDEX_BUILD_ENTRY(knn_index_build_f64, double)
#undef KNN_INDEX_BUILD_ENTRY

KNN_API int KNN_CALL knn_index_free(knn_index* index) {
  return knn::guarded("knn_index_free", [&] { knn::free_live(index, knn::kIndexNames); });
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

#define KNN_INDEX_QUERY_ENTRY(name, Scalar)                                                   \
  KNN_API int KNN_CALL name(const knn_index* index, const Scalar* queries, int64_t m, int k,  \
                            int32_t* indices, Scalar* sq_distances, const knn_options* opt) { \
    return knn::guarded_call(#name, knn::query<Scalar>, index, queries, m, k, indices,        \
                             sq_distances, opt);                                              \
  }
KNN_INDEX_QUERY_ENTRY(knn_index_query, float)
KNN_INDEX_QUERY_ENTRY(knn_index_query_f64, double)
#undef KNN_INDEX_QUERY_ENTRY

#define KNN_INDEX_QUERY_SELF_ENTRY(name, Scalar)                                               \
  KNN_API int KNN_CALL name(const knn_index* index, int k, int exclude_self, int32_t* indices, \
                            Scalar* sq_distances) {                                            \
    return knn::guarded_call(#name, knn::query_self<Scalar>, index, k, exclude_self, indices,  \
                             sq_distances);                                                    \
  }
KNN_INDEX_QUERY_SELF_ENTRY(knn_index_query_self, float)
KNN_INDEX_QUERY_SELF_ENTRY(knn_index_query_self_f64, double)
#undef KNN_INDEX_QUERY_SELF_ENTRY

#define KNN_INDEX_RADIUS_ENTRY(name, Scalar)                                                       \
  KNN_API int KNN_CALL name(const knn_index* index, const Scalar* queries, int64_t m,              \
                            Scalar radius, int max_neighbors, int32_t* indices,                    \
                            Scalar* sq_distances, int32_t* counts, const knn_options* opt) {       \
    return knn::guarded_call(#name, knn::radius<Scalar>, index, queries, m, radius, max_neighbors, \
                             indices, sq_distances, counts, opt);                                  \
  }
KNN_INDEX_RADIUS_ENTRY(knn_index_radius, float)
KNN_INDEX_RADIUS_ENTRY(knn_index_radius_f64, double)
#undef KNN_INDEX_RADIUS_ENTRY

#define KNN_INDEX_RADIUS_COUNT_ENTRY(name, Scalar)                                                \
  KNN_API int KNN_CALL name(const knn_index* index, const Scalar* queries, int64_t m,             \
                            Scalar radius, int64_t* counts, const knn_options* opt) {             \
    return knn::guarded_call(#name, knn::radius_count<Scalar>, index, queries, m, radius, counts, \
                             opt);                                                                \
  }
KNN_INDEX_RADIUS_COUNT_ENTRY(knn_index_radius_count, float)
KNN_INDEX_RADIUS_COUNT_ENTRY(knn_index_radius_count_f64, double)
#undef KNN_INDEX_RADIUS_COUNT_ENTRY

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

#define KNN_INDEX_RADIUS_FILL_ENTRY(name, Scalar)                                                 \
  KNN_API int KNN_CALL name(const knn_index* index, const Scalar* queries, int64_t m,             \
                            Scalar radius, const int64_t* offsets, int32_t* indices,              \
                            Scalar* sq_distances, const knn_options* opt) {                       \
    return knn::guarded_call(#name, knn::radius_fill<Scalar>, index, queries, m, radius, offsets, \
                             indices, sq_distances, opt);                                         \
  }
KNN_INDEX_RADIUS_FILL_ENTRY(knn_index_radius_fill, float)
KNN_INDEX_RADIUS_FILL_ENTRY(knn_index_radius_fill_f64, double)
#undef KNN_INDEX_RADIUS_FILL_ENTRY

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
