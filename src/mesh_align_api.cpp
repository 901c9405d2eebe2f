// Entry points of the alignment of a scan to a mesh (contract section 8,
// include/knn_gpgpu_mesh.h "Alignment"): the checks, the ICP loop on the
// host and the coarse start by principal axes. Every iteration's sums come
// from the mesh's engine (engine/mesh_engine.h align_step: the terms of
// common/geometry/align_terms.h, on the device for a CUDA mesh); the 6 x 6
// solve, the update and the stopping rule are host double arithmetic
// (src/align_math.h), the same code whatever the engine, so the same sums
// give the same transform.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>
#include <vector>

#include "../common/error.h"
#include "../engine/cancel.h"
#include "../engine/mesh_engine.h"
#include "abi_barrier.h"
#include "align_fit.h"
#include "backends.h"
#include "device_scope.h"
#include "mesh_handle.h"
#include "validate.h"

namespace knn {
namespace {

// The shared ICP loop (src/align_fit.h).
using namespace align;

template <typename Scalar>
geometry::AlignSums sums_at(const MeshEngine<Scalar>& engine, const Scalar* points, int64_t m,
                            const Motion& motion, const Frame& frame, const Settings& settings,
                            const MeshParams& params) {
  AlignStep step;
  step.frame = align::frame_of(motion, frame);
  step.max_sq = settings.max_sq;
  step.kept_fraction = settings.kept_fraction;
  return engine.align_step(points, m, step, params);
}

// The mesh's surface: centroid and covariance of its area (each triangle's
// exact second moment: area / 12 (a a^T + b b^T + c c^T + s s^T), s = a + b + c).
template <typename Scalar>
Moments surface_moments(const PreparedMesh<Scalar>& mesh) {
  double area = 0;
  Vec3 first{0, 0, 0};
  std::array<double, 9> second{};
  for (int64_t t = 0; t < mesh.n_triangles(); ++t) {
    Vec3 v[3];
    for (int k = 0; k < 3; ++k)
      for (int d = 0; d < 3; ++d)
        v[k][d] = static_cast<double>(mesh.vertices[3 * mesh.triangles[3 * t + k] + d]);
    Vec3 e1, e2;
    for (int d = 0; d < 3; ++d) {
      e1[d] = v[1][d] - v[0][d];
      e2[d] = v[2][d] - v[0][d];
    }
    const Vec3 n = align::cross(e1, e2);
    const double a = 0.5 * std::sqrt(align::dot(n, n));
    Vec3 s;
    for (int d = 0; d < 3; ++d) s[d] = v[0][d] + v[1][d] + v[2][d];
    area += a;
    for (int i = 0; i < 3; ++i) {
      first[i] += a * s[i] / 3.0;
      for (int j = 0; j < 3; ++j)
        second[3 * i + j] +=
            a / 12.0 * (v[0][i] * v[0][j] + v[1][i] * v[1][j] + v[2][i] * v[2][j] + s[i] * s[j]);
    }
  }
  Moments moments;
  if (!(area > 0)) return moments;
  for (int i = 0; i < 3; ++i) moments.centroid[i] = first[i] / area;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      moments.covariance[3 * i + j] =
          second[3 * i + j] / area - moments.centroid[i] * moments.centroid[j];
  return moments;
}

// ---- The call -------------------------------------------------------------------

template <typename Scalar>
Fit align_points(const char* call, const knn_mesh* handle, const Scalar* points, int64_t m,
                 const double* initial, Settings settings, const knn_options* opt) {
  const HandleUse<knn_mesh> use = use_mesh<Scalar>(handle, call);
  const knn_mesh& mesh = *use;
  const MeshParams params = read_call(mesh, opt, false).params;
  const Motion start = initial_motion(initial);
  check_array(points, m, "points", "m");
  check_slots(m, 3, sizeof(Scalar), "m * 3");
  const PreparedMesh<Scalar>& prepared = mesh.prepared<Scalar>();
  const double diagonal = bounding_diagonal(prepared.vertices.data(), prepared.n_vertices());
  settings.default_translation(diagonal);
  Fit fit;
  fit.motion = start;
  if (m == 0) return fit;
  const DeviceScope scope(mesh.device);
  check_points(mesh, points, m, false, params.threads);
  const Moments scan = point_moments(points, m, on_device(points));
  const Frame frame = scan_frame(scan, diagonal);
  const MeshEngine<Scalar>& engine = *mesh.engine<Scalar>();
  return best_fit(
      [&] {
        return [&](const Motion& motion) {
          return sums_at(engine, points, m, motion, frame, settings, params);
        };
      },
      start, m, scan, [&] { return surface_moments(prepared); }, frame, settings);
}

template <typename Scalar>
void align_simple(const char* call, const knn_mesh* mesh, const Scalar* points, int64_t m,
                  const double* initial, double max_correspondence, int max_iterations,
                  double* transform, double* rms, const knn_options* opt) {
  if (transform == nullptr) fail(KNN_ERR_INVALID_ARGUMENT, "transform is NULL");
  check_host_array(transform, "transform");
  if (rms != nullptr) check_host_array(rms, "rms");
  check_max_correspondence(max_correspondence);
  check_max_iterations(max_iterations);
  Settings settings = settings_of(nullptr, sizeof(Scalar));
  settings.max_sq = max_correspondence * max_correspondence;
  settings.max_iterations = max_iterations;
  const Fit fit = align_points(call, mesh, points, m, initial, settings, opt);
  write_transform(fit.motion, transform);
  if (rms != nullptr) *rms = fit.rms;
}

template <typename Scalar>
void align_ex(const char* call, const knn_mesh* mesh, const Scalar* points, int64_t m,
              const double* initial, const knn_align_params* params, knn_align_result* result,
              const knn_options* opt) {
  check_result(result);
  const Fit fit =
      align_points(call, mesh, points, m, initial, settings_of(params, sizeof(Scalar)), opt);
  write_result(fit, result);
}

}  // namespace
}  // namespace knn

extern "C" {

// An entry point and its _f64 twin are one definition over the scalar:
// a macro, since an extern "C" function cannot be a template, expanded for
// float and for double (the declarations stay in the public header).
#define KNN_MESH_ALIGN_ENTRY(name, Scalar)                                                        \
  KNN_API int KNN_CALL name(const knn_mesh* mesh, const Scalar* points, int64_t m,                \
                            const double* initial, double max_correspondence, int max_iterations, \
                            double* transform, double* rms, const knn_options* opt) {             \
    return knn::guarded_call(#name, knn::align_simple<Scalar>, mesh, points, m, initial,          \
                             max_correspondence, max_iterations, transform, rms, opt);            \
  }
KNN_MESH_ALIGN_ENTRY(knn_mesh_align, float)
KNN_MESH_ALIGN_ENTRY(knn_mesh_align_f64, double)
#undef KNN_MESH_ALIGN_ENTRY

#define KNN_MESH_ALIGN_EX_ENTRY(name, Scalar)                                                \
  KNN_API int KNN_CALL name(const knn_mesh* mesh, const Scalar* points, int64_t m,           \
                            const double* initial, const knn_align_params* params,           \
                            knn_align_result* result, const knn_options* opt) {              \
    return knn::guarded_call(#name, knn::align_ex<Scalar>, mesh, points, m, initial, params, \
                             result, opt);                                                   \
  }
KNN_MESH_ALIGN_EX_ENTRY(knn_mesh_align_ex, float)
KNN_MESH_ALIGN_EX_ENTRY(knn_mesh_align_ex_f64, double)
#undef KNN_MESH_ALIGN_EX_ENTRY

}  // extern "C"
