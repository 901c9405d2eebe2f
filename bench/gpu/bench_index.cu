// GPU benchmark of the index engines (issue #4): the CUDA bucket kd-tree and
// the CUDA brute force.
//   device:     the engines directly (cuda/cuda_index.h), points, queries and
//               outputs already on the device; every engine call is
//               synchronous, so each is timed by CUDA events on the legacy
//               stream around the call (the engines' streams finish inside it);
//   end to end: the C ABI from pageable host arrays (host clock).
// Median of 5 after a warm-up; a configuration whose warm-up takes longer
// than kSlowMs is timed once. Suites:
//   futhark  uniform, n = m = 2^17..2^21, d in {5,7,9,12,16}, k = 5, and
//            k = 1, 3, 11 at d = 5; build included; kd-tree and brute force
//            side by side (tunes the AUTO crossover), rows checked equal;
//   allknn   3-D all-kNN of n = 10^7 uniform points, k = 30, build + query
//            (target < 60 ms on an H100), kd-tree and grid on the device,
//            and end to end for KDTREE, GRID and AUTO;
//   radius   10^7 uniform points, radius for ~32 neighbours, 10^7 queries:
//            rows of 32 with counts, and counting only; queries/s.
//   f64      float64 against float32 on the same data (issue #22, target:
//            float64 at most 2x float32): 3-D, n = m = 10^7 (separate query
//            set), k = 8 and 30, uniform in the unit cube and on the unit
//            sphere's surface; kd-tree and grid on the device (device
//            arrays); the float32 run gets the float64 coordinates rounded.
//            Build and query timed apart; the ratios are printed last.
//            Not in "all" (it allocates twice the data): --suite f64.
//   placement  queries away from a surface (issue #18): 10^6 points on the
//            unit sphere, 10^5 queries on it, uniform in its bounding cube,
//            and on it with 1 in 50 moved into the cube; k = 8, AUTO, GRID
//            and KDTREE through the API on device arrays (AUTO's kd-tree,
//            when the call's placement asks for it, is built in its first
//            call: each sample builds an index and queries it once); rows
//            checked equal to KDTREE's. --suite placement.
// Usage: bench_index [--quick] [--suite futhark|allknn|radius|f64|placement|all] [--leaf N]
//                    [--dim D] [--log-n L] [--kdtree-only] [--k K] [--futhark-k K]
//   --leaf N: the kd-tree's leaf size (default: the engine's); --dim D: the
//   futhark rows of dim D only (a dim outside the table: its rows at k = 5);
//   --log-n L: the futhark rows of n = 2^L only; --kdtree-only: no
//   brute-force rows; --k K: the allknn suite's k (default 30);
//   --futhark-k K: every futhark row at k = K.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../../common/math_constants.h"
#include "../../cuda/core/cuda_support.h"
#include "../../cuda/cuda_index.h"
#include "datasets.h"
#include "device_timer.h"
#include "knn_gpgpu.h"

using namespace knn_bench;
using knn::cuda::DeviceBuffer;

