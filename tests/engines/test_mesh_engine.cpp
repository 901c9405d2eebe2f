// The OpenMP mesh engine (omp::build_mesh, engine/mesh_engine.h) through its
// interface, against oracles written here:
//  - a long-double brute force over all triangles with Ericson's region
//    method ("Real-Time Collision Detection", 5.1.5; segments for triangles
//    of no area), independent of common/geometry/triangle.h: distances within
//    a tolerance of the scalar's rounding, ids equal unless the oracle's
//    distances tie within it;
//  - exact integer arithmetic (__int128) for the region of the closest point
//    of integer triangles and points, and for points exactly on vertices,
//    edges and faces;
//  - a brute force over all triangles with the library's one definition
//    (triangle.h), which the search must reproduce bit for bit (the search
//    is exact: pruning loses nothing and ties go to the smaller id);
//  - analytic shapes (cube, sphere) for signs and distances, and the exact
//    winding number (every triangle's solid angle) for open meshes;
//  - a reference build of the BVH written here (std::sort, recursion) that
//    the engine's parallel build must match bit for bit;
//  - the deviation report recomputed here from the signed distances.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "../../common/error.h"
#include "../../common/float_math.h"
#include "../../common/geometry/mesh_bvh.h"
#include "../../common/geometry/mesh_walk.h"
#include "../../common/geometry/mesh_winding_tree.h"
#include "../../common/geometry/triangle.h"
#include "../../common/geometry/winding.h"
#include "../../engine/cancel.h"
#include "../../engine/mesh_engine.h"
#include "../../openmp/mesh/mesh_tree.h"

namespace knn_test {
namespace {

using knn::DeviationRequest;
using knn::DeviationSummary;
using knn::MeshEngine;
using knn::MeshGeometry;
using knn::MeshParams;
using knn::MeshResults;
using L = long double;

// ---- Meshes ---------------------------------------------------------------------------

template <typename S>
struct TestMesh {
  std::vector<S> vertices;
  std::vector<int32_t> triangles;
  bool closed = false;
  std::vector<S> vertex_normals, edge_normals;  // closed meshes

