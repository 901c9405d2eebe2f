// knn_cli.cpp - the knn-gpgpu command-line tool (see docs/cli.md).
//
// A host of libknn_gpgpu like any other: it uses include/knn_gpgpu.h only.
// Exit status: 0 success, 1 bad input / I/O / library error, 2 the engine a
// subcommand needs is not in this release (KNN_ERR_UNSUPPORTED), and CLI11's
// own non-zero codes for command-line errors.
#include <CLI/CLI.hpp>

#ifdef _WIN32
#include <io.h>
#define KNN_CLI_STDERR_IS_TTY() (_isatty(_fileno(stderr)) != 0)
#else
#include <unistd.h>
#define KNN_CLI_STDERR_IS_TTY() (isatty(STDERR_FILENO) == 1)
#endif

#include <chrono>
#include <climits>
#include <cstdio>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#if KNN_CLI_HAVE_JSON
#include <nlohmann/json.hpp>

#include "bench.h"
#endif

#include "knn_gpgpu.h"
#include "point_io.h"

namespace {

using Clock = std::chrono::steady_clock;

// A library call that failed: the status and knn_last_error() at the time.
struct LibraryError : std::runtime_error {
  int status;
  LibraryError(const std::string& call, int st)
      : std::runtime_error(call + ": " + knn_status_string(st) + ": " + knn_last_error()),
        status(st) {}
};

void check(int status, const char* call) {
  if (status != KNN_OK) throw LibraryError(call, status);
}

// Progress lines on stderr, only when stderr is a terminal.
class Progress {
 public:
  Progress() : enabled_(KNN_CLI_STDERR_IS_TTY()), start_(Clock::now()) {}
  void step(const std::string& what) const {
    if (!enabled_) return;
    const double s = std::chrono::duration<double>(Clock::now() - start_).count();
    std::fprintf(stderr, "knn-gpgpu [%8.3f s] %s\n", s, what.c_str());
    std::fflush(stderr);
  }

