// Loads the built shared library exactly as a host does (dlopen, dlsym,
// dlclose), finds every symbol of tests/abi_symbols.txt, runs a tiny build and
// query through the pointers, unloads it, loads it again, and exits cleanly.
// It does not link the library; it only borrows the header's declarations
// for the function types.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "knn_gpgpu.h"

#ifndef KNN_LIBRARY_PATH
#error "KNN_LIBRARY_PATH must name the built libknn_gpgpu.so"
#endif

// Every name in abi_symbols.txt is declared in the header (checked at compile
// time, without odr-using it).
#define KNN_ABI_SYMBOL(name) \
  static_assert(sizeof(&::name) > 0, #name " is in abi_symbols.txt but not in knn_gpgpu.h");
#include "abi_symbols.inc"
#undef KNN_ABI_SYMBOL

namespace {

const char* const kSymbols[] = {
#define KNN_ABI_SYMBOL(name) #name,
#include "abi_symbols.inc"
#undef KNN_ABI_SYMBOL
};

int failures = 0;

#define CHECK(cond, ...)                                                     \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::fprintf(stderr, "FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                     \
      std::fprintf(stderr, "\n");                                            \
      ++failures;                                                            \
    }                                                                        \
  } while (0)

template <class Fn>
Fn lookup(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}

#define LOOKUP(lib, name) lookup<decltype(&::name)>(lib, #name)

// The k nearest of n points for one query, by (squared distance, index), in
// plain float arithmetic (the test is compiled without FMA contraction).
std::vector<int> brute_force(const std::vector<Point>& points, const Point& q, int k) {
  std::vector<int> order(points.size());
  std::vector<float> d(points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    order[i] = static_cast<int>(i);
    const float dx = q.p[0] - points[i].p[0], dy = q.p[1] - points[i].p[1],
                dz = q.p[2] - points[i].p[2];
    const float sx = dx * dx, sy = dy * dy, sz = dz * dz;
    const float sxy = sx + sy;
    d[i] = sxy + sz;
  }
  for (size_t i = 1; i < order.size(); ++i)  // insertion sort: n is tiny
    for (size_t j = i; j > 0; --j) {
      const int a = order[j - 1], b = order[j];
      if (d[b] < d[a] || (d[b] == d[a] && b < a))
        order[j - 1] = b, order[j] = a;
      else
        break;
    }
  order.resize(static_cast<size_t>(k), -1);
  return order;
}

void exercise(void* lib) {
  for (const char* name : kSymbols)
    CHECK(dlsym(lib, name) != nullptr, "dlsym(%s): %s", name, dlerror());

  const auto version = LOOKUP(lib, knn_version);
  const auto status_string = LOOKUP(lib, knn_status_string);
  const auto last_error = LOOKUP(lib, knn_last_error);
  const auto mp_build = LOOKUP(lib, mpBuildKdTree);
  const auto build = LOOKUP(lib, buildKdTree);
  const auto mp_query = LOOKUP(lib, mpQueryAll);
  const auto query = LOOKUP(lib, queryAll);
  const auto tree_size = LOOKUP(lib, getTreeSize);
  const auto device_count = LOOKUP(lib, cuGetDeviceCount);
  const auto bf = LOOKUP(lib, knn_brute_force);
  if (!version || !status_string || !last_error || !mp_build || !build || !mp_query || !query ||
      !tree_size || !device_count || !bf) {
    CHECK(false, "a symbol is missing; skipping the calls");
    return;
  }

  CHECK(version() == KNN_VERSION_NUMBER, "knn_version() = %d, header says %d", version(),
        KNN_VERSION_NUMBER);
  CHECK(std::strstr(status_string(12345), "unknown status") != nullptr, "%s", status_string(12345));
  CHECK(device_count() >= 0, "cuGetDeviceCount() = %d", device_count());

  // A tiny build and query: 50 points on a 5 x 5 x 2 grid, 7 queries, k = 4.
  std::vector<Point> points;
  for (int i = 0; i < 50; ++i)
    points.push_back(Point{{static_cast<float>(i % 5), static_cast<float>(i / 5 % 5),
                            static_cast<float>(i / 25) * 0.5f}});
  const std::vector<Point> queries = {{{0, 0, 0}},      {{2.2f, 1.9f, 0.3f}}, {{4, 4, 0.5f}},
                                      {{-3, 7, 1}},     {{2, 2, 0.25f}},      {{1.5f, 3.5f, 0}},
                                      {{100, -100, 50}}};
  const int n = static_cast<int>(points.size()), m = static_cast<int>(queries.size()), k = 4;
  CHECK(tree_size(n) == n * sizeof(Node), "getTreeSize(%d) = %zu", n, tree_size(n));
  std::vector<Node> tree(points.size()), tree2(points.size());
  CHECK(mp_build(points.data(), n, tree.data()) == KNN_OK, "mpBuildKdTree: %s", last_error());
  CHECK(build(points.data(), n, tree2.data()) == KNN_OK, "buildKdTree: %s", last_error());
  CHECK(std::memcmp(tree.data(), tree2.data(), tree.size() * sizeof(Node)) == 0,
        "buildKdTree and mpBuildKdTree differ");
  std::vector<int> result(static_cast<size_t>(m) * k, -2), result2(result.size(), -2);
  CHECK(mp_query(queries.data(), tree.data(), m, n, k, result.data()) == KNN_OK, "mpQueryAll: %s",
        last_error());
  CHECK(query(queries.data(), tree.data(), m, n, k, result2.data()) == KNN_OK, "queryAll: %s",
        last_error());
  CHECK(result == result2, "queryAll and mpQueryAll differ");
  for (int i = 0; i < m; ++i) {
    const std::vector<int> want = brute_force(points, queries[i], k);
    for (int j = 0; j < k; ++j)
      CHECK(result[i * k + j] == want[j], "query %d slot %d: got %d, want %d", i, j,
            result[i * k + j], want[j]);
  }
  std::vector<int> ind(static_cast<size_t>(m) * k);
  CHECK(bf(&points[0].p[0], n, &queries[0].p[0], m, 3, k, nullptr, ind.data()) == KNN_OK,
        "knn_brute_force: %s", last_error());
  CHECK(ind == result, "knn_brute_force and mpQueryAll differ");

  // An error through the pointers: status and message.
  CHECK(mp_build(nullptr, 3, tree.data()) == KNN_ERR_INVALID_ARGUMENT, "NULL points accepted");
  CHECK(last_error()[0] != '\0', "no message after a failure");
}

}  // namespace

int main() {
  for (int round = 0; round < 2; ++round) {
    void* lib = dlopen(KNN_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      std::fprintf(stderr, "dlopen(%s) failed: %s\n", KNN_LIBRARY_PATH, dlerror());
      return 1;
    }
    exercise(lib);
    if (dlclose(lib) != 0) {
      std::fprintf(stderr, "dlclose failed: %s\n", dlerror());
      ++failures;
    }
  }
  std::printf("%zu symbols, two load/unload rounds: %s\n", sizeof kSymbols / sizeof kSymbols[0],
              failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
