// The OpenMP point-in-polygon engine: an adaptive quadtree over Morton-sorted
// points (common/quadtree_layout.h), queried polygon by polygon with the
// exact predicate (common/pip_predicate.h).
//
// Query: a polygon walks the tree from the root, carrying the edges that may
// cross a ray towards +x from a point of the current node: those meeting the
// band right of the node's box (x >= box.min_x, box.min_y <= y <= box.max_y).
// A point's crossing parity over that superset of its crossing edges is its
// parity over the whole polygon, so leaves test their points against a few
// edges only. A node whose closed box meets no edge lies entirely inside or
// entirely outside the polygon (the box is connected and meets no edge, so
// every point in it gets the same answer, see the boundary rule in
// pip_predicate.h); one of its points decides for all. Results are sorted
// per polygon.
//
// One template serves both precisions: P is the points' scalar, V the
// polygon vertices' (float or double each); tests that mix them compare or
// compute in pip::Common<P, V>, exactly.
//
// Cancellation: the build reads the caller's flag between runs of its passes
// over the points (engine/cancel.h, for_each_run) and at every node; the
// queries between tasks and at every node a task visits.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <vector>

#include "../common/error.h"
#include "../common/pip_predicate.h"
#include "../common/quadtree_layout.h"
#include "../common/team_size.h"
#include "../engine/cancel.h"
#include "../engine/quadtree_engine.h"
#include "../include/knn_gpgpu.h"
#include "omp_tuning.h"

namespace knn {
namespace omp {
namespace {

template <class T>
struct Box {
  T min_x, min_y, max_x, max_y;
};

template <class P>
struct Node {
  int64_t begin, end;   // range of the sorted order
  int64_t first_child;  // children are contiguous; -1 for a leaf
  int child_count;
  Box<P> box;  // tight bounding box of the node's points
};

template <class V>
struct Edge {
  V ax, ay, bx, by;
};

// Whether the edge may cross a ray towards +x from a point of the box: it
// reaches x >= box.min_x and its y-range meets the box's. Conservative (a
// superset of the crossing edges is all the parity needs).
template <class V, class P>
bool edge_meets_band(const Edge<V>& e, const Box<P>& box) {
  return std::max(e.ax, e.bx) >= box.min_x && std::max(e.ay, e.by) >= box.min_y &&
         std::min(e.ay, e.by) <= box.max_y;
}

// Crossing parity of the ray from (x, y) over `edges`; exact over the whole
// polygon when `edges` holds every edge that may cross that ray.
template <class V, class P>
bool odd_crossings(const std::vector<Edge<V>>& edges, P x, P y) {
  bool odd = false;
  for (const Edge<V>& e : edges)
    odd ^= pip::edge_crosses_ray<pip::Common<P, V>>(e.ax, e.ay, e.bx, e.by, x, y);
  return odd;
}

// Sorts (key << 32 | index) words, given in ascending index order, by key
// (the upper 32 bits), which orders them by key, then index: an LSD radix
// sort, 8 bits a pass (stable, so equal keys keep their ascending indices), reading
// the cancel flag between runs of each pass (std::sort of millions of words
// gives no point to poll at). Its buffer is 8 bytes a point, less than the
// tree's arrays that follow.
void sort_by_key(std::vector<uint64_t>& words, const volatile int* cancel) {
  const int64_t count = static_cast<int64_t>(words.size());
  std::vector<uint64_t> buffer;
  resize_polling(buffer, words.size(), cancel);
  for (int shift = 32; shift < 64; shift += 8) {
    int64_t start[257] = {0};
    for_each_run(count, cancel, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) ++start[((words[i] >> shift) & 255) + 1];
    });
    for (int digit = 0; digit < 256; ++digit) start[digit + 1] += start[digit];
    for_each_run(count, cancel, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) buffer[start[(words[i] >> shift) & 255]++] = words[i];
    });
    words.swap(buffer);
  }
}

