// Closest point, signed distance and the deviation report on the GPU (layout:
// mesh_layout.h; definitions: common/geometry).
//
// A thread per point walks the BVH depth first, the nearer child first,
// pruning a child whose box is strictly farther (box_distance, in the mesh's
// scalar) than the best so far, which starts at max_distance^2 with no
// triangle; candidates compare by geometry::is_closer (ties to the smaller
// id). Signs come from the pseudonormal of the closest feature (closed and
// oriented meshes) or from the winding number summed over the tree in
// mesh_winding_tree.h's order (others): the OpenMP engine's bits.
//
// Points and outputs may be host or device arrays; host ones go through
// device chunks sized from the call's device budget (staged through the
// pinned pool), device ones are used in place. The deviation report keeps
// every point's signed distance on the device, sorts them there (CUB radix
// sort of their ordered keys) and reads the statistics of
// common/geometry/deviation.h off the sorted array: block sums a thread per
// block, percentiles by position, bins and tolerance counts by binary
// searches; only the sums of the blocks and a few numbers come back.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "../../common/geometry/deviation.h"
#include "../../engine/cancel.h"
#include "../../engine/progress.h"
#include "../core/pinned_pool.h"
#include "../core/point_order.cuh"
#include "../core/radix_sort_temp.cuh"
#include "../cuda_engine.h"
#include "cuda_mesh.cuh"

namespace knn {
namespace cuda {
namespace {

using geometry::infinity_of;
using mesh_walk::PointOutputs;

// Points per chunk at most, device arrays included: the cancel flag and the
// progress are read and published between chunks.
constexpr int64_t kMeshChunkPoints = int64_t{1} << 22;

// The points of a chunk are answered in their Morton order in the mesh's
// box (core/point_order.cuh; points outside it in its border cells):
// neighbouring threads then walk the same nodes.
template <typename Scalar>
__global__ void __launch_bounds__(MeshSearchPolicy::kThreads)
    answer_points(MeshView<Scalar> mesh, const Scalar* points, const int32_t* order, int64_t count,
                  Scalar max_sq, PointOutputs<Scalar> out, int* fault) {
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < count;
       k += int64_t{gridDim.x} * blockDim.x) {
    bool overflow = false;
    geometry::answer_point(mesh, points, order[k], max_sq, out, &overflow);
    if (overflow) atomicExch(fault, 1);
  }
}

template <typename Scalar>
__global__ void write_beyond_kernel(PointOutputs<Scalar> out, int64_t m) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < m;
       i += int64_t{gridDim.x} * blockDim.x)
    geometry::write_beyond<Scalar>(out, i);
}

// After a failure while the points are answered (cancellation included):
// every output says "beyond" (the header's rule), the host arrays here, the
// device arrays by a kernel where the device still takes one. Never throws:
// the failure being reported is the caller's.
template <typename Scalar>
void write_beyond_everywhere(const PointOutputs<Scalar>& out, int64_t m, int device) noexcept {
  try {
    PointOutputs<Scalar> host{}, on_device{};
    bool any_on_device = false;
    const auto split = [&](auto* p, auto*& to_host, auto*& to_device) {
      if (p == nullptr) return;
      if (device_may_use_in_place(p, device))
        to_device = p, any_on_device = true;
      else
        to_host = p;
    };
    split(out.triangle_ids, host.triangle_ids, on_device.triangle_ids);
    split(out.sq_distances, host.sq_distances, on_device.sq_distances);
    split(out.closest, host.closest, on_device.closest);
    split(out.barycentric, host.barycentric, on_device.barycentric);
    split(out.signed_distances, host.signed_distances, on_device.signed_distances);
    for (int64_t i = 0; i < m; ++i) geometry::write_beyond<Scalar>(host, i);
    if (!any_on_device) return;
    write_beyond_kernel<<<grid_stride_blocks(write_beyond_kernel<Scalar>, kBlock, m), kBlock>>>(
        on_device, m);
    check_launch("mesh query: write_beyond_kernel");
    check(cudaStreamSynchronize(nullptr), "mesh query: cudaStreamSynchronize");
  } catch (...) {
    cudaGetLastError();
  }
}

// ---- The chunks of a call ----------------------------------------------------
// A caller's array of `width` values per point: in place when it is memory
// of the mesh's device, else staged through a device buffer of a chunk.
template <class T>
struct CallerArray {
  T* caller = nullptr;
  int width = 0;
  bool in_place = false;
  DeviceBuffer<std::remove_const_t<T>> staging;

