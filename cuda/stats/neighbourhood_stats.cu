// The CUDA engine's reducer of neighbourhood statistics (engine/stats_engine.h,
// cuda_index.h make_list_reducer): a device copy of the index's points, each
// chunk's points as the queries in their Morton order (core/point_order.cuh:
// neighbouring threads walk the same nodes and gather the same neighbours),
// the chunk's lists in device scratch, and one small kernel per statistic
// that turns each row into its point's outputs by the definition the OpenMP
// engine shares (common/geometry/neighbourhood.h), so both engines write the
// same bits. The lists never leave the device; host outputs get each chunk's
// values by one copy.
#include <algorithm>
#include <cstdint>
#include <memory>

#include "../../common/geometry/neighbourhood.h"
#include "../core/cuda_support.h"
#include "../core/launch_policy.h"
#include "../core/point_order.cuh"
#include "../cuda_engine.h"
#include "../cuda_index.h"

namespace knn {
namespace cuda {
namespace {

// What every kernel of this file reads: the chunk of points [first, first +
// count), row r of its lists that of point first + order[r], and where that
// point's outputs go (value + order[r] * width, curvature + order[r]: the
// caller's arrays at `first`, or the chunk's staging).
template <typename Scalar>
struct RowsOfChunk {
  int64_t first, count, n;
  int k, list_k;
  const Scalar* points;
  const int32_t* order;
  const int32_t* indices;
  const Scalar* sq_distances;
  Scalar* values;
  Scalar* curvature;
};

template <typename Scalar>
__device__ void write_rows(NeighbourhoodStatistic what, const RowsOfChunk<Scalar>& c,
                           const Scalar* viewpoint) {
  const int64_t width = what == NeighbourhoodStatistic::Normals ? 3 : 1;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < c.count;
       r += stride) {
    const int64_t at = c.order[r];
    write_statistic(what, c.k, c.list_k, c.n, c.points, c.indices + r * c.list_k,
                    c.sq_distances + r * c.list_k, c.first + at, c.values + at * width,
                    c.curvature ? c.curvature + at : nullptr, viewpoint);
  }
}

// Row r of the chunk's queries: point first + order[r].
template <typename Scalar>
__global__ void gather_chunk_queries(const Scalar* points, const int32_t* order, int64_t count,
                                     Scalar* queries) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < count;
       r += int64_t{gridDim.x} * blockDim.x)
    for (int c = 0; c < 3; ++c) queries[3 * r + c] = points[3 * int64_t{order[r]} + c];
}

// A thread per point: the normal (and curvature) of its list, oriented
// towards the viewpoint when there is one.
template <typename Scalar>
__global__ void neighbourhood_normals(RowsOfChunk<Scalar> c, bool has_viewpoint, Scalar vx,
                                      Scalar vy, Scalar vz) {
  const Scalar viewpoint[3] = {vx, vy, vz};
  write_rows(NeighbourhoodStatistic::Normals, c, has_viewpoint ? viewpoint : nullptr);
}

// A thread per point: the mean distance to its k nearest others.
template <typename Scalar>
__global__ void neighbour_mean_distances(RowsOfChunk<Scalar> c) {
  write_rows(NeighbourhoodStatistic::MeanDistance, c, static_cast<const Scalar*>(nullptr));
}

// A thread per point: the distance to its k-th nearest other.
template <typename Scalar>
__global__ void kth_neighbour_distances(RowsOfChunk<Scalar> c) {
  write_rows(NeighbourhoodStatistic::KthDistance, c, static_cast<const Scalar*>(nullptr));
}

template <typename Scalar>
class CudaListReducer final : public BasicListReducer<Scalar> {
 public:
  CudaListReducer(const BasicIndexEngine<Scalar>& engine, const StatsRequest<Scalar>& request,
                  const CallParams& call)
      : request_(request), points_(static_cast<size_t>(engine.size()) * 3) {
    const int64_t n = engine.size();
    const int64_t width = out_width();
    const int64_t row_bytes = static_cast<int64_t>(stats_row_bytes(
        request.list_k, static_cast<int>(width), request.outputs_on_device, sizeof(Scalar)));
    const size_t budget = device_budget(call.device_memory_limit).bytes();
    const size_t fixed_bytes = stats_fixed_bytes(n, sizeof(Scalar));
    const int64_t left = budget > fixed_bytes ? static_cast<int64_t>(budget - fixed_bytes) : 0;
    rows_ = std::max<int64_t>(1, std::min<int64_t>(n, left / kStatsListBudgetShare / row_bytes));
    if (n > 0) {
      engine.copy_points_to_device(points_.get());
      box_ = box_of_points(points_.get(), n, stream_.get());
    }
    order_ = std::make_unique<PointOrder>(rows_);
    queries_.allocate(static_cast<size_t>(rows_ * 3));
    indices_.allocate(static_cast<size_t>(rows_ * request.list_k));
    sq_distances_.allocate(static_cast<size_t>(rows_ * request.list_k));
    if (!request.outputs_on_device) {
      staged_values_.allocate(static_cast<size_t>(rows_ * width));
      if (request.curvature) staged_curvature_.allocate(static_cast<size_t>(rows_));
    }
  }

