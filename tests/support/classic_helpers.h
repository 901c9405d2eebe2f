// Calls into the classic 3-D API with the bookkeeping every test repeats:
// outputs pre-filled with a sentinel (so an unwritten slot shows), statuses
// checked with the library's own message attached.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "knn_gpgpu.h"

namespace knn_test {

using BuildFn = int (*)(const Point*, int, Node*);
using QueryFn = int (*)(const Point*, const Node*, int, int, int, int*);

// Not a valid index, id or coordinate pattern: 0x7badf00d.
constexpr int kSentinelInt = 0x7badf00d;

inline std::string status_text(int status) {
  return std::string(knn_status_string(status)) + " / last error: \"" + knn_last_error() + "\"";
}

#define KNN_EXPECT_OK(call)                                                                  \
  do {                                                                                       \
    const int knn_status_ = (call);                                                          \
    EXPECT_EQ(knn_status_, KNN_OK) << #call << ": " << ::knn_test::status_text(knn_status_); \
  } while (0)

#define KNN_ASSERT_OK(call)                                                                  \
  do {                                                                                       \
    const int knn_status_ = (call);                                                          \
    ASSERT_EQ(knn_status_, KNN_OK) << #call << ": " << ::knn_test::status_text(knn_status_); \
  } while (0)

inline std::vector<Node> sentinel_tree(size_t n) {
  std::vector<Node> tree(n);
  if (n) std::memset(tree.data(), 0xA5, n * sizeof(Node));
  return tree;
}

// Builds with `fn`; *status receives its status.
inline std::vector<Node> build_with(BuildFn fn, const std::vector<Point>& points, int* status) {
  std::vector<Node> tree = sentinel_tree(points.size());
  *status = fn(points.data(), static_cast<int>(points.size()), tree.data());
  return tree;
}

inline std::vector<Node> build_tree(const std::vector<Point>& points) {
  int status = -1;
  std::vector<Node> tree = build_with(&mpBuildKdTree, points, &status);
  EXPECT_EQ(status, KNN_OK) << "mpBuildKdTree: " << status_text(status);
  return tree;
}

inline std::vector<int> query_with(QueryFn fn, const std::vector<Point>& queries,
                                   const std::vector<Node>& tree, int k, int* status) {
  std::vector<int> result(queries.size() * static_cast<size_t>(k), kSentinelInt);
  *status = fn(queries.data(), tree.data(), static_cast<int>(queries.size()),
               static_cast<int>(tree.size()), k, result.data());
  return result;
}

inline std::vector<int> query_ok(QueryFn fn, const char* name, const std::vector<Point>& queries,
                                 const std::vector<Node>& tree, int k) {
  int status = -1;
  std::vector<int> result = query_with(fn, queries, tree, k, &status);
  EXPECT_EQ(status, KNN_OK) << name << ": " << status_text(status);
  return result;
}

}  // namespace knn_test
