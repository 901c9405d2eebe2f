// bench_pip_cpu: point-in-polygon on the OpenMP backend, through the public
// C API (validation included), on 1 thread and on all threads.
//
//   rectangles  points uniform in [0, 1024)^2, N = 3e3, 3e4, 3e5, 5e5, 1e6
//               (--large adds 3e6, 1e7); 1.1e6 axis-aligned rectangles in
//               three size classes (10-20 %, 30-60 %, 70-90 % of the square's
//               area, a third each); knn_points_in_polygons_count, reported
//               as polygons per second. --quick: N up to 3e5, 1.1e4
//               rectangles.
//   polygons    10^6 points x 300 star-shaped polygons of 100 vertices
//               (concave), count + fill (the indices), polygons per second.
//
// Times: the median of --repeats runs after a warm-up (build excluded; the
// build is timed apart). --leaf 16,64,256 times every leaf capacity given
// (0 = the library's default); --n replaces the rectangles' point counts,
// --points the polygons' (10^6). --precision float64 runs the same values
// held as doubles through the _f64 calls; "both" runs each row in float32
// then float64 (the "prec" column), for the float64 / float32 ratio.
//
// Usage: bench_pip_cpu [--quick] [--large] [--repeats 3] [--leaf 0]
//                      [--n 3000,30000] [--points 1000000]
//                      [--only rectangles|polygons] [--precision float32|float64|both]
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/math_constants.h"
#include "bench_timer.h"
#include "knn_gpgpu.h"

namespace {

struct Args {
  bool quick = false;
  bool large = false;
  int repeats = 3;
  std::vector<int> leaves{0};
  std::vector<int> sizes;  // overrides the rectangles' point counts
  int64_t polygon_points = 1000000;
  std::string only;
  std::vector<int> precisions{32};  // 32 and/or 64
};

std::vector<int> parse_list(const char* text) {
  std::vector<int> values;
  for (const char* p = text; *p != '\0';) {
    char* end = nullptr;
    values.push_back(static_cast<int>(std::strtol(p, &end, 10)));
    if (end == p) throw std::invalid_argument(std::string("bad list: ") + text);
    p = *end == ',' ? end + 1 : end;
  }
  return values;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--quick") {
      a.quick = true;
    } else if (arg == "--large") {
      a.large = true;
    } else if (arg == "--repeats" && has_value) {
      a.repeats = std::atoi(argv[++i]);
    } else if (arg == "--leaf" && has_value) {
      a.leaves = parse_list(argv[++i]);
    } else if (arg == "--n" && has_value) {
      a.sizes = parse_list(argv[++i]);
    } else if (arg == "--only" && has_value) {
      a.only = argv[++i];
    } else if (arg == "--points" && has_value) {
      a.polygon_points = std::atoll(argv[++i]);
    } else if (arg == "--precision" && has_value && std::strcmp(argv[i + 1], "float32") == 0) {
      a.precisions = {32};
      ++i;
    } else if (arg == "--precision" && has_value && std::strcmp(argv[i + 1], "float64") == 0) {
      a.precisions = {64};
      ++i;
    } else if (arg == "--precision" && has_value && std::strcmp(argv[i + 1], "both") == 0) {
      a.precisions = {32, 64};
      ++i;
    } else {
      throw std::invalid_argument(
          "unknown argument " + arg +
          "; usage: bench_pip_cpu [--quick] [--large] [--repeats R] [--leaf L,...] [--n N,...] "
          "[--points N] [--only rectangles|polygons] [--precision float32|float64|both]");
    }
  }
  return a;
}

void check(int status, const char* what) {
  if (status != KNN_OK) throw std::runtime_error(std::string(what) + ": " + knn_last_error());
}

template <class T>
struct Polygons {
  std::vector<T> xy;
  std::vector<int64_t> ring_offsets{0};
  std::vector<int64_t> polygon_offsets{0};
  int64_t count() const { return static_cast<int64_t>(polygon_offsets.size()) - 1; }
  void add(const std::vector<T>& ring) {
    xy.insert(xy.end(), ring.begin(), ring.end());
    ring_offsets.push_back(static_cast<int64_t>(xy.size() / 2));
    polygon_offsets.push_back(static_cast<int64_t>(ring_offsets.size()) - 1);
  }
  // The same polygons held as U (exact from float to double).
  template <class U>
  Polygons<U> as() const {
    Polygons<U> out;
    out.xy.assign(xy.begin(), xy.end());
    out.ring_offsets = ring_offsets;
    out.polygon_offsets = polygon_offsets;
    return out;
  }
};

