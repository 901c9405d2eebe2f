// The alignment of a scan to a mesh (knn_mesh_align, _f64, _ex, _ex_f64;
// include/knn_gpgpu_mesh.h "Alignment") through the C ABI: known rigid
// motions of samples of an asymmetric closed mesh (a bumpy icosphere), with
// noise and 5 % outliers, recovered to stated tolerances; the rms against a
// long-double brute force (tests/support/mesh_oracle.h) at the transform returned;
// a flat plate and an open cylinder reported degenerate with the observed
// directions fitted; a far start never called converged unless right, and
// recovered by the coarse start; the same bits for any thread count and
// (GPU test, skipped without a device) on the CUDA engine; bad input
// refused with the outputs untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "align_test_support.h"
#include "gpu_test_support.h"
#include "knn_gpgpu.h"
#include "mesh_api_calls.h"
#include "mesh_oracle.h"

namespace knn_test {
namespace {

using knn_mesh_oracle::Mesh;
using knn_mesh_oracle::P3;
using knn_mesh_oracle::Real;
using knn_align_test::empty_result;
using knn_align_test::Gap;
using knn_align_test::gap;
using knn_align_test::inverse;
using knn_align_test::map_point;
using knn_align_test::moved;
using knn_align_test::options;
using knn_align_test::params_of;
using knn_align_test::rigid;
using knn_align_test::Transform;
using knn_align_test::transform_of;
constexpr double kPi = 3.14159265358979323846;

constexpr double kInf = std::numeric_limits<double>::infinity();

// An asymmetric closed shape: the icosphere with its radius modulated, off
// the origin.
Mesh bumpy() {
  Mesh m = knn_mesh_oracle::icosphere(3);
  for (int64_t v = 0; v < m.n_vertices(); ++v) {
    double* p = &m.vertices[3 * v];
    const double r = 1 + 0.2 * p[0] * p[1] + 0.15 * std::sin(3 * p[2]) + 0.1 * p[0];
    p[0] = 2.0 + r * p[0];
    p[1] = -1.0 + 0.8 * r * p[1];
    p[2] = 0.5 + 1.2 * r * p[2];
  }
  return m;
}

// Points on the mesh's surface, uniform by area, with Gaussian noise of
// `noise` per coordinate; then `outliers` of them replaced by points of
// the box around the mesh grown by half its size.
std::vector<double> samples(const Mesh& mesh, int n, double noise, double outliers, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> cumulative;
  double total = 0;
  for (int64_t t = 0; t < mesh.n_triangles(); ++t) {
    const P3 n = knn_mesh_oracle::cross(mesh.corner(t, 1) - mesh.corner(t, 0),
                                        mesh.corner(t, 2) - mesh.corner(t, 0));
    total += static_cast<double>(std::sqrt(knn_mesh_oracle::norm2(n)));
    cumulative.push_back(total);
  }
  double lo[3] = {kInf, kInf, kInf}, hi[3] = {-kInf, -kInf, -kInf};
  for (int64_t v = 0; v < mesh.n_vertices(); ++v)
    for (int d = 0; d < 3; ++d) {
      lo[d] = std::min(lo[d], mesh.vertices[3 * v + d]);
      hi[d] = std::max(hi[d], mesh.vertices[3 * v + d]);
    }
  std::uniform_real_distribution<double> unit(0, 1);
  std::normal_distribution<double> gauss(0, noise > 0 ? noise : 1);
  std::vector<double> points;
  for (int i = 0; i < n; ++i) {
    if (unit(rng) < outliers) {
      for (int d = 0; d < 3; ++d) {
        const double grow = 0.5 * (hi[d] - lo[d]);
        points.push_back(lo[d] - grow + unit(rng) * (hi[d] - lo[d] + 2 * grow));
      }
      continue;
    }
    const int64_t t = std::lower_bound(cumulative.begin(), cumulative.end(), unit(rng) * total) -
                      cumulative.begin();
    double r1 = std::sqrt(unit(rng)), r2 = unit(rng);
    const P3 a = mesh.corner(t, 0), b = mesh.corner(t, 1), c = mesh.corner(t, 2);
    const P3 p = static_cast<Real>(1 - r1) * a + static_cast<Real>(r1 * (1 - r2)) * b +
                 static_cast<Real>(r1 * r2) * c;
    for (Real x : {p.x, p.y, p.z})
      points.push_back(static_cast<double>(x) + (noise > 0 ? gauss(rng) : 0.0));
  }
  return points;
}

// The rms the header defines, by brute force in long double at the
// transform t: the kept points' distances (within max_correspondence, then
// the nearest rank of the kept fraction).
double oracle_rms(const Mesh& mesh, const std::vector<double>& scan, const Transform& t,
                  double max_correspondence, double fraction, int64_t* kept) {
  std::vector<double> sq;
  for (size_t i = 0; i < scan.size(); i += 3) {
    const auto p = map_point(t, &scan[i]);
    const double d = static_cast<double>(knn_mesh_oracle::nearest(mesh, P3{p[0], p[1], p[2]}).sq);
    if (d <= max_correspondence * max_correspondence) sq.push_back(d);
  }
  std::sort(sq.begin(), sq.end());
  const int64_t position =
      std::max<int64_t>(0, static_cast<int64_t>(std::ceil(fraction * sq.size())) - 1);
  const double threshold = sq.empty() ? 0 : sq[position];
  double sum = 0;
  *kept = 0;
  for (double d : sq)
    if (d <= threshold) sum += d, ++*kept;
  return std::sqrt(sum / *kept);
}

// The precision's entry points (mesh_api_calls.h), by overload.
int build(const Mesh& mesh, float, const knn_options* o, knn_mesh** out) {
  const std::vector<float> v = mesh.vertices32();
  return mesh_build(v.data(), mesh.n_vertices(), mesh.triangles.data(), mesh.n_triangles(), o, out);
}
int build(const Mesh& mesh, double, const knn_options* o, knn_mesh** out) {
  return mesh_build(mesh.vertices.data(), mesh.n_vertices(), mesh.triangles.data(),
                    mesh.n_triangles(), o, out);
}
template <typename Scalar>
int align_ex(const knn_mesh* mesh, const std::vector<Scalar>& p, const double* initial,
             const knn_align_params* params, knn_align_result* r, const knn_options* o) {
  return mesh_align_ex(mesh, p.data(), static_cast<int64_t>(p.size() / 3), initial, params, r, o);
}

// Owns a mesh handle.
struct MeshHandle {
  knn_mesh* mesh = nullptr;
  ~MeshHandle() { knn_mesh_free(mesh); }
};

template <typename Scalar>
class Align : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Align, Scalars);

// Noise of 0.2 % of the size and 5 % outliers, trimmed to 90 %: the motion
// within 2e-3 rad and 2e-3 (the shape is about 2.5 across), the rms that of
// the brute force at the transform returned.
TYPED_TEST(Align, RecoversAKnownMotionDespiteNoiseAndOutliers) {
  using Scalar = TypeParam;
  const Mesh mesh = bumpy();
  const knn_options o = options(KNN_BACKEND_OPENMP);
  MeshHandle h;
  ASSERT_EQ(build(mesh, Scalar{}, &o, &h.mesh), KNN_OK) << knn_last_error();
  const Transform truth = rigid({1, 2, 3}, 0.15, {0.05, -0.08, 0.1});
  const std::vector<double> scan64 = moved(samples(mesh, 2000, 0.002, 0.05, 7), inverse(truth));
  const std::vector<Scalar> scan(scan64.begin(), scan64.end());
  const knn_align_params params = params_of(0.5, 0.9, 50);
  knn_align_result r = empty_result();
  ASSERT_EQ(align_ex(h.mesh, scan, nullptr, &params, &r, &o), KNN_OK) << knn_last_error();
  EXPECT_EQ(r.converged, 1);
  EXPECT_GT(r.iterations, 1);
  EXPECT_EQ(r.n_degenerate, 0);
  const std::vector<double> centre = {2.0, -1.0, 0.5};
  const Gap g = gap(transform_of(r), truth, centre);
  EXPECT_LT(g.angle, 2e-3);
  EXPECT_LT(g.shift, 2e-3);
  // The scan as the library read it (float: rounded), at the transform.
  const std::vector<double> read(scan.begin(), scan.end());
  int64_t kept = 0;
  const double rms = oracle_rms(mesh, read, transform_of(r), 0.5, 0.9, &kept);
  EXPECT_NEAR(r.rms, rms, (std::is_same_v<Scalar, float> ? 1e-4 : 1e-9) * rms);
  EXPECT_NEAR(static_cast<double>(r.n_kept), static_cast<double>(kept), 2.0);
  EXPECT_LT(r.rms, 0.01);  // the inliers' noise, not the outliers
}

// Exact samples in double: the motion to 1e-7; the simple call agrees with
// the full one bit for bit.
TEST(AlignF64, ExactSamplesConvergeTightlyAndTheSimpleCallAgrees) {
  const Mesh mesh = bumpy();
  const knn_options o = options(KNN_BACKEND_OPENMP);
  MeshHandle h;
  ASSERT_EQ(build(mesh, double{}, &o, &h.mesh), KNN_OK) << knn_last_error();
  const Transform truth = rigid({-1, 0.5, 2}, 0.2, {-0.1, 0.07, 0.05});
  const std::vector<double> scan = moved(samples(mesh, 1500, 0, 0, 11), inverse(truth));
  knn_align_params params = params_of(0, 0, 100);
  params.tolerance_rotation = 1e-10;
  params.tolerance_translation = 1e-10;
  knn_align_result r = empty_result();
  ASSERT_EQ(align_ex(h.mesh, scan, nullptr, &params, &r, &o), KNN_OK) << knn_last_error();
  EXPECT_EQ(r.converged, 1);
  const std::vector<double> centre = {2.0, -1.0, 0.5};
  const Gap g = gap(transform_of(r), truth, centre);
  EXPECT_LT(g.angle, 1e-7);
  EXPECT_LT(g.shift, 1e-7);
  EXPECT_LT(r.rms, 1e-7);
  EXPECT_EQ(r.n_kept, 1500);

  // Defaults of the simple call: every point, the default tolerances.
  knn_align_result d = empty_result();
  const knn_align_params defaults = params_of(0, 0, 30);
  ASSERT_EQ(align_ex(h.mesh, scan, nullptr, &defaults, &d, &o), KNN_OK);
  Transform simple;
  double rms = -1;
  ASSERT_EQ(
      knn_mesh_align_f64(h.mesh, scan.data(), 1500, nullptr, kInf, 30, simple.data(), &rms, &o),
      KNN_OK)
      << knn_last_error();
  EXPECT_EQ(0, std::memcmp(simple.data(), d.transform, sizeof simple));
  EXPECT_EQ(rms, d.rms);
}

// Zero iterations: the initial transform back, its rms by the brute force.
TEST(AlignF64, ZeroIterationsMeasureTheInitialTransform) {
  const Mesh mesh = bumpy();
  const knn_options o = options(KNN_BACKEND_OPENMP);
  MeshHandle h;
  ASSERT_EQ(build(mesh, double{}, &o, &h.mesh), KNN_OK);
  const std::vector<double> scan = samples(mesh, 300, 0.01, 0, 3);
  const Transform initial = rigid({0, 0, 1}, 0.01, {0.01, 0, 0});
  Transform out;
  double rms = -1;
  ASSERT_EQ(
      knn_mesh_align_f64(h.mesh, scan.data(), 100, initial.data(), kInf, 0, out.data(), &rms, &o),
      KNN_OK)
      << knn_last_error();
  for (int k = 0; k < 16; ++k) EXPECT_NEAR(out[k], initial[k], 1e-15) << k;
  int64_t kept = 0;
  const std::vector<double> first(scan.begin(), scan.begin() + 300);
  EXPECT_NEAR(rms, oracle_rms(mesh, first, initial, kInf, 1, &kept), 1e-12);
}

// A flat plate observes only its normal's translation and the rotations
// about its in-plane axes: those are fitted (every point back on the
// plane), the other three reported and left as they were.
TEST(AlignDegenerate, FlatPlate) {
  Mesh plate;
  plate.vertices = {-1, -1, 0, 1, -1, 0, 1, 1, 0, -1, 1, 0};
  plate.triangles = {0, 1, 2, 0, 2, 3};
  const knn_options o = options(KNN_BACKEND_OPENMP);
  MeshHandle h;
  ASSERT_EQ(build(plate, double{}, &o, &h.mesh), KNN_OK);
  std::vector<double> flat;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-0.8, 0.8);
  for (int i = 0; i < 500; ++i) flat.insert(flat.end(), {u(rng), u(rng), 0.0});
  const std::vector<double> scan =
      moved(flat, inverse(rigid({1, 0.3, 0}, 0.05, {0.2, -0.1, 0.04})));
  knn_align_result r = empty_result();
  const knn_align_params params = params_of(0, 0, 50);
  ASSERT_EQ(align_ex(h.mesh, scan, nullptr, &params, &r, &o), KNN_OK) << knn_last_error();
  EXPECT_EQ(r.converged, 1);
  EXPECT_EQ(r.n_degenerate, 3);
  EXPECT_EQ(r.degenerate_directions,
            KNN_ALIGN_ROTATION_Z | KNN_ALIGN_TRANSLATION_X | KNN_ALIGN_TRANSLATION_Y);
  const Transform t = transform_of(r);
  for (double x : t) EXPECT_TRUE(std::isfinite(x));
  for (size_t i = 0; i < scan.size(); i += 3) EXPECT_NEAR(map_point(t, &scan[i])[2], 0.0, 1e-9);
  EXPECT_LT(r.rms, 1e-9);
}

