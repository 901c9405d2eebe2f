// AUTO against every forced structure on adversarial data (issue 53, item 1):
// for each distribution of adversarial_datasets.h and each k, an index of
// every structure (kd-tree, grid, brute force) and an AUTO one is built and
// queried, build and call timed together (AUTO's choice includes a kd-tree
// it adds at query time), the answers of all checked bit-identical. A row
// prints the ms of each, AUTO's ratio to the best forced structure, and the
// last line the worst ratio (target: 1.1).
//
// On a CUDA build with --gpu the rows run on the GPU with host arrays and
// with device arrays, and each row also prints the bytes that must move
// (points, queries, results) over the device's memory bandwidth (the floor),
// the measured/floor ratio, the peak device memory sampled during AUTO's
// run beside knn_estimate_*'s figure for it.
//
// --cold-host-output times an all-kNN (indices only) into a freshly
// allocated host buffer against the same call into that buffer again.
//
//   bench_auto                         the OpenMP rows (n = 2e5)
//   bench_auto --gpu --quick           the GPU rows at n = 1e6 (< 4 minutes)
//   bench_auto --gpu                   n = 1e7
//   bench_auto --cold-host-output --n 1e8 --k 100
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifdef KNN_BENCH_DEVICE_ARRAYS
#include <cuda_runtime.h>
#endif

#include "adversarial_datasets.h"
#include "bench_timer.h"
#include "command_line.h"
#include "knn_gpgpu.h"

namespace {

using knn_bench::Adversarial;

const char* const kUsage =
    "usage: bench_auto [--gpu] [--quick] [--n N] [--only DISTRIBUTION] [--repeats R]\n"
    "                  [--brute-max-pairs P] [--time-bound S]\n"
    "       bench_auto --cold-host-output [--gpu] [--n N] [--k K]\n"
    "  --gpu               the CUDA backend, host and device arrays (CUDA builds)\n"
    "  --quick             smaller sizes (GPU: n = 1e6)\n"
    "  --n N               points of the rows (CPU 2e5, GPU 1e7, --quick 1e6)\n"
    "  --only D            one distribution (names as printed)\n"
    "  --repeats R         rounds per row, the fastest counts (default 2)\n"
    "  --brute-max-pairs P brute force only where n * m <= P (CPU 3e8, GPU 2e12)\n"
    "  --time-bound S      rows stop after S seconds (GPU default 220)\n"
    "  --cpu-time          time the process's CPU time, not the wall clock (a\n"
    "                      shared machine; run with OMP_WAIT_POLICY=passive)\n"
    "  --cold-host-output  all-kNN into a fresh host buffer, then into it again\n";

constexpr int kStructures[] = {KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_GRID, KNN_STRUCTURE_BRUTE_FORCE,
                               KNN_STRUCTURE_AUTO};
constexpr int kContenders = 4;
constexpr int kAutoSlot = 3;

const char* structure_name(int s) {
  switch (s) {
    case KNN_STRUCTURE_KDTREE: return "kd";
    case KNN_STRUCTURE_GRID: return "grid";
    case KNN_STRUCTURE_BRUTE_FORCE: return "bf";
    default: return "auto";
  }
}

void check(int status, const char* what) {
  if (status != KNN_OK)
    throw std::runtime_error(std::string(what) + ": " + knn_status_string(status) + ": " +
                             knn_last_error());
}

// A hash of a byte range, the same whatever the thread count (blocks hashed
// apart, then combined in order): answers compared without keeping copies.
uint64_t hash_bytes(const void* data, size_t bytes) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  constexpr size_t kBlock = size_t{1} << 20;
  const int64_t blocks = static_cast<int64_t>((bytes + kBlock - 1) / kBlock);
  std::vector<uint64_t> h(static_cast<size_t>(blocks));
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    uint64_t x = 1469598103934665603ull;
    const size_t end = std::min(bytes, static_cast<size_t>(b + 1) * kBlock);
    for (size_t i = static_cast<size_t>(b) * kBlock; i < end; ++i)
      x = (x ^ p[i]) * 1099511628211ull;
    h[static_cast<size_t>(b)] = x;
  }
  uint64_t all = 0;
  for (uint64_t x : h) all = knn_bench::mix64(all ^ x);
  return all;
}

struct Config {
  bool gpu = false;
  bool quick = false;
  int64_t n = 0;
  int k = 0;  // --cold-host-output only
  bool only_one = false;
  Adversarial only = Adversarial::Uniform;
  int repeats = 2;
  double brute_max_pairs = 0;
  double time_bound_s = 0;
  bool cold_host_output = false;
  bool cpu_time = false;
};

