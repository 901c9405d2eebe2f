// GPU benchmark of the uniform grid (3-D) against our kd-trees.
//   grid kernel-only:  build_device_grid and grid_knn with points, queries
//                      and rows on the device, CUDA events (the query sort is
//                      part of the search);
//   grid engine call:  the index engine's knn with device arrays (chunk
//                      pipeline included), host clock;
//   kd-tree index:     cuda::build_kdtree_index's engine, same call, host clock
//                      (the engine classic queries run on where the grid
//                      does not serve them).
// Medians of 5 after a warm-up. Every grid answer is checked against the
// OpenMP grid on a sample of queries. The engines are timed directly (not
// through the C ABI), as the table says.
// Usage: bench_grid [--quick | --sweep-target | --degenerate]
//   --quick: 2^20 points only; --sweep-target: query time against the target
//   points per cell (uniform 10^7); --degenerate: the collinear and all-tied
//   sets of issue #18 through the C ABI (GRID and AUTO), checked against the
//   OpenMP grid.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../../common/grid_layout.h"
#include "../../cuda/core/memory_model.h"
#include "../../cuda/cuda_index.h"
#include "../../cuda/grid/grid_build.cuh"
#include "datasets.h"
#include "device_timer.h"
#include "knn_gpgpu.h"

using namespace knn_bench;

namespace {

constexpr int kRepeats = 5;
constexpr int64_t kCheckedQueries = 20000;

template <class T>
knn::cuda::DeviceBuffer<T> device_copy(const std::vector<T>& host) {
  knn::cuda::DeviceBuffer<T> d(host.size());
  knn::cuda::check(
      cudaMemcpy(d.get(), host.data(), sizeof(T) * host.size(), cudaMemcpyHostToDevice), "copy");
  return d;
}

void print_row(const std::string& config, const char* what, double ms, const std::string& note) {
  std::printf("| %-34s | %-30s | %10.2f | %s\n", config.c_str(), what, ms, note.c_str());
  std::fflush(stdout);
}

// Grid rows (first kCheckedQueries queries) against the OpenMP grid.
std::string check_against_cpu(const std::vector<Point>& points, const std::vector<Point>& queries,
                              int k, const knn::cuda::DeviceBuffer<int32_t>& d_idx) {
  const int64_t sample = std::min<int64_t>(kCheckedQueries, static_cast<int64_t>(queries.size()));
  auto cpu_grid = knn::omp::build_grid_index(&points[0].p[0], static_cast<int64_t>(points.size()),
                                             knn::IndexParams{});
  if (!cpu_grid) return "CPU grid refused the data";
  std::vector<int32_t> cpu(static_cast<size_t>(sample) * k), gpu(cpu.size());
  cpu_grid->knn(&queries[0].p[0], sample, k, cpu.data(), nullptr, knn::CallParams{});
  cudaMemcpy(gpu.data(), d_idx.get(), gpu.size() * sizeof(int32_t), cudaMemcpyDeviceToHost);
  return cpu == gpu ? "== OpenMP grid (" + std::to_string(sample) + " sampled)"
                    : "MISMATCH vs OpenMP grid";
}

void bench(Distribution dist, int64_t n, int64_t m, const std::vector<int>& ks) {
  const std::vector<Point> points = reference_points(dist, n);
  const std::vector<Point> queries = query_points(dist, m);
  knn::cuda::DeviceBuffer<Point> d_points = device_copy(points);
  knn::cuda::DeviceBuffer<Point> d_queries = device_copy(queries);
  const int kmax = *std::max_element(ks.begin(), ks.end());
  knn::cuda::DeviceBuffer<int32_t> d_idx(static_cast<size_t>(m) * kmax);
  knn::cuda::DeviceBuffer<float> d_dist(static_cast<size_t>(m) * kmax);
  knn::cuda::Stream stream;
  const float* p = &d_points.get()->p[0];
  const float* q = &d_queries.get()->p[0];
  const std::string base =
      std::string(distribution_name(dist)) + " n=" + std::to_string(n) + " m=" + std::to_string(m);

  // The grid, kernel-only.
  std::unique_ptr<knn::cuda::DeviceGrid<float>> grid;
  const double grid_build = median_event_ms(
      stream.get(),
      [&] {
        grid = knn::cuda::build_device_grid(p, n, true, knn::kGridDefaultPointsPerCell, true, false,
                                            stream.get());
      },
      kRepeats);
  if (grid) {
    const knn::GridLayout& g = grid->layout;
    print_row(base, "grid build kernel-only", grid_build,
              std::to_string(g.cells[0]) + "x" + std::to_string(g.cells[1]) + "x" +
                  std::to_string(g.cells[2]) + " cells");
  } else {
    print_row(base, "grid build kernel-only", grid_build,
              "refused (poor occupancy): API uses the kd-tree");
  }
  // The search runs in the engine's chunks (the memory model bounds CUB's
  // scratch for chunks of at most kMaxChunkQueries), back to back on one stream.
  const int64_t chunk = std::min(m, knn::cuda::kMaxChunkQueries);
  knn::cuda::GridSearchScratch scratch;
  if (grid) scratch = knn::cuda::GridSearchScratch(chunk, grid->key_bits());

  knn::CallParams on_device;
  on_device.queries_on_device = on_device.outputs_on_device = true;
  knn::IndexParams params;
  params.points_on_device = true;
  auto grid_engine = knn::cuda::build_grid_index(p, n, params);
  std::unique_ptr<knn::IndexEngine> kd_engine;
  double kd_build = 0;
  try {
    kd_build = median_host_ms([&] { kd_engine = knn::cuda::build_kdtree_index(p, n, 3, params); },
                              kRepeats);
  } catch (const knn::Error& e) {
    print_row(base, "kd-tree index engine build", 0, std::string("failed: ") + e.what());
  }

  for (const int k : ks) {
    const std::string config = base + " k=" + std::to_string(k);
    if (grid) {
      const double ms = median_event_ms(
          stream.get(),
          [&] {
            for (int64_t first = 0; first < m; first += chunk)
              knn::cuda::grid_knn(grid->view(), q + 3 * first, std::min(chunk, m - first), k, -1,
                                  d_idx.get() + first * k, d_dist.get() + first * k, scratch,
                                  stream.get());
          },
          kRepeats);
      print_row(config, "grid query kernel-only", ms, check_against_cpu(points, queries, k, d_idx));
      print_row(config, "grid build+query kernel-only", grid_build + ms, "");
      const double call = median_host_ms(
          [&] { grid_engine->knn(q, m, k, d_idx.get(), d_dist.get(), on_device); }, kRepeats);
      print_row(config, "grid engine call (host clock)", call, "");
    }
    if (kd_engine) {
      try {
        const double call = median_host_ms(
            [&] { kd_engine->knn(q, m, k, d_idx.get(), d_dist.get(), on_device); }, kRepeats);
        print_row(config, "kd-tree index engine call", call,
                  "build " + std::to_string(kd_build) + " ms");
      } catch (const knn::Error& e) {
        print_row(config, "kd-tree index engine call", 0, std::string("failed: ") + e.what());
      }
    }
  }
}

}  // namespace