// The entry points of each precision, so that one template times both.
int quadtree_build(const float* xy, int64_t n, const knn_options* opt, knn_quadtree** out) {
  return knn_quadtree_build(xy, n, opt, out);
}
int quadtree_build(const double* xy, int64_t n, const knn_options* opt, knn_quadtree** out) {
  return knn_quadtree_build_f64(xy, n, opt, out);
}
int count_call(const knn_quadtree* tree, const float* xy, const int64_t* rings, int64_t n_rings,
               const int64_t* polygons, int64_t n_polygons, int64_t* counts,
               const knn_options* opt) {
  return knn_points_in_polygons_count(tree, xy, rings, n_rings, polygons, n_polygons, counts, opt);
}
int count_call(const knn_quadtree* tree, const double* xy, const int64_t* rings, int64_t n_rings,
               const int64_t* polygons, int64_t n_polygons, int64_t* counts,
               const knn_options* opt) {
  return knn_points_in_polygons_count_f64(tree, xy, rings, n_rings, polygons, n_polygons, counts,
                                          opt);
}
int fill_call(const knn_quadtree* tree, const float* xy, const int64_t* rings, int64_t n_rings,
              const int64_t* polygons, int64_t n_polygons, const int64_t* offsets,
              int64_t* indices, const knn_options* opt) {
  return knn_points_in_polygons(tree, xy, rings, n_rings, polygons, n_polygons, offsets, indices,
                                opt);
}
int fill_call(const knn_quadtree* tree, const double* xy, const int64_t* rings, int64_t n_rings,
              const int64_t* polygons, int64_t n_polygons, const int64_t* offsets,
              int64_t* indices, const knn_options* opt) {
  return knn_points_in_polygons_f64(tree, xy, rings, n_rings, polygons, n_polygons, offsets,
                                    indices, opt);
}

std::vector<float> uniform_points(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1024.0f);
  std::vector<float> xy(static_cast<size_t>(2 * n));
  for (float& v : xy) v = u(rng);
  return xy;
}

// Rectangles covering 10-20 %, 30-60 % or 70-90 % of [0, 1024)^2 (in turn),
// aspect ratio within [1/2, 2] as far as the square allows, placed at random
// inside it.
Polygons<float> rectangles(int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double side = 1024.0, lo[] = {0.1, 0.3, 0.7}, hi[] = {0.2, 0.6, 0.9};
  Polygons<float> set;
  for (int64_t i = 0; i < count; ++i) {
    const int size_class = static_cast<int>(i % 3);
    const double area =
        side * side * (lo[size_class] + unit(rng) * (hi[size_class] - lo[size_class]));
    double w = std::sqrt(area * std::pow(2.0, 2 * unit(rng) - 1));
    w = std::min(side, std::max(area / side, w));
    const double h = area / w;
    const float x0 = static_cast<float>(unit(rng) * (side - w));
    const float y0 = static_cast<float>(unit(rng) * (side - h));
    const float x1 = static_cast<float>(x0 + w), y1 = static_cast<float>(y0 + h);
    set.add({x0, y0, x1, y0, x1, y1, x0, y1});
  }
  return set;
}

// Concave stars of `vertices` vertices, radius 20..150, centres in the square.
Polygons<float> stars(int64_t count, int vertices, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  Polygons<float> set;
  for (int64_t i = 0; i < count; ++i) {
    const double cx = 150 + unit(rng) * 724, cy = 150 + unit(rng) * 724;
    const double r_max = 20 + unit(rng) * 130;
    std::vector<float> ring;
    for (int v = 0; v < vertices; ++v) {
      const double angle = 2 * knn::kPi * v / vertices;
      const double r = r_max * (0.4 + 0.6 * unit(rng));
      ring.push_back(static_cast<float>(cx + r * std::cos(angle)));
      ring.push_back(static_cast<float>(cy + r * std::sin(angle)));
    }
    set.add(ring);
  }
  return set;
}

knn_options options(int leaf, int threads) {
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  opt.leaf_size = leaf;
  opt.threads = threads;
  return opt;
}

struct Tree {
  knn_quadtree* handle = nullptr;
  double build_ms = 0;
  template <class T>
  Tree(const std::vector<T>& xy, const knn_options& opt) {
    build_ms = knn_bench::time_once_ms([&] {
      check(quadtree_build(xy.data(), static_cast<int64_t>(xy.size() / 2), &opt, &handle),
            "knn_quadtree_build");
    });
  }
  ~Tree() { knn_quadtree_free(handle); }
  Tree(const Tree&) = delete;
  Tree& operator=(const Tree&) = delete;
};

template <class T>
int64_t count_all(const Tree& tree, const Polygons<T>& set, const knn_options& opt,
                  std::vector<int64_t>& counts) {
  counts.assign(static_cast<size_t>(set.count()), 0);
  check(count_call(tree.handle, set.xy.data(), set.ring_offsets.data(),
                   static_cast<int64_t>(set.ring_offsets.size()) - 1, set.polygon_offsets.data(),
                   set.count(), counts.data(), &opt),
        "knn_points_in_polygons_count");
  int64_t total = 0;
  for (const int64_t c : counts) total += c;
  return total;
}

