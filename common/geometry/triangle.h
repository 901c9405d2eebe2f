// The closest point of a triangle to a point: the library's one definition
// (contract section 6), compiled by every engine for host and device, in
// float or double.
//
// Every operation is one rounded op of the mesh's scalar (common/float_math.h:
// no fused multiply-add on either side), in the order written here, so the
// CPU and GPU engines compute the same bits. The definition:
//   1. If the triangle has an area (n = (b - a) x (c - a), n.n > 0) and the
//      point's projection q' onto its plane lies inside or on it (the three
//      edge functions ((v_i - q') x (v_j - q')).n all >= 0), the closest point
//      is q' (feature: the face; weights: the edge functions over their sum).
//   2. Otherwise it is the nearest of the closest points of the three edges
//      ab, bc, ca, ties to the first in that order. The closest point of an
//      edge p0 p1 is p0 + t (p1 - p0), t = ((q - p0).(p1 - p0)) / |p1 - p0|^2
//      clamped to [0, 1] (t = 0 for an edge of no length), and exactly p0 or
//      p1 at the ends (feature: that vertex; otherwise the edge).
// The squared distance is always that from the point to the closest point
// returned (common/float_math.h squared_distance3), so callers comparing
// triangles compare what they report. A degenerate triangle (no area: a
// needle, a point, repeated vertices) takes step 2 only, as the contract
// says: its closest point is that of its edges.
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

// The closest point of triangle (a, b, c) to q, by the definition above.
template <typename Scalar>
KNN_HD TrianglePoint<Scalar> closest_point_on_triangle(const Vec3<Scalar>& q, const Vec3<Scalar>& a,
                                                       const Vec3<Scalar>& b,
                                                       const Vec3<Scalar>& c) {
  const Vec3<Scalar> n = cross3(sub3(b, a), sub3(c, a));
  const Scalar nn = dot3(n, n);
  if (nn > Scalar(0) && is_finite_float(nn)) {
    const Scalar s = div_rn(dot3(sub3(q, a), n), nn);
    const Vec3<Scalar> projected = along3(q, sub_rn(Scalar(0), s), n);
    const Vec3<Scalar> pa = sub3(a, projected), pb = sub3(b, projected), pc = sub3(c, projected);
    const Scalar wa = dot3(cross3(pb, pc), n);
    const Scalar wb = dot3(cross3(pc, pa), n);
    const Scalar wc = dot3(cross3(pa, pb), n);
    const Scalar sum = add_rn(add_rn(wa, wb), wc);
    if (wa >= Scalar(0) && wb >= Scalar(0) && wc >= Scalar(0) && sum > Scalar(0)) {
      TrianglePoint<Scalar> r;
      r.closest = projected;
      r.weights[0] = div_rn(wa, sum);
      r.weights[1] = div_rn(wb, sum);
      r.weights[2] = div_rn(wc, sum);
      r.feature = TriangleFeature::kFace;
      r.sq_distance = squared_distance3(q, projected);
      return r;
    }
  }
  TrianglePoint<Scalar> best = closest_point_on_edge(q, a, b, 0);
  const TrianglePoint<Scalar> e1 = closest_point_on_edge(q, b, c, 1);
  if (e1.sq_distance < best.sq_distance) best = e1;
  const TrianglePoint<Scalar> e2 = closest_point_on_edge(q, c, a, 2);
  if (e2.sq_distance < best.sq_distance) best = e2;
  return best;
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
