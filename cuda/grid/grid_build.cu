// The CUDA uniform grid of the index API (3-D): the build and the engine
// that serves calls through the shared query pipeline (query_chunks.cuh).
//
// Build, all on the device except the few numbers of the layout:
//   1. the bounding box (a core/key_range.cuh KeyRange reduction over
//      order-preserving keys: 32-bit for float, 64-bit for double,
//      core/radix_sort_temp.cuh OrderedKey);
//   2. the layout on the host (common/grid_layout.h, the same function the
//      OpenMP grid uses, so both choose the same resolution);
//   3. a cell key per point, the count of every cell (an atomic histogram of
//      the keys) and the occupancy (sum of squared counts, exact in 64
//      bits): a poor grid is counted again with finer cells where the
//      occupancy of cells twice as wide predicts a good finer grid
//      (common/grid_layout.h "Surfaces"), else gives nullptr; a build that
//      refuses curves counts the coarse cells of every layout, kept or not,
//      and gives nullptr for points on a curve ("Curves"). Each layout is
//      judged before any sort, so data the grid refuses (clusters, curves)
//      costs a pass over the points, not a sort (H200, AUTO build of 10^7
//      points in 64 Gaussian blobs: 7.08 -> 6.74 ms, the kd-tree alone
//      6.22; a grid kept pays the histogram, uniform 1.05 -> 1.16 ms);
//   4. for the grid kept, a CUB radix sort of its (key, index) pairs over the
//      key's bits only; equal keys keep ascending index (the sort is stable);
//   5. the start of every cell in one pass over the sorted keys (each point
//      that begins a run of its key fills the starts of the empty cells
//      before it);
//   6. the points gathered in cell order as (x, y, z, index bits)
//      (core/float4_point.cuh DevicePoint3: a float4, or 32 bytes for double).
// The build and the engine are templates over the scalar type, one code for
// the float32 and the float64 index. The host reads the caller's cancel flag
// between the steps (and between the layouts tried), where it waits for the
// device anyway.
// The resident grid keeps the points in cell order, the cell starts, and the
// points in input order (the queries of knn_self, and the distances the
// radius rows recompute when the caller wants no distance row).
#include <cub/block/block_reduce.cuh>
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <memory>
#include <vector>

#include "../../common/float_math.h"
#include "../../common/grid_layout.h"
#include "../../engine/cancel.h"
#include "../core/cuda_support.h"
#include "../core/key_range.cuh"
#include "../core/launch_policy.h"
#include "../core/memory_model.h"
#include "../core/pinned_pool.h"
#include "../core/query_chunks.cuh"
#include "../core/radix_sort_temp.cuh"
#include "../core/resident_rows_engine.cuh"
#include "../cuda_engine.h"
#include "../cuda_index.h"
#include "../device_rows_index.h"
#include "../index_memory_model.h"
#include "grid_build.cuh"

namespace knn {
namespace cuda {
namespace {

// Every kernel here is a grid-stride loop whose result does not depend on
// the grid size (the reductions are exact: min, max, integer sums):
// launched with blocks_for (launch_policy.h).

// bounds[0..2]: smallest key per axis, bounds[3..5]: largest.
template <typename Scalar>
__global__ void bounding_box_kernel(const Scalar* xyz, int64_t n,
                                    typename OrderedKey<Scalar>::type* bounds) {
  using Key = typename OrderedKey<Scalar>::type;
  KeyRange<Key> axis[3] = {KeyRange<Key>::empty(), KeyRange<Key>::empty(), KeyRange<Key>::empty()};
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    for (int a = 0; a < 3; ++a) axis[a].add(OrderedKey<Scalar>::of(xyz[3 * i + a]));
  for (int a = 0; a < 3; ++a) {
    const KeyRange<Key> warp = warp_key_range(axis[a]);
    if (threadIdx.x % 32 == 0) {
      atomicMin(&bounds[a], warp.low);
      atomicMax(&bounds[3 + a], warp.high);
    }
  }
}

// The cell key of every point, its index beside it for the sort (ids may be
// null: written for an earlier layout, which the sort has not touched), and
// the count of every cell (an atomic histogram of the keys).
template <typename Scalar>
__global__ void cell_keys_kernel(BasicGridLayout<Scalar> layout, const Scalar* xyz, int64_t n,
                                 uint32_t* keys, uint32_t* ids, uint32_t* counts) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const uint32_t key = layout.key_of(xyz[3 * i], xyz[3 * i + 1], xyz[3 * i + 2]);
    keys[i] = key;
    if (ids) ids[i] = static_cast<uint32_t>(i);
    atomicAdd(&counts[key], 1u);
  }
}

// starts[c] = first sorted position with key >= c, for c in [0, cells].
__global__ void cell_starts_kernel(const uint32_t* sorted_keys, int64_t n, int64_t cells,
                                   uint32_t* starts) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const int64_t key = sorted_keys[i];
    const int64_t previous = i == 0 ? -1 : static_cast<int64_t>(sorted_keys[i - 1]);
    for (int64_t c = previous + 1; c <= key; ++c) starts[c] = static_cast<uint32_t>(i);
    if (i == n - 1)
      for (int64_t c = key + 1; c <= cells; ++c) starts[c] = static_cast<uint32_t>(n);
  }
}

