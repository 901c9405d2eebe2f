// Per-thread k-best lists for the GPU search, both ordered by (squared
// distance, index). Empty slots hold (+inf, INT32_MAX), which every real
// point beats, even one at +inf distance; they are written out as -1.
// Every list is a template over the scalar type of the distances (float, or
// double for the float64 engines): the same code for both.
#pragma once

#include <climits>
#include <limits>
#include <type_traits>

#include "../../common/neighbor.h"
#include "cuda_support.h"
#include "launch_policy.h"
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

// Where a heap keeps its entries, entry j at [j * stride]. Split slots: a
// distance array and an index array, for any scalar type.
template <typename Scalar>
struct SplitHeapSlots {
  using Entry = BasicNeighbor<Scalar>;
  int32_t* index;
  Scalar* dist;
  int64_t stride;

  // A block's dynamic shared memory for `k` entries a thread: every
  // thread's distances, then every thread's indices.
  static __device__ SplitHeapSlots in_shared(unsigned char* shared, int k) {
    Scalar* dists = reinterpret_cast<Scalar*>(shared);
    int32_t* indices = reinterpret_cast<int32_t*>(dists + size_t(k) * blockDim.x);
    return {indices + threadIdx.x, dists + threadIdx.x, blockDim.x};
  }

  static __device__ Entry entry(Scalar d, int32_t i) { return {d, i}; }
  static __device__ BasicNeighbor<Scalar> neighbor(Entry e) { return e; }
  static __device__ bool before(Entry a, Entry b) { return closer(a, b); }
  __device__ Entry load(int j) const { return {dist[j * stride], index[j * stride]}; }
  __device__ void store(int j, Entry e) const {
    dist[j * stride] = e.sq_distance, index[j * stride] = e.index;
  }
};

// A neighbour as one value that compares in the contract's (distance,
// index) order: for float one 64-bit word, the distance's bits above the
// index's (a squared distance is never negative, not even -0: a square is
// +0 or more, and so is a sum of them; a NaN passes no closer() test and so
// never enters a list; an index is never negative: the words order as the
// pairs do), so that one integer comparison orders two entries; for double
// the pair itself. The heaps' packed slots and the binned rows
// (binned_rows.cuh) store neighbours this way.
template <typename Scalar>
struct NeighborKey;

template <>
struct NeighborKey<float> {
  using Type = uint64_t;
  static __device__ Type make(float d, int32_t i) {
    return uint64_t{__float_as_uint(d)} << 32 | static_cast<uint32_t>(i);
  }
  static __device__ float distance(Type e) {
    return __uint_as_float(static_cast<uint32_t>(e >> 32));
  }
  static __device__ int32_t index(Type e) { return static_cast<int32_t>(e); }
  static __device__ bool before(Type a, Type b) { return a < b; }
};

template <>
struct NeighborKey<double> {
  using Type = BasicNeighbor<double>;
  static __device__ Type make(double d, int32_t i) { return {d, i}; }
  static __device__ double distance(const Type& e) { return e.sq_distance; }
  static __device__ int32_t index(const Type& e) { return e.index; }
  static __device__ bool before(const Type& a, const Type& b) { return closer(a, b); }
};

// Packed slots, float only: one NeighborKey<float> word an entry. A level of
// a sift loads two words and compares them once, where split slots load four
// values and compare pairs.
struct PackedHeapSlots {
  using Key = NeighborKey<float>;
  using Entry = Key::Type;
  uint64_t* key;
  int64_t stride;

  static __device__ PackedHeapSlots in_shared(unsigned char* shared, int) {
    return {reinterpret_cast<uint64_t*>(shared) + threadIdx.x, blockDim.x};
  }

  static __device__ Entry entry(float d, int32_t i) { return Key::make(d, i); }
  static __device__ BasicNeighbor<float> neighbor(Entry e) {
    return {Key::distance(e), Key::index(e)};
  }
  static __device__ bool before(Entry a, Entry b) { return Key::before(a, b); }
  __device__ Entry load(int j) const { return key[j * stride]; }
  __device__ void store(int j, Entry e) const { key[j * stride] = e; }
};

// Any k: a max-heap (the farthest candidate at the root), sorted ascending
// at the end. In device memory for the lists beyond the warp lists (split
// slots, the threads of a chunk interleaved so that the common top of the
// heaps is read coalesced); in shared memory for the thread searches' lists
// from 17 (SharedHeapList: the grid's up to kGridMaxHeapTake, the kd-tree's
// up to kKdTreeMaxSharedHeapK; stride = block size, so the lanes of a warp
// touch consecutive banks). An insertion costs a sift-down of log k levels
// where a sorted list moves every entry it passes: H100, the grid, 10^7 x
// 10^7 query ms against a sorted list in shared memory, every index equal:
// uniform k = 17 23.1 -> 19.6, k = 24 30.5 -> 23.3, k = 30 39.1 -> 31.5; on
// a sphere k = 20 25.8 -> 19.7, k = 30 39.4 -> 27.1.
template <typename Scalar, class Slots = SplitHeapSlots<Scalar>>
struct HeapList {
  using Entry = typename Slots::Entry;
  Slots slots;
  int k;
  // The k-th so far, kept in registers: every candidate is tested against
  // it. (+inf, kNoIndex) until the heap is full, then the root.
  Scalar top_dist = infinity<Scalar>();
  int32_t top_index = kNoIndex;
  // Entries held: the heap spans [0, size). Last: declared after k, its
  // place in the layout made nvcc 13.0 store the double lists' distances
  // to global instead of shared memory (sm_90, -O3), a fault at the first
  // insertion.
  int size = 0;

