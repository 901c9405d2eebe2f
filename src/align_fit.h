// The ICP loop of an alignment, shared by the mesh's (src/mesh_align_api.cpp)
// and the index's (src/index_align_api.cpp): the checks of the caller's
// parameters and initial transform, the 6 x 6 solve with its degenerate
// directions, the update, the stopping rule, the coarse start by principal
// axes and the writing of the result. Every step's sums come from the
// caller (the target's engine); all else is host double arithmetic, so the
// same sums give the same transform.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "../common/error.h"
#include "../common/geometry/align_terms.h"
#include "../engine/cancel.h"
#include "../engine/progress.h"
#include "../include/knn_gpgpu.h"
#include "align_math.h"
#include "backends.h"
#include "device_arrays.h"
#include "validate.h"

namespace knn {
namespace align {

constexpr int kDefaultIterations = 50;
// The default tolerances of a float64 fit; a float32 fit's are 10 times
// these: its steps stall just above 1e-6 (the correspondences carry float's
// rounding), and at 1e-6 it would run to the iteration cap.
constexpr double kDefaultToleranceRotation = 1e-6;
constexpr double kDefaultToleranceTranslation = 1e-6;  // of the bounding box's diagonal
constexpr double kFloatToleranceFactor = 10;
// Directions whose eigenvalue is below this fraction of the largest are not
// observed by the surface.
constexpr double kDegenerateRatio = 1e-6;
// How far the initial rotation may be from a rotation (each entry of R^T R - I).
constexpr double kRigidTolerance = 1e-6;
constexpr int64_t kLeastKept = 6;  // the unknowns of a step

// What the caller asked, defaults applied and checked.
struct Settings {
  double max_sq = std::numeric_limits<double>::infinity();
  int max_iterations = kDefaultIterations;
  bool coarse_start = false;
  double kept_fraction = 1.0;
  double tolerance_rotation = kDefaultToleranceRotation;
  double tolerance_translation = 0;  // 0 until the mesh's size is known
  // The default translation tolerance per length of the bounding box's
  // diagonal (the caller's tolerance_translation 0).
  double translation_per_diagonal = kDefaultToleranceTranslation;

  // The default translation tolerance once the target's diagonal is known.
  void default_translation(double diagonal) {
    if (tolerance_translation == 0) tolerance_translation = translation_per_diagonal * diagonal;
  }
};

struct Fit {
  Motion motion;
  double rms = std::numeric_limits<double>::quiet_NaN();
  int64_t kept = 0;
  int iterations = 0;
  bool converged = false;
  int degenerate_mask = 0;
  int n_degenerate = 0;
};

// The frame of the normal equations: the scan's centroid (as the current
// motion moves it: a rigid motion moves the centroid with the points) and
// the scan's RMS radius about it, so that rotations and translations of the
// scan weigh alike in A wherever the scan lies (a scan far from its place
// would otherwise see rotations about a distant centre swamp translations).
struct Frame {
  Vec3 scan_centroid{0, 0, 0};
  double scale = 1.0;
  Vec3 centre(const Motion& motion) const {
    const Vec3 c = align::apply(motion.rotation, scan_centroid);
    return {c[0] + motion.translation[0], c[1] + motion.translation[1],
            c[2] + motion.translation[2]};
  }
};

// The length of the diagonal of the bounding box of n points of 3 scalars
// (the default translation tolerance is a fraction of it; 0 for no points).
template <typename Scalar>
double bounding_diagonal(const Scalar* points, int64_t n) {
  if (n == 0) return 0.0;
  Vec3 lo, hi;
  for (int d = 0; d < 3; ++d) lo[d] = hi[d] = static_cast<double>(points[d]);
  for (int64_t i = 0; i < 3 * n; ++i) {
    const double x = static_cast<double>(points[i]);
    lo[i % 3] = std::min(lo[i % 3], x);
    hi[i % 3] = std::max(hi[i % 3], x);
  }
  Vec3 extent;
  for (int d = 0; d < 3; ++d) extent[d] = hi[d] - lo[d];
  return std::sqrt(align::dot(extent, extent));
}

// ---- Checks -------------------------------------------------------------------

inline void check_max_correspondence(double max_correspondence) {
  if (std::isnan(max_correspondence) || max_correspondence < 0)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("max_correspondence is %g; it must be a non-negative number (+infinity: every "
                "point)",
                max_correspondence));
}

inline void check_max_iterations(int max_iterations) {
  if (max_iterations < 0)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("max_iterations is %d; it must be at least 0", max_iterations));
}

