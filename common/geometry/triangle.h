// The closest point of a triangle to a point: the library's one definition
// (contract section 6), compiled by every engine for host and device, in
// float or double.
//
// Every operation is one rounded op of the mesh's scalar (common/float_math.h:
// no fused multiply-add on either side), in the order written here, so the
// CPU and GPU engines compute the same bits. The definition:
//   1. If the triangle has an area (n = (b - a) x (c - a), n.n > 0) and the
//      point's projection q' onto its plane lies inside or on it (the three
//      edge functions ((v_i - q') x (v_j - q')).n all >= 0, their sum > 0),
//      the face offers a point (feature: the face; weights w_i: the edge
//      functions over their sum): q' itself when the triangle is well shaped
//      (n.n >= |b - a|^2 |c - a|^2 / 2^10: the sine of its angle at a is at
//      least 1/32), otherwise w0 a + w1 b + w2 c.
//   2. The closest point of an edge p0 p1 is p0 + t (p1 - p0),
//      t = ((q - p0).(p1 - p0)) / |p1 - p0|^2 clamped to [0, 1] (t = 0 for an
//      edge of no length), and exactly p0 or p1 at the ends (feature: that
//      vertex; otherwise the edge).
//   3. A well-shaped triangle that offers a face point answers with it. Any
//      other triangle answers with the nearest of its face point (if it
//      offers one) and the closest points of its edges ab, bc, ca, ties to
//      the first in that order.
// Why the slivers' way: the normal of a sliver comes from nearly parallel
// edges, and its rounding (relative error about eps / sin(angle at a)) can
// tilt it anywhere: the projection and the inside test are then noise (a
// point on a corner of a rounded-collinear float triangle measured 0.035
// from it by q'). Built from the weights, the face point lies on the
// triangle whatever the rounding, so the nearest candidate is never nearer
// than the triangle and never farther than its edges. In exact arithmetic
// every step gives the true closest point.
// The squared distance is always that from the point to the closest point
// returned (common/float_math.h squared_distance3), so callers comparing
// triangles compare what they report. A degenerate triangle (no area: a
// needle, a point, repeated vertices) offers no face point: its closest
// point is that of its edges, as the contract says.
#pragma once

#include <cstdint>

#include "../float_math.h"
#include "../host_device.h"

