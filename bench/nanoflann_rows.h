// The nanoflann contender of the CPU benchmarks: its view of point rows, and
// the kd-tree type over them (L2_Simple, uint32_t indices).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nanoflann.hpp>

namespace knn_bench {

// `count` rows of floats, one after another. Dim > 0 fixes the row length at
// compile time (nanoflann's DIM, and constant-stride access: the 3-D
// benchmarks time nanoflann at its best); Dim = -1 takes it from `dim`.
template <int Dim>
struct NanoflannRows {
  const float* data;
  size_t count;
  size_t dim = Dim > 0 ? Dim : 0;

  size_t kdtree_get_point_count() const { return count; }
  float kdtree_get_pt(uint32_t i, size_t d) const {
    return data[i * (Dim > 0 ? static_cast<size_t>(Dim) : dim) + d];
  }
  template <class BoundingBox>
  bool kdtree_get_bbox(BoundingBox&) const {
    return false;  // nanoflann computes it
  }
};

template <int Dim>
using NanoflannTree =
    nanoflann::KDTreeSingleIndexAdaptor<nanoflann::L2_Simple_Adaptor<float, NanoflannRows<Dim>>,
                                        NanoflannRows<Dim>, Dim, uint32_t>;

}  // namespace knn_bench
