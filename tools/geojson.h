// geojson.h - the polygon reader of `knn-gpgpu pip` (docs/cli.md).
//
// Reads a GeoJSON (RFC 7946) FeatureCollection, a single Feature, or a bare
// Polygon / MultiPolygon geometry (taken as one feature) into the flat
// arrays of the library's point-in-polygon API. Each feature contributes its
// polygons in order (one for a Polygon, one per part for a MultiPolygon);
// `feature_offsets` says which library polygons belong to which feature.
//
// What is refused, with a one-line message naming the file, the feature and
// the polygon / ring / position (std::runtime_error): malformed JSON (with
// nlohmann's line and column), arrays and objects nested more than 128 deep
// (with the line and column; the JSON library would recurse that deep), a geometry type other than
// Polygon and MultiPolygon, a missing geometry, coordinates that are not arrays of at least two
// numbers, a coordinate that is not finite in the precision read (float32 rounds), and
// a ring with fewer than 3 distinct vertices (the library's rule: consecutive repeats, the closing
// one included, are dropped first). Rings need not be closed and may have either orientation (the
// library accepts both). A feature whose geometry is null, or an empty Polygon / MultiPolygon, has
// no polygons: it counts 0 points. Extra position members (z, m) are ignored.
#ifndef KNN_TOOLS_GEOJSON_H
#define KNN_TOOLS_GEOJSON_H

#include <cstdint>
#include <string>
#include <vector>

#include "point_io.h"

namespace knn_cli {

struct PolygonLayer {
  std::vector<double> vertices;             // x, y per vertex; float32 values unless `doubles`
  bool doubles = false;                     // read in float64 (decimal text as it is)
  std::vector<int64_t> ring_offsets{0};     // n_rings + 1, in vertices
  std::vector<int64_t> polygon_offsets{0};  // n_polygons + 1, in rings
  std::vector<int64_t> feature_offsets{0};  // n_features + 1, in polygons
  std::vector<std::string> ids;             // per feature; "" when it has none
  bool any_id = false;                      // some feature has an id

  int64_t rings() const { return static_cast<int64_t>(ring_offsets.size()) - 1; }
  int64_t polygons() const { return static_cast<int64_t>(polygon_offsets.size()) - 1; }
  int64_t features() const { return static_cast<int64_t>(feature_offsets.size()) - 1; }
};

// id_property empty: a feature's id is its GeoJSON "id" member, else its
// "id" property, else its "name" property. Otherwise: that property only.
// Strings as they are, numbers and other values as compact JSON.
// precision: Float32 rounds every vertex to float32; Auto and Float64 keep
// the doubles the text holds.
PolygonLayer read_geojson(const std::string& path, const std::string& id_property,
                          Precision precision = Precision::Float32);
PolygonLayer parse_geojson(const std::string& name, const std::string& bytes,
                           const std::string& id_property,
                           Precision precision = Precision::Float32);

}  // namespace knn_cli

#endif
