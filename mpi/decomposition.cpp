#include "decomposition.h"

#include <algorithm>
#include <numeric>

namespace knn_mpi {

Decomposition::Decomposition(const std::vector<float>& sample, int64_t count, int dim, int ranks)
    : dim_(dim) {
  std::vector<int64_t> rows(static_cast<size_t>(count));
  std::iota(rows.begin(), rows.end(), int64_t{0});
  nodes_.reserve(2 * static_cast<size_t>(ranks));
  split(sample.data(), rows, 0, count, 0, ranks);
}

int Decomposition::split(const float* sample, std::vector<int64_t>& rows, int64_t first,
                         int64_t last, int rank_lo, int rank_hi) {
  int id = static_cast<int>(nodes_.size());
  nodes_.emplace_back();
  if (rank_hi - rank_lo == 1) {
    nodes_[id].rank = rank_lo;
    return id;
  }
  auto coord = [&](int64_t row, int axis) { return sample[row * dim_ + axis]; };
  // The widest dimension of this node's sample (the first on ties; dimension
  // 0 for an empty sample, whose split then sends everything right).
  int axis = 0;
  float widest = -1.0f;
  for (int d = 0; d < dim_ && first < last; ++d) {
    float lo = coord(rows[first], d), hi = lo;
    for (int64_t i = first + 1; i < last; ++i) {
      lo = std::min(lo, coord(rows[i], d));
      hi = std::max(hi, coord(rows[i], d));
    }
    if (hi - lo > widest) {
      widest = hi - lo;
      axis = d;
    }
  }
  // The left child gets half the ranks and the matching share of the sample.
  int left_ranks = (rank_hi - rank_lo) / 2;
  float value = 0.0f;
  int64_t middle = first;
  if (first < last) {
    int64_t cut = first + (last - first) * left_ranks / (rank_hi - rank_lo);
    auto by_coord = [&](int64_t a, int64_t b) {
      float ca = coord(a, axis), cb = coord(b, axis);
      return ca < cb || (ca == cb && a < b);
    };
    std::nth_element(rows.begin() + first, rows.begin() + cut, rows.begin() + last, by_coord);
    value = coord(rows[cut], axis);
    middle = std::stable_partition(rows.begin() + first, rows.begin() + last,
                                   [&](int64_t r) { return coord(r, axis) < value; }) -
             rows.begin();
  }
  int left = split(sample, rows, first, middle, rank_lo, rank_lo + left_ranks);
  int right = split(sample, rows, middle, last, rank_lo + left_ranks, rank_hi);
  nodes_[id].axis = axis;
  nodes_[id].value = value;
  nodes_[id].left = left;
  nodes_[id].right = right;
  return id;
}

int Decomposition::owner(const float* p) const {
  int node = 0;
  while (nodes_[node].axis >= 0)
    node = p[nodes_[node].axis] < nodes_[node].value ? nodes_[node].left : nodes_[node].right;
  return nodes_[node].rank;
}

}  // namespace knn_mpi
