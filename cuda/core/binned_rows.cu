// The sort of the binned rows (binned_rows.cuh): one warp a row. The warp
// gathers the row's entries below its limit into shared memory (a ballot
// gives each lane its place), loads them back as P entries a lane (entry e
// of lane l is position l P + e, P the smallest power of two that holds
// them and the row), sorts the 32 P entries with a bitonic network, and
// writes the first `take` of them. Templates over the scalar, instantiated
// for both.
#include <algorithm>
#include <climits>

#include "binned_rows.cuh"
#include "cuda_support.h"
#include "launch_policy.h"
#include "memory_model.h"
#include "warp_list.cuh"

namespace knn {
namespace cuda {
namespace {

__device__ uint64_t shuffle_xor(uint64_t e, int mask) {
  return __shfl_xor_sync(kFullMask, e, mask);
}
__device__ BasicNeighbor<double> shuffle_xor(const BasicNeighbor<double>& e, int mask) {
  return {__shfl_xor_sync(kFullMask, e.sq_distance, mask),
          __shfl_xor_sync(kFullMask, e.index, mask)};
}

// Sorts the warp's 32 P entries ascending, position lane * P + e in v[e]:
// strides below P pair a lane's own registers, longer ones lane with lane by
// shuffles (a third fewer shuffles than positions e * 32 + lane, whose
// strides below 32 all cross lanes).
template <typename Scalar, int P>
__device__ void sort_across_warp(typename NeighborKey<Scalar>::Type (&v)[P], int lane) {
  using Key = NeighborKey<Scalar>;
  using Entry = typename Key::Type;
#pragma unroll
  for (int size = 2; size <= 32 * P; size *= 2) {
#pragma unroll
    for (int stride = size / 2; stride > 0; stride /= 2) {
      if (stride < P) {
#pragma unroll
        for (int e = 0; e < P; ++e) {
          if ((e & stride) != 0) continue;
          const bool ascending = ((lane * P + e) & size) == 0;
          Entry& low = v[e];
          Entry& high = v[e + stride];
          if (ascending ? Key::before(high, low) : Key::before(low, high)) {
            const Entry t = low;
            low = high;
            high = t;
          }
        }
      } else {
        const int lanes_apart = stride / P;
        const bool lower = (lane & lanes_apart) == 0;
#pragma unroll
        for (int e = 0; e < P; ++e) {
          const Entry other = shuffle_xor(v[e], lanes_apart);
          const bool ascending = ((lane * P + e) & size) == 0;
          // The lower position of an ascending pair keeps the smaller entry.
          if (lower == ascending ? Key::before(other, v[e]) : Key::before(v[e], other))
            v[e] = other;
        }
      }
    }
  }
}

template <typename Scalar>
struct SortArgs {
  BinnedRows<Scalar> rows;
  const uint32_t* order;
  int64_t count;
  int k, take;
  int64_t self_first;
  int32_t* indices;
  Scalar* sq_distances;
};

// Sorts the `kept` entries of `staged` (kept and take at most 32 P) and
// writes query i's row.
template <typename Scalar, int P>
__device__ void sort_and_write(const SortArgs<Scalar>& a,
                               const typename NeighborKey<Scalar>::Type* staged, int kept,
                               int64_t i, int lane) {
  using Key = NeighborKey<Scalar>;
  typename Key::Type v[P];
  const typename Key::Type none = Key::make(infinity<Scalar>(), kNoIndex);
#pragma unroll
  for (int e = 0; e < P; ++e) v[e] = lane * P + e < kept ? staged[lane * P + e] : none;
  sort_across_warp<Scalar, P>(v, lane);
  // The own index's position among the first take (INT_MAX: not there;
  // indices are unique, so at most one lane and slot hold it).
  const int32_t self = a.self_first >= 0 ? static_cast<int32_t>(a.self_first + i) : -1;
  int self_at = INT_MAX;
  if (self >= 0) {
#pragma unroll
    for (int e = 0; e < P; ++e) {
      const unsigned at =
          __ballot_sync(kFullMask, Key::index(v[e]) == self && lane * P + e < a.take);
      if (at != 0) self_at = (__ffs(at) - 1) * P + e;
    }
  }
  int32_t* row = a.indices + i * a.k;
  Scalar* row_sq = a.sq_distances ? a.sq_distances + i * a.k : nullptr;
#pragma unroll
  for (int e = 0; e < P; ++e) {
    const int x = lane * P + e;
    if (x >= a.take || x == self_at) continue;
    const int out = x > self_at ? x - 1 : x;
    if (out >= a.k) continue;
    const int32_t index = Key::index(v[e]);
    row[out] = index == kNoIndex ? -1 : index;
    if (row_sq) row_sq[out] = Key::distance(v[e]);
  }
}

template <typename Scalar>
__global__ void sort_binned_rows_kernel(SortArgs<Scalar> a) {
  using Key = NeighborKey<Scalar>;
  using Entry = typename Key::Type;
  extern __shared__ __align__(16) unsigned char staging_bytes[];
  const int warps = static_cast<int>(blockDim.x) / 32;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * warps + warp;
  if (t >= a.count) return;  // the whole warp
  const BinnedRowEnd<Scalar> end = a.rows.ends[t];
  if (end.count == kRowHandedOver) return;
  const int appended = static_cast<int>(end.count);
  const Entry* row = a.rows.entries + t * a.rows.capacity;
  Entry* staged =
      reinterpret_cast<Entry*>(staging_bytes) + static_cast<size_t>(warp) * a.rows.capacity;
  int kept = 0;
  for (int base = 0; base < appended; base += 32) {
    const int j = base + lane;
    const Entry e = j < appended ? row[j] : Key::make(infinity<Scalar>(), kNoIndex);
    const bool keep = j < appended && bits_of(Key::distance(e)) < end.limit;
    const unsigned keeping = __ballot_sync(kFullMask, keep);
    if (keep) staged[kept + __popc(keeping & ((1u << lane) - 1u))] = e;
    kept += __popc(keeping);
  }
  __syncwarp();
  const int64_t i = a.order[t];
  // Positions for the kept entries and for every slot of the row (fewer
  // kept than take: the index has fewer points).
  const int positions = kept > a.take ? kept : a.take;
  if (positions <= 32) return sort_and_write<Scalar, 1>(a, staged, kept, i, lane);
  if (positions <= 64) return sort_and_write<Scalar, 2>(a, staged, kept, i, lane);
  if (positions <= 128) return sort_and_write<Scalar, 4>(a, staged, kept, i, lane);
  if (positions <= 256) return sort_and_write<Scalar, 8>(a, staged, kept, i, lane);
  sort_and_write<Scalar, kMaxBinnedRowCapacity / 32>(a, staged, kept, i, lane);
}

}  // namespace

template <typename Scalar>
void sort_binned_rows(const BinnedRows<Scalar>& rows, const uint32_t* order, int64_t count, int k,
                      int take, int64_t self_first, int32_t* indices, Scalar* sq_distances,
                      cudaStream_t stream) {
  if (count <= 0) return;
  using Entry = typename NeighborKey<Scalar>::Type;
  const size_t per_warp = sizeof(Entry) * static_cast<size_t>(rows.capacity);
  const int warps = static_cast<int>(std::max<size_t>(
      1, std::min<size_t>(kBinnedSortMaxWarps, kMinSharedBytesPerBlock / per_warp)));
  const SortArgs<Scalar> a{rows, order, count, k, take, self_first, indices, sq_distances};
  sort_binned_rows_kernel<Scalar>
      <<<grid_for(count, warps), 32 * warps, per_warp * warps, stream>>>(a);
  check_launch("sort binned rows");
}

template void sort_binned_rows<float>(const BinnedRows<float>&, const uint32_t*, int64_t, int, int,
                                      int64_t, int32_t*, float*, cudaStream_t);
template void sort_binned_rows<double>(const BinnedRows<double>&, const uint32_t*, int64_t, int,
                                       int, int64_t, int32_t*, double*, cudaStream_t);

}  // namespace cuda
}  // namespace knn