// An open cylinder (4096 facets) observes neither the rotation about its
// axis nor the translation along it.
TEST(AlignDegenerate, OpenCylinder) {
  Mesh tube;
  const int facets = 4096;
  for (int k = 0; k < facets; ++k) {
    const double a = 2 * kPi * k / facets;
    tube.vertices.insert(tube.vertices.end(), {std::cos(a), std::sin(a), -1.0});
    tube.vertices.insert(tube.vertices.end(), {std::cos(a), std::sin(a), 1.0});
  }
  for (int k = 0; k < facets; ++k) {
    const int32_t a = 2 * k, b = 2 * ((k + 1) % facets);
    tube.triangles.insert(tube.triangles.end(), {a, b, b + 1, a, b + 1, a + 1});
  }
  const knn_options o = options(KNN_BACKEND_OPENMP);
  MeshHandle h;
  ASSERT_EQ(build(tube, double{}, &o, &h.mesh), KNN_OK);
  const std::vector<double> scan =
      moved(samples(tube, 1000, 0, 0, 9), inverse(rigid({1, 0, 0}, 0.03, {0.02, -0.03, 0.3})));
  knn_align_result r = empty_result();
  const knn_align_params params = params_of(0, 0, 50);
  ASSERT_EQ(align_ex(h.mesh, scan, nullptr, &params, &r, &o), KNN_OK) << knn_last_error();
  EXPECT_EQ(r.converged, 1);
  EXPECT_EQ(r.n_degenerate, 2);
  EXPECT_EQ(r.degenerate_directions, KNN_ALIGN_ROTATION_Z | KNN_ALIGN_TRANSLATION_Z);
  const Transform t = transform_of(r);
  for (size_t i = 0; i < scan.size(); i += 3) {
    const auto p = map_point(t, &scan[i]);
    EXPECT_NEAR(std::hypot(p[0], p[1]), 1.0, 1e-6);
  }
}

