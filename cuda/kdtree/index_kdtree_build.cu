// GPU build of the bucket kd-tree (index_kdtree.cuh), all on the device with
// no host round trip per level.
//
// The tree. bucket_tree_shape.h fixes which positions every node holds; a
// node's points are split at the median of its widest dimension (the largest
// spread of its tight box, ties to the smaller dimension): the first half of
// them in the order by (coordinate, index) goes left.
//
// The data. Every dimension's coordinates as order-preserving keys
// (OrderedKey: -0.0 and +0.0 get one key) in an array of their own, and the
// points' ids, all in node order: a node's points fill its segment. Within a
// segment they stay in index order, because every split is a stable
// partition of an array that starts in index order. So a tie in the split
// coordinate goes left by position, with no sort.
//
// One split. The node's box: the least and the largest key of every
// dimension. The median key v of the split dimension: a radix select that
// starts at the first digit where the box's two ends differ (all points
// equal: none). Then with need_eq = the left half's size minus the keys
// below v, a point goes left when its key is below v, or equals v with fewer
// than need_eq equal keys before it in the segment. Both counts come from
// warp ballots row by row, so the partition also finds every point's place.
//
// Two tiers (bucket_tree_build_plan). Large segments are split level by
// level in global memory, each segment's work spread over tiles of
// kKdBuildTile entries: boxes, the select's digit histograms, counts per
// tile and the partition are one kernel each. Once the segments of a level
// fit in a block's shared memory (kKdBuildSharedSegmentPoints,
// launch_policy.h), one block loads a segment and builds its whole subtree
// there, its warps shared among the level's sub-segments, and writes the
// points in bucket order.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "../core/knn_lists.cuh"
#include "../core/radix_sort_temp.cuh"
#include "index_kdtree.cuh"
#include "index_kdtree_memory.h"

namespace knn {
namespace cuda {
namespace {

constexpr int kBlock = 256;
constexpr int kWarps = kBlock / 32;
constexpr int kTileRows = static_cast<int>(kKdBuildTile / kBlock);
// Tiles of a segment whose digit histogram one block accumulates (fewer
// global atomics on the segment's bins).
constexpr int kHistogramTiles = 8;

// Digits of a radix select over keys of type Key, kBits bits each, the most
// significant first.
template <typename Key, int kBits>
struct Digits {
  static constexpr int kKeyBits = 8 * static_cast<int>(sizeof(Key));
  static constexpr int kCount = kKeyBits / kBits;
  static constexpr Key kMask = (Key{1} << kBits) - 1;
  __device__ static int shift(int pass) { return kKeyBits - kBits * (pass + 1); }
  // The bits above digit `pass`.
  __device__ static Key above(int pass) {
    return pass == 0 ? Key{0} : ~Key{0} << (kKeyBits - kBits * pass);
  }
  // The first digit in which two keys that differ (diff = a ^ b != 0) differ.
  __device__ static int first_differing(Key diff) {
    const int msb = sizeof(Key) == 4 ? 31 - __clz(static_cast<unsigned>(diff))
                                     : 63 - __clzll(static_cast<long long>(diff));
    return (kKeyBits - 1 - msb) / kBits;
  }
};

template <typename Key>
__device__ Key warp_min(Key v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const Key other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = other < v ? other : v;
  }
  return v;
}

template <typename Key>
__device__ Key warp_max(Key v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const Key other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = other > v ? other : v;
  }
  return v;
}

// How a segment splits, once its select is done: a point goes left when
// key < pivot, or key == pivot and fewer than need_eq keys equal to pivot
// come before it. While the select runs, pivot holds the digits chosen so far
// and `rank` the rank of the wanted key among the keys that share them; the
// select ends with need_eq = rank + 1. An empty left half: pivot 0 (no key of
// a finite coordinate is 0) and rank -1.
template <typename Key>
struct SplitRule {
  Key pivot;
  int32_t rank;
  int32_t pass;  // the select's next digit; the digit count when it is done
};
static_assert(sizeof(SplitRule<unsigned long long>) <= kKdBuildRuleBytes, "rule size");

// The rule a split starts from, given the split dimension's key range
// [low, high] and the left half's size.
template <typename Key, int kBits>
__device__ SplitRule<Key> start_rule(Key low, Key high, int64_t left_size) {
  using D = Digits<Key, kBits>;
  if (left_size == 0) return SplitRule<Key>{Key{0}, -1, D::kCount};
  const Key diff = low ^ high;
  const int rank = static_cast<int32_t>(left_size - 1);
  if (diff == 0) return SplitRule<Key>{low, rank, D::kCount};
  const int pass = D::first_differing(diff);
  return SplitRule<Key>{static_cast<Key>(low & D::above(pass)), rank, pass};
}

// Positions of the entries of one row of a segment in a stable partition:
// from the counts of keys below and equal to the pivot before the row (in
// the segment), the row's own ballots, and the counts of the warps before
// this one in the row.
struct RowPlace {
  uint32_t lt_before, eq_before;  // this entry's, from the segment start
  uint32_t lt_row, eq_row;        // the whole row's
};

// `slots` holds one packed count per warp of the row (null when the row is
// one warp); `sync` waits for every warp of the row.
template <class Sync>
__device__ RowPlace place_in_row(bool lt, bool eq, uint32_t lt_run, uint32_t eq_run,
                                 uint32_t* slots, int warp, int warps, Sync sync) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned lt_ballot = __ballot_sync(0xffffffffu, lt);
  const unsigned eq_ballot = __ballot_sync(0xffffffffu, eq);
  const unsigned below = (1u << lane) - 1;
  RowPlace place{lt_run + __popc(lt_ballot & below), eq_run + __popc(eq_ballot & below),
                 static_cast<uint32_t>(__popc(lt_ballot)),
                 static_cast<uint32_t>(__popc(eq_ballot))};
  if (warps == 1) return place;
  if (lane == 0) slots[warp] = place.lt_row | place.eq_row << 16;
  sync();
  uint32_t lt_row = 0, eq_row = 0;
  for (int w = 0; w < warps; ++w) {
    const uint32_t packed = slots[w];
    if (w == warp) place.lt_before += lt_row, place.eq_before += eq_row;
    lt_row += packed & 0xffffu, eq_row += packed >> 16;
  }
  place.lt_row = lt_row, place.eq_row = eq_row;
  return place;
}

