// Consistent orientation of normals (src/normal_orientation.h).
//
// Prim's algorithm from each part's seed with an indexed binary heap (one
// entry per point, so host memory stays O(n) beyond the graph itself). Edge
// weights are ordered by (weight, smaller id, larger id), a total order on
// the edges, so the minimum spanning forest is unique and Prim's finds it
// whatever the order in which it meets ties; each child's sign depends only
// on its parent in that forest, so the result is deterministic.
#include "normal_orientation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../engine/cancel.h"
#include "../engine/progress.h"

namespace knn {
namespace {

// An edge's place in the total order.
struct EdgeKey {
  double weight;
  int32_t low, high;
  bool operator<(const EdgeKey& o) const {
    if (weight != o.weight) return weight < o.weight;
    if (low != o.low) return low < o.low;
    return high < o.high;
  }
};

double dot(const std::vector<double>& n, int64_t i, int64_t j) {
  return (n[3 * i] * n[3 * j] + n[3 * i + 1] * n[3 * j + 1]) + n[3 * i + 2] * n[3 * j + 2];
}

// The undirected graph as adjacency rows (CSR): each listed pair both ways.
struct Graph {
  std::vector<int64_t> offsets;
  std::vector<int32_t> targets;
};

Graph undirected(const std::vector<int32_t>& neighbours, int64_t n, int g) {
  Graph graph;
  graph.offsets.assign(static_cast<size_t>(n) + 1, 0);
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < g; ++j) {
      const int32_t t = neighbours[static_cast<size_t>(i * g + j)];
      if (t < 0 || t == i) continue;
      ++graph.offsets[static_cast<size_t>(i) + 1];
      ++graph.offsets[static_cast<size_t>(t) + 1];
    }
  for (int64_t i = 0; i < n; ++i) graph.offsets[i + 1] += graph.offsets[i];
  graph.targets.resize(static_cast<size_t>(graph.offsets[static_cast<size_t>(n)]));
  std::vector<int64_t> fill(graph.offsets.begin(), graph.offsets.end() - 1);
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < g; ++j) {
      const int32_t t = neighbours[static_cast<size_t>(i * g + j)];
      if (t < 0 || t == i) continue;
      graph.targets[static_cast<size_t>(fill[static_cast<size_t>(i)]++)] = t;
      graph.targets[static_cast<size_t>(fill[static_cast<size_t>(t)]++)] = static_cast<int32_t>(i);
    }
  return graph;
}

// A binary min-heap of points keyed by their best edge to the tree so far.
class PointHeap {
 public:
  explicit PointHeap(int64_t n)
      : key_(static_cast<size_t>(n)),
        parent_(static_cast<size_t>(n), -1),
        position_(static_cast<size_t>(n), -1) {}

  bool empty() const { return heap_.empty(); }
  // Offers point i the edge from `from` with key `key`; kept if better.
  void offer(int32_t i, int32_t from, const EdgeKey& key) {
    const size_t s = static_cast<size_t>(i);
    if (position_[s] == -1) {
      key_[s] = key;
      parent_[s] = from;
      position_[s] = static_cast<int64_t>(heap_.size());
      heap_.push_back(i);
      up(heap_.size() - 1);
    } else if (position_[s] >= 0 && key < key_[s]) {
      key_[s] = key;
      parent_[s] = from;
      up(static_cast<size_t>(position_[s]));
    }
  }
  // The point of least key, removed for good (never offered again).
  int32_t pop(int32_t* parent) {
    const int32_t top = heap_.front();
    *parent = parent_[static_cast<size_t>(top)];
    swap_entries(0, heap_.size() - 1);
    heap_.pop_back();
    position_[static_cast<size_t>(top)] = -2;
    if (!heap_.empty()) down(0);
    return top;
  }
  void close(int32_t i) { position_[static_cast<size_t>(i)] = -2; }

 private:
  bool less(size_t a, size_t b) const {
    return key_[static_cast<size_t>(heap_[a])] < key_[static_cast<size_t>(heap_[b])];
  }
  void swap_entries(size_t a, size_t b) {
    std::swap(heap_[a], heap_[b]);
    position_[static_cast<size_t>(heap_[a])] = static_cast<int64_t>(a);
    position_[static_cast<size_t>(heap_[b])] = static_cast<int64_t>(b);
  }
  void up(size_t at) {
    while (at > 0 && less(at, (at - 1) / 2)) {
      swap_entries(at, (at - 1) / 2);
      at = (at - 1) / 2;
    }
  }
  void down(size_t at) {
    for (;;) {
      size_t best = at;
      const size_t left = 2 * at + 1, right = left + 1;
      if (left < heap_.size() && less(left, best)) best = left;
      if (right < heap_.size() && less(right, best)) best = right;
      if (best == at) return;
      swap_entries(at, best);
      at = best;
    }
  }
  std::vector<EdgeKey> key_;
  std::vector<int32_t> parent_;
  std::vector<int64_t> position_;  // in heap_; -1 never offered, -2 in the tree
  std::vector<int32_t> heap_;
};

// The seed's sign rule: its first non-zero of (z, y, x) positive.
void sign_seed(std::vector<double>& normals, int64_t i) {
  for (int c = 2; c >= 0; --c) {
    const double v = normals[static_cast<size_t>(3 * i + c)];
    if (v == 0) continue;
    if (v < 0)
      for (int d = 0; d < 3; ++d)
        normals[static_cast<size_t>(3 * i + d)] = -normals[static_cast<size_t>(3 * i + d)];
    return;
  }
}

constexpr int64_t kCancelPoints = int64_t{1} << 18;

}  // namespace

void orient_normals(std::vector<double>& normals, const std::vector<double>& z,
                    const std::vector<int32_t>& neighbours, int g) {
  const int64_t n = static_cast<int64_t>(z.size());
  const Graph graph = undirected(neighbours, n, g);
  const volatile int* cancel = cancel_flag();
  knn_progress* const report = progress();
  // Parts in order of their seeds: points by descending z, ties by index.
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(), [&z](int32_t a, int32_t b) {
    return z[static_cast<size_t>(a)] > z[static_cast<size_t>(b)];
  });
  PointHeap heap(n);
  std::vector<char> reached(static_cast<size_t>(n), 0);
  int64_t oriented = 0;
  for (const int32_t seed : order) {
    if (reached[static_cast<size_t>(seed)]) continue;
    sign_seed(normals, seed);
    int32_t next = seed;
    int32_t parent = -1;
    for (;;) {
      reached[static_cast<size_t>(next)] = 1;
      heap.close(next);
      if (parent >= 0 && dot(normals, parent, next) < 0)
        for (int d = 0; d < 3; ++d)
          normals[static_cast<size_t>(3 * next + d)] = -normals[static_cast<size_t>(3 * next + d)];
      if (++oriented % kCancelPoints == 0) {
        throw_if_cancelled(cancel);
        progress_add(report, kCancelPoints);
      }
      for (int64_t e = graph.offsets[static_cast<size_t>(next)];
           e < graph.offsets[static_cast<size_t>(next) + 1]; ++e) {
        const int32_t t = graph.targets[static_cast<size_t>(e)];
        if (reached[static_cast<size_t>(t)]) continue;
        const double w = 1.0 - std::abs(dot(normals, next, t));
        heap.offer(t, next, EdgeKey{w, std::min(next, t), std::max(next, t)});
      }
      if (heap.empty()) break;
      next = heap.pop(&parent);
    }
  }
  progress_add(report, oriented % kCancelPoints);
}

}  // namespace knn
