// bench_index_cpu: the index API's OpenMP kd-tree against nanoflann, in
// several dimensions, on the same uniform data in the same run.
//
//   ours       knn_index_build (KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE) and
//              knn_index_query through the public C API, all OpenMP threads
//              (the figures include the argument checks and the finite scan).
//   nanoflann  KDTreeSingleIndexAdaptor, L2_Simple, dimension at run time,
//              leaf size 20 (its best on 3-D, bench/RESULTS.md); its build is
//              single-threaded, its queries run knnSearch in an OpenMP loop.
//
// Build and query are timed apart, the contenders taking turns (ours,
// nanoflann, ours, ...), median of --repeats after a warm-up. The answers are
// checked on --check queries: the float32 distances must agree rank by rank
// (nanoflann's L2_Simple sums the squares in dimension order, as the contract
// does; this file is compiled without FMA contraction).
//
// Usage: bench_index_cpu [--small] [--n N] [--m M] [--dims 3,8,16] [--k 8]
//                        [--leaf L] [--repeats R] [--check Q]
#include <omp.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nanoflann.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_timer.h"
#include "check_status.h"
#include "command_line.h"
#include "datasets.h"
#include "knn_gpgpu.h"
#include "nanoflann_rows.h"

namespace {

using knn_bench::check_status;

constexpr int kNanoflannLeaf = 20;

struct Options {
  int64_t n = 1000000;
  int64_t m = 1000000;
  std::vector<int> dims{3, 8, 16};
  int k = 8;
  int leaf = 0;  // 0: the library's default
  int repeats = 5;
  int check = 1000;
};

const char kUsage[] =
    "usage: bench_index_cpu [--small] [--n N] [--m M] [--dims LIST] [--k K] [--leaf L]\n"
    "                       [--repeats R] [--check Q]\n"
    "  --small: n = m = 1e5 (a quick run); N, M accept 1e6 notation; LIST e.g. 3,8,16\n";

const knn_bench::CommandLine kCommandLine{"bench_index_cpu", kUsage};

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    kCommandLine.exit_if_help(arg);
    if (arg == "--small") {
      o.n = o.m = 100000;
      continue;
    }
    const std::string value = kCommandLine.value_after(argc, argv, &i);
    if (arg == "--n") {
      o.n = kCommandLine.count(value, "--n", 1, INT_MAX);
    } else if (arg == "--m") {
      o.m = kCommandLine.count(value, "--m", 1, INT_MAX);
    } else if (arg == "--dims") {
      o.dims.clear();
      std::stringstream stream(value);
      for (std::string item; std::getline(stream, item, ',');)
        o.dims.push_back(static_cast<int>(kCommandLine.count(item, "--dims", 1, 4096)));
      if (o.dims.empty()) kCommandLine.fail("empty --dims list");
    } else if (arg == "--k") {
      o.k = static_cast<int>(kCommandLine.count(value, "--k", 1, INT_MAX));
    } else if (arg == "--leaf") {
      o.leaf = static_cast<int>(kCommandLine.count(value, "--leaf", 1, INT_MAX));
    } else if (arg == "--repeats") {
      o.repeats = static_cast<int>(kCommandLine.count(value, "--repeats", 1, 1000));
    } else if (arg == "--check") {
      o.check = static_cast<int>(kCommandLine.count(value, "--check", 0, INT_MAX));
    } else {
      kCommandLine.fail("unknown option " + arg);
    }
  }
  if (o.k > o.n) kCommandLine.fail("k exceeds n");
  o.check = static_cast<int>(std::min<int64_t>(o.check, o.m));
  return o;
}

// nanoflann over rows of a dimension given at run time.
using NanoTree = knn_bench::NanoflannTree<-1>;

struct Row {
  int dim;
  double ours_build, ours_query, nano_build, nano_query;
  int64_t mismatches;
};

