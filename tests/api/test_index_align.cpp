// The alignment of a scan to an index's points (knn_index_align, _f64;
// include/knn_gpgpu_stats.h) through the C ABI: known rigid motions of
// samples of a bumpy sphere, with noise and 5 % outliers, recovered to
// stated tolerances point-to-plane (normals from knn_index_normals) and
// point-to-point; exact samples recovered to rounding; one ICP step against
// an independent long-double oracle (brute-force nearest point, normal
// equations solved by Gaussian elimination, the update by Rodrigues); a
// plane reported degenerate with the observed directions fitted; a start
// out of reach reported as not converged and a far rotation never called
// converged unless right, recovered by the coarse start; bad
// input refused with the result untouched; the same bits for any thread
// count and (GPU tests, skipped without a device) on a CUDA index, whose
// steps are summed on its device: every structure, host and device arrays,
// trimmed or not, the smallest device budget, several devices.
#include <gtest/gtest.h>

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

namespace knn_test {
namespace {

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
using knn_align_test::V3;
using Real = long double;
constexpr double kPi = 3.14159265358979323846;

// An ellipsoid with bumps in direction d: radius 1 + bump(d), no symmetry.
// Stretched to 2 x 1.2 x 0.6 (three distinct principal axes).
V3 bumpy_point(V3 d) {
  const double bump = 0.15 * d[0] * d[1] + 0.1 * d[2] * d[2] * d[2] + 0.08 * std::sin(3 * d[0]);
  const double r = 1 + bump;
  return {2 * r * d[0], 1.2 * r * d[1], 0.6 * r * d[2]};
}

// n points of the bumpy sphere: a Fibonacci spiral (the target), or random
// directions (a scan), with Gaussian noise and a fraction of outliers
// uniform in [-2, 2]^3.
std::vector<double> bumpy(int n, bool spiral, double noise, double outliers, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> gauss(0, 1);
  std::uniform_real_distribution<double> uniform(-2, 2), unit(0, 1);
  std::vector<double> points;
  for (int i = 0; i < n; ++i) {
    V3 d;
    if (spiral) {
      const double z = 1 - 2 * (i + 0.5) / n, r = std::sqrt(1 - z * z);
      const double phi = i * kPi * (3 - std::sqrt(5.0));
      d = {r * std::cos(phi), r * std::sin(phi), z};
    } else {
      d = {gauss(rng), gauss(rng), gauss(rng)};
      const double len = std::sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
      for (double& x : d) x /= len;
    }
    V3 p = bumpy_point(d);
    if (!spiral && unit(rng) < outliers) p = {uniform(rng), uniform(rng), uniform(rng)};
    for (double x : p) points.push_back(x + noise * gauss(rng));
  }
  return points;
}

// ---- The calls in either precision --------------------------------------------

struct IndexHandle {
  knn_index* index = nullptr;
  ~IndexHandle() { knn_index_free(index); }
};

int build(const std::vector<double>& points, int dim, float, const knn_options* o,
          knn_index** out) {
  const std::vector<float> p(points.begin(), points.end());
  return knn_index_build(p.data(), static_cast<int64_t>(p.size()) / dim, dim, o, out);
}
int build(const std::vector<double>& points, int dim, double, const knn_options* o,
          knn_index** out) {
  return knn_index_build_f64(points.data(), static_cast<int64_t>(points.size()) / dim, dim, o, out);
}
int align(const knn_index* ix, const std::vector<float>& p, const float* normals,
          const double* initial, const knn_align_params* params, knn_align_result* r,
          const knn_options* o) {
  return knn_index_align(ix, p.data(), static_cast<int64_t>(p.size()) / 3, normals, initial, params,
                         r, o);
}
int align(const knn_index* ix, const std::vector<double>& p, const double* normals,
          const double* initial, const knn_align_params* params, knn_align_result* r,
          const knn_options* o) {
  return knn_index_align_f64(ix, p.data(), static_cast<int64_t>(p.size()) / 3, normals, initial,
                             params, r, o);
}
int normals_of(const knn_index* ix, int k, const float* view, float* n, const knn_options* o) {
  return knn_index_normals(ix, k, view, n, nullptr, o);
}
int normals_of(const knn_index* ix, int k, const double* view, double* n, const knn_options* o) {
  return knn_index_normals_f64(ix, k, view, n, nullptr, o);
}

template <typename Scalar>
std::vector<Scalar> cast(const std::vector<double>& v) {
  return std::vector<Scalar>(v.begin(), v.end());
}

template <typename Scalar>
class IndexAlign : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(IndexAlign, Scalars);

// ---- Known motions ----------------------------------------------------------------

// A scan of other samples of the surface than the index's, noisy and with
// 5 % outliers, 0.2 rad and 0.1 away: recovered within 5 mrad and 1e-2 at
// every scan point (the sample spacing is about 0.05, the noise 2e-3, the
// scan 4 long), point-to-plane and
// point-to-point, trimmed by distance and by fraction.
TYPED_TEST(IndexAlign, RecoversAKnownMotionDespiteNoiseAndOutliers) {
  using Scalar = TypeParam;
  const knn_options o = options(KNN_BACKEND_OPENMP);
  IndexHandle h;
  ASSERT_EQ(build(bumpy(6000, true, 0, 0, 1), 3, Scalar{}, &o, &h.index), KNN_OK);
  std::vector<Scalar> normals(3 * 6000);
  const Scalar inside[3] = {0, 0, 0};
  ASSERT_EQ(normals_of(h.index, 12, inside, normals.data(), &o), KNN_OK) << knn_last_error();
  const Transform truth = rigid({1, 2, 3}, 0.2, {0.05, -0.08, 0.04});
  const std::vector<double> clean = bumpy(1200, false, 0.002, 0, 2);
  const std::vector<double> noisy = bumpy(1200, false, 0.002, 0.05, 2);
  const std::vector<Scalar> scan = cast<Scalar>(moved(noisy, inverse(truth)));
  const std::vector<double> at = moved(clean, inverse(truth));
  for (const bool planes : {true, false}) {
    SCOPED_TRACE(planes ? "point-to-plane" : "point-to-point");
    const knn_align_params params = params_of(0.3, 0.9, 100);
    knn_align_result r = empty_result();
    ASSERT_EQ(align(h.index, scan, planes ? normals.data() : nullptr, nullptr, &params, &r, &o),
              KNN_OK)
        << knn_last_error();
    EXPECT_EQ(r.converged, 1);
    EXPECT_EQ(r.n_degenerate, 0);
    EXPECT_GE(r.n_kept, 1000);  // 90 % of those within 0.3
    EXPECT_LE(r.n_kept, 1100);
    EXPECT_LT(r.rms, 0.03);
    const Gap g = gap(transform_of(r), truth, at);
    EXPECT_LT(g.angle, 5e-3);
    EXPECT_LT(g.shift, 1e-2);
  }
}

// Exact index points moved: point-to-point brings them back to rounding.
TEST(IndexAlignF64, ExactSamplesConvergeToRounding) {
  const knn_options o = options(KNN_BACKEND_OPENMP);
  const std::vector<double> target = bumpy(3000, true, 0, 0, 1);
  IndexHandle h;
  ASSERT_EQ(build(target, 3, 0.0, &o, &h.index), KNN_OK);
  const Transform truth = rigid({-1, 0.5, 2}, 0.1, {0.03, 0.02, -0.05});
  const std::vector<double> part(target.begin(), target.begin() + 3 * 1500);
  const std::vector<double> scan = moved(part, inverse(truth));
  knn_align_result r = empty_result();
  knn_align_params params = params_of(0, 0, 100);
  params.tolerance_rotation = 1e-12;
  params.tolerance_translation = 1e-12;
  ASSERT_EQ(align(h.index, scan, nullptr, nullptr, &params, &r, &o), KNN_OK) << knn_last_error();
  EXPECT_EQ(r.converged, 1) << r.iterations;
  EXPECT_EQ(r.n_kept, 1500);
  EXPECT_LT(r.rms, 1e-9);
  const Gap g = gap(transform_of(r), truth, scan);
  EXPECT_LT(g.angle, 1e-9);
  EXPECT_LT(g.shift, 1e-9);
}

// ---- One step against an independent oracle -----------------------------------

// One ICP step from `start` in long double: brute-force nearest target of
// each moved point (ties: the smaller index), rows J = [(p - c) x n, n] and
// r = (q - p) . n (n: the target's unit normal, or x, y and z), c the moved
// scan's centroid; the 6 x 6 normal equations by Gaussian elimination with
// pivoting; the update p -> Rot(w) (p - c) + c + v.
Transform oracle_step(const std::vector<double>& target, const std::vector<double>* normals,
                      const std::vector<double>& scan, const Transform& start) {
  const size_t m = scan.size() / 3, n = target.size() / 3;
  std::vector<std::array<Real, 3>> p(m);
  std::array<Real, 3> c{0, 0, 0};
  for (size_t i = 0; i < m; ++i) {
    for (int r = 0; r < 3; ++r)
      p[i][r] = Real(start[4 * r]) * scan[3 * i] + Real(start[4 * r + 1]) * scan[3 * i + 1] +
                Real(start[4 * r + 2]) * scan[3 * i + 2] + start[4 * r + 3];
    for (int d = 0; d < 3; ++d) c[d] += p[i][d] / Real(m);
  }
  Real a[6][7] = {};
  for (size_t i = 0; i < m; ++i) {
    size_t best = 0;
    Real best_d = std::numeric_limits<Real>::infinity();
    for (size_t j = 0; j < n; ++j) {
      Real d = 0;
      for (int k = 0; k < 3; ++k)
        d += (target[3 * j + k] - p[i][k]) * (target[3 * j + k] - p[i][k]);
      if (d < best_d) best_d = d, best = j;
    }
    std::vector<std::array<Real, 3>> axes;
    if (normals) {
      std::array<Real, 3> nn{(*normals)[3 * best], (*normals)[3 * best + 1],
                             (*normals)[3 * best + 2]};
      const Real len = std::sqrt(nn[0] * nn[0] + nn[1] * nn[1] + nn[2] * nn[2]);
      for (Real& x : nn) x /= len;
      axes.push_back(nn);
    } else {
      axes = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
    }
    for (const auto& nn : axes) {
      const Real u[3] = {p[i][0] - c[0], p[i][1] - c[1], p[i][2] - c[2]};
      const Real j[6] = {u[1] * nn[2] - u[2] * nn[1],
                         u[2] * nn[0] - u[0] * nn[2],
                         u[0] * nn[1] - u[1] * nn[0],
                         nn[0],
                         nn[1],
                         nn[2]};
      Real r = 0;
      for (int k = 0; k < 3; ++k) r += (target[3 * best + k] - p[i][k]) * nn[k];
      for (int row = 0; row < 6; ++row) {
        for (int col = 0; col < 6; ++col) a[row][col] += j[row] * j[col];
        a[row][6] += j[row] * r;
      }
    }
  }
  for (int col = 0; col < 6; ++col) {
    int pivot = col;
    for (int row = col + 1; row < 6; ++row)
      if (std::fabs(a[row][col]) > std::fabs(a[pivot][col])) pivot = row;
    for (int k = 0; k < 7; ++k) std::swap(a[col][k], a[pivot][k]);
    for (int row = 0; row < 6; ++row) {
      if (row == col) continue;
      const Real f = a[row][col] / a[col][col];
      for (int k = 0; k < 7; ++k) a[row][k] -= f * a[col][k];
    }
  }
  Real x[6];
  for (int k = 0; k < 6; ++k) x[k] = a[k][6] / a[k][k];
  const Real angle = std::sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]);
  const Transform turn =
      rigid({static_cast<double>(x[0]), static_cast<double>(x[1]), static_cast<double>(x[2])},
            static_cast<double>(angle), {0, 0, 0});
  Transform next{};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k) next[4 * i + j] += turn[4 * i + k] * start[4 * k + j];
    Real t = c[i] + x[3 + i];
    for (int k = 0; k < 3; ++k) t += Real(turn[4 * i + k]) * (start[4 * k + 3] - c[k]);
    next[4 * i + 3] = static_cast<double>(t);
  }
  next[15] = 1;
  return next;
}

