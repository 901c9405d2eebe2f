// The CUDA engine of a build without CUDA: no devices, and every device
// operation reports KNN_ERR_NO_DEVICE.
#include "../../common/error.h"
#include "../../engine/mesh_engine.h"
#include "../../engine/quadtree_engine.h"
#include "../cuda_engine.h"
#include "../cuda_index.h"

namespace knn {
namespace cuda {
namespace {
[[noreturn]] void no_cuda() {
  fail(KNN_ERR_NO_DEVICE, "this knn_gpgpu was built without CUDA (KNN_WITH_CUDA=OFF)");
}
}  // namespace

int device_count() { return 0; }
void set_device(int) { no_cuda(); }
int current_device() { return -1; }
size_t free_device_bytes() { return 0; }
void build_kdtree(const Point*, int64_t, Node*) { no_cuda(); }

struct DeviceTree::Impl {};
DeviceTree::DeviceTree(const Node*, int64_t, int, bool) : impl_(nullptr) { no_cuda(); }
DeviceTree::~DeviceTree() = default;
int64_t DeviceTree::size() const { return 0; }
std::unique_ptr<IndexEngine> DeviceTree::grid_of_points(const IndexParams&) const { no_cuda(); }
std::unique_ptr<IndexEngine> DeviceTree::kdtree_of_points(const IndexParams&) const { no_cuda(); }

bool is_device_pointer(const void*) { return false; }
void copy_to_host(void*, const void*, size_t) { no_cuda(); }
void copy_to_device(void*, const void*, size_t) { no_cuda(); }
template <typename Scalar>
void fill_missing_on_device(int32_t*, Scalar*, int64_t) {
  no_cuda();
}
template void fill_missing_on_device(int32_t*, float*, int64_t);
template void fill_missing_on_device(int32_t*, double*, int64_t);

template <typename Scalar>
int64_t first_beyond_on_device(const Scalar*, int64_t, Scalar) {
  no_cuda();
}
template int64_t first_beyond_on_device(const float*, int64_t, float);
template int64_t first_beyond_on_device(const double*, int64_t, double);

// Every builder of the CUDA engine (engine/builders.h), for both
// precisions. The stubs take the builders' signatures whole, parameter names
// included, and read none of them.
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define KNN_NO_CUDA_BUILDER(builder)          \
  KNN_DECLARE_BUILDER(builder) { no_cuda(); } \
  KNN_INSTANTIATE_BUILDER(builder)

KNN_NO_CUDA_BUILDER(KNN_KDTREE_INDEX_BUILDER);
KNN_NO_CUDA_BUILDER(KNN_BRUTE_FORCE_INDEX_BUILDER);
KNN_NO_CUDA_BUILDER(KNN_GRID_INDEX_BUILDER);
KNN_NO_CUDA_BUILDER(KNN_KDTREE_INDEX_OF_BUILDER);
KNN_NO_CUDA_BUILDER(KNN_QUADTREE_BUILDER);
KNN_NO_CUDA_BUILDER(KNN_MESH_BUILDER);
KNN_NO_CUDA_BUILDER(KNN_LIST_REDUCER_BUILDER);
KNN_NO_CUDA_BUILDER(KNN_CLOUD_ALIGNER_BUILDER);

}  // namespace cuda
}  // namespace knn
