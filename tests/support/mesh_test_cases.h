// Meshes and points for the tests of the CUDA mesh engine (test_mesh_gpu on
// a device, test_mesh_walk on the host): awkward meshes with what the API
// layer computes for them, and bitwise comparisons.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../../common/geometry/pseudonormals.h"
#include "../../common/geometry/triangle.h"
#include "../../engine/mesh_engine.h"

namespace knn_test {

using knn::geometry::Vec3;

// A validated mesh with what the API layer computes for it.
template <class S>
struct TestMesh {
  std::vector<S> vertices;
  std::vector<int32_t> triangles;
  bool closed = false;
  std::vector<S> vertex_normals, edge_normals;  // closed meshes

  int64_t n_vertices() const { return static_cast<int64_t>(vertices.size() / 3); }
  int64_t n_triangles() const { return static_cast<int64_t>(triangles.size() / 3); }
  knn::MeshGeometry<S> geometry() const {
    knn::MeshGeometry<S> g;
    g.vertices = vertices.data();
    g.n_vertices = n_vertices();
    g.triangles = triangles.data();
    g.n_triangles = n_triangles();
    g.closed_oriented = closed;
    if (closed) {
      g.vertex_normals = vertex_normals.data();
      g.edge_normals = edge_normals.data();
    }
    return g;
  }
  Vec3<S> corner(int64_t t, int k) const {
    const S* v = vertices.data() + 3 * static_cast<int64_t>(triangles[3 * t + k]);
    return {v[0], v[1], v[2]};
  }
};

// The pseudonormals of a closed, oriented mesh as both engines derive them
// (common/geometry/pseudonormals.h: the CUDA engine computes its own on the
// device, so the OpenMP engine gets these same bits through the geometry);
// tests/engines/test_mesh_prepare.cpp checks the definitions against an
// independent float64 computation.
template <class S>
void add_pseudonormals(TestMesh<S>& mesh) {
  namespace geo = knn::geometry;
  const int64_t n = mesh.n_triangles();
  const S* v = mesh.vertices.data();
  const int32_t* tri = mesh.triangles.data();
  std::vector<geo::Double3> face(static_cast<size_t>(n));
  std::vector<geo::Double3> vn(mesh.vertices.size() / 3, geo::Double3{0, 0, 0});
  std::map<std::pair<int32_t, int32_t>, int64_t> edge_owner;
  // Corners in ascending order: each vertex's terms are added in corner order.
  for (int64_t t = 0; t < n; ++t) face[t] = geo::unit_normal(v, tri, t);
  for (int64_t corner = 0; corner < 3 * n; ++corner) {
    const int64_t t = corner / 3;
    const int k = static_cast<int>(corner % 3);
    edge_owner[{tri[corner], tri[3 * t + (k + 1) % 3]}] = t;
    vn[tri[corner]] = geo::add_corner(vn[tri[corner]], geo::corner_angle(v, tri, corner), face[t]);
  }
  mesh.vertex_normals.resize(mesh.vertices.size());
  for (size_t i = 0; i < vn.size(); ++i) geo::store3(mesh.vertex_normals.data() + 3 * i, vn[i]);
  mesh.edge_normals.resize(static_cast<size_t>(9 * n));
  for (int64_t t = 0; t < n; ++t) {
    for (int k = 0; k < 3; ++k) {
      const int64_t other = edge_owner.at({tri[3 * t + (k + 1) % 3], tri[3 * t + k]});
      geo::store3(mesh.edge_normals.data() + 9 * t + 3 * k, geo::edge_sum(face[t], face[other]));
    }
  }
  mesh.closed = true;
}

// A torus of nu x nv quads (2 nu nv triangles), closed and oriented outwards,
// scaled by `scale` and moved by `offset`.
template <class S>
TestMesh<S> torus(int nu, int nv, double scale = 1, double offset = 0, bool closed = true) {
  TestMesh<S> mesh;
  const double pi = 3.14159265358979323846;
  for (int i = 0; i < nu; ++i)
    for (int j = 0; j < nv; ++j) {
      const double u = 2 * pi * i / nu, v = 2 * pi * j / nv;
      const double r = 0.35 * (1 + 0.1 * std::sin(5 * u));
      mesh.vertices.push_back(static_cast<S>(offset + scale * (1 + r * std::cos(v)) * std::cos(u)));
      mesh.vertices.push_back(static_cast<S>(offset + scale * (1 + r * std::cos(v)) * std::sin(u)));
      mesh.vertices.push_back(static_cast<S>(offset + scale * r * std::sin(v)));
    }
  auto at = [&](int i, int j) { return static_cast<int32_t>((i % nu) * nv + (j % nv)); };
  for (int i = 0; i < nu; ++i)
    for (int j = 0; j < nv; ++j) {
      const int32_t a = at(i, j), b = at(i + 1, j), c = at(i + 1, j + 1), d = at(i, j + 1);
      // (i, j) -> (i + 1, j) -> (i, j + 1) runs counter-clockwise seen from
      // outside for this parametrisation.
      for (const int32_t x : {a, b, d, b, c, d}) mesh.triangles.push_back(x);
    }
  if (closed) add_pseudonormals(mesh);
  return mesh;
}

// The torus with a band of quads removed: open (signs by the winding number).
template <class S>
TestMesh<S> open_torus(int nu, int nv) {
  TestMesh<S> mesh = torus<S>(nu, nv, 1, 0, false);
  mesh.triangles.resize(mesh.triangles.size() - 6 * static_cast<size_t>(nv / 3));
  return mesh;
}

// A soup: random triangles, needles, points, repeated vertices, exact
// duplicates (ties to the smaller id), scaled by `scale` around `offset`.
template <class S>
TestMesh<S> soup(int n, uint64_t seed, double scale = 1, double offset = 0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  TestMesh<S> mesh;
  auto add_vertex = [&](double x, double y, double z) {
    for (double c : {x, y, z}) mesh.vertices.push_back(static_cast<S>(offset + scale * c));
    return static_cast<int32_t>(mesh.vertices.size() / 3 - 1);
  };
  for (int t = 0; t < n; ++t) {
    const double cx = u(rng), cy = u(rng), cz = u(rng), r = 0.2 * std::abs(u(rng));
    const int32_t a = add_vertex(cx + r * u(rng), cy + r * u(rng), cz + r * u(rng));
    int32_t b = add_vertex(cx + r * u(rng), cy + r * u(rng), cz + r * u(rng));
    int32_t c = add_vertex(cx + r * u(rng), cy + r * u(rng), cz + r * u(rng));
    switch (t % 7) {
      case 1: c = b; break;      // repeated vertex: a needle
      case 2: b = c = a; break;  // a point
      case 3: {                  // three collinear vertices: no area
        const S* pa = &mesh.vertices[3 * a];
        const S* pb = &mesh.vertices[3 * b];
        c = add_vertex((2 * (pb[0] - offset) - (pa[0] - offset)) / scale,
                       (2 * (pb[1] - offset) - (pa[1] - offset)) / scale,
                       (2 * (pb[2] - offset) - (pa[2] - offset)) / scale);
        break;
      }
      case 4:  // an exact duplicate of the previous triangle
        for (int k = 0; k < 3; ++k) mesh.triangles.push_back(mesh.triangles[3 * (t - 1) + k]);
        continue;
      default: break;
    }
    for (const int32_t x : {a, b, c}) mesh.triangles.push_back(x);
  }
  return mesh;
}

// Points near and far: random ones around the mesh's box, every vertex
// exactly, edge midpoints, and far outliers.
template <class S>
std::vector<S> points_for(const TestMesh<S>& mesh, int random, uint64_t seed) {
  std::mt19937_64 rng(seed);
  S lo[3], hi[3];
  for (int d = 0; d < 3; ++d) lo[d] = hi[d] = mesh.vertices[d];
  for (size_t i = 0; i < mesh.vertices.size(); ++i) {
    lo[i % 3] = std::min(lo[i % 3], mesh.vertices[i]);
    hi[i % 3] = std::max(hi[i % 3], mesh.vertices[i]);
  }
  std::vector<S> points;
  for (int i = 0; i < random; ++i)
    for (int d = 0; d < 3; ++d) {
      const double w = hi[d] - lo[d];
      std::uniform_real_distribution<double> u(double(lo[d]) - 0.3 * w, double(hi[d]) + 0.3 * w);
      points.push_back(static_cast<S>(u(rng)));
    }
  for (int64_t v = 0; v < std::min<int64_t>(mesh.n_vertices(), 64); ++v)
    for (int d = 0; d < 3; ++d) points.push_back(mesh.vertices[3 * v + d]);
  for (int64_t t = 0; t < std::min<int64_t>(mesh.n_triangles(), 64); ++t) {
    const Vec3<S> a = mesh.corner(t, 0), b = mesh.corner(t, 1);
    points.push_back((a.x + b.x) / 2), points.push_back((a.y + b.y) / 2),
        points.push_back((a.z + b.z) / 2);
  }
  for (int i = 0; i < 8; ++i)
    for (int d = 0; d < 3; ++d) points.push_back(static_cast<S>((d == i % 3 ? 1e4 : 3) * hi[d]));
  return points;
}

template <class S>
struct Answers {
  std::vector<int32_t> ids;
  std::vector<S> sq, closest, bary, signed_d;
  explicit Answers(int64_t m)
      : ids(static_cast<size_t>(m), 7),
        sq(static_cast<size_t>(m), 7),
        closest(static_cast<size_t>(3 * m), 7),
        bary(static_cast<size_t>(3 * m), 7),
        signed_d(static_cast<size_t>(m), 7) {}
  knn::MeshResults<S> results() {
    return {ids.data(), sq.data(), closest.data(), bary.data(), signed_d.data()};
  }
};

// Bits, so that NaNs and the zeros' signs count (a namespace of their own:
// tests/support/oracle.h has a same_bits too).
namespace mesh_bits {
template <class S>
bool same_bits(const std::vector<S>& a, const std::vector<S>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(S)) == 0;
}
template <class S>
std::string first_difference(const std::vector<S>& a, const std::vector<S>& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(S)) != 0)
      return "at " + std::to_string(i) + ": " + std::to_string(double(a[i])) + " against " +
             std::to_string(double(b[i]));
  return a.size() == b.size() ? "none" : "sizes differ";
}
}  // namespace mesh_bits
#define EXPECT_SAME_BITS(a, b)                      \
  EXPECT_TRUE(knn_test::mesh_bits::same_bits(a, b)) \
      << #a " " << knn_test::mesh_bits::first_difference(a, b)

