// Entry points of the neighbourhood statistics (include/knn_gpgpu_stats.h,
// contract section 7): one template per call over the scalar, the float and
// _f64 twins below. The computing is src/stats_calls.*.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "abi_barrier.h"
#include "stats_calls.h"

extern "C" {

// An entry point and its _f64 twin are one definition over the scalar:
// a macro, since an extern "C" function cannot be a template, expanded for
// float and for double (the declarations stay in the public header).
#define KNN_INDEX_NORMALS_ENTRY(name, Scalar)                                                 \
  KNN_API int KNN_CALL name(const knn_index* index, int k, const Scalar* viewpoint,           \
                            Scalar* normals, Scalar* curvature, const knn_options* opt) {     \
    return knn::guarded_call(#name, knn::index_normals<Scalar>, index, k, viewpoint, normals, \
                             curvature, opt);                                                 \
  }
KNN_INDEX_NORMALS_ENTRY(knn_index_normals, float)
KNN_INDEX_NORMALS_ENTRY(knn_index_normals_f64, double)
#undef KNN_INDEX_NORMALS_ENTRY

// The outlier scores (mean distances) and the kth distances: one list
// statistic each.
#define KNN_INDEX_LIST_STATISTIC_ENTRY(name, Scalar, statistic)                             \
  KNN_API int KNN_CALL name(const knn_index* index, int k, Scalar* values,                  \
                            const knn_options* opt) {                                       \
    return knn::guarded_call(#name, knn::index_list_statistic<Scalar>, index, k, statistic, \
                             values, opt);                                                  \
  }
KNN_INDEX_LIST_STATISTIC_ENTRY(knn_index_outlier_scores, float, knn::ListStatistic::MeanDistance)
KNN_INDEX_LIST_STATISTIC_ENTRY(knn_index_outlier_scores_f64, double,
                               knn::ListStatistic::MeanDistance)
KNN_INDEX_LIST_STATISTIC_ENTRY(knn_index_kth_distances, float, knn::ListStatistic::KthDistance)
KNN_INDEX_LIST_STATISTIC_ENTRY(knn_index_kth_distances_f64, double, knn::ListStatistic::KthDistance)
#undef KNN_INDEX_LIST_STATISTIC_ENTRY

#define KNN_INDEX_STATISTICAL_INLIERS_ENTRY(name, Scalar)                                        \
  KNN_API int KNN_CALL name(const knn_index* index, int k, double std_ratio, int32_t* kept,      \
                            int64_t* n_kept, const knn_options* opt) {                           \
    return knn::guarded_call(#name, knn::index_statistical_inliers<Scalar>, index, k, std_ratio, \
                             kept, n_kept, opt);                                                 \
  }
KNN_INDEX_STATISTICAL_INLIERS_ENTRY(knn_index_statistical_inliers, float)
KNN_INDEX_STATISTICAL_INLIERS_ENTRY(knn_index_statistical_inliers_f64, double)
#undef KNN_INDEX_STATISTICAL_INLIERS_ENTRY

#define KNN_INDEX_NEIGHBOR_COUNTS_ENTRY(name, Scalar)                                          \
  KNN_API int KNN_CALL name(const knn_index* index, Scalar radius, int64_t* counts,            \
                            const knn_options* opt) {                                          \
    return knn::guarded_call(#name, knn::index_neighbor_counts<Scalar>, index, radius, counts, \
                             opt);                                                             \
  }
KNN_INDEX_NEIGHBOR_COUNTS_ENTRY(knn_index_neighbor_counts, float)
KNN_INDEX_NEIGHBOR_COUNTS_ENTRY(knn_index_neighbor_counts_f64, double)
#undef KNN_INDEX_NEIGHBOR_COUNTS_ENTRY

#define KNN_INDEX_RADIUS_INLIERS_ENTRY(name, Scalar)                                      \
  KNN_API int KNN_CALL name(const knn_index* index, Scalar radius, int64_t min_neighbors, \
                            int32_t* kept, int64_t* n_kept, const knn_options* opt) {     \
    return knn::guarded_call(#name, knn::index_radius_inliers<Scalar>, index, radius,     \
                             min_neighbors, kept, n_kept, opt);                           \
  }
KNN_INDEX_RADIUS_INLIERS_ENTRY(knn_index_radius_inliers, float)
KNN_INDEX_RADIUS_INLIERS_ENTRY(knn_index_radius_inliers_f64, double)
#undef KNN_INDEX_RADIUS_INLIERS_ENTRY

KNN_API size_t KNN_CALL knn_estimate_stats_bytes(int64_t n, int k, const knn_options* opt) {
  return knn::estimate_stats_bytes(n, k, opt, KNN_SCALAR_FLOAT32);
}

KNN_API size_t KNN_CALL knn_estimate_stats_bytes_f64(int64_t n, int k, const knn_options* opt) {
  return knn::estimate_stats_bytes(n, k, opt, KNN_SCALAR_FLOAT64);
}

}  // extern "C"