// sum += the squares of items counts (exact: 64-bit integers), one atomic
// per block.
__global__ void __launch_bounds__(kBlock)
    squared_counts_kernel(const uint32_t* counts, int64_t items, unsigned long long* sum) {
  using Reduce = cub::BlockReduce<unsigned long long, kBlock>;
  __shared__ typename Reduce::TempStorage reduce;
  unsigned long long local = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < items;
       c += stride) {
    const unsigned long long count = counts[c];
    local += count * count;
  }
  const unsigned long long block = Reduce(reduce).Sum(local);
  if (threadIdx.x == 0 && block != 0) atomicAdd(sum, block);
}

// The count of every coarse cell (BasicGridLayout::coarse_key_of_cell).
template <typename Scalar>
__global__ void coarse_counts_kernel(BasicGridLayout<Scalar> layout, const uint32_t* counts,
                                     int64_t cells, int levels, uint32_t* coarse) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < cells;
       c += stride) {
    const uint32_t count = counts[c];
    if (count != 0)
      atomicAdd(&coarse[layout.coarse_key_of_cell(static_cast<uint32_t>(c), levels)], count);
  }
}

template <typename Scalar>
__global__ void gather_kernel(const Scalar* xyz, const uint32_t* ids, int64_t n,
                              typename DevicePoint3<Scalar>::Stored* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const int64_t id = ids[i];
    out[i] = DevicePoint3<Scalar>::make(xyz[3 * id], xyz[3 * id + 1], xyz[3 * id + 2],
                                        static_cast<int32_t>(id));
  }
}

template <typename Scalar>
class GridIndex final : public ResidentRowsEngine<Scalar> {
 public:
  explicit GridIndex(std::unique_ptr<DeviceGrid<Scalar>> grid)
      : ResidentRowsEngine<Scalar>(KNN_STRUCTURE_GRID, grid->n, 3), grid_(std::move(grid)) {}

  double stacked_cell_points() const override { return grid_->stacked_cell_points; }

  void knn(const Scalar* queries, int64_t m, int k, int32_t* indices, Scalar* sq_distances,
           const CallParams& call) const override {
    run_knn(queries, m, k, false, indices, sq_distances, call);
  }

  // The queries are the resident points in input order, used in place.
  void knn_self(int k, bool exclude_self, int32_t* indices, Scalar* sq_distances,
                const CallParams& call) const override {
    CallParams on_device = call;
    on_device.queries_on_device = true;
    run_knn(grid_->points.get(), grid_->n, k, exclude_self, indices, sq_distances, on_device);
  }

  // Host queries: the sample is gathered here and copied up in one piece.
  double share_of_isolated_queries(const Scalar* queries, int64_t m,
                                   const CallParams& call) const override {
    if (queries == nullptr) {  // the indexed points (in input order, resident)
      queries = grid_->points.get();
      m = grid_->n;
    }
    if (m <= 0 || grid_->n == 0) return 0.0;
    const int64_t sample = std::min(m, kPlacementSampleQueries);
    Stream stream;
    int64_t isolated;
    if (call.queries_on_device || queries == grid_->points.get()) {
      isolated = count_isolated_queries(grid_->view(), queries, m, sample, stream.get());
    } else {
      std::vector<Scalar> rows(static_cast<size_t>(3 * sample));
      for (int64_t i = 0; i < sample; ++i)
        std::copy_n(queries + 3 * (i * m / sample), 3, rows.begin() + 3 * i);
      DeviceBuffer<Scalar> device_rows(rows.size());
      check(cudaMemcpyAsync(device_rows.get(), rows.data(), rows.size() * sizeof(Scalar),
                            cudaMemcpyHostToDevice, stream.get()),
            "grid placement: copying the sample");
      isolated =
          count_isolated_queries(grid_->view(), device_rows.get(), sample, sample, stream.get());
    }
    return static_cast<double>(isolated) / static_cast<double>(sample);
  }

