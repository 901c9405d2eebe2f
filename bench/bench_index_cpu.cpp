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
// --radius C times radius search instead: the radius that holds C of the n
// uniform points on average (fewer at the faces), ours as rows of C with the
// true counts and as counting only, nanoflann's radiusSearch (sorted, and
// unsorted for the count) in an OpenMP loop; the counts are compared on
// every query (nanoflann keeps d < r^2, the contract d <= r^2: a point
// exactly on the sphere counts for us only).
//
// --f64 times the two precisions of the index API instead (issue #22's
// float64 target on the CPU: at most 1.5x the float32 time): the float32
// data, and the same values widened to double, through knn_index_build /
// knn_index_query and knn_index_build_f64 / knn_index_query_f64, taking
// turns, on --structure (kdtree, grid, brute or auto; default kdtree). The
// check counts the index slots where the two answers differ (ties and near
// ties may rank differently in float32; the float64 answer is exact).
//
// Usage: bench_index_cpu [--small] [--n N] [--m M] [--dims 3,8,16] [--k 8]
//                        [--leaf L] [--repeats R] [--check Q] [--radius C]
//                        [--f64 [--structure S]]
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

#include "../common/math_constants.h"
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
  int radius_neighbours = 0;  // --radius: time radius search for this many
  bool f64 = false;           // --f64: float64 against float32
  int structure = KNN_STRUCTURE_KDTREE;
};