// Sorts point indices (0 <= value < bound) ascending: an LSD radix sort, 8
// bits a pass and only the passes `bound` needs, for long runs (a polygon's
// indices arrive in Morton order, so a comparison sort would pay log k per
// index); std::sort for short ones.
void sort_indices(int64_t* first, int64_t* last, int64_t bound) {
  const size_t count = static_cast<size_t>(last - first);
  if (count < 1024) {
    std::sort(first, last);
    return;
  }
  std::vector<int64_t> buffer(count);
  int64_t* from = first;
  int64_t* to = buffer.data();
  for (int shift = 0; ((bound - 1) >> shift) > 0; shift += 8) {
    size_t start[257] = {0};
    for (size_t i = 0; i < count; ++i) ++start[((from[i] >> shift) & 255) + 1];
    for (int digit = 0; digit < 256; ++digit) start[digit + 1] += start[digit];
    for (size_t i = 0; i < count; ++i) to[start[(from[i] >> shift) & 255]++] = from[i];
    std::swap(from, to);
  }
  if (from != first) std::copy(from, from + count, first);
}

template <class A, class B>
bool boxes_overlap(const Box<A>& a, const Box<B>& b) {
  return a.min_x <= b.max_x && b.min_x <= a.max_x && a.min_y <= b.max_y && b.min_y <= a.max_y;
}

template <class V, class P>
bool point_in_box(V x, V y, const Box<P>& b) {
  return x >= b.min_x && x <= b.max_x && y >= b.min_y && y <= b.max_y;
}

// Whether the segment meets the closed box. Separating axes: x, y (the
// bounding boxes) and the segment's normal (all four corners strictly on one
// side, decided exactly). Exact, so "false" is certain.
template <class V, class P>
bool edge_touches_box(const Edge<V>& e, const Box<P>& b) {
  using C = pip::Common<P, V>;
  const Box<V> edge_box{std::min(e.ax, e.bx), std::min(e.ay, e.by), std::max(e.ax, e.bx),
                        std::max(e.ay, e.by)};
  if (!boxes_overlap(edge_box, b)) return false;
  if (point_in_box(e.ax, e.ay, b) || point_in_box(e.bx, e.by, b)) return true;
  const int s = pip::orientation_sign<C>(e.ax, e.ay, e.bx, e.by, b.min_x, b.min_y);
  if (s == 0) return true;
  return pip::orientation_sign<C>(e.ax, e.ay, e.bx, e.by, b.max_x, b.min_y) != s ||
         pip::orientation_sign<C>(e.ax, e.ay, e.bx, e.by, b.min_x, b.max_y) != s ||
         pip::orientation_sign<C>(e.ax, e.ay, e.bx, e.by, b.max_x, b.max_y) != s;
}

template <class P>
class OmpQuadtree final : public QuadtreeEngine {
 public:
  OmpQuadtree(const P* xy, int64_t n, const QuadtreeParams& params);
  int backend() const override { return KNN_BACKEND_OPENMP; }
  int64_t size() const override { return n_; }
  void count(const PolygonSet<float>& polygons, int64_t* counts,
             const QuadtreeParams& call) const override {
    count_polygons(polygons, counts, call);
  }
  void count(const PolygonSet<double>& polygons, int64_t* counts,
             const QuadtreeParams& call) const override {
    count_polygons(polygons, counts, call);
  }
  void fill(const PolygonSet<float>& polygons, const int64_t* out_offsets, int64_t* point_indices,
            const QuadtreeParams& call) const override {
    fill_polygons(polygons, out_offsets, point_indices, call);
  }
  void fill(const PolygonSet<double>& polygons, const int64_t* out_offsets, int64_t* point_indices,
            const QuadtreeParams& call) const override {
    fill_polygons(polygons, out_offsets, point_indices, call);
  }

 private:
  // One unit of parallel work: polygon `polygon` restricted to the subtree of
  // `node`.
  struct Task {
    int64_t polygon;
    int64_t node;
  };

  // What a traversal does with the points it finds inside: count them, or
  // also write their indices at `out` (advanced). It reads the caller's
  // cancel flag at every node (one polygon of 10^5 edges is seconds of one
  // task's work) and, once it is set, stops with `cancelled`.
  struct Sink {
    int64_t found = 0;
    int64_t* out = nullptr;
    const volatile int* cancel = nullptr;
    bool cancelled = false;

