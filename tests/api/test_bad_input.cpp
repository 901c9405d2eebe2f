// Bad input to every classic entry point: a clear status, a message that says
// where, outputs left untouched, and a library that works on the next call.
#include <gtest/gtest.h>

#include <cctype>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "classic_helpers.h"
#include "knn_gpgpu.h"
#include "oracle.h"
#include "test_data.h"

namespace knn_test {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// True when `text` contains "<word> <number>" with the number not followed by
// another digit ("point 17" does not match "point 170").
bool names(const std::string& text, const std::string& word, long long number) {
  const std::string needle = word + " " + std::to_string(number);
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    const size_t end = at + needle.size();
    if (end == text.size() || !std::isdigit(static_cast<unsigned char>(text[end]))) return true;
  }
  return false;
}

bool no_device() { return cuGetDeviceCount() == 0; }

struct NamedBuild {
  BuildFn fn;
  const char* name;
  bool cuda_only;
};
const NamedBuild kBuilds[] = {{&buildKdTree, "buildKdTree", false},
                              {&cuBuildKdTree, "cuBuildKdTree", true},
                              {&mpBuildKdTree, "mpBuildKdTree", false}};

struct NamedQuery {
  QueryFn fn;
  const char* name;
  bool cuda_only;
};
const NamedQuery kQueries[] = {{&queryAll, "queryAll", false},
                               {&cuQueryAll, "cuQueryAll", true},
                               {&mpQueryAll, "mpQueryAll", false}};

// The status a validation failure must give. A CUDA-only entry point on a
// machine without a device may answer KNN_ERR_NO_DEVICE first: the contract
// does not order the two checks.
::testing::AssertionResult is_validation_failure(int status, int want, bool cuda_only) {
  if (status == want) return ::testing::AssertionSuccess();
  if (cuda_only && no_device() && status == KNN_ERR_NO_DEVICE) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "status " << status_text(status) << ", want " << knn_status_string(want);
}

class BadInput : public ::testing::Test {
 protected:
  static constexpr int kN = 40;
  static constexpr int kM = 30;
  static constexpr int kK = 5;

  void SetUp() override {
    points_ = make_points(Dist::Uniform, kN, 99);
    queries_ = make_query_points(Dist::Uniform, kM, 98);
    tree_ = build_tree(points_);
  }

  // Runs a query that must fail validation with `want`, and checks the
  // result buffer is untouched and the message is not empty.
  void expect_query_refused(const Point* queries, const Node* tree, int n_qp, int n_tree, int k,
                            bool with_result, int want, const std::string& must_name = "",
                            long long number = -1) {
    for (const NamedQuery& q : kQueries) {
      SCOPED_TRACE(q.name);
      std::vector<int> result(kM * 8 + 64, kSentinelInt);
      const int status =
          q.fn(queries, tree, n_qp, n_tree, k, with_result ? result.data() : nullptr);
      EXPECT_TRUE(is_validation_failure(status, want, q.cuda_only));
      EXPECT_EQ(result, std::vector<int>(kM * 8 + 64, kSentinelInt)) << "output written on failure";
      const std::string message = knn_last_error();
      EXPECT_FALSE(message.empty());
      if (!must_name.empty() && status == want) {
        EXPECT_TRUE(names(message, must_name, number))
            << "message \"" << message << "\" should name " << must_name << " " << number;
      }
    }
  }

  void expect_tree_refused(const std::vector<Node>& bad, long long bad_node,
                           long long other_acceptable_node = -1) {
    for (const NamedQuery& q : kQueries) {
      SCOPED_TRACE(q.name);
      std::vector<int> result(kM * kK, kSentinelInt);
      const int status =
          q.fn(queries_.data(), bad.data(), kM, static_cast<int>(bad.size()), kK, result.data());
      EXPECT_TRUE(is_validation_failure(status, KNN_ERR_INVALID_TREE, q.cuda_only));
      EXPECT_EQ(result, std::vector<int>(kM * kK, kSentinelInt)) << "output written on failure";
      const std::string message = knn_last_error();
      if (status == KNN_ERR_INVALID_TREE) {
        EXPECT_TRUE(names(message, "node", bad_node) ||
                    (other_acceptable_node >= 0 && names(message, "node", other_acceptable_node)))
            << "message \"" << message << "\" should name node " << bad_node;
      }
    }
    // The library still works afterwards.
    const std::vector<int> good = query_ok(&mpQueryAll, "mpQueryAll", queries_, tree_, kK);
    EXPECT_STREQ(knn_last_error(), "");
    EXPECT_TRUE(same_rows(oracle_knn(points_, queries_, kK).idx, good, kM, kK));
  }