// Where the entry at position p of a segment goes, as an offset from the
// segment's start (its left child's too; the right child's is `mid`).
__device__ inline uint32_t destination(bool lt, bool eq, const RowPlace& place, uint32_t p,
                                       uint32_t need_eq, uint32_t mid) {
  const uint32_t left_before = place.lt_before + min(place.eq_before, need_eq);
  const bool left = lt || (eq && place.eq_before < need_eq);
  return left ? left_before : mid + (p - left_before);
}

template <typename Scalar>
__device__ void write_box(Scalar* boxes, int dim, int level, int64_t q, int d, bool empty,
                          typename OrderedKey<Scalar>::type low,
                          typename OrderedKey<Scalar>::type high) {
  Scalar* lo = boxes + (first_node_of_level(level) + q) * 2 * dim;
  lo[d] = empty ? infinity<Scalar>() : scalar_from_ordered_key<Scalar>(low);
  lo[dim + d] = empty ? -infinity<Scalar>() : scalar_from_ordered_key<Scalar>(high);
}

// ---- Global levels -----------------------------------------------------

// The segment and tile of a block: blockIdx.x = segment * tiles + tile.
struct TileOf {
  int64_t q, start, end, mid;  // segment, its bounds, its right child's start
  int64_t first, last;         // this tile's entries
  __device__ TileOf(int64_t n, int level, int64_t tiles, int64_t tile_entries) {
    q = blockIdx.x / tiles;
    const int64_t tile = blockIdx.x - q * tiles;
    start = segment_start(n, level, q);
    end = segment_start(n, level, q + 1);
    mid = segment_start(n, level + 1, 2 * q + 1);
    first = min(end, start + tile * tile_entries);
    last = min(end, first + tile_entries);
  }
};

