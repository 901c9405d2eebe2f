// The resident tree and the query pipeline: chunks of host queries staged
// through pinned buffers, two slots on two streams so that one chunk's
// transfers and host copies overlap the other's search.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "../../engine/progress.h"
#include "../core/launch_policy.h"
#include "../core/pinned_pool.h"
#include "../cuda_engine.h"
#include "../cuda_index.h"
#include "../device_grid_index.h"
#include "cuda_kdtree_search.h"

namespace knn {
namespace cuda {
namespace {

struct Slot {
  Stream stream;
  DeviceBuffer<Point> queries;
  DeviceBuffer<int32_t> indices;
  DeviceBuffer<float> sq_distances;
  PointTreeScratch scratch;
  PinnedLease host_queries;
  PinnedLease host_indices;
  PinnedLease host_sq_distances;
  int64_t first = 0;
  int64_t count = 0;

  Slot(int64_t chunk, int k, bool want_distances)
      : queries(static_cast<size_t>(chunk)),
        indices(static_cast<size_t>(chunk) * k),
        sq_distances(want_distances ? static_cast<size_t>(chunk) * k : 0),
        scratch(chunk, k),
        host_queries(sizeof(Point) * chunk),
        host_indices(sizeof(int32_t) * chunk * k),
        host_sq_distances(want_distances ? sizeof(float) * chunk * k : 0) {}
};

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
// tree was built from (the ids are a permutation: the tree check saw to it).
__global__ void points_in_input_order_kernel(const float4* nodes, int64_t n, float* rows) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float4 node = nodes[i];
    float* row = rows + 3 * static_cast<int64_t>(__float_as_int(node.w));
    row[0] = node.x;
    row[1] = node.y;
    row[2] = node.z;
  }
}

}  // namespace

struct DeviceTree::Impl {
  PointTree tree;
  // The buckets are laid out at the first query: a tree whose points the
  // grid answers (grid_of_points) never needs them. Two host threads may
  // query one tree (a device listed twice).
  std::once_flag buckets_laid_out;

  void lay_out_buckets() {
    std::call_once(buckets_laid_out, [this] {
      Stream stream;
      tree.lay_out_buckets(stream.get());
    });
  }
};

DeviceTree::DeviceTree(const Node* tree, int64_t n, int root_dim, bool check_tree)
    : impl_(new Impl) {
  try {
    PointTree& own = impl_->tree;
    own.n = n;
    own.root_dim = root_dim;
    own.nodes.allocate(static_cast<size_t>(n));
    Stream stream;
    reset_box(own.box_keys.get(), stream.get());
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
          checker.offset = first;
          convert_nodes(staging.get(), static_cast<int64_t>(bytes / sizeof(Node)),
                        own.nodes.get() + first, own.box_keys.get(), stream.get(), checker);
        });
    if (checker.first_bad) {
      check_tree_order_and_ids(own.nodes.get(), n, root_dim, checker, stream.get());
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

int64_t DeviceTree::size() const { return impl_->tree.n; }

std::unique_ptr<IndexEngine> DeviceTree::grid_of_points(const IndexParams& params) const {
  const int64_t n = impl_->tree.n;
  DeviceBuffer<float> rows(3 * static_cast<size_t>(n));
  if (n > 0) {
    Stream stream;
    constexpr int kBlock = 256;
    points_in_input_order_kernel<<<grid_stride_blocks(points_in_input_order_kernel, kBlock, n),
                                   kBlock, 0, stream.get()>>>(impl_->tree.nodes.get(), n,
                                                              rows.get());
    check_launch("tree points in input order");
    stream.synchronize();
  }
  return build_grid_index(std::move(rows), n, params);
}

void DeviceTree::query(const Point* queries, int k, int32_t* indices, float* sq_distances,
                       int64_t chunk, int slot_count, ChunkSource& source) const {
  std::vector<Slot*> slots;
  knn_progress* const report = progress();
  auto drain = [&](Slot& s) {
    s.stream.synchronize();
    const size_t values = static_cast<size_t>(s.count) * k;
    staging_copy(indices + s.first * k, s.host_indices.as<int32_t>(), values * sizeof(int32_t));
    if (sq_distances)
      staging_copy(sq_distances + s.first * k, s.host_sq_distances.as<float>(),
                   values * sizeof(float));
    progress_add(report, s.count);
    s.count = 0;
  };
  try {
    impl_->lay_out_buckets();
    for (int i = 0; i < slot_count; ++i)
      slots.push_back(new Slot(chunk, k, sq_distances != nullptr));
    const TreeView tree = impl_->tree.view();
    for (int64_t turn = 0;; ++turn) {
      Slot& s = *slots[turn % slot_count];
      if (s.count > 0) drain(s);
      s.first = source.take(chunk, &s.count);
      if (s.count == 0) break;
      const cudaStream_t st = s.stream.get();
      staging_copy(s.host_queries.as<Point>(), queries + s.first, sizeof(Point) * s.count);
      check(cudaMemcpyAsync(s.queries.get(), s.host_queries.as<Point>(), sizeof(Point) * s.count,
                            cudaMemcpyHostToDevice, st),
            "cudaMemcpyAsync queries");
      search_on_device(tree, s.queries.get(), s.count, k, s.indices.get(), s.sq_distances.get(),
                       s.scratch, st);
      const size_t values = static_cast<size_t>(s.count) * k;
      check(cudaMemcpyAsync(s.host_indices.as<int32_t>(), s.indices.get(), values * sizeof(int32_t),
                            cudaMemcpyDeviceToHost, st),
            "cudaMemcpyAsync indices");
      if (sq_distances)
        check(cudaMemcpyAsync(s.host_sq_distances.as<float>(), s.sq_distances.get(),
                              values * sizeof(float), cudaMemcpyDeviceToHost, st),
              "cudaMemcpyAsync distances");
    }
    for (Slot* s : slots)
      if (s->count > 0) drain(*s);
  } catch (...) {
    // The chunk source stops the loop between chunks (a cancel) as any error
    // does: chunks still in flight finish before their buffers are released,
    // so no transfer lands in a pinned buffer that another call reuses. The
    // call fails with the first error; a second one here adds nothing.
    for (Slot* s : slots) cudaStreamSynchronize(s->stream.get());
    cudaGetLastError();  // leave no non-sticky error behind for the next call
    for (Slot* s : slots) delete s;
    throw;
  }
  for (Slot* s : slots) delete s;
}

}  // namespace cuda
}  // namespace knn
