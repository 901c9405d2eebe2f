// demo: the README's "main job" (scripts/demo.sh builds and runs it).
//
// Builds the kd-tree of a uniform cloud of 10^6 points and finds the k = 8
// nearest neighbours of every point of the cloud (all-kNN; --m M queries a
// separate uniform draw of M points instead) with the automatic backend
// (buildKdTree + queryAll), prints the timings, whether a CUDA device was
// found and which backends therefore ran, and checks 100 queries against
// knn_brute_force. With a device it also times the GPU-only and CPU-only
// entry points and checks that all three give identical trees and results.
// Exits 0 when everything ran and agreed, 1 otherwise.
//
// Usage: demo [--n N] [--m M] [--k K] [--repeats R] [--check Q]
#include <omp.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_timer.h"
#include "command_line.h"
#include "datasets.h"
#include "knn_gpgpu.h"

namespace {

struct Options {
  int n = 1000000;
  int m = 0;               // queries (= n when self_query)
  bool self_query = true;  // the cloud queries itself (all-kNN) unless --m is given
  int k = 8;
  int repeats = 3;
  int check = 100;
};

const char kUsage[] =
    "usage: demo [--n N] [--m M] [--k K] [--repeats R] [--check Q]\n"
    "  default: all-kNN of N = 1e6 uniform points, k = 8, median of R = 3, Q = 100 checked\n"
    "  --m M: query M separate uniform points instead of the cloud itself\n";

const knn_bench::CommandLine kCommandLine{"demo", kUsage};

int parse_int(const std::string& text, const char* what, int min) {
  return static_cast<int>(kCommandLine.count(text, what, min, INT_MAX));
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    kCommandLine.exit_if_help(arg);
    const std::string value = kCommandLine.value_after(argc, argv, &i);
    if (arg == "--n")
      o.n = parse_int(value, "--n", 1);
    else if (arg == "--m")
      o.m = parse_int(value, "--m", 1), o.self_query = false;
    else if (arg == "--k")
      o.k = parse_int(value, "--k", 1);
    else if (arg == "--repeats")
      o.repeats = parse_int(value, "--repeats", 1);
    else if (arg == "--check")
      o.check = parse_int(value, "--check", 1);
    else
      kCommandLine.fail("unknown option " + arg);
  }
  if (o.self_query) o.m = o.n;
  o.check = std::min(o.check, o.m);
  return o;
}

// A failed call: its status text and the library's message.
struct CallFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void ok(int status, const char* call) {
  if (status != KNN_OK)
    throw CallFailed(std::string(call) + " failed: " + knn_status_string(status) + " (" +
                     std::to_string(status) + "): " + knn_last_error());
}

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

void print_timing(const char* call, const knn_bench::Timing& t) {
  std::printf("  %-28s %10.1f ms   %10.1f ms\n", call, t.warmup_ms, t.median_ms);
  std::fflush(stdout);
}

// Checks `check` queries, spread over the whole set, against brute force:
// the contract makes both exact with the same tie rule, so the indices must
// be identical.
bool spot_check(const std::vector<Point>& points, const std::vector<Point>& queries,
                const std::vector<int>& result, int k, int check) {
  const int64_t m = static_cast<int64_t>(queries.size());
  std::vector<Point> sample(static_cast<size_t>(check));
  std::vector<int64_t> rows(static_cast<size_t>(check));
  for (int s = 0; s < check; ++s) {
    rows[s] = static_cast<int64_t>(s) * m / check;
    sample[s] = queries[rows[s]];
  }
  const size_t slots = static_cast<size_t>(check) * static_cast<size_t>(k);
  std::vector<int> expected(slots);
  std::vector<float> expected_distances(slots);
  ok(knn_brute_force(&points[0].p[0], static_cast<int>(points.size()), &sample[0].p[0], check, 3, k,
                     expected_distances.data(), expected.data()),
     "knn_brute_force");
  int wrong = 0;
  for (int s = 0; s < check; ++s) {
    const int* got = result.data() + rows[s] * k;
    const int* want = expected.data() + static_cast<size_t>(s) * k;
    if (!std::equal(got, got + k, want)) {
      if (wrong == 0) {
        std::printf("  first mismatch: query %lld\n    queryAll:        ",
                    static_cast<long long>(rows[s]));
        for (int j = 0; j < k; ++j) std::printf(" %d", got[j]);
        std::printf("\n    knn_brute_force: ");
        for (int j = 0; j < k; ++j) std::printf(" %d", want[j]);
        std::printf("\n");
      }
      ++wrong;
    }
  }
  std::printf("spot check: %d queries against knn_brute_force: %d identical, %d wrong\n", check,
              check - wrong, wrong);
  return wrong == 0;
}