  CallerArray(T* p, int values_per_point, int device)
      : caller(p), width(values_per_point), in_place(p && device_may_use_in_place(p, device)) {}
  bool staged() const { return caller != nullptr && !in_place; }
  size_t bytes_per_point() const { return staged() ? sizeof(T) * width : 0; }
  void reserve(int64_t chunk) {
    if (staged()) staging.allocate(static_cast<size_t>(chunk) * width);
  }
  // The device array of the chunk starting at point `first`.
  T* at(int64_t first) const {
    if (caller == nullptr) return nullptr;
    return in_place ? caller + first * width : staging.get();
  }
  void upload(int64_t first, int64_t count, cudaStream_t stream) const {
    if (staged())
      upload_staged(staging.get(), caller + first * width, sizeof(T) * count * width, stream);
  }
  void download(int64_t first, int64_t count, cudaStream_t stream) const {
    if (staged())
      download_staged(caller + first * width, staging.get(), sizeof(T) * count * width, stream);
  }
};

// Answers m points chunk by chunk: `points` and each of `out` host or device
// arrays of the caller; fixed_bytes of the call's budget (taken before the
// call allocated them) are already spoken for.
template <typename Scalar>
void answer_in_chunks(const MeshView<Scalar>& mesh, int device, const Scalar* points, int64_t m,
                      Scalar max_sq, const PointOutputs<Scalar>& out, const DeviceBudget& budget,
                      size_t fixed_bytes, cudaStream_t stream) {
  const volatile int* cancel = cancel_flag();
  knn_progress* const report = progress();
  CallerArray<const Scalar> in(points, 3, device);
  CallerArray<int32_t> ids(out.triangle_ids, 1, device);
  CallerArray<Scalar> sq(out.sq_distances, 1, device), closest(out.closest, 3, device),
      barycentric(out.barycentric, 3, device), signed_d(out.signed_distances, 1, device);
  const size_t per_point = in.bytes_per_point() + ids.bytes_per_point() + sq.bytes_per_point() +
                           closest.bytes_per_point() + barycentric.bytes_per_point() +
                           signed_d.bytes_per_point();
  const int64_t chunk =
      std::min(m, queries_within_budget(budget, per_point + kMeshChunkOrderBytesPerPoint,
                                        saturating_add(fixed_bytes, kMeshChunkFixedBytes),
                                        kMeshChunkPoints));
  PointOrder order(chunk);
  OrderBox box;
  for (int d = 0; d < 3; ++d) box.lo[d] = mesh.bounds.lo[d], box.hi[d] = mesh.bounds.hi[d];
  in.reserve(chunk);
  ids.reserve(chunk);
  sq.reserve(chunk);
  closest.reserve(chunk);
  barycentric.reserve(chunk);
  signed_d.reserve(chunk);
  DeviceBuffer<int> fault(1);
  check(cudaMemsetAsync(fault.get(), 0, sizeof(int), stream), "mesh query: cudaMemsetAsync");
  const unsigned most_blocks =
      grid_stride_blocks(answer_points<Scalar>, MeshSearchPolicy::kThreads, chunk);
  for (int64_t first = 0; first < m; first += chunk) {
    throw_if_cancelled(cancel);
    const int64_t count = std::min(chunk, m - first);
    in.upload(first, count, stream);
    const int32_t* sorted = order.sort(in.at(first), count, box, stream);
    const PointOutputs<Scalar> o{ids.at(first), sq.at(first), closest.at(first),
                                 barycentric.at(first), signed_d.at(first)};
    answer_points<<<std::min(most_blocks, grid_for(count, MeshSearchPolicy::kThreads)),
                    MeshSearchPolicy::kThreads, 0, stream>>>(mesh, in.at(first), sorted, count,
                                                             max_sq, o, fault.get());
    check_launch("mesh query: answer_points");
    ids.download(first, count, stream);
    sq.download(first, count, stream);
    closest.download(first, count, stream);
    barycentric.download(first, count, stream);
    signed_d.download(first, count, stream);
    int faulted = 0;
    check(cudaMemcpyAsync(&faulted, fault.get(), sizeof faulted, cudaMemcpyDeviceToHost, stream),
          "mesh query: cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream), "mesh query: cudaStreamSynchronize");
    if (faulted != 0)
      fail(KNN_ERR_INTERNAL, format("the mesh BVH of %lld triangles is deeper than its walk's "
                                    "stack of %d",
                                    static_cast<long long>(mesh.n), kMeshStackCapacity));
    progress_add(report, count);
  }
}

// ---- The deviation report ----------------------------------------------------
template <typename Scalar>
using Key = typename OrderedKey<Scalar>::type;

// Keys of the signed distances.
template <typename Scalar>
__global__ void keys_of(const Scalar* values, int64_t m, Key<Scalar>* keys) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < m;
       i += int64_t{gridDim.x} * blockDim.x)
    keys[i] = OrderedKey<Scalar>::of(values[i]);
}