TEST(IndexAlignF64, OneStepMatchesTheLongDoubleOracle) {
  const knn_options o = options(KNN_BACKEND_OPENMP);
  const std::vector<double> target = bumpy(1500, true, 0, 0, 1);
  std::vector<double> normals(target.size());
  for (size_t i = 0; i < target.size(); i += 3) {  // radial directions, tilted: any field will do
    normals[i] = target[i] + 0.1;
    normals[i + 1] = target[i + 1];
    normals[i + 2] = target[i + 2] - 0.05;
  }
  IndexHandle h;
  ASSERT_EQ(build(target, 3, 0.0, &o, &h.index), KNN_OK);
  const std::vector<double> scan = bumpy(400, false, 0.003, 0, 5);
  const Transform start = rigid({0.2, 1, -0.4}, 0.05, {0.02, -0.01, 0.03});
  for (const bool planes : {true, false}) {
    SCOPED_TRACE(planes ? "point-to-plane" : "point-to-point");
    const knn_align_params params = params_of(0, 0, 1);
    knn_align_result r = empty_result();
    ASSERT_EQ(
        align(h.index, scan, planes ? normals.data() : nullptr, start.data(), &params, &r, &o),
        KNN_OK)
        << knn_last_error();
    EXPECT_EQ(r.iterations, 1);
    const Transform want = oracle_step(target, planes ? &normals : nullptr, scan, start);
    for (int k = 0; k < 16; ++k) EXPECT_NEAR(r.transform[k], want[k], 1e-10) << k;
  }
}

