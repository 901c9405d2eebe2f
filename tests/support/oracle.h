// The tests' independent oracle: brute-force kNN with the contract's float32
// distance and (distance, index) order, a double-precision cross-check, a
// reference kd-tree builder written from the contract's layout rules, and a
// checker of every tree invariant the contract states.
//
// Nothing here comes from the library's sources. The float32 arithmetic is
// done by computing each operation in double and rounding it to float: the
// exact product of two floats fits in a double, and double rounding from 53 to
// 24 bits is innocuous for + - * (53 >= 2*24 + 2), so every step is the
// correctly rounded float32 operation whatever the compiler does about fused
// multiply-adds (the tests are compiled with -ffp-contract=off as well).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "knn_gpgpu.h"

namespace knn_test {

// ---- Small parallel loop (the oracle is the slow side of every test) ----------

template <class Fn>
void parallel_for(int64_t n, Fn fn) {
  const int64_t workers =
      std::max<int64_t>(1, std::min<int64_t>(n / 64, std::thread::hardware_concurrency()));
  if (workers <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::vector<std::thread> threads;
  for (int64_t w = 0; w < workers; ++w)
    threads.emplace_back([=, &fn] {
      for (int64_t i = w * n / workers; i < (w + 1) * n / workers; ++i) fn(i);
    });
  for (std::thread& t : threads) t.join();
}

// ---- The contract's squared distance ---------------------------------------------

// The brute-force loops run uninstrumented under the sanitizers
// (scripts/checks/sanitizers.sh): they are the slow side of the big tests
// (the all-kNN oracle of 20000 points took 34.7 s under ASan + UBSan, 3.4 s
// with these loops unchecked and the k-best heap below), and what the
// sanitizers check is the library, which stays instrumented. They touch
// only plain arrays.
#if defined(__GNUC__) || defined(__clang__)
#define KNN_ORACLE_UNCHECKED __attribute__((no_sanitize("address", "undefined")))
#else
#define KNN_ORACLE_UNCHECKED
#endif

KNN_ORACLE_UNCHECKED inline float f32_sub(float a, float b) {
  return static_cast<float>(static_cast<double>(a) - static_cast<double>(b));
}
KNN_ORACLE_UNCHECKED inline float f32_mul(float a, float b) {
  return static_cast<float>(static_cast<double>(a) * static_cast<double>(b));
}
KNN_ORACLE_UNCHECKED inline float f32_add(float a, float b) {
  return static_cast<float>(static_cast<double>(a) + static_cast<double>(b));
}

// ((d0*d0 + d1*d1) + d2*d2) + ...  with d_i = q_i - p_i, every step in float32.
KNN_ORACLE_UNCHECKED inline float contract_sq_distance(const float* q, const float* p, int dim) {
  float sum = 0.0f;
  for (int i = 0; i < dim; ++i) {
    const float d = f32_sub(q[i], p[i]);
    const float sq = f32_mul(d, d);
    sum = i == 0 ? sq : f32_add(sum, sq);
  }
  return sum;
}

KNN_ORACLE_UNCHECKED inline double double_sq_distance(const float* q, const float* p, int dim) {
  double sum = 0.0;
  for (int i = 0; i < dim; ++i) {
    const double d = static_cast<double>(q[i]) - static_cast<double>(p[i]);
    sum += d * d;
  }
  return sum;
}

// ---- Brute-force kNN -------------------------------------------------------------

struct KnnResult {
  int64_t m = 0;
  int k = 0;
  std::vector<int> idx;     // m * k, -1 where fewer than k points exist
  std::vector<float> dist;  // m * k, +infinity there
};

// The `keep` smallest (float32 distance, index) pairs offered, in pair order
// (the contract's order; indices are unique, so no two pairs tie), in a
// max-heap whose top is the keep-th so far.
class KBest {
 public:
  explicit KBest(size_t keep) : keep_(keep) { heap_.reserve(keep); }

  // Whether (d, index) would enter: while the heap is not full, every pair;
  // then one that precedes the keep-th. Inline for offer_rows' unchecked loop.
  KNN_ORACLE_UNCHECKED bool admits(float d, int index) const {
    return !full_ || d < worst_dist_ || (d == worst_dist_ && index < worst_index_);
  }

  void offer(float d, int index) {
    if (!admits(d, index)) return;
    const std::pair<float, int> c{d, index};
    if (full_) {
      std::pop_heap(heap_.begin(), heap_.end());
      heap_.back() = c;
    } else {
      heap_.push_back(c);
    }
    std::push_heap(heap_.begin(), heap_.end());
    full_ = heap_.size() >= keep_;
    if (full_ && keep_ > 0) worst_dist_ = heap_.front().first, worst_index_ = heap_.front().second;
  }

  // Writes the pairs in ascending order to idx[0..) and dist[0..).
  void write(int* idx, float* dist) {
    std::sort_heap(heap_.begin(), heap_.end());
    for (size_t j = 0; j < heap_.size(); ++j) idx[j] = heap_[j].second, dist[j] = heap_[j].first;
  }

 private:
  size_t keep_;
  std::vector<std::pair<float, int>> heap_;
  bool full_ = keep_ == 0;
  float worst_dist_ = 0.0f;
  int worst_index_ = 0;
};

// Offers best the rows j != skip of ref (n rows of dim) by their contract
// distance to q; only the pairs it admits leave the unchecked loop.
KNN_ORACLE_UNCHECKED inline void offer_rows(const float* q, const float* ref, int64_t n, int dim,
                                            int64_t skip, KBest& best) {
  for (int64_t j = 0; j < n; ++j) {
    if (j == skip) continue;
    const float d = contract_sq_distance(q, ref + j * dim, dim);
    if (best.admits(d, static_cast<int>(j))) best.offer(d, static_cast<int>(j));
  }
}

// k nearest of n reference rows for each of m query rows, by (float32
// distance, index).
inline KnnResult oracle_knn(const float* ref, int64_t n, const float* queries, int64_t m, int dim,
                            int k) {
  KnnResult r;
  r.m = m;
  r.k = k;
  r.idx.assign(static_cast<size_t>(m) * k, -1);
  r.dist.assign(static_cast<size_t>(m) * k, std::numeric_limits<float>::infinity());
  const int64_t keep = std::min<int64_t>(k, n);
  parallel_for(m, [&](int64_t i) {
    KBest best(static_cast<size_t>(keep));
    offer_rows(queries + i * dim, ref, n, dim, -1, best);
    best.write(r.idx.data() + i * k, r.dist.data() + i * k);
  });
  return r;
}

inline KnnResult oracle_knn(const std::vector<Point>& points, const std::vector<Point>& queries,
                            int k) {
  return oracle_knn(points.empty() ? nullptr : &points[0].p[0], static_cast<int64_t>(points.size()),
                    queries.empty() ? nullptr : &queries[0].p[0],
                    static_cast<int64_t>(queries.size()), 3, k);
}

// out[j]: the double distance of row j of ref (n rows of dim) to q.
KNN_ORACLE_UNCHECKED inline void double_sq_distances(const float* q, const float* ref, int64_t n,
                                                     int dim, double* out) {
  for (int64_t j = 0; j < n; ++j) out[j] = double_sq_distance(q, ref + j * dim, dim);
}

// The double-precision check: for each query and each slot j < min(k, n),
// the true (double) distance of the j-th neighbour returned equals the j-th
// smallest true distance within 1e-5 relative; in particular the k-th does.
// It catches an oracle and a library that agree on a wrong distance. (Rows
// stop at the first float32 distance that overflows to +inf.)
inline ::testing::AssertionResult kth_matches_double(const float* ref, int64_t n,
                                                     const float* queries, int64_t m, int dim,
                                                     int k, const int* idx) {
  const int64_t keep = std::min<int64_t>(k, n);
  if (keep <= 0) return ::testing::AssertionSuccess();
  struct Bad {
    int64_t slot = -1;
    double got = 0, want = 0;
  };
  std::vector<Bad> bad(static_cast<size_t>(m));
  parallel_for(m, [&](int64_t i) {
    const float* q = queries + i * dim;
    std::vector<double> all(static_cast<size_t>(n));
    double_sq_distances(q, ref, n, dim, all.data());
    std::partial_sort(all.begin(), all.begin() + keep, all.end());
    for (int64_t j = 0; j < keep; ++j) {
      const int id = idx[i * k + j];
      const bool valid = id >= 0 && id < n;
      // Past float32's range the contract's distance is +inf while the true
      // one is finite: nothing more to compare in this row.
      if (valid && std::isinf(contract_sq_distance(q, ref + int64_t{id} * dim, dim))) break;
      const double got = valid ? double_sq_distance(q, ref + int64_t{id} * dim, dim)
                               : std::numeric_limits<double>::infinity();
      // Relative, plus a few subnormal ulps for distances that underflow.
      const double tol = 1e-5 * std::max(all[j], got) + 4e-45 * (dim + 1);
      if (!(std::fabs(all[j] - got) <= tol)) {
        bad[i] = Bad{j, got, all[j]};
        break;
      }
    }
  });
  for (int64_t i = 0; i < m; ++i)
    if (bad[i].slot >= 0)
      return ::testing::AssertionFailure()
             << "query " << i << ": neighbour #" << bad[i].slot << " (index "
             << idx[i * k + bad[i].slot] << ") has double distance " << bad[i].got
             << ", the double oracle's is " << bad[i].want;
  return ::testing::AssertionSuccess();
}

// The first k columns of an answer computed for a larger k (the contract's
// order is total, so they are the answer for k).
inline KnnResult first_columns(const KnnResult& r, int k) {
  KnnResult out;
  out.m = r.m;
  out.k = k;
  for (int64_t i = 0; i < r.m; ++i) {
    out.idx.insert(out.idx.end(), r.idx.begin() + i * r.k, r.idx.begin() + i * r.k + k);
    out.dist.insert(out.dist.end(), r.dist.begin() + i * r.k, r.dist.begin() + i * r.k + k);
  }
  return out;
}

inline ::testing::AssertionResult kth_matches_double(const std::vector<Point>& points,
                                                     const std::vector<Point>& queries, int k,
                                                     const int* idx) {
  return kth_matches_double(points.empty() ? nullptr : &points[0].p[0],
                            static_cast<int64_t>(points.size()),
                            queries.empty() ? nullptr : &queries[0].p[0],
                            static_cast<int64_t>(queries.size()), 3, k, idx);
}

// Exact equality of two m x k index tables; the message shows the first
// differing row.
inline ::testing::AssertionResult same_rows(const int* expected, const int* actual, int64_t m,
                                            int k) {
  if (k <= 0) return ::testing::AssertionSuccess();  // rows of no slots (and maybe no arrays)
  int64_t mismatched_rows = 0, first = -1;
  for (int64_t i = 0; i < m; ++i)
    if (std::memcmp(expected + i * k, actual + i * k, sizeof(int) * static_cast<size_t>(k)) != 0) {
      if (first < 0) first = i;
      ++mismatched_rows;
    }
  if (first < 0) return ::testing::AssertionSuccess();
  std::ostringstream s;
  s << mismatched_rows << " of " << m << " rows differ; first is query " << first
    << ":\n  expected";
  const int show = std::min(k, 12);
  for (int j = 0; j < show; ++j) s << ' ' << expected[first * k + j];
  s << (k > show ? " ..." : "") << "\n  actual  ";
  for (int j = 0; j < show; ++j) s << ' ' << actual[first * k + j];
  s << (k > show ? " ..." : "");
  for (int j = 0; j < k; ++j)
    if (expected[first * k + j] != actual[first * k + j]) {
      s << "\n  first difference at slot " << j << ": expected " << expected[first * k + j]
        << ", actual " << actual[first * k + j];
      break;
    }
  return ::testing::AssertionFailure() << s.str();
}

inline ::testing::AssertionResult same_rows(const std::vector<int>& expected,
                                            const std::vector<int>& actual, int64_t m, int k) {
  if (expected.size() < static_cast<size_t>(m) * k || actual.size() < static_cast<size_t>(m) * k)
    return ::testing::AssertionFailure() << "result arrays are too short";
  return same_rows(expected.data(), actual.data(), m, k);
}

// Bit equality of float or double tables (distances: +infinity padding, -0.0
// vs +0.0).
template <typename Scalar>
::testing::AssertionResult same_bits(const std::vector<Scalar>& expected,
                                     const std::vector<Scalar>& actual) {
  if (expected.size() != actual.size())
    return ::testing::AssertionFailure()
           << "sizes differ: " << expected.size() << " vs " << actual.size();
  for (size_t i = 0; i < expected.size(); ++i)
    if (std::memcmp(&expected[i], &actual[i], sizeof(Scalar)) != 0)
      return ::testing::AssertionFailure()
             << "element " << i << ": expected " << expected[i] << ", actual " << actual[i];
  return ::testing::AssertionSuccess();
}

// ---- The kd-tree layout ------------------------------------------------------------

// Levels of an n-node balanced tree: ceil(log2(n + 1)).
inline int expected_height(int64_t n) {
  int h = 0;
  while ((int64_t{1} << h) - 1 < n) ++h;
  return h;
}

// Number of nodes below heap node i (itself included) in an n-node heap.
inline int64_t heap_subtree_size(int64_t i, int64_t n) {
  int64_t size = 0;
  for (int64_t first = i, width = 1; first < n; first = 2 * first + 1, width *= 2)
    size += std::min(width, n - first);
  return size;
}

// The tree the contract defines, built the slow, obvious way: each node takes
// the point at rank |left subtree| of its subtree's points sorted by
// (coordinate on depth mod 3, original index).
inline std::vector<Node> reference_tree(const std::vector<Point>& points) {
  const int64_t n = static_cast<int64_t>(points.size());
  std::vector<Node> tree(static_cast<size_t>(n));
  std::vector<int> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[i] = static_cast<int>(i);
  struct Task {
    int64_t begin, end, node;
    int depth;
  };
  std::vector<Task> stack{{0, n, 0, 0}};
  while (!stack.empty()) {
    const Task t = stack.back();
    stack.pop_back();
    if (t.node >= n) continue;
    const int dim = t.depth % 3;
    std::sort(order.begin() + t.begin, order.begin() + t.end, [&](int a, int b) {
      const float pa = points[a].p[dim], pb = points[b].p[dim];
      return pa < pb || (pa == pb && a < b);
    });
    const int64_t left = heap_subtree_size(2 * t.node + 1, n);
    const int id = order[t.begin + left];
    Node& node = tree[t.node];
    std::memcpy(node.p, points[id].p, sizeof node.p);
    node.left = 2 * t.node + 1 < n ? static_cast<int>(2 * t.node + 1) : -1;
    node.right = 2 * t.node + 2 < n ? static_cast<int>(2 * t.node + 2) : -1;
    node.id = id;
    stack.push_back({t.begin, t.begin + left, 2 * t.node + 1, t.depth + 1});
    stack.push_back({t.begin + left + 1, t.end, 2 * t.node + 2, t.depth + 1});
  }
  return tree;
}

// Every invariant the contract states for a tree built from `points`:
// heap links, kd order against every ancestor (split dim = depth mod 3),
// height ceil(log2(n+1)) with every node reachable from the root, ids a
// permutation, p bit-equal to points[id].p.
inline ::testing::AssertionResult tree_invariants_hold(const std::vector<Point>& points,
                                                       const Node* tree) {
  const int64_t n = static_cast<int64_t>(points.size());
  auto fail = [](int64_t i, const std::string& what) {
    return ::testing::AssertionFailure() << "node " << i << ": " << what;
  };
  std::vector<char> seen(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < n; ++i) {
    const Node& node = tree[i];
    const int64_t want_left = 2 * i + 1 < n ? 2 * i + 1 : -1;
    const int64_t want_right = 2 * i + 2 < n ? 2 * i + 2 : -1;
    if (node.left != want_left || node.right != want_right) {
      std::ostringstream s;
      s << "links (" << node.left << ", " << node.right << "), heap layout wants (" << want_left
        << ", " << want_right << ")";
      return fail(i, s.str());
    }
    if (node.id < 0 || node.id >= n)
      return fail(i, "id " + std::to_string(node.id) + " out of range");
    if (seen[node.id]) return fail(i, "id " + std::to_string(node.id) + " repeated");
    seen[node.id] = 1;
    if (std::memcmp(node.p, points[node.id].p, sizeof node.p) != 0)
      return fail(i, "p is not bit-equal to points[" + std::to_string(node.id) + "].p");
    int depth = 0;
    for (int64_t c = i; c > 0; c = (c - 1) / 2) ++depth;
    for (int64_t c = i, d = depth; c > 0; c = (c - 1) / 2, --d) {
      const int64_t parent = (c - 1) / 2;
      const int dim = static_cast<int>((d - 1) % 3);
      const float split = tree[parent].p[dim];
      const bool in_left = c == 2 * parent + 1;
      if (in_left ? !(node.p[dim] <= split) : !(node.p[dim] >= split)) {
        std::ostringstream s;
        s << "coordinate " << dim << " = " << node.p[dim] << " is on the wrong side of ancestor "
          << parent << " (split " << split << ", " << (in_left ? "left" : "right") << " subtree)";
        return fail(i, s.str());
      }
    }
  }
  // Height and reachability, following the links themselves.
  int64_t reached = 0;
  int height = 0;
  std::vector<std::pair<int64_t, int>> stack;
  if (n > 0) stack.push_back({0, 1});
  while (!stack.empty()) {
    const auto [i, level] = stack.back();
    stack.pop_back();
    if (++reached > n) return ::testing::AssertionFailure() << "links form a cycle";
    height = std::max(height, level);
    if (tree[i].left >= 0) stack.push_back({tree[i].left, level + 1});
    if (tree[i].right >= 0) stack.push_back({tree[i].right, level + 1});
  }
  if (reached != n)
    return ::testing::AssertionFailure() << reached << " of " << n << " nodes reachable";
  if (height != expected_height(n))
    return ::testing::AssertionFailure() << "height " << height << ", want " << expected_height(n);
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult same_tree_bytes(const std::vector<Node>& expected,
                                                  const std::vector<Node>& actual) {
  if (expected.size() != actual.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < expected.size(); ++i)
    if (std::memcmp(&expected[i], &actual[i], sizeof(Node)) != 0) {
      const Node& e = expected[i];
      const Node& a = actual[i];
      return ::testing::AssertionFailure()
             << "node " << i << " differs: expected {" << e.p[0] << ", " << e.p[1] << ", " << e.p[2]
             << " | " << e.left << ", " << e.right << ", id " << e.id << "}, actual {" << a.p[0]
             << ", " << a.p[1] << ", " << a.p[2] << " | " << a.left << ", " << a.right << ", id "
             << a.id << "}";
    }
  return ::testing::AssertionSuccess();
}

}  // namespace knn_test
