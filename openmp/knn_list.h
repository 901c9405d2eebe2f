// The k best candidates of one query, the one k-list of the CPU engine (the
// kd-tree search behind the classic and index APIs, the grid, both brute
// forces), for any k and either scalar type.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "../common/neighbor.h"

namespace knn {
namespace omp {

// Sorts `count` entries by (squared distance, index) in linear time: a
// least-significant-digit radix sort over the bytes of the index, then those
// of the distance. A squared distance is never negative, -0 or NaN, so its
// bits read as an unsigned integer order as its value does. Bytes that every
// entry shares take no pass. `scratch` holds `count` entries.
template <typename Scalar>
void radix_sort(BasicNeighbor<Scalar>* entries, BasicNeighbor<Scalar>* scratch, int count) {
  using Entry = BasicNeighbor<Scalar>;
  using Bits = std::conditional_t<sizeof(Scalar) == 4, uint32_t, uint64_t>;
  static_assert(sizeof(Bits) == sizeof(Scalar), "a float or a double");
  constexpr int kIndexBytes = 4, kBytes = kIndexBytes + static_cast<int>(sizeof(Scalar));
  auto digit = [](const Entry& e, int byte) {
    if (byte < kIndexBytes) return (static_cast<uint32_t>(e.index) >> (8 * byte)) & 0xFFu;
    Bits bits;
    std::memcpy(&bits, &e.sq_distance, sizeof bits);
    return static_cast<uint32_t>(bits >> (8 * (byte - kIndexBytes))) & 0xFFu;
  };
  if (count < 2) return;
  uint32_t start[kBytes][256] = {};
  for (int j = 0; j < count; ++j)
    for (int byte = 0; byte < kBytes; ++byte) ++start[byte][digit(entries[j], byte)];
  Entry* from = entries;
  Entry* to = scratch;
  for (int byte = 0; byte < kBytes; ++byte) {
    uint32_t* const slot = start[byte];
    if (slot[digit(from[0], byte)] == static_cast<uint32_t>(count)) continue;
    uint32_t sum = 0;
    for (int d = 0; d < 256; ++d) sum += std::exchange(slot[d], sum);
    for (int j = 0; j < count; ++j) to[slot[digit(from[j], byte)]++] = from[j];
    std::swap(from, to);
  }
  if (from != entries) std::copy(from, from + count, entries);
}

template <typename Scalar>
class BasicNeighborList {
 public:
  using Entry = BasicNeighbor<Scalar>;
  // Up to this capacity the list is kept sorted by insertion, O(k) per
  // accepted candidate; beyond, a max-heap keeps each insertion O(log k) and
  // the row is sorted once, by radix_sort, when it is written. Measured on an
  // all-kNN of 20,000 uniform 3-D points: the sorted list is 15-20% faster
  // at k = 64 and 128, the two tie at 192, the heap is 10% faster at 256
  // (points on a line: a tie at 128 and 256).
  // A buffer of 2k entries instead (candidates appended unsorted, the k best
  // kept by std::nth_element when it fills, the bar then their k-th, one
  // std::sort when written) made mpQueryAll 40% slower at k = 100 (10^6
  // uniform points): the walk with its looser bar took 1.6k profile samples
  // less than the walk with the insertions, the selections and sorts 2.9k.
  static constexpr int kSortedListMaxK = 192;

  // Keeps min(k, n_points) entries: a row never holds more than the data has
  // (k is 64-bit: an all-kNN without self asks for k + 1). Allocates here,
  // never in the search.
  BasicNeighborList(int64_t k, int64_t n_points)
      : capacity_(static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(k, n_points)))),
        entries_(static_cast<size_t>(capacity_)),
        scratch_(heap() ? static_cast<size_t>(capacity_) : 0) {
    reset();
  }

  // Starts a new query; call it before the first offer of every query.
  void reset() {
    size_ = 0;
    bar_ = capacity_ > 0 ? kOpen : kClosed;
  }
  // Starts a new query that takes only candidates at squared distance <=
  // at_most until the list is full. Where fewer than its capacity lie that
  // close, the list ends short (not full()) and the query must be walked
  // again after reset(); where it ends full, it holds what reset() would
  // have given: the k best all lie within the k-th's distance <= at_most.
  void reset(Scalar at_most) {
    size_ = 0;
    bar_ = capacity_ > 0 ? Entry{at_most, std::numeric_limits<int32_t>::max()} : kClosed;
  }