// ---- Degenerate shapes and starts out of reach -----------------------------------

// A plane z = 0 with normals +z: rotation about z and translations along x
// and y are unobserved (reported, left alone); the rest is fitted exactly.
TYPED_TEST(IndexAlign, APlaneReportsItsDegenerateDirections) {
  using Scalar = TypeParam;
  const knn_options o = options(KNN_BACKEND_OPENMP);
  std::vector<double> plane;
  for (int i = 0; i < 40; ++i)
    for (int j = 0; j < 40; ++j) plane.insert(plane.end(), {0.05 * i - 1, 0.05 * j - 1, 0.0});
  IndexHandle h;
  ASSERT_EQ(build(plane, 3, Scalar{}, &o, &h.index), KNN_OK);
  const std::vector<Scalar> normals = cast<Scalar>(std::vector<double>(plane.size() / 3 * 3, 0));
  std::vector<Scalar> up(normals);
  for (size_t i = 2; i < up.size(); i += 3) up[i] = 1;
  std::vector<double> inner;
  for (size_t i = 0; i < plane.size(); i += 3)
    if (std::fabs(plane[i]) < 0.6 && std::fabs(plane[i + 1]) < 0.6)
      inner.insert(inner.end(), plane.begin() + i, plane.begin() + i + 3);
  const Transform off = rigid({1, 1, 0}, 0.05, {0.0, 0.0, 0.1});
  const std::vector<double> lifted = moved(inner, off);
  const std::vector<Scalar> scan = cast<Scalar>(lifted);
  const knn_align_params params = params_of(0, 0, 50);
  knn_align_result r = empty_result();
  ASSERT_EQ(align(h.index, scan, up.data(), nullptr, &params, &r, &o), KNN_OK) << knn_last_error();
  EXPECT_EQ(r.n_degenerate, 3);
  EXPECT_EQ(r.degenerate_directions,
            KNN_ALIGN_ROTATION_Z | KNN_ALIGN_TRANSLATION_X | KNN_ALIGN_TRANSLATION_Y);
  EXPECT_EQ(r.converged, 1);
  const double tol = std::is_same<Scalar, float>::value ? 1e-5 : 1e-10;
  for (size_t i = 0; i < lifted.size(); i += 3) {
    const V3 back = map_point(transform_of(r), &lifted[i]);
    EXPECT_NEAR(back[2], 0.0, tol) << i / 3;  // onto the plane
    EXPECT_NEAR(back[0], inner[i], 0.02);     // slid no more than the tilt moved it
    EXPECT_NEAR(back[1], inner[i + 1], 0.02);
  }
}

