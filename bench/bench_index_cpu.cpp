// bench_index_cpu: the index API's OpenMP kd-tree against nanoflann, in
// several dimensions, on the same data (uniform in the unit cube and the
// clustered blobs of datasets.h) in the same run.
//
//   ours       knn_index_build (KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE) and
//              knn_index_query through the public C API, all OpenMP threads
//              (the figures include the argument checks and the finite scan).
//   nanoflann  KDTreeSingleIndexAdaptor, L2_Simple, dimension at run time,
//              the pinned 1.12.1 of scripts/nanoflann-prepare.sh (else the
//              system's, said in the output): its build on as many threads as
//              ours (n_thread_build), its queries knnSearch in an OpenMP loop
//              over the queries; at its best leaf size of a sweep over
//              --nanoflann-leaf for each row (one timed build per leaf size,
//              one timed query run per leaf size and k; the smallest total
//              wins).
//
// Build and query are timed apart, the contenders taking turns (ours,
// nanoflann, ours, ...), median of --repeats after a warm-up. The answers are
// checked on --check queries: the float32 distances must agree rank by rank
// (nanoflann's L2_Simple sums the squares in dimension order, as the contract
// does; this file is compiled without FMA contraction).
//
// --radius C times radius search instead (uniform data, nanoflann leaf 20):
// the radius that holds C of the n
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
// turns, at the first k of --k, on uniform data, on --structure (kdtree,
// grid, brute or auto; default kdtree). The
// check counts the index slots where the two answers differ (ties and near
// ties may rank differently in float32; the float64 answer is exact).
//
// Usage: bench_index_cpu [--small] [--n N] [--m M] [--dims 3,8,16] [--k 8,100]
//                        [--dist uniform|clustered|both] [--leaf L]
//                        [--nanoflann-leaf 10,16,24,32,48,64] [--repeats R]
//                        [--check Q] [--radius C] [--f64 [--structure S]]
//                        [--cpu-time]
// --cpu-time: every figure is the process's CPU time (all threads summed),
// not the wall clock (bench_timer.h): for a machine shared with other work.
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
#include "machine.h"
#include "nanoflann_rows.h"

