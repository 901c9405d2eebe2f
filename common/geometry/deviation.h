// The deviation report's statistics (contract section 6), defined once for
// every engine: each is a function of the measured signed distances sorted
// ascending, so the order in which an engine found them does not matter and
// every engine reports the same bits.
//   min, max        the first and last sorted value;
//   mean, rms       sum / count and sqrt(sum of squares / count), each sum in
//                   double over the sorted values in blocks of
//                   kDeviationSumBlock (sequential inside a block, then the
//                   block sums in order: block_sum / sum_of_block_sums);
//   percentile p    the nearest rank: the sorted value at position
//                   ceil(p / 100 * count) - 1, clamped to [0, count - 1];
//   bins            bin b counts edges[b] <= d < edges[b + 1], the last bin
//                   also d = edges[n_bins]; below_bins and above_bins count
//                   the values outside [edges[0], edges[n_bins]];
//   tolerance t     within: -t <= d <= t; above: d > t; below: d < -t.
#pragma once

#include <cstdint>

#include "../float_math.h"
#include "../host_device.h"

namespace knn {
namespace geometry {

constexpr int64_t kDeviationSumBlock = 4096;

// The sum of values[first, first + count) (or of their squares) in double,
// sequentially: one block.
template <typename Scalar>
KNN_HD double block_sum(const Scalar* values, int64_t first, int64_t count, bool squares) {
  double sum = 0.0;
  for (int64_t i = first; i < first + count; ++i) {
    const double v = static_cast<double>(values[i]);
    sum = add_rn(sum, squares ? mul_rn(v, v) : v);
  }
  return sum;
}

// The block sums added in order.
inline double sum_of_block_sums(const double* block_sums, int64_t blocks) {
  double sum = 0.0;
  for (int64_t b = 0; b < blocks; ++b) sum = add_rn(sum, block_sums[b]);
  return sum;
}

// The sorted position of percentile p (in [0, 100]) among count > 0 values.
inline int64_t percentile_position(double p, int64_t count) {
  const double rank = std::ceil(div_rn(mul_rn(p, static_cast<double>(count)), 100.0));
  int64_t position = static_cast<int64_t>(rank) - 1;
  if (position < 0) position = 0;
  if (position > count - 1) position = count - 1;
  return position;
}

}  // namespace geometry
}  // namespace knn