Row run_dim(const Options& o, int dim) {
  const std::vector<float> points = knn_bench::uniform_rows(o.n, dim, 1);
  const std::vector<float> queries = knn_bench::uniform_rows(o.m, dim, 2);
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  opt.structure = KNN_STRUCTURE_KDTREE;
  opt.leaf_size = o.leaf;
  const size_t slots = static_cast<size_t>(o.m) * static_cast<size_t>(o.k);
  std::vector<int32_t> ours_idx(slots), nano_idx(slots);
  std::vector<float> ours_dist(slots), nano_dist(slots);
  const knn_bench::NanoflannRows<-1> rows{points.data(), static_cast<size_t>(o.n),
                                           static_cast<size_t>(dim)};

  knn_index* index = nullptr;
  std::unique_ptr<NanoTree> tree;
  const nanoflann::KDTreeSingleIndexAdaptorParams nano_params(kNanoflannLeaf);
  const std::vector<knn_bench::Timing> builds = knn_bench::measure_interleaved(
      {{[&] { check_status(knn_index_build(points.data(), o.n, dim, &opt, &index), "build"); },
        [&] {
          knn_index_free(index);
          index = nullptr;
        }},
       {[&] { tree = std::make_unique<NanoTree>(dim, rows, nano_params); },
        [&] { tree.reset(); }}},
      o.repeats);

  auto nano_query = [&] {
#pragma omp parallel for schedule(dynamic, 256)
    for (int64_t i = 0; i < o.m; ++i) {
      std::vector<uint32_t> ids(static_cast<size_t>(o.k));
      tree->knnSearch(&queries[static_cast<size_t>(i) * dim], static_cast<size_t>(o.k), ids.data(),
                      &nano_dist[static_cast<size_t>(i) * o.k]);
      for (int j = 0; j < o.k; ++j)
        nano_idx[static_cast<size_t>(i) * o.k + j] = static_cast<int32_t>(ids[static_cast<size_t>(j)]);
    }
  };
  const std::vector<knn_bench::Timing> calls = knn_bench::measure_interleaved(
      {{[&] {
          check_status(knn_index_query(index, queries.data(), o.m, o.k, ours_idx.data(),
                                       ours_dist.data(), nullptr),
                       "query");
        },
        {}},
       {nano_query, {}}},
      o.repeats);
  knn_index_free(index);

  int64_t mismatches = 0;
  for (int64_t i = 0; i < o.check; ++i)
    for (int j = 0; j < o.k; ++j) {
      const size_t s = static_cast<size_t>(i) * o.k + j;
      if (ours_dist[s] != nano_dist[s]) ++mismatches;
    }
  return {dim, builds[0].median_ms, calls[0].median_ms, builds[1].median_ms, calls[1].median_ms,
          mismatches};
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  std::printf("bench_index_cpu: n = %lld, m = %lld, k = %d, uniform in [0, 1)^d, %d threads, "
              "median of %d; ours leaf %s, nanoflann leaf %d\n",
              static_cast<long long>(o.n), static_cast<long long>(o.m), o.k, omp_get_max_threads(),
              o.repeats, o.leaf ? std::to_string(o.leaf).c_str() : "default", kNanoflannLeaf);
  std::printf("%4s | %12s %12s %12s | %12s %12s %12s | %8s | %s\n", "dim", "ours build",
              "ours query", "ours total", "nano build", "nano query", "nano total", "ratio",
              "distance mismatches");
  try {
    for (const int dim : o.dims) {
      const Row r = run_dim(o, dim);
      const double ours = r.ours_build + r.ours_query, nano = r.nano_build + r.nano_query;
      std::printf("%4d | %10.1f ms %10.1f ms %10.1f ms | %10.1f ms %10.1f ms %10.1f ms | %7.2fx | "
                  "%lld of %lld\n",
                  r.dim, r.ours_build, r.ours_query, ours, r.nano_build, r.nano_query, nano,
                  nano / ours, static_cast<long long>(r.mismatches),
                  static_cast<long long>(o.check) * o.k);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_index_cpu: %s\n", e.what());
    return 1;
  }
  return 0;
}
