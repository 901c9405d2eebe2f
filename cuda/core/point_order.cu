// The Morton order of chunks of points (point_order.cuh).
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>

#include "../../common/error.h"
#include "../../common/geometry/mesh_bvh.h"
#include "launch_policy.h"
#include "memory_model.h"
#include "point_order.cuh"

namespace knn {
namespace cuda {
namespace {

// Point i as a box of one point.
template <typename Scalar>
struct PointAsBox {
  const Scalar* points;
  __device__ OrderBox operator()(int64_t i) const {
    OrderBox box;
    for (int d = 0; d < 3; ++d) box.lo[d] = box.hi[d] = static_cast<double>(points[3 * i + d]);
    return box;
  }
};

template <typename Scalar>
__global__ void point_codes(const Scalar* points, int64_t count, OrderBox box, uint32_t* codes,
                            int32_t* order) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    codes[i] = geometry::point_order_code(points + 3 * i, box.lo, box.hi);
    order[i] = static_cast<int32_t>(i);
  }
}

}  // namespace

template <typename Scalar>
OrderBox box_of_points(const Scalar* points, int64_t n, cudaStream_t stream) {
  const double inf = __builtin_huge_val();
  const OrderBox empty{{inf, inf, inf}, {-inf, -inf, -inf}};
  if (n <= 0) return empty;
  const auto boxes = thrust::make_transform_iterator(thrust::counting_iterator<int64_t>(0),
                                                     PointAsBox<Scalar>{points});
  DeviceBuffer<OrderBox> result(1);
  size_t bytes = 0;
  check(
      cub::DeviceReduce::Reduce(nullptr, bytes, boxes, result.get(), n, BoxUnion(), empty, stream),
      "box of points (size)");
  DeviceBuffer<unsigned char> temp(checked_cub_temp(bytes, cub_temp_bytes(0)));
  check(cub::DeviceReduce::Reduce(temp.get(), bytes, boxes, result.get(), n, BoxUnion(), empty,
                                  stream),
        "box of points");
  OrderBox box;
  check(cudaMemcpyAsync(&box, result.get(), sizeof box, cudaMemcpyDeviceToHost, stream),
        "box of points: cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream), "box of points: cudaStreamSynchronize");
  return box;
}

PointOrder::PointOrder(int64_t capacity)
    : capacity_(capacity),
      codes_(static_cast<size_t>(capacity)),
      codes_sorted_(static_cast<size_t>(capacity)),
      order_(static_cast<size_t>(capacity)),
      order_sorted_(static_cast<size_t>(capacity)) {
  // The double-buffer form: the pointer form would add both alternate
  // arrays (8 bytes a point) to CUB's temporary storage.
  cub::DoubleBuffer<uint32_t> codes(nullptr, nullptr);
  cub::DoubleBuffer<int32_t> order(nullptr, nullptr);
  check(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes_, codes, order, capacity, 0,
                                        3 * geometry::kPointOrderBitsPerAxis),
        "point order: radix sort (size)");
  temp_.allocate(checked_cub_temp(temp_bytes_, cub_temp_bytes(capacity)));
}

template <typename Scalar>
const int32_t* PointOrder::sort(const Scalar* points, int64_t count, const OrderBox& box,
                                cudaStream_t stream) {
  if (count > capacity_)
    fail(KNN_ERR_INTERNAL,
         format("point order: a chunk of %lld points in an order of %lld",
                static_cast<long long>(count), static_cast<long long>(capacity_)));
  if (count <= 0) return order_.get();
  point_codes<<<grid_stride_blocks(point_codes<Scalar>, kBlock, count), kBlock, 0, stream>>>(
      points, count, box, codes_.get(), order_.get());
  check_launch("point order: point_codes");
  cub::DoubleBuffer<uint32_t> codes(codes_.get(), codes_sorted_.get());
  cub::DoubleBuffer<int32_t> order(order_.get(), order_sorted_.get());
  check(cub::DeviceRadixSort::SortPairs(temp_.get(), temp_bytes_, codes, order, count, 0,
                                        3 * geometry::kPointOrderBitsPerAxis, stream),
        "point order: radix sort");
  return order.Current();
}

template OrderBox box_of_points<float>(const float*, int64_t, cudaStream_t);
template OrderBox box_of_points<double>(const double*, int64_t, cudaStream_t);
template const int32_t* PointOrder::sort<float>(const float*, int64_t, const OrderBox&,
                                                cudaStream_t);
template const int32_t* PointOrder::sort<double>(const double*, int64_t, const OrderBox&,
                                                 cudaStream_t);

}  // namespace cuda
}  // namespace knn