  std::vector<Point> points_, queries_;
  std::vector<Node> tree_;
};

// ---- Builds ------------------------------------------------------------------------

TEST_F(BadInput, BuildRefusesNullArraysAndNegativeCounts) {
  for (const NamedBuild& b : kBuilds) {
    SCOPED_TRACE(b.name);
    std::vector<Node> tree = sentinel_tree(kN);
    const std::vector<Node> untouched = tree;
    EXPECT_TRUE(is_validation_failure(b.fn(nullptr, kN, tree.data()), KNN_ERR_INVALID_ARGUMENT,
                                      b.cuda_only));
    EXPECT_FALSE(std::string(knn_last_error()).empty());
    EXPECT_TRUE(is_validation_failure(b.fn(points_.data(), kN, nullptr), KNN_ERR_INVALID_ARGUMENT,
                                      b.cuda_only));
    EXPECT_FALSE(std::string(knn_last_error()).empty());
    for (int n : {-1, -40, INT_MIN}) {
      EXPECT_TRUE(is_validation_failure(b.fn(points_.data(), n, tree.data()),
                                        KNN_ERR_INVALID_ARGUMENT, b.cuda_only))
          << "n = " << n;
      EXPECT_FALSE(std::string(knn_last_error()).empty());
    }
    EXPECT_TRUE(same_tree_bytes(untouched, tree)) << "tree written on failure";
  }
}

TEST_F(BadInput, BuildRefusesNonFinitePointsAndNamesTheFirst) {
  struct Case {
    int index;
    int coordinate;
    float value;
  };
  const Case cases[] = {{17, 0, kNaN}, {17, 1, kInf},     {17, 2, -kInf},
                        {0, 0, kNaN},  {kN - 1, 2, kNaN}, {3, 1, -kNaN}};
  for (const NamedBuild& b : kBuilds)
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(b.name) + " point " + std::to_string(c.index) + " coordinate " +
                   std::to_string(c.coordinate) + " = " + std::to_string(c.value));
      std::vector<Point> bad = points_;
      bad[c.index].p[c.coordinate] = c.value;
      if (c.index + 9 < kN) bad[c.index + 9].p[0] = kNaN;  // a later one must not be named
      std::vector<Node> tree = sentinel_tree(kN);
      const std::vector<Node> untouched = tree;
      const int status = b.fn(bad.data(), kN, tree.data());
      EXPECT_TRUE(is_validation_failure(status, KNN_ERR_NONFINITE_INPUT, b.cuda_only));
      if (status == KNN_ERR_NONFINITE_INPUT) {
        EXPECT_TRUE(names(knn_last_error(), "point", c.index)) << knn_last_error();
      }
      EXPECT_TRUE(same_tree_bytes(untouched, tree)) << "tree written on failure";
    }
}

// ---- Queries -------------------------------------------------------------------------

TEST_F(BadInput, QueryRefusesNullArrays) {
  expect_query_refused(nullptr, tree_.data(), kM, kN, kK, true, KNN_ERR_INVALID_ARGUMENT);
  expect_query_refused(queries_.data(), nullptr, kM, kN, kK, true, KNN_ERR_INVALID_ARGUMENT);
  expect_query_refused(queries_.data(), tree_.data(), kM, kN, kK, false, KNN_ERR_INVALID_ARGUMENT);
}

TEST_F(BadInput, QueryRefusesNegativeCountsAndBadK) {
  for (int n : {-1, INT_MIN}) {
    SCOPED_TRACE("count " + std::to_string(n));
    expect_query_refused(queries_.data(), tree_.data(), n, kN, kK, true, KNN_ERR_INVALID_ARGUMENT);
    expect_query_refused(queries_.data(), tree_.data(), kM, n, kK, true, KNN_ERR_INVALID_ARGUMENT);
  }
  for (int k : {0, -1, INT_MIN}) {
    SCOPED_TRACE("k " + std::to_string(k));
    expect_query_refused(queries_.data(), tree_.data(), kM, kN, k, true, KNN_ERR_INVALID_ARGUMENT);
    // k is checked even when there is nothing to search.
    expect_query_refused(queries_.data(), tree_.data(), kM, 0, k, true, KNN_ERR_INVALID_ARGUMENT);
  }
}

