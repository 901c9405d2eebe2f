// Progress of long calls (knn_set_progress): a host thread polls the record
// while another thread's call runs, and sees, within every stage, done
// non-decreasing, never above total, values between 0 and total while the
// call runs, and done == total when it returns; the answers are unchanged.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "index_test_helpers.h"

namespace knn_test {
namespace {

struct Observation {
  int32_t sequence, stage;
  int64_t total, done;
};

bool same(const Observation& a, const Observation& b) {
  return a.sequence == b.sequence && a.stage == b.stage && a.total == b.total && a.done == b.done;
}

// Polls `record` from another thread until `running` clears; the readers'
// order (sequence, stage, total, done) is the one the header documents.
// It yields between reads rather than sleeping: a sleep of 50 us lasts a
// millisecond or more on Windows (and under Wine), few enough reads that a
// fast machine could finish a stage between two of them. Only changes are
// kept.
class Poller {
 public:
  explicit Poller(const knn_progress* record) : record_(record) {
    thread_ = std::thread([this] {
      while (running_.load()) {
        Observation o;
        o.sequence = __atomic_load_n(&record_->sequence, __ATOMIC_ACQUIRE);
        o.stage = __atomic_load_n(&record_->stage, __ATOMIC_ACQUIRE);
        o.total = __atomic_load_n(&record_->total, __ATOMIC_ACQUIRE);
        o.done = __atomic_load_n(&record_->done, __ATOMIC_ACQUIRE);
        if (seen_.empty() || !same(seen_.back(), o)) seen_.push_back(o);
        std::this_thread::yield();
      }
    });
  }
  std::vector<Observation> stop() {
    running_.store(false);
    thread_.join();
    return seen_;
  }

