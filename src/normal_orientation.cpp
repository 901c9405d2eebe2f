// Consistent orientation of normals (src/normal_orientation.h).
//
// Edge weights are ordered by (weight, smaller id, larger id), a total order
// on the edges, so the minimum spanning forest is unique and every algorithm
// for it finds the same forest. Boruvka's runs in parallel rounds: every
// component takes its lightest edge to another (each such edge belongs to
// the forest) and the components these edges join merge. Each point's
// adjacency row is sorted by key once, so that its lightest edge out of its
// component is the first of its row that leaves it. The orientation then
// spreads from each part's seed over the forest, level by level, each child
// signed from its parent alone: the result is the same whatever the thread
// count and the order in which the threads meet.
//
// Host memory beyond the caller's: the adjacency rows (8 bytes per point and
// per listed neighbour), 48 bytes per point more during the rounds, then 44
// during the spread.
#include "normal_orientation.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "../common/host_vector.h"
#include "../common/prefetch.h"
#include "../common/team_size.h"
#include "../engine/cancel.h"
#include "../engine/progress.h"
#include "device_choice.h"  // share_begin: the contiguous blocks of a loop, as of a call's shares

namespace knn {
namespace {

// Items per thread below which a loop leaves threads idle (team_for): waking
// the team costs more than a few thousand points of this work.
constexpr int64_t kGrain = 4096;

// How many points ahead a loop over the points asks for the data of their
// neighbours (common/prefetch.h): the neighbours lie at random places, and
// the sort of the rows spent a fifth of its time waiting for their normals.
constexpr int64_t kAhead = 4;

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

// The weight ignores the normals' signs (negation is exact), so it is the
// same before and after orientation and from either end. A NaN weight
// (normals the library writes are never NaN) counts as +infinity: under an
// order that is not total the sort of a row and the rounds' merges could
// loop or overrun their arrays.
EdgeKey edge_key(const std::vector<double>& normals, int32_t a, int32_t b) {
  const double weight = 1.0 - std::abs(dot(normals, a, b));
  return EdgeKey{std::isnan(weight) ? std::numeric_limits<double>::infinity() : weight,
                 std::min(a, b), std::max(a, b)};
}

void negate(std::vector<double>& normals, int64_t i) {
  for (int d = 0; d < 3; ++d)
    normals[static_cast<size_t>(3 * i + d)] = -normals[static_cast<size_t>(3 * i + d)];
}

// The seed's sign rule: its first non-zero of (z, y, x) positive.
void sign_seed(std::vector<double>& normals, int64_t i) {
  for (int c = 2; c >= 0; --c) {
    const double v = normals[static_cast<size_t>(3 * i + c)];
    if (v == 0) continue;
    if (v < 0) negate(normals, i);
    return;
  }
}

// Runs task(t, stop) for t in [0, tasks), one per thread, in one parallel
// region (the calling thread alone for one task), then throws if the loop
// was stopped: an exception cannot leave an OpenMP region. One region per
// pass rather than one per run of kCancelRunItems (for_each_run): each
// region ends in a barrier, which on a loaded machine waits for a
// descheduled thread.
template <class Task>
void on_threads(int tasks, const volatile int* cancel, Task&& task) {
  LoopStop stop(cancel);
  if (tasks == 1) {
    task(0, stop);
  } else {
#pragma omp parallel for num_threads(tasks) schedule(static, 1)
    for (int t = 0; t < tasks; ++t) task(t, stop);
  }
  if (stop.stopped()) throw_cancelled();
}

// body(begin, end) over [first, last) in runs of kCancelRunItems, the flag
// polled before each.
template <class Body>
void in_runs(int64_t first, int64_t last, LoopStop& stop, Body&& body) {
  for (int64_t begin = first; begin < last && !stop.poll(); begin += kCancelRunItems)
    body(begin, std::min(last, begin + kCancelRunItems));
}

// Runs body(begin, end) over [0, count) on contiguous blocks, one per
// thread; a small loop stays on the calling thread (the spread runs
// thousands of narrow levels).
template <class Body>
void for_blocks(int64_t count, int team, const volatile int* cancel, Body&& body) {
  const int blocks = team_for(team, count, kGrain);
  on_threads(blocks, cancel, [&](int b, LoopStop& stop) {
    in_runs(share_begin(count, blocks, b), share_begin(count, blocks, b + 1), stop, body);
  });
}

template <class Body>
void parallel_for(int64_t count, int team, const volatile int* cancel, Body&& body) {
  for_blocks(count, team, cancel, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) body(i);
  });
}