namespace {

using knn_bench::check_status;

using knn_bench::Distribution;
using knn_bench::Timing;

// nanoflann's leaf size in the radius search (its best on 3-D at k = 8).
constexpr int kRadiusNanoflannLeaf = 20;

struct Options {
  int64_t n = 1000000;
  int64_t m = 1000000;
  std::vector<int> dims{3, 8, 16};
  std::vector<int> ks{8, 100};
  std::vector<Distribution> dists{Distribution::Uniform, Distribution::Clustered};
  std::vector<int> nanoflann_leaves = knn_bench::default_nanoflann_leaves();
  int leaf = 0;  // ours; 0: the library's default
  int repeats = 5;
  int check = 1000;
  int radius_neighbours = 0;  // --radius: time radius search for this many
  bool f64 = false;           // --f64: float64 against float32
  int structure = KNN_STRUCTURE_KDTREE;
};

const char kUsage[] =
    "usage: bench_index_cpu [--small] [--n N] [--m M] [--dims LIST] [--k LIST]\n"
    "                       [--dist uniform|clustered|both] [--leaf L]\n"
    "                       [--nanoflann-leaf LIST] [--repeats R] [--check Q] [--radius C]\n"
    "                       [--f64 [--structure kdtree|grid|brute|auto]] [--cpu-time]\n"
    "  --small: n = m = 1e5 (a quick run); N, M accept 1e6 notation; LIST e.g. 3,8,16\n"
    "  --leaf: ours (default: the library's); --nanoflann-leaf: the leaf sizes swept\n"
    "  --f64: float64 against float32 on the same data (our index API only)\n";

const knn_bench::CommandLine kCommandLine{"bench_index_cpu", kUsage};

std::vector<int> parse_list(const std::string& text, const char* what, int min, int max) {
  std::vector<int> values;
  std::stringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');)
    values.push_back(static_cast<int>(kCommandLine.count(item, what, min, max)));
  if (values.empty()) kCommandLine.fail(std::string("empty ") + what + " list");
  return values;
}

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
    if (arg == "--cpu-time") {
      knn_bench::time_base() = knn_bench::TimeBase::ProcessCpu;
      continue;
    }
    const std::string value = kCommandLine.value_after(argc, argv, &i);
    if (arg == "--n") {
      o.n = kCommandLine.count(value, "--n", 1, INT_MAX);
    } else if (arg == "--m") {
      o.m = kCommandLine.count(value, "--m", 1, INT_MAX);
    } else if (arg == "--dims") {
      o.dims = parse_list(value, "--dims", 1, 4096);
    } else if (arg == "--k") {
      o.ks = parse_list(value, "--k", 1, INT_MAX);
    } else if (arg == "--nanoflann-leaf") {
      o.nanoflann_leaves = parse_list(value, "--nanoflann-leaf", 1, INT_MAX);
    } else if (arg == "--dist") {
      Distribution d;
      if (value == "both")
        o.dists = {Distribution::Uniform, Distribution::Clustered};
      else if (knn_bench::parse_distribution(value, &d))
        o.dists = {d};
      else
        kCommandLine.fail("bad --dist '" + value + "'");
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
  for (int k : o.ks)
    if (k > o.n) kCommandLine.fail("k = " + std::to_string(k) + " exceeds n");
  o.check = static_cast<int>(std::min<int64_t>(o.check, o.m));
  return o;
}

// nanoflann over rows of a dimension given at run time.
using NanoTree = knn_bench::NanoflannTree<-1>;

struct Row {
  Distribution dist;
  int dim, k, leaf;  // leaf: nanoflann's best of the sweep
  Timing ours_build, ours_query, nano_build, nano_query;
  int64_t mismatches;
  double ours_total() const { return ours_build.median_ms + ours_query.median_ms; }
  double nano_total() const { return nano_build.median_ms + nano_query.median_ms; }
};

// One data set (distribution, dimension): nanoflann's leaf sweep, the builds
// (ours, nanoflann at each best leaf size), then ours against nanoflann for
// each k.
std::vector<Row> run_data(const Options& o, Distribution dist, int dim) {
  const std::vector<float> points = knn_bench::make_rows(dist, o.n, dim, knn_bench::kReferenceSeed);
  const std::vector<float> queries = knn_bench::make_rows(dist, o.m, dim, knn_bench::kQuerySeed);
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  opt.structure = KNN_STRUCTURE_KDTREE;
  opt.leaf_size = o.leaf;
  const int k_max = *std::max_element(o.ks.begin(), o.ks.end());
  const size_t max_slots = static_cast<size_t>(o.m) * static_cast<size_t>(k_max);
  std::vector<int32_t> ours_idx(max_slots);
  std::vector<uint32_t> nano_idx(max_slots);
  std::vector<float> ours_dist(max_slots), nano_dist(max_slots);
  const knn_bench::NanoflannRows<-1> rows{points.data(), static_cast<size_t>(o.n),
                                          static_cast<size_t>(dim)};
  const size_t leaves = o.nanoflann_leaves.size();
  std::vector<std::unique_ptr<NanoTree>> trees(leaves);
  auto nano_query = [&](const NanoTree& tree, int k) {
  // k <= n: every row is full (the count returned; the check compares them).
#pragma omp parallel for schedule(dynamic, 256)
    for (int64_t i = 0; i < o.m; ++i)
      static_cast<void>(tree.knnSearch(
          &queries[static_cast<size_t>(i) * dim], static_cast<size_t>(k),
          &nano_idx[static_cast<size_t>(i) * k], &nano_dist[static_cast<size_t>(i) * k]));
  };
  auto build_nano = [&](size_t l) {
    trees[l] =
        std::make_unique<NanoTree>(dim, rows, knn_bench::nanoflann_params(o.nanoflann_leaves[l]));
  };

  // ---- nanoflann's best leaf size for each k ----
  std::printf("\n== %s, %d-D\n", knn_bench::distribution_name(dist), dim);
  const knn_bench::LeafSweep sweep =
      knn_bench::sweep_leaves(o.nanoflann_leaves, o.ks.size(), build_nano,
                              [&](size_t l, size_t k) { nano_query(*trees[l], o.ks[k]); });
  knn_bench::print_sweep(sweep, o.ks);
  std::vector<size_t> best_leaves;  // indices into o.nanoflann_leaves, each once
  for (size_t k = 0; k < o.ks.size(); ++k)
    if (std::find(best_leaves.begin(), best_leaves.end(), sweep.best(k)) == best_leaves.end())
      best_leaves.push_back(sweep.best(k));
  for (size_t l = 0; l < leaves; ++l)
    if (std::find(best_leaves.begin(), best_leaves.end(), l) == best_leaves.end()) trees[l].reset();

  // ---- Builds ----
  knn_index* index = nullptr;
  std::vector<knn_bench::Contender> builds;
  builds.push_back(
      {[&] { check_status(knn_index_build(points.data(), o.n, dim, &opt, &index), "build"); },
       [&] {
         knn_index_free(index);
         index = nullptr;
       }});
  for (size_t l : best_leaves)
    builds.push_back({[&, l] { build_nano(l); }, [&, l] { trees[l].reset(); }});
  const std::vector<Timing> build_times = knn_bench::measure_interleaved(builds, o.repeats);

  // ---- Queries ----
  std::vector<Row> out;
  for (size_t k_index = 0; k_index < o.ks.size(); ++k_index) {
    const int k = o.ks[k_index];
    const size_t l = sweep.best(k_index);
    const size_t b = static_cast<size_t>(std::find(best_leaves.begin(), best_leaves.end(), l) -
                                         best_leaves.begin());
    const std::vector<Timing> calls = knn_bench::measure_interleaved(
        {{[&] {
            check_status(knn_index_query(index, queries.data(), o.m, k, ours_idx.data(),
                                         ours_dist.data(), nullptr),
                         "query");
          },
          {}},
         {[&] { nano_query(*trees[l], k); }, {}}},
        o.repeats);
    int64_t mismatches = 0;
    for (int64_t i = 0; i < o.check; ++i)
      for (int j = 0; j < k; ++j) {
        const size_t s = static_cast<size_t>(i) * k + j;
        if (ours_dist[s] != nano_dist[s]) ++mismatches;
      }
    out.push_back({dist, dim, k, o.nanoflann_leaves[l], build_times[0], calls[0],
                   build_times[b + 1], calls[1], mismatches});
  }
  knn_index_free(index);
  return out;
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
  const NanoTree tree(dim, rows, knn_bench::nanoflann_params(kRadiusNanoflannLeaf));

  const int width = o.radius_neighbours;
  const size_t slots = static_cast<size_t>(o.m) * static_cast<size_t>(width);
  std::vector<int32_t> idx(slots), counts(static_cast<size_t>(o.m));
  std::vector<float> dist(slots);
  std::vector<int64_t> nano_counts(static_cast<size_t>(o.m));
  const float r2 = radius * radius;  // nanoflann's L2_Simple compares squared distances
  auto nano = [&](bool sorted) {
    knn_bench::NanoflannSearchParams params;
    params.sorted = sorted;
#pragma omp parallel
    {
      knn_bench::NanoflannMatches found;
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
  const int k = o.ks.front();
  const size_t slots = static_cast<size_t>(o.m) * static_cast<size_t>(k);
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
          check_status(knn_index_query(index32, queries.data(), o.m, k, idx32.data(), dist32.data(),
                                       nullptr),
                       "query");
        },
        {}},
       {[&] {
          check_status(knn_index_query_f64(index64, queries64.data(), o.m, k, idx64.data(),
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
  for (size_t s = 0; s < static_cast<size_t>(o.check) * k; ++s) differing += idx32[s] != idx64[s];
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
        static_cast<long long>(r.differing), static_cast<long long>(o.check) * o.ks.front());
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  std::printf("bench_index_cpu: n = %lld, m = %lld, %d threads, %s, median of %d; ours leaf %s\n",
              static_cast<long long>(o.n), static_cast<long long>(o.m), omp_get_max_threads(),
              knn_bench::time_base() == knn_bench::TimeBase::Wall
                  ? "wall clock"
                  : "process CPU time (all threads)",
              o.repeats, o.leaf ? std::to_string(o.leaf).c_str() : "default");
  std::printf("machine: %d cores, %s; %s; %s\n", omp_get_num_procs(),
              knn_bench::cpu_model().c_str(), knn_bench::compiler().c_str(),
              knn_bench::today_utc().c_str());
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
  std::printf("nanoflann %s, queries over %d OpenMP threads\n",
              knn_bench::nanoflann_description().c_str(), omp_get_max_threads());
  std::vector<Row> rows;
  try {
    for (const Distribution dist : o.dists)
      for (const int dim : o.dims)
        for (const Row& r : run_data(o, dist, dim)) {
          std::printf(
              "%-9s %2d-D k=%-4d | ours %8.1f + %9.1f = %9.1f ms | nanoflann leaf %2d %8.1f + "
              "%9.1f = %9.1f ms | total %5.2fx query %5.2fx | distance mismatches %lld of %lld\n",
              knn_bench::distribution_name(r.dist), r.dim, r.k, r.ours_build.median_ms,
              r.ours_query.median_ms, r.ours_total(), r.leaf, r.nano_build.median_ms,
              r.nano_query.median_ms, r.nano_total(), r.nano_total() / r.ours_total(),
              r.nano_query.median_ms / r.ours_query.median_ms, static_cast<long long>(r.mismatches),
              static_cast<long long>(o.check) * r.k);
          std::fflush(stdout);
          rows.push_back(r);
        }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_index_cpu: %s\n", e.what());
    return 1;
  }
  // The table last (nanoflann / ours; issue #53's targets: total >= 2, query >= 1.5).
  std::printf(
      "\n%d threads, %s, %s (%s ms; ratio = nanoflann / ours, > 1: ours is faster)\n\n"
      "| data | dim | k | ours build | ours query | ours total | nanoflann leaf | nanoflann build "
      "| nanoflann query | nanoflann total | total ratio | query ratio |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
      omp_get_max_threads(), knn_bench::cpu_model().c_str(), knn_bench::today_utc().c_str(),
      knn_bench::time_base() == knn_bench::TimeBase::Wall ? "wall" : "CPU");
  bool agree = true;
  for (const Row& r : rows) {
    std::printf("| %s | %d | %d | %.1f | %.1f | %.1f | %d | %.1f | %.1f | %.1f | %.2f | %.2f |\n",
                knn_bench::distribution_name(r.dist), r.dim, r.k, r.ours_build.median_ms,
                r.ours_query.median_ms, r.ours_total(), r.leaf, r.nano_build.median_ms,
                r.nano_query.median_ms, r.nano_total(), r.nano_total() / r.ours_total(),
                r.nano_query.median_ms / r.ours_query.median_ms);
    agree = agree && r.mismatches == 0;
  }
  if (!agree) {
    std::fprintf(stderr, "bench_index_cpu: distances unlike nanoflann's (see the rows)\n");
    return 1;
  }
  return 0;
}
