// Fuzz target: the counts of the entry points (issue 51), any 64-bit or int
// value the input gives (often the edges of PTRDIFF_MAX / element size,
// INT64_MAX, INT64_MIN, 2^31 - 1, 2^62), over small real buffers. The
// header's rules by count alone (tests/support/count_rules.h) say which calls must be
// refused; those are made and must answer INVALID_ARGUMENT with a message,
// every output untouched. Calls whose counts fit the buffers are made too and
// must answer as knn_brute_force does. Calls whose counts are possible but
// exceed the buffers (the caller's arrays must then hold them) are not made.
// ASan and UBSan watch the library for any read, write or arithmetic that a
// count could push out of bounds before it is refused.
#include <climits>
#include <cstring>
#include <vector>

#include "count_rules.h"
#include "fuzz_support.h"

namespace {

using knn_fuzz::check_status;
using knn_fuzz::expect;

constexpr int64_t kPoints = 24, kQueries = 4;
constexpr size_t kSlots = 48;

int64_t next_count64(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: return in.ConsumeIntegralInRange<int64_t>(-1, kQueries);
    case 1: {
      const int64_t edge = in.PickValueInArray<int64_t>(
          {PTRDIFF_MAX / 4, PTRDIFF_MAX / 8, PTRDIFF_MAX / 12, PTRDIFF_MAX / 16, INT32_MAX,
           int64_t{1} << 31, int64_t{1} << 32, int64_t{1} << 62, INT64_MAX, INT64_MIN});
      // A step around the edge, saturating at the int64 range.
      int64_t near = 0;
      if (__builtin_add_overflow(edge, in.ConsumeIntegralInRange<int64_t>(-2, 2), &near))
        return edge;
      return near;
    }
    default: return in.ConsumeIntegral<int64_t>();
  }
}
int next_count32(FuzzedDataProvider& in) {
  if (in.ConsumeBool()) return in.ConsumeIntegralInRange<int>(-1, 12);
  return in.ConsumeIntegral<int>();
}

template <class T>
bool untouched(const std::vector<T>& v, size_t from = 0) {
  const std::vector<unsigned char> poison(sizeof(T), 0xA5);
  for (size_t i = from; i < v.size(); ++i)
    if (std::memcmp(&v[i], poison.data(), sizeof(T)) != 0) return false;
  return true;
}
template <class T>
std::vector<T> poisoned(size_t count) {
  std::vector<T> v(count);
  std::memset(v.data(), 0xA5, count * sizeof(T));
  return v;
}

void expect_refused(int status, bool outputs_untouched) {
  check_status(status);
  expect(status == KNN_ERR_INVALID_ARGUMENT, "an impossible count was not refused", status);
  expect(outputs_untouched, "a refused call wrote an output", status);
}

struct Data {
  int dim = 3;
  std::vector<float> points, queries;
  std::vector<double> points64, queries64;
  knn_index* index32 = nullptr;
  knn_index* index64 = nullptr;
  knn_options opt{};

  explicit Data(FuzzedDataProvider& in) {
    dim = in.ConsumeIntegralInRange<int>(1, 3);
    for (int64_t i = 0; i < kPoints * dim; ++i)
      points.push_back(static_cast<float>(in.ConsumeIntegralInRange<int>(-4, 4)));
    for (int64_t i = 0; i < kQueries * dim; ++i)
      queries.push_back(static_cast<float>(in.ConsumeIntegralInRange<int>(-5, 5)));
    points64.assign(points.begin(), points.end());
    queries64.assign(queries.begin(), queries.end());
    knn_options_init(&opt);
    opt.backend = KNN_BACKEND_OPENMP;
    opt.threads = 1;
    expect(knn_index_build(points.data(), kPoints, dim, &opt, &index32) == KNN_OK, "build", 0);
    expect(knn_index_build_f64(points64.data(), kPoints, dim, &opt, &index64) == KNN_OK,
           "build_f64", 0);
  }
  ~Data() {
    knn_index_free(index32);
    knn_index_free(index64);
  }
};

// kNN of the first m queries against knn_brute_force (small integer
// coordinates: the float64 index's distances are the same values).
template <class Scalar>
void expect_oracle_rows(const Data& d, int64_t m, int k, const std::vector<int32_t>& idx,
                        const std::vector<Scalar>& dist) {
  std::vector<int> want(static_cast<size_t>(m) * k);
  std::vector<float> want_dist(want.size());
  const int bf = knn_brute_force(d.points.data(), static_cast<int>(kPoints), d.queries.data(),
                                 static_cast<int>(m), d.dim, k, want_dist.data(), want.data());
  expect(bf == KNN_OK, "brute force refused", bf);
  for (size_t s = 0; s < want.size(); ++s) {
    expect(idx[s] == want[s], "index kNN differs from brute force", 0);
    expect(dist[s] == static_cast<Scalar>(want_dist[s]), "distance differs from brute force", 0);
  }
  expect(untouched(idx, want.size()) && untouched(dist, want.size()), "written past m * k", 0);
}