int run(const Options& o) {
  bool passed = true;
  const int version = knn_version();
  std::printf("knn_gpgpu demo: library %d.%d.%d (header %d.%d.%d), %d CPU threads\n",
              version / 10000, version / 100 % 100, version % 100, KNN_VERSION_MAJOR,
              KNN_VERSION_MINOR, KNN_VERSION_PATCH, omp_get_max_threads());

  // ---- Devices ----------------------------------------------------------
  const int devices = cuGetDeviceCount();
  if (devices > 0) {
    std::printf("CUDA devices: %d (using device %d, %.0f MiB free)\n", devices, cuGetDevice(),
                mib(getFreeBytesOnGpu()));
  } else {
    std::printf("CUDA devices: none (cuGetDeviceCount() = 0)\n");
  }

  // ---- Data ---------------------------------------------------------------
  const knn_bench::Clock::time_point start = knn_bench::Clock::now();
  const std::vector<Point> points =
      knn_bench::reference_points(knn_bench::Distribution::Uniform, o.n);
  const std::vector<Point> queries =
      o.self_query ? points : knn_bench::query_points(knn_bench::Distribution::Uniform, o.m);
  if (o.self_query)
    std::printf(
        "data: %d uniform points in the unit cube, all-kNN (the points query themselves), "
        "k = %d (generated in %.0f ms)\n",
        o.n, o.k, knn_bench::ms_since(start));
  else
    std::printf(
        "data: %d uniform points in the unit cube, %d separate uniform queries, k = %d "
        "(generated in %.0f ms)\n",
        o.n, o.m, o.k, knn_bench::ms_since(start));

  const size_t slots = static_cast<size_t>(o.m) * static_cast<size_t>(o.k);
  std::vector<Node> tree(getTreeSize(o.n) / sizeof(Node));
  std::vector<int> result(slots);

  // ---- The main job: automatic backend ----------------------------------
  const std::string median_title = "median of " + std::to_string(o.repeats);
  std::printf("\n  %-28s %13s   %13s\n", "call", "first call", median_title.c_str());
  const knn_bench::Timing build = knn_bench::measure(
      [&] { ok(buildKdTree(points.data(), o.n, tree.data()), "buildKdTree"); }, o.repeats);
  print_timing("buildKdTree (auto)", build);
  const knn_bench::Timing query = knn_bench::measure(
      [&] { ok(queryAll(queries.data(), tree.data(), o.m, o.n, o.k, result.data()), "queryAll"); },
      o.repeats);
  print_timing("queryAll (auto)", query);

  // ---- The GPU-only and CPU-only entry points ------------------------------
  if (devices > 0) {
    std::vector<Node> other_tree(tree.size());
    std::vector<int> other_result(slots);
    struct Variant {
      const char* build_name;
      int (*build)(const Point*, int, Node*);
      const char* query_name;
      int (*query)(const Point*, const Node*, int, int, int, int*);
    };
    const Variant variants[] = {{"cuBuildKdTree", cuBuildKdTree, "cuQueryAll", cuQueryAll},
                                {"mpBuildKdTree", mpBuildKdTree, "mpQueryAll", mpQueryAll}};
    for (const Variant& v : variants) {
      print_timing(v.build_name,
                   knn_bench::measure(
                       [&] { ok(v.build(points.data(), o.n, other_tree.data()), v.build_name); },
                       o.repeats));
      const bool same_tree = std::memcmp(other_tree.data(), tree.data(), getTreeSize(o.n)) == 0;
      // Query the automatic build's tree so that each query call is judged alone.
      print_timing(v.query_name, knn_bench::measure(
                                     [&] {
                                       ok(v.query(queries.data(), tree.data(), o.m, o.n, o.k,
                                                  other_result.data()),
                                          v.query_name);
                                     },
                                     o.repeats));
      const bool same_result = other_result == result;
      std::printf("    %s tree %s buildKdTree's; %s result %s queryAll's\n", v.build_name,
                  same_tree ? "is byte-identical to" : "DIFFERS from", v.query_name,
                  same_result ? "is identical to" : "DIFFERS from");
      passed = passed && same_tree && same_result;
    }
  }
  const size_t build_bytes = getNeededBytesForBuildingKdTree(o.n);
  const size_t query_bytes = getNeededBytesForQueryAll(o.m, o.k, o.n);

  // ---- Which backends ran ---------------------------------------------------
  std::printf("\nbackends:\n");
  if (devices > 0) {
    const size_t free_bytes = getFreeBytesOnGpu();
    std::printf("  buildKdTree: %s (a GPU build needs %.0f MiB; %.0f MiB free)\n",
                build_bytes <= free_bytes ? "CUDA device" : "OpenMP (the GPU build did not fit)",
                mib(build_bytes), mib(free_bytes));
    std::printf(
        "  queryAll:    CUDA device, OpenMP threads sharing the queries as the library "
        "plans (the whole call needs %.0f MiB of device memory; %s)\n",
        mib(query_bytes),
        query_bytes <= free_bytes ? "fits at once" : "run in chunks / tree parts");
  } else {
    std::printf("  buildKdTree: OpenMP engine on %d threads (no CUDA device)\n",
                omp_get_max_threads());
    std::printf("  queryAll:    OpenMP engine on %d threads (no CUDA device)\n",
                omp_get_max_threads());
    // The GPU-only calls must refuse cleanly and leave the library usable
    // (the spot check below runs after them).
    std::vector<Node> scratch_tree(tree.size());
    std::vector<int> scratch_result(static_cast<size_t>(o.check) * static_cast<size_t>(o.k));
    const int build_status = cuBuildKdTree(points.data(), o.n, scratch_tree.data());
    std::printf("  cuBuildKdTree: %s (\"%s\")\n", knn_status_string(build_status),
                knn_last_error());
    const int query_status =
        cuQueryAll(queries.data(), tree.data(), o.check, o.n, o.k, scratch_result.data());
    std::printf("  cuQueryAll:    %s (\"%s\")\n", knn_status_string(query_status),
                knn_last_error());
    if (build_status != KNN_ERR_NO_DEVICE || query_status != KNN_ERR_NO_DEVICE) {
      std::printf("  expected KNN_ERR_NO_DEVICE from both without a device\n");
      passed = false;
    }
  }

  // ---- Correctness ----------------------------------------------------------
  std::printf("\n");
  passed = spot_check(points, queries, result, o.k, o.check) && passed;
  std::printf("\n%s\n", passed ? "demo OK" : "demo FAILED");
  return passed ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {  // a failed call (CallFailed) or no memory
    std::fprintf(stderr, "demo: %s\n", e.what());
  }
  return 1;
}