// Writes to `out`, in the order of i over [0, count), the items that emit(i,
// at) writes at `at` (returning how many: items_of(i)), called once for each
// i; returns their number.
// Each block counts its items, then writes them from its own start; a small
// loop writes them in one pass on the calling thread.
template <class ItemsOf, class Emit>
int64_t concatenate(int64_t count, int team, const volatile int* cancel, ItemsOf&& items_of,
                    Emit&& emit, int32_t* out) {
  const int blocks = team_for(team, count, kGrain);
  std::vector<int64_t> start(static_cast<size_t>(blocks) + 1, 0);
  std::vector<int32_t*> at(static_cast<size_t>(blocks), out);
  const auto write = [&](int b, LoopStop& stop) {
    in_runs(share_begin(count, blocks, b), share_begin(count, blocks, b + 1), stop,
            [&](int64_t begin, int64_t end) {
              int32_t* to = at[static_cast<size_t>(b)];  // a local: no false sharing
              for (int64_t i = begin; i < end; ++i) to += emit(i, to);
              at[static_cast<size_t>(b)] = to;
            });
  };
  if (blocks == 1) {
    on_threads(1, cancel, write);
    return at[0] - out;
  }
  on_threads(blocks, cancel, [&](int b, LoopStop& stop) {
    in_runs(share_begin(count, blocks, b), share_begin(count, blocks, b + 1), stop,
            [&](int64_t begin, int64_t end) {
              int64_t items = 0;
              for (int64_t i = begin; i < end; ++i) items += items_of(i);
              start[static_cast<size_t>(b) + 1] += items;
            });
  });
  for (int b = 0; b < blocks; ++b) {
    start[static_cast<size_t>(b) + 1] += start[static_cast<size_t>(b)];
    at[static_cast<size_t>(b)] = out + start[static_cast<size_t>(b)];
  }
  on_threads(blocks, cancel, write);
  return start[static_cast<size_t>(blocks)];
}

// Writes value(i) of each i in [0, count) that keep(i) accepts, in order;
// returns their number.
template <class Keep, class Value>
int64_t select(int64_t count, int team, const volatile int* cancel, Keep&& keep, Value&& value,
               int32_t* out) {
  return concatenate(
      count, team, cancel, [&](int64_t i) -> int64_t { return keep(i) ? 1 : 0; },
      [&](int64_t i, int32_t* at) -> int64_t {
        if (!keep(i)) return 0;
        *at = value(i);
        return 1;
      },
      out);
}

// n atomics, each set to `value`.
template <class T>
std::unique_ptr<std::atomic<T>[]> atomics(int64_t n, T value, int team,
                                          const volatile int* cancel) {
  std::unique_ptr<std::atomic<T>[]> a(new std::atomic<T>[static_cast<size_t>(n)]);
  parallel_for(n, team, cancel, [&](int64_t i) { a[i].store(value, std::memory_order_relaxed); });
  return a;
}

// Replaces `slot` by `candidate` while `better(candidate, current)`: an
// atomic minimum under a total order, so its result is the same whatever
// the order of the threads' offers.
template <class Better>
void offer(std::atomic<int32_t>& slot, int32_t candidate, Better&& better) {
  int32_t current = slot.load(std::memory_order_relaxed);
  while ((current < 0 || better(candidate, current)) &&
         !slot.compare_exchange_weak(current, candidate, std::memory_order_relaxed)) {
  }
}