    bool stopped() {
      cancelled = cancelled || cancel_requested(cancel);
      return cancelled;
    }
  };

  template <class V>
  void count_polygons(const PolygonSet<V>& polygons, int64_t* counts,
                      const QuadtreeParams& call) const;
  template <class V>
  void fill_polygons(const PolygonSet<V>& polygons, const int64_t* out_offsets,
                     int64_t* point_indices, const QuadtreeParams& call) const;
  void build_node(int64_t node, int depth, uint32_t first_key, const volatile int* cancel);
  std::vector<Task> make_tasks(int64_t n_polygons, int threads) const;
  template <class V>
  void run_task(const PolygonSet<V>& polygons, const Task& task, std::vector<Edge<V>>* scratch,
                Sink& sink) const;
  template <class V>
  void visit(const Box<V>& polygon_box, int64_t node, int depth, std::vector<Edge<V>>* scratch,
             Sink& sink) const;
  void emit_range(int64_t begin, int64_t end, Sink& sink) const;
  // Runs body(task_index, scratch, sink) over the tasks on `threads` threads,
  // polling the caller's cancellation flag between tasks, and within them
  // through the task's sink; scratch holds the thread's edge lists (of vertex
  // scalar V) per depth.
  template <class V, class Body>
  void for_each_task(int64_t n_tasks, int threads, const Body& body) const;

  int64_t n_;
  int leaf_capacity_;
  std::vector<uint32_t> keys_;  // sorted
  std::vector<P> x_, y_;        // in sorted order
  std::vector<int64_t> index_;  // original index of each sorted point
  std::vector<Node<P>> nodes_;  // nodes_[0] is the root
};

template <class P>
OmpQuadtree<P>::OmpQuadtree(const P* xy, int64_t n, const QuadtreeParams& params)
    : n_(n),
      leaf_capacity_(params.leaf_capacity > 0 ? params.leaf_capacity : kQuadtreeLeafCapacity) {
  if (n == 0) return;
  const int threads = team_size(params.threads);
  const volatile int* cancel = cancel_flag();
  P min_x = xy[0], min_y = xy[1], max_x = xy[0], max_y = xy[1];
  for_each_run(n, cancel, [&](int64_t begin, int64_t end) {
#pragma omp parallel for num_threads(threads) reduction(min                           \
                                                        : min_x, min_y) reduction(max \
                                                                                  : max_x, max_y)
    for (int64_t i = begin; i < end; ++i) {
      min_x = std::min(min_x, xy[2 * i]);
      max_x = std::max(max_x, xy[2 * i]);
      min_y = std::min(min_y, xy[2 * i + 1]);
      max_y = std::max(max_y, xy[2 * i + 1]);
    }
  });
  const quadtree::Quantiser quantiser = quadtree::make_quantiser(min_x, min_y, max_x, max_y);
  // (key, index) packed into one word: n < 2^31 (checked by the API), so the
  // order of the words is the order by key, then index.
  std::vector<uint64_t> order;
  order.reserve(static_cast<size_t>(n));
  for_each_run(n, cancel, [&](int64_t begin, int64_t end) {
    order.resize(static_cast<size_t>(end));
#pragma omp parallel for num_threads(threads)
    for (int64_t i = begin; i < end; ++i)
      order[i] =
          (static_cast<uint64_t>(quadtree::point_key(quantiser, xy[2 * i], xy[2 * i + 1])) << 32) |
          static_cast<uint64_t>(i);
  });
  sort_by_key(order, cancel);
  keys_.reserve(static_cast<size_t>(n));
  x_.reserve(static_cast<size_t>(n));
  y_.reserve(static_cast<size_t>(n));
  index_.reserve(static_cast<size_t>(n));
  for_each_run(n, cancel, [&](int64_t begin, int64_t end) {
    const size_t filled = static_cast<size_t>(end);
    keys_.resize(filled), x_.resize(filled), y_.resize(filled), index_.resize(filled);
#pragma omp parallel for num_threads(threads)
    for (int64_t s = begin; s < end; ++s) {
      const int64_t i = static_cast<int64_t>(order[s] & 0xffffffffu);
      keys_[s] = static_cast<uint32_t>(order[s] >> 32);
      x_[s] = xy[2 * i];
      y_[s] = xy[2 * i + 1];
      index_[s] = i;
    }
  });
  nodes_.push_back(Node<P>{0, n, -1, 0, Box<P>{}});
  build_node(0, 0, 0, cancel);
}