// The caller's initial transform (NULL: identity): finite, its last row
// 0 0 0 1, its 3 x 3 part a rotation (R^T R = I within kRigidTolerance,
// determinant > 0), re-orthonormalised.
inline Motion initial_motion(const double* initial) {
  Motion motion;
  if (initial == nullptr) return motion;
  check_host_array(initial, "initial");
  for (int k = 0; k < 16; ++k)
    if (!std::isfinite(initial[k]))
      fail(KNN_ERR_INVALID_ARGUMENT,
           format("initial[%d] is %g; the initial transform must be finite", k, initial[k]));
  if (initial[12] != 0 || initial[13] != 0 || initial[14] != 0 || initial[15] != 1)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("the initial transform's last row is (%g, %g, %g, %g); a rigid transform's is "
                "(0, 0, 0, 1)",
                initial[12], initial[13], initial[14], initial[15]));
  Mat3 r;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) r[3 * i + j] = initial[4 * i + j];
    motion.translation[i] = initial[4 * i + 3];
  }
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      const double product = (r[i] * r[j] + r[3 + i] * r[3 + j]) + r[6 + i] * r[6 + j];
      const double off = product - (i == j ? 1.0 : 0.0);
      if (!(std::fabs(off) <= kRigidTolerance))
        fail(KNN_ERR_INVALID_ARGUMENT,
             format("the initial transform's 3 x 3 part is not a rotation: (R^T R)[%d][%d] is "
                    "%.9g (must be %d within %g)",
                    i, j, product, i == j ? 1 : 0, kRigidTolerance));
    }
  const double det =
      align::dot({r[0], r[1], r[2]}, align::cross({r[3], r[4], r[5]}, {r[6], r[7], r[8]}));
  if (!(det > 0))
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("the initial transform's 3 x 3 part has determinant %g: a reflection, not a "
                "rotation",
                det));
  motion.rotation = align::orthonormalised(r);
  return motion;
}

// scalar_bytes: 4 for a float32 fit, 8 for float64 (the defaults differ).
inline Settings settings_of(const knn_align_params* params, size_t scalar_bytes) {
  Settings s;
  if (scalar_bytes == sizeof(float)) {
    s.tolerance_rotation *= kFloatToleranceFactor;
    s.translation_per_diagonal *= kFloatToleranceFactor;
  }
  if (params == nullptr) return s;
  check_host_array(params, "params");
  constexpr size_t kLeast = offsetof(knn_align_params, struct_size) + sizeof(size_t);
  if (params->struct_size < kLeast)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("params->struct_size is %zu; set it to sizeof(knn_align_params), %zu",
                params->struct_size, sizeof(knn_align_params)));
  // A field beyond the caller's struct_size takes its default (0).
  const auto field = [&](auto knn_align_params::*member) {
    using T = std::remove_reference_t<decltype(params->*member)>;
    const size_t end = static_cast<size_t>(reinterpret_cast<const char*>(&(params->*member)) -
                                           reinterpret_cast<const char*>(params)) +
                       sizeof(T);
    return params->struct_size >= end ? params->*member : T{};
  };
  const double max_correspondence = field(&knn_align_params::max_correspondence);
  check_max_correspondence(max_correspondence);
  if (max_correspondence > 0) s.max_sq = max_correspondence * max_correspondence;
  const int iterations = field(&knn_align_params::max_iterations);
  check_max_iterations(iterations);
  if (iterations > 0) s.max_iterations = iterations;
  const int coarse = field(&knn_align_params::coarse_start);
  if (coarse != 0 && coarse != 1)
    fail(KNN_ERR_INVALID_ARGUMENT, format("params->coarse_start is %d; it must be 0 or 1", coarse));
  s.coarse_start = coarse == 1;
  const double fraction = field(&knn_align_params::kept_fraction);
  if (!(fraction >= 0 && fraction <= 1))
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("params->kept_fraction is %g; it must lie in (0, 1] (0: 1)", fraction));
  if (fraction > 0) s.kept_fraction = fraction;
  const double rotation = field(&knn_align_params::tolerance_rotation);
  const double translation = field(&knn_align_params::tolerance_translation);
  if (!(rotation >= 0) || !(translation >= 0))
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("params->tolerance_rotation is %g and tolerance_translation %g; each must be a "
                "non-negative number (0: the default)",
                rotation, translation));
  if (rotation > 0) s.tolerance_rotation = rotation;
  s.tolerance_translation = translation;
  return s;
}