// A start 150 degrees off: from there alone the fit is either not converged
// or right; the coarse start (principal axes) recovers the motion.
TYPED_TEST(Align, FarStartIsNeverAWrongConvergedAnswerAndTheCoarseStartRecoversIt) {
  using Scalar = TypeParam;
  const Mesh mesh = bumpy();
  const knn_options o = options(KNN_BACKEND_OPENMP);
  MeshHandle h;
  ASSERT_EQ(build(mesh, Scalar{}, &o, &h.mesh), KNN_OK);
  const Transform truth = rigid({0.3, -1, 0.2}, 2.6, {0.4, 0.2, -0.3});
  const std::vector<double> scan64 = moved(samples(mesh, 1500, 0.001, 0, 21), inverse(truth));
  const std::vector<Scalar> scan(scan64.begin(), scan64.end());
  const std::vector<double> centre = {2.0, -1.0, 0.5};
  knn_align_params params = params_of(0, 0, 15);
  knn_align_result r = empty_result();
  ASSERT_EQ(align_ex(h.mesh, scan, nullptr, &params, &r, &o), KNN_OK) << knn_last_error();
  const Gap far = gap(transform_of(r), truth, centre);
  if (r.converged == 1) {
    EXPECT_LT(far.angle, 2e-3);
    EXPECT_LT(far.shift, 2e-3);
  }
  params.coarse_start = 1;
  params.max_iterations = 50;
  knn_align_result coarse = empty_result();
  ASSERT_EQ(align_ex(h.mesh, scan, nullptr, &params, &coarse, &o), KNN_OK) << knn_last_error();
  EXPECT_EQ(coarse.converged, 1);
  const Gap g = gap(transform_of(coarse), truth, centre);
  EXPECT_LT(g.angle, 2e-3);
  EXPECT_LT(g.shift, 2e-3);
}

