// Kernels of the grid search (grid_search.cuh). The walks themselves (which
// cells, when to stop) are common/grid_layout.h's, shared with the OpenMP
// grid, so both backends visit cells under the same exact bounds and return
// the same bits.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>

#include "../../common/float_math.h"
#include "../../common/grid_walk.h"
#include "../../common/neighbor.h"
#include "../core/binned_rows.cuh"
#include "../core/float4_point.cuh"
#include "../core/knn_lists.cuh"
#include "../core/launch_policy.h"
#include "../core/memory_model.h"
#include "../core/warp_list.cuh"
#include "grid_search.cuh"

namespace knn {
namespace cuda {
namespace {

using Policy = GridSearchPolicy;
// Dynamic shared memory a block gets without opting in.
constexpr size_t kDefaultSharedBytes = 48 * 1024;

// Also zeroes the count of queries the thread search hands over (the
// chunk's search runs after it on the same stream): no memset of its own.
template <typename Scalar>
__global__ void query_keys_kernel(BasicGridLayout<Scalar> layout, const Scalar* queries,
                                  int64_t count, uint32_t* keys, uint32_t* order,
                                  unsigned* handed_over_count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i == 0) *handed_over_count = 0;
  if (i >= count) return;
  keys[i] = layout.key_of(queries[3 * i], queries[3 * i + 1], queries[3 * i + 2]);
  order[i] = static_cast<uint32_t>(i);
}

// The chunk's query positions in cell order.
template <typename Scalar>
const uint32_t* queries_in_cell_order(const GridView<Scalar>& grid, const Scalar* queries,
                                      int64_t count, GridSearchScratch& s, cudaStream_t stream) {
  query_keys_kernel<Scalar><<<grid_for(count, Policy::kThreads), Policy::kThreads, 0, stream>>>(
      grid.layout, queries, count, s.keys[0].get(), s.order[0].get(), s.handed_over_count.get());
  check_launch("grid query keys");
  cub::DoubleBuffer<uint32_t> keys(s.keys[0].get(), s.keys[1].get());
  cub::DoubleBuffer<uint32_t> order(s.order[0].get(), s.order[1].get());
  size_t bytes = s.cub_bytes;
  check(cub::DeviceRadixSort::SortPairs(s.cub_temp.get(), bytes, keys, order,
                                        static_cast<int>(count), 0, s.key_bits, stream),
        "grid query sort");
  return order.Current();
}

template <typename Scalar>
__device__ void load_query(const Scalar* queries, int64_t i, Scalar q[3]) {
  q[0] = queries[3 * i], q[1] = queries[3 * i + 1], q[2] = queries[3 * i + 2];
}

// The points of cells first_key..last_key (contiguous in cell order) that
// `scan` does not rule out, offered one by one; returns how many were read.
// kth() gives the current k-th candidate (the radius search passes a
// constant one that rules nothing out). The run is read in one pass, as the
// warp search reads it: a point ruled out loses itself and is skipped,
// without leaving the rest of its cell (a cell holds a few points, and the
// hot loop stays one loop).
template <typename Scalar, class Kth, class Offer>
__device__ int64_t scan_cells(const GridView<Scalar>& grid, const Scalar q[3], uint32_t first_key,
                              uint32_t last_key, const CellScan<Scalar>& scan, Kth&& kth,
                              Offer&& offer) {
  using P = DevicePoint3<Scalar>;
  const uint32_t begin = __ldg(grid.starts + first_key), end = __ldg(grid.starts + last_key + 1);
  for (uint32_t p = begin; p < end; ++p) {
    const typename P::Stored v = P::load(grid.cell_points + p);
    const int32_t id = P::id(v);
    if (scan.rest_of_cell_loses(id, kth()) || scan.already_offered(id)) continue;
    offer(squared_distance3(q[0], q[1], q[2], P::x(v), P::y(v), P::z(v)), id);
  }
  return static_cast<int64_t>(end - begin);
}

// The indexed point `id` (input order).
template <typename Scalar>
__device__ void load_point(const GridView<Scalar>& grid, int32_t id, Scalar p[3]) {
  const Scalar* row = grid.points + 3 * static_cast<int64_t>(id);
  p[0] = __ldg(row), p[1] = __ldg(row + 1), p[2] = __ldg(row + 2);
}

// Whether q has no point in the 3 x 3 x 3 cells around its own
// (grid_layout.h, no_point_around).
template <typename Scalar>
__device__ bool isolated(const GridView<Scalar>& grid, const Scalar q[3]) {
  return no_point_around(grid.layout, q, [&](uint32_t key) { return __ldg(grid.starts + key); });
}

// Queries the thread search hands to the warp search (isolated ones, and
// those whose binned rows overflow): their positions, and how many (device
// counter, zeroed by query_keys_kernel).
struct HandedOver {
  uint32_t* queries;
  unsigned* count;
  __device__ void add(int64_t i) const { queries[atomicAdd(count, 1u)] = static_cast<uint32_t>(i); }
};

// Walks the shells of query q into `list` (of `take` entries); false when
// the walk gave up (a query away from the points, which the warp search
// answers).
template <typename Scalar, class List>
__device__ bool walk_query(const GridView<Scalar>& grid, const Scalar q[3], int take, List& list) {
  if (grid.n == 0) return true;
  const auto kth = [&] { return list.kth(); };
  const auto offer = [&](Scalar d, int32_t id) { list.offer(d, id); };
  return walk_shells(
             grid.layout, q, isolated_walk_runs(grid.n, take), kth,
             [&](uint32_t first, uint32_t last, const CellScan<Scalar>& scan) {
               return scan_cells(grid, q, first, last, scan, kth, offer);
             },
             [&](int32_t first, int32_t last, const ShellCube& cube) {
               for (int32_t id = first; id < last; ++id) {
                 Scalar p[3];
                 load_point(grid, id, p);
                 if (!cube.contains(grid.layout, p[0], p[1], p[2]))
                   offer(squared_distance3(q[0], q[1], q[2], p[0], p[1], p[2]), id);
               }
             }) != ShellWalk::Isolated;
}

// Query i's row of k from a list that sorts itself (RegisterList, HeapList),
// its own index (self_first + i, when self_first >= 0) left out.
template <typename Scalar, class List>
__device__ void write_row(List& list, int64_t i, int k, int64_t self_first, int32_t* indices,
                          Scalar* sq_distances) {
  const int32_t self = self_first >= 0 ? static_cast<int32_t>(self_first + i) : -1;
  int32_t* row = indices + i * k;
  Scalar* row_sq = sq_distances ? sq_distances + i * k : nullptr;
  int out = 0;
  list.for_each_sorted([&](int, Scalar d, int32_t index) {
    if (out < k && index != self) {
      row[out] = index == kNoIndex ? -1 : index;
      if (row_sq) row_sq[out] = d;
      ++out;
    }
  });
}

// A guess of query q's take-th squared distance, which places its binned
// row's bins (kth_bins.h; the guess moves no answer, only the cost): the
// points of the 3 x 3 x 3 cells around its own, grown to take as the radius
// to the power of the grid's split axes from the block's half width, beyond
// q's distance to the points' box.
template <typename Scalar>
__device__ Scalar kth_guess(const GridView<Scalar>& grid, const Scalar q[3], int take) {
  const BasicGridLayout<Scalar>& g = grid.layout;
  const int64_t around =
      points_around(g, q, [&](uint32_t key) { return __ldg(grid.starts + key); });
  double width = 0.0, outside = 0.0;
  int axes = 0;
  for (int a = 0; a < 3; ++a) {
    const double gap = static_cast<double>(g.box_gap(q[a], a));
    outside += gap * gap;
    if (g.cells[a] > 1) width = fmax(width, g.width[a]), ++axes;
  }
  const float ratio = static_cast<float>(take) / static_cast<float>(around > 0 ? around : 1);
  const double growth = axes > 0 ? exp2f(log2f(ratio) / static_cast<float>(axes)) : 1.0f;
  const double radius = sqrt(outside) + 1.5 * width * growth;
  return static_cast<Scalar>(radius * radius);
}

// One thread per query: the list (k + 1 entries when the own index is
// dropped) in registers (K > 0), a heap in shared memory (K == kSharedK), or
// a binned row (K == kBinnedK), which sort_binned_rows turns into the
// query's row afterwards.
constexpr int kSharedK = -1;
constexpr int kBinnedK = -2;

template <typename Scalar, int K>
__global__ void knn_thread_kernel(GridView<Scalar> grid, const Scalar* queries, int64_t count,
                                  const uint32_t* order, int k, int take, int64_t self_first,
                                  int32_t* indices, Scalar* sq_distances, HandedOver handed_over,
                                  BinnedRows<Scalar> rows) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= count) return;
  const int64_t i = order[t];
  Scalar q[3];
  load_query(queries, i, q);
  const auto answer = [&](auto& list) {
    if (walk_query(grid, q, take, list))
      write_row(list, i, k, self_first, indices, sq_distances);
    else
      handed_over.add(i);
  };
  // Raw bytes: an extern array has one type for every instantiation.
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  if constexpr (K > 0) {
    RegisterList<Scalar, K> list(take);
    answer(list);
  } else if constexpr (K == kSharedK) {
    SharedHeapList<Scalar> list = SharedHeapList<Scalar>::in_shared(shared_bytes, take);
    answer(list);
  } else {
    BinnedRowList<Scalar> list(rows.entries + t * rows.capacity, rows.capacity,
                               SharedBinCounters::in_shared(shared_bytes), take,
                               kth_guess(grid, q, take));
    if (walk_query(grid, q, take, list) && !list.overflowed()) {
      rows.ends[t] = list.end();
    } else {
      rows.ends[t] = BinnedRowEnd<Scalar>{0, kRowHandedOver};
      handed_over.add(i);
    }
  }
}

