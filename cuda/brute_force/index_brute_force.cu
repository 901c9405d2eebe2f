// The CUDA brute-force index: kernels of the tiled search (the plan is
// described in index_brute_force.cuh) and the IndexEngine over them.
#include <algorithm>
#include <memory>

#include "../../common/float_math.h"
#include "../../common/static_dim.h"
#include "../core/knn_lists.cuh"
#include "../core/launch_policy.h"
#include "../core/pinned_pool.h"
#include "../core/query_chunks.cuh"
#include "../core/resident_rows_engine.cuh"
#include "../core/warp_list.cuh"
#include "../cuda_engine.h"
#include "../cuda_index.h"
#include "../index_memory_model.h"
#include "index_brute_force.cuh"

namespace knn {
namespace cuda {
namespace {

using index_memory::brute_force_list_k;
using index_memory::brute_force_scratch_fixed;
using index_memory::brute_force_scratch_per_query;
using index_memory::brute_force_splits;
using index_memory::kBruteRegisterK;

// One thread per query, 128 queries per block; the points pass through a
// 16 KB shared tile (as many whole rows as fit: 4096 floats or 2048
// doubles), loaded coalesced because a run of rows is one contiguous run of
// scalars.
using Policy = BruteForcePolicy;
constexpr int kTileBytes = 16384;
template <typename Scalar>
constexpr int kTileScalars = kTileBytes / static_cast<int>(sizeof(Scalar));
constexpr int kDistanceBatch = 4;
// For a dimension known only at run time, batches of 16: each batch reads
// the query once from global memory (chunked_distances), and those reads,
// one row per lane, cost the cache 32 times an ordinary load.
constexpr int kChunkedBatch = 16;

// Everything a scan kernel needs (passed by value).
template <typename Scalar>
struct ScanArgs {
  using Neighbor = BasicNeighbor<Scalar>;
  BruteForcePoints<Scalar> points;
  const Scalar* queries;
  int64_t m;
  int list_k;
  Scalar max_sq;
  int64_t splits, split_size;  // part s covers [s * split_size, (s + 1) * split_size) of n
  // splits == 1: the rows themselves
  BruteForceOutputs<Scalar> out;
  int row_width;
  bool exclude_self;
  int64_t self_first;
  // splits > 1: each part's sorted list (list_k entries) and count
  Neighbor* part_lists;
  int32_t* part_counts;
};

struct PartRange {
  int64_t begin, end;
};

template <typename Scalar>
__device__ PartRange part_range(const ScanArgs<Scalar>& a, int64_t part) {
  const int64_t begin = min(part * a.split_size, a.points.n);
  return PartRange{begin, min(begin + a.split_size, a.points.n)};
}

template <typename Scalar>
__device__ int32_t self_index(const ScanArgs<Scalar>& a, int64_t query) {
  return a.exclude_self ? static_cast<int32_t>(a.self_first + query) : -1;
}

template <typename Scalar>
__device__ void store(int32_t* indices, Scalar* sq_distances, int64_t slot,
                      const BasicNeighbor<Scalar>& e) {
  if (indices) indices[slot] = e.index == kNoIndex ? -1 : e.index;
  if (sq_distances) sq_distances[slot] = e.sq_distance;
}

// Writes slots first, first + step, ... of a row from a sorted list in
// memory: the list without `skip` (the query's own point, -1 for none), then
// -1 / +infinity. The point's own entry is (0, skip) when present: a point is
// at distance exactly 0 from itself.
template <typename Scalar>
__device__ void write_row_from_list(const BasicNeighbor<Scalar>* list, int list_k, int32_t skip,
                                    int32_t* indices, Scalar* sq_distances, int width, int first,
                                    int step) {
  using Neighbor = BasicNeighbor<Scalar>;
  int self_at = list_k;
  if (skip >= 0) {
    const int at = rank_in(list, list_k, Neighbor{Scalar(0), skip});
    if (at < list_k && list[at].index == skip) self_at = at;
  }
  for (int o = first; o < width; o += step) {
    const int j = o + (o >= self_at ? 1 : 0);
    store(indices, sq_distances, o, j < list_k ? list[j] : Neighbor{infinity<Scalar>(), kNoIndex});
  }
}

// Writes a row from a list held in registers, entry by entry.
template <typename Scalar>
struct RowWriter {
  int32_t* indices;
  Scalar* sq_distances;
  int width;
  int32_t skip;
  int written = 0;