// A scan 10 away with max_correspondence 0.3: nothing within reach, not
// converged, the initial transform returned; and a rotation of 2.6 rad is
// never called converged unless right, and the coarse start recovers it
// (the ellipsoid's principal axes are distinct).
TYPED_TEST(IndexAlign, FarStartsAreNotConvergedAndTheCoarseStartRecoversThem) {
  using Scalar = TypeParam;
  const knn_options o = options(KNN_BACKEND_OPENMP);
  IndexHandle h;
  ASSERT_EQ(build(bumpy(4000, true, 0, 0, 1), 3, Scalar{}, &o, &h.index), KNN_OK);
  const std::vector<double> part = bumpy(800, false, 0.001, 0, 21);
  {
    const std::vector<Scalar> scan = cast<Scalar>(moved(part, rigid({0, 0, 1}, 0.0, {10, 0, 0})));
    const knn_align_params params = params_of(0.3, 0, 20);
    knn_align_result r = empty_result();
    ASSERT_EQ(align(h.index, scan, nullptr, nullptr, &params, &r, &o), KNN_OK);
    EXPECT_EQ(r.converged, 0);
    EXPECT_EQ(r.n_kept, 0);
    EXPECT_TRUE(std::isnan(r.rms));
    EXPECT_EQ(transform_of(r), rigid({0, 0, 1}, 0.0, {0, 0, 0}));
  }
  const Transform truth = rigid({0.3, -1, 0.2}, 2.6, {0.4, 0.2, -0.3});
  const std::vector<double> at = moved(part, inverse(truth));
  const std::vector<Scalar> scan = cast<Scalar>(at);
  knn_align_params params = params_of(0, 0, 15);
  knn_align_result r = empty_result();
  ASSERT_EQ(align(h.index, scan, nullptr, nullptr, &params, &r, &o), KNN_OK);
  const Gap far = gap(transform_of(r), truth, at);
  if (r.converged == 1) {
    EXPECT_LT(far.angle, 2e-3);
    EXPECT_LT(far.shift, 2e-2);
  }
  params.coarse_start = 1;
  params.max_iterations = 60;
  knn_align_result coarse = empty_result();
  ASSERT_EQ(align(h.index, scan, nullptr, nullptr, &params, &coarse, &o), KNN_OK);
  EXPECT_EQ(coarse.converged, 1);
  const Gap g = gap(transform_of(coarse), truth, at);
  EXPECT_LT(g.angle, 2e-2);
  EXPECT_LT(g.shift, 3e-2);
}

