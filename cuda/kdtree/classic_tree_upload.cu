// A classic tree on the device (cuda_engine.h DeviceTree): the caller's Node
// array uploaded in pieces through pinned staging, checked on the device as
// the CPU engine checks it, and handed on as the points of an index engine
// (the grid or the bucket kd-tree), which answers the classic queries through
// the one query pipeline (core/query_chunks.cuh). The tree's own heap layout
// serves only the check: the searches want the points binned or in buckets.
#include <algorithm>

#include "../../common/kdtree_layout.h"
#include "../core/float4_point.cuh"
#include "../core/launch_policy.h"
#include "../core/pinned_pool.h"
#include "../cuda_engine.h"
#include "../device_rows_index.h"

namespace knn {
namespace cuda {
namespace {

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

// n host-layout nodes already on the device into (x, y, z, id) float4s,
// with the per-node field checks.
__global__ void convert_nodes(const Node* nodes, int64_t n, float4* out, TreeCheck check) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const Node nd = nodes[i];
  out[i] = make_float4(nd.p[0], nd.p[1], nd.p[2], __int_as_float(nd.id));
  if (check.first_bad) {
    const int64_t global = check.offset + i;
    if (check_node_fields(nd, check.shape, global) != kTreeOk)
      atomicMin(check.first_bad, static_cast<unsigned long long>(global));
    else
      atomicMin(&check.first_node[nd.id], static_cast<uint32_t>(global));
  }
}

struct Float4Coord {
  const float4* nodes;
  __device__ float operator()(int64_t j, int d) const { return coord(nodes[j], d); }
};

// After every node is converted: the kd order and repeated ids.
__global__ void check_order_and_ids(const float4* nodes, int64_t n, int root_dim, TreeCheck check) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  if (check_node_order(Float4Coord{nodes}, i, root_dim) != kTreeOk)
    atomicMin(check.first_bad, static_cast<unsigned long long>(i));
  const int id = id_of(nodes[i]);
  if (id >= 0 && id < n && check.first_node[id] < i)
    atomicMin(check.first_repeat, static_cast<unsigned long long>(i));
}

// Turns the device check's findings into the same error the CPU check gives.
void report_tree_defect(const Node* tree, int64_t n, int root_dim, unsigned long long first_bad,
                        unsigned long long first_repeat) {
  const TreeShape shape(n);
  if (first_bad < static_cast<unsigned long long>(n)) {
    const int64_t i = static_cast<int64_t>(first_bad);
    int defect = check_node_fields(tree[i], shape, i);
    if (defect == kTreeOk)
      defect = check_node_order([tree](int64_t j, int d) { return tree[j].p[d]; }, i, root_dim);
    fail(KNN_ERR_INVALID_TREE, tree_defect_message(i, defect, tree[i].id));
  }
  if (first_repeat < static_cast<unsigned long long>(n))
    fail(KNN_ERR_INVALID_TREE, tree_defect_message(static_cast<int64_t>(first_repeat),
                                                   kTreeDuplicateId, tree[first_repeat].id));
}

// Each node's point into row Node.id of `rows`: the points in the order the
// tree was built from (the ids are a permutation: the tree check saw to it,
// or the caller made the tree).
__global__ void points_in_input_order(const float4* nodes, int64_t n, float* rows) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float4 node = nodes[i];
    float* row = rows + 3 * static_cast<int64_t>(id_of(node));
    row[0] = node.x;
    row[1] = node.y;
    row[2] = node.z;
  }
}

}  // namespace

struct DeviceTree::Impl {
  int64_t n = 0;
  DeviceBuffer<float4> nodes;

  // The points as rows of x, y, z in input order, so that an engine of them
  // answers with the tree's indices (Node.id) and the tree's ties.
  DeviceBuffer<float> rows() const {
    DeviceBuffer<float> out(3 * static_cast<size_t>(n));
    if (n == 0) return out;
    Stream stream;
    points_in_input_order<<<grid_stride_blocks(points_in_input_order, kBlock, n), kBlock, 0,
                            stream.get()>>>(nodes.get(), n, out.get());
    check_launch("points_in_input_order");
    stream.synchronize();
    return out;
  }
};

DeviceTree::DeviceTree(const Node* tree, int64_t n, int root_dim, bool check_tree)
    : impl_(new Impl) {
  try {
    impl_->n = n;
    impl_->nodes.allocate(static_cast<size_t>(n));
    Stream stream;
    // The check's words: first bad node, first repeated id, first node per id.
    DeviceBuffer<unsigned long long> defects(check_tree ? 2 : 0);
    DeviceBuffer<uint32_t> first_node(check_tree ? static_cast<size_t>(n) : 0);
    TreeCheck checker{TreeShape(n), 0, nullptr, nullptr, nullptr};
    if (check_tree && n > 0) {
      checker = TreeCheck{TreeShape(n), 0, defects.get(), defects.get() + 1, first_node.get()};
      check(cudaMemsetAsync(defects.get(), 0xff, 2 * sizeof(unsigned long long), stream.get()),
            "cudaMemsetAsync");
      check(cudaMemsetAsync(first_node.get(), 0xff, sizeof(uint32_t) * n, stream.get()),
            "cudaMemsetAsync");
    }
    // Pieces of whole nodes through pinned staging into one device staging
    // buffer, each converted there: the stream orders a piece's copy after
    // the previous piece's conversion.
    DeviceBuffer<Node> staging(static_cast<size_t>(std::min(n, kUploadNodes)));
    upload_staged_pieces(
        tree, sizeof(Node) * static_cast<size_t>(n), sizeof(Node) * kUploadNodes, stream.get(),
        [&](size_t at, size_t bytes, const void* pinned) {
          check(cudaMemcpyAsync(staging.get(), pinned, bytes, cudaMemcpyHostToDevice, stream.get()),
                "cudaMemcpyAsync tree");
          const int64_t first = static_cast<int64_t>(at / sizeof(Node));
          const int64_t count = static_cast<int64_t>(bytes / sizeof(Node));
          checker.offset = first;
          convert_nodes<<<grid_for(count, kBlock), kBlock, 0, stream.get()>>>(
              staging.get(), count, impl_->nodes.get() + first, checker);
          check_launch("convert_nodes");
        });
    if (checker.first_bad) {
      check_order_and_ids<<<grid_for(n, kBlock), kBlock, 0, stream.get()>>>(impl_->nodes.get(), n,
                                                                            root_dim, checker);
      check_launch("check_order_and_ids");
      unsigned long long found[2];
      check(
          cudaMemcpyAsync(found, defects.get(), sizeof found, cudaMemcpyDeviceToHost, stream.get()),
          "cudaMemcpyAsync");
      stream.synchronize();
      report_tree_defect(tree, n, root_dim, found[0], found[1]);
    }
    stream.synchronize();
  } catch (...) {
    delete impl_;
    throw;
  }
}

DeviceTree::~DeviceTree() { delete impl_; }

int64_t DeviceTree::size() const { return impl_->n; }

std::unique_ptr<IndexEngine> DeviceTree::grid_of_points(const IndexParams& params) const {
  return build_grid_index(impl_->rows(), impl_->n, params);
}

std::unique_ptr<IndexEngine> DeviceTree::kdtree_of_points(const IndexParams& params) const {
  return build_kdtree_index(impl_->rows(), impl_->n, 3, params);
}

}  // namespace cuda
}  // namespace knn
