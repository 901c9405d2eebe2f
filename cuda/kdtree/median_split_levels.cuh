// A median split's global tier (median_split.cuh): the levels whose
// segments do not fit a block's shared memory, each split over tiles of
// kSplitTile entries, one kernel per step.

#pragma once

#include "median_split_rules.cuh"

namespace knn {
namespace cuda {
namespace median_split {

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

}  // namespace median_split
}  // namespace cuda
}  // namespace knn
