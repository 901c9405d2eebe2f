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
#include "../cuda/cuda_engine.h"
#include "../cuda/cuda_index.h"
#include "../cuda/index_memory_model.h"
#include "../engine/cancel.h"
#include "../engine/progress.h"
#include "../openmp/omp_engine.h"
#include "../openmp/thread_scratch.h"
#include "device_choice.h"
#include "index_planner.h"

namespace knn {
namespace {

// Below these sizes the CPU answers before a GPU round trip would.
constexpr int64_t kMinGpuBuildPoints = int64_t{1} << 15;
// Chunks smaller than this do not amortise a kernel launch and a transfer.
constexpr int64_t kMinChunkQueries = int64_t{1} << 12;
// Queries a CPU thread takes from the shared pool at most at a time, and
// first, to measure its rate.
constexpr int64_t kCpuChunkQueries = 1024;
constexpr int64_t kCpuProbeQueries = 32;
// Host memory for the partial results of one tree part in the split path.
constexpr size_t kSplitBlockBytes = size_t{1} << 31;
// The split path cuts the tree finely enough for chunks of this many queries
// (a full GPU) where the device memory allows.
constexpr int64_t kSplitChunkQueries = int64_t{1} << 17;

bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return !(v[0] == '0' || v[0] == 'n' || v[0] == 'N' || v[0] == 'f' || v[0] == 'F');
}

bool device_usable() { return cuda::device_count() > 0; }

// The classic calls have no options: their budget on the current device is
// KNN_DEVICE_MEMORY_LIMIT's, else the free memory's (cuda::device_budget).
size_t classic_budget() { return cuda::device_budget(0).bytes(); }

// Queries handed out from both ends: the GPUs take their chunks from the
// front, CPU threads small ones from the back, until they meet. A CPU thread
// takes only as much as it can finish, at its own measured rate, well before
// the GPUs would run out of work, so the CPU share never delays the call.
// Every hand-out is a point between chunks where the caller's cancel flag,
// taken on the calling thread when the pool is made, stops the call.
class QueryPool : public QuerySource {
 public:
  // devices: the engines taking chunks from the front, each with at most
  // cuda::kPipelineSlots of them in flight.
  QueryPool(int64_t m, int devices)
      : back_(m),
        devices_(devices),
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
    auto in_flight = [this] { return cuda::kPipelineSlots * largest_chunk_ * devices_; };
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
  int64_t largest_chunk_ = 0;  // the largest chunk a device asked for
  const std::chrono::steady_clock::time_point start_;
  std::condition_variable paced_;
  bool closed_ = false;
  const volatile int* const cancel_;
};

// Device bytes of a classic call on the tree's points with at most a small
// chunk of queries at a time: whether the device can serve it at all (the
// tree split serves it otherwise).
bool device_holds(int64_t m, int k, int64_t n, size_t budget) {
  return cuda::index_memory::classic_kdtree_query_bytes(std::min(m, kMinChunkQueries), k, n) <=
         budget;
}

// GPU search of all m queries against a tree of n nodes: `device_side`
// serves the pool's chunks on the devices. With `cpu_share`, a team of CPU
// threads (leaving cores for the driver threads' host copies) takes queries
// from the back of the same pool once the GPUs have shown their pace; they
// stop when they could not finish before them.
void query_with_cpu_share(const Node* tree, int64_t n, int root_dim, const Point* queries,
                          int64_t m, int k, int32_t* indices, float* sq_distances, int device_count,
                          bool cpu_share, const std::function<void(QueryPool&)>& device_side) {
  QueryPool pool(m, device_count);
  const int helpers = team_size(omp::kClassicThreads) - device_count * (cuda::kHostCopyThreads + 1);
  if (!cpu_share || helpers < 1) return device_side(pool);
  // The CPU search layout of the tree, built once for every chunk the team takes.
  const omp::SearchTree cpu_tree = omp::classic_search_tree(tree, n, root_dim);
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
        omp::search_knn(cpu_tree, reinterpret_cast<const float*>(queries + first), count, k, 0,
                        indices + row, sq_distances ? sq_distances + row : nullptr);
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

// ---- The engines of a classic query ---------------------------------------------
// A classic query runs on an index engine of the tree's points, built on the
// device from the uploaded tree (cuda::DeviceTree) and served through the
// index API's query pipeline: the grid where an AUTO index of the points
// would serve the call on a grid, else the bucket kd-tree. Both answer with
// the tree's indices (Node.id) and its ties, so the answer is the CPU
// engine's whichever serves.
//
// The grid: it answers short lists 2-3x faster than the kd-tree (H200, 10^7
// x 10^7 uniform, device arrays, build + query ms: k = 8 11.2 against 33.4,
// k = 30 29.5 against 59.2; bench/RESULTS.md) where the points make a good
// grid and the queries lie on them (index_planner.h serving_structure: lists
// up to kGpuGridMaxLeadingK, more points than the GPU brute force takes),
// and it is also the cheaper build (10^7 points: 1.2 ms against 6.3), so it
// is tried whatever the number of queries: with 10^6 queries against 10^7
// points the kd-tree's build made a call 40 % slower than the classic point
// tree had been.
bool grid_may_serve(int k, int64_t n) {
  return auto_structure(KNN_BACKEND_CUDA, n, 3) == KNN_STRUCTURE_GRID &&
         serving_structure(KNN_BACKEND_CUDA, KNN_STRUCTURE_GRID, n, k, CallKind::Nearest) ==
             KNN_STRUCTURE_GRID;
}

// The kd-tree's leaves for lists of k: the index API's (index_leaf_size.h),
// whose long lists (the warp lists) want larger leaves.
int classic_leaf_size(int k) {
  return k > 16 ? kdtree_long_list_leaf_size(3) : kdtree_default_leaf_size(3, LeafSizeFor::kGpu);
}

// A classic call's engine on the current device and what it keeps there.
struct ClassicEngine {
  std::unique_ptr<IndexEngine> engine;
  size_t resident_bytes = 0;
};

// The engine of the tree's points that serves m queries with k neighbours
// within `budget` device bytes. With `try_grid`, the grid where it serves
// (the upload goes before the grid answers: classic_grid_query_bytes), else
// the kd-tree.
ClassicEngine classic_engine(const cuda::DeviceTree& uploaded, const Point* queries, int64_t m,
                             int k, size_t budget, bool try_grid) {
  const int64_t n = uploaded.size();
  if (try_grid && grid_may_serve(k, n) &&
      cuda::index_memory::classic_grid_query_bytes(m, k, n) <= budget) {
    IndexParams params;  // the grid's default cell size, refined for surfaces, as AUTO's
    params.refine_grid = true;
    params.refuse_curves = true;
    params.device_memory_limit = budget;
    std::unique_ptr<IndexEngine> grid = uploaded.grid_of_points(params);
    if (grid &&
        structure_serving_call(*grid, n, k, CallKind::Nearest,
                               reinterpret_cast<const float*>(queries), m) == KNN_STRUCTURE_GRID)
      return ClassicEngine{std::move(grid), cuda::index_memory::grid_build_bytes(n)};
  }
  // The build's budget leaves out the upload and the rows it adopts (counted
  // in the kd-tree's build bytes): the planner admitted all of them.
  const size_t held = cuda::uploaded_tree_bytes(n) + cuda::aligned(sizeof(float) * 3 * size_t(n));
  IndexParams params;
  params.leaf_size = classic_leaf_size(k);
  params.device_memory_limit = budget > held ? budget - held : 1;
  return ClassicEngine{uploaded.kdtree_of_points(params),
                       cuda::kdtree_resident_bytes(n, 3, params.leaf_size)};
}

// The rows of the queries `source` hands out (all m where it is null), on
// the current device, within `budget` less what the engine keeps there.
void classic_knn(const ClassicEngine& on, const Point* queries, int64_t m, int k, int32_t* indices,
                 float* sq_distances, size_t budget, QuerySource* source) {
  CallParams call;
  call.device_memory_limit = budget > on.resident_bytes ? budget - on.resident_bytes : 1;
  call.query_source = source;
  on.engine->knn(reinterpret_cast<const float*>(queries), m, k, indices, sq_distances, call);
}

// The search of all m queries against the tree on the current device, with
// a CPU share where the kd-tree serves the call (the grid is too quick for
// one to pay).
void query_on_device(const Node* tree, int64_t n, const Point* queries, int64_t m, int k,
                     int32_t* result, size_t budget, bool cpu_share) {
  const ClassicEngine on = [&] {
    const cuda::DeviceTree uploaded(tree, n, 0, true);
    return classic_engine(uploaded, queries, m, k, budget, true);
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
      run_shares(distinct, cuda::set_device, [&](int s, int) { engines[s].engine.reset(); });
    } catch (...) {
      // Nothing left to report: the call's status says what failed.
    }
  };
  try {
    run_shares(distinct, cuda::set_device, [&](int s, int device) {
      const int64_t listed = std::count(devices.begin(), devices.end(), device);
      shares[s] = classic_budget() / static_cast<size_t>(listed);
      if (!device_holds(m, k, n, shares[s])) return;
      const cuda::DeviceTree uploaded(tree, n, 0, true);
      engines[s] = classic_engine(uploaded, queries, m, k, shares[s], true);
    });
    query_with_cpu_share(tree, n, 0, queries, m, k, result, nullptr,
                         static_cast<int>(devices.size()), cpu_share, [&](QueryPool& pool) {
                           try {
                             run_shares(devices, cuda::set_device, [&](int, int device) {
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
  const int current = cuda::current_device();
  return devices_for(choose_devices(-1, defaults, cuda::device_count(), current), m);
}

// CPU threads help only where the GPU search, not the host copies, bounds
// the call: with many queries and k large enough for the compute-heavy warp
// search. Where copies bound it, CPU threads would slow them down (measured:
// bench/RESULTS.md). KNN_CPU_SHARE=1/0 forces the choice.
bool want_cpu_share(int64_t m, int k) {
  const bool worth_it = m >= (int64_t{1} << 16) && k > 16 &&
                        team_size(omp::kClassicThreads) > cuda::kHostCopyThreads + 2;
  return env_flag("KNN_CPU_SHARE", worth_it);
}

// Merges a sorted k-list (b) into another (a), keeping the k closest.
void merge_rows(int32_t* a_idx, float* a_dist, const int32_t* b_idx, const float* b_dist, int k,
                Neighbor* scratch) {
  int i = 0, j = 0;
  for (int out = 0; out < k; ++out) {
    // Missing slots (-1, +inf) sort last: a real point at +inf has index >= 0.
    const bool a_has = i < k && a_idx[i] >= 0;
    const bool b_has = j < k && b_idx[j] >= 0;
    if (a_has && (!b_has || closer(a_dist[i], a_idx[i], b_dist[j], b_idx[j])))
      scratch[out] = Neighbor{a_dist[i], a_idx[i]}, ++i;
    else if (b_has)
      scratch[out] = Neighbor{b_dist[j], b_idx[j]}, ++j;
    else
      scratch[out] = Neighbor{std::numeric_limits<float>::infinity(), -1};
  }
  for (int out = 0; out < k; ++out)
    a_idx[out] = scratch[out].index, a_dist[out] = scratch[out].sq_distance;
}

// A part of a split tree: its points in ascending order of their ids, so
// that an engine's indices into them keep the ids' order (and with it the
// ties of the whole tree), the ids, and the box of its points.
struct TreePart {
  int64_t subtree;           // position of its root on the cut level; -1 for the top
  std::vector<int32_t> ids;  // ascending
  std::vector<float> rows;   // x, y, z of ids[j] from 3 j
  float lo[3], hi[3];
};

TreePart make_part(int64_t subtree, std::vector<const Node*> nodes) {
  std::sort(nodes.begin(), nodes.end(), [](const Node* a, const Node* b) { return a->id < b->id; });
  TreePart part{subtree, {}, {}, {}, {}};
  part.ids.reserve(nodes.size());
  part.rows.reserve(3 * nodes.size());
  for (int d = 0; d < 3; ++d)
    part.lo[d] = std::numeric_limits<float>::infinity(), part.hi[d] = -part.lo[d];
  for (const Node* node : nodes) {
    part.ids.push_back(node->id);
    for (int d = 0; d < 3; ++d) {
      part.rows.push_back(node->p[d]);
      part.lo[d] = std::min(part.lo[d], node->p[d]), part.hi[d] = std::max(part.hi[d], node->p[d]);
    }
  }
  return part;
}

// Cuts the tree into its top `levels` levels and the 2^levels subtrees below
// them.
std::vector<TreePart> split_tree(const Node* tree, int64_t n, int levels) {
  std::vector<TreePart> parts;
  const int64_t top = (int64_t{1} << levels) - 1;
  std::vector<const Node*> nodes;
  for (int64_t i = 0; i < top; ++i) nodes.push_back(tree + i);
  parts.push_back(make_part(-1, std::move(nodes)));
  for (int64_t q = 0; q < (int64_t{1} << levels); ++q) {
    nodes.clear();
    for (int64_t width = 1, first = top + q; first < n; width *= 2, first = 2 * first + 1)
      for (int64_t g = first; g < std::min(n, first + width); ++g) nodes.push_back(tree + g);
    if (!nodes.empty()) parts.push_back(make_part(q, nodes));
  }
  return parts;
}

// The positions whose flag is set, ascending, gathered by all cores.
void compact_flagged(const unsigned char* flags, int64_t count, std::vector<int64_t>& positions) {
  const int pieces = team_size(omp::kClassicThreads);
  std::vector<int64_t> found(static_cast<size_t>(pieces) + 1, 0);
  auto piece_begin = [&](int p) { return count * p / pieces; };
#pragma omp parallel for num_threads(pieces) schedule(static)
  for (int p = 0; p < pieces; ++p)
    for (int64_t i = piece_begin(p); i < piece_begin(p + 1); ++i) found[p + 1] += flags[i];
  for (int p = 0; p < pieces; ++p) found[p + 1] += found[p];
  positions.resize(static_cast<size_t>(found[pieces]));
#pragma omp parallel for num_threads(pieces) schedule(static)
  for (int p = 0; p < pieces; ++p) {
    int64_t at = found[p];
    for (int64_t i = piece_begin(p); i < piece_begin(p + 1); ++i)
      if (flags[i]) positions[at++] = i;
  }
}

// Squared distance from q to the part's box (box_distance, as on the
// device): a lower bound of the distance to every point in it.
float box_bound(const Point& q, const TreePart& part) {
  return box_distance(q.p, part.lo, part.hi, 3);
}

// Runs body(device) once per listed device, each on its own host thread
// with that device current (run_shares); on the calling thread itself when
// the list is just its current device, as a one-device call always did.
void on_each_device(const std::vector<int>& devices, const std::function<void(int)>& body) {
  if (devices.size() == 1 && devices.front() == cuda::current_device())
    return body(devices.front());
  run_shares(devices, cuda::set_device, [&](int, int device) { body(device); });
}

// The smallest share of device memory a listed device offers (a device
// listed twice offers each of its two shares half of its budget).
size_t smallest_budget(const std::vector<int>& devices) {
  std::mutex mutex;
  size_t smallest = std::numeric_limits<size_t>::max();
  on_each_device(devices, [&](int device) {
    const size_t listed = static_cast<size_t>(std::count(devices.begin(), devices.end(), device));
    const size_t mine = classic_budget() / listed;
    std::lock_guard<std::mutex> lock(mutex);
    smallest = std::min(smallest, mine);
  });
  return smallest;
}

// The tree does not fit: the parts take turns on the devices, first each with
// the queries whose descent leads into it, then each with the other queries
// whose current k-th neighbour is not nearer than the part's box; their lists
// are merged exactly into the answer. With several devices, each takes the
// next part as it becomes free: the choice of a part's queries and the merge
// of its lists hold one lock (they read and write the shared k-th distances),
// the parts' searches run at the same time. A part chosen against a k-th
// distance that a later merge lowers serves a few queries more, never fewer,
// and the merge keeps the k smallest (distance, index) pairs in any order:
// the answer is the one-device answer.
void query_split_tree(const Point* queries, int64_t m, const Node* tree, int64_t n, int k,
                      int32_t* result, const std::vector<int>& devices) {
  const size_t budget = smallest_budget(devices);
  const TreeShape shape(n);
  auto part_fits = [&](int levels, int64_t chunk) {
    return device_holds(std::min<int64_t>(m, chunk), k, shape.subtree_size(levels, 0), budget);
  };
  // Few parts, but each with chunks large enough to fill the GPU if possible.
  int levels = 1;
  while (levels < shape.levels - 1 && !part_fits(levels, kSplitChunkQueries)) ++levels;
  if (!part_fits(levels, kSplitChunkQueries)) {
    levels = 1;
    while (levels < shape.levels - 1 && !part_fits(levels, kMinChunkQueries)) ++levels;
    if (!part_fits(levels, kMinChunkQueries))
      fail(KNN_ERR_DEVICE_OUT_OF_MEMORY, "the device cannot hold even a small part of the tree");
  }
  const std::vector<TreePart> parts = split_tree(tree, n, levels);
  const volatile int* const cancel = cancel_flag();

  // Each query's home part: the subtree its descent through the top levels
  // reaches. Serving every query by its home part first gives it a close
  // k-th neighbour, so that the other parts serve only queries near them.
  std::vector<int> part_of_subtree(size_t{1} << levels, -1);
  for (size_t p = 1; p < parts.size(); ++p) part_of_subtree[parts[p].subtree] = static_cast<int>(p);
  auto home_part = [&](const Point& q) { return part_of_subtree[descend(tree, q.p, levels, 0)]; };

  const int64_t block =
      std::max<int64_t>(1, static_cast<int64_t>(kSplitBlockBytes / (size_t(k) * 8)));
  const size_t rows = static_cast<size_t>(std::min(block, m)) * k;
  std::vector<float> best_dist(rows);
  std::vector<int> home(static_cast<size_t>(std::min(block, m)));
  std::vector<unsigned char> wanted(home.size());
  omp::ThreadScratch<Neighbor> merge_scratch(team_size(omp::kClassicThreads),
                                             static_cast<size_t>(k));
  // What one device works on: the chosen queries of its part and their lists.
  struct Work {
    std::vector<int64_t> selected;
    std::vector<Point> selected_queries;
    std::vector<int32_t> part_idx;
    std::vector<float> part_dist;
  };
  std::vector<Work> work(devices.size());
  std::mutex shared_lists;  // wanted, best_dist and the block's rows of result
  // Each query meets several parts: progress counts whole blocks instead.
  knn_progress* const report = progress();
  const ProgressMute per_part;
  for (int64_t first = 0; first < m; first += block) {
    const int64_t count = std::min(block, m - first);
    const Point* block_queries = queries + first;
    int32_t* out = result + first * k;
    std::fill(out, out + count * k, -1);
    std::fill(best_dist.begin(), best_dist.end(), std::numeric_limits<float>::infinity());
#pragma omp parallel for num_threads(merge_scratch.threads()) schedule(static)
    for (int64_t i = 0; i < count; ++i) home[i] = home_part(block_queries[i]);
    for (int pass = 0; pass < 2; ++pass) {
      std::atomic<size_t> next_part{0};
      std::atomic<int> next_worker{0};
      on_each_device(devices, [&](int) {
        Work& w = work[static_cast<size_t>(next_worker++)];
        w.part_idx.resize(rows);
        w.part_dist.resize(rows);
        // A failure stops the other devices at their next part.
        struct StopOthers {
          std::atomic<size_t>& next;
          size_t end;
          bool done = false;
          ~StopOthers() {
            if (!done) next = end;
          }
        } stop{next_part, parts.size()};
        for (size_t p = next_part++; p < parts.size(); p = next_part++) {
          throw_if_cancelled(cancel);
          const TreePart& part = parts[p];
          const int here = static_cast<int>(p);
          {
            std::lock_guard<std::mutex> lock(shared_lists);
#pragma omp parallel for num_threads(merge_scratch.threads()) schedule(static)
            for (int64_t i = 0; i < count; ++i) {
              const bool is_home = home[i] == here;
              const bool full = out[i * k + k - 1] >= 0;
              wanted[i] = pass == 0 ? is_home
                                    : !is_home && (!full || box_bound(block_queries[i], part) <=
                                                                best_dist[i * k + k - 1]);
            }
            compact_flagged(wanted.data(), count, w.selected);
          }
          const int64_t chosen = static_cast<int64_t>(w.selected.size());
          if (chosen == 0) continue;
          w.selected_queries.resize(w.selected.size());
#pragma omp parallel for num_threads(merge_scratch.threads()) schedule(static)
          for (int64_t s = 0; s < chosen; ++s) w.selected_queries[s] = block_queries[w.selected[s]];
          const int64_t size = static_cast<int64_t>(part.ids.size());
          IndexParams params;
          params.leaf_size = classic_leaf_size(k);
          params.device_memory_limit = budget;
          const ClassicEngine on{cuda::build_kdtree_index(part.rows.data(), size, 3, params),
                                 cuda::kdtree_resident_bytes(size, 3, params.leaf_size)};
          classic_knn(on, w.selected_queries.data(), chosen, k, w.part_idx.data(),
                      w.part_dist.data(), budget, nullptr);
          // The part's positions back to the tree's ids.
#pragma omp parallel for num_threads(merge_scratch.threads()) schedule(static)
          for (int64_t e = 0; e < chosen * k; ++e)
            if (w.part_idx[e] >= 0) w.part_idx[e] = part.ids[w.part_idx[e]];
          std::lock_guard<std::mutex> lock(shared_lists);
#pragma omp parallel num_threads(merge_scratch.threads())
          {
            Neighbor* const scratch = merge_scratch.mine();
#pragma omp for schedule(static)
            for (int64_t s = 0; s < chosen; ++s) {
              const int64_t i = w.selected[s];
              merge_rows(out + i * k, best_dist.data() + i * k, w.part_idx.data() + s * k,
                         w.part_dist.data() + s * k, k, scratch);
            }
          }
        }
        stop.done = true;
      });
    }
    progress_add(report, count);
  }
}

}  // namespace

void build_tree(const Point* points, int64_t n, Node* tree, Engine engine) {
  if (n == 0) return;
  throw_if_cancelled(cancel_flag());
  if (engine == Engine::OpenMP) return omp::build_kdtree(points, n, tree);
  const bool gpu_ok = device_usable();
  if (engine == Engine::Cuda) {
    if (!gpu_ok) fail(KNN_ERR_NO_DEVICE, "no usable CUDA device");
    return cuda::build_kdtree(points, n, tree);
  }
  if (gpu_ok && n >= kMinGpuBuildPoints && cuda::build_bytes(n) <= classic_budget()) {
    try {
      return cuda::build_kdtree(points, n, tree);
    } catch (const Error& e) {
      if (e.status() != KNN_ERR_DEVICE_OUT_OF_MEMORY) throw;  // else: the CPU builds it
    }
  }
  omp::build_kdtree(points, n, tree);
}

size_t query_bytes_needed(int64_t m, int k, int64_t n) {
  const size_t tree_search = cuda::index_memory::classic_kdtree_query_bytes(m, k, n);
  // Every tree the grid may serve counts the grid path, whatever m and k:
  // the figure must not shrink when a caller asks for more (k <=
  // kGpuGridMaxLeadingK would make it shrink at that k).
  if (n <= kGpuBruteForceMaxPoints) return tree_search;
  return std::max(tree_search, cuda::index_memory::classic_grid_query_bytes(m, k, n));
}

size_t search_bytes_needed(int64_t m, int k, int64_t n) {
  const size_t tree_search = cuda::index_memory::classic_kdtree_search_bytes(m, k);
  if (n <= kGpuBruteForceMaxPoints) return tree_search;
  return std::max(tree_search, cuda::index_memory::classic_grid_search_bytes(m, k));
}

void query_tree(const Point* queries, int64_t m, const Node* tree, int64_t n, int k,
                int32_t* result, Engine engine) {
  if (m == 0) return;
  throw_if_cancelled(cancel_flag());
  auto on_cpu = [&] { omp::query_kdtree(tree, n, queries, m, k, result, nullptr); };
  if (engine == Engine::OpenMP) return on_cpu();
  const bool gpu_ok = device_usable();
  if (!gpu_ok) {
    if (engine == Engine::Cuda) fail(KNN_ERR_NO_DEVICE, "no usable CUDA device");
    return on_cpu();
  }
  const DeviceBudget budget = cuda::device_budget(0);
  try {
    if (device_holds(m, k, n, budget.bytes())) {
      const bool cpu_share = engine == Engine::Auto && want_cpu_share(m, k);
      const std::vector<int> devices = classic_devices(m);
      if (devices.size() > 1 || devices.front() != cuda::current_device())
        return query_on_devices(devices, tree, n, queries, m, k, result, cpu_share);
      return query_on_device(tree, n, queries, m, k, result, budget.bytes(), cpu_share);
    }
    if (engine == Engine::Cuda) {
      omp::check_tree(tree, n);  // a tree that is not a tree says so first
      fail(KNN_ERR_DEVICE_OUT_OF_MEMORY,
           format(
               "the tree (%lld nodes) and one chunk of queries need %zu device bytes; the "
               "device budget is %s (queryAll splits the tree instead)",
               static_cast<long long>(n),
               cuda::index_memory::classic_kdtree_query_bytes(std::min(m, kMinChunkQueries), k, n),
               budget.describe().c_str()));
    }
    omp::check_tree(tree, n);
    return query_split_tree(queries, m, tree, n, k, result, classic_devices(m));
  } catch (const Error& e) {
    // queryAll never fails for lack of device memory: the CPU answers instead.
    if (engine == Engine::Cuda || e.status() != KNN_ERR_DEVICE_OUT_OF_MEMORY) throw;
  }
  progress_begin(progress(), KNN_PROGRESS_QUERY, m);  // the CPU starts over
  on_cpu();
}

}  // namespace knn
