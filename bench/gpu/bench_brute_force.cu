// Kernel-only benchmark of the CUDA brute-force index (issue #4) on the
// shapes of the Futhark thesis table (BENCHMARKS.md, "Higher dimensions"):
// n = m = 2^17 .. 2^21, d in {5, 7, 9, 12, 16}, k = 5, uniform in the unit
// cube. It times the engine's device function (cuda/brute_force/index_brute_force.cuh)
// with points and queries already on the device: CUDA events on one stream,
// one warm-up, median of 5. Throughput is "GFLOP-equivalent": 3 d n m
// operations (difference, square, sum per coordinate) over the time, the
// comparisons with the k-list not counted. Each shape's first 64 queries are
// checked against the OpenMP brute force (bit-identical rows).
//   Usage: bench_brute_force [--quick]   (--quick: n = m <= 2^18 only)
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "../../cuda/brute_force/index_brute_force.cuh"
#include "../../cuda/index_memory_model.h"
#include "../../openmp/omp_engine.h"
#include "device_timer.h"

namespace {

using knn::cuda::BruteForcePoints;
using knn::cuda::BruteForceRequest;
using knn::cuda::DeviceBuffer;
using knn::cuda::check;

constexpr int kRepeats = 5;
constexpr int kK = 5;
constexpr int64_t kChecked = 64;

std::vector<float> uniform_rows(int64_t n, int dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> rows(static_cast<size_t>(n) * dim);
  for (float& v : rows) v = u(rng);
  return rows;
}

struct Timing {
  double median_ms;
  bool agrees;
};

Timing run_shape(int64_t n, int dim, cudaStream_t stream) {
  const int64_t m = n;
  const std::vector<float> points = uniform_rows(n, dim, 1);
  const std::vector<float> queries = uniform_rows(m, dim, 2);
  DeviceBuffer<float> d_points(points.size()), d_queries(queries.size());
  check(cudaMemcpy(d_points.get(), points.data(), points.size() * 4, cudaMemcpyHostToDevice),
        "copy");
  check(cudaMemcpy(d_queries.get(), queries.data(), queries.size() * 4, cudaMemcpyHostToDevice),
        "copy");
  DeviceBuffer<int32_t> d_idx(static_cast<size_t>(m) * kK);
  DeviceBuffer<float> d_dist(static_cast<size_t>(m) * kK);
  const BruteForcePoints<float> view{d_points.get(), n, dim};
  BruteForceRequest<float> request;
  request.row_width = kK;
  request.max_sq = INFINITY;
  const int list_k = knn::cuda::index_memory::brute_force_list_k(kK, false, n);
  const int64_t splits = knn::cuda::index_memory::brute_force_splits(m, n, list_k);
  knn::cuda::BruteForceScratch<float> scratch(m, splits, list_k);
  const knn::cuda::BruteForceOutputs<float> out{d_idx.get(), d_dist.get(), nullptr};

  // Warm-up on a slice of the queries: loads the kernels, wakes the clocks.
  knn::cuda::brute_force_search(view, d_queries.get(), std::min<int64_t>(m, 4096), request, out,
                                splits, scratch, stream);
  check(cudaStreamSynchronize(stream), "warm-up");
  std::vector<double> ms;
  for (int r = 0; r < kRepeats; ++r)
    ms.push_back(knn_bench::event_ms(stream, [&] {
      knn::cuda::brute_force_search(view, d_queries.get(), m, request, out, splits, scratch,
                                    stream);
    }));

  std::vector<int32_t> idx(static_cast<size_t>(kChecked) * kK), want_idx(idx.size());
  std::vector<float> dist(idx.size()), want_dist(idx.size());
  check(cudaMemcpy(idx.data(), d_idx.get(), idx.size() * 4, cudaMemcpyDeviceToHost), "copy");
  check(cudaMemcpy(dist.data(), d_dist.get(), dist.size() * 4, cudaMemcpyDeviceToHost), "copy");
  knn::omp::brute_force(points.data(), n, queries.data(), kChecked, dim, kK, want_idx.data(),
                        want_dist.data());
  const bool agrees =
      idx == want_idx && std::memcmp(dist.data(), want_dist.data(), dist.size() * 4) == 0;
  return Timing{knn_bench::middle_sample(ms), agrees};
}

}  // namespace

int run_all(bool quick) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: nothing to time\n");
    return 0;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("CUDA brute force, kernel-only (median of %d after a warm-up), k = %d, uniform, %s\n",
              kRepeats, kK, prop.name);
  std::printf("%8s %4s %12s %14s %6s\n", "n = m", "d", "ms", "GFLOP-eq/s", "check");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  bool all_agree = true;
  for (int log_n = 17; log_n <= (quick ? 18 : 21); ++log_n) {
    for (const int dim : {5, 7, 9, 12, 16}) {
      const int64_t n = int64_t{1} << log_n;
      const Timing t = run_shape(n, dim, stream);
      const double flops = 3.0 * dim * static_cast<double>(n) * static_cast<double>(n);
      std::printf("%6s%2d %4d %12.2f %14.0f %6s\n", "2^", log_n, dim, t.median_ms,
                  flops / (t.median_ms * 1e-3) / 1e9, t.agrees ? "ok" : "DIFF");
      std::fflush(stdout);
      all_agree = all_agree && t.agrees;
    }
  }
  cudaStreamDestroy(stream);
  return all_agree ? 0 : 1;
}

int main(int argc, char** argv) {
  try {
    return run_all(argc > 1 && std::strcmp(argv[1], "--quick") == 0);
  } catch (const knn::Error& e) {
    std::fprintf(stderr, "bench_brute_force: %s\n", e.what());
    return 2;
  }
}