// ---- Determinism ----------------------------------------------------------------

template <typename Scalar>
knn_align_result fit_on(int backend, int threads, bool planes) {
  const knn_options o = options(backend, threads);
  IndexHandle h;
  EXPECT_EQ(build(bumpy(2500, true, 0, 0, 1), 3, Scalar{}, &o, &h.index), KNN_OK)
      << knn_last_error();
  std::vector<Scalar> normals(3 * 2500);
  const Scalar inside[3] = {0, 0, 0};
  EXPECT_EQ(normals_of(h.index, 10, inside, normals.data(), &o), KNN_OK) << knn_last_error();
  const Transform truth = rigid({1, -2, 1}, 0.15, {0.05, 0.02, -0.03});
  const std::vector<Scalar> scan =
      cast<Scalar>(moved(bumpy(1000, false, 0.002, 0.05, 9), inverse(truth)));
  const knn_align_params params = params_of(0.3, 0.9, 50);
  knn_align_result r = empty_result();
  EXPECT_EQ(align(h.index, scan, planes ? normals.data() : nullptr, nullptr, &params, &r, &o),
            KNN_OK)
      << knn_last_error();
  return r;
}

TYPED_TEST(IndexAlign, SameBitsForAnyThreadCount) {
  for (const bool planes : {true, false}) {
    const knn_align_result one = fit_on<TypeParam>(KNN_BACKEND_OPENMP, 1, planes);
    const knn_align_result two = fit_on<TypeParam>(KNN_BACKEND_OPENMP, 2, planes);
    EXPECT_EQ(one.converged, 1);
    EXPECT_EQ(std::memcmp(&one, &two, sizeof one), 0) << planes;
  }
}

