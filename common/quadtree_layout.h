// Quadtree geometry both point-in-polygon engines use: the points' bounding
// box is quantised to a 2^16 x 2^16 grid of cells, and a point's Morton key
// interleaves the bits of its cell column and row (x in the even bits, y in
// the odd bits). Sorting points by (key, index) makes every quadtree node a
// contiguous range of the sorted order: the node at depth d holds the keys
// sharing its top 2*d bits, and its four children split on the next two.
#pragma once

#include <cstdint>

#include "host_device.h"

namespace knn {
namespace quadtree {

constexpr int kCellBits = 16;         // cells per axis = 2^16
constexpr int kMaxDepth = kCellBits;  // a node at this depth is one cell
constexpr uint32_t kMaxCell = (1u << kCellBits) - 1;

// Maps coordinates to cells: cell = floor((v - min) * scale), clamped. Only
// monotonicity matters (points in a node stay a contiguous range); node boxes
// used for geometry come from the points themselves, never from the cells.
struct Quantiser {
  double min_x = 0.0;
  double min_y = 0.0;
  double scale_x = 0.0;  // cells per unit; 0 when the extent is 0
  double scale_y = 0.0;
};

// T is the points' scalar, float or double.
template <class T>
KNN_HD double cells_per_unit(T min, T max) {
  // Differences are computed in double so that huge float extents
  // (-3e38 .. 3e38) do not overflow; double points lie within +-2^500
  // (pip::kMaxMagnitude), so theirs do not either.
  const double extent = static_cast<double>(max) - static_cast<double>(min);
  return extent > 0.0 ? static_cast<double>(kMaxCell + 1) / extent : 0.0;
}

template <class T>
KNN_HD Quantiser make_quantiser(T min_x, T min_y, T max_x, T max_y) {
  Quantiser q;
  q.min_x = min_x;
  q.min_y = min_y;
  q.scale_x = cells_per_unit(min_x, max_x);
  q.scale_y = cells_per_unit(min_y, max_y);
  return q;
}

// Monotone in v (a rounded difference, a rounded product and a floor are),
// which is all the layout needs.
template <class T>
KNN_HD uint32_t quantise(T v, double min, double scale) {
  const double cell = (static_cast<double>(v) - min) * scale;
  if (!(cell > 0.0)) return 0;
  if (cell >= static_cast<double>(kMaxCell)) return kMaxCell;
  return static_cast<uint32_t>(cell);
}

// Spreads the low 16 bits of v to the even bit positions.
KNN_HD uint32_t spread_bits(uint32_t v) {
  v &= 0x0000ffffu;
  v = (v | (v << 8)) & 0x00ff00ffu;
  v = (v | (v << 4)) & 0x0f0f0f0fu;
  v = (v | (v << 2)) & 0x33333333u;
  v = (v | (v << 1)) & 0x55555555u;
  return v;
}

KNN_HD uint32_t morton_key(uint32_t cell_x, uint32_t cell_y) {
  return spread_bits(cell_x) | (spread_bits(cell_y) << 1);
}

template <class T>
KNN_HD uint32_t point_key(const Quantiser& q, T x, T y) {
  return morton_key(quantise(x, q.min_x, q.scale_x), quantise(y, q.min_y, q.scale_y));
}

// The quadrant (0..3) of a key below a node at `depth` (< kMaxDepth).
KNN_HD uint32_t child_quadrant(uint32_t key, int depth) {
  return (key >> (2 * (kMaxDepth - 1 - depth))) & 3u;
}

// The smallest key of quadrant `quadrant` of the node at `depth` whose
// smallest key is `node_first_key`.
KNN_HD uint32_t child_first_key(uint32_t node_first_key, int depth, uint32_t quadrant) {
  return node_first_key | (quadrant << (2 * (kMaxDepth - 1 - depth)));
}

}  // namespace quadtree
}  // namespace knn