  // Shared bytes of the lists of `threads` threads of up to k entries each
  // (either kind of slots).
  static __host__ __device__ size_t bytes(int k, int threads) {
    return (sizeof(Scalar) + sizeof(int32_t)) * size_t(k) * size_t(threads);
  }

  // The list of this thread in a block's dynamic shared memory `shared`
  // (bytes(k, blockDim.x) of it), entry j of thread t in slot j * blockDim.x
  // + t.
  static __device__ HeapList in_shared(unsigned char* shared, int k) {
    return HeapList(Slots::in_shared(shared, k), k);
  }

  __device__ HeapList(Slots slots_, int k_) : slots(slots_), k(k_) {}

  __device__ Scalar bound() const { return top_dist; }
  __device__ bool admits(Scalar lower_bound, int32_t min_index) const {
    return closer(lower_bound, min_index, top_dist, top_index);
  }

  // Moves the hole at `pos` down past children farther than e, then fills
  // it with e; the heap spans [0, end). (Four children a node, half the
  // levels, ran 1-3 % slower on the grid: H200, k = 30 and 100.)
  __device__ void sift_down(int pos, int end, Entry e) {
    for (;;) {
      int child = 2 * pos + 1;
      if (child >= end) break;
      Entry c = slots.load(child);
      if (child + 1 < end) {
        const Entry right = slots.load(child + 1);
        if (Slots::before(c, right)) ++child, c = right;
      }
      if (!Slots::before(e, c)) break;
      slots.store(pos, c);
      pos = child;
    }
    slots.store(pos, e);
  }

  // Until the heap holds k, a candidate enters at the end and rises past
  // nearer parents: about two levels on average, where entering at the root
  // of a heap padded with sentinels sinks every one of the first k to the
  // bottom. Nor is the heap built once full: each lane of a warp would build
  // it at its own moment, the others waiting (H100, the grid, 10^7 x 10^7
  // uniform, k = 100: 166 -> 218 ms). Nor do winners wait in registers to
  // enter with the other lanes' (4 to 16 waiting: 2 to 20 % slower at k =
  // 30 to 100).
  __device__ void offer(Scalar d, int32_t i) {
    if (!closer(d, i, top_dist, top_index)) return;
    const Entry e = Slots::entry(d, i);
    if (size < k) {
      int pos = size++;
      while (pos > 0) {
        const int parent = (pos - 1) / 2;
        const Entry p = slots.load(parent);
        if (!Slots::before(p, e)) break;
        slots.store(pos, p);
        pos = parent;
      }
      slots.store(pos, e);
      if (size < k) return;
    } else {
      sift_down(0, k, e);
    }
    const BasicNeighbor<Scalar> top = Slots::neighbor(slots.load(0));
    top_dist = top.sq_distance, top_index = top.index;
  }

  __device__ BasicNeighbor<Scalar> kth() const { return {top_dist, top_index}; }

  // f(j, dist, index) for the k entries, nearest first, after sorting them
  // in place (the heap is no longer one afterwards); the slots no candidate
  // filled come last as (+inf, kNoIndex).
  template <class F>
  __device__ void for_each_sorted(F f) {
    for (int end = size - 1; end > 0; --end) {
      const Entry last = slots.load(end);
      slots.store(end, slots.load(0));
      sift_down(0, end, last);
    }
    for (int j = 0; j < k; ++j) {
      const BasicNeighbor<Scalar> e = j < size
                                          ? Slots::neighbor(slots.load(j))
                                          : BasicNeighbor<Scalar>{infinity<Scalar>(), kNoIndex};
      f(j, e.sq_distance, e.index);
    }
  }

  // Sorts the heap ascending in place and writes it as a row.
  __device__ void write(int32_t* out_index, Scalar* out_dist) {
    for_each_sorted([&](int j, Scalar d, int32_t i) {
      out_index[j] = i == kNoIndex ? -1 : i;
      if (out_dist) out_dist[j] = d;
    });
  }
};

// A heap in shared memory: packed slots where the scalar is float.
template <typename Scalar>
using SharedHeapList =
    HeapList<Scalar, std::conditional_t<std::is_same_v<Scalar, float>, PackedHeapSlots,
                                        SplitHeapSlots<Scalar>>>;

// Threads a block of `kernel`, whose threads each keep a SharedHeapList of
// up to k entries in dynamic shared memory, gets (at most `preferred`; 0
// when not even a warp's lists fit), with the kernel allowed all of the
// shared memory a block may opt in to.
template <typename Scalar, class Kernel>
int shared_heap_threads(Kernel* kernel, int k, int preferred, const char* what) {
  const size_t allowance = allow_all_dynamic_shared(kernel, what);
  return shared_list_threads(SharedHeapList<Scalar>::bytes(k, 1), allowance, preferred);
}

}  // namespace cuda
}  // namespace knn
