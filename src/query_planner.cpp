#include "query_planner.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "../common/error.h"
#include "../common/float_math.h"
#include "../common/neighbor.h"
#include "../common/team_size.h"
#include "../engine/cancel.h"
#include "../engine/progress.h"
#include "backends.h"
#include "classic_engines.h"
#include "classic_split_tree.h"
#include "device_choice.h"
#include "index_planner.h"

namespace knn {
namespace {

// Below these sizes the CPU answers before a GPU round trip would.
constexpr int64_t kMinGpuBuildPoints = int64_t{1} << 15;
// Queries a CPU thread takes from the shared pool at most at a time, and
// first, to measure its rate.
constexpr int64_t kCpuChunkQueries = 1024;
constexpr int64_t kCpuProbeQueries = 32;

bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return !(v[0] == '0' || v[0] == 'n' || v[0] == 'N' || v[0] == 'f' || v[0] == 'F');
}

bool device_usable() { return device_backend().device_count() > 0; }

void select_device(int device) { device_backend().set_device(device); }

// Queries handed out from both ends: the GPUs take their chunks from the
// front, CPU threads small ones from the back, until they meet. A CPU thread
// takes only as much as it can finish, at its own measured rate, well before
// the GPUs would run out of work, so the CPU share never delays the call.
// Every hand-out is a point between chunks where the caller's cancel flag,
// taken on the calling thread when the pool is made, stops the call.
class QueryPool : public QuerySource {
 public:
  // devices: the engines taking chunks from the front, each with at most
  // Backend::chunks_in_flight() of them in flight.
  QueryPool(int64_t m, int devices)
      : back_(m),
        devices_(devices),
        chunks_in_flight_(device_backend().chunks_in_flight()),
        start_(std::chrono::steady_clock::now()),
        cancel_(cancel_flag()) {}

  int64_t take(int64_t max_queries, int64_t* count) override {
    throw_if_cancelled(cancel_);
    std::lock_guard<std::mutex> lock(mutex_);
    *count = closed_ ? 0 : std::min(max_queries, back_ - front_);
    largest_chunk_ = std::max(largest_chunk_, max_queries);
    const int64_t first = front_;
    front_ += *count;
    paced_.notify_all();
    return first;
  }

  // Work for a CPU thread that answers `rate` queries per second (0: not
  // measured yet, so it gets a small probe). Waits until the GPU has
  // finished a chunk, so that its pace is known; 0 queries mean stop.
  int64_t take_for_cpu(double rate, int64_t* count) {
    throw_if_cancelled(cancel_);
    std::unique_lock<std::mutex> lock(mutex_);
    // Queries the GPUs have surely finished: all but the chunks in flight.
    auto in_flight = [this] { return chunks_in_flight_ * largest_chunk_ * devices_; };
    paced_.wait(lock, [&] { return closed_ || front_ - in_flight() > 0 || back_ == front_; });
    const int64_t remaining = back_ - front_;
    const int64_t gpu_done = front_ - in_flight();
    *count = 0;
    if (closed_ || remaining < in_flight() || gpu_done <= 0) return back_;
    int64_t want = kCpuProbeQueries;
    if (rate > 0) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      const double gpu_seconds_left = remaining / (gpu_done / elapsed);
      want =
          std::min<int64_t>(kCpuChunkQueries, static_cast<int64_t>(0.5 * rate * gpu_seconds_left));
    }
    *count = want < 1 ? 0 : std::min(want, remaining);
    back_ -= *count;
    return back_;
  }

  // Queries no one has taken yet.
  int64_t remaining() {
    std::lock_guard<std::mutex> lock(mutex_);
    return back_ - front_;
  }

  // No more work for anyone (a device failed, or none could serve).
  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    paced_.notify_all();
  }

 private:
  std::mutex mutex_;
  int64_t front_ = 0;
  int64_t back_;
  const int64_t devices_;
  const int64_t chunks_in_flight_;
  int64_t largest_chunk_ = 0;  // the largest chunk a device asked for
  const std::chrono::steady_clock::time_point start_;
  std::condition_variable paced_;
  bool closed_ = false;
  const volatile int* const cancel_;
};