// The correspondences are the index's exact kNN and the sums one
// definition: a CUDA index (its normals computed there too) gives the
// OpenMP index's result bit for bit, every field.
TYPED_TEST(IndexAlign, CudaGivesTheOpenMPBits) {
  SKIP_WITHOUT_DEVICE();
  for (const bool planes : {true, false}) {
    const knn_align_result cpu = fit_on<TypeParam>(KNN_BACKEND_OPENMP, 0, planes);
    const knn_align_result gpu = fit_on<TypeParam>(KNN_BACKEND_CUDA, 0, planes);
    EXPECT_EQ(cpu.converged, 1);
    EXPECT_EQ(std::memcmp(&cpu, &gpu, sizeof cpu), 0) << planes;
    for (int k = 0; k < 16; ++k) EXPECT_EQ(cpu.transform[k], gpu.transform[k]) << k;
    EXPECT_EQ(cpu.rms, gpu.rms);
    EXPECT_EQ(cpu.n_kept, gpu.n_kept);
  }
}

#if defined(KNN_TEST_WITH_CUDA)
// The smallest budget a fit accepts, to 64 KiB (with_smallest_budget): the
// aligner's lists and blocks, its copies of host arrays and the sort of a
// trim beside the searches' chunks.
constexpr size_t kBudgetResolution = 65536;

// A CUDA index sums each step on its device (the lists stay there, the
// blocks are summed there and added in order on the host) to the OpenMP
// index's fit bit for bit, every field: one target and one set of normals
// (host memory, from the OpenMP index), every CUDA structure, host and
// device scans and normals, point-to-plane and point-to-point, trimmed or
// not, at the default budget, at the smallest budget each call accepts
// (the searches then run in chunks; the aligner's own chunks are
// test_cloud_aligner's), and split over devices {0, 0} (and {0, 1} where
// there are two). 8 iterations: any count gives the same bits.
TYPED_TEST(IndexAlign, DeviceSumsGiveTheOpenMPBits) {
  SKIP_WITHOUT_DEVICE();
  using Scalar = TypeParam;
  const std::vector<double> target = bumpy(2500, true, 0, 0, 1);
  const knn_options cpu_o = options(KNN_BACKEND_OPENMP);
  IndexHandle cpu;
  ASSERT_EQ(build(target, 3, Scalar{}, &cpu_o, &cpu.index), KNN_OK);
  std::vector<Scalar> normals(target.size());
  const Scalar inside[3] = {0, 0, 0};
  ASSERT_EQ(normals_of(cpu.index, 10, inside, normals.data(), &cpu_o), KNN_OK) << knn_last_error();
  const Transform truth = rigid({1, -2, 1}, 0.15, {0.05, 0.02, -0.03});
  const std::vector<Scalar> scan =
      cast<Scalar>(moved(bumpy(3000, false, 0.002, 0.05, 9), inverse(truth)));
  const int64_t m = static_cast<int64_t>(scan.size()) / 3;
  DeviceArray<Scalar> d_scan(scan), d_normals(normals);
  for (const int structure :
       {KNN_STRUCTURE_AUTO, KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_GRID, KNN_STRUCTURE_BRUTE_FORCE}) {
    knn_options o;
    knn_options_init_v2(&o);
    o.backend = KNN_BACKEND_CUDA;
    o.structure = structure;
    IndexHandle gpu;
    ASSERT_EQ(build(target, 3, Scalar{}, &o, &gpu.index), KNN_OK) << knn_last_error();
    for (const bool planes : {true, false})
      for (const double kept : {1.0, 0.9}) {
        SCOPED_TRACE(std::string(planes ? "point-to-plane" : "point-to-point") + " kept " +
                     std::to_string(kept) + " structure " + std::to_string(structure));
        const knn_align_params params = params_of(0.3, kept, 8);
        knn_align_result want = empty_result();
        ASSERT_EQ(align(cpu.index, scan, planes ? normals.data() : nullptr, nullptr, &params, &want,
                        &cpu_o),
                  KNN_OK)
            << knn_last_error();
        EXPECT_GT(want.n_kept, m / 2);
        const auto fit = [&](bool device_arrays, const knn_options* call, knn_align_result* r) {
          *r = empty_result();
          if (!device_arrays)
            return align(gpu.index, scan, planes ? normals.data() : nullptr, nullptr, &params, r,
                         call);
          if constexpr (sizeof(Scalar) == 8)
            return knn_index_align_f64(gpu.index, d_scan.get(), m,
                                       planes ? d_normals.get() : nullptr, nullptr, &params, r,
                                       call);
          else
            return knn_index_align(gpu.index, d_scan.get(), m, planes ? d_normals.get() : nullptr,
                                   nullptr, &params, r, call);
        };
        for (const bool device_arrays : {false, true}) {
          SCOPED_TRACE(device_arrays ? "device arrays" : "host arrays");
          knn_align_result r = empty_result();
          ASSERT_EQ(fit(device_arrays, &o, &r), KNN_OK) << knn_last_error();
          EXPECT_EQ(std::memcmp(&r, &want, sizeof r), 0) << "default budget";
          ASSERT_EQ(knn_test::with_smallest_budget(
                        o, [&](const knn_options* call) { return fit(device_arrays, call, &r); },
                        kBudgetResolution),
                    KNN_OK)
              << knn_last_error();
          EXPECT_EQ(std::memcmp(&r, &want, sizeof r), 0) << "smallest budget";
          knn_options split = o;
          split.device_count = 2;
          split.devices[0] = 0, split.devices[1] = 0;
          ASSERT_EQ(fit(device_arrays, &split, &r), KNN_OK) << knn_last_error();
          EXPECT_EQ(std::memcmp(&r, &want, sizeof r), 0) << "devices {0, 0}";
          if (cuGetDeviceCount() >= 2) {
            split.devices[1] = 1;
            ASSERT_EQ(fit(device_arrays, &split, &r), KNN_OK) << knn_last_error();
            EXPECT_EQ(std::memcmp(&r, &want, sizeof r), 0) << "devices {0, 1}";
          }
        }
      }
  }
}

