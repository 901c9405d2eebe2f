// Entry points that answer from radius rows without handing them to the
// caller (include/knn_gpgpu_index.h, "Pairs within a radius"): the pairs of
// the indexed points within a radius (knn_index_radius_pairs) and the
// cumulative pair counts at several radii (knn_index_count_neighbors). Both
// search through the one radius path of src/index_calls.cpp (radius_counts,
// then fill_radius_rows) and reduce each run of rows on the host, so they
// serve every backend and structure, and never hold more rows than a run;
// an engine with a search of its own (the OpenMP kd-tree's pairs, found once
// each; its and the grid's radius bins) answers instead.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "../engine/progress.h"
#include "abi_barrier.h"
#include "index_calls.h"
#include "index_handle.h"
#include "validate.h"

namespace knn {
namespace {

// Radius rows are reduced in runs of queries whose rows hold at most this
// many entries together (or one query whose row alone holds more): the
// staging of fill_radius_rows, and this file's copy of it, stay bounded.
constexpr int64_t kRunEntries = int64_t{1} << 22;

// The rows of queries [0, m) within `radius` (the engine's predicate), given
// their counts: visit(first, last, offsets, indices, sq_distances) once per
// run of queries [first, last), offsets[r] .. offsets[r + 1] being query
// first + r's entries (by distance, then index; sq_distances empty unless
// `distances`).
template <typename Scalar, typename Visit>
void visit_radius_rows(const knn_index& ix, const Scalar* queries, int64_t m, Scalar radius,
                       const std::vector<int32_t>& counts, bool distances, const knn_options& o,
                       Visit&& visit) {
  const int dim = ix.dim();
  std::vector<int64_t> offsets;
  std::vector<int32_t> indices;
  std::vector<Scalar> sq;
  std::vector<int32_t> run_counts;
  for (int64_t first = 0; first < m;) {
    int64_t last = first, entries = 0;
    offsets.assign(1, 0);
    while (last < m &&
           (last == first || entries + counts[static_cast<size_t>(last)] <= kRunEntries)) {
      entries += counts[static_cast<size_t>(last)];
      offsets.push_back(entries);
      ++last;
    }
    run_counts.assign(counts.begin() + first, counts.begin() + last);
    indices.resize(static_cast<size_t>(entries));
    if (distances) sq.resize(static_cast<size_t>(entries));
    fill_radius_rows(ix, queries + first * dim, last - first, radius, run_counts, offsets,
                     indices.data(), distances ? sq.data() : nullptr, false, o);
    visit(first, last, offsets, indices, sq);
    first = last;
  }
}

// The index's points in input order, on the host: the queries of a search
// of the index against itself.
template <typename Scalar>
std::vector<Scalar> own_points(const knn_index& ix) {
  std::vector<Scalar> points(static_cast<size_t>(ix.size()) * static_cast<size_t>(ix.dim()));
  if (!points.empty()) ix.engine<Scalar>()->copy_points(points.data());
  return points;
}

// The counts of the index's own points at `r`: the caller's (checked for
// what any search could give; each row is checked against its search as it
// is filled), or a counting search.
template <typename Scalar>
std::vector<int32_t> own_counts(const knn_index& ix, const std::vector<Scalar>& points, Scalar r,
                                const int64_t* self_counts, const knn_options& o) {
  const int64_t n = ix.size();
  if (self_counts == nullptr) return radius_counts(ix, points.data(), n, r, o);
  const std::vector<int64_t> given = host_int64s(self_counts, n);
  std::vector<int32_t> counts(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = given[static_cast<size_t>(i)];
    if (c < 1 || c > n)
      fail(KNN_ERR_INVALID_ARGUMENT,
           format("self_counts[%lld] is %lld; a point's count within a radius is 1 (itself) "
                  "to n (%lld)",
                  static_cast<long long>(i), static_cast<long long>(c), static_cast<long long>(n)));
    counts[static_cast<size_t>(i)] = static_cast<int32_t>(c);
  }
  return counts;
}

// The documented failure of a pairs call whose capacity is short (*count
// already holds the number of pairs, pairs is untouched).
void check_pairs_capacity(int64_t capacity, int64_t total) {
  if (capacity < total)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("capacity is %lld pairs but %lld pairs lie within the radius (*count holds "
                "their number; pairs is untouched)",
                static_cast<long long>(capacity), static_cast<long long>(total)));
}

template <typename Scalar>
void radius_pairs(const knn_index& ix, double radius, const int64_t* self_counts, int64_t capacity,
                  int64_t* pairs, int64_t* count, const knn_options& o) {
  const int64_t n = ix.size();
  if (n == 0) {
    *count = 0;
    return;
  }
  check_slots(n, ix.dim(), sizeof(Scalar), "n * dim (the index's points)");
  DeviceScope scope(ix.device);
  // The radius in the index's precision; one beyond its range is infinite
  // (its square would be), without a conversion the language leaves undefined.
  const Scalar r = radius > static_cast<double>(std::numeric_limits<Scalar>::max())
                       ? std::numeric_limits<Scalar>::infinity()
                       : static_cast<Scalar>(radius);
  if (self_counts == nullptr) {
    // An engine that finds each pair once answers in one search, which
    // counts the pairs and writes them where they fit (the OpenMP kd-tree,
    // an AUTO index's own or the one it adds beside its grid).
    const bool size_query = pairs == nullptr && capacity == 0;
    const int64_t found = self_join_engine<Scalar>(ix).radius_pairs(
        r, capacity, size_query ? nullptr : pairs, call_params(ix, o));
    if (found >= 0) {
      *count = found;
      if (!size_query) check_pairs_capacity(capacity, found);
      return;
    }
  }
  const std::vector<Scalar> points = own_points<Scalar>(ix);
  const std::vector<int32_t> counts = own_counts(ix, points, r, self_counts, o);
  // Every point is within any radius of itself, and the distance is
  // symmetric: each pair lies in both its points' rows.
  const int64_t entries = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if ((entries - n) % 2 != 0)
    fail(self_counts ? KNN_ERR_INVALID_ARGUMENT : KNN_ERR_INTERNAL,
         format("the radius counts of the index's own points sum to %lld for %lld points, "
                "which no symmetric distance gives",
                static_cast<long long>(entries), static_cast<long long>(n)));
  const int64_t total = (entries - n) / 2;
  *count = total;
  if (pairs == nullptr && capacity == 0) return;  // a size query
  check_pairs_capacity(capacity, total);
  int64_t written = 0;
  std::vector<int32_t> later;
  const auto write_run = [&](int64_t first, int64_t last, const std::vector<int64_t>& offsets,
                             const std::vector<int32_t>& indices, const std::vector<Scalar>&) {
    for (int64_t i = first; i < last; ++i) {
      const size_t a = static_cast<size_t>(offsets[static_cast<size_t>(i - first)]);
      const size_t b = static_cast<size_t>(offsets[static_cast<size_t>(i - first + 1)]);
      later.clear();
      for (size_t e = a; e < b; ++e)
        if (indices[e] > i) later.push_back(indices[e]);
      if (static_cast<int64_t>(later.size()) > total - written)
        fail(KNN_ERR_INTERNAL, "the pairs found exceed those counted");
      std::sort(later.begin(), later.end());
      for (const int32_t j : later) {
        pairs[2 * written] = i;
        pairs[2 * written + 1] = j;
        ++written;
      }
    }
  };
  try {
    visit_radius_rows(ix, points.data(), n, r, counts, false, o, write_run);
    if (written != total)
      fail(KNN_ERR_INTERNAL,
           format("%lld pairs found but %lld counted", static_cast<long long>(written),
                  static_cast<long long>(total)));
  } catch (...) {
    std::fill(pairs, pairs + 2 * total, int64_t{-1});  // the documented pairs after a failure
    throw;
  }
}

// The radius the engine searches so that its rows hold every point within
// `radius` by the double predicate of knn_index_count_neighbors: for a
// float32 index, a float radius whose product rounded to float exceeds
// radius * radius (three ulps above it bound the two roundings).
template <typename Scalar>
Scalar covering_radius(double radius) {
  if constexpr (std::is_same_v<Scalar, double>) {
    return radius;
  } else {
    if (!(radius < static_cast<double>(std::numeric_limits<float>::max()) / 2))
      return std::numeric_limits<float>::infinity();
    float r = static_cast<float>(radius);
    for (int up = 0; up < 3; ++up) r = std::nextafter(r, std::numeric_limits<float>::infinity());
    return r;
  }
}

template <typename Scalar>
void count_neighbors(const char* call, const knn_index* index, const Scalar* queries, int64_t m,
                     const double* radii, int64_t n_radii, const double* query_weights,
                     const double* point_weights, int64_t* counts, double* weighted_counts,
                     const knn_options* opt) {
  const HandleUse<knn_index> use = use_index<Scalar>(index, call);
  const knn_index& ix = *use;
  const knn_options o = read_call_options(ix, opt);
  check_array(queries, m, "queries", "m");
  check_array(radii, n_radii, "radii", "n_radii");
  if (counts == nullptr && weighted_counts == nullptr)
    fail(KNN_ERR_INVALID_ARGUMENT, "counts and weighted_counts are both NULL");
  check_slots(m, ix.dim(), sizeof(Scalar), "m * dim");
  check_slots(n_radii, 1, sizeof(double), "n_radii");
  for (int64_t b = 0; b < n_radii; ++b)
    if (std::isnan(radii[b]))
      fail(KNN_ERR_INVALID_ARGUMENT, format("radii[%lld] is NaN", static_cast<long long>(b)));
  // The bins by limit: each radius's squared limit, ascending (negative
  // radii hold nothing: a limit below every squared distance).
  std::vector<double> limit(static_cast<size_t>(n_radii));
  for (int64_t b = 0; b < n_radii; ++b)
    limit[static_cast<size_t>(b)] = radii[b] < 0 ? -1.0 : radii[b] * radii[b];
  std::vector<int64_t> order(static_cast<size_t>(n_radii));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return limit[static_cast<size_t>(a)] < limit[static_cast<size_t>(b)];
  });
  std::vector<double> sorted(static_cast<size_t>(n_radii));
  for (size_t s = 0; s < sorted.size(); ++s) sorted[s] = limit[static_cast<size_t>(order[s])];
  std::vector<int64_t> hist(static_cast<size_t>(n_radii) + 1, 0);
  std::vector<double> whist(static_cast<size_t>(n_radii) + 1, 0.0);
  const double widest = n_radii ? *std::max_element(radii, radii + n_radii) : -1.0;
  // Bin s holds the pairs within sorted[s] and beyond sorted[s - 1]: the
  // outputs are their running sums, written only once all is counted.
  const auto write_cumulative = [&] {
    int64_t running = 0;
    double running_w = 0.0;
    for (size_t s = 0; s < sorted.size(); ++s) {
      running += hist[s];
      running_w += whist[s];
      if (counts) counts[order[s]] = running;
      if (weighted_counts) weighted_counts[order[s]] = running_w;
    }
  };
  if (m > 0 && ix.size() > 0 && widest >= 0) {
    DeviceScope scope(ix.device);
    check_coordinate_rows(queries, m, ix.dim(), on_device(queries), "query",
                          call_params(ix, o).threads);
    const bool weighted = weighted_counts != nullptr;
    const Scalar search = covering_radius<Scalar>(widest);
    // An engine that counts into bins itself needs one search and no rows
    // (the OpenMP kd-tree and grid, for host queries).
    if (ix.backend() == KNN_BACKEND_OPENMP && !on_device(queries) &&
        n_radii < std::numeric_limits<int>::max()) {
      const RadiusBins bins{sorted.data(), static_cast<int>(n_radii), query_weights, point_weights};
      const ProgressStage stage(KNN_PROGRESS_QUERY, m);
      if (ix.engine<Scalar>()->radius_bins(queries, m, search, bins, hist.data(),
                                           weighted ? whist.data() : nullptr, call_params(ix, o))) {
        stage.finish();
        return write_cumulative();
      }
    }
    if (std::is_same_v<Scalar, double> && !weighted) {
      // The engine's own predicate is the documented one: a counting search
      // per distinct radius, each cheaper than one search's rows (measured:
      // 4 radii at 1e5 points, 290 ms against 400 ms of rows), binned by
      // the differences of the running counts.
      int64_t below = 0;
      for (size_t s = 0; s < sorted.size(); ++s) {
        if (sorted[s] < 0 || (s > 0 && sorted[s] == sorted[s - 1])) continue;
        const std::vector<int32_t> c =
            radius_counts(ix, queries, m, static_cast<Scalar>(radii[order[s]]), o);
        const int64_t within = std::accumulate(c.begin(), c.end(), int64_t{0});
        hist[s] = within - below;
        below = within;
      }
      return write_cumulative();
    }
    const std::vector<int32_t> found = radius_counts(ix, queries, m, search, o);
    // Rows come nearest first: one walk of the sorted limits per row puts
    // each entry in the first bin that holds it (the last: none does).
    const auto bin_run = [&](int64_t first, int64_t last, const std::vector<int64_t>& offsets,
                             const std::vector<int32_t>& indices, const std::vector<Scalar>& sq) {
      for (int64_t i = first; i < last; ++i) {
        const double wq = query_weights ? query_weights[i] : 1.0;
        size_t bin = 0;
        const size_t a = static_cast<size_t>(offsets[static_cast<size_t>(i - first)]);
        const size_t b = static_cast<size_t>(offsets[static_cast<size_t>(i - first + 1)]);
        for (size_t e = a; e < b; ++e) {
          const double d = static_cast<double>(sq[e]);
          while (bin < sorted.size() && d > sorted[bin]) ++bin;
          ++hist[bin];
          if (weighted) whist[bin] += wq * (point_weights ? point_weights[indices[e]] : 1.0);
        }
      }
    };
    visit_radius_rows(ix, queries, m, search, found, true, o, bin_run);
  }
  write_cumulative();
}

}  // namespace
}  // namespace knn

