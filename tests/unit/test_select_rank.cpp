// The CPU builds' selection (openmp/select_rank.h) against a sorted oracle:
// the key of the rank, every key before it smaller and every key after it
// larger, the keys a permutation of the input; on ranges small enough for
// the quickselect alone and large enough for the sample's bracket (several
// rounds of it), at every kind of rank and on ordered inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "../../openmp/select_rank.h"

namespace knn_test {
namespace {

// A key of the builds' kind: a coordinate with few distinct values, ties
// broken by the index (a total order).
struct Key {
  float coordinate;
  int32_t id;
};

bool before(const Key& a, const Key& b) {
  return (a.coordinate < b.coordinate) | ((a.coordinate == b.coordinate) & (a.id < b.id));
}

enum class Input { kRandom, kFewValues, kAscending, kDescending, kOrganPipe };

std::vector<Key> make_keys(int64_t count, Input input, std::mt19937& rng) {
  std::vector<Key> keys(static_cast<size_t>(count));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::uniform_int_distribution<int> few(0, 3);
  for (int64_t i = 0; i < count; ++i) {
    float c = 0;
    switch (input) {
      case Input::kRandom: c = uniform(rng); break;
      case Input::kFewValues: c = static_cast<float>(few(rng)); break;
      case Input::kAscending: c = static_cast<float>(i); break;
      case Input::kDescending: c = static_cast<float>(count - i); break;
      case Input::kOrganPipe: c = static_cast<float>(std::min(i, count - i)); break;
    }
    keys[static_cast<size_t>(i)] = Key{c, static_cast<int32_t>(i)};
  }
  if (input == Input::kFewValues) std::shuffle(keys.begin(), keys.end(), rng);
  return keys;
}

void expect_selected(std::vector<Key> keys, int64_t rank) {
  std::vector<Key> sorted = keys;
  std::sort(sorted.begin(), sorted.end(), before);
  const Key got =
      knn::omp::select_rank(keys.data(), static_cast<int64_t>(keys.size()), rank, before);
  const size_t r = static_cast<size_t>(rank);
  ASSERT_EQ(got.id, sorted[r].id) << "rank " << rank << " of " << keys.size();
  ASSERT_EQ(keys[r].id, sorted[r].id);
  for (size_t i = 0; i < keys.size(); ++i)
    ASSERT_EQ(i < r   ? before(keys[i], got)
              : i > r ? before(got, keys[i])
                      : true,
              true)
        << "position " << i << ", rank " << rank << " of " << keys.size();
  std::vector<Key> after = keys;
  std::sort(after.begin(), after.end(), before);
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(after[i].id, sorted[i].id);
}

TEST(SelectRank, EveryInputAndRankAgainstASortedOracle) {
  std::mt19937 rng(53);
  for (const int64_t count : {1, 2, 17, 1000, 2049, 5000, 70000, 100000})
    for (const Input input : {Input::kRandom, Input::kFewValues, Input::kAscending,
                              Input::kDescending, Input::kOrganPipe}) {
      const std::vector<Key> keys = make_keys(count, input, rng);
      std::uniform_int_distribution<int64_t> any(0, count - 1);
      for (const int64_t rank : {int64_t{0}, count / 2, count - 1, count / 3, any(rng)}) {
        SCOPED_TRACE(testing::Message() << "count " << count << ", input " << int(input));
        expect_selected(keys, rank);
      }
    }
}

}  // namespace
}  // namespace knn_test
