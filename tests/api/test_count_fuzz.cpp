// Every 64-bit (and int) count of every entry point of include/knn_gpgpu.h,
// fuzzed with adversarial values (-1, 0, 1, 2^31 - 1, 2^31, 2^32, 2^62,
// INT64_MAX, INT64_MIN, SIZE_MAX cast, the edges of PTRDIFF_MAX / element
// size) and random combinations from a fixed seed, over small real buffers
// (issue 51, item 2). For each call the header's rules alone
// (tests/support/count_rules.h, 128-bit arithmetic of its own) say whether the
// counts are impossible (a negative count, k < 1, an array whose byte count exceeds
// PTRDIFF_MAX, m + 1 offsets that overflow, n beyond an index's int32 ids):
//   - refused: KNN_ERR_INVALID_ARGUMENT, a message naming the call, every
//     output untouched (poisoned, compared byte for byte), *out NULL; and the
//     next valid call of the same entry point answers as the oracle does;
//   - possible and within the real buffers: KNN_OK (or the documented status
//     for the rest of the arguments) and the brute-force oracle's answer, with
//     nothing written past the documented sizes;
//   - possible but larger than the buffers (a plausible 2^32 queries): not
//     called, since the library must then read the caller's array.
// Each entry point must see refusals and valid calls both. A symbol the
// library exports that this test neither fuzzes nor lists as count-free fails
// the test, so a new entry point cannot skip it.
#include <gtest/gtest.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "count_rules.h"
#include "gpu_test_support.h"
#include "index_oracle.h"
#include "index_test_helpers.h"
#include "mesh_api_calls.h"
#include "mesh_oracle.h"
#include "neighbourhood_oracle.h"
#include "oracle.h"
#include "pip_oracle.h"

namespace knn_test {
namespace {

using knn_counts::product_above;

const std::vector<int64_t>& adversarial_counts() {
  static const std::vector<int64_t> v = {-1,
                                         0,
                                         1,
                                         2,
                                         3,
                                         5,
                                         INT32_MAX,
                                         int64_t{1} << 31,
                                         int64_t{1} << 32,
                                         int64_t{1} << 60,
                                         (int64_t{1} << 61) + 1,
                                         int64_t{1} << 62,
                                         INT64_MAX,
                                         INT64_MIN,
                                         static_cast<int64_t>(SIZE_MAX),
                                         PTRDIFF_MAX / 4,
                                         PTRDIFF_MAX / 4 + 1,
                                         PTRDIFF_MAX / 8 - 1,
                                         PTRDIFF_MAX / 8,
                                         PTRDIFF_MAX / 12 + 1,
                                         PTRDIFF_MAX / 16 + 1};
  return v;
}
const std::vector<int>& adversarial_ints() {
  static const std::vector<int> v = {-1,   0,    1,       2,       3,       8,
                                     4096, 4097, 1 << 16, 1 << 30, INT_MAX, INT_MIN};
  return v;
}

// Counts: every adversarial value, then random ones (adversarial or small).
class Counts {
 public:
  explicit Counts(uint64_t seed) : rng_(seed) {}
  int64_t any64(int64_t small_max) {
    if (rng_() % 2) return adversarial_counts()[rng_() % adversarial_counts().size()];
    return static_cast<int64_t>(rng_() % static_cast<uint64_t>(small_max + 2)) - 1;
  }
  int any32(int small_max) { return static_cast<int>(any64(small_max) % (int64_t{1} << 31)); }
  int adversarial32() { return adversarial_ints()[rng_() % adversarial_ints().size()]; }
  int pick_int(int small_max) { return rng_() % 2 ? adversarial32() : any32(small_max); }

 private:
  std::mt19937_64 rng_;
};

constexpr int kRandomCalls = 150;

// The entry points fuzzed here, with a status (the estimates and memory
// helpers have none: Estimates checks their documented 0 and SIZE_MAX).
const std::set<std::string> kFuzzed = {"buildKdTree",
                                       "cuBuildKdTree",
                                       "mpBuildKdTree",
                                       "queryAll",
                                       "cuQueryAll",
                                       "mpQueryAll",
                                       "knn_brute_force",
                                       "knn_index_build",
                                       "knn_index_build_f64",
                                       "knn_index_query",
                                       "knn_index_query_f64",
                                       "knn_index_query_self",
                                       "knn_index_query_self_f64",
                                       "knn_index_radius",
                                       "knn_index_radius_f64",
                                       "knn_index_radius_count",
                                       "knn_index_radius_count_f64",
                                       "knn_offsets_from_counts",
                                       "knn_index_radius_fill",
                                       "knn_index_radius_fill_f64",
                                       "knn_index_radius_pairs",
                                       "knn_index_count_neighbors",
                                       "knn_index_count_neighbors_f64",
                                       "knn_index_serialize",
                                       "knn_index_deserialize",
                                       "knn_quadtree_build",
                                       "knn_quadtree_build_f64",
                                       "knn_points_in_polygons_count",
                                       "knn_points_in_polygons_count_f64",
                                       "knn_points_in_polygons",
                                       "knn_points_in_polygons_f64",
                                       "knn_mesh_build",
                                       "knn_mesh_build_f64",
                                       "knn_mesh_closest",
                                       "knn_mesh_closest_f64",
                                       "knn_mesh_signed_distance",
                                       "knn_mesh_signed_distance_f64",
                                       "knn_mesh_deviation_report",
                                       "knn_mesh_deviation_report_f64",
                                       "knn_mesh_serialize",
                                       "knn_mesh_deserialize",
                                       "knn_mesh_align",
                                       "knn_mesh_align_f64",
                                       "knn_mesh_align_ex",
                                       "knn_mesh_align_ex_f64",
                                       "knn_index_normals",
                                       "knn_index_normals_f64",
                                       "knn_index_outlier_scores",
                                       "knn_index_outlier_scores_f64",
                                       "knn_index_statistical_inliers",
                                       "knn_index_statistical_inliers_f64",
                                       "knn_index_kth_distances",
                                       "knn_index_kth_distances_f64",
                                       "knn_index_neighbor_counts",
                                       "knn_index_neighbor_counts_f64",
                                       "knn_index_radius_inliers",
                                       "knn_index_radius_inliers_f64",
                                       "knn_index_align",
                                       "knn_index_align_f64"};
const std::set<std::string> kHelpers = {"getTreeSize",
                                        "getNeededBytesForBuildingKdTree",
                                        "getNeededBytesForQueryAll",
                                        "getNeededBytesInSearch",
                                        "knn_estimate_build_bytes",
                                        "knn_estimate_build_bytes_f64",
                                        "knn_estimate_query_bytes",
                                        "knn_estimate_query_bytes_f64",
                                        "knn_estimate_mesh_bytes",
                                        "knn_estimate_stats_bytes",
                                        "knn_estimate_stats_bytes_f64"};
// Exported functions that take no count.
const std::set<std::string> kCountFree = {
    "knn_status_string",       "knn_last_error",    "knn_version",
    "knn_set_cancel_flag",     "knn_set_progress",  "knn_options_init",
    "knn_options_init_v2",     "knn_index_free",    "knn_index_info",
    "knn_index_scalar",        "knn_quadtree_free", "knn_index_serialized_size",
    "getFreeBytesOnGpu",       "cuSetDevice",       "cuGetDevice",
    "cuGetDeviceCount",        "knn_mesh_free",     "knn_mesh_info",
    "knn_mesh_serialized_size"};

// The tally of one entry point: refusals and answered calls both must occur.
struct Tally {
  int refused = 0, answered = 0, skipped = 0;
};
std::map<std::string, Tally>& tallies() {
  static std::map<std::string, Tally> t;
  return t;
}

// Every entry point a test fuzzed saw refusals and valid calls.
void expect_exercised(const std::vector<std::string>& calls) {
  for (const std::string& call : calls) {
    EXPECT_EQ(kFuzzed.count(call), 1u) << call;
    const Tally& t = tallies()[call];
    EXPECT_GT(t.refused, 0) << call << ": no refusal";
    EXPECT_GT(t.answered, 0) << call << ": no valid call";
  }
}

template <class T>
std::vector<T> poisoned(size_t count) {
  std::vector<T> v(count);
  std::memset(v.data(), 0xA5, count * sizeof(T));
  return v;
}
template <class T>
bool still_poisoned(const std::vector<T>& v, size_t from = 0) {
  std::vector<unsigned char> p(sizeof(T), 0xA5);
  for (size_t i = from; i < v.size(); ++i)
    if (std::memcmp(&v[i], p.data(), sizeof(T)) != 0) return false;
  return true;
}

// A refusal as the header documents it: INVALID_ARGUMENT with a message that
// names the call.
::testing::AssertionResult refused_by(int status, const char* call) {
  if (status != KNN_ERR_INVALID_ARGUMENT)
    return ::testing::AssertionFailure()
           << call << ": status " << status << " (" << knn_status_string(status)
           << "), want KNN_ERR_INVALID_ARGUMENT; message: " << knn_last_error();
  if (std::string(knn_last_error()).rfind(call, 0) != 0)
    return ::testing::AssertionFailure()
           << call << ": message \"" << knn_last_error() << "\" does not name the call";
  return ::testing::AssertionSuccess();
}

// ---- Data: small-integer coordinates, so that float32 and float64 distances
// are the same exact values and the float32 oracle serves both precisions.

struct Data {
  int dim = 3;
  int64_t n = 40, q = 5;
  std::vector<float> points, queries;
  std::vector<double> points64, queries64;
};

Data make_data(int dim, uint64_t seed) {
  Data d;
  d.dim = dim;
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < d.n * dim; ++i) d.points.push_back(static_cast<float>(rng() % 9) - 4.0f);
  for (int64_t i = 0; i < d.q * dim; ++i)
    d.queries.push_back(static_cast<float>(rng() % 11) - 5.0f);
  d.points64.assign(d.points.begin(), d.points.end());
  d.queries64.assign(d.queries.begin(), d.queries.end());
  return d;
}

knn_options cpu_options(int backend = KNN_BACKEND_OPENMP) {
  knn_options o;
  knn_options_init(&o);
  o.backend = backend;
  o.structure = KNN_STRUCTURE_KDTREE;
  o.threads = 1;
  return o;
}

struct Index {
  knn_index* handle = nullptr;
  ~Index() { knn_index_free(handle); }
};

template <class Scalar>
const Scalar* rows_of(const Data& d, bool queries);
template <>
const float* rows_of<float>(const Data& d, bool queries) {
  return queries ? d.queries.data() : d.points.data();
}
template <>
const double* rows_of<double>(const Data& d, bool queries) {
  return queries ? d.queries64.data() : d.points64.data();
}

int build(const float* points, int64_t n, int dim, const knn_options* o, knn_index** out) {
  return knn_index_build(points, n, dim, o, out);
}
int build(const double* points, int64_t n, int dim, const knn_options* o, knn_index** out) {
  return knn_index_build_f64(points, n, dim, o, out);
}

// The precision's entry points, by overload.
int query(const knn_index* x, const float* q, int64_t m, int k, int32_t* i, float* d,
          const knn_options* o) {
  return knn_index_query(x, q, m, k, i, d, o);
}
int query(const knn_index* x, const double* q, int64_t m, int k, int32_t* i, double* d,
          const knn_options* o) {
  return knn_index_query_f64(x, q, m, k, i, d, o);
}
int query_self(const knn_index* x, int k, int ex, int32_t* i, float* d) {
  return knn_index_query_self(x, k, ex, i, d);
}
int query_self(const knn_index* x, int k, int ex, int32_t* i, double* d) {
  return knn_index_query_self_f64(x, k, ex, i, d);
}
int radius(const knn_index* x, const float* q, int64_t m, float r, int mn, int32_t* i, float* d,
           int32_t* c, const knn_options* o) {
  return knn_index_radius(x, q, m, r, mn, i, d, c, o);
}
int radius(const knn_index* x, const double* q, int64_t m, double r, int mn, int32_t* i, double* d,
           int32_t* c, const knn_options* o) {
  return knn_index_radius_f64(x, q, m, r, mn, i, d, c, o);
}
int radius_count(const knn_index* x, const float* q, int64_t m, float r, int64_t* c,
                 const knn_options* o) {
  return knn_index_radius_count(x, q, m, r, c, o);
}
int radius_count(const knn_index* x, const double* q, int64_t m, double r, int64_t* c,
                 const knn_options* o) {
  return knn_index_radius_count_f64(x, q, m, r, c, o);
}
int count_neighbors(const knn_index* x, const float* q, int64_t m, const double* r, int64_t nr,
                    int64_t* c, const knn_options* o) {
  return knn_index_count_neighbors(x, q, m, r, nr, nullptr, nullptr, c, nullptr, o);
}
int count_neighbors(const knn_index* x, const double* q, int64_t m, const double* r, int64_t nr,
                    int64_t* c, const knn_options* o) {
  return knn_index_count_neighbors_f64(x, q, m, r, nr, nullptr, nullptr, c, nullptr, o);
}
int radius_fill(const knn_index* x, const float* q, int64_t m, float r, const int64_t* off,
                int32_t* i, float* d, const knn_options* o) {
  return knn_index_radius_fill(x, q, m, r, off, i, d, o);
}
int radius_fill(const knn_index* x, const double* q, int64_t m, double r, const int64_t* off,
                int32_t* i, double* d, const knn_options* o) {
  return knn_index_radius_fill_f64(x, q, m, r, off, i, d, o);
}
template <class Scalar>
std::string named(const char* call) {
  return std::string(call) + (sizeof(Scalar) == 8 ? "_f64" : "");
}

// Rows of the library against the oracle's, first `slots` entries.
template <class Scalar>
::testing::AssertionResult same_slots(const std::vector<int>& want_i,
                                      const std::vector<float>& want_d,
                                      const std::vector<int32_t>& got_i,
                                      const std::vector<Scalar>& got_d, size_t slots) {
  for (size_t s = 0; s < slots; ++s)
    if (got_i[s] != want_i[s] || got_d[s] != static_cast<Scalar>(want_d[s]))
      return ::testing::AssertionFailure()
             << "slot " << s << ": (" << got_i[s] << ", " << got_d[s] << ") but the oracle has ("
             << want_i[s] << ", " << want_d[s] << ")";
  return ::testing::AssertionSuccess();
}

constexpr size_t kSlots = 64;  // output slots of the kNN and radius buffers
constexpr float kRadius = 3.0f;

// ---- The index calls -----------------------------------------------------------

template <class Scalar>
class IndexCalls {
 public:
  IndexCalls(const Data& d, int backend) : d_(d), opt_(cpu_options(backend)) {
    EXPECT_EQ(build(rows_of<Scalar>(d, false), d.n, d.dim, &opt_, &index_.handle), KNN_OK)
        << knn_last_error();
  }

