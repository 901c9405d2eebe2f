// Fuzz target: the index API's answers against an oracle inside the harness.
// Every structure (kd-tree with tiny leaves, grid, brute force, auto) builds
// over fuzzed points of a fuzzed dimension; kNN, self kNN (with and without
// exclude_self) and radius queries must equal, bit for bit, a brute force
// written here: the contract's float32 squared distance
// ((d0*d0 + d1*d1) + d2*d2)... without FMA (this file is compiled with
// -ffp-contract=off), ascending by (distance, index), -1 / +infinity past
// the answers. Coordinates are small integers (ties everywhere), or small
// integers scaled by a power of two (subnormal to large), or arbitrary
// finite floats, never so large that a squared distance overflows.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "fuzz_support.h"

namespace {

using knn_fuzz::check_status;
using knn_fuzz::expect;

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Cloud {
  int dim;
  std::vector<float> coords;
};

// One coordinate in the harness's chosen regime.
float coordinate(FuzzedDataProvider& in, int regime, int scale_exp) {
  switch (regime) {
    case 0: return static_cast<float>(in.ConsumeIntegralInRange<int>(-4, 4));
    case 1:
      return std::ldexp(static_cast<float>(in.ConsumeIntegralInRange<int>(-64, 64)), scale_exp);
    default: {
      // Any finite float below 2^40 in magnitude: squared differences of up
      // to 16 coordinates stay far below FLT_MAX.
      const uint32_t bits = in.ConsumeIntegral<uint32_t>();
      float f;
      std::memcpy(&f, &bits, sizeof f);
      if (!std::isfinite(f) || std::fabs(f) >= 0x1p40f) f = std::fmod(f, 0x1p40f);
      return std::isfinite(f) ? f : 0.0f;
    }
  }
}

std::vector<float> coordinates(FuzzedDataProvider& in, size_t count, int regime, int scale_exp) {
  std::vector<float> v(count);
  for (float& f : v) f = coordinate(in, regime, scale_exp);
  return v;
}

// The contract's squared distance.
float squared_distance(const float* a, const float* b, int dim) {
  float sum = 0.0f;
  for (int d = 0; d < dim; ++d) {
    const float diff = a[d] - b[d];
    const float sq = diff * diff;
    sum = d == 0 ? sq : sum + sq;
  }
  return sum;
}

// Every point by (distance, index) from q.
std::vector<std::pair<float, int>> ranked(const Cloud& c, const float* q) {
  const int n = static_cast<int>(c.coords.size() / c.dim);
  std::vector<std::pair<float, int>> all(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    all[i] = {squared_distance(q, &c.coords[static_cast<size_t>(i) * c.dim], c.dim), i};
  std::sort(all.begin(), all.end());
  return all;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Row `row` of a result (width slots) against the expected list, padded
// with the missing value.
void expect_row(const std::vector<std::pair<float, int>>& want, const int32_t* idx,
                const float* dist, int width, const char* what) {
  for (int j = 0; j < width; ++j) {
    const bool present = j < static_cast<int>(want.size());
    const int wi = present ? want[j].second : -1;
    const float wd = present ? want[j].first : kInf;
    if (idx[j] != wi || !same_bits(dist[j], wd)) {
      std::fprintf(stderr, "slot %d: got (%d, %.9g), want (%d, %.9g)\n", j, idx[j],
                   static_cast<double>(dist[j]), wi, static_cast<double>(wd));
      knn_fuzz::finding(what, KNN_OK);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const int structure =
      in.ConsumeIntegralInRange<int>(KNN_STRUCTURE_AUTO, KNN_STRUCTURE_BRUTE_FORCE);
  // Mostly 3-D (the grid's dimension), else 1..20 (20: above AUTO's brute-force limit).
  const int dim = in.ConsumeBool() ? 3 : in.ConsumeIntegralInRange<int>(1, 20);
  const int regime = in.ConsumeIntegralInRange<int>(0, 2);
  const int scale_exp = in.ConsumeIntegralInRange<int>(-140, 30);
  const int n = in.ConsumeIntegralInRange<int>(0, 300);
  Cloud cloud{dim, coordinates(in, static_cast<size_t>(n) * dim, regime, scale_exp)};

  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  opt.structure = structure;
  opt.leaf_size = in.ConsumeIntegralInRange<int>(0, 9);
  opt.threads = in.ConsumeIntegralInRange<int>(0, 2);
  knn_index* index = nullptr;
  int status = knn_index_build(cloud.coords.data(), n, dim, &opt, &index);
  check_status(status);
  if (structure == KNN_STRUCTURE_GRID && dim != 3) {
    expect(status == KNN_ERR_UNSUPPORTED && index == nullptr, "a grid of dim != 3 was built",
           status);
    return 0;
  }
  expect(status == KNN_OK && index != nullptr, "a build of finite points failed", status);
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
      std::vector<float> q = coordinates(in, static_cast<size_t>(m) * dim, regime, scale_exp);
      if (n > 0 && in.ConsumeBool())
        for (int i = 0; i < m; ++i) {
          const int from = in.ConsumeIntegralInRange<int>(0, n - 1);
          std::copy_n(&cloud.coords[static_cast<size_t>(from) * dim], dim,
                      &q[static_cast<size_t>(i) * dim]);
        }
      std::vector<int32_t> idx(static_cast<size_t>(m) * k, 0x7badf00d);
      std::vector<float> dist(idx.size(), -1.0f);
      status = knn_index_query(index, q.data(), m, k, idx.data(), dist.data(), &opt);
      check_status(status);
      expect(status == KNN_OK, "a kNN query failed", status);
      for (int i = 0; i < m; ++i) {
        std::vector<std::pair<float, int>> want = ranked(cloud, &q[static_cast<size_t>(i) * dim]);
        if (static_cast<int>(want.size()) > k) want.resize(static_cast<size_t>(k));
        expect_row(want, &idx[static_cast<size_t>(i) * k], &dist[static_cast<size_t>(i) * k], k,
                   "index kNN differs from the oracle");
      }
    } else if (kind == 1) {  // self kNN
      const int k = in.ConsumeIntegralInRange<int>(1, n + 2);
      const bool exclude = in.ConsumeBool();
      std::vector<int32_t> idx(static_cast<size_t>(n) * k, 0x7badf00d);
      std::vector<float> dist(idx.size(), -1.0f);
      status = knn_index_query_self(index, k, exclude, idx.data(), dist.data());
      check_status(status);
      expect(status == KNN_OK, "a self query failed", status);
      for (int i = 0; i < n; ++i) {
        std::vector<std::pair<float, int>> want =
            ranked(cloud, &cloud.coords[static_cast<size_t>(i) * dim]);
        if (exclude)
          want.erase(std::find_if(want.begin(), want.end(),
                                  [i](const std::pair<float, int>& e) { return e.second == i; }));
        if (static_cast<int>(want.size()) > k) want.resize(static_cast<size_t>(k));
        expect_row(want, &idx[static_cast<size_t>(i) * k], &dist[static_cast<size_t>(i) * k], k,
                   "index self kNN differs from the oracle");
      }
    } else {  // radius
      const int m = in.ConsumeIntegralInRange<int>(1, 6);
      const int max_neighbors = in.ConsumeIntegralInRange<int>(0, n + 2);
      const float radius =
          in.ConsumeBool()
              ? kInf
              : std::ldexp(static_cast<float>(in.ConsumeIntegralInRange<int>(0, 24)),
                           regime == 1 ? scale_exp : in.ConsumeIntegralInRange<int>(-3, 3));
      std::vector<float> q = coordinates(in, static_cast<size_t>(m) * dim, regime, scale_exp);
      const size_t slots = static_cast<size_t>(m) * max_neighbors;
      std::vector<int32_t> idx(slots, 0x7badf00d), counts(static_cast<size_t>(m), -7);
      std::vector<float> dist(slots, -1.0f);
      status = knn_index_radius(index, q.data(), m, radius, max_neighbors, idx.data(), dist.data(),
                                counts.data(), &opt);
      check_status(status);
      expect(status == KNN_OK, "a radius query failed", status);
      const float r2 = radius * radius;
      for (int i = 0; i < m; ++i) {
        std::vector<std::pair<float, int>> want = ranked(cloud, &q[static_cast<size_t>(i) * dim]);
        want.erase(std::find_if(want.begin(), want.end(),
                                [r2](const std::pair<float, int>& e) { return !(e.first <= r2); }),
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
