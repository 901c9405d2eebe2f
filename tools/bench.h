// bench.h - `knn-gpgpu bench <suite>`: times the library's public API and
// writes the measurements as one JSON document (docs/cli.md has the schema;
// scripts/plot_bench.py plots it).
//
// Suites:
//   classic  buildKdTree/queryAll on every backend this machine has
//            (openmp, cuda, auto), for each size n: build of n uniform
//            points, then kNN of n queries
//   index    knn_index_build + knn_index_query + knn_index_radius for each
//            structure (kdtree, grid, brute_force) and backend
//   pip      knn_quadtree_build + knn_points_in_polygons_count of uniform
//            points in 256 irregular star polygons (rotated, concave, at
//            random places and sizes, so that no edge follows the quadtree's
//            cells), and with --polygons in the polygons of a GeoJSON file
//            (e.g. Natural Earth's countries, scripts/naturalearth.py) with
//            the points uniform over its bounding box
// Each measurement: warm-up runs, then `repeats` timed runs with a steady
// clock; the median, minimum and maximum are reported. A call that fails
// (NO_DEVICE for the CUDA backend without a GPU, KNN_ERR_UNSUPPORTED from a
// library without the index engines) is recorded with its status, not timed.
#ifndef KNN_TOOLS_BENCH_H
#define KNN_TOOLS_BENCH_H

#include <cstdint>
#include <string>
#include <vector>

namespace knn_cli {

struct BenchArgs {
  std::string suite;           // classic, index or pip
  std::vector<int64_t> sizes;  // n; empty: the suite's defaults
  int k = 16;
  int repeats = 5;
  int warmup = 1;
  std::string out = "-";  // file, or "-" for stdout
  std::string polygons;   // pip: a GeoJSON file timed beside the stars ("" = none)
  bool progress = false;  // --progress: progress lines even when stderr is not a terminal
};

// The suite's default sizes (10^4 .. 10^6; 10^7 for classic on a GPU).
std::vector<int64_t> default_bench_sizes(const std::string& suite, bool have_gpu);

// Runs the suite and writes the JSON document; throws std::runtime_error
// on bad arguments or an output that cannot be written.
int run_bench(const BenchArgs& args);

}  // namespace knn_cli

#endif
