// GPU kd-tree build, byte-identical to the OpenMP build, on the median-split
// machinery the index's bucket tree also runs on (median_split.cuh).
//
// The tree (common/kdtree_layout.h): heap order, a point in every node; a
// node of level l splits on axis l mod 3, and its point is the median of its
// subtree's points in (coordinate, index) order on that axis, at rank
// TreeShape::median_rank; the points before it make the left subtree, those
// after it the right one. The nodes are written with the caller's
// coordinates, bit for bit.
#include "cuda_kdtree_build.h"

#include "../core/pinned_pool.h"
#include "../cuda_engine.h"
#include "median_split.cuh"

namespace knn {
namespace cuda {
namespace {

// The classic tree for median_split::build. At level l the points still to
// place are kept in node order: node q's from TreeShape::segment_start(l, q).
struct HeapSplits {
  static constexpr bool kNodePoints = true;    // the median stays in the node
  static constexpr bool kBoxes = false;        // axes cycle; no node boxes
  static constexpr bool kBucketOrder = false;  // every point ends in a node

  TreeShape shape;
  const Point* points;
  Node* tree;

  __host__ __device__ int64_t start(int level, int64_t q) const {
    return shape.segment_start(level, q);
  }
  __host__ __device__ int64_t left_size(int level, int64_t q) const {
    return shape.median_rank(level, q);
  }
  __host__ __device__ int64_t most_points(int level) const { return shape.subtree_size(level, 0); }
  __host__ __device__ bool splits(int level) const { return level < shape.levels; }
  __host__ __device__ int last_level() const { return shape.levels - 1; }
  __device__ int split_dim(int level) const { return knn::split_dim(level, 0); }
  __device__ void place_node(int level, int64_t q, int32_t id) const {
    const int64_t node = (int64_t{1} << level) - 1 + q;
    const Point p = points[id];
    tree[node] = Node{{p.p[0], p.p[1], p.p[2]},
                      static_cast<int>(shape.child_or_none(2 * node + 1)),
                      static_cast<int>(shape.child_or_none(2 * node + 2)),
                      id};
  }
};

}  // namespace

BuildWorkspace::BuildWorkspace(int64_t n)
    : n_(n),
      plan_(classic_build_plan(n, split_build_shared_budget(device_limits().shared_bytes_optin))),
      arena_(n > 0 ? split_build_scratch_bytes(n, 3, sizeof(uint32_t), plan_) : 0) {}

void build_kdtree_on_device(const Point* points, int64_t n, Node* tree, BuildWorkspace& ws,
                            cudaStream_t stream) {
  if (n == 0) return;
  if (n != ws.capacity()) fail(KNN_ERR_INTERNAL, "build workspace of another size");
  const HeapSplits splits{TreeShape(n), points, tree};
  median_split::build(splits, reinterpret_cast<const float*>(points), n, 3, ws.plan_, ws.arena_,
                      stream);
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