// A scan a thousand sizes from its place, every point a correspondence:
// the fit walks it back (rotations are taken about the scan's centroid, so
// they do not swamp the translations) and is right when it says converged.
TYPED_TEST(Align, AScanFarFromItsPlaceIsBroughtBack) {
  using Scalar = TypeParam;
  const Mesh mesh = bumpy();
  const knn_options o = options(KNN_BACKEND_OPENMP);
  MeshHandle h;
  ASSERT_EQ(build(mesh, Scalar{}, &o, &h.mesh), KNN_OK);
  const Transform truth = rigid({1, 0, 1}, 0.05, {-2000, 1000, 500});
  const std::vector<double> scan64 = moved(samples(mesh, 1000, 0, 0, 31), inverse(truth));
  const std::vector<Scalar> scan(scan64.begin(), scan64.end());
  const knn_align_params params = params_of(0, 0, 200);
  knn_align_result r = empty_result();
  ASSERT_EQ(align_ex(h.mesh, scan, nullptr, &params, &r, &o), KNN_OK) << knn_last_error();
  EXPECT_EQ(r.n_degenerate, 0);
  ASSERT_EQ(r.converged, 1);
  // Compared where the scan lies: the mesh's centre in the scan's frame.
  const std::vector<double> centre = {2.0, -1.0, 0.5};
  const Gap g = gap(transform_of(r), truth, moved(centre, inverse(truth)));
  EXPECT_LT(g.angle, 1e-3);
  EXPECT_LT(g.shift, 1e-3);
}

