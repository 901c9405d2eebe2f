// The range of a set of order-preserving keys (OrderedKey,
// radix_sort_temp.cuh) and its reductions: the bounding boxes of the grid
// build and the kd-tree builds' segment ranges are all reductions of it.
#pragma once

namespace knn {
namespace cuda {

// The least and largest key of a set (empty: low above high);
// MergeKeyRanges is the operator of the reductions over it.
template <typename Key>
struct KeyRange {
  Key low, high;
  __device__ static KeyRange empty() { return {~Key{0}, Key{0}}; }
  __device__ void add(Key key) {
    low = key < low ? key : low;
    high = key > high ? key : high;
  }
};
template <typename Key>
struct MergeKeyRanges {
  __device__ KeyRange<Key> operator()(const KeyRange<Key>& a, const KeyRange<Key>& b) const {
    return {b.low < a.low ? b.low : a.low, b.high > a.high ? b.high : a.high};
  }
};

// A warp's key range in every lane. Hand-written rather than
// cub::WarpReduce, which hands the result to lane 0 alone; the kd-tree's
// one-warp tier needs it in every lane, which goes on to split with it.
template <typename Key>
__device__ KeyRange<Key> warp_key_range(KeyRange<Key> range) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const KeyRange<Key> other{__shfl_xor_sync(0xffffffffu, range.low, offset),
                              __shfl_xor_sync(0xffffffffu, range.high, offset)};
    range = MergeKeyRanges<Key>()(range, other);
  }
  return range;
}

}  // namespace cuda
}  // namespace knn