namespace {

constexpr int kRepeats = 5;
constexpr double kSlowMs = 5000.0;

int leaf_size = 0;         // --leaf; 0 = the engine's default
int only_dim = 0;          // --dim; 0 = every dim of the suite
int only_log_n = 0;        // --log-n; 0 = every size of the suite
bool kdtree_only = false;  // --kdtree-only: skip the brute-force rows
int allknn_k = 30;         // --k: the allknn suite's k
int futhark_k = 0;         // --futhark-k; 0 = the table's k

// Events on the default stream around `work`, on an idle device so that no
// work queued before is counted.
double idle_device_event_ms(const std::function<void()>& work) {
  knn::cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  return event_ms(0, work);
}

double host_ms(const std::function<void()>& work) { return time_once_ms(work); }

// Median of kRepeats after a warm-up (just the warm-up when that is slow).
double timed(const std::function<double(const std::function<void()>&)>& clock,
             const std::function<void()>& work) {
  const double warm = clock(work);
  if (warm > kSlowMs) return warm;
  std::vector<double> ms;
  for (int r = 0; r < kRepeats; ++r) ms.push_back(clock(work));
  return middle_sample(ms);
}

void must(int status, const char* what) {
  if (status != KNN_OK) {
    std::fprintf(stderr, "%s failed: %s\n", what, knn_last_error());
    std::exit(1);
  }
}

std::vector<float> uniform_rows(int64_t n, int dim, uint64_t seed) {
  std::vector<float> rows(static_cast<size_t>(n) * dim);
  fill_uniform_rows(rows.data(), n, dim, seed);
  return rows;
}

template <typename Scalar>
DeviceBuffer<Scalar> on_device(const std::vector<Scalar>& host) {
  DeviceBuffer<Scalar> d(host.size());
  knn::cuda::copy_to_device(d.get(), host.data(), host.size() * sizeof(Scalar));
  return d;
}

using Builder = std::unique_ptr<knn::IndexEngine> (*)(const float*, int64_t, int,
                                                      const knn::IndexParams&);

void header() {
  std::printf("%-8s %-11s %9s %9s %3s %4s %11s %11s %11s  %s\n", "suite", "structure", "n", "m",
              "d", "k", "build ms", "query ms", "total ms", "note");
}

void row(const char* suite, const char* structure, int64_t n, int64_t m, int dim, int k,
         double build, double query, double total, const std::string& note) {
  std::printf("%-8s %-11s %9lld %9lld %3d %4d %11.2f %11.2f %11.2f  %s\n", suite, structure,
              static_cast<long long>(n), static_cast<long long>(m), dim, k, build, query, total,
              note.c_str());
  std::fflush(stdout);
}

const char* structure_name(int structure) {
  switch (structure) {
    case KNN_STRUCTURE_KDTREE: return "kdtree";
    case KNN_STRUCTURE_GRID: return "grid";
    case KNN_STRUCTURE_BRUTE_FORCE: return "brute";
    default: return "auto";
  }
}

// Build + kNN of m device queries into device rows; returns the first rows.
struct DeviceRun {
  double build_ms, query_ms, total_ms;
  std::vector<int32_t> first_rows;
};

DeviceRun run_on_device(Builder build, const DeviceBuffer<float>& points, int64_t n,
                        const DeviceBuffer<float>& queries, int64_t m, int dim, int k) {
  knn::IndexParams params;
  params.points_on_device = true;
  params.leaf_size = leaf_size;
  knn::CallParams call;
  call.queries_on_device = call.outputs_on_device = true;
  DeviceBuffer<int32_t> indices(static_cast<size_t>(m) * k);
  DeviceBuffer<float> sq_distances(static_cast<size_t>(m) * k);
  std::unique_ptr<knn::IndexEngine> index;
  DeviceRun r{};
  r.total_ms = timed(idle_device_event_ms, [&] {
    index = build(points.get(), n, dim, params);
    index->knn(queries.get(), m, k, indices.get(), sq_distances.get(), call);
  });
  r.build_ms = timed(idle_device_event_ms, [&] { index = build(points.get(), n, dim, params); });
  r.query_ms = timed(idle_device_event_ms, [&] {
    index->knn(queries.get(), m, k, indices.get(), sq_distances.get(), call);
  });
  r.first_rows.resize(static_cast<size_t>(std::min<int64_t>(m, 4096)) * k);
  knn::cuda::copy_to_host(r.first_rows.data(), indices.get(), r.first_rows.size() * 4);
  return r;
}

void futhark_suite(bool quick) {
  struct Case {
    int dim, k;
  };
  const std::vector<int> dims = {5, 7, 9, 12, 16};
  std::vector<Case> cases;
  for (const int dim : dims) cases.push_back({dim, futhark_k != 0 ? futhark_k : 5});
  if (futhark_k == 0)
    for (const int k : {1, 3, 11}) cases.push_back({5, k});
  if (only_dim != 0 && std::find(dims.begin(), dims.end(), only_dim) == dims.end())
    cases = {{only_dim, futhark_k != 0 ? futhark_k : 5}};
  const int largest = quick ? 18 : 21;
  for (const Case& c : cases) {
    if (only_dim != 0 && c.dim != only_dim) continue;
    for (int log_n = 17; log_n <= largest; ++log_n) {
      if (only_log_n != 0 && log_n != only_log_n) continue;
      const int64_t n = int64_t{1} << log_n;
      const DeviceBuffer<float> points = on_device(uniform_rows(n, c.dim, kReferenceSeed));
      const DeviceBuffer<float> queries = on_device(uniform_rows(n, c.dim, kQuerySeed));
      const DeviceRun tree =
          run_on_device(knn::cuda::build_kdtree_index, points, n, queries, n, c.dim, c.k);
      row("futhark", "kdtree", n, n, c.dim, c.k, tree.build_ms, tree.query_ms, tree.total_ms, "");
      if (kdtree_only) continue;
      const DeviceRun brute =
          run_on_device(knn::cuda::build_brute_force_index, points, n, queries, n, c.dim, c.k);
      row("futhark", "brute", n, n, c.dim, c.k, brute.build_ms, brute.query_ms, brute.total_ms,
          tree.first_rows == brute.first_rows ? "rows agree" : "ROWS DIFFER");
    }
  }
}

void allknn_suite(bool quick) {
  const int dim = 3, k = allknn_k;
  const int64_t n = quick ? 1000000 : 10000000;
  const std::vector<float> host_points = uniform_rows(n, dim, kReferenceSeed);
  struct Structure {
    const char* name;
    Builder build;
  };
  const Structure structures[] = {
      {"kdtree", knn::cuda::build_kdtree_index},
      {"grid",
       [](const float* points, int64_t n, int, const knn::IndexParams& params) {
         return knn::cuda::build_grid_index(points, n, params);
       }},
  };
  for (const Structure& s : structures) {
    const DeviceBuffer<float> points = on_device(host_points);
    DeviceBuffer<int32_t> indices(static_cast<size_t>(n) * k);
    DeviceBuffer<float> sq_distances(static_cast<size_t>(n) * k);
    knn::IndexParams params;
    params.points_on_device = true;
    params.leaf_size = leaf_size;
    knn::CallParams call;
    call.outputs_on_device = true;
    std::unique_ptr<knn::IndexEngine> index;
    const double total = timed(idle_device_event_ms, [&] {
      index = s.build(points.get(), n, dim, params);
      index->knn_self(k, false, indices.get(), sq_distances.get(), call);
    });
    const double build =
        timed(idle_device_event_ms, [&] { index = s.build(points.get(), n, dim, params); });
    const double query = timed(idle_device_event_ms, [&] {
      index->knn_self(k, false, indices.get(), sq_distances.get(), call);
    });
    row("allknn", s.name, n, n, dim, k, build, query, total, "device, target < 60 ms total");
  }
  // End to end through the C ABI: pageable host points in, host rows out.
  std::vector<int32_t> indices(static_cast<size_t>(n) * k);
  std::vector<float> sq_distances(static_cast<size_t>(n) * k);
  for (const int structure : {KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_GRID, KNN_STRUCTURE_AUTO}) {
    knn_options opt;
    knn_options_init(&opt);
    opt.backend = KNN_BACKEND_CUDA;
    opt.structure = structure;
    opt.leaf_size = leaf_size;
    knn_index* index = nullptr;
    const double total = timed(host_ms, [&] {
      knn_index_free(index);
      must(knn_index_build(host_points.data(), n, dim, &opt, &index), "knn_index_build");
      must(knn_index_query_self(index, k, 0, indices.data(), sq_distances.data()),
           "knn_index_query_self");
    });
    const double query = timed(host_ms, [&] {
      must(knn_index_query_self(index, k, 0, indices.data(), sq_distances.data()),
           "knn_index_query_self");
    });
    int ran = 0;
    must(knn_index_info(index, nullptr, nullptr, nullptr, &ran), "knn_index_info");
    knn_index_free(index);
    const std::string note = std::string("C ABI, host arrays, asked ") + structure_name(structure) +
                             ", ran " + structure_name(ran);
    row("allknn", structure_name(ran), n, n, dim, k, total - query, query, total, note);
  }
}

void radius_suite(bool quick) {
  const int dim = 3, max_neighbors = 32;
  const int64_t n = quick ? 1000000 : 10000000, m = n;
  // Expected neighbours n * (4/3) pi r^3 = 32 in the unit cube (fewer at the faces).
  const float radius = static_cast<float>(std::cbrt(32.0 * 3.0 / (4.0 * knn::kPi * n)));
  const DeviceBuffer<float> points = on_device(uniform_rows(n, dim, kReferenceSeed));
  const DeviceBuffer<float> queries = on_device(uniform_rows(m, dim, kQuerySeed));
  knn::IndexParams params;
  params.points_on_device = true;
  params.leaf_size = leaf_size;
  auto index = knn::cuda::build_kdtree_index(points.get(), n, dim, params);
  knn::CallParams call;
  call.queries_on_device = call.outputs_on_device = true;
  DeviceBuffer<int32_t> indices(static_cast<size_t>(m) * max_neighbors);
  DeviceBuffer<float> sq_distances(static_cast<size_t>(m) * max_neighbors);
  DeviceBuffer<int32_t> counts(static_cast<size_t>(m));
  const double rows_ms = timed(idle_device_event_ms, [&] {
    index->radius(queries.get(), m, radius, max_neighbors, indices.get(), sq_distances.get(),
                  counts.get(), call);
  });
  std::vector<int32_t> host_counts(static_cast<size_t>(m));
  knn::cuda::copy_to_host(host_counts.data(), counts.get(), host_counts.size() * 4);
  double mean = 0;
  for (const int32_t c : host_counts) mean += c;
  mean /= static_cast<double>(m);
  char note[128];
  std::snprintf(note, sizeof note, "rows of 32, %.3g queries/s, mean count %.1f",
                m / (rows_ms / 1000.0), mean);
  row("radius", "kdtree", n, m, dim, max_neighbors, 0, rows_ms, rows_ms, note);
  const double count_ms = timed(idle_device_event_ms, [&] {
    index->radius(queries.get(), m, radius, 0, nullptr, nullptr, counts.get(), call);
  });
  std::snprintf(note, sizeof note, "counting only, %.3g queries/s", m / (count_ms / 1000.0));
  row("radius", "kdtree", n, m, dim, 0, 0, count_ms, count_ms, note);
}

// ---- f64: float64 against float32 ---------------------------------------

// n rows of x, y, z in double: uniform in [0, 1)^3, or uniform on the unit
// sphere (z uniform in [-1, 1], the angle uniform: equal areas).
std::vector<double> f64_rows(bool sphere, int64_t n, uint64_t seed) {
  const RandomStream rng(seed);
  std::vector<double> rows(static_cast<size_t>(n) * 3);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t c = 3 * static_cast<uint64_t>(i);
    // 53 random bits a coordinate.
    const auto unit = [&](uint64_t w) { return static_cast<double>(rng.word(w) >> 11) * 0x1p-53; };
    double* p = rows.data() + 3 * i;
    if (sphere) {
      const double z = 2.0 * unit(c) - 1.0;
      const double angle = 2.0 * knn::kPi * unit(c + 1);
      const double ring = std::sqrt(std::max(0.0, 1.0 - z * z));
      p[0] = ring * std::cos(angle), p[1] = ring * std::sin(angle), p[2] = z;
    } else {
      p[0] = unit(c), p[1] = unit(c + 1), p[2] = unit(c + 2);
    }
  }
  return rows;
}