const char kUsage[] =
    "usage: bench_index_cpu [--small] [--n N] [--m M] [--dims LIST] [--k K] [--leaf L]\n"
    "                       [--repeats R] [--check Q] [--radius C]\n"
    "                       [--f64 [--structure kdtree|grid|brute|auto]]\n"
    "  --small: n = m = 1e5 (a quick run); N, M accept 1e6 notation; LIST e.g. 3,8,16\n"
    "  --f64: float64 against float32 on the same data (our index API only)\n";

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
    if (arg == "--f64") {
      o.f64 = true;
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
    } else if (arg == "--radius") {
      o.radius_neighbours = static_cast<int>(kCommandLine.count(value, "--radius", 1, INT_MAX));
    } else if (arg == "--structure") {
      if (value == "kdtree")
        o.structure = KNN_STRUCTURE_KDTREE;
      else if (value == "grid")
        o.structure = KNN_STRUCTURE_GRID;
      else if (value == "brute")
        o.structure = KNN_STRUCTURE_BRUTE_FORCE;
      else if (value == "auto")
        o.structure = KNN_STRUCTURE_AUTO;
      else
        kCommandLine.fail("--structure must be kdtree, grid, brute or auto");
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
       {[&] { tree = std::make_unique<NanoTree>(dim, rows, nano_params); }, [&] { tree.reset(); }}},
      o.repeats);

  auto nano_query = [&] {
#pragma omp parallel for schedule(dynamic, 256)
    for (int64_t i = 0; i < o.m; ++i) {
      std::vector<uint32_t> ids(static_cast<size_t>(o.k));
      tree->knnSearch(&queries[static_cast<size_t>(i) * dim], static_cast<size_t>(o.k), ids.data(),
                      &nano_dist[static_cast<size_t>(i) * o.k]);
      for (int j = 0; j < o.k; ++j)
        nano_idx[static_cast<size_t>(i) * o.k + j] =
            static_cast<int32_t>(ids[static_cast<size_t>(j)]);
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
  return {
      dim,       builds[0].median_ms, calls[0].median_ms, builds[1].median_ms, calls[1].median_ms,
      mismatches};
}

struct RadiusRow {
  int dim;
  float radius;
  double ours_rows, ours_count, nano_sorted, nano_count, mean_count;
  int64_t ours_more, ours_fewer;  // queries whose counts differ, by sign
};

// The radius whose ball holds `neighbours` of n uniform points in the unit
// cube on average: n * V_d * r^d = neighbours, V_d = pi^(d/2) / Gamma(d/2 + 1).
float radius_for(int64_t n, int dim, int neighbours) {
  const double ball = std::pow(knn::kPi, dim / 2.0) / std::tgamma(dim / 2.0 + 1.0);
  return static_cast<float>(std::pow(neighbours / (ball * static_cast<double>(n)), 1.0 / dim));
}

RadiusRow run_radius(const Options& o, int dim) {
  const std::vector<float> points = knn_bench::uniform_rows(o.n, dim, 1);
  const std::vector<float> queries = knn_bench::uniform_rows(o.m, dim, 2);
  const float radius = radius_for(o.n, dim, o.radius_neighbours);
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  opt.structure = KNN_STRUCTURE_KDTREE;
  opt.leaf_size = o.leaf;
  knn_index* index = nullptr;
  check_status(knn_index_build(points.data(), o.n, dim, &opt, &index), "build");
  const knn_bench::NanoflannRows<-1> rows{points.data(), static_cast<size_t>(o.n),
                                          static_cast<size_t>(dim)};
  const NanoTree tree(dim, rows, nanoflann::KDTreeSingleIndexAdaptorParams(kNanoflannLeaf));

  const int width = o.radius_neighbours;
  const size_t slots = static_cast<size_t>(o.m) * static_cast<size_t>(width);
  std::vector<int32_t> idx(slots), counts(static_cast<size_t>(o.m));
  std::vector<float> dist(slots);
  std::vector<int64_t> nano_counts(static_cast<size_t>(o.m));
  const float r2 = radius * radius;  // nanoflann's L2_Simple compares squared distances
  auto nano = [&](bool sorted) {
    nanoflann::SearchParams params;
    params.sorted = sorted;
#pragma omp parallel
    {
      std::vector<std::pair<uint32_t, float>> found;
#pragma omp for schedule(dynamic, 256)
      for (int64_t i = 0; i < o.m; ++i)
        nano_counts[static_cast<size_t>(i)] = static_cast<int64_t>(
            tree.radiusSearch(&queries[static_cast<size_t>(i) * dim], r2, found, params));
    }
  };
  const std::vector<knn_bench::Timing> t = knn_bench::measure_interleaved(
      {{[&] {
          check_status(knn_index_radius(index, queries.data(), o.m, radius, width, idx.data(),
                                        dist.data(), counts.data(), nullptr),
                       "radius rows");
        },
        {}},
       {[&] {
          check_status(knn_index_radius(index, queries.data(), o.m, radius, 0, nullptr, nullptr,
                                        counts.data(), nullptr),
                       "radius count");
        },
        {}},
       {[&] { nano(true); }, {}},
       {[&] { nano(false); }, {}}},
      o.repeats);
  knn_index_free(index);
  int64_t more = 0, fewer = 0;
  double total = 0;
  for (int64_t i = 0; i < o.m; ++i) {
    total += counts[static_cast<size_t>(i)];
    more += counts[static_cast<size_t>(i)] > nano_counts[static_cast<size_t>(i)];
    fewer += counts[static_cast<size_t>(i)] < nano_counts[static_cast<size_t>(i)];
  }
  return {dim,
          radius,
          t[0].median_ms,
          t[1].median_ms,
          t[2].median_ms,
          t[3].median_ms,
          total / static_cast<double>(o.m),
          more,
          fewer};
}

void print_radius_table(const Options& o) {
  std::printf("radius search, rows of %d (time and queries per second)\n", o.radius_neighbours);
  std::printf("%4s | %8s | %10s | %-20s | %-20s | %-20s | %-20s | %s\n", "dim", "radius",
              "mean count", "ours rows", "ours counting", "nanoflann sorted", "nanoflann unsorted",
              "counts unlike nanoflann's (ours more / fewer)");
  for (const int dim : o.dims) {
    const RadiusRow r = run_radius(o, dim);
    const auto rate = [&](double ms) { return static_cast<double>(o.m) / (ms / 1000.0); };
    std::printf(
        "%4d | %8.5f | %10.1f | %8.1f ms %7.2g/s | %8.1f ms %7.2g/s | %8.1f ms %7.2g/s | "
        "%8.1f ms %7.2g/s | %lld / %lld of %lld\n",
        r.dim, r.radius, r.mean_count, r.ours_rows, rate(r.ours_rows), r.ours_count,
        rate(r.ours_count), r.nano_sorted, rate(r.nano_sorted), r.nano_count, rate(r.nano_count),
        static_cast<long long>(r.ours_more), static_cast<long long>(r.ours_fewer),
        static_cast<long long>(o.m));
    std::fflush(stdout);
  }
}

struct PrecisionRow {
  int dim;
  int structure;  // what served the float64 index
  double build32, query32, build64, query64;
  int64_t differing;  // index slots of the checked queries where the answers differ
};

PrecisionRow run_precision(const Options& o, int dim) {
  const std::vector<float> points = knn_bench::uniform_rows(o.n, dim, 1);
  const std::vector<float> queries = knn_bench::uniform_rows(o.m, dim, 2);
  const std::vector<double> points64(points.begin(), points.end());
  const std::vector<double> queries64(queries.begin(), queries.end());
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  opt.structure = o.structure;
  opt.leaf_size = o.leaf;
  const size_t slots = static_cast<size_t>(o.m) * static_cast<size_t>(o.k);
  std::vector<int32_t> idx32(slots), idx64(slots);
  std::vector<float> dist32(slots);
  std::vector<double> dist64(slots);
  knn_index* index32 = nullptr;
  knn_index* index64 = nullptr;
  const std::vector<knn_bench::Timing> builds = knn_bench::measure_interleaved(
      {{[&] { check_status(knn_index_build(points.data(), o.n, dim, &opt, &index32), "build"); },
        [&] {
          knn_index_free(index32);
          index32 = nullptr;
        }},
       {[&] {
          check_status(knn_index_build_f64(points64.data(), o.n, dim, &opt, &index64), "build_f64");
        },
        [&] {
          knn_index_free(index64);
          index64 = nullptr;
        }}},
      o.repeats);
  const std::vector<knn_bench::Timing> calls = knn_bench::measure_interleaved(
      {{[&] {
          check_status(knn_index_query(index32, queries.data(), o.m, o.k, idx32.data(),
                                       dist32.data(), nullptr),
                       "query");
        },
        {}},
       {[&] {
          check_status(knn_index_query_f64(index64, queries64.data(), o.m, o.k, idx64.data(),
                                           dist64.data(), nullptr),
                       "query_f64");
        },
        {}}},
      o.repeats);
  int structure = 0;
  check_status(knn_index_info(index64, nullptr, nullptr, nullptr, &structure), "info");
  knn_index_free(index32);
  knn_index_free(index64);
  int64_t differing = 0;
  for (size_t s = 0; s < static_cast<size_t>(o.check) * o.k; ++s) differing += idx32[s] != idx64[s];
  return {dim,
          structure,
          builds[0].median_ms,
          calls[0].median_ms,
          builds[1].median_ms,
          calls[1].median_ms,
          differing};
}

void print_precision_table(const Options& o) {
  static const char* const kStructures[] = {"auto", "kdtree", "grid", "brute"};
  std::printf("float64 against float32, ours, asked structure %s (time ms; ratio f64 / f32)\n",
              kStructures[o.structure]);
  std::printf("%4s | %-7s | %10s %10s %10s | %10s %10s %10s | %6s %6s %6s | %s\n", "dim", "served",
              "f32 build", "f32 query", "f32 total", "f64 build", "f64 query", "f64 total", "build",
              "query", "total", "slots unlike f32");
  for (const int dim : o.dims) {
    const PrecisionRow r = run_precision(o, dim);
    const double t32 = r.build32 + r.query32, t64 = r.build64 + r.query64;
    std::printf(
        "%4d | %-7s | %10.1f %10.1f %10.1f | %10.1f %10.1f %10.1f | %5.2fx %5.2fx %5.2fx | "
        "%lld of %lld\n",
        r.dim, kStructures[r.structure], r.build32, r.query32, t32, r.build64, r.query64, t64,
        r.build64 / r.build32, r.query64 / r.query32, t64 / t32,
        static_cast<long long>(r.differing), static_cast<long long>(o.check) * o.k);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  std::printf(
      "bench_index_cpu: n = %lld, m = %lld, k = %d, uniform in [0, 1)^d, %d threads, "
      "median of %d; ours leaf %s, nanoflann leaf %d\n",
      static_cast<long long>(o.n), static_cast<long long>(o.m), o.k, omp_get_max_threads(),
      o.repeats, o.leaf ? std::to_string(o.leaf).c_str() : "default", kNanoflannLeaf);
  if (o.f64) {
    try {
      print_precision_table(o);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_index_cpu: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  if (o.radius_neighbours > 0) {
    try {
      print_radius_table(o);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_index_cpu: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  std::printf("%4s | %12s %12s %12s | %12s %12s %12s | %8s %8s | %s\n", "dim", "ours build",
              "ours query", "ours total", "nano build", "nano query", "nano total", "ratio",
              "qratio", "distance mismatches");
  std::vector<Row> rows;
  try {
    for (const int dim : o.dims) {
      const Row r = run_dim(o, dim);
      const double ours = r.ours_build + r.ours_query, nano = r.nano_build + r.nano_query;
      std::printf(
          "%4d | %10.1f ms %10.1f ms %10.1f ms | %10.1f ms %10.1f ms %10.1f ms | %7.2fx "
          "%7.2fx | %lld of %lld\n",
          r.dim, r.ours_build, r.ours_query, ours, r.nano_build, r.nano_query, nano, nano / ours,
          r.nano_query / r.ours_query, static_cast<long long>(r.mismatches),
          static_cast<long long>(o.check) * o.k);
      std::fflush(stdout);
      rows.push_back(r);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_index_cpu: %s\n", e.what());
    return 1;
  }
  // The ratios last (nanoflann / ours; issue #19's targets: total >= 2, query >= 1.3).
  std::printf("\nratios, nanoflann / ours (k = %d):\n", o.k);
  for (const Row& r : rows)
    std::printf("  dim %2d: total %.2fx, query %.2fx\n", r.dim,
                (r.nano_build + r.nano_query) / (r.ours_build + r.ours_query),
                r.nano_query / r.ours_query);
  return 0;
}
