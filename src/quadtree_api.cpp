// Entry points of point-in-polygon over a quadtree (contract section 4): the
// handle, the checks of points, polygons and options, the choice of backend,
// and the "outputs untouched or fully written" rule around the engines.
#include <algorithm>
#include <cstddef>
#include <memory>
#include <vector>

#include "../engine/quadtree_engine.h"
#include "abi_barrier.h"
#include "backends.h"
#include "device_choice.h"
#include "device_scope.h"
#include "live_handles.h"
#include "options.h"
#include "polygon_validate.h"
#include "validate.h"

// The handle owns its engine; live ones are registered in
// LiveHandles<knn_quadtree> (src/live_handles.h).
struct knn_quadtree {
  std::unique_ptr<knn::QuadtreeEngine> engine;
  // Built with a backend other than OPENMP: on a GPU host its queries run on
  // the device, so every host checks the device environment they would read.
  bool may_use_device = false;
};

namespace knn {

// Runs inside knn_quadtree_free or at the end of the tree's last call in
// flight (src/live_handles.h); each device block goes back to its own device.
template <>
void destroy_handle(knn_quadtree* tree) noexcept {
  delete tree;
}

namespace {

// Points are numbered in 31 bits inside the engines (sort keys pack
// (cell key, index) into 64 bits); outputs are 64-bit all the same.
constexpr int64_t kMaxPoints = INT32_MAX;

QuadtreeParams params_of(const knn_options& o) {
  QuadtreeParams params;
  params.leaf_capacity = o.leaf_size;
  params.threads = o.threads;
  params.device_memory_limit = o.device_memory_limit;
  return params;
}

constexpr HandleNames kTreeNames{"tree",
                                 "tree is not a live quadtree (already freed, or not made by "
                                 "knn_quadtree_build or knn_quadtree_build_f64)"};

// Holds the live tree of a call (src/live_handles.h) until the call returns.
HandleUse<knn_quadtree> use_tree(const knn_quadtree* tree) { return use_live(tree, kTreeNames); }

// The options of a query on `tree`, with KNN_DEVICE_MEMORY_LIMIT checked as
// a GPU host would read it (check_device_environment): point in polygon
// runs on one device, so KNN_DEVICES is never read.
QuadtreeParams query_params(const knn_quadtree* tree, const knn_options* opt) {
  const knn_options o = read_options(opt);
  if (tree->may_use_device) check_device_environment(false, o.device_memory_limit == 0);
  return params_of(o);
}

// The float and double entry points share these; P is the points' scalar, V
// the vertices' (the engines take any mix).
template <class P>
void build_tree(const P* xy, int64_t n, const knn_options* opt, knn_quadtree** out) {
  clear_out(out);
  check_array(xy, n, "xy", "n");
  if (n > kMaxPoints)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("n is %lld; a quadtree holds at most %lld points", static_cast<long long>(n),
                static_cast<long long>(kMaxPoints)));
  const knn_options o = read_options(opt);
  check_pip_coordinates(xy, n, "point", o.threads);
  const QuadtreeParams params = params_of(o);
  std::unique_ptr<knn_quadtree> tree(new knn_quadtree);
  tree->may_use_device = o.backend != KNN_BACKEND_OPENMP;
  if (tree->may_use_device) check_device_environment(false, o.device_memory_limit == 0);
  tree->engine =
      backend_of(choose_one_device_backend(o, "the quadtree")).build_quadtree(xy, n, params);
  LiveHandles<knn_quadtree>::instance().add(tree.get());
  *out = tree.release();
}

template <class V>
void count_points(const knn_quadtree* tree, const V* vertices_xy, const int64_t* ring_offsets,
                  int64_t n_rings, const int64_t* polygon_offsets, int64_t n_polygons,
                  int64_t* counts, const knn_options* opt) {
  const HandleUse<knn_quadtree> use = use_tree(tree);
  const QuadtreeEngine& engine = *use->engine;
  check_array(counts, n_polygons, "counts", "n_polygons");
  const QuadtreeParams params = query_params(tree, opt);
  const PolygonSet<V> polygons = validate_polygons(vertices_xy, ring_offsets, n_rings,
                                                   polygon_offsets, n_polygons, params.threads);
  try {
    engine.count(polygons, counts, params);
  } catch (...) {
    std::fill(counts, counts + n_polygons, int64_t{0});
    throw;
  }
}

template <class V>
void fill_points(const knn_quadtree* tree, const V* vertices_xy, const int64_t* ring_offsets,
                 int64_t n_rings, const int64_t* polygon_offsets, int64_t n_polygons,
                 const int64_t* out_offsets, int64_t* point_indices, const knn_options* opt) {
  const HandleUse<knn_quadtree> use = use_tree(tree);
  const QuadtreeEngine& engine = *use->engine;
  const QuadtreeParams params = query_params(tree, opt);
  const PolygonSet<V> polygons = validate_polygons(vertices_xy, ring_offsets, n_rings,
                                                   polygon_offsets, n_polygons, params.threads);
  if (n_polygons == 0) return;
  if (out_offsets == nullptr)
    fail(KNN_ERR_INVALID_ARGUMENT, format("out_offsets is NULL while n_polygons is %lld",
                                          static_cast<long long>(n_polygons)));
  std::vector<int64_t> counts(static_cast<size_t>(n_polygons));
  engine.count(polygons, counts.data(), params);
  check_offsets_match_counts(out_offsets, counts.data(), n_polygons, "out_offsets", "polygon");
  const int64_t total = out_offsets[n_polygons];
  if (total > 0 && point_indices == nullptr)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("point_indices is NULL while out_offsets[n_polygons] = %lld",
                static_cast<long long>(total)));
  try {
    engine.fill(polygons, out_offsets, point_indices, params);
  } catch (...) {
    std::fill(point_indices, point_indices + total, int64_t{-1});
    throw;
  }
}

}  // namespace
}  // namespace knn

