// One device against every device of the host (issue #24), through the C ABI
// as a caller uses it:
//   self     all-kNN of n points at k into host memory: knn_index_query_self
//            (kd-tree, indices only: n * k * 4 bytes of host rows; each point
//            is its own first neighbour unless --exclude-self)
//   classic  the same all-kNN through the classic API: queryAll of the points
//            against their own tree (KNN_DEVICES chooses the devices)
//   device   kNN of m queries against n points at k, queries and outputs on
//            device 0: knn_index_query with device arrays
// Each row runs with the device list {0} and with the list of every device
// (or --devices), interleaved after a warm-up (the first multi-device call
// builds the copies), median of --repeats wall-clock runs (steady clock: the
// calls return when every row is delivered). The multi-device answers are
// checked against the one-device answers (a sample of rows, bit for bit, for
// the host rows; every row for the device row), and the copies are checked
// to exist on the other devices, so the table cannot show a run that did
// something else. The speedup (one device / all devices) is printed last.
//
//   bench_multi_gpu [--quick] [--n-self N] [--k-self K] [--n-dev N] [--m-dev M]
//                   [--k-dev K] [--repeats R] [--devices 0,1] [--rows self,classic,device]
//                   [--exclude-self] [--shares]
// --shares adds, after the device row, the time of each share of a two-way
// split run alone: the first half on device 0, the second half on the second
// listed device from device 0's arrays (staged), and the same half on that
// device from arrays of its own, so that the cost of the staging and of any
// serialization between the shares can be read off; then both halves at
// once on two host threads, from each device's own arrays and from device
// 0's, which separates what running at once costs from what crossing costs.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../bench_timer.h"
#include "../check_status.h"
#include "../command_line.h"
#include "../datasets.h"
#include "knn_gpgpu.h"

namespace {

using knn_bench::check_status;

const char* kUsage =
    "usage: bench_multi_gpu [--quick] [--n-self N] [--k-self K] [--n-dev N] [--m-dev M]\n"
    "                       [--k-dev K] [--repeats R] [--devices LIST] [--rows LIST]\n"
    "  --n-self N     points of the all-kNN rows (default 1e8; --quick 1e6)\n"
    "  --k-self K     their k (default 100)\n"
    "  --n-dev N      points of the device-array row (default 1e7; --quick 1e6)\n"
    "  --m-dev M      its queries (default: n-dev)\n"
    "  --k-dev K      its k (default 8)\n"
    "  --repeats R    timed runs per configuration after a warm-up (default 3)\n"
    "  --devices LIST the multi-device list, e.g. 0,1 (default: every device)\n"
    "  --rows LIST    any of self,classic,device (default: all three)\n"
    "  --exclude-self the self row drops each point itself (on several devices\n"
    "                 its k + 1 rows then pass through host memory once more)\n"
    "  --shares       also time each half of a two-way device-row split alone\n";

struct Settings {
  int64_t n_self = 100000000;
  int k_self = 100;
  int64_t n_dev = 10000000;
  int64_t m_dev = -1;
  int k_dev = 8;
  int repeats = 3;
  std::vector<int> devices;
  std::string rows = "self,classic,device";
  bool exclude_self = false;
  bool shares = false;
};

void cuda_check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

std::string list_text(const std::vector<int>& devices) {
  std::string s;
  for (int d : devices) s += (s.empty() ? "" : ",") + std::to_string(d);
  return s;
}

knn_options options_for(const std::vector<int>& devices) {
  knn_options o;
  knn_options_init_v2(&o);
  o.backend = KNN_BACKEND_CUDA;
  o.structure = KNN_STRUCTURE_KDTREE;
  for (int d : devices) o.devices[o.device_count++] = d;
  return o;
}

// Device memory in use on each device (total - free), for the copies' check.
std::vector<size_t> used_bytes(int count) {
  std::vector<size_t> used(static_cast<size_t>(count));
  int current = 0;
  cuda_check(cudaGetDevice(&current), "cudaGetDevice");
  for (int d = 0; d < count; ++d) {
    cuda_check(cudaSetDevice(d), "cudaSetDevice");
    size_t free_bytes = 0, total = 0;
    cuda_check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
    used[d] = total - free_bytes;
  }
  cuda_check(cudaSetDevice(current), "cudaSetDevice");
  return used;
}

// Rows kept from the one-device answer and compared with the others': a
// spread of rows, and the first and last rows of every share of every list.
struct RowSample {
  std::vector<int64_t> rows;
  std::vector<int> values;

