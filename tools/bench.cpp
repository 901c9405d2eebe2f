// bench.cpp - see bench.h.
#include "bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "knn_gpgpu.h"
#include "progress_bar.h"

namespace knn_cli {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// Uniform coordinates in [0, 1) from a seed alone (SplitMix64), so that every
// run and every machine times the same points.
std::vector<float> uniform_coords(int64_t count, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(count));
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& x : v) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
  }
  return v;
}

// "KNN_ERR_UNSUPPORTED" from knn_status_string's "KNN_ERR_UNSUPPORTED: ...".
std::string status_name(int status) {
  const std::string text = knn_status_string(status);
  return text.substr(0, text.find(':'));
}

struct Timing {
  int status = KNN_OK;
  std::string error;            // knn_last_error() of a failed call
  std::vector<double> seconds;  // one per timed repeat
};

// The tool's progress reporter while a suite runs (stage lines, bar).
ProgressReporter* reporter = nullptr;

// "index query kdtree openmp n=1000000": what a measurement times.
std::string what(const std::string& operation, const std::string& backend,
                 const std::string& structure, int64_t n) {
  return operation + " " + structure + " " + backend + " n=" + std::to_string(n);
}

// Warm-up calls, then timed ones; stops at the first failure.
template <class Call>
Timing time_call(const BenchArgs& a, const std::string& what, Call call) {
  if (reporter) reporter->step(what);
  Timing t;
  for (int i = 0; i < a.warmup + a.repeats; ++i) {
    const Clock::time_point start = Clock::now();
    t.status = call();
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (t.status != KNN_OK) {
      t.error = knn_last_error();
      t.seconds.clear();
      return t;
    }
    if (i >= a.warmup) t.seconds.push_back(s);
  }
  return t;
}

// One result record: what ran, on what, and how long it took (or why not).
json record(const std::string& operation, const std::string& backend, const std::string& structure,
            int64_t n, int64_t m, int k, int dim, int64_t items, Timing t) {
  json r = {{"operation", operation},
            {"backend", backend},
            {"structure", structure},
            {"n", n},
            {"m", m},
            {"k", k},
            {"dim", dim},
            {"status", status_name(t.status)}};
  if (t.status != KNN_OK) {
    r["error"] = t.error;
    return r;
  }
  std::vector<double>& s = t.seconds;
  std::sort(s.begin(), s.end());
  const size_t mid = s.size() / 2;
  const double median = s.size() % 2 ? s[mid] : 0.5 * (s[mid - 1] + s[mid]);
  r["repeats"] = s.size();
  r["seconds"] = s;
  r["median_s"] = median;
  r["min_s"] = s.front();
  r["max_s"] = s.back();
  r["items_per_second"] = median > 0 ? static_cast<double>(items) / median : 0.0;
  return r;
}

int checked_int(int64_t n) {
  if (n < 0 || n > 2147483647)
    throw std::runtime_error("size " + std::to_string(n) + " does not fit the classic API's int");
  return static_cast<int>(n);
}

struct Backend {
  const char* name;
  int (*build)(const Point*, int, Node*);
  int (*query)(const Point*, const Node*, int, int, int, int*);
};

void classic_suite(const BenchArgs& a, bool have_gpu, json& results) {
  std::vector<Backend> backends = {{"openmp", mpBuildKdTree, mpQueryAll}};
  if (have_gpu) backends.push_back({"cuda", cuBuildKdTree, cuQueryAll});
  backends.push_back({"auto", buildKdTree, queryAll});
  for (const int64_t size : a.sizes) {
    const int n = checked_int(size);
    const std::vector<float> coords = uniform_coords(size * 3, 1);
    const std::vector<float> qcoords = uniform_coords(size * 3, 2);
    const auto* points = reinterpret_cast<const Point*>(coords.data());
    const auto* queries = reinterpret_cast<const Point*>(qcoords.data());
    // Every backend builds the same tree (the contract), so one CPU build
    // serves every backend's queries.
    std::vector<Node> tree(static_cast<size_t>(n)), built(static_cast<size_t>(n));
    std::vector<int> result(static_cast<size_t>(size) * static_cast<size_t>(a.k));
    const bool have_tree = mpBuildKdTree(points, n, tree.data()) == KNN_OK;
    for (const Backend& b : backends) {
      results.push_back(record("build", b.name, "kdtree", n, 0, 0, 3, n,
                               time_call(a, what("build", b.name, "kdtree", n),
                                         [&] { return b.build(points, n, built.data()); })));
      if (!have_tree) continue;
      results.push_back(record("query", b.name, "kdtree", n, n, a.k, 3, n,
                               time_call(a, what("query", b.name, "kdtree", n), [&] {
                                 return b.query(queries, tree.data(), n, n, a.k, result.data());
                               })));
    }
  }
}

