// GPU benchmark of point in polygon over the quadtree. Times the CUDA engine
// directly (knn::cuda::build_quadtree and the engine's count/fill), with the
// points already on the device and the fill's output on the device unless a
// row says "to host"; the engine synchronises before it returns, so each
// figure is host wall-clock time of whole engine calls (median of 5 after a
// warm-up; allocations and the few per-level read-backs included).
//
//   1. build over 10^6 .. 10^8 uniform points;
//   2. 10^8 uniform points x 300 star polygons of ~100 vertices: count, fill,
//      in float32 and in float64 (the same values, held as doubles: a tree
//      built from doubles queried with double vertices), side by side;
//   3. the seed configuration: points uniform in [0, 1024)^2, N = 3e3 .. 1e8,
//      ~1.1e6 axis-aligned rectangles in three size classes (10-20 %, 30-60 %,
//      70-90 % of the area), count phase only, quadtree against a simple GPU
//      brute force (every rectangle against every point, by coordinate
//      comparisons); the two must give the same counts.
// Usage: bench_pip [--quick | --stars]   (--quick: smaller sizes, fewer
// rectangles; --stars: only the 10^8 x 300 stars case, float32 and float64)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "../../common/math_constants.h"
#include "../../cuda/quadtree/quadtree.cuh"
#include "bench_timer.h"
#include "datasets.h"

using knn::PolygonSet;
using knn::QuadtreeEngine;
using knn::QuadtreeParams;
using knn::cuda::DeviceBuffer;

namespace {

template <class T>
struct Polygons {
  std::vector<T> xy;
  std::vector<int64_t> ring_offsets{0};
  std::vector<int64_t> polygon_offsets{0};

