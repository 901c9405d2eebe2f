// Selection of the element of a given rank, without a branch on the
// comparison: shared by the OpenMP builds of the classic kd-tree
// (omp_kdtree_build.cpp) and the index kd-tree (omp_index_kdtree.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <utility>

namespace knn {
namespace omp {

// Ranges of more than this many keys are first narrowed by a sample's
// bracket of the rank (select_rank).
constexpr int64_t kSelectBracketKeys = 2048;
// The most a sample holds, in bytes (on the stack of an OpenMP thread).
constexpr int64_t kSelectSampleBytes = 16 * 1024;

// The key of rank `rank` among keys[0, count) in the order of `less` (a
// total order, best computed without a branch), reordering the keys so that
// those before the rank come first.
//
// Quickselect whose partition has no branch on the comparison (Lomuto's
// scheme with the swap made unconditional), as the keys of a split are a coin
// toss against the pivot and std::nth_element's partition mispredicts about
// every other key. A large range is first narrowed by two partitions around
// keys of a sample that bracket the rank, a few sample standard deviations
// either side (Floyd and Rivest's idea): the first pass reads the range, the
// second the side that holds the rank, and what is left is a few percent of
// the range (about 1.6 passes in all where a median-of-three quickselect
// makes about 2.75 on a median). The median of 16-byte keys (the classic
// build's), CPU time per key on a shared 2-core AMD EPYC: 10^6 keys 7.7 ->
// 4.9 ns, 16384 keys 7.9 -> 5.2 ns; mpBuildKdTree of 10^6 uniform points
// 103 -> 97 ms of CPU time. Then each pivot is the median of three keys
// at pseudo-random places. The places follow a fixed sequence (the same
// keys give the same work), so that no ordered pattern of the input
// (sorted, reversed, organ pipe) makes a pivot the range's end; should
// ranges still shrink too slowly, std::nth_element finishes. Only the set of
// keys on each side of the rank is defined, not their order.
template <typename Key, typename Less = std::less<Key>>
Key select_rank(Key* keys, int64_t count, int64_t rank, Less less = Less{}) {
  int64_t lo = 0, hi = count;  // rank lies in [lo, hi)
  uint64_t state = 0x9e3779b97f4a7c15ull;
  const auto place = [&] {  // splitmix64: a place in [lo, hi)
    state += 0x9e3779b97f4a7c15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return lo + static_cast<int64_t>(z % static_cast<uint64_t>(hi - lo));
  };
  // Keys [first, last) reordered: those before the pivot first; returns
  // where the others begin.
  const auto partition = [&](int64_t first, int64_t last, const Key& pivot) {
    int64_t below = first;  // [first, below) < pivot <= [below, i)
    for (int64_t i = first; i < last; ++i) {
      const Key key = keys[i];
      const bool smaller = less(key, pivot);
      keys[i] = keys[below];
      keys[below] = key;
      below += smaller;
    }
    return below;
  };
  // The rank's side of a partition of [lo, hi) around the pivot.
  const auto keep_side = [&](const Key& pivot) {
    const int64_t below = partition(lo, hi, pivot);
    if (rank < below)
      hi = below;
    else
      lo = below;
  };
  constexpr int64_t kMaxSample = kSelectSampleBytes / static_cast<int64_t>(sizeof(Key));
  static_assert(kMaxSample >= 64, "a sample of 64 keys at least");
  while (hi - lo > kSelectBracketKeys) {
    const int64_t size = hi - lo;
    int64_t samples = 64;  // about sqrt(size), within [64, kMaxSample]
    while (2 * samples <= kMaxSample && 4 * samples * samples <= size) samples *= 2;
    Key sample[kMaxSample];
    for (int64_t j = 0; j < samples; ++j) sample[j] = keys[place()];
    std::sort(sample, sample + samples, less);
    // The sample's rank of the key sought is off by about sqrt(samples) / 2
    // (one standard deviation): the bracket is 2.5 of them either side.
    int64_t spread = 1;
    while (4 * spread * spread < 25 * samples / 4) ++spread;
    const int64_t at = (rank - lo) * samples / size;
    // The bracket's far end first: then the second pass reads only the
    // nearer side of the rank.
    const bool rank_in_lower_half = 2 * (rank - lo) < size;
    const int64_t ends[2] = {at + spread, at - spread};
    for (int e = 0; e < 2; ++e) {
      const int64_t end = rank_in_lower_half ? ends[e] : ends[1 - e];
      if (end >= 0 && end < samples) keep_side(sample[end]);
    }
    // A bracket that kept more than half (the rank near an end, or a
    // sample unlike the range) leaves the rest to the quickselect below.
    if (2 * (hi - lo) > size) break;
  }
  for (int poor = 0; hi - lo > 16 && poor < 8;) {
    int64_t a = place(), b = place(), c = place();
    if (less(keys[b], keys[a])) std::swap(a, b);
    if (less(keys[c], keys[b])) b = less(keys[c], keys[a]) ? a : c;
    std::swap(keys[b], keys[hi - 1]);  // the median of the three, as the pivot, last
    const Key pivot = keys[hi - 1];
    const int64_t below = partition(lo, hi - 1, pivot);
    std::swap(keys[below], keys[hi - 1]);
    if (rank == below) return keys[rank];
    const int64_t before = hi - lo;
    if (rank < below)
      hi = below;
    else
      lo = below + 1;
    poor += 8 * (hi - lo) > 7 * before;  // kept more than 7/8 of the range
  }
  std::nth_element(keys + lo, keys + rank, keys + hi, less);
  return keys[rank];
}

}  // namespace omp
}  // namespace knn