// Position of `self` in the warp's list, -1 when absent (indices are unique).
template <typename Scalar>
__device__ int position_in_list(const WarpList<Scalar>& list, int32_t self) {
  int found = -1;
  for (int j = list.lane; j < list.k; j += 32)
    if (list.list[j].index == self) found = j;
  for (int offset = 16; offset > 0; offset >>= 1)
    found = max(found, __shfl_xor_sync(kFullMask, found, offset));
  return found;
}

// The k nearest of query i by one warp (see knn_warp_kernel).
template <typename Scalar>
__device__ void warp_query(const GridView<Scalar>& grid, const Scalar* queries, int64_t i, int k,
                           int take, int64_t self_first, int32_t* indices, Scalar* sq_distances,
                           WarpList<Scalar> list, int lane) {
  using Neighbor = BasicNeighbor<Scalar>;
  using P = DevicePoint3<Scalar>;
  Scalar q[3];
  load_query(queries, i, q);
  // The scans take a run 32 points at a time across its cells; a point that
  // CellScan rules out against list.worst as it stands (stale is never too
  // small) is not offered.
  const auto scan_run = [&](uint32_t first, uint32_t last, const CellScan<Scalar>& scan) {
    const uint32_t begin = __ldg(grid.starts + first), end = __ldg(grid.starts + last + 1);
    for (uint32_t base = begin; base < end; base += 32) {
      Neighbor c{infinity<Scalar>(), kNoIndex};
      if (base + lane < end) {
        const typename P::Stored v = grid.cell_points[base + lane];
        const int32_t id = P::id(v);
        if (!scan.rest_of_cell_loses(id, list.worst) && !scan.already_offered(id))
          c = Neighbor{squared_distance3(q[0], q[1], q[2], P::x(v), P::y(v), P::z(v)), id};
      }
      list.offer(c);
    }
    return static_cast<int64_t>(end - begin);
  };
  if (grid.n > 0) {
    // The shell walk's tests read the k-th with every candidate merged: a
    // stale one would walk whole shells more.
    const ShellWalk walk = walk_shells(
        grid.layout, static_cast<const Scalar*>(q), isolated_walk_runs(grid.n, take),
        [&] {
          list.flush();
          return list.worst;
        },
        scan_run,
        [&](int32_t first, int32_t last, const ShellCube& cube) {
          for (int32_t base = first; base < last; base += 32) {
            Neighbor c{infinity<Scalar>(), kNoIndex};
            const int32_t id = base + lane;
            if (id < last) {
              Scalar p[3];
              load_point(grid, id, p);
              if (!cube.contains(grid.layout, p[0], p[1], p[2]))
                c = Neighbor{squared_distance3(q[0], q[1], q[2], p[0], p[1], p[2]), id};
            }
            list.offer(c);
          }
        });
    // Every cell as one run, bound 0 (a lower bound of every distance), into
    // an emptied list (the walk's points come again).
    if (walk == ShellWalk::Isolated) {
      list = WarpList<Scalar>(list.list, take, lane);
      scan_run(0, static_cast<uint32_t>(grid.layout.cell_count() - 1),
               CellScan<Scalar>{Scalar(0), 0});
    }
  }
  list.flush();
  const int32_t self = self_first >= 0 ? static_cast<int32_t>(self_first + i) : -1;
  const int skip = self >= 0 ? position_in_list(list, self) : -1;
  int32_t* row = indices + i * k;
  Scalar* row_sq = sq_distances ? sq_distances + i * k : nullptr;
  for (int j = lane; j < take; j += 32) {
    if (j == skip) continue;
    const int out = skip >= 0 && j > skip ? j - 1 : j;
    if (out >= k) continue;
    const Neighbor e = list.list[j];
    row[out] = e.index == kNoIndex ? -1 : e.index;
    if (row_sq) row_sq[out] = e.sq_distance;
  }
}