// ---- One step -------------------------------------------------------------------

struct Step {
  Vec3 rotation_vector{0, 0, 0};  // radians, about the frame's centre
  Vec3 translation{0, 0, 0};
  int degenerate_mask = 0;
  int n_degenerate = 0;
};

// The least-squares step of the normal equations, by the eigenvectors of
// A: unobserved directions (eigenvalue below kDegenerateRatio of the
// largest) are left out and reported.
inline Step solve(const geometry::AlignSums& sums, const Frame& frame) {
  std::array<double, 36> a{};
  int k = 0;
  for (int row = 0; row < 6; ++row)
    for (int col = row; col < 6; ++col, ++k)
      a[6 * row + col] = a[6 * col + row] = sums.normal_matrix[k];
  std::array<double, 6> values;
  std::array<std::array<double, 6>, 6> vectors;
  align::symmetric_eigen<6>(a, values, vectors);
  const double largest = values[5];
  std::array<double, 6> x{}, unobserved{};
  Step step;
  for (int e = 0; e < 6; ++e) {
    const std::array<double, 6>& v = vectors[e];
    if (!(values[e] > kDegenerateRatio * largest)) {
      ++step.n_degenerate;
      for (int i = 0; i < 6; ++i) unobserved[i] += v[i] * v[i];
      continue;
    }
    double along = 0;
    for (int i = 0; i < 6; ++i) along += v[i] * sums.right_side[i];
    const double coefficient = along / values[e];
    for (int i = 0; i < 6; ++i) x[i] += coefficient * v[i];
  }
  for (int i = 0; i < 6; ++i)
    if (unobserved[i] > 0.5) step.degenerate_mask |= 1 << i;
  for (int i = 0; i < 3; ++i) {
    step.rotation_vector[i] = x[i] / frame.scale;  // the frame's u = (p - o) / L
    step.translation[i] = x[3 + i];
  }
  return step;
}

// The motion followed by the step: x -> dR (x - o) + o + v after `motion`.
inline Motion compose(const Motion& motion, const Step& step, const Vec3& centre) {
  const Mat3 turn = align::rotation_of(step.rotation_vector);
  Motion next;
  next.rotation = align::orthonormalised(align::multiply(turn, motion.rotation));
  Vec3 shifted;
  for (int i = 0; i < 3; ++i) shifted[i] = motion.translation[i] - centre[i];
  const Vec3 turned = align::apply(turn, shifted);
  for (int i = 0; i < 3; ++i) next.translation[i] = (turned[i] + centre[i]) + step.translation[i];
  return next;
}

inline bool finite_motion(const Motion& motion) {
  for (double x : motion.rotation)
    if (!std::isfinite(x)) return false;
  for (double x : motion.translation)
    if (!std::isfinite(x)) return false;
  return true;
}

// The frame of one step's normal equations (common/geometry/align_terms.h)
// at the current motion.
inline geometry::AlignFrame frame_of(const Motion& motion, const Frame& frame) {
  geometry::AlignFrame f;
  for (int k = 0; k < 9; ++k) f.rotation[k] = motion.rotation[k];
  for (int k = 0; k < 3; ++k) f.translation[k] = motion.translation[k];
  const Vec3 centre = frame.centre(motion);
  for (int k = 0; k < 3; ++k) f.centre[k] = centre[k];
  f.inverse_scale = 1.0 / frame.scale;
  return f;
}