  RowSample(int64_t n, int shares_max) {
    const int64_t spread = std::min<int64_t>(n, 4096);
    for (int64_t i = 0; i < spread; ++i) rows.push_back(n * i / spread);
    for (int shares = 2; shares <= shares_max; ++shares)
      for (int s = 1; s < shares; ++s) {
        const int64_t edge = n / shares * s + n % shares * s / shares;
        for (int64_t r : {edge - 1, edge})
          if (r >= 0 && r < n) rows.push_back(r);
      }
    if (n > 0) rows.push_back(n - 1);
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  }
  void keep(const int* result, int k) {
    values.clear();
    for (int64_t r : rows) values.insert(values.end(), result + r * k, result + (r + 1) * k);
  }
  // The number of sampled rows that differ (0: the same answer); throws when
  // the answer is degenerate (all missing), which no sane run gives.
  int64_t differing(const int* result, int k) const {
    int64_t bad = 0, missing = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const int* row = result + rows[i] * k;
      if (!std::equal(row, row + k, values.begin() + static_cast<int64_t>(i) * k)) ++bad;
      missing += row[0] < 0;
    }
    if (missing == static_cast<int64_t>(rows.size()))
      throw std::runtime_error("every sampled row is missing: the run computed nothing");
    return bad;
  }
};

struct Row {
  std::string name;
  double one_ms = 0, all_ms = 0;
  std::string check;
};

// Times `run(devices)` for {0} and for `all`, interleaved; `verify` checks
// the multi-device answer against the one-device one (run just before).
Row time_row(const std::string& name, const std::vector<int>& all, int repeats,
             const std::function<void(const std::vector<int>&)>& run,
             const std::function<void()>& keep_one, const std::function<std::string()>& verify) {
  const std::vector<int> one{0};
  std::vector<knn_bench::Contender> contenders{{[&] { run(one); }, nullptr},
                                               {[&] { run(all); }, nullptr}};
  const std::vector<knn_bench::Timing> t = knn_bench::measure_interleaved(contenders, repeats);
  run(one);
  keep_one();
  run(all);
  Row row{name, t[0].median_ms, t[1].median_ms, verify()};
  std::printf("  %-44s 1 device %10.1f ms   [%s] %10.1f ms   %s\n", name.c_str(), row.one_ms,
              list_text(all).c_str(), row.all_ms, row.check.c_str());
  std::fflush(stdout);
  return row;
}

std::string copies_check(const std::vector<size_t>& before, const std::vector<int>& all) {
  const std::vector<size_t> after = used_bytes(static_cast<int>(before.size()));
  std::ostringstream s;
  for (int d : all) {
    if (d == 0) continue;
    const double mib = (static_cast<double>(after[d]) - static_cast<double>(before[d])) / 1048576.0;
    s << " device " << d << " +" << static_cast<long long>(mib) << " MiB";
    if (mib <= 0)
      throw std::runtime_error("no copy of the index appeared on device " + std::to_string(d) +
                               ": the split did not run there");
  }
  return s.str();
}

