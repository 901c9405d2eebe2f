// What the mesh build computes for every engine (src/mesh_prepare.*): the
// closed-and-oriented test and the pseudonormals, against a long-double
// computation written here (the vertex normal as the angle-weighted sum of
// the unit normals of the triangles at the vertex, by acos of the corner's
// cosine; the edge normal as the sum of the unit normals of the two
// triangles that share the edge, found by a map of directed edges), and the
// same bits whatever the thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "../../src/mesh_prepare.h"
#include "mesh_oracle.h"

namespace knn_test {
namespace {

using knn_mesh_oracle::Mesh;
using knn_mesh_oracle::P3;
using knn_mesh_oracle::Real;

P3 unit_normal(const Mesh& m, int64_t t) {
  const P3 n =
      knn_mesh_oracle::cross(m.corner(t, 1) - m.corner(t, 0), m.corner(t, 2) - m.corner(t, 0));
  const Real length = std::sqrt(norm2(n));
  return length > 0 ? (1 / length) * n : P3{0, 0, 0};
}

// The closed-and-oriented test by its definition: every directed edge
// appears once and its reverse once.
bool closed_oriented(const Mesh& m) {
  std::map<std::pair<int32_t, int32_t>, int> runs;
  for (int64_t t = 0; t < m.n_triangles(); ++t)
    for (int i = 0; i < 3; ++i) {
      const int32_t a = m.triangles[3 * t + i], b = m.triangles[3 * t + (i + 1) % 3];
      if (a == b) return false;
      ++runs[{a, b}];
    }
  for (const auto& [edge, count] : runs) {
    const auto reverse = runs.find({edge.second, edge.first});
    if (count != 1 || reverse == runs.end() || reverse->second != 1) return false;
  }
  return true;
}

template <class S>
void expect_pseudonormals(const Mesh& exact, int threads) {
  Mesh m = exact;
  for (double& c : m.vertices) c = static_cast<double>(static_cast<S>(c));
  const std::vector<S> v(m.vertices.begin(), m.vertices.end());
  const knn::PreparedMesh<S> p = knn::prepare_mesh(v.data(), m.n_vertices(), m.triangles.data(),
                                                   m.n_triangles(), threads, true);
  ASSERT_EQ(p.closed_oriented, closed_oriented(m));
  ASSERT_EQ(std::vector<S>(p.vertices.begin(), p.vertices.end()), v);
  ASSERT_EQ(std::vector<int32_t>(p.triangles.begin(), p.triangles.end()), m.triangles);
  if (!p.closed_oriented) {
    EXPECT_TRUE(p.vertex_normals.empty() && p.edge_normals.empty());
    return;
  }
  const Real tol = sizeof(S) == 4 ? 1e-5L : 1e-12L;
  std::vector<P3> vertex(static_cast<size_t>(m.n_vertices()), P3{0, 0, 0});
  std::map<std::pair<int32_t, int32_t>, int64_t> owner;
  for (int64_t t = 0; t < m.n_triangles(); ++t) {
    const P3 n = unit_normal(m, t);
    for (int i = 0; i < 3; ++i) {
      owner[{m.triangles[3 * t + i], m.triangles[3 * t + (i + 1) % 3]}] = t;
      const P3 e1 = m.corner(t, (i + 1) % 3) - m.corner(t, i);
      const P3 e2 = m.corner(t, (i + 2) % 3) - m.corner(t, i);
      const Real cosine = dot(e1, e2) / std::sqrt(norm2(e1) * norm2(e2));
      const Real angle = std::acos(std::max<Real>(-1, std::min<Real>(1, cosine)));
      vertex[m.triangles[3 * t + i]] = vertex[m.triangles[3 * t + i]] + angle * n;
    }
  }
  for (int64_t i = 0; i < m.n_vertices(); ++i)
    for (int d = 0; d < 3; ++d) {
      const Real want = d == 0 ? vertex[i].x : d == 1 ? vertex[i].y : vertex[i].z;
      ASSERT_NEAR(p.vertex_normals[3 * i + d], want, tol) << "vertex " << i << " axis " << d;
    }
  for (int64_t t = 0; t < m.n_triangles(); ++t)
    for (int i = 0; i < 3; ++i) {
      const int32_t a = m.triangles[3 * t + i], b = m.triangles[3 * t + (i + 1) % 3];
      const P3 want = unit_normal(m, t) + unit_normal(m, owner.at({b, a}));
      const S* got = &p.edge_normals[9 * t + 3 * i];
      ASSERT_NEAR(got[0], want.x, tol) << "triangle " << t << " edge " << i;
      ASSERT_NEAR(got[1], want.y, tol);
      ASSERT_NEAR(got[2], want.z, tol);
    }
}

// An icosphere with its vertices moved at random (so that no two corners
// share an angle) and renumbered in a random order.
Mesh jittered_sphere(uint64_t seed) {
  Mesh m = knn_mesh_oracle::icosphere(3);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> jitter(-0.02, 0.02);
  for (double& c : m.vertices) c += jitter(rng);
  std::vector<int32_t> order(static_cast<size_t>(m.n_vertices()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<double> moved(m.vertices.size());
  for (size_t i = 0; i < order.size(); ++i)
    for (int d = 0; d < 3; ++d) moved[3 * order[i] + d] = m.vertices[3 * i + d];
  m.vertices = moved;
  for (int32_t& v : m.triangles) v = order[static_cast<size_t>(v)];
  return m;
}

TEST(MeshPrepare, ClosednessAndPseudonormalsAsDefined) {
  Mesh pillow;  // two triangles back to back: closed and oriented
  pillow.vertices = {0, 0, 0, 1, 0, 0, 0, 1, 0};
  pillow.triangles = {0, 1, 2, 0, 2, 1};
  Mesh reversed_pair = pillow;  // the same edge run twice in one direction
  reversed_pair.triangles = {0, 1, 2, 0, 1, 2};
  for (const Mesh& m : {knn_mesh_oracle::cube(), knn_mesh_oracle::icosphere(2), jittered_sphere(3),
                        knn_mesh_oracle::open_box(), pillow, reversed_pair})
    for (int threads : {1, 3}) {
      expect_pseudonormals<float>(m, threads);
      expect_pseudonormals<double>(m, threads);
    }
}

// The buckets are filled by threads in any order and sorted after: the
// normals do not depend on the thread count.
TEST(MeshPrepare, SameBitsWhateverTheThreads) {
  const Mesh m = jittered_sphere(5);
  const std::vector<float> v(m.vertices.begin(), m.vertices.end());
  const knn::PreparedMesh<float> one =
      knn::prepare_mesh(v.data(), m.n_vertices(), m.triangles.data(), m.n_triangles(), 1, true);
  for (int threads : {2, 4, 7}) {
    const knn::PreparedMesh<float> many = knn::prepare_mesh(
        v.data(), m.n_vertices(), m.triangles.data(), m.n_triangles(), threads, true);
    ASSERT_TRUE(many.closed_oriented);
    EXPECT_EQ(0, std::memcmp(one.vertex_normals.data(), many.vertex_normals.data(),
                             one.vertex_normals.size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(one.edge_normals.data(), many.edge_normals.data(),
                             one.edge_normals.size() * sizeof(float)));
  }
}

}  // namespace
}  // namespace knn_test
