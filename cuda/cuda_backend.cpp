// The CUDA engine behind engine/backend.h (cuda/cuda_backend.h): each
// function forwards to the engine's own (cuda_engine.h, cuda_index.h,
// peer_copy.h, index_memory_model.h).
#include "cuda_backend.h"

#include <memory>

#include "../engine/mesh_engine.h"
#include "../engine/quadtree_engine.h"
#include "../engine/stats_engine.h"
#include "../include/knn_gpgpu.h"
#include "cuda_engine.h"
#include "cuda_index.h"
#include "index_memory_model.h"
#include "peer_copy.h"

namespace knn {
namespace cuda {
namespace {

class StagingBuffer final : public knn::DeviceAllocation {
 public:
  explicit StagingBuffer(size_t bytes) : staging_(bytes) {}
  void* get() const override { return staging_.get(); }
  int device() const override { return staging_.device(); }

 private:
  PeerStaging staging_;
};

class PeerCopyStream final : public knn::DeviceCopyStream {
 public:
  void copy(void* dst, int dst_device, const void* src, int src_device, size_t bytes) override {
    stream_.copy(dst, dst_device, src, src_device, bytes);
  }
  void wait() override { stream_.wait(); }

 private:
  PeerStream stream_;
};

class UploadedTree final : public UploadedClassicTree {
 public:
  UploadedTree(const Node* tree, int64_t n, int root_dim, bool check)
      : tree_(tree, n, root_dim, check) {}
  int64_t size() const override { return tree_.size(); }
  std::unique_ptr<IndexEngine> grid_of_points(const IndexParams& params) const override {
    return tree_.grid_of_points(params);
  }
  std::unique_ptr<IndexEngine> kdtree_of_points(const IndexParams& params) const override {
    return tree_.kdtree_of_points(params);
  }

 private:
  DeviceTree tree_;
};

class CudaBackend final : public Backend {
 public:
  int kind() const override { return KNN_BACKEND_CUDA; }
  const char* name() const override { return "CUDA"; }

  int device_count() const override { return cuda::device_count(); }
  void set_device(int device) const override { cuda::set_device(device); }
  int current_device() const override { return cuda::current_device(); }
  size_t free_device_bytes() const override { return cuda::free_device_bytes(); }
  bool is_device_pointer(const void* p) const override { return cuda::is_device_pointer(p); }
  int device_of(const void* p) const override { return cuda::device_of(p); }
  bool reaches_in_place(int device, int owner) const override {
    return cuda::reaches_in_place(device, owner);
  }
  int chunks_in_flight() const override { return kPipelineSlots; }
  int host_copy_threads() const override { return kHostCopyThreads; }

  void copy_to_host(void* host_dst, const void* device_src, size_t bytes) const override {
    cuda::copy_to_host(host_dst, device_src, bytes);
  }
  void copy_to_device(void* device_dst, const void* host_src, size_t bytes) const override {
    cuda::copy_to_device(device_dst, host_src, bytes);
  }
  void fill_missing_on_device(int32_t* indices, float* sq, int64_t count) const override {
    cuda::fill_missing_on_device(indices, sq, count);
  }
  void fill_missing_on_device(int32_t* indices, double* sq, int64_t count) const override {
    cuda::fill_missing_on_device(indices, sq, count);
  }
  int64_t first_beyond_on_device(const float* values, int64_t count, float limit) const override {
    return cuda::first_beyond_on_device(values, count, limit);
  }
  int64_t first_beyond_on_device(const double* values, int64_t count, double limit) const override {
    return cuda::first_beyond_on_device(values, count, limit);
  }
  std::unique_ptr<DeviceAllocation> allocate(size_t bytes) const override {
    return std::make_unique<StagingBuffer>(bytes);
  }
  std::unique_ptr<DeviceCopyStream> copy_stream() const override {
    return std::make_unique<PeerCopyStream>();
  }

  KNN_BACKEND_BUILDERS(cuda)

  size_t index_build_bytes(int structure, int64_t n, int dim, size_t scalar_bytes) const override {
    return index_memory::build_bytes(structure, n, dim, scalar_bytes);
  }
  size_t index_query_bytes(int structure, int64_t m, int k, int64_t n, int dim,
                           size_t scalar_bytes) const override {
    return index_memory::query_bytes(structure, m, k, n, dim, scalar_bytes);
  }
  size_t index_points_bytes(int64_t n, int dim, size_t scalar_bytes) const override {
    return index_memory::points_bytes(n, dim, scalar_bytes);
  }
  size_t kdtree_build_bytes(int64_t n, int dim, size_t scalar_bytes) const override {
    return index_memory::kdtree_build_bytes(n, dim, scalar_bytes);
  }
  size_t kdtree_resident_bytes(int64_t n, int dim, int leaf_size) const override {
    return cuda::kdtree_resident_bytes(n, dim, leaf_size);
  }
  size_t kdtree_query_bytes(int64_t m, int k, int64_t n, int dim, int leaf_size,
                            size_t scalar_bytes) const override {
    return cuda::kdtree_query_bytes(m, k, n, dim, leaf_size, scalar_bytes);
  }
  size_t grid_build_bytes(int64_t n) const override { return index_memory::grid_build_bytes(n); }
  size_t stats_reducer_bytes(int64_t n, int list_k, size_t scalar_bytes) const override {
    constexpr int kNormalsAndCurvature = 3;
    return saturating_add(
        stats_fixed_bytes(n, scalar_bytes),
        saturating_mul(static_cast<size_t>(n < 0 ? 0 : n),
                       stats_row_bytes(list_k, kNormalsAndCurvature, false, scalar_bytes)));
  }
  size_t mesh_build_bytes(int64_t n_vertices, int64_t n_triangles,
                          size_t scalar_bytes) const override {
    return cuda::mesh_build_bytes_either(n_vertices, n_triangles, scalar_bytes);
  }

  void build_classic_tree(const Point* points, int64_t n, Node* tree) const override {
    cuda::build_kdtree(points, n, tree);
  }
  size_t classic_tree_build_bytes(int64_t n) const override { return cuda::build_bytes(n); }
  std::unique_ptr<UploadedClassicTree> upload_classic_tree(const Node* tree, int64_t n,
                                                           int root_dim,
                                                           bool check) const override {
    return std::make_unique<UploadedTree>(tree, n, root_dim, check);
  }
  size_t classic_kdtree_query_bytes(int64_t m, int k, int64_t n) const override {
    return index_memory::classic_kdtree_query_bytes(m, k, n);
  }
  size_t classic_grid_query_bytes(int64_t m, int k, int64_t n) const override {
    return index_memory::classic_grid_query_bytes(m, k, n);
  }
  size_t classic_kdtree_search_bytes(int64_t m, int k) const override {
    return index_memory::classic_kdtree_search_bytes(m, k);
  }
  size_t classic_grid_search_bytes(int64_t m, int k) const override {
    return index_memory::classic_grid_search_bytes(m, k);
  }
  size_t classic_upload_bytes(int64_t n) const override {
    // The upload, and the rows of its points that an engine of it adopts.
    return uploaded_tree_bytes(n) + aligned(sizeof(float) * 3 * size_t(n));
  }
};

}  // namespace

const Backend& cuda_backend() {
  static const CudaBackend backend;
  return backend;
}

}  // namespace cuda
}  // namespace knn