// GPU search of all m queries against a tree of n nodes: `device_side`
// serves the pool's chunks on the devices. With `cpu_share`, a team of CPU
// threads (leaving cores for the driver threads' host copies) takes queries
// from the back of the same pool once the GPUs have shown their pace; they
// stop when they could not finish before them.
void query_with_cpu_share(const Node* tree, int64_t n, int root_dim, const Point* queries,
                          int64_t m, int k, int32_t* indices, float* sq_distances, int device_count,
                          bool cpu_share, const std::function<void(QueryPool&)>& device_side) {
  QueryPool pool(m, device_count);
  const int helpers =
      team_size(kClassicThreads) - device_count * (device_backend().host_copy_threads() + 1);
  if (!cpu_share || helpers < 1) return device_side(pool);
  // The CPU search layout of the tree, built once for every chunk the team takes.
  const std::unique_ptr<ClassicTreeSearch> cpu_tree =
      host_backend().classic_tree_search(tree, n, root_dim);
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto record = [&] {
    std::lock_guard<std::mutex> lock(failure_mutex);
    if (!failure) failure = std::current_exception();
  };
  // The team's threads are not the caller's: they report through its record.
  knn_progress* const report = progress();
  std::thread cpu_team([&] {
#pragma omp parallel num_threads(helpers)
    try {
      double rate = 0;
      int64_t count = 0;
      for (int64_t first = pool.take_for_cpu(rate, &count); count > 0;
           first = pool.take_for_cpu(rate, &count)) {
        const auto t0 = std::chrono::steady_clock::now();
        const int64_t row = first * k;
        cpu_tree->knn(reinterpret_cast<const float*>(queries + first), count, k, 0, indices + row,
                      sq_distances ? sq_distances + row : nullptr);
        progress_add(report, count);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        rate = count / std::max(seconds, 1e-9);
      }
    } catch (...) {
      record();
    }
  });
  try {
    device_side(pool);
  } catch (...) {
    record();
    pool.close();
  }
  cpu_team.join();
  if (failure) std::rethrow_exception(failure);
}

// The search of all m queries against the tree on the current device, with
// a CPU share where the kd-tree serves the call (the grid is too quick for
// one to pay).
void query_on_device(const Node* tree, int64_t n, const Point* queries, int64_t m, int k,
                     int32_t* result, size_t budget, bool cpu_share) {
  const ClassicEngine on = [&] {
    const std::unique_ptr<UploadedClassicTree> uploaded =
        device_backend().upload_classic_tree(tree, n, 0, true);
    return classic_engine(*uploaded, queries, m, k, budget);
  }();  // the upload is freed before the queries run
  cpu_share = cpu_share && on.engine->structure() == KNN_STRUCTURE_KDTREE;
  query_with_cpu_share(
      tree, n, 0, queries, m, k, result, nullptr, 1, cpu_share,
      [&](QueryPool& pool) { classic_knn(on, queries, m, k, result, nullptr, budget, &pool); });
}

// The tree's points on every listed device: one engine per distinct device,
// built on all of them at once (each from its own upload and check, each
// choosing as one device would: the answers are the same); then
// every listed device (a device listed twice: two host threads sharing its
// engine and its memory) takes chunks from the one pool, as large as its
// share of its own free memory allows, until the pool is empty. Each query
// is answered whole on one device: the result is the one device's. A device
// whose share of memory cannot hold the tree and a small chunk sits out;
// when none can, DEVICE_OUT_OF_MEMORY.
void query_on_devices(const std::vector<int>& devices, const Node* tree, int64_t n,
                      const Point* queries, int64_t m, int k, int32_t* result, bool cpu_share) {
  const std::vector<int> distinct = [&] {
    std::vector<int> d(devices);
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
    return d;
  }();
  auto slot_of = [&](int device) {
    return static_cast<size_t>(std::lower_bound(distinct.begin(), distinct.end(), device) -
                               distinct.begin());
  };
  std::vector<ClassicEngine> engines(distinct.size());
  std::vector<size_t> shares(distinct.size(), 0);
  // Each engine is freed on its own device, whatever happened.
  auto release = [&] {
    try {
      run_shares(distinct, select_device, [&](int s, int) { engines[s].engine.reset(); });
    } catch (...) {
      // Nothing left to report: the call's status says what failed.
    }
  };
  try {
    run_shares(distinct, select_device, [&](int s, int device) {
      const int64_t listed = std::count(devices.begin(), devices.end(), device);
      shares[s] = classic_budget() / static_cast<size_t>(listed);
      if (!device_holds(m, k, n, shares[s])) return;
      const std::unique_ptr<UploadedClassicTree> uploaded =
          device_backend().upload_classic_tree(tree, n, 0, true);
      engines[s] = classic_engine(*uploaded, queries, m, k, shares[s]);
    });
    query_with_cpu_share(tree, n, 0, queries, m, k, result, nullptr,
                         static_cast<int>(devices.size()), cpu_share, [&](QueryPool& pool) {
                           try {
                             run_shares(devices, select_device, [&](int, int device) {
                               const size_t s = slot_of(device);
                               if (!engines[s].engine) return;
                               try {
                                 classic_knn(engines[s], queries, m, k, result, nullptr, shares[s],
                                             &pool);
                               } catch (...) {
                                 pool.close();  // the other devices stop at their next chunk
                                 throw;
                               }
                             });
                           } catch (...) {
                             pool.close();
                             throw;
                           }
                           if (pool.remaining() > 0) {
                             pool.close();
                             fail(KNN_ERR_DEVICE_OUT_OF_MEMORY,
                                  "no listed device can hold the tree and a chunk of queries");
                           }
                         });
  } catch (...) {
    release();
    throw;
  }
  release();
}

