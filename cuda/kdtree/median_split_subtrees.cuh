// A median split's shared-memory tier (median_split.cuh): one block builds
// a segment's whole subtree, and the bucket order when no level is built
// there.

#pragma once

#include "median_split_rules.cuh"

namespace knn {
namespace cuda {
namespace median_split {

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

}  // namespace median_split
}  // namespace cuda
}  // namespace knn
