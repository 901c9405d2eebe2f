// Neighbourhood statistics (include/knn_gpgpu_stats.h): knn_index_normals and
// knn_index_outlier_scores on a scan-like cloud, on the OpenMP engine and,
// where a device is present, the CUDA engine, for each k asked (default 16,
// 30, 100), as a table. A host of the library like any other: the public
// header only.
//
//   bench_normals [--n 1e6] [--k 16,30,100] [--repeats 5] [--threads T]
//                 [--backend cpu|cuda|both] [--f64]
//
// Each figure is the median of the repeats after one warm-up, wall-clock
// around the synchronous call (host outputs: the time a host waits, the
// outputs' copy included). CUDA events on the caller's stream would not
// bracket the work: the library runs on its own non-blocking streams and
// synchronises them before returning. The index is built once per backend
// (AUTO structure) and not timed. "normals" orient towards a viewpoint (as
// Open3D's estimate_normals with orient_towards_camera_location); "oriented"
// is the same with consistent orientation (no viewpoint, Hoppe's propagation
// on the host), timed at the first k only.
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "bench_timer.h"
#include "check_status.h"
#include "command_line.h"
#include "datasets.h"
#include "knn_gpgpu.h"

namespace {

const char* const kUsage =
    "usage: bench_normals [--n N] [--k K1,K2,...] [--repeats R] [--threads T]\n"
    "                     [--backend cpu|cuda|both] [--f64]\n"
    "  normals and outlier scores of N points of a scanned surface (default 1e6; k 16,30,100)\n";

// A scanned surface: a wavy sheet over [0, 100]^2 with 0.01 noise, points in
// a random (scan) order; deterministic.
template <typename Scalar>
std::vector<Scalar> scan(int64_t n) {
  std::vector<Scalar> p(static_cast<size_t>(3 * n));
  for (int64_t i = 0; i < n; ++i) {
    const double u = double(knn_bench::mix64(3 * uint64_t(i)) >> 11) * 0x1p-53;
    const double v = double(knn_bench::mix64(3 * uint64_t(i) + 1) >> 11) * 0x1p-53;
    const double w = double(knn_bench::mix64(3 * uint64_t(i) + 2) >> 11) * 0x1p-53;
    const double x = 100 * u, y = 100 * v;
    p[static_cast<size_t>(3 * i)] = Scalar(x);
    p[static_cast<size_t>(3 * i + 1)] = Scalar(y);
    p[static_cast<size_t>(3 * i + 2)] =
        Scalar(3 * std::sin(0.2 * x) * std::cos(0.15 * y) + 0.01 * (w - 0.5));
  }
  return p;
}

int normals(const knn_index* ix, int k, const float* v, float* n, const knn_options* o) {
  return knn_index_normals(ix, k, v, n, nullptr, o);
}
int normals(const knn_index* ix, int k, const double* v, double* n, const knn_options* o) {
  return knn_index_normals_f64(ix, k, v, n, nullptr, o);
}
int scores(const knn_index* ix, int k, float* s, const knn_options* o) {
  return knn_index_outlier_scores(ix, k, s, o);
}
int scores(const knn_index* ix, int k, double* s, const knn_options* o) {
  return knn_index_outlier_scores_f64(ix, k, s, o);
}
int build(const float* p, int64_t n, const knn_options* o, knn_index** out) {
  return knn_index_build(p, n, 3, o, out);
}
int build(const double* p, int64_t n, const knn_options* o, knn_index** out) {
  return knn_index_build_f64(p, n, 3, o, out);
}

template <typename Scalar>
void run(int64_t n, const std::vector<int>& ks, int repeats, int threads, bool cpu, bool cuda) {
  const std::vector<Scalar> points = scan<Scalar>(n);
  std::vector<Scalar> out_normals(static_cast<size_t>(3 * n)), out_scores(static_cast<size_t>(n));
  const Scalar viewpoint[3] = {Scalar(50), Scalar(50), Scalar(1000)};
  std::printf("%-7s %-6s %10s %5s %14s %14s %14s\n", "backend", "scalar", "n", "k", "normals ms",
              "scores ms", "oriented ms");
  for (const int backend : {KNN_BACKEND_OPENMP, KNN_BACKEND_CUDA}) {
    if ((backend == KNN_BACKEND_OPENMP && !cpu) || (backend == KNN_BACKEND_CUDA && !cuda)) continue;
    knn_options o;
    knn_options_init(&o);
    o.backend = backend;
    o.threads = threads;
    knn_index* ix = nullptr;
    knn_bench::check_status(build(points.data(), n, &o, &ix), "knn_index_build");
    for (size_t i = 0; i < ks.size(); ++i) {
      const int k = ks[i];
      const double t_normals = knn_bench::median_ms(
          [&] {
            knn_bench::check_status(normals(ix, k, viewpoint, out_normals.data(), &o),
                                    "knn_index_normals");
          },
          repeats);
      const double t_scores = knn_bench::median_ms(
          [&] {
            knn_bench::check_status(scores(ix, k, out_scores.data(), &o),
                                    "knn_index_outlier_scores");
          },
          repeats);
      double t_oriented = NAN;
      if (i == 0)
        t_oriented = knn_bench::median_ms(
            [&] {
              knn_bench::check_status(normals(ix, k, nullptr, out_normals.data(), &o),
                                      "knn_index_normals");
            },
            repeats);
      std::printf("%-7s %-6s %10lld %5d %14.1f %14.1f %14.1f\n",
                  backend == KNN_BACKEND_CUDA ? "cuda" : "openmp",
                  sizeof(Scalar) == 8 ? "f64" : "f32", static_cast<long long>(n), k, t_normals,
                  t_scores, t_oriented);
      std::fflush(stdout);
    }
    knn_index_free(ix);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const knn_bench::CommandLine cl{argv[0], kUsage};
  int64_t n = 1000000;
  std::vector<int> ks = {16, 30, 100};
  int repeats = knn_bench::kDefaultRepeats, threads = 0;
  std::string backend = "both";
  bool f64 = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    cl.exit_if_help(arg);
    if (arg == "--n") {
      n = cl.count(cl.value_after(argc, argv, &i), "--n", 1, INT32_MAX);
    } else if (arg == "--k") {
      ks.clear();
      std::string list = cl.value_after(argc, argv, &i);
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        ks.push_back(static_cast<int>(cl.count(list.substr(at, comma - at), "--k", 1, 4096)));
        at = comma + 1;
      }
    } else if (arg == "--repeats") {
      repeats = static_cast<int>(cl.count(cl.value_after(argc, argv, &i), "--repeats", 1, 1000));
    } else if (arg == "--threads") {
      threads = static_cast<int>(cl.count(cl.value_after(argc, argv, &i), "--threads", 0, 4096));
    } else if (arg == "--backend") {
      backend = cl.value_after(argc, argv, &i);
      if (backend != "cpu" && backend != "cuda" && backend != "both")
        cl.fail("--backend must be cpu, cuda or both");
    } else if (arg == "--f64") {
      f64 = true;
    } else {
      cl.fail("unknown argument " + arg);
    }
  }
  const bool cuda = backend != "cpu" && cuGetDeviceCount() > 0;
  if (backend == "cuda" && !cuda) cl.fail("--backend cuda: no CUDA device");
  std::printf("bench_normals: %lld points of a scanned surface, %d OpenMP threads%s\n",
              static_cast<long long>(n), threads > 0 ? threads : omp_get_max_threads(),
              cuda ? ", CUDA device 0" : "");
  try {
    if (f64)
      run<double>(n, ks, repeats, threads, backend != "cuda", cuda);
    else
      run<float>(n, ks, repeats, threads, backend != "cuda", cuda);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_normals: %s\n", e.what());
    return 1;
  }
  return 0;
}