// One warp per query, the list in shared memory; the lanes take a cell's
// points 32 at a time. An isolated query scans every cell as one run. The
// warps stride over the queries order[0 .. count) (count: `count`, or
// *device_count when given: the queries the thread search handed over).
template <typename Scalar>
__global__ void knn_warp_kernel(GridView<Scalar> grid, const Scalar* queries, int64_t count,
                                const unsigned* device_count, const uint32_t* order, int k,
                                int take, int64_t self_first, int32_t* indices,
                                Scalar* sq_distances) {
  using Neighbor = BasicNeighbor<Scalar>;
  extern __shared__ __align__(16) unsigned char warp_bytes[];
  Neighbor* warp_storage = reinterpret_cast<Neighbor*>(warp_bytes);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t total = device_count ? static_cast<int64_t>(*device_count) : count;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + warp; t < total;
       t += warps)  // the whole warp takes the same t
    warp_query(
        grid, queries, order[t], k, take, self_first, indices, sq_distances,
        WarpList<Scalar>(warp_storage + static_cast<size_t>(warp) *
                                            (WarpList<Scalar>::bytes(take) / sizeof(Neighbor)),
                         take, lane),
        lane);
}

// One thread per query; the row (max_neighbors slots) is kept sorted by
// (distance, index) in place. Without a distance row the entries' distances
// are recomputed from the points in input order: the same function, the
// same bits.
template <typename Scalar>
__global__ void radius_kernel(GridView<Scalar> grid, const Scalar* queries, int64_t count,
                              const uint32_t* order, Scalar r2, int max_neighbors, int32_t* indices,
                              Scalar* sq_distances, int32_t* counts) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= count) return;
  const int64_t i = order[t];
  Scalar q[3];
  load_query(queries, i, q);
  int32_t* row = max_neighbors > 0 ? indices + i * max_neighbors : nullptr;
  Scalar* row_sq = sq_distances && max_neighbors > 0 ? sq_distances + i * max_neighbors : nullptr;
  const auto distance_at = [&](int j) {
    if (row_sq) return row_sq[j];
    const Scalar* p = grid.points + 3 * static_cast<int64_t>(row[j]);
    return squared_distance3(q[0], q[1], q[2], p[0], p[1], p[2]);
  };
  int32_t found = 0;
  if (grid.n > 0)
    walk_ball(grid.layout, static_cast<const Scalar*>(q), r2, [&](uint32_t first, uint32_t last) {
      const auto anything = [] { return BasicNeighbor<Scalar>{infinity<Scalar>(), kNoIndex}; };
      scan_cells(grid, q, first, last, CellScan<Scalar>{Scalar(0), 0}, anything,
                 [&](Scalar d, int32_t id) {
                   if (!(d <= r2)) return;
                   const int filled = found < max_neighbors ? found : max_neighbors;
                   ++found;
                   if (max_neighbors == 0) return;
                   if (filled == max_neighbors &&
                       !closer(d, id, distance_at(max_neighbors - 1), row[max_neighbors - 1]))
                     return;
                   int j = filled < max_neighbors ? filled : max_neighbors - 1;
                   for (; j > 0 && closer(d, id, distance_at(j - 1), row[j - 1]); --j) {
                     row[j] = row[j - 1];
                     if (row_sq) row_sq[j] = row_sq[j - 1];
                   }
                   row[j] = id;
                   if (row_sq) row_sq[j] = d;
                 });
    });
  for (int j = found < max_neighbors ? found : max_neighbors; j < max_neighbors; ++j) {
    row[j] = -1;
    if (row_sq) row_sq[j] = infinity<Scalar>();
  }
  if (counts) counts[i] = found;
}

