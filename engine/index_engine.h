// The engines behind a knn_index (contract section 3). One engine per
// (backend, structure); src/index_api.cpp validates the caller's arguments,
// resolves the options, picks the engine and moves arrays between host and
// device where an engine needs them elsewhere. Engines throw knn::Error.
//
// Every engine returns the same answer for the same call: the k nearest by
// the squared distance of common/float_math.h (squared_distance) in the
// engine's scalar type (float32, or float64 for the _f64 entry points),
// ascending, ties by the smaller index (common/neighbor.h: closer), missing
// slots -1 / +infinity. Radius search keeps the points with squared distance
// <= radius*radius (the product rounded to the scalar type), in the same order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "../common/error.h"
#include "builders.h"

namespace knn {

// Options of a build, resolved (no zeros meaning "default" left).
struct IndexParams {
  int leaf_size = 0;               // kd-tree bucket size / grid target points per cell
  int threads = 0;                 // CPU threads; 0 = all cores
  size_t device_memory_limit = 0;  // 0 = what the device has free
  bool points_on_device = false;   // CUDA engines: `points` is a device pointer
  bool refine_grid = true;         // a poor grid tries finer cells (grid_layout.h "Surfaces")
  bool refuse_curves = false;      // no grid for points on a curve (grid_layout.h "Curves")
};

// Where a call's queries come from when others share them: take() hands out
// the next run of at most max_queries of the call's m queries, [first, first
// + *count), and *count == 0 when none is left. Several engines (one per
// device) and CPU threads may take from one source at the same time, each
// answering the rows of the queries it took (src/query_planner.cpp).
struct QuerySource {
  virtual ~QuerySource() = default;
  virtual int64_t take(int64_t max_queries, int64_t* count) = 0;
};

// Per-call settings. The OpenMP engines are only ever handed host arrays;
// the CUDA engines take each array where the flags say it lives.
struct CallParams {
  int threads = 0;
  size_t device_memory_limit = 0;
  bool queries_on_device = false;
  bool outputs_on_device = false;
  // CUDA engines' kNN calls: answer only the queries taken from here (null:
  // all m of them).
  QuerySource* query_source = nullptr;
};

// The radius bins of knn_index_count_neighbors, as an engine counts into
// them: a point within the search radius of a query goes to the first bin
// whose limit (ascending squared distances, compared in double) holds it,
// or to bin n_bins when none does; each bin counts such pairs and, when
// sums are asked for, adds query_weights[query] * point_weights[point]
// (a NULL weight array: all 1).
struct RadiusBins {
  const double* limits = nullptr;
  int n_bins = 0;
  const double* query_weights = nullptr;
  const double* point_weights = nullptr;
  // The bin of a squared distance.
  int bin_of(double sq_distance) const {
    int lo = 0, hi = n_bins;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (limits[mid] < sq_distance)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo;
  }
};

// The most queries share_of_isolated_queries reads.
constexpr int64_t kPlacementSampleQueries = 4096;

// What identifies an engine: fixed by its build, held once in the base.
struct IndexIdentity {
  int backend;    // KNN_BACKEND_CUDA or KNN_BACKEND_OPENMP
  int structure;  // KNN_STRUCTURE_KDTREE, _GRID or _BRUTE_FORCE
  int64_t n;      // the indexed points
  int dim;
};

template <typename Scalar>
class BasicIndexEngine {
 public:
  virtual ~BasicIndexEngine() = default;
  int backend() const { return identity_.backend; }
  int structure() const { return identity_.structure; }
  int64_t size() const { return identity_.n; }
  int dim() const { return identity_.dim; }

