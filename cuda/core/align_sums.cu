// The device side of an alignment step (align_sums.cuh): the moved points,
// the trim's threshold and the blocks added in order, for the mesh's and the
// point cloud's aligners alike.
#include "align_sums.cuh"

#include <cub/device/device_radix_sort.cuh>

#include <vector>

#include "memory_model.h"

namespace knn {
namespace cuda {
namespace {

template <typename Scalar>
__global__ void move_each_point(const Scalar* points, int64_t count, geometry::AlignFrame frame,
                                Scalar* moved) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const geometry::Vec3<Scalar> q =
        geometry::rounded3<Scalar>(geometry::move_point(frame, points + 3 * i));
    moved[3 * i] = q.x;
    moved[3 * i + 1] = q.y;
    moved[3 * i + 2] = q.z;
  }
}

template <typename Scalar>
using KeyOf = typename OrderedKey<Scalar>::type;

// Squared distances (>= 0) as keys: their bits order as they do. A point
// without a correspondence gets the greatest key (NaN's bits), which no
// threshold counts, as the OpenMP engine counts only points with one.
template <typename Scalar>
__global__ void keys_of(const Scalar* sq, const int32_t* ids, int64_t m, KeyOf<Scalar>* keys) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < m;
       i += int64_t{gridDim.x} * blockDim.x)
    keys[i] = ids[i] < 0 ? ~KeyOf<Scalar>{0} : OrderedKey<Scalar>::of(sq[i]);
}

// How many sorted values are <= max_sq (compared in double).
template <typename Scalar>
__global__ void count_at_most(const KeyOf<Scalar>* sorted, int64_t m, double max_sq,
                              int64_t* count) {
  int64_t lo = 0, hi = m;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (static_cast<double>(scalar_from_ordered_key<Scalar>(sorted[mid])) <= max_sq)
      lo = mid + 1;
    else
      hi = mid;
  }
  *count = lo;
}

}  // namespace

template <typename Scalar>
void move_points(const Scalar* points, int64_t count, const geometry::AlignFrame& frame,
                 Scalar* moved, cudaStream_t stream) {
  if (count <= 0) return;
  move_each_point<<<grid_stride_blocks(move_each_point<Scalar>, kBlock, count), kBlock, 0,
                    stream>>>(points, count, frame, moved);
  check_launch("align: move_each_point");
}

template <typename Scalar>
size_t TrimRanking<Scalar>::bytes(int64_t m) {
  const size_t um = static_cast<size_t>(m < 0 ? 0 : m);
  return 2 * aligned(um * sizeof(Key)) + cub_temp_bytes(m) + aligned(sizeof(int64_t));
}

template <typename Scalar>
TrimRanking<Scalar>::TrimRanking(int64_t m)
    : m_(m), keys_(static_cast<size_t>(m)), sorted_keys_(static_cast<size_t>(m)), measured_(1) {
  cub::DoubleBuffer<Key> sorting(keys_.get(), sorted_keys_.get());
  check(cub::DeviceRadixSort::SortKeys(nullptr, temp_bytes_, sorting, m_, 0,
                                       8 * static_cast<int>(sizeof(Scalar))),
        "align: radix sort (size)");
  temp_.allocate(checked_cub_temp(temp_bytes_, cub_temp_bytes(m_)));
}

template <typename Scalar>
double TrimRanking<Scalar>::threshold(const int32_t* ids, const Scalar* sq, double max_sq,
                                      double kept_fraction, cudaStream_t stream) {
  if (!(kept_fraction < 1.0) || m_ <= 0) return max_sq;
  keys_of<<<grid_stride_blocks(keys_of<Scalar>, kBlock, m_), kBlock, 0, stream>>>(sq, ids, m_,
                                                                                  keys_.get());
  check_launch("align: keys_of");
  cub::DoubleBuffer<Key> sorting(keys_.get(), sorted_keys_.get());
  size_t temp_bytes = temp_bytes_;
  check(cub::DeviceRadixSort::SortKeys(temp_.get(), temp_bytes, sorting, m_, 0,
                                       8 * static_cast<int>(sizeof(Scalar)), stream),
        "align: radix sort");
  count_at_most<Scalar><<<1, 1, 0, stream>>>(sorting.Current(), m_, max_sq, measured_.get());
  check_launch("align: count_at_most");
  const int64_t within = read_back(measured_.get(), stream, "align: the kept count");
  if (within == 0) return max_sq;
  const Key key = read_back(sorting.Current() + geometry::trim_position(kept_fraction, within),
                            stream, "align: the trim's key");
  return static_cast<double>(scalar_from_ordered_key<Scalar>(key));
}

geometry::AlignSums blocks_in_order(const geometry::AlignSums* sums, int64_t blocks,
                                    cudaStream_t stream) {
  std::vector<geometry::AlignSums> host(static_cast<size_t>(blocks));
  if (blocks > 0) {
    check(cudaMemcpyAsync(host.data(), sums, host.size() * sizeof(geometry::AlignSums),
                          cudaMemcpyDeviceToHost, stream),
          "align: cudaMemcpyAsync (the blocks' sums)");
    check(cudaStreamSynchronize(stream), "align: cudaStreamSynchronize");
  }
  return geometry::sum_of_blocks(host.data(), blocks);
}

template void move_points(const float*, int64_t, const geometry::AlignFrame&, float*, cudaStream_t);
template void move_points(const double*, int64_t, const geometry::AlignFrame&, double*,
                          cudaStream_t);
template class TrimRanking<float>;
template class TrimRanking<double>;

}  // namespace cuda
}  // namespace knn
