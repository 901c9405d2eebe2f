// What every peer driver of the mesh benchmark shares (issue 48, item 8):
// the command line, the timing rule and the loop over a mesh's scans.
//
//   <driver> DIR MESH N [N ...] [--repeats R]
//
// DIR holds the files bench_mesh_data wrote (bench/mesh_datasets.h); MESH is
// the mesh's name there (torus-1e6, bunny00), each N a scan size. A driver
// builds its structure on the mesh once (build ms), then answers each scan
// (query ms) and checks its distances on the oracle's samples; it prints one
// RESULT line per (scan, contender). Converting the data into the peer's
// own types (Eigen matrices, CGAL triangles) is not timed: a host holding
// its data that way would not pay it.
//
// Timing: one warm-up run, then the median of R runs (default 3); when the
// warm-up took more than kSlowMs, the warm-up is the figure (what a warm-up
// would save, page faults and lazy set-up, is small against seconds, and
// the largest CPU rows would otherwise not fit one GPU-machine call).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "../bench_timer.h"
#include "../mesh_datasets.h"

namespace knn_bench {
namespace mesh {

constexpr double kSlowMs = 3000;

struct DriverArgs {
  std::string dir, mesh;
  std::vector<int64_t> scan_sizes;
  int repeats = 3;
};

inline DriverArgs parse_driver_args(int argc, char** argv) {
  DriverArgs args;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repeats" && i + 1 < argc)
      args.repeats = std::max(1, std::atoi(argv[++i]));
    else
      positional.push_back(arg);
  }
  if (positional.size() < 3) {
    std::fprintf(stderr, "usage: %s DIR MESH N [N ...] [--repeats R]\n", argv[0]);
    std::exit(2);
  }
  args.dir = positional[0];
  args.mesh = positional[1];
  for (size_t i = 2; i < positional.size(); ++i)
    args.scan_sizes.push_back(parse_count(positional[i]));
  return args;
}

// Warm-up, then the median of `repeats` runs; the warm-up alone when slow.
template <class Run, class Setup = NoSetup>
double timed_ms(int repeats, Run&& run, Setup&& setup = Setup()) {
  setup();
  const double warmup = time_once_ms(run);
  if (warmup > kSlowMs) return warmup;
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) {
    setup();
    samples.push_back(time_once_ms(run));
  }
  return median_of(samples);
}

// Runs main_body(args), reporting an exception as the driver's failure.
template <class Body>
int run_driver(int argc, char** argv, Body&& main_body) {
  try {
    main_body(parse_driver_args(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
  return 0;
}

}  // namespace mesh
}  // namespace knn_bench
