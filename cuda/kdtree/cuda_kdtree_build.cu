// GPU kd-tree build, byte-identical to the OpenMP build.
//
// Each axis is sorted once by (coordinate, index) with a stable CUB radix
// sort of order-preserving keys over ids in index order. Then, level by level,
// every array is kept in node order (the points of each node of the level are
// one contiguous segment, sorted by that array's axis):
//   - in the array of the level's split axis the median of each segment sits
//     at a known rank (TreeShape::median_rank): it becomes the node, the
//     points before it move to the left child's segment, those after it to
//     the right child's, with no search at all;
//   - the two other arrays are partitioned stably around the same medians,
//     tile by tile: segmented (left, right) counts give every point its slot.
// Entries carry their point, so no pass gathers from random addresses. The
// last levels, where every subtree fits in a warp, are finished in shared
// memory by one kernel.
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "../core/float4_point.cuh"
#include "../core/memory_model.h"
#include "../core/pinned_pool.h"
#include "../core/radix_sort_temp.cuh"
#include "../cuda_engine.h"
#include "cuda_kdtree_build.h"

namespace knn {
namespace cuda {
namespace {

constexpr int kBlock = 256;

__global__ void make_axis_keys(const Point* points, int64_t n, int dim, uint32_t* keys,
                               int32_t* ids) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  keys[i] = ordered_key(points[i].p[dim]);
  ids[i] = static_cast<int32_t>(i);
}

__global__ void gather_entries(const Point* points, const int32_t* order, int64_t n,
                               float4* entries) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (j >= n) return;
  const int32_t id = order[j];
  const Point p = points[id];
  entries[j] = make_float4(p.p[0], p.p[1], p.p[2], __int_as_float(id));
}

// Split-axis array of level `level`: medians become nodes, the rest move to
// their child's segment at their rank.
__global__ void place_on_split_axis(const float4* in, int64_t m, int level, TreeShape shape,
                                    float4* out, Node* tree) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (j >= m) return;
  const int64_t q = shape.segment_of(level, j);
  const int64_t rank = j - shape.segment_start(level, q);
  const int64_t median = shape.median_rank(level, q);
  const float4 e = in[j];
  if (rank == median) {
    const int64_t node = (int64_t{1} << level) - 1 + q;
    tree[node] = Node{{e.x, e.y, e.z},
                      static_cast<int>(shape.child_or_none(2 * node + 1)),
                      static_cast<int>(shape.child_or_none(2 * node + 2)),
                      id_of(e)};
  } else if (rank < median) {
    out[shape.segment_start(level + 1, 2 * q) + rank] = e;
  } else {
    out[shape.segment_start(level + 1, 2 * q + 1) + rank - median - 1] = e;
  }
}

// The other axes' arrays are partitioned stably around the same medians in
// tiles of kPartitionTile entries: one pass totals each tile's left and right
// entries, a small scan chains the tiles, a second pass places every entry.
// The counts are segmented - they restart at each node's first entry - so the
// scan hands each entry its offset inside its child's segment directly, and
// each pass reads the entries once (no per-entry scan array in memory).
struct SegmentedSum {
  __host__ __device__ SegmentCounts operator()(const SegmentCounts& a,
                                               const SegmentCounts& b) const {
    if (b.head) return b;
    return SegmentCounts{a.head, a.left + b.left, a.right + b.right};
  }
};

constexpr int kTileThreads = 256;
constexpr int kTileItems = static_cast<int>(kPartitionTile / kTileThreads);
static_assert(kTileItems * kTileThreads == kPartitionTile, "tile = threads x items");

enum Side { kLeft = 0, kRight = 1, kMedian = 2 };

// Entries [first, first + kTileItems) of one thread, with the side of its
// node's median each falls on and its segmented count.
struct ThreadEntries {
  float4 entry[kTileItems];
  int side[kTileItems];
  int64_t segment[kTileItems];
  SegmentCounts count[kTileItems];
};