std::vector<float> rounded_to_float(const std::vector<double>& rows) {
  std::vector<float> out(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) out[i] = static_cast<float>(rows[i]);
  return out;
}

struct ScalarTimes {
  double build_ms, query_ms;
  bool grid_refused;  // the grid found the data poor: the kd-tree was timed instead
};

// Build and kNN of m device queries into device rows for one structure in
// one scalar type; `first_rows` gets the first rows' indices.
template <typename Scalar>
ScalarTimes time_scalar(int structure, const std::vector<Scalar>& host_points,
                        const std::vector<Scalar>& host_queries, int k,
                        std::vector<int32_t>* first_rows) {
  const int dim = 3;
  const int64_t n = static_cast<int64_t>(host_points.size()) / dim;
  const int64_t m = static_cast<int64_t>(host_queries.size()) / dim;
  const DeviceBuffer<Scalar> points = on_device(host_points);
  const DeviceBuffer<Scalar> queries = on_device(host_queries);
  DeviceBuffer<int32_t> indices(static_cast<size_t>(m) * k);
  DeviceBuffer<Scalar> sq_distances(static_cast<size_t>(m) * k);
  knn::IndexParams params;
  params.points_on_device = true;
  params.leaf_size = leaf_size;
  knn::CallParams call;
  call.queries_on_device = call.outputs_on_device = true;
  std::unique_ptr<knn::BasicIndexEngine<Scalar>> index;
  ScalarTimes t{};
  const auto build = [&] {
    index = structure == KNN_STRUCTURE_GRID
                ? knn::cuda::build_grid_index(points.get(), n, params)
                : knn::cuda::build_kdtree_index(points.get(), n, dim, params);
    // As the API does: a refused grid falls back to the kd-tree.
    t.grid_refused = index == nullptr;
    if (!index) index = knn::cuda::build_kdtree_index(points.get(), n, dim, params);
  };
  t.build_ms = timed(idle_device_event_ms, build);
  t.query_ms = timed(idle_device_event_ms, [&] {
    index->knn(queries.get(), m, k, indices.get(), sq_distances.get(), call);
  });
  first_rows->resize(static_cast<size_t>(std::min<int64_t>(m, 4096)) * k);
  knn::cuda::copy_to_host(first_rows->data(), indices.get(), first_rows->size() * 4);
  return t;
}