  __device__ void put(Scalar d, int32_t i) {
    if (i == skip || written == width) return;
    store(indices, sq_distances, written++, BasicNeighbor<Scalar>{d, i});
  }
  __device__ void finish() {
    while (written < width)
      store(indices, sq_distances, written++, BasicNeighbor<Scalar>{infinity<Scalar>(), kNoIndex});
  }
};

// The list of a counting-only call (radius with max_neighbors 0).
template <typename Scalar>
struct NoList {
  __device__ explicit NoList(int) {}
  __device__ void offer(Scalar, int32_t) {}
};

template <typename Scalar, int K>
__device__ void emit(const RegisterList<Scalar, K>& list, const ScanArgs<Scalar>& a, int64_t query,
                     int64_t part) {
  if (a.splits == 1) {
    const int64_t row = query * a.row_width;
    RowWriter<Scalar> w{a.out.indices ? a.out.indices + row : nullptr,
                        a.out.sq_distances ? a.out.sq_distances + row : nullptr, a.row_width,
                        self_index(a, query)};
    list.for_each_sorted([&](int, Scalar d, int32_t i) { w.put(d, i); });
    w.finish();
    return;
  }
  BasicNeighbor<Scalar>* out = a.part_lists + (query * a.splits + part) * a.list_k;
  list.for_each_sorted([&](int j, Scalar d, int32_t i) { out[j] = BasicNeighbor<Scalar>{d, i}; });
}

// No list (no points, or counting only): unsplit rows are all missing.
template <typename Scalar>
__device__ void emit(const NoList<Scalar>&, const ScanArgs<Scalar>& a, int64_t query, int64_t) {
  if (a.splits > 1) return;
  const int64_t row = query * a.row_width;
  RowWriter<Scalar> w{a.out.indices ? a.out.indices + row : nullptr,
                      a.out.sq_distances ? a.out.sq_distances + row : nullptr, a.row_width, -1};
  w.finish();
}

template <typename Scalar>
__device__ void emit_count(const ScanArgs<Scalar>& a, int64_t query, int64_t part, int32_t count) {
  if (a.splits == 1) {
    if (a.out.counts) a.out.counts[query] = count;
  } else {
    a.part_counts[query * a.splits + part] = count;
  }
}

// Squared distances from a query (its row q_row) to B consecutive rows of
// `rows`, for a dimension known only at run time: the query passes through
// registers kQueryChunk coordinates at a time and each chunk serves all B
// rows, so the query is read once per B rows instead of once per row (H100,
// n = m, k = 5, with B = kChunkedBatch: 20-D 2^20 17.4 -> 4.5 s, 32-D 2^18
// 2.79 -> 0.85 s). Each sum still adds its terms in dimension order from +0,
// which equals squared_distance bit for bit (+0 + x == x for every square x).
constexpr int kQueryChunk = 16;
template <int B, typename Scalar>
__device__ void chunked_distances(const Scalar* q_row, const Scalar* rows, int dim,
                                  Scalar (&d)[B]) {
#pragma unroll
  for (int u = 0; u < B; ++u) d[u] = Scalar(0);
  int c = 0;
  for (; c + kQueryChunk <= dim; c += kQueryChunk) {
    Scalar q[kQueryChunk];
#pragma unroll
    for (int e = 0; e < kQueryChunk; ++e) q[e] = q_row[c + e];
#pragma unroll
    for (int e = 0; e < kQueryChunk; ++e)
#pragma unroll
      for (int u = 0; u < B; ++u)
        d[u] = add_rn(d[u], square_of_difference(q[e], rows[u * dim + c + e]));
  }
  for (; c < dim; ++c) {
    const Scalar q = q_row[c];
#pragma unroll
    for (int u = 0; u < B; ++u) d[u] = add_rn(d[u], square_of_difference(q, rows[u * dim + c]));
  }
}

// One thread per query against one part of the points (blockIdx.y), the
// part streamed through the shared tile. DIM > 0: the dimension at compile
// time, the query in registers; DIM == 0: any dimension, the query read in
// chunks (chunked_distances).
template <typename Scalar, int DIM, class List>
__global__ void __launch_bounds__(Policy::kThreads) scan_thread_per_query(ScanArgs<Scalar> a) {
  constexpr int kTile = kTileScalars<Scalar>;
  __shared__ __align__(16) Scalar tile[kTile];
  const int dim = DIM > 0 ? DIM : a.points.dim;
  const int64_t query = blockIdx.x * int64_t{Policy::kThreads} + threadIdx.x;
  const bool active = query < a.m;
  const Scalar* q_row = a.queries + (active ? query : 0) * dim;
  Scalar q[DIM > 0 ? DIM : 1];
  if (DIM > 0) {
#pragma unroll
    for (int d = 0; d < (DIM > 0 ? DIM : 1); ++d) q[d] = active ? q_row[d] : Scalar(0);
  }
  const PartRange range = part_range(a, blockIdx.y);
  constexpr int kBatch = DIM > 0 ? kDistanceBatch : kChunkedBatch;
  // Whole batches per tile where a batch fits, so that only a part's last
  // tile ends in single rows.
  const int rows_per_tile = kTile / dim >= kBatch ? kTile / dim / kBatch * kBatch : kTile / dim;
  List list(a.list_k);
  int32_t count = 0;
  for (int64_t t0 = range.begin; t0 < range.end; t0 += rows_per_tile) {
    const int rows = static_cast<int>(min(int64_t{rows_per_tile}, range.end - t0));
    const Scalar* src = a.points.rows + t0 * dim;
    __syncthreads();  // the previous tile is no longer read
    for (int i = threadIdx.x; i < rows * dim; i += Policy::kThreads) tile[i] = src[i];
    __syncthreads();
    if (!active) continue;
    auto distance = [&](int j) {
      return DIM > 0 ? squared_distance(q, tile + j * DIM, DIM)
                     : squared_distance(q_row, tile + j * dim, dim);
    };
    auto consider = [&](Scalar d, int j) {
      if (d <= a.max_sq) {
        ++count;
        list.offer(d, static_cast<int32_t>(t0 + j));
      }
    };
    // A batch of distances before any comparison: their chains of
    // dependent adds interleave instead of waiting on each other's branches.
    int j = 0;
    for (; j + kBatch <= rows; j += kBatch) {
      Scalar d[kBatch];
      if (DIM > 0) {
#pragma unroll
        for (int u = 0; u < kBatch; ++u) d[u] = distance(j + u);
      } else {
        chunked_distances(q_row, tile + j * dim, dim, d);
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) consider(d[u], j + u);
    }
    for (; j < rows; ++j) consider(distance(j), j);
  }
  if (!active) return;
  emit(list, a, query, blockIdx.y);
  emit_count(a, query, blockIdx.y, count);
}

// One warp per query against one part of the points (blockIdx.y): each lane
// takes every 32nd point, and the warp merges the batch into its shared list.
template <typename Scalar>
__global__ void scan_warp_per_query(ScanArgs<Scalar> a) {
  using Neighbor = BasicNeighbor<Scalar>;
  const int lane = threadIdx.x % 32;
  const int64_t query = grid_warp();
  if (query >= a.m) return;  // the whole warp: no block-wide barrier below
  const int dim = a.points.dim;
  WarpList<Scalar> list(warp_list_storage<Scalar>(a.list_k), a.list_k, lane);
  const Scalar* q_row = a.queries + query * dim;
  const PartRange range = part_range(a, blockIdx.y);
  int32_t count = 0;
  for (int64_t base = range.begin; base < range.end; base += 32) {
    const int64_t j = base + lane;
    Neighbor c{infinity<Scalar>(), kNoIndex};
    if (j < range.end) {
      const Scalar d = squared_distance(q_row, a.points.rows + j * dim, dim);
      if (d <= a.max_sq) {
        ++count;
        c = Neighbor{d, static_cast<int32_t>(j)};
      }
    }
    list.offer(c);
  }
  list.flush();
  for (int offset = 16; offset > 0; offset >>= 1)
    count += __shfl_down_sync(kFullMask, count, offset);
  if (a.splits == 1) {
    const int64_t row = query * a.row_width;
    write_row_from_list(
        list.list, a.list_k, self_index(a, query), a.out.indices ? a.out.indices + row : nullptr,
        a.out.sq_distances ? a.out.sq_distances + row : nullptr, a.row_width, lane, 32);
  } else {
    Neighbor* out = a.part_lists + (query * a.splits + blockIdx.y) * a.list_k;
    for (int j = lane; j < a.list_k; j += 32) out[j] = list.list[j];
  }
  if (lane == 0) emit_count(a, query, blockIdx.y, count);
}

// One round of the pairwise merge: lists 2p and 2p+1 of each query (`lists`
// per query in `in`) become list p of `out` (ceil(lists / 2) per query). Each
// entry's place is its position in its own list plus the entries of the
// other list closer than it; real entries are unique, so places are too.
// Empty slots, all equal, are placed from the first list only: they fill
// exactly the places after both lists' real entries.
template <typename Scalar>
__global__ void merge_pairs(const BasicNeighbor<Scalar>* in, int64_t lists, int list_k, int64_t m,
                            BasicNeighbor<Scalar>* out) {
  using Neighbor = BasicNeighbor<Scalar>;
  const int64_t pairs = (lists + 1) / 2;
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (t >= m * pairs * 2 * list_k) return;
  const int j = static_cast<int>(t % list_k);
  const int side = static_cast<int>(t / list_k % 2);
  const int64_t pair = t / (2 * list_k) % pairs;
  const int64_t query = t / (2 * list_k * pairs);
  const int64_t own_list = 2 * pair + side, other_list = 2 * pair + 1 - side;
  Neighbor* dst = out + (query * pairs + pair) * list_k;
  if (own_list >= lists) return;
  const Neighbor e = in[(query * lists + own_list) * list_k + j];
  if (other_list >= lists) {
    dst[j] = e;
    return;
  }
  if (side == 1 && e.index == kNoIndex) return;
  const int place = j + rank_in(in + (query * lists + other_list) * list_k, list_k, e);
  if (place < list_k) dst[place] = e;
}

// The rows of a split search from its merged list (one per query), and the
// counts summed over the parts; one thread per row slot.
template <typename Scalar>
__global__ void write_merged_rows(const BasicNeighbor<Scalar>* merged, const int32_t* part_counts,
                                  int64_t splits, int list_k, int64_t m, ScanArgs<Scalar> a) {
  const int slots = max(a.row_width, 1);
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (t >= m * slots) return;
  const int64_t query = t / slots;
  const int o = static_cast<int>(t % slots);
  if (a.row_width > 0) {
    const int64_t row = query * a.row_width;
    write_row_from_list(merged + query * list_k, list_k, self_index(a, query),
                        a.out.indices ? a.out.indices + row : nullptr,
                        a.out.sq_distances ? a.out.sq_distances + row : nullptr, a.row_width, o,
                        a.row_width);
  }
  if (o == 0 && a.out.counts) {
    int32_t total = 0;
    for (int64_t s = 0; s < splits; ++s) total += part_counts[query * splits + s];
    a.out.counts[query] = total;
  }
}

template <int DIM, class List, typename Scalar>
void launch_thread_scan(const ScanArgs<Scalar>& a, cudaStream_t stream) {
  const dim3 grid(grid_for(a.m, Policy::kThreads), static_cast<unsigned>(a.splits));
  scan_thread_per_query<Scalar, DIM, List><<<grid, Policy::kThreads, 0, stream>>>(a);
  check_launch("scan_thread_per_query");
}

template <class List, typename Scalar>
void launch_thread_scan_for_dim(const ScanArgs<Scalar>& a, cudaStream_t stream) {
  with_static_dim(a.points.dim, [&](auto static_dim) {
    launch_thread_scan<decltype(static_dim)::value, List>(a, stream);
  });
}

template <typename Scalar>
void launch_warp_scan(const ScanArgs<Scalar>& a, cudaStream_t stream) {
  const size_t shared_limit = allow_all_dynamic_shared(
      scan_warp_per_query<Scalar>, "cudaFuncSetAttribute (brute-force warp scan)");
  const size_t per_warp = WarpList<Scalar>::bytes(a.list_k);
  const int warps = static_cast<int>(std::min<size_t>(Policy::kMaxWarps, shared_limit / per_warp));
  if (warps == 0)
    fail(KNN_ERR_UNSUPPORTED,
         format("this GPU's shared memory cannot hold a k-list of %d neighbours", a.list_k));
  const size_t shared = per_warp * warps;
  const dim3 grid(grid_for(a.m, warps), static_cast<unsigned>(a.splits));
  scan_warp_per_query<Scalar><<<grid, 32 * warps, shared, stream>>>(a);
  check_launch("scan_warp_per_query");
}

template <typename Scalar>
void launch_scan(const ScanArgs<Scalar>& a, cudaStream_t stream) {
  if (a.list_k == 0) return launch_thread_scan_for_dim<NoList<Scalar>>(a, stream);
  if (a.list_k <= 1) return launch_thread_scan_for_dim<RegisterList<Scalar, 1>>(a, stream);
  if (a.list_k <= 4) return launch_thread_scan_for_dim<RegisterList<Scalar, 4>>(a, stream);
  if (a.list_k <= 8) return launch_thread_scan_for_dim<RegisterList<Scalar, 8>>(a, stream);
  if (a.list_k <= kBruteRegisterK)
    return launch_thread_scan_for_dim<RegisterList<Scalar, kBruteRegisterK>>(a, stream);
  launch_warp_scan(a, stream);
}

unsigned merge_blocks(int64_t threads) { return grid_for(threads, Policy::kMergeThreads); }

}  // namespace

template <typename Scalar>
BruteForceScratch<Scalar>::BruteForceScratch(int64_t queries, int64_t splits, int list_k)
    : queries_(queries), splits_(splits), list_k_(list_k) {
  if (splits <= 1 || queries <= 0) return;
  const size_t uq = static_cast<size_t>(queries), us = static_cast<size_t>(splits);
  lists_.allocate(uq * us * static_cast<size_t>(list_k));
  merged_.allocate(uq * ((us + 1) / 2) * static_cast<size_t>(list_k));
  counts_.allocate(uq * us);
}

template <typename Scalar>
void brute_force_search(const BruteForcePoints<Scalar>& points, const Scalar* queries, int64_t m,
                        const BruteForceRequest<Scalar>& request,
                        const BruteForceOutputs<Scalar>& out, int64_t splits,
                        BruteForceScratch<Scalar>& scratch, cudaStream_t stream) {
  if (m <= 0) return;
  const int list_k = brute_force_list_k(request.row_width, request.exclude_self, points.n);
  if (list_k > kMaxWarpK)
    fail(KNN_ERR_UNSUPPORTED,
         format("the CUDA brute force keeps at most %d neighbours per query; this call needs %d "
                "(use the kd-tree or the OpenMP backend)",
                kMaxWarpK, list_k));
  if (splits > 1 &&
      (scratch.queries() < m || scratch.splits() != splits || scratch.list_k() != list_k))
    fail(KNN_ERR_INTERNAL, "brute-force scratch made for another plan");
  ScanArgs<Scalar> a{};
  a.points = points;
  a.queries = queries;
  a.m = m;
  a.list_k = list_k;
  a.max_sq = request.max_sq;
  a.splits = splits;
  a.split_size = points.n > 0 ? (points.n + splits - 1) / splits : 0;
  a.out = out;
  a.row_width = request.row_width;
  a.exclude_self = request.exclude_self;
  a.self_first = request.self_first;
  a.part_lists = scratch.lists();
  a.part_counts = scratch.counts();
  launch_scan(a, stream);
  if (splits == 1) return;
  // log2(splits) rounds, alternating between the two list buffers.
  BasicNeighbor<Scalar>* from = scratch.lists();
  BasicNeighbor<Scalar>* to = scratch.merged();
  int64_t lists = splits;
  if (list_k > 0) {
    while (lists > 1) {
      const int64_t pairs = (lists + 1) / 2;
      merge_pairs<Scalar>
          <<<merge_blocks(m * pairs * 2 * list_k), Policy::kMergeThreads, 0, stream>>>(
              from, lists, list_k, m, to);
      check_launch("merge_pairs");
      std::swap(from, to);
      lists = pairs;
    }
  }
  write_merged_rows<Scalar>
      <<<merge_blocks(m * std::max(request.row_width, 1)), Policy::kMergeThreads, 0, stream>>>(
          from, scratch.counts(), splits, list_k, m, a);
  check_launch("write_merged_rows");
}

template class BruteForceScratch<float>;
template class BruteForceScratch<double>;
template void brute_force_search<float>(const BruteForcePoints<float>&, const float*, int64_t,
                                        const BruteForceRequest<float>&,
                                        const BruteForceOutputs<float>&, int64_t,
                                        BruteForceScratch<float>&, cudaStream_t);
template void brute_force_search<double>(const BruteForcePoints<double>&, const double*, int64_t,
                                         const BruteForceRequest<double>&,
                                         const BruteForceOutputs<double>&, int64_t,
                                         BruteForceScratch<double>&, cudaStream_t);

namespace {

// The engine: the points resident on the device, each call run over the
// shared query pipeline with a split scratch per pipeline slot.
template <typename Scalar>
class BruteForceIndex final : public ResidentRowsEngine<Scalar> {
 public:
  BruteForceIndex(const Scalar* points, int64_t n, int dim, const IndexParams& params)
      : ResidentRowsEngine<Scalar>(KNN_STRUCTURE_BRUTE_FORCE, n, dim), n_(n), dim_(dim) {
    require_build_within_limit(device_budget(params.device_memory_limit),
                               index_memory::brute_force_build_bytes(n, dim, sizeof(Scalar)),
                               format("building a CUDA brute force of %lld points in %d-D",
                                      static_cast<long long>(n), dim));
    const size_t count = static_cast<size_t>(n) * static_cast<size_t>(dim);
    points_.allocate(count);
    if (count == 0) return;
    Stream stream;
    copy_points_in(points_.get(), points, count * sizeof(Scalar), params.points_on_device,
                   stream.get());
  }

