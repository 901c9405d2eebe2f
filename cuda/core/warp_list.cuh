// A k-list shared by the 32 lanes of a warp that search for one query
// together (any k up to the shared memory the block has). The list lives in
// shared memory, sorted by (squared distance, index). Candidates are offered
// one per lane (or one for the whole warp); those that beat the k-th wait in
// the batch slots and are merged only when 32 have gathered: late in a
// search most candidates lose, and a merge for one or two winners would cost
// as much as one for 32, while waiting costs a ballot and a store. (H100,
// classic engine, 10^6 points and queries, k = 100: 21.0 -> 18.6 ms.) The
// bound the waiting candidates were tested against may be stale, never too
// small. A merge takes the batch in one step:
//   1. lanes whose candidate is not closer than the k-th drop it;
//   2. the batch is sorted across the warp (bitonic, by shuffles);
//   3. every batch entry finds its rank in the merged order by a binary
//      search in the list; then every list entry from the batch's first rank
//      on finds its own by a binary search in the batch and moves up to it.
// List entries only move up, so the list is rewritten from the top in
// windows of 32, each read whole before it is written: no entry is
// overwritten before it has been read, and the entries before the batch's
// first rank (most of the list late in a search) are not touched at all.
// Ranks are unique because (distance, index) pairs are, so no two lanes
// write the same slot. Empty slots hold (+inf, INT32_MAX). A template over
// the scalar type of the distances, like the lists of knn_lists.cuh (a
// double entry is 16 bytes: twice the shared memory per k).
#pragma once

#include "knn_lists.cuh"