Config parse(int argc, char** argv) {
  const knn_bench::CommandLine cl{"bench_auto", kUsage};
  Config c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    cl.exit_if_help(a);
    if (a == "--gpu") {
      c.gpu = true;
    } else if (a == "--quick") {
      c.quick = true;
    } else if (a == "--cpu-time") {
      c.cpu_time = true;
    } else if (a == "--cold-host-output") {
      c.cold_host_output = true;
    } else if (a == "--n") {
      c.n = cl.count(cl.value_after(argc, argv, &i), "n", 1, INT32_MAX);
    } else if (a == "--k") {
      c.k = static_cast<int>(cl.count(cl.value_after(argc, argv, &i), "k", 1, 100000));
    } else if (a == "--repeats") {
      c.repeats = static_cast<int>(cl.count(cl.value_after(argc, argv, &i), "repeats", 1, 100));
    } else if (a == "--brute-max-pairs") {
      c.brute_max_pairs =
          static_cast<double>(cl.count(cl.value_after(argc, argv, &i), "pairs", 0, INT64_MAX / 2));
    } else if (a == "--time-bound") {
      c.time_bound_s =
          static_cast<double>(cl.count(cl.value_after(argc, argv, &i), "seconds", 1, 1000000));
    } else if (a == "--only") {
      c.only_one = true;
      if (!knn_bench::parse_adversarial(cl.value_after(argc, argv, &i), &c.only))
        cl.fail("unknown distribution");
    } else {
      cl.fail("unknown option " + a);
    }
  }
#ifndef KNN_BENCH_DEVICE_ARRAYS
  if (c.gpu) cl.fail("--gpu needs a CUDA build");
#endif
  if (c.n == 0) c.n = c.gpu ? (c.quick ? 1000000 : 10000000) : (c.quick ? 50000 : 200000);
  if (c.brute_max_pairs == 0) c.brute_max_pairs = c.gpu ? 2e12 : 3e8;
  if (c.time_bound_s == 0) c.time_bound_s = c.gpu ? 220 : 1e9;
  if (c.k == 0) c.k = 100;
  return c;
}

// ---- Device side: arrays, bandwidth, memory sampling --------------------------

#ifdef KNN_BENCH_DEVICE_ARRAYS
void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

template <class T>
T* device_alloc(size_t count) {
  void* p = nullptr;
  cuda_check(cudaMalloc(&p, std::max<size_t>(count, 1) * sizeof(T)), "cudaMalloc");
  return static_cast<T*>(p);
}

// Bytes per second the device's memory moves: DDR, memory clock x bus width.
double device_bandwidth() {
  int device = 0, clock_khz = 0, bus_bits = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  cuda_check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device),
             "memory clock");
  cuda_check(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device),
             "bus width");
  return 2.0 * clock_khz * 1e3 * bus_bits / 8.0;
}

size_t device_used() {
  size_t free_bytes = 0, total = 0;
  cuda_check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
  return total - free_bytes;
}