  // knn_index_query: counts m and k.
  void query_case(int64_t m, int k) {
    const std::string call = named<Scalar>("knn_index_query");
    const bool refuse = knn_counts::index_query_refused(m, k, d_.dim, sizeof(Scalar));
    if (!refuse && (m > d_.q || product_above(m, k, kSlots))) {
      ++tallies()[call].skipped;
      return;
    }
    std::vector<int32_t> idx = poisoned<int32_t>(kSlots);
    std::vector<Scalar> dist = poisoned<Scalar>(kSlots);
    const int status =
        query(index_.handle, rows_of<Scalar>(d_, true), m, k, idx.data(), dist.data(), &opt_);
    if (refuse) {
      ++tallies()[call].refused;
      ASSERT_TRUE(refused_by(status, call.c_str())) << "m " << m << ", k " << k;
      ASSERT_TRUE(still_poisoned(idx) && still_poisoned(dist)) << call << " wrote after refusing";
      return valid_query(3, 4);
    }
    ++tallies()[call].answered;
    ASSERT_EQ(status, KNN_OK) << call << " m " << m << " k " << k << ": " << knn_last_error();
    check_query(m, k, idx, dist);
  }

  // knn_index_query_self: k (the row count is the index's size).
  void query_self_case(int k) {
    const std::string call = named<Scalar>("knn_index_query_self");
    const bool refuse = k < 1;
    const size_t capacity = static_cast<size_t>(d_.n) * 8;
    if (!refuse && static_cast<size_t>(k) > 8) {
      ++tallies()[call].skipped;
      return;
    }
    std::vector<int32_t> idx = poisoned<int32_t>(capacity);
    std::vector<Scalar> dist = poisoned<Scalar>(capacity);
    const int status = query_self(index_.handle, k, 1, idx.data(), dist.data());
    if (refuse) {
      ++tallies()[call].refused;
      ASSERT_TRUE(refused_by(status, call.c_str())) << "k " << k;
      ASSERT_TRUE(still_poisoned(idx) && still_poisoned(dist));
      return valid_query(3, 4);
    }
    ++tallies()[call].answered;
    ASSERT_EQ(status, KNN_OK) << knn_last_error();
    const KnnResult want = oracle_self(d_.points.data(), d_.n, d_.dim, k, true);
    ASSERT_TRUE(same_slots(want.idx, want.dist, idx, dist, want.idx.size()));
    ASSERT_TRUE(still_poisoned(idx, want.idx.size()) && still_poisoned(dist, want.idx.size()));
  }

  // knn_index_radius: m and max_neighbors.
  void radius_case(int64_t m, int max_neighbors) {
    const std::string call = named<Scalar>("knn_index_radius");
    const bool refuse = knn_counts::index_radius_refused(m, max_neighbors, d_.dim, sizeof(Scalar));
    if (!refuse && (m > d_.q || product_above(m, max_neighbors, kSlots))) {
      ++tallies()[call].skipped;
      return;
    }
    std::vector<int32_t> idx = poisoned<int32_t>(kSlots), counts = poisoned<int32_t>(kSlots);
    std::vector<Scalar> dist = poisoned<Scalar>(kSlots);
    const int status = radius(index_.handle, rows_of<Scalar>(d_, true), m, Scalar{kRadius},
                              max_neighbors, idx.data(), dist.data(), counts.data(), &opt_);
    if (refuse) {
      ++tallies()[call].refused;
      ASSERT_TRUE(refused_by(status, call.c_str())) << "m " << m << ", max " << max_neighbors;
      ASSERT_TRUE(still_poisoned(idx) && still_poisoned(dist) && still_poisoned(counts));
      return valid_query(3, 4);
    }
    ++tallies()[call].answered;
    ASSERT_EQ(status, KNN_OK) << knn_last_error();
    const RadiusResult want =
        oracle_radius(d_.points.data(), d_.n, d_.queries.data(), m, d_.dim, kRadius, max_neighbors);
    ASSERT_TRUE(same_slots(want.idx, want.dist, idx, dist, want.idx.size()));
    for (int64_t i = 0; i < m; ++i) ASSERT_EQ(counts[i], want.counts[i]) << "query " << i;
    ASSERT_TRUE(still_poisoned(idx, want.idx.size()) && still_poisoned(counts, m));
  }

  // knn_index_radius_count: m.
  void radius_count_case(int64_t m) {
    const std::string call = named<Scalar>("knn_index_radius_count");
    const bool refuse = knn_counts::radius_count_refused(m, d_.dim, sizeof(Scalar));
    if (!refuse && m > d_.q) {
      ++tallies()[call].skipped;
      return;
    }
    std::vector<int64_t> counts = poisoned<int64_t>(kSlots);
    const int status = radius_count(index_.handle, rows_of<Scalar>(d_, true), m, Scalar{kRadius},
                                    counts.data(), &opt_);
    if (refuse) {
      ++tallies()[call].refused;
      ASSERT_TRUE(refused_by(status, call.c_str())) << "m " << m;
      ASSERT_TRUE(still_poisoned(counts));
      return valid_csr();
    }
    ++tallies()[call].answered;
    ASSERT_EQ(status, KNN_OK) << knn_last_error();
    const RadiusResult want =
        oracle_radius(d_.points.data(), d_.n, d_.queries.data(), m, d_.dim, kRadius, 0);
    for (int64_t i = 0; i < m; ++i) ASSERT_EQ(counts[i], want.counts[i]) << "query " << i;
    ASSERT_TRUE(still_poisoned(counts, m));
  }

  // knn_index_radius_fill: m (offsets are the true running sum of the first
  // min(m, q) queries' counts, so that only m decides).
  void radius_fill_case(int64_t m) {
    const std::string call = named<Scalar>("knn_index_radius_fill");
    const bool refuse = knn_counts::radius_fill_refused(m, d_.dim, sizeof(Scalar));
    if (!refuse && m > d_.q) {
      ++tallies()[call].skipped;
      return;
    }
    const int64_t rows = std::min<int64_t>(std::max<int64_t>(m, 0), d_.q);
    const RadiusResult want =
        oracle_radius(d_.points.data(), d_.n, d_.queries.data(), rows, d_.dim, kRadius, 0);
    std::vector<int64_t> offsets{0};
    for (int c : want.counts) offsets.push_back(offsets.back() + c);
    const size_t capacity = static_cast<size_t>(offsets.back()) + 8;
    std::vector<int32_t> idx = poisoned<int32_t>(capacity);
    std::vector<Scalar> dist = poisoned<Scalar>(capacity);
    const int status = radius_fill(index_.handle, rows_of<Scalar>(d_, true), m, Scalar{kRadius},
                                   offsets.data(), idx.data(), dist.data(), &opt_);
    if (refuse) {
      ++tallies()[call].refused;
      ASSERT_TRUE(refused_by(status, call.c_str())) << "m " << m;
      ASSERT_TRUE(still_poisoned(idx) && still_poisoned(dist));
      return valid_csr();
    }
    ++tallies()[call].answered;
    ASSERT_EQ(status, KNN_OK) << knn_last_error();
    const int max_count = rows == 0 ? 0 : *std::max_element(want.counts.begin(), want.counts.end());
    const RadiusResult rows_want =
        oracle_radius(d_.points.data(), d_.n, d_.queries.data(), rows, d_.dim, kRadius, max_count);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < want.counts[i]; ++j) {
        const size_t at = static_cast<size_t>(offsets[i] + j);
        const size_t from = static_cast<size_t>(i * max_count + j);
        ASSERT_EQ(idx[at], rows_want.idx[from]) << "query " << i << " entry " << j;
        ASSERT_EQ(dist[at], static_cast<Scalar>(rows_want.dist[from]));
      }
    ASSERT_TRUE(still_poisoned(idx, offsets.back()) && still_poisoned(dist, offsets.back()));
  }