  void radius(const Scalar* queries, int64_t m, Scalar radius, int max_neighbors, int32_t* indices,
              Scalar* sq_distances, int32_t* counts, const CallParams& call) const override {
    if (m <= 0) return;
    const Scalar r2 = mul_rn(radius, radius);
    const bool want_rows = max_neighbors > 0;
    const int64_t chunk = chunk_for(m, max_neighbors, 0, want_rows && indices != nullptr,
                                    want_rows && sq_distances != nullptr, counts != nullptr, call);
    GridSearchScratch scratch[kPipelineSlots];
    const GridView<Scalar> grid = grid_->view();
    for_each_query_chunk<Scalar>(queries, m, 3, max_neighbors, indices, sq_distances, counts, call,
                                 chunk, [&](const QueryChunk<Scalar>& c, cudaStream_t stream) {
                                   GridSearchScratch& s = scratch[c.slot];
                                   if (s.capacity() == 0)
                                     s = GridSearchScratch(chunk, grid_->key_bits());
                                   grid_radius(grid, c.queries, c.count, r2, max_neighbors,
                                               c.indices, c.sq_distances, c.counts, s, stream);
                                 });
  }

 private:
  const Scalar* resident_rows() const override { return grid_->points.get(); }

  // take: the entries of a kNN call's lists (0 for radius calls).
  static int64_t chunk_for(int64_t m, int row_width, int take, bool want_indices, bool want_sq,
                           bool want_counts, const CallParams& call) {
    const size_t per_query = pipeline_bytes_per_query(3, row_width, want_indices, want_sq,
                                                      want_counts, call, sizeof(Scalar)) +
                             kPipelineSlots * grid_scratch_bytes_per_query(take, sizeof(Scalar));
    const size_t fixed =
        pipeline_fixed_bytes(call) + kPipelineSlots * grid_scratch_fixed_bytes(take);
    return std::min(m, chunk_queries_for(per_query, fixed, call));
  }

  void run_knn(const Scalar* queries, int64_t m, int k, bool exclude_self, int32_t* indices,
               Scalar* sq_distances, const CallParams& call) const {
    if (m <= 0) return;
    const int take = exclude_self ? k + 1 : k;
    if (take > kGridRegisterK && take > grid_max_list_k<Scalar>())
      fail(KNN_ERR_UNSUPPORTED,
           format("the CUDA grid keeps at most %d neighbours per query on this device (k = %d%s)",
                  grid_max_list_k<Scalar>() - (exclude_self ? 1 : 0), k,
                  exclude_self ? ", exclude_self" : ""));
    const int64_t chunk = chunk_for(m, k, take, true, sq_distances != nullptr, false, call);
    GridSearchScratch scratch[kPipelineSlots];
    const GridView<Scalar> grid = grid_->view();
    for_each_query_chunk<Scalar>(queries, m, 3, k, indices, sq_distances, nullptr, call, chunk,
                                 [&](const QueryChunk<Scalar>& c, cudaStream_t stream) {
                                   GridSearchScratch& s = scratch[c.slot];
                                   if (s.capacity() == 0)
                                     s = GridSearchScratch(chunk, grid_->key_bits());
                                   grid_knn(grid, c.queries, c.count, k,
                                            exclude_self ? c.first : -1, c.indices, c.sq_distances,
                                            s, stream);
                                 });
  }

  std::unique_ptr<DeviceGrid<Scalar>> grid_;
};

}  // namespace

template <typename Scalar>
int DeviceGrid<Scalar>::key_bits() const {
  return key_bits_below<uint32_t>(static_cast<uint64_t>(layout.cell_count()));
}

