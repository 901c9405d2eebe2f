// A query's k best candidates so far, kept sorted by (squared distance, index).
#pragma once

#include <cstdint>
#include <limits>

#include "../common/neighbor.h"

namespace knn {
namespace omp {

template <typename Scalar>
class BasicKnnList {
 public:
  // Keeps the `capacity` best. `storage` holds that many entries; it is the
  // caller's so that one buffer serves a whole batch of queries without
  // allocations in the search. A capacity of min(k, reference points) keeps
  // every row exact while k beyond the data costs no memory.
  BasicKnnList(BasicNeighbor<Scalar>* storage, int capacity) : best_(storage), k_(capacity) {}

  Scalar worst() const {
    return size_ == k_ ? best_[k_ - 1].sq_distance : std::numeric_limits<Scalar>::infinity();
  }

  void offer(Scalar sq_distance, int32_t index) {
    const BasicNeighbor<Scalar> candidate{sq_distance, index};
    if (size_ == k_ && !closer(candidate, best_[k_ - 1])) return;
    int slot = size_ < k_ ? size_++ : k_ - 1;
    for (; slot > 0 && closer(candidate, best_[slot - 1]); --slot) best_[slot] = best_[slot - 1];
    best_[slot] = candidate;
  }

  // Writes a row of `row_length` slots: the neighbours found, then -1 /
  // +infinity padding.
  void write(int32_t* indices, Scalar* sq_distances, int row_length) const {
    for (int j = 0; j < row_length; ++j) {
      const bool found = j < size_;
      if (indices) indices[j] = found ? best_[j].index : -1;
      if (sq_distances)
        sq_distances[j] = found ? best_[j].sq_distance : std::numeric_limits<Scalar>::infinity();
    }
  }

 private:
  BasicNeighbor<Scalar>* best_;
  int k_;
  int size_ = 0;
};
using KnnList = BasicKnnList<float>;

// The capacity of a k-list over n reference points: min(k, n), at least 1.
inline int list_capacity(int k, int64_t n) { return static_cast<int>(n < k ? (n < 1 ? 1 : n) : k); }

}  // namespace omp
}  // namespace knn
