// The largest coordinate magnitude the distance-based calls accept, the
// contract's coordinate rule (include/knn_gpgpu.h, general rules). Header
// only and free of the library's other types, so that every place that
// checks coordinates (src/validate.cpp, and the distributed index in mpi/,
// which checks before it moves points between ranks) uses the one formula.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace knn {

// 2^e with e = floor((M - 3 - ceil(log2 dim)) / 2), where M is the scalar
// type's max_exponent (128 for float32, 1024 for float64). For float32
// (M - 3 = 125): 2^62 (4.6e18) for dim 1 and 2, 2^61 for dim 3 and 4, 2^56
// for dim 4096; for float64 (M - 3 = 1021): 2^510 for dim 1 and 2, 2^509
// (about 1.7e153) for dim 3 and 4. Why it is enough: for |p|, |q| <= L = 2^e
// the rounded difference is at most 2L (a power of two, and rounding is
// monotone), its square at most 4L^2, and the sum of dim such squares,
// rounded after every addition, at most dim * 4L^2 <= 2^(M - 1) < the type's
// max. So no squared distance (nor any bound the engines compute from the
// same operations) overflows to +infinity, which would make a real neighbour
// look like a missing slot.
template <typename Scalar = float>
Scalar coordinate_limit(int dim) {
  int ceil_log2 = 0;
  while ((int64_t{1} << ceil_log2) < dim) ++ceil_log2;
  return std::ldexp(Scalar{1}, (std::numeric_limits<Scalar>::max_exponent - 3 - ceil_log2) / 2);
}

}  // namespace knn
