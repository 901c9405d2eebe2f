// deviation.h - `knn-gpgpu deviation`: a scan against its design (docs/cli.md).
//
// Reads the scan's points and the design's triangle mesh (mesh_io.h),
// builds the mesh (knn_mesh_build, or _f64 with --f64) and computes the
// deviation report (knn_mesh_deviation_report): the signed distance of
// every point to the design, negative inside, summarised where it was
// computed; the per-point values come back only for --out. Prints the
// report; writes the per-point PLY (--out) and the histogram picture
// (--histogram, SVG). With --align, the scan is first fitted to the design
// (knn_mesh_align_ex) and the fitted transform printed.
#ifndef KNN_TOOLS_DEVIATION_H
#define KNN_TOOLS_DEVIATION_H

#include <cstdint>
#include <limits>
#include <string>

namespace knn_cli {

struct DeviationArgs {
  std::string scan, design;
  double tolerance = -1;
  double max_distance = std::numeric_limits<double>::infinity();
  std::string out;        // per-point PLY ("" = none)
  std::string histogram;  // SVG ("" = none)
  int bins = 40;
  double range = 0;  // the histogram's and colours' half-width; 0: the default
  std::string backend = "auto";
  bool f64 = false;
  bool progress = false;  // --progress: progress lines even when stderr is not a terminal
  // --align: the best fit of the scan to the design (knn_mesh_align_ex, ICP point to plane)
  // before the report, correspondences within --max-distance; the report, and --out, are of
  // the scan moved by the fitted transform.
  bool align = false;
  double align_keep = 1;      // --align-keep: the kept fraction of each step, in (0, 1]
  int align_iterations = 50;  // --align-iterations
};

// The percentiles the report prints.
constexpr double kDeviationPercentiles[] = {1, 5, 25, 50, 75, 95, 99};

// The half-width R of the histogram and colour scale: --range, else
// min(4 x tolerance, max distance) (a tolerance of 0 counting as none);
// throws when that leaves no positive finite R.
double deviation_range(const DeviationArgs& a);

// The colour of a signed deviation d (tolerance t, half-width R): green
// within [-t, t]; above t from yellow (255, 255, 0) at t to red
// (255, 0, 0) at R and beyond; below -t from cyan (0, 255, 255) to blue
// (0, 0, 255); grey (128, 128, 128) for a point beyond the max distance
// (d infinite). The channel that fades is round(255 * (1 - s)), s =
// min(1, (|d| - t) / (R - t)) (1 when R <= t).
struct Rgb {
  uint8_t r, g, b;
};
Rgb deviation_colour(double d, double tolerance, double range);

int run_deviation(const DeviationArgs& a);

}  // namespace knn_cli

#endif