void f64_suite(bool quick) {
  const int64_t n = quick ? 1000000 : 10000000, m = n;
  struct Ratio {
    std::string config;
    double build, query, total;
  };
  std::vector<Ratio> ratios;
  for (const bool sphere : {false, true}) {
    const std::vector<double> points64 = f64_rows(sphere, n, kReferenceSeed);
    const std::vector<double> queries64 = f64_rows(sphere, m, kQuerySeed);
    const std::vector<float> points32 = rounded_to_float(points64);
    const std::vector<float> queries32 = rounded_to_float(queries64);
    for (const int structure : {KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_GRID}) {
      for (const int k : {8, 30}) {
        std::vector<int32_t> rows32, rows64;
        const ScalarTimes f32 = time_scalar(structure, points32, queries32, k, &rows32);
        const ScalarTimes f64 = time_scalar(structure, points64, queries64, k, &rows64);
        int64_t same = 0;
        for (size_t i = 0; i + k <= rows32.size(); i += k)
          same += std::equal(rows32.begin() + i, rows32.begin() + i + k, rows64.begin() + i);
        const std::string config =
            std::string(sphere ? "sphere " : "uniform ") + structure_name(structure) +
            (f32.grid_refused || f64.grid_refused ? " (refused: kdtree)" : "") +
            " k=" + std::to_string(k);
        char note[160];
        std::snprintf(note, sizeof note, "%s float32, device arrays", config.c_str());
        row("f64", structure_name(structure), n, m, 3, k, f32.build_ms, f32.query_ms,
            f32.build_ms + f32.query_ms, note);
        std::snprintf(note, sizeof note,
                      "%s float64, device arrays; %lld of the first %zu rows as float32's",
                      config.c_str(), static_cast<long long>(same), rows32.size() / k);
        row("f64", structure_name(structure), n, m, 3, k, f64.build_ms, f64.query_ms,
            f64.build_ms + f64.query_ms, note);
        ratios.push_back({config, f64.build_ms / f32.build_ms, f64.query_ms / f32.query_ms,
                          (f64.build_ms + f64.query_ms) / (f32.build_ms + f32.query_ms)});
      }
    }
  }
  std::printf("\nfloat64 / float32 time (target: at most 2.00)\n");
  for (const Ratio& r : ratios)
    std::printf("  %-38s build %5.2fx  query %5.2fx  total %5.2fx\n", r.config.c_str(), r.build,
                r.query, r.total);
  std::fflush(stdout);
}

