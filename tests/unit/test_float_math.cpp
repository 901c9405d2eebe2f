// The float helpers of common/float_math.h that every engine shares, on the
// host: the order-preserving keys and their inverse (radix sorts of the
// CUDA builds, the bounding boxes of the CUDA grid and classic search)
// against the scalars' own order, is_finite_float against std::isfinite,
// and the point-to-box bound (every engine's pruning) against the
// contract's distance of tests/support/oracle.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "../../common/float_math.h"
#include "oracle.h"
#include "test_data.h"

namespace knn_test {
namespace {

// Ascending values of every class: infinities, normals, subnormals, both
// zeros, and random magnitudes of both signs.
template <typename Scalar>
std::vector<Scalar> values_of_every_class() {
  using L = std::numeric_limits<Scalar>;
  std::vector<Scalar> v = {-L::infinity(),   -L::max(),    Scalar(-1), -L::min(),
                           -L::denorm_min(), Scalar(-0.0), Scalar(0),  L::denorm_min(),
                           L::min(),         Scalar(1),    L::max(),   L::infinity()};
  Rng rng(17);
  for (int i = 0; i < 2000; ++i) {
    const double magnitude =
        std::ldexp(rng.uniform(1.0, 2.0), static_cast<int>(rng.below(80)) - 40);
    v.push_back(static_cast<Scalar>(i % 2 ? magnitude : -magnitude));
  }
  std::sort(v.begin(), v.end());
  return v;
}

template <typename Scalar>
void expect_keys_follow_values() {
  const std::vector<Scalar> v = values_of_every_class<Scalar>();
  for (size_t i = 0; i + 1 < v.size(); ++i) {
    const auto a = knn::ordered_key(v[i]), b = knn::ordered_key(v[i + 1]);
    // Equal values (-0 and +0 included) share a key; smaller values have
    // smaller keys.
    if (v[i] == v[i + 1])
      ASSERT_EQ(a, b) << v[i];
    else
      ASSERT_LT(a, b) << v[i] << " < " << v[i + 1];
  }
  // The inverse gives the value back, bit for bit; -0 comes back as +0.
  std::vector<Scalar> want, back;
  for (const Scalar x : v) {
    want.push_back(x == 0 ? Scalar(0) : x);
    back.push_back(knn::scalar_from_ordered_key<Scalar>(knn::ordered_key(x)));
  }
  EXPECT_TRUE(same_bits(want, back));
}

TEST(OrderedKey, FollowsTheFloatOrderAndInverts) { expect_keys_follow_values<float>(); }
TEST(OrderedKey, FollowsTheDoubleOrderAndInverts) { expect_keys_follow_values<double>(); }

template <typename Scalar>
void expect_finite_as_std() {
  std::vector<Scalar> v = values_of_every_class<Scalar>();
  v.push_back(std::numeric_limits<Scalar>::quiet_NaN());
  v.push_back(-std::numeric_limits<Scalar>::quiet_NaN());
  for (const Scalar x : v) ASSERT_EQ(knn::is_finite_float(x), std::isfinite(x)) << x;
}

TEST(IsFiniteFloat, AgreesWithStdIsfinite) {
  expect_finite_as_std<float>();
  expect_finite_as_std<double>();
}

// The box of a point set against every point of it, for queries inside and
// outside, on data whose differences overflow, vanish or cancel: never more
// than the contract's distance of a point inside, and equal to it for the
// point of the box nearest the query (the query clamped to the box), so it
// is the best bound the box gives.
TEST(BoxDistance, IsTheDistanceToTheClampedQuery) {
  for (const Dist dist : all_dists())
    for (const int dim : {1, 3, 7}) {
      SCOPED_TRACE(std::string(dist_name(dist)) + " dim=" + std::to_string(dim));
      const int64_t n = 50, m = 200;
      const std::vector<float> points = make_rows(dist, n, dim, 5);
      const std::vector<float> queries = make_query_rows(dist, m, dim, 6);
      std::vector<float> lo(points.begin(), points.begin() + dim), hi = lo;
      for (int64_t j = 0; j < n; ++j)
        for (int d = 0; d < dim; ++d) {
          lo[d] = std::min(lo[d], points[j * dim + d]);
          hi[d] = std::max(hi[d], points[j * dim + d]);
        }
      for (int64_t i = 0; i < m; ++i) {
        const float* q = &queries[i * dim];
        const float bound = knn::box_distance(q, lo.data(), hi.data(), dim);
        for (int64_t j = 0; j < n; ++j)
          ASSERT_LE(bound, contract_sq_distance(q, &points[j * dim], dim))
              << "query " << i << " point " << j;
        std::vector<float> clamped(q, q + dim);
        for (int d = 0; d < dim; ++d) clamped[d] = std::min(std::max(clamped[d], lo[d]), hi[d]);
        ASSERT_EQ(bound, contract_sq_distance(q, clamped.data(), dim)) << "query " << i;
      }
      // A point of the set is inside the box.
      EXPECT_EQ(knn::box_distance(&points[0], lo.data(), hi.data(), dim), 0.0f);
    }
  const float lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY}, q[2] = {0.0f, 1.0f};
  EXPECT_EQ(knn::box_distance(q, lo, hi, 2), INFINITY) << "the empty box";
}

}  // namespace
}  // namespace knn_test