// One thread per sampled query: whether it lies away from the points
// (grid_walk.h, away_from_points).
template <typename Scalar>
__global__ void isolated_queries_kernel(GridView<Scalar> grid, const Scalar* queries, int64_t count,
                                        int64_t sample, unsigned long long* isolated_count) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= sample) return;
  Scalar q[3];
  load_query(queries, t * count / sample, q);
  if (away_from_points(grid.layout, q, [&](uint32_t key) { return __ldg(grid.starts + key); }))
    atomicAdd(isolated_count, 1ull);
}

// The warp search over order[0 .. count), or over the queries the thread
// search handed over (device_count given: as many warps as keep the device
// busy, striding over them).
template <typename Scalar>
void launch_warp_knn(const GridView<Scalar>& grid, const Scalar* queries, int64_t count,
                     const unsigned* device_count, const uint32_t* order, int k, int take,
                     int64_t self_first, int32_t* indices, Scalar* sq_distances,
                     cudaStream_t stream) {
  const size_t warp_bytes = WarpList<Scalar>::bytes(take);
  const int warps =
      static_cast<int>(std::clamp<size_t>(kDefaultSharedBytes / warp_bytes, 1, Policy::kMaxWarps));
  const size_t shared = warp_bytes * static_cast<size_t>(warps);
  if (shared > kDefaultSharedBytes)
    allow_all_dynamic_shared(knn_warp_kernel<Scalar>, "cudaFuncSetAttribute (grid warp search)");
  const unsigned blocks = device_count
                              ? grid_stride_blocks(knn_warp_kernel<Scalar>, warps * 32, count * 32)
                              : grid_for(count, warps);
  knn_warp_kernel<Scalar><<<blocks, warps * 32, shared, stream>>>(
      grid, queries, count, device_count, order, k, take, self_first, indices, sq_distances);
  check_launch("grid knn (warp per query)");
}