__device__ void load_entries(const float4* entries, const Node* tree, const TreeShape& shape,
                             int level, int dim, int64_t m, ThreadEntries& t) {
  const int64_t first = blockIdx.x * kPartitionTile + int64_t{threadIdx.x} * kTileItems;
#pragma unroll
  for (int i = 0; i < kTileItems; ++i) {
    const int64_t j = first + i;
    t.side[i] = kMedian;
    t.count[i] = SegmentCounts{0, 0, 0};
    if (j >= m) continue;
    const int64_t q = shape.segment_of(level, j);
    const Node& node = tree[(int64_t{1} << level) - 1 + q];
    const float4 e = entries[j];
    t.entry[i] = e;
    t.segment[i] = q;
    if (id_of(e) != node.id)
      t.side[i] = before_on_axis(coord(e, dim), id_of(e), node.p[dim], node.id) ? kLeft : kRight;
    t.count[i] = SegmentCounts{j == shape.segment_start(level, q) ? 1u : 0u,
                               t.side[i] == kLeft ? 1u : 0u, t.side[i] == kRight ? 1u : 0u};
  }
}

using TileScan = cub::BlockScan<SegmentCounts, kTileThreads>;

__global__ void __launch_bounds__(kTileThreads)
    total_tile_sides(const float4* entries, const Node* tree, TreeShape shape, int level, int dim,
                     int64_t m, SegmentCounts* tile_totals) {
  __shared__ typename TileScan::TempStorage scan;
  ThreadEntries t;
  load_entries(entries, tree, shape, level, dim, m, t);
  SegmentCounts inclusive[kTileItems], total;
  TileScan(scan).InclusiveScan(t.count, inclusive, SegmentedSum(), total);
  if (threadIdx.x == 0) tile_totals[blockIdx.x] = total;
}

// Hands the block the tiles before it, combined (read by the first warp).
struct TilePrefix {
  SegmentCounts before;
  __device__ SegmentCounts operator()(const SegmentCounts&) const { return before; }
};

__global__ void __launch_bounds__(kTileThreads)
    place_tile_entries(const float4* entries, const Node* tree, TreeShape shape, int level, int dim,
                       int64_t m, const SegmentCounts* tile_prefixes, float4* out) {
  __shared__ typename TileScan::TempStorage scan;
  ThreadEntries t;
  load_entries(entries, tree, shape, level, dim, m, t);
  SegmentCounts before[kTileItems];
  TilePrefix prefix{tile_prefixes[blockIdx.x]};
  TileScan(scan).ExclusiveScan(t.count, before, SegmentedSum(), prefix);
#pragma unroll
  for (int i = 0; i < kTileItems; ++i) {
    if (t.side[i] == kMedian) continue;
    // Counts before an entry run back to its segment's first entry, unless
    // it is that first entry itself.
    const bool left = t.side[i] == kLeft;
    const unsigned offset = t.count[i].head ? 0u : (left ? before[i].left : before[i].right);
    out[shape.segment_start(level + 1, 2 * t.segment[i] + t.side[i]) + offset] = t.entry[i];
  }
}

// The last levels, once every node's points fit in one warp's shared memory:
// one warp per subtree finishes it with the same rules as the global passes
// (the subtree of a left-filled tree is left-filled, so its own TreeShape
// gives the same segments and ranks), without a kernel launch per level.
// Measured on the H100 at 10^7 points: 15.9 ms with 8 levels (255 points,
// 2 warps a block), 15.7 ms with 6 (63 points, 8 warps): fewer global passes
// against fewer warps per multiprocessor.
constexpr int kWarpSubtreeLevels = 8;
constexpr int kWarpSubtreeMax = (1 << kWarpSubtreeLevels) - 1;  // 255 points
constexpr int kLaneSlots = (kWarpSubtreeMax + 1) / 32;          // entries per lane
constexpr int kFinishWarps = 2;                                 // 2 x 18 KB of shared memory

struct FinishShared {
  float4 axis[4][kWarpSubtreeMax + 1];   // three axis arrays and a spare
  int before_left[kWarpSubtreeMax + 1];  // same-side entries before j
  int before_right[kWarpSubtreeMax + 1];
};

