// The bound of the GPU's binned rows (cuda/core/kth_bins.h), on the CPU: the
// rule the thread searches run (keep a candidate when its bits are below the
// limit, then count it) over streams of squared distances, against the
// stream itself sorted. At the end, either nothing was dropped and every
// candidate was kept, or the kept candidates below the limit are exactly the
// stream's candidates below it, at least k of them, and so hold the k
// smallest. Streams: random radii in 3-D, ties (few distinct values, all
// equal, all zero), distances over many octaves, subnormal and near FLT_MAX,
// in random, ascending and descending order; guesses right, far below, far
// above, 0 and the largest value.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "../../cuda/core/kth_bins.h"

namespace knn_test {
namespace {

template <typename Scalar>
using Bins = knn::cuda::KthBins<Scalar>;

struct Counters {
  std::array<int, Bins<float>::kBins> count{};
  void add(int b) { ++count[static_cast<size_t>(b)]; }
  int get(int b) const { return count[static_cast<size_t>(b)]; }
};

enum class Shape { kRandom, kAscending, kDescending };

template <typename Scalar>
struct Outcome {
  Bins<Scalar> bins;
  std::vector<Scalar> kept;
};

// Runs the rule over `stream` with lists of k and the guess.
template <typename Scalar>
Outcome<Scalar> run(const std::vector<Scalar>& stream, int k, Scalar guess) {
  Outcome<Scalar> out{Bins<Scalar>(guess, k), {}};
  Counters counters;
  for (const Scalar d : stream) {
    if (!(knn::bits_of(d) < out.bins.limit())) continue;
    out.kept.push_back(d);
    const int b = out.bins.bin(d);
    EXPECT_LE(b, out.bins.top);
    const auto before = out.bins.limit();
    const bool fell = out.bins.count(b, counters);
    EXPECT_EQ(fell, out.bins.limit() != before);
    if (!out.bins.open()) {
      EXPECT_EQ(out.bins.bound(), knn::scalar_of_bits<Scalar>(out.bins.limit()));
    }
  }
  // The counts are the kept candidates' bins.
  int counted = 0;
  for (const Scalar d : out.kept) counted += out.bins.bin(d) <= out.bins.top ? 1 : 0;
  EXPECT_EQ(counted, out.bins.total);
  return out;
}

template <typename Scalar>
void expect_exact(const std::vector<Scalar>& stream, int k, Scalar guess) {
  const Outcome<Scalar> o = run(stream, k, guess);
  if (o.bins.open()) {
    EXPECT_EQ(o.kept, stream) << "nothing was dropped, so everything is kept";
    return;
  }
  const auto below = [&](Scalar d) { return knn::bits_of(d) < o.bins.limit(); };
  std::vector<Scalar> kept_below, stream_below;
  std::copy_if(o.kept.begin(), o.kept.end(), std::back_inserter(kept_below), below);
  std::copy_if(stream.begin(), stream.end(), std::back_inserter(stream_below), below);
  std::sort(kept_below.begin(), kept_below.end());
  std::sort(stream_below.begin(), stream_below.end());
  EXPECT_EQ(kept_below, stream_below);
  ASSERT_GE(static_cast<int>(kept_below.size()), k);
  std::vector<Scalar> sorted = stream;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_TRUE(below(sorted[static_cast<size_t>(k - 1)])) << "the k-th smallest is kept";
}

template <typename Scalar>
std::vector<Scalar> make_stream(int length, int kind, Shape shape, std::mt19937& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<Scalar> s;
  for (int i = 0; i < length; ++i) {
    double d = 0.0;
    switch (kind) {
      case 0: d = std::pow(std::cbrt(unit(rng)) * 3.0, 2.0); break;  // 3-D radii squared
      case 1: d = std::floor(unit(rng) * 4.0) * 0.25; break;         // four values
      case 2: d = 7.0; break;                                        // all equal
      case 3: d = 0.0; break;                                        // all zero
      case 4: d = std::exp2(unit(rng) * 200.0 - 100.0); break;       // many octaves
      case 5: d = unit(rng) * 1e-40; break;                          // subnormal floats
      case 6: d = static_cast<double>(FLT_MAX) * (0.5 + 0.5 * unit(rng)); break;  // near FLT_MAX
    }
    s.push_back(static_cast<Scalar>(d));
  }
  if (shape == Shape::kAscending) std::sort(s.begin(), s.end());
  if (shape == Shape::kDescending) std::sort(s.rbegin(), s.rend());
  return s;
}

template <typename Scalar>
void check_every_stream() {
  std::mt19937 rng(7);
  for (const int k : {1, 17, 100, 256})
    for (const int length : {0, 1, k - 1, k, k + 1, 3 * k, 40 * k})
      for (int kind = 0; kind <= 6; ++kind)
        for (const Shape shape : {Shape::kRandom, Shape::kAscending, Shape::kDescending}) {
          const std::vector<Scalar> stream = make_stream<Scalar>(length, kind, shape, rng);
          std::vector<Scalar> sorted = stream;
          std::sort(sorted.begin(), sorted.end());
          const Scalar kth = length >= k ? sorted[static_cast<size_t>(k - 1)] : Scalar(1);
          for (const Scalar guess : {kth, kth * Scalar(1e-6), kth * Scalar(1e6), Scalar(0),
                                     std::numeric_limits<Scalar>::max()}) {
            SCOPED_TRACE(::testing::Message()
                         << "k " << k << ", length " << length << ", kind " << kind << ", shape "
                         << static_cast<int>(shape) << ", guess " << guess);
            expect_exact(stream, k, guess);
          }
        }
}

TEST(KthBins, KeepsEveryCandidateBelowTheLimitAndTheKSmallestFloat) { check_every_stream<float>(); }
TEST(KthBins, KeepsEveryCandidateBelowTheLimitAndTheKSmallestDouble) {
  check_every_stream<double>();
}

// A right guess makes the bound tight: at most a bin's width (an eighth of
// an octave of the squared distance) above the k-th, so a 3-D stream keeps
// little beyond k.
TEST(KthBins, ARightGuessKeepsLittleBeyondK) {
  std::mt19937 rng(11);
  for (const int k : {17, 100, 256}) {
    const std::vector<float> stream = make_stream<float>(20 * k, 0, Shape::kRandom, rng);
    std::vector<float> sorted = stream;
    std::sort(sorted.begin(), sorted.end());
    const float kth = sorted[static_cast<size_t>(k - 1)];
    const Outcome<float> o = run(stream, k, kth);
    ASSERT_FALSE(o.bins.open());
    EXPECT_LE(o.bins.bound(), kth * 1.25f) << "k " << k;
    const auto below = std::count_if(o.kept.begin(), o.kept.end(),
                                     [&](float d) { return knn::bits_of(d) < o.bins.limit(); });
    EXPECT_LE(below, k + k / 4 + 2) << "k " << k;
  }
}

// The window: a guess places it, clamped so that no limit reaches infinity.
TEST(KthBins, WindowStaysBelowInfinity) {
  for (const float guess : {0.0f, 1e-45f, 1.0f, FLT_MAX, std::numeric_limits<float>::infinity()}) {
    Bins<float> bins(guess, 1);
    EXPECT_GE(bins.base, 0);
    EXPECT_LE(bins.base + Bins<float>::kBins, Bins<float>::absolute_bin(INFINITY));
    bins.top = Bins<float>::kBins - 2;
    EXPECT_TRUE(std::isfinite(bins.bound())) << guess;
  }
  Bins<float> bins(1.0f, 1);
  EXPECT_EQ(bins.bin(0.0f), 0);
  EXPECT_EQ(bins.bin(FLT_MAX), Bins<float>::kBins - 1);
  EXPECT_EQ(bins.bin(1.0f), Bins<float>::kBins / 2);
}

}  // namespace
}  // namespace knn_test
