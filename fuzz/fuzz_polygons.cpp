// Fuzz target: the polygon arguments of point-in-polygon. Ring and polygon
// offsets are arbitrary int64 values (decreasing, negative, past the arrays;
// only the last ring offset, the vertex count by contract, stays within the
// vertex array),
// vertices may be NaN; every array is exactly as long as its count says, so
// a read or write past it is the library's (ASan). Checked: a listed status
// with a message; on success the counts agree with knn_points_in_polygons'
// lists, ascending and within the points. The engine answers
// KNN_ERR_UNSUPPORTED until it lands; validation is still exercised on a
// NULL tree then.
#include <algorithm>
#include <vector>

#include "fuzz_support.h"

namespace {
using knn_fuzz::check_status;
using knn_fuzz::expect;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const bool raw = in.ConsumeIntegralInRange<int>(0, 3) == 0;
  const int64_t n_points = in.ConsumeIntegralInRange<int64_t>(0, 40);
  const std::vector<float> xy = knn_fuzz::next_floats(in, static_cast<size_t>(n_points) * 2, raw);
  knn_quadtree* tree = nullptr;
  const int built = knn_quadtree_build(xy.data(), n_points, nullptr, &tree);
  check_status(built);
  if (built != KNN_OK) expect(tree == nullptr, "a failed quadtree build left *out set", built);

  const int64_t n_vertices = in.ConsumeIntegralInRange<int64_t>(0, 24);
  const std::vector<float> vertices =
      knn_fuzz::next_floats(in, static_cast<size_t>(n_vertices) * 2, raw);
  const int64_t n_rings = in.ConsumeIntegralInRange<int64_t>(-1, 6);
  const int64_t n_polygons = in.ConsumeIntegralInRange<int64_t>(-1, 4);
  // Offsets: mostly plausible (small, near the counts), sometimes anything.
  auto offset = [&](int64_t limit) {
    return in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(-1, limit + 1)
                            : in.ConsumeIntegral<int64_t>();
  };
  std::vector<int64_t> rings(static_cast<size_t>(n_rings > 0 ? n_rings + 1 : in.ConsumeBool()));
  for (int64_t& r : rings) r = offset(n_vertices);
  // ring_offsets[n_rings] is the vertex count by contract (the API takes no
  // other length for vertices_xy), so a larger one would be this harness
  // lying about its array, not an input the library can refuse.
  if (n_rings > 0) {
    int64_t& vertex_count = rings[static_cast<size_t>(n_rings)];
    vertex_count = std::min(vertex_count, n_vertices);
  }
  std::vector<int64_t> polygons(
      static_cast<size_t>(n_polygons > 0 ? n_polygons + 1 : in.ConsumeBool()));
  for (int64_t& p : polygons) p = offset(n_rings);
  const size_t n_out = static_cast<size_t>(n_polygons > 0 ? n_polygons : 0);
  std::vector<int64_t> counts(n_out, -7);
  const int status =
      knn_points_in_polygons_count(tree, vertices.data(), rings.data(), n_rings, polygons.data(),
                                   n_polygons, counts.data(), nullptr);
  check_status(status);
  if (status == KNN_OK) {
    std::vector<int64_t> out_offsets(n_out + 1, 0);
    for (size_t p = 0; p < n_out; ++p) {
      expect(counts[p] >= 0 && counts[p] <= n_points, "a count outside [0, n]", status);
      out_offsets[p + 1] = out_offsets[p] + counts[p];
    }
    std::vector<int64_t> indices(static_cast<size_t>(out_offsets[n_out]), -7);
    const int listed =
        knn_points_in_polygons(tree, vertices.data(), rings.data(), n_rings, polygons.data(),
                               n_polygons, out_offsets.data(), indices.data(), nullptr);
    check_status(listed);
    expect(listed == KNN_OK, "the lists failed where the counts succeeded", listed);
    for (size_t p = 0; p < n_out; ++p)
      for (int64_t i = out_offsets[p]; i < out_offsets[p + 1]; ++i) {
        expect(indices[i] >= 0 && indices[i] < n_points, "a point index out of range", listed);
        expect(i == out_offsets[p] || indices[i - 1] < indices[i], "a list not ascending", listed);
      }
  }
  check_status(knn_quadtree_free(tree));
  return 0;
}
