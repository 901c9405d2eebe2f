// The CPU engine's one k-list (openmp/knn_list.h), on its own: every row it
// writes against a sorted oracle (all candidates sorted by (squared
// distance, index), the first k kept), in both of its regimes (sorted
// insertion up to kSortedListMaxK, a heap beyond), with ties, capacities
// below k, rows shorter than k, a skipped index, any offer order, one
// list reused across queries as the engines reuse theirs, and lists started
// under a bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "../../openmp/knn_list.h"

namespace knn_test {
namespace {

template <typename Scalar>
using Entry = knn::BasicNeighbor<Scalar>;

enum class Order { kRandom, kAscending, kDescending };

// `count` candidates with distinct indices below `n_points`: distances from
// `distinct` values (few values: many ties), offered in `order`.
template <typename Scalar>
std::vector<Entry<Scalar>> candidates(int count, int64_t n_points, int distinct, Order order,
                                      std::mt19937& rng) {
  std::vector<int32_t> ids(static_cast<size_t>(n_points));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::uniform_int_distribution<int> value(0, distinct - 1);
  std::vector<Entry<Scalar>> out;
  for (int i = 0; i < count; ++i)
    out.push_back(
        Entry<Scalar>{static_cast<Scalar>(value(rng)) * Scalar(0.25), ids[static_cast<size_t>(i)]});
  const auto nearer = [](const Entry<Scalar>& a, const Entry<Scalar>& b) {
    return knn::closer(a, b);
  };
  if (order == Order::kAscending) std::sort(out.begin(), out.end(), nearer);
  if (order == Order::kDescending) std::sort(out.rbegin(), out.rend(), nearer);
  return out;
}

// The row the contract asks for: the k nearest by (distance, index) but
// `skip`, within the capacity min(take, n_points), padded with -1 / +inf.
template <typename Scalar>
void expected_row(std::vector<Entry<Scalar>> all, int64_t take, int64_t n_points, int k,
                  int32_t skip, std::vector<int32_t>& ids, std::vector<Scalar>& dists) {
  std::sort(all.begin(), all.end(),
            [](const Entry<Scalar>& a, const Entry<Scalar>& b) { return knn::closer(a, b); });
  all.resize(std::min<size_t>(all.size(), static_cast<size_t>(std::min(take, n_points))));
  ids.assign(static_cast<size_t>(k), -1);
  dists.assign(static_cast<size_t>(k), std::numeric_limits<Scalar>::infinity());
  size_t j = 0;
  for (const Entry<Scalar>& e : all) {
    if (e.index == skip || j == static_cast<size_t>(k)) continue;
    ids[j] = e.index;
    dists[j] = e.sq_distance;
    ++j;
  }
}

template <typename Scalar>
void check_list() {
  std::mt19937 rng(20261126);
  using List = knn::omp::BasicNeighborList<Scalar>;
  ASSERT_EQ(List::kSortedListMaxK, 192) << "the k below straddle the two regimes";
  for (const int k : {1, 2, 31, 100, 192, 193, 500}) {
    // n_points below k caps the list; above it the list holds k.
    for (const int64_t n_points : {int64_t{k} * 3, int64_t{k} / 2 + 1, int64_t{k}}) {
      List list(k, n_points);  // reused by every query below
      for (const int distinct : {1, 3, 1000000}) {
        for (const Order order : {Order::kRandom, Order::kAscending, Order::kDescending}) {
          // All points offered, and fewer than the capacity (padding).
          for (const int count : {static_cast<int>(n_points), static_cast<int>(n_points) / 3}) {
            const std::vector<Entry<Scalar>> offered =
                candidates<Scalar>(count, n_points, distinct, order, rng);
            const int32_t skip = offered.empty() ? -1 : offered[offered.size() / 2].index;
            for (const int32_t skipped : {int32_t{-1}, skip}) {
              list.reset();
              for (const Entry<Scalar>& e : offered) {
                // What a search does: offers only what may enter, then
                // trusts the list to keep the best.
                if (e.sq_distance <= list.limit()) list.offer(e.sq_distance, e.index);
              }
              std::vector<int32_t> ids(static_cast<size_t>(k)), want_ids;
              std::vector<Scalar> dists(static_cast<size_t>(k)), want_dists;
              list.write(k, skipped, ids.data(), dists.data());
              expected_row(offered, k, n_points, k, skipped, want_ids, want_dists);
              SCOPED_TRACE(::testing::Message()
                           << "k " << k << ", n_points " << n_points << ", distinct " << distinct
                           << ", order " << static_cast<int>(order) << ", count " << count
                           << ", skip " << skipped);
              ASSERT_EQ(ids, want_ids);
              ASSERT_EQ(dists, want_dists);
            }
          }
        }
      }
    }
  }
}

TEST(KnnList, RowsMatchTheSortedOracleFloat) { check_list<float>(); }
TEST(KnnList, RowsMatchTheSortedOracleDouble) { check_list<double>(); }

// The bar a search prunes with: +infinity until the list holds its
// capacity, then exactly the k-th candidate in (distance, index) order.
TEST(KnnList, BarIsTheKthCandidateOnceFull) {
  std::mt19937 rng(7);
  for (const int k : {1, 31, 192, 193, 500}) {
    knn::omp::BasicNeighborList<float> list(k, 4 * int64_t{k});
    const std::vector<Entry<float>> offered =
        candidates<float>(4 * k, 4 * int64_t{k}, 5, Order::kRandom, rng);
    std::vector<Entry<float>> seen;
    for (const Entry<float>& e : offered) {
      list.offer(e.sq_distance, e.index);
      seen.push_back(e);
      std::vector<Entry<float>> sorted = seen;
      std::sort(sorted.begin(), sorted.end(),
                [](const Entry<float>& a, const Entry<float>& b) { return knn::closer(a, b); });
      if (static_cast<int>(seen.size()) < k) {
        ASSERT_EQ(list.limit(), std::numeric_limits<float>::infinity());
        ASSERT_TRUE(list.may_improve(1e30f, std::numeric_limits<int32_t>::max() - 1));
        continue;
      }
      const Entry<float>& kth = sorted[static_cast<size_t>(k) - 1];
      ASSERT_EQ(list.limit(), kth.sq_distance) << "k " << k << " after " << seen.size();
      ASSERT_TRUE(list.may_improve(kth.sq_distance, kth.index - 1));
      ASSERT_FALSE(list.may_improve(kth.sq_distance, kth.index));
    }
  }
}

// A list started under a bound (reset(at_most), the hint of the kd-tree's
// kNN walks): at or above the k-th candidate's distance it ends full with
// the open list's row, in both regimes and with ties at the bound; below it
// it ends short, which tells the walk to go again from an open list.
TEST(KnnList, ABoundAtOrAboveTheKthGivesTheOpenRowBelowItEndsShort) {
  std::mt19937 rng(53);
  for (const int k : {1, 31, 100, 193}) {
    const int64_t n_points = 4 * int64_t{k};
    knn::omp::BasicNeighborList<double> list(k, n_points);
    for (const int distinct : {3, 1000000}) {
      const std::vector<Entry<double>> offered =
          candidates<double>(static_cast<int>(n_points), n_points, distinct, Order::kRandom, rng);
      std::vector<Entry<double>> sorted = offered;
      std::sort(sorted.begin(), sorted.end(),
                [](const Entry<double>& a, const Entry<double>& b) { return knn::closer(a, b); });
      const double kth = sorted[static_cast<size_t>(k) - 1].sq_distance;
      std::vector<int32_t> want_ids;
      std::vector<double> want_dists;
      expected_row(offered, k, n_points, k, -1, want_ids, want_dists);
      const double below = std::nextafter(kth, -1.0);
      for (const double bound : {kth, kth * 2 + 1, below}) {
        SCOPED_TRACE(::testing::Message() << "k " << k << ", distinct " << distinct << ", bound "
                                          << bound << " (k-th " << kth << ")");
        list.reset(bound);
        for (const Entry<double>& e : offered)
          if (e.sq_distance <= list.limit()) list.offer(e.sq_distance, e.index);
        if (bound < kth) {
          EXPECT_FALSE(list.full());
          continue;
        }
        ASSERT_TRUE(list.full());
        std::vector<int32_t> ids(static_cast<size_t>(k));
        std::vector<double> dists(static_cast<size_t>(k));
        list.write(k, -1, ids.data(), dists.data());
        EXPECT_EQ(ids, want_ids);
        EXPECT_EQ(dists, want_dists);
      }
    }
  }
}

// A list of capacity 0 (no points) takes nothing and writes padding.
TEST(KnnList, EmptyCapacityWritesPadding) {
  knn::omp::BasicNeighborList<float> list(5, 0);
  EXPECT_EQ(list.limit(), -std::numeric_limits<float>::infinity());
  list.offer(0.0f, 0);
  std::vector<int32_t> ids(5, 7);
  std::vector<float> dists(5, 1.0f);
  list.write(5, -1, ids.data(), dists.data());
  EXPECT_EQ(ids, std::vector<int32_t>(5, -1));
  EXPECT_EQ(dists, std::vector<float>(5, std::numeric_limits<float>::infinity()));
}

}  // namespace
}  // namespace knn_test