// Grid query time against the target points per cell (IndexParams.leaf_size),
// uniform 10^7 x 10^7: the measurements behind kGridDefaultPointsPerCell and
// kGridRegisterK (k = 16 is the last register list, k = 17 the first heap).
void sweep_target() {
  const int64_t n = 10000000;
  const std::vector<Point> points = reference_points(Distribution::Uniform, n);
  const std::vector<Point> queries = query_points(Distribution::Uniform, n);
  knn::cuda::DeviceBuffer<Point> d_points = device_copy(points);
  knn::cuda::DeviceBuffer<Point> d_queries = device_copy(queries);
  knn::cuda::DeviceBuffer<int32_t> d_idx(static_cast<size_t>(n) * 32);
  knn::cuda::DeviceBuffer<float> d_dist(static_cast<size_t>(n) * 32);
  knn::cuda::Stream stream;
  const int64_t chunk = knn::cuda::kMaxChunkQueries;
  for (const int target : {1, 2, 3, 4, 6, 8}) {
    auto grid = knn::cuda::build_device_grid(&d_points.get()->p[0], n, true, target, true, false,
                                             stream.get());
    knn::cuda::GridSearchScratch scratch(chunk, grid->key_bits());
    for (const int k : {1, 8, 16, 17, 32}) {
      const double ms = median_event_ms(
          stream.get(),
          [&] {
            for (int64_t first = 0; first < n; first += chunk)
              knn::cuda::grid_knn(grid->view(), &d_queries.get()->p[0] + 3 * first,
                                  std::min(chunk, n - first), k, -1, d_idx.get() + first * k,
                                  d_dist.get() + first * k, scratch, stream.get());
          },
          kRepeats);
      print_row("uniform 10^7 target=" + std::to_string(target) + " k=" + std::to_string(k),
                "grid query kernel-only", ms, "");
    }
  }
}

