// Fuzz target: the knn-gpgpu tool's GeoJSON reader (tools/geojson.h) on
// arbitrary bytes, with a dictionary of GeoJSON's words (fuzz/fuzz_geojson.dict)
// and seeds that nest. It must return a layer whose arrays are consistent
// (offsets start at 0, never decrease, end at the array sizes; one id per
// feature; finite vertices; every ring with at least 3 distinct vertices) or
// throw std::runtime_error with a one-line message naming the file; nothing
// else (no crash, no stack overflow however deep the nesting, no other
// exception).
#include <cmath>
#include <stdexcept>
#include <string>

#include "../tools/geojson.h"
#include "fuzz_support.h"

namespace {

using knn_fuzz::expect;

void expect_offsets(const std::vector<int64_t>& offsets, int64_t end, const char* what) {
  expect(!offsets.empty() && offsets.front() == 0 && offsets.back() == end, what, 0);
  for (size_t i = 1; i < offsets.size(); ++i) expect(offsets[i - 1] <= offsets[i], what, 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const bool by_property = size > 0 && data[0] % 2 == 0;
  try {
    const knn_cli::PolygonLayer L =
        knn_cli::parse_geojson("fuzz.geojson", bytes, by_property ? "name" : "");
    expect(L.vertices.size() % 2 == 0, "an odd number of vertex coordinates", 0);
    for (double v : L.vertices) expect(std::isfinite(v), "a vertex that is not finite", 0);
    expect_offsets(L.ring_offsets, static_cast<int64_t>(L.vertices.size() / 2), "bad ring offsets");
    expect_offsets(L.polygon_offsets, L.rings(), "bad polygon offsets");
    expect_offsets(L.feature_offsets, L.polygons(), "bad feature offsets");
    for (size_t p = 1; p < L.polygon_offsets.size(); ++p)
      expect(L.polygon_offsets[p - 1] < L.polygon_offsets[p], "a polygon without rings", 0);
    expect(static_cast<int64_t>(L.ids.size()) == L.features(), "not one id per feature", 0);
    for (int64_t r = 0; r < L.rings(); ++r)
      expect(L.ring_offsets[r + 1] - L.ring_offsets[r] >= 3, "a ring of fewer than 3 vertices", 0);
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    expect(what.rfind("fuzz.geojson: ", 0) == 0, "a message that does not name the file", 0);
    expect(what.find('\n') == std::string::npos, "a message of more than one line", 0);
  }
  return 0;
}