namespace knn {
namespace cuda {

constexpr unsigned kFullMask = 0xffffffffu;

// Entries of sorted[0, count) closer than e (binary search).
template <typename Scalar>
__device__ int rank_in(const BasicNeighbor<Scalar>* sorted, int count,
                       const BasicNeighbor<Scalar>& e) {
  int lo = 0, hi = count;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (closer(sorted[mid], e))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

template <typename Scalar>
struct WarpList {
  using Neighbor = BasicNeighbor<Scalar>;
  Neighbor* list;   // k entries
  Neighbor* batch;  // 32 entries
  int k;
  int lane;
  Neighbor worst;   // list[k - 1], the same in every lane
  int waiting = 0;  // candidates in batch[0, waiting), the same in every lane

  // Shared memory one warp needs for a list of k.
  static __host__ __device__ size_t bytes(int k) { return sizeof(Neighbor) * (size_t(k) + 32); }

  __device__ WarpList(Neighbor* storage, int k_, int lane_)
      : list(storage), batch(storage + k_), k(k_), lane(lane_) {
    for (int j = lane; j < k; j += 32) list[j] = Neighbor{infinity<Scalar>(), kNoIndex};
    worst = Neighbor{infinity<Scalar>(), kNoIndex};
    __syncwarp();
  }

  __device__ Scalar bound() const { return worst.sq_distance; }
  // RegisterList::admits, from the list's k-th.
  __device__ bool admits(Scalar lower_bound, int32_t min_index) const {
    return closer(lower_bound, min_index, worst.sq_distance, worst.index);
  }

  __device__ bool wants(const Neighbor& c) const { return closer(c, worst); }

  // Offers one candidate per lane (lanes without one pass (+inf, INT32_MAX)):
  // those that beat the k-th join the waiting ones in lane order; when 32
  // have gathered they are merged and the rest wait.
  __device__ void offer(const Neighbor& c) {
    const bool wins = wants(c);
    const unsigned winners = __ballot_sync(kFullMask, wins);
    if (winners == 0) return;
    const int slot = waiting + __popc(winners & ((1u << lane) - 1u));
    const int total = waiting + __popc(winners);
    if (wins && slot < 32) batch[slot] = c;
    if (total < 32) {
      waiting = total;
      return;
    }
    waiting = 32;
    flush();
    if (wins && slot >= 32) batch[slot - 32] = c;
    waiting = total - 32;
  }

  // Offers one candidate, the same in every lane.
  __device__ void offer_uniform(const Neighbor& c) {
    if (!wants(c)) return;
    if (lane == 0) batch[waiting] = c;
    if (++waiting == 32) flush();
  }

  // Merges the waiting candidates: call before `list` is read.
  __device__ void flush() {
    __syncwarp();  // the waiting candidates were stored by other lanes
    merge(lane < waiting ? batch[lane] : Neighbor{infinity<Scalar>(), kNoIndex});
    __syncwarp();  // before the batch slots are written again
    waiting = 0;
  }

  // The list, flushed, as output rows (-1 for empty slots).
  __device__ void write(int32_t* out_index, Scalar* out_dist) {
    flush();
    for (int j = lane; j < k; j += 32) {
      const Neighbor e = list[j];
      out_index[j] = e.index == kNoIndex ? -1 : e.index;
      if (out_dist) out_dist[j] = e.sq_distance;
    }
  }

 private:
  // Merges one candidate per lane (lanes without one pass (+inf, INT32_MAX)).
  __device__ void merge(Neighbor c) {
    if (!wants(c)) c = Neighbor{infinity<Scalar>(), kNoIndex};
    const unsigned keep = __ballot_sync(kFullMask, c.index != kNoIndex);
    if (keep == 0) return;
    sort_across_warp(c);
    const int count = __popc(keep);
    batch[lane] = c;
    // Ranks of the batch entries: their own position plus the list entries
    // closer than them, read before the list changes.
    int batch_rank = k;
    if (lane < count) batch_rank = lane + rank_in(list, k, c);
    const int first = __shfl_sync(kFullMask, batch_rank, 0);
    __syncwarp();
    for (int top = k; top > first; top -= 32) {
      const int j = top - 32 + lane;
      Neighbor e{infinity<Scalar>(), kNoIndex};
      int rank = k;
      if (j >= first) {
        e = list[j];
        rank = j + rank_in(batch, count, e);
      }
      __syncwarp();
      if (rank < k) list[rank] = e;
      __syncwarp();
    }
    if (batch_rank < k) list[batch_rank] = c;
    __syncwarp();
    worst = list[k - 1];
    __syncwarp();
  }

  __device__ void sort_across_warp(Neighbor& c) const {
    for (int size = 2; size <= 32; size <<= 1) {
      for (int stride = size >> 1; stride > 0; stride >>= 1) {
        const Neighbor o{__shfl_xor_sync(kFullMask, c.sq_distance, stride),
                         __shfl_xor_sync(kFullMask, c.index, stride)};
        const bool ascending = (lane & size) == 0 || size == 32;
        const bool lower = (lane & stride) == 0;
        const bool keep_smaller = (lower == ascending);
        if (keep_smaller ? closer(o, c) : closer(c, o)) c = o;
      }
    }
  }
};

// Kernels with one query per warp and a WarpList each in dynamic shared
// memory (launched with WarpList<Scalar>::bytes(k) bytes per warp of the
// block): the grid-wide number of this warp, and its list's storage.
__device__ inline int64_t grid_warp() {
  return blockIdx.x * int64_t{blockDim.x / 32} + threadIdx.x / 32;
}
template <typename Scalar>
__device__ BasicNeighbor<Scalar>* warp_list_storage(int k) {
  // Raw bytes, 16-aligned (an extern array has one type for every
  // instantiation), cut into each warp's list.
  extern __shared__ __align__(16) unsigned char warp_list_bytes[];
  using Neighbor = BasicNeighbor<Scalar>;
  return reinterpret_cast<Neighbor*>(warp_list_bytes) +
         (threadIdx.x / 32) * (WarpList<Scalar>::bytes(k) / sizeof(Neighbor));
}

}  // namespace cuda
}  // namespace knn