// Splits node `node` (its range set) while it holds more than the leaf
// capacity and is coarser than one cell; sets its children and box. Reads
// the cancel flag at every node (a load, against a node's binary searches).
template <class P>
void OmpQuadtree<P>::build_node(int64_t node, int depth, uint32_t first_key,
                                const volatile int* cancel) {
  throw_if_cancelled(cancel);
  const int64_t begin = nodes_[node].begin;
  const int64_t end = nodes_[node].end;
  if (end - begin <= leaf_capacity_ || depth == quadtree::kMaxDepth) {
    Box<P> box{x_[begin], y_[begin], x_[begin], y_[begin]};
    for (int64_t s = begin + 1; s < end; ++s) {
      box.min_x = std::min(box.min_x, x_[s]);
      box.max_x = std::max(box.max_x, x_[s]);
      box.min_y = std::min(box.min_y, y_[s]);
      box.max_y = std::max(box.max_y, y_[s]);
    }
    nodes_[node].box = box;
    return;
  }
  // Quadrant q holds keys [bound[q], bound[q+1]).
  int64_t bound[5];
  bound[0] = begin;
  bound[4] = end;
  for (uint32_t q = 1; q < 4; ++q)
    bound[q] = std::lower_bound(keys_.begin() + begin, keys_.begin() + end,
                                quadtree::child_first_key(first_key, depth, q)) -
               keys_.begin();
  const int64_t first_child = static_cast<int64_t>(nodes_.size());
  int child_count = 0;
  for (int q = 0; q < 4; ++q)
    if (bound[q + 1] > bound[q]) {
      nodes_.push_back(Node<P>{bound[q], bound[q + 1], -1, 0, Box<P>{}});
      ++child_count;
    }
  nodes_[node].first_child = first_child;
  nodes_[node].child_count = child_count;
  int64_t child = first_child;
  for (uint32_t q = 0; q < 4; ++q)
    if (bound[q + 1] > bound[q])
      build_node(child++, depth + 1, quadtree::child_first_key(first_key, depth, q), cancel);
  Box<P> box = nodes_[first_child].box;
  for (int64_t c = first_child + 1; c < first_child + child_count; ++c) {
    const Box<P>& b = nodes_[c].box;
    box = Box<P>{std::min(box.min_x, b.min_x), std::min(box.min_y, b.min_y),
                 std::max(box.max_x, b.max_x), std::max(box.max_y, b.max_y)};
  }
  nodes_[node].box = box;
}

// Many polygons: one task per polygon. Few polygons (fewer than a handful per
// thread): each polygon is cut into the subtrees of a frontier of nodes, so
// that the threads share the work of one large polygon.
template <class P>
std::vector<typename OmpQuadtree<P>::Task> OmpQuadtree<P>::make_tasks(int64_t n_polygons,
                                                                      int threads) const {
  std::vector<int64_t> frontier{0};
  const bool split_polygons = n_polygons < 8 * static_cast<int64_t>(threads);
  for (int depth = 0; split_polygons && depth < 6 &&
                      static_cast<int64_t>(frontier.size()) < 16 * static_cast<int64_t>(threads);
       ++depth) {
    std::vector<int64_t> next;
    for (const int64_t node : frontier) {
      if (nodes_[node].first_child < 0) {
        next.push_back(node);
        continue;
      }
      for (int c = 0; c < nodes_[node].child_count; ++c)
        next.push_back(nodes_[node].first_child + c);
    }
    frontier.swap(next);
  }
  std::vector<Task> tasks;
  tasks.reserve(static_cast<size_t>(n_polygons) * frontier.size());
  for (int64_t p = 0; p < n_polygons; ++p)
    for (const int64_t node : frontier) tasks.push_back(Task{p, node});
  return tasks;
}