// Threads a block of the thread search with heaps of `take` in shared memory
// gets (0: the lists do not fit; the warp search serves).
template <typename Scalar>
int thread_heap_block(int take) {
  return shared_heap_threads<Scalar>(knn_thread_kernel<Scalar, kSharedK>, take, Policy::kThreads,
                                     "cudaFuncSetAttribute (grid thread search)");
}

// The thread search with lists of K (kSharedK: heaps in shared memory,
// `threads` a block as thread_heap_block gave; kBinnedK: binned rows, which
// the rows' sort then turns into the output rows), then the warp search over
// the queries it handed over.
template <int K, typename Scalar>
void launch_thread_knn(const GridView<Scalar>& grid, const Scalar* queries, int64_t count,
                       const uint32_t* order, int k, int take, int64_t self_first, int32_t* indices,
                       Scalar* sq_distances, GridSearchScratch& s, cudaStream_t stream,
                       int threads = Policy::kThreads) {
  BinnedRows<Scalar> rows{nullptr, nullptr, 0};
  size_t shared = 0;
  if constexpr (K == kSharedK) shared = SharedHeapList<Scalar>::bytes(take, threads);
  if constexpr (K == kBinnedK) {
    using Entry = typename BinnedRows<Scalar>::Entry;
    rows.capacity = binned_row_capacity(take);
    const size_t queries_held = static_cast<size_t>(s.capacity());
    const size_t entries = queries_held * rows.capacity * sizeof(Entry);
    const size_t ends = queries_held * sizeof(BinnedRowEnd<Scalar>);
    if (s.binned_entries.size() < entries) s.binned_entries.allocate(entries);
    if (s.binned_ends.size() < ends) s.binned_ends.allocate(ends);
    rows.entries = reinterpret_cast<Entry*>(s.binned_entries.get());
    rows.ends = reinterpret_cast<BinnedRowEnd<Scalar>*>(s.binned_ends.get());
    shared = SharedBinCounters::bytes(threads);
  }
  const HandedOver handed_over{s.handed_over.get(), s.handed_over_count.get()};
  knn_thread_kernel<Scalar, K><<<grid_for(count, threads), threads, shared, stream>>>(
      grid, queries, count, order, k, take, self_first, indices, sq_distances, handed_over, rows);
  check_launch("grid knn (thread per query)");
  if constexpr (K == kBinnedK)
    sort_binned_rows(rows, order, count, k, take, self_first, indices, sq_distances, stream);
  launch_warp_knn(grid, queries, count, s.handed_over_count.get(), s.handed_over.get(), k, take,
                  self_first, indices, sq_distances, stream);
}

}  // namespace

