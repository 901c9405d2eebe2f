// Consistent orientation of normals without a viewpoint
// (include/knn_gpgpu_stats.h, knn_index_normals): Hoppe et al.'s propagation
// over the minimum spanning tree of the kNN graph, on the host, the same for
// every engine (it reads only the normals and the graph they produced).
#pragma once

#include <cstdint>
#include <vector>

namespace knn {

// Orients n normals (normals[3 i .. 3 i + 2], float64 copies of the output
// scalar's values) in place: the graph joins i to neighbours[i * g .. i * g +
// g) (-1: none) and each listed point back to i; in every connected part the
// seed (largest z[i], ties to the smaller i) is signed so that its first
// non-zero of (z, y, x) is positive, and the part's minimum spanning tree
// under (1 - |n_i . n_j| (NaN as +infinity), smaller id, larger id) carries
// its orientation out (a child negated when its dot product with its
// parent's is negative). Runs on team_size(threads) threads
// (common/team_size.h), the result the same for any count. Checks the
// calling thread's cancel flag every 2^18 points of each pass and adds n
// points to its progress record: a point as its forest edge is found, each
// seed once its part is oriented.
void orient_normals(std::vector<double>& normals, const std::vector<double>& z,
                    const std::vector<int32_t>& neighbours, int g, int threads);

}  // namespace knn
