// A candidate neighbour and the order the contract defines on candidates:
// by squared distance, ties by the smaller original index.
#pragma once

#include <cstdint>

#include "host_device.h"

namespace knn {

struct Neighbor {
  float sq_distance;
  int32_t index;
};

KNN_HD bool closer(float d_a, int32_t i_a, float d_b, int32_t i_b) {
  return d_a < d_b || (d_a == d_b && i_a < i_b);
}

KNN_HD bool closer(const Neighbor& a, const Neighbor& b) {
  return closer(a.sq_distance, a.index, b.sq_distance, b.index);
}

}  // namespace knn