// The measured values: the sorted keys below the key of +infinity (the
// points beyond sort last), found by one thread's binary search.
template <typename Scalar>
__global__ void count_measured(const Key<Scalar>* sorted_keys, int64_t m, int64_t* measured) {
  const Key<Scalar> beyond = OrderedKey<Scalar>::of(infinity_of<Scalar>());
  int64_t lo = 0, hi = m;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (sorted_keys[mid] < beyond)
      lo = mid + 1;
    else
      hi = mid;
  }
  *measured = lo;
}

template <typename Scalar>
__global__ void values_of(const Key<Scalar>* keys, int64_t count, Scalar* values) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x)
    values[i] = scalar_from_ordered_key<Scalar>(keys[i]);
}

// sums[b] and sums[blocks + b]: the sum and the sum of squares of block b.
template <typename Scalar>
__global__ void block_sums(const Scalar* sorted, int64_t count, int64_t blocks, double* sums) {
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b < blocks;
       b += int64_t{gridDim.x} * blockDim.x) {
    const int64_t first = b * geometry::kDeviationSumBlock;
    const int64_t length = min(geometry::kDeviationSumBlock, count - first);
    sums[b] = geometry::block_sum(sorted, first, length, false);
    sums[blocks + b] = geometry::block_sum(sorted, first, length, true);
  }
}

// For each threshold e: how many sorted values are < e (below[i]) and <= e
// (at_most[i]), comparing in double.
template <typename Scalar>
__global__ void rank_thresholds(const Scalar* sorted, int64_t count, const double* thresholds,
                                int n_thresholds, int64_t* below, int64_t* at_most) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_thresholds) return;
  const double e = thresholds[i];
  int64_t lo = 0, hi = count;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (static_cast<double>(sorted[mid]) < e)
      lo = mid + 1;
    else
      hi = mid;
  }
  below[i] = lo;
  hi = count;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (static_cast<double>(sorted[mid]) <= e)
      lo = mid + 1;
    else
      hi = mid;
  }
  at_most[i] = lo;
}

template <typename Scalar>
__global__ void gather_positions(const Scalar* sorted, const int64_t* positions, int count,
                                 double* values) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) values[i] = static_cast<double>(sorted[positions[i]]);
}

template <class T>
void to_device(T* device_dst, const std::vector<T>& host, cudaStream_t stream) {
  if (!host.empty())
    check(cudaMemcpyAsync(device_dst, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice,
                          stream),
          "mesh deviation: cudaMemcpyAsync");
}
template <class T>
void to_host(std::vector<T>& host, const T* device_src, cudaStream_t stream) {
  if (!host.empty())
    check(cudaMemcpyAsync(host.data(), device_src, host.size() * sizeof(T), cudaMemcpyDeviceToHost,
                          stream),
          "mesh deviation: cudaMemcpyAsync");
}