// Build over device points and one call through the API for `structure`:
// the build's ms, build + call ms (each sample a new index), and the
// structure the index reports.
struct ApiTimes {
  double build_ms, total_ms;
  int served;
};

ApiTimes time_api(const float* device_points, int64_t n, int structure,
                  const std::function<void(knn_index*)>& call) {
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_CUDA;
  opt.structure = structure;
  knn_index* index = nullptr;
  const auto build = [&] {
    knn_index_free(index);
    must(knn_index_build(device_points, n, 3, &opt, &index), "knn_index_build");
  };
  ApiTimes t{};
  t.build_ms = timed(idle_device_event_ms, build);
  t.total_ms = timed(idle_device_event_ms, [&] {
    build();
    call(index);
  });
  t.served = -1;
  knn_index_info(index, nullptr, nullptr, nullptr, &t.served);
  knn_index_free(index);
  return t;
}

void placement_suite(bool quick) {
  const int64_t n = quick ? 100000 : 1000000, m = n / 10;
  const int k = 8;
  const std::string points_note =
      std::string("10^") + (quick ? "5" : "6") + " points on the unit sphere";
  const std::vector<float> points = rounded_to_float(f64_rows(true, n, kReferenceSeed));
  const std::vector<float> on_surface = rounded_to_float(f64_rows(true, m, kQuerySeed));
  std::vector<float> in_cube = rounded_to_float(f64_rows(false, m, kQuerySeed));
  for (float& c : in_cube) c = 2.0f * c - 1.0f;
  std::vector<float> mixed = on_surface;
  for (int64_t i = 0; i < m; i += 50)
    std::copy_n(in_cube.begin() + 3 * i, 3, mixed.begin() + 3 * i);
  // All-kNN of a scan with outliers: 1 point in 1000 moved into the cube
  // [-2, 2]^3 (the points that are their own queries lie away from the rest).
  std::vector<float> scan = points;
  for (int64_t i = 0; i < n; i += 1000)
    for (int a = 0; a < 3; ++a) scan[3 * i + a] = 2.0f * in_cube[3 * ((i / 1000) % m) + a];
  DeviceBuffer<int32_t> indices(static_cast<size_t>(n) * k);
  DeviceBuffer<float> sq_distances(static_cast<size_t>(n) * k);
  // One data set and call for KDTREE, GRID and AUTO; rows checked equal.
  const auto rows_of = [&](const DeviceBuffer<float>& device_points, int64_t count,
                           const std::string& note, const std::function<void(knn_index*)>& call) {
    std::vector<int32_t> kdtree_rows;
    for (const int structure : {KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_GRID, KNN_STRUCTURE_AUTO}) {
      const ApiTimes t = time_api(device_points.get(), n, structure, call);
      std::vector<int32_t> rows(static_cast<size_t>(count) * k);
      knn::cuda::copy_to_host(rows.data(), indices.get(), rows.size() * 4);
      if (structure == KNN_STRUCTURE_KDTREE) kdtree_rows = rows;
      row("place", structure_name(structure), n, count, 3, k, t.build_ms, t.total_ms - t.build_ms,
          t.total_ms,
          note + "; built " + structure_name(t.served) +
              (rows == kdtree_rows ? "; rows = KDTREE's" : "; ROWS DIFFER"));
    }
  };
  const DeviceBuffer<float> device_points = on_device(points);
  const struct {
    const char* name;
    const std::vector<float>* rows;
  } sets[] = {
      {"on the sphere", &on_surface}, {"in its cube", &in_cube}, {"1 in 50 in its cube", &mixed}};
  for (const auto& set : sets) {
    const DeviceBuffer<float> queries = on_device(*set.rows);
    rows_of(device_points, m, points_note + ", queries " + set.name, [&](knn_index* index) {
      must(knn_index_query(index, queries.get(), m, k, indices.get(), sq_distances.get(), nullptr),
           "knn_index_query");
    });
  }
  rows_of(on_device(scan), n, "all-kNN, " + points_note + ", 1 in 1000 moved into [-2, 2]^3",
          [&](knn_index* index) {
            must(knn_index_query_self(index, k, 0, indices.get(), sq_distances.get()),
                 "knn_index_query_self");
          });
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string suite = "all";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--suite" && i + 1 < argc) {
      suite = argv[++i];
    } else if (a == "--leaf" && i + 1 < argc) {
      leaf_size = std::atoi(argv[++i]);
    } else if (a == "--dim" && i + 1 < argc) {
      only_dim = std::atoi(argv[++i]);
    } else if (a == "--log-n" && i + 1 < argc) {
      only_log_n = std::atoi(argv[++i]);
    } else if (a == "--k" && i + 1 < argc) {
      allknn_k = std::atoi(argv[++i]);
    } else if (a == "--futhark-k" && i + 1 < argc) {
      futhark_k = std::atoi(argv[++i]);
    } else if (a == "--kdtree-only") {
      kdtree_only = true;
    } else {
      std::fprintf(
          stderr,
          "usage: %s [--quick] [--suite futhark|allknn|radius|f64|placement|all] [--leaf N] "
          "[--dim D] [--log-n L] [--kdtree-only] [--k K] [--futhark-k K]\n",
          argv[0]);
      return 2;
    }
  }
  if (cuGetDeviceCount() == 0) {
    std::fprintf(stderr, "bench_index: no CUDA device\n");
    return 1;
  }
  try {
    header();
    if (suite == "futhark" || suite == "all") futhark_suite(quick);
    if (suite == "allknn" || suite == "all") allknn_suite(quick);
    if (suite == "radius" || suite == "all") radius_suite(quick);
    if (suite == "f64") f64_suite(quick);
    if (suite == "placement") placement_suite(quick);
  } catch (const knn::Error& e) {
    std::fprintf(stderr, "bench_index: %s\n", e.what());
    return 1;
  }
  return 0;
}
