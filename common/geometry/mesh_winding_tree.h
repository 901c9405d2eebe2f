// The far-field data of the BVH nodes for the generalized winding number of
// a mesh that is not closed and oriented (common/geometry/winding.h), defined
// once so that every engine sums the same terms in the same order and
// decides the same signs.
//
// Every triangle contributes its moments (triangle_moments): its
// area-weighted normal (b - a) x (c - a) / 2, its area |(b - a) x (c - a)| / 2
// and its area times its centroid (mesh_bvh.h triangle_centroid), all in
// double from the Scalar corners. An internal node's moments are its left
// child's plus its right child's (combine_moments, left + right per
// component), so a bottom-up build (the GPU's) and a recursive one (the
// CPU's) give the same bits. From its moments and its box (the union of its
// children's boxes, the exact min / max of its triangles' vertex coordinates
// in the mesh's Scalar, taken to double) a node gets its cluster
// (make_winding_cluster): the area-weighted normal, the centre (the
// area-weighted centroid; the box centre when the node has no area) and the
// radius (the distance from the centre to the farthest corner of the box).
//
// The solid-angle sum of a point q (q's coordinates in double): visit the
// root; at an internal node whose cluster is far enough from q
// (is_far_enough: |q - centre| > 2 radius) add dipole_solid_angle(q, centre,
// area_normal) and skip its subtree, otherwise visit its left child, then its
// right child; at a leaf add solid_angle(q, a, b, c) of its triangle (corners
// in double). The terms go, in that visiting order (depth first, left before
// right), into one double starting at +0.0; winding_says_inside decides.
// A mesh of one triangle has no internal node: the sum is its solid angle.
#pragma once

#include "../float_math.h"
#include "../host_device.h"
#include "mesh_bvh.h"
#include "triangle.h"
#include "winding.h"

namespace knn {
namespace geometry {

// What a node sums over its triangles.
struct WindingMoments {
  Vec3<double> area_normal;    // sum of (b - a) x (c - a) / 2
  Vec3<double> area_centroid;  // sum of area * centroid
  double area;                 // sum of |(b - a) x (c - a)| / 2
};

// What the traversal reads of an internal node.
struct WindingCluster {
  Vec3<double> area_normal;
  Vec3<double> centre;
  double radius;
};

template <typename Scalar>
KNN_HD WindingMoments triangle_moments(const Vec3<Scalar>& a, const Vec3<Scalar>& b,
                                       const Vec3<Scalar>& c) {
  const Vec3<double> da = to_double3(a), db = to_double3(b), dc = to_double3(c);
  const Vec3<double> n = cross3(sub3(db, da), sub3(dc, da));
  WindingMoments m;
  m.area_normal = {mul_rn(0.5, n.x), mul_rn(0.5, n.y), mul_rn(0.5, n.z)};
  m.area = mul_rn(0.5, norm3(n));
  m.area_centroid = {mul_rn(m.area, triangle_centroid(a.x, b.x, c.x)),
                     mul_rn(m.area, triangle_centroid(a.y, b.y, c.y)),
                     mul_rn(m.area, triangle_centroid(a.z, b.z, c.z))};
  return m;
}

KNN_HD Vec3<double> add3(const Vec3<double>& a, const Vec3<double>& b) {
  return {add_rn(a.x, b.x), add_rn(a.y, b.y), add_rn(a.z, b.z)};
}

// The moments of an internal node from its children's: left + right.
KNN_HD WindingMoments combine_moments(const WindingMoments& left, const WindingMoments& right) {
  WindingMoments m;
  m.area_normal = add3(left.area_normal, right.area_normal);
  m.area_centroid = add3(left.area_centroid, right.area_centroid);
  m.area = add_rn(left.area, right.area);
  return m;
}

// The farther of the two box faces from c on one axis.
KNN_HD double farther_extent(double c, double lo, double hi) {
  const double below = sub_rn(c, lo), above = sub_rn(hi, c);
  return below > above ? below : above;
}

// A node's cluster from its moments and its box [lo, hi] (the Scalar box
// taken to double).
KNN_HD WindingCluster make_winding_cluster(const WindingMoments& m, const Vec3<double>& lo,
                                           const Vec3<double>& hi) {
  WindingCluster cluster;
  cluster.area_normal = m.area_normal;
  if (m.area > 0.0) {
    cluster.centre = {div_rn(m.area_centroid.x, m.area), div_rn(m.area_centroid.y, m.area),
                      div_rn(m.area_centroid.z, m.area)};
  } else {
    cluster.centre = {mul_rn(add_rn(lo.x, hi.x), 0.5), mul_rn(add_rn(lo.y, hi.y), 0.5),
                      mul_rn(add_rn(lo.z, hi.z), 0.5)};
  }
  const Vec3<double> corner = {farther_extent(cluster.centre.x, lo.x, hi.x),
                               farther_extent(cluster.centre.y, lo.y, hi.y),
                               farther_extent(cluster.centre.z, lo.z, hi.z)};
  cluster.radius = norm3(corner);
  return cluster;
}

// Whether q sees the cluster as one dipole: |q - centre| > 2 radius.
KNN_HD bool is_far_enough(const Vec3<double>& q, const WindingCluster& cluster) {
  return norm3(sub3(q, cluster.centre)) > mul_rn(2.0, cluster.radius);
}

}  // namespace geometry
}  // namespace knn
