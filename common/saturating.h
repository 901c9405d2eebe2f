// Byte counts that saturate at SIZE_MAX instead of wrapping: the memory
// helpers take sizes from callers (2^30 queries of k = 2^30), and an estimate
// must never understate.
#pragma once

#include <cstddef>
#include <cstdint>

namespace knn {

inline size_t saturating_add(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }
inline size_t saturating_mul(size_t a, size_t b) {
  return b != 0 && a > SIZE_MAX / b ? SIZE_MAX : a * b;
}

}  // namespace knn
