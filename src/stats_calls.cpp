// The neighbourhood statistics of an index (src/stats_calls.h).
#include "stats_calls.h"

#include "../common/error.h"

namespace knn {

namespace {
[[noreturn]] void not_yet() {
  fail(KNN_ERR_UNSUPPORTED, "the neighbourhood statistics are not implemented in this build yet");
}
}  // namespace

template <typename Scalar>
void index_normals(const char*, const knn_index*, int, const Scalar*, Scalar*, Scalar*,
                   const knn_options*) {
  not_yet();
}
template <typename Scalar>
void index_list_statistic(const char*, const knn_index*, int, ListStatistic, Scalar*,
                          const knn_options*) {
  not_yet();
}
template <typename Scalar>
void index_statistical_inliers(const char*, const knn_index*, int, double, int32_t*, int64_t*,
                               const knn_options*) {
  not_yet();
}
template <typename Scalar>
void index_neighbor_counts(const char*, const knn_index*, Scalar, int64_t*, const knn_options*) {
  not_yet();
}
template <typename Scalar>
void index_radius_inliers(const char*, const knn_index*, Scalar, int64_t, int32_t*, int64_t*,
                          const knn_options*) {
  not_yet();
}
size_t estimate_stats_bytes(int64_t, int, const knn_options*, int) { return 0; }

#define KNN_STATS_INSTANTIATE(Scalar)                                                              \
  template void index_normals(const char*, const knn_index*, int, const Scalar*, Scalar*, Scalar*, \
                              const knn_options*);                                                 \
  template void index_list_statistic(const char*, const knn_index*, int, ListStatistic, Scalar*,   \
                                     const knn_options*);                                          \
  template void index_statistical_inliers<Scalar>(const char*, const knn_index*, int, double,      \
                                                  int32_t*, int64_t*, const knn_options*);         \
  template void index_neighbor_counts(const char*, const knn_index*, Scalar, int64_t*,             \
                                      const knn_options*);                                         \
  template void index_radius_inliers(const char*, const knn_index*, Scalar, int64_t, int32_t*,     \
                                     int64_t*, const knn_options*);
KNN_STATS_INSTANTIATE(float)
KNN_STATS_INSTANTIATE(double)

}  // namespace knn