// Device points and normals of the index's device give the host arrays' bits.
TEST(IndexAlignGpu, DeviceArraysGiveTheHostBits) {
  SKIP_WITHOUT_DEVICE();
  const knn_options o = options(KNN_BACKEND_CUDA);
  const std::vector<double> target = bumpy(3000, true, 0, 0, 1);
  IndexHandle h;
  ASSERT_EQ(build(target, 3, 0.0, &o, &h.index), KNN_OK);
  std::vector<double> normals(target.size());
  const double inside[3] = {0, 0, 0};
  ASSERT_EQ(normals_of(h.index, 10, inside, normals.data(), &o), KNN_OK);
  const std::vector<double> scan =
      moved(bumpy(1000, false, 0.002, 0, 3), rigid({1, 0, 0}, 0.1, {0, 0.02, 0}));
  const knn_align_params params = params_of(0, 0, 30);
  knn_align_result host = empty_result(), device = empty_result();
  ASSERT_EQ(align(h.index, scan, normals.data(), nullptr, &params, &host, &o), KNN_OK);
  DeviceArray<double> d_scan(scan), d_normals(normals);
  ASSERT_EQ(knn_index_align_f64(h.index, d_scan.get(), 1000, d_normals.get(), nullptr, &params,
                                &device, &o),
            KNN_OK)
      << knn_last_error();
  EXPECT_EQ(std::memcmp(&host, &device, sizeof host), 0);
}
#endif

// ---- Refusals ---------------------------------------------------------------------