// ICP from `start`: evaluate, solve, update, until the step is within the
// tolerances (then evaluated once more: the rms is that of the transform
// returned) or the cap, or too few points are kept.
// sums_at(motion) gives the step's sums (geometry::AlignSums) at a motion.
template <class SumsAt>
Fit fit_from(SumsAt&& sums_at, const Motion& start, const Frame& frame, const Settings& settings) {
  Fit fit;
  fit.motion = start;
  bool within = false;
  for (;;) {
    const geometry::AlignSums sums = sums_at(fit.motion);
    fit.kept = sums.kept;
    fit.rms = sums.kept > 0 ? std::sqrt(sums.sq_distances / static_cast<double>(sums.kept))
                            : std::numeric_limits<double>::quiet_NaN();
    if (within) {
      // The transform returned must still hold enough correspondences.
      fit.converged = sums.kept >= kLeastKept;
      return fit;
    }
    if (fit.iterations == settings.max_iterations || sums.kept < kLeastKept) return fit;
    const Step step = solve(sums, frame);
    const Motion next = compose(fit.motion, step, frame.centre(fit.motion));
    if (!finite_motion(next)) return fit;
    fit.motion = next;
    fit.degenerate_mask = step.degenerate_mask;
    fit.n_degenerate = step.n_degenerate;
    ++fit.iterations;
    within =
        std::sqrt(align::dot(step.rotation_vector, step.rotation_vector)) <=
            settings.tolerance_rotation &&
        std::sqrt(align::dot(step.translation, step.translation)) <= settings.tolerance_translation;
  }
}

// ---- Coarse start ---------------------------------------------------------------

struct Moments {
  Vec3 centroid{0, 0, 0};
  std::array<double, 9> covariance{};  // about the centroid
};

// The principal axes (columns: eigenvectors ascending) and their
// determinant's sign.
inline Mat3 axes_of(const Moments& moments) {
  std::array<double, 3> values;
  std::array<std::array<double, 3>, 3> vectors;
  align::symmetric_eigen<3>(moments.covariance, values, vectors);
  Mat3 axes;
  for (int k = 0; k < 3; ++k)
    for (int i = 0; i < 3; ++i) axes[3 * i + k] = vectors[k][i];
  return axes;
}

inline double determinant(const Mat3& r) {
  return align::dot({r[0], r[1], r[2]}, align::cross({r[3], r[4], r[5]}, {r[6], r[7], r[8]}));
}

// The scan's points: centroid and covariance, summed in double in point
// order a host piece at a time (device points are copied out piece by
// piece), about the first point (no cancellation for a scan far from the
// origin).
template <typename Scalar>
Moments point_moments(const Scalar* points, int64_t m, bool on_device) {
  constexpr int64_t kPiece = int64_t{1} << 16;
  std::vector<Scalar> piece;
  Vec3 origin{0, 0, 0}, first{0, 0, 0};
  std::array<double, 9> second{};
  const volatile int* cancel = cancel_flag();
  for (int64_t begin = 0; begin < m; begin += kPiece) {
    throw_if_cancelled(cancel);
    const int64_t count = std::min(kPiece, m - begin);
    const Scalar* rows = points + 3 * begin;
    if (on_device) {
      piece.resize(static_cast<size_t>(3 * count));
      device_backend().copy_to_host(piece.data(), rows, piece.size() * sizeof(Scalar));
      rows = piece.data();
    }
    if (begin == 0)
      for (int a = 0; a < 3; ++a) origin[a] = static_cast<double>(rows[a]);
    for (int64_t i = 0; i < count; ++i) {
      Vec3 x;
      for (int a = 0; a < 3; ++a) x[a] = static_cast<double>(rows[3 * i + a]) - origin[a];
      for (int a = 0; a < 3; ++a) {
        first[a] += x[a];
        for (int b = 0; b < 3; ++b) second[3 * a + b] += x[a] * x[b];
      }
    }
  }
  Moments moments;
  const double count = static_cast<double>(m);
  Vec3 mean;
  for (int i = 0; i < 3; ++i) {
    mean[i] = first[i] / count;
    moments.centroid[i] = origin[i] + mean[i];
  }
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      moments.covariance[3 * i + j] = second[3 * i + j] / count - mean[i] * mean[j];
  return moments;
}

// The four rotations carrying the scan's principal axes onto the mesh's
// (the axes' signs with a determinant of +1), centroid onto centroid.
inline std::vector<Motion> principal_starts(const Moments& scan, const Moments& surface) {
  const Mat3 s = axes_of(scan), g = axes_of(surface);
  const double handedness = determinant(s) * determinant(g) > 0 ? 1.0 : -1.0;
  std::vector<Motion> starts;
  for (const double s0 : {1.0, -1.0})
    for (const double s1 : {1.0, -1.0}) {
      const double sign[3] = {s0, s1, s0 * s1 * handedness};
      Motion motion;
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
          double r = 0;
          for (int k = 0; k < 3; ++k) r += g[3 * i + k] * sign[k] * s[3 * j + k];
          motion.rotation[3 * i + j] = r;
        }
      motion.rotation = align::orthonormalised(motion.rotation);
      const Vec3 moved = align::apply(motion.rotation, scan.centroid);
      for (int i = 0; i < 3; ++i) motion.translation[i] = surface.centroid[i] - moved[i];
      starts.push_back(motion);
    }
  return starts;
}

