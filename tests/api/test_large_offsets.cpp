// 64-bit offsets: n_qp * k beyond 2^31 result slots (2^21 queries x 1025
// neighbours of a 3-node tree: 2,149,582,848 ints, 8.6 GB). The rows past
// slot 2^31 must be right and padded with -1, and nothing past the end of the
// buffer may be written. Needs about 9 GB of free memory; skipped otherwise.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "classic_helpers.h"
#include "knn_gpgpu.h"
#include "oracle.h"
#include "test_data.h"

namespace knn_test {
namespace {

constexpr int kQueries = 1 << 21;
constexpr int kK = 1025;
constexpr int64_t kSlots = int64_t{kQueries} * kK;  // > 2^31
constexpr int64_t kGuard = 4096;                    // ints after the buffer

size_t available_bytes() {
  const long pages = sysconf(_SC_AVPHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<size_t>(pages) * static_cast<size_t>(page_size);
}

// An anonymous mapping for the 8.6 GB result, with transparent huge pages
// where the kernel offers them (far fewer page faults than 4 KiB pages).
class BigBuffer {
 public:
  explicit BigBuffer(size_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
    data_ = static_cast<int*>(p);
  }
  ~BigBuffer() {
    if (data_) munmap(data_, bytes_);
  }
  BigBuffer(const BigBuffer&) = delete;
  BigBuffer& operator=(const BigBuffer&) = delete;
  int* get() const { return data_; }

 private:
  size_t bytes_;
  int* data_ = nullptr;
};

// The three neighbours of query q in the 3-point set, in contract order.
void expected_row(const std::vector<Point>& points, const Point& q, int out[3]) {
  float d[3];
  for (int j = 0; j < 3; ++j) d[j] = contract_sq_distance(q.p, points[j].p, 3);
  int order[3] = {0, 1, 2};
  auto before = [&](int a, int b) { return d[a] < d[b] || (d[a] == d[b] && a < b); };
  if (before(order[1], order[0])) std::swap(order[0], order[1]);
  if (before(order[2], order[1])) std::swap(order[1], order[2]);
  if (before(order[1], order[0])) std::swap(order[0], order[1]);
  for (int j = 0; j < 3; ++j) out[j] = order[j];
}

// Checks rows [first, last): the three ids, then -1 to the end of the row.
// Returns the first bad row or -1.
int64_t first_bad_row(const std::vector<Point>& points, const std::vector<Point>& queries,
                      const int* result, int64_t first, int64_t last) {
  std::atomic<int64_t> bad{INT64_MAX};
  parallel_for(last - first, [&](int64_t r) {
    const int64_t i = first + r;
    const int* row = result + i * kK;
    int want[3];
    expected_row(points, queries[i], want);
    bool ok = row[0] == want[0] && row[1] == want[1] && row[2] == want[2];
    for (int j = 3; ok && j < kK; ++j) ok = row[j] == -1;
    if (!ok) {
      int64_t seen = bad.load();
      while (i < seen && !bad.compare_exchange_weak(seen, i)) {
      }
    }
  });
  return bad.load() == INT64_MAX ? -1 : bad.load();
}

TEST(LargeOffsets, ResultRowsPastTwoToThe31AreRight) {
  static_assert(kSlots > (int64_t{1} << 31), "the test must cross 2^31 slots");
  if (sizeof(size_t) < 8) GTEST_SKIP() << "needs a 64-bit address space";
  const size_t need = static_cast<size_t>(kSlots + kGuard) * sizeof(int) +
                      size_t{kQueries} * sizeof(Point) + (size_t{1} << 30);
  const size_t have = available_bytes();
  if (have < need)
    GTEST_SKIP() << "needs " << need / 1e9 << " GB of free memory for 2^21 x 1025 result slots; "
                 << "sysconf(_SC_AVPHYS_PAGES) reports " << have / 1e9 << " GB";

  const std::vector<Point> points = {
      {{0.0f, 0.0f, 0.0f}}, {{10.0f, 0.0f, 0.0f}}, {{0.0f, 10.0f, 0.0f}}};
  std::vector<Point> queries = make_query_points(Dist::Uniform, kQueries, 2024);
  for (Point& q : queries)
    for (float& c : q.p) c = c * 10.0f + 5.0f;  // around the three points
  const std::vector<Node> tree = build_tree(points);

  const BigBuffer result(static_cast<size_t>(kSlots + kGuard) * sizeof(int));
  if (!result.get()) GTEST_SKIP() << "could not map " << (kSlots + kGuard) * 4 / 1e9 << " GB";
  int* const out = result.get();
  auto fill = [&](int64_t from_row, int64_t to_row) {
    std::fill(out + from_row * kK, out + to_row * kK, kSentinelInt);
  };
  std::fill(out + kSlots, out + kSlots + kGuard, kSentinelInt);
  const int64_t past_2_31 = (int64_t{1} << 31) / kK;  // first row with slots past 2^31
  const int64_t tail = kQueries - 3000;
  fill(0, 1000);
  fill(tail, kQueries);

  KNN_ASSERT_OK(mpQueryAll(queries.data(), tree.data(), kQueries, 3, kK, out));
  EXPECT_EQ(first_bad_row(points, queries, out, 0, kQueries), -1) << "mpQueryAll";
  for (int64_t g = 0; g < kGuard; ++g)
    ASSERT_EQ(out[kSlots + g], kSentinelInt) << "mpQueryAll wrote past the result, at +" << g;

  // queryAll (the device path where there is one) into the same buffer, with
  // the first rows, the rows around 2^31 and the tail reset.
  fill(0, 1000);
  fill(past_2_31 - 500, past_2_31 + 500);
  fill(tail, kQueries);
  KNN_ASSERT_OK(queryAll(queries.data(), tree.data(), kQueries, 3, kK, out));
  EXPECT_EQ(first_bad_row(points, queries, out, 0, kQueries), -1) << "queryAll";
  for (int64_t g = 0; g < kGuard; ++g)
    ASSERT_EQ(out[kSlots + g], kSentinelInt) << "queryAll wrote past the result, at +" << g;

  // The last row, spelled out.
  int want[3];
  expected_row(points, queries[kQueries - 1], want);
  const int* last = out + (kSlots - kK);
  EXPECT_EQ(last[0], want[0]);
  EXPECT_EQ(last[1], want[1]);
  EXPECT_EQ(last[2], want[2]);
  EXPECT_EQ(last[3], -1);
  EXPECT_EQ(last[kK - 1], -1);
}

}  // namespace
}  // namespace knn_test