// An undirected graph as adjacency rows: offsets[i] .. offsets[i + 1] in
// targets.
struct Adjacency {
  HostVector<int64_t> offsets;
  HostVector<int32_t> targets;
  int64_t degree(int64_t i) const {
    return offsets[static_cast<size_t>(i) + 1] - offsets[static_cast<size_t>(i)];
  }
};

// The rows of the pairs (a, b) that pairs_of(s, visit) passes to visit for
// each source s in [0, sources), each pair in both rows, in order. Each thread
// owns a block of rows and reads every pair (in order, cheap beside the
// writes at random places), writing into its own rows alone: atomic
// increments would serialise the cache misses (an x86 atomic is a fence)
// and made this build twice as slow.
template <class PairsOf>
Adjacency adjacency(int64_t n, int64_t sources, PairsOf&& pairs_of, int team,
                    const volatile int* cancel) {
  const int owners = team_for(team, n, kGrain);
  const auto each_pair = [&](auto&& visit) {
    on_threads(owners, cancel, [&](int o, LoopStop& stop) {
      const int64_t low = share_begin(n, owners, o), high = share_begin(n, owners, o + 1);
      in_runs(0, sources, stop, [&](int64_t begin, int64_t end) {
        for (int64_t s = begin; s < end; ++s)
          pairs_of(s, [&](int32_t a, int32_t b) {
            if (a >= low && a < high) visit(a, b);
            if (b >= low && b < high) visit(b, a);
          });
      });
    });
  };
  Adjacency rows;
  HostVector<int64_t>& offsets = rows.offsets;
  offsets.resize(static_cast<size_t>(n) + 1);
  parallel_for(n + 1, team, cancel, [&](int64_t i) { offsets[static_cast<size_t>(i)] = 0; });
  each_pair([&](int32_t row, int32_t) { ++offsets[static_cast<size_t>(row)]; });
  // The rows' starts; the fill advances each to its row's end, then the
  // starts move up one place.
  int64_t total = 0;
  for_each_run(n + 1, cancel, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t count = offsets[static_cast<size_t>(i)];
      offsets[static_cast<size_t>(i)] = total;
      total += count;
    }
  });
  rows.targets.resize(static_cast<size_t>(total));
  each_pair([&](int32_t row, int32_t other) {
    rows.targets[static_cast<size_t>(offsets[static_cast<size_t>(row)]++)] = other;
  });
  std::copy_backward(offsets.begin(), offsets.end() - 1, offsets.end());
  offsets[0] = 0;
  return rows;
}

// Sorts the row of point i by the keys of its edges. A row that fits the
// buffer (a kNN row holds about 2 g) computes each key once; a longer one (a
// point that many others list) computes them in every comparison.
void sort_row(const std::vector<double>& normals, int32_t i, int32_t* begin, int32_t* end) {
  constexpr int64_t kBuffered = 64;
  const int64_t count = end - begin;
  if (count > kBuffered) {
    std::sort(begin, end, [&](int32_t a, int32_t b) {
      return edge_key(normals, i, a) < edge_key(normals, i, b);
    });
    return;
  }
  EdgeKey keys[kBuffered];
  for (int64_t j = 0; j < count; ++j) keys[j] = edge_key(normals, i, begin[j]);
  std::sort(keys, keys + count);
  for (int64_t j = 0; j < count; ++j) begin[j] = keys[j].low == i ? keys[j].high : keys[j].low;
}

// The minimum spanning forest: part[i] names i's connected part (one of its
// points), edges holds the forest's edge_count edges as pairs.
struct Forest {
  HostVector<int32_t> part;
  HostVector<int32_t> edges;
  int64_t edge_count = 0;
};