 private:
  const knn_progress* record_;
  std::atomic<bool> running_{true};
  std::vector<Observation> seen_;
  std::thread thread_;
};

// Every observation consistent; some strictly inside (0, total) of a `stage`.
void expect_monotone(const std::vector<Observation>& seen, int stage) {
  ASSERT_FALSE(seen.empty());
  int64_t inside = 0;
  for (size_t i = 0; i < seen.size(); ++i) {
    const Observation& o = seen[i];
    EXPECT_GE(o.done, 0);
    EXPECT_LE(o.done, o.total) << "observation " << i;
    if (i > 0 && seen[i - 1].sequence == o.sequence && seen[i - 1].stage == o.stage &&
        seen[i - 1].total == o.total) {
      EXPECT_GE(o.done, seen[i - 1].done) << "done went back at observation " << i;
    }
    if (o.stage == stage && o.done > 0 && o.done < o.total) ++inside;
  }
  EXPECT_GT(inside, 0) << "no progress seen between 0 and total in " << seen.size()
                       << " observations";
}

TEST(Progress, IndexBuildAndQueryReportMonotoneProgressToTotal) {
  const int dim = 3;
  const int64_t n = 400000, m = 400000;
  const std::vector<float> points = make_rows(Dist::Uniform, n, dim, 1);
  const std::vector<float> queries = make_query_rows(Dist::Uniform, m, dim, 2);
  knn_progress record;
  ASSERT_EQ(knn_set_progress(&record), KNN_OK);
  EXPECT_EQ(record.stage, KNN_PROGRESS_IDLE);
  EXPECT_EQ(record.sequence, 0);
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  opt.structure = KNN_STRUCTURE_KDTREE;
  opt.leaf_size = 2;  // many levels to report

  Poller build_poller(&record);
  IndexHandle index = build_index(points, dim, opt);
  std::vector<Observation> seen = build_poller.stop();
  ASSERT_TRUE(index);
  EXPECT_EQ(record.stage, KNN_PROGRESS_BUILD);
  EXPECT_EQ(record.done, record.total);
  EXPECT_GT(record.total, 10) << "the CPU kd-tree reports its levels";
  expect_monotone(seen, KNN_PROGRESS_BUILD);

  const int32_t before = record.sequence;
  Poller query_poller(&record);
  const KnnResult got = query_index(index.get(), queries, dim, 4);
  seen = query_poller.stop();
  EXPECT_EQ(record.stage, KNN_PROGRESS_QUERY);
  EXPECT_EQ(record.total, m);
  EXPECT_EQ(record.done, m);
  EXPECT_EQ(record.sequence, before + 1);
  expect_monotone(seen, KNN_PROGRESS_QUERY);
  // Unchanged answers: the first rows against the oracle.
  const std::vector<float> head(queries.begin(), queries.begin() + 300 * dim);
  const KnnResult want = oracle_knn(points.data(), n, head.data(), 300, dim, 4);
  EXPECT_TRUE(
      same_rows(want.idx, std::vector<int>(got.idx.begin(), got.idx.begin() + 300 * 4), 300, 4));
  ASSERT_EQ(knn_set_progress(nullptr), KNN_OK);
}

TEST(Progress, ClassicQueryReportsEveryQueryPoint) {
  const int n = 100000, m = 300000, k = 8;
  const std::vector<Point> points = make_points(Dist::Uniform, n, 3);
  const std::vector<Point> queries = make_query_points(Dist::Uniform, m, 4);
  std::vector<Node> tree(static_cast<size_t>(n));
  ASSERT_EQ(mpBuildKdTree(points.data(), n, tree.data()), KNN_OK);
  knn_progress record;
  ASSERT_EQ(knn_set_progress(&record), KNN_OK);
  std::vector<int> result(static_cast<size_t>(m) * k);
  Poller poller(&record);
  ASSERT_EQ(mpQueryAll(queries.data(), tree.data(), m, n, k, result.data()), KNN_OK);
  const std::vector<Observation> seen = poller.stop();
  EXPECT_EQ(record.stage, KNN_PROGRESS_QUERY);
  EXPECT_EQ(record.total, m);
  EXPECT_EQ(record.done, m);
  expect_monotone(seen, KNN_PROGRESS_QUERY);
  ASSERT_EQ(knn_set_progress(nullptr), KNN_OK);
  // Unregistered: nothing is written any more.
  const knn_progress after = record;
  ASSERT_EQ(mpQueryAll(queries.data(), tree.data(), 1000, n, k, result.data()), KNN_OK);
  EXPECT_EQ(record.sequence, after.sequence);
  EXPECT_EQ(record.done, after.done);
}

// A radius fill runs two stages (the recount, then the rows), each to its total.
// The fill searches its rows once (no recount before it): one query stage.
TEST(Progress, RadiusFillRunsOneStage) {
  const std::vector<float> points = make_rows(Dist::Uniform, 5000, 3, 5);
  const std::vector<float> queries = make_query_rows(Dist::Uniform, 3000, 3, 6);
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  IndexHandle index = build_index(points, 3, opt);
  ASSERT_TRUE(index);
  std::vector<int64_t> counts(3000), offsets(3001);
  ASSERT_EQ(knn_index_radius_count(index.get(), queries.data(), 3000, 0.1f, counts.data(), nullptr),
            KNN_OK);
  ASSERT_EQ(knn_offsets_from_counts(counts.data(), 3000, offsets.data()), KNN_OK);
  std::vector<int32_t> idx(static_cast<size_t>(offsets.back()));
  knn_progress record;
  ASSERT_EQ(knn_set_progress(&record), KNN_OK);
  ASSERT_EQ(knn_index_radius_fill(index.get(), queries.data(), 3000, 0.1f, offsets.data(),
                                  idx.data(), nullptr, nullptr),
            KNN_OK);
  EXPECT_EQ(record.sequence, 1);
  EXPECT_EQ(record.stage, KNN_PROGRESS_QUERY);
  EXPECT_EQ(record.done, 3000);
  EXPECT_EQ(record.total, 3000);
  ASSERT_EQ(knn_set_progress(nullptr), KNN_OK);
}

}  // namespace
}  // namespace knn_test