template <typename Scalar>
__global__ void make_keys(const Scalar* points, int64_t n, int dim,
                          typename OrderedKey<Scalar>::type* keys, int32_t* ids) {
  const int64_t g = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (g >= n * dim) return;
  const int64_t j = g / dim;
  const int d = static_cast<int>(g - j * dim);
  keys[d * n + j] = OrderedKey<Scalar>::of(points[g]);
  if (d == 0) ids[j] = static_cast<int32_t>(j);
}

// Every segment's key box, min and max folded in with atomics per tile
// (low starts at all ones, high at zero).
template <typename Key>
__global__ void segment_key_boxes(const Key* keys, int64_t n, int dim, int level, int64_t tiles,
                                  Key* low, Key* high) {
  const TileOf tile(n, level, tiles, kKdBuildTile);
  __shared__ Key warp_low[kWarps], warp_high[kWarps];
  const int warp = threadIdx.x / 32;
  for (int d = 0; d < dim; ++d) {
    Key lo = ~Key{0}, hi = 0;
    for (int64_t j = tile.first + threadIdx.x; j < tile.last; j += kBlock) {
      const Key key = keys[d * n + j];
      lo = key < lo ? key : lo;
      hi = key > hi ? key : hi;
    }
    lo = warp_min(lo), hi = warp_max(hi);
    if (threadIdx.x % 32 == 0) warp_low[warp] = lo, warp_high[warp] = hi;
    __syncthreads();
    if (threadIdx.x == 0 && tile.first < tile.last) {
      for (int w = 1; w < kWarps; ++w) {
        lo = warp_low[w] < lo ? warp_low[w] : lo;
        hi = warp_high[w] > hi ? warp_high[w] : hi;
      }
      atomicMin(low + tile.q * dim + d, lo);
      atomicMax(high + tile.q * dim + d, hi);
    }
    __syncthreads();
  }
}

// One thread per segment: its node box, and for a level that splits, its
// split dimension and the rule its select starts from.
template <typename Scalar>
__global__ void choose_splits(int64_t n, int dim, int level, bool splits,
                              const typename OrderedKey<Scalar>::type* low,
                              const typename OrderedKey<Scalar>::type* high, Scalar* boxes,
                              int32_t* split_dim,
                              SplitRule<typename OrderedKey<Scalar>::type>* rules) {
  using Key = typename OrderedKey<Scalar>::type;
  const int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (q >= (int64_t{1} << level)) return;
  const int64_t start = segment_start(n, level, q);
  const int64_t end = segment_start(n, level, q + 1);
  Scalar widest = -infinity<Scalar>();
  int widest_dim = 0;
  for (int d = 0; d < dim; ++d) {
    const bool empty = start == end;
    write_box<Scalar>(boxes, dim, level, q, d, empty, empty ? Key{0} : low[q * dim + d],
                      empty ? Key{0} : high[q * dim + d]);
    if (empty) continue;
    const Scalar spread = sub_rn(scalar_from_ordered_key<Scalar>(high[q * dim + d]),
                                 scalar_from_ordered_key<Scalar>(low[q * dim + d]));
    if (spread > widest) widest = spread, widest_dim = d;
  }
  if (!splits) return;
  split_dim[q] = widest_dim;
  const int64_t left_size = segment_start(n, level + 1, 2 * q + 1) - start;
  rules[q] = start == end ? start_rule<Key, 8>(Key{0}, Key{0}, 0)
                          : start_rule<Key, 8>(low[q * dim + widest_dim],
                                               high[q * dim + widest_dim], left_size);
}

// One 8-bit digit of every segment's select whose next digit is `pass`: the
// histogram of that digit over the keys that share the digits chosen so far.
template <typename Key>
__global__ void histogram_digit(const Key* keys, int64_t n, int level, int64_t blocks_per_segment,
                                const int32_t* split_dim, const SplitRule<Key>* rules, int pass,
                                uint32_t* histograms) {
  using D = Digits<Key, 8>;
  const TileOf tile(n, level, blocks_per_segment, kKdBuildTile * kHistogramTiles);
  const SplitRule<Key> rule = rules[tile.q];
  if (rule.pass != pass || tile.first >= tile.last) return;
  static_assert(kBlock == 256, "one thread per bin");
  __shared__ uint32_t bins[256];
  bins[threadIdx.x] = 0;
  __syncthreads();
  const Key* split_keys = keys + split_dim[tile.q] * n;
  const Key above = D::above(pass);
  const int shift = D::shift(pass);
  for (int64_t j = tile.first + threadIdx.x; j < tile.last; j += kBlock) {
    const Key key = split_keys[j];
    if ((key & above) == rule.pivot) atomicAdd(&bins[(key >> shift) & D::kMask], 1u);
  }
  __syncthreads();
  const uint32_t count = bins[threadIdx.x];
  if (count) atomicAdd(&histograms[tile.q * 256 + threadIdx.x], count);
}