__global__ void __launch_bounds__(32 * kFinishWarps)
    finish_subtrees(float4* const* axes, int level0, TreeShape shape, Node* tree) {
  __shared__ FinishShared shared[kFinishWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t q = blockIdx.x * int64_t{kFinishWarps} + warp;
  if (q >= (int64_t{1} << level0)) return;
  const int64_t count = shape.subtree_size(level0, q);
  if (count == 0) return;
  FinishShared& sh = shared[warp];
  const int64_t start = shape.segment_start(level0, q);
  for (int a = 0; a < 3; ++a)
    for (int j = lane; j < count; j += 32) sh.axis[a][j] = axes[a][start + j];
  __syncwarp();
  int slot[3] = {0, 1, 2};  // which shared array holds each axis
  int spare = 3;
  const TreeShape local(count);
  for (int t = 0; t < local.levels; ++t) {
    const int level = level0 + t;
    const int dim = split_dim(level, 0);
    const int m = static_cast<int>(count - ((int64_t{1} << t) - 1));
    // Split axis: medians become nodes, the rest move by rank.
    for (int j = lane; j < m; j += 32) {
      const int ql = static_cast<int>(local.segment_of(t, j));
      const int rank = j - static_cast<int>(local.segment_start(t, ql));
      const int median = static_cast<int>(local.median_rank(t, ql));
      const float4 e = sh.axis[slot[dim]][j];
      if (rank == median) {
        const int64_t node = (int64_t{1} << level) - 1 + (q << t) + ql;
        tree[node] = Node{{e.x, e.y, e.z},
                          static_cast<int>(shape.child_or_none(2 * node + 1)),
                          static_cast<int>(shape.child_or_none(2 * node + 2)),
                          id_of(e)};
      } else if (rank < median) {
        sh.axis[spare][local.segment_start(t + 1, 2 * ql) + rank] = e;
      } else {
        sh.axis[spare][local.segment_start(t + 1, 2 * ql + 1) + rank - median - 1] = e;
      }
    }
    __syncwarp();
    {
      const int old = slot[dim];
      slot[dim] = spare;
      spare = old;
    }
    if (t + 1 == local.levels) break;
    // Other axes: a stable partition around the same medians, whose
    // (coordinate, id) the warp reads back from the nodes it just wrote.
    for (int other = 1; other <= 2; ++other) {
      const int a = (dim + other) % 3;
      int side[kLaneSlots];  // per chunk of 32: 0 left, 1 right, 2 the median
      int left_total = 0, right_total = 0;
#pragma unroll
      for (int c = 0; c < kLaneSlots; ++c) {
        const int j = lane + 32 * c;
        side[c] = 2;
        if (j < m) {
          const int ql = static_cast<int>(local.segment_of(t, j));
          const Node& node = tree[(int64_t{1} << level) - 1 + (q << t) + ql];
          const float4 e = sh.axis[slot[a]][j];
          const float value = coord(e, dim), split = node.p[dim];
          if (id_of(e) != node.id)
            side[c] = before_on_axis(value, id_of(e), split, node.id) ? 0 : 1;
        }
        const unsigned lt = (1u << lane) - 1;
        const unsigned left = __ballot_sync(0xffffffffu, side[c] == 0);
        const unsigned right = __ballot_sync(0xffffffffu, side[c] == 1);
        sh.before_left[j] = left_total + __popc(left & lt);
        sh.before_right[j] = right_total + __popc(right & lt);
        left_total += __popc(left);
        right_total += __popc(right);
      }
      __syncwarp();
#pragma unroll
      for (int c = 0; c < kLaneSlots; ++c) {
        const int j = lane + 32 * c;
        if (side[c] == 2) continue;
        const int ql = static_cast<int>(local.segment_of(t, j));
        const int seg = static_cast<int>(local.segment_start(t, ql));
        const int offset = side[c] == 0 ? sh.before_left[j] - sh.before_left[seg]
                                        : sh.before_right[j] - sh.before_right[seg];
        sh.axis[spare][local.segment_start(t + 1, 2 * ql + side[c]) + offset] = sh.axis[slot[a]][j];
      }
      __syncwarp();
      {
        const int old = slot[a];
        slot[a] = spare;
        spare = old;
      }
    }
  }
}

size_t scan_temp_bytes(int64_t tiles) {
  size_t bytes = 0;
  check(cub::DeviceScan::ExclusiveScan(nullptr, bytes, static_cast<const SegmentCounts*>(nullptr),
                                       static_cast<SegmentCounts*>(nullptr), SegmentedSum(),
                                       SegmentCounts{0, 0, 0}, tiles),
        "cub scan size");
  return bytes;
}

}  // namespace

BuildWorkspace::BuildWorkspace(int64_t n) : n_(n) {
  if (n == 0) return;
  axis_pointers_.allocate(3);
  for (auto& a : axis_) a.allocate(static_cast<size_t>(n));
  for (auto& k : keys_) k.allocate(static_cast<size_t>(n));
  for (auto& i : ids_) i.allocate(static_cast<size_t>(n));
  const int64_t tiles = partition_tiles(n);
  tile_totals_.allocate(static_cast<size_t>(tiles));
  tile_prefixes_.allocate(static_cast<size_t>(tiles));
  cub_temp_.allocate(checked_cub_temp(std::max(pair_sort_temp_bytes(n), scan_temp_bytes(tiles)),
                                      cub_temp_bytes(n)));
}