 private:
  bool enabled_;
  Clock::time_point start_;
};

int point_count(const std::vector<float>& xyz, const std::string& path) {
  const size_t n = xyz.size() / 3;
  if (n > static_cast<size_t>(INT_MAX))
    throw std::runtime_error(path + ": " + std::to_string(n) +
                             " points exceed the classic API's limit of 2^31-1");
  return static_cast<int>(n);
}

// The contract's squared distance: float32, ((dx*dx + dy*dy) + dz*dz), no FMA
// (this file is compiled with -ffp-contract=off).
float squared_distance(const float* q, const float* p) {
  const float dx = q[0] - p[0];
  const float dy = q[1] - p[1];
  const float dz = q[2] - p[2];
  const float xx = dx * dx;
  const float yy = dy * dy;
  const float zz = dz * dz;
  return (xx + yy) + zz;
}

struct KnnArgs {
  std::string ref, query, out, backend = "auto";
  bool self = false, exclude_self = false, distances = false;
  int k = 0;
};

int run_knn(const KnnArgs& a) {
  const Progress progress;
  if (a.query.empty() && !a.self) throw std::runtime_error("give --query FILE or --self");
  if (a.exclude_self && !a.self) throw std::runtime_error("--exclude-self needs --self");
  if (a.k < 1) throw std::runtime_error("--k must be at least 1");
  const std::string out_ext = knn_cli::extension_of(a.out);
  if (out_ext != ".npy" && out_ext != ".csv")
    throw std::runtime_error(a.out + ": output must end in .npy or .csv");

  progress.step("reading " + a.ref);
  const std::vector<float> ref = knn_cli::read_points(a.ref);
  const int n_ref = point_count(ref, a.ref);
  std::vector<float> query_store;
  if (!a.self) {
    progress.step("reading " + a.query);
    query_store = knn_cli::read_points(a.query);
  }
  const std::vector<float>& query = a.self ? ref : query_store;
  const int m = point_count(query, a.self ? a.ref : a.query);
  progress.step("read " + std::to_string(n_ref) + " reference and " + std::to_string(m) +
                " query points");

  const int k = a.k;
  if (a.exclude_self && k == INT_MAX) throw std::runtime_error("--k too large");
  const int k_ask = a.exclude_self ? k + 1 : k;

  const auto* ref_pts = reinterpret_cast<const Point*>(ref.data());
  const auto* query_pts = reinterpret_cast<const Point*>(query.data());
  std::vector<Node> tree(n_ref > 0 ? static_cast<size_t>(n_ref) : 1);
  progress.step("building the kd-tree (" + a.backend + ")");
  if (a.backend == "cuda") {
    check(cuBuildKdTree(ref_pts, n_ref, tree.data()), "cuBuildKdTree");
  } else if (a.backend == "openmp") {
    check(mpBuildKdTree(ref_pts, n_ref, tree.data()), "mpBuildKdTree");
  } else {
    check(buildKdTree(ref_pts, n_ref, tree.data()), "buildKdTree");
  }
  // The query points are checked by the query call; with --self they were
  // already checked by the build.
  progress.step("querying k=" + std::to_string(k_ask));
  std::vector<int> result(static_cast<size_t>(m) * static_cast<size_t>(k_ask));
  if (a.backend == "cuda") {
    check(cuQueryAll(query_pts, tree.data(), m, n_ref, k_ask, result.data()), "cuQueryAll");
  } else if (a.backend == "openmp") {
    check(mpQueryAll(query_pts, tree.data(), m, n_ref, k_ask, result.data()), "mpQueryAll");
  } else {
    check(queryAll(query_pts, tree.data(), m, n_ref, k_ask, result.data()), "queryAll");
  }

  std::vector<int32_t> idx(static_cast<size_t>(m) * static_cast<size_t>(k));
  for (size_t i = 0; i < static_cast<size_t>(m); ++i) {
    const int* row = result.data() + i * static_cast<size_t>(k_ask);
    int32_t* dst = idx.data() + i * static_cast<size_t>(k);
    if (!a.exclude_self) {
      for (int j = 0; j < k; ++j) dst[j] = row[j];
      continue;
    }
    // Drop the query's own index (only it); when it is not among the k+1
    // (more than k earlier duplicates), drop the last one instead.
    int skip = k_ask - 1;
    for (int j = 0; j < k_ask; ++j) {
      if (row[j] == static_cast<int>(i)) {
        skip = j;
        break;
      }
    }
    int o = 0;
    for (int j = 0; j < k_ask; ++j)
      if (j != skip) dst[o++] = row[j];
  }

  std::vector<float> dist;
  if (a.distances) {
    dist.resize(idx.size());
    for (size_t i = 0; i < static_cast<size_t>(m); ++i) {
      for (size_t j = 0; j < static_cast<size_t>(k); ++j) {
        const int32_t r = idx[i * k + j];
        dist[i * k + j] = r < 0 ? std::numeric_limits<float>::infinity()
                                : squared_distance(&query[i * 3], &ref[static_cast<size_t>(r) * 3]);
      }
    }
  }

  progress.step("writing " + a.out);
  if (out_ext == ".npy") {
    knn_cli::write_npy_int32(a.out, idx.data(), m, k);
    if (a.distances)
      knn_cli::write_npy_float32(knn_cli::distance_path_for(a.out), dist.data(), m, k);
  } else {
    knn_cli::write_csv(a.out, idx.data(), a.distances ? dist.data() : nullptr, m, k);
  }
  progress.step("done");
  return 0;
}

int run_info(bool json) {
  const int v = knn_version();
#if KNN_CLI_HAVE_JSON
  if (json) {
    nlohmann::json j;
    j["version"] = std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
                   std::to_string(v % 100);
    j["version_number"] = v;
    j["header_version_number"] = KNN_VERSION_NUMBER;
    j["cuda_device_count"] = cuGetDeviceCount();
    j["current_device"] = cuGetDevice();
    j["free_gpu_bytes"] = static_cast<uint64_t>(getFreeBytesOnGpu());
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
#else
  (void)json;
#endif
  std::printf("knn_gpgpu version: %d.%d.%d (header %d.%d.%d)\n", v / 10000, (v / 100) % 100,
              v % 100, KNN_VERSION_MAJOR, KNN_VERSION_MINOR, KNN_VERSION_PATCH);
  std::printf("CUDA devices: %d\n", cuGetDeviceCount());
  std::printf("current device: %d\n", cuGetDevice());
  std::printf("free GPU bytes: %zu\n", getFreeBytesOnGpu());
  return 0;
}

// radius and pip: the library's index and quadtree engines. This release
// answers KNN_ERR_UNSUPPORTED; the tool says so and exits with 2.
struct RadiusArgs {
  std::string ref, query;
  float radius = 0;
  int max_neighbors = 16;
};

int run_radius(const RadiusArgs& a) {
  std::vector<float> ref = a.ref.empty() ? std::vector<float>{0, 0, 0} : knn_cli::read_points(a.ref);
  std::vector<float> query = a.query.empty() ? ref : knn_cli::read_points(a.query);
  knn_index* index = nullptr;
  check(knn_index_build(ref.data(), static_cast<int64_t>(ref.size() / 3), 3, nullptr, &index),
        "knn_index_build");
  const int64_t m = static_cast<int64_t>(query.size() / 3);
  std::vector<int32_t> idx(static_cast<size_t>(m) * static_cast<size_t>(a.max_neighbors));
  std::vector<float> d(idx.size());
  std::vector<int32_t> counts(static_cast<size_t>(m));
  const int st = knn_index_radius(index, query.data(), m, a.radius, a.max_neighbors, idx.data(),
                                  d.data(), counts.data(), nullptr);
  knn_index_free(index);
  check(st, "knn_index_radius");
  // Not reached in this release; output writing comes with the engine.
  throw LibraryError("radius", KNN_ERR_UNSUPPORTED);
}

int run_pip(const std::string& points) {
  std::vector<float> xyz = points.empty() ? std::vector<float>{0, 0, 0} : knn_cli::read_points(points);
  std::vector<float> xy;
  for (size_t i = 0; i + 2 < xyz.size(); i += 3) {
    xy.push_back(xyz[i]);
    xy.push_back(xyz[i + 1]);
  }
  knn_quadtree* tree = nullptr;
  check(knn_quadtree_build(xy.data(), static_cast<int64_t>(xy.size() / 2), nullptr, &tree),
        "knn_quadtree_build");
  knn_quadtree_free(tree);
  throw LibraryError("pip", KNN_ERR_UNSUPPORTED);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"knn-gpgpu: exact k-nearest-neighbour search with libknn_gpgpu"};
  app.require_subcommand(1);

  KnnArgs ka;
  CLI::App* knn = app.add_subcommand("knn", "3-D k nearest neighbours (classic kd-tree API)");
  knn->add_option("--ref", ka.ref, "reference points (.xyz .txt .csv .ply .npy .bin .f32)")
      ->required();
  CLI::Option* q_opt = knn->add_option("--query", ka.query, "query points (same formats)");
  CLI::Option* self_opt = knn->add_flag("--self", ka.self, "query the reference points themselves");
  CLI::Option* excl_opt =
      knn->add_flag("--exclude-self", ka.exclude_self, "with --self: drop each point's own index");
  q_opt->excludes(self_opt);
  excl_opt->needs(self_opt);
  knn->add_option("--k", ka.k, "neighbours per query")->required()->check(CLI::PositiveNumber);
  knn->add_option("--out", ka.out, "result file: .npy (int32 (m,k)) or .csv")->required();
  knn->add_option("--backend", ka.backend, "auto, cuda or openmp")
      ->check(CLI::IsMember({"auto", "cuda", "openmp"}));
  knn->add_flag("--distances", ka.distances,
                "also write squared distances (OUT_dist.npy, or extra .csv columns)");

  CLI::App* info = app.add_subcommand("info", "library version and CUDA devices");
  bool info_json = false;
#if KNN_CLI_HAVE_JSON
  info->add_flag("--json", info_json, "print one JSON object");
#endif

  RadiusArgs ra;
  CLI::App* radius = app.add_subcommand("radius", "radius search (not in this release)");
  radius->add_option("--ref", ra.ref, "reference points");
  radius->add_option("--query", ra.query, "query points");
  radius->add_option("--radius", ra.radius, "search radius");
  radius->add_option("--max-neighbors", ra.max_neighbors, "neighbours kept per query");

  std::string pip_points;
  CLI::App* pip = app.add_subcommand("pip", "points in polygons (not in this release)");
  pip->add_option("--points", pip_points, "points (x, y used)");

#if KNN_CLI_HAVE_JSON
  knn_cli::BenchArgs ba;
  CLI::App* bench = app.add_subcommand("bench", "time the library's API; results as JSON");
  bench->add_option("suite", ba.suite, "classic, index or pip")
      ->required()
      ->check(CLI::IsMember({"classic", "index", "pip"}));
  bench->add_option("--sizes", ba.sizes, "point counts n (default 1e4 1e5 1e6, and 1e7 on a GPU)")
      ->delimiter(',');
  bench->add_option("--k", ba.k, "neighbours per query")->check(CLI::PositiveNumber);
  bench->add_option("--repeats", ba.repeats, "timed runs per measurement (median reported)")
      ->check(CLI::PositiveNumber);
  bench->add_option("--warmup", ba.warmup, "untimed runs first")->check(CLI::NonNegativeNumber);
  bench->add_option("--out", ba.out, "JSON file, '-' for stdout");
#endif

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    if (knn->parsed()) return run_knn(ka);
    if (info->parsed()) return run_info(info_json);
    if (radius->parsed()) return run_radius(ra);
    if (pip->parsed()) return run_pip(pip_points);
#if KNN_CLI_HAVE_JSON
    if (bench->parsed()) return knn_cli::run_bench(ba);
#endif
  } catch (const LibraryError& e) {
    std::fprintf(stderr, "knn-gpgpu: %s\n", e.what());
    return e.status == KNN_ERR_UNSUPPORTED ? 2 : 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "knn-gpgpu: out of host memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "knn-gpgpu: %s\n", e.what());
    return 1;
  }
  return 1;
}