namespace {

// The cell starts of a layout. A finer grid that does not fit the device is
// given up like any grid not kept (false: the index uses its kd-tree) rather
// than failing the build; the first grid's failure is the build's.
bool allocate_starts(DeviceBuffer<uint32_t>& starts, int64_t cells, bool finer) {
  try {
    starts.allocate(static_cast<size_t>(cells) + 1);
    return true;
  } catch (const Error& e) {
    if (!finer || e.status() != KNN_ERR_DEVICE_OUT_OF_MEMORY) throw;
    return false;
  }
}

// The sum of the squared counts of `items` cells, waited for.
uint64_t sum_of_squares(const uint32_t* counts, int64_t items, cudaStream_t stream) {
  unsigned long long sum = 0;
  DeviceBuffer<unsigned long long> device_sum(1);
  check(cudaMemsetAsync(device_sum.get(), 0, sizeof sum, stream), "grid occupancy");
  squared_counts_kernel<<<blocks_for(squared_counts_kernel, items), kBlock, 0, stream>>>(
      counts, items, device_sum.get());
  check_launch("grid occupancy");
  check(cudaMemcpyAsync(&sum, device_sum.get(), sizeof sum, cudaMemcpyDeviceToHost, stream),
        "grid occupancy");
  check(cudaStreamSynchronize(stream), "grid build");
  return sum;
}

// Step 3 of the build for one layout: the cell key of every point into
// sort_keys (its index into sort_ids for the first layout tried; later ones
// find them there), the count of every cell into `counts` (cells entries),
// and the occupancy (sum of squared cell counts).
template <typename Scalar>
uint64_t count_cells(const BasicGridLayout<Scalar>& layout, const Scalar* xyz, int64_t n,
                     cub::DoubleBuffer<uint32_t>& sort_keys, cub::DoubleBuffer<uint32_t>& sort_ids,
                     bool first_layout, uint32_t* counts, cudaStream_t stream) {
  const int64_t cells = layout.cell_count();
  check(cudaMemsetAsync(counts, 0, static_cast<size_t>(cells) * sizeof(uint32_t), stream),
        "grid build: cell counts");
  if (n == 0) return 0;
  cell_keys_kernel<Scalar><<<blocks_for(cell_keys_kernel<Scalar>, n), kBlock, 0, stream>>>(
      layout, xyz, n, sort_keys.Current(), first_layout ? sort_ids.Current() : nullptr, counts);
  check_launch("grid cell keys");
  return sum_of_squares(counts, cells, stream);
}

// Steps 4-5 for the layout kept: the cell keys sorted with the point indices
// (sort_keys / sort_ids hold count_cells' output, then the result) and the
// start of every cell.
void bin_points(int64_t cells, int64_t n, cub::DoubleBuffer<uint32_t>& sort_keys,
                cub::DoubleBuffer<uint32_t>& sort_ids, uint32_t* starts, cudaStream_t stream) {
  if (n == 0) {
    check(cudaMemsetAsync(starts, 0, (static_cast<size_t>(cells) + 1) * sizeof(uint32_t), stream),
          "grid build: empty starts");
    return;
  }
  const int bits = key_bits_below<uint32_t>(static_cast<uint64_t>(cells));
  size_t temp_bytes = 0;
  check(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, sort_keys, sort_ids,
                                        static_cast<int>(n), 0, bits, stream),
        "grid build sort (size)");
  DeviceBuffer<unsigned char> temp(checked_cub_temp(temp_bytes, cub_temp_bytes(n)));
  check(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, sort_keys, sort_ids,
                                        static_cast<int>(n), 0, bits, stream),
        "grid build sort");
  cell_starts_kernel<<<blocks_for(cell_starts_kernel, n), kBlock, 0, stream>>>(sort_keys.Current(),
                                                                               n, cells, starts);
  check_launch("grid cell starts");
}