// The sums are fixed blocks in point order: any thread count gives the
// same bits (and so, by the same definition, the CUDA engine below).
TYPED_TEST(Align, SameBitsForAnyThreadCount) {
  using Scalar = TypeParam;
  const Mesh mesh = bumpy();
  const Transform truth = rigid({1, 1, 0}, 0.1, {0.02, 0.03, -0.01});
  const std::vector<double> scan64 = moved(samples(mesh, 5000, 0.003, 0.05, 13), inverse(truth));
  const std::vector<Scalar> scan(scan64.begin(), scan64.end());
  const knn_align_params params = params_of(0.3, 0.95, 20);
  std::vector<knn_align_result> results;
  for (int threads : {1, 3}) {
    const knn_options o = options(KNN_BACKEND_OPENMP, threads);
    MeshHandle h;
    ASSERT_EQ(build(mesh, Scalar{}, &o, &h.mesh), KNN_OK);
    results.push_back(empty_result());
    ASSERT_EQ(align_ex(h.mesh, scan, nullptr, &params, &results.back(), &o), KNN_OK)
        << knn_last_error();
  }
  EXPECT_EQ(0, std::memcmp(results[0].transform, results[1].transform, sizeof(double[16])));
  EXPECT_EQ(0, std::memcmp(&results[0].rms, &results[1].rms, sizeof(double)));
  EXPECT_EQ(results[0].iterations, results[1].iterations);
}

// The default tolerances stop a fit in either precision: float's steps
// stall just above 1e-6 radians (its correspondences carry float's
// rounding), so its defaults are 10 times float64's; at 1e-6 this float fit
// ran to its cap of 30 without converging.
TYPED_TEST(Align, DefaultTolerancesConvergeInEitherPrecision) {
  using Scalar = TypeParam;
  const Mesh mesh = bumpy();
  const Transform truth = rigid({1, -2, 0.5}, 0.12, {0.03, 0.01, -0.02});
  const std::vector<double> scan64 = moved(samples(mesh, 20000, 0.003, 0.05, 17), inverse(truth));
  const std::vector<Scalar> scan(scan64.begin(), scan64.end());
  const knn_align_params params = params_of(0.4, 0.9, 30);
  const knn_options o = options(KNN_BACKEND_OPENMP);
  MeshHandle h;
  ASSERT_EQ(build(mesh, Scalar{}, &o, &h.mesh), KNN_OK);
  knn_align_result r = empty_result();
  ASSERT_EQ(align_ex(h.mesh, scan, nullptr, &params, &r, &o), KNN_OK) << knn_last_error();
  EXPECT_EQ(r.converged, 1);
  EXPECT_LT(r.iterations, 30);
  const std::vector<double> centre = {2.0, -1.0, 0.5};  // the mesh's centre
  const Gap g = gap(transform_of(r), truth, moved(centre, inverse(truth)));
  EXPECT_LT(g.angle, 1e-3);
  EXPECT_LT(g.shift, 1e-3);
}

