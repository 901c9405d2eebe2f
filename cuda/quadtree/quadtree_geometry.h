// The exact geometric test the GPU quadtree query prunes with, kept apart
// from the kernels so that the host tests can check it (KNN_HD).
#pragma once

#include "../../common/host_device.h"
#include "../../common/pip_predicate.h"

namespace knn {
namespace quadtree {

// Whether the segment (a, b) meets the closed box [min_x, max_x] x [min_y,
// max_y]. Exact for float inputs and doubles in the predicate's range, T
// either (separating axes: x, y, and the segment's
// normal, whose side of each corner the exact orientation predicate
// decides). A query emits a node whole only when no edge meets its box, so a
// wrong "no" would lose or add points; a degenerate (zero-length) edge is
// reported as meeting the box whenever its point lies in it.
template <class T>
KNN_HD bool segment_meets_box(T ax, T ay, T bx, T by, T min_x, T min_y, T max_x, T max_y) {
  if ((ax > bx ? ax : bx) < min_x || (ax < bx ? ax : bx) > max_x || (ay > by ? ay : by) < min_y ||
      (ay < by ? ay : by) > max_y)
    return false;
  const int s = pip::orientation_sign(ax, ay, bx, by, min_x, min_y);
  if (s == 0) return true;
  return pip::orientation_sign(ax, ay, bx, by, max_x, min_y) != s ||
         pip::orientation_sign(ax, ay, bx, by, min_x, max_y) != s ||
         pip::orientation_sign(ax, ay, bx, by, max_x, max_y) != s;
}

}  // namespace quadtree
}  // namespace knn
