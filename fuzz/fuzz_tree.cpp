// Fuzz target: tree validation. A Node array comes from the input, either
// raw bytes (garbage) or a valid tree built from fuzzed points with a few
// fuzzed edits (nearly valid: the hard cases). mpQueryAll/queryAll must
// answer KNN_ERR_INVALID_TREE, leaving the result untouched, or the correct
// answer: the brute-force kNN of the tree's points under their ids. Never a
// crash or a write out of bounds (ASan).
#include <cmath>
#include <vector>

#include "fuzz_support.h"

namespace {

using knn_fuzz::check_status;
using knn_fuzz::expect;

constexpr int kSentinel = 0x7badf00d;

std::vector<Node> fuzzed_tree(FuzzedDataProvider& in) {
  const int n = in.ConsumeIntegralInRange<int>(1, 48);
  std::vector<Node> tree(static_cast<size_t>(n));
  if (in.ConsumeBool()) {  // garbage
    for (Node& node : tree) {
      const std::vector<uint8_t> bytes = in.ConsumeBytes<uint8_t>(sizeof(Node));
      if (!bytes.empty()) std::memcpy(&node, bytes.data(), bytes.size());
    }
    return tree;
  }
  const bool raw = in.ConsumeIntegralInRange<int>(0, 3) == 0;
  const std::vector<float> coords = knn_fuzz::next_floats(in, static_cast<size_t>(n) * 3, raw);
  if (mpBuildKdTree(reinterpret_cast<const Point*>(coords.data()), n, tree.data()) != KNN_OK)
    return tree;  // non-finite points: the zero-filled array, itself not a tree
  for (int edits = in.ConsumeIntegralInRange<int>(0, 3); edits > 0; --edits) {
    Node& node = tree[in.ConsumeIntegralInRange<int>(0, n - 1)];
    switch (in.ConsumeIntegralInRange<int>(0, 4)) {
      case 0: node.left = in.ConsumeIntegralInRange<int>(-3, n + 2); break;
      case 1: node.right = in.ConsumeIntegralInRange<int>(-3, n + 2); break;
      case 2: node.id = in.ConsumeIntegralInRange<int>(-3, n + 2); break;
      case 3: node.p[in.ConsumeIntegralInRange<int>(0, 2)] = knn_fuzz::next_float(in, true); break;
      default: std::swap(node, tree[in.ConsumeIntegralInRange<int>(0, n - 1)]); break;
    }
  }
  return tree;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const std::vector<Node> tree = fuzzed_tree(in);
  const int n = static_cast<int>(tree.size());
  const int m = in.ConsumeIntegralInRange<int>(1, 6);
  const int k = in.ConsumeIntegralInRange<int>(1, 12);
  std::vector<float> queries = knn_fuzz::next_floats(in, static_cast<size_t>(m) * 3, false);
  std::vector<int> result(static_cast<size_t>(m) * k, kSentinel);
  const int status = (in.ConsumeBool() ? mpQueryAll : queryAll)(
      reinterpret_cast<const Point*>(queries.data()), tree.data(), m, n, k, result.data());
  check_status(status);
  if (status == KNN_ERR_INVALID_TREE) {
    for (int v : result) expect(v == kSentinel, "an invalid tree's query wrote its result", status);
    return 0;
  }
  expect(status == KNN_OK, "a query of finite points failed otherwise than INVALID_TREE", status);
  // Accepted: the ids must be a permutation, and the answer that of brute
  // force over the nodes' points placed at their ids.
  std::vector<float> points(static_cast<size_t>(n) * 3);
  std::vector<char> seen(static_cast<size_t>(n), 0);
  for (const Node& node : tree) {
    expect(node.id >= 0 && node.id < n && !seen[node.id],
           "accepted a tree whose ids are not a permutation", status);
    seen[node.id] = 1;
    for (int d = 0; d < 3; ++d) {
      expect(std::isfinite(node.p[d]), "accepted a tree with a non-finite coordinate", status);
      points[static_cast<size_t>(node.id) * 3 + d] = node.p[d];
    }
  }
  std::vector<int> expected(result.size());
  const int bf =
      knn_brute_force(points.data(), n, queries.data(), m, 3, k, nullptr, expected.data());
  expect(bf == KNN_OK, "brute force refused an accepted tree's points", bf);
  expect(expected == result, "an accepted tree gives a wrong answer", status);
  return 0;
}
