// Binned rows: the k-list of a thread search that keeps no order while it
// searches. Each query appends the candidates below its KthBins bound
// (kth_bins.h) to a row of its own in device memory, unsorted; afterwards
// sort_binned_rows, one warp a row, keeps the entries below the final bound
// and sorts them across the warp's registers into the output row. A heap of
// k per thread in shared memory leaves few threads on an SM at large k (808
// bytes a thread at k = 100 in float: 8 warps an SM on an H100), each
// insertion is a chain of dependent shared-memory steps, the lanes of a warp
// insert at different moments, and the heap is sorted one sift at a time at
// the end; an append is one store and a counter, the bound lives in
// registers, and the sort runs in step across a warp.
//
// A row holds binned_row_capacity(take) entries (memory_model.h). A query
// whose row would overflow (many candidates at one distance below the bound,
// or a guess that placed the bins far off) stops appending and ends its
// walk at once; the caller hands it to a search that needs no row (the warp
// lists), as the grid hands on a query away from the points.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "knn_lists.cuh"
#include "kth_bins.h"

namespace knn {
namespace cuda {

// How a query's row ends: the entries appended, and the bits of the
// distance below which an entry belongs to the answer (KthBins::limit).
// count == kRowHandedOver: another search answers the query.
constexpr uint32_t kRowHandedOver = 0xffffffffu;
template <typename Scalar>
struct BinnedRowEnd {
  FloatBits<Scalar> limit;
  uint32_t count;
};

// The rows of a chunk: row t (thread position t) at entries + t * capacity.
template <typename Scalar>
struct BinnedRows {
  using Entry = typename NeighborKey<Scalar>::Type;
  Entry* entries;
  BinnedRowEnd<Scalar>* ends;
  int capacity;
};

// A thread's KthBins counters in its block's dynamic shared memory, two
// 16-bit counters a word, word w of thread t at words[w * blockDim.x + t]
// (the lanes of a warp in consecutive banks). An increment is a shared
// atomic whose result is unused, so it waits for nothing.
struct SharedBinCounters {
  uint32_t* words;
  int stride;

  // Bytes a block of `threads` threads needs.
  static constexpr size_t bytes(int threads) {
    return sizeof(uint32_t) * KthBins<float>::kCounterWords * static_cast<size_t>(threads);
  }
  // This thread's counters, zeroed.
  static __device__ SharedBinCounters in_shared(unsigned char* shared) {
    static_assert(KthBins<float>::kCounterWords == KthBins<double>::kCounterWords,
                  "one layout for both scalars");
    SharedBinCounters c{reinterpret_cast<uint32_t*>(shared) + threadIdx.x,
                        static_cast<int>(blockDim.x)};
    for (int w = 0; w < KthBins<float>::kCounterWords; ++w) c.words[w * c.stride] = 0;
    return c;
  }
  __device__ void add(int b) { atomicAdd(&words[(b >> 1) * stride], 1u << ((b & 1) * 16)); }
  __device__ int get(int b) const {
    return static_cast<int>((words[(b >> 1) * stride] >> ((b & 1) * 16)) & 0xffffu);
  }
};

// The list a thread search offers its candidates to (the interface of
// RegisterList and HeapList: kth, bound, admits, offer). The k-th it reports
// is (+inf, kNoIndex) while every candidate is kept, then (bound, -1): with
// index -1, closer() admits exactly the distances below the bound.
//
// Appends wait in registers until they fill a 32-byte sector (kStaged
// entries: four float keys, two double pairs), which is written whole: the
// lanes of a warp append to 32 rows, so every store is scattered, and two
// 16-byte stores a sector are fewer than four of 8 bytes and leave no
// sector part written (with the occupancy masks of kth_bins.h and the
// lane-major sort, 14-25 % off the query, bench/RESULTS.md).
template <typename Scalar>
struct BinnedRowList {
  using Key = NeighborKey<Scalar>;
  using Entry = typename Key::Type;
  static constexpr int kStaged = 32 / sizeof(Entry);
  static_assert(kStaged * sizeof(Entry) == 32, "a whole number of entries a sector");
  Entry* row;  // 32-byte aligned (a row's capacity is a multiple of kStaged)
  int capacity;
  SharedBinCounters counters;
  KthBins<Scalar> bins;
  int count = 0;  // entries appended; capacity + 1 once the row overflowed
  Scalar kth_dist = infinity<Scalar>();
  int32_t kth_index = kNoIndex;
  Entry staged[kStaged];  // entries count - count % kStaged .. count - 1