TEST_F(BadInput, QueryRefusesNonFiniteQueriesAndNamesTheFirst) {
  for (int index : {17, 0, kM - 1})
    for (float value : {kNaN, kInf, -kInf}) {
      SCOPED_TRACE("query " + std::to_string(index) + " = " + std::to_string(value));
      std::vector<Point> bad = queries_;
      bad[index].p[index % 3] = value;
      if (index + 5 < kM) bad[index + 5].p[1] = kNaN;
      expect_query_refused(bad.data(), tree_.data(), kM, kN, kK, true, KNN_ERR_NONFINITE_INPUT,
                           "point", index);
    }
}

// ---- Trees that are not trees ------------------------------------------------------------

TEST_F(BadInput, TreeWithWrongLinkIsRefused) {
  std::vector<Node> bad = tree_;
  bad[3].left = 0;  // should be 7
  expect_tree_refused(bad, 3);
  bad = tree_;
  bad[0].right = -1;  // hides a whole subtree
  expect_tree_refused(bad, 0);
  bad = tree_;
  bad[19].right = kN + 1;  // past the array (should be -1)
  expect_tree_refused(bad, 19);
  bad = tree_;
  bad[25].left = 26;  // a leaf pointing at a sibling
  expect_tree_refused(bad, 25);
}

TEST_F(BadInput, TreeWithIdOutOfRangeIsRefused) {
  std::vector<Node> bad = tree_;
  bad[5].id = kN;
  expect_tree_refused(bad, 5);
  bad = tree_;
  bad[11].id = -1;
  expect_tree_refused(bad, 11);
  bad = tree_;
  bad[kN - 1].id = INT_MAX;
  expect_tree_refused(bad, kN - 1);
}

TEST_F(BadInput, TreeWithDuplicateIdIsRefused) {
  std::vector<Node> bad = tree_;
  bad[6].id = bad[2].id;
  expect_tree_refused(bad, 6, 2);
}

TEST_F(BadInput, TreeBreakingKdOrderIsRefused) {
  // Node 39 (left-left-right-left-left from the root, a leaf) moved right of
  // the root's split.
  std::vector<Node> bad = tree_;
  bad[39].p[0] = tree_[0].p[0] + 1.0f;
  expect_tree_refused(bad, 39);
  // Node 7 (depth 3) moved across the root's x split only: its parent (z) and
  // grandparent (y) are satisfied, so a check against the parent alone misses it.
  bad = tree_;
  bad[7].p[0] = tree_[0].p[0] + 0.5f;
  expect_tree_refused(bad, 7);
  // Two nodes swapped.
  bad = tree_;
  std::swap(bad[1], bad[2]);
  std::swap(bad[1].left, bad[2].left);
  std::swap(bad[1].right, bad[2].right);
  expect_tree_refused(bad, 1);
}

TEST_F(BadInput, TreeWithNonFiniteCoordinateIsRefused) {
  for (float value : {kNaN, kInf, -kInf}) {
    SCOPED_TRACE(value);
    std::vector<Node> bad = tree_;
    bad[10].p[1] = value;
    expect_tree_refused(bad, 10);
    bad = tree_;
    bad[kN - 1].p[2] = value;  // a leaf: nothing below it notices
    expect_tree_refused(bad, kN - 1);
  }
}

TEST_F(BadInput, TreeSizeThatIsNotTheArraySizeIsRefused) {
  // The caller claims 39 nodes of a 40-node tree: node 19's link to 39 is out.
  std::vector<Node> shorter(tree_.begin(), tree_.end() - 1);
  expect_tree_refused(shorter, 19);
}

TEST_F(BadInput, GarbageTreeIsRefused) {
  std::vector<Node> bad = sentinel_tree(kN);
  expect_tree_refused(bad, 0);
}