// One warp per segment whose next digit is `pass`: the digit that holds the
// wanted rank, and the histogram cleared for the next pass.
template <typename Key>
__global__ void choose_digit(int64_t segments, int pass, uint32_t* histograms,
                             SplitRule<Key>* rules) {
  using D = Digits<Key, 8>;
  const int64_t q = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32;
  const unsigned lane = threadIdx.x % 32;
  if (q >= segments) return;
  SplitRule<Key> rule = rules[q];
  if (rule.pass != pass) return;
  uint32_t* bins = histograms + q * 256 + lane * 8;
  uint32_t counts[8], sum = 0;
  for (int b = 0; b < 8; ++b) counts[b] = bins[b], sum += counts[b], bins[b] = 0;
  uint32_t before = sum;  // inclusive scan over the lanes, then made exclusive
  for (int offset = 1; offset < 32; offset *= 2) {
    const uint32_t other = __shfl_up_sync(0xffffffffu, before, offset);
    if (lane >= static_cast<unsigned>(offset)) before += other;
  }
  before -= sum;
  const uint32_t rank = static_cast<uint32_t>(rule.rank);
  if (rank < before || rank >= before + sum) return;
  uint32_t r = rank - before;
  int b = 0;
  while (r >= counts[b]) r -= counts[b++];
  rule.pivot |= static_cast<Key>(lane * 8 + b) << D::shift(pass);
  rule.rank = static_cast<int32_t>(r);
  rule.pass = pass + 1;
  rules[q] = rule;
}

// Per tile, the keys below and equal to its segment's pivot.
template <typename Key>
__global__ void count_tile_sides(const Key* keys, int64_t n, int level, int64_t tiles,
                                 const int32_t* split_dim, const SplitRule<Key>* rules,
                                 unsigned long long* tile_counts) {
  const TileOf tile(n, level, tiles, kKdBuildTile);
  const Key pivot = rules[tile.q].pivot;
  const Key* split_keys = keys + split_dim[tile.q] * n;
  uint32_t lt = 0, eq = 0;
  for (int64_t j = tile.first + threadIdx.x; j < tile.last; j += kBlock) {
    const Key key = split_keys[j];
    lt += key < pivot, eq += key == pivot;
  }
  using Reduce = cub::BlockReduce<unsigned long long, kBlock>;
  __shared__ typename Reduce::TempStorage reduce;
  const unsigned long long total =
      Reduce(reduce).Sum(static_cast<unsigned long long>(lt) << 32 | eq);
  if (threadIdx.x == 0) tile_counts[blockIdx.x] = total;
}

// One block per segment: the packed counts (below << 32 | equal) of its tiles
// to their exclusive scan along the segment.
__global__ void scan_tile_sides(int64_t tiles, unsigned long long* tile_counts) {
  using Scan = cub::BlockScan<unsigned long long, kBlock>;
  __shared__ typename Scan::TempStorage scan;
  unsigned long long* counts = tile_counts + blockIdx.x * tiles;
  unsigned long long carried = 0;
  for (int64_t base = 0; base < tiles; base += kBlock) {
    const int64_t t = base + threadIdx.x;
    unsigned long long value = t < tiles ? counts[t] : 0, total = 0;
    Scan(scan).ExclusiveSum(value, value, total);
    if (t < tiles) counts[t] = carried + value;
    carried += total;
    __syncthreads();
  }
}

