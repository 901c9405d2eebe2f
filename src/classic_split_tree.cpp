// The split of a classic tree that does not fit the device
// (src/classic_split_tree.h).
#include "classic_split_tree.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <vector>

#include "../common/error.h"
#include "../common/float_math.h"
#include "../common/kdtree_layout.h"
#include "../common/neighbor.h"
#include "../common/team_size.h"
#include "../common/thread_scratch.h"
#include "../engine/cancel.h"
#include "../engine/progress.h"
#include "backends.h"
#include "classic_engines.h"
#include "device_choice.h"

namespace knn {
namespace {

// Host memory for the partial results of one tree part in the split path.
constexpr size_t kSplitBlockBytes = size_t{1} << 31;
// The split path cuts the tree finely enough for chunks of this many queries
// (a full GPU) where the device memory allows.
constexpr int64_t kSplitChunkQueries = int64_t{1} << 17;

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
  const int pieces = team_size(kClassicThreads);
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
  if (devices.size() == 1 && devices.front() == device_backend().current_device())
    return body(devices.front());
  run_shares(
      devices, [](int device) { device_backend().set_device(device); },
      [&](int, int device) { body(device); });
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

}  // namespace

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
  ThreadScratch<Neighbor> merge_scratch(team_size(kClassicThreads), static_cast<size_t>(k));
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
          const Backend& device = device_backend();
          const ClassicEngine on{device.build_kdtree_index(part.rows.data(), size, 3, params),
                                 device.kdtree_resident_bytes(size, 3, params.leaf_size)};
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

}  // namespace knn