template <class T>
void rectangles_rows(const Args& args, const Polygons<float>& rects, const std::vector<float>& xy32,
                     int64_t n, int all_threads) {
  const Polygons<T> set = rects.as<T>();
  const std::vector<T> xy(xy32.begin(), xy32.end());
  for (const int leaf : args.leaves)
    for (const int threads : {1, all_threads}) {
      const knn_options opt = options(leaf, threads);
      const Tree tree(xy, opt);
      std::vector<int64_t> counts;
      int64_t found = 0;
      const double ms =
          knn_bench::median_ms([&] { found = count_all(tree, set, opt, counts); }, args.repeats);
      std::printf("%10lld %4d %6d %8d %10.2f %12.2f %14.4g %14lld\n", static_cast<long long>(n),
                  static_cast<int>(8 * sizeof(T)), leaf, threads, tree.build_ms, ms,
                  set.count() / (ms / 1e3), static_cast<long long>(found));
      std::fflush(stdout);
    }
}

void bench_rectangles(const Args& args, int all_threads) {
  std::vector<int64_t> sizes = {3000, 30000, 300000};
  if (!args.quick) sizes.insert(sizes.end(), {500000, 1000000});
  if (args.large) sizes.insert(sizes.end(), {3000000, 10000000});
  if (!args.sizes.empty()) sizes.assign(args.sizes.begin(), args.sizes.end());
  const int64_t n_rectangles = args.quick ? 11000 : 1100000;
  const Polygons<float> set = rectangles(n_rectangles, 7);
  std::printf(
      "\nrectangles: %lld axis-aligned rectangles (10-20/30-60/70-90 %% of the area), "
      "points uniform in [0,1024)^2, count only\n",
      static_cast<long long>(n_rectangles));
  std::printf("%10s %4s %6s %8s %10s %12s %14s %14s\n", "N", "prec", "leaf", "threads",
              "build_ms", "count_ms", "polygons/s", "points found");
  for (const int64_t n : sizes) {
    const std::vector<float> xy = uniform_points(n, 100 + static_cast<uint64_t>(n));
    for (const int precision : args.precisions) {
      if (precision == 32) rectangles_rows<float>(args, set, xy, n, all_threads);
      if (precision == 64) rectangles_rows<double>(args, set, xy, n, all_threads);
    }
  }
}

template <class T>
void polygons_rows(const Args& args, const Polygons<float>& stars32, const std::vector<float>& xy32,
                   int all_threads) {
  const Polygons<T> set = stars32.as<T>();
  const std::vector<T> xy(xy32.begin(), xy32.end());
  for (const int leaf : args.leaves)
    for (const int threads : {1, all_threads}) {
      const knn_options opt = options(leaf, threads);
      const Tree tree(xy, opt);
      std::vector<int64_t> counts;
      int64_t found = 0;
      const double count_ms =
          knn_bench::median_ms([&] { found = count_all(tree, set, opt, counts); }, args.repeats);
      std::vector<int64_t> offsets{0};
      for (const int64_t c : counts) offsets.push_back(offsets.back() + c);
      std::vector<int64_t> indices(static_cast<size_t>(found));
      const double fill_ms = knn_bench::median_ms(
          [&] {
            check(fill_call(tree.handle, set.xy.data(), set.ring_offsets.data(),
                            static_cast<int64_t>(set.ring_offsets.size()) - 1,
                            set.polygon_offsets.data(), set.count(), offsets.data(),
                            indices.data(), &opt),
                  "knn_points_in_polygons");
          },
          args.repeats);
      std::printf("%4d %6d %8d %10.2f %12.2f %12.2f %14.4g %14lld\n",
                  static_cast<int>(8 * sizeof(T)), leaf, threads, tree.build_ms, count_ms, fill_ms,
                  set.count() / ((count_ms + fill_ms) / 1e3), static_cast<long long>(found));
      std::fflush(stdout);
    }
}

void bench_polygons(const Args& args, int all_threads) {
  const int64_t n = args.polygon_points;
  const Polygons<float> set = stars(300, 100, 8);
  const std::vector<float> xy = uniform_points(n, 9);
  std::printf("\npolygons: %lld points x 300 concave stars of 100 vertices, count + fill\n",
              static_cast<long long>(n));
  std::printf("%4s %6s %8s %10s %12s %12s %14s %14s\n", "prec", "leaf", "threads", "build_ms",
              "count_ms", "fill_ms", "polygons/s", "points found");
  for (const int precision : args.precisions) {
    if (precision == 32) polygons_rows<float>(args, set, xy, all_threads);
    if (precision == 64) polygons_rows<double>(args, set, xy, all_threads);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    const int all_threads = omp_get_max_threads();
    std::printf("bench_pip_cpu: OpenMP backend, %d threads available, median of %d runs\n",
                all_threads, args.repeats);
    if (args.only.empty() || args.only == "rectangles") bench_rectangles(args, all_threads);
    if (args.only.empty() || args.only == "polygons") bench_polygons(args, all_threads);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_pip_cpu: %s\n", e.what());
    return 1;
  }
}
