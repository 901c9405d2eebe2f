// The Morton order of chunks of 3-D points (common/geometry/mesh_bvh.h
// point_order_code, the CUDA engine's too): answered in that order,
// consecutive points lie near each other, so a thread walks the same nodes
// and reads the same points, in cache (10^6 points in random order near a
// sphere of 81920 triangles, one thread: 3.25 us a point in their order,
// 1.18 in Morton order). The order changes no answer (each depends on its
// point alone); the mesh queries and the neighbourhood statistics take their
// chunks in it, as the CUDA engine does (cuda/core/point_order.cuh).
#pragma once

#include <omp.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "../common/geometry/mesh_bvh.h"
#include "../engine/cancel.h"
#include "radix_sort.h"

namespace knn {
namespace omp {

// A box in float64; points outside it order in its border cells.
struct OrderBox {
  double lo[3], hi[3];
};

// The box of n points (rows of x, y, z) on `threads` threads, in one pass
// over them; empty (lo > hi) when n is 0.
template <typename Scalar>
OrderBox box_of_points(const Scalar* points, int64_t n, int threads) {
  const double inf = std::numeric_limits<double>::infinity();
  double lo[3] = {inf, inf, inf}, hi[3] = {-inf, -inf, -inf};
#pragma omp parallel for num_threads(threads) reduction(min : lo[:3]) reduction(max : hi[:3])
  for (int64_t i = 0; i < n; ++i)
    for (int d = 0; d < 3; ++d) {
      const double x = static_cast<double>(points[3 * i + d]);
      lo[d] = x < lo[d] ? x : lo[d];
      hi[d] = x > hi[d] ? x : hi[d];
    }
  return {{lo[0], lo[1], lo[2]}, {hi[0], hi[1], hi[2]}};
}

// The Morton order of a chunk of points, and its scratch.
class PointOrder {
 public:
  PointOrder(int64_t chunk, const volatile int* cancel) {
    for (std::vector<uint32_t>* v : {&codes_, &code_buffer_, &order_, &order_buffer_})
      resize_polling(*v, static_cast<size_t>(chunk), cancel);
  }

  // The positions of points[0, count) in Morton order within `box` (ties by
  // position).
  template <typename Scalar>
  const uint32_t* sort(const Scalar* points, int64_t count, const OrderBox& box, int threads,
                       const volatile int* cancel) {
#pragma omp parallel for num_threads(threads)
    for (int64_t i = 0; i < count; ++i) {
      codes_[i] = geometry::point_order_code(points + 3 * i, box.lo, box.hi);
      order_[i] = static_cast<uint32_t>(i);
    }
    radix_sort(codes_.data(), order_.data(), code_buffer_.data(), order_buffer_.data(), count,
               3 * geometry::kPointOrderBitsPerAxis, threads, cancel);
    return order_.data();
  }

 private:
  std::vector<uint32_t> codes_, code_buffer_, order_, order_buffer_;
};

}  // namespace omp
}  // namespace knn