TYPED_TEST(Align, CudaGivesTheOpenMPBits) {
  SKIP_WITHOUT_DEVICE();
  using Scalar = TypeParam;
  const Mesh mesh = bumpy();
  const Transform truth = rigid({1, -2, 0.5}, 0.12, {0.03, 0.01, -0.02});
  // More points than one sum block, and a trim: the threshold's order
  // statistic and the blocks' order both matter.
  const std::vector<double> scan64 = moved(samples(mesh, 20000, 0.003, 0.05, 17), inverse(truth));
  const std::vector<Scalar> scan(scan64.begin(), scan64.end());
  knn_align_params params = params_of(0.4, 0.9, 30);
  std::vector<knn_align_result> results;
  for (int backend : {KNN_BACKEND_OPENMP, KNN_BACKEND_CUDA}) {
    const knn_options o = options(backend);
    MeshHandle h;
    ASSERT_EQ(build(mesh, Scalar{}, &o, &h.mesh), KNN_OK) << knn_last_error();
    results.push_back(empty_result());
    ASSERT_EQ(align_ex(h.mesh, scan, nullptr, &params, &results.back(), &o), KNN_OK)
        << knn_last_error();
  }
  EXPECT_EQ(0, std::memcmp(results[0].transform, results[1].transform, sizeof(double[16])));
  EXPECT_EQ(0, std::memcmp(&results[0].rms, &results[1].rms, sizeof(double)));
  EXPECT_EQ(results[0].n_kept, results[1].n_kept);
  EXPECT_EQ(results[0].iterations, results[1].iterations);
  EXPECT_EQ(results[0].converged, 1);
#if defined(KNN_TEST_WITH_CUDA)
  // The points as a device array: the same bits again.
  const knn_options o = options(KNN_BACKEND_CUDA);
  MeshHandle h;
  ASSERT_EQ(build(mesh, Scalar{}, &o, &h.mesh), KNN_OK);
  DeviceArray<Scalar> on_device(scan);
  knn_align_result d = empty_result();
  const int status = mesh_align_ex(h.mesh, on_device.get(), static_cast<int64_t>(scan.size() / 3),
                                   nullptr, &params, &d, &o);
  ASSERT_EQ(status, KNN_OK) << knn_last_error();
  EXPECT_EQ(0, std::memcmp(results[0].transform, d.transform, sizeof(double[16])));
#endif
}

// Points the motion carries so far that their squared distance overflows
// float (no triangle found) are no correspondence on either engine: the
// trim's rank counts the same points, so the same kept count and bits.
TEST(AlignGpu, PointsBeyondFloatRangeAreNoCorrespondenceOnEitherEngine) {
  SKIP_WITHOUT_DEVICE();
  const Mesh mesh = bumpy();
  std::vector<float> scan;
  for (int i = 0; i < 40; ++i)
    scan.insert(scan.end(), {(i < 20 ? -2e18f - 1e16f * static_cast<float>(i) : 2e18f),
                             0.01f * static_cast<float>(i), 0.5f});
  // x + 1.7e19: about 1.5e19 (squares near 2.25e38, finite, all apart) or
  // 1.9e19 (+infinity); the first step's trim ranks the finite ones only.
  Transform far = rigid({0, 0, 1}, 0, {1.7e19, 0, 0});
  knn_align_params params = params_of(0, 0.5, 1);
  std::vector<knn_align_result> results;
  for (int backend : {KNN_BACKEND_OPENMP, KNN_BACKEND_CUDA}) {
    const knn_options o = options(backend);
    MeshHandle h;
    ASSERT_EQ(build(mesh, float{}, &o, &h.mesh), KNN_OK) << knn_last_error();
    results.push_back(empty_result());
    ASSERT_EQ(align_ex(h.mesh, scan, far.data(), &params, &results.back(), &o), KNN_OK)
        << knn_last_error();
  }
  EXPECT_EQ(results[0].n_kept, results[1].n_kept);
  EXPECT_LE(results[0].n_kept, 20);
  EXPECT_EQ(0, std::memcmp(&results[0].rms, &results[1].rms, sizeof(double)));
  EXPECT_EQ(0, std::memcmp(results[0].transform, results[1].transform, sizeof(double[16])));
}