// The largest device use above the baseline while `run` runs, sampled every
// half millisecond from a second thread.
template <class Run>
size_t peak_device_bytes(Run&& run) {
  const size_t base = device_used();
  std::atomic<bool> done{false};
  std::atomic<size_t> peak{0};
  std::thread sampler([&] {
    while (!done.load()) {
      const size_t used = device_used();
      if (used > base && used - base > peak.load()) peak.store(used - base);
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });
  try {
    run();
  } catch (...) {
    done = true;
    sampler.join();
    throw;
  }
  done = true;
  sampler.join();
  return peak.load();
}
#endif

// Milliseconds of f: wall clock, or with cpu_time the CPU time of every
// thread of the process (what a machine shared with other work still
// measures fairly).
template <class F>
double time_ms(bool cpu_time, F&& f) {
  if (!cpu_time) return knn_bench::time_once_ms(f);
  const std::clock_t start = std::clock();
  f();
  return 1e3 * static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
}

// ---- One row --------------------------------------------------------------------

struct Row {
  Adversarial d;
  int64_t n, m;
  int k;
  bool self;  // all-kNN of the points (m = n)
};

struct Place {
  int backend;
  bool device_arrays;
  const char* name;
};

// The arrays of a row, host or device.
struct RowArrays {
  const float* points = nullptr;
  const float* queries = nullptr;
  int32_t* indices = nullptr;
  float* sq = nullptr;
  std::vector<Point> host_points, host_queries;
  std::vector<int32_t> host_indices;
  std::vector<float> host_sq;
  bool device = false;

  RowArrays(const Row& r, bool on_device) : device(on_device) {
    host_points = knn_bench::adversarial_cloud(r.d, r.n, false);
    if (!r.self) host_queries = knn_bench::adversarial_cloud(r.d, r.m, true);
    const size_t out = static_cast<size_t>(r.m) * static_cast<size_t>(r.k);
    host_indices.assign(out, 0);  // touched now, not in the first contender's time
    host_sq.assign(out, 0);
    points = &host_points[0].p[0];
    queries = r.self ? nullptr : &host_queries[0].p[0];
    indices = host_indices.data();
    sq = host_sq.data();
#ifdef KNN_BENCH_DEVICE_ARRAYS
    if (on_device) {
      float* p = device_alloc<float>(host_points.size() * 3);
      cuda_check(cudaMemcpy(p, points, host_points.size() * sizeof(Point), cudaMemcpyHostToDevice),
                 "points to device");
      points = p;
      if (!r.self) {
        float* q = device_alloc<float>(host_queries.size() * 3);
        cuda_check(
            cudaMemcpy(q, queries, host_queries.size() * sizeof(Point), cudaMemcpyHostToDevice),
            "queries to device");
        queries = q;
      }
      indices = device_alloc<int32_t>(out);
      sq = device_alloc<float>(out);
    }
#endif
  }
  ~RowArrays() {
#ifdef KNN_BENCH_DEVICE_ARRAYS
    if (device) {
      cudaFree(const_cast<float*>(points));
      cudaFree(const_cast<float*>(queries));
      cudaFree(indices);
      cudaFree(sq);
    }
#endif
  }
  RowArrays(const RowArrays&) = delete;
  RowArrays& operator=(const RowArrays&) = delete;

  // The hash of this call's answers (indices and distances).
  uint64_t answer_hash(size_t values) {
#ifdef KNN_BENCH_DEVICE_ARRAYS
    if (device) {
      cuda_check(cudaMemcpy(host_indices.data(), indices, values * sizeof(int32_t),
                            cudaMemcpyDeviceToHost),
                 "indices to host");
      cuda_check(cudaMemcpy(host_sq.data(), sq, values * sizeof(float), cudaMemcpyDeviceToHost),
                 "distances to host");
    }
#endif
    return hash_bytes(host_indices.data(), values * sizeof(int32_t)) ^
           knn_bench::mix64(hash_bytes(host_sq.data(), values * sizeof(float)));
  }
};

// Build + call on one structure; the primary structure AUTO (or a grid that
// declined the data) ended with.
int build_and_query(const Row& r, const Place& place, int structure, RowArrays& a) {
  knn_options opt;
  knn_options_init_v2(&opt);
  opt.backend = place.backend;
  opt.structure = structure;
  knn_index* index = nullptr;
  check(knn_index_build(a.points, r.n, 3, &opt, &index), "knn_index_build");
  int served = 0;
  int status = knn_index_info(index, nullptr, nullptr, nullptr, &served);
  if (status == KNN_OK)
    status = r.self ? knn_index_query_self(index, r.k, 0, a.indices, a.sq)
                    : knn_index_query(index, a.queries, r.m, r.k, a.indices, a.sq, nullptr);
  knn_index_free(index);
  check(status, "query");
  return served;
}

struct Worst {
  double ratio = 0;
  std::string row;
  bool mismatch = false;
  int rows = 0;
};

// Bytes every call must move at least: points and queries read, results written.
double floor_bytes(const Row& r) {
  return 12.0 * static_cast<double>(r.n) + (r.self ? 0.0 : 12.0 * static_cast<double>(r.m)) +
         8.0 * static_cast<double>(r.m) * r.k;
}

void run_row(const Row& r, const Place& place, const Config& c, double bandwidth, Worst* worst) {
  RowArrays a(r, place.device_arrays);
  const size_t values = static_cast<size_t>(r.m) * static_cast<size_t>(r.k);
  double best_ms[kContenders];
  std::string note[kContenders];
  bool ran[kContenders];
  uint64_t hashes[kContenders];
  int served[kContenders];
  for (int s = 0; s < kContenders; ++s) {
    best_ms[s] = 1e300;
    ran[s] = kStructures[s] != KNN_STRUCTURE_BRUTE_FORCE ||
             static_cast<double>(r.n) * static_cast<double>(r.m) <= c.brute_max_pairs;
    if (!ran[s]) note[s] = "-";
    hashes[s] = 0;
    served[s] = 0;
  }
  size_t auto_peak = 0;
  for (int round = 0; round < c.repeats; ++round)
    for (int s = 0; s < kContenders; ++s) {
      if (!ran[s]) continue;
      try {
        double ms = 0;
        auto once = [&] {
          ms = time_ms(c.cpu_time,
                       [&] { served[s] = build_and_query(r, place, kStructures[s], a); });
        };
#ifdef KNN_BENCH_DEVICE_ARRAYS
        if (c.gpu && s == kAutoSlot && round == c.repeats - 1)
          auto_peak = peak_device_bytes(once);
        else
          once();
#else
        once();
#endif
        best_ms[s] = std::min(best_ms[s], ms);
        if (round == 0) hashes[s] = a.answer_hash(values);
      } catch (const std::exception& e) {
        // A structure that refuses the row (a grid's list limit) sits it out.
        ran[s] = false;
        note[s] = "refused";
        if (std::strstr(e.what(), "UNSUPPORTED") == nullptr &&
            std::strstr(e.what(), "unsupported") == nullptr)
          std::fprintf(stderr, "%s: %s\n", structure_name(kStructures[s]), e.what());
      }
    }
  double best_forced = 1e300;
  for (int s = 0; s < kAutoSlot; ++s)
    if (ran[s]) best_forced = std::min(best_forced, best_ms[s]);
  bool same = true;
  uint64_t reference = 0;
  bool have_reference = false;
  for (int s = 0; s < kContenders; ++s) {
    if (!ran[s]) continue;
    if (!have_reference) reference = hashes[s], have_reference = true;
    same = same && hashes[s] == reference;
  }
  char line[512];
  int at = std::snprintf(line, sizeof line, "%-16s %-5s %9lld %9lld %5d%s", adversarial_name(r.d),
                         place.name, static_cast<long long>(r.n), static_cast<long long>(r.m), r.k,
                         r.self ? "s" : " ");
  for (int s = 0; s < kContenders; ++s) {
    if (ran[s]) {
      // A forced grid the data made a kd-tree is marked '*'.
      const bool fell_back =
          kStructures[s] == KNN_STRUCTURE_GRID && served[s] != KNN_STRUCTURE_GRID;
      at += std::snprintf(line + at, sizeof line - static_cast<size_t>(at), " %9.1f%s", best_ms[s],
                          fell_back ? "*" : " ");
    } else {
      at +=
          std::snprintf(line + at, sizeof line - static_cast<size_t>(at), " %10s", note[s].c_str());
    }
  }
  const double ratio = ran[kAutoSlot] ? best_ms[kAutoSlot] / best_forced : 0;
  at += std::snprintf(line + at, sizeof line - static_cast<size_t>(at), " %5.2f %-4s %s", ratio,
                      structure_name(served[kAutoSlot]), same ? "same" : "MISMATCH");
  if (bandwidth > 0) {
    const double floor_ms = floor_bytes(r) / bandwidth * 1e3;
    const knn_options* none = nullptr;
    const size_t estimate = std::max(knn_estimate_build_bytes(r.n, 3, none),
                                     knn_estimate_query_bytes(r.m, r.k, r.n, 3, none));
    at += std::snprintf(line + at, sizeof line - static_cast<size_t>(at),
                        " %8.3f %7.0f %8.1f %8.1f", floor_ms, best_ms[kAutoSlot] / floor_ms,
                        static_cast<double>(auto_peak) / (1 << 20),
                        static_cast<double>(estimate) / (1 << 20));
  }
  std::printf("%s\n", line);
  std::fflush(stdout);
  worst->rows++;
  worst->mismatch = worst->mismatch || !same;
  if (ratio > worst->ratio) {
    worst->ratio = ratio;
    worst->row = line;
  }
}

std::vector<Row> rows_for(const Config& c) {
  std::vector<Row> rows;
  for (int d = 0; d < static_cast<int>(Adversarial::Count); ++d) {
    const Adversarial dist = static_cast<Adversarial>(d);
    if (c.only_one && dist != c.only) continue;
    const int64_t n = c.n;
    rows.push_back({dist, n, n, 1, false});
    rows.push_back({dist, n, n, 8, false});
    rows.push_back({dist, n, std::max<int64_t>(1, n / 4), 100, false});
    const int64_t small = std::max<int64_t>(2000, n / 10);
    rows.push_back({dist, small, small, 1000, true});
  }
  return rows;
}

void print_header(bool gpu) {
  std::printf("%-16s %-5s %9s %9s %6s %10s %10s %10s %10s %5s %-4s %s%s\n", "distribution", "place",
              "n", "m", "k", "kd ms", "grid ms", "bf ms", "auto ms", "ratio", "uses", "answers",
              gpu ? "  floor ms  x floor  peak MiB  est MiB" : "");
}

int run_table(const Config& c) {
  std::vector<Place> places;
  double bandwidth = 0;
  if (c.gpu) {
    places.push_back({KNN_BACKEND_CUDA, false, "host"});
    places.push_back({KNN_BACKEND_CUDA, true, "dev"});
#ifdef KNN_BENCH_DEVICE_ARRAYS
    bandwidth = device_bandwidth();
    std::printf("device memory bandwidth %.0f GB/s (memory clock x bus width)\n", bandwidth / 1e9);
#endif
  } else {
    places.push_back({KNN_BACKEND_OPENMP, false, "host"});
  }
  std::printf(
      "build + call %s ms, fastest of %d; s = all-kNN; * = the grid declined the data "
      "(a kd-tree served); ratio = auto / best forced; uses = AUTO's primary\n",
      c.cpu_time ? "CPU" : "wall", c.repeats);
  print_header(c.gpu);
  // The first call of a process starts the device context and the thread
  // pools: a small row of every structure, untimed, before the table.
  for (const Place& place : places) {
    const Row warm_up{Adversarial::Uniform, 20000, 20000, 8, false};
    RowArrays a(warm_up, place.device_arrays);
    for (int s : kStructures) build_and_query(warm_up, place, s, a);
  }
  Worst worst;
  const auto start = knn_bench::Clock::now();
  int skipped = 0;
  for (const Row& r : rows_for(c))
    for (const Place& place : places) {
      if (knn_bench::ms_since(start) > c.time_bound_s * 1e3) {
        ++skipped;
        continue;
      }
      run_row(r, place, c, bandwidth, &worst);
    }
  if (skipped > 0)
    std::printf("time bound (%.0f s) reached: %d rows skipped\n", c.time_bound_s, skipped);
  std::printf("worst auto/best ratio %.2f over %d rows (target 1.10)%s\n  %s\n", worst.ratio,
              worst.rows, worst.mismatch ? "; ANSWERS DIFFER" : "; answers identical",
              worst.row.c_str());
  return worst.mismatch ? 1 : 0;
}

// ---- Cold output --------------------------------------------------------------

int run_cold_host_output(const Config& c) {
  const int64_t n = c.n == 0 ? 1000000 : c.n;
  const std::vector<Point> points = knn_bench::adversarial_cloud(Adversarial::Uniform, n, false);
  knn_options opt;
  knn_options_init_v2(&opt);
  opt.backend = c.gpu ? KNN_BACKEND_CUDA : KNN_BACKEND_OPENMP;
  knn_index* index = nullptr;
  const double build_ms = knn_bench::time_once_ms(
      [&] { check(knn_index_build(&points[0].p[0], n, 3, &opt, &index), "knn_index_build"); });
  const size_t bytes = static_cast<size_t>(n) * static_cast<size_t>(c.k) * sizeof(int32_t);
  // malloc, not a vector: the pages stay untouched until the call writes them.
  int32_t* out = static_cast<int32_t*>(std::malloc(bytes));
  if (out == nullptr) {
    knn_index_free(index);
    throw std::runtime_error("cannot allocate the output");
  }
  double cold_ms = 0, warm_ms = 0;
  uint64_t cold_hash = 0, warm_hash = 0;
  try {
    cold_ms = knn_bench::time_once_ms(
        [&] { check(knn_index_query_self(index, c.k, 0, out, nullptr), "cold all-kNN"); });
    cold_hash = hash_bytes(out, bytes);
    warm_ms = knn_bench::time_once_ms(
        [&] { check(knn_index_query_self(index, c.k, 0, out, nullptr), "warm all-kNN"); });
    warm_hash = hash_bytes(out, bytes);
  } catch (...) {
    std::free(out);
    knn_index_free(index);
    throw;
  }
  std::free(out);
  knn_index_free(index);
  std::printf("cold host output, %s, uniform n = %lld, k = %d, indices only (%.3f GB)\n",
              c.gpu ? "CUDA" : "OpenMP", static_cast<long long>(n), c.k, bytes / 1e9);
  std::printf("build %.1f ms, all-kNN cold %.1f ms, warm %.1f ms, answers %s\n", build_ms, cold_ms,
              warm_ms, cold_hash == warm_hash ? "same" : "DIFFER");
  return cold_hash == warm_hash ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Config c = parse(argc, argv);
  try {
    return c.cold_host_output ? run_cold_host_output(c) : run_table(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_auto: %s\n", e.what());
    return 1;
  }
}