// The statistics of the `measured` sorted values (deviation.h).
template <typename Scalar>
void summarise(const Scalar* sorted, int64_t measured, const DeviationRequest& request,
               DeviationSummary* summary, cudaStream_t stream) {
  if (!summary->start(measured, request)) return;
  const int64_t blocks =
      (measured + geometry::kDeviationSumBlock - 1) / geometry::kDeviationSumBlock;
  // Thresholds: the bin edges, then -t and t. Positions: min, max, then the
  // percentiles.
  std::vector<double> thresholds;
  if (request.n_bins > 0)
    thresholds.assign(request.bin_edges, request.bin_edges + request.n_bins + 1);
  thresholds.push_back(-request.tolerance);
  thresholds.push_back(request.tolerance);
  std::vector<int64_t> positions = {0, measured - 1};
  for (int p = 0; p < request.n_percentiles; ++p)
    positions.push_back(geometry::percentile_position(request.percentiles[p], measured));
  const int n_thresholds = static_cast<int>(thresholds.size());
  const int n_positions = static_cast<int>(positions.size());

  DeviceBuffer<double> sums(2 * static_cast<size_t>(blocks));
  DeviceBuffer<double> device_thresholds(thresholds.size());
  DeviceBuffer<int64_t> ranks(2 * thresholds.size());
  DeviceBuffer<int64_t> device_positions(positions.size());
  DeviceBuffer<double> picked(positions.size());
  to_device(device_thresholds.get(), thresholds, stream);
  to_device(device_positions.get(), positions, stream);
  block_sums<<<grid_stride_blocks(block_sums<Scalar>, kBlock, blocks), kBlock, 0, stream>>>(
      sorted, measured, blocks, sums.get());
  check_launch("mesh deviation: block_sums");
  rank_thresholds<<<grid_for(n_thresholds, kBlock), kBlock, 0, stream>>>(
      sorted, measured, device_thresholds.get(), n_thresholds, ranks.get(),
      ranks.get() + n_thresholds);
  check_launch("mesh deviation: rank_thresholds");
  gather_positions<<<grid_for(n_positions, kBlock), kBlock, 0, stream>>>(
      sorted, device_positions.get(), n_positions, picked.get());
  check_launch("mesh deviation: gather_positions");
  std::vector<double> host_sums(2 * static_cast<size_t>(blocks)), values(positions.size());
  std::vector<int64_t> host_ranks(2 * thresholds.size());
  to_host(host_sums, sums.get(), stream);
  to_host(host_ranks, ranks.get(), stream);
  to_host(values, picked.get(), stream);
  check(cudaStreamSynchronize(stream), "mesh deviation: cudaStreamSynchronize");

  const double count = static_cast<double>(measured);
  summary->min = values[0];
  summary->max = values[1];
  summary->mean = geometry::sum_of_block_sums(host_sums.data(), blocks) / count;
  summary->rms = std::sqrt(geometry::sum_of_block_sums(host_sums.data() + blocks, blocks) / count);
  for (int p = 0; p < request.n_percentiles; ++p) summary->percentile_values[p] = values[2 + p];
  const int64_t* below = host_ranks.data();
  const int64_t* at_most = host_ranks.data() + n_thresholds;
  const int t = n_thresholds - 2;  // -t, then t
  summary->below_tolerance = below[t];
  summary->above_tolerance = measured - at_most[t + 1];
  summary->within_tolerance = at_most[t + 1] - below[t];
  if (request.n_bins > 0) {
    const int last = request.n_bins;
    summary->below_bins = below[0];
    summary->above_bins = measured - at_most[last];
    for (int b = 0; b + 1 < last; ++b) summary->bin_counts[b] = below[b + 1] - below[b];
    summary->bin_counts[last - 1] = at_most[last] - below[last - 1];
  }
}

}  // namespace

// max_distance^2 in the mesh's scalar: the contract's "beyond".
template <typename Scalar>
void CudaMesh<Scalar>::closest(const Scalar* points, int64_t m, Scalar max_distance,
                               const MeshResults<Scalar>& out, const MeshParams& call) const {
  closest_within_sq(points, m, mul_rn(max_distance, max_distance), out, call);
}

template <typename Scalar>
void CudaMesh<Scalar>::closest_within_sq(const Scalar* points, int64_t m, Scalar max_sq,
                                         const MeshResults<Scalar>& out,
                                         const MeshParams& call) const {
  if (m <= 0) return;
  DeviceScope scope(device_);
  Stream stream;
  const PointOutputs<Scalar> o{out.triangle_ids, out.sq_distances, out.closest, out.barycentric,
                               out.signed_distances};
  try {
    answer_in_chunks(view(), device_, points, m, max_sq, o, device_budget(call.device_memory_limit),
                     0, stream.get());
  } catch (...) {
    cudaStreamSynchronize(stream.get());  // the failure is reported; its work must end first
    write_beyond_everywhere(o, m, device_);
    throw;
  }
}

