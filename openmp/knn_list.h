// A query's k best candidates so far, kept sorted by (squared distance, index).
#pragma once

#include <cstdint>
#include <limits>

#include "../common/neighbor.h"

namespace knn {
namespace omp {

class KnnList {
 public:
  // `storage` holds k entries; it is the caller's so that one buffer serves a
  // whole batch of queries without allocations in the search.
  KnnList(Neighbor* storage, int k) : best_(storage), k_(k) {}

  float worst() const {
    return size_ == k_ ? best_[k_ - 1].sq_distance : std::numeric_limits<float>::infinity();
  }

  void offer(float sq_distance, int32_t index) {
    const Neighbor candidate{sq_distance, index};
    if (size_ == k_ && !closer(candidate, best_[k_ - 1])) return;
    int slot = size_ < k_ ? size_++ : k_ - 1;
    for (; slot > 0 && closer(candidate, best_[slot - 1]); --slot) best_[slot] = best_[slot - 1];
    best_[slot] = candidate;
  }

  // Writes the row: the neighbours found, then -1 / +infinity padding.
  void write(int32_t* indices, float* sq_distances) const {
    for (int j = 0; j < k_; ++j) {
      const bool found = j < size_;
      if (indices) indices[j] = found ? best_[j].index : -1;
      if (sq_distances)
        sq_distances[j] = found ? best_[j].sq_distance : std::numeric_limits<float>::infinity();
    }
  }

 private:
  Neighbor* best_;
  int k_;
  int size_ = 0;
};

}  // namespace omp
}  // namespace knn
