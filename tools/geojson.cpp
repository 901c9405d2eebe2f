// geojson.cpp - see geojson.h.
#include "geojson.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "point_io.h"

namespace knn_cli {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw std::runtime_error(name + ": " + what);
}

// nlohmann's messages start with "[json.exception.parse_error.101] "; the
// user needs the rest (line, column, what was expected). The rest ends with
// the token read so far ("last read: '...'"), which for an unterminated
// string is the rest of the file: cut to a line's length.
std::string parser_message(const std::string& what) {
  std::string text = what;
  if (!text.empty() && text[0] == '[') {
    const size_t end = text.find("] ");
    if (end != std::string::npos) text = text.substr(end + 2);
  }
  constexpr size_t kLongest = 200;
  if (text.size() > kLongest)
    text = text.substr(0, kLongest) + "... (" + std::to_string(text.size() - kLongest) +
           " more bytes)";
  return text;
}

// "an object", "a string", "null": for messages.
std::string type_name(const json& j) {
  const std::string t = j.type_name();
  if (t == "null") return "null";
  return (t == "object" || t == "array" ? "an " : "a ") + t;
}

std::string id_text(const json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  // dump() escapes what a string holds; parse() has checked the UTF-8.
  return v.dump();
}

// Where a message points: "feature 3 (id 'x')".
struct Where {
  const std::string& name;
  int64_t feature;
  const std::string& id;
  std::string text() const {
    std::string s = "feature " + std::to_string(feature);
    if (!id.empty()) s += " (id '" + excerpt(id) + "')";
    return s;
  }
};

// The library's count: vertices left once consecutive repeats, the closing
// one included, are dropped (src/polygon_validate.cpp does the same), so a
// ring the tool accepts is one the library accepts.
int64_t distinct_vertices(const double* xy, int64_t n) {
  int64_t count = 0;
  for (int64_t v = 0; v < n; ++v) {
    const int64_t prev = v == 0 ? n - 1 : v - 1;
    if (xy[2 * v] != xy[2 * prev] || xy[2 * v + 1] != xy[2 * prev + 1]) ++count;
  }
  return count;
}

void add_ring(PolygonLayer& L, const json& ring, const Where& w, const std::string& ring_where) {
  const std::string at = w.text() + ": " + ring_where;
  if (!ring.is_array()) fail(w.name, at + " is " + type_name(ring) + ", not an array of positions");
  const size_t first = L.vertices.size();
  int64_t index = 0;
  for (const json& pos : ring) {
    // Built only for a message: a large file has millions of positions.
    const auto pat = [&] { return at + " position " + std::to_string(index); };
    if (!pos.is_array() || pos.size() < 2) fail(w.name, pat() + " is not a position [x, y]");
    for (int d = 0; d < 2; ++d) {
      if (!pos[d].is_number())
        fail(w.name, pat() + ": coordinate " + std::to_string(d) + " is " + type_name(pos[d]) +
                         ", not a number");
      const double v = pos[d].get<double>();
      const double kept = L.doubles ? v : static_cast<double>(static_cast<float>(v));
      if (!std::isfinite(kept))
        fail(w.name, pat() + ": coordinate " + std::to_string(d) + " (" + pos[d].dump() +
                         ") is not a finite " + (L.doubles ? "float64" : "float32") + " value");
      L.vertices.push_back(kept);
    }
    ++index;
  }
  const int64_t n = index;
  const int64_t distinct = distinct_vertices(L.vertices.data() + first, n);
  if (distinct < 3)
    fail(w.name,
         at + " has " + std::to_string(n) + " position" + (n == 1 ? "" : "s") + " (" +
             std::to_string(distinct) +
             " distinct once repeats are dropped); a ring needs at least 3 distinct vertices");
  L.ring_offsets.push_back(static_cast<int64_t>(L.vertices.size() / 2));
}

// One polygon: an array of rings, outer first. An empty array adds nothing.
void add_polygon(PolygonLayer& L, const json& rings, const Where& w, const std::string& where) {
  if (!rings.is_array())
    fail(w.name, w.text() + ": " + (where.empty() ? "Polygon coordinates are" : where + " is") +
                     " " + type_name(rings) + ", not an array of rings");
  if (rings.empty()) return;
  int64_t r = 0;
  for (const json& ring : rings) {
    add_ring(L, ring, w,
             (where.empty() ? "" : where + " ") + "ring " + std::to_string(r) +
                 (r == 0 ? " (outer)" : " (hole " + std::to_string(r) + ")"));
    ++r;
  }
  L.polygon_offsets.push_back(L.rings());
}