// The entry points of each precision, by overload.
int query(const knn_index* x, const float* q, int64_t m, int k, int32_t* i, float* d,
          const knn_options* o) {
  return knn_index_query(x, q, m, k, i, d, o);
}
int query(const knn_index* x, const double* q, int64_t m, int k, int32_t* i, double* d,
          const knn_options* o) {
  return knn_index_query_f64(x, q, m, k, i, d, o);
}
int radius(const knn_index* x, const float* q, int64_t m, int mn, int32_t* i, float* d, int32_t* c,
           const knn_options* o) {
  return knn_index_radius(x, q, m, 2.0f, mn, i, d, c, o);
}
int radius(const knn_index* x, const double* q, int64_t m, int mn, int32_t* i, double* d,
           int32_t* c, const knn_options* o) {
  return knn_index_radius_f64(x, q, m, 2.0, mn, i, d, c, o);
}
int radius_count(const knn_index* x, const float* q, int64_t m, int64_t* c, const knn_options* o) {
  return knn_index_radius_count(x, q, m, 2.0f, c, o);
}
int radius_count(const knn_index* x, const double* q, int64_t m, int64_t* c, const knn_options* o) {
  return knn_index_radius_count_f64(x, q, m, 2.0, c, o);
}
int radius_fill(const knn_index* x, const float* q, int64_t m, const int64_t* off, int32_t* i,
                float* d, const knn_options* o) {
  return knn_index_radius_fill(x, q, m, 2.0f, off, i, d, o);
}
int radius_fill(const knn_index* x, const double* q, int64_t m, const int64_t* off, int32_t* i,
                double* d, const knn_options* o) {
  return knn_index_radius_fill_f64(x, q, m, 2.0, off, i, d, o);
}

template <class Scalar>
void index_calls(FuzzedDataProvider& in, const Data& d) {
  using knn_counts::product_above;
  constexpr bool wide = sizeof(Scalar) == 8;
  const knn_index* index = wide ? d.index64 : d.index32;
  const Scalar* queries;
  if constexpr (wide)
    queries = d.queries64.data();
  else
    queries = d.queries.data();
  const int scalar = static_cast<int>(sizeof(Scalar));
  const int64_t m = next_count64(in);
  switch (in.ConsumeIntegralInRange<int>(0, 4)) {
    case 0: {  // kNN
      const int k = next_count32(in);
      const bool refuse = knn_counts::index_query_refused(m, k, d.dim, scalar);
      if (!refuse && (m > kQueries || product_above(m, k, kSlots))) return;
      std::vector<int32_t> idx = poisoned<int32_t>(kSlots);
      std::vector<Scalar> dist = poisoned<Scalar>(kSlots);
      const int status = query(index, queries, m, k, idx.data(), dist.data(), &d.opt);
      if (refuse) return expect_refused(status, untouched(idx) && untouched(dist));
      expect(status == KNN_OK, "a valid kNN call failed", status);
      if (m > 0) expect_oracle_rows(d, m, k, idx, dist);
      return;
    }
    case 1: {  // fixed rows of radius neighbours
      const int max_neighbors = next_count32(in);
      const bool refuse = knn_counts::index_radius_refused(m, max_neighbors, d.dim, scalar);
      if (!refuse && (m > kQueries || product_above(m, max_neighbors, kSlots))) return;
      std::vector<int32_t> idx = poisoned<int32_t>(kSlots), counts = poisoned<int32_t>(kSlots);
      std::vector<Scalar> dist = poisoned<Scalar>(kSlots);
      const int status =
          radius(index, queries, m, max_neighbors, idx.data(), dist.data(), counts.data(), &d.opt);
      if (refuse)
        return expect_refused(status, untouched(idx) && untouched(dist) && untouched(counts));
      expect(status == KNN_OK, "a valid radius call failed", status);
      return;
    }
    case 2: {  // CSR counts
      const bool refuse = knn_counts::radius_count_refused(m, d.dim, scalar);
      if (!refuse && m > kQueries) return;
      std::vector<int64_t> counts = poisoned<int64_t>(kSlots);
      const int status = radius_count(index, queries, m, counts.data(), &d.opt);
      if (refuse) return expect_refused(status, untouched(counts));
      expect(status == KNN_OK, "a valid radius count failed", status);
      expect(untouched(counts, static_cast<size_t>(m)), "radius count wrote past m", status);
      return;
    }
    case 3: {  // CSR fill, with the true offsets of up to kQueries queries
      const bool refuse = knn_counts::radius_fill_refused(m, d.dim, scalar);
      if (!refuse && m > kQueries) return;
      std::vector<int64_t> counts(kQueries), offsets(kQueries + 1);
      expect(knn_index_radius_count(d.index32, d.queries.data(), kQueries, 2.0f, counts.data(),
                                    &d.opt) == KNN_OK,
             "radius count", 0);
      const int64_t rows = m < 0 ? 0 : (m < kQueries ? m : kQueries);
      expect(knn_offsets_from_counts(counts.data(), rows, offsets.data()) == KNN_OK, "offsets", 0);
      std::vector<int32_t> idx = poisoned<int32_t>(static_cast<size_t>(offsets[rows]) + 4);
      std::vector<Scalar> dist = poisoned<Scalar>(idx.size());
      const int status =
          radius_fill(index, queries, m, offsets.data(), idx.data(), dist.data(), &d.opt);
      if (refuse) return expect_refused(status, untouched(idx) && untouched(dist));
      expect(status == KNN_OK, "a valid radius fill failed", status);
      expect(untouched(idx, static_cast<size_t>(offsets[rows])), "fill wrote past offsets[m]",
             status);
      return;
    }
    default: {  // offsets from counts
      const bool refuse = knn_counts::offsets_from_counts_refused(m);
      if (!refuse && m > kQueries) return;
      const std::vector<int64_t> counts = {2, 0, 5, 1};
      std::vector<int64_t> offsets = poisoned<int64_t>(kQueries + 2);
      const int status = knn_offsets_from_counts(counts.data(), m, offsets.data());
      if (refuse) return expect_refused(status, untouched(offsets));
      expect(status == KNN_OK, "valid offsets failed", status);
      return;
    }
  }
}