// Every refusal: its status, a message naming the problem, the outputs as
// they were.
TEST(AlignRefusals, BadInputLeavesTheOutputsUntouched) {
  const Mesh mesh = bumpy();
  const knn_options o = options(KNN_BACKEND_OPENMP);
  MeshHandle h, h64;
  ASSERT_EQ(build(mesh, float{}, &o, &h.mesh), KNN_OK);
  ASSERT_EQ(build(mesh, double{}, &o, &h64.mesh), KNN_OK);
  const std::vector<double> s64 = samples(mesh, 50, 0, 0, 1);
  const std::vector<float> scan(s64.begin(), s64.end());
  const int64_t m = 50;
  Transform out;
  out.fill(7.0);
  double rms = 7.0;
  const auto untouched = [&] {
    for (double x : out) EXPECT_EQ(x, 7.0);
    EXPECT_EQ(rms, 7.0);
  };
  const auto refused = [&](int status, int expected, const char* words) {
    EXPECT_EQ(status, expected);
    EXPECT_NE(std::string(knn_last_error()).find(words), std::string::npos) << knn_last_error();
    untouched();
  };
  refused(knn_mesh_align(h.mesh, scan.data(), m, nullptr, kInf, 10, nullptr, &rms, &o),
          KNN_ERR_INVALID_ARGUMENT, "transform is NULL");
  refused(knn_mesh_align(h.mesh, scan.data(), m, nullptr, kInf, -1, out.data(), &rms, &o),
          KNN_ERR_INVALID_ARGUMENT, "max_iterations is -1");
  refused(knn_mesh_align(h.mesh, scan.data(), m, nullptr, -1.0, 10, out.data(), &rms, &o),
          KNN_ERR_INVALID_ARGUMENT, "max_correspondence");
  refused(knn_mesh_align(h.mesh, scan.data(), m, nullptr, std::nan(""), 10, out.data(), &rms, &o),
          KNN_ERR_INVALID_ARGUMENT, "max_correspondence");
  Transform bad = rigid({0, 0, 1}, 0.3, {1, 2, 3});
  bad[5] = std::nan("");
  refused(knn_mesh_align(h.mesh, scan.data(), m, bad.data(), kInf, 10, out.data(), &rms, &o),
          KNN_ERR_INVALID_ARGUMENT, "initial[5]");
  Transform scaled = rigid({0, 0, 1}, 0.3, {1, 2, 3});
  for (int k : {0, 1, 2, 4, 5, 6, 8, 9, 10}) scaled[k] *= 1.01;
  refused(knn_mesh_align(h.mesh, scan.data(), m, scaled.data(), kInf, 10, out.data(), &rms, &o),
          KNN_ERR_INVALID_ARGUMENT, "not a rotation");
  Transform mirror = rigid({0, 0, 1}, 0.3, {1, 2, 3});
  for (int k : {8, 9, 10}) mirror[k] = -mirror[k];
  refused(knn_mesh_align(h.mesh, scan.data(), m, mirror.data(), kInf, 10, out.data(), &rms, &o),
          KNN_ERR_INVALID_ARGUMENT, "reflection");
  Transform projective = rigid({0, 0, 1}, 0.3, {1, 2, 3});
  projective[14] = 0.5;
  refused(knn_mesh_align(h.mesh, scan.data(), m, projective.data(), kInf, 10, out.data(), &rms, &o),
          KNN_ERR_INVALID_ARGUMENT, "last row");
  std::vector<float> nan_scan = scan;
  nan_scan[3 * 17 + 1] = std::nanf("");
  refused(knn_mesh_align(h.mesh, nan_scan.data(), m, nullptr, kInf, 10, out.data(), &rms, &o),
          KNN_ERR_NONFINITE_INPUT, "17");
  refused(knn_mesh_align(h.mesh, nullptr, m, nullptr, kInf, 10, out.data(), &rms, &o),
          KNN_ERR_INVALID_ARGUMENT, "points");
  refused(knn_mesh_align(h.mesh, scan.data(), -1, nullptr, kInf, 10, out.data(), &rms, &o),
          KNN_ERR_INVALID_ARGUMENT, "m");
  refused(knn_mesh_align(h64.mesh, scan.data(), m, nullptr, kInf, 10, out.data(), &rms, &o),
          KNN_ERR_INVALID_ARGUMENT, "knn_mesh_align_f64");
  refused(knn_mesh_align(nullptr, scan.data(), m, nullptr, kInf, 10, out.data(), &rms, &o),
          KNN_ERR_INVALID_ARGUMENT, "mesh is NULL");

  // _ex: the result and the parameters.
  knn_align_result r = empty_result();
  for (double& x : r.transform) x = 7.0;
  r.rms = 7.0;
  const auto result_untouched = [&] {
    for (double x : r.transform) EXPECT_EQ(x, 7.0);
    EXPECT_EQ(r.rms, 7.0);
  };
  knn_align_params p = params_of(0, 0, 0);
  EXPECT_EQ(align_ex(h.mesh, scan, nullptr, &p, nullptr, &o), KNN_ERR_INVALID_ARGUMENT);
  p.kept_fraction = 1.5;
  EXPECT_EQ(align_ex(h.mesh, scan, nullptr, &p, &r, &o), KNN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(knn_last_error()).find("kept_fraction"), std::string::npos);
  result_untouched();
  p = params_of(0, 0, -3);
  EXPECT_EQ(align_ex(h.mesh, scan, nullptr, &p, &r, &o), KNN_ERR_INVALID_ARGUMENT);
  p = params_of(0, 0, 0);
  p.tolerance_rotation = -1;
  EXPECT_EQ(align_ex(h.mesh, scan, nullptr, &p, &r, &o), KNN_ERR_INVALID_ARGUMENT);
  p = params_of(0, 0, 0);
  p.coarse_start = 2;
  EXPECT_EQ(align_ex(h.mesh, scan, nullptr, &p, &r, &o), KNN_ERR_INVALID_ARGUMENT);
  p = params_of(0, 0, 0);
  p.struct_size = 4;
  EXPECT_EQ(align_ex(h.mesh, scan, nullptr, &p, &r, &o), KNN_ERR_INVALID_ARGUMENT);
  result_untouched();
  r.struct_size = 8;
  EXPECT_EQ(align_ex(h.mesh, scan, nullptr, nullptr, &r, &o), KNN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(knn_last_error()).find("struct_size"), std::string::npos);
  result_untouched();

  // And the library answers the next call.
  r.struct_size = sizeof r;
  ASSERT_EQ(align_ex(h.mesh, scan, nullptr, nullptr, &r, &o), KNN_OK) << knn_last_error();
  EXPECT_EQ(r.n_kept, m);
}