// The stable partition of every segment, tile by tile, from the keys and ids
// in `from` to `to`.
template <typename Key>
__global__ void partition_tiles(const Key* keys, const int32_t* ids, int64_t n, int dim, int level,
                                int64_t tiles, const int32_t* split_dim,
                                const SplitRule<Key>* rules, const unsigned long long* tile_before,
                                Key* to_keys, int32_t* to_ids) {
  const TileOf tile(n, level, tiles, kKdBuildTile);
  const SplitRule<Key> rule = rules[tile.q];
  const uint32_t need_eq = static_cast<uint32_t>(rule.rank + 1);
  const uint32_t mid = static_cast<uint32_t>(tile.mid - tile.start);
  const Key* split_keys = keys + split_dim[tile.q] * n;
  __shared__ uint32_t slots[2][kWarps];
  const int warp = threadIdx.x / 32;
  uint32_t lt_run = static_cast<uint32_t>(tile_before[blockIdx.x] >> 32);
  uint32_t eq_run = static_cast<uint32_t>(tile_before[blockIdx.x]);
  for (int row = 0; row < kTileRows; ++row) {
    const int64_t j = tile.first + int64_t{row} * kBlock + threadIdx.x;
    if (tile.first + int64_t{row} * kBlock >= tile.last) break;  // uniform over the block
    const bool valid = j < tile.last;
    const Key key = valid ? split_keys[j] : Key{0};
    const bool lt = valid && key < rule.pivot, eq = valid && key == rule.pivot;
    const RowPlace place =
        place_in_row(lt, eq, lt_run, eq_run, slots[row & 1], warp, kWarps, [] { __syncthreads(); });
    lt_run += place.lt_row, eq_run += place.eq_row;
    if (!valid) continue;
    const int64_t dst =
        tile.start +
        destination(lt, eq, place, static_cast<uint32_t>(j - tile.start), need_eq, mid);
    for (int d = 0; d < dim; ++d) to_keys[d * n + dst] = keys[d * n + j];
    to_ids[dst] = ids[j];
  }
}

// Bucket order from the keys when no level is built in shared memory.
template <typename Scalar>
__global__ void gather_buckets(const typename OrderedKey<Scalar>::type* keys, const int32_t* ids,
                               int64_t n, int dim, Scalar* points, int32_t* bucket_ids) {
  const int64_t g = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (g >= n * dim) return;
  const int64_t j = g / dim;
  const int d = static_cast<int>(g - j * dim);
  points[g] = scalar_from_ordered_key<Scalar>(keys[d * n + j]);
  if (d == 0) bucket_ids[j] = ids[j];
}

// ---- Subtrees in shared memory ------------------------------------------

// A group of warps that works on one sub-segment at a time; groups of one
// warp sync as a warp, larger ones on a named barrier of their own.
struct WarpGroup {
  int id, warps, threads, rank;  // rank: the thread's place in the group
  __device__ void sync() const {
    if (warps == 1)
      __syncwarp();
    else
      asm volatile("bar.sync %0, %1;" ::"r"(id + 1), "r"(threads) : "memory");
  }
};

