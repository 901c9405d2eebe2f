// Entry points of the index API (contract section 3). The resident index
// engines are not part of this release yet: the calls validate what they can
// and answer KNN_ERR_UNSUPPORTED, never a silent success.
#include <cstring>

#include "../cuda/memory_model.h"
#include "abi_barrier.h"

namespace knn {
namespace {
[[noreturn]] void index_engine_missing() {
  fail(KNN_ERR_UNSUPPORTED,
       "the resident index engine (kd-tree, grid, brute force in any dimension) is not in this "
       "release; use the classic 3-D API (buildKdTree/queryAll) or knn_brute_force");
}
}  // namespace
}  // namespace knn

extern "C" {

KNN_API void KNN_CALL knn_options_init(knn_options* opt) {
  if (opt == nullptr) return;
  std::memset(opt, 0, sizeof *opt);
  opt->struct_size = sizeof *opt;
  opt->backend = KNN_BACKEND_AUTO;
  opt->device = -1;
  opt->structure = KNN_STRUCTURE_AUTO;
}

KNN_API int KNN_CALL knn_index_build(const float*, int64_t, int, const knn_options*,
                                     knn_index** out) {
  return knn::guarded("knn_index_build", [&] {
    if (out != nullptr) *out = nullptr;
    knn::index_engine_missing();
  });
}

KNN_API int KNN_CALL knn_index_free(knn_index* index) {
  return knn::guarded("knn_index_free", [&] {
    if (index != nullptr)
      knn::fail(KNN_ERR_INVALID_ARGUMENT, "not an index made by knn_index_build");
  });
}

KNN_API int KNN_CALL knn_index_info(const knn_index*, int64_t*, int*, int*, int*) {
  return knn::guarded("knn_index_info", [] { knn::index_engine_missing(); });
}

KNN_API int KNN_CALL knn_index_query(const knn_index*, const float*, int64_t, int, int32_t*,
                                     float*, const knn_options*) {
  return knn::guarded("knn_index_query", [] { knn::index_engine_missing(); });
}

KNN_API int KNN_CALL knn_index_query_self(const knn_index*, int, int, int32_t*, float*) {
  return knn::guarded("knn_index_query_self", [] { knn::index_engine_missing(); });
}

KNN_API int KNN_CALL knn_index_radius(const knn_index*, const float*, int64_t, float, int,
                                      int32_t*, float*, int32_t*, const knn_options*) {
  return knn::guarded("knn_index_radius", [] { knn::index_engine_missing(); });
}

// Estimates for the planned device index: the points (twice: input order and
// bucket order), one box per bucket, sort scratch, and per query the query,
// its result rows and its sort keys; exact byte counts (so they grow with
// every size) plus the allocator pages the buffers may round up to.
namespace {
constexpr size_t kIndexBuffers = 8;
size_t index_bytes(int64_t n, int dim) {
  const size_t un = static_cast<size_t>(n), ud = static_cast<size_t>(dim);
  return 2 * un * ud * 4 + un * 8 * 4 + un * 16 + knn::cuda::kCubTempBase;
}
}  // namespace

KNN_API size_t KNN_CALL knn_estimate_build_bytes(int64_t n, int dim, const knn_options*) {
  if (n < 0 || dim < 1) return 0;
  return index_bytes(n, dim) + kIndexBuffers * knn::cuda::kAllocAlignment;
}

KNN_API size_t KNN_CALL knn_estimate_query_bytes(int64_t m, int k, int64_t n, int dim,
                                                 const knn_options*) {
  if (m < 0 || k < 1 || n < 0 || dim < 1) return 0;
  const size_t um = static_cast<size_t>(m);
  const size_t per_query = static_cast<size_t>(dim) * 4 + static_cast<size_t>(k) * 8 + 16;
  return index_bytes(n, dim) + um * per_query + 2 * kIndexBuffers * knn::cuda::kAllocAlignment;
}

}  // extern "C"