  const Scalar* chunk_queries(int64_t first, int64_t count) override {
    const Scalar* chunk = points_.get() + 3 * first;
    chunk_order_ = order_->sort(chunk, count, box_, stream_.get());
    gather_chunk_queries<<<grid_stride_blocks(gather_chunk_queries<Scalar>, kBlock, count), kBlock,
                           0, stream_.get()>>>(chunk, chunk_order_, count, queries_.get());
    check_launch("gather_chunk_queries");
    stream_.synchronize();
    return queries_.get();
  }
  int64_t chunk_rows() const override { return rows_; }
  int32_t* list_indices() const override { return indices_.get(); }
  Scalar* list_sq_distances() const override { return sq_distances_.get(); }

  void reduce(int64_t first, int64_t count) override {
    const StatsRequest<Scalar>& r = request_;
    const int64_t width = out_width();
    const bool staged = !r.outputs_on_device;
    RowsOfChunk<Scalar> c{
        first,
        count,
        r.n,
        r.k,
        r.list_k,
        points_.get(),
        chunk_order_,
        indices_.get(),
        sq_distances_.get(),
        staged ? staged_values_.get() : r.values + first * width,
        r.curvature ? (staged ? staged_curvature_.get() : r.curvature + first) : nullptr};
    Stream& stream = stream_;
    // Every statistic's kernel takes the chunk's rows a thread each, on the
    // same grid-stride launch.
    const auto launch = [&](auto* kernel, const char* name, auto... arguments) {
      constexpr int threads = NeighbourhoodStatsPolicy::kThreads;
      kernel<<<grid_stride_blocks(kernel, threads, count), threads, 0, stream.get()>>>(
          c, arguments...);
      check_launch(name);
    };
    switch (r.what) {
      case NeighbourhoodStatistic::Normals:
        launch(neighbourhood_normals<Scalar>, "neighbourhood_normals", r.has_viewpoint,
               r.viewpoint[0], r.viewpoint[1], r.viewpoint[2]);
        break;
      case NeighbourhoodStatistic::MeanDistance:
        launch(neighbour_mean_distances<Scalar>, "neighbour_mean_distances");
        break;
      case NeighbourhoodStatistic::KthDistance:
        launch(kth_neighbour_distances<Scalar>, "kth_neighbour_distances");
        break;
    }
    if (staged) {
      check(cudaMemcpyAsync(r.values + first * width, c.values,
                            static_cast<size_t>(count * width) * sizeof(Scalar),
                            cudaMemcpyDeviceToHost, stream.get()),
            "cudaMemcpyAsync");
      if (r.curvature)
        check(cudaMemcpyAsync(r.curvature + first, c.curvature,
                              static_cast<size_t>(count) * sizeof(Scalar), cudaMemcpyDeviceToHost,
                              stream.get()),
              "cudaMemcpyAsync");
    }
    stream.synchronize();
  }

 private:
  int64_t out_width() const { return request_.what == NeighbourhoodStatistic::Normals ? 3 : 1; }

  StatsRequest<Scalar> request_;
  Stream stream_;
  DeviceBuffer<Scalar> points_;
  OrderBox box_{};
  int64_t rows_ = 1;
  std::unique_ptr<PointOrder> order_;
  const int32_t* chunk_order_ = nullptr;  // the last chunk's, from chunk_queries
  DeviceBuffer<Scalar> queries_;
  DeviceBuffer<int32_t> indices_;
  DeviceBuffer<Scalar> sq_distances_;
  DeviceBuffer<Scalar> staged_values_, staged_curvature_;
};

}  // namespace

KNN_DECLARE_BUILDER(KNN_LIST_REDUCER_BUILDER) {
  return std::make_unique<CudaListReducer<Scalar>>(engine, request, call);
}
KNN_INSTANTIATE_BUILDER(KNN_LIST_REDUCER_BUILDER);

}  // namespace cuda
}  // namespace knn