// One block per segment of `level` (at most `capacity` points): boxes and
// splits of the levels level..levels of its subtree, then its points in
// bucket order. Dynamic shared memory: every dimension's keys and the ids,
// twice.
template <typename Scalar>
__global__ void __launch_bounds__(kBlock)
    build_subtrees(const typename OrderedKey<Scalar>::type* keys, const int32_t* ids, int64_t n,
                   int dim, int level, int levels, int64_t capacity, Scalar* boxes, Scalar* points,
                   int32_t* bucket_ids) {
  using Key = typename OrderedKey<Scalar>::type;
  using D = Digits<Key, 4>;
  extern __shared__ __align__(16) unsigned char shared[];
  const int64_t buffer_keys =
      capacity * dim;  // buffer b: keys from b * buffer_keys, ids from b * capacity
  Key* const keys_in_shared = reinterpret_cast<Key*>(shared);
  int32_t* const ids_in_shared = reinterpret_cast<int32_t*>(keys_in_shared + 2 * buffer_keys);
  __shared__ Key warp_low[kWarps], warp_high[kWarps];
  __shared__ uint32_t bins[kWarps][16];
  __shared__ uint32_t slots[2][kWarps];
  __shared__ SplitRule<Key> group_rule[kWarps];
  __shared__ int32_t group_dim[kWarps];

  const int64_t q0 = blockIdx.x;
  const int64_t start = segment_start(n, level, q0);
  const int64_t size = segment_start(n, level, q0 + 1) - start;
  for (int64_t g = threadIdx.x; g < size * dim; g += kBlock) {
    const int64_t d = g / size, j = g - d * size;
    keys_in_shared[d * capacity + j] = keys[d * n + start + j];
  }
  for (int64_t j = threadIdx.x; j < size; j += kBlock) ids_in_shared[j] = ids[start + j];
  __syncthreads();

  const int warp = threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  int current = 0;
  for (int depth = 0; level + depth <= levels; ++depth) {
    const int node_level = level + depth;
    const bool splits = node_level < levels;
    const int subs = 1 << depth;
    const int group_warps = max(1, kWarps / subs);
    const WarpGroup group{warp / group_warps, group_warps, group_warps * 32,
                          static_cast<int>(threadIdx.x) % (group_warps * 32)};
    const int groups = kWarps / group_warps;
    const int first_warp = group.id * group_warps;
    const Key* from_keys = keys_in_shared + current * buffer_keys;
    const int32_t* from_ids = ids_in_shared + current * capacity;
    Key* to_keys = keys_in_shared + (1 - current) * buffer_keys;
    int32_t* to_ids = ids_in_shared + (1 - current) * capacity;
    for (int sub = group.id; sub < subs; sub += groups) {
      const int64_t q = (q0 << depth) + sub;
      const uint32_t sub_start = static_cast<uint32_t>(segment_start(n, node_level, q) - start);
      const uint32_t sub_size =
          static_cast<uint32_t>(segment_start(n, node_level, q + 1) - start) - sub_start;
      // The box, and the widest dimension's key range.
      Key split_low = 0, split_high = 0;
      Scalar widest = -infinity<Scalar>();
      int widest_dim = 0;
      for (int d = 0; d < dim; ++d) {
        Key lo = ~Key{0}, hi = 0;
        for (uint32_t p = group.rank; p < sub_size; p += group.threads) {
          const Key key = from_keys[d * capacity + sub_start + p];
          lo = key < lo ? key : lo;
          hi = key > hi ? key : hi;
        }
        lo = warp_min(lo), hi = warp_max(hi);
        if (lane == 0) warp_low[warp] = lo, warp_high[warp] = hi;
        group.sync();
        if (group.rank == 0) {
          for (int w = first_warp; w < first_warp + group_warps; ++w) {
            lo = warp_low[w] < lo ? warp_low[w] : lo;
            hi = warp_high[w] > hi ? warp_high[w] : hi;
          }
          write_box<Scalar>(boxes, dim, node_level, q, d, sub_size == 0, lo, hi);
          if (sub_size > 0) {
            const Scalar spread =
                sub_rn(scalar_from_ordered_key<Scalar>(hi), scalar_from_ordered_key<Scalar>(lo));
            if (spread > widest) widest = spread, widest_dim = d, split_low = lo, split_high = hi;
          }
        }
        group.sync();
      }
      if (!splits) continue;
      const uint32_t mid =
          static_cast<uint32_t>(segment_start(n, node_level + 1, 2 * q + 1) - start) - sub_start;
      if (group.rank == 0) {
        group_rule[group.id] = start_rule<Key, 4>(split_low, split_high, mid);
        group_dim[group.id] = widest_dim;
      }
      group.sync();
      SplitRule<Key> rule = group_rule[group.id];
      const Key* split_keys = from_keys + group_dim[group.id] * capacity + sub_start;
      // The select, one 4-bit digit a pass.
      for (int pass = rule.pass; pass < D::kCount; ++pass) {
        if (group.rank < 16) bins[group.id][group.rank] = 0;
        group.sync();
        const Key above = D::above(pass);
        const int shift = D::shift(pass);
        for (uint32_t base = 0; base < sub_size; base += group.threads) {
          const uint32_t p = base + group.rank;
          int digit = 16;  // none
          if (p < sub_size) {
            const Key key = split_keys[p];
            if ((key & above) == rule.pivot) digit = static_cast<int>((key >> shift) & D::kMask);
          }
          const unsigned peers = __match_any_sync(0xffffffffu, digit);
          if (digit < 16 && lane == static_cast<unsigned>(__ffs(peers) - 1))
            atomicAdd(&bins[group.id][digit], static_cast<uint32_t>(__popc(peers)));
        }
        group.sync();
        if (group.rank == 0) {
          uint32_t r = static_cast<uint32_t>(rule.rank);
          int b = 0;
          while (r >= bins[group.id][b]) r -= bins[group.id][b++];
          rule.pivot |= static_cast<Key>(b) << shift;
          rule.rank = static_cast<int32_t>(r);
          group_rule[group.id] = rule;
        }
        group.sync();
        rule = group_rule[group.id];
      }
      // The stable partition into the other buffer.
      const uint32_t need_eq = static_cast<uint32_t>(rule.rank + 1);
      uint32_t lt_run = 0, eq_run = 0, row = 0;
      for (uint32_t base = 0; base < sub_size; base += group.threads, ++row) {
        const uint32_t p = base + group.rank;
        const bool valid = p < sub_size;
        const Key key = valid ? split_keys[p] : Key{0};
        const bool lt = valid && key < rule.pivot, eq = valid && key == rule.pivot;
        const RowPlace place =
            place_in_row(lt, eq, lt_run, eq_run, slots[row & 1] + first_warp, warp - first_warp,
                         group_warps, [&group] { group.sync(); });
        lt_run += place.lt_row, eq_run += place.eq_row;
        if (!valid) continue;
        const uint32_t dst = sub_start + destination(lt, eq, place, p, need_eq, mid);
        for (int d = 0; d < dim; ++d)
          to_keys[d * capacity + dst] = from_keys[d * capacity + sub_start + p];
        to_ids[dst] = from_ids[sub_start + p];
      }
      group.sync();
    }
    __syncthreads();
    if (splits) current = 1 - current;
  }
  for (int64_t g = threadIdx.x; g < size * dim; g += kBlock) {
    const int64_t j = g / dim, d = g - j * dim;
    points[(start + j) * dim + d] =
        scalar_from_ordered_key<Scalar>(keys_in_shared[current * buffer_keys + d * capacity + j]);
  }
  for (int64_t j = threadIdx.x; j < size; j += kBlock)
    bucket_ids[start + j] = ids_in_shared[current * capacity + j];
}

}  // namespace