  // knn_index_count_neighbors: m and n_radii (radii whose squares are exact
  // in float and double, so the float32 oracle's predicate is the call's).
  void count_neighbors_case(int64_t m, int64_t n_radii) {
    const std::string call = named<Scalar>("knn_index_count_neighbors");
    const bool refuse = knn_counts::count_neighbors_refused(m, n_radii, d_.dim, sizeof(Scalar));
    const double radii[8] = {kRadius, 1.0, 0.0, 2.0, kRadius, 1.0, 0.0, 2.0};
    if (!refuse && (m > d_.q || n_radii > 8)) {
      ++tallies()[call].skipped;
      return;
    }
    std::vector<int64_t> counts = poisoned<int64_t>(kSlots);
    const int status = count_neighbors(index_.handle, rows_of<Scalar>(d_, true), m, radii, n_radii,
                                       counts.data(), &opt_);
    if (refuse) {
      ++tallies()[call].refused;
      ASSERT_TRUE(refused_by(status, call.c_str())) << "m " << m << ", n_radii " << n_radii;
      ASSERT_TRUE(still_poisoned(counts));
      return valid_csr();
    }
    ++tallies()[call].answered;
    ASSERT_EQ(status, KNN_OK) << knn_last_error();
    for (int64_t b = 0; b < n_radii; ++b) {
      const RadiusResult want = oracle_radius(d_.points.data(), d_.n, d_.queries.data(), m, d_.dim,
                                              static_cast<float>(radii[b]), 0);
      int64_t total = 0;
      for (int64_t i = 0; i < m; ++i) total += want.counts[i];
      ASSERT_EQ(counts[b], total) << "radius " << b;
    }
    ASSERT_TRUE(still_poisoned(counts, n_radii));
  }

  // knn_index_radius_pairs (one entry point for both precisions): capacity.
  void radius_pairs_case(int64_t capacity) {
    const std::string call = "knn_index_radius_pairs";
    const bool refuse = knn_counts::radius_pairs_refused(capacity);
    const RadiusResult own = oracle_radius(d_.points.data(), d_.n, d_.points.data(), d_.n, d_.dim,
                                           kRadius, static_cast<int>(d_.n));
    std::vector<int64_t> want;
    for (int64_t i = 0; i < d_.n; ++i) {
      std::vector<int64_t> later;
      for (int64_t e = 0; e < own.counts[i]; ++e)
        if (own.idx[i * d_.n + e] > i) later.push_back(own.idx[i * d_.n + e]);
      std::sort(later.begin(), later.end());
      for (const int64_t j : later) want.insert(want.end(), {i, j});
    }
    const int64_t total = static_cast<int64_t>(want.size()) / 2;
    if (!refuse && capacity > total + 8) {
      ++tallies()[call].skipped;
      return;
    }
    std::vector<int64_t> pairs = poisoned<int64_t>(static_cast<size_t>(2 * total + 16));
    int64_t count = -1;
    const int status = knn_index_radius_pairs(index_.handle, kRadius, nullptr, capacity,
                                              pairs.data(), &count, &opt_);
    if (refuse) {
      ++tallies()[call].refused;
      ASSERT_TRUE(refused_by(status, call.c_str())) << "capacity " << capacity;
      ASSERT_TRUE(still_poisoned(pairs));
      ASSERT_EQ(count, -1);
      return valid_csr();
    }
    ++tallies()[call].answered;
    ASSERT_EQ(count, total);
    if (capacity < total) {  // too small: the number, and nothing written
      ASSERT_EQ(status, KNN_ERR_INVALID_ARGUMENT);
      ASSERT_TRUE(still_poisoned(pairs));
      return valid_csr();
    }
    ASSERT_EQ(status, KNN_OK) << knn_last_error();
    ASSERT_EQ(std::vector<int64_t>(pairs.begin(), pairs.begin() + 2 * total), want);
    ASSERT_TRUE(still_poisoned(pairs, 2 * total));
  }

  // The next valid call after a refusal: kNN against the oracle.
  void valid_query(int64_t m, int k) {
    std::vector<int32_t> idx = poisoned<int32_t>(kSlots);
    std::vector<Scalar> dist = poisoned<Scalar>(kSlots);
    ASSERT_EQ(query(index_.handle, rows_of<Scalar>(d_, true), m, k, idx.data(), dist.data(), &opt_),
              KNN_OK)
        << knn_last_error();
    ASSERT_STREQ(knn_last_error(), "");
    check_query(m, k, idx, dist);
  }

  // The next valid CSR calls after a refusal: count, offsets, fill.
  void valid_csr() {
    std::vector<int64_t> counts(static_cast<size_t>(d_.q)), offsets(d_.q + 1);
    ASSERT_EQ(radius_count(index_.handle, rows_of<Scalar>(d_, true), d_.q, Scalar{kRadius},
                           counts.data(), &opt_),
              KNN_OK)
        << knn_last_error();
    ASSERT_EQ(knn_offsets_from_counts(counts.data(), d_.q, offsets.data()), KNN_OK);
    std::vector<int32_t> idx(static_cast<size_t>(offsets.back()) + 1);
    std::vector<Scalar> dist(idx.size());
    ASSERT_EQ(radius_fill(index_.handle, rows_of<Scalar>(d_, true), d_.q, Scalar{kRadius},
                          offsets.data(), idx.data(), dist.data(), &opt_),
              KNN_OK)
        << knn_last_error();
    const RadiusResult want = oracle_radius(d_.points.data(), d_.n, d_.queries.data(), d_.q, d_.dim,
                                            kRadius, static_cast<int>(d_.n));
    for (int64_t i = 0; i < d_.q; ++i) {
      ASSERT_EQ(counts[i], want.counts[i]);
      for (int64_t j = 0; j < counts[i]; ++j)
        ASSERT_EQ(idx[offsets[i] + j], want.idx[i * d_.n + j]) << "query " << i << " entry " << j;
    }
  }

 private:
  void check_query(int64_t m, int k, const std::vector<int32_t>& idx,
                   const std::vector<Scalar>& dist) {
    const KnnResult want = oracle_knn(d_.points.data(), d_.n, d_.queries.data(), m, d_.dim, k);
    ASSERT_TRUE(same_slots(want.idx, want.dist, idx, dist, want.idx.size()));
    ASSERT_TRUE(still_poisoned(idx, want.idx.size()) && still_poisoned(dist, want.idx.size()))
        << "written past m * k";
  }

  const Data& d_;
  knn_options opt_;
  Index index_;
};

