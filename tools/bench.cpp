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

#include "geojson.h"
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
        results.push_back(record("query", backend_name, s.name, n, m, a.k, dim, m,
                                 time_call(a, what("query", backend_name, s.name, n), [&] {
                                   return knn_index_query(index, queries.data(), m, a.k, idx.data(),
                                                          dist.data(), nullptr);
                                 })));
        // The radius that holds k of n uniform points in the unit cube on
        // average (4/3 pi r^3 n = k), so radius and kNN rows compare.
        const double radius = std::cbrt(3.0 * a.k / (4.0 * 3.14159265358979323846 * n));
        json rec =
            record("radius", backend_name, s.name, n, m, a.k, dim, m,
                   time_call(a, what("radius", backend_name, s.name, n), [&] {
                     return knn_index_radius(index, queries.data(), m, static_cast<float>(radius),
                                             a.k, idx.data(), dist.data(), counts.data(), nullptr);
                   }));
        rec["radius"] = radius;
        results.push_back(rec);
        knn_index_free(index);
      }
    }
  }
}

// `count` star polygons over [0, 1)^2, one ring each: 7..24 spikes whose
// tips and notches lie at random radii (concave, irregular), the star turned
// by a random angle, centred at a random place with a radius of 0.01..0.08.
// Their edges run at every angle, so they cut the quadtree's cells anywhere
// (axis-aligned squares on a power-of-two grid would coincide with cells and
// let whole cells be counted without a single edge test). Fixed seed: every
// run times the same polygons.
knn_cli::PolygonLayer star_polygons(int count) {
  knn_cli::PolygonLayer layer;
  const std::vector<float> u = uniform_coords(int64_t{count} * 5, 4);
  const std::vector<float> radii = uniform_coords(int64_t{count} * 48, 5);
  constexpr double kTwoPi = 6.283185307179586;
  for (int p = 0; p < count; ++p) {
    const double cx = u[5 * p], cy = u[5 * p + 1];
    const double size = 0.01 + 0.07 * u[5 * p + 2];
    const double turn = kTwoPi * u[5 * p + 3];
    const int spikes = 7 + static_cast<int>(u[5 * p + 4] * 18.0f);
    for (int v = 0; v < 2 * spikes; ++v) {
      const double r = size * (v % 2 == 0 ? 0.7 + 0.3 * radii[48 * p + v]    // tip
                                          : 0.2 + 0.3 * radii[48 * p + v]);  // notch
      const double angle = turn + kTwoPi * v / (2 * spikes);
      layer.vertices.push_back(static_cast<float>(cx + r * std::cos(angle)));
      layer.vertices.push_back(static_cast<float>(cy + r * std::sin(angle)));
    }
    layer.ring_offsets.push_back(static_cast<int64_t>(layer.vertices.size() / 2));
    layer.polygon_offsets.push_back(layer.rings());
  }
  layer.feature_offsets.push_back(layer.polygons());
  return layer;
}

// n points uniform over the layer's bounding box.
std::vector<float> points_over(const knn_cli::PolygonLayer& layer, int64_t n) {
  float lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
  for (size_t i = 0; i < layer.vertices.size(); ++i) {
    lo[i % 2] = std::min(lo[i % 2], static_cast<float>(layer.vertices[i]));
    hi[i % 2] = std::max(hi[i % 2], static_cast<float>(layer.vertices[i]));
  }
  std::vector<float> xy = uniform_coords(n * 2, 3);
  for (size_t i = 0; i < xy.size(); ++i) xy[i] = lo[i % 2] + xy[i] * (hi[i % 2] - lo[i % 2]);
  return xy;
}

void pip_suite(const BenchArgs& a, bool have_gpu, json& results) {
  struct Set {
    std::string name;
    knn_cli::PolygonLayer layer;
  };
  std::vector<Set> sets;
  sets.push_back({"stars", star_polygons(256)});
  if (!a.polygons.empty()) {
    std::string stem = a.polygons.substr(a.polygons.find_last_of("/\\") + 1);
    stem = stem.substr(0, stem.find('.'));
    sets.push_back({stem, knn_cli::read_geojson(a.polygons, "")});
    if (sets.back().layer.polygons() == 0)
      throw std::runtime_error(a.polygons + ": no polygons to time");
  }
  std::vector<std::pair<const char*, int>> backends = {{"openmp", KNN_BACKEND_OPENMP}};
  if (have_gpu) backends.push_back({"cuda", KNN_BACKEND_CUDA});
  for (const Set& set : sets) {
    const knn_cli::PolygonLayer& poly = set.layer;  // read in float32: exact as floats
    const std::vector<float> vertices(poly.vertices.begin(), poly.vertices.end());
    for (const int64_t n : a.sizes) {
      const std::vector<float> xy = points_over(poly, n);
      std::vector<int64_t> counts(static_cast<size_t>(poly.polygons()));
      for (const auto& [backend_name, backend] : backends) {
        knn_options opt;
        knn_options_init(&opt);
        opt.backend = backend;
        json rec = record("build", backend_name, "quadtree", n, 0, 0, 2, n,
                          time_call(a, what("build", backend_name, "quadtree", n), [&] {
                            knn_quadtree* tree = nullptr;
                            const int st = knn_quadtree_build(xy.data(), n, &opt, &tree);
                            if (st == KNN_OK) knn_quadtree_free(tree);
                            return st;
                          }));
        rec["polygons"] = set.name;
        results.push_back(rec);
        knn_quadtree* tree = nullptr;
        if (knn_quadtree_build(xy.data(), n, &opt, &tree) != KNN_OK) continue;
        rec = record("pip_count", backend_name, "quadtree", n, poly.polygons(), 0, 2, n,
                     time_call(a, what("pip_count", backend_name, "quadtree", n), [&] {
                       return knn_points_in_polygons_count(
                           tree, vertices.data(), poly.ring_offsets.data(), poly.rings(),
                           poly.polygon_offsets.data(), poly.polygons(), counts.data(), &opt);
                     }));
        rec["polygons"] = set.name;
        rec["vertices"] = poly.vertices.size() / 2;
        results.push_back(rec);
        knn_quadtree_free(tree);
      }
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
