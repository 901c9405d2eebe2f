// Entry points of the neighbourhood statistics (include/knn_gpgpu_stats.h,
// contract section 7): one template per call over the scalar, the float and
// _f64 twins below. The computing is src/stats_calls.*.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "abi_barrier.h"
#include "stats_calls.h"

extern "C" {

KNN_API int KNN_CALL knn_index_normals(const knn_index* index, int k, const float* viewpoint,
                                       float* normals, float* curvature, const knn_options* opt) {
  static const char* const call = "knn_index_normals";
  return knn::guarded(
      call, [&] { knn::index_normals(call, index, k, viewpoint, normals, curvature, opt); });
}

KNN_API int KNN_CALL knn_index_normals_f64(const knn_index* index, int k, const double* viewpoint,
                                           double* normals, double* curvature,
                                           const knn_options* opt) {
  static const char* const call = "knn_index_normals_f64";
  return knn::guarded(
      call, [&] { knn::index_normals(call, index, k, viewpoint, normals, curvature, opt); });
}

KNN_API int KNN_CALL knn_index_outlier_scores(const knn_index* index, int k, float* mean_distances,
                                              const knn_options* opt) {
  static const char* const call = "knn_index_outlier_scores";
  return knn::guarded(call, [&] {
    knn::index_list_statistic(call, index, k, knn::ListStatistic::MeanDistance, mean_distances,
                              opt);
  });
}

KNN_API int KNN_CALL knn_index_outlier_scores_f64(const knn_index* index, int k,
                                                  double* mean_distances, const knn_options* opt) {
  static const char* const call = "knn_index_outlier_scores_f64";
  return knn::guarded(call, [&] {
    knn::index_list_statistic(call, index, k, knn::ListStatistic::MeanDistance, mean_distances,
                              opt);
  });
}

KNN_API int KNN_CALL knn_index_statistical_inliers(const knn_index* index, int k, double std_ratio,
                                                   int32_t* kept, int64_t* n_kept,
                                                   const knn_options* opt) {
  static const char* const call = "knn_index_statistical_inliers";
  return knn::guarded(call, [&] {
    knn::index_statistical_inliers<float>(call, index, k, std_ratio, kept, n_kept, opt);
  });
}

KNN_API int KNN_CALL knn_index_statistical_inliers_f64(const knn_index* index, int k,
                                                       double std_ratio, int32_t* kept,
                                                       int64_t* n_kept, const knn_options* opt) {
  static const char* const call = "knn_index_statistical_inliers_f64";
  return knn::guarded(call, [&] {
    knn::index_statistical_inliers<double>(call, index, k, std_ratio, kept, n_kept, opt);
  });
}

KNN_API int KNN_CALL knn_index_kth_distances(const knn_index* index, int k, float* distances,
                                             const knn_options* opt) {
  static const char* const call = "knn_index_kth_distances";
  return knn::guarded(call, [&] {
    knn::index_list_statistic(call, index, k, knn::ListStatistic::KthDistance, distances, opt);
  });
}

KNN_API int KNN_CALL knn_index_kth_distances_f64(const knn_index* index, int k, double* distances,
                                                 const knn_options* opt) {
  static const char* const call = "knn_index_kth_distances_f64";
  return knn::guarded(call, [&] {
    knn::index_list_statistic(call, index, k, knn::ListStatistic::KthDistance, distances, opt);
  });
}

KNN_API int KNN_CALL knn_index_neighbor_counts(const knn_index* index, float radius,
                                               int64_t* counts, const knn_options* opt) {
  static const char* const call = "knn_index_neighbor_counts";
  return knn::guarded(call, [&] { knn::index_neighbor_counts(call, index, radius, counts, opt); });
}

KNN_API int KNN_CALL knn_index_neighbor_counts_f64(const knn_index* index, double radius,
                                                   int64_t* counts, const knn_options* opt) {
  static const char* const call = "knn_index_neighbor_counts_f64";
  return knn::guarded(call, [&] { knn::index_neighbor_counts(call, index, radius, counts, opt); });
}

KNN_API int KNN_CALL knn_index_radius_inliers(const knn_index* index, float radius,
                                              int64_t min_neighbors, int32_t* kept, int64_t* n_kept,
                                              const knn_options* opt) {
  static const char* const call = "knn_index_radius_inliers";
  return knn::guarded(call, [&] {
    knn::index_radius_inliers(call, index, radius, min_neighbors, kept, n_kept, opt);
  });
}

KNN_API int KNN_CALL knn_index_radius_inliers_f64(const knn_index* index, double radius,
                                                  int64_t min_neighbors, int32_t* kept,
                                                  int64_t* n_kept, const knn_options* opt) {
  static const char* const call = "knn_index_radius_inliers_f64";
  return knn::guarded(call, [&] {
    knn::index_radius_inliers(call, index, radius, min_neighbors, kept, n_kept, opt);
  });
}

KNN_API size_t KNN_CALL knn_estimate_stats_bytes(int64_t n, int k, const knn_options* opt) {
  return knn::estimate_stats_bytes(n, k, opt, KNN_SCALAR_FLOAT32);
}

KNN_API size_t KNN_CALL knn_estimate_stats_bytes_f64(int64_t n, int k, const knn_options* opt) {
  return knn::estimate_stats_bytes(n, k, opt, KNN_SCALAR_FLOAT64);
}

}  // extern "C"