// The occupancy of the coarse grid of `layout` `levels` steps up (cells
// 2^levels times as wide).
template <typename Scalar>
uint64_t coarse_occupancy(const BasicGridLayout<Scalar>& layout, const uint32_t* counts, int levels,
                          cudaStream_t stream) {
  const int64_t cells = layout.cell_count(), coarse_cells = layout.coarse_cell_count(levels);
  DeviceBuffer<uint32_t> coarse(static_cast<size_t>(coarse_cells));
  check(cudaMemsetAsync(coarse.get(), 0, coarse.size() * sizeof(uint32_t), stream),
        "grid coarse occupancy");
  coarse_counts_kernel<Scalar>
      <<<blocks_for(coarse_counts_kernel<Scalar>, cells), kBlock, 0, stream>>>(
          layout, counts, cells, levels, coarse.get());
  check_launch("grid coarse counts");
  return sum_of_squares(coarse.get(), coarse_cells, stream);
}

}  // namespace

template <typename Scalar>
std::unique_ptr<DeviceGrid<Scalar>> build_device_grid(const Scalar* points, int64_t n,
                                                      bool points_on_device, int target,
                                                      bool refine, bool refuse_curves,
                                                      cudaStream_t stream) {
  DeviceBuffer<Scalar> xyz(3 * static_cast<size_t>(n));
  copy_points_in(xyz.get(), points, xyz.size() * sizeof(Scalar), points_on_device, stream);
  return build_device_grid(std::move(xyz), n, target, refine, refuse_curves, stream);
}

template <typename Scalar>
std::unique_ptr<DeviceGrid<Scalar>> build_device_grid(DeviceBuffer<Scalar> xyz, int64_t n,
                                                      int target, bool refine, bool refuse_curves,
                                                      cudaStream_t stream) {
  using Key = typename OrderedKey<Scalar>::type;
  const size_t un = static_cast<size_t>(n);
  const volatile int* cancel = cancel_flag();

  // 1-2. Bounding box and layout.
  Scalar lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
  if (n > 0) {
    constexpr Key kNone = ~Key{0};
    Key bounds[6] = {kNone, kNone, kNone, 0, 0, 0};
    DeviceBuffer<Key> device_bounds(6);
    check(
        cudaMemcpyAsync(device_bounds.get(), bounds, sizeof bounds, cudaMemcpyHostToDevice, stream),
        "grid build: box");
    bounding_box_kernel<Scalar><<<blocks_for(bounding_box_kernel<Scalar>, n), kBlock, 0, stream>>>(
        xyz.get(), n, device_bounds.get());
    check_launch("grid bounding box");
    check(
        cudaMemcpyAsync(bounds, device_bounds.get(), sizeof bounds, cudaMemcpyDeviceToHost, stream),
        "grid build: box");
    check(cudaStreamSynchronize(stream), "grid build");
    for (int a = 0; a < 3; ++a) {
      lo[a] = scalar_from_ordered_key<Scalar>(bounds[a]);
      hi[a] = scalar_from_ordered_key<Scalar>(bounds[3 + a]);
    }
  }
  BasicGridLayout<Scalar> layout =
      make_grid_layout(static_cast<const Scalar*>(lo), static_cast<const Scalar*>(hi), n, target);

  // 3 for each layout tried (a poor grid is counted again with finer cells,
  // common/grid_layout.h "Surfaces"); the counts of the layout kept are
  // overwritten by its starts (4-5), and an old layout's go before the new.
  DeviceBuffer<uint32_t> keys[2] = {DeviceBuffer<uint32_t>(un), DeviceBuffer<uint32_t>(un)};
  DeviceBuffer<uint32_t> ids[2] = {DeviceBuffer<uint32_t>(un), DeviceBuffer<uint32_t>(un)};
  cub::DoubleBuffer<uint32_t> sort_keys(keys[0].get(), keys[1].get());
  cub::DoubleBuffer<uint32_t> sort_ids(ids[0].get(), ids[1].get());
  DeviceBuffer<uint32_t> starts;
  double stacked_points = 0.0;
  for (int refinements = 0;; ++refinements) {
    throw_if_cancelled(cancel);
    const int64_t cells = layout.cell_count();
    starts = DeviceBuffer<uint32_t>();
    if (!allocate_starts(starts, cells, refinements > 0)) return nullptr;
    const uint64_t sum_sq = count_cells(layout, xyz.get(), n, sort_keys, sort_ids, refinements == 0,
                                        starts.get(), stream);
    const bool kept = grid_is_kept(sum_sq, n, target, refinements);
    const bool judge_curve = grid_curve_is_judged(refuse_curves, n);
    if (kept && !judge_curve) break;
    const uint64_t coarse_sum = coarse_occupancy(layout, starts.get(), 1, stream);
    bool stacked = false;
    if (judge_curve && grid_on_curve(sum_sq, coarse_sum, n)) {
      const uint64_t coarser_sum = coarse_occupancy(layout, starts.get(), 2, stream);
      if (!grid_curve_is_stacked(sum_sq, coarse_sum, coarser_sum)) return nullptr;
      stacked = true;
    }
    if (kept) {
      stacked_points = stacked ? mean_own_cell(sum_sq, n) : 0.0;
      break;
    }
    if (!refine || refinements == kGridMaxRefinements) return nullptr;
    if (!finer_grid_layout(layout, sum_sq, coarse_sum, n, target, refinements, layout))
      return nullptr;
  }
  throw_if_cancelled(cancel);
  bin_points(layout.cell_count(), n, sort_keys, sort_ids, starts.get(), stream);
  check(cudaStreamSynchronize(stream), "grid build");
  throw_if_cancelled(cancel);

  // 6. Points in cell order.
  DeviceBuffer<typename DeviceGrid<Scalar>::CellPoint> cell_points(un);
  if (n > 0) {
    gather_kernel<Scalar><<<blocks_for(gather_kernel<Scalar>, n), kBlock, 0, stream>>>(
        xyz.get(), sort_ids.Current(), n, cell_points.get());
    check_launch("grid gather");
  }
  check(cudaStreamSynchronize(stream), "grid build");
  auto grid = std::make_unique<DeviceGrid<Scalar>>();
  grid->layout = layout;
  grid->n = n;
  grid->points = std::move(xyz);
  grid->cell_points = std::move(cell_points);
  grid->starts = std::move(starts);
  grid->stacked_cell_points = stacked_points;
  return grid;
}