template <class S>
Answers<S> engine_closest(const knn::MeshEngine<S>& engine, const std::vector<S>& points,
                          S max_distance, const knn::MeshParams& call = {}) {
  const int64_t m = static_cast<int64_t>(points.size() / 3);
  Answers<S> a(m);
  engine.closest(points.data(), m, max_distance, a.results(), call);
  return a;
}

template <class S>
struct MeshCase {
  std::string name;
  TestMesh<S> mesh;
  double scale, offset;
};

template <class S>
std::vector<MeshCase<S>> awkward_meshes() {
  std::vector<MeshCase<S>> cases;
  TestMesh<S> one;
  one.vertices = {0, 0, 0, 1, 0, 0, 0, 1, 0};
  one.triangles = {0, 1, 2};
  cases.push_back({"one triangle", one, 1, 0});
  TestMesh<S> needle;
  needle.vertices = {0, 0, 0, 1, 1, 1};
  needle.triangles = {0, 1, 1};
  cases.push_back({"one needle", needle, 1, 0});
  TestMesh<S> twins;  // the same triangle twice: ties to the smaller id
  twins.vertices = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0};
  twins.triangles = {3, 1, 2, 0, 1, 2};
  cases.push_back({"twins", twins, 1, 0});
  cases.push_back({"soup", soup<S>(700, 3), 1, 0});
  cases.push_back({"soup, huge offset", soup<S>(300, 4, 1, 1e5), 1, 1e5});
  cases.push_back({"soup, tiny", soup<S>(300, 5, 1e-15), 1e-15, 0});
  cases.push_back({"closed torus", torus<S>(40, 24), 1, 0});
  cases.push_back({"closed torus, offset", torus<S>(30, 20, 0.01, 1000), 0.01, 1000});
  cases.push_back({"open torus", open_torus<S>(40, 24), 1, 0});
  return cases;
}

}  // namespace knn_test