template <typename Scalar>
int grid_max_list_k() {
  // The largest k whose WarpList::bytes(k) fits one block's shared memory.
  const int shared = device_limits().shared_bytes_optin;
  int k = shared / static_cast<int>(sizeof(BasicNeighbor<Scalar>));
  while (k > 0 && WarpList<Scalar>::bytes(k) > static_cast<size_t>(shared)) --k;
  return k;
}

GridSearchScratch::GridSearchScratch(int64_t capacity, int key_bits_) : key_bits(key_bits_) {
  const size_t c = static_cast<size_t>(capacity);
  for (int b = 0; b < 2; ++b) keys[b].allocate(c), order[b].allocate(c);
  handed_over.allocate(c);
  handed_over_count.allocate(1);
  cub::DoubleBuffer<uint32_t> k(nullptr, nullptr), o(nullptr, nullptr);
  check(cub::DeviceRadixSort::SortPairs(nullptr, cub_bytes, k, o, static_cast<int>(capacity), 0,
                                        key_bits),
        "grid query sort (size)");
  cub_temp.allocate(checked_cub_temp(cub_bytes, cub_temp_bytes(capacity)));
  capacity_ = capacity;
}

template <typename Scalar>
void grid_knn(const GridView<Scalar>& grid, const Scalar* queries, int64_t count, int k,
              int64_t self_first, int32_t* indices, Scalar* sq_distances,
              GridSearchScratch& scratch, cudaStream_t stream) {
  if (count <= 0) return;
  const uint32_t* order = queries_in_cell_order(grid, queries, count, scratch, stream);
  const int take = self_first >= 0 ? k + 1 : k;
  const auto thread = [&](auto tag) {
    launch_thread_knn<decltype(tag)::value>(grid, queries, count, order, k, take, self_first,
                                            indices, sq_distances, scratch, stream);
  };
  if (take <= 1) return thread(std::integral_constant<int, 1>());
  if (take <= 4) return thread(std::integral_constant<int, 4>());
  if (take <= 8) return thread(std::integral_constant<int, 8>());
  if (take <= kGridRegisterK) return thread(std::integral_constant<int, kGridRegisterK>());
  if (grid_lists_are_binned(take)) return thread(std::integral_constant<int, kBinnedK>());
  if (take <= kGridMaxHeapTake) {
    if (const int threads = thread_heap_block<Scalar>(take); threads > 0)
      return launch_thread_knn<kSharedK>(grid, queries, count, order, k, take, self_first, indices,
                                         sq_distances, scratch, stream, threads);
  }
  launch_warp_knn(grid, queries, count, nullptr, order, k, take, self_first, indices, sq_distances,
                  stream);
}

