// The CUDA engine of a build without CUDA: no devices, and every device
// operation reports KNN_ERR_NO_DEVICE.
#include "../common/error.h"
#include "../cuda/cuda_engine.h"
#include "../cuda/cuda_index.h"
#include "../engine/mesh_engine.h"
#include "../engine/quadtree_engine.h"

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

template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> build_kdtree_index(const Scalar*, int64_t, int,
                                                             const IndexParams&) {
  no_cuda();
}
template std::unique_ptr<IndexEngine> build_kdtree_index(const float*, int64_t, int,
                                                         const IndexParams&);
template std::unique_ptr<IndexEngine64> build_kdtree_index(const double*, int64_t, int,
                                                           const IndexParams&);

template <typename Scalar>
std::unique_ptr<BasicListReducer<Scalar>> make_list_reducer(const BasicIndexEngine<Scalar>&,
                                                            const StatsRequest<Scalar>&,
                                                            const CallParams&) {
  no_cuda();
}
template std::unique_ptr<BasicListReducer<float>> make_list_reducer(const IndexEngine&,
                                                                    const StatsRequest<float>&,
                                                                    const CallParams&);
template std::unique_ptr<BasicListReducer<double>> make_list_reducer(const IndexEngine64&,
                                                                     const StatsRequest<double>&,
                                                                     const CallParams&);

template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> build_kdtree_index_of(const BasicIndexEngine<Scalar>&,
                                                                const IndexParams&) {
  no_cuda();
}
template std::unique_ptr<IndexEngine> build_kdtree_index_of(const IndexEngine&, const IndexParams&);
template std::unique_ptr<IndexEngine64> build_kdtree_index_of(const IndexEngine64&,
                                                              const IndexParams&);

template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> build_brute_force_index(const Scalar*, int64_t, int,
                                                                  const IndexParams&) {
  no_cuda();
}
template std::unique_ptr<IndexEngine> build_brute_force_index(const float*, int64_t, int,
                                                              const IndexParams&);
template std::unique_ptr<IndexEngine64> build_brute_force_index(const double*, int64_t, int,
                                                                const IndexParams&);

template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> build_grid_index(const Scalar*, int64_t,
                                                           const IndexParams&) {
  no_cuda();
}
template std::unique_ptr<IndexEngine> build_grid_index(const float*, int64_t, const IndexParams&);
template std::unique_ptr<IndexEngine64> build_grid_index(const double*, int64_t,
                                                         const IndexParams&);

template <typename Scalar>
std::unique_ptr<QuadtreeEngine> build_quadtree(const Scalar*, int64_t, const QuadtreeParams&) {
  no_cuda();
}
template std::unique_ptr<QuadtreeEngine> build_quadtree(const float*, int64_t,
                                                        const QuadtreeParams&);
template std::unique_ptr<QuadtreeEngine> build_quadtree(const double*, int64_t,
                                                        const QuadtreeParams&);

template <typename Scalar>
std::unique_ptr<MeshEngine<Scalar>> build_mesh(const MeshGeometry<Scalar>&, const MeshParams&) {
  no_cuda();
}
template std::unique_ptr<MeshEngine<float>> build_mesh(const MeshGeometry<float>&,
                                                       const MeshParams&);
template std::unique_ptr<MeshEngine<double>> build_mesh(const MeshGeometry<double>&,
                                                        const MeshParams&);

}  // namespace cuda
}  // namespace knn
