// Per-thread k-best lists for the GPU search, both ordered by (squared
// distance, index). Empty slots hold (+inf, INT32_MAX), which every real
// point beats, even one at +inf distance; they are written out as -1.
// Every list is a template over the scalar type of the distances (float, or
// double for the float64 engines): the same code for both.
#pragma once

#include <climits>
#include <limits>

#include "../../common/neighbor.h"
#include "memory_model.h"

namespace knn {
namespace cuda {

constexpr int32_t kNoIndex = INT_MAX;
// +infinity of the scalar type (host and device: --expt-relaxed-constexpr).
template <typename Scalar>
__host__ __device__ constexpr Scalar infinity() {
  return std::numeric_limits<Scalar>::infinity();
}

// Up to K neighbours in registers (runtime k <= K): every array index is a
// compile-time constant after unrolling, so nothing spills to local memory.
// The real entries are the last k slots; the first K - k hold sentinels at
// -infinity, which no point passes, so an insertion never tests k and the
// k-th is always slot K - 1. A warp runs an insertion whenever one of its
// lanes inserts, so insertions are most of a short-list search: with a test
// of k at every slot and the k-th picked out by a second unrolled loop, the
// kd-tree search of 10^7 queries at k = 8 took 43.9 ms instead of 30.5 and
// the grid's 17.4 instead of 9.9 (H100).
template <typename Scalar, int K>
struct RegisterList {
  Scalar dist[K];
  int32_t index[K];
  int k;

  __device__ explicit RegisterList(int k_) : k(k_) {
#pragma unroll
    for (int j = 0; j < K; ++j)
      dist[j] = j < K - k ? -infinity<Scalar>() : infinity<Scalar>(), index[j] = kNoIndex;
  }

  __device__ Scalar bound() const { return dist[K - 1]; }
  __device__ BasicNeighbor<Scalar> kth() const { return {dist[K - 1], index[K - 1]}; }
  // Whether a point at a squared distance >= lower_bound with an index >=
  // min_index could still enter: the test that prunes ties by index.
  __device__ bool admits(Scalar lower_bound, int32_t min_index) const {
    return closer(lower_bound, min_index, dist[K - 1], index[K - 1]);
  }

  __device__ void offer(Scalar d, int32_t i) {
    if (!closer(d, i, dist[K - 1], index[K - 1])) return;
    bool placed = false;
#pragma unroll
    for (int j = K - 1; j > 0; --j) {
      if (!placed) {
        if (closer(d, i, dist[j - 1], index[j - 1])) {
          dist[j] = dist[j - 1], index[j] = index[j - 1];
        } else {
          dist[j] = d, index[j] = i, placed = true;
        }
      }
    }
    if (!placed) dist[0] = d, index[0] = i;
  }

  // f(j, dist, index) for the k entries, nearest first (j = 0 .. k-1).
  template <class F>
  __device__ void for_each_sorted(F f) const {
#pragma unroll
    for (int j = 0; j < K; ++j)
      if (j >= K - k) f(j - (K - k), dist[j], index[j]);
  }

  __device__ void write(int32_t* out_index, Scalar* out_dist) const {
    for_each_sorted([&](int j, Scalar d, int32_t i) {
      out_index[j] = i == kNoIndex ? -1 : i;
      if (out_dist) out_dist[j] = d;
    });
  }
};

// Any k: a max-heap (the farthest candidate at the root) in strided memory,
// sorted ascending at the end. In device memory for the lists beyond the
// warp lists (entry j at [j * stride], the threads of a chunk interleaved so
// that the common top of the heaps is read coalesced); in shared memory for
// the thread searches' lists from 17 (the grid's up to kMaxSharedListK, the
// kd-tree's up to kKdTreeMaxSharedHeapK; stride = block size, so the lanes
// of a warp touch 32 banks). An insertion costs a sift-down of log k
// levels where a sorted list moves every entry it passes: H100, the grid,
// 10^7 x 10^7 query ms against a sorted list in shared memory, every index
// equal: uniform k = 17 23.1 -> 19.6, k = 24 30.5 -> 23.3, k = 30 39.1 ->
// 31.5; on a sphere k = 20 25.8 -> 19.7, k = 30 39.4 -> 27.1.
template <typename Scalar>
struct HeapList {
  int32_t* index;
  Scalar* dist;
  int64_t stride;
  int k;
  // The root, kept in registers: every candidate is tested against it, and
  // it changes only when one enters.
  Scalar top_dist = infinity<Scalar>();
  int32_t top_index = kNoIndex;