// Whether fit a is better than b: converged first, then more kept points,
// then a smaller rms.
inline bool better(const Fit& a, const Fit& b) {
  if (a.converged != b.converged) return a.converged;
  if (a.kept != b.kept) return a.kept > b.kept;
  return a.rms < b.rms;
}

// The frame of a scan with these moments: its centroid, and its RMS radius
// as the scale, or where that is 0 or not finite half the target's bounding
// diagonal, or where that is 0 too, 1.
inline Frame scan_frame(const Moments& scan, double target_diagonal) {
  Frame frame;
  frame.scan_centroid = scan.centroid;
  const double radius = std::sqrt((scan.covariance[0] + scan.covariance[4]) + scan.covariance[8]);
  frame.scale = radius > 0 && std::isfinite(radius) ? radius : target_diagonal / 2;
  if (!(frame.scale > 0)) frame.scale = 1.0;
  return frame;
}

// The best (better()) of the fits (fit_from) of m scan points from `start`
// and, with settings.coarse_start, from the principal starts onto the
// target's moments (target_moments(), taken only then). The progress stage
// counts m points for every evaluation a start may take; the steps' sums
// come from make_sums_at(), made once the stage has begun.
template <class MakeSumsAt, class TargetMoments>
Fit best_fit(MakeSumsAt&& make_sums_at, const Motion& start, int64_t m, const Moments& scan,
             TargetMoments&& target_moments, const Frame& frame, const Settings& settings) {
  std::vector<Motion> starts{start};
  if (settings.coarse_start) {
    const std::vector<Motion> more = principal_starts(scan, target_moments());
    starts.insert(starts.end(), more.begin(), more.end());
  }
  // Each start may take every iteration and one more evaluation.
  const double steps =
      static_cast<double>(m) * (settings.max_iterations + 1.0) * static_cast<double>(starts.size());
  const ProgressStage stage(KNN_PROGRESS_QUERY,
                            steps < 9e18 ? static_cast<int64_t>(steps) : INT64_MAX);
  auto sums_at = make_sums_at();
  Fit fit;
  for (size_t s = 0; s < starts.size(); ++s) {
    const Fit candidate = fit_from(sums_at, starts[s], frame, settings);
    if (s == 0 || better(candidate, fit)) fit = candidate;
  }
  stage.finish();
  return fit;
}

inline void write_transform(const Motion& motion, double* transform) {
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) transform[4 * i + j] = motion.rotation[3 * i + j];
    transform[4 * i + 3] = motion.translation[i];
  }
  transform[12] = transform[13] = transform[14] = 0.0;
  transform[15] = 1.0;
}

// Sets one field of the caller's result when it lies within its struct_size.
template <class T>
void set_within(knn_align_result* result, T knn_align_result::*field, const T& value) {
  const size_t end = static_cast<size_t>(reinterpret_cast<const char*>(&(result->*field)) -
                                         reinterpret_cast<const char*>(result)) +
                     sizeof(T);
  if (result->struct_size >= end) result->*field = value;
}

// The caller's result (host, struct_size covering at least the transform).
inline void check_result(knn_align_result* result) {
  if (result == nullptr) fail(KNN_ERR_INVALID_ARGUMENT, "result is NULL");
  check_host_array(result, "result");
  constexpr size_t kLeast = offsetof(knn_align_result, transform) + sizeof(double[16]);
  if (result->struct_size < kLeast)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("result->struct_size is %zu; it must be at least %zu (set it to "
                "sizeof(knn_align_result), %zu)",
                result->struct_size, kLeast, sizeof(knn_align_result)));
}

inline void write_result(const Fit& fit, knn_align_result* result) {
  write_transform(fit.motion, result->transform);
  using R = knn_align_result;
  set_within(result, &R::rms, fit.rms);
  set_within(result, &R::n_kept, fit.kept);
  set_within(result, &R::iterations, fit.iterations);
  set_within(result, &R::converged, fit.converged ? 1 : 0);
  set_within(result, &R::degenerate_directions, fit.degenerate_mask);
  set_within(result, &R::n_degenerate, fit.n_degenerate);
}

}  // namespace align
}  // namespace knn
