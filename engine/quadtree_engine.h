// The engines behind a knn_quadtree (contract section 4). src/quadtree_api.cpp
// validates the points and the polygons, picks the backend and calls one of
// these; engines throw knn::Error. Both engines decide "point inside polygon"
// with the same exact predicate (common/pip_predicate.h), so their answers
// are identical.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "builders.h"

namespace knn {

// A validated polygon set in host memory: ring r spans vertices
// [ring_offsets[r], ring_offsets[r+1]) of xy (pairs of V, float or double);
// polygon p spans rings [polygon_offsets[p], polygon_offsets[p+1]); the first
// ring of a polygon is its outer boundary, the others are holes.
template <class V>
struct PolygonSet {
  const V* xy = nullptr;
  int64_t n_vertices = 0;
  const int64_t* ring_offsets = nullptr;  // n_rings + 1
  int64_t n_rings = 0;
  const int64_t* polygon_offsets = nullptr;  // n_polygons + 1
  int64_t n_polygons = 0;
};

struct QuadtreeParams {
  int leaf_capacity = 0;           // points per leaf; 0 = the engine's tuned default
  int threads = 0;                 // CPU threads; 0 = all cores
  size_t device_memory_limit = 0;  // 0 = what the device has free
};

// A tree holds its points as float or double (the build's scalar) and takes
// polygons of either: every engine is one template over the point scalar,
// whose queries are templates over the vertex scalar, and the predicate
// computes a mix in double (pip::Common), exactly.
class QuadtreeEngine {
 public:
  virtual ~QuadtreeEngine() = default;
  virtual int backend() const = 0;  // KNN_BACKEND_CUDA or KNN_BACKEND_OPENMP
  virtual int64_t size() const = 0;
  // counts[p] = number of points inside polygon p.
  virtual void count(const PolygonSet<float>& polygons, int64_t* counts,
                     const QuadtreeParams& call) const = 0;
  virtual void count(const PolygonSet<double>& polygons, int64_t* counts,
                     const QuadtreeParams& call) const = 0;
  // Polygon p's points, ascending, into point_indices[out_offsets[p] ..
  // out_offsets[p+1]); out_offsets already checked against count().
  virtual void fill(const PolygonSet<float>& polygons, const int64_t* out_offsets,
                    int64_t* point_indices, const QuadtreeParams& call) const = 0;
  virtual void fill(const PolygonSet<double>& polygons, const int64_t* out_offsets,
                    int64_t* point_indices, const QuadtreeParams& call) const = 0;
};

// Each engine's build (engine/builders.h) takes float or double points
// (Scalar; double ones within the exact predicate's range, checked by the
// caller).
#define KNN_QUADTREE_BUILDER(Scalar)                                          \
  std::unique_ptr<QuadtreeEngine> build_quadtree(const Scalar* xy, int64_t n, \
                                                 const QuadtreeParams& params)
namespace omp {
KNN_DECLARE_BUILDER(KNN_QUADTREE_BUILDER);
}  // namespace omp
namespace cuda {
KNN_DECLARE_BUILDER(KNN_QUADTREE_BUILDER);
}  // namespace cuda

}  // namespace knn
