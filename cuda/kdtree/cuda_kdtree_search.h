// Device-side kNN search of a resident tree, for the engine and for
// benchmarks that time the search with the data already on the device
// (CUDA types: .cu files only).
#pragma once

#include <cuda_runtime.h>

#include "../../common/kdtree_layout.h"
#include "../core/cuda_support.h"
#include "../core/memory_model.h"

namespace knn {
namespace cuda {

// A tree on the device: one (x, y, z, id) float4 per node in heap order and
// the bounding box of its points, as order-preserving keys (lo x,y,z, hi x,y,z).
// For the warp search the subtrees rooted at bucket_level are also stored as
// buckets: bucket q holds its subtree's nodes contiguously from
// TreeShape::segment_start(bucket_level, q), in the subtree's own heap order,
// and boxes[2q], boxes[2q+1] are its points' lower and upper corners.
// min_ids[i] is the least id in node i's subtree: a subtree
// whose bound only ties the k-th distance is skipped when none of its ids
// can beat the k-th's, so that equal points (all points equal, duplicates,
// distances that underflow to 0) cost O(k log n) a query, not O(n).
struct TreeView {
  const float4* nodes;
  int64_t n;
  int root_dim;
  const uint32_t* box_keys;
  int bucket_level;
  const float4* buckets;
  const float4* boxes;
  const int32_t* min_ids;  // laid out with the buckets
};

// Fills tree.buckets (n - (2^bucket_level - 1) entries) and tree.boxes
// (2 * 2^bucket_level entries) from tree.nodes.
void layout_buckets(const TreeView& tree, float4* buckets, float4* boxes, cudaStream_t stream);
// Fills min_ids (n entries) from tree.nodes, a level at a time from the bottom.
void subtree_min_ids(const TreeView& tree, int32_t* min_ids, cudaStream_t stream);

// The device data behind a TreeView: the nodes, the box of their points as
// order-preserving keys, and the buckets, boxes and least ids, laid out on
// demand (a classic tree that the grid answers never needs them).
struct PointTree {
  int64_t n = 0;
  int root_dim = 0;
  DeviceBuffer<float4> nodes;
  DeviceBuffer<uint32_t> box_keys{6};
  DeviceBuffer<float4> buckets;
  DeviceBuffer<float4> boxes;
  DeviceBuffer<int32_t> min_ids;

  TreeView view() const {
    return TreeView{nodes.get(),   n,           root_dim,     box_keys.get(), bucket_level_for(n),
                    buckets.get(), boxes.get(), min_ids.get()};
  }
  // Allocates and fills the buckets, boxes and least ids from the nodes, and
  // waits.
  void lay_out_buckets(cudaStream_t stream);
};

// Scratch of a search over up to `capacity` queries with up to k neighbours
// (sizes: memory_model.h).
class PointTreeScratch {
 public:
  PointTreeScratch(int64_t capacity, int k);
  int64_t capacity() const { return capacity_; }
  int k() const { return k_; }

 private:
  friend void search_on_device(const TreeView&, const Point*, int64_t, int, int32_t*, float*,
                               PointTreeScratch&, cudaStream_t);
  int64_t capacity_;
  int k_;
  DeviceBuffer<uint32_t> keys_[2];
  DeviceBuffer<int32_t> order_[2];
  DeviceBuffer<unsigned char> cub_temp_;
  DeviceBuffer<int32_t> heap_index_;  // k-lists of k > kMaxWarpK, interleaved
  DeviceBuffer<float> heap_dist_;
};

// The device side of the tree check (common/kdtree_layout.h): the smallest
// node failing its field or order checks, the smallest node repeating an
// earlier node's id, and per id the first node carrying it. Null first_bad:
// no check.
struct TreeCheck {
  TreeShape shape;
  int64_t offset;                    // global index of the first node converted
  unsigned long long* first_bad;     // starts at ~0
  unsigned long long* first_repeat;  // starts at ~0
  uint32_t* first_node;              // n entries, start at ~0
};

// Converts n host-layout nodes already on the device into the tree's float4
// nodes, widens the box keys (which must start as the empty box) and runs the
// per-node field checks.
void convert_nodes(const Node* nodes, int64_t n, float4* out, uint32_t* box_keys,
                   cudaStream_t stream, const TreeCheck& check);
// After all nodes are converted: the kd order and repeated ids.
void check_tree_order_and_ids(const float4* nodes, int64_t n, int root_dim, const TreeCheck& check,
                              cudaStream_t stream);
void reset_box(uint32_t* box_keys, cudaStream_t stream);

// kNN of m device queries: rows of k at i*k in `indices` and `sq_distances`
// (both device arrays of m*k; the search keeps its k-lists there for large k).
// Queries run in Morton order of the tree's box for memory locality.
void search_on_device(const TreeView& tree, const Point* queries, int64_t m, int k,
                      int32_t* indices, float* sq_distances, PointTreeScratch& scratch,
                      cudaStream_t stream);

}  // namespace cuda
}  // namespace knn
