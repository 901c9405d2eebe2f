// The neighbourhood statistics of an index (include/knn_gpgpu_stats.h):
// the checks of each call and its path to the engines. Templates over the
// scalar, instantiated for float and double in src/stats_calls.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../include/knn_gpgpu.h"

namespace knn {

// The statistics of one list of nearest others per point.
enum class ListStatistic {
  MeanDistance,  // knn_index_outlier_scores
  KthDistance    // knn_index_kth_distances
};

template <typename Scalar>
void index_normals(const char* call, const knn_index* index, int k, const Scalar* viewpoint,
                   Scalar* normals, Scalar* curvature, const knn_options* opt);
template <typename Scalar>
void index_list_statistic(const char* call, const knn_index* index, int k, ListStatistic what,
                          Scalar* values, const knn_options* opt);
template <typename Scalar>
void index_statistical_inliers(const char* call, const knn_index* index, int k, double std_ratio,
                               int32_t* kept, int64_t* n_kept, const knn_options* opt);
template <typename Scalar>
void index_neighbor_counts(const char* call, const knn_index* index, Scalar radius, int64_t* counts,
                           const knn_options* opt);
template <typename Scalar>
void index_radius_inliers(const char* call, const knn_index* index, Scalar radius,
                          int64_t min_neighbors, int32_t* kept, int64_t* n_kept,
                          const knn_options* opt);
size_t estimate_stats_bytes(int64_t n, int k, const knn_options* opt, int scalar);

}  // namespace knn