  // Shared bytes of the lists of `threads` threads of up to k entries each.
  static __host__ __device__ size_t bytes(int k, int threads) {
    return (sizeof(Scalar) + sizeof(int32_t)) * size_t(k) * size_t(threads);
  }

  // The list of this thread in a block's dynamic shared memory `shared`
  // (HeapList::bytes(k, blockDim.x) of it): every thread's distances, then
  // every thread's indices, entry j of thread t at [j * blockDim.x + t].
  static __device__ HeapList in_shared(unsigned char* shared, int k) {
    Scalar* dists = reinterpret_cast<Scalar*>(shared);
    int32_t* indices = reinterpret_cast<int32_t*>(dists + size_t(k) * blockDim.x);
    return HeapList(indices + threadIdx.x, dists + threadIdx.x, blockDim.x, k);
  }

  __device__ HeapList(int32_t* index_, Scalar* dist_, int64_t stride_, int k_)
      : index(index_), dist(dist_), stride(stride_), k(k_) {
    // Sentinels, not an empty heap filled by appending: every lane of a warp
    // then sifts its first k candidates in step with the others, where a heap
    // built once full would be built by each lane at its own moment, the
    // others waiting (H100, the grid, 10^7 x 10^7 uniform, k = 100: 166 ->
    // 218 ms). Nor do winners wait in registers to enter with the other
    // lanes' (4 to 16 waiting: 2 to 20 % slower at k = 30 to 100).
    for (int j = 0; j < k; ++j) at_dist(j) = infinity<Scalar>(), at_index(j) = kNoIndex;
  }

  __device__ Scalar& at_dist(int j) const { return dist[j * stride]; }
  __device__ int32_t& at_index(int j) const { return index[j * stride]; }

  __device__ Scalar bound() const { return top_dist; }
  __device__ bool admits(Scalar lower_bound, int32_t min_index) const {
    return closer(lower_bound, min_index, top_dist, top_index);
  }

  // Moves the hole at `pos` down past children farther than (d, i), then
  // fills it with (d, i); the heap spans [0, size). (Four children a node,
  // half the levels, ran 1-3 % slower on the grid: H200, k = 30 and 100.)
  __device__ void sift_down(int pos, int size, Scalar d, int32_t i) {
    for (;;) {
      int child = 2 * pos + 1;
      if (child >= size) break;
      Scalar cd = at_dist(child);
      int32_t ci = at_index(child);
      if (child + 1 < size) {
        const Scalar rd = at_dist(child + 1);
        const int32_t ri = at_index(child + 1);
        if (closer(cd, ci, rd, ri)) ++child, cd = rd, ci = ri;
      }
      if (!closer(d, i, cd, ci)) break;
      at_dist(pos) = cd, at_index(pos) = ci;
      pos = child;
    }
    at_dist(pos) = d, at_index(pos) = i;
  }

  __device__ void offer(Scalar d, int32_t i) {
    if (!closer(d, i, top_dist, top_index)) return;
    sift_down(0, k, d, i);
    top_dist = at_dist(0), top_index = at_index(0);
  }

  __device__ BasicNeighbor<Scalar> kth() const { return {top_dist, top_index}; }

  // f(j, dist, index) for the k entries, nearest first, after sorting them
  // in place: the end of the list, which is no longer a heap afterwards.
  template <class F>
  __device__ void for_each_sorted(F f) {
    for (int end = k - 1; end > 0; --end) {
      const Scalar d = at_dist(end);
      const int32_t i = at_index(end);
      at_dist(end) = at_dist(0), at_index(end) = at_index(0);
      sift_down(0, end, d, i);
    }
    for (int j = 0; j < k; ++j) f(j, at_dist(j), at_index(j));
  }

  // Sorts the heap ascending in place and writes it as a row.
  __device__ void write(int32_t* out_index, Scalar* out_dist) {
    for_each_sorted([&](int j, Scalar d, int32_t i) {
      out_index[j] = i == kNoIndex ? -1 : i;
      if (out_dist) out_dist[j] = d;
    });
  }
};

}  // namespace cuda
}  // namespace knn