// Several defects at once in a tree large enough that its check runs as
// parallel tasks: the first in this order is named, whichever task finds it:
// a coordinate beyond the limit (any node), then the smallest node whose
// fields or kd order are wrong, then the first repeated id.
TEST(BadInputTree, SeveralDefectsNameTheFirstByPrecedence) {
  const std::vector<Node> tree = build_tree(make_points(Dist::Uniform, 40000, 77));
  const std::vector<Point> queries = make_query_points(Dist::Uniform, 1, 76);
  auto expect_named = [&](const std::vector<Node>& bad, const std::string& what, long long node) {
    std::vector<int> result(4, kSentinelInt);
    EXPECT_EQ(
        mpQueryAll(queries.data(), bad.data(), 1, static_cast<int>(bad.size()), 4, result.data()),
        KNN_ERR_INVALID_TREE);
    const std::string message = knn_last_error();
    EXPECT_TRUE(names(message, "node", node) && message.find(what) != std::string::npos) << message;
    EXPECT_EQ(result, std::vector<int>(4, kSentinelInt));
  };
  // Moves node i across the root's split (on x): out of the unit cube, on
  // the wrong side.
  auto across_root = [](std::vector<Node>& t, int64_t i) {
    int64_t top = i;
    while (top > 2) top = (top - 1) / 2;
    t[static_cast<size_t>(i)].p[0] = top == 1 ? 2.0f : -1.0f;
  };
  std::vector<Node> bad = tree;
  bad[30000].id = -1;
  across_root(bad, 20000);
  expect_named(bad, "breaks the kd order", 20000);
  bad = tree;
  bad[100].id = bad[50].id;
  bad[39999].p[2] = kNaN;
  expect_named(bad, "NaN or infinite", 39999);
  bad = tree;
  bad[25000].p[1] = kInf;
  across_root(bad, 3);
  expect_named(bad, "breaks the kd order", 3);
  bad = tree;
  bad[5].left = 7;
  bad[35000].p[1] = 3e38f;  // beyond the coordinate limit
  expect_named(bad, "has coordinate 3", 35000);
  bad = tree;
  bad[30001].id = bad[30000].id;
  bad[30002].id = bad[12].id;
  expect_named(bad, "repeats an id", 30001);
  // One ulp across the split of its parent alone, deep in the bottom levels
  // (where the CPU reads a subtree as one bucket), with a later defect in
  // another bucket and one in the same bucket below it.
  auto past_parent = [](std::vector<Node>& t, int64_t i) {
    const int64_t parent = (i - 1) / 2;
    int level = 0;
    while ((int64_t{2} << level) - 1 <= parent) ++level;
    const int dim = level % 3;
    const float split = t[static_cast<size_t>(parent)].p[dim];
    t[static_cast<size_t>(i)].p[dim] = std::nextafter(split, i % 2 == 1 ? kInf : -kInf);
  };
  bad = tree;
  past_parent(bad, 16400);
  past_parent(bad, 2 * 16400 + 1);
  bad[39000].id = -1;
  expect_named(bad, "breaks the kd order", 16400);
}

// One node moved one ulp across the split of a random ancestor (its parent
// or higher: then it stays on its side of every nearer one), anywhere in the
// tree: the CPU check compares each node's subtrees with its split, so a
// node that obeys its parent but not a grandparent must still be named.
TEST(BadInputTree, ANodeAcrossAnyAncestorsSplitIsNamed) {
  const int64_t n = 5000;  // 13 levels: upper nodes and buckets both hit
  const std::vector<Node> tree = build_tree(make_points(Dist::Uniform, n, 31));
  const std::vector<Point> queries = make_query_points(Dist::Uniform, 1, 32);
  Rng rng(33);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t i = 1 + static_cast<int64_t>(rng.next() % static_cast<uint64_t>(n - 1));
    int depth = 0;  // levels between i and the root
    for (int64_t a = i; a > 0; a = (a - 1) / 2) ++depth;
    const int up = 1 + static_cast<int>(rng.next() % static_cast<uint64_t>(depth));
    int64_t child = i, ancestor = (i - 1) / 2;
    for (int step = 1; step < up; ++step) child = ancestor, ancestor = (ancestor - 1) / 2;
    const int ancestor_level = depth - up;
    const int dim = ancestor_level % 3;
    const float split = tree[static_cast<size_t>(ancestor)].p[dim];
    const bool in_left = child == 2 * ancestor + 1;
    std::vector<Node> bad = tree;
    bad[static_cast<size_t>(i)].p[dim] =
        std::nextafter(split, in_left ? std::numeric_limits<float>::infinity() : -1.0f);
    std::vector<int> result(4, kSentinelInt);
    ASSERT_EQ(mpQueryAll(queries.data(), bad.data(), 1, static_cast<int>(n), 4, result.data()),
              KNN_ERR_INVALID_TREE)
        << "node " << i << " across the split of node " << ancestor;
    const std::string message = knn_last_error();
    EXPECT_TRUE(names(message, "node", i) &&
                message.find("breaks the kd order") != std::string::npos)
        << message << " (node " << i << " across the split of node " << ancestor << ")";
  }
}

// ---- Brute force -----------------------------------------------------------------------------

