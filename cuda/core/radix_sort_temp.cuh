// CUB's temporary bytes for the key-id sorts every tree engine runs.
#pragma once

#include <cub/device/device_radix_sort.cuh>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../../common/float_math.h"
#include "cuda_support.h"

namespace knn {
namespace cuda {

// Order-preserving unsigned keys of coordinates (ordered_key,
// common/float_math.h): ascending keys are ascending values, -0 and +0
// alike. 32 bits for float, 64 for double, the latter spelt unsigned long
// long as the device atomics and shuffles take it.
template <typename Scalar>
struct OrderedKey {
  using type = std::conditional_t<sizeof(Scalar) == 4, uint32_t, unsigned long long>;
  static KNN_HD type of(Scalar v) { return ordered_key(v); }
};

// Bits a radix sort of Key keys below `count` needs: the fewest (at least 1,
// at most Key's width) with 2^bits >= count.
template <typename Key>
int key_bits_below(uint64_t count) {
  int bits = 1;
  while (bits < 8 * static_cast<int>(sizeof(Key)) && (uint64_t{1} << bits) < count) ++bits;
  return bits;
}

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
