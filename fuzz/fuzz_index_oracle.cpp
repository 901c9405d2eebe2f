// Fuzz target: the index API's answers against an oracle inside the harness.
// Every structure (kd-tree with tiny leaves, grid, brute force, auto) builds
// over fuzzed points of a fuzzed dimension, in float32 (knn_index_build) or
// float64 (knn_index_build_f64); kNN, self kNN (with and without
// exclude_self) and radius queries must equal, bit for bit, a brute force
// written here: the contract's squared distance ((d0*d0 + d1*d1) + d2*d2)...
// in the index's precision without FMA (this file is compiled with
// -ffp-contract=off), ascending by (distance, index), -1 / +infinity past
// the answers. Coordinates are small integers (ties everywhere), or small
// integers scaled by a power of two (subnormal to large; in float64 half of
// them offset by 4.5e6, a UTM frame), or arbitrary finite values, never so
// large that a squared distance overflows.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "fuzz_support.h"

namespace {

using knn_fuzz::check_status;
using knn_fuzz::expect;

template <typename Scalar>
constexpr Scalar kInf = std::numeric_limits<Scalar>::infinity();

template <typename Scalar>
struct Cloud {
  int dim;
  std::vector<Scalar> coords;
};

// Raw bits of an arbitrary value of the scalar type.
template <typename Scalar>
Scalar arbitrary(FuzzedDataProvider& in) {
  using Bits = std::conditional_t<sizeof(Scalar) == 4, uint32_t, uint64_t>;
  const Bits bits = in.ConsumeIntegral<Bits>();
  Scalar f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Arbitrary values stay below 2^40 (float32) or 2^400 (float64) in
// magnitude: squared differences of up to 20 coordinates stay far below the
// type's max.
template <typename Scalar>
const Scalar kArbitraryBound = std::ldexp(Scalar{1}, sizeof(Scalar) == 4 ? 40 : 400);

// One coordinate in the harness's chosen regime.
template <typename Scalar>
Scalar coordinate(FuzzedDataProvider& in, int regime, int scale_exp) {
  switch (regime) {
    case 0: return static_cast<Scalar>(in.ConsumeIntegralInRange<int>(-4, 4));
    case 1: {
      const Scalar small =
          std::ldexp(static_cast<Scalar>(in.ConsumeIntegralInRange<int>(-64, 64)), scale_exp);
      // float64 only: odd exponents sit in a UTM frame, where float32 fails.
      const bool offset = sizeof(Scalar) == 8 && scale_exp % 2 != 0;
      return offset ? static_cast<Scalar>(4.5e6) + small : small;
    }
    default: {
      Scalar f = arbitrary<Scalar>(in);
      const Scalar bound = kArbitraryBound<Scalar>;
      if (!std::isfinite(f) || std::fabs(f) >= bound) f = std::fmod(f, bound);
      return std::isfinite(f) ? f : Scalar{0};
    }
  }
}

template <typename Scalar>
std::vector<Scalar> coordinates(FuzzedDataProvider& in, size_t count, int regime, int scale_exp) {
  std::vector<Scalar> v(count);
  for (Scalar& f : v) f = coordinate<Scalar>(in, regime, scale_exp);
  return v;
}

// The contract's squared distance, in the index's precision.
template <typename Scalar>
Scalar squared_distance(const Scalar* a, const Scalar* b, int dim) {
  Scalar sum = 0;
  for (int d = 0; d < dim; ++d) {
    const Scalar diff = a[d] - b[d];
    const Scalar sq = diff * diff;
    sum = d == 0 ? sq : sum + sq;
  }
  return sum;
}

// Every point by (distance, index) from q.
template <typename Scalar>
std::vector<std::pair<Scalar, int>> ranked(const Cloud<Scalar>& c, const Scalar* q) {
  const int n = static_cast<int>(c.coords.size() / c.dim);
  std::vector<std::pair<Scalar, int>> all(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    all[i] = {squared_distance(q, &c.coords[static_cast<size_t>(i) * c.dim], c.dim), i};
  std::sort(all.begin(), all.end());
  return all;
}

template <typename Scalar>
bool same_bits(Scalar a, Scalar b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// Row `row` of a result (width slots) against the expected list, padded
// with the missing value.
template <typename Scalar>
void expect_row(const std::vector<std::pair<Scalar, int>>& want, const int32_t* idx,
                const Scalar* dist, int width, const char* what) {
  for (int j = 0; j < width; ++j) {
    const bool present = j < static_cast<int>(want.size());
    const int wi = present ? want[j].second : -1;
    const Scalar wd = present ? want[j].first : kInf<Scalar>;
    if (idx[j] != wi || !same_bits(dist[j], wd)) {
      std::fprintf(stderr, "slot %d: got (%d, %.17g), want (%d, %.17g)\n", j, idx[j],
                   static_cast<double>(dist[j]), wi, static_cast<double>(wd));
      knn_fuzz::finding(what, KNN_OK);
    }
  }
}

// The two families, one name each for the harness.
int build(const float* p, int64_t n, int dim, const knn_options* o, knn_index** out) {
  return knn_index_build(p, n, dim, o, out);
}
int build(const double* p, int64_t n, int dim, const knn_options* o, knn_index** out) {
  return knn_index_build_f64(p, n, dim, o, out);
}
int query(const knn_index* x, const float* q, int64_t m, int k, int32_t* i, float* d,
          const knn_options* o) {
  return knn_index_query(x, q, m, k, i, d, o);
}
int query(const knn_index* x, const double* q, int64_t m, int k, int32_t* i, double* d,
          const knn_options* o) {
  return knn_index_query_f64(x, q, m, k, i, d, o);
}
int query_self(const knn_index* x, int k, int exclude, int32_t* i, float* d) {
  return knn_index_query_self(x, k, exclude, i, d);
}
int query_self(const knn_index* x, int k, int exclude, int32_t* i, double* d) {
  return knn_index_query_self_f64(x, k, exclude, i, d);
}
int radius_rows(const knn_index* x, const float* q, int64_t m, float r, int max, int32_t* i,
                float* d, int32_t* c, const knn_options* o) {
  return knn_index_radius(x, q, m, r, max, i, d, c, o);
}
int radius_rows(const knn_index* x, const double* q, int64_t m, double r, int max, int32_t* i,
                double* d, int32_t* c, const knn_options* o) {
  return knn_index_radius_f64(x, q, m, r, max, i, d, c, o);
}

template <typename Scalar>
int run(FuzzedDataProvider& in, int structure) {
  // Mostly 3-D (the grid's dimension), else 1..20 (20: above AUTO's brute-force limit).
  const int dim = in.ConsumeBool() ? 3 : in.ConsumeIntegralInRange<int>(1, 20);
  const int regime = in.ConsumeIntegralInRange<int>(0, 2);
  const int scale_exp = in.ConsumeIntegralInRange<int>(-140, 30);
  const int n = in.ConsumeIntegralInRange<int>(0, 300);
  Cloud<Scalar> cloud{dim,
                      coordinates<Scalar>(in, static_cast<size_t>(n) * dim, regime, scale_exp)};
  int scalar = -1;

  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  opt.structure = structure;
  opt.leaf_size = in.ConsumeIntegralInRange<int>(0, 9);
  opt.threads = in.ConsumeIntegralInRange<int>(0, 2);
  knn_index* index = nullptr;
  int status = build(cloud.coords.data(), n, dim, &opt, &index);
  check_status(status);
  if (structure == KNN_STRUCTURE_GRID && dim != 3) {
    expect(status == KNN_ERR_UNSUPPORTED && index == nullptr, "a grid of dim != 3 was built",
           status);
    return 0;
  }
  expect(status == KNN_OK && index != nullptr, "a build of finite points failed", status);
  check_status(knn_index_scalar(index, &scalar));
  expect(scalar == (sizeof(Scalar) == 8 ? KNN_SCALAR_FLOAT64 : KNN_SCALAR_FLOAT32),
         "knn_index_scalar disagrees with the build", KNN_OK);
  int64_t info_n = -1;
  int info_dim = -1, info_structure = -1;
  check_status(knn_index_info(index, &info_n, &info_dim, nullptr, &info_structure));
  expect(info_n == n && info_dim == dim, "knn_index_info disagrees with the build", KNN_OK);
  expect(structure == KNN_STRUCTURE_AUTO || info_structure == structure ||
             (structure == KNN_STRUCTURE_GRID && info_structure == KNN_STRUCTURE_KDTREE),
         "the index serves with another structure than asked", KNN_OK);

  for (int calls = in.ConsumeIntegralInRange<int>(1, 3); calls > 0 && in.remaining_bytes() > 0;
       --calls) {
    const int kind = in.ConsumeIntegralInRange<int>(0, 2);
    if (kind == 0) {  // kNN of fuzzed queries
      const int m = in.ConsumeIntegralInRange<int>(1, 6);
      const int k = in.ConsumeIntegralInRange<int>(1, n + 3);
      // Queries: fresh coordinates, or copies of indexed points (distance 0).
      std::vector<Scalar> q =
          coordinates<Scalar>(in, static_cast<size_t>(m) * dim, regime, scale_exp);
      if (n > 0 && in.ConsumeBool())
        for (int i = 0; i < m; ++i) {
          const int from = in.ConsumeIntegralInRange<int>(0, n - 1);
          std::copy_n(&cloud.coords[static_cast<size_t>(from) * dim], dim,
                      &q[static_cast<size_t>(i) * dim]);
        }
      std::vector<int32_t> idx(static_cast<size_t>(m) * k, 0x7badf00d);
      std::vector<Scalar> dist(idx.size(), -1);
      status = query(index, q.data(), m, k, idx.data(), dist.data(), &opt);
      check_status(status);
      expect(status == KNN_OK, "a kNN query failed", status);
      for (int i = 0; i < m; ++i) {
        std::vector<std::pair<Scalar, int>> want = ranked(cloud, &q[static_cast<size_t>(i) * dim]);
        if (static_cast<int>(want.size()) > k) want.resize(static_cast<size_t>(k));
        expect_row(want, &idx[static_cast<size_t>(i) * k], &dist[static_cast<size_t>(i) * k], k,
                   "index kNN differs from the oracle");
      }
    } else if (kind == 1) {  // self kNN
      const int k = in.ConsumeIntegralInRange<int>(1, n + 2);
      const bool exclude = in.ConsumeBool();
      std::vector<int32_t> idx(static_cast<size_t>(n) * k, 0x7badf00d);
      std::vector<Scalar> dist(idx.size(), -1);
      status = query_self(index, k, exclude, idx.data(), dist.data());
      check_status(status);
      expect(status == KNN_OK, "a self query failed", status);
      for (int i = 0; i < n; ++i) {
        std::vector<std::pair<Scalar, int>> want =
            ranked(cloud, &cloud.coords[static_cast<size_t>(i) * dim]);
        if (exclude)
          want.erase(std::find_if(want.begin(), want.end(),
                                  [i](const std::pair<Scalar, int>& e) { return e.second == i; }));
        if (static_cast<int>(want.size()) > k) want.resize(static_cast<size_t>(k));
        expect_row(want, &idx[static_cast<size_t>(i) * k], &dist[static_cast<size_t>(i) * k], k,
                   "index self kNN differs from the oracle");
      }
    } else {  // radius
      const int m = in.ConsumeIntegralInRange<int>(1, 6);
      const int max_neighbors = in.ConsumeIntegralInRange<int>(0, n + 2);
      const Scalar radius =
          in.ConsumeBool()
              ? kInf<Scalar>
              : std::ldexp(static_cast<Scalar>(in.ConsumeIntegralInRange<int>(0, 24)),
                           regime == 1 ? scale_exp : in.ConsumeIntegralInRange<int>(-3, 3));
      std::vector<Scalar> q =
          coordinates<Scalar>(in, static_cast<size_t>(m) * dim, regime, scale_exp);
      const size_t slots = static_cast<size_t>(m) * max_neighbors;
      std::vector<int32_t> idx(slots, 0x7badf00d), counts(static_cast<size_t>(m), -7);
      std::vector<Scalar> dist(slots, -1);
      status = radius_rows(index, q.data(), m, radius, max_neighbors, idx.data(), dist.data(),
                           counts.data(), &opt);
      check_status(status);
      expect(status == KNN_OK, "a radius query failed", status);
      const Scalar r2 = radius * radius;
      for (int i = 0; i < m; ++i) {
        std::vector<std::pair<Scalar, int>> want = ranked(cloud, &q[static_cast<size_t>(i) * dim]);
        want.erase(std::find_if(want.begin(), want.end(),
                                [r2](const std::pair<Scalar, int>& e) { return !(e.first <= r2); }),
                   want.end());
        expect(counts[i] == static_cast<int32_t>(want.size()), "a radius count differs", status);
        if (static_cast<int>(want.size()) > max_neighbors)
          want.resize(static_cast<size_t>(max_neighbors));
        expect_row(want, idx.data() + static_cast<size_t>(i) * max_neighbors,
                   dist.data() + static_cast<size_t>(i) * max_neighbors, max_neighbors,
                   "index radius differs from the oracle");
      }
    }
  }
  check_status(knn_index_free(index));
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  // One byte: the structure in its low two bits (as the seeds were written),
  // the precision in the next.
  const int choice = in.ConsumeIntegralInRange<int>(0, 7);
  const int structure = choice & 3;
  return choice & 4 ? run<double>(in, structure) : run<float>(in, structure);
}
