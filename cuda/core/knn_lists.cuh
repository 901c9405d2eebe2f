// Per-thread k-best lists for the GPU search, both ordered by (squared
// distance, index). Empty slots hold (+inf, INT32_MAX), which every real
// point beats, even one at +inf distance; they are written out as -1.
// Every list is a template over the scalar type of the distances (float, or
// double for the float64 engines): the same code for both.
#pragma once

#include <climits>
#include <limits>

#include "../../common/neighbor.h"

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
  __device__ void for_each(F f) const {
#pragma unroll
    for (int j = 0; j < K; ++j)
      if (j >= K - k) f(j - (K - k), dist[j], index[j]);
  }

  __device__ void write(int32_t* out_index, Scalar* out_dist) const {
    for_each([&](int j, Scalar d, int32_t i) {
      out_index[j] = i == kNoIndex ? -1 : i;
      if (out_dist) out_dist[j] = d;
    });
  }
};

// The longest SharedList the searches use ((sizeof(Scalar) + 4) *
// kMaxSharedListK bytes a thread): inserts move up to k entries, and by k = 100 a warp per query
// (warp_list.cuh) is faster again.
constexpr int kMaxSharedListK = 32;

// Up to a few dozen neighbours of one thread in shared memory, sorted
// ascending by insertion. Entry j of a thread is at [j * stride] from its
// base, the threads of a block interleaved (stride = block size), so the
// lanes of a warp touch 32 different banks. Between the register lists
// (their unrolled insertion costs every slot on every insert) and the warp
// lists (a warp per query): an insert moves only the entries it passes.
template <typename Scalar>
struct SharedList {
  Scalar* dist;
  int32_t* index;
  int stride;
  int k;
  Scalar worst_dist = infinity<Scalar>();
  int32_t worst_index = kNoIndex;

  // Shared bytes of the lists of `threads` threads of up to k entries each.
  static __host__ __device__ size_t bytes(int k, int threads) {
    return (sizeof(Scalar) + sizeof(int32_t)) * size_t(k) * size_t(threads);
  }

  __device__ SharedList(Scalar* dist_, int32_t* index_, int stride_, int k_)
      : dist(dist_), index(index_), stride(stride_), k(k_) {
    for (int j = 0; j < k; ++j) dist[j * stride] = infinity<Scalar>(), index[j * stride] = kNoIndex;
  }

  __device__ Scalar bound() const { return worst_dist; }
  __device__ BasicNeighbor<Scalar> kth() const { return {worst_dist, worst_index}; }

  // f(j, dist, index) for the k entries, nearest first.
  template <class F>
  __device__ void for_each(F f) const {
    for (int j = 0; j < k; ++j) f(j, dist[j * stride], index[j * stride]);
  }

  __device__ void offer(Scalar d, int32_t i) {
    if (!closer(d, i, worst_dist, worst_index)) return;
    int j = k - 1;
    for (; j > 0; --j) {
      const Scalar above_dist = dist[(j - 1) * stride];
      const int32_t above_index = index[(j - 1) * stride];
      if (!closer(d, i, above_dist, above_index)) break;
      dist[j * stride] = above_dist, index[j * stride] = above_index;
    }
    dist[j * stride] = d, index[j * stride] = i;
    worst_dist = dist[(k - 1) * stride], worst_index = index[(k - 1) * stride];
  }

  __device__ void write(int32_t* out_index, Scalar* out_dist) const {
    for (int j = 0; j < k; ++j) {
      const int32_t i = index[j * stride];
      out_index[j] = i == kNoIndex ? -1 : i;
      if (out_dist) out_dist[j] = dist[j * stride];
    }
  }
};

// Any k: a max-heap (the farthest candidate at the root) in strided device
// memory (entry j at [j * stride], threads of a chunk interleaved so that the
// common top of the heaps is read coalesced), sorted ascending at the end.
template <typename Scalar>
struct HeapList {
  int32_t* index;
  Scalar* dist;
  int64_t stride;
  int k;

  __device__ HeapList(int32_t* index_, Scalar* dist_, int64_t stride_, int k_)
      : index(index_), dist(dist_), stride(stride_), k(k_) {
    for (int j = 0; j < k; ++j) at_dist(j) = infinity<Scalar>(), at_index(j) = kNoIndex;
  }

  __device__ Scalar& at_dist(int j) const { return dist[j * stride]; }
  __device__ int32_t& at_index(int j) const { return index[j * stride]; }

  __device__ Scalar bound() const { return at_dist(0); }
  __device__ bool admits(Scalar lower_bound, int32_t min_index) const {
    return closer(lower_bound, min_index, at_dist(0), at_index(0));
  }

  // Moves the hole at `pos` down past children farther than (d, i), then
  // fills it with (d, i); the heap spans [0, size).
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
    if (closer(d, i, at_dist(0), at_index(0))) sift_down(0, k, d, i);
  }

  // Sorts the heap ascending in place and writes it as a row.
  __device__ void write(int32_t* out_index, Scalar* out_dist) {
    for (int end = k - 1; end > 0; --end) {
      const Scalar d = at_dist(end);
      const int32_t i = at_index(end);
      at_dist(end) = at_dist(0), at_index(end) = at_index(0);
      sift_down(0, end, d, i);
    }
    for (int j = 0; j < k; ++j) {
      const int32_t i = at_index(j);
      out_index[j] = i == kNoIndex ? -1 : i;
      if (out_dist) out_dist[j] = at_dist(j);
    }
  }
};

}  // namespace cuda
}  // namespace knn