// A cancelled fit: KNN_ERR_CANCELLED, the outputs untouched; then the next
// call fits, its progress a query stage finished at its total.
TEST(AlignEdges, CancelledFitLeavesTheOutputsAndTheNextCallFits) {
  const Mesh mesh = bumpy();
  const knn_options o = options(KNN_BACKEND_OPENMP);
  MeshHandle h;
  ASSERT_EQ(build(mesh, double{}, &o, &h.mesh), KNN_OK);
  const std::vector<double> scan =
      moved(samples(mesh, 500, 0, 0, 41), rigid({0, 1, 0}, 0.05, {0.01, 0, 0}));
  Transform out;
  out.fill(7.0);
  double rms = 7.0;
  volatile int flag = 1;
  knn_set_cancel_flag(&flag);
  const int cancelled =
      knn_mesh_align_f64(h.mesh, scan.data(), 500, nullptr, kInf, 20, out.data(), &rms, &o);
  knn_set_cancel_flag(nullptr);
  EXPECT_EQ(cancelled, KNN_ERR_CANCELLED);
  for (double x : out) EXPECT_EQ(x, 7.0);
  EXPECT_EQ(rms, 7.0);
  knn_progress progress;
  std::memset(&progress, 0, sizeof progress);
  knn_set_progress(&progress);
  const int fitted =
      knn_mesh_align_f64(h.mesh, scan.data(), 500, nullptr, kInf, 20, out.data(), &rms, &o);
  knn_set_progress(nullptr);
  ASSERT_EQ(fitted, KNN_OK) << knn_last_error();
  EXPECT_EQ(progress.stage, KNN_PROGRESS_QUERY);
  EXPECT_EQ(progress.done, progress.total);
  EXPECT_EQ(progress.total, int64_t{500} * 21);
  EXPECT_LT(rms, 1e-9);
}

// No point: the initial transform, a NaN rms, nothing kept, not converged.
TEST(AlignEdges, NoPoint) {
  const Mesh mesh = bumpy();
  const knn_options o = options(KNN_BACKEND_OPENMP);
  MeshHandle h;
  ASSERT_EQ(build(mesh, float{}, &o, &h.mesh), KNN_OK);
  const Transform initial = rigid({0, 1, 0}, 0.4, {1, 0, 0});
  knn_align_result r = empty_result();
  ASSERT_EQ(knn_mesh_align_ex(h.mesh, nullptr, 0, initial.data(), nullptr, &r, &o), KNN_OK)
      << knn_last_error();
  for (int k = 0; k < 16; ++k) EXPECT_NEAR(r.transform[k], initial[k], 1e-15);
  EXPECT_TRUE(std::isnan(r.rms));
  EXPECT_EQ(r.n_kept, 0);
  EXPECT_EQ(r.converged, 0);
}

// Points all beyond max_correspondence: too few kept, not converged, the
// initial transform back.
TEST(AlignEdges, NothingWithinReachIsNotConverged) {
  const Mesh mesh = bumpy();
  const knn_options o = options(KNN_BACKEND_OPENMP);
  MeshHandle h;
  ASSERT_EQ(build(mesh, double{}, &o, &h.mesh), KNN_OK);
  const std::vector<double> scan =
      moved(samples(mesh, 200, 0, 0, 2), rigid({0, 0, 1}, 0, {50, 0, 0}));
  knn_align_result r = empty_result();
  const knn_align_params params = params_of(1.0, 0, 10);
  ASSERT_EQ(align_ex(h.mesh, scan, nullptr, &params, &r, &o), KNN_OK) << knn_last_error();
  EXPECT_EQ(r.converged, 0);
  EXPECT_EQ(r.n_kept, 0);
  EXPECT_EQ(r.iterations, 0);
  EXPECT_EQ(r.transform[3], 0.0);
}

}  // namespace
}  // namespace knn_test