TEST(IndexAlignRefusals, BadInputLeavesTheResultUntouched) {
  const knn_options o = options(KNN_BACKEND_OPENMP);
  const std::vector<double> target = bumpy(200, true, 0, 0, 1);
  IndexHandle h32, h64, flat;
  ASSERT_EQ(build(target, 3, 0.0f, &o, &h32.index), KNN_OK);
  ASSERT_EQ(build(target, 3, 0.0, &o, &h64.index), KNN_OK);
  ASSERT_EQ(
      build(std::vector<double>(target.begin(), target.begin() + 200), 2, 0.0f, &o, &flat.index),
      KNN_OK);
  const std::vector<float> scan = cast<float>(bumpy(50, false, 0, 0, 4));
  const knn_align_result untouched = empty_result();
  const auto refused = [&](int status, const char* message, auto&& call) {
    knn_align_result r = untouched;
    EXPECT_EQ(call(&r), status) << message;
    EXPECT_NE(std::string(knn_last_error()).find(message), std::string::npos) << knn_last_error();
    EXPECT_EQ(std::memcmp(&r, &untouched, sizeof r), 0) << message;
  };
  refused(KNN_ERR_INVALID_ARGUMENT, "has dim 2; knn_index_align aligns 3-D points only",
          [&](knn_align_result* r) {
            return knn_index_align(flat.index, scan.data(), 50, nullptr, nullptr, nullptr, r, &o);
          });
  refused(KNN_ERR_INVALID_ARGUMENT, "result is NULL", [&](knn_align_result*) {
    return knn_index_align(h32.index, scan.data(), 50, nullptr, nullptr, nullptr, nullptr, &o);
  });
  refused(KNN_ERR_INVALID_ARGUMENT, "knn_index_align_f64", [&](knn_align_result* r) {
    return knn_index_align(h64.index, scan.data(), 50, nullptr, nullptr, nullptr, r, &o);
  });
  refused(KNN_ERR_INVALID_ARGUMENT, "points", [&](knn_align_result* r) {
    return knn_index_align(h32.index, nullptr, 50, nullptr, nullptr, nullptr, r, &o);
  });
  refused(KNN_ERR_INVALID_ARGUMENT, "kept_fraction is 2", [&](knn_align_result* r) {
    knn_align_params p = params_of(0, 2, 0);
    return knn_index_align(h32.index, scan.data(), 50, nullptr, nullptr, &p, r, &o);
  });
  refused(KNN_ERR_INVALID_ARGUMENT, "last row", [&](knn_align_result* r) {
    Transform bad = rigid({0, 0, 1}, 0, {0, 0, 0});
    bad[15] = 2;
    return knn_index_align(h32.index, scan.data(), 50, nullptr, bad.data(), nullptr, r, &o);
  });
  refused(KNN_ERR_INVALID_ARGUMENT, "result->struct_size is 8", [&](knn_align_result* r) {
    knn_align_result small = *r;
    small.struct_size = 8;
    const int status =
        knn_index_align(h32.index, scan.data(), 50, nullptr, nullptr, nullptr, &small, &o);
    small.struct_size = r->struct_size;
    *r = small;
    return status;
  });
  std::vector<float> bad_scan = scan;
  bad_scan[7] = std::numeric_limits<float>::quiet_NaN();
  refused(KNN_ERR_NONFINITE_INPUT, "point 2", [&](knn_align_result* r) {
    return knn_index_align(h32.index, bad_scan.data(), 50, nullptr, nullptr, nullptr, r, &o);
  });
  // The next call works.
  knn_align_result r = empty_result();
  EXPECT_EQ(knn_index_align(h32.index, scan.data(), 50, nullptr, nullptr, nullptr, &r, &o), KNN_OK)
      << knn_last_error();
}

TEST(IndexAlignEdges, NoPointGivesTheInitialTransform) {
  const knn_options o = options(KNN_BACKEND_OPENMP);
  IndexHandle h;
  ASSERT_EQ(build(bumpy(100, true, 0, 0, 1), 3, 0.0, &o, &h.index), KNN_OK);
  const Transform initial = rigid({0, 1, 0}, 0.3, {1, 2, 3});
  knn_align_result r = empty_result();
  ASSERT_EQ(knn_index_align_f64(h.index, nullptr, 0, nullptr, initial.data(), nullptr, &r, &o),
            KNN_OK);
  EXPECT_EQ(transform_of(r), initial);
  EXPECT_EQ(r.n_kept, 0);
  EXPECT_EQ(r.converged, 0);
  EXPECT_TRUE(std::isnan(r.rms));
}

}  // namespace
}  // namespace knn_test
