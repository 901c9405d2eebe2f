// The mesh calls (include/knn_gpgpu_mesh.h) through the C ABI: results
// against the long-double brute force of tests/support/mesh_oracle.h (Ericson's
// region method) on an icosphere, a cube, an open box, a soup with
// degenerate triangles and one triangle, in float32 and float64; signs
// against the shapes' analytic inside; the deviation report against its
// definitions computed here from the per-point values; every refusal with
// its status, its message and the outputs untouched; stale handles;
// serialization. Each result test runs on the OpenMP engine and, where a
// device is present, on the CUDA engine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "knn_gpgpu.h"
#include "mesh_api_calls.h"
#include "mesh_oracle.h"

namespace knn_test {
namespace {

using knn_mesh_oracle::Mesh;
using knn_mesh_oracle::P3;
using knn_mesh_oracle::Real;

std::vector<int> backends() {
  std::vector<int> b = {KNN_BACKEND_OPENMP};
  if (cuGetDeviceCount() > 0) b.push_back(KNN_BACKEND_CUDA);
  return b;
}

knn_options options(int backend) {
  knn_options o;
  knn_options_init(&o);
  o.backend = backend;
  return o;
}

// A mesh of the vertices' precision (mesh_api_calls.h picks the call).
template <class S>
int build(const std::vector<S>& v, const std::vector<int32_t>& t, const knn_options* o,
          knn_mesh** out) {
  return mesh_build(v.data(), static_cast<int64_t>(v.size() / 3), t.data(),
                    static_cast<int64_t>(t.size() / 3), o, out);
}

struct MeshHandle {
  knn_mesh* mesh = nullptr;
  ~MeshHandle() { knn_mesh_free(mesh); }
};

template <class S>
std::vector<S> vertices_of(const Mesh& m) {
  return std::vector<S>(m.vertices.begin(), m.vertices.end());
}

// A mesh in the test's precision; its oracle holds the very same vertices.
template <class S>
Mesh rounded(Mesh m) {
  for (double& c : m.vertices) c = static_cast<double>(static_cast<S>(c));
  return m;
}

// Random points in [-lo, lo]^3 ... plus every vertex and every edge midpoint.
template <class S>
std::vector<S> probe_points(const Mesh& m, int random, double extent, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-extent, extent);
  std::vector<S> q;
  for (int i = 0; i < 3 * random; ++i) q.push_back(static_cast<S>(u(rng)));
  for (double c : m.vertices) q.push_back(static_cast<S>(c));
  for (int64_t t = 0; t < m.n_triangles(); ++t) {
    const P3 a = m.corner(t, 0), b = m.corner(t, 1);
    for (Real c : {(a.x + b.x) / 2, (a.y + b.y) / 2, (a.z + b.z) / 2})
      q.push_back(static_cast<S>(c));
  }
  return q;
}

template <class S>
P3 point(const std::vector<S>& rows, size_t i) {
  return {rows[3 * i], rows[3 * i + 1], rows[3 * i + 2]};
}

// Tolerances of a result in S against the exact one, for coordinates of
// magnitude up to 3: some ulps of the largest values involved.
template <class S>
Real tol() {
  return sizeof(S) == 4 ? 2e-5L : 1e-12L;
}

// Checks every output of closest() for point i against the oracle: the
// triangle is one of least distance, the distance is its, the closest point
// is the oracle's point of that triangle, the weights rebuild it.
template <class S>
::testing::AssertionResult matches_oracle(const Mesh& m, P3 q, int32_t id, S sq, const S* c,
                                          const S* w) {
  const knn_mesh_oracle::Nearest best = knn_mesh_oracle::nearest(m, q);
  if (id < 0 || id >= m.n_triangles())
    return ::testing::AssertionFailure() << "id " << id << ", oracle " << best.id;
  const knn_mesh_oracle::OnTriangle on = knn_mesh_oracle::closest_on(m, id, q);
  const Real scale = 1 + best.sq;
  if (on.sq > best.sq + tol<S>() * scale)
    return ::testing::AssertionFailure()
           << "triangle " << id << " at sq " << (double)on.sq << " but triangle " << best.id
           << " at " << (double)best.sq;
  if (std::fabs(static_cast<Real>(sq) - on.sq) > tol<S>() * scale)
    return ::testing::AssertionFailure() << "sq " << sq << ", oracle " << (double)on.sq;
  const P3 got{c[0], c[1], c[2]};
  if (norm2(got - on.point) > tol<S>() * tol<S>() * 16)
    return ::testing::AssertionFailure()
           << "closest (" << c[0] << ", " << c[1] << ", " << c[2] << "), oracle ("
           << (double)on.point.x << ", " << (double)on.point.y << ", " << (double)on.point.z << ")";
  const P3 rebuilt = static_cast<Real>(w[0]) * m.corner(id, 0) +
                     static_cast<Real>(w[1]) * m.corner(id, 1) +
                     static_cast<Real>(w[2]) * m.corner(id, 2);
  if (norm2(rebuilt - on.point) > tol<S>() * tol<S>() * 64 ||
      std::fabs(static_cast<Real>(w[0]) + w[1] + w[2] - 1) > tol<S>() ||
      std::min({w[0], w[1], w[2]}) < -tol<S>())
    return ::testing::AssertionFailure() << "weights " << w[0] << ", " << w[1] << ", " << w[2];
  return ::testing::AssertionSuccess();
}

template <class S>
void expect_closest_as_oracle(const Mesh& exact, int backend, uint64_t seed) {
  const Mesh m = rounded<S>(exact);
  const knn_options o = options(backend);
  MeshHandle h;
  ASSERT_EQ(build(vertices_of<S>(m), m.triangles, &o, &h.mesh), KNN_OK) << knn_last_error();
  const std::vector<S> q = probe_points<S>(m, 300, 2.5, seed);
  const size_t n = q.size() / 3;
  std::vector<int32_t> ids(n);
  std::vector<S> sq(n), c(3 * n), w(3 * n);
  ASSERT_EQ(
      mesh_closest(h.mesh, q.data(), static_cast<int64_t>(n), std::numeric_limits<S>::infinity(),
                   ids.data(), sq.data(), c.data(), w.data(), &o),
      KNN_OK)
      << knn_last_error();
  for (size_t i = 0; i < n; ++i)
    ASSERT_TRUE(matches_oracle<S>(m, point(q, i), ids[i], sq[i], &c[3 * i], &w[3 * i]))
        << "point " << i;
  // Only the ids asked for: the same ids.
  std::vector<int32_t> alone(n);
  ASSERT_EQ(
      mesh_closest(h.mesh, q.data(), static_cast<int64_t>(n), std::numeric_limits<S>::infinity(),
                   alone.data(), nullptr, nullptr, nullptr, &o),
      KNN_OK);
  EXPECT_EQ(alone, ids);
}

// A soup: an icosphere's triangles plus degenerate ones (a needle, a point,
// repeated vertices, collinear corners) and a stray triangle.
Mesh soup() {
  Mesh m = knn_mesh_oracle::icosphere(1);
  const int32_t base = static_cast<int32_t>(m.n_vertices());
  m.vertices.insert(m.vertices.end(), {1.5, 0,  0,   1.5,  1e-7, 0,   1.5, 0,   1,      // needle
                                       0,   2,  0,                                      // a point
                                       -2,  -2, 0,   -1.5, -1.5, 0,   -1,  -1,  0,      // collinear
                                       0,   0,  1.8, 0.5,  0,    1.8, 0,   0.5, 1.8});  // stray
  m.triangles.insert(m.triangles.end(),
                     {base, base + 1, base + 2, base + 3, base + 3, base + 3, base, base, base + 2,
                      base + 4, base + 5, base + 6, base + 7, base + 8, base + 9});
  return m;
}

Mesh one_triangle() {
  Mesh m;
  m.vertices = {0, 0, 0, 1, 0, 0, 0, 1, 0};
  m.triangles = {0, 1, 2};
  return m;
}

TEST(MeshClosest, AsTheOracleFloat32) {
  for (int backend : backends()) {
    SCOPED_TRACE(backend);
    expect_closest_as_oracle<float>(knn_mesh_oracle::icosphere(2), backend, 1);
    expect_closest_as_oracle<float>(knn_mesh_oracle::cube(), backend, 2);
    expect_closest_as_oracle<float>(knn_mesh_oracle::open_box(), backend, 3);
    expect_closest_as_oracle<float>(soup(), backend, 4);
    expect_closest_as_oracle<float>(one_triangle(), backend, 5);
  }
}

TEST(MeshClosest, AsTheOracleFloat64) {
  for (int backend : backends()) {
    SCOPED_TRACE(backend);
    expect_closest_as_oracle<double>(knn_mesh_oracle::icosphere(2), backend, 11);
    expect_closest_as_oracle<double>(knn_mesh_oracle::cube(), backend, 12);
    expect_closest_as_oracle<double>(knn_mesh_oracle::open_box(), backend, 13);
    expect_closest_as_oracle<double>(soup(), backend, 14);
    expect_closest_as_oracle<double>(one_triangle(), backend, 15);
  }
}

// Beyond max_distance: id -1, +infinity, NaN; within it, the oracle's.
template <class S>
void expect_max_distance(int backend) {
  const Mesh m = rounded<S>(knn_mesh_oracle::cube());
  const knn_options o = options(backend);
  MeshHandle h;
  ASSERT_EQ(build(vertices_of<S>(m), m.triangles, &o, &h.mesh), KNN_OK);
  const std::vector<S> q = probe_points<S>(m, 400, 3, 21);
  const size_t n = q.size() / 3;
  const S limit = S(0.75);
  std::vector<int32_t> ids(n);
  std::vector<S> sq(n), c(3 * n), w(3 * n), sd(n);
  ASSERT_EQ(mesh_closest(h.mesh, q.data(), static_cast<int64_t>(n), limit, ids.data(), sq.data(),
                         c.data(), w.data(), &o),
            KNN_OK);
  ASSERT_EQ(mesh_signed_distance(h.mesh, q.data(), static_cast<int64_t>(n), limit, sd.data(),
                                 nullptr, &o),
            KNN_OK);
  int beyond = 0, within = 0;
  for (size_t i = 0; i < n; ++i) {
    const Real best = knn_mesh_oracle::nearest(m, point(q, i)).sq;
    const Real limit2 = static_cast<Real>(limit) * limit;
    if (std::fabs(best - limit2) < 1e-3L) continue;  // at the limit: either is right
    if (best > limit2) {
      ++beyond;
      EXPECT_EQ(ids[i], -1);
      EXPECT_EQ(sq[i], std::numeric_limits<S>::infinity());
      EXPECT_EQ(sd[i], std::numeric_limits<S>::infinity());
      for (int d = 0; d < 3; ++d) EXPECT_TRUE(std::isnan(c[3 * i + d]) && std::isnan(w[3 * i + d]));
    } else {
      ++within;
      ASSERT_TRUE(matches_oracle<S>(m, point(q, i), ids[i], sq[i], &c[3 * i], &w[3 * i]));
    }
  }
  EXPECT_GT(beyond, 50);
  EXPECT_GT(within, 50);
}

TEST(MeshClosest, MaxDistance) {
  for (int backend : backends()) {
    expect_max_distance<float>(backend);
    expect_max_distance<double>(backend);
  }
}

// Signs against the shape's own inside: a point of the cube is inside when
// every coordinate lies within +-1; the icosphere (inscribed in the unit
// sphere, its faces beyond 0.95 from the centre) holds |p| < 0.9 and not
// |p| > 1. The open box takes its sign from the winding number: inside near
// its bottom, outside beyond its walls.
template <class S>
void expect_signs(const Mesh& exact, int backend, int expected_closed,
                  const std::function<int(P3)>& side) {
  const Mesh m = rounded<S>(exact);
  const knn_options o = options(backend);
  MeshHandle h;
  ASSERT_EQ(build(vertices_of<S>(m), m.triangles, &o, &h.mesh), KNN_OK);
  int closed = -1;
  ASSERT_EQ(knn_mesh_info(h.mesh, nullptr, nullptr, nullptr, nullptr, &closed), KNN_OK);
  EXPECT_EQ(closed, expected_closed);
  const std::vector<S> q = probe_points<S>(m, 2000, 2, 31);
  const size_t n = q.size() / 3;
  std::vector<S> sd(n);
  std::vector<int32_t> ids(n);
  ASSERT_EQ(mesh_signed_distance(h.mesh, q.data(), static_cast<int64_t>(n),
                                 std::numeric_limits<S>::infinity(), sd.data(), ids.data(), &o),
            KNN_OK);
  int inside = 0, outside = 0;
  for (size_t i = 0; i < n; ++i) {
    const knn_mesh_oracle::Nearest best = knn_mesh_oracle::nearest(m, point(q, i));
    const Real distance = std::sqrt(best.sq);
    ASSERT_NEAR(std::fabs(static_cast<Real>(sd[i])), distance, tol<S>() * 4) << "point " << i;
    const int expected = side(point(q, i));
    if (expected == 0) continue;
    if (expected < 0) ++inside;
    if (expected > 0) ++outside;
    EXPECT_EQ(sd[i] < 0 ? -1 : 1, expected)
        << "point " << i << " (" << q[3 * i] << ", " << q[3 * i + 1] << ", " << q[3 * i + 2] << ")";
  }
  EXPECT_GT(inside, 20);
  EXPECT_GT(outside, 20);
}

int cube_side(P3 p) {
  const Real m = std::max({std::fabs(p.x), std::fabs(p.y), std::fabs(p.z)});
  return m < 0.999L ? -1 : m > 1.001L ? 1 : 0;
}
int sphere_side(P3 p) {
  const Real r = std::sqrt(norm2(p));
  return r < 0.9L ? -1 : r > 1.001L ? 1 : 0;
}
// The open box (top at z = 1 removed): w >= 1/2 well inside its lower part,
// w < 1/2 outside its walls and bottom. Points near the opening are left out.
int open_box_side(P3 p) {
  const int cube = cube_side(p);
  if (cube < 0 && p.z < 0.2L) return -1;
  if (cube > 0 && p.z < 0.9L) return 1;
  return 0;
}

TEST(MeshSignedDistance, SignsOfClosedAndOpenMeshes) {
  for (int backend : backends()) {
    SCOPED_TRACE(backend);
    expect_signs<float>(knn_mesh_oracle::cube(), backend, 1, cube_side);
    expect_signs<double>(knn_mesh_oracle::cube(), backend, 1, cube_side);
    expect_signs<float>(knn_mesh_oracle::icosphere(2), backend, 1, sphere_side);
    expect_signs<double>(knn_mesh_oracle::icosphere(2), backend, 1, sphere_side);
    expect_signs<float>(knn_mesh_oracle::open_box(), backend, 0, open_box_side);
    expect_signs<double>(knn_mesh_oracle::open_box(), backend, 0, open_box_side);
    // One triangle of the bottom face turned against its neighbours: not
    // oriented, so the winding number decides; it still finds the inside
    // away from that face (there w >= 1 - 2 * 0.16).
    Mesh flipped = knn_mesh_oracle::cube();
    std::swap(flipped.triangles[1], flipped.triangles[2]);
    expect_signs<double>(flipped, backend, 0, [](P3 p) { return p.z > -0.3L ? cube_side(p) : 0; });
  }
}

TEST(MeshInfo, CountsPrecisionBackendAndClosedness) {
  for (int backend : backends()) {
    const knn_options o = options(backend);
    struct Case {
      Mesh mesh;
      int closed;
    };
    Mesh degenerate = knn_mesh_oracle::cube();
    degenerate.triangles.insert(degenerate.triangles.end(), {0, 0, 1});  // a repeated index
    Mesh doubled = knn_mesh_oracle::cube();                              // an edge run 4 times
    doubled.triangles.insert(doubled.triangles.end(), doubled.triangles.begin(),
                             doubled.triangles.begin() + 6);
    const std::vector<Case> cases = {{knn_mesh_oracle::cube(), 1},
                                     {knn_mesh_oracle::icosphere(1), 1},
                                     {knn_mesh_oracle::open_box(), 0},
                                     {one_triangle(), 0},
                                     {degenerate, 0},
                                     {doubled, 0}};
    for (const Case& c : cases) {
      MeshHandle h32, h64;
      ASSERT_EQ(build(vertices_of<float>(c.mesh), c.mesh.triangles, &o, &h32.mesh), KNN_OK);
      ASSERT_EQ(build(c.mesh.vertices, c.mesh.triangles, &o, &h64.mesh), KNN_OK);
      for (const knn_mesh* h : {h32.mesh, h64.mesh}) {
        int64_t nv = -1, nt = -1;
        int scalar = -1, got_backend = -1, closed = -1;
        ASSERT_EQ(knn_mesh_info(h, &nv, &nt, &scalar, &got_backend, &closed), KNN_OK);
        EXPECT_EQ(nv, c.mesh.n_vertices());
        EXPECT_EQ(nt, c.mesh.n_triangles());
        EXPECT_EQ(scalar, h == h64.mesh ? KNN_SCALAR_FLOAT64 : KNN_SCALAR_FLOAT32);
        EXPECT_EQ(got_backend, backend);
        EXPECT_EQ(closed, c.closed);
        EXPECT_EQ(knn_mesh_info(h, nullptr, nullptr, nullptr, nullptr, nullptr), KNN_OK);
      }
    }
  }
}

// ---- The deviation report ----------------------------------------------------

// The report's definitions (include/knn_gpgpu_mesh.h) over per-point signed
// distances, computed here.
struct ExpectedReport {
  knn_deviation_report r{};
  std::vector<double> percentiles;
  std::vector<int64_t> bins;
};

template <class S>
ExpectedReport expected_report(const std::vector<S>& signed_distances, double t,
                               const std::vector<double>& percentiles,
                               const std::vector<double>& edges) {
  ExpectedReport e;
  std::vector<double> d;
  for (S v : signed_distances)
    if (v != std::numeric_limits<S>::infinity()) d.push_back(static_cast<double>(v));
  std::sort(d.begin(), d.end());
  const int64_t count = static_cast<int64_t>(d.size());
  e.r.n_points = static_cast<int64_t>(signed_distances.size());
  e.r.n_measured = count;
  e.r.n_beyond = e.r.n_points - count;
  const size_t n_bins = edges.empty() ? 0 : edges.size() - 1;
  e.bins.assign(n_bins, 0);
  double sum = 0, squares = 0;
  for (int64_t first = 0; first < count; first += 4096) {
    double block = 0, block_squares = 0;
    for (int64_t i = first; i < std::min<int64_t>(count, first + 4096); ++i) {
      block += d[i];
      block_squares += d[i] * d[i];
    }
    sum += block;
    squares += block_squares;
  }
  for (double v : d) {
    e.r.n_within_tolerance += -t <= v && v <= t;
    e.r.n_above_tolerance += v > t;
    e.r.n_below_tolerance += v < -t;
    if (n_bins == 0) continue;
    if (v < edges.front()) {
      ++e.r.n_below_bins;
    } else if (v > edges.back()) {
      ++e.r.n_above_bins;
    } else {
      size_t b = 0;
      while (b + 1 < n_bins && v >= edges[b + 1]) ++b;
      ++e.bins[b];
    }
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  e.r.min = count ? d.front() : nan;
  e.r.max = count ? d.back() : nan;
  e.r.mean = count ? sum / count : nan;
  e.r.rms = count ? std::sqrt(squares / count) : nan;
  for (double p : percentiles) {
    if (count == 0) {
      e.percentiles.push_back(nan);
      continue;
    }
    int64_t at = static_cast<int64_t>(std::ceil(p / 100 * count)) - 1;
    at = std::max<int64_t>(0, std::min<int64_t>(count - 1, at));
    e.percentiles.push_back(d[static_cast<size_t>(at)]);
  }
  return e;
}

template <class S>
void expect_report(int backend) {
  const Mesh m = rounded<S>(knn_mesh_oracle::icosphere(2));
  const knn_options o = options(backend);
  MeshHandle h;
  ASSERT_EQ(build(vertices_of<S>(m), m.triangles, &o, &h.mesh), KNN_OK);
  const std::vector<S> q = probe_points<S>(m, 6000, 2, 41);
  const int64_t n = static_cast<int64_t>(q.size() / 3);
  const S limit = S(1);
  std::vector<S> per_point(n);
  ASSERT_EQ(mesh_signed_distance(h.mesh, q.data(), n, limit, per_point.data(), nullptr, &o),
            KNN_OK);
  const std::vector<double> percentiles = {0, 12.5, 33.3, 50, 90, 99.9, 100};
  const std::vector<double> edges = {-1, -0.5, -0.1, 0, 0.1, 0.5};
  const double t = 0.1;
  const ExpectedReport e = expected_report(per_point, t, percentiles, edges);
  ASSERT_GT(e.r.n_beyond, 100);
  ASSERT_GT(e.r.n_above_bins, 10);
  std::vector<double> pv(percentiles.size());
  std::vector<int64_t> bins(edges.size() - 1);
  std::vector<S> sd(n);
  knn_deviation_report r;
  std::memset(&r, 0xA5, sizeof r);
  r.struct_size = sizeof r;
  ASSERT_EQ(mesh_report(h.mesh, q.data(), n, limit, t, percentiles.data(),
                        static_cast<int>(percentiles.size()), pv.data(), edges.data(),
                        static_cast<int>(bins.size()), bins.data(), sd.data(), &r, &o),
            KNN_OK)
      << knn_last_error();
  EXPECT_EQ(0, std::memcmp(sd.data(), per_point.data(), sd.size() * sizeof(S)));
  EXPECT_EQ(r.n_points, e.r.n_points);
  EXPECT_EQ(r.n_measured, e.r.n_measured);
  EXPECT_EQ(r.n_beyond, e.r.n_beyond);
  EXPECT_EQ(r.n_within_tolerance, e.r.n_within_tolerance);
  EXPECT_EQ(r.n_above_tolerance, e.r.n_above_tolerance);
  EXPECT_EQ(r.n_below_tolerance, e.r.n_below_tolerance);
  EXPECT_EQ(r.n_below_bins, e.r.n_below_bins);
  EXPECT_EQ(r.n_above_bins, e.r.n_above_bins);
  EXPECT_EQ(r.min, e.r.min);
  EXPECT_EQ(r.max, e.r.max);
  EXPECT_EQ(r.mean, e.r.mean);
  EXPECT_EQ(r.rms, e.r.rms);
  for (size_t i = 0; i < percentiles.size(); ++i)
    EXPECT_EQ(pv[i], e.percentiles[i]) << "percentile " << percentiles[i];
  EXPECT_EQ(bins, e.bins);

  // Without the per-point values, nothing but the report; the same report.
  knn_deviation_report again;
  again.struct_size = sizeof again;
  ASSERT_EQ(mesh_report(h.mesh, q.data(), n, limit, t, nullptr, 0, nullptr, nullptr, 0, nullptr,
                        nullptr, &again, &o),
            KNN_OK);
  EXPECT_EQ(again.n_measured, e.r.n_measured);
  EXPECT_EQ(again.n_above_bins, 0);  // no bins asked for
  EXPECT_EQ(again.mean, e.r.mean);

  // An older, shorter struct: the fields past struct_size are not written.
  knn_deviation_report shorter;
  std::memset(&shorter, 0xA5, sizeof shorter);
  shorter.struct_size = offsetof(knn_deviation_report, n_beyond);
  ASSERT_EQ(mesh_report(h.mesh, q.data(), n, limit, t, nullptr, 0, nullptr, nullptr, 0, nullptr,
                        nullptr, &shorter, &o),
            KNN_OK);
  EXPECT_EQ(shorter.n_points, n);
  EXPECT_EQ(shorter.n_measured, e.r.n_measured);
  const unsigned char* past =
      reinterpret_cast<const unsigned char*>(&shorter) + shorter.struct_size;
  EXPECT_TRUE(std::all_of(past, past + (sizeof shorter - shorter.struct_size),
                          [](unsigned char c) { return c == 0xA5; }));

  // No point: NaN statistics, zero counts.
  knn_deviation_report none;
  none.struct_size = sizeof none;
  std::fill(pv.begin(), pv.end(), 7.0);
  std::fill(bins.begin(), bins.end(), 7);
  ASSERT_EQ(mesh_report(h.mesh, q.data(), 0, limit, t, percentiles.data(),
                        static_cast<int>(percentiles.size()), pv.data(), edges.data(),
                        static_cast<int>(bins.size()), bins.data(), nullptr, &none, &o),
            KNN_OK);
  EXPECT_EQ(none.n_points, 0);
  EXPECT_EQ(none.n_measured, 0);
  EXPECT_TRUE(std::isnan(none.min) && std::isnan(none.mean) && std::isnan(none.rms));
  EXPECT_TRUE(std::all_of(pv.begin(), pv.end(), [](double v) { return std::isnan(v); }));
  EXPECT_TRUE(std::all_of(bins.begin(), bins.end(), [](int64_t b) { return b == 0; }));
}

TEST(MeshDeviationReport, AsItsDefinitions) {
  for (int backend : backends()) {
    SCOPED_TRACE(backend);
    expect_report<float>(backend);
    expect_report<double>(backend);
  }
}

// ---- Refusals ----------------------------------------------------------------

::testing::AssertionResult refused(int status, int expected, const std::string& call,
                                   const std::string& words) {
  const std::string message = knn_last_error();
  if (status != expected)
    return ::testing::AssertionFailure()
           << "status " << status << ", want " << expected << ": " << message;
  if (message.rfind(call + ": ", 0) != 0 || message.find(words) == std::string::npos)
    return ::testing::AssertionFailure()
           << "message \"" << message << "\" lacks \"" << call << ": ... " << words << "\"";
  return ::testing::AssertionSuccess();
}

TEST(MeshBadInput, BuildRefusals) {
  const Mesh cube = knn_mesh_oracle::cube();
  const std::vector<float> v = vertices_of<float>(cube);
  const std::vector<int32_t>& t = cube.triangles;
  const knn_options o = options(KNN_BACKEND_OPENMP);
  const int64_t nv = cube.n_vertices(), nt = cube.n_triangles();
  const std::string call = "knn_mesh_build";
  auto attempt = [&](const float* vv, int64_t n_v, const int32_t* tt, int64_t n_t,
                     const knn_options* opt) {
    knn_mesh* out = reinterpret_cast<knn_mesh*>(&out);
    const int status = knn_mesh_build(vv, n_v, tt, n_t, opt, &out);
    EXPECT_EQ(out, nullptr);
    return status;
  };
  constexpr int kInvalid = KNN_ERR_INVALID_ARGUMENT;
  EXPECT_TRUE(refused(attempt(nullptr, nv, t.data(), nt, &o), kInvalid, call,
                      "vertices is NULL while n_vertices is 8"));
  EXPECT_TRUE(refused(attempt(v.data(), nv, nullptr, nt, &o), kInvalid, call,
                      "triangles is NULL while n_triangles is 12"));
  EXPECT_TRUE(refused(attempt(v.data(), -1, t.data(), nt, &o), kInvalid, call, "n_vertices is -1"));
  EXPECT_TRUE(
      refused(attempt(v.data(), nv, t.data(), -1, &o), kInvalid, call, "n_triangles is -1"));
  EXPECT_TRUE(refused(attempt(v.data(), nv, t.data(), 0, &o), kInvalid, call, "n_triangles is 0"));
  EXPECT_TRUE(refused(attempt(nullptr, 0, nullptr, 0, &o), kInvalid, call, "n_triangles is 0"));
  // Counts beyond the limits: refused before the arrays are read.
  EXPECT_TRUE(refused(attempt(v.data(), nv, t.data(), int64_t{KNN_MESH_MAX_TRIANGLES} + 1, &o),
                      kInvalid, call, "KNN_MESH_MAX_TRIANGLES"));
  EXPECT_TRUE(refused(attempt(v.data(), int64_t{INT32_MAX} + 1, t.data(), nt, &o), kInvalid, call,
                      "n_vertices is 2147483648"));
  std::vector<int32_t> bad = t;
  bad[3 * 5 + 2] = 8;
  EXPECT_TRUE(refused(attempt(v.data(), nv, bad.data(), nt, &o), kInvalid, call,
                      "triangle 5 has vertex index 8 (n_vertices is 8)"));
  bad[3 * 5 + 2] = t[3 * 5 + 2];
  bad[3 * 2] = -3;
  EXPECT_TRUE(refused(attempt(v.data(), nv, bad.data(), nt, &o), kInvalid, call,
                      "triangle 2 has vertex index -3"));
  std::vector<float> w = v;
  w[3 * 7 + 1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(refused(attempt(w.data(), nv, t.data(), nt, &o), KNN_ERR_NONFINITE_INPUT, call,
                      "vertex 7 has a NaN coordinate (dimension 1)"));
  w[3 * 7 + 1] = -std::numeric_limits<float>::infinity();
  EXPECT_TRUE(refused(attempt(w.data(), nv, t.data(), nt, &o), KNN_ERR_NONFINITE_INPUT, call,
                      "vertex 7 has an infinite coordinate (dimension 1)"));
  w[3 * 7 + 1] = 1e30f;
  EXPECT_TRUE(refused(attempt(w.data(), nv, t.data(), nt, &o), kInvalid, call,
                      "vertex 7 has coordinate 1e+30 (dimension 1)"));
  std::vector<double> w64 = cube.vertices;
  w64[3 * 4 + 2] = 1e200;
  knn_mesh* out = reinterpret_cast<knn_mesh*>(&out);
  EXPECT_TRUE(refused(knn_mesh_build_f64(w64.data(), nv, t.data(), nt, &o, &out), kInvalid,
                      "knn_mesh_build_f64", "vertex 4 has coordinate 1e+200 (dimension 2)"));
  EXPECT_EQ(out, nullptr);
  EXPECT_TRUE(refused(knn_mesh_build(v.data(), nv, t.data(), nt, &o, nullptr), kInvalid, call,
                      "out is NULL"));
  knn_options bad_options = o;
  bad_options.backend = 7;
  EXPECT_TRUE(
      refused(attempt(v.data(), nv, t.data(), nt, &bad_options), kInvalid, call, "backend"));
  bad_options = o;
  bad_options.struct_size = 4;
  EXPECT_TRUE(refused(attempt(v.data(), nv, t.data(), nt, &bad_options), kInvalid, call,
                      "opt->struct_size is 4"));
  if (cuGetDeviceCount() == 0) {
    const knn_options cuda = options(KNN_BACKEND_CUDA);
    EXPECT_TRUE(refused(attempt(v.data(), nv, t.data(), nt, &cuda), KNN_ERR_NO_DEVICE, call,
                        "no usable CUDA device"));
  }
  // The next call works.
  MeshHandle h;
  EXPECT_EQ(build(v, t, &o, &h.mesh), KNN_OK);
}

// Every refusal of a query leaves its outputs as they were.
template <class S>
void expect_query_refusals(int backend) {
  const Mesh cube = knn_mesh_oracle::cube();
  const knn_options o = options(backend);
  MeshHandle h, other;
  ASSERT_EQ(build(vertices_of<S>(cube), cube.triangles, &o, &h.mesh), KNN_OK);
  const bool wide = sizeof(S) == 8;
  if (wide)
    ASSERT_EQ(build(vertices_of<float>(cube), cube.triangles, &o, &other.mesh), KNN_OK);
  else
    ASSERT_EQ(build(cube.vertices, cube.triangles, &o, &other.mesh), KNN_OK);
  const std::string suffix = wide ? "_f64" : "";
  const std::string c_call = "knn_mesh_closest" + suffix,
                    s_call = "knn_mesh_signed_distance" + suffix,
                    r_call = "knn_mesh_deviation_report" + suffix;
  std::vector<S> q = {0.5, 0.25, 3, -2, 0, 0, 0.1, 0.2, 0.3};
  const int64_t m = 3;
  std::vector<int32_t> ids(m, 77);
  std::vector<S> sq(m, S(77)), c(3 * m, S(77)), w(3 * m, S(77)), sd(m, S(77));
  std::vector<double> pv(2, 77.0);
  std::vector<int64_t> bins(2, 77);
  knn_deviation_report r;
  std::memset(&r, 0x5A, sizeof r);
  r.struct_size = sizeof r;
  const knn_deviation_report r_before = r;
  const double p[2] = {10, 90}, e[3] = {-1, 0, 1};
  const S inf = std::numeric_limits<S>::infinity(), nan = std::numeric_limits<S>::quiet_NaN();
  auto untouched = [&] {
    return std::all_of(ids.begin(), ids.end(), [](int32_t i) { return i == 77; }) &&
           std::all_of(sq.begin(), sq.end(), [](S v) { return v == S(77); }) &&
           std::all_of(c.begin(), c.end(), [](S v) { return v == S(77); }) &&
           std::all_of(w.begin(), w.end(), [](S v) { return v == S(77); }) &&
           std::all_of(sd.begin(), sd.end(), [](S v) { return v == S(77); }) &&
           std::all_of(pv.begin(), pv.end(), [](double v) { return v == 77.0; }) &&
           std::all_of(bins.begin(), bins.end(), [](int64_t v) { return v == 77; }) &&
           std::memcmp(&r, &r_before, sizeof r) == 0;
  };
  auto closest_with = [&](const knn_mesh* mesh, const S* points, int64_t count, S limit,
                          int32_t* id, const knn_options* opt) {
    return mesh_closest(mesh, points, count, limit, id, sq.data(), c.data(), w.data(), opt);
  };
  auto signed_with = [&](const knn_mesh* mesh, const S* points, int64_t count, S limit, S* out) {
    return mesh_signed_distance(mesh, points, count, limit, out, ids.data(), &o);
  };
  auto report_with = [&](S limit, double t, const double* pp, int np, double* values,
                         const double* ee, int nb, int64_t* counts, knn_deviation_report* rr) {
    return mesh_report(h.mesh, q.data(), m, limit, t, pp, np, values, ee, nb, counts, sd.data(), rr,
                       &o);
  };
  constexpr int kInvalid = KNN_ERR_INVALID_ARGUMENT;
#define EXPECT_REFUSED(status, code, call, words)  \
  EXPECT_TRUE(refused(status, code, call, words)); \
  EXPECT_TRUE(untouched())
  EXPECT_REFUSED(closest_with(nullptr, q.data(), m, inf, ids.data(), &o), kInvalid, c_call,
                 "mesh is NULL");
  EXPECT_REFUSED(closest_with(other.mesh, q.data(), m, inf, ids.data(), &o), kInvalid, c_call,
                 wide ? "call knn_mesh_closest instead" : "call knn_mesh_closest_f64 instead");
  EXPECT_REFUSED(closest_with(h.mesh, q.data(), -1, inf, ids.data(), &o), kInvalid, c_call,
                 "m is -1");
  EXPECT_REFUSED(closest_with(h.mesh, nullptr, m, inf, ids.data(), &o), kInvalid, c_call,
                 "points is NULL while m is 3");
  EXPECT_REFUSED(closest_with(h.mesh, q.data(), m, inf, nullptr, &o), kInvalid, c_call,
                 "triangle_ids is NULL while m is 3");
  EXPECT_REFUSED(closest_with(h.mesh, q.data(), m, S(-1), ids.data(), &o), kInvalid, c_call,
                 "max_distance is -1");
  EXPECT_REFUSED(closest_with(h.mesh, q.data(), m, nan, ids.data(), &o), kInvalid, c_call,
                 "max_distance is nan");
  EXPECT_REFUSED(closest_with(h.mesh, q.data(), int64_t{1} << 62, inf, ids.data(), &o), kInvalid,
                 c_call, "m * 3");
  knn_options bad_options = o;
  bad_options.threads = -2;
  EXPECT_REFUSED(closest_with(h.mesh, q.data(), m, inf, ids.data(), &bad_options), kInvalid, c_call,
                 "threads");
  std::vector<S> bad_points = q;
  bad_points[3 * 2 + 2] = nan;
  EXPECT_REFUSED(closest_with(h.mesh, bad_points.data(), m, inf, ids.data(), &o),
                 KNN_ERR_NONFINITE_INPUT, c_call, "point 2 has a NaN coordinate (dimension 2)");
  bad_points[3 * 2 + 2] = S(wide ? 1e200 : 1e30);
  EXPECT_REFUSED(closest_with(h.mesh, bad_points.data(), m, inf, ids.data(), &o), kInvalid, c_call,
                 "point 2 has coordinate");
  EXPECT_REFUSED(signed_with(h.mesh, q.data(), m, inf, nullptr), kInvalid, s_call,
                 "signed_distances is NULL while m is 3");
  EXPECT_REFUSED(signed_with(h.mesh, bad_points.data(), m, inf, sd.data()), kInvalid, s_call,
                 "point 2");
  EXPECT_REFUSED(signed_with(other.mesh, q.data(), m, inf, sd.data()), kInvalid, s_call, "instead");
  EXPECT_REFUSED(report_with(inf, -0.5, p, 2, pv.data(), e, 2, bins.data(), &r), kInvalid, r_call,
                 "tolerance is -0.5");
  EXPECT_REFUSED(report_with(inf, std::nan(""), p, 2, pv.data(), e, 2, bins.data(), &r), kInvalid,
                 r_call, "tolerance is nan");
  EXPECT_REFUSED(report_with(S(-1), 0, p, 2, pv.data(), e, 2, bins.data(), &r), kInvalid, r_call,
                 "max_distance is -1");
  EXPECT_REFUSED(report_with(inf, 0, p, -1, pv.data(), e, 2, bins.data(), &r), kInvalid, r_call,
                 "n_percentiles is -1");
  EXPECT_REFUSED(report_with(inf, 0, nullptr, 2, pv.data(), e, 2, bins.data(), &r), kInvalid,
                 r_call, "percentiles is NULL while n_percentiles is 2");
  EXPECT_REFUSED(report_with(inf, 0, p, 2, nullptr, e, 2, bins.data(), &r), kInvalid, r_call,
                 "percentile_values is NULL");
  const double p_bad[2] = {10, 100.5}, p_nan[2] = {std::nan(""), 1};
  EXPECT_REFUSED(report_with(inf, 0, p_bad, 2, pv.data(), e, 2, bins.data(), &r), kInvalid, r_call,
                 "percentiles[1] is 100.5");
  EXPECT_REFUSED(report_with(inf, 0, p_nan, 2, pv.data(), e, 2, bins.data(), &r), kInvalid, r_call,
                 "percentiles[0] is nan");
  EXPECT_REFUSED(report_with(inf, 0, p, 2, pv.data(), e, -3, bins.data(), &r), kInvalid, r_call,
                 "n_bins is -3");
  EXPECT_REFUSED(report_with(inf, 0, p, 2, pv.data(), nullptr, 2, bins.data(), &r), kInvalid,
                 r_call, "bin_edges is NULL");
  EXPECT_REFUSED(report_with(inf, 0, p, 2, pv.data(), e, 2, nullptr, &r), kInvalid, r_call,
                 "bin_counts is NULL");
  const double e_flat[3] = {-1, 0, 0}, e_down[3] = {1, 0, 2},
               e_inf[3] = {-std::numeric_limits<double>::infinity(), 0, 1};
  EXPECT_REFUSED(report_with(inf, 0, p, 2, pv.data(), e_flat, 2, bins.data(), &r), kInvalid, r_call,
                 "bin_edges[2] is 0, not above bin_edges[1] = 0");
  EXPECT_REFUSED(report_with(inf, 0, p, 2, pv.data(), e_down, 2, bins.data(), &r), kInvalid, r_call,
                 "bin_edges[1] is 0, not above");
  EXPECT_REFUSED(report_with(inf, 0, p, 2, pv.data(), e_inf, 2, bins.data(), &r), kInvalid, r_call,
                 "bin_edges[0] is -inf");
  EXPECT_REFUSED(report_with(inf, 0, p, 2, pv.data(), e, 2, bins.data(), nullptr), kInvalid, r_call,
                 "report is NULL");
  r.struct_size = offsetof(knn_deviation_report, n_points) + 4;
  const knn_deviation_report small_before = r;
  EXPECT_TRUE(refused(report_with(inf, 0, p, 2, pv.data(), e, 2, bins.data(), &r), kInvalid, r_call,
                      "report->struct_size is 12"));
  EXPECT_EQ(std::memcmp(&r, &small_before, sizeof r), 0);
#undef EXPECT_REFUSED
  // And the next call answers.
  ASSERT_EQ(closest_with(h.mesh, q.data(), m, inf, ids.data(), &o), KNN_OK);
  for (int64_t i = 0; i < m; ++i)
    EXPECT_TRUE(matches_oracle<S>(rounded<S>(cube), point(q, static_cast<size_t>(i)), ids[i], sq[i],
                                  &c[3 * i], &w[3 * i]));
}

TEST(MeshBadInput, QueryRefusalsLeaveOutputsUntouched) {
  for (int backend : backends()) {
    SCOPED_TRACE(backend);
    expect_query_refusals<float>(backend);
    expect_query_refusals<double>(backend);
  }
}

TEST(MeshBadInput, ZeroPointsAnswerNothing) {
  const Mesh cube = knn_mesh_oracle::cube();
  const knn_options o = options(KNN_BACKEND_OPENMP);
  MeshHandle h;
  ASSERT_EQ(build(vertices_of<float>(cube), cube.triangles, &o, &h.mesh), KNN_OK);
  EXPECT_EQ(knn_mesh_closest(h.mesh, nullptr, 0, 1.0f, nullptr, nullptr, nullptr, nullptr, &o),
            KNN_OK);
  EXPECT_EQ(knn_mesh_signed_distance(h.mesh, nullptr, 0, 1.0f, nullptr, nullptr, &o), KNN_OK);
}

TEST(MeshHandles, StaleAndForeignHandlesAreRefused) {
  const Mesh cube = knn_mesh_oracle::cube();
  const knn_options o = options(KNN_BACKEND_OPENMP);
  knn_mesh* mesh = nullptr;
  ASSERT_EQ(build(vertices_of<float>(cube), cube.triangles, &o, &mesh), KNN_OK);
  EXPECT_EQ(knn_mesh_free(nullptr), KNN_OK);
  ASSERT_EQ(knn_mesh_free(mesh), KNN_OK);
  EXPECT_TRUE(
      refused(knn_mesh_free(mesh), KNN_ERR_INVALID_ARGUMENT, "knn_mesh_free", "not a live mesh"));
  const float q[3] = {0, 0, 0};
  int32_t id = 77;
  EXPECT_TRUE(refused(knn_mesh_closest(mesh, q, 1, 1.0f, &id, nullptr, nullptr, nullptr, &o),
                      KNN_ERR_INVALID_ARGUMENT, "knn_mesh_closest", "not a live mesh"));
  EXPECT_EQ(id, 77);
  int64_t n = -1;
  EXPECT_TRUE(refused(knn_mesh_info(mesh, &n, nullptr, nullptr, nullptr, nullptr),
                      KNN_ERR_INVALID_ARGUMENT, "knn_mesh_info", "not a live mesh"));
  EXPECT_EQ(n, -1);
  size_t bytes = 0;
  EXPECT_TRUE(refused(knn_mesh_serialized_size(mesh, &bytes), KNN_ERR_INVALID_ARGUMENT,
                      "knn_mesh_serialized_size", "not a live mesh"));
  int not_a_mesh = 0;
  EXPECT_TRUE(refused(knn_mesh_free(reinterpret_cast<knn_mesh*>(&not_a_mesh)),
                      KNN_ERR_INVALID_ARGUMENT, "knn_mesh_free", "not a live mesh"));
}

// A cancelled call: the build returns no mesh; a query writes every output
// with the "beyond" values (the failure comes while the engine runs).
TEST(MeshCancel, CancelledCallsLeaveNoMeshAndBeyondValues) {
  const Mesh m = knn_mesh_oracle::icosphere(3);
  const std::vector<float> v = vertices_of<float>(m);
  const knn_options o = options(KNN_BACKEND_OPENMP);
  MeshHandle h;
  ASSERT_EQ(build(v, m.triangles, &o, &h.mesh), KNN_OK);
  const std::vector<float> q = probe_points<float>(m, 2000, 2, 71);
  const int64_t n = static_cast<int64_t>(q.size() / 3);
  std::vector<int32_t> ids(n, 77);
  std::vector<float> sq(n, 77.0f), c(3 * n, 77.0f);
  volatile int flag = 1;
  knn_set_cancel_flag(&flag);
  knn_mesh* out = reinterpret_cast<knn_mesh*>(&out);
  const int built = build(v, m.triangles, &o, &out);
  const int answered =
      knn_mesh_closest(h.mesh, q.data(), n, INFINITY, ids.data(), sq.data(), c.data(), nullptr, &o);
  knn_set_cancel_flag(nullptr);
  EXPECT_EQ(built, KNN_ERR_CANCELLED);
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(answered, KNN_ERR_CANCELLED);
  EXPECT_TRUE(std::all_of(ids.begin(), ids.end(), [](int32_t i) { return i == -1; }));
  EXPECT_TRUE(std::all_of(sq.begin(), sq.end(), [](float d) { return std::isinf(d); }));
  EXPECT_TRUE(std::all_of(c.begin(), c.end(), [](float x) { return std::isnan(x); }));
  // Then the next call answers.
  EXPECT_EQ(
      knn_mesh_closest(h.mesh, q.data(), n, INFINITY, ids.data(), sq.data(), c.data(), nullptr, &o),
      KNN_OK);
  const Mesh exact = rounded<float>(m);
  for (int64_t i = 0; i < n; i += 97)
    EXPECT_NEAR(sq[i], static_cast<double>(knn_mesh_oracle::nearest(exact, point(q, i)).sq), 1e-4)
        << "point " << i;
}

// ---- Serialization -------------------------------------------------------------

std::vector<unsigned char> serialized(const knn_mesh* mesh) {
  size_t bytes = 0;
  EXPECT_EQ(knn_mesh_serialized_size(mesh, &bytes), KNN_OK);
  std::vector<unsigned char> buffer(bytes);
  EXPECT_EQ(knn_mesh_serialize(mesh, buffer.data(), buffer.size()), KNN_OK) << knn_last_error();
  return buffer;
}

template <class S>
void expect_round_trip(const Mesh& exact, int backend) {
  const Mesh m = rounded<S>(exact);
  const knn_options o = options(backend);
  MeshHandle saved, loaded;
  ASSERT_EQ(build(vertices_of<S>(m), m.triangles, &o, &saved.mesh), KNN_OK);
  const std::vector<unsigned char> bytes = serialized(saved.mesh);
  EXPECT_EQ(bytes.size(), 64 + m.vertices.size() * sizeof(S) + m.triangles.size() * 4 + 4);
  for (int load_backend : backends()) {
    const knn_options lo = options(load_backend);
    MeshHandle again;
    ASSERT_EQ(knn_mesh_deserialize(bytes.data(), bytes.size(), &lo, &again.mesh), KNN_OK)
        << knn_last_error();
    int64_t nv = -1, nt = -1;
    int scalar = -1, got_backend = -1, closed = -1, closed_saved = -1;
    ASSERT_EQ(knn_mesh_info(again.mesh, &nv, &nt, &scalar, &got_backend, &closed), KNN_OK);
    ASSERT_EQ(knn_mesh_info(saved.mesh, nullptr, nullptr, nullptr, nullptr, &closed_saved), KNN_OK);
    EXPECT_EQ(nv, m.n_vertices());
    EXPECT_EQ(nt, m.n_triangles());
    EXPECT_EQ(scalar, sizeof(S) == 8 ? KNN_SCALAR_FLOAT64 : KNN_SCALAR_FLOAT32);
    EXPECT_EQ(got_backend, load_backend);
    EXPECT_EQ(closed, closed_saved);
    EXPECT_EQ(serialized(again.mesh), bytes);
    // A buffer at an odd address (the arrays unaligned) loads the same mesh.
    std::vector<unsigned char> shifted(bytes.size() + 1);
    std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
    MeshHandle unaligned;
    ASSERT_EQ(knn_mesh_deserialize(shifted.data() + 1, bytes.size(), &lo, &unaligned.mesh), KNN_OK)
        << knn_last_error();
    EXPECT_EQ(serialized(unaligned.mesh), bytes);
    // Bit-identical answers.
    const std::vector<S> q = probe_points<S>(m, 500, 2, 51);
    const int64_t n = static_cast<int64_t>(q.size() / 3);
    std::vector<int32_t> ids_a(n), ids_b(n);
    std::vector<S> sd_a(n), sd_b(n);
    ASSERT_EQ(mesh_signed_distance(saved.mesh, q.data(), n, std::numeric_limits<S>::infinity(),
                                   sd_a.data(), ids_a.data(), &o),
              KNN_OK);
    ASSERT_EQ(mesh_signed_distance(again.mesh, q.data(), n, std::numeric_limits<S>::infinity(),
                                   sd_b.data(), ids_b.data(), &lo),
              KNN_OK);
    EXPECT_EQ(ids_a, ids_b);
    EXPECT_EQ(0, std::memcmp(sd_a.data(), sd_b.data(), sd_a.size() * sizeof(S)));
  }
}

TEST(MeshSerialize, RoundTripAnswersBitIdentically) {
  for (int backend : backends()) {
    expect_round_trip<float>(knn_mesh_oracle::icosphere(2), backend);
    expect_round_trip<double>(knn_mesh_oracle::icosphere(2), backend);
    expect_round_trip<float>(knn_mesh_oracle::open_box(), backend);
    expect_round_trip<double>(soup(), backend);
  }
}

TEST(MeshSerialize, DamagedBuffersAreRefused) {
  const Mesh cube = knn_mesh_oracle::cube();
  const knn_options o = options(KNN_BACKEND_OPENMP);
  MeshHandle h;
  ASSERT_EQ(build(cube.vertices, cube.triangles, &o, &h.mesh), KNN_OK);
  const std::vector<unsigned char> good = serialized(h.mesh);
  const std::string call = "knn_mesh_deserialize";
  auto load = [&](const std::vector<unsigned char>& b, size_t bytes) {
    knn_mesh* out = reinterpret_cast<knn_mesh*>(&out);
    const int status = knn_mesh_deserialize(b.data(), bytes, &o, &out);
    EXPECT_EQ(out, nullptr);
    return status;
  };
  // Every truncation and every single-byte corruption.
  for (size_t bytes = 0; bytes < good.size(); ++bytes)
    ASSERT_TRUE(refused(load(good, bytes), KNN_ERR_INVALID_ARGUMENT, call, "not a valid")) << bytes;
  for (size_t at = 0; at < good.size(); ++at) {
    std::vector<unsigned char> bad = good;
    bad[at] ^= 0x10;
    const int status = load(bad, bad.size());
    ASSERT_TRUE(status == KNN_ERR_INVALID_ARGUMENT || status == KNN_ERR_UNSUPPORTED)
        << at << ": " << status;
  }
  std::vector<unsigned char> longer = good;
  longer.push_back(0);
  EXPECT_TRUE(
      refused(load(longer, longer.size()), KNN_ERR_INVALID_ARGUMENT, call, "trailing bytes"));
  // A framing that checks out around a mesh that does not: the load
  // validates as a build does. The CRC-32C is recomputed here.
  std::vector<unsigned char> hostile = good;
  const size_t triangles_at = 64 + cube.vertices.size() * 8;
  const int32_t out_of_range = 99;
  std::memcpy(&hostile[triangles_at + 4 * 7], &out_of_range, 4);
  auto crc32c = [](const unsigned char* d, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; ++i) {
      c ^= d[i];
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    }
    return c ^ 0xFFFFFFFFu;
  };
  const uint32_t crc = crc32c(hostile.data(), hostile.size() - 4);
  std::memcpy(&hostile[hostile.size() - 4], &crc, 4);
  EXPECT_TRUE(refused(load(hostile, hostile.size()), KNN_ERR_INVALID_ARGUMENT, call,
                      "triangle 2 has vertex index 99"));
  // So is a coordinate (float64 vertices: the cube's build).
  hostile = good;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::memcpy(&hostile[64 + 8 * (3 * 5 + 2)], &nan, 8);
  const uint32_t nan_crc = crc32c(hostile.data(), hostile.size() - 4);
  std::memcpy(&hostile[hostile.size() - 4], &nan_crc, 4);
  EXPECT_TRUE(refused(load(hostile, hostile.size()), KNN_ERR_NONFINITE_INPUT, call,
                      "vertex 5 has a NaN coordinate (dimension 2)"));
  // A cancelled load leaves no mesh, and the next one loads.
  volatile int flag = 1;
  knn_set_cancel_flag(&flag);
  const int cancelled = load(good, good.size());
  knn_set_cancel_flag(nullptr);
  EXPECT_EQ(cancelled, KNN_ERR_CANCELLED);
  MeshHandle fine;
  EXPECT_EQ(knn_mesh_deserialize(good.data(), good.size(), &o, &fine.mesh), KNN_OK);
  // Arguments.
  std::vector<unsigned char> small(good.size() - 1, 0xA5);
  EXPECT_TRUE(refused(knn_mesh_serialize(h.mesh, small.data(), small.size()),
                      KNN_ERR_INVALID_ARGUMENT, "knn_mesh_serialize", "knn_mesh_serialized_size"));
  EXPECT_TRUE(std::all_of(small.begin(), small.end(), [](unsigned char c) { return c == 0xA5; }));
  EXPECT_TRUE(refused(knn_mesh_serialize(h.mesh, nullptr, 100), KNN_ERR_INVALID_ARGUMENT,
                      "knn_mesh_serialize", "buffer is NULL"));
  EXPECT_TRUE(refused(knn_mesh_serialized_size(h.mesh, nullptr), KNN_ERR_INVALID_ARGUMENT,
                      "knn_mesh_serialized_size", "bytes is NULL"));
  EXPECT_TRUE(refused(knn_mesh_deserialize(good.data(), good.size(), &o, nullptr),
                      KNN_ERR_INVALID_ARGUMENT, call, "out is NULL"));
  EXPECT_TRUE(refused(load(good, SIZE_MAX), KNN_ERR_INVALID_ARGUMENT, call, "bytes is"));
}

#if defined(KNN_TEST_WITH_CUDA)
// Points and outputs in device memory: a CUDA mesh answers as with host
// arrays; a mesh on the OpenMP engine refuses them, outputs untouched.
template <class S>
void expect_device_arrays() {
  const Mesh m = rounded<S>(knn_mesh_oracle::icosphere(2));
  const knn_options cuda = options(KNN_BACKEND_CUDA), cpu = options(KNN_BACKEND_OPENMP);
  MeshHandle on_gpu, on_cpu;
  ASSERT_EQ(build(vertices_of<S>(m), m.triangles, &cuda, &on_gpu.mesh), KNN_OK);
  ASSERT_EQ(build(vertices_of<S>(m), m.triangles, &cpu, &on_cpu.mesh), KNN_OK);
  const std::vector<S> q = probe_points<S>(m, 3000, 2, 61);
  const int64_t n = static_cast<int64_t>(q.size() / 3);
  const S limit = S(0.5);
  std::vector<int32_t> ids(n);
  std::vector<S> sq(n), c(3 * n), w(3 * n), sd(n);
  ASSERT_EQ(mesh_closest(on_gpu.mesh, q.data(), n, limit, ids.data(), sq.data(), c.data(), w.data(),
                         &cuda),
            KNN_OK);
  ASSERT_EQ(mesh_signed_distance(on_gpu.mesh, q.data(), n, limit, sd.data(), nullptr, &cuda),
            KNN_OK);
  DeviceArray<S> d_q(q), d_sq(n), d_c(3 * n), d_w(3 * n), d_sd(n);
  DeviceArray<int32_t> d_ids(n);
  ASSERT_EQ(mesh_closest(on_gpu.mesh, d_q.get(), n, limit, d_ids.get(), d_sq.get(), d_c.get(),
                         d_w.get(), &cuda),
            KNN_OK)
      << knn_last_error();
  EXPECT_EQ(d_ids.to_host(n), ids);
  auto same_bits = [](const std::vector<S>& a, const std::vector<S>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(S)) == 0;
  };
  EXPECT_TRUE(same_bits(d_sq.to_host(n), sq));
  EXPECT_TRUE(same_bits(d_c.to_host(3 * n), c));
  EXPECT_TRUE(same_bits(d_w.to_host(3 * n), w));
  ASSERT_EQ(mesh_signed_distance(on_gpu.mesh, d_q.get(), n, limit, d_sd.get(), nullptr, &cuda),
            KNN_OK);
  EXPECT_TRUE(same_bits(d_sd.to_host(n), sd));
  // A NaN in device points is named as in host points.
  std::vector<S> bad = q;
  bad[3 * 17 + 1] = std::numeric_limits<S>::quiet_NaN();
  DeviceArray<S> d_bad(bad);
  EXPECT_TRUE(refused(mesh_closest(on_gpu.mesh, d_bad.get(), n, limit, d_ids.get(), nullptr,
                                   nullptr, nullptr, &cuda),
                      KNN_ERR_NONFINITE_INPUT,
                      sizeof(S) == 8 ? "knn_mesh_closest_f64" : "knn_mesh_closest",
                      "point 17 has a NaN coordinate (dimension 1)"));
  // Host outputs with device ones: refused.
  EXPECT_EQ(mesh_closest(on_gpu.mesh, q.data(), n, limit, d_ids.get(), sq.data(), nullptr, nullptr,
                         &cuda),
            KNN_ERR_INVALID_ARGUMENT);
  // The OpenMP engine takes host arrays only.
  std::vector<int32_t> untouched(n, 77);
  EXPECT_EQ(mesh_closest(on_cpu.mesh, d_q.get(), n, limit, untouched.data(), nullptr, nullptr,
                         nullptr, &cpu),
            KNN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(std::all_of(untouched.begin(), untouched.end(), [](int32_t i) { return i == 77; }));
  EXPECT_EQ(
      mesh_closest(on_cpu.mesh, q.data(), n, limit, d_ids.get(), nullptr, nullptr, nullptr, &cpu),
      KNN_ERR_INVALID_ARGUMENT);
}

TEST(MeshDeviceArrays, AnsweredInPlaceOrRefused) {
  SKIP_WITHOUT_DEVICE();
  expect_device_arrays<float>();
  expect_device_arrays<double>();
}
#endif

TEST(MeshEstimate, ImpossibleSizesAreZero) {
  for (int scalar : {KNN_SCALAR_FLOAT32, KNN_SCALAR_FLOAT64}) {
    EXPECT_EQ(knn_estimate_mesh_bytes(8, 0, scalar, nullptr), 0u);
    EXPECT_EQ(knn_estimate_mesh_bytes(-1, 12, scalar, nullptr), 0u);
    EXPECT_EQ(knn_estimate_mesh_bytes(0, 12, scalar, nullptr), 0u);
    EXPECT_EQ(knn_estimate_mesh_bytes(int64_t{INT32_MAX} + 1, 12, scalar, nullptr), 0u);
    EXPECT_EQ(knn_estimate_mesh_bytes(8, int64_t{KNN_MESH_MAX_TRIANGLES} + 1, scalar, nullptr), 0u);
    EXPECT_EQ(knn_estimate_mesh_bytes(8, INT64_MIN, scalar, nullptr), 0u);
  }
  EXPECT_EQ(knn_estimate_mesh_bytes(8, 12, 2, nullptr), 0u);
  EXPECT_EQ(knn_estimate_mesh_bytes(8, 12, -1, nullptr), 0u);
}

// A device's estimate grows with the mesh and covers at least its arrays.
TEST(MeshEstimate, GrowsWithTheMesh) {
  SKIP_WITHOUT_DEVICE();
  size_t previous = 0;
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{1} << 20, int64_t{1} << 26}) {
    const size_t b = knn_estimate_mesh_bytes(n, 2 * n, KNN_SCALAR_FLOAT32, nullptr);
    EXPECT_GE(b, static_cast<size_t>(n) * 12 + static_cast<size_t>(2 * n) * 12);
    EXPECT_GE(b, previous);
    previous = b;
  }
  // Doubles take more, once the arrays outgrow the fixed whole pages.
  const int64_t large = int64_t{1} << 20;
  EXPECT_GT(knn_estimate_mesh_bytes(large, 2 * large, KNN_SCALAR_FLOAT64, nullptr),
            knn_estimate_mesh_bytes(large, 2 * large, KNN_SCALAR_FLOAT32, nullptr));
}

}  // namespace
}  // namespace knn_test
