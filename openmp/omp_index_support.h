// What the OpenMP index engines (omp_index_kdtree.cpp, omp_index_brute_force.cpp)
// share: a k-best list for any k, the writers of result rows (kNN, kNN without
// the query's own point, radius), and the parallel loop that runs blocks of
// queries with cancellation and error capture.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <vector>

#include "../common/neighbor.h"
#include "../engine/cancel.h"
#include "../engine/progress.h"
#include "knn_list.h"

namespace knn {
namespace omp {

// The k best candidates of one query, for any k, of either scalar type. Up to kSortedListMaxK the
// sorted insertion of KnnList is fastest (few candidates are accepted once the
// list fills); beyond, a max-heap keeps each insertion O(log k).
template <typename Scalar>
class BasicNeighborList {
 public:
  using Entry = BasicNeighbor<Scalar>;
  static constexpr int kSortedListMaxK = 128;

  // Keeps min(k, n_points) entries: a row never holds more than the index has
  // (k is 64-bit: an all-kNN without self asks for k + 1).
  BasicNeighborList(int64_t k, int64_t n_points)
      : capacity_(static_cast<int>(std::min<int64_t>(k, n_points))),
        storage_(static_cast<size_t>(capacity_)) {}

  // Starts a new query; call it before the first offer of every query.
  void reset() {
    offered_ = 0;
    if (capacity_ <= kSortedListMaxK) sorted_.emplace(storage_.data(), capacity_);
  }

  bool full() const { return offered_ >= capacity_; }
  // The current k-th candidate; meaningful only when full().
  const Entry& worst() const {
    return capacity_ <= kSortedListMaxK ? storage_[static_cast<size_t>(capacity_) - 1]
                                        : storage_.front();
  }

  // The distance a point must not exceed to be offered usefully: the k-th
  // candidate's, or +infinity while the list is not full.
  Scalar limit() const {
    return full() && capacity_ > 0 ? worst().sq_distance : std::numeric_limits<Scalar>::infinity();
  }

  // Whether a region whose points are all at squared distance >= lower_bound
  // and have indices >= min_index may still hold a candidate that enters.
  bool may_improve(Scalar lower_bound, int32_t min_index) const {
    if (capacity_ == 0) return false;
    if (!full()) return true;
    const Entry& w = worst();
    return lower_bound < w.sq_distance || (lower_bound == w.sq_distance && min_index < w.index);
  }

  void offer(Scalar sq_distance, int32_t index) {
    if (capacity_ == 0) return;
    if (capacity_ <= kSortedListMaxK) {
      // KnnList fills its first `capacity_` offers unconditionally, so after
      // that many offers it is full and its worst entry is storage_[capacity_-1].
      sorted_->offer(sq_distance, index);
      ++offered_;
      return;
    }
    const Entry candidate{sq_distance, index};
    auto farther = [](const Entry& a, const Entry& b) { return closer(a, b); };
    if (!full()) {
      storage_[static_cast<size_t>(offered_++)] = candidate;
      if (full()) std::make_heap(storage_.begin(), storage_.end(), farther);
    } else if (closer(candidate, storage_.front())) {
      std::pop_heap(storage_.begin(), storage_.end(), farther);
      storage_.back() = candidate;
      std::push_heap(storage_.begin(), storage_.end(), farther);
    }
  }

  // Writes a row of k slots, nearest first, skipping the entry whose index is
  // `skip` (-1: none) and padding with -1 / +infinity. Ends the query: the
  // heap is sorted in place.
  void write(int k, int32_t skip, int32_t* indices, Scalar* sq_distances) {
    const int found = static_cast<int>(std::min<int64_t>(offered_, capacity_));
    if (capacity_ > kSortedListMaxK) {
      auto farther = [](const Entry& a, const Entry& b) { return closer(a, b); };
      if (full())
        std::sort_heap(storage_.begin(), storage_.end(), farther);
      else
        std::sort(storage_.begin(), storage_.begin() + found, farther);
    }
    int j = 0;
    for (int e = 0; e < found && j < k; ++e) {
      const Entry& nb = storage_[static_cast<size_t>(e)];
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
  int capacity_;
  std::vector<Entry> storage_;
  std::optional<BasicKnnList<Scalar>> sorted_;
  int64_t offered_ = 0;
};

// Writes one radius row from the candidates found (any order): sorted by
// (distance, index), the first max_neighbors kept, -1 / +infinity padding,
// the true count. Any output may be NULL.
template <typename Scalar>
void write_radius_row(std::vector<BasicNeighbor<Scalar>>& found, int max_neighbors,
                      int32_t* indices, Scalar* sq_distances, int32_t* count) {
  if (count) *count = static_cast<int32_t>(found.size());
  if (max_neighbors == 0) return;
  const size_t keep = std::min(found.size(), static_cast<size_t>(max_neighbors));
  auto nearer = [](const BasicNeighbor<Scalar>& a, const BasicNeighbor<Scalar>& b) {
    return closer(a, b);
  };
  std::partial_sort(found.begin(), found.begin() + static_cast<std::ptrdiff_t>(keep), found.end(),
                    nearer);
  for (size_t j = 0; j < static_cast<size_t>(max_neighbors); ++j) {
    const bool hit = j < keep;
    if (indices) indices[j] = hit ? found[j].index : -1;
    if (sq_distances)
      sq_distances[j] = hit ? found[j].sq_distance : std::numeric_limits<Scalar>::infinity();
  }
}

inline int thread_count(int requested) { return requested > 0 ? requested : omp_get_max_threads(); }

// Runs body(state, block) for the blocks of `items` work items, per_block
// each (block b holds items [b * per_block, min(items, (b + 1) * per_block))),
// on `threads` threads, each thread with one State made by make_state() when
// it takes its first block (per-thread buffers, allocated once). Each finished
// block adds its items to the calling thread's progress. Exceptions cannot
// leave an OpenMP region: the first one is kept, the remaining blocks are
// skipped, and it is rethrown here; a set cancel flag skips the remaining
// blocks likewise and ends in KNN_ERR_CANCELLED.
template <class MakeState, class Body>
void for_each_block(int64_t items, int64_t per_block, int threads, const volatile int* cancel,
                    MakeState make_state, Body body) {
  using State = decltype(make_state());
  const int64_t blocks = (items + per_block - 1) / per_block;
  knn_progress* const report = progress();
  std::exception_ptr error;
  std::atomic<bool> stop{false};
#pragma omp parallel num_threads(threads)
  {
    std::optional<State> state;
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < blocks; ++b) {
      if (stop.load(std::memory_order_relaxed) || cancel_requested(cancel)) continue;
      try {
        if (!state) state.emplace(make_state());
        body(*state, b);
        progress_add(report, std::min(per_block, items - b * per_block));
      } catch (...) {
#pragma omp critical(knn_omp_index_error)
        if (!error) error = std::current_exception();
        stop.store(true, std::memory_order_relaxed);
      }
    }
  }
  if (error) std::rethrow_exception(error);
  throw_if_cancelled(cancel);
}

}  // namespace omp
}  // namespace knn