template <class P>
void OmpQuadtree<P>::emit_range(int64_t begin, int64_t end, Sink& sink) const {
  sink.found += end - begin;
  if (sink.out == nullptr) return;
  sink.out = std::copy(index_.begin() + begin, index_.begin() + end, sink.out);
}

template <class P>
template <class V>
void OmpQuadtree<P>::run_task(const PolygonSet<V>& polygons, const Task& task,
                              std::vector<Edge<V>>* scratch, Sink& sink) const {
  const int64_t first_ring = polygons.polygon_offsets[task.polygon];
  const int64_t end_ring = polygons.polygon_offsets[task.polygon + 1];
  std::vector<Edge<V>>& edges = scratch[0];
  edges.clear();
  const V* xy = polygons.xy;
  Box<V> box{
      xy[2 * polygons.ring_offsets[first_ring]], xy[2 * polygons.ring_offsets[first_ring] + 1],
      xy[2 * polygons.ring_offsets[first_ring]], xy[2 * polygons.ring_offsets[first_ring] + 1]};
  for (int64_t r = first_ring; r < end_ring; ++r) {
    const int64_t begin = polygons.ring_offsets[r];
    const int64_t end = polygons.ring_offsets[r + 1];
    for (int64_t v = begin; v < end; ++v) {
      const int64_t w = v + 1 < end ? v + 1 : begin;
      edges.push_back(Edge<V>{xy[2 * v], xy[2 * v + 1], xy[2 * w], xy[2 * w + 1]});
      box = Box<V>{std::min(box.min_x, xy[2 * v]), std::min(box.min_y, xy[2 * v + 1]),
                   std::max(box.max_x, xy[2 * v]), std::max(box.max_y, xy[2 * v + 1])};
    }
  }
  visit(box, task.node, 1, scratch, sink);
}

// scratch[depth - 1] holds the edges that meet the parent's band;
// scratch[depth] receives those that meet this node's.
template <class P>
template <class V>
void OmpQuadtree<P>::visit(const Box<V>& polygon_box, int64_t node_id, int depth,
                           std::vector<Edge<V>>* scratch, Sink& sink) const {
  const Node<P>& node = nodes_[node_id];
  if (sink.stopped() || !boxes_overlap(node.box, polygon_box)) return;
  std::vector<Edge<V>>& edges = scratch[depth];
  edges.clear();
  bool box_touched = false;
  for (const Edge<V>& e : scratch[depth - 1])
    if (edge_meets_band(e, node.box)) {
      edges.push_back(e);
      box_touched = box_touched || edge_touches_box(e, node.box);
    }
  if (!box_touched) {
    if (odd_crossings(edges, x_[node.begin], y_[node.begin]))
      emit_range(node.begin, node.end, sink);
    return;
  }
  if (node.first_child < 0) {
    for (int64_t s = node.begin; s < node.end; ++s)
      if (odd_crossings(edges, x_[s], y_[s])) emit_range(s, s + 1, sink);
    return;
  }
  for (int c = 0; c < node.child_count; ++c)
    visit(polygon_box, node.first_child + c, depth + 1, scratch, sink);
}