void index_suite(const BenchArgs& a, bool have_gpu, json& results) {
  struct Structure {
    const char* name;
    int value;
    int64_t max_queries;  // brute force answers fewer queries in the same time
  };
  const Structure structures[] = {{"kdtree", KNN_STRUCTURE_KDTREE, 1 << 20},
                                  {"grid", KNN_STRUCTURE_GRID, 1 << 20},
                                  {"brute_force", KNN_STRUCTURE_BRUTE_FORCE, 10000}};
  std::vector<std::pair<const char*, int>> backends = {{"openmp", KNN_BACKEND_OPENMP}};
  if (have_gpu) backends.push_back({"cuda", KNN_BACKEND_CUDA});
  const int dim = 3;
  for (const int64_t n : a.sizes) {
    const std::vector<float> points = uniform_coords(n * dim, 1);
    for (const Structure& s : structures) {
      const int64_t m = std::min(n, s.max_queries);
      const std::vector<float> queries = uniform_coords(m * dim, 2);
      std::vector<int32_t> idx(static_cast<size_t>(m) * static_cast<size_t>(a.k));
      std::vector<float> dist(idx.size());
      std::vector<int32_t> counts(static_cast<size_t>(m));
      for (const auto& [backend_name, backend] : backends) {
        knn_options opt;
        knn_options_init(&opt);
        opt.backend = backend;
        opt.structure = s.value;
        results.push_back(record("build", backend_name, s.name, n, 0, 0, dim, n,
                                 time_call(a, what("build", backend_name, s.name, n), [&] {
                                   knn_index* index = nullptr;
                                   const int st =
                                       knn_index_build(points.data(), n, dim, &opt, &index);
                                   // A failed build has no index (and keeps its message).
                                   if (st == KNN_OK) knn_index_free(index);
                                   return st;
                                 })));
        knn_index* index = nullptr;
        if (knn_index_build(points.data(), n, dim, &opt, &index) != KNN_OK) continue;
        results.push_back(
            record("query", backend_name, s.name, n, m, a.k, dim, m,
                   time_call(a, what("query", backend_name, s.name, n), [&] {
                     return knn_index_query(index, queries.data(), m, a.k, idx.data(), dist.data(),
                                            nullptr);
                   })));
        // The radius that holds k of n uniform points in the unit cube on
        // average (4/3 pi r^3 n = k), so radius and kNN rows compare.
        const double radius = std::cbrt(3.0 * a.k / (4.0 * 3.14159265358979323846 * n));
        json rec = record("radius", backend_name, s.name, n, m, a.k, dim, m,
                          time_call(a, what("radius", backend_name, s.name, n), [&] {
                            return knn_index_radius(index, queries.data(), m,
                                                    static_cast<float>(radius), a.k, idx.data(),
                                                    dist.data(), counts.data(), nullptr);
                          }));
        rec["radius"] = radius;
        results.push_back(rec);
        knn_index_free(index);
      }
    }
  }
}

// A g x g grid of unit-square cells over [0, 1)^2, each a polygon of one
// closed ring: every point falls in exactly one.
struct PolygonGrid {
  std::vector<float> vertices;
  std::vector<int64_t> rings, polygons;
  explicit PolygonGrid(int g) {
    for (int i = 0; i < g; ++i)
      for (int j = 0; j < g; ++j) {
        const float x0 = static_cast<float>(i) / g, x1 = static_cast<float>(i + 1) / g;
        const float y0 = static_cast<float>(j) / g, y1 = static_cast<float>(j + 1) / g;
        polygons.push_back(static_cast<int64_t>(rings.size()));
        rings.push_back(static_cast<int64_t>(vertices.size() / 2));
        for (float v : {x0, y0, x1, y0, x1, y1, x0, y1, x0, y0}) vertices.push_back(v);
      }
    polygons.push_back(static_cast<int64_t>(rings.size()));
    rings.push_back(static_cast<int64_t>(vertices.size() / 2));
  }
  int64_t count() const { return static_cast<int64_t>(polygons.size()) - 1; }
};