template <class Scalar>
void fuzz_index_calls(const Data& d, uint64_t seed, int backend = KNN_BACKEND_OPENMP) {
  IndexCalls<Scalar> calls(d, backend);
  if (::testing::Test::HasFailure()) return;
  for (int64_t m : adversarial_counts()) {
    for (int k : adversarial_ints()) {
      calls.query_case(m, k);
      calls.radius_case(m, k);
      if (::testing::Test::HasFatalFailure()) return;
    }
    calls.radius_count_case(m);
    calls.radius_fill_case(m);
    calls.radius_pairs_case(m);
    for (int64_t n_radii : adversarial_counts()) calls.count_neighbors_case(m, n_radii);
    if (::testing::Test::HasFatalFailure()) return;
  }
  for (int k : adversarial_ints()) calls.query_self_case(k);
  Counts counts(seed);
  for (int i = 0; i < kRandomCalls; ++i) {
    calls.query_case(counts.any64(d.q), counts.pick_int(12));
    calls.radius_case(counts.any64(d.q), counts.pick_int(12));
    calls.radius_count_case(counts.any64(d.q));
    calls.radius_fill_case(counts.any64(d.q));
    calls.radius_pairs_case(counts.any64(400));
    calls.count_neighbors_case(counts.any64(d.q), counts.any64(8));
    calls.query_self_case(counts.pick_int(8));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// ---- Builds --------------------------------------------------------------------

template <class Scalar>
void build_case(const Data& d, int64_t n, int dim) {
  const std::string call = named<Scalar>("knn_index_build");
  const bool refuse = knn_counts::index_build_refused(n, dim);
  const int64_t have = static_cast<int64_t>(d.points.size());
  if (!refuse && product_above(n, dim, static_cast<uint64_t>(have))) {
    ++tallies()[call].skipped;
    return;
  }
  const knn_options o = cpu_options();
  knn_index* out = reinterpret_cast<knn_index*>(&out);
  const int status = build(rows_of<Scalar>(d, false), n, dim, &o, &out);
  if (refuse) {
    ++tallies()[call].refused;
    ASSERT_TRUE(refused_by(status, call.c_str())) << "n " << n << ", dim " << dim;
    ASSERT_EQ(out, nullptr);
    return;
  }
  ++tallies()[call].answered;
  ASSERT_EQ(status, KNN_OK) << knn_last_error();
  Index held;
  held.handle = out;
  int64_t got_n = -1;
  int got_dim = -1;
  ASSERT_EQ(knn_index_info(out, &got_n, &got_dim, nullptr, nullptr), KNN_OK);
  ASSERT_EQ(got_n, n);
  ASSERT_EQ(got_dim, dim);
}

template <class Scalar>
void quadtree_build_case(const Data& d, int64_t n) {
  const std::string call = named<Scalar>("knn_quadtree_build");
  const bool refuse = knn_counts::quadtree_build_refused(n);
  if (!refuse && n * 2 > static_cast<int64_t>(d.points.size())) {
    ++tallies()[call].skipped;
    return;
  }
  const knn_options o = cpu_options();
  knn_quadtree* out = reinterpret_cast<knn_quadtree*>(&out);
  const int status = sizeof(Scalar) == 8 ? knn_quadtree_build_f64(d.points64.data(), n, &o, &out)
                                         : knn_quadtree_build(d.points.data(), n, &o, &out);
  if (refuse) {
    ++tallies()[call].refused;
    ASSERT_TRUE(refused_by(status, call.c_str())) << "n " << n;
    ASSERT_EQ(out, nullptr);
    return;
  }
  ++tallies()[call].answered;
  ASSERT_EQ(status, KNN_OK) << knn_last_error();
  ASSERT_EQ(knn_quadtree_free(out), KNN_OK);
}

// ---- Point in polygon ------------------------------------------------------------

// Two polygons (a square with a square hole, a triangle) over 40 points of
// small integer coordinates, some on the boundaries. Rings 0..2, polygon
// offsets {0, 2, 3}: the valid (n_polygons, n_rings) prefixes are (0, 0),
// (1, 2) and (2, 3).
template <class V>
class PipCalls {
 public:
  explicit PipCalls(const Data& d) {
    xy_.assign(d.points.begin(), d.points.begin() + 2 * d.n);
    PolygonArrays set;
    set.add_polygon(rectangle(-3, -3, 3, 3));
    set.add_hole(rectangle(-1, -1, 1, 1));
    set.add_polygon({{0, 0}, {4, 0}, {0, 4}});
    set_ = set.as<V>();
    lists_ = oracle_points_in_polygons(xy_, set);
    const knn_options o = cpu_options();
    EXPECT_EQ(knn_quadtree_build(xy_.data(), d.n, &o, &tree_), KNN_OK) << knn_last_error();
  }
  ~PipCalls() { knn_quadtree_free(tree_); }

  int documented(int64_t n_polygons, int64_t n_rings, bool* refuse, bool* fits) const {
    *refuse = knn_counts::polygon_counts_refused(n_polygons, n_rings);
    *fits = n_polygons <= set_.n_polygons() && n_rings <= set_.n_rings();
    if (*refuse || !*fits) return KNN_ERR_INVALID_ARGUMENT;
    const bool prefix = (n_polygons == 0 && n_rings == 0) ||
                        (n_polygons > 0 && set_.polygon_offsets[n_polygons] == n_rings);
    return prefix ? KNN_OK : KNN_ERR_INVALID_ARGUMENT;
  }

  int count(const int64_t* rings, int64_t n_rings, int64_t n_polygons, int64_t* counts) const {
    if constexpr (sizeof(V) == 8)
      return knn_points_in_polygons_count_f64(tree_, set_.xy.data(), rings, n_rings,
                                              set_.polygon_offsets.data(), n_polygons, counts,
                                              nullptr);
    else
      return knn_points_in_polygons_count(tree_, set_.xy.data(), rings, n_rings,
                                          set_.polygon_offsets.data(), n_polygons, counts, nullptr);
  }
  int fill(const int64_t* rings, int64_t n_rings, int64_t n_polygons, const int64_t* offsets,
           int64_t* indices) const {
    if constexpr (sizeof(V) == 8)
      return knn_points_in_polygons_f64(tree_, set_.xy.data(), rings, n_rings,
                                        set_.polygon_offsets.data(), n_polygons, offsets, indices,
                                        nullptr);
    else
      return knn_points_in_polygons(tree_, set_.xy.data(), rings, n_rings,
                                    set_.polygon_offsets.data(), n_polygons, offsets, indices,
                                    nullptr);
  }

  // Both calls with the counts (n_polygons, n_rings) and the real arrays;
  // `last_ring_offset` >= 0 replaces ring_offsets[n_rings] (the vertex count).
  void pip_case(int64_t n_polygons, int64_t n_rings, int64_t last_ring_offset = -1) {
    bool refuse = false, fits = false;
    int want = documented(n_polygons, n_rings, &refuse, &fits);
    std::vector<int64_t> rings = set_.ring_offsets;
    if (last_ring_offset >= 0 && fits && !refuse && n_rings > 0) {
      rings[n_rings] = last_ring_offset;
      // A vertex array of that many (x, y) pairs cannot exist: refused;
      // one that can is the caller's word and cannot be checked here.
      if (!knn_counts::vertex_count_refused(last_ring_offset, sizeof(V))) return;
      refuse = true;
      want = KNN_ERR_INVALID_ARGUMENT;
    }
    const std::string count_call = named<V>("knn_points_in_polygons_count");
    const std::string fill_call = named<V>("knn_points_in_polygons");
    if (!refuse && !fits) {
      ++tallies()[count_call].skipped;
      ++tallies()[fill_call].skipped;
      return;
    }
    std::vector<int64_t> counts = poisoned<int64_t>(8);
    int status = count(rings.data(), n_rings, n_polygons, counts.data());
    const int64_t answered = want == KNN_OK ? n_polygons : 0;
    ASSERT_EQ(status, want) << count_call << " n_polygons " << n_polygons << " n_rings " << n_rings
                            << ": " << knn_last_error();
    ++(refuse ? tallies()[count_call].refused : tallies()[count_call].answered);
    if (status != KNN_OK) {
      ASSERT_TRUE(refused_by(status, count_call.c_str()));
    }
    for (int64_t p = 0; p < answered; ++p)
      ASSERT_EQ(counts[p], static_cast<int64_t>(lists_[p].size())) << "polygon " << p;
    ASSERT_TRUE(still_poisoned(counts, answered));

    std::vector<int64_t> offsets{0};
    for (int64_t p = 0; p < set_.n_polygons(); ++p)
      offsets.push_back(offsets.back() + static_cast<int64_t>(lists_[p].size()));
    std::vector<int64_t> indices = poisoned<int64_t>(static_cast<size_t>(offsets.back()) + 4);
    status = fill(rings.data(), n_rings, n_polygons, offsets.data(), indices.data());
    ASSERT_EQ(status, want) << fill_call << ": " << knn_last_error();
    ++(refuse ? tallies()[fill_call].refused : tallies()[fill_call].answered);
    if (status != KNN_OK) {
      ASSERT_TRUE(refused_by(status, fill_call.c_str()));
      ASSERT_TRUE(still_poisoned(indices));
      return valid();
    }
    size_t at = 0;
    for (int64_t p = 0; p < n_polygons; ++p)
      for (int64_t i : lists_[p]) ASSERT_EQ(indices[at++], i) << "polygon " << p;
    ASSERT_TRUE(still_poisoned(indices, at));
  }

  void valid() {
    std::vector<int64_t> counts(2);
    ASSERT_EQ(count(set_.ring_offsets.data(), set_.n_rings(), set_.n_polygons(), counts.data()),
              KNN_OK)
        << knn_last_error();
    for (int64_t p = 0; p < 2; ++p) ASSERT_EQ(counts[p], static_cast<int64_t>(lists_[p].size()));
  }

 private:
  std::vector<float> xy_;
  BasicPolygonArrays<V> set_;
  std::vector<std::vector<int64_t>> lists_;
  knn_quadtree* tree_ = nullptr;
};

template <class V>
void fuzz_pip_calls(const Data& d, uint64_t seed) {
  PipCalls<V> calls(d);
  for (int64_t np : adversarial_counts())
    for (int64_t nr : adversarial_counts()) {
      calls.pip_case(np, nr);
      if (::testing::Test::HasFatalFailure()) return;
    }
  for (int64_t vertices : adversarial_counts()) {
    calls.pip_case(2, 3, vertices);
    calls.pip_case(1, 2, vertices);
  }
  Counts counts(seed);
  for (int i = 0; i < kRandomCalls; ++i) {
    calls.pip_case(counts.any64(2), counts.any64(3));
    calls.pip_case(2, 3, counts.any64(12));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// ---- The classic API and knn_brute_force -------------------------------------------

class ClassicCalls {
 public:
  explicit ClassicCalls(const Data& d) : d_(d) {
    for (int64_t i = 0; i < d.n; ++i)
      points_.push_back(Point{{d.points[i * 3], d.points[i * 3 + 1], d.points[i * 3 + 2]}});
    for (int64_t i = 0; i < d.q; ++i)
      queries_.push_back(Point{{d.queries[i * 3], d.queries[i * 3 + 1], d.queries[i * 3 + 2]}});
    tree_.resize(points_.size());
    EXPECT_EQ(mpBuildKdTree(points_.data(), static_cast<int>(d.n), tree_.data()), KNN_OK);
  }

  void build_case(int n, int (*fn)(const Point*, int, Node*), const char* call) {
    const bool refuse = n < 0;
    if (!refuse && n > d_.n) {
      ++tallies()[call].skipped;
      return;
    }
    std::vector<Node> tree = poisoned<Node>(points_.size() + 2);
    const int status = fn(points_.data(), n, tree.data());
    if (refuse) {
      ++tallies()[call].refused;
      ASSERT_TRUE(refused_by(status, call)) << "n " << n;
      ASSERT_TRUE(still_poisoned(tree));
      return valid_query();
    }
    ++tallies()[call].answered;
    if (fn == cuBuildKdTree && status == KNN_ERR_NO_DEVICE) return;
    ASSERT_EQ(status, KNN_OK) << call << ": " << knn_last_error();
    ASSERT_TRUE(tree_invariants_hold(std::vector<Point>(points_.begin(), points_.begin() + n),
                                     tree.data()));
    ASSERT_TRUE(still_poisoned(tree, static_cast<size_t>(n)));
  }

  void query_case(int n_qp, int n_tree, int k,
                  int (*fn)(const Point*, const Node*, int, int, int, int*), const char* call) {
    const bool refuse = knn_counts::classic_query_refused(n_qp, n_tree, k);
    if (!refuse && (n_qp > d_.q || n_tree > d_.n || product_above(n_qp, k, kSlots))) {
      ++tallies()[call].skipped;
      return;
    }
    std::vector<int> result = poisoned<int>(kSlots);
    const int status = fn(queries_.data(), tree_.data(), n_qp, n_tree, k, result.data());
    if (refuse) {
      ++tallies()[call].refused;
      ASSERT_TRUE(refused_by(status, call))
          << "n_qp " << n_qp << " n_tree " << n_tree << " k " << k;
      ASSERT_TRUE(still_poisoned(result));
      return valid_query();
    }
    ++tallies()[call].answered;
    if (fn == cuQueryAll && status == KNN_ERR_NO_DEVICE) return;
    // A prefix of the tree is no tree unless it is all of it or nothing.
    if (n_tree != 0 && n_tree != d_.n) {
      ASSERT_TRUE(status == KNN_ERR_INVALID_TREE || (n_qp == 0 && status == KNN_OK))
          << call << " n_tree " << n_tree << ": " << knn_last_error();
      ASSERT_TRUE(still_poisoned(result));
      return;
    }
    ASSERT_EQ(status, KNN_OK) << call << ": " << knn_last_error();
    const KnnResult want = oracle_knn(d_.points.data(), n_tree, d_.queries.data(), n_qp, 3, k);
    for (size_t s = 0; s < want.idx.size(); ++s) ASSERT_EQ(result[s], want.idx[s]) << "slot " << s;
    ASSERT_TRUE(still_poisoned(result, want.idx.size()));
  }

  void brute_force_case(int n_ref, int n_query, int dim, int k) {
    const char* call = "knn_brute_force";
    const bool refuse = knn_counts::brute_force_refused(n_ref, n_query, dim, k);
    if (!refuse &&
        (product_above(n_ref, dim, d_.points.size()) ||
         product_above(n_query, dim, d_.queries.size()) || product_above(n_query, k, kSlots))) {
      ++tallies()[call].skipped;
      return;
    }
    std::vector<int> idx = poisoned<int>(kSlots);
    std::vector<float> dist = poisoned<float>(kSlots);
    const int status = knn_brute_force(d_.points.data(), n_ref, d_.queries.data(), n_query, dim, k,
                                       dist.data(), idx.data());
    if (refuse) {
      ++tallies()[call].refused;
      ASSERT_TRUE(refused_by(status, call))
          << "n_ref " << n_ref << " n_query " << n_query << " dim " << dim << " k " << k;
      ASSERT_TRUE(still_poisoned(idx) && still_poisoned(dist));
      return brute_force_case(static_cast<int>(d_.n), 2, 3, 4);
    }
    ++tallies()[call].answered;
    ASSERT_EQ(status, KNN_OK) << knn_last_error();
    const KnnResult want = oracle_knn(d_.points.data(), n_ref, d_.queries.data(), n_query, dim, k);
    ASSERT_TRUE(same_slots(want.idx, want.dist, std::vector<int32_t>(idx.begin(), idx.end()), dist,
                           want.idx.size()));
    ASSERT_TRUE(still_poisoned(idx, want.idx.size()));
  }

  void valid_query() {
    query_case(static_cast<int>(d_.q), static_cast<int>(d_.n), 4, mpQueryAll, "mpQueryAll");
  }

 private:
  const Data& d_;
  std::vector<Point> points_, queries_;
  std::vector<Node> tree_;
};

// ---- Serialization -----------------------------------------------------------------

// knn_<what>_serialize of a handle whose bytes are `need` long, offered
// every size around it: refused below `need` with the buffer untouched, else
// written within `need`; then its valid bytes offered to
// knn_<what>_deserialize with every size: refused but for `need` itself,
// with *out set to NULL; what loads goes to `loaded` (which owns it).
template <class Handle, class Serialize, class Deserialize, class Loaded>
void serialize_round_trip(const std::string& what, size_t need, Serialize serialize,
                          Deserialize deserialize, Loaded loaded) {
  const std::string save = "knn_" + what + "_serialize", load = "knn_" + what + "_deserialize";
  std::vector<unsigned char> buffer(need + 16, 0xA5);
  const std::vector<size_t> sizes = {0,
                                     1,
                                     63,
                                     67,
                                     need - 1,
                                     need,
                                     need + 1,
                                     size_t{1} << 31,
                                     size_t{1} << 62,
                                     SIZE_MAX,
                                     static_cast<size_t>(PTRDIFF_MAX),
                                     static_cast<size_t>(PTRDIFF_MAX) + 1};
  for (size_t bytes : sizes) {
    std::fill(buffer.begin(), buffer.end(), 0xA5);
    const int status = serialize(buffer.data(), bytes);
    if (bytes < need) {
      ++tallies()[save].refused;
      ASSERT_TRUE(refused_by(status, save.c_str())) << bytes;
      ASSERT_TRUE(
          std::all_of(buffer.begin(), buffer.end(), [](unsigned char c) { return c == 0xA5; }));
      continue;
    }
    ++tallies()[save].answered;
    ASSERT_EQ(status, KNN_OK) << knn_last_error();
    ASSERT_TRUE(
        std::all_of(buffer.begin() + need, buffer.end(), [](unsigned char c) { return c == 0xA5; }))
        << save << " wrote past its size with bytes " << bytes;
  }
  ASSERT_EQ(serialize(buffer.data(), need), KNN_OK);
  for (size_t bytes : sizes) {
    Handle* out = reinterpret_cast<Handle*>(&out);
    const int status = deserialize(buffer.data(), bytes, &out);
    if (bytes != need) {
      ++tallies()[load].refused;
      ASSERT_TRUE(refused_by(status, load.c_str())) << bytes;
      ASSERT_EQ(out, nullptr);
      continue;
    }
    ++tallies()[load].answered;
    ASSERT_EQ(status, KNN_OK) << knn_last_error();
    loaded(out);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

void serialize_cases(const Data& d) {
  const knn_options o = cpu_options();
  Index index;
  ASSERT_EQ(knn_index_build(d.points.data(), d.n, d.dim, &o, &index.handle), KNN_OK);
  size_t need = 0;
  ASSERT_EQ(knn_index_serialized_size(index.handle, &need), KNN_OK);
  serialize_round_trip<knn_index>(
      "index", need,
      [&](unsigned char* buffer, size_t bytes) {
        return knn_index_serialize(index.handle, buffer, bytes);
      },
      [&](const unsigned char* buffer, size_t bytes, knn_index** out) {
        return knn_index_deserialize(buffer, bytes, &o, out);
      },
      [&](knn_index* out) {
        Index loaded;
        loaded.handle = out;
        std::vector<int32_t> idx(20);
        std::vector<float> dist(20);
        ASSERT_EQ(knn_index_query(out, d.queries.data(), 5, 4, idx.data(), dist.data(), &o),
                  KNN_OK);
        const KnnResult want = oracle_knn(d.points.data(), d.n, d.queries.data(), 5, d.dim, 4);
        ASSERT_TRUE(same_slots(want.idx, want.dist, idx, dist, 20));
      });
}

// ---- Triangle meshes ----------------------------------------------------------------

// The cube [-1, 1]^3 (8 vertices, 12 triangles) and 5 points around it.
struct MeshCalls {
  knn_mesh_oracle::Mesh cube = knn_mesh_oracle::cube();
  std::vector<double> points = {0.5, 0.25, 3, -2, 0, 0, 0.1, 0.2, 0.3, 1, 1, 1, 0, -1.5, 0.5};
  static constexpr int64_t kPoints = 5;
  static constexpr int kSmall = 2;  // percentiles and bins the buffers hold

  // n_vertices x n_triangles of the cube's arrays.
  template <class Scalar>
  void build_case(int64_t n_vertices, int64_t n_triangles) {
    const std::string call = named<Scalar>("knn_mesh_build");
    const bool refuse = knn_counts::mesh_build_refused(n_vertices, n_triangles);
    if (!refuse && (n_vertices > cube.n_vertices() || n_triangles > cube.n_triangles())) {
      ++tallies()[call].skipped;
      return;
    }
    const std::vector<Scalar> v(cube.vertices.begin(), cube.vertices.end());
    const knn_options o = cpu_options();
    knn_mesh* out = reinterpret_cast<knn_mesh*>(&out);
    const int status =
        mesh_build(v.data(), n_vertices, cube.triangles.data(), n_triangles, &o, &out);
    // Possible counts whose triangles name vertices past n_vertices: the
    // index rule refuses them (the rest of the arguments).
    const bool indices_fit =
        !refuse && std::all_of(cube.triangles.begin(), cube.triangles.begin() + 3 * n_triangles,
                               [&](int32_t i) { return i < n_vertices; });
    if (!indices_fit) {
      ++tallies()[call].refused;
      ASSERT_TRUE(refused_by(status, call.c_str())) << n_vertices << " x " << n_triangles;
      ASSERT_EQ(out, nullptr);
      return;
    }
    ++tallies()[call].answered;
    ASSERT_EQ(status, KNN_OK) << knn_last_error();
    int64_t nv = -1, nt = -1;
    ASSERT_EQ(knn_mesh_info(out, &nv, &nt, nullptr, nullptr, nullptr), KNN_OK);
    EXPECT_EQ(nv, n_vertices);
    EXPECT_EQ(nt, n_triangles);
    ASSERT_EQ(knn_mesh_free(out), KNN_OK);
  }

  // The three query calls of one precision with m points (and the report's
  // counts): refused with outputs untouched, or the oracle's answer.
  template <class Scalar>
  void query_case(knn_mesh* mesh, int64_t m, int n_percentiles, int n_bins) {
    const int bytes = static_cast<int>(sizeof(Scalar));
    const std::vector<Scalar> q(points.begin(), points.end());
    const Scalar inf = std::numeric_limits<Scalar>::infinity();
    const knn_options o = cpu_options();
    std::vector<int32_t> ids = poisoned<int32_t>(kPoints);
    std::vector<Scalar> sq = poisoned<Scalar>(kPoints), sd = poisoned<Scalar>(kPoints);
    std::vector<Scalar> closest = poisoned<Scalar>(3 * kPoints);
    const bool q_refuse = knn_counts::mesh_query_refused(m, bytes);
    const bool q_fits = m <= kPoints;
    const std::string c_call = named<Scalar>("knn_mesh_closest");
    const std::string s_call = named<Scalar>("knn_mesh_signed_distance");
    if (q_refuse || q_fits) {
      const int status =
          mesh_closest(mesh, q.data(), m, inf, ids.data(), sq.data(), closest.data(), nullptr, &o);
      if (q_refuse) {
        ASSERT_TRUE(refused_by(status, c_call.c_str())) << "m " << m;
      }
      const int s_status = mesh_signed_distance(mesh, q.data(), m, inf, sd.data(), nullptr, &o);
      if (q_refuse) {
        tallies()[c_call].refused++;
        tallies()[s_call].refused++;
        ASSERT_TRUE(refused_by(s_status, s_call.c_str())) << "m " << m;
        ASSERT_TRUE(still_poisoned(ids) && still_poisoned(sq) && still_poisoned(closest) &&
                    still_poisoned(sd));
      } else {
        tallies()[c_call].answered++;
        tallies()[s_call].answered++;
        ASSERT_EQ(status, KNN_OK) << knn_last_error();
        ASSERT_EQ(s_status, KNN_OK) << knn_last_error();
        for (int64_t i = 0; i < m; ++i) {
          const knn_mesh_oracle::P3 p{q[3 * i], q[3 * i + 1], q[3 * i + 2]};
          const knn_mesh_oracle::Real want = knn_mesh_oracle::nearest(cube, p).sq;
          ASSERT_GE(ids[i], 0);
          ASSERT_NEAR(static_cast<double>(knn_mesh_oracle::closest_on(cube, ids[i], p).sq),
                      static_cast<double>(want), 1e-5);
          ASSERT_NEAR(static_cast<double>(sq[i]), static_cast<double>(want), 1e-5);
          ASSERT_NEAR(std::fabs(static_cast<double>(sd[i])), std::sqrt(static_cast<double>(want)),
                      1e-5);
        }
        ASSERT_TRUE(still_poisoned(ids, static_cast<size_t>(m)) &&
                    still_poisoned(sd, static_cast<size_t>(m)) &&
                    still_poisoned(closest, static_cast<size_t>(3 * m)));
      }
    } else {
      tallies()[c_call].skipped++;
    }
    const std::string r_call = named<Scalar>("knn_mesh_deviation_report");
    const bool r_refuse = knn_counts::mesh_report_refused(m, n_percentiles, n_bins, bytes);
    if (!r_refuse && (!q_fits || n_percentiles > kSmall || n_bins > kSmall)) {
      ++tallies()[r_call].skipped;
      return;
    }
    const double percentiles[kSmall] = {50, 100}, edges[kSmall + 1] = {-1, 0, 1};
    std::vector<double> values = poisoned<double>(kSmall);
    std::vector<int64_t> bins = poisoned<int64_t>(kSmall);
    std::vector<Scalar> per_point = poisoned<Scalar>(kPoints);
    knn_deviation_report r;
    std::memset(&r, 0xA5, sizeof r);
    r.struct_size = sizeof r;
    const int status =
        mesh_report(mesh, q.data(), m, inf, 0.1, percentiles, n_percentiles, values.data(), edges,
                    n_bins, bins.data(), per_point.data(), &r, &o);
    if (r_refuse) {
      ++tallies()[r_call].refused;
      ASSERT_TRUE(refused_by(status, r_call.c_str()))
          << "m " << m << " percentiles " << n_percentiles << " bins " << n_bins;
      ASSERT_TRUE(still_poisoned(values) && still_poisoned(bins) && still_poisoned(per_point));
      ASSERT_EQ(r.struct_size, sizeof r);
      ASSERT_EQ(r.n_points, static_cast<int64_t>(0xA5A5A5A5A5A5A5A5ull));
      return;
    }
    ++tallies()[r_call].answered;
    ASSERT_EQ(status, KNN_OK) << knn_last_error();
    ASSERT_EQ(r.n_points, m);
    ASSERT_EQ(r.n_measured, m);
    int64_t binned = r.n_below_bins + r.n_above_bins;
    for (int b = 0; b < n_bins; ++b) binned += bins[b];
    if (n_bins > 0) {
      ASSERT_EQ(binned, m);
    }
    ASSERT_TRUE(still_poisoned(values, static_cast<size_t>(n_percentiles)) &&
                still_poisoned(bins, static_cast<size_t>(n_bins)) &&
                still_poisoned(per_point, static_cast<size_t>(m)));
  }

  // The alignment with m points and an iteration cap: refused with the
  // outputs untouched, or (fewer than the 6 points a step needs) the
  // identity back, not converged, with the rms of the brute force.
  template <class Scalar>
  void align_case(knn_mesh* mesh, int64_t m, int iterations) {
    const int bytes = static_cast<int>(sizeof(Scalar));
    const std::vector<Scalar> q(points.begin(), points.end());
    const knn_options o = cpu_options();
    const bool refuse = knn_counts::mesh_align_refused(m, iterations, bytes);
    const std::string call = named<Scalar>("knn_mesh_align");
    const std::string ex_call = named<Scalar>("knn_mesh_align_ex");
    if (!refuse && m > kPoints) {
      ++tallies()[call].skipped;
      ++tallies()[ex_call].skipped;
      return;
    }
    std::vector<double> transform = poisoned<double>(16), rms = poisoned<double>(1);
    const int status = mesh_align(mesh, q.data(), m, nullptr, INFINITY, iterations,
                                  transform.data(), rms.data(), &o);
    // (Its message is read before the next call replaces it.)
    const bool named_refusal = refuse && refused_by(status, call.c_str());
    knn_align_params params;
    std::memset(&params, 0, sizeof params);
    params.struct_size = sizeof params;
    params.max_iterations = iterations;
    knn_align_result r;
    std::memset(&r, 0xA5, sizeof r);
    r.struct_size = sizeof r;
    const int ex_status = mesh_align_ex(mesh, q.data(), m, nullptr, &params, &r, &o);
    if (refuse) {
      ++tallies()[call].refused;
      ++tallies()[ex_call].refused;
      ASSERT_TRUE(named_refusal) << "m " << m << " iterations " << iterations;
      ASSERT_TRUE(refused_by(ex_status, ex_call.c_str()))
          << "m " << m << " iterations " << iterations;
      ASSERT_TRUE(still_poisoned(transform) && still_poisoned(rms));
      ASSERT_EQ(r.struct_size, sizeof r);
      ASSERT_EQ(r.n_kept, static_cast<int64_t>(0xA5A5A5A5A5A5A5A5ull));
      return;
    }
    ++tallies()[call].answered;
    ++tallies()[ex_call].answered;
    ASSERT_EQ(status, KNN_OK) << knn_last_error();
    ASSERT_EQ(ex_status, KNN_OK) << knn_last_error();
    double sum = 0;
    for (int64_t i = 0; i < m; ++i)
      sum += static_cast<double>(
          knn_mesh_oracle::nearest(cube, knn_mesh_oracle::P3{q[3 * i], q[3 * i + 1], q[3 * i + 2]})
              .sq);
    for (int k = 0; k < 16; ++k) {
      ASSERT_EQ(transform[k], k % 5 == 0 ? 1.0 : 0.0) << k;
      ASSERT_EQ(r.transform[k], transform[k]) << k;
    }
    if (m == 0) {
      ASSERT_TRUE(std::isnan(rms[0]) && std::isnan(r.rms));
    } else {
      ASSERT_NEAR(rms[0], std::sqrt(sum / static_cast<double>(m)), 1e-5);
    }
    ASSERT_EQ(r.n_kept, m);
    ASSERT_EQ(r.converged, 0);
  }
};

template <class Scalar>
void fuzz_mesh_calls(uint64_t seed) {
  MeshCalls calls;
  const knn_options o = cpu_options();
  knn_mesh* mesh = nullptr;
  const std::vector<Scalar> v(calls.cube.vertices.begin(), calls.cube.vertices.end());
  ASSERT_EQ(mesh_build(v.data(), 8, calls.cube.triangles.data(), 12, &o, &mesh), KNN_OK);
  struct Held {
    knn_mesh* mesh;
    ~Held() { knn_mesh_free(mesh); }
  } held{mesh};
  for (int64_t m : adversarial_counts())
    for (int p : adversarial_ints()) {
      calls.query_case<Scalar>(mesh, m, p, 1);
      calls.query_case<Scalar>(mesh, m, 1, p);
      calls.align_case<Scalar>(mesh, m, p);
      if (::testing::Test::HasFatalFailure()) return;
    }
  Counts counts(seed);
  for (int i = 0; i < kRandomCalls; ++i) {
    calls.query_case<Scalar>(mesh, counts.any64(MeshCalls::kPoints),
                             counts.pick_int(MeshCalls::kSmall),
                             counts.pick_int(MeshCalls::kSmall));
    calls.build_case<Scalar>(counts.any64(8), counts.any64(12));
    calls.align_case<Scalar>(mesh, counts.any64(MeshCalls::kPoints), counts.adversarial32());
    if (::testing::Test::HasFatalFailure()) return;
  }
  for (int64_t nv : adversarial_counts())
    for (int64_t nt : adversarial_counts()) {
      calls.build_case<Scalar>(nv, nt);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

void mesh_serialize_cases() {
  const knn_mesh_oracle::Mesh cube = knn_mesh_oracle::cube();
  const knn_options o = cpu_options();
  knn_mesh* mesh = nullptr;
  ASSERT_EQ(knn_mesh_build_f64(cube.vertices.data(), 8, cube.triangles.data(), 12, &o, &mesh),
            KNN_OK);
  struct Held {
    knn_mesh* mesh;
    ~Held() { knn_mesh_free(mesh); }
  } held{mesh};
  size_t need = 0;
  ASSERT_EQ(knn_mesh_serialized_size(mesh, &need), KNN_OK);
  serialize_round_trip<knn_mesh>(
      "mesh", need,
      [&](unsigned char* buffer, size_t bytes) { return knn_mesh_serialize(mesh, buffer, bytes); },
      [&](const unsigned char* buffer, size_t bytes, knn_mesh** out) {
        return knn_mesh_deserialize(buffer, bytes, &o, out);
      },
      [&](knn_mesh* out) {
        int64_t nt = -1;
        const int info = knn_mesh_info(out, nullptr, &nt, nullptr, nullptr, nullptr);
        EXPECT_EQ(knn_mesh_free(out), KNN_OK);
        ASSERT_EQ(info, KNN_OK);
        ASSERT_EQ(nt, 12);
      });
}

// ---- The estimates and memory helpers ------------------------------------------------

// ---- Neighbourhood statistics (knn_gpgpu_stats.h): counts k and min_neighbors --

template <class Scalar>
class StatsCalls {
 public:
  explicit StatsCalls(const Data& d) : d_(d), opt_(cpu_options()) {
    EXPECT_EQ(build(rows_of<Scalar>(d, false), d.n, d.dim, &opt_, &index_.handle), KNN_OK)
        << knn_last_error();
    points_.assign(rows_of<Scalar>(d, false), rows_of<Scalar>(d, false) + d.n * d.dim);
  }

  // knn_index_normals: k >= 1, any size (beyond n: all n points).
  void normals_case(int k) {
    const std::string call = named<Scalar>("knn_index_normals");
    std::vector<Scalar> normals = poisoned<Scalar>(static_cast<size_t>(3 * d_.n));
    std::vector<Scalar> curvature = poisoned<Scalar>(static_cast<size_t>(d_.n));
    const int status =
        normals_call(index_.handle, k, nullptr, normals.data(), curvature.data(), &opt_);
    if (k < 1) {
      EXPECT_TRUE(refused_by(status, call.c_str()));
      EXPECT_TRUE(still_poisoned(normals) && still_poisoned(curvature)) << call;
      ++tallies()[call].refused;
      return;
    }
    ASSERT_EQ(status, KNN_OK) << call << " k " << k << ": " << knn_last_error();
    ++tallies()[call].answered;
    for (int64_t i = 0; i < d_.n; ++i) {
      const OracleShape want = oracle_shape(points_, nearest(points_, i, k));
      const long double sum = want.l[0] + want.l[1] + want.l[2];
      if (sum > 0 && want.l[1] - want.l[0] >= 1e-8L * sum) {
        ASSERT_LE(line_angle(&normals[static_cast<size_t>(3 * i)], want.normal), 1e-5)
            << call << " k " << k << " point " << i;
      }
      ASSERT_NEAR(static_cast<double>(curvature[static_cast<size_t>(i)]),
                  static_cast<double>(want.curvature), 1e-6)
          << call << " k " << k << " point " << i;
    }
  }

  // knn_index_outlier_scores and knn_index_kth_distances: k >= 1, any size.
  void distances_case(int k) {
    const std::string scores_name = named<Scalar>("knn_index_outlier_scores");
    const std::string kth_name = named<Scalar>("knn_index_kth_distances");
    std::vector<Scalar> scores = poisoned<Scalar>(static_cast<size_t>(d_.n));
    std::vector<Scalar> kth = poisoned<Scalar>(static_cast<size_t>(d_.n));
    const int s = scores_call(index_.handle, k, scores.data(), &opt_);
    if (k < 1) {
      EXPECT_TRUE(refused_by(s, scores_name.c_str()));
    }
    const int t = kth_call(index_.handle, k, kth.data(), &opt_);
    if (k < 1) {
      EXPECT_TRUE(refused_by(t, kth_name.c_str()));
      EXPECT_TRUE(still_poisoned(scores) && still_poisoned(kth));
      ++tallies()[scores_name].refused, ++tallies()[kth_name].refused;
      return;
    }
    ASSERT_EQ(s, KNN_OK) << scores_name << " k " << k << ": " << knn_last_error();
    ASSERT_EQ(t, KNN_OK) << kth_name << " k " << k << ": " << knn_last_error();
    ++tallies()[scores_name].answered, ++tallies()[kth_name].answered;
    for (int64_t i = 0; i < d_.n; ++i) {
      const auto want = oracle_distances(points_, i, k);
      ASSERT_EQ(scores[static_cast<size_t>(i)], static_cast<Scalar>(want.first)) << k << " " << i;
      ASSERT_EQ(kth[static_cast<size_t>(i)], static_cast<Scalar>(want.second)) << k << " " << i;
    }
  }

  // knn_index_statistical_inliers: k >= 1; kept and n_kept as the oracle.
  void inliers_case(int k) {
    const std::string call = named<Scalar>("knn_index_statistical_inliers");
    std::vector<int32_t> kept = poisoned<int32_t>(static_cast<size_t>(d_.n));
    int64_t n_kept = 0x5a5a;
    const int status = inliers_call<Scalar>(index_.handle, k, 1.0, kept.data(), &n_kept, &opt_);
    if (k < 1) {
      EXPECT_TRUE(refused_by(status, call.c_str()));
      EXPECT_TRUE(still_poisoned(kept) && n_kept == 0x5a5a) << call;
      ++tallies()[call].refused;
      return;
    }
    ASSERT_EQ(status, KNN_OK) << call << " k " << k << ": " << knn_last_error();
    ++tallies()[call].answered;
    std::vector<double> scores;
    double sum = 0;
    for (int64_t i = 0; i < d_.n; ++i) {
      scores.push_back(
          static_cast<double>(static_cast<Scalar>(oracle_distances(points_, i, k).first)));
      sum += scores.back();
    }
    const double mean = sum / double(d_.n);
    double squares = 0;
    for (const double v : scores) squares += (v - mean) * (v - mean);
    const double threshold = mean + std::sqrt(squares / double(d_.n - 1));
    int64_t want = 0;
    for (int64_t i = 0; i < d_.n; ++i) {
      if (scores[static_cast<size_t>(i)] > threshold) continue;
      ASSERT_EQ(kept[static_cast<size_t>(want)], i) << call << " k " << k;
      ++want;
    }
    ASSERT_EQ(n_kept, want) << call << " k " << k;
  }

  // knn_index_radius_inliers: min_neighbors >= 0 (the only count); the
  // counts of knn_index_neighbor_counts (no count of its own but n) with it.
  void radius_case(int64_t min_neighbors) {
    const std::string call = named<Scalar>("knn_index_radius_inliers");
    const std::string counts_name = named<Scalar>("knn_index_neighbor_counts");
    std::vector<int32_t> kept = poisoned<int32_t>(static_cast<size_t>(d_.n));
    int64_t n_kept = 0x5a5a;
    const Scalar r = static_cast<Scalar>(kRadius);
    const int status =
        radius_inliers_call(index_.handle, r, min_neighbors, kept.data(), &n_kept, &opt_);
    std::vector<int64_t> counts = poisoned<int64_t>(static_cast<size_t>(d_.n));
    const Scalar bad_radius = -r;  // the counting call's refusal
    if (min_neighbors < 0) {
      EXPECT_TRUE(refused_by(status, call.c_str()));
      EXPECT_TRUE(still_poisoned(kept) && n_kept == 0x5a5a) << call;
      ++tallies()[call].refused;
      EXPECT_TRUE(refused_by(counts_call(index_.handle, bad_radius, counts.data(), &opt_),
                             counts_name.c_str()));
      EXPECT_TRUE(still_poisoned(counts));
      ++tallies()[counts_name].refused;
      return;
    }
    ASSERT_EQ(status, KNN_OK) << call << ": " << knn_last_error();
    ASSERT_EQ(counts_call(index_.handle, r, counts.data(), &opt_), KNN_OK) << knn_last_error();
    ++tallies()[call].answered, ++tallies()[counts_name].answered;
    int64_t want = 0;
    const Scalar r2 = r * r;
    for (int64_t i = 0; i < d_.n; ++i) {
      int64_t others = 0;
      for (int64_t j = 0; j < d_.n; ++j)
        if (j != i && sq_distance(&points_[static_cast<size_t>(3 * i)],
                                  &points_[static_cast<size_t>(3 * j)]) <= r2)
          ++others;
      ASSERT_EQ(counts[static_cast<size_t>(i)], others) << counts_name << " point " << i;
      if (others < min_neighbors) continue;
      ASSERT_EQ(kept[static_cast<size_t>(want)], i) << call;
      ++want;
    }
    ASSERT_EQ(n_kept, want) << call << " min_neighbors " << min_neighbors;
  }

  // knn_index_align: m scan points (the first of the index's own, moved
  // off) and the iteration cap; refused with the result untouched, or
  // (fewer than the 6 points a step needs) the identity back, not
  // converged, every point kept, the rms of the brute-force nearest.
  void align_case(int64_t m, int iterations) {
    const std::string call = named<Scalar>("knn_index_align");
    const bool refuse =
        knn_counts::mesh_align_refused(m, iterations, static_cast<int>(sizeof(Scalar)));
    constexpr int64_t kScan = 5;
    if (!refuse && m > kScan) {
      ++tallies()[call].skipped;
      return;
    }
    std::vector<Scalar> scan(points_.begin(), points_.begin() + 3 * kScan);
    for (Scalar& x : scan) x += Scalar(0.25);
    knn_align_params params;
    std::memset(&params, 0, sizeof params);
    params.struct_size = sizeof params;
    params.max_iterations = iterations;
    knn_align_result r;
    std::memset(&r, 0xA5, sizeof r);
    r.struct_size = sizeof r;
    const int status = align_call(scan.data(), m, &params, &r);
    if (refuse) {
      ++tallies()[call].refused;
      ASSERT_TRUE(refused_by(status, call.c_str())) << "m " << m << " iterations " << iterations;
      ASSERT_EQ(r.struct_size, sizeof r);
      ASSERT_EQ(r.n_kept, static_cast<int64_t>(0xA5A5A5A5A5A5A5A5ull));
      return;
    }
    ++tallies()[call].answered;
    ASSERT_EQ(status, KNN_OK) << call << ": " << knn_last_error();
    long double sum = 0;
    for (int64_t i = 0; i < m; ++i) {
      long double best = INFINITY;
      for (int64_t j = 0; j < d_.n; ++j) {
        long double d2 = 0;
        for (int c = 0; c < 3; ++c) {
          const long double e = static_cast<long double>(scan[static_cast<size_t>(3 * i + c)]) -
                                points_[static_cast<size_t>(3 * j + c)];
          d2 += e * e;
        }
        best = std::min(best, d2);
      }
      sum += best;
    }
    for (int k = 0; k < 16; ++k) ASSERT_EQ(r.transform[k], k % 5 == 0 ? 1.0 : 0.0) << k;
    if (m == 0) {
      ASSERT_TRUE(std::isnan(r.rms));
    } else {
      ASSERT_NEAR(r.rms, std::sqrt(static_cast<double>(sum) / static_cast<double>(m)), 1e-5);
    }
    ASSERT_EQ(r.n_kept, m);
    ASSERT_EQ(r.converged, 0);
  }

 private:
  int align_call(const float* q, int64_t m, const knn_align_params* p, knn_align_result* r) {
    return knn_index_align(index_.handle, q, m, nullptr, nullptr, p, r, &opt_);
  }
  int align_call(const double* q, int64_t m, const knn_align_params* p, knn_align_result* r) {
    return knn_index_align_f64(index_.handle, q, m, nullptr, nullptr, p, r, &opt_);
  }

  const Data& d_;
  knn_options opt_;
  Index index_;
  std::vector<Scalar> points_;
};

template <class Scalar>
void fuzz_stats_calls(const Data& d, uint64_t seed) {
  StatsCalls<Scalar> calls(d);
  if (::testing::Test::HasFailure()) return;
  for (int k : adversarial_ints()) {
    calls.normals_case(k);
    calls.distances_case(k);
    calls.inliers_case(k);
    if (::testing::Test::HasFatalFailure()) return;
  }
  for (int64_t c : adversarial_counts()) {
    calls.radius_case(c);
    calls.align_case(c, 3);
    if (::testing::Test::HasFatalFailure()) return;
  }
  for (int iterations : adversarial_ints()) {
    calls.align_case(4, iterations);
    if (::testing::Test::HasFatalFailure()) return;
  }
  Counts counts(seed);
  for (int i = 0; i < kRandomCalls / 10; ++i) {
    calls.distances_case(counts.pick_int(12));
    calls.radius_case(counts.any64(12));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

void estimate_cases(uint64_t seed) {
  Counts counts(seed);
  for (int i = 0; i < 400; ++i) {
    const int64_t n = counts.any64(100), m = counts.any64(100);
    const int dim = counts.pick_int(8), k = counts.pick_int(8);
    for (auto build_bytes : {knn_estimate_build_bytes, knn_estimate_build_bytes_f64}) {
      const size_t b = build_bytes(n, dim, nullptr);
      if (n < 0 || dim < 1) {
        ASSERT_EQ(b, 0u) << "n " << n << " dim " << dim;
      } else if (n > INT32_MAX || dim > KNN_INDEX_MAX_DIM) {
        ASSERT_EQ(b, SIZE_MAX) << "n " << n << " dim " << dim;
      }
    }
    for (auto query_bytes : {knn_estimate_query_bytes, knn_estimate_query_bytes_f64}) {
      const size_t b = query_bytes(m, k, n, dim, nullptr);
      if (m < 0 || k < 1 || n < 0 || dim < 1) {
        ASSERT_EQ(b, 0u);
      } else if (n > INT32_MAX || dim > KNN_INDEX_MAX_DIM) {
        ASSERT_EQ(b, SIZE_MAX);
      } else if (m > 0) {
        // The rows at least; SIZE_MAX where their bytes do not fit a size_t.
        if (product_above(m, k, SIZE_MAX / 4))
          ASSERT_EQ(b, SIZE_MAX) << "m " << m << " k " << k;
        else
          ASSERT_GE(b, static_cast<size_t>(m) * static_cast<size_t>(k) * 4) << "m " << m;
      }
    }
    const int64_t vertices = counts.any64(100), triangles = counts.any64(100);
    for (int scalar : {int{KNN_SCALAR_FLOAT32}, int{KNN_SCALAR_FLOAT64}, counts.pick_int(2)}) {
      const size_t mesh_bytes = knn_estimate_mesh_bytes(vertices, triangles, scalar, nullptr);
      if (vertices < 1 || vertices > INT32_MAX || triangles < 1 ||
          triangles > KNN_MESH_MAX_TRIANGLES ||
          (scalar != KNN_SCALAR_FLOAT32 && scalar != KNN_SCALAR_FLOAT64)) {
        ASSERT_EQ(mesh_bytes, 0u) << vertices << " x " << triangles << " scalar " << scalar;
      }
    }
    for (auto stats_bytes : {knn_estimate_stats_bytes, knn_estimate_stats_bytes_f64}) {
      const size_t b = stats_bytes(n, k, nullptr);
      if (n < 0 || k < 1) {
        ASSERT_EQ(b, 0u) << "n " << n << " k " << k;
      } else if (n > INT32_MAX) {
        ASSERT_EQ(b, SIZE_MAX) << "n " << n;
      } else {
        ASSERT_GE(b, static_cast<size_t>(n) * 12) << "n " << n;  // the points at least
      }
    }
    const int a = counts.pick_int(100), b = counts.pick_int(100), c = counts.pick_int(100);
    ASSERT_EQ(getTreeSize(a), a < 0 ? 0u : static_cast<size_t>(a) * sizeof(Node));
    if (a < 0) {
      ASSERT_EQ(getNeededBytesForBuildingKdTree(a), 0u);
    }
    const size_t all = getNeededBytesForQueryAll(a, b, c);
    if (a < 0 || b < 0 || c < 0) {
      ASSERT_EQ(all, 0u);
    } else {
      ASSERT_GE(all, static_cast<size_t>(a) * static_cast<size_t>(b) * 4);  // < 2^64
    }
    const size_t search = getNeededBytesInSearch(a, b, c, counts.pick_int(4), counts.pick_int(4));
    (void)search;
  }
}

// ---- The tests ---------------------------------------------------------------------

TEST(CountFuzz, IndexCallsFloat32) {
  for (int dim : {1, 3}) {
    fuzz_index_calls<float>(make_data(dim, 11 + dim), 101 + dim);
    if (HasFatalFailure()) return;
  }
  expect_exercised({"knn_index_query", "knn_index_query_self", "knn_index_radius",
                    "knn_index_radius_count", "knn_index_radius_fill", "knn_index_count_neighbors",
                    "knn_index_radius_pairs"});
}

TEST(CountFuzz, IndexCallsFloat64) {
  for (int dim : {1, 3}) {
    fuzz_index_calls<double>(make_data(dim, 21 + dim), 201 + dim);
    if (HasFatalFailure()) return;
  }
  expect_exercised({"knn_index_query_f64", "knn_index_query_self_f64", "knn_index_radius_f64",
                    "knn_index_radius_count_f64", "knn_index_radius_fill_f64",
                    "knn_index_count_neighbors_f64", "knn_index_radius_pairs"});
}

// The same on the CUDA engines (the checks come before any engine, so a
// device must refuse the same counts and answer the same rows).
TEST(CountFuzz, IndexCallsCuda) {
  SKIP_WITHOUT_DEVICE();
  for (int dim : {1, 3}) {
    fuzz_index_calls<float>(make_data(dim, 71 + dim), 801 + dim, KNN_BACKEND_CUDA);
    if (HasFatalFailure()) return;
    fuzz_index_calls<double>(make_data(dim, 81 + dim), 901 + dim, KNN_BACKEND_CUDA);
    if (HasFatalFailure()) return;
  }
}

TEST(CountFuzz, OffsetsFromCounts) {
  const std::vector<int64_t> counts = {3, 0, 7, 1, 2};
  Counts random(301);
  std::vector<int64_t> ms = adversarial_counts();
  for (int i = 0; i < kRandomCalls; ++i) ms.push_back(random.any64(5));
  for (int64_t m : ms) {
    const bool refuse = knn_counts::offsets_from_counts_refused(m);
    if (!refuse && m > 5) {
      ++tallies()["knn_offsets_from_counts"].skipped;
      continue;
    }
    std::vector<int64_t> offsets = poisoned<int64_t>(8);
    const int status = knn_offsets_from_counts(counts.data(), m, offsets.data());
    if (refuse) {
      ++tallies()["knn_offsets_from_counts"].refused;
      ASSERT_TRUE(refused_by(status, "knn_offsets_from_counts")) << "m " << m;
      ASSERT_TRUE(still_poisoned(offsets));
      continue;
    }
    ++tallies()["knn_offsets_from_counts"].answered;
    ASSERT_EQ(status, KNN_OK);
    int64_t sum = 0;
    for (int64_t i = 0; i <= m; ++i) {
      ASSERT_EQ(offsets[i], sum);
      if (i < m) sum += counts[i];
    }
    ASSERT_TRUE(still_poisoned(offsets, m + 1));
  }
  expect_exercised({"knn_offsets_from_counts"});
}

TEST(CountFuzz, Builds) {
  const Data d = make_data(3, 31);
  std::vector<int64_t> ns = adversarial_counts();
  std::vector<int> dims = adversarial_ints();
  for (int64_t n : ns)
    for (int dim : dims) {
      build_case<float>(d, n, dim);
      build_case<double>(d, n, dim);
      if (HasFatalFailure()) return;
    }
  Counts counts(401);
  for (int i = 0; i < kRandomCalls; ++i) {
    build_case<float>(d, counts.any64(40), counts.pick_int(4));
    build_case<double>(d, counts.any64(40), counts.pick_int(4));
    quadtree_build_case<float>(d, counts.any64(60));
    quadtree_build_case<double>(d, counts.any64(60));
    if (HasFatalFailure()) return;
  }
  for (int64_t n : ns) {
    quadtree_build_case<float>(d, n);
    quadtree_build_case<double>(d, n);
  }
  expect_exercised(
      {"knn_index_build", "knn_index_build_f64", "knn_quadtree_build", "knn_quadtree_build_f64"});
}

TEST(CountFuzz, PointInPolygon) {
  const Data d = make_data(3, 41);
  fuzz_pip_calls<float>(d, 501);
  if (HasFatalFailure()) return;
  fuzz_pip_calls<double>(d, 502);
  expect_exercised({"knn_points_in_polygons_count", "knn_points_in_polygons_count_f64",
                    "knn_points_in_polygons", "knn_points_in_polygons_f64"});
}

TEST(CountFuzz, ClassicAndBruteForce) {
  const Data d = make_data(3, 51);
  ClassicCalls calls(d);
  const std::vector<int>& v = adversarial_ints();
  for (int n : v) {
    calls.build_case(n, mpBuildKdTree, "mpBuildKdTree");
    calls.build_case(n, buildKdTree, "buildKdTree");
    calls.build_case(n, cuBuildKdTree, "cuBuildKdTree");
  }
  for (int a : v)
    for (int b : v)
      for (int c : v) {
        calls.query_case(a, b, c, mpQueryAll, "mpQueryAll");
        calls.query_case(a, b, c, queryAll, "queryAll");
        calls.query_case(a, b, c, cuQueryAll, "cuQueryAll");
        calls.brute_force_case(a, b, c, 4);
        calls.brute_force_case(a, b, 3, c);
        calls.brute_force_case(40, a, b, c);
        if (HasFatalFailure()) return;
      }
  Counts counts(601);
  for (int i = 0; i < kRandomCalls; ++i) {
    calls.query_case(counts.pick_int(5), counts.pick_int(40), counts.pick_int(12), mpQueryAll,
                     "mpQueryAll");
    calls.brute_force_case(counts.pick_int(40), counts.pick_int(5), counts.pick_int(3),
                           counts.pick_int(12));
    if (HasFatalFailure()) return;
  }
  expect_exercised({"buildKdTree", "cuBuildKdTree", "mpBuildKdTree", "queryAll", "cuQueryAll",
                    "mpQueryAll", "knn_brute_force"});
}

TEST(CountFuzz, Serialization) {
  serialize_cases(make_data(3, 61));
  if (HasFatalFailure()) return;
  expect_exercised({"knn_index_serialize", "knn_index_deserialize"});
}

TEST(CountFuzz, Meshes) {
  fuzz_mesh_calls<float>(801);
  if (HasFatalFailure()) return;
  fuzz_mesh_calls<double>(802);
  if (HasFatalFailure()) return;
  mesh_serialize_cases();
  if (HasFatalFailure()) return;
  expect_exercised({"knn_mesh_build", "knn_mesh_build_f64", "knn_mesh_closest",
                    "knn_mesh_closest_f64", "knn_mesh_signed_distance",
                    "knn_mesh_signed_distance_f64", "knn_mesh_deviation_report",
                    "knn_mesh_deviation_report_f64", "knn_mesh_serialize", "knn_mesh_deserialize"});
}

TEST(CountFuzz, NeighbourhoodStatistics) {
  fuzz_stats_calls<float>(make_data(3, 61), 901);
  if (HasFatalFailure()) return;
  fuzz_stats_calls<double>(make_data(3, 62), 902);
  if (HasFatalFailure()) return;
  expect_exercised({"knn_index_normals", "knn_index_normals_f64", "knn_index_outlier_scores",
                    "knn_index_outlier_scores_f64", "knn_index_statistical_inliers",
                    "knn_index_statistical_inliers_f64", "knn_index_kth_distances",
                    "knn_index_kth_distances_f64", "knn_index_neighbor_counts",
                    "knn_index_neighbor_counts_f64", "knn_index_radius_inliers",
                    "knn_index_radius_inliers_f64", "knn_index_align", "knn_index_align_f64"});
}

TEST(CountFuzz, Estimates) { estimate_cases(701); }

// Every function the library exports is fuzzed above, is a helper without a
// status (Estimates), or takes no count: a new export must be placed here.
TEST(CountFuzz, EveryEntryPointCovered) {
  int exported = 0;
#define KNN_ABI_SYMBOL(name)                                                            \
  ++exported;                                                                           \
  EXPECT_EQ(kFuzzed.count(#name) + kHelpers.count(#name) + kCountFree.count(#name), 1u) \
      << #name " is exported but neither fuzzed here nor listed as taking no count";
#include "abi_symbols.inc"
#undef KNN_ABI_SYMBOL
  EXPECT_EQ(exported, static_cast<int>(kFuzzed.size() + kHelpers.size() + kCountFree.size()));
}

}  // namespace
}  // namespace knn_test
