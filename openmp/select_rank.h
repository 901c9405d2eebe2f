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

// The key of rank `rank` among keys[0, count) in the order of `less` (a
// total order, best computed without a branch), reordering the keys so that
// those before the rank come first: quickselect whose partition has no branch on the comparison
// (Lomuto's scheme with the swap made unconditional), as the keys of a split are a coin toss
// against the pivot and std::nth_element's partition mispredicts about every other key. The pivot
// is the median of three keys at pseudo-random places (a fixed sequence: the same keys give the
// same work), so that no ordered pattern of the input (sorted, reversed, organ pipe) makes it the
// range's end; should ranges still shrink too slowly, std::nth_element finishes.
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
  for (int poor = 0; hi - lo > 16 && poor < 8;) {
    int64_t a = place(), b = place(), c = place();
    if (less(keys[b], keys[a])) std::swap(a, b);
    if (less(keys[c], keys[b])) b = less(keys[c], keys[a]) ? a : c;
    std::swap(keys[b], keys[hi - 1]);  // the median of the three, as the pivot, last
    const Key pivot = keys[hi - 1];
    int64_t below = lo;  // [lo, below) < pivot <= [below, i)
    for (int64_t i = lo; i < hi - 1; ++i) {
      const Key key = keys[i];
      const bool smaller = less(key, pivot);
      keys[i] = keys[below];
      keys[below] = key;
      below += smaller;
    }
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