extern "C" {

// An entry point and its _f64 twin are one definition over the scalar:
// a macro, since an extern "C" function cannot be a template, expanded for
// float and for double (the declarations stay in the public header).
#define KNN_QUADTREE_BUILD_ENTRY(name, Scalar)                                   \
  KNN_API int KNN_CALL name(const Scalar* xy, int64_t n, const knn_options* opt, \
                            knn_quadtree** out) {                                \
    return knn::guarded(#name, [&] { knn::build_tree(xy, n, opt, out); });       \
  }
KNN_QUADTREE_BUILD_ENTRY(knn_quadtree_build, float)
KNN_QUADTREE_BUILD_ENTRY(knn_quadtree_build_f64, double)
#undef KNN_QUADTREE_BUILD_ENTRY

KNN_API int KNN_CALL knn_quadtree_free(knn_quadtree* tree) {
  return knn::guarded("knn_quadtree_free", [&] { knn::free_live(tree, knn::kTreeNames); });
}

#define KNN_POINTS_IN_POLYGONS_COUNT_ENTRY(name, Scalar)                                         \
  KNN_API int KNN_CALL name(const knn_quadtree* tree, const Scalar* vertices_xy,                 \
                            const int64_t* ring_offsets, int64_t n_rings,                        \
                            const int64_t* polygon_offsets, int64_t n_polygons, int64_t* counts, \
                            const knn_options* opt) {                                            \
    return knn::guarded(#name, [&] {                                                             \
      knn::count_points(tree, vertices_xy, ring_offsets, n_rings, polygon_offsets, n_polygons,   \
                        counts, opt);                                                            \
    });                                                                                          \
  }
KNN_POINTS_IN_POLYGONS_COUNT_ENTRY(knn_points_in_polygons_count, float)
KNN_POINTS_IN_POLYGONS_COUNT_ENTRY(knn_points_in_polygons_count_f64, double)
#undef KNN_POINTS_IN_POLYGONS_COUNT_ENTRY

#define KNN_POINTS_IN_POLYGONS_ENTRY(name, Scalar)                                            \
  KNN_API int KNN_CALL name(                                                                  \
      const knn_quadtree* tree, const Scalar* vertices_xy, const int64_t* ring_offsets,       \
      int64_t n_rings, const int64_t* polygon_offsets, int64_t n_polygons,                    \
      const int64_t* out_offsets, int64_t* point_indices, const knn_options* opt) {           \
    return knn::guarded(#name, [&] {                                                          \
      knn::fill_points(tree, vertices_xy, ring_offsets, n_rings, polygon_offsets, n_polygons, \
                       out_offsets, point_indices, opt);                                      \
    });                                                                                       \
  }
KNN_POINTS_IN_POLYGONS_ENTRY(knn_points_in_polygons, float)
KNN_POINTS_IN_POLYGONS_ENTRY(knn_points_in_polygons_f64, double)
#undef KNN_POINTS_IN_POLYGONS_ENTRY

}  // extern "C"