void build_kdtree_on_device(const Point* points, int64_t n, Node* tree, BuildWorkspace& ws,
                            cudaStream_t stream) {
  if (n == 0) return;
  if (n > ws.capacity()) fail(KNN_ERR_INTERNAL, "build workspace too small");
  const unsigned grid = grid_for(n, kBlock);
  size_t temp_bytes = ws.cub_temp_.size();

  // One array per axis, sorted by (coordinate, index).
  for (int dim = 0; dim < 3; ++dim) {
    make_axis_keys<<<grid, kBlock, 0, stream>>>(points, n, dim, ws.keys_[0].get(),
                                                ws.ids_[0].get());
    check_launch("make_axis_keys");
    cub::DoubleBuffer<uint32_t> keys(ws.keys_[0].get(), ws.keys_[1].get());
    cub::DoubleBuffer<int32_t> ids(ws.ids_[0].get(), ws.ids_[1].get());
    check(cub::DeviceRadixSort::SortPairs(ws.cub_temp_.get(), temp_bytes, keys, ids, n, 0, 32,
                                          stream),
          "cub::DeviceRadixSort::SortPairs");
    gather_entries<<<grid, kBlock, 0, stream>>>(points, ids.Current(), n, ws.axis_[dim].get());
    check_launch("gather_entries");
  }

  float4* axis[3] = {ws.axis_[0].get(), ws.axis_[1].get(), ws.axis_[2].get()};
  float4* spare = ws.axis_[3].get();
  const TreeShape shape(n);
  const int finish_level = std::max(0, shape.levels - kWarpSubtreeLevels);
  for (int level = 0; level < finish_level; ++level) {
    const int64_t m = n - ((int64_t{1} << level) - 1);  // points not yet placed
    const unsigned level_grid = grid_for(m, kBlock);
    const int dim = split_dim(level, 0);
    place_on_split_axis<<<level_grid, kBlock, 0, stream>>>(axis[dim], m, level, shape, spare, tree);
    check_launch("place_on_split_axis");
    std::swap(axis[dim], spare);
    const int64_t tiles = partition_tiles(m);
    for (int other = 1; other <= 2; ++other) {
      const int a = (dim + other) % 3;
      total_tile_sides<<<static_cast<unsigned>(tiles), kTileThreads, 0, stream>>>(
          axis[a], tree, shape, level, dim, m, ws.tile_totals_.get());
      check_launch("total_tile_sides");
      check(cub::DeviceScan::ExclusiveScan(ws.cub_temp_.get(), temp_bytes, ws.tile_totals_.get(),
                                           ws.tile_prefixes_.get(), SegmentedSum(),
                                           SegmentCounts{0, 0, 0}, tiles, stream),
            "cub::DeviceScan::ExclusiveScan");
      place_tile_entries<<<static_cast<unsigned>(tiles), kTileThreads, 0, stream>>>(
          axis[a], tree, shape, level, dim, m, ws.tile_prefixes_.get(), spare);
      check_launch("place_tile_entries");
      std::swap(axis[a], spare);
    }
  }
  check(cudaMemcpyAsync(ws.axis_pointers_.get(), axis, sizeof axis, cudaMemcpyHostToDevice, stream),
        "cudaMemcpyAsync");
  const int64_t subtrees = int64_t{1} << finish_level;
  finish_subtrees<<<grid_for(subtrees, kFinishWarps), 32 * kFinishWarps, 0, stream>>>(
      ws.axis_pointers_.get(), finish_level, shape, tree);
  check_launch("finish_subtrees");
}

void build_kdtree(const Point* points, int64_t n, Node* tree) {
  if (n == 0) return;
  Stream stream;
  DeviceBuffer<Point> d_points(static_cast<size_t>(n));
  DeviceBuffer<Node> d_tree(static_cast<size_t>(n));
  BuildWorkspace ws(n);
  upload_staged(d_points.get(), points, sizeof(Point) * static_cast<size_t>(n), stream.get());
  build_kdtree_on_device(d_points.get(), n, d_tree.get(), ws, stream.get());
  download_staged(tree, d_tree.get(), sizeof(Node) * static_cast<size_t>(n), stream.get());
}

}  // namespace cuda
}  // namespace knn
