// Fuzz target: argument validation of the C API. Counts, k, dim, options,
// NULL pointers and coordinates (NaN and infinity patterns included) come
// from the input; every buffer is as large as the counts say, so any read or
// write out of bounds is the library's (ASan reports it). Checked: a listed
// status with a message; refused calls leave outputs untouched; answers that
// succeed agree with knn_brute_force, and an index answer with it too.
#include <cmath>
#include <vector>

#include "fuzz_support.h"

namespace {

using knn_fuzz::Buffer;
using knn_fuzz::check_status;
using knn_fuzz::expect;

constexpr int kSentinel = 0x7badf00d;

bool refused(int status) {
  return status == KNN_ERR_INVALID_ARGUMENT || status == KNN_ERR_NONFINITE_INPUT;
}

template <class T>
bool untouched(const std::vector<T>& v, T fill) {
  for (const T& x : v)
    if (std::memcmp(&x, &fill, sizeof x) != 0) return false;
  return true;
}

// The classic API: a build, then a query on the built tree.
void classic(FuzzedDataProvider& in) {
  const bool raw = in.ConsumeBool();
  const int n = knn_fuzz::next_count(in, 40);
  const int m = knn_fuzz::next_count(in, 20);
  const int k = in.ConsumeIntegralInRange<int>(-2, 48);
  const int which = in.ConsumeIntegralInRange<int>(0, 2);
  std::vector<float> coords =
      knn_fuzz::next_floats(in, static_cast<size_t>(n > 0 ? n : 0) * 3, raw);
  std::vector<float> qcoords =
      knn_fuzz::next_floats(in, static_cast<size_t>(m > 0 ? m : 0) * 3, raw);
  Buffer<Node> tree(in, n, Node{{0, 0, 0}, kSentinel, kSentinel, kSentinel});
  const bool null_points = in.ConsumeIntegralInRange<int>(0, 15) == 0;
  const Point* points = null_points ? nullptr : reinterpret_cast<const Point*>(coords.data());
  static int (*const builds[])(const Point*, int, Node*) = {mpBuildKdTree, buildKdTree,
                                                            cuBuildKdTree};
  const int built = builds[which](points, n, tree.get());
  check_status(built);
  if (refused(built)) {
    expect(untouched(tree.storage, Node{{0, 0, 0}, kSentinel, kSentinel, kSentinel}),
           "a refused build wrote the tree", built);
    return;
  }
  if (built != KNN_OK) return;  // no device in this build (cuBuildKdTree)

  Buffer<int> result(in, static_cast<long long>(m > 0 ? m : 0) * (k > 0 ? k : 0), kSentinel);
  static int (*const queries[])(const Point*, const Node*, int, int, int, int*) = {
      mpQueryAll, queryAll, cuQueryAll};
  const bool null_queries = in.ConsumeIntegralInRange<int>(0, 15) == 0;
  const Point* q = null_queries ? nullptr : reinterpret_cast<const Point*>(qcoords.data());
  const int status =
      queries[in.ConsumeIntegralInRange<int>(0, 2)](q, tree.get(), m, n, k, result.get());
  check_status(status);
  if (refused(status)) {
    expect(untouched(result.storage, kSentinel), "a refused query wrote its result", status);
    return;
  }
  if (status != KNN_OK || m <= 0 || n <= 0) return;
  // The same answer as brute force over the points.
  std::vector<int> expected(static_cast<size_t>(m) * k);
  const int bf =
      knn_brute_force(coords.data(), n, qcoords.data(), m, 3, k, nullptr, expected.data());
  expect(bf == KNN_OK, "brute force refused what the tree query accepted", bf);
  expect(expected == result.storage, "tree query and brute force disagree", status);
}

// knn_brute_force in any dimension.
void brute_force(FuzzedDataProvider& in) {
  const bool raw = in.ConsumeBool();
  const int n = knn_fuzz::next_count(in, 30);
  const int m = knn_fuzz::next_count(in, 10);
  const int dim = in.ConsumeIntegralInRange<int>(-1, 20);
  const int k = in.ConsumeIntegralInRange<int>(-1, 40);
  const size_t rows = dim > 0 ? static_cast<size_t>(dim) : 0;
  Buffer<float> ref(in, 0, 0.0f), query(in, 0, 0.0f);
  ref.storage = knn_fuzz::next_floats(in, (n > 0 ? n : 0) * rows, raw);
  query.storage = knn_fuzz::next_floats(in, (m > 0 ? m : 0) * rows, raw);
  const long long out = static_cast<long long>(m > 0 ? m : 0) * (k > 0 ? k : 0);
  Buffer<float> dist(in, out, -1.0f);
  Buffer<int> ind(in, out, kSentinel);
  const int status = knn_brute_force(ref.get(), n, query.get(), m, dim, k, dist.get(), ind.get());
  check_status(status);
  if (refused(status)) {
    expect(untouched(ind.storage, kSentinel) && untouched(dist.storage, -1.0f),
           "a refused brute force wrote its output", status);
    return;
  }
  expect(status == KNN_OK, "brute force failed on valid input", status);
  // Rows ascending by (distance, index); missing slots only past n.
  for (int i = 0; i < m && !ind.null && !dist.null; ++i)
    for (int j = 0; j < k; ++j) {
      const size_t at = static_cast<size_t>(i) * k + j;
      expect((ind.storage[at] == -1) == (j >= n), "a missing slot before n or a real one after",
             status);
      if (j > 0 && ind.storage[at] >= 0)
        expect(
            dist.storage[at - 1] < dist.storage[at] ||
                (dist.storage[at - 1] == dist.storage[at] && ind.storage[at - 1] < ind.storage[at]),
            "a row out of (distance, index) order", status);
    }
}

knn_options fuzzed_options(FuzzedDataProvider& in) {
  knn_options opt;
  knn_options_init(&opt);
  if (in.ConsumeBool()) opt.struct_size = in.PickValueInArray<size_t>({0, 8, 16, 24, 1000});
  opt.backend = in.ConsumeIntegralInRange<int>(-1, 3);
  opt.device = in.ConsumeIntegralInRange<int>(-2, 2);
  opt.structure = in.ConsumeIntegralInRange<int>(-1, 4);
  opt.leaf_size = in.ConsumeIntegralInRange<int>(-1, 70);
  opt.threads = in.ConsumeIntegralInRange<int>(-1, 3);
  opt.device_memory_limit = in.PickValueInArray<size_t>({0, 1, 4096, size_t{1} << 20});
  return opt;
}

// The index API: build, then kNN, self kNN or radius, checked against brute
// force when the engine answers (KNN_ERR_UNSUPPORTED is fine until it lands).
void index_api(FuzzedDataProvider& in) {
  const bool raw = in.ConsumeBool();
  const int64_t n = knn_fuzz::next_count(in, 40);
  const int dim = in.ConsumeIntegralInRange<int>(-1, 20);
  const size_t rows = dim > 0 ? static_cast<size_t>(dim) : 0;
  const std::vector<float> points =
      knn_fuzz::next_floats(in, static_cast<size_t>(n > 0 ? n : 0) * rows, raw);
  const knn_options opt = fuzzed_options(in);
  knn_index* index = reinterpret_cast<knn_index*>(&index);  // must be overwritten
  int status = knn_index_build(in.ConsumeBool() ? points.data() : nullptr, n, dim,
                               in.ConsumeBool() ? &opt : nullptr, &index);
  check_status(status);
  if (status != KNN_OK) {
    expect(index == nullptr, "a failed build left *out not NULL", status);
    return;
  }
  const int64_t m = knn_fuzz::next_count(in, 12);
  const int k = in.ConsumeIntegralInRange<int>(-1, 40);
  const std::vector<float> queries =
      knn_fuzz::next_floats(in, static_cast<size_t>(m > 0 ? m : 0) * rows, raw);
  const size_t out = static_cast<size_t>(m > 0 ? m : 0) * (k > 0 ? k : 0);
  std::vector<int32_t> idx(out, kSentinel);
  std::vector<float> dist(out, -1.0f);
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0:
      status = knn_index_query(index, queries.data(), m, k, idx.data(), dist.data(),
                               in.ConsumeBool() ? &opt : nullptr);
      check_status(status);
      if (status == KNN_OK && m > 0 && n > 0) {
        std::vector<int> want(out);
        std::vector<float> want_dist(out);
        const int bf = knn_brute_force(points.data(), static_cast<int>(n), queries.data(),
                                       static_cast<int>(m), dim, k, want_dist.data(), want.data());
        expect(bf == KNN_OK, "brute force refused an indexed query", bf);
        expect(std::vector<int>(idx.begin(), idx.end()) == want,
               "index kNN and brute force disagree", status);
        expect(std::memcmp(dist.data(), want_dist.data(), out * sizeof(float)) == 0,
               "index distances differ from brute force", status);
      }
      break;
    case 1: {
      std::vector<int32_t> self(static_cast<size_t>(n) * (k > 0 ? k : 0), kSentinel);
      status = knn_index_query_self(index, k, in.ConsumeBool(), self.data(), nullptr);
      check_status(status);
      break;
    }
    default: {
      const float radius = knn_fuzz::next_float(in, raw);
      const int max_neighbors = in.ConsumeIntegralInRange<int>(-1, 8);
      const size_t slots =
          static_cast<size_t>(m > 0 ? m : 0) * (max_neighbors > 0 ? max_neighbors : 0);
      std::vector<int32_t> r_idx(slots), counts(static_cast<size_t>(m > 0 ? m : 0));
      std::vector<float> r_dist(slots);
      status = knn_index_radius(index, queries.data(), m, radius, max_neighbors, r_idx.data(),
                                r_dist.data(), counts.data(), nullptr);
      check_status(status);
      break;
    }
  }
  check_status(knn_index_free(index));
}

// The memory helpers answer anything without failing.
void helpers(FuzzedDataProvider& in) {
  const int a = in.ConsumeIntegral<int>(), b = in.ConsumeIntegral<int>(),
            c = in.ConsumeIntegral<int>();
  const int64_t big = in.ConsumeIntegral<int64_t>();
  (void)getTreeSize(a);
  (void)getNeededBytesForBuildingKdTree(a);
  (void)getNeededBytesForQueryAll(a, b, c);
  (void)getNeededBytesInSearch(a, b, c, in.ConsumeIntegral<int>(), in.ConsumeIntegral<int>());
  (void)knn_estimate_build_bytes(big, b, nullptr);
  (void)knn_estimate_query_bytes(big, a, big, c, nullptr);
  expect(knn_status_string(a) != nullptr, "knn_status_string returned NULL", a);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: classic(in); break;
    case 1: brute_force(in); break;
    case 2: index_api(in); break;
    default: helpers(in); break;
  }
  return 0;
}
