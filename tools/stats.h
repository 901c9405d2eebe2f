// stats.h - `knn-gpgpu normals` and `knn-gpgpu outliers`: neighbourhood
// statistics of a point cloud (knn_gpgpu_stats.h; docs/cli.md).
//
// normals: reads the cloud, builds an index (knn_index_build, or _f64 with
// --f64) and writes a PLY of x y z nx ny nz curvature per point, in input
// order (knn_index_normals: the PCA of each point's k nearest, oriented
// towards --viewpoint, else consistently over the cloud).
// outliers: the points a rule keeps, written as a PLY (x y z) or text
// file in input order: statistical (--k, --std: knn_index_statistical_inliers,
// the mean distance to the k nearest others within mean + std x standard
// deviation over the cloud) or radius (--radius, --min-neighbours:
// knn_index_radius_inliers); prints how many were kept and dropped.
#ifndef KNN_TOOLS_STATS_H
#define KNN_TOOLS_STATS_H

#include <string>
#include <vector>

namespace knn_cli {

struct NormalsArgs {
  std::string in, out;
  int k = 30;
  std::vector<double> viewpoint;  // empty: consistent orientation
  std::string backend = "auto";
  bool f64 = false;
  bool progress = false;
};

struct OutliersArgs {
  std::string in, out;
  bool by_radius = false;  // the radius rule (--radius, --min-neighbours), else statistical
  int k = 0;               // statistical rule: --k (with --std)
  double std_ratio = 2.0;  // --std
  double radius = 0;       // radius rule: --radius with --min-neighbours
  long long min_neighbours = 0;
  std::string backend = "auto";
  bool f64 = false;
  bool progress = false;
};

int run_normals(const NormalsArgs& a);
int run_outliers(const OutliersArgs& a);

}  // namespace knn_cli

#endif