template <class P>
template <class V, class Body>
void OmpQuadtree<P>::for_each_task(int64_t n_tasks, int threads, const Body& body) const {
  const volatile int* flag = cancel_flag();
  // An exception must not leave an OpenMP region: the first one is kept and
  // rethrown after it, and the other tasks are skipped.
  LoopStop stop(flag);
  std::exception_ptr failure;
#pragma omp parallel num_threads(threads)
  {
    // Edge lists per depth: the polygon's edges, then one list per level.
    std::vector<Edge<V>> scratch[quadtree::kMaxDepth + 2];
#pragma omp for schedule(dynamic, 16)
    for (int64_t t = 0; t < n_tasks; ++t) {
      if (stop.poll()) continue;
      try {
        Sink sink;
        sink.cancel = flag;
        body(t, scratch, sink);
        if (sink.cancelled) stop.set();
      } catch (...) {
#pragma omp critical(knn_omp_quadtree_failure)
        if (!failure) failure = std::current_exception();
        stop.set();
      }
    }
  }
  if (failure) std::rethrow_exception(failure);
  // Stopped by the flag (which may have been reset since): the results are
  // incomplete either way.
  if (stop.stopped()) fail(KNN_ERR_CANCELLED, "cancelled by the caller's flag");
}

template <class P>
template <class V>
void OmpQuadtree<P>::count_polygons(const PolygonSet<V>& polygons, int64_t* counts,
                                    const QuadtreeParams& call) const {
  std::fill(counts, counts + polygons.n_polygons, int64_t{0});
  if (n_ == 0 || polygons.n_polygons == 0) return;
  const int threads = team_size(call.threads);
  const std::vector<Task> tasks = make_tasks(polygons.n_polygons, threads);
  std::vector<int64_t> found(tasks.size());
  for_each_task<V>(static_cast<int64_t>(tasks.size()), threads,
                   [&](int64_t t, std::vector<Edge<V>>* scratch, Sink& sink) {
                     run_task(polygons, tasks[t], scratch, sink);
                     found[t] = sink.found;
                   });
  for (size_t t = 0; t < tasks.size(); ++t) counts[tasks[t].polygon] += found[t];
}

template <class P>
template <class V>
void OmpQuadtree<P>::fill_polygons(const PolygonSet<V>& polygons, const int64_t* out_offsets,
                                   int64_t* point_indices, const QuadtreeParams& call) const {
  if (n_ == 0 || polygons.n_polygons == 0) return;
  const int threads = team_size(call.threads);
  const std::vector<Task> tasks = make_tasks(polygons.n_polygons, threads);
  const int64_t n_tasks = static_cast<int64_t>(tasks.size());
  // Where each task writes: its polygon's slice, after the tasks of the same
  // polygon before it. With one task per polygon that is the slice's start;
  // otherwise a counting pass finds the tasks' sizes first.
  std::vector<int64_t> start(tasks.size());
  if (n_tasks == polygons.n_polygons) {
    for (int64_t t = 0; t < n_tasks; ++t) start[t] = out_offsets[tasks[t].polygon];
  } else {
    std::vector<int64_t> found(tasks.size());
    for_each_task<V>(n_tasks, threads, [&](int64_t t, std::vector<Edge<V>>* scratch, Sink& sink) {
      run_task(polygons, tasks[t], scratch, sink);
      found[t] = sink.found;
    });
    int64_t cursor = 0;
    for (int64_t t = 0; t < n_tasks; ++t) {
      if (t == 0 || tasks[t].polygon != tasks[t - 1].polygon)
        cursor = out_offsets[tasks[t].polygon];
      start[t] = cursor;
      cursor += found[t];
    }
  }
  for_each_task<V>(n_tasks, threads, [&](int64_t t, std::vector<Edge<V>>* scratch, Sink& sink) {
    sink.out = point_indices + start[t];
    run_task(polygons, tasks[t], scratch, sink);
  });
  // Ascending within each polygon: subtrees emit in Morton order.
  for_each_task<V>(polygons.n_polygons, threads, [&](int64_t p, std::vector<Edge<V>>*, Sink&) {
    sort_indices(point_indices + out_offsets[p], point_indices + out_offsets[p + 1], n_);
  });
}

}  // namespace

template <typename Scalar>
std::unique_ptr<QuadtreeEngine> build_quadtree(const Scalar* xy, int64_t n,
                                               const QuadtreeParams& params) {
  return std::unique_ptr<QuadtreeEngine>(new OmpQuadtree<Scalar>(xy, n, params));
}

KNN_INSTANTIATE_BUILDER(KNN_QUADTREE_BUILDER);

}  // namespace omp
}  // namespace knn
