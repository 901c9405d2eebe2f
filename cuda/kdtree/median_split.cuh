// The median-split machinery both kd-tree builds run on: the index API's
// bucket kd-tree (index_kdtree_build.cu) and the classic API's point-per-node
// tree (cuda_kdtree_build.cu). A tree type tells it, through a Splits policy
// (below), where a node's points lie, how many go left, whether the median
// itself stays in the node, and which side a node splits.
//
// The data. Every dimension's coordinates as order-preserving keys
// (OrderedKey: -0.0 and +0.0 get one key) in an array of their own, and the
// points' ids, all in node order: a node's points fill its segment. Within a
// segment they stay in index order, because every split is a stable
// partition of arrays that start in index order. So a tie in the split
// coordinate goes by index, by position, with no sort: the contract's
// (coordinate, index) order.
//
// One split. The median key v of the split dimension: a radix select that
// starts at the first digit where the segment's least and largest key differ
// (all points equal: none). Then, with e = the rank of the wanted point
// among the keys equal to v, a point goes left when its key is below v, or
// equals v with fewer than e equal keys before it in the segment (the
// bucket tree counts the wanted point itself to the left, the classic tree
// keeps it in the node). Both counts come from warp ballots row by row, so
// the partition also finds every point's place.
//
// Two tiers (split_build_plan, core/memory_model.h). Large segments are split
// level by level in global memory, each segment's work spread over tiles of
// kSplitTile entries: boxes, the select's digit histograms, counts per tile
// and the partition are one kernel each. Once the segments of a level fit in
// a block's shared memory (kKdBuildSharedSegmentPoints,
// core/launch_policy.h), one block loads a segment and builds its whole
// subtree there, each warp taking whole sub-segments of a level (so a warp
// syncs only with itself; the first levels of a subtree keep fewer warps
// busy).
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cstdint>

#include "../../common/float_math.h"
#include "../../engine/cancel.h"
#include "../core/cuda_support.h"
#include "../core/key_range.cuh"
#include "../core/knn_lists.cuh"
#include "../core/memory_model.h"
#include "../core/radix_sort_temp.cuh"

