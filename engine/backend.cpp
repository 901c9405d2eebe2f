// The answers of a backend without devices (engine/backend.h).
#include "backend.h"

#include "../common/error.h"

namespace knn {

void Backend::not_offered(const char* what) const {
  fail(KNN_ERR_INTERNAL,
       format("%s asked of the %s backend, which does not offer it", what, name()));
}

void Backend::set_device(int) const { not_offered("set_device"); }
void Backend::copy_to_host(void*, const void*, size_t) const { not_offered("copy_to_host"); }
void Backend::copy_to_device(void*, const void*, size_t) const { not_offered("copy_to_device"); }
void Backend::fill_missing_on_device(int32_t*, float*, int64_t) const {
  not_offered("fill_missing_on_device");
}
void Backend::fill_missing_on_device(int32_t*, double*, int64_t) const {
  not_offered("fill_missing_on_device");
}
int64_t Backend::first_beyond_on_device(const float*, int64_t, float) const {
  not_offered("first_beyond_on_device");
}
int64_t Backend::first_beyond_on_device(const double*, int64_t, double) const {
  not_offered("first_beyond_on_device");
}
std::unique_ptr<DeviceAllocation> Backend::allocate(size_t) const { not_offered("device memory"); }
std::unique_ptr<DeviceCopyStream> Backend::copy_stream() const {
  not_offered("a device copy stream");
}

size_t Backend::index_build_bytes(int, int64_t, int, size_t) const { return 0; }
size_t Backend::index_query_bytes(int, int64_t, int, int64_t, int, size_t) const { return 0; }
size_t Backend::index_points_bytes(int64_t, int, size_t) const { return 0; }
size_t Backend::kdtree_build_bytes(int64_t, int, size_t) const { return 0; }
size_t Backend::kdtree_resident_bytes(int64_t, int, int) const { return 0; }
size_t Backend::kdtree_query_bytes(int64_t, int, int64_t, int, int, size_t) const { return 0; }
size_t Backend::grid_build_bytes(int64_t) const { return 0; }
size_t Backend::stats_reducer_bytes(int64_t, int, size_t) const { return 0; }
size_t Backend::mesh_build_bytes(int64_t, int64_t, size_t) const { return 0; }

size_t Backend::classic_tree_build_bytes(int64_t) const { return 0; }
void Backend::check_classic_tree(const Node*, int64_t) const { not_offered("check_classic_tree"); }
void Backend::query_classic_tree(const Node*, int64_t, const Point*, int64_t, int, int32_t*,
                                 float*) const {
  not_offered("query_classic_tree");
}
std::unique_ptr<ClassicTreeSearch> Backend::classic_tree_search(const Node*, int64_t, int) const {
  not_offered("classic_tree_search");
}
void Backend::classic_brute_force(const float*, int64_t, const float*, int64_t, int, int, int32_t*,
                                  float*) const {
  not_offered("classic_brute_force");
}
std::unique_ptr<UploadedClassicTree> Backend::upload_classic_tree(const Node*, int64_t, int,
                                                                  bool) const {
  not_offered("upload_classic_tree");
}
size_t Backend::classic_kdtree_query_bytes(int64_t, int, int64_t) const { return 0; }
size_t Backend::classic_grid_query_bytes(int64_t, int, int64_t) const { return 0; }
size_t Backend::classic_kdtree_search_bytes(int64_t, int) const { return 0; }
size_t Backend::classic_grid_search_bytes(int64_t, int) const { return 0; }
size_t Backend::classic_upload_bytes(int64_t) const { return 0; }

}  // namespace knn
