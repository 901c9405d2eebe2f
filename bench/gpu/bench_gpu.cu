// GPU benchmark of the kd-tree engine.
//   kernel-only: the classic build and the kd-tree engine of the points with
//                points/queries already on the device, timed with CUDA events
//                (median after a warm-up);
//   end to end:  the C ABI (buildKdTree, cuQueryAll, queryAll) from pageable
//                host arrays, timed with the host clock.
// Every timed query configuration is checked against the CPU engine on a
// sample of queries. Usage: bench_gpu [--quick | --scale | --split | --sweep |
//                                      --query N M K]
//   --scale: the tree-split case and all-kNN of 10^8 points; --split: the former;
//   --sweep: only the agreement sweep (what compute-sanitizer runs);
//   --small: the sweep without its 10^5-point cases and with fewer queries
//            (for racecheck, whose instrumentation costs 100x);
//   --query N M K: only that uniform configuration (for a profiler).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../../common/index_leaf_size.h"
#include "../../cuda/cuda_index.h"
#include "../../cuda/kdtree/cuda_kdtree_build.h"
#include "datasets.h"
#include "device_timer.h"
#include "knn_gpgpu.h"

using namespace knn_bench;

namespace {

constexpr int kRepeats = 3;

void must(int status, const char* what) {
  if (status != KNN_OK) {
    std::fprintf(stderr, "%s failed: %s\n", what, knn_last_error());
    std::exit(1);
  }
}

template <class T>
T* device_copy(const std::vector<T>& host) {
  T* d = nullptr;
  knn::cuda::check(cudaMalloc(&d, sizeof(T) * std::max<size_t>(host.size(), 1)), "cudaMalloc");
  knn::cuda::check(cudaMemcpy(d, host.data(), sizeof(T) * host.size(), cudaMemcpyHostToDevice),
                   "copy");
  return d;
}

std::vector<Point> make_points(const std::string& dist, int64_t n, uint64_t seed) {
  return dist == "clustered" ? clustered_points(n, seed) : uniform_points(n, seed);
}

// Compares GPU rows with mpQueryAll on the first `sample` queries.
bool agrees(const std::vector<Point>& queries, const std::vector<Node>& tree, int k,
            const std::vector<int32_t>& gpu_rows, int64_t sample) {
  sample = std::min<int64_t>(sample, static_cast<int64_t>(queries.size()));
  std::vector<int> cpu(static_cast<size_t>(sample) * k);
  must(mpQueryAll(queries.data(), tree.data(), static_cast<int>(sample),
                  static_cast<int>(tree.size()), k, cpu.data()),
       "mpQueryAll");
  return std::memcmp(cpu.data(), gpu_rows.data(), cpu.size() * sizeof(int)) == 0;
}

struct Row {
  std::string what;
  double ms;
  std::string note;
};
std::vector<Row> rows;

void report(const std::string& what, double ms, const std::string& note = "") {
  rows.push_back({what, ms, note});
  std::printf("%-58s %10.2f ms  %s\n", what.c_str(), ms, note.c_str());
  std::fflush(stdout);
}

void bench_build(const std::string& dist, int64_t n) {
  const std::vector<Point> points = make_points(dist, n, kReferenceSeed);
  Point* d_points = device_copy(points);
  Node* d_tree = nullptr;
  knn::cuda::check(cudaMalloc(&d_tree, sizeof(Node) * n), "cudaMalloc");
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  knn::cuda::BuildWorkspace ws(n);
  const double ms = median_event_ms(
      stream, [&] { knn::cuda::build_kdtree_on_device(d_points, n, d_tree, ws, stream); },
      kRepeats);
  // Byte-identical to the CPU build?
  std::vector<Node> gpu(n), cpu(n);
  cudaMemcpy(gpu.data(), d_tree, sizeof(Node) * n, cudaMemcpyDeviceToHost);
  must(mpBuildKdTree(points.data(), static_cast<int>(n), cpu.data()), "mpBuildKdTree");
  const bool same = std::memcmp(gpu.data(), cpu.data(), sizeof(Node) * n) == 0;
  report("build kernel-only " + dist + " n=" + std::to_string(n), ms,
         same ? "== CPU tree" : "MISMATCH vs CPU");
  const double e2e = median_host_ms(
      [&] { must(cuBuildKdTree(points.data(), static_cast<int>(n), cpu.data()), "cuBuildKdTree"); },
      kRepeats);
  report("build end-to-end (cuBuildKdTree, host arrays) " + dist, e2e);
  cudaStreamDestroy(stream);
  cudaFree(d_points);
  cudaFree(d_tree);
}

void bench_query(const std::string& dist, int64_t n, int64_t m, int k, bool self) {
  const std::vector<Point> points = make_points(dist, n, kReferenceSeed);
  const std::vector<Point> queries = self ? points : make_points(dist, m, kQuerySeed);
  std::vector<Node> tree(n);
  must(buildKdTree(points.data(), static_cast<int>(n), tree.data()), "buildKdTree");

  cudaStream_t stream;
  cudaStreamCreate(&stream);
  const std::string tag =
      dist + " n=" + std::to_string(n) + " m=" + std::to_string(m) + " k=" + std::to_string(k);
  {
    // Kernel-only: the classic build, then the engine a classic query runs
    // on where the grid does not serve it (the bucket kd-tree of the
    // points, leaves as queryAll takes them for k), with everything on the
    // device; its build and its call timed with CUDA events.
    Point* d_points = device_copy(points);
    Point* d_queries = device_copy(queries);
    Node* d_tree = nullptr;
    int32_t* d_idx = nullptr;
    float* d_dist = nullptr;
    knn::cuda::check(cudaMalloc(&d_tree, sizeof(Node) * n), "malloc");
    knn::cuda::check(cudaMalloc(&d_idx, sizeof(int32_t) * m * k), "malloc");
    knn::cuda::check(cudaMalloc(&d_dist, sizeof(float) * m * k), "malloc");
    knn::cuda::BuildWorkspace ws(n);
    knn::IndexParams params;
    params.points_on_device = true;
    params.leaf_size = k > 16 ? knn::kdtree_long_list_leaf_size(3)
                              : knn::kdtree_default_leaf_size(3, knn::LeafSizeFor::kGpu);
    knn::CallParams on_device;
    on_device.queries_on_device = on_device.outputs_on_device = true;
    std::unique_ptr<knn::IndexEngine> engine;
    auto build = [&] {
      knn::cuda::build_kdtree_on_device(d_points, n, d_tree, ws, stream);
      engine = knn::cuda::build_kdtree_index(&d_points->p[0], n, 3, params);
    };
    auto search = [&] { engine->knn(&d_queries->p[0], m, k, d_idx, d_dist, on_device); };
    const double build_ms = median_event_ms(stream, build, kRepeats);
    const double search_ms = median_event_ms(stream, search, kRepeats);
    std::vector<int32_t> gpu(static_cast<size_t>(m) * k);
    cudaMemcpy(gpu.data(), d_idx, gpu.size() * sizeof(int32_t), cudaMemcpyDeviceToHost);
    const bool ok = agrees(queries, tree, k, gpu, 20000);
    report("query kernel-only " + tag, search_ms,
           ok ? "== CPU (20000 sampled)" : "MISMATCH vs CPU");
    report("build+query kernel-only " + tag, build_ms + search_ms);
    engine.reset();
    cudaFree(d_points), cudaFree(d_queries), cudaFree(d_tree), cudaFree(d_idx), cudaFree(d_dist);
  }
  {
    std::vector<int> result(static_cast<size_t>(m) * k);
    const double upload = median_host_ms(
        [&] {
          must(cuQueryAll(queries.data(), tree.data(), 1, static_cast<int>(n), k, result.data()),
               "cuQueryAll");
        },
        kRepeats);
    report("  of which upload+check (cuQueryAll, 1 query) " + tag, upload);
    const double cu = median_host_ms(
        [&] {
          must(cuQueryAll(queries.data(), tree.data(), static_cast<int>(m), static_cast<int>(n), k,
                          result.data()),
               "cuQueryAll");
        },
        kRepeats);
    report("cuQueryAll end-to-end (host arrays) " + tag, cu);
    const double q = median_host_ms(
        [&] {
          must(queryAll(queries.data(), tree.data(), static_cast<int>(m), static_cast<int>(n), k,
                        result.data()),
               "queryAll");
        },
        kRepeats);
    const bool ok =
        agrees(queries, tree, k, std::vector<int32_t>(result.begin(), result.end()), 20000);
    report("queryAll end-to-end (host arrays) " + tag, q, ok ? "== CPU" : "MISMATCH vs CPU");
    const double b = median_host_ms(
        [&] { must(buildKdTree(points.data(), static_cast<int>(n), tree.data()), "buildKdTree"); },
        kRepeats);
    report("buildKdTree+queryAll end-to-end " + tag, b + q);
  }
  cudaStreamDestroy(stream);
}

// Quick agreement sweep over awkward sizes before anything is timed.
bool sweep(bool small) {
  int failures = 0, cases = 0;
  for (int64_t n : {0, 1, 2, 3, 7, 100, 1000, 4097, 100003}) {
    if (small && n > 4097) continue;
    for (const std::string dist : {"uniform", "clustered", "duplicates", "equal", "negative"}) {
      std::vector<Point> points = make_points(dist == "clustered" ? dist : "uniform", n, 7 + n);
      for (int64_t i = 0; i < n; ++i)
        for (int d = 0; d < 3; ++d) {
          float& c = points[i].p[d];
          if (dist == "duplicates") c = std::floor(c * 4) / 4;
          if (dist == "equal") c = 0.5f;
          if (dist == "negative") c = (c - 0.5f) * 2e6f;
        }
      std::vector<Node> gpu(n), cpu(n);
      must(cuBuildKdTree(points.data(), static_cast<int>(n), gpu.data()), "cuBuildKdTree");
      must(mpBuildKdTree(points.data(), static_cast<int>(n), cpu.data()), "mpBuildKdTree");
      ++cases;
      if (n && std::memcmp(gpu.data(), cpu.data(), sizeof(Node) * n) != 0) {
        ++failures;
        std::printf("  build mismatch: %s n=%lld\n", dist.c_str(), (long long)n);
      }
      const int m = small ? 301 : 3001;
      const std::vector<Point> queries = make_points("uniform", m, 99);
      for (int k : {1, 3, 8, 16, 33, 100, 1024, 2100}) {
        if (k > 2048 && n > 4097) continue;  // the heap path: small sizes suffice
        std::vector<int> a(m * static_cast<size_t>(k)), b(a.size());
        must(cuQueryAll(queries.data(), cpu.data(), m, static_cast<int>(n), k, a.data()),
             "cuQueryAll");
        must(mpQueryAll(queries.data(), cpu.data(), m, static_cast<int>(n), k, b.data()),
             "mpQueryAll");
        ++cases;
        if (a != b) {
          ++failures;
          std::printf("  query mismatch: %s n=%lld k=%d\n", dist.c_str(), (long long)n, k);
        }
      }
    }
  }
  std::printf("agreement sweep: %d cases, %d failures\n", cases, failures);
  return failures == 0;
}

// The users' largest job: all-kNN of 10^8 points, k = 100, through buildKdTree
// and queryAll into host memory (40 GB of indices), spot-checked on the CPU.
void bench_scale(int64_t n, int k) {
  std::vector<Point> points = uniform_points(n, kReferenceSeed);
  std::vector<Node> tree(n);
  auto t0 = std::chrono::steady_clock::now();
  must(buildKdTree(points.data(), static_cast<int>(n), tree.data()), "buildKdTree");
  const double build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::vector<int> result(static_cast<size_t>(n) * k);
  t0 = std::chrono::steady_clock::now();
  must(queryAll(points.data(), tree.data(), static_cast<int>(n), static_cast<int>(n), k,
                result.data()),
       "queryAll");
  const double query_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // Spot check: 1000 queries spread over the whole range against mpQueryAll.
  const int samples = 1000;
  std::vector<Point> sample(samples);
  std::vector<int> expected(static_cast<size_t>(samples) * k);
  for (int s = 0; s < samples; ++s) sample[s] = points[(n / samples) * s];
  must(mpQueryAll(sample.data(), tree.data(), samples, static_cast<int>(n), k, expected.data()),
       "mpQueryAll");
  bool same = true;
  for (int s = 0; s < samples; ++s)
    same &= std::memcmp(&expected[static_cast<size_t>(s) * k],
                        &result[static_cast<size_t>(n / samples) * s * k], sizeof(int) * k) == 0;
  const std::string tag = "n=m=" + std::to_string(n) + " k=" + std::to_string(k);
  report("scale: buildKdTree end-to-end " + tag, build_ms);
  report("scale: queryAll all-kNN end-to-end (host result) " + tag, query_ms,
         same ? "== CPU (1000 spread queries)" : "MISMATCH vs CPU");
}

// queryAll with a device limit below the tree's size: the tree-split path.
void bench_split(int64_t n, int k, size_t limit) {
  const std::vector<Point> points = uniform_points(n, kReferenceSeed);
  const std::vector<Point> queries = uniform_points(n, kQuerySeed);
  std::vector<Node> tree(n);
  must(buildKdTree(points.data(), static_cast<int>(n), tree.data()), "buildKdTree");
  std::vector<int> whole(static_cast<size_t>(n) * k), split(whole.size());
  const double whole_ms = median_host_ms(
      [&] {
        must(queryAll(queries.data(), tree.data(), static_cast<int>(n), static_cast<int>(n), k,
                      whole.data()),
             "queryAll");
      },
      1);
  setenv("KNN_DEVICE_MEMORY_LIMIT", std::to_string(limit).c_str(), 1);
  const double split_ms = median_host_ms(
      [&] {
        must(queryAll(queries.data(), tree.data(), static_cast<int>(n), static_cast<int>(n), k,
                      split.data()),
             "queryAll");
      },
      1);
  unsetenv("KNN_DEVICE_MEMORY_LIMIT");
  const std::string tag = "n=m=" + std::to_string(n) + " k=" + std::to_string(k);
  report("split: queryAll, tree fits " + tag, whole_ms);
  report("split: queryAll, limit " + std::to_string(limit >> 20) + " MiB < tree " +
             std::to_string(getTreeSize(static_cast<int>(n)) >> 20) + " MiB, " + tag,
         split_ms, whole == split ? "== unsplit answer" : "MISMATCH vs unsplit");
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, scale = false, sweep_only = false, small = false, split_only = false;
  int64_t only_query[3] = {0, 0, 0};  // --query N M K
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--query") == 0 && i + 3 < argc) {
      for (int j = 0; j < 3; ++j) only_query[j] = std::atoll(argv[i + 1 + j]);
      i += 3;
    }
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--scale") == 0) scale = true;
    if (std::strcmp(argv[i], "--sweep") == 0) sweep_only = true;
    if (std::strcmp(argv[i], "--small") == 0) small = true;
    if (std::strcmp(argv[i], "--split") == 0) split_only = true;
  }
  if (cuGetDeviceCount() == 0) {
    std::printf("bench_gpu: no CUDA device; nothing to measure\n");
    return 0;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s, %d SMs; host threads %d\n", prop.name, prop.multiProcessorCount,
              omp_get_max_threads());
  const int64_t M = 1000000, TEN_M = 10000000;
  if (scale || split_only) {
    bench_split(TEN_M, 8, size_t{96} << 20);
    if (scale) bench_scale(100000000, 100);
    return 0;
  }
  if (only_query[0] > 0 && only_query[1] > 0 && only_query[2] > 0) {
    bench_query("uniform", only_query[0], only_query[1], static_cast<int>(only_query[2]), false);
    return 0;
  }
  if (!sweep(small)) return 1;
  if (sweep_only) return 0;
  if (quick) {
    bench_build("uniform", M);
    bench_query("uniform", M, M, 8, false);
    bench_query("clustered", M, M, 8, false);
    bench_query("uniform", M, M, 16, false);
    bench_query("uniform", M, M, 100, false);
    return 0;
  }
  bench_build("uniform", TEN_M);
  bench_build("clustered", TEN_M);
  bench_build("uniform", int64_t{1} << 24);
  bench_query("uniform", TEN_M, TEN_M, 8, false);
  bench_query("clustered", TEN_M, TEN_M, 8, false);
  bench_query("uniform", M, M, 100, false);
  bench_query("uniform", TEN_M, TEN_M, 1, false);
  bench_query("uniform", TEN_M, TEN_M, 100, true);
  return 0;
}