  // Rows of k (64-bit offsets i*k) for m queries of dim scalars each;
  // sq_distances may be NULL. Queries are already checked finite.
  virtual void knn(const Scalar* queries, int64_t m, int k, int32_t* indices, Scalar* sq_distances,
                   const CallParams& call) const = 0;
  // All-kNN of the indexed points, in input order; exclude_self drops only
  // row i's own index i (take k+1, drop i where it appears, else the k+1-th).
  virtual void knn_self(int k, bool exclude_self, int32_t* indices, Scalar* sq_distances,
                        const CallParams& call) const = 0;
  // Rows of max_neighbors (may be 0: counting only); counts[i] the true
  // number within the radius; indices/sq_distances may be NULL when
  // max_neighbors is 0, sq_distances and counts may be NULL otherwise.
  virtual void radius(const Scalar* queries, int64_t m, Scalar radius, int max_neighbors,
                      int32_t* indices, Scalar* sq_distances, int32_t* counts,
                      const CallParams& call) const = 0;
  // The pairs of the m queries and the points within `radius` (the radius
  // predicate), counted into bins (counts: n_bins + 1 entries, sums: the
  // same or NULL, both zeroed by the caller) without rows; false when the
  // engine has no such search (the caller then bins radius rows). Host
  // queries only.
  virtual bool radius_bins(const Scalar* queries, int64_t m, Scalar radius, const RadiusBins& bins,
                           int64_t* counts, double* sums, const CallParams& call) const {
    (void)queries, (void)m, (void)radius, (void)bins, (void)counts, (void)sums, (void)call;
    return false;
  }
  // The pairs (i, j), i < j, of the indexed points within `radius` (the
  // radius predicate), each found once: their number, with pairs (host,
  // 2 * capacity int64; NULL: count only) holding them ordered by i, then j,
  // when they number at most capacity, and untouched otherwise; -1 when the
  // engine has no such search (the caller then reduces radius rows of every
  // point, which finds each pair twice).
  virtual int64_t radius_pairs(Scalar radius, int64_t capacity, int64_t* pairs,
                               const CallParams& call) const {
    (void)radius, (void)capacity, (void)pairs, (void)call;
    return -1;
  }
  // The share of queries that lie where this structure's search grows long:
  // for the 3-D grid, those with at most one indexed point in the 3 x 3 x 3
  // cells around their own (inside a scanned object, far off a surface, an
  // outlier of the points themselves), whose walk of shells may cross most
  // of the grid's empty cells (common/grid_walk.h away_from_points).
  // Estimated from at most kPlacementSampleQueries evenly spaced queries
  // (rows of dim() scalars, where call.queries_on_device says), or, with
  // queries null, of the indexed points themselves (an all-kNN call's
  // queries); 0 for structures whose search does not depend on it.
  virtual double share_of_isolated_queries(const Scalar* queries, int64_t m,
                                           const CallParams& call) const {
    (void)queries, (void)m, (void)call;
    return 0.0;
  }
  // For a grid whose points are stacked at few locations (duplicates,
  // common/grid_layout.h "Stacked points"), found so by a build that refuses
  // curves: the points of a point's own cell on average (itself included);
  // else 0. Lists shorter than that are served better by a kd-tree
  // (src/index_planner.h, serving_structure).
  virtual double stacked_cell_points() const { return 0.0; }
  // The indexed points in input order (size() rows of dim() scalars) into host
  // memory: what serialization saves (the structure is rebuilt on load).
  virtual void copy_points(Scalar* host_rows) const = 0;
  // The same rows into memory of the engine's device, done on return: what
  // the kd-tree an AUTO CUDA index adds at query time is built from, so that
  // the points never pass through host memory. CUDA engines only.
  virtual void copy_points_to_device(Scalar* device_rows) const {
    (void)device_rows;
    fail(KNN_ERR_INTERNAL, "copy_points_to_device asked of an engine without device memory");
  }

 protected:
  explicit BasicIndexEngine(const IndexIdentity& identity) : identity_(identity) {}

 private:
  IndexIdentity identity_;
};

// The float32 engines serve knn_index_build and its calls, the float64 ones
// the _f64 family; both are the same templates.
using IndexEngine = BasicIndexEngine<float>;
using IndexEngine64 = BasicIndexEngine<double>;

// The builders every backend offers (engine/builders.h): the kd-tree and
// the brute force of n points of dim scalars, and the grid (dim == 3 only),
// which returns nullptr when the data would make a poor grid (clustered: the
// caller falls back to the kd-tree and reports that); and the kd-tree of the
// points of `source`, another engine of the same backend.
#define KNN_KDTREE_INDEX_BUILDER(Scalar)                                                        \
  std::unique_ptr<BasicIndexEngine<Scalar>> build_kdtree_index(const Scalar* points, int64_t n, \
                                                               int dim, const IndexParams& params)
#define KNN_BRUTE_FORCE_INDEX_BUILDER(Scalar)                        \
  std::unique_ptr<BasicIndexEngine<Scalar>> build_brute_force_index( \
      const Scalar* points, int64_t n, int dim, const IndexParams& params)
#define KNN_GRID_INDEX_BUILDER(Scalar)                                                        \
  std::unique_ptr<BasicIndexEngine<Scalar>> build_grid_index(const Scalar* points, int64_t n, \
                                                             const IndexParams& params)
#define KNN_KDTREE_INDEX_OF_BUILDER(Scalar)                        \
  std::unique_ptr<BasicIndexEngine<Scalar>> build_kdtree_index_of( \
      const BasicIndexEngine<Scalar>& source, const IndexParams& params)

// Declared in each backend's namespace (omp below, cuda in
// cuda/cuda_index.h).
#define KNN_DECLARE_INDEX_BUILDERS                    \
  KNN_DECLARE_BUILDER(KNN_KDTREE_INDEX_BUILDER);      \
  KNN_DECLARE_BUILDER(KNN_BRUTE_FORCE_INDEX_BUILDER); \
  KNN_DECLARE_BUILDER(KNN_GRID_INDEX_BUILDER)

// The OpenMP engines.
namespace omp {
KNN_DECLARE_INDEX_BUILDERS;
}  // namespace omp

}  // namespace knn