  // The list of lists of `take` with `guess` as the guess of the take-th
  // squared distance.
  __device__ BinnedRowList(Entry* row_, int capacity_, SharedBinCounters counters_, int take,
                           Scalar guess)
      : row(row_), capacity(capacity_), counters(counters_), bins(guess, take) {}

  __device__ Scalar bound() const { return kth_dist; }
  __device__ BasicNeighbor<Scalar> kth() const { return {kth_dist, kth_index}; }
  __device__ bool admits(Scalar lower_bound, int32_t min_index) const {
    return closer(lower_bound, min_index, kth_dist, kth_index);
  }
  __device__ bool overflowed() const { return count > capacity; }

  // An overflow turns the k-th to (-inf, -1), which nothing beats: the walk
  // prunes everything left and ends.
  __device__ void offer(Scalar d, int32_t i) {
    if (!closer(d, i, kth_dist, kth_index)) return;
    if (count == capacity) {
      count = capacity + 1;
      kth_dist = -infinity<Scalar>(), kth_index = -1;
      return;
    }
    const Entry e = Key::make(d, i);
    const int slot = count % kStaged;
#pragma unroll
    for (int s = 0; s < kStaged; ++s)
      if (s == slot) staged[s] = e;
    if (++count % kStaged == 0) write_staged(count - kStaged, kStaged);
    if (bins.count(bins.bin(d), counters)) kth_dist = bins.bound(), kth_index = -1;
  }

  // How the row ends, its last entries written.
  __device__ BinnedRowEnd<Scalar> end() {
    write_staged(count - count % kStaged, count % kStaged);
    return {bins.limit(), static_cast<uint32_t>(count)};
  }

 private:
  // The staged entries 0..n-1 to row[first..]: a whole sector in 16-byte
  // stores, a partial one entry by entry.
  __device__ void write_staged(int first, int n) {
    Entry* at = row + first;
    if (n == kStaged) {
      if constexpr (sizeof(Entry) == 8) {
        reinterpret_cast<ulonglong2*>(at)[0] = make_ulonglong2(staged[0], staged[1]);
        reinterpret_cast<ulonglong2*>(at)[1] = make_ulonglong2(staged[2], staged[3]);
      } else {
#pragma unroll
        for (int s = 0; s < kStaged; ++s)
          reinterpret_cast<double2*>(at)[s] = make_double2(
              staged[s].sq_distance,
              __longlong_as_double(static_cast<long long>(static_cast<uint32_t>(staged[s].index))));
      }
      return;
    }
#pragma unroll
    for (int s = 0; s < kStaged; ++s)
      if (s < n) at[s] = staged[s];
  }
};

// One warp a row of `rows` (count of them; row t is query order[t]'s of the
// chunk), except rows handed over: the entries below the row's limit,
// sorted, and of them the first `take` written as the query's row of k
// entries (indices, and squared distances when sq_distances is not null;
// -1 and +inf where fewer were found). With self_first >= 0 query i is the
// indexed point self_first + i, and its own index is left out of its row
// (or the last entry, when its own is not among the first take).
template <typename Scalar>
void sort_binned_rows(const BinnedRows<Scalar>& rows, const uint32_t* order, int64_t count, int k,
                      int take, int64_t self_first, int32_t* indices, Scalar* sq_distances,
                      cudaStream_t stream);

}  // namespace cuda
}  // namespace knn
