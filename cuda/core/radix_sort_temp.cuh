// CUB's temporary bytes for the key-id sorts every tree engine runs.
#pragma once

#include <cub/device/device_radix_sort.cuh>

#include <cstddef>
#include <cstdint>

#include "../../common/float_math.h"
#include "cuda_support.h"

namespace knn {
namespace cuda {

// Order-preserving unsigned keys of coordinates (common/float_math.h):
// ascending keys are ascending values, -0 and +0 alike. 32 bits for float,
// 64 for double.
template <typename Scalar>
struct OrderedKey;
template <>
struct OrderedKey<float> {
  using type = uint32_t;
  static KNN_HD type of(float v) { return ordered_float_key(v); }
};
template <>
struct OrderedKey<double> {
  using type = unsigned long long;  // uint64_t, spelt as the device atomics take it
  static KNN_HD type of(double v) { return ordered_double_key(v); }
};

// Temporary bytes of cub::DeviceRadixSort::SortPairs (double-buffer form)
// over `items` pairs of Key keys and int32 ids, all key bits: enough for a
// sort of fewer bits too. Callers bound it with checked_cub_temp.
template <typename Key = uint32_t>
size_t pair_sort_temp_bytes(int64_t items) {
  size_t bytes = 0;
  cub::DoubleBuffer<Key> keys(nullptr, nullptr);
  cub::DoubleBuffer<int32_t> ids(nullptr, nullptr);
  check(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, ids, items),
        "cub::DeviceRadixSort::SortPairs (size)");
  return bytes;
}

}  // namespace cuda
}  // namespace knn