// --shares: each half of the device row's two-way split alone (see the top).
void time_shares(const Settings& s, knn_index* one, knn_index* all, const float* d_queries,
                 int64_t m, int k, int32_t* d_idx, float* d_dist) {
  const int second = s.devices.at(1);
  const int64_t half = m / 2, rest = m - half;
  const size_t rest_slots = static_cast<size_t>(rest) * k;
  const knn_options on_second = options_for({second});
  // The second half's queries and rows in memory of the second device.
  cuda_check(cudaSetDevice(second), "cudaSetDevice");
  float *own_queries = nullptr, *own_dist = nullptr;
  int32_t* own_idx = nullptr;
  cuda_check(cudaMalloc(&own_queries, static_cast<size_t>(rest) * 3 * 4), "cudaMalloc");
  cuda_check(cudaMalloc(&own_idx, rest_slots * 4), "cudaMalloc");
  cuda_check(cudaMalloc(&own_dist, rest_slots * 4), "cudaMalloc");
  cuda_check(cudaMemcpyPeer(own_queries, second, d_queries + half * 3, 0,
                            static_cast<size_t>(rest) * 3 * 4),
             "cudaMemcpyPeer");
  cuda_check(cudaSetDevice(0), "cudaSetDevice");
  auto first_half = [&] {
    check_status(knn_index_query(one, d_queries, half, k, d_idx, d_dist, nullptr),
                 "knn_index_query");
  };
  auto second_from_first = [&] {
    check_status(knn_index_query(all, d_queries + half * 3, rest, k, d_idx + half * k,
                                 d_dist + half * k, &on_second),
                 "knn_index_query");
  };
  auto second_from_own = [&] {
    check_status(knn_index_query(all, own_queries, rest, k, own_idx, own_dist, &on_second),
                 "knn_index_query");
  };
  // Both halves at once on two host threads: from each device's own arrays
  // (nothing crosses between the devices), and with the second half on
  // device 0's arrays as the split runs it.
  auto at_once = [&](const std::function<void()>& other) {
    std::exception_ptr failed;
    std::thread second_thread([&] {
      try {
        other();
      } catch (...) {
        failed = std::current_exception();
      }
    });
    first_half();
    second_thread.join();
    if (failed) std::rethrow_exception(failed);
  };
  const std::vector<knn_bench::Contender> parts{{first_half, nullptr},
                                                {second_from_first, nullptr},
                                                {second_from_own, nullptr},
                                                {[&] { at_once(second_from_own); }, nullptr},
                                                {[&] { at_once(second_from_first); }, nullptr}};
  const std::vector<knn_bench::Timing> t = knn_bench::measure_interleaved(parts, s.repeats);
  std::printf(
      "  shares alone: first half on device 0 %.1f ms; second half on device %d from "
      "device 0's arrays %.1f ms, from its own %.1f ms\n"
      "  both halves at once on two threads: each from its own device's arrays %.1f ms; "
      "the second from device 0's arrays %.1f ms\n",
      t[0].median_ms, second, t[1].median_ms, t[2].median_ms, t[3].median_ms, t[4].median_ms);
  std::fflush(stdout);
  cudaFree(own_queries);
  cudaFree(own_idx);
  cudaFree(own_dist);
}

}  // namespace