  bool full() const { return size_ == capacity_; }
  // The k-th candidate; meaningful only when full() and the capacity is not 0.
  const Entry& worst() const {
    return heap() ? entries_.front() : entries_[static_cast<size_t>(capacity_) - 1];
  }

  // The distance a point must not exceed to be offered usefully: the k-th
  // candidate's, +infinity while the list is not full (-infinity at
  // capacity 0).
  Scalar limit() const { return bar_.sq_distance; }

  // Whether a region whose points are all at squared distance >= lower_bound
  // and have indices >= min_index may still hold a candidate that enters.
  bool may_improve(Scalar lower_bound, int32_t min_index) const {
    return closer(lower_bound, min_index, bar_.sq_distance, bar_.index);
  }

  void offer(Scalar sq_distance, int32_t index) {
    const Entry candidate{sq_distance, index};
    if (!closer(candidate, bar_)) return;
    if (!heap()) {
      // Entries farther by distance alone move up first (one comparison a
      // step), then the rare equal distances with larger indices. Against
      // one loop of (distance, index) comparisons: 8% less time in the list
      // (replayed k = 100 candidates of 2 * 10^4 queries, 10^6 uniform
      // points), mpQueryAll at k = 100 5% faster. Blocks moved at once, a
      // vectorized count of the closer entries with a memmove, unrolled
      // steps and a heap were all slower: the loop's one unpredictable exit
      // costs more than the moves.
      Entry* const at = entries_.data();
      int slot = full() ? capacity_ - 1 : size_++;
      for (; slot > 0 && sq_distance < at[slot - 1].sq_distance; --slot) at[slot] = at[slot - 1];
      for (; slot > 0 && closer(candidate, at[slot - 1]); --slot) at[slot] = at[slot - 1];
      at[slot] = candidate;
    } else if (!full()) {
      entries_[static_cast<size_t>(size_++)] = candidate;
      if (full()) std::make_heap(entries_.begin(), entries_.end(), Nearer{});
    } else {
      replace_worst(candidate);
    }
    if (full()) bar_ = worst();
  }

  // Writes a row of k slots, nearest first, leaving out the entry whose index
  // is `skip` (-1: none) and padding with -1 / +infinity. Ends the query (a
  // heap is sorted in place).
  void write(int k, int32_t skip, int32_t* indices, Scalar* sq_distances) {
    if (heap()) radix_sort(entries_.data(), scratch_.data(), size_);
    int j = 0;
    for (int e = 0; e < size_ && j < k; ++e) {
      const Entry& nb = entries_[static_cast<size_t>(e)];
      if (nb.index == skip) continue;
      if (indices) indices[j] = nb.index;
      if (sq_distances) sq_distances[j] = nb.sq_distance;
      ++j;
    }
    for (; j < k; ++j) {
      if (indices) indices[j] = -1;
      if (sq_distances) sq_distances[j] = std::numeric_limits<Scalar>::infinity();
    }
  }

 private:
  // The heap's order: its front is the worst entry.
  struct Nearer {
    bool operator()(const Entry& a, const Entry& b) const { return closer(a, b); }
  };

  // Puts the candidate in the heap's front slot and sifts it down: one pass
  // of about log2(k) steps, where std::pop_heap + std::push_heap take two.
  void replace_worst(const Entry& candidate) {
    Entry* const at = entries_.data();
    int slot = 0;
    for (int child = 1; child < capacity_; child = 2 * slot + 1) {
      if (child + 1 < capacity_ && closer(at[child], at[child + 1])) ++child;
      if (!closer(candidate, at[child])) break;
      at[slot] = at[child];
      slot = child;
    }
    at[slot] = candidate;
  }
  bool heap() const { return capacity_ > kSortedListMaxK; }

  // The bar of an open list: every candidate a search can produce (a finite
  // distance) is closer. A list of capacity 0 takes none.
  static constexpr Entry kOpen{std::numeric_limits<Scalar>::infinity(),
                               std::numeric_limits<int32_t>::max()};
  static constexpr Entry kClosed{-std::numeric_limits<Scalar>::infinity(),
                                 std::numeric_limits<int32_t>::min()};

  int capacity_;
  std::vector<Entry> entries_;  // sorted, or a heap once full
  std::vector<Entry> scratch_;  // radix_sort's second buffer (heap lists only)
  int size_ = 0;
  // What a candidate must be closer than to enter: the k-th entry once the
  // list is full (kept here so that the search's hot tests read one field).
  Entry bar_ = kOpen;
};

}  // namespace omp
}  // namespace knn
