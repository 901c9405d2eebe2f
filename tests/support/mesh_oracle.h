// An oracle of the mesh calls, written apart from the library: the closest
// point of a triangle by Ericson's region method (Real-Time Collision
// Detection, 5.1.5: the Voronoi regions of the vertices, edges and face,
// decided by dot products) in long double, with zero-area triangles taken
// as their three segments, and the nearest triangle by brute force over
// all of them. Plus the test meshes: an icosphere, a cube, an open box.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>
#include <vector>

namespace knn_mesh_oracle {

using Real = long double;

struct P3 {
  Real x, y, z;
};
inline P3 operator+(P3 a, P3 b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
inline P3 operator-(P3 a, P3 b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
inline P3 operator*(Real s, P3 a) { return {s * a.x, s * a.y, s * a.z}; }
inline Real dot(P3 a, P3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
inline P3 cross(P3 a, P3 b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
inline Real norm2(P3 a) { return dot(a, a); }

struct OnTriangle {
  Real sq;
  P3 point;
  Real w[3];  // barycentric weights of a, b, c
};

// The closest point of segment p0 p1 (weights into slots i, j of w).
inline OnTriangle on_segment(P3 q, P3 p0, P3 p1, int i, int j) {
  const P3 d = p1 - p0;
  Real t = norm2(d) > 0 ? dot(q - p0, d) / norm2(d) : 0;
  t = std::min<Real>(1, std::max<Real>(0, t));
  OnTriangle r{};
  r.point = p0 + t * d;
  r.w[i] = 1 - t;
  r.w[j] = t;
  r.sq = norm2(q - r.point);
  return r;
}

inline OnTriangle closest_on_triangle(P3 p, P3 a, P3 b, P3 c) {
  const P3 ab = b - a, ac = c - a;
  if (norm2(cross(ab, ac)) == 0) {
    OnTriangle best = on_segment(p, a, b, 0, 1);
    for (const OnTriangle& e : {on_segment(p, b, c, 1, 2), on_segment(p, c, a, 2, 0)})
      if (e.sq < best.sq) best = e;
    return best;
  }
  auto done = [&](P3 point, Real wa, Real wb, Real wc) {
    return OnTriangle{norm2(p - point), point, {wa, wb, wc}};
  };
  const P3 ap = p - a;
  const Real d1 = dot(ab, ap), d2 = dot(ac, ap);
  if (d1 <= 0 && d2 <= 0) return done(a, 1, 0, 0);
  const P3 bp = p - b;
  const Real d3 = dot(ab, bp), d4 = dot(ac, bp);
  if (d3 >= 0 && d4 <= d3) return done(b, 0, 1, 0);
  const Real vc = d1 * d4 - d3 * d2;
  if (vc <= 0 && d1 >= 0 && d3 <= 0) {
    const Real v = d1 / (d1 - d3);
    return done(a + v * ab, 1 - v, v, 0);
  }
  const P3 cp = p - c;
  const Real d5 = dot(ab, cp), d6 = dot(ac, cp);
  if (d6 >= 0 && d5 <= d6) return done(c, 0, 0, 1);
  const Real vb = d5 * d2 - d1 * d6;
  if (vb <= 0 && d2 >= 0 && d6 <= 0) {
    const Real w = d2 / (d2 - d6);
    return done(a + w * ac, 1 - w, 0, w);
  }
  const Real va = d3 * d6 - d5 * d4;
  if (va <= 0 && d4 - d3 >= 0 && d5 - d6 >= 0) {
    const Real w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
    return done(b + w * (c - b), 0, 1 - w, w);
  }
  const Real denom = 1 / (va + vb + vc);
  const Real v = vb * denom, w = vc * denom;
  return done(a + v * ab + w * ac, 1 - v - w, v, w);
}

// A mesh in double (a float32 test converts its float vertices exactly).
struct Mesh {
  std::vector<double> vertices;    // n x 3
  std::vector<int32_t> triangles;  // n x 3
  int64_t n_vertices() const { return static_cast<int64_t>(vertices.size() / 3); }
  int64_t n_triangles() const { return static_cast<int64_t>(triangles.size() / 3); }
  P3 vertex(int64_t v) const { return {vertices[3 * v], vertices[3 * v + 1], vertices[3 * v + 2]}; }
  P3 corner(int64_t t, int i) const { return vertex(triangles[3 * t + i]); }
  std::vector<float> vertices32() const {
    return std::vector<float>(vertices.begin(), vertices.end());
  }
};

inline OnTriangle closest_on(const Mesh& mesh, int64_t t, P3 q) {
  return closest_on_triangle(q, mesh.corner(t, 0), mesh.corner(t, 1), mesh.corner(t, 2));
}

struct Nearest {
  int32_t id = -1;  // -1: none within the limit
  Real sq = std::numeric_limits<Real>::infinity();
};

// The least squared distance over all triangles (first of the least).
inline Nearest nearest(const Mesh& mesh, P3 q) {
  Nearest best;
  for (int64_t t = 0; t < mesh.n_triangles(); ++t) {
    const Real sq = closest_on(mesh, t, q).sq;
    if (sq < best.sq) best = {static_cast<int32_t>(t), sq};
  }
  return best;
}

// Turns every triangle of a mesh that is star-shaped about the origin to
// face away from it (a, b, c counter-clockwise seen from outside).
inline void face_outward(Mesh& mesh) {
  for (int64_t t = 0; t < mesh.n_triangles(); ++t) {
    const P3 a = mesh.corner(t, 0), b = mesh.corner(t, 1), c = mesh.corner(t, 2);
    if (dot(cross(b - a, c - a), a + b + c) < 0)
      std::swap(mesh.triangles[3 * t + 1], mesh.triangles[3 * t + 2]);
  }
}

// The icosahedron on the unit sphere, each triangle cut in four
// `subdivisions` times (new vertices pushed onto the sphere).
inline Mesh icosphere(int subdivisions) {
  const double g = (1 + std::sqrt(5.0)) / 2;
  Mesh m;
  const double raw[12][3] = {{-1, g, 0}, {1, g, 0}, {-1, -g, 0}, {1, -g, 0},
                             {0, -1, g}, {0, 1, g}, {0, -1, -g}, {0, 1, -g},
                             {g, 0, -1}, {g, 0, 1}, {-g, 0, -1}, {-g, 0, 1}};
  for (const auto& r : raw) {
    const double s = std::sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
    for (double c : r) m.vertices.push_back(c / s);
  }
  m.triangles = {0, 11, 5,  0, 5,  1, 0, 1, 7, 0, 7,  10, 0, 10, 11, 1, 5, 9, 5, 11,
                 4, 11, 10, 2, 10, 7, 6, 7, 1, 8, 3,  9,  4, 3,  4,  2, 3, 2, 6, 3,
                 6, 8,  3,  8, 9,  4, 9, 5, 2, 4, 11, 6,  2, 10, 8,  6, 7, 9, 8, 1};
  for (int s = 0; s < subdivisions; ++s) {
    std::map<std::pair<int32_t, int32_t>, int32_t> middle;
    auto mid = [&](int32_t a, int32_t b) {
      const auto key = std::minmax(a, b);
      const auto found = middle.find(key);
      if (found != middle.end()) return found->second;
      const P3 p = 0.5L * (m.vertex(a) + m.vertex(b));
      const Real len = std::sqrt(norm2(p));
      for (Real c : {p.x, p.y, p.z}) m.vertices.push_back(static_cast<double>(c / len));
      const int32_t id = static_cast<int32_t>(m.n_vertices() - 1);
      middle.emplace(key, id);
      return id;
    };
    std::vector<int32_t> next;
    for (int64_t t = 0; t < m.n_triangles(); ++t) {
      const int32_t a = m.triangles[3 * t], b = m.triangles[3 * t + 1], c = m.triangles[3 * t + 2];
      const int32_t ab = mid(a, b), bc = mid(b, c), ca = mid(c, a);
      next.insert(next.end(), {a, ab, ca, b, bc, ab, c, ca, bc, ab, bc, ca});
    }
    m.triangles = next;
  }
  face_outward(m);
  return m;
}

// The cube [-1, 1]^3, two triangles a face.
inline Mesh cube() {
  Mesh m;
  for (int v = 0; v < 8; ++v)
    for (int axis = 0; axis < 3; ++axis) m.vertices.push_back((v >> axis) & 1 ? 1.0 : -1.0);
  // Faces by their four corners in cyclic order.
  const int faces[6][4] = {{0, 1, 3, 2}, {4, 5, 7, 6}, {0, 1, 5, 4},
                           {2, 3, 7, 6}, {0, 2, 6, 4}, {1, 3, 7, 5}};
  for (const auto& f : faces)
    m.triangles.insert(m.triangles.end(), {f[0], f[1], f[2], f[0], f[2], f[3]});
  face_outward(m);
  return m;
}

// The cube without its top face (z = 1): an open box.
inline Mesh open_box() {
  Mesh m = cube();
  std::vector<int32_t> kept;
  for (int64_t t = 0; t < m.n_triangles(); ++t) {
    bool top = true;
    for (int i = 0; i < 3; ++i) top = top && m.corner(t, i).z > 0;
    if (!top) kept.insert(kept.end(), m.triangles.begin() + 3 * t, m.triangles.begin() + 3 * t + 3);
  }
  m.triangles = kept;
  return m;
}

}  // namespace knn_mesh_oracle