// The classic query, knn_brute_force and the point-in-polygon counts.
void other_calls(FuzzedDataProvider& in, const Data& d) {
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: {
      const int n_ref = next_count32(in), n_query = next_count32(in);
      const int dim = next_count32(in), k = next_count32(in);
      const bool refuse = knn_counts::brute_force_refused(n_ref, n_query, dim, k);
      if (!refuse && (knn_counts::product_above(n_ref, dim, d.points.size()) ||
                      knn_counts::product_above(n_query, dim, d.queries.size()) ||
                      knn_counts::product_above(n_query, k, kSlots)))
        return;
      std::vector<int> idx = poisoned<int>(kSlots);
      std::vector<float> dist = poisoned<float>(kSlots);
      const int status = knn_brute_force(d.points.data(), n_ref, d.queries.data(), n_query, dim, k,
                                         dist.data(), idx.data());
      if (refuse) return expect_refused(status, untouched(idx) && untouched(dist));
      expect(status == KNN_OK, "a valid brute force failed", status);
      return;
    }
    case 1: {
      if (d.dim != 3) return;
      const int n_qp = next_count32(in), k = next_count32(in);
      const bool refuse = knn_counts::classic_query_refused(n_qp, static_cast<int>(kPoints), k);
      if (!refuse && (n_qp > kQueries || knn_counts::product_above(n_qp, k, kSlots))) return;
      std::vector<Node> tree(kPoints);
      expect(mpBuildKdTree(reinterpret_cast<const Point*>(d.points.data()),
                           static_cast<int>(kPoints), tree.data()) == KNN_OK,
             "tree build", 0);
      std::vector<int> result = poisoned<int>(kSlots);
      const int status = mpQueryAll(reinterpret_cast<const Point*>(d.queries.data()), tree.data(),
                                    n_qp, static_cast<int>(kPoints), k, result.data());
      if (refuse) return expect_refused(status, untouched(result));
      expect(status == KNN_OK, "a valid classic query failed", status);
      return;
    }
    default: {
      // One square polygon; the counts and its vertex count are fuzzed.
      const int64_t n_polygons = next_count64(in), n_rings = next_count64(in);
      const bool vertices_fuzzed = in.ConsumeBool();
      std::vector<int64_t> rings = {0, 4}, polygons = {0, 1};
      if (vertices_fuzzed) rings[1] = next_count64(in);
      const std::vector<float> xy = {-2, -2, 2, -2, 2, 2, -2, 2};
      bool refuse = knn_counts::polygon_counts_refused(n_polygons, n_rings);
      const bool fits = n_polygons <= 1 && n_rings <= 1;
      if (!refuse && !fits) return;
      if (!refuse && n_rings == 1 && n_polygons == 1 && vertices_fuzzed) {
        if (rings[1] < 0 || rings[1] > 4) {
          // Negative or beyond the array: only an impossible size is testable.
          if (!knn_counts::vertex_count_refused(rings[1], 4)) return;
          refuse = true;
        }
      }
      knn_quadtree* tree = nullptr;
      expect(knn_quadtree_build(d.points.data(), kPoints * d.dim / 2, &d.opt, &tree) == KNN_OK,
             "quadtree", 0);
      std::vector<int64_t> counts = poisoned<int64_t>(4);
      const int status =
          knn_points_in_polygons_count(tree, xy.data(), rings.data(), n_rings, polygons.data(),
                                       n_polygons, counts.data(), &d.opt);
      if (refuse)
        expect_refused(status, untouched(counts));
      else
        check_status(status);
      knn_quadtree_free(tree);  // after the checks: it clears the message
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const Data d(in);
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: index_calls<float>(in, d); break;
    case 1: index_calls<double>(in, d); break;
    default: other_calls(in, d); break;
  }
  return 0;
}
