// The engines behind a knn_mesh (contract section 6). src/mesh_api.cpp
// validates the mesh and the points, computes what every engine shares (the
// closed-and-oriented test, the pseudonormals), picks the backend and calls
// one of these; engines throw knn::Error.
//
// Every engine builds the same BVH (common/geometry/mesh_bvh.h), measures
// with the same triangle distance (common/geometry/triangle.h) and decides
// signs the same way (common/geometry/winding.h), so their answers are
// bit-identical; the deviation summary is defined once as well
// (common/geometry/deviation.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>

#include "../common/geometry/align_terms.h"
#include "builders.h"

namespace knn {

// A validated mesh in host memory, in the build's scalar.
template <typename Scalar>
struct MeshGeometry {
  const Scalar* vertices = nullptr;  // n_vertices x 3, finite, within the coordinate limit
  int64_t n_vertices = 0;
  const int32_t* triangles = nullptr;  // n_triangles x 3 indices into vertices
  int64_t n_triangles = 0;
  // Every edge is shared by exactly two triangles that run it in opposite
  // directions: signs come from the pseudonormals below; otherwise from the
  // generalized winding number.
  bool closed_oriented = false;
  // Closed and oriented meshes only (else NULL), computed in double and
  // rounded to Scalar: the angle-weighted pseudonormal of every vertex
  // (n_vertices x 3) and the pseudonormal of every triangle's edges, the
  // sum of the unit normals of the two triangles sharing it (n_triangles x 9:
  // edge i of triangle t at [9 t + 3 i], edge i running from corner i to
  // corner (i + 1) % 3).
  const Scalar* vertex_normals = nullptr;
  const Scalar* edge_normals = nullptr;
};

struct MeshParams {
  int threads = 0;                 // CPU threads; 0 = all cores
  size_t device_memory_limit = 0;  // 0 = what the device has free
};

// Per-point outputs of a closest-point pass; every pointer but
// triangle_ids may be NULL (not wanted). Host or device arrays for the CUDA
// engine (the caller's, as given), host arrays for the OpenMP engine.
template <typename Scalar>
struct MeshResults {
  int32_t* triangle_ids = nullptr;     // m: the closest triangle, -1 beyond max_distance
  Scalar* sq_distances = nullptr;      // m: +infinity beyond
  Scalar* closest = nullptr;           // m x 3: NaN beyond
  Scalar* barycentric = nullptr;       // m x 3: NaN beyond
  Scalar* signed_distances = nullptr;  // m: sqrt of sq_distance, < 0 inside; +infinity beyond
};

// What a deviation report asks (the report's definitions:
// common/geometry/deviation.h).
struct DeviationRequest {
  double tolerance = 0;                 // >= 0
  const double* percentiles = nullptr;  // n_percentiles values in [0, 100]
  int n_percentiles = 0;
  const double* bin_edges = nullptr;  // n_bins + 1 ascending edges
  int n_bins = 0;
};

// One step of a point-to-plane alignment of m points to the mesh
// (common/geometry/align_terms.h defines the terms, their sums and the
// trimming).
struct AlignStep {
  geometry::AlignFrame frame;
  double max_sq = 0;         // max_correspondence^2 in double; +infinity: every point
  double kept_fraction = 1;  // in (0, 1]; below 1, the threshold is lowered to its rank
};

struct DeviationSummary {
  int64_t measured = 0;  // points within max_distance
  int64_t beyond = 0;    // points beyond it (in no statistic below)
  int64_t within_tolerance = 0, above_tolerance = 0, below_tolerance = 0;
  int64_t below_bins = 0, above_bins = 0;  // measured values outside the bin edges
  double min = 0, max = 0, mean = 0, rms = 0;
  double* percentile_values = nullptr;  // n_percentiles (caller's array)
  int64_t* bin_counts = nullptr;        // n_bins (caller's array)

  // Starts the summary of `values` measured values, before either engine
  // computes it: every count zero and, with none measured, every statistic
  // NaN. Returns whether there is anything to compute.
  bool start(int64_t values, const DeviationRequest& request) {
    measured = values;
    within_tolerance = above_tolerance = below_tolerance = 0;
    below_bins = above_bins = 0;
    std::fill(bin_counts, bin_counts + request.n_bins, int64_t{0});
    if (values > 0) return true;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    min = max = mean = rms = nan;
    std::fill(percentile_values, percentile_values + request.n_percentiles, nan);
    return false;
  }
};

template <typename Scalar>
class MeshEngine {
 public:
  virtual ~MeshEngine() = default;
  virtual int backend() const = 0;  // KNN_BACKEND_CUDA or KNN_BACKEND_OPENMP
  virtual int64_t n_triangles() const = 0;
  // Whether the engine found the mesh closed and oriented (its signs from
  // the pseudonormals; else from the generalized winding number).
  virtual bool closed_oriented() const = 0;
  // The closest triangle of each of m points (m x 3, host or device as
  // MeshResults says) within max_distance (+infinity: no limit).
  virtual void closest(const Scalar* points, int64_t m, Scalar max_distance,
                       const MeshResults<Scalar>& out, const MeshParams& call) const = 0;
  // The signed distances of m points summarised (and, if signed_distances is
  // not NULL, written there as by closest()).
  virtual void deviation(const Scalar* points, int64_t m, Scalar max_distance,
                         const DeviationRequest& request, DeviationSummary* summary,
                         Scalar* signed_distances, const MeshParams& call) const = 0;
  // The normal equations of one alignment step of m points (m x 3, host or
  // device arrays for the CUDA engine, host for the OpenMP one), summed as
  // align_terms.h defines, where the points are searched (on the device for
  // a CUDA mesh: only the sums come back).
  virtual geometry::AlignSums align_step(const Scalar* points, int64_t m, const AlignStep& step,
                                         const MeshParams& call) const = 0;
};

// Each engine's build of a mesh (engine/builders.h).
#define KNN_MESH_BUILDER(Scalar)                                                   \
  std::unique_ptr<MeshEngine<Scalar>> build_mesh(const MeshGeometry<Scalar>& mesh, \
                                                 const MeshParams& params)
namespace omp {
KNN_DECLARE_BUILDER(KNN_MESH_BUILDER);
}  // namespace omp
namespace cuda {
KNN_DECLARE_BUILDER(KNN_MESH_BUILDER);
// Device bytes a build of this size needs at its peak (the mesh resident
// plus the build's scratch, the device preparation's included) for a mesh
// that is, or is not, closed and oriented; _either: the larger, what a
// build that has yet to find out reserves.
size_t mesh_build_bytes(int64_t n_vertices, int64_t n_triangles, size_t scalar_bytes,
                        bool closed_oriented);
size_t mesh_build_bytes_either(int64_t n_vertices, int64_t n_triangles, size_t scalar_bytes);
}  // namespace cuda

}  // namespace knn
