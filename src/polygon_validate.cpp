#include "polygon_validate.h"

#include <cstddef>
#include <cstdint>

#include "../common/error.h"
#include "../common/first_index.h"
#include "../common/float_math.h"
#include "../common/pip_predicate.h"
#include "validate.h"

namespace knn {
namespace {

long long ll(int64_t v) { return static_cast<long long>(v); }

// offsets[0] == 0, offsets[i] <= offsets[i+1] (or < when strictly), and
// offsets[count] == last when last >= 0.
void check_offsets(const int64_t* offsets, int64_t count, const char* name, bool strictly,
                   const char* element, int threads) {
  if (offsets[0] != 0)
    fail(KNN_ERR_INVALID_ARGUMENT, format("%s[0] is %lld; it must be 0", name, ll(offsets[0])));
  const int64_t bad = first_index_where(count, threads, [offsets, strictly](int64_t i) {
    return strictly ? offsets[i + 1] <= offsets[i] : offsets[i + 1] < offsets[i];
  });
  if (bad == count) return;
  if (strictly && offsets[bad + 1] == offsets[bad])
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("%s %lld has no ring (%s[%lld] == %s[%lld] == %lld)", element, ll(bad), name,
                ll(bad), name, ll(bad + 1), ll(offsets[bad])));
  fail(KNN_ERR_INVALID_ARGUMENT,
       format("%s decreases at %s %lld: %s[%lld] = %lld > %s[%lld] = %lld", name, element, ll(bad),
              name, ll(bad), ll(offsets[bad]), name, ll(bad + 1), ll(offsets[bad + 1])));
}

template <class V>
bool same_vertex(const V* xy, int64_t a, int64_t b) {
  return xy[2 * a] == xy[2 * b] && xy[2 * a + 1] == xy[2 * b + 1];
}

// Vertices of ring [begin, end) once consecutive repeats, the closing one
// included, are dropped; stops counting at 3 (all the check needs).
template <class V>
int64_t distinct_run_count(const V* xy, int64_t begin, int64_t end) {
  int64_t count = 0;
  for (int64_t v = begin; v < end && count < 3; ++v) {
    const int64_t previous = v == begin ? end - 1 : v - 1;
    if (!same_vertex(xy, v, previous)) ++count;
  }
  return count;
}

}  // namespace

void check_pip_coordinates(const float* xy, int64_t n, const char* what, int threads) {
  check_finite(xy, n, 2, what, threads);
}

void check_pip_coordinates(const double* xy, int64_t n, const char* what, int threads) {
  const int64_t row = first_index_where(n, threads, [xy](int64_t i) {
    return !pip::in_exact_range(xy[2 * i]) || !pip::in_exact_range(xy[2 * i + 1]);
  });
  if (row == n) return;
  for (int d = 0; d < 2; ++d) {
    const double v = xy[2 * row + d];
    // As the float check words it (validate.cpp: fail_coordinate).
    if (!is_finite_float(v))
      fail(KNN_ERR_NONFINITE_INPUT, format("%s %lld has a%s coordinate (dimension %d)", what,
                                           ll(row), v != v ? " NaN" : "n infinite", d));
    if (!pip::in_exact_range(v))
      fail(KNN_ERR_INVALID_ARGUMENT,
           format("%s %lld has coordinate %.17g (dimension %d); float64 point-in-polygon "
                  "coordinates must be 0 or of magnitude within [2^-485, 2^500] (about "
                  "1.0e-146 .. 3.3e150), where the orientation test is exact",
                  what, ll(row), v, d));
  }
}

template <class V>
PolygonSet<V> validate_polygons(const V* vertices_xy, const int64_t* ring_offsets, int64_t n_rings,
                                const int64_t* polygon_offsets, int64_t n_polygons, int threads) {
  check_array(polygon_offsets, n_polygons, "polygon_offsets", "n_polygons");
  check_array(ring_offsets, n_rings, "ring_offsets", "n_rings");
  check_offsets_size(n_polygons, "polygon_offsets", "n_polygons");
  check_offsets_size(n_rings, "ring_offsets", "n_rings");
  PolygonSet<V> set;
  set.n_polygons = n_polygons;
  set.n_rings = n_rings;
  set.polygon_offsets = polygon_offsets;
  set.ring_offsets = ring_offsets;
  set.xy = vertices_xy;
  if (n_polygons > 0) {
    check_offsets(polygon_offsets, n_polygons, "polygon_offsets", true, "polygon", threads);
    if (polygon_offsets[n_polygons] != n_rings)
      fail(KNN_ERR_INVALID_ARGUMENT,
           format("polygon_offsets[n_polygons = %lld] is %lld; it must equal n_rings = %lld",
                  ll(n_polygons), ll(polygon_offsets[n_polygons]), ll(n_rings)));
  } else if (n_rings > 0) {
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("n_rings is %lld but n_polygons is 0: every ring must belong to a polygon",
                ll(n_rings)));
  }
  if (n_rings == 0) return set;
  check_offsets(ring_offsets, n_rings, "ring_offsets", false, "ring", threads);
  // Beyond this no vertex array exists, and the checks and engines below
  // would form addresses (2 * vertex) past the address space.
  constexpr int64_t kMaxVertices = PTRDIFF_MAX / (2 * static_cast<int64_t>(sizeof(V)));
  if (ring_offsets[n_rings] > kMaxVertices) {
    const int64_t huge = first_index_where(
        n_rings + 1, threads, [ring_offsets](int64_t i) { return ring_offsets[i] > kMaxVertices; });
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("ring_offsets[%lld] is %lld; at most %lld vertices of two %s fit the address "
                "space",
                ll(huge), ll(ring_offsets[huge]), ll(kMaxVertices),
                sizeof(V) == sizeof(float) ? "floats" : "doubles"));
  }
  set.n_vertices = ring_offsets[n_rings];
  if (vertices_xy == nullptr)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("vertices_xy is NULL while ring_offsets[n_rings] = %lld", ll(set.n_vertices)));
  check_pip_coordinates(vertices_xy, set.n_vertices, "vertex", threads);
  const int64_t short_ring = first_index_where(n_rings, threads, [&](int64_t r) {
    return distinct_run_count(vertices_xy, ring_offsets[r], ring_offsets[r + 1]) < 3;
  });
  if (short_ring < n_rings)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("ring %lld (vertices %lld..%lld) has fewer than 3 vertices once repeated "
                "consecutive vertices are dropped",
                ll(short_ring), ll(ring_offsets[short_ring]), ll(ring_offsets[short_ring + 1])));
  return set;
}

template PolygonSet<float> validate_polygons(const float*, const int64_t*, int64_t, const int64_t*,
                                             int64_t, int);
template PolygonSet<double> validate_polygons(const double*, const int64_t*, int64_t,
                                              const int64_t*, int64_t, int);

}  // namespace knn