template <typename Scalar>
void CudaMesh<Scalar>::deviation(const Scalar* points, int64_t m, Scalar max_distance,
                                 const DeviationRequest& request, DeviationSummary* summary,
                                 Scalar* signed_distances, const MeshParams& call) const {
  DeviceScope scope(device_);
  Stream stream;
  const cudaStream_t s = stream.get();
  const size_t um = static_cast<size_t>(m < 0 ? 0 : m);
  // Every point's value and key at once (the sort's two buffers), the sort's
  // temporaries and the summary's few buffers (a page each), and the chunks
  // beside them: refused before anything is allocated when not even a chunk
  // of one point fits.
  const DeviceBudget budget = device_budget(call.device_memory_limit);
  const size_t fixed = saturating_add(
      saturating_add(2 * aligned(um * sizeof(Scalar)), cub_temp_bytes(m)), 6 * kAllocAlignment);
  queries_within_budget(budget, kMeshChunkOrderBytesPerPoint + 3 * sizeof(Scalar),
                        saturating_add(fixed, kMeshChunkFixedBytes), 1);
  try {
    DeviceBuffer<Scalar> values(um);
    DeviceBuffer<Key<Scalar>> keys(um);
    if (m > 0) {
      answer_in_chunks(view(), device_, points, m, mul_rn(max_distance, max_distance),
                       PointOutputs<Scalar>{nullptr, nullptr, nullptr, nullptr, values.get()},
                       budget, fixed, s);
      if (signed_distances != nullptr) {
        if (device_may_use_in_place(signed_distances, device_))
          check(cudaMemcpyAsync(signed_distances, values.get(), um * sizeof(Scalar),
                                cudaMemcpyDeviceToDevice, s),
                "mesh deviation: cudaMemcpyAsync");
        else
          download_staged(signed_distances, values.get(), um * sizeof(Scalar), s);
      }
    }
    throw_if_cancelled(cancel_flag());
    int64_t measured = 0;
    const Scalar* sorted = nullptr;
    if (m > 0) {
      keys_of<<<grid_stride_blocks(keys_of<Scalar>, kBlock, m), kBlock, 0, s>>>(values.get(), m,
                                                                                keys.get());
      check_launch("mesh deviation: keys_of");
      // The values are copied out: their buffer is the sort's second one.
      cub::DoubleBuffer<Key<Scalar>> sorting(keys.get(),
                                             reinterpret_cast<Key<Scalar>*>(values.get()));
      size_t temp_bytes = 0;
      check(cub::DeviceRadixSort::SortKeys(nullptr, temp_bytes, sorting, m, 0,
                                           8 * static_cast<int>(sizeof(Scalar)), s),
            "mesh deviation: radix sort (size)");
      DeviceBuffer<unsigned char> temp(checked_cub_temp(temp_bytes, cub_temp_bytes(m)));
      check(cub::DeviceRadixSort::SortKeys(temp.get(), temp_bytes, sorting, m, 0,
                                           8 * static_cast<int>(sizeof(Scalar)), s),
            "mesh deviation: radix sort");
      Key<Scalar>* sorted_keys = sorting.Current();
      DeviceBuffer<int64_t> measured_count(1);
      count_measured<Scalar><<<1, 1, 0, s>>>(sorted_keys, m, measured_count.get());
      check_launch("mesh deviation: count_measured");
      check(cudaMemcpyAsync(&measured, measured_count.get(), sizeof measured,
                            cudaMemcpyDeviceToHost, s),
            "mesh deviation: cudaMemcpyAsync");
      check(cudaStreamSynchronize(s), "mesh deviation: cudaStreamSynchronize");
      // The sorted keys back to values, into the buffer the sort did not end in.
      Scalar* sorted_values =
          sorted_keys == keys.get() ? values.get() : reinterpret_cast<Scalar*>(keys.get());
      if (measured > 0) {
        values_of<<<grid_stride_blocks(values_of<Scalar>, kBlock, measured), kBlock, 0, s>>>(
            sorted_keys, measured, sorted_values);
        check_launch("mesh deviation: values_of");
      }
      sorted = sorted_values;
    }
    summary->beyond = m - measured;
    summarise(sorted, measured, request, summary, s);
  } catch (...) {
    // A failure while the engine ran (cancellation included): the per-point
    // values say "beyond", as closest() leaves its outputs.
    cudaStreamSynchronize(s);
    if (signed_distances != nullptr)
      write_beyond_everywhere(
          PointOutputs<Scalar>{nullptr, nullptr, nullptr, nullptr, signed_distances}, m, device_);
    throw;
  }
}

template class CudaMesh<float>;
template class CudaMesh<double>;

}  // namespace cuda
}  // namespace knn
