// A candidate neighbour and the order the contract defines on candidates:
// by squared distance, ties by the smaller original index.
#pragma once

#include <cstdint>

#include "host_device.h"

namespace knn {

template <typename Scalar>
struct BasicNeighbor {
  Scalar sq_distance;
  int32_t index;
};
using Neighbor = BasicNeighbor<float>;

template <typename Scalar>
KNN_HD bool closer(Scalar d_a, int32_t i_a, Scalar d_b, int32_t i_b) {
  return d_a < d_b || (d_a == d_b && i_a < i_b);
}

template <typename Scalar>
KNN_HD bool closer(const BasicNeighbor<Scalar>& a, const BasicNeighbor<Scalar>& b) {
  return closer(a.sq_distance, a.index, b.sq_distance, b.index);
}

}  // namespace knn
