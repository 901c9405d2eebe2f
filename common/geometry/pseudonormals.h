// The pseudonormals of a closed, oriented mesh (the signs of its signed
// distances, engine/mesh_engine.h MeshGeometry), defined once for the host
// preparation (src/mesh_prepare.cpp, for the OpenMP engine) and the device
// one (cuda/mesh/mesh_prepare.cu), so that both give the same bits:
//   unit normal of a triangle  n = (b - a) x (c - a) / |.|, in double; zero
//                              without area;
//   edge pseudonormal          the sum of the unit normals of the edge's two
//                              triangles (its own first), rounded to Scalar;
//   vertex pseudonormal        the sum over the vertex's corners, in corner
//                              order (3 t + i ascending), of the corner's
//                              interior angle times its triangle's unit
//                              normal, rounded to Scalar.
// Every step is one rounded +, -, *, / or sqrt in double (common/float_math.h:
// the same bits on both sides), the angle included: winding.h's
// portable_atan2 instead of the C library's, whose last bits differ between
// the host and the device.
#pragma once

#include <cstdint>

#include "../float_math.h"
#include "../host_device.h"
#include "triangle.h"
#include "winding.h"

namespace knn {
namespace geometry {

using Double3 = Vec3<double>;

template <typename Scalar>
KNN_HD Double3 vertex_of(const Scalar* vertices, int32_t v) {
  const Scalar* p = vertices + 3 * static_cast<int64_t>(v);
  return {static_cast<double>(p[0]), static_cast<double>(p[1]), static_cast<double>(p[2])};
}

// Triangle t's unit normal by the right-hand rule (zero without area).
template <typename Scalar>
KNN_HD Double3 unit_normal(const Scalar* vertices, const int32_t* triangles, int64_t t) {
  const int32_t* c = triangles + 3 * t;
  const Double3 a = vertex_of(vertices, c[0]);
  const Double3 n = cross3(sub3(vertex_of(vertices, c[1]), a), sub3(vertex_of(vertices, c[2]), a));
  const double length = sqrt_rn(dot3(n, n));
  if (!(length > 0)) return {0, 0, 0};
  return {div_rn(n.x, length), div_rn(n.y, length), div_rn(n.z, length)};
}

// The interior angle at corner 3 t + i (0 where an edge at it has no length).
template <typename Scalar>
KNN_HD double corner_angle(const Scalar* vertices, const int32_t* triangles, int64_t corner) {
  const int64_t base = corner - corner % 3;
  const int i = static_cast<int>(corner % 3);
  const Double3 p = vertex_of(vertices, triangles[corner]);
  const Double3 e1 = sub3(vertex_of(vertices, triangles[base + (i + 1) % 3]), p);
  const Double3 e2 = sub3(vertex_of(vertices, triangles[base + (i + 2) % 3]), p);
  const Double3 n = cross3(e1, e2);
  return portable_atan2(sqrt_rn(dot3(n, n)), dot3(e1, e2));
}

// One corner's term added to a vertex's running sum.
KNN_HD Double3 add_corner(const Double3& sum, double angle, const Double3& n) {
  return {add_rn(sum.x, mul_rn(angle, n.x)), add_rn(sum.y, mul_rn(angle, n.y)),
          add_rn(sum.z, mul_rn(angle, n.z))};
}

// An edge's pseudonormal: its own triangle's unit normal plus its partner's.
KNN_HD Double3 edge_sum(const Double3& own, const Double3& other) {
  return {add_rn(own.x, other.x), add_rn(own.y, other.y), add_rn(own.z, other.z)};
}

template <typename Scalar>
KNN_HD void store3(Scalar* out, const Double3& v) {
  out[0] = static_cast<Scalar>(v.x);
  out[1] = static_cast<Scalar>(v.y);
  out[2] = static_cast<Scalar>(v.z);
}

// Half-edge h = 3 t + i of triangle t runs from its corner i to corner
// (i + 1) % 3.
KNN_HD int32_t half_edge_from(const int32_t* triangles, int64_t h) { return triangles[h]; }
KNN_HD int32_t half_edge_to(const int32_t* triangles, int64_t h) {
  return triangles[h % 3 == 2 ? h - 2 : h + 1];
}

}  // namespace geometry
}  // namespace knn