template <typename Scalar>
void grid_radius(const GridView<Scalar>& grid, const Scalar* queries, int64_t count, Scalar r2,
                 int max_neighbors, int32_t* indices, Scalar* sq_distances, int32_t* counts,
                 GridSearchScratch& scratch, cudaStream_t stream) {
  if (count <= 0) return;
  const uint32_t* order = queries_in_cell_order(grid, queries, count, scratch, stream);
  radius_kernel<Scalar><<<grid_for(count, Policy::kThreads), Policy::kThreads, 0, stream>>>(
      grid, queries, count, order, r2, max_neighbors, indices, sq_distances, counts);
  check_launch("grid radius");
}

template <typename Scalar>
int64_t count_isolated_queries(const GridView<Scalar>& grid, const Scalar* queries, int64_t count,
                               int64_t sample, cudaStream_t stream) {
  if (sample <= 0 || grid.n == 0) return 0;
  unsigned long long isolated = 0;
  DeviceBuffer<unsigned long long> device_isolated(1);
  check(cudaMemsetAsync(device_isolated.get(), 0, sizeof isolated, stream), "grid placement");
  isolated_queries_kernel<Scalar>
      <<<grid_for(sample, Policy::kThreads), Policy::kThreads, 0, stream>>>(
          grid, queries, count, sample, device_isolated.get());
  check_launch("grid placement");
  check(cudaMemcpyAsync(&isolated, device_isolated.get(), sizeof isolated, cudaMemcpyDeviceToHost,
                        stream),
        "grid placement");
  check(cudaStreamSynchronize(stream), "grid placement");
  return static_cast<int64_t>(isolated);
}

template int grid_max_list_k<float>();
template int grid_max_list_k<double>();
template void grid_knn<float>(const GridView<float>&, const float*, int64_t, int, int64_t, int32_t*,
                              float*, GridSearchScratch&, cudaStream_t);
template void grid_knn<double>(const GridView<double>&, const double*, int64_t, int, int64_t,
                               int32_t*, double*, GridSearchScratch&, cudaStream_t);
template int64_t count_isolated_queries<float>(const GridView<float>&, const float*, int64_t,
                                               int64_t, cudaStream_t);
template int64_t count_isolated_queries<double>(const GridView<double>&, const double*, int64_t,
                                                int64_t, cudaStream_t);
template void grid_radius<float>(const GridView<float>&, const float*, int64_t, float, int,
                                 int32_t*, float*, int32_t*, GridSearchScratch&, cudaStream_t);
template void grid_radius<double>(const GridView<double>&, const double*, int64_t, double, int,
                                  int32_t*, double*, int32_t*, GridSearchScratch&, cudaStream_t);

}  // namespace cuda
}  // namespace knn