  void add(const std::vector<T>& ring) {
    xy.insert(xy.end(), ring.begin(), ring.end());
    ring_offsets.push_back(static_cast<int64_t>(xy.size() / 2));
    polygon_offsets.push_back(static_cast<int64_t>(ring_offsets.size()) - 1);
  }
  PolygonSet<T> view() const {
    PolygonSet<T> s;
    s.xy = xy.data();
    s.n_vertices = static_cast<int64_t>(xy.size() / 2);
    s.ring_offsets = ring_offsets.data();
    s.n_rings = static_cast<int64_t>(ring_offsets.size()) - 1;
    s.polygon_offsets = polygon_offsets.data();
    s.n_polygons = static_cast<int64_t>(polygon_offsets.size()) - 1;
    return s;
  }
  // The same polygons with vertices of scalar U (exact for float -> double).
  template <class U>
  Polygons<U> as() const {
    Polygons<U> out;
    out.xy.assign(xy.begin(), xy.end());
    out.ring_offsets = ring_offsets;
    out.polygon_offsets = polygon_offsets;
    return out;
  }
};

// `count` concave stars of ~`vertices` vertices, radius up to `radius`, in [0, 1)^2.
Polygons<float> stars(int count, int vertices, float radius, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(radius, 1 - radius), r(0.5f * radius, radius);
  Polygons<float> set;
  for (int p = 0; p < count; ++p) {
    const float cx = u(rng), cy = u(rng);
    std::vector<float> ring;
    for (int v = 0; v < vertices; ++v) {
      const double a = 2 * knn::kPi * v / vertices;
      const float rv = r(rng);
      ring.push_back(static_cast<float>(cx + rv * std::cos(a)));
      ring.push_back(static_cast<float>(cy + rv * std::sin(a)));
    }
    set.add(ring);
  }
  return set;
}

// The seed's rectangles over [0, side)^2: area fractions in three classes.
Polygons<float> seed_rectangles(int count, float side, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const float classes[3][2] = {{0.10f, 0.20f}, {0.30f, 0.60f}, {0.70f, 0.90f}};
  std::uniform_real_distribution<float> unit(0, 1);
  Polygons<float> set;
  for (int p = 0; p < count; ++p) {
    const float* c = classes[p % 3];
    const float area = (c[0] + (c[1] - c[0]) * unit(rng)) * side * side;
    // Aspect ratio such that both sides fit in the domain.
    const float min_w = area / side;
    const float w = min_w + (side - min_w) * unit(rng);
    const float h = area / w;
    const float x = (side - w) * unit(rng), y = (side - h) * unit(rng);
    set.add({x, y, x + w, y, x + w, y + h, x, y + h});
  }
  return set;
}

// Uniform float points, held as T (the same values in either precision).
template <class T = float>
DeviceBuffer<T> device_uniform_points(int64_t n, float scale, uint64_t seed) {
  std::vector<float> rows(static_cast<size_t>(2 * n));
  knn_bench::fill_uniform_rows(rows.data(), n, 2, seed);
  if (scale != 1.0f)
    for (float& v : rows) v *= scale;
  const std::vector<T> host(rows.begin(), rows.end());
  DeviceBuffer<T> d(host.size());
  knn::cuda::check(
      cudaMemcpy(d.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
      "bench: upload");
  return d;
}

// Brute force over axis-aligned rectangles [x0, x1] x [y0, y1]: a block per
// rectangle, its threads over all points. The contract's boundary rule makes
// a rectangle half-open: x0 <= x < x1 and y0 <= y < y1 (see
// common/pip_predicate.h), so this is an independent check of the counts.
__global__ void brute_force_count(const float2* points, int64_t n, const float4* rectangles,
                                  unsigned long long* counts) {
  const float4 r = rectangles[blockIdx.x];
  unsigned long long mine = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float2 q = points[i];
    mine += r.x <= q.x && q.x < r.z && r.y <= q.y && q.y < r.w;
  }
  for (int offset = 16; offset > 0; offset /= 2) mine += __shfl_xor_sync(0xffffffffu, mine, offset);
  if (threadIdx.x % 32 == 0 && mine != 0) atomicAdd(counts + blockIdx.x, mine);
}

std::vector<int64_t> brute_force(const float* d_points, int64_t n, const Polygons<float>& set) {
  const size_t n_rectangles = set.polygon_offsets.size() - 1;
  std::vector<float4> host(n_rectangles);
  for (size_t p = 0; p < n_rectangles; ++p) {
    const float* v = &set.xy[8 * p];  // corners (x0,y0) (x1,y0) (x1,y1) (x0,y1)
    host[p] = make_float4(v[0], v[1], v[4], v[5]);
  }
  DeviceBuffer<float4> rectangles(n_rectangles);
  DeviceBuffer<unsigned long long> counts(n_rectangles);
  knn::cuda::check(cudaMemcpy(rectangles.get(), host.data(), n_rectangles * sizeof(float4),
                              cudaMemcpyHostToDevice),
                   "bench: upload");
  knn::cuda::check(cudaMemset(counts.get(), 0, n_rectangles * 8), "bench: memset");
  brute_force_count<<<static_cast<unsigned>(n_rectangles), 256>>>(
      reinterpret_cast<const float2*>(d_points), n, rectangles.get(), counts.get());
  knn::cuda::check(cudaDeviceSynchronize(), "bench: brute force");
  std::vector<int64_t> out(n_rectangles);
  knn::cuda::check(cudaMemcpy(out.data(), counts.get(), n_rectangles * 8, cudaMemcpyDeviceToHost),
                   "bench: download");
  return out;
}

void bench_build(bool quick) {
  std::printf("\n## Quadtree build, uniform points in [0,1)^2 (default leaf capacity %d)\n\n",
              knn::cuda::kDefaultLeafCapacity);
  std::printf("| n | build ms | nodes | Mpoints/s |\n|---|---|---|---|\n");
  for (const int64_t n : {int64_t{1000000}, int64_t{10000000}, int64_t{100000000}}) {
    if (quick && n > 10000000) break;
    const DeviceBuffer<float> points = device_uniform_points(n, 1.0f, 11);
    int64_t nodes = 0;
    const double ms = knn_bench::median_ms([&] {
      const auto tree = knn::cuda::build_quadtree(points.get(), n, QuadtreeParams());
      nodes = static_cast<const knn::cuda::CudaQuadtree<float>&>(*tree).node_count();
    });
    std::printf("| %lld | %.2f | %lld | %.0f |\n", static_cast<long long>(n), ms,
                static_cast<long long>(nodes), n / ms / 1e3);
  }
}

struct QueryTimes {
  double count_ms, fill_ms, host_fill_ms;
  int64_t total;  // points inside, over all polygons
};

// Count, fill to device memory and fill to host memory of n uniform points
// (seed 12) against `polygons`, both held as T.
template <class T>
QueryTimes time_query(int64_t n, const Polygons<float>& polygons) {
  const DeviceBuffer<T> points = device_uniform_points<T>(n, 1.0f, 12);
  const auto tree = knn::cuda::build_quadtree(points.get(), n, QuadtreeParams());
  const Polygons<T> set = polygons.template as<T>();
  const PolygonSet<T> view = set.view();
  std::vector<int64_t> counts(static_cast<size_t>(view.n_polygons));
  QueryTimes t{};
  t.count_ms = knn_bench::median_ms([&] { tree->count(view, counts.data(), {}); });
  std::vector<int64_t> offsets{0};
  for (const int64_t c : counts) offsets.push_back(offsets.back() + c);
  t.total = offsets.back();
  DeviceBuffer<int64_t> d_out(static_cast<size_t>(t.total));
  t.fill_ms = knn_bench::median_ms([&] { tree->fill(view, offsets.data(), d_out.get(), {}); });
  std::vector<int64_t> host_out(static_cast<size_t>(t.total));
  t.host_fill_ms =
      knn_bench::median_ms([&] { tree->fill(view, offsets.data(), host_out.data(), {}); });
  return t;
}

void bench_query(bool quick) {
  const int64_t n = quick ? 10000000 : 100000000;
  const Polygons<float> set = stars(300, 100, 0.04f, 13);
  const QueryTimes f32 = time_query<float>(n, set);
  const QueryTimes f64 = time_query<double>(n, set);
  std::printf(
      "\n## %lld uniform points x 300 concave stars of 100 vertices (%lld points inside), "
      "float32 and float64\n\n",
      static_cast<long long>(n), static_cast<long long>(f32.total));
  std::printf("| phase | float32 ms | float64 ms | float64 / float32 |\n|---|---|---|---|\n");
  const auto row = [](const char* phase, double a, double b) {
    std::printf("| %s | %.2f | %.2f | %.2fx |\n", phase, a, b, b / a);
  };
  row("count", f32.count_ms, f64.count_ms);
  row("fill (device output)", f32.fill_ms, f64.fill_ms);
  row("count + fill", f32.count_ms + f32.fill_ms, f64.count_ms + f64.fill_ms);
  row("fill to pageable host memory", f32.host_fill_ms, f64.host_fill_ms);
  if (f32.total != f64.total)
    std::printf("\nTOTALS DIFFER: float32 %lld, float64 %lld\n", static_cast<long long>(f32.total),
                static_cast<long long>(f64.total));
}

void bench_seed(bool quick) {
  const int n_rectangles = quick ? 110000 : 1100000;
  const Polygons<float> set = seed_rectangles(n_rectangles, 1024.0f, 14);
  const PolygonSet<float> view = set.view();
  std::printf(
      "\n## Seed configuration: points uniform in [0,1024)^2, %d rectangles, count phase\n\n",
      n_rectangles);
  std::printf(
      "| N | quadtree build ms | quadtree count ms | polygons/s | brute force ms | "
      "polygons/s | speed-up |\n|---|---|---|---|---|---|---|\n");
  // Brute force runs while N x polygons stays below this many point tests.
  const double brute_force_limit = quick ? 4e11 : 4e13;
  for (const int64_t n : {int64_t{3000}, int64_t{30000}, int64_t{300000}, int64_t{3000000},
                          int64_t{30000000}, int64_t{100000000}}) {
    if (quick && n > 3000000) break;
    const DeviceBuffer<float> points = device_uniform_points(n, 1024.0f, 15);
    const double build_ms = knn_bench::median_ms(
        [&] { knn::cuda::build_quadtree(points.get(), n, QuadtreeParams()); }, 3);
    const auto tree = knn::cuda::build_quadtree(points.get(), n, QuadtreeParams());
    std::vector<int64_t> counts(static_cast<size_t>(view.n_polygons));
    // One untimed run decides whether the repeats fit in the time we have.
    const double first_ms = knn_bench::time_once_ms([&] { tree->count(view, counts.data(), {}); });
    const double count_ms =
        first_ms > 20000 ? first_ms
                         : knn_bench::median_ms([&] { tree->count(view, counts.data(), {}); });
    std::printf("| %lld | %.2f | %.2f | %.3g |", static_cast<long long>(n), build_ms, count_ms,
                n_rectangles / count_ms * 1e3);
    if (static_cast<double>(n) * n_rectangles <= brute_force_limit) {
      std::vector<int64_t> expected;
      const double bf_ms =
          knn_bench::median_ms([&] { expected = brute_force(points.get(), n, set); }, 3);
      std::printf(" %.2f | %.3g | %.1fx |%s\n", bf_ms, n_rectangles / bf_ms * 1e3, bf_ms / count_ms,
                  expected == counts ? "" : " COUNTS DIFFER");
    } else {
      std::printf(" - | - | - |\n");
    }
    std::fflush(stdout);
    if (first_ms > 20000) break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const bool stars_only = argc > 1 && std::strcmp(argv[1], "--stars") == 0;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "bench_pip: no CUDA device\n");
    return 1;
  }
  try {
    if (stars_only) {
      bench_query(false);
      return 0;
    }
    bench_build(quick);
    bench_query(quick);
    bench_seed(quick);
  } catch (const knn::Error& e) {
    std::fprintf(stderr, "bench_pip: %s\n", e.what());
    return 1;
  }
  return 0;
}