// n points along x, `spacing` apart (1e-30: every float32 squared distance
// underflows to 0, so only the indices order the neighbours); indices ascend
// along the line, or are shuffled.
std::vector<float> collinear(int64_t n, double spacing, bool shuffled) {
  std::vector<int64_t> step(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) step[static_cast<size_t>(i)] = i;
  uint64_t state = 0x1173;
  for (int64_t i = n - 1; shuffled && i > 0; --i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(step[static_cast<size_t>(i)],
              step[static_cast<size_t>((state >> 33) % static_cast<uint64_t>(i + 1))]);
  }
  std::vector<float> rows(static_cast<size_t>(3 * n), 0.0f);
  for (int64_t i = 0; i < n; ++i)
    rows[static_cast<size_t>(3 * i)] =
        static_cast<float>(static_cast<double>(step[static_cast<size_t>(i)]) * spacing);
  return rows;
}

// Build + all-kNN without self through the C ABI from host arrays; the
// structure the index reports goes to *used.
std::vector<int32_t> all_knn_rows(const std::vector<float>& points, int backend, int structure,
                                  int k, int* used) {
  const int64_t n = static_cast<int64_t>(points.size() / 3);
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = backend;
  opt.structure = structure;
  knn_index* index = nullptr;
  std::vector<int32_t> rows(static_cast<size_t>(n) * k);
  int status = knn_index_build(points.data(), n, 3, &opt, &index);
  if (status == KNN_OK) status = knn_index_info(index, nullptr, nullptr, nullptr, used);
  if (status == KNN_OK) status = knn_index_query_self(index, k, 1, rows.data(), nullptr);
  knn_index_free(index);
  if (status != KNN_OK) throw std::runtime_error(knn_last_error());
  return rows;
}

// The degenerate sets of issue #18, which took 92-126 s through the GPU grid
// before the tie rules of common/grid_layout.h: build + all-kNN, GRID and
// AUTO on the CUDA backend, host clock, each answer against the OpenMP grid.
void degenerate() {
  struct Case {
    int64_t n;
    double spacing;
    bool shuffled;
    int k;
  };
  for (const Case c :
       {Case{2100, 1e-30, false, 8}, Case{2100, 1e-30, false, 100}, Case{20000, 1e-30, false, 1000},
        Case{20000, 1e-30, true, 1000}, Case{20000, 1.0, false, 1000}}) {
    const std::vector<float> points = collinear(c.n, c.spacing, c.shuffled);
    char config[96];
    std::snprintf(config, sizeof config, "line n=%lld spacing=%g%s k=%d",
                  static_cast<long long>(c.n), c.spacing, c.shuffled ? " shuffled" : "", c.k);
    int cpu_used = -1;
    const std::vector<int32_t> cpu =
        all_knn_rows(points, KNN_BACKEND_OPENMP, KNN_STRUCTURE_GRID, c.k, &cpu_used);
    for (const int structure : {KNN_STRUCTURE_GRID, KNN_STRUCTURE_AUTO}) {
      int used = -1;
      std::vector<int32_t> rows;
      const double ms = median_host_ms(
          [&] { rows = all_knn_rows(points, KNN_BACKEND_CUDA, structure, c.k, &used); }, 3);
      const std::string note = std::string(used == KNN_STRUCTURE_GRID ? "grid" : "kd-tree") +
                               (rows == cpu ? ", == OpenMP " : ", MISMATCH vs OpenMP ") +
                               (cpu_used == KNN_STRUCTURE_GRID ? "grid" : "kd-tree");
      print_row(config,
                structure == KNN_STRUCTURE_GRID ? "GRID build+all-kNN (C ABI)"
                                                : "AUTO build+all-kNN (C ABI)",
                ms, note);
    }
  }
}

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device\n");
    return 0;
  }
  std::printf("| %-34s | %-30s | %10s | %s\n", "configuration", "what", "ms", "note");
  try {
    if (argc > 1 && std::strcmp(argv[1], "--sweep-target") == 0) {
      sweep_target();
      return 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "--degenerate") == 0) {
      degenerate();
      return 0;
    }
    for (int log_n = 20; log_n <= (quick ? 20 : 24); log_n += 2)
      bench(Distribution::Uniform, int64_t{1} << log_n, int64_t{1} << log_n, {1, 8});
    if (!quick) {
      bench(Distribution::Uniform, 10000000, 10000000, {1, 8});
      bench(Distribution::Clustered, 10000000, 10000000, {1, 8});
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