// The devices a classic query of m queries runs on (include/knn_gpgpu.h,
// "Several devices": KNN_DEVICES, else every device once m is large enough);
// just the current device where that is all the call would use.
std::vector<int> classic_devices(int64_t m) {
  knn_options defaults;
  knn_options_init_v2(&defaults);
  const int current = device_backend().current_device();
  return devices_for(choose_devices(-1, defaults, device_backend().device_count(), current), m);
}

// CPU threads help only where the GPU search, not the host copies, bounds
// the call: with many queries and k large enough for the compute-heavy warp
// search. Where copies bound it, CPU threads would slow them down (measured:
// bench/RESULTS.md). KNN_CPU_SHARE=1/0 forces the choice.
bool want_cpu_share(int64_t m, int k) {
  const bool worth_it = m >= (int64_t{1} << 16) && k > 16 &&
                        team_size(kClassicThreads) > device_backend().host_copy_threads() + 2;
  return env_flag("KNN_CPU_SHARE", worth_it);
}

}  // namespace

void build_tree(const Point* points, int64_t n, Node* tree, Engine engine) {
  if (n == 0) return;
  throw_if_cancelled(cancel_flag());
  if (engine == Engine::OpenMP) return host_backend().build_classic_tree(points, n, tree);
  const Backend& device = device_backend();
  const bool gpu_ok = device_usable();
  if (engine == Engine::Cuda) {
    if (!gpu_ok) fail(KNN_ERR_NO_DEVICE, "no usable CUDA device");
    return device.build_classic_tree(points, n, tree);
  }
  if (gpu_ok && n >= kMinGpuBuildPoints && device.classic_tree_build_bytes(n) <= classic_budget()) {
    try {
      return device.build_classic_tree(points, n, tree);
    } catch (const Error& e) {
      if (e.status() != KNN_ERR_DEVICE_OUT_OF_MEMORY) throw;  // else: the CPU builds it
    }
  }
  host_backend().build_classic_tree(points, n, tree);
}

size_t query_bytes_needed(int64_t m, int k, int64_t n) {
  const Backend& device = device_backend();
  const size_t tree_search = device.classic_kdtree_query_bytes(m, k, n);
  // Every tree the grid may serve counts the grid path, whatever m and k:
  // the figure must not shrink when a caller asks for more (k <=
  // kGpuGridMaxLeadingK would make it shrink at that k).
  if (n <= kGpuBruteForceMaxPoints) return tree_search;
  return std::max(tree_search, device.classic_grid_query_bytes(m, k, n));
}

size_t search_bytes_needed(int64_t m, int k, int64_t n) {
  const Backend& device = device_backend();
  const size_t tree_search = device.classic_kdtree_search_bytes(m, k);
  if (n <= kGpuBruteForceMaxPoints) return tree_search;
  return std::max(tree_search, device.classic_grid_search_bytes(m, k));
}

void query_tree(const Point* queries, int64_t m, const Node* tree, int64_t n, int k,
                int32_t* result, Engine engine) {
  if (m == 0) return;
  throw_if_cancelled(cancel_flag());
  const Backend& host = host_backend();
  auto on_cpu = [&] { host.query_classic_tree(tree, n, queries, m, k, result, nullptr); };
  if (engine == Engine::OpenMP) return on_cpu();
  const bool gpu_ok = device_usable();
  if (!gpu_ok) {
    if (engine == Engine::Cuda) fail(KNN_ERR_NO_DEVICE, "no usable CUDA device");
    return on_cpu();
  }
  const Backend& device = device_backend();
  const DeviceBudget budget = device.device_budget(0);
  try {
    if (device_holds(m, k, n, budget.bytes())) {
      const bool cpu_share = engine == Engine::Auto && want_cpu_share(m, k);
      const std::vector<int> devices = classic_devices(m);
      if (devices.size() > 1 || devices.front() != device.current_device())
        return query_on_devices(devices, tree, n, queries, m, k, result, cpu_share);
      return query_on_device(tree, n, queries, m, k, result, budget.bytes(), cpu_share);
    }
    if (engine == Engine::Cuda) {
      host.check_classic_tree(tree, n);  // a tree that is not a tree says so first
      fail(KNN_ERR_DEVICE_OUT_OF_MEMORY,
           format("the tree (%lld nodes) and one chunk of queries need %zu device bytes; the "
                  "device budget is %s (queryAll splits the tree instead)",
                  static_cast<long long>(n),
                  device.classic_kdtree_query_bytes(std::min(m, kMinChunkQueries), k, n),
                  budget.describe().c_str()));
    }
    host.check_classic_tree(tree, n);
    return query_split_tree(queries, m, tree, n, k, result, classic_devices(m));
  } catch (const Error& e) {
    // queryAll never fails for lack of device memory: the CPU answers instead.
    if (engine == Engine::Cuda || e.status() != KNN_ERR_DEVICE_OUT_OF_MEMORY) throw;
  }
  progress_begin(progress(), KNN_PROGRESS_QUERY, m);  // the CPU starts over
  on_cpu();
}

}  // namespace knn
