// The pieces of a median split (median_split.cuh) that both its tiers use:
// the radix select's digits, a segment's split rule, and where a row goes
// in the partition.

#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cstdint>

#include "../../common/float_math.h"
#include "../../engine/cancel.h"
#include "../core/cuda_support.h"
#include "../core/key_range.cuh"
#include "../core/knn_lists.cuh"
#include "../core/memory_model.h"
#include "../core/radix_sort_temp.cuh"

namespace knn {
namespace cuda {
namespace median_split {

constexpr int kTileRows = static_cast<int>(kSplitTile / kBlock);

// Digits of a radix select over keys of type Key, kBits bits each, the most
// significant first.
template <typename Key, int kBits>
struct Digits {
  static constexpr int kKeyBits = 8 * static_cast<int>(sizeof(Key));
  static constexpr int kCount = kKeyBits / kBits;
  static constexpr Key kMask = (Key{1} << kBits) - 1;
  __device__ static int shift(int pass) { return kKeyBits - kBits * (pass + 1); }
  // The bits above digit `pass`.
  __device__ static Key above(int pass) {
    return pass == 0 ? Key{0} : ~Key{0} << (kKeyBits - kBits * pass);
  }
  // The first digit in which two keys differ (diff = a ^ b != 0).
  __device__ static int first_differing(Key diff) {
    const int msb = sizeof(Key) == 4 ? 31 - __clz(static_cast<unsigned>(diff))
                                     : 63 - __clzll(static_cast<long long>(diff));
    return (kKeyBits - 1 - msb) / kBits;
  }
};

// A segment's select and, once it is done, its split. While the select runs,
// pivot holds the digits chosen so far and `rank` the rank of the wanted
// point among the keys that share them; at the end pivot is its key and
// rank its rank among the keys equal to it. rank -1: no point is wanted (an
// empty left half, or an empty segment), pivot 0 (no finite coordinate has
// key 0).
template <typename Key>
struct SplitRule {
  Key pivot;
  int32_t rank;
  int32_t pass;  // the select's next digit; the digit count when it is done
};
static_assert(sizeof(SplitRule<unsigned long long>) <= kSplitRuleBytes, "rule size");

// The rule a select starts from, given the split dimension's key range
// [low, high] and the wanted point's rank in (coordinate, index) order.
template <typename Key, int kBits>
__device__ SplitRule<Key> start_rule(Key low, Key high, int64_t wanted) {
  using D = Digits<Key, kBits>;
  if (wanted < 0) return SplitRule<Key>{Key{0}, -1, D::kCount};
  const Key diff = low ^ high;
  const int32_t rank = static_cast<int32_t>(wanted);
  if (diff == 0) return SplitRule<Key>{low, rank, D::kCount};
  const int pass = D::first_differing(diff);
  return SplitRule<Key>{static_cast<Key>(low & D::above(pass)), rank, pass};
}

// Counts of keys below and equal to the pivot: before one entry of a row
// (from the segment's start) and in the whole row.
struct RowPlace {
  uint32_t lt_before, eq_before;
  uint32_t lt_row, eq_row;
};

// The counts of one warp's row of 32 entries; lt_run and eq_run count the
// keys below and equal to the pivot before the row.
__device__ inline RowPlace place_in_warp_row(bool lt, bool eq, uint32_t lt_run, uint32_t eq_run) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned lt_ballot = __ballot_sync(0xffffffffu, lt);
  const unsigned eq_ballot = __ballot_sync(0xffffffffu, eq);
  const unsigned below = (1u << lane) - 1;
  return RowPlace{lt_run + __popc(lt_ballot & below), eq_run + __popc(eq_ballot & below),
                  static_cast<uint32_t>(__popc(lt_ballot)),
                  static_cast<uint32_t>(__popc(eq_ballot))};
}

// The counts of a block's row of kBlock entries, the warps' counts combined
// through `slots` (one packed count per warp; the caller alternates two sets
// of slots between rows, so one barrier a row suffices).
__device__ inline RowPlace place_in_block_row(bool lt, bool eq, uint32_t lt_run, uint32_t eq_run,
                                              uint32_t* slots) {
  const int warp = threadIdx.x / 32;
  RowPlace place = place_in_warp_row(lt, eq, lt_run, eq_run);
  if (threadIdx.x % 32 == 0) slots[warp] = place.lt_row | place.eq_row << 16;
  __syncthreads();
  uint32_t lt_row = 0, eq_row = 0;
  for (int w = 0; w < kBlockWarps; ++w) {
    const uint32_t packed = slots[w];
    if (w == warp) place.lt_before += lt_row, place.eq_before += eq_row;
    lt_row += packed & 0xffffu, eq_row += packed >> 16;
  }
  place.lt_row = lt_row, place.eq_row = eq_row;
  return place;
}

// Where the entry at position p of a split segment goes: to the node itself,
// or to its place within the left or the right child's segment. `equal_left`
// is how many keys equal to the pivot go left.
struct Destination {
  enum Side { kLeft, kRight, kNode } side;
  uint32_t offset;
};
template <bool kNodePoints>
__device__ Destination destination(bool lt, bool eq, const RowPlace& place, uint32_t p,
                                   uint32_t equal_left) {
  const uint32_t left_before = place.lt_before + min(place.eq_before, equal_left);
  if (lt || (eq && place.eq_before < equal_left)) return {Destination::kLeft, left_before};
  if (kNodePoints && eq && place.eq_before == equal_left) return {Destination::kNode, 0};
  const uint32_t node_before = kNodePoints && place.eq_before > equal_left ? 1u : 0u;
  return {Destination::kRight, p - left_before - node_before};
}

// How many keys equal to the pivot go left once the select is done.
template <class Splits, typename Key>
__device__ uint32_t equal_left_of(const SplitRule<Key>& rule) {
  return static_cast<uint32_t>(max(0, rule.rank + (Splits::kNodePoints ? 0 : 1)));
}

// The (coordinate, index) rank of the point a segment's select wants: the
// last point of the left half, or the node's own point.
template <class Splits>
__device__ int64_t wanted_rank(const Splits& s, int level, int64_t q, int64_t size) {
  if (size == 0) return -1;
  return Splits::kNodePoints ? s.left_size(level, q) : s.left_size(level, q) - 1;
}

}  // namespace median_split
}  // namespace cuda
}  // namespace knn