  int64_t n_triangles() const { return static_cast<int64_t>(triangles.size() / 3); }
  const S* corner(int64_t t, int k) const { return vertices.data() + 3 * triangles[3 * t + k]; }
  MeshGeometry<S> geometry() const {
    MeshGeometry<S> g;
    g.vertices = vertices.data();
    g.n_vertices = static_cast<int64_t>(vertices.size() / 3);
    g.triangles = triangles.data();
    g.n_triangles = n_triangles();
    g.closed_oriented = closed;
    if (closed) {
      g.vertex_normals = vertex_normals.data();
      g.edge_normals = edge_normals.data();
    }
    return g;
  }
};

// The pseudonormals of a closed, consistently oriented mesh as
// engine/mesh_engine.h defines them (computed in double, rounded to S):
// angle-weighted vertex normals, and per edge the sum of the unit normals
// of its two triangles.
template <typename S>
void add_pseudonormals(TestMesh<S>& mesh) {
  const int64_t nv = static_cast<int64_t>(mesh.vertices.size() / 3), nt = mesh.n_triangles();
  std::vector<double> vn(static_cast<size_t>(3 * nv), 0.0), un(static_cast<size_t>(3 * nt));
  const auto at = [&](int64_t t, int k, int d) {
    return static_cast<double>(mesh.corner(t, k)[d]);
  };
  std::map<std::pair<int32_t, int32_t>, int64_t> edge_owner;
  for (int64_t t = 0; t < nt; ++t) {
    double e1[3], e2[3], n[3];
    for (int d = 0; d < 3; ++d)
      e1[d] = at(t, 1, d) - at(t, 0, d), e2[d] = at(t, 2, d) - at(t, 0, d);
    n[0] = e1[1] * e2[2] - e1[2] * e2[1];
    n[1] = e1[2] * e2[0] - e1[0] * e2[2];
    n[2] = e1[0] * e2[1] - e1[1] * e2[0];
    const double len = std::sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
    for (int d = 0; d < 3; ++d) un[3 * t + d] = len > 0 ? n[d] / len : 0.0;
    for (int k = 0; k < 3; ++k) {
      double u[3], w[3], uu = 0, ww = 0, uw = 0;
      for (int d = 0; d < 3; ++d) {
        u[d] = at(t, (k + 1) % 3, d) - at(t, k, d);
        w[d] = at(t, (k + 2) % 3, d) - at(t, k, d);
        uu += u[d] * u[d], ww += w[d] * w[d], uw += u[d] * w[d];
      }
      const double angle =
          uu > 0 && ww > 0 ? std::acos(std::clamp(uw / std::sqrt(uu * ww), -1.0, 1.0)) : 0.0;
      for (int d = 0; d < 3; ++d) vn[3 * mesh.triangles[3 * t + k] + d] += angle * un[3 * t + d];
      edge_owner[{mesh.triangles[3 * t + k], mesh.triangles[3 * t + (k + 1) % 3]}] = t;
    }
  }
  mesh.vertex_normals.assign(vn.begin(), vn.end());
  mesh.edge_normals.resize(static_cast<size_t>(9 * nt));
  for (int64_t t = 0; t < nt; ++t)
    for (int k = 0; k < 3; ++k) {
      const auto other =
          edge_owner.find({mesh.triangles[3 * t + (k + 1) % 3], mesh.triangles[3 * t + k]});
      ASSERT_NE(other, edge_owner.end()) << "the test mesh is not closed";
      for (int d = 0; d < 3; ++d)
        mesh.edge_normals[9 * t + 3 * k + d] =
            static_cast<S>(un[3 * t + d] + un[3 * other->second + d]);
    }
  mesh.closed = true;
}

// The cube [-1, 1]^3 (times `scale`, plus `offset`), outward, two triangles a
// face; without its +z face when `open`.
template <typename S>
TestMesh<S> cube(bool open = false, double scale = 1.0, double offset = 0.0) {
  TestMesh<S> mesh;
  for (int i = 0; i < 8; ++i)
    for (int d = 0; d < 3; ++d)
      mesh.vertices.push_back(static_cast<S>(offset + scale * ((i >> d) & 1 ? 1.0 : -1.0)));
  // Corners of each face counter-clockwise seen from outside.
  const int faces[6][4] = {{0, 2, 3, 1}, {4, 5, 7, 6}, {0, 1, 5, 4},
                           {2, 6, 7, 3}, {0, 4, 6, 2}, {1, 3, 7, 5}};
  for (int f = 0; f < 6; ++f) {
    if (open && f == 1) continue;  // the +z face
    const int* q = faces[f];
    for (const int k : {q[0], q[1], q[2], q[0], q[2], q[3]}) mesh.triangles.push_back(k);
  }
  if (!open) add_pseudonormals(mesh);
  return mesh;
}

// An icosphere of radius `radius` about `centre` (every coordinate),
// outward, after `levels` subdivisions (20 * 4^levels triangles).
template <typename S>
TestMesh<S> sphere(int levels, double radius = 1.0, double centre = 0.0) {
  const double p = (1.0 + std::sqrt(5.0)) / 2;
  std::vector<double> v = {-1, p,  0,  1, p, 0,  -1, -p, 0,  1, -p, 0, 0,  -1, p,  0,  1, p,
                           0,  -1, -p, 0, 1, -p, p,  0,  -1, p, 0,  1, -p, 0,  -1, -p, 0, 1};
  std::vector<int32_t> f = {0, 11, 5,  0, 5,  1, 0, 1, 7, 0, 7,  10, 0, 10, 11, 1, 5, 9, 5, 11,
                            4, 11, 10, 2, 10, 7, 6, 7, 1, 8, 3,  9,  4, 3,  4,  2, 3, 2, 6, 3,
                            6, 8,  3,  8, 9,  4, 9, 5, 2, 4, 11, 6,  2, 10, 8,  6, 7, 9, 8, 1};
  const auto normalise = [&](size_t i) {
    const double len =
        std::sqrt(v[3 * i] * v[3 * i] + v[3 * i + 1] * v[3 * i + 1] + v[3 * i + 2] * v[3 * i + 2]);
    for (int d = 0; d < 3; ++d) v[3 * i + d] /= len;
  };
  for (size_t i = 0; i < v.size() / 3; ++i) normalise(i);
  for (int level = 0; level < levels; ++level) {
    std::map<std::pair<int32_t, int32_t>, int32_t> middle;
    const auto mid = [&](int32_t a, int32_t b) {
      const auto key = std::minmax(a, b);
      const auto found = middle.find(key);
      if (found != middle.end()) return found->second;
      for (int d = 0; d < 3; ++d) v.push_back((v[3 * a + d] + v[3 * b + d]) / 2);
      const int32_t id = static_cast<int32_t>(v.size() / 3 - 1);
      normalise(static_cast<size_t>(id));
      middle[key] = id;
      return id;
    };
    std::vector<int32_t> next;
    for (size_t t = 0; t < f.size(); t += 3) {
      const int32_t a = f[t], b = f[t + 1], c = f[t + 2];
      const int32_t ab = mid(a, b), bc = mid(b, c), ca = mid(c, a);
      for (const int32_t k : {a, ab, ca, b, bc, ab, c, ca, bc, ab, bc, ca}) next.push_back(k);
    }
    f.swap(next);
  }
  TestMesh<S> mesh;
  for (const double x : v) mesh.vertices.push_back(static_cast<S>(centre + radius * x));
  mesh.triangles = f;
  add_pseudonormals(mesh);
  return mesh;
}

// Random triangles in [-1, 1]^3 times `scale` plus `offset`, every fifth
// degenerate (collinear corners, a needle, repeated corners, all three
// equal).
template <typename S>
TestMesh<S> soup(int64_t n, uint64_t seed, double scale = 1.0, double offset = 0.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  TestMesh<S> mesh;
  for (int64_t t = 0; t < n; ++t) {
    double c[3][3];
    for (int d = 0; d < 3; ++d) c[0][d] = u(rng);
    for (int k = 1; k < 3; ++k)
      for (int d = 0; d < 3; ++d) c[k][d] = c[0][d] + 0.3 * u(rng);
    switch (t % 20) {
      case 3:  // collinear: c on the line through a and b
        for (int d = 0; d < 3; ++d) c[2][d] = c[0][d] + 2.0 * (c[1][d] - c[0][d]);
        break;
      case 7:  // a needle
        for (int d = 0; d < 3; ++d) c[2][d] = c[1][d] + 1e-7 * u(rng);
        break;
      case 11:  // a repeated corner
        for (int d = 0; d < 3; ++d) c[1][d] = c[0][d];
        break;
      case 15:  // a point
        for (int d = 0; d < 3; ++d) c[1][d] = c[2][d] = c[0][d];
        break;
    }
    for (int k = 0; k < 3; ++k) {
      for (int d = 0; d < 3; ++d) mesh.vertices.push_back(static_cast<S>(offset + scale * c[k][d]));
      mesh.triangles.push_back(static_cast<int32_t>(3 * t + k));
    }
  }
  return mesh;
}

// ---- Queries ----------------------------------------------------------------------------

template <typename S>
struct Answers {
  std::vector<int32_t> ids;
  std::vector<S> sq, closest, bary, sd;
};

template <typename S>
std::unique_ptr<MeshEngine<S>> build(const TestMesh<S>& mesh, int threads = 2) {
  MeshParams params;
  params.threads = threads;
  return knn::omp::build_mesh<S>(mesh.geometry(), params);
}

template <typename S>
Answers<S> query(const MeshEngine<S>& engine, const std::vector<S>& points,
                 S max_distance = std::numeric_limits<S>::infinity(), int threads = 2) {
  const size_t m = points.size() / 3;
  Answers<S> a;
  a.ids.assign(m, -7);
  a.sq.assign(m, S(-7));
  a.closest.assign(3 * m, S(-7));
  a.bary.assign(3 * m, S(-7));
  a.sd.assign(m, S(-7));
  MeshResults<S> out;
  out.triangle_ids = a.ids.data();
  out.sq_distances = a.sq.data();
  out.closest = a.closest.data();
  out.barycentric = a.bary.data();
  out.signed_distances = a.sd.data();
  MeshParams call;
  call.threads = threads;
  engine.closest(points.data(), static_cast<int64_t>(m), max_distance, out, call);
  return a;
}

// ---- The long-double oracle (Ericson's regions) ---------------------------------------

struct V3 {
  L x, y, z;
};
V3 operator-(V3 a, V3 b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
V3 operator+(V3 a, V3 b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
V3 operator*(L s, V3 a) { return {s * a.x, s * a.y, s * a.z}; }
L dot(V3 a, V3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
V3 cross(V3 a, V3 b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
template <typename S>
V3 v3(const S* p) {
  return {static_cast<L>(p[0]), static_cast<L>(p[1]), static_cast<L>(p[2])};
}

V3 closest_on_segment(V3 p, V3 a, V3 b) {
  const V3 ab = b - a;
  const L len2 = dot(ab, ab);
  if (len2 == 0) return a;
  return a + std::clamp(dot(p - a, ab) / len2, L(0), L(1)) * ab;
}

// The closest point of triangle (a, b, c) to p: the nearest of the
// closest points of its edges and, when p's projection falls inside (signs
// decided as in Ericson's region method, from dot products only), the face
// point. The face point is the projection onto the plane through the
// corner of the largest angle (whose cross product loses the fewest
// digits), rebuilt from its barycentric weights so that it lies on the
// triangle: a flat sliver's noisy normal can make it a poor candidate but
// never one nearer than the triangle, and the edges bound it.
V3 oracle_closest(V3 p, V3 a, V3 b, V3 c) {
  V3 best = closest_on_segment(p, a, b);
  for (const V3& q : {closest_on_segment(p, b, c), closest_on_segment(p, c, a)})
    if (dot(p - q, p - q) < dot(p - best, p - best)) best = q;
  const V3 ab = b - a, ac = c - a, bc = c - b;
  const L lab = dot(ab, ab), lac = dot(ac, ac), lbc = dot(bc, bc);
  // The corner opposite the longest edge.
  const V3 o = lbc >= lab && lbc >= lac ? a : (lac >= lab ? b : c);
  const V3 u = (lbc >= lab && lbc >= lac ? b : (lac >= lab ? c : a)) - o;
  const V3 w = (lbc >= lab && lbc >= lac ? c : (lac >= lab ? a : b)) - o;
  const V3 n = cross(u, w);
  const L nn = dot(n, n);
  if (nn == 0) return best;
  const V3 q = p - (dot(p - o, n) / nn) * n;
  const L wa = dot(cross(b - q, c - q), n), wb = dot(cross(c - q, a - q), n),
          wc = dot(cross(a - q, b - q), n);
  if (wa < 0 || wb < 0 || wc < 0) return best;
  const L sum = wa + wb + wc;
  const V3 face = (wa / sum) * a + (wb / sum) * b + (wc / sum) * c;
  return dot(p - face, p - face) < dot(p - best, p - best) ? face : best;
}

// What a sliver may add to the rounding of both sides: a normal computed
// from edges at angle A carries a relative error of about eps / sin A (the
// definition takes it at corner a, the oracle at its largest angle), and no
// side answers worse than the triangle's edges, which lie within twice its
// inradius of every point of it.
template <typename S>
L sliver_allowance(V3 a, V3 b, V3 c, L magnitude) {
  const V3 n = cross(b - a, c - a);
  const L area2 = std::sqrt(dot(n, n));
  if (area2 == 0) return 0;
  const L perimeter =
      std::sqrt(dot(b - a, b - a)) + std::sqrt(dot(c - b, c - b)) + std::sqrt(dot(a - c, a - c));
  const L sine_a = area2 / std::sqrt(dot(b - a, b - a) * dot(c - a, c - a));
  const L eps =
      static_cast<L>(std::numeric_limits<S>::epsilon()) + std::numeric_limits<L>::epsilon();
  return std::min(4 * area2 / perimeter, 64 * eps * magnitude / sine_a);
}

template <typename S>
L oracle_distance(const TestMesh<S>& mesh, int64_t t, V3 p) {
  const V3 q =
      oracle_closest(p, v3(mesh.corner(t, 0)), v3(mesh.corner(t, 1)), v3(mesh.corner(t, 2)));
  return std::sqrt(dot(p - q, p - q));
}

// The rounding a distance computed in S may carry: a few dozen units of the
// scalar's epsilon, relative to the coordinates' magnitude.
template <typename S>
L tolerance(const TestMesh<S>& mesh, V3 p) {
  L magnitude = std::max({std::fabs(p.x), std::fabs(p.y), std::fabs(p.z)});
  for (const S x : mesh.vertices) magnitude = std::max(magnitude, static_cast<L>(std::fabs(x)));
  return 64 * static_cast<L>(std::numeric_limits<S>::epsilon()) * magnitude;
}

// The definition's brute force (triangle.h over every triangle, ties to the
// smaller id): what the search must give bit for bit.
template <typename S>
struct DefinitionHit {
  int32_t id = -1;
  knn::geometry::TrianglePoint<S> point{};
};

template <typename S>
DefinitionHit<S> definition_nearest(const TestMesh<S>& mesh, const S* q, S max_distance) {
  using knn::geometry::Vec3;
  DefinitionHit<S> best;
  S best_sq = max_distance * max_distance;
  const auto vec = [](const S* p) { return Vec3<S>{p[0], p[1], p[2]}; };
  for (int64_t t = 0; t < mesh.n_triangles(); ++t) {
    const auto tp = knn::geometry::closest_point_on_triangle(
        vec(q), vec(mesh.corner(t, 0)), vec(mesh.corner(t, 1)), vec(mesh.corner(t, 2)));
    if (knn::geometry::is_closer(tp.sq_distance, static_cast<int32_t>(t), best_sq, best.id)) {
      best_sq = tp.sq_distance;
      best.id = static_cast<int32_t>(t);
      best.point = tp;
    }
  }
  return best;
}

template <typename S>
bool same_bits(S a, S b) {
  return knn::bits_of(a) == knn::bits_of(b);
}

// Every answer against the oracle (within tolerance) and against the
// definition's brute force (bit for bit).
template <typename S>
void expect_matches_oracles(const TestMesh<S>& mesh, const std::vector<S>& points,
                            const Answers<S>& got,
                            S max_distance = std::numeric_limits<S>::infinity()) {
  const int64_t m = static_cast<int64_t>(points.size() / 3);
  int failures = 0;
  for (int64_t i = 0; i < m && failures < 5; ++i) {
    SCOPED_TRACE(::testing::Message() << "point " << i << " (" << points[3 * i] << ", "
                                      << points[3 * i + 1] << ", " << points[3 * i + 2] << ")");
    const int before = ::testing::Test::HasFailure() ? 1 : 0;
    const V3 p = v3(&points[3 * i]);
    // The oracle.
    std::vector<L> distance(static_cast<size_t>(mesh.n_triangles()));
    int64_t arg = 0;
    for (int64_t t = 0; t < mesh.n_triangles(); ++t) {
      distance[t] = oracle_distance(mesh, t, p);
      if (distance[t] < distance[arg]) arg = t;
    }
    const L least = distance[arg];
    const L magnitude =
        tolerance(mesh, p) / (64 * static_cast<L>(std::numeric_limits<S>::epsilon()));
    const auto allowance = [&](int64_t t) {
      return t < 0 ? L(0)
                   : sliver_allowance<S>(v3(mesh.corner(t, 0)), v3(mesh.corner(t, 1)),
                                         v3(mesh.corner(t, 2)), magnitude + least);
    };
    const L tol = tolerance(mesh, p) + 64 * std::numeric_limits<S>::epsilon() * least +
                  allowance(arg) + allowance(got.ids[i]);
    const L limit = static_cast<L>(max_distance);
    if (least > limit + tol) {
      EXPECT_EQ(got.ids[i], -1);
    } else if (least < limit - tol) {
      ASSERT_GE(got.ids[i], 0);
    }
    if (got.ids[i] < 0) {
      EXPECT_TRUE(std::isinf(got.sq[i]) && got.sq[i] > 0);
      EXPECT_TRUE(std::isinf(got.sd[i]) && got.sd[i] > 0);
      for (int d = 0; d < 3; ++d)
        EXPECT_TRUE(std::isnan(got.closest[3 * i + d]) && std::isnan(got.bary[3 * i + d]));
    } else {
      EXPECT_NEAR(std::sqrt(static_cast<L>(got.sq[i])), least, tol);
      EXPECT_NEAR(distance[got.ids[i]], least, 2 * tol) << "id " << got.ids[i] << " oracle " << arg;
      bool tie = false;
      for (int64_t t = 0; t < mesh.n_triangles(); ++t)
        tie = tie || (t != arg && distance[t] <= least + 2 * tol);
      if (!tie) {
        EXPECT_EQ(got.ids[i], arg);
      }
      EXPECT_NEAR(std::fabs(static_cast<L>(got.sd[i])), least, tol);
      // The closest point is at that distance, on the triangle, and its
      // barycentric weights give it back.
      const V3 c = v3(&got.closest[3 * i]);
      EXPECT_NEAR(std::sqrt(dot(p - c, p - c)), least, tol);
      const V3 on = oracle_closest(c, v3(mesh.corner(got.ids[i], 0)),
                                   v3(mesh.corner(got.ids[i], 1)), v3(mesh.corner(got.ids[i], 2)));
      EXPECT_LE(std::sqrt(dot(c - on, c - on)), tol);
      const L* w = nullptr;
      L weights[3];
      for (int k = 0; k < 3; ++k) weights[k] = got.bary[3 * i + k];
      w = weights;
      const V3 back = w[0] * v3(mesh.corner(got.ids[i], 0)) +
                      w[1] * v3(mesh.corner(got.ids[i], 1)) + w[2] * v3(mesh.corner(got.ids[i], 2));
      EXPECT_LE(std::sqrt(dot(back - c, back - c)), tol);
      EXPECT_NEAR(w[0] + w[1] + w[2], 1.0L, 1e-5L);
      for (int k = 0; k < 3; ++k) EXPECT_GE(w[k], 0);
    }
    // The definition, bit for bit.
    const DefinitionHit<S> def = definition_nearest(mesh, &points[3 * i], max_distance);
    EXPECT_EQ(got.ids[i], def.id);
    if (def.id >= 0 && got.ids[i] == def.id) {
      EXPECT_TRUE(same_bits(got.sq[i], def.point.sq_distance));
      EXPECT_TRUE(same_bits(got.closest[3 * i], def.point.closest.x) &&
                  same_bits(got.closest[3 * i + 1], def.point.closest.y) &&
                  same_bits(got.closest[3 * i + 2], def.point.closest.z));
      for (int k = 0; k < 3; ++k) EXPECT_TRUE(same_bits(got.bary[3 * i + k], def.point.weights[k]));
      EXPECT_TRUE(same_bits(std::fabs(got.sd[i]), knn::sqrt_rn(def.point.sq_distance)));
    }
    failures += (::testing::Test::HasFailure() ? 1 : 0) - before;
  }
}

// Points near the mesh's triangles (on them, plus noise of `noise` times
// their size), in its box and far away, and on its corners.
template <typename S>
std::vector<S> points_around(const TestMesh<S>& mesh, int64_t m, uint64_t seed,
                             double noise = 0.05) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  double lo[3], hi[3];
  for (int d = 0; d < 3; ++d) lo[d] = hi[d] = static_cast<double>(mesh.vertices[d]);
  for (size_t i = 0; i < mesh.vertices.size(); ++i) {
    lo[i % 3] = std::min(lo[i % 3], static_cast<double>(mesh.vertices[i]));
    hi[i % 3] = std::max(hi[i % 3], static_cast<double>(mesh.vertices[i]));
  }
  double size = 0;
  for (int d = 0; d < 3; ++d) size = std::max(size, hi[d] - lo[d]);
  std::vector<S> points;
  for (int64_t i = 0; i < m; ++i) {
    double p[3];
    const int64_t t = static_cast<int64_t>(rng() % static_cast<uint64_t>(mesh.n_triangles()));
    switch (i % 5) {
      case 0:
      case 1:
      case 2: {  // near a triangle
        double r = u(rng), s = u(rng);
        if (r + s > 1) r = 1 - r, s = 1 - s;
        for (int d = 0; d < 3; ++d)
          p[d] = (1 - r - s) * mesh.corner(t, 0)[d] + r * mesh.corner(t, 1)[d] +
                 s * mesh.corner(t, 2)[d] + noise * size * (2 * u(rng) - 1);
        break;
      }
      case 3:  // in the box, a little beyond
        for (int d = 0; d < 3; ++d) p[d] = lo[d] + (hi[d] - lo[d]) * (1.4 * u(rng) - 0.2);
        break;
      default:  // a corner, or far away
        for (int d = 0; d < 3; ++d)
          p[d] = i % 10 == 4 ? static_cast<double>(mesh.corner(t, static_cast<int>(i % 3))[d])
                             : lo[d] + size * 100 * (2 * u(rng) - 1);
    }
    for (int d = 0; d < 3; ++d) points.push_back(static_cast<S>(p[d]));
  }
  return points;
}

template <typename S>
class MeshEngineTest : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(MeshEngineTest, Scalars);

// ---- Closest points -------------------------------------------------------------------------

TYPED_TEST(MeshEngineTest, OneTriangle) {
  using S = TypeParam;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const TestMesh<S> mesh = soup<S>(1, seed);
    const std::vector<S> points = points_around(mesh, 200, seed + 100, 0.5);
    expect_matches_oracles(mesh, points, query(*build(mesh), points));
  }
}

TYPED_TEST(MeshEngineTest, TwoTriangles) {
  using S = TypeParam;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const TestMesh<S> mesh = soup<S>(2, seed);
    const std::vector<S> points = points_around(mesh, 300, seed + 200, 0.5);
    expect_matches_oracles(mesh, points, query(*build(mesh), points));
  }
}

// Random soups with every fifth triangle degenerate, on 1 and 2 threads.
TYPED_TEST(MeshEngineTest, SoupWithDegenerateTriangles) {
  using S = TypeParam;
  for (const int64_t n : {3, 17, 100, 1000}) {
    SCOPED_TRACE(n);
    const TestMesh<S> mesh = soup<S>(n, 7 + static_cast<uint64_t>(n));
    const std::vector<S> points = points_around(mesh, 600, 9 + static_cast<uint64_t>(n));
    const auto engine = build(mesh);
    EXPECT_EQ(engine->n_triangles(), n);
    EXPECT_EQ(engine->backend(), KNN_BACKEND_OPENMP);
    for (const int threads : {1, 2})
      expect_matches_oracles(mesh, points,
                             query(*engine, points, std::numeric_limits<S>::infinity(), threads));
  }
}

// Only degenerate triangles: needles, points and collinear triples.
TYPED_TEST(MeshEngineTest, OnlyDegenerateTriangles) {
  using S = TypeParam;
  TestMesh<S> mesh;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int t = 0; t < 60; ++t) {
    double a[3], b[3];
    for (int d = 0; d < 3; ++d) a[d] = u(rng), b[d] = a[d] + 0.4 * u(rng);
    const double along = t % 3 == 0 ? 0.5 : (t % 3 == 1 ? 0.0 : 3.0);
    for (int d = 0; d < 3; ++d) mesh.vertices.push_back(static_cast<S>(a[d]));
    for (int d = 0; d < 3; ++d) mesh.vertices.push_back(static_cast<S>(t % 4 == 0 ? a[d] : b[d]));
    for (int d = 0; d < 3; ++d)
      mesh.vertices.push_back(static_cast<S>(a[d] + along * (b[d] - a[d])));
    for (int k = 0; k < 3; ++k) mesh.triangles.push_back(3 * t + k);
  }
  const std::vector<S> points = points_around(mesh, 500, 4, 0.2);
  expect_matches_oracles(mesh, points, query(*build(mesh), points));
}

// Triangles collinear but for rounding (c = a + 2 (b - a) rounded to S):
// their normal is rounding noise, and the face step alone once put the
// closest point of a corner 0.035 away from it (triangle.h, "Why the
// slivers' way"). Every corner, and points on the segment, are at a
// distance of the rounding only.
TYPED_TEST(MeshEngineTest, RoundedCollinearTriangles) {
  using S = TypeParam;
  std::mt19937_64 rng(15);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  TestMesh<S> mesh;
  std::vector<S> points;
  for (int t = 0; t < 200; ++t) {
    double a[3], b[3];
    for (int d = 0; d < 3; ++d) a[d] = u(rng), b[d] = a[d] + 0.1 * u(rng);
    for (const double along : {0.0, 1.0, 2.0})
      for (int d = 0; d < 3; ++d)
        mesh.vertices.push_back(static_cast<S>(a[d] + along * (b[d] - a[d])));
    for (int k = 0; k < 3; ++k) mesh.triangles.push_back(3 * t + k);
    for (const double along : {0.0, 0.5, 1.0, 1.5, 2.0})
      for (int d = 0; d < 3; ++d) points.push_back(static_cast<S>(a[d] + along * (b[d] - a[d])));
  }
  TestMesh<S> one;
  for (int t = 0; t < 200; ++t) {
    one.vertices.assign(mesh.vertices.begin() + 9 * t, mesh.vertices.begin() + 9 * t + 9);
    one.triangles = {0, 1, 2};
    const std::vector<S> own(points.begin() + 15 * t, points.begin() + 15 * t + 15);
    const Answers<S> got = query(*build(one), own);
    for (int i = 0; i < 5; ++i)
      EXPECT_LE(got.sq[i], S(1e-4) * std::numeric_limits<S>::epsilon())
          << "triangle " << t << " point " << i;
  }
  expect_matches_oracles(mesh, points, query(*build(mesh), points));
}

// Identical triangles measure identical bits: the smaller id wins, whatever
// the tree put first.
TYPED_TEST(MeshEngineTest, DuplicatesGoToTheSmallestId) {
  using S = TypeParam;
  TestMesh<S> base = soup<S>(40, 5);
  TestMesh<S> mesh = base;
  // Every triangle three times, the copies at the end (ids 40.. and 80..).
  for (int copy = 1; copy <= 2; ++copy)
    for (size_t i = 0; i < base.triangles.size(); ++i) mesh.triangles.push_back(base.triangles[i]);
  const std::vector<S> points = points_around(base, 400, 6);
  const Answers<S> got = query(*build(mesh), points);
  expect_matches_oracles(mesh, points, got);
  for (const int32_t id : got.ids) EXPECT_LT(id, 40);
  // One triangle a hundred times: always id 0.
  TestMesh<S> same = soup<S>(1, 9);
  for (int copy = 1; copy < 100; ++copy)
    for (int k = 0; k < 3; ++k) same.triangles.push_back(k);
  const Answers<S> one = query(*build(same), points);
  for (const int32_t id : one.ids) EXPECT_EQ(id, 0);
}

TYPED_TEST(MeshEngineTest, MaxDistance) {
  using S = TypeParam;
  const TestMesh<S> mesh = soup<S>(200, 21);
  const std::vector<S> points = points_around(mesh, 500, 22, 0.3);
  const auto engine = build(mesh);
  for (const S limit : {S(0), S(0.01), S(0.1), S(0.5), S(5)}) {
    SCOPED_TRACE(limit);
    const Answers<S> got = query(*engine, points, limit);
    expect_matches_oracles(mesh, points, got, limit);
    for (size_t i = 0; i < got.ids.size(); ++i)
      if (got.ids[i] >= 0) {
        EXPECT_LE(got.sq[i], limit * limit);
      }
  }
  // With limit 0 only points on the surface are measured: the corners.
  const Answers<S> zero = query(*engine, points, S(0));
  int64_t on_surface = 0;
  for (size_t i = 0; i < zero.ids.size(); ++i) on_surface += zero.ids[i] >= 0;
  EXPECT_GE(on_surface, static_cast<int64_t>(points.size() / 3 / 10) - 1);
}

// A small mesh far from the origin: 10^6 + [-1, 1]^3.
TYPED_TEST(MeshEngineTest, HugeOffset) {
  using S = TypeParam;
  const TestMesh<S> mesh = soup<S>(300, 31, 1.0, 1e6);
  const std::vector<S> points = points_around(mesh, 400, 32, 0.1);
  expect_matches_oracles(mesh, points, query(*build(mesh), points));
  const TestMesh<S> ball = sphere<S>(2, 1.0, 1e6);
  const std::vector<S> near = points_around(ball, 300, 33, 0.1);
  expect_matches_oracles(ball, near, query(*build(ball), near));
}

TYPED_TEST(MeshEngineTest, TinyCoordinates) {
  using S = TypeParam;
  // Small, but large enough that n.n of a triangle (the definition's area
  // test) does not underflow: below that, triangles measure as degenerate.
  const double scale = sizeof(S) == 4 ? 1e-7 : 1e-70;
  const TestMesh<S> mesh = soup<S>(300, 41, scale);
  const std::vector<S> points = points_around(mesh, 400, 42, 0.1);
  expect_matches_oracles(mesh, points, query(*build(mesh), points));
}

// ---- Exact regions
// -------------------------------------------------------------------------------

using I = __int128;
struct I3 {
  I x, y, z;
};
I3 operator-(I3 a, I3 b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
I idot(I3 a, I3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
I3 icross(I3 a, I3 b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
I3 iscale(I s, I3 a) { return {s * a.x, s * a.y, s * a.z}; }
bool is_degenerate(I3 a, I3 b, I3 c) {
  const I3 n = icross(b - a, c - a);
  return idot(n, n) == 0;
}

// Ericson's regions decided exactly: 0 face, 1-3 vertex a, b, c, 4 edge ab,
// 5 edge bc, 6 edge ca (triangle.h's numbering); -1 when the point lies on
// a boundary between regions (where the definitions may name either).
int exact_region(I3 p, I3 a, I3 b, I3 c) {
  const I3 ab = b - a, ac = c - a, ap = p - a, bp = p - b, cp = p - c;
  const I d1 = idot(ab, ap), d2 = idot(ac, ap), d3 = idot(ab, bp), d4 = idot(ac, bp);
  const I d5 = idot(ab, cp), d6 = idot(ac, cp);
  const I va = d3 * d6 - d5 * d4, vb = d5 * d2 - d1 * d6, vc = d1 * d4 - d3 * d2;
  if (d1 == 0 || d2 == 0 || d3 == 0 || d4 == d3 || d6 == 0 || d5 == d6 || va == 0 || vb == 0 ||
      vc == 0)
    return -1;
  if (d1 < 0 && d2 < 0) return 1;
  if (d3 > 0 && d4 < d3) return 2;
  if (vc < 0 && d1 > 0 && d3 < 0) return 4;
  if (d6 > 0 && d5 < d6) return 3;
  if (vb < 0 && d2 > 0 && d6 < 0) return 6;
  if (va < 0 && d4 - d3 > 0 && d5 - d6 > 0) return 5;
  return 0;
}

// The region the engine's barycentric weights show: a weight exactly 1 is
// a vertex, a weight exactly 0 (and none 1) an edge, else the face.
template <typename S>
int region_of_weights(const S* w) {
  for (int k = 0; k < 3; ++k)
    if (w[k] == S(1) && w[(k + 1) % 3] == S(0) && w[(k + 2) % 3] == S(0)) return 1 + k;
  for (int k = 0; k < 3; ++k)
    if (w[(k + 2) % 3] == S(0)) return 4 + k;  // edge k runs from corner k to k + 1
  return 0;
}

// Integer triangles and points: the region of the closest point exactly,
// and at a vertex the vertex itself (the definition's ends are exact).
TYPED_TEST(MeshEngineTest, RegionsExact) {
  using S = TypeParam;
  std::mt19937_64 rng(51);
  const auto coordinate = [&](int range) {
    return static_cast<int>(rng() % (2 * range + 1)) - range;
  };
  int counted[7] = {0};
  for (int trial = 0; trial < 60; ++trial) {
    TestMesh<S> mesh;
    I3 c[3];
    for (int k = 0; k < 3; ++k) {
      const int x = coordinate(100), y = coordinate(100), z = coordinate(100);
      c[k] = {x, y, z};
      for (const int v : {x, y, z}) mesh.vertices.push_back(static_cast<S>(v));
      mesh.triangles.push_back(k);
    }
    if (is_degenerate(c[0], c[1], c[2])) continue;
    std::vector<S> points;
    std::vector<I3> exact;
    for (int i = 0; i < 50; ++i) {
      const I3 p = {coordinate(200), coordinate(200), coordinate(200)};
      exact.push_back(p);
      for (const I v : {p.x, p.y, p.z}) points.push_back(static_cast<S>(v));
    }
    const Answers<S> got = query(*build(mesh), points);
    for (size_t i = 0; i < exact.size(); ++i) {
      // The region of every corner of the cube of half-side 0.1 about the
      // point (in units of 1/1000): regions are convex, so when the corners
      // agree the point is at least 0.1 from every boundary, far beyond the
      // rounding of the scalar at these magnitudes.
      int region = exact_region(iscale(1000, exact[i]), iscale(1000, c[0]), iscale(1000, c[1]),
                                iscale(1000, c[2]));
      for (int corner = 0; corner < 8 && region >= 0; ++corner) {
        const I3 at = {1000 * exact[i].x + (corner & 1 ? 100 : -100),
                       1000 * exact[i].y + (corner & 2 ? 100 : -100),
                       1000 * exact[i].z + (corner & 4 ? 100 : -100)};
        if (exact_region(at, iscale(1000, c[0]), iscale(1000, c[1]), iscale(1000, c[2])) != region)
          region = -1;
      }
      if (region < 0) continue;
      ++counted[region];
      SCOPED_TRACE(::testing::Message()
                   << "trial " << trial << " point " << i << " region " << region);
      EXPECT_EQ(region_of_weights(&got.bary[3 * i]), region);
      if (region >= 1 && region <= 3) {
        const I3 v = c[region - 1];
        const I3 d = exact[i] - v;
        EXPECT_EQ(got.closest[3 * i], static_cast<S>(v.x));
        EXPECT_EQ(got.closest[3 * i + 1], static_cast<S>(v.y));
        EXPECT_EQ(got.closest[3 * i + 2], static_cast<S>(v.z));
        EXPECT_EQ(got.sq[i], static_cast<S>(static_cast<double>(idot(d, d))));  // exact: below 2^24
      }
    }
    expect_matches_oracles(mesh, points, got);
  }
  for (int region = 0; region < 7; ++region) EXPECT_GT(counted[region], 0) << "region " << region;
}

// Points exactly on the surface: corners, edge midpoints, face centroids
// (even coordinates, and multiples of 3): distance exactly 0, the point
// itself closest, signed distance +0.
TYPED_TEST(MeshEngineTest, PointsOnTheSurfaceExact) {
  using S = TypeParam;
  std::mt19937_64 rng(61);
  // Small enough that every product of the definition is exact in float.
  const auto coordinate = [&]() { return 6 * (static_cast<int>(rng() % 11) - 5); };
  TestMesh<S> mesh;
  std::vector<S> points;
  for (int t = 0; t < 30; ++t) {
    int c[3][3];
    I3 e[3];
    do {
      for (int k = 0; k < 3; ++k) {
        for (int d = 0; d < 3; ++d) c[k][d] = coordinate();
        e[k] = {c[k][0], c[k][1], c[k][2]};
      }
    } while (is_degenerate(e[0], e[1], e[2]));
    for (int k = 0; k < 3; ++k)
      for (int d = 0; d < 3; ++d) mesh.vertices.push_back(static_cast<S>(c[k][d]));
    for (int k = 0; k < 3; ++k) mesh.triangles.push_back(3 * t + k);
    for (int d = 0; d < 3; ++d) points.push_back(static_cast<S>(c[0][d]));
    for (int d = 0; d < 3; ++d) points.push_back(static_cast<S>((c[1][d] + c[2][d]) / 2));
    for (int d = 0; d < 3; ++d) points.push_back(static_cast<S>((c[0][d] + c[1][d] + c[2][d]) / 3));
  }
  for (const bool closed_sign : {false, true}) {
    TestMesh<S> m = mesh;
    if (closed_sign) m = cube<S>(false, 6.0);  // the cube's corners, edges and faces
    std::vector<S> p = points;
    if (closed_sign) {
      p.clear();
      for (const double x : {-6.0, 0.0, 6.0})
        for (const double y : {-6.0, 0.0, 6.0})
          for (const double z : {-6.0, 6.0})
            for (const S v : {S(x), S(y), S(z)}) p.push_back(v);
    }
    const Answers<S> got = query(*build(m), p);
    for (size_t i = 0; i < got.ids.size(); ++i) {
      SCOPED_TRACE(i);
      ASSERT_GE(got.ids[i], 0);
      EXPECT_EQ(got.sq[i], S(0));
      for (int d = 0; d < 3; ++d) EXPECT_EQ(got.closest[3 * i + d], p[3 * i + d]);
      EXPECT_EQ(got.sd[i], S(0));
      EXPECT_FALSE(std::signbit(got.sd[i]));
    }
    expect_matches_oracles(m, p, got);
  }
}

// ---- Signs -------------------------------------------------------------------------------------

// The cube [-1, 1]^3: the exact signed distance is known everywhere.
L cube_signed_distance(V3 p) {
  const L ax = std::fabs(p.x) - 1, ay = std::fabs(p.y) - 1, az = std::fabs(p.z) - 1;
  const L inside = std::max({ax, ay, az});
  if (inside < 0) return inside;
  const L ox = std::max(ax, L(0)), oy = std::max(ay, L(0)), oz = std::max(az, L(0));
  return std::sqrt(ox * ox + oy * oy + oz * oz);
}

TYPED_TEST(MeshEngineTest, SignedClosedCube) {
  using S = TypeParam;
  const TestMesh<S> mesh = cube<S>();
  std::mt19937_64 rng(71);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  std::vector<S> points;
  for (int i = 0; i < 3000; ++i)
    for (int d = 0; d < 3; ++d)
      points.push_back(static_cast<S>(i % 3 == 0 ? u(rng) / 1.5 : u(rng)));
  // Beyond every corner, edge and face along their pseudonormals' diagonals.
  for (const double x : {-1.5, 0.0, 1.5})
    for (const double y : {-1.5, 0.0, 1.5})
      for (const double z : {-1.5, 0.0, 1.5})
        for (const S v : {S(x), S(y), S(z)}) points.push_back(v);
  for (const bool as_open : {false, true}) {
    SCOPED_TRACE(as_open ? "winding number" : "pseudonormals");
    TestMesh<S> m = mesh;
    m.closed = !as_open;
    const Answers<S> got = query(*build(m), points);
    for (size_t i = 0; i < got.ids.size(); ++i) {
      const L exact = cube_signed_distance(v3(&points[3 * i]));
      if (as_open && std::fabs(exact) < 1e-3) continue;  // the winding number's accuracy
      EXPECT_NEAR(static_cast<L>(got.sd[i]), exact, 1e-5) << "point " << i;
    }
    expect_matches_oracles(m, points, got);
  }
}

TYPED_TEST(MeshEngineTest, SignedClosedSphere) {
  using S = TypeParam;
  const TestMesh<S> mesh = sphere<S>(2);  // 320 triangles
  // Every face's plane is at least this far from the centre.
  L inscribed = 1;
  for (int64_t t = 0; t < mesh.n_triangles(); ++t) {
    const V3 a = v3(mesh.corner(t, 0)), b = v3(mesh.corner(t, 1)), c = v3(mesh.corner(t, 2));
    const V3 n = cross(b - a, c - a);
    inscribed = std::min(inscribed, dot(n, a) / std::sqrt(dot(n, n)));
  }
  std::mt19937_64 rng(81);
  std::uniform_real_distribution<double> u(-1.6, 1.6);
  std::vector<S> points;
  while (points.size() < 3 * 2000) {
    double p[3] = {u(rng), u(rng), u(rng)};
    const double r = std::sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]);
    if (points.size() % 2 == 0)  // at a radius between 0.5 and 1.5
      for (double& x : p) x *= (1 + u(rng) / 3.2) / r;
    for (const double x : p) points.push_back(static_cast<S>(x));
  }
  for (const bool as_open : {false, true}) {
    SCOPED_TRACE(as_open ? "winding number" : "pseudonormals");
    TestMesh<S> m = mesh;
    m.closed = !as_open;
    const Answers<S> got = query(*build(m), points);
    int64_t inside = 0, outside = 0;
    for (size_t i = 0; i < got.ids.size(); ++i) {
      const V3 p = v3(&points[3 * i]);
      const L r = std::sqrt(dot(p, p));
      const L margin = as_open ? 1e-3L : 1e-6L;
      if (r < inscribed - margin) {
        EXPECT_LT(got.sd[i], 0) << "point " << i << " at radius " << static_cast<double>(r);
        ++inside;
      } else if (r > 1 + margin) {
        EXPECT_GT(got.sd[i], 0) << "point " << i << " at radius " << static_cast<double>(r);
        ++outside;
      }
    }
    EXPECT_GT(inside, 300);
    EXPECT_GT(outside, 300);
    expect_matches_oracles(m, points, got);
  }
}

// A cube without its +z face: the winding number is about 5/6 at the
// centre, 0 far away; points near the hole may go either way.
TYPED_TEST(MeshEngineTest, SignedOpenCube) {
  using S = TypeParam;
  const TestMesh<S> mesh = cube<S>(true);
  ASSERT_FALSE(mesh.closed);
  std::mt19937_64 rng(91);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<S> points;
  std::vector<int> expected;  // -1 inside, +1 outside
  for (int i = 0; i < 2000; ++i) {
    const bool in = i % 2 == 0;
    const double p[3] = {in ? 0.7 * u(rng) : 3 * u(rng), in ? 0.7 * u(rng) : 3 * u(rng),
                         in ? 0.7 * u(rng) - 0.2 : 3 * u(rng)};
    const bool outside =
        std::fabs(p[0]) > 1.05 || std::fabs(p[1]) > 1.05 || p[2] < -1.05 || p[2] > 1.6;
    if (!in && !outside) continue;
    for (const double x : p) points.push_back(static_cast<S>(x));
    expected.push_back(in ? -1 : 1);
  }
  const Answers<S> got = query(*build(mesh), points);
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(got.sd[i] < 0 ? -1 : 1, expected[i]) << "point " << i;
  expect_matches_oracles(mesh, points, got);
}

// The tree's winding sum against the exact one (every triangle's solid
// angle), for a sphere and a sphere with a hole, from points 0.05 or more
// from the surface: within the accuracy the header states (0.05 in w; the
// dipole at twice the radius measured up to 0.034 here).
TYPED_TEST(MeshEngineTest, WindingNumberAccuracy) {
  using S = TypeParam;
  TestMesh<S> ball = sphere<S>(3);
  ball.closed = false;
  // A hole: the triangles of one cap removed.
  TestMesh<S> holed = ball;
  holed.triangles.clear();
  for (int64_t t = 0; t < ball.n_triangles(); ++t)
    if (ball.corner(t, 0)[2] < S(0.8))
      holed.triangles.insert(holed.triangles.end(), &ball.triangles[3 * t],
                             &ball.triangles[3 * t + 3]);
  for (const TestMesh<S>* mesh : {&ball, &holed}) {
    const knn::omp::MeshTree<S> tree = knn::omp::build_mesh_tree(mesh->geometry(), 2);
    std::mt19937_64 rng(101);
    std::uniform_real_distribution<double> u(-2.0, 2.0);
    double worst = 0;
    for (int i = 0; i < 1500; ++i) {
      const S q[3] = {static_cast<S>(u(rng)), static_cast<S>(u(rng)), static_cast<S>(u(rng))};
      const knn::geometry::Vec3<double> p{q[0], q[1], q[2]};
      double exact = 0;
      for (int64_t t = 0; t < mesh->n_triangles(); ++t) {
        const auto corner = [&](int k) {
          const S* c = mesh->corner(t, k);
          return knn::geometry::Vec3<double>{c[0], c[1], c[2]};
        };
        exact += knn::geometry::solid_angle(p, corner(0), corner(1), corner(2));
      }
      const double r = std::sqrt(p.x * p.x + p.y * p.y + p.z * p.z);
      if (std::fabs(r - 1) < 0.05) continue;
      bool overflow = false;
      const double sum = knn::geometry::solid_angle_sum<S>(tree.arrays(), p, &overflow);
      ASSERT_FALSE(overflow);
      worst = std::max(worst, std::fabs(sum - exact) / (4 * knn::geometry::kPi));
    }
    EXPECT_LT(worst, 0.05) << mesh->n_triangles() << " triangles";
    EXPECT_GT(worst, 0.0) << "the far field is used";
  }
}

// ---- The tree ----------------------------------------------------------------------------------

// The BVH built here from its definition (common/geometry/mesh_bvh.h),
// sequentially: std::sort on (code, id), children by Karras' rules, boxes
// and winding moments by recursion.
template <typename S>
struct ReferenceTree {
  const TestMesh<S>& mesh;
  std::vector<int32_t> order;  // triangle of each leaf
  std::vector<uint64_t> codes;
  std::vector<knn::omp::MeshNode<S>> nodes;
  std::vector<knn::geometry::WindingCluster> clusters;

  explicit ReferenceTree(const TestMesh<S>& m) : mesh(m) {
    const int64_t n = m.n_triangles();
    std::vector<double> centroid(static_cast<size_t>(3 * n));
    double lo[3], hi[3];
    for (int64_t t = 0; t < n; ++t)
      for (int d = 0; d < 3; ++d) {
        centroid[3 * t + d] = knn::geometry::triangle_centroid(m.corner(t, 0)[d], m.corner(t, 1)[d],
                                                               m.corner(t, 2)[d]);
        lo[d] = t == 0 ? centroid[3 * t + d] : std::min(lo[d], centroid[3 * t + d]);
        hi[d] = t == 0 ? centroid[3 * t + d] : std::max(hi[d], centroid[3 * t + d]);
      }
    std::vector<std::pair<uint64_t, int32_t>> keyed;
    for (int64_t t = 0; t < n; ++t) {
      uint32_t cell[3];
      for (int d = 0; d < 3; ++d)
        cell[d] = knn::geometry::morton_cell(centroid[3 * t + d], lo[d], hi[d]);
      keyed.push_back(
          {knn::geometry::morton_code3(cell[0], cell[1], cell[2]), static_cast<int32_t>(t)});
    }
    std::sort(keyed.begin(), keyed.end());
    for (const auto& k : keyed) codes.push_back(k.first), order.push_back(k.second);
    nodes.resize(static_cast<size_t>(std::max<int64_t>(0, n - 1)));
    clusters.resize(nodes.size());
    for (int64_t i = 0; i + 1 < n; ++i)
      knn::geometry::karras_children(codes.data(), n, i, &nodes[i].child[0], &nodes[i].child[1]);
    if (n > 1) finish(0);
  }

  knn::omp::MeshBox<S> leaf_box(int32_t leaf) const {
    knn::omp::MeshBox<S> box;
    for (int d = 0; d < 3; ++d) {
      box.lo[d] = box.hi[d] = mesh.corner(order[leaf], 0)[d];
      for (int k = 1; k < 3; ++k) {
        box.lo[d] = std::min(box.lo[d], mesh.corner(order[leaf], k)[d]);
        box.hi[d] = std::max(box.hi[d], mesh.corner(order[leaf], k)[d]);
      }
    }
    return box;
  }

  // The box and moments of the subtree of reference `ref`.
  std::pair<knn::omp::MeshBox<S>, knn::geometry::WindingMoments> finish(int32_t ref) {
    if (knn::geometry::is_leaf_ref(ref)) {
      const int32_t t = order[knn::geometry::leaf_of_ref(ref)];
      const auto c = [&](int k) {
        return knn::geometry::Vec3<S>{mesh.corner(t, k)[0], mesh.corner(t, k)[1],
                                      mesh.corner(t, k)[2]};
      };
      return {leaf_box(knn::geometry::leaf_of_ref(ref)),
              knn::geometry::triangle_moments(c(0), c(1), c(2))};
    }
    const auto left = finish(nodes[ref].child[0]);
    const auto right = finish(nodes[ref].child[1]);
    nodes[ref].box[0] = left.first;
    nodes[ref].box[1] = right.first;
    knn::omp::MeshBox<S> box;
    for (int d = 0; d < 3; ++d) {
      box.lo[d] = std::min(left.first.lo[d], right.first.lo[d]);
      box.hi[d] = std::max(left.first.hi[d], right.first.hi[d]);
    }
    const knn::geometry::WindingMoments moments =
        knn::geometry::combine_moments(left.second, right.second);
    clusters[ref] = knn::geometry::make_winding_cluster(moments, {box.lo[0], box.lo[1], box.lo[2]},
                                                        {box.hi[0], box.hi[1], box.hi[2]});
    return {box, moments};
  }
};

// What a leaf keeps of its triangle's shape is what the closest-point
// definition (common/geometry/triangle.h) computes of it, restated here in
// plain arithmetic: n = (b - a) x (c - a), n.n (0 without an area), and
// n.n >= |b - a|^2 |c - a|^2 / 1024.
template <typename S>
void expect_shape_of_definition(const knn::geometry::LeafTriangle<S>& leaf) {
  const auto& v = leaf.corner;
  S ab[3], ac[3];
  for (int d = 0; d < 3; ++d) ab[d] = v[1][d] - v[0][d], ac[d] = v[2][d] - v[0][d];
  const S n[3] = {ab[1] * ac[2] - ab[2] * ac[1], ab[2] * ac[0] - ab[0] * ac[2],
                  ab[0] * ac[1] - ab[1] * ac[0]};
  const S nn = n[0] * n[0] + n[1] * n[1] + n[2] * n[2];
  const bool area = nn > 0 && std::isfinite(nn);
  const S ab2 = ab[0] * ab[0] + ab[1] * ab[1] + ab[2] * ab[2];
  const S ac2 = ac[0] * ac[0] + ac[1] * ac[1] + ac[2] * ac[2];
  for (int d = 0; d < 3; ++d) ASSERT_TRUE(same_bits(leaf.normal[d], n[d])) << leaf.id;
  ASSERT_TRUE(same_bits(leaf.normal2, area ? nn : S(0))) << leaf.id;
  ASSERT_EQ(leaf.well_shaped, area && nn >= ab2 * ac2 * S(1.0 / 1024) ? 1 : 0) << leaf.id;
}

template <typename S>
void expect_tree_is_reference(const TestMesh<S>& mesh, const knn::omp::MeshTree<S>& tree) {
  const ReferenceTree<S> ref(mesh);
  ASSERT_EQ(tree.leaves.size(), ref.order.size());
  for (size_t p = 0; p < ref.order.size(); ++p) {
    ASSERT_EQ(tree.leaves[p].id, ref.order[p]) << "leaf " << p;
    for (int k = 0; k < 3; ++k)
      for (int d = 0; d < 3; ++d)
        ASSERT_TRUE(same_bits(tree.leaves[p].corner[k][d], mesh.corner(ref.order[p], k)[d]));
    expect_shape_of_definition(tree.leaves[p]);
  }
  ASSERT_EQ(tree.nodes.size(), ref.nodes.size());
  for (size_t i = 0; i < ref.nodes.size(); ++i) {
    SCOPED_TRACE(i);
    for (int c = 0; c < 2; ++c) {
      ASSERT_EQ(tree.nodes[i].child[c], ref.nodes[i].child[c]);
      for (int d = 0; d < 3; ++d) {
        ASSERT_TRUE(same_bits(tree.nodes[i].box[c].lo[d], ref.nodes[i].box[c].lo[d]));
        ASSERT_TRUE(same_bits(tree.nodes[i].box[c].hi[d], ref.nodes[i].box[c].hi[d]));
      }
    }
    if (mesh.closed) continue;
    const auto& a = tree.clusters[i];
    const auto& b = ref.clusters[i];
    for (const auto& pair :
         {std::make_pair(a.area_normal, b.area_normal), std::make_pair(a.centre, b.centre)}) {
      ASSERT_TRUE(same_bits(pair.first.x, pair.second.x) &&
                  same_bits(pair.first.y, pair.second.y) && same_bits(pair.first.z, pair.second.z));
    }
    ASSERT_TRUE(same_bits(a.radius, b.radius));
  }
}

// The parallel build is the definition's tree, bit for bit, on 1 and 2
// threads, for soups, duplicate centroids (equal codes) and a sphere; and
// every answer is the same bit for bit whatever the threads.
TYPED_TEST(MeshEngineTest, TreeIsPureFunction) {
  using S = TypeParam;
  TestMesh<S> dup = soup<S>(50, 111);
  for (int copy = 0; copy < 5; ++copy)
    dup.triangles.insert(dup.triangles.end(), dup.triangles.begin(), dup.triangles.begin() + 150);
  TestMesh<S> ball = sphere<S>(3);
  TestMesh<S> open_ball = ball;
  open_ball.closed = false;
  for (const TestMesh<S>* mesh : {&dup, &ball, &open_ball}) {
    const TestMesh<S> big = soup<S>(20000, 112);
    for (const TestMesh<S>* m : {mesh, &big})
      for (const int threads : {1, 2}) {
        SCOPED_TRACE(::testing::Message()
                     << m->n_triangles() << " triangles, " << threads << " threads");
        expect_tree_is_reference(*m, knn::omp::build_mesh_tree(m->geometry(), threads));
      }
    const std::vector<S> points = points_around(*mesh, 2000, 113);
    const Answers<S> one = query(*build(*mesh, 1), points, std::numeric_limits<S>::infinity(), 1);
    const Answers<S> two = query(*build(*mesh, 2), points, std::numeric_limits<S>::infinity(), 2);
    EXPECT_EQ(one.ids, two.ids);
    for (size_t i = 0; i < one.sd.size(); ++i) {
      ASSERT_TRUE(same_bits(one.sd[i], two.sd[i]) && same_bits(one.sq[i], two.sq[i])) << i;
      for (int d = 0; d < 3; ++d)
        ASSERT_TRUE(same_bits(one.closest[3 * i + d], two.closest[3 * i + d]) &&
                    same_bits(one.bary[3 * i + d], two.bary[3 * i + d]));
    }
  }
}

// More points than one chunk of the engine's spatial order (2^20): every
// point's answer is its own, wherever its chunk starts.
TYPED_TEST(MeshEngineTest, MorePointsThanOneOrderChunk) {
  using S = TypeParam;
  const TestMesh<S> mesh = cube<S>();
  const int64_t m = (int64_t{1} << 20) + 300;
  std::mt19937_64 rng(151);
  std::uniform_real_distribution<double> u(-3.0, 3.0);
  std::vector<S> points(static_cast<size_t>(3 * m));
  for (S& x : points) x = static_cast<S>(u(rng));
  const auto engine = build(mesh);
  std::vector<int32_t> ids(static_cast<size_t>(m));
  std::vector<S> sd(static_cast<size_t>(m));
  MeshResults<S> out;
  out.triangle_ids = ids.data();
  out.signed_distances = sd.data();
  engine->closest(points.data(), m, std::numeric_limits<S>::infinity(), out, MeshParams());
  for (int64_t i = 0; i < m; i += (i < m - 1000 ? 997 : 1)) {
    const DefinitionHit<S> def =
        definition_nearest(mesh, &points[3 * i], std::numeric_limits<S>::infinity());
    ASSERT_EQ(ids[i], def.id) << i;
    ASSERT_TRUE(same_bits(std::fabs(sd[i]), knn::sqrt_rn(def.point.sq_distance))) << i;
    ASSERT_EQ(sd[i] < 0, cube_signed_distance(v3(&points[3 * i])) < 0) << i;
  }
}

// Outputs that are not wanted stay NULL; the others are the same.
TYPED_TEST(MeshEngineTest, OptionalOutputs) {
  using S = TypeParam;
  const TestMesh<S> mesh = sphere<S>(2);
  const std::vector<S> points = points_around(mesh, 300, 121);
  const auto engine = build(mesh);
  const Answers<S> all = query(*engine, points, S(0.5));
  std::vector<int32_t> ids(points.size() / 3);
  MeshResults<S> out;
  out.triangle_ids = ids.data();
  engine->closest(points.data(), static_cast<int64_t>(ids.size()), S(0.5), out, MeshParams());
  EXPECT_EQ(ids, all.ids);
}

// A flag set before the call: KNN_ERR_CANCELLED, every output "beyond".
TYPED_TEST(MeshEngineTest, CancelledCallLeavesBeyondValues) {
  using S = TypeParam;
  const TestMesh<S> mesh = sphere<S>(2);
  const auto engine = build(mesh);
  const std::vector<S> points = points_around(mesh, 1000, 131);
  volatile int flag = 1;
  knn::set_cancel_flag(&flag);
  Answers<S> got;
  try {
    got = query(*engine, points);
    ADD_FAILURE() << "not cancelled";
  } catch (const knn::Error& e) {
    EXPECT_EQ(e.status(), KNN_ERR_CANCELLED);
  }
  knn::set_cancel_flag(nullptr);
  // query() filled its arrays with -7 first: every one must now say "beyond".
  MeshResults<S> out;
  std::vector<int32_t> ids(1000, 5);
  std::vector<S> sd(1000, S(5)), closest(3000, S(5));
  out.triangle_ids = ids.data();
  out.signed_distances = sd.data();
  out.closest = closest.data();
  knn::set_cancel_flag(&flag);
  EXPECT_THROW(
      engine->closest(points.data(), 1000, std::numeric_limits<S>::infinity(), out, MeshParams()),
      knn::Error);
  knn::set_cancel_flag(nullptr);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(ids[i], -1);
    EXPECT_TRUE(std::isinf(sd[i]));
    EXPECT_TRUE(std::isnan(closest[3 * i]));
  }
}

// ---- The deviation report -----------------------------------------------------------------------

// The report recomputed here from the signed distances (by definition:
// sorted values, sums in blocks of 4096, nearest-rank percentiles, counts
// by scanning).
TYPED_TEST(MeshEngineTest, DeviationReport) {
  using S = TypeParam;
  const TestMesh<S> mesh = sphere<S>(3);
  std::vector<S> points = points_around(mesh, 12000, 141, 0.02);
  const auto engine = build(mesh);
  const S limit = S(0.5);
  const Answers<S> got = query(*engine, points, limit);
  std::vector<double> measured;
  for (const S d : got.sd)
    if (!std::isinf(d)) measured.push_back(static_cast<double>(d));
  std::sort(measured.begin(), measured.end());
  const int64_t count = static_cast<int64_t>(measured.size());
  ASSERT_GT(count, 2 * 4096);
  ASSERT_LT(count, static_cast<int64_t>(got.sd.size()));
  // Edges through measured values, to see the closed and open ends.
  const std::vector<double> edges = {-0.05, measured[count / 4], 0.0, measured[count / 2], 0.05};
  const std::vector<double> percentiles = {0, 1, 25, 50, 99.9, 100};
  const double tolerance = measured[count / 3] < 0 ? -measured[count / 3] : measured[count / 3];
  for (const bool want_values : {false, true}) {
    std::vector<double> pv(percentiles.size(), -1);
    std::vector<int64_t> bins(edges.size() - 1, -1);
    DeviationRequest request;
    request.tolerance = tolerance;
    request.percentiles = percentiles.data();
    request.n_percentiles = static_cast<int>(percentiles.size());
    request.bin_edges = edges.data();
    request.n_bins = static_cast<int>(edges.size() - 1);
    DeviationSummary summary;
    summary.percentile_values = pv.data();
    summary.bin_counts = bins.data();
    std::vector<S> values(got.sd.size(), S(-7));
    engine->deviation(points.data(), static_cast<int64_t>(got.sd.size()), limit, request, &summary,
                      want_values ? values.data() : nullptr, MeshParams());
    if (want_values) {
      for (size_t i = 0; i < values.size(); ++i) ASSERT_TRUE(same_bits(values[i], got.sd[i])) << i;
    }
    EXPECT_EQ(summary.measured, count);
    EXPECT_EQ(summary.beyond, static_cast<int64_t>(got.sd.size()) - count);
    EXPECT_EQ(summary.min, measured.front());
    EXPECT_EQ(summary.max, measured.back());
    double sum = 0, squares = 0;
    for (int64_t first = 0; first < count; first += 4096) {
      double block = 0, block_squares = 0;
      for (int64_t i = first; i < std::min(count, first + 4096); ++i)
        block += measured[i], block_squares += measured[i] * measured[i];
      sum += block, squares += block_squares;
    }
    EXPECT_EQ(summary.mean, sum / count);
    EXPECT_EQ(summary.rms, std::sqrt(squares / count));
    L exact_sum = 0;
    for (const double d : measured) exact_sum += d;
    EXPECT_NEAR(summary.mean, static_cast<double>(exact_sum / count), 1e-12);
    for (size_t j = 0; j < percentiles.size(); ++j) {
      const int64_t rank = static_cast<int64_t>(std::ceil(percentiles[j] / 100 * count));
      EXPECT_EQ(pv[j], measured[std::clamp<int64_t>(rank - 1, 0, count - 1)]) << percentiles[j];
    }
    int64_t within = 0, above = 0, below = 0, below_bins = 0, above_bins = 0;
    std::vector<int64_t> expected_bins(bins.size(), 0);
    for (const double d : measured) {
      within += -tolerance <= d && d <= tolerance;
      above += d > tolerance;
      below += d < -tolerance;
      below_bins += d < edges.front();
      above_bins += d > edges.back();
      for (size_t b = 0; b < expected_bins.size(); ++b)
        expected_bins[b] += edges[b] <= d && (d < edges[b + 1] ||
                                              (b + 1 == expected_bins.size() && d == edges[b + 1]));
    }
    EXPECT_EQ(summary.within_tolerance, within);
    EXPECT_EQ(summary.above_tolerance, above);
    EXPECT_EQ(summary.below_tolerance, below);
    EXPECT_EQ(summary.below_bins, below_bins);
    EXPECT_EQ(summary.above_bins, above_bins);
    EXPECT_EQ(bins, expected_bins);
    EXPECT_GT(within, 0);
    EXPECT_GT(above + below, 0);
  }
}

// No measured point: NaN statistics, zero counts.
TYPED_TEST(MeshEngineTest, DeviationReportOfNothing) {
  using S = TypeParam;
  const TestMesh<S> mesh = cube<S>();
  const std::vector<S> points = {S(10), S(10), S(10), S(-10), S(0), S(0)};
  const auto engine = build(mesh);
  for (const int64_t m : {int64_t{0}, int64_t{2}}) {
    const double edges[] = {-1, 0, 1};
    const double percentiles[] = {50};
    double pv[1] = {0};
    int64_t bins[2] = {-1, -1};
    DeviationRequest request;
    request.percentiles = percentiles;
    request.n_percentiles = 1;
    request.bin_edges = edges;
    request.n_bins = 2;
    DeviationSummary summary;
    summary.percentile_values = pv;
    summary.bin_counts = bins;
    engine->deviation(points.data(), m, S(1), request, &summary, nullptr, MeshParams());
    EXPECT_EQ(summary.measured, 0);
    EXPECT_EQ(summary.beyond, m);
    EXPECT_TRUE(std::isnan(summary.min) && std::isnan(summary.max) && std::isnan(summary.mean) &&
                std::isnan(summary.rms) && std::isnan(pv[0]));
    EXPECT_EQ(bins[0], 0);
    EXPECT_EQ(bins[1], 0);
    EXPECT_EQ(summary.within_tolerance + summary.above_tolerance + summary.below_tolerance, 0);
  }
}

}  // namespace
}  // namespace knn_test
