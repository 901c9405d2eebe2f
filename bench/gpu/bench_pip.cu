// GPU benchmark of point in polygon over the quadtree. Times the CUDA engine
// directly (knn::cuda::build_quadtree and the engine's count/fill), with the
// points already on the device and the fill's output on the device unless a
// row says "to host"; the engine synchronises before it returns, so each
// figure is host wall-clock time of whole engine calls (median of 5 after a
// warm-up; allocations and the few per-level read-backs included).
//
//   1. build over 10^6 .. 10^8 uniform points;
//   2. 10^8 uniform points x 300 star polygons of ~100 vertices: count, fill;
//   3. the seed configuration: points uniform in [0, 1024)^2, N = 3e3 .. 1e8,
//      ~1.1e6 axis-aligned rectangles in three size classes (10-20 %, 30-60 %,
//      70-90 % of the area), count phase only, quadtree against a simple GPU
//      brute force (every rectangle against every point, by coordinate
//      comparisons); the two must give the same counts.
// Usage: bench_pip [--quick | --stars]   (--quick: smaller sizes, fewer
// rectangles; --stars: only the 10^8 x 300 stars case, for a profiler)
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

struct Polygons {
  std::vector<float> xy;
  std::vector<int64_t> ring_offsets{0};
  std::vector<int64_t> polygon_offsets{0};

  void add(const std::vector<float>& ring) {
    xy.insert(xy.end(), ring.begin(), ring.end());
    ring_offsets.push_back(static_cast<int64_t>(xy.size() / 2));
    polygon_offsets.push_back(static_cast<int64_t>(ring_offsets.size()) - 1);
  }
  PolygonSet view() const {
    PolygonSet s;
    s.xy = xy.data();
    s.n_vertices = static_cast<int64_t>(xy.size() / 2);
    s.ring_offsets = ring_offsets.data();
    s.n_rings = static_cast<int64_t>(ring_offsets.size()) - 1;
    s.polygon_offsets = polygon_offsets.data();
    s.n_polygons = static_cast<int64_t>(polygon_offsets.size()) - 1;
    return s;
  }
};

// `count` concave stars of ~`vertices` vertices, radius up to `radius`, in [0, 1)^2.
Polygons stars(int count, int vertices, float radius, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(radius, 1 - radius), r(0.5f * radius, radius);
  Polygons set;
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
Polygons seed_rectangles(int count, float side, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const float classes[3][2] = {{0.10f, 0.20f}, {0.30f, 0.60f}, {0.70f, 0.90f}};
  std::uniform_real_distribution<float> unit(0, 1);
  Polygons set;
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

DeviceBuffer<float> device_uniform_points(int64_t n, float scale, uint64_t seed) {
  std::vector<float> host(static_cast<size_t>(2 * n));
  knn_bench::fill_uniform_rows(host.data(), n, 2, seed);
  if (scale != 1.0f)
    for (float& v : host) v *= scale;
  DeviceBuffer<float> d(host.size());
  knn::cuda::check(
      cudaMemcpy(d.get(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice),
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

std::vector<int64_t> brute_force(const float* d_points, int64_t n, const Polygons& set) {
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
      nodes = static_cast<const knn::cuda::CudaQuadtree&>(*tree).node_count();
    });
    std::printf("| %lld | %.2f | %lld | %.0f |\n", static_cast<long long>(n), ms,
                static_cast<long long>(nodes), n / ms / 1e3);
  }
}

void bench_query(bool quick) {
  const int64_t n = quick ? 10000000 : 100000000;
  const DeviceBuffer<float> points = device_uniform_points(n, 1.0f, 12);
  const auto tree = knn::cuda::build_quadtree(points.get(), n, QuadtreeParams());
  const Polygons set = stars(300, 100, 0.04f, 13);
  const PolygonSet view = set.view();
  std::vector<int64_t> counts(300);
  const double count_ms = knn_bench::median_ms([&] { tree->count(view, counts.data(), {}); });
  std::vector<int64_t> offsets{0};
  for (const int64_t c : counts) offsets.push_back(offsets.back() + c);
  const int64_t total = offsets.back();
  DeviceBuffer<int64_t> d_out(static_cast<size_t>(total));
  const double fill_ms =
      knn_bench::median_ms([&] { tree->fill(view, offsets.data(), d_out.get(), {}); });
  std::vector<int64_t> host_out(static_cast<size_t>(total));
  const double host_fill_ms =
      knn_bench::median_ms([&] { tree->fill(view, offsets.data(), host_out.data(), {}); });
  std::printf(
      "\n## %lld uniform points x 300 concave stars of 100 vertices (%lld points inside)\n\n",
      static_cast<long long>(n), static_cast<long long>(total));
  std::printf(
      "| phase | ms |\n|---|---|\n| count | %.2f |\n| fill (device output) | %.2f |\n"
      "| count + fill | %.2f |\n| fill to pageable host memory | %.2f |\n",
      count_ms, fill_ms, count_ms + fill_ms, host_fill_ms);
}

void bench_seed(bool quick) {
  const int n_rectangles = quick ? 110000 : 1100000;
  const Polygons set = seed_rectangles(n_rectangles, 1024.0f, 14);
  const PolygonSet view = set.view();
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