namespace knn {
namespace geometry {

template <typename Scalar>
struct Vec3 {
  Scalar x, y, z;
};

template <typename Scalar>
KNN_HD Vec3<Scalar> sub3(const Vec3<Scalar>& a, const Vec3<Scalar>& b) {
  return {sub_rn(a.x, b.x), sub_rn(a.y, b.y), sub_rn(a.z, b.z)};
}

template <typename Scalar>
KNN_HD Scalar dot3(const Vec3<Scalar>& a, const Vec3<Scalar>& b) {
  return add_rn(add_rn(mul_rn(a.x, b.x), mul_rn(a.y, b.y)), mul_rn(a.z, b.z));
}

template <typename Scalar>
KNN_HD Vec3<Scalar> cross3(const Vec3<Scalar>& a, const Vec3<Scalar>& b) {
  return {sub_rn(mul_rn(a.y, b.z), mul_rn(a.z, b.y)), sub_rn(mul_rn(a.z, b.x), mul_rn(a.x, b.z)),
          sub_rn(mul_rn(a.x, b.y), mul_rn(a.y, b.x))};
}

// a + t d, coordinate by coordinate.
template <typename Scalar>
KNN_HD Vec3<Scalar> along3(const Vec3<Scalar>& a, Scalar t, const Vec3<Scalar>& d) {
  return {add_rn(a.x, mul_rn(t, d.x)), add_rn(a.y, mul_rn(t, d.y)), add_rn(a.z, mul_rn(t, d.z))};
}

// w0 a + w1 b + w2 c, coordinate by coordinate.
template <typename Scalar>
KNN_HD Vec3<Scalar> weighted3(const Scalar* w, const Vec3<Scalar>& a, const Vec3<Scalar>& b,
                              const Vec3<Scalar>& c) {
  return {add_rn(add_rn(mul_rn(w[0], a.x), mul_rn(w[1], b.x)), mul_rn(w[2], c.x)),
          add_rn(add_rn(mul_rn(w[0], a.y), mul_rn(w[1], b.y)), mul_rn(w[2], c.y)),
          add_rn(add_rn(mul_rn(w[0], a.z), mul_rn(w[1], b.z)), mul_rn(w[2], c.z))};
}

template <typename Scalar>
KNN_HD Scalar squared_distance3(const Vec3<Scalar>& q, const Vec3<Scalar>& p) {
  return knn::squared_distance3(q.x, q.y, q.z, p.x, p.y, p.z);
}

// Which part of the triangle holds the closest point. Vertices and edges are
// numbered after the triangle's corners: edge i runs from corner i to corner
// (i + 1) % 3. The sign of a signed distance is taken from this feature's
// pseudonormal (engine/mesh_engine.h).
enum class TriangleFeature : int8_t {
  kFace = 0,
  kVertex0 = 1,
  kVertex1 = 2,
  kVertex2 = 3,
  kEdge0 = 4,  // corners 0 -> 1
  kEdge1 = 5,  // corners 1 -> 2
  kEdge2 = 6,  // corners 2 -> 0
};

KNN_HD bool is_vertex(TriangleFeature f) {
  return f >= TriangleFeature::kVertex0 && f <= TriangleFeature::kVertex2;
}
KNN_HD bool is_edge(TriangleFeature f) { return f >= TriangleFeature::kEdge0; }
KNN_HD int corner_of(TriangleFeature f) { return static_cast<int>(f) - 1; }
KNN_HD int edge_of(TriangleFeature f) { return static_cast<int>(f) - 4; }

template <typename Scalar>
struct TrianglePoint {
  Scalar sq_distance;
  Vec3<Scalar> closest;
  Scalar weights[3];  // barycentric: closest = w0 a + w1 b + w2 c (up to rounding)
  TriangleFeature feature;
};

// The closest point of the edge from corner `i` (at p0) to the next (p1).
template <typename Scalar>
KNN_HD TrianglePoint<Scalar> closest_point_on_edge(const Vec3<Scalar>& q, const Vec3<Scalar>& p0,
                                                   const Vec3<Scalar>& p1, int i) {
  const Vec3<Scalar> d = sub3(p1, p0);
  const Scalar length2 = dot3(d, d);
  Scalar t = Scalar(0);
  if (length2 > Scalar(0)) t = div_rn(dot3(sub3(q, p0), d), length2);
  TrianglePoint<Scalar> r;
  const int j = i == 2 ? 0 : i + 1;
  const int k = 3 - i - j;
  r.weights[k] = Scalar(0);
  if (!(t > Scalar(0))) {  // also catches a NaN t (never, for finite input)
    r.closest = p0;
    r.weights[i] = Scalar(1);
    r.weights[j] = Scalar(0);
    r.feature = static_cast<TriangleFeature>(1 + i);
  } else if (t >= Scalar(1)) {
    r.closest = p1;
    r.weights[i] = Scalar(0);
    r.weights[j] = Scalar(1);
    r.feature = static_cast<TriangleFeature>(1 + j);
  } else {
    r.closest = along3(p0, t, d);
    r.weights[i] = sub_rn(Scalar(1), t);
    r.weights[j] = t;
    r.feature = static_cast<TriangleFeature>(4 + i);
  }
  r.sq_distance = squared_distance3(q, r.closest);
  return r;
}

// Well-shaped triangles: n.n >= |b - a|^2 |c - a|^2 * kWellShapedSine2.
constexpr double kWellShapedSine2 = 1.0 / 1024;

// What the definition computes of a triangle alone, whatever the point:
// its normal n = (b - a) x (c - a), n.n where the triangle has an area
// (n.n > 0 and finite; 0 otherwise) and whether it is well shaped. A tree
// keeps it per leaf (common/geometry/mesh_layout.h): the same ops, so the
// same bits, computed once instead of once per point.
template <typename Scalar>
struct TriangleShape {
  Vec3<Scalar> normal;
  Scalar normal2;
  bool well_shaped;
};

template <typename Scalar>
KNN_HD TriangleShape<Scalar> triangle_shape(const Vec3<Scalar>& a, const Vec3<Scalar>& b,
                                            const Vec3<Scalar>& c) {
  const Vec3<Scalar> ab = sub3(b, a), ac = sub3(c, a);
  TriangleShape<Scalar> shape;
  shape.normal = cross3(ab, ac);
  const Scalar nn = dot3(shape.normal, shape.normal);
  const bool has_area = nn > Scalar(0) && is_finite_float(nn);
  shape.normal2 = has_area ? nn : Scalar(0);
  shape.well_shaped = has_area && nn >= mul_rn(mul_rn(dot3(ab, ab), dot3(ac, ac)),
                                               static_cast<Scalar>(kWellShapedSine2));
  return shape;
}

// The closest point of triangle (a, b, c) to q, by the definition above,
// given the triangle's shape (triangle_shape(a, b, c)).
template <typename Scalar>
KNN_HD TrianglePoint<Scalar> closest_point_on_triangle(const Vec3<Scalar>& q, const Vec3<Scalar>& a,
                                                       const Vec3<Scalar>& b, const Vec3<Scalar>& c,
                                                       const TriangleShape<Scalar>& shape) {
  const Vec3<Scalar>& n = shape.normal;
  const Scalar nn = shape.normal2;
  bool has_face = false;
  TrianglePoint<Scalar> best;
  if (nn > Scalar(0)) {
    const Scalar s = div_rn(dot3(sub3(q, a), n), nn);
    const Vec3<Scalar> projected = along3(q, sub_rn(Scalar(0), s), n);
    const Vec3<Scalar> pa = sub3(a, projected), pb = sub3(b, projected), pc = sub3(c, projected);
    const Scalar wa = dot3(cross3(pb, pc), n);
    const Scalar wb = dot3(cross3(pc, pa), n);
    const Scalar wc = dot3(cross3(pa, pb), n);
    const Scalar sum = add_rn(add_rn(wa, wb), wc);
    if (wa >= Scalar(0) && wb >= Scalar(0) && wc >= Scalar(0) && sum > Scalar(0)) {
      has_face = true;
      best.weights[0] = div_rn(wa, sum);
      best.weights[1] = div_rn(wb, sum);
      best.weights[2] = div_rn(wc, sum);
      best.feature = TriangleFeature::kFace;
      if (shape.well_shaped) {
        best.closest = projected;
        best.sq_distance = squared_distance3(q, projected);
        return best;
      }
      best.closest = weighted3(best.weights, a, b, c);
      best.sq_distance = squared_distance3(q, best.closest);
    }
  }
  const TrianglePoint<Scalar> e0 = closest_point_on_edge(q, a, b, 0);
  if (!has_face || e0.sq_distance < best.sq_distance) best = e0;
  const TrianglePoint<Scalar> e1 = closest_point_on_edge(q, b, c, 1);
  if (e1.sq_distance < best.sq_distance) best = e1;
  const TrianglePoint<Scalar> e2 = closest_point_on_edge(q, c, a, 2);
  if (e2.sq_distance < best.sq_distance) best = e2;
  return best;
}

// The closest point of triangle (a, b, c) to q, by the definition above.
template <typename Scalar>
KNN_HD TrianglePoint<Scalar> closest_point_on_triangle(const Vec3<Scalar>& q, const Vec3<Scalar>& a,
                                                       const Vec3<Scalar>& b,
                                                       const Vec3<Scalar>& c) {
  return closest_point_on_triangle(q, a, b, c, triangle_shape(a, b, c));
}

// The better of two candidates of a search: the smaller squared distance,
// ties to the smaller triangle id (the contract's rule; id -1 is "none yet"
// and loses every tie).
template <typename Scalar>
KNN_HD bool is_closer(Scalar sq_distance, int32_t id, Scalar best_sq_distance, int32_t best_id) {
  return sq_distance < best_sq_distance ||
         (sq_distance == best_sq_distance && (best_id < 0 || id < best_id));
}

}  // namespace geometry
}  // namespace knn
