// Entry points of point-in-polygon over a quadtree (contract section 4). The
// quadtree engines are not part of this release yet: the calls answer
// KNN_ERR_UNSUPPORTED, never a silent success.
#include "abi_barrier.h"

namespace knn {
namespace {
[[noreturn]] void quadtree_engine_missing() {
  fail(KNN_ERR_UNSUPPORTED, "the point-in-polygon quadtree engine is not in this release");
}
}  // namespace
}  // namespace knn

extern "C" {

KNN_API int KNN_CALL knn_quadtree_build(const float*, int64_t, const knn_options*,
                                        knn_quadtree** out) {
  return knn::guarded("knn_quadtree_build", [&] {
    if (out != nullptr) *out = nullptr;
    knn::quadtree_engine_missing();
  });
}

KNN_API int KNN_CALL knn_quadtree_free(knn_quadtree* tree) {
  return knn::guarded("knn_quadtree_free", [&] {
    if (tree != nullptr)
      knn::fail(KNN_ERR_INVALID_ARGUMENT, "not a quadtree made by knn_quadtree_build");
  });
}

KNN_API int KNN_CALL knn_points_in_polygons_count(const knn_quadtree*, const float*,
                                                  const int64_t*, int64_t, const int64_t*,
                                                  int64_t, int64_t*, const knn_options*) {
  return knn::guarded("knn_points_in_polygons_count", [] { knn::quadtree_engine_missing(); });
}

KNN_API int KNN_CALL knn_points_in_polygons(const knn_quadtree*, const float*, const int64_t*,
                                            int64_t, const int64_t*, int64_t, const int64_t*,
                                            int64_t*, const knn_options*) {
  return knn::guarded("knn_points_in_polygons", [] { knn::quadtree_engine_missing(); });
}

}  // extern "C"