// Boruvka's rounds. Each round: every point's lightest edge leaving its
// component (edges inside it dropped from its row for good), the least of
// them per component (an atomic minimum), then the merge: a component hooks
// to the one its edge reaches, except that of two components that chose the
// same edge (no longer cycle can form under a total order) the one of smaller
// id stays a root, and records the edge alone; pointer jumping then takes
// every hook to its root. Each round at least halves the components that
// still have an edge out, so there are O(log n) rounds.
Forest spanning_forest(const std::vector<double>& normals, const std::vector<int32_t>& neighbours,
                       int64_t n, int g, int team, const volatile int* cancel,
                       knn_progress* report) {
  Adjacency graph = adjacency(
      n, n,
      [&](int64_t i, auto&& visit) {
        for (int j = 0; j < g; ++j) {
          const int32_t t = neighbours[static_cast<size_t>(i * g + j)];
          if (t >= 0 && t != i) visit(static_cast<int32_t>(i), t);
        }
      },
      team, cancel);
  Forest forest;
  forest.part.resize(static_cast<size_t>(n));
  forest.edges.resize(static_cast<size_t>(2 * std::max<int64_t>(n - 1, 0)));
  HostVector<int32_t>& component = forest.part;
  // Rows sorted by key: a point's lightest edge out of its component is then
  // the first of its row that leaves it, and the edges before it, inside
  // the component for good, are never read again.
  HostVector<int64_t> row_next(static_cast<size_t>(n));
  HostVector<double> candidate_weight(static_cast<size_t>(n));
  HostVector<int32_t> candidate(static_cast<size_t>(n));  // -1: none
  HostVector<int32_t> roots(static_cast<size_t>(n)), next_roots(static_cast<size_t>(n));
  parallel_for(n, team, cancel, [&](int64_t i) {
    component[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    roots[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    row_next[static_cast<size_t>(i)] = graph.offsets[static_cast<size_t>(i)];
    if (i + kAhead < n)
      for (int64_t e = graph.offsets[static_cast<size_t>(i + kAhead)];
           e < graph.offsets[static_cast<size_t>(i + kAhead) + 1]; ++e)
        prefetch_line(&normals[3 * static_cast<size_t>(graph.targets[static_cast<size_t>(e)])],
                      false);
    const int64_t begin = graph.offsets[static_cast<size_t>(i)];
    const int64_t end = graph.offsets[static_cast<size_t>(i) + 1];
    sort_row(normals, static_cast<int32_t>(i), graph.targets.data() + begin,
             graph.targets.data() + end);
    const int32_t t = begin < end ? graph.targets[static_cast<size_t>(begin)] : -1;
    candidate[static_cast<size_t>(i)] = t;
    if (t >= 0)
      candidate_weight[static_cast<size_t>(i)] =
          edge_key(normals, static_cast<int32_t>(i), t).weight;
  });
  // lightest[c]: the point whose candidate is component c's lightest edge.
  const std::unique_ptr<std::atomic<int32_t>[]> lightest = atomics<int32_t>(n, -1, team, cancel);
  const std::unique_ptr<std::atomic<int32_t>[]> hook(
      new std::atomic<int32_t>[static_cast<size_t>(n)]);
  parallel_for(n, team, cancel, [&](int64_t i) {
    hook[i].store(static_cast<int32_t>(i), std::memory_order_relaxed);
  });
  const auto candidate_key = [&](int32_t i) {
    const int32_t t = candidate[static_cast<size_t>(i)];
    return EdgeKey{candidate_weight[static_cast<size_t>(i)], std::min(i, t), std::max(i, t)};
  };
  const auto lighter = [&](int32_t a, int32_t b) { return candidate_key(a) < candidate_key(b); };
  int64_t root_count = n;
  // A component's edges out lead to components that have edges out too, so
  // one such component left has none: the forest is complete.
  while (root_count > 1) {
    parallel_for(n, team, cancel, [&](int64_t i) {
      const int32_t own = component[static_cast<size_t>(i)];
      const int64_t end = graph.offsets[static_cast<size_t>(i) + 1];
      int64_t e = row_next[static_cast<size_t>(i)];
      while (e < end &&
             component[static_cast<size_t>(graph.targets[static_cast<size_t>(e)])] == own)
        ++e;
      if (e == row_next[static_cast<size_t>(i)]) return;  // the same candidate
      row_next[static_cast<size_t>(i)] = e;
      const int32_t t = e < end ? graph.targets[static_cast<size_t>(e)] : -1;
      candidate[static_cast<size_t>(i)] = t;
      if (t >= 0)
        candidate_weight[static_cast<size_t>(i)] =
            edge_key(normals, static_cast<int32_t>(i), t).weight;
    });
    parallel_for(n, team, cancel, [&](int64_t i) {
      if (candidate[static_cast<size_t>(i)] >= 0)
        offer(lightest[component[static_cast<size_t>(i)]], static_cast<int32_t>(i), lighter);
    });
    // Each root's merge, its edge written by one of the two components
    // where both chose it.
    struct Merge {
      int32_t from, to, hook;
      bool records;
    };
    const auto merge_of = [&](int64_t r) {
      const int32_t c = roots[static_cast<size_t>(r)];
      const int32_t from = lightest[c].load(std::memory_order_relaxed);
      if (from < 0) return Merge{-1, -1, c, false};  // a finished part
      const int32_t to = candidate[static_cast<size_t>(from)];
      const int32_t other = component[static_cast<size_t>(to)];
      const int32_t back = lightest[other].load(std::memory_order_relaxed);
      const bool mutual = back == to && candidate[static_cast<size_t>(back)] == from;
      return Merge{from, to, mutual && c < other ? c : other, !mutual || c < other};
    };
    const int64_t found =
        concatenate(
            root_count, team, cancel,
            [&](int64_t r) -> int64_t { return merge_of(r).records ? 2 : 0; },
            [&](int64_t r, int32_t* at) -> int64_t {
              const Merge m = merge_of(r);
              hook[roots[static_cast<size_t>(r)]].store(m.hook, std::memory_order_relaxed);
              if (!m.records) return 0;
              at[0] = m.from, at[1] = m.to;
              return 2;
            },
            forest.edges.data() + 2 * forest.edge_count) /
        2;
    forest.edge_count += found;
    for (bool changed = true; changed;) {
      std::atomic<bool> moved{false};
      parallel_for(root_count, team, cancel, [&](int64_t r) {
        const int32_t c = roots[static_cast<size_t>(r)];
        const int32_t up = hook[c].load(std::memory_order_relaxed);
        const int32_t top = hook[up].load(std::memory_order_relaxed);
        if (top == up) return;
        hook[c].store(top, std::memory_order_relaxed);
        moved.store(true, std::memory_order_relaxed);
      });
      changed = moved.load(std::memory_order_relaxed);
    }
    parallel_for(n, team, cancel, [&](int64_t i) {
      int32_t& c = component[static_cast<size_t>(i)];
      c = hook[c].load(std::memory_order_relaxed);
    });
    // The next round's components: the roots that had an edge out.
    root_count = select(
        root_count, team, cancel,
        [&](int64_t r) {
          const int32_t c = roots[static_cast<size_t>(r)];
          return lightest[c].load(std::memory_order_relaxed) >= 0 &&
                 hook[c].load(std::memory_order_relaxed) == c;
        },
        [&](int64_t r) { return roots[static_cast<size_t>(r)]; }, next_roots.data());
    std::swap(roots, next_roots);
    parallel_for(root_count, team, cancel, [&](int64_t r) {
      lightest[roots[static_cast<size_t>(r)]].store(-1, std::memory_order_relaxed);
    });
    progress_add(report, found);
  }
  return forest;
}

}  // namespace

void orient_normals(std::vector<double>& normals, const std::vector<double>& z,
                    const std::vector<int32_t>& neighbours, int g, int threads) {
  const int64_t n = static_cast<int64_t>(z.size());
  const int team = team_size(threads);
  const volatile int* cancel = cancel_flag();
  knn_progress* const report = progress();
  const Forest forest = spanning_forest(normals, neighbours, n, g, team, cancel, report);
  const HostVector<int32_t>& part = forest.part;
  const Adjacency tree = adjacency(
      n, forest.edge_count,
      [&](int64_t e, auto&& visit) {
        visit(forest.edges[static_cast<size_t>(2 * e)],
              forest.edges[static_cast<size_t>(2 * e + 1)]);
      },
      team, cancel);
  // Each part's seed: its point of largest z, ties to the smaller id. A
  // block offers its best point of each run of points of one part, so that
  // a cloud in ascending z does not make every point fight for one atomic.
  const auto higher = [&z](int32_t a, int32_t b) {
    const double za = z[static_cast<size_t>(a)], zb = z[static_cast<size_t>(b)];
    return za > zb || (za == zb && a < b);
  };
  const std::unique_ptr<std::atomic<int32_t>[]> seed = atomics<int32_t>(n, -1, team, cancel);
  for_blocks(n, team, cancel, [&](int64_t begin, int64_t end) {
    int32_t run_part = -1, top = -1;
    for (int64_t i = begin; i < end; ++i) {
      const int32_t p = part[static_cast<size_t>(i)];
      if (p == run_part) {
        if (higher(static_cast<int32_t>(i), top)) top = static_cast<int32_t>(i);
        continue;
      }
      if (run_part >= 0) offer(seed[run_part], top, higher);
      run_part = p, top = static_cast<int32_t>(i);
    }
    if (run_part >= 0) offer(seed[run_part], top, higher);
  });
  // The spread, level by level from all seeds at once: a point's children
  // are its forest neighbours but its parent, and only its thread writes them.
  HostVector<int32_t> level(static_cast<size_t>(n)), next_level(static_cast<size_t>(n));
  HostVector<int32_t> parent(static_cast<size_t>(n));
  const int64_t parts = select(
      n, team, cancel, [&](int64_t i) { return part[static_cast<size_t>(i)] == i; },
      [&](int64_t i) { return seed[i].load(std::memory_order_relaxed); }, level.data());
  parallel_for(parts, team, cancel, [&](int64_t s) {
    const int32_t i = level[static_cast<size_t>(s)];
    parent[static_cast<size_t>(i)] = -1;
    sign_seed(normals, i);
  });
  for (int64_t width = parts; width > 0;) {
    const int64_t count = width;
    width = concatenate(
        width, team, cancel,
        [&](int64_t s) -> int64_t {
          const int32_t i = level[static_cast<size_t>(s)];
          return tree.degree(i) - (parent[static_cast<size_t>(i)] >= 0);
        },
        [&](int64_t s, int32_t* at) -> int64_t {
          // Ahead: the row and normal of a later point, then its children's
          // normals once its row has arrived.
          if (s + 2 * kAhead < count) {
            const size_t far = static_cast<size_t>(level[static_cast<size_t>(s + 2 * kAhead)]);
            prefetch_line(&tree.offsets[far], false);
            prefetch_line(&normals[3 * far], false);
          }
          if (s + kAhead < count) {
            const size_t near = static_cast<size_t>(level[static_cast<size_t>(s + kAhead)]);
            for (int64_t e = tree.offsets[near]; e < tree.offsets[near + 1]; ++e)
              prefetch_line(&normals[3 * static_cast<size_t>(tree.targets[static_cast<size_t>(e)])],
                            false);
          }
          const int32_t i = level[static_cast<size_t>(s)];
          int64_t children = 0;
          for (int64_t e = tree.offsets[static_cast<size_t>(i)];
               e < tree.offsets[static_cast<size_t>(i) + 1]; ++e) {
            const int32_t child = tree.targets[static_cast<size_t>(e)];
            if (child == parent[static_cast<size_t>(i)]) continue;
            parent[static_cast<size_t>(child)] = i;
            if (dot(normals, i, child) < 0) negate(normals, child);
            at[children++] = child;
          }
          return children;
        },
        next_level.data());
    std::swap(level, next_level);
  }
  progress_add(report, parts);
}

}  // namespace knn
