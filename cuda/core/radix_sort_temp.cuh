// CUB's temporary bytes for the key-id sorts every tree engine runs.
#pragma once

#include <cub/device/device_radix_sort.cuh>

#include <cstddef>
#include <cstdint>

#include "cuda_support.h"

namespace knn {
namespace cuda {

// Temporary bytes of cub::DeviceRadixSort::SortPairs (double-buffer form)
// over `items` pairs of uint32 keys and int32 ids, all 32 key bits: enough
// for a sort of fewer bits too. Callers bound it with checked_cub_temp.
inline size_t pair_sort_temp_bytes(int64_t items) {
  size_t bytes = 0;
  cub::DoubleBuffer<uint32_t> keys(nullptr, nullptr);
  cub::DoubleBuffer<int32_t> ids(nullptr, nullptr);
  check(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, ids, items),
        "cub::DeviceRadixSort::SortPairs (size)");
  return bytes;
}

}  // namespace cuda
}  // namespace knn