namespace knn {
namespace cuda {
namespace median_split {

constexpr int kTileRows = static_cast<int>(kSplitTile / kBlock);

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
  // The first digit in which two keys differ (diff = a ^ b != 0).
  __device__ static int first_differing(Key diff) {
    const int msb = sizeof(Key) == 4 ? 31 - __clz(static_cast<unsigned>(diff))
                                     : 63 - __clzll(static_cast<long long>(diff));
    return (kKeyBits - 1 - msb) / kBits;
  }
};

// A segment's select and, once it is done, its split. While the select runs,
// pivot holds the digits chosen so far and `rank` the rank of the wanted
// point among the keys that share them; at the end pivot is its key and
// rank its rank among the keys equal to it. rank -1: no point is wanted (an
// empty left half, or an empty segment), pivot 0 (no finite coordinate has
// key 0).
template <typename Key>
struct SplitRule {
  Key pivot;
  int32_t rank;
  int32_t pass;  // the select's next digit; the digit count when it is done
};
static_assert(sizeof(SplitRule<unsigned long long>) <= kSplitRuleBytes, "rule size");

// The rule a select starts from, given the split dimension's key range
// [low, high] and the wanted point's rank in (coordinate, index) order.
template <typename Key, int kBits>
__device__ SplitRule<Key> start_rule(Key low, Key high, int64_t wanted) {
  using D = Digits<Key, kBits>;
  if (wanted < 0) return SplitRule<Key>{Key{0}, -1, D::kCount};
  const Key diff = low ^ high;
  const int32_t rank = static_cast<int32_t>(wanted);
  if (diff == 0) return SplitRule<Key>{low, rank, D::kCount};
  const int pass = D::first_differing(diff);
  return SplitRule<Key>{static_cast<Key>(low & D::above(pass)), rank, pass};
}

// Counts of keys below and equal to the pivot: before one entry of a row
// (from the segment's start) and in the whole row.
struct RowPlace {
  uint32_t lt_before, eq_before;
  uint32_t lt_row, eq_row;
};

// The counts of one warp's row of 32 entries; lt_run and eq_run count the
// keys below and equal to the pivot before the row.
__device__ inline RowPlace place_in_warp_row(bool lt, bool eq, uint32_t lt_run, uint32_t eq_run) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned lt_ballot = __ballot_sync(0xffffffffu, lt);
  const unsigned eq_ballot = __ballot_sync(0xffffffffu, eq);
  const unsigned below = (1u << lane) - 1;
  return RowPlace{lt_run + __popc(lt_ballot & below), eq_run + __popc(eq_ballot & below),
                  static_cast<uint32_t>(__popc(lt_ballot)),
                  static_cast<uint32_t>(__popc(eq_ballot))};
}

// The counts of a block's row of kBlock entries, the warps' counts combined
// through `slots` (one packed count per warp; the caller alternates two sets
// of slots between rows, so one barrier a row suffices).
__device__ inline RowPlace place_in_block_row(bool lt, bool eq, uint32_t lt_run, uint32_t eq_run,
                                              uint32_t* slots) {
  const int warp = threadIdx.x / 32;
  RowPlace place = place_in_warp_row(lt, eq, lt_run, eq_run);
  if (threadIdx.x % 32 == 0) slots[warp] = place.lt_row | place.eq_row << 16;
  __syncthreads();
  uint32_t lt_row = 0, eq_row = 0;
  for (int w = 0; w < kBlockWarps; ++w) {
    const uint32_t packed = slots[w];
    if (w == warp) place.lt_before += lt_row, place.eq_before += eq_row;
    lt_row += packed & 0xffffu, eq_row += packed >> 16;
  }
  place.lt_row = lt_row, place.eq_row = eq_row;
  return place;
}

// Where the entry at position p of a split segment goes: to the node itself,
// or to its place within the left or the right child's segment. `equal_left`
// is how many keys equal to the pivot go left.
struct Destination {
  enum Side { kLeft, kRight, kNode } side;
  uint32_t offset;
};
template <bool kNodePoints>
__device__ Destination destination(bool lt, bool eq, const RowPlace& place, uint32_t p,
                                   uint32_t equal_left) {
  const uint32_t left_before = place.lt_before + min(place.eq_before, equal_left);
  if (lt || (eq && place.eq_before < equal_left)) return {Destination::kLeft, left_before};
  if (kNodePoints && eq && place.eq_before == equal_left) return {Destination::kNode, 0};
  const uint32_t node_before = kNodePoints && place.eq_before > equal_left ? 1u : 0u;
  return {Destination::kRight, p - left_before - node_before};
}

// How many keys equal to the pivot go left once the select is done.
template <class Splits, typename Key>
__device__ uint32_t equal_left_of(const SplitRule<Key>& rule) {
  return static_cast<uint32_t>(max(0, rule.rank + (Splits::kNodePoints ? 0 : 1)));
}

// The (coordinate, index) rank of the point a segment's select wants: the
// last point of the left half, or the node's own point.
template <class Splits>
__device__ int64_t wanted_rank(const Splits& s, int level, int64_t q, int64_t size) {
  if (size == 0) return -1;
  return Splits::kNodePoints ? s.left_size(level, q) : s.left_size(level, q) - 1;
}

// ---- Global levels -----------------------------------------------------

// The segment and tile of a block: blockIdx.x = segment * tiles + tile.
struct TileOf {
  int64_t q, start, end;  // segment and its bounds in the level's arrays
  int64_t first, last;    // this tile's entries
  template <class Splits>
  __device__ TileOf(const Splits& s, int level, int64_t tiles, int64_t tile_entries) {
    q = blockIdx.x / tiles;
    const int64_t tile = blockIdx.x - q * tiles;
    start = s.start(level, q);
    end = s.start(level, q + 1);
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

// Every segment's least and largest key in the dimensions [d0, d1) (all of
// them for node boxes, the split one alone otherwise), folded in with atomics
// per tile (low starts at all ones, high at zero; entries q * dims + d).
template <class Splits, typename Key>
__global__ void segment_key_ranges(Splits s, const Key* keys, int64_t n, int dims, int level,
                                   int64_t tiles, Key* low, Key* high) {
  const TileOf tile(s, level, tiles, kSplitTile);
  using Reduce = cub::BlockReduce<KeyRange<Key>, kBlock>;
  __shared__ typename Reduce::TempStorage reduce;
  int d0 = 0, d1 = dims;
  if constexpr (!Splits::kBoxes) d0 = s.split_dim(level), d1 = d0 + 1;
  for (int d = d0; d < d1; ++d) {
    KeyRange<Key> range = KeyRange<Key>::empty();
    for (int64_t j = tile.first + threadIdx.x; j < tile.last; j += kBlock)
      range.add(keys[d * n + j]);
    range = Reduce(reduce).Reduce(range, MergeKeyRanges<Key>());
    if (threadIdx.x == 0 && tile.first < tile.last) {
      atomicMin(low + tile.q * dims + d, range.low);
      atomicMax(high + tile.q * dims + d, range.high);
    }
    __syncthreads();  // the next dimension reuses `reduce`
  }
}

// One thread per segment: its node box (Splits::kBoxes), and for a level
// that splits, its split dimension and the rule its select starts from.
template <typename Scalar, class Splits>
__global__ void choose_splits(Splits s, int dims, int level,
                              const typename OrderedKey<Scalar>::type* low,
                              const typename OrderedKey<Scalar>::type* high, int32_t* split_dim,
                              SplitRule<typename OrderedKey<Scalar>::type>* rules) {
  using Key = typename OrderedKey<Scalar>::type;
  const int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (q >= (int64_t{1} << level)) return;
  const int64_t size = s.start(level, q + 1) - s.start(level, q);
  int widest_dim = 0;
  if constexpr (Splits::kBoxes) {
    Scalar widest = -infinity<Scalar>();
    for (int d = 0; d < dims; ++d) {
      const Key lo = size ? low[q * dims + d] : Key{0}, hi = size ? high[q * dims + d] : Key{0};
      s.write_box(level, q, d, size == 0, lo, hi);
      if (size == 0) continue;
      const Scalar spread =
          sub_rn(scalar_from_ordered_key<Scalar>(hi), scalar_from_ordered_key<Scalar>(lo));
      if (spread > widest) widest = spread, widest_dim = d;
    }
  } else {
    widest_dim = s.split_dim(level);
  }
  if (!s.splits(level)) return;
  split_dim[q] = widest_dim;
  const int64_t wanted = wanted_rank(s, level, q, size);
  rules[q] = wanted < 0 ? start_rule<Key, 8>(Key{0}, Key{0}, -1)
                        : start_rule<Key, 8>(low[q * dims + widest_dim],
                                             high[q * dims + widest_dim], wanted);
}

// One 8-bit digit of every segment's select whose next digit is `pass`: the
// histogram of that digit over the keys that share the digits chosen so far.
template <class Splits, typename Key>
__global__ void histogram_digit(Splits s, const Key* keys, int64_t n, int level,
                                int64_t blocks_per_segment, const int32_t* split_dim,
                                const SplitRule<Key>* rules, int pass, uint32_t* histograms) {
  using D = Digits<Key, 8>;
  const TileOf tile(s, level, blocks_per_segment, kSplitTile * kHistogramTiles);
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

// Per tile, the keys below and equal to its segment's pivot, packed
// (below << 32 | equal).
template <class Splits, typename Key>
__global__ void count_tile_sides(Splits s, const Key* keys, int64_t n, int level, int64_t tiles,
                                 const int32_t* split_dim, const SplitRule<Key>* rules,
                                 unsigned long long* tile_counts) {
  const TileOf tile(s, level, tiles, kSplitTile);
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

// One block per segment: its tiles' packed counts to their exclusive scan
// along the segment. (Static: both builds include this header.)
static __global__ void scan_tile_sides(int64_t tiles, unsigned long long* tile_counts) {
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
// of this level's arrays to the next level's (the node's own point, where
// the tree keeps one, to the node).
template <class Splits, typename Key>
__global__ void partition_tiles(Splits s, const Key* keys, const int32_t* ids, int64_t n, int dims,
                                int level, int64_t tiles, const int32_t* split_dim,
                                const SplitRule<Key>* rules, const unsigned long long* tile_before,
                                Key* to_keys, int32_t* to_ids) {
  const TileOf tile(s, level, tiles, kSplitTile);
  const SplitRule<Key> rule = rules[tile.q];
  const uint32_t equal_left = equal_left_of<Splits>(rule);
  const int64_t left_start = s.start(level + 1, 2 * tile.q);
  const int64_t right_start = s.start(level + 1, 2 * tile.q + 1);
  const Key* split_keys = keys + split_dim[tile.q] * n;
  __shared__ uint32_t slots[2][kBlockWarps];
  uint32_t lt_run = static_cast<uint32_t>(tile_before[blockIdx.x] >> 32);
  uint32_t eq_run = static_cast<uint32_t>(tile_before[blockIdx.x]);
  for (int row = 0; row < kTileRows; ++row) {
    if (tile.first + int64_t{row} * kBlock >= tile.last) break;  // uniform over the block
    const int64_t j = tile.first + int64_t{row} * kBlock + threadIdx.x;
    const bool valid = j < tile.last;
    const Key key = valid ? split_keys[j] : Key{0};
    const bool lt = valid && key < rule.pivot, eq = valid && key == rule.pivot;
    const RowPlace place = place_in_block_row(lt, eq, lt_run, eq_run, slots[row & 1]);
    lt_run += place.lt_row, eq_run += place.eq_row;
    if (!valid) continue;
    const Destination to = destination<Splits::kNodePoints>(
        lt, eq, place, static_cast<uint32_t>(j - tile.start), equal_left);
    if constexpr (Splits::kNodePoints) {
      if (to.side == Destination::kNode) {
        s.place_node(level, tile.q, ids[j]);
        continue;
      }
    }
    const int64_t dst = (to.side == Destination::kLeft ? left_start : right_start) + to.offset;
    for (int d = 0; d < dims; ++d) to_keys[d * n + dst] = keys[d * n + j];
    to_ids[dst] = ids[j];
  }
}

// ---- Subtrees in shared memory ------------------------------------------

// The last levels of a tree that keeps a point in every node, once every
// subtree of `level` holds at most 32 points: one warp per subtree, a point
// per lane that never moves. At each level a lane's rank among the lanes of
// its node, by comparison in (key, id) order, tells whether its point is the
// node's or which child it goes on to. (The radix passes would cost more
// than these 32 comparisons on such small segments.)
template <class Splits, typename Key>
__device__ void place_small_subtrees(const Splits& s, int level, int64_t first_q, int subs,
                                     const Key* keys, const int32_t* ids, int64_t capacity,
                                     int64_t base) {
  const int lane = threadIdx.x % 32;
  for (int sub = threadIdx.x / 32; sub < subs; sub += kBlockWarps) {
    const int64_t q = first_q + sub;
    const int64_t start = s.start(level, q) - base;
    const int size = static_cast<int>(s.start(level, q + 1) - base - start);
    const bool holds = lane < size;
    const int32_t id = holds ? ids[start + lane] : -1;
    int64_t node = holds ? q : -1;  // the lane's node at the level, -1 once placed
    for (int node_level = level; node_level <= s.last_level(); ++node_level) {
      const Key key = holds ? keys[s.split_dim(node_level) * capacity + start + lane] : Key{0};
      int64_t rank = 0;
      for (int i = 0; i < size; ++i) {
        const int64_t other_node = __shfl_sync(0xffffffffu, node, i);
        const Key other_key = __shfl_sync(0xffffffffu, key, i);
        const int32_t other_id = __shfl_sync(0xffffffffu, id, i);
        rank += other_node == node && (other_key < key || (other_key == key && other_id < id));
      }
      if (node < 0) continue;
      const int64_t wanted = s.left_size(node_level, node);
      if (rank == wanted) {
        s.place_node(node_level, node, id);
        node = -1;
      } else {
        node = 2 * node + (rank > wanted ? 1 : 0);
      }
    }
  }
}

// One block per segment of `level` (at most `capacity` points): the levels
// level..s.last_level() of its subtree (boxes, splits, nodes), then, for the
// bucket tree, its points in bucket order. Each warp takes whole
// sub-segments, so it syncs only with itself. Dynamic shared memory: every
// dimension's keys and the ids, twice.
template <typename Scalar, class Splits>
__global__ void __launch_bounds__(kBlock)
    split_subtrees(Splits s, const typename OrderedKey<Scalar>::type* keys, const int32_t* ids,
                   int64_t n, int dims, int level, int64_t capacity) {
  using Key = typename OrderedKey<Scalar>::type;
  using D = Digits<Key, 4>;
  extern __shared__ __align__(16) unsigned char shared[];
  const int64_t buffer_keys = capacity * dims;  // buffer b: keys from b * buffer_keys
  Key* const keys_in_shared = reinterpret_cast<Key*>(shared);
  int32_t* const ids_in_shared = reinterpret_cast<int32_t*>(keys_in_shared + 2 * buffer_keys);
  __shared__ uint32_t warp_bins[kBlockWarps][16];
  __shared__ SplitRule<Key> warp_rule[kBlockWarps];

  const int64_t q0 = blockIdx.x;
  {
    const int64_t start = s.start(level, q0);
    const int64_t size = s.start(level, q0 + 1) - start;
    for (int64_t g = threadIdx.x; g < size * dims; g += kBlock) {
      const int64_t d = g / size, j = g - d * size;
      keys_in_shared[d * capacity + j] = keys[d * n + start + j];
    }
    for (int64_t j = threadIdx.x; j < size; j += kBlock) ids_in_shared[j] = ids[start + j];
  }
  __syncthreads();

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  uint32_t* const bins = warp_bins[warp];
  int current = 0;
  for (int depth = 0; level + depth <= s.last_level(); ++depth) {
    const int node_level = level + depth;
    const bool splits = s.splits(node_level);
    // Positions relative to where the block's points start at this level
    // and the next.
    const int64_t base = s.start(node_level, q0 << depth);
    const int64_t next_base = splits ? s.start(node_level + 1, q0 << (depth + 1)) : 0;
    if constexpr (Splits::kNodePoints) {
      if (s.most_points(node_level) <= 32) {
        place_small_subtrees(s, node_level, q0 << depth, 1 << depth,
                             keys_in_shared + current * buffer_keys,
                             ids_in_shared + current * capacity, capacity, base);
        break;
      }
    }
    const Key* from_keys = keys_in_shared + current * buffer_keys;
    const int32_t* from_ids = ids_in_shared + current * capacity;
    Key* to_keys = keys_in_shared + (1 - current) * buffer_keys;
    int32_t* to_ids = ids_in_shared + (1 - current) * capacity;
    for (int sub = warp; sub < (1 << depth); sub += kBlockWarps) {
      const int64_t q = (q0 << depth) + sub;
      const uint32_t sub_start = static_cast<uint32_t>(s.start(node_level, q) - base);
      const uint32_t sub_size =
          static_cast<uint32_t>(s.start(node_level, q + 1) - base) - sub_start;
      // The key ranges (the node box, or the split dimension's alone); every
      // lane ends with the same split and range.
      int split = 0, d_end = dims;
      if constexpr (!Splits::kBoxes) split = s.split_dim(node_level), d_end = split + 1;
      Key split_low = 0, split_high = 0;
      Scalar widest = -infinity<Scalar>();
      for (int d = Splits::kBoxes ? 0 : split; d < d_end; ++d) {
        KeyRange<Key> range = KeyRange<Key>::empty();
        for (uint32_t p = lane; p < sub_size; p += 32)
          range.add(from_keys[d * capacity + sub_start + p]);
        range = warp_key_range(range);
        const Key lo = range.low, hi = range.high;
        if constexpr (Splits::kBoxes) {
          if (lane == 0) s.write_box(node_level, q, d, sub_size == 0, lo, hi);
          if (sub_size > 0) {
            const Scalar spread =
                sub_rn(scalar_from_ordered_key<Scalar>(hi), scalar_from_ordered_key<Scalar>(lo));
            if (spread > widest) widest = spread, split = d, split_low = lo, split_high = hi;
          }
        } else {
          split_low = lo, split_high = hi;
        }
      }
      if (!splits) continue;
      SplitRule<Key> rule =
          start_rule<Key, 4>(split_low, split_high, wanted_rank(s, node_level, q, sub_size));
      const Key* split_keys = from_keys + split * capacity + sub_start;
      // The select, one 4-bit digit a pass.
      for (int pass = rule.pass; pass < D::kCount; ++pass) {
        if (lane < 16) bins[lane] = 0;
        __syncwarp();
        const Key above = D::above(pass);
        const int shift = D::shift(pass);
        for (uint32_t row = 0; row < sub_size; row += 32) {
          const uint32_t p = row + lane;
          int digit = 16;  // none
          if (p < sub_size) {
            const Key key = split_keys[p];
            if ((key & above) == rule.pivot) digit = static_cast<int>((key >> shift) & D::kMask);
          }
          const unsigned peers = __match_any_sync(0xffffffffu, digit);
          if (digit < 16 && lane == __ffs(peers) - 1)
            atomicAdd(&bins[digit], static_cast<uint32_t>(__popc(peers)));
        }
        __syncwarp();
        if (lane == 0) {
          uint32_t r = static_cast<uint32_t>(rule.rank);
          int b = 0;
          while (r >= bins[b]) r -= bins[b++];
          rule.pivot |= static_cast<Key>(b) << shift;
          rule.rank = static_cast<int32_t>(r);
          warp_rule[warp] = rule;
        }
        __syncwarp();
        rule = warp_rule[warp];
      }
      // The stable partition into the other buffer.
      const uint32_t equal_left = equal_left_of<Splits>(rule);
      const uint32_t left_start = static_cast<uint32_t>(s.start(node_level + 1, 2 * q) - next_base);
      const uint32_t right_start =
          static_cast<uint32_t>(s.start(node_level + 1, 2 * q + 1) - next_base);
      uint32_t lt_run = 0, eq_run = 0;
      for (uint32_t row = 0; row < sub_size; row += 32) {
        const uint32_t p = row + lane;
        const bool valid = p < sub_size;
        const Key key = valid ? split_keys[p] : Key{0};
        const bool lt = valid && key < rule.pivot, eq = valid && key == rule.pivot;
        const RowPlace place = place_in_warp_row(lt, eq, lt_run, eq_run);
        lt_run += place.lt_row, eq_run += place.eq_row;
        if (!valid) continue;
        const Destination to = destination<Splits::kNodePoints>(lt, eq, place, p, equal_left);
        if constexpr (Splits::kNodePoints) {
          if (to.side == Destination::kNode) {
            s.place_node(node_level, q, from_ids[sub_start + p]);
            continue;
          }
        }
        const uint32_t dst = (to.side == Destination::kLeft ? left_start : right_start) + to.offset;
        for (int d = 0; d < dims; ++d)
          to_keys[d * capacity + dst] = from_keys[d * capacity + sub_start + p];
        to_ids[dst] = from_ids[sub_start + p];
      }
    }
    __syncthreads();
    if (splits) current = 1 - current;
  }
  if constexpr (Splits::kBucketOrder) {
    const int64_t start = s.start(level, q0);  // bucket positions never move
    const int64_t size = s.start(level, q0 + 1) - start;
    for (int64_t j = threadIdx.x; j < size; j += kBlock)
      s.place_bucket_point(start + j, ids_in_shared[current * capacity + j]);
  }
}

// Bucket order from the last level's ids when no level is built in shared
// memory.
template <class Splits>
__global__ void place_bucket_points(Splits s, const int32_t* ids, int64_t n) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (j < n) s.place_bucket_point(j, ids[j]);
}

// ---- The build ----------------------------------------------------------

// The scratch of one build, carved from one arena by the plan.
template <typename Key>
struct Scratch {
  Key* keys[2];
  int32_t* ids[2];
  Key *low, *high;  // per segment and dimension
  int32_t* split_dim;
  SplitRule<Key>* rules;
  uint32_t* histograms;  // 256 per segment
  unsigned long long* tile_counts;

  Scratch(DeviceArena& arena, int64_t n, int dims, const SplitBuildPlan& plan) {
    const size_t un = static_cast<size_t>(n), segments = static_cast<size_t>(plan.global_segments);
    keys[0] = arena.take<Key>(un * dims), keys[1] = arena.take<Key>(un * dims);
    ids[0] = arena.take<int32_t>(un), ids[1] = arena.take<int32_t>(un);
    low = arena.take<Key>(segments * dims), high = arena.take<Key>(segments * dims);
    split_dim = arena.take<int32_t>(segments);
    rules = arena.take<SplitRule<Key>>(segments);
    histograms = arena.take<uint32_t>(segments * 256);
    tile_counts = arena.take<unsigned long long>(static_cast<size_t>(plan.global_tiles));
  }
};

// Builds the tree of n >= 1 points (rows of `dims` scalars on the device)
// that `s` describes by `plan`, its scratch taken from `arena` (at least
// split_build_scratch_bytes; handed back on return), queued on `stream`,
// which it waits for.
template <typename Scalar, class Splits>
void build(const Splits& s, const Scalar* points, int64_t n, int dims, const SplitBuildPlan& plan,
           DeviceArena& arena, cudaStream_t stream) {
  using Key = typename OrderedKey<Scalar>::type;
  const size_t arena_mark = arena.mark();
  const Scratch<Key> w(arena, n, dims, plan);
  make_keys<Scalar>
      <<<grid_for(n * dims, kBlock), kBlock, 0, stream>>>(points, n, dims, w.keys[0], w.ids[0]);
  check_launch("make_keys");
  if (plan.global_segments)
    check(cudaMemsetAsync(w.histograms, 0, sizeof(uint32_t) * 256 * plan.global_segments, stream),
          "cudaMemsetAsync (kd-tree build histograms)");
  int current = 0;
  const volatile int* cancel = cancel_flag();
  for (int level = 0; level < plan.shared_level; ++level) {
    // Before queueing a level: a throw leaves queued work to the fenced
    // blocks of the arena (core/device_blocks.cu).
    throw_if_cancelled(cancel);
    const int64_t nodes = int64_t{1} << level;
    const int64_t most = s.most_points(level);
    const int64_t tiles = (most + kSplitTile - 1) / kSplitTile;
    const unsigned blocks = static_cast<unsigned>(nodes * tiles);
    check(cudaMemsetAsync(w.low, 0xff, sizeof(Key) * nodes * dims, stream), "cudaMemsetAsync");
    check(cudaMemsetAsync(w.high, 0, sizeof(Key) * nodes * dims, stream), "cudaMemsetAsync");
    segment_key_ranges<<<blocks, kBlock, 0, stream>>>(s, w.keys[current], n, dims, level, tiles,
                                                      w.low, w.high);
    check_launch("segment_key_ranges");
    choose_splits<Scalar><<<grid_for(nodes, kBlock), kBlock, 0, stream>>>(
        s, dims, level, w.low, w.high, w.split_dim, w.rules);
    check_launch("choose_splits");
    if (!s.splits(level)) break;
    const int64_t histogram_blocks =
        (most + kSplitTile * kHistogramTiles - 1) / (kSplitTile * kHistogramTiles);
    for (int pass = 0; pass < Digits<Key, 8>::kCount; ++pass) {
      histogram_digit<<<static_cast<unsigned>(nodes * histogram_blocks), kBlock, 0, stream>>>(
          s, w.keys[current], n, level, histogram_blocks, w.split_dim, w.rules, pass, w.histograms);
      check_launch("histogram_digit");
      choose_digit<Key>
          <<<grid_for(nodes * 32, kBlock), kBlock, 0, stream>>>(nodes, pass, w.histograms, w.rules);
      check_launch("choose_digit");
    }
    count_tile_sides<<<blocks, kBlock, 0, stream>>>(s, w.keys[current], n, level, tiles,
                                                    w.split_dim, w.rules, w.tile_counts);
    check_launch("count_tile_sides");
    scan_tile_sides<<<static_cast<unsigned>(nodes), kBlock, 0, stream>>>(tiles, w.tile_counts);
    check_launch("scan_tile_sides");
    partition_tiles<<<blocks, kBlock, 0, stream>>>(
        s, w.keys[current], w.ids[current], n, dims, level, tiles, w.split_dim, w.rules,
        w.tile_counts, w.keys[1 - current], w.ids[1 - current]);
    check_launch("partition_tiles");
    current = 1 - current;
  }
  if (plan.shared_level <= s.last_level()) {
    const size_t shared = split_build_shared_bytes(plan.shared_points, dims, sizeof(Key));
    allow_all_dynamic_shared(split_subtrees<Scalar, Splits>,
                             "cudaFuncSetAttribute (split_subtrees)");
    split_subtrees<Scalar>
        <<<static_cast<unsigned>(int64_t{1} << plan.shared_level), kBlock, shared, stream>>>(
            s, w.keys[current], w.ids[current], n, dims, plan.shared_level, plan.shared_points);
    check_launch("split_subtrees");
  } else if constexpr (Splits::kBucketOrder) {
    place_bucket_points<<<grid_for(n, kBlock), kBlock, 0, stream>>>(s, w.ids[current], n);
    check_launch("place_bucket_points");
  }
  // The scratch goes back on return: wait for the work that uses it.
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (kd-tree build)");
  arena.rewind(arena_mark);
}

}  // namespace median_split
}  // namespace cuda
}  // namespace knn