template struct DeviceGrid<float>;
template struct DeviceGrid<double>;
template std::unique_ptr<DeviceGrid<float>> build_device_grid<float>(const float*, int64_t, bool,
                                                                     int, bool, bool, cudaStream_t);
template std::unique_ptr<DeviceGrid<double>> build_device_grid<double>(const double*, int64_t, bool,
                                                                       int, bool, bool,
                                                                       cudaStream_t);

template std::unique_ptr<DeviceGrid<float>> build_device_grid<float>(DeviceBuffer<float>, int64_t,
                                                                     int, bool, bool, cudaStream_t);
template std::unique_ptr<DeviceGrid<double>> build_device_grid<double>(DeviceBuffer<double>,
                                                                       int64_t, int, bool, bool,
                                                                       cudaStream_t);

namespace {

template <typename Scalar>
void require_grid_build_fits(int64_t n, const IndexParams& params) {
  require_build_within_limit(
      device_budget(params.device_memory_limit), index_memory::grid_build_bytes(n, sizeof(Scalar)),
      format("building a CUDA grid of %lld points", static_cast<long long>(n)));
}

int grid_target(const IndexParams& params) { return grid_points_per_cell(params.leaf_size); }

// The index over a grid build's result; nullptr when the data made no grid.
template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> grid_engine(std::unique_ptr<DeviceGrid<Scalar>> grid) {
  if (!grid) return nullptr;
  return std::make_unique<GridIndex<Scalar>>(std::move(grid));
}

}  // namespace

template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> build_grid_index(const Scalar* points, int64_t n,
                                                           const IndexParams& params) {
  require_grid_build_fits<Scalar>(n, params);
  Stream stream;
  return grid_engine(build_device_grid(points, n, params.points_on_device, grid_target(params),
                                       params.refine_grid, params.refuse_curves, stream.get()));
}

template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> build_grid_index(DeviceBuffer<Scalar> xyz, int64_t n,
                                                           const IndexParams& params) {
  require_grid_build_fits<Scalar>(n, params);
  Stream stream;
  return grid_engine(build_device_grid(std::move(xyz), n, grid_target(params), params.refine_grid,
                                       params.refuse_curves, stream.get()));
}

KNN_INSTANTIATE_BUILDER(KNN_GRID_INDEX_BUILDER);
template std::unique_ptr<IndexEngine> build_grid_index(DeviceBuffer<float>, int64_t,
                                                       const IndexParams&);

}  // namespace cuda
}  // namespace knn