void add_geometry(PolygonLayer& L, const json& g, const Where& w) {
  if (g.is_null()) return;  // an unlocated feature: no polygons
  if (!g.is_object()) fail(w.name, w.text() + ": geometry is " + type_name(g) + ", not an object");
  const auto t = g.find("type");
  if (t == g.end() || !t->is_string()) fail(w.name, w.text() + ": geometry has no \"type\"");
  const std::string type = t->get<std::string>();
  if (type != "Polygon" && type != "MultiPolygon")
    fail(w.name, w.text() + ": geometry type '" + excerpt(type) +
                     "' is not supported (Polygon or MultiPolygon)");
  const auto c = g.find("coordinates");
  if (c == g.end()) fail(w.name, w.text() + ": " + excerpt(type) + " has no \"coordinates\"");
  if (type == "Polygon") {
    add_polygon(L, *c, w, "");
    return;
  }
  if (!c->is_array())
    fail(w.name, w.text() + ": MultiPolygon coordinates are " + type_name(*c) +
                     ", not an array of polygons");
  int64_t p = 0;
  for (const json& poly : *c) add_polygon(L, poly, w, "polygon " + std::to_string(p++));
}

std::string feature_id(const json& f, const std::string& id_property) {
  const auto props = f.find("properties");
  const bool have_props = props != f.end() && props->is_object();
  if (!id_property.empty()) {
    if (!have_props) return "";
    const auto v = props->find(id_property);
    return v == props->end() ? "" : id_text(*v);
  }
  const auto id = f.find("id");
  if (id != f.end() && !id->is_null()) return id_text(*id);
  if (!have_props) return "";
  for (const char* key : {"id", "name"}) {
    const auto v = props->find(key);
    if (v != props->end() && !v->is_null()) return id_text(*v);
  }
  return "";
}

void add_feature(PolygonLayer& L, const json& f, int64_t index, const std::string& name,
                 const std::string& id_property) {
  std::string id;
  const Where bare{name, index, id};
  if (!f.is_object()) fail(name, bare.text() + " is " + type_name(f) + ", not an object");
  const auto t = f.find("type");
  if (t == f.end() || !t->is_string() || t->get<std::string>() != "Feature")
    fail(name, bare.text() + " is not a Feature (its \"type\" must be \"Feature\")");
  id = feature_id(f, id_property);
  const Where w{name, index, id};
  const auto g = f.find("geometry");
  if (g == f.end()) fail(name, w.text() + " has no \"geometry\" member");
  add_geometry(L, *g, w);
  L.feature_offsets.push_back(L.polygons());
  L.any_id = L.any_id || !id.empty();
  L.ids.push_back(id);
}

// GeoJSON nests 8 deep at most (the FeatureCollection, its features array, a
// Feature, its geometry, a MultiPolygon's coordinates, a polygon, a ring, a
// position); properties may nest more, but nothing real comes near this. The
// JSON library parses and copies nested values recursively, so a file of
// 100,000 '[' would overflow the stack: refused before it is parsed.
constexpr int kMaxJsonDepth = 128;

// Scans the bytes for arrays and objects nested deeper than kMaxJsonDepth,
// outside strings; malformed JSON is left to the parser's own message.
void refuse_deep_nesting(const std::string& name, const std::string& bytes) {
  int depth = 0;
  int64_t line = 1, column = 0;
  bool in_string = false, escaped = false;
  for (const char c : bytes) {
    ++column;
    if (c == '\n') {
      ++line;
      column = 0;
    }
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        fail(name, "line " + std::to_string(line) + ", column " + std::to_string(column) +
                       ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                       " levels (GeoJSON needs 8)");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

}  // namespace

PolygonLayer parse_geojson(const std::string& name, const std::string& bytes,
                           const std::string& id_property, Precision precision) {
  refuse_deep_nesting(name, bytes);
  json doc;
  try {
    doc = json::parse(bytes);
  } catch (const json::exception& e) {
    fail(name, "malformed JSON: " + parser_message(e.what()));
  }
  if (!doc.is_object())
    fail(name, "not a GeoJSON object (the top level is " + type_name(doc) + ")");
  const auto t = doc.find("type");
  if (t == doc.end() || !t->is_string()) fail(name, "not a GeoJSON object (no \"type\" member)");
  const std::string type = t->get<std::string>();
  PolygonLayer L;
  L.doubles = precision != Precision::Float32;  // decimal text: Auto reads doubles
  if (type == "FeatureCollection") {
    const auto fs = doc.find("features");
    if (fs == doc.end() || !fs->is_array())
      fail(name, "FeatureCollection has no \"features\" array");
    int64_t i = 0;
    for (const json& f : *fs) add_feature(L, f, i++, name, id_property);
  } else if (type == "Feature") {
    add_feature(L, doc, 0, name, id_property);
  } else if (type == "Polygon" || type == "MultiPolygon") {
    const std::string none;
    add_geometry(L, doc, Where{name, 0, none});
    L.feature_offsets.push_back(L.polygons());
    L.ids.emplace_back();
  } else {
    fail(name, "GeoJSON type '" + excerpt(type) +
                   "' is not supported (FeatureCollection, Feature, Polygon or MultiPolygon)");
  }
  return L;
}

PolygonLayer read_geojson(const std::string& path, const std::string& id_property,
                          Precision precision) {
  return parse_geojson(path, read_file_bytes(path), id_property, precision);
}

}  // namespace knn_cli
