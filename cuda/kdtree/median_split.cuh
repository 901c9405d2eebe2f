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

#include "median_split_levels.cuh"
#include "median_split_rules.cuh"
#include "median_split_subtrees.cuh"

namespace knn {
namespace cuda {
namespace median_split {

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