int main(int argc, char** argv) {
  const knn_bench::CommandLine cl{argv[0], kUsage};
  Settings s;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    cl.exit_if_help(a);
    if (a == "--quick") {
      quick = true;
    } else if (a == "--n-self") {
      s.n_self = cl.count(cl.value_after(argc, argv, &i), "--n-self", 1, 2147483647);
    } else if (a == "--k-self") {
      s.k_self = static_cast<int>(cl.count(cl.value_after(argc, argv, &i), "--k-self", 1, 4096));
    } else if (a == "--n-dev") {
      s.n_dev = cl.count(cl.value_after(argc, argv, &i), "--n-dev", 1, 2147483647);
    } else if (a == "--m-dev") {
      s.m_dev = cl.count(cl.value_after(argc, argv, &i), "--m-dev", 1, 2147483647);
    } else if (a == "--k-dev") {
      s.k_dev = static_cast<int>(cl.count(cl.value_after(argc, argv, &i), "--k-dev", 1, 4096));
    } else if (a == "--repeats") {
      s.repeats = static_cast<int>(cl.count(cl.value_after(argc, argv, &i), "--repeats", 1, 100));
    } else if (a == "--devices") {
      std::stringstream list(cl.value_after(argc, argv, &i));
      for (std::string item; std::getline(list, item, ',');)
        s.devices.push_back(static_cast<int>(cl.count(item, "device", 0, KNN_MAX_DEVICES - 1)));
    } else if (a == "--shares") {
      s.shares = true;
    } else if (a == "--exclude-self") {
      s.exclude_self = true;
    } else if (a == "--rows") {
      s.rows = cl.value_after(argc, argv, &i);
    } else {
      cl.fail("unknown argument " + a);
    }
  }
  if (quick) {
    s.n_self = std::min<int64_t>(s.n_self, 1000000);
    s.n_dev = std::min<int64_t>(s.n_dev, 1000000);
  }
  if (s.m_dev < 0) s.m_dev = s.n_dev;
  auto wanted = [&](const char* row) {
    return ("," + s.rows + ",").find(std::string(",") + row + ",") != std::string::npos;
  };

  try {
    const int count = cuGetDeviceCount();
    if (count == 0) {
      std::printf("bench_multi_gpu: no CUDA device\n");
      return 1;
    }
    if (s.devices.empty())
      for (int d = 0; d < std::min(count, KNN_MAX_DEVICES); ++d) s.devices.push_back(d);
    for (int d = 0; d < count; ++d) {
      cudaDeviceProp p{};
      cuda_check(cudaGetDeviceProperties(&p, d), "cudaGetDeviceProperties");
      std::printf("device %d: %s, %.1f GiB\n", d, p.name, p.totalGlobalMem / 1073741824.0);
    }
    if (s.devices.size() < 2)
      std::printf("note: one device in the list; the speedup column compares it with itself\n");
    std::printf("repeats %d (median, after a warm-up); multi-device list %s\n", s.repeats,
                list_text(s.devices).c_str());
    std::vector<Row> rows;
    const int max_shares = static_cast<int>(s.devices.size());

    if (wanted("self") || wanted("classic")) {
      const int64_t n = s.n_self;
      const int k = s.k_self;
      std::printf("all-kNN: %lld uniform points, k = %d, host rows %.1f GiB\n",
                  static_cast<long long>(n), k, n * k * 4.0 / 1073741824.0);
      const std::vector<float> points = knn_bench::uniform_rows(n, 3, 42);
      std::vector<int> result(static_cast<size_t>(n) * k);
      RowSample sample(n, max_shares);
      if (wanted("self")) {
        const std::vector<size_t> before = used_bytes(count);
        knn_index* one = nullptr;
        knn_index* all = nullptr;
        knn_options o1 = options_for({0}), oa = options_for(s.devices);
        check_status(knn_index_build(points.data(), n, 3, &o1, &one), "knn_index_build");
        check_status(knn_index_build(points.data(), n, 3, &oa, &all), "knn_index_build");
        auto run = [&](const std::vector<int>& devices) {
          check_status(
              knn_index_query_self(devices.size() == 1 ? one : all, k, s.exclude_self ? 1 : 0,
                                   reinterpret_cast<int32_t*>(result.data()), nullptr),
              "knn_index_query_self");
        };
        rows.push_back(time_row(
            s.exclude_self ? "all-kNN to host, query_self (exclude self)"
                           : "all-kNN to host, knn_index_query_self",
            s.devices, s.repeats, run, [&] { sample.keep(result.data(), k); },
            [&] {
              const int64_t bad = sample.differing(result.data(), k);
              if (bad) throw std::runtime_error(std::to_string(bad) + " sampled rows differ");
              // Both indexes hold device 0's copy; the list's others hold one each.
              return "same " + std::to_string(sample.rows.size()) + " rows;" +
                     copies_check(before, s.devices);
            }));
        knn_index_free(one);
        knn_index_free(all);
      }
      if (wanted("classic")) {
        std::vector<knn_node> tree(static_cast<size_t>(n));
        const knn_point* p = reinterpret_cast<const knn_point*>(points.data());
        check_status(buildKdTree(p, static_cast<int>(n), tree.data()), "buildKdTree");
        auto run = [&](const std::vector<int>& devices) {
          setenv("KNN_DEVICES", list_text(devices).c_str(), 1);
          check_status(
              queryAll(p, tree.data(), static_cast<int>(n), static_cast<int>(n), k, result.data()),
              "queryAll");
          unsetenv("KNN_DEVICES");
        };
        rows.push_back(time_row(
            "all-kNN to host, classic queryAll", s.devices, s.repeats, run,
            [&] { sample.keep(result.data(), k); },
            [&] {
              const int64_t bad = sample.differing(result.data(), k);
              if (bad) throw std::runtime_error(std::to_string(bad) + " sampled rows differ");
              return "same " + std::to_string(sample.rows.size()) + " rows";
            }));
      }
    }

    if (wanted("device")) {
      const int64_t n = s.n_dev, m = s.m_dev;
      const int k = s.k_dev;
      std::printf("device arrays: %lld points, %lld queries, k = %d, arrays on device 0\n",
                  static_cast<long long>(n), static_cast<long long>(m), k);
      const std::vector<float> points = knn_bench::uniform_rows(n, 3, 7);
      const std::vector<float> queries = knn_bench::uniform_rows(m, 3, 8);
      cuda_check(cudaSetDevice(0), "cudaSetDevice");
      float *d_points = nullptr, *d_queries = nullptr, *d_dist = nullptr;
      int32_t* d_idx = nullptr;
      const size_t slots = static_cast<size_t>(m) * k;
      cuda_check(cudaMalloc(&d_points, points.size() * 4), "cudaMalloc");
      cuda_check(cudaMalloc(&d_queries, queries.size() * 4), "cudaMalloc");
      cuda_check(cudaMalloc(&d_idx, slots * 4), "cudaMalloc");
      cuda_check(cudaMalloc(&d_dist, slots * 4), "cudaMalloc");
      cuda_check(cudaMemcpy(d_points, points.data(), points.size() * 4, cudaMemcpyHostToDevice),
                 "cudaMemcpy");
      cuda_check(cudaMemcpy(d_queries, queries.data(), queries.size() * 4, cudaMemcpyHostToDevice),
                 "cudaMemcpy");
      const std::vector<size_t> before = used_bytes(count);
      knn_index* one = nullptr;
      knn_index* all = nullptr;
      knn_options o1 = options_for({0}), oa = options_for(s.devices);
      check_status(knn_index_build(d_points, n, 3, &o1, &one), "knn_index_build");
      check_status(knn_index_build(d_points, n, 3, &oa, &all), "knn_index_build");
      std::vector<int32_t> one_idx(slots), all_idx(slots);
      std::vector<float> one_dist(slots), all_dist(slots);
      auto run = [&](const std::vector<int>& devices) {
        check_status(knn_index_query(devices.size() == 1 ? one : all, d_queries, m, k, d_idx,
                                     d_dist, nullptr),
                     "knn_index_query");
      };
      auto fetch = [&](std::vector<int32_t>& idx, std::vector<float>& dist) {
        cuda_check(cudaMemcpy(idx.data(), d_idx, slots * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
        cuda_check(cudaMemcpy(dist.data(), d_dist, slots * 4, cudaMemcpyDeviceToHost),
                   "cudaMemcpy");
      };
      rows.push_back(time_row(
          "kNN on device arrays, knn_index_query", s.devices, s.repeats, run,
          [&] { fetch(one_idx, one_dist); },
          [&] {
            fetch(all_idx, all_dist);
            if (one_idx != all_idx || std::memcmp(one_dist.data(), all_dist.data(), slots * 4))
              throw std::runtime_error("the multi-device rows differ from the one-device rows");
            if (std::all_of(one_idx.begin(), one_idx.end(), [](int32_t i) { return i < 0; }))
              throw std::runtime_error("every row is missing: the run computed nothing");
            return "same, all " + std::to_string(m) + " rows;" + copies_check(before, s.devices);
          }));
      if (s.shares) time_shares(s, one, all, d_queries, m, k, d_idx, d_dist);
      knn_index_free(one);
      knn_index_free(all);
      cudaFree(d_points);
      cudaFree(d_queries);
      cudaFree(d_idx);
      cudaFree(d_dist);
    }

    std::printf("\n%-44s %12s %12s %8s\n", "row", "1 device ms", "all ms", "speedup");
    for (const Row& r : rows)
      std::printf("%-44s %12.1f %12.1f %7.2fx\n", r.name.c_str(), r.one_ms, r.all_ms,
                  r.one_ms / r.all_ms);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_multi_gpu: %s\n", e.what());
    return 1;
  }
  return 0;
}