void pip_suite(const BenchArgs& a, bool have_gpu, json& results) {
  const PolygonGrid grid(16);
  std::vector<std::pair<const char*, int>> backends = {{"openmp", KNN_BACKEND_OPENMP}};
  if (have_gpu) backends.push_back({"cuda", KNN_BACKEND_CUDA});
  for (const int64_t n : a.sizes) {
    const std::vector<float> xy = uniform_coords(n * 2, 3);
    std::vector<int64_t> counts(static_cast<size_t>(grid.count()));
    for (const auto& [backend_name, backend] : backends) {
      knn_options opt;
      knn_options_init(&opt);
      opt.backend = backend;
      results.push_back(record("build", backend_name, "quadtree", n, 0, 0, 2, n,
                               time_call(a, what("build", backend_name, "quadtree", n), [&] {
                                 knn_quadtree* tree = nullptr;
                                 const int st = knn_quadtree_build(xy.data(), n, &opt, &tree);
                                 if (st == KNN_OK) knn_quadtree_free(tree);
                                 return st;
                               })));
      knn_quadtree* tree = nullptr;
      if (knn_quadtree_build(xy.data(), n, &opt, &tree) != KNN_OK) continue;
      results.push_back(record(
          "pip_count", backend_name, "quadtree", n, grid.count(), 0, 2, n,
          time_call(a, what("pip_count", backend_name, "quadtree", n), [&] {
            return knn_points_in_polygons_count(tree, grid.vertices.data(), grid.rings.data(),
                                                static_cast<int64_t>(grid.rings.size()) - 1,
                                                grid.polygons.data(), grid.count(), counts.data(),
                                                &opt);
          })));
      knn_quadtree_free(tree);
    }
  }
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
#ifdef _WIN32
  gmtime_s(&tm, &now);
#else
  gmtime_r(&now, &tm);
#endif
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace

std::vector<int64_t> default_bench_sizes(const std::string& suite, bool have_gpu) {
  std::vector<int64_t> sizes = {10000, 100000, 1000000};
  if (suite == "classic" && have_gpu) sizes.push_back(10000000);
  return sizes;
}

int run_bench(const BenchArgs& args) {
  BenchArgs a = args;
  if (a.k < 1) throw std::runtime_error("--k must be at least 1");
  if (a.repeats < 1) throw std::runtime_error("--repeats must be at least 1");
  if (a.warmup < 0) throw std::runtime_error("--warmup must not be negative");
  const bool have_gpu = cuGetDeviceCount() > 0;
  if (a.sizes.empty()) a.sizes = default_bench_sizes(a.suite, have_gpu);
  for (int64_t n : a.sizes)
    if (n < 1) throw std::runtime_error("--sizes must be positive, got " + std::to_string(n));

  const std::string started = utc_now();
  ProgressReporter progress(progress_mode(a.progress));
  reporter = &progress;
  json results = json::array();
  if (a.suite == "classic") {
    classic_suite(a, have_gpu, results);
  } else if (a.suite == "index") {
    index_suite(a, have_gpu, results);
  } else if (a.suite == "pip") {
    pip_suite(a, have_gpu, results);
  } else {
    reporter = nullptr;
    throw std::runtime_error("unknown suite '" + a.suite + "' (classic, index or pip)");
  }
  reporter = nullptr;
  const int v = knn_version();
  const json doc = {
      {"schema", "knn-gpgpu-bench/1"},
      {"suite", a.suite},
      {"library_version", std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
                              std::to_string(v % 100)},
      {"started_utc", started},
      {"cuda_devices", cuGetDeviceCount()},
      {"free_gpu_bytes", static_cast<uint64_t>(getFreeBytesOnGpu())},
      {"host_threads", std::thread::hardware_concurrency()},
      {"k", a.k},
      {"warmup", a.warmup},
      {"repeats", a.repeats},
      {"results", results}};
  const std::string text = doc.dump(2) + "\n";
  if (a.out == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  std::ofstream out(a.out, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw std::runtime_error(a.out + ": cannot write the results");
  return 0;
}

}  // namespace knn_cli