  void knn(const Scalar* queries, int64_t m, int k, int32_t* indices, Scalar* sq_distances,
           const CallParams& call) const override {
    BruteForceRequest<Scalar> request;
    request.row_width = k;
    request.max_sq = infinity<Scalar>();
    run(queries, m, request, indices, sq_distances, nullptr, call);
  }

  void knn_self(int k, bool exclude_self, int32_t* indices, Scalar* sq_distances,
                const CallParams& call) const override {
    BruteForceRequest<Scalar> request;
    request.row_width = k;
    request.max_sq = infinity<Scalar>();
    request.exclude_self = exclude_self;
    CallParams self_call = call;
    self_call.queries_on_device = true;
    run(points_.get(), n_, request, indices, sq_distances, nullptr, self_call);
  }

  void radius(const Scalar* queries, int64_t m, Scalar radius, int max_neighbors, int32_t* indices,
              Scalar* sq_distances, int32_t* counts, const CallParams& call) const override {
    BruteForceRequest<Scalar> request;
    request.row_width = max_neighbors;
    // The contract's bound: radius * radius rounded to the scalar type (one
    // operation, so no contraction can change it).
    request.max_sq = radius * radius;
    run(queries, m, request, indices, sq_distances, counts, call);
  }

 private:
  const Scalar* resident_rows() const override { return points_.get(); }

