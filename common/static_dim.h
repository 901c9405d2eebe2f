// Dispatch from a run-time dimension to code compiled for it (the CUDA index
// kernels and the CPU kd-tree search).
#pragma once

#include <type_traits>

namespace knn {

// The dimensions that the index searches are compiled for, with the query in
// registers and the distance loop unrolled; higher ones take a run-time-dim
// kernel. Every dimension up to here, not a chosen few: a dimension left out
// ran 3.5x slower (brute force, 14-D on the H100).
constexpr int kMaxStaticDim = 16;

// Calls f(std::integral_constant<int, D>{}) with D = dim for dim
// 1..kMaxStaticDim, else D = 0 (the run-time-dim kernels).
template <int D = 1, class F>
void with_static_dim(int dim, F&& f) {
  if constexpr (D > kMaxStaticDim) {
    f(std::integral_constant<int, 0>{});
  } else {
    if (dim == D) return f(std::integral_constant<int, D>{});
    with_static_dim<D + 1>(dim, f);
  }
}

}  // namespace knn