template <typename Scalar>
void build_bucket_tree(BucketTree<Scalar>& t, cudaStream_t stream) {
  using Key = typename OrderedKey<Scalar>::type;
  const int64_t n = t.n;
  const int dim = t.dim;
  const int levels = t.levels;
  t.boxes.allocate(bucket_tree_box_floats(levels, dim));
  if (n == 0) {  // one empty leaf
    choose_splits<Scalar>
        <<<1, 1, 0, stream>>>(0, dim, 0, false, nullptr, nullptr, t.boxes.get(), nullptr, nullptr);
    check_launch("choose_splits");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (kd-tree build)");
    return;
  }
  t.points.allocate(static_cast<size_t>(n) * dim);
  t.ids.allocate(static_cast<size_t>(n));

  const size_t shared_budget = kdtree_build_shared_budget(device_limits().shared_bytes_optin);
  const BucketTreeBuildPlan plan =
      bucket_tree_build_plan(n, dim, levels, sizeof(Key), shared_budget);
  const size_t un = static_cast<size_t>(n), segments = static_cast<size_t>(plan.global_segments);
  DeviceArena arena(kdtree_build_scratch_bytes(n, dim, levels, sizeof(Key), shared_budget));
  Key* keys[2] = {arena.take<Key>(un * dim), arena.take<Key>(un * dim)};
  int32_t* ids[2] = {arena.take<int32_t>(un), arena.take<int32_t>(un)};
  Key* low = arena.take<Key>(segments * dim);
  Key* high = arena.take<Key>(segments * dim);
  int32_t* split_dim = arena.take<int32_t>(segments);
  SplitRule<Key>* rules = arena.take<SplitRule<Key>>(segments);
  uint32_t* histograms = arena.take<uint32_t>(segments * 256);
  unsigned long long* tile_counts =
      arena.take<unsigned long long>(static_cast<size_t>(plan.global_tiles));

  make_keys<Scalar>
      <<<grid_for(n * dim, kBlock), kBlock, 0, stream>>>(t.input.get(), n, dim, keys[0], ids[0]);
  check_launch("make_keys");
  if (segments)
    check(cudaMemsetAsync(histograms, 0, sizeof(uint32_t) * 256 * segments, stream),
          "cudaMemsetAsync (kd-tree build histograms)");
  int current = 0;
  for (int level = 0; level < plan.shared_level; ++level) {
    const int64_t nodes = int64_t{1} << level;
    const int64_t most = (n + nodes - 1) >> level;
    const int64_t tiles = (most + kKdBuildTile - 1) / kKdBuildTile;
    const unsigned blocks = static_cast<unsigned>(nodes * tiles);
    check(cudaMemsetAsync(low, 0xff, sizeof(Key) * nodes * dim, stream), "cudaMemsetAsync");
    check(cudaMemsetAsync(high, 0, sizeof(Key) * nodes * dim, stream), "cudaMemsetAsync");
    segment_key_boxes<Key>
        <<<blocks, kBlock, 0, stream>>>(keys[current], n, dim, level, tiles, low, high);
    check_launch("segment_key_boxes");
    const bool splits = level < levels;
    choose_splits<Scalar><<<grid_for(nodes, kBlock), kBlock, 0, stream>>>(
        n, dim, level, splits, low, high, t.boxes.get(), split_dim, rules);
    check_launch("choose_splits");
    if (!splits) break;
    const int64_t histogram_blocks =
        (most + kKdBuildTile * kHistogramTiles - 1) / (kKdBuildTile * kHistogramTiles);
    for (int pass = 0; pass < Digits<Key, 8>::kCount; ++pass) {
      histogram_digit<Key><<<static_cast<unsigned>(nodes * histogram_blocks), kBlock, 0, stream>>>(
          keys[current], n, level, histogram_blocks, split_dim, rules, pass, histograms);
      check_launch("histogram_digit");
      choose_digit<Key>
          <<<grid_for(nodes * 32, kBlock), kBlock, 0, stream>>>(nodes, pass, histograms, rules);
      check_launch("choose_digit");
    }
    count_tile_sides<Key><<<blocks, kBlock, 0, stream>>>(keys[current], n, level, tiles, split_dim,
                                                         rules, tile_counts);
    check_launch("count_tile_sides");
    scan_tile_sides<<<static_cast<unsigned>(nodes), kBlock, 0, stream>>>(tiles, tile_counts);
    check_launch("scan_tile_sides");
    partition_tiles<Key><<<blocks, kBlock, 0, stream>>>(keys[current], ids[current], n, dim, level,
                                                        tiles, split_dim, rules, tile_counts,
                                                        keys[1 - current], ids[1 - current]);
    check_launch("partition_tiles");
    current = 1 - current;
  }
  if (plan.shared_level <= levels) {
    const size_t shared = kdtree_build_shared_bytes(plan.shared_points, dim, sizeof(Key));
    allow_all_dynamic_shared(build_subtrees<Scalar>, "cudaFuncSetAttribute (build_subtrees)");
    build_subtrees<Scalar>
        <<<static_cast<unsigned>(int64_t{1} << plan.shared_level), kBlock, shared, stream>>>(
            keys[current], ids[current], n, dim, plan.shared_level, levels, plan.shared_points,
            t.boxes.get(), t.points.get(), t.ids.get());
    check_launch("build_subtrees");
  } else {
    gather_buckets<Scalar><<<grid_for(n * dim, kBlock), kBlock, 0, stream>>>(
        keys[current], ids[current], n, dim, t.points.get(), t.ids.get());
    check_launch("gather_buckets");
  }
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (kd-tree build)");
}

template void build_bucket_tree<float>(BucketTree<float>&, cudaStream_t);
template void build_bucket_tree<double>(BucketTree<double>&, cudaStream_t);

}  // namespace cuda
}  // namespace knn