extern "C" {

KNN_API int KNN_CALL knn_index_radius_pairs(const knn_index* index, double radius,
                                            const int64_t* self_counts, int64_t capacity,
                                            int64_t* pairs, int64_t* count,
                                            const knn_options* opt) {
  static const char* const call = "knn_index_radius_pairs";
  return knn::guarded(call, [&] {
    const knn::HandleUse<knn_index> use = knn::use_index(index);
    const knn_index& ix = *use;
    const knn_options o = knn::read_call_options(ix, opt);
    knn::check_radius(radius);
    if (count == nullptr) knn::fail(KNN_ERR_INVALID_ARGUMENT, "count is NULL");
    knn::check_array(pairs, capacity, "pairs", "capacity");
    knn::check_slots(capacity, 2, sizeof(int64_t), "capacity * 2");
    if (ix.scalar() == KNN_SCALAR_FLOAT64)
      knn::radius_pairs<double>(ix, radius, self_counts, capacity, pairs, count, o);
    else
      knn::radius_pairs<float>(ix, radius, self_counts, capacity, pairs, count, o);
  });
}

KNN_API int KNN_CALL knn_index_count_neighbors(const knn_index* index, const float* queries,
                                               int64_t m, const double* radii, int64_t n_radii,
                                               const double* query_weights,
                                               const double* point_weights, int64_t* counts,
                                               double* weighted_counts, const knn_options* opt) {
  static const char* const call = "knn_index_count_neighbors";
  return knn::guarded(call, [&] {
    knn::count_neighbors(call, index, queries, m, radii, n_radii, query_weights, point_weights,
                         counts, weighted_counts, opt);
  });
}

KNN_API int KNN_CALL knn_index_count_neighbors_f64(const knn_index* index, const double* queries,
                                                   int64_t m, const double* radii, int64_t n_radii,
                                                   const double* query_weights,
                                                   const double* point_weights, int64_t* counts,
                                                   double* weighted_counts,
                                                   const knn_options* opt) {
  static const char* const call = "knn_index_count_neighbors_f64";
  return knn::guarded(call, [&] {
    knn::count_neighbors(call, index, queries, m, radii, n_radii, query_weights, point_weights,
                         counts, weighted_counts, opt);
  });
}

}  // extern "C"