TEST(BadInputBruteForce, RefusesBadArgumentsWithoutWriting) {
  const int dim = 4, n = 30, m = 20, k = 3;
  const std::vector<float> ref = make_rows(Dist::Uniform, n, dim, 5);
  const std::vector<float> queries = make_query_rows(Dist::Uniform, m, dim, 6);
  struct Case {
    const char* what;
    const float* ref;
    int n;
    const float* query;
    int m;
    int dim;
    int k;
  };
  const Case cases[] = {
      {"NULL ref", nullptr, n, queries.data(), m, dim, k},
      {"NULL query", ref.data(), n, nullptr, m, dim, k},
      {"negative n_ref", ref.data(), -1, queries.data(), m, dim, k},
      {"negative n_query", ref.data(), n, queries.data(), -5, dim, k},
      {"INT_MIN n_query", ref.data(), n, queries.data(), INT_MIN, dim, k},
      {"dim 0", ref.data(), n, queries.data(), m, 0, k},
      {"dim -1", ref.data(), n, queries.data(), m, -1, k},
      {"k 0", ref.data(), n, queries.data(), m, dim, 0},
      {"k -3", ref.data(), n, queries.data(), m, dim, -3},
      {"k 0 with n_ref 0", nullptr, 0, queries.data(), m, dim, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<int> ind(m * k + 16, kSentinelInt);
    std::vector<float> sq(m * k + 16, -7.0f);
    const int status = knn_brute_force(c.ref, c.n, c.query, c.m, c.dim, c.k, sq.data(), ind.data());
    EXPECT_EQ(status, KNN_ERR_INVALID_ARGUMENT) << status_text(status);
    EXPECT_FALSE(std::string(knn_last_error()).empty());
    EXPECT_EQ(ind, std::vector<int>(m * k + 16, kSentinelInt));
    EXPECT_EQ(sq, std::vector<float>(m * k + 16, -7.0f));
  }
}

TEST(BadInputBruteForce, RefusesNonFiniteRowsAndNamesTheFirst) {
  const int dim = 4, n = 30, m = 20, k = 3;
  for (bool in_ref : {true, false})
    for (float value : {kNaN, kInf, -kInf}) {
      SCOPED_TRACE(std::string(in_ref ? "ref" : "query") + " row 17 = " + std::to_string(value));
      std::vector<float> ref = make_rows(Dist::Uniform, n, dim, 5);
      std::vector<float> queries = make_query_rows(Dist::Uniform, m, dim, 6);
      std::vector<float>& bad = in_ref ? ref : queries;
      bad[17 * dim + 3] = value;
      bad[19 * dim + 0] = kNaN;
      std::vector<int> ind(m * k, kSentinelInt);
      std::vector<float> sq(m * k, -7.0f);
      const int status =
          knn_brute_force(ref.data(), n, queries.data(), m, dim, k, sq.data(), ind.data());
      EXPECT_EQ(status, KNN_ERR_NONFINITE_INPUT) << status_text(status);
      EXPECT_TRUE(names(knn_last_error(), "point", 17)) << knn_last_error();
      EXPECT_EQ(ind, std::vector<int>(m * k, kSentinelInt));
      EXPECT_EQ(sq, std::vector<float>(m * k, -7.0f));
    }
}

// ---- After a failure
// ------------------------------------------------------------------------------

TEST_F(BadInput, SuccessClearsTheLastError) {
  std::vector<int> result(kM * kK);
  ASSERT_NE(mpQueryAll(queries_.data(), tree_.data(), kM, kN, 0, result.data()), KNN_OK);
  ASSERT_STRNE(knn_last_error(), "");
  for (const NamedQuery& q : kQueries) {
    if (q.cuda_only && no_device()) continue;
    ASSERT_NE(q.fn(nullptr, tree_.data(), kM, kN, kK, result.data()), KNN_OK);
    ASSERT_STRNE(knn_last_error(), "");
    KNN_EXPECT_OK(q.fn(queries_.data(), tree_.data(), kM, kN, kK, result.data()));
    EXPECT_STREQ(knn_last_error(), "") << q.name;
  }
  for (const NamedBuild& b : kBuilds) {
    if (b.cuda_only && no_device()) continue;
    std::vector<Node> tree(kN);
    ASSERT_NE(b.fn(points_.data(), -1, tree.data()), KNN_OK);
    KNN_EXPECT_OK(b.fn(points_.data(), kN, tree.data()));
    EXPECT_STREQ(knn_last_error(), "") << b.name;
  }
  std::vector<float> sq(kM * kK);
  ASSERT_NE(knn_brute_force(nullptr, 3, nullptr, 3, 3, 1, nullptr, nullptr), KNN_OK);
  KNN_EXPECT_OK(knn_brute_force(&points_[0].p[0], kN, &queries_[0].p[0], kM, 3, kK, sq.data(),
                                result.data()));
  EXPECT_STREQ(knn_last_error(), "");
}

}  // namespace
}  // namespace knn_test