  void run(const Scalar* queries, int64_t m, const BruteForceRequest<Scalar>& base,
           int32_t* indices, Scalar* sq_distances, int32_t* counts, const CallParams& call) const {
    if (m <= 0) return;
    const int list_k = brute_force_list_k(base.row_width, base.exclude_self, n_);
    // One plan for every chunk, from the largest chunk the pipeline runs and
    // the threads this device wants busy.
    const int64_t splits =
        brute_force_splits(std::min(m, kMaxChunkQueries), n_, list_k, latency_hiding_threads());
    const bool want_indices = indices != nullptr && base.row_width > 0;
    const bool want_sq = sq_distances != nullptr && base.row_width > 0;
    const size_t per_query =
        pipeline_bytes_per_query(dim_, base.row_width, want_indices, want_sq, counts != nullptr,
                                 call, sizeof(Scalar)) +
        kPipelineSlots * brute_force_scratch_per_query(splits, list_k, sizeof(Scalar));
    const size_t fixed =
        pipeline_fixed_bytes(call) + kPipelineSlots * brute_force_scratch_fixed(splits);
    const int64_t chunk = std::min(m, chunk_queries_for(per_query, fixed, call));
    BruteForceScratch<Scalar> scratch[kPipelineSlots];
    const BruteForcePoints<Scalar> points{points_.get(), n_, dim_};
    for_each_query_chunk<Scalar>(
        queries, m, dim_, base.row_width, indices, sq_distances, counts, call, chunk,
        [&](const QueryChunk<Scalar>& c, cudaStream_t stream) {
          BruteForceScratch<Scalar>& s = scratch[c.slot];
          if (splits > 1 && s.queries() == 0) s = BruteForceScratch<Scalar>(chunk, splits, list_k);
          BruteForceRequest<Scalar> request = base;
          request.self_first = c.first;
          brute_force_search(points, c.queries, c.count, request,
                             BruteForceOutputs<Scalar>{c.indices, c.sq_distances, c.counts}, splits,
                             s, stream);
        });
  }

  DeviceBuffer<Scalar> points_;
  int64_t n_;
  int dim_;
};

}  // namespace

template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> build_brute_force_index(const Scalar* points, int64_t n,
                                                                  int dim,
                                                                  const IndexParams& params) {
  return std::make_unique<BruteForceIndex<Scalar>>(points, n, dim, params);
}

KNN_INSTANTIATE_BUILDER(KNN_BRUTE_FORCE_INDEX_BUILDER);

}  // namespace cuda
}  // namespace knn
