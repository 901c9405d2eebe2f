// mesh_io.cpp - see mesh_io.h.
#include "mesh_io.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "io_util.h"
#include "ply_format.h"

namespace knn_cli {
namespace {

using io::fail;
using io::finite_coordinate;

// The most triangles an STL file may have: welding numbers their corners
// (3 each) in int32.
constexpr int64_t kMaxStlTriangles = INT32_MAX / 3;

// A double as a message shows it (a face index read from a file may be
// anything: -1, 1.5, 1e30).
std::string number_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

bool iequals(const std::string& a, const char* b) {
  const size_t n = std::strlen(b);
  if (a.size() != n) return false;
  for (size_t i = 0; i < n; ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != b[i]) return false;
  return true;
}

// Fields separated by spaces and tabs (STL and OBJ: commas are not
// separators there).
void split_words(const std::string& line, std::vector<std::string>* out) {
  out->clear();
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    const size_t start = i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i > start) out->push_back(line.substr(start, i - start));
  }
}

void require_triangles(const std::string& path, const TriangleMesh& mesh, const char* what) {
  if (mesh.triangles.empty()) fail(path, std::string(what) + ": no triangles to measure against");
}

void check_vertex_count(const std::string& path, int64_t vertices, const std::string& where) {
  if (vertices > INT32_MAX)
    fail(path, where + ": more than 2^31 - 1 vertices (a mesh's vertex indices are int32)");
}

// Polygons of n >= 3 vertices as the fan (v0, v1, v2), (v0, v2, v3), ...
void add_fan(TriangleMesh* mesh, const int32_t* v, size_t n) {
  for (size_t i = 1; i + 1 < n; ++i) {
    mesh->triangles.push_back(v[0]);
    mesh->triangles.push_back(v[i]);
    mesh->triangles.push_back(v[i + 1]);
  }
}

void note_fans(const std::string& path, int64_t polygons, int64_t triangles, TriangleMesh* mesh) {
  if (polygons > 0)
    mesh->notice = path + ": " + std::to_string(polygons) +
                   " faces of more than 3 vertices fan-triangulated (" + std::to_string(triangles) +
                   " triangles in all)";
}

// ---- STL -------------------------------------------------------------------------------

// Corners welded into vertices: identical coordinates (as read, -0 = +0)
// get one index, numbered in order of first appearance. An open-addressing
// table of vertex ids, at most half full.
class Welder {
 public:
  explicit Welder(TriangleMesh* mesh) : mesh_(mesh), slots_(1024, -1) {}

  int32_t add(const double p[3]) {
    // -0 + 0 is +0: the two zeros weld (and hash) as one.
    const double key[3] = {p[0] + 0.0, p[1] + 0.0, p[2] + 0.0};
    size_t i = hash(key) & (slots_.size() - 1);
    for (;; i = (i + 1) & (slots_.size() - 1)) {
      const int32_t id = slots_[i];
      if (id < 0) break;
      const double* v = &mesh_->vertices[static_cast<size_t>(id) * 3];
      if (v[0] == key[0] && v[1] == key[1] && v[2] == key[2]) return id;
    }
    const int32_t id = static_cast<int32_t>(mesh_->vertex_count());
    mesh_->vertices.insert(mesh_->vertices.end(), key, key + 3);
    slots_[i] = id;
    if (static_cast<size_t>(id + 1) * 2 > slots_.size()) grow();
    return id;
  }

 private:
  static uint64_t mix(uint64_t x) {  // splitmix64's finaliser
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }
  static size_t hash(const double key[3]) {
    uint64_t h = 0;
    for (int d = 0; d < 3; ++d) {
      uint64_t bits;
      std::memcpy(&bits, &key[d], sizeof bits);
      h = mix(h ^ bits);
    }
    return static_cast<size_t>(h);
  }
  void grow() {
    std::vector<int32_t> old(slots_.size() * 2, -1);
    old.swap(slots_);
    const size_t mask = slots_.size() - 1;
    for (const int32_t id : old) {
      if (id < 0) continue;
      size_t i = hash(&mesh_->vertices[static_cast<size_t>(id) * 3]) & mask;
      while (slots_[i] >= 0) i = (i + 1) & mask;
      slots_[i] = id;
    }
  }

  TriangleMesh* mesh_;
  std::vector<int32_t> slots_;
};

float load_le_float(const unsigned char* p) {
  unsigned char b[4];
  std::memcpy(b, p, 4);
  if (!io::host_is_little_endian()) std::reverse(b, b + 4);
  float f;
  std::memcpy(&f, b, 4);
  return f;
}

uint32_t load_le_u32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

constexpr size_t kStlHeader = 84, kStlRecord = 50;

TriangleMesh parse_binary_stl(const std::string& path, const std::string& data,
                              Precision precision) {
  const unsigned char* base = reinterpret_cast<const unsigned char*>(data.data());
  const uint64_t n = load_le_u32(base + 80);
  if (static_cast<int64_t>(n) > kMaxStlTriangles)
    fail(path, "binary STL of " + std::to_string(n) + " triangles: more than the " +
                   std::to_string(kMaxStlTriangles) + " whose corners int32 indices can number");
  TriangleMesh mesh;
  mesh.doubles = io::reads_doubles(precision, false);
  mesh.triangles.reserve(static_cast<size_t>(n) * 3);
  Welder welder(&mesh);
  static const char* const axes[3] = {"x", "y", "z"};
  for (uint64_t t = 0; t < n; ++t) {
    const size_t record = kStlHeader + static_cast<size_t>(t) * kStlRecord;
    for (int c = 0; c < 3; ++c) {
      double p[3];
      for (int d = 0; d < 3; ++d) {
        // The normal takes the record's first 12 bytes.
        const size_t at = record + 12 + static_cast<size_t>(c * 3 + d) * 4;
        p[d] = finite_coordinate(path, load_le_float(base + at), mesh.doubles, [&] {
          return "binary STL triangle " + std::to_string(t) + " (byte offset " +
                 std::to_string(record) + "): " + axes[d] + " of corner " + std::to_string(c);
        });
      }
      mesh.triangles.push_back(welder.add(p));
    }
  }
  require_triangles(path, mesh, "binary STL of 0 triangles");
  return mesh;
}

// Whitespace-separated words of a text file with their line numbers.
class Words {
 public:
  Words(const std::string& path, const std::string& data) : lines_(path, data, 0, "an STL") {}
  // The next word; false at the end of the file.
  bool next(std::string* word) {
    while (at_ >= words_.size()) {
      if (!lines_.next(&line_)) return false;
      split_words(line_, &words_);
      at_ = 0;
    }
    *word = words_[at_++];
    return true;
  }
  void skip_rest_of_line() { at_ = words_.size(); }
  int64_t line() const { return lines_.line_no(); }

 private:
  io::LineReader lines_;
  std::string line_;
  std::vector<std::string> words_;
  size_t at_ = 0;
};

class AsciiStlParser {
 public:
  AsciiStlParser(const std::string& path, const std::string& data, Precision precision)
      : path_(path), words_(path, data) {
    mesh_.doubles = io::reads_doubles(precision, true);  // decimal text: doubles
  }

  TriangleMesh parse() {
    Welder welder(&mesh_);
    std::string w;
    if (!words_.next(&w) || !iequals(w, "solid")) fail(path_, "not an STL file (no 'solid')");
    words_.skip_rest_of_line();  // the solid's name
    int64_t facet = 0;
    for (;;) {
      if (!words_.next(&w)) fail(path_, "the file ends inside a solid (expected 'endsolid')");
      if (iequals(w, "endsolid")) {
        words_.skip_rest_of_line();
        if (!words_.next(&w)) break;
        if (!iequals(w, "solid"))
          fail(path_, "line " + std::to_string(words_.line()) +
                          ": expected 'solid' or the end of the file after 'endsolid', found '" +
                          excerpt(w) + "'");
        words_.skip_rest_of_line();
        continue;
      }
      if (!iequals(w, "facet"))
        fail(path_, "line " + std::to_string(words_.line()) +
                        ": expected 'facet' or 'endsolid', found '" + excerpt(w) + "'");
      if (facet >= kMaxStlTriangles)
        fail(path_, "line " + std::to_string(words_.line()) + ": more than " +
                        std::to_string(kMaxStlTriangles) +
                        " facets, the most whose corners int32 indices can number");
      const std::string in = "in facet " + std::to_string(facet);
      expect("normal", in);
      for (int d = 0; d < 3; ++d) number("a number (normal component) " + in);
      expect("outer", in);
      expect("loop", in);
      for (int c = 0; c < 3; ++c) {
        expect("vertex", in + " (a facet has 3 vertices)");
        double p[3];
        for (int d = 0; d < 3; ++d) {
          static const char* const axes[3] = {"x", "y", "z"};
          const std::string what =
              std::string(axes[d]) + " of vertex " + std::to_string(c) + " " + in;
          const double v = number("a number (" + what + ")");
          p[d] = finite_coordinate(path_, v, mesh_.doubles, [&] {
            return "line " + std::to_string(words_.line()) + ": " + what;
          });
        }
        mesh_.triangles.push_back(welder.add(p));
      }
      expect("endloop", in + " (a facet has 3 vertices)");
      expect("endfacet", in);
      ++facet;
    }
    require_triangles(path_, mesh_, "ASCII STL without a facet");
    return std::move(mesh_);
  }

 private:
  void expect(const char* keyword, const std::string& context) {
    std::string w;
    if (!words_.next(&w)) fail(path_, "the file ends " + context + " (expected '" + keyword + "')");
    if (!iequals(w, keyword))
      fail(path_, "line " + std::to_string(words_.line()) + ": expected '" + keyword + "' " +
                      context + ", found '" + excerpt(w) + "'");
  }
  double number(const std::string& what) {
    std::string w;
    if (!words_.next(&w)) fail(path_, "the file ends where " + what + " was expected");
    double v;
    if (!io::parse_double(w, &v))
      fail(path_, "line " + std::to_string(words_.line()) + ": expected " + what + ", found '" +
                      excerpt(w) + "'");
    return v;
  }

  const std::string& path_;
  Words words_;
  TriangleMesh mesh_;
};

// Control bytes that text does not hold (binary counts and floats do).
bool holds_binary_bytes(const std::string& data) {
  for (const char ch : data) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && !std::isspace(c)) || c == 0x7f) return true;
  }
  return false;
}

bool begins_with_solid(const std::string& data) {
  size_t i = 0;
  while (i < data.size() && std::isspace(static_cast<unsigned char>(data[i]))) ++i;
  return data.size() - i >= 5 && iequals(data.substr(i, 5), "solid");
}

// ---- PLY -------------------------------------------------------------------------------

// Vertices and faces, row by row (ply::walk's visitor).
struct PlyMeshVisitor {
  const std::string& path;
  const ply::Header& h;
  size_t vertex_element, face_element, face_list;
  int col[3];
  TriangleMesh& mesh;
  double v[3] = {0, 0, 0};
  std::vector<int32_t> polygon = {};
  int64_t polygons = 0;  // faces of more than 3 vertices

  void scalar(const ply::Row& row, size_t p, double d) {
    if (row.element != vertex_element) return;
    for (int k = 0; k < 3; ++k)
      if (static_cast<int>(p) == col[k]) v[k] = d;
  }
  bool wants_list(size_t e, size_t p) const { return e == face_element && p == face_list; }
  void list(const ply::Row& row, size_t, const std::vector<double>& values) {
    const int64_t n_vertices = h.elements[vertex_element].count;
    auto where = [&] { return ply::describe(h, row) + ": face " + std::to_string(row.index); };
    if (values.size() < 3)
      fail(path,
           where() + " has " + std::to_string(values.size()) + " vertices (a face has at least 3)");
    polygon.clear();
    for (const double x : values) {
      if (!(x >= 0 && x < static_cast<double>(n_vertices) && x == std::floor(x)))
        fail(path, where() + " has the vertex index " + number_text(x) + " (the file has " +
                       std::to_string(n_vertices) + " vertices: indices 0 to " +
                       std::to_string(n_vertices - 1) + ")");
      polygon.push_back(static_cast<int32_t>(x));
    }
    if (values.size() > 3) ++polygons;
    add_fan(&mesh, polygon.data(), polygon.size());
  }
  void row_end(const ply::Row& row) {
    if (row.element != vertex_element) return;
    static const char* const names[3] = {"x", "y", "z"};
    for (int d = 0; d < 3; ++d)
      mesh.vertices.push_back(finite_coordinate(path, v[d], mesh.doubles, [&] {
        return ply::describe(h, row) + ": " + names[d] + " of vertex " + std::to_string(row.index);
      }));
  }
};

// ---- OBJ -------------------------------------------------------------------------------

// An integer that is all of s (strtoll's syntax), within int64.
bool parse_int64(const std::string& s, int64_t* v) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(s.c_str(), &end, 10);
  if (end != s.c_str() + s.size() || errno == ERANGE) return false;
  *v = x;
  return true;
}

}  // namespace

std::vector<float> TriangleMesh::float_vertices() const {
  return std::vector<float>(vertices.begin(), vertices.end());
}

TriangleMesh read_mesh(const std::string& path, Precision precision) {
  const std::string ext = extension_of(path);
  if (ext == ".stl") return parse_stl_mesh(path, read_file_bytes(path), precision);
  if (ext == ".ply") return parse_ply_mesh(path, read_file_bytes(path), precision);
  if (ext == ".obj") return parse_obj_mesh(path, read_file_bytes(path), precision);
  fail(path, "unknown mesh file type '" + ext + "' (expected .stl .ply .obj)");
}

TriangleMesh parse_stl_mesh(const std::string& path, const std::string& data, Precision precision) {
  // Binary when the size is what the header's count says: a binary file's
  // 80-byte header may well begin with "solid", while an ASCII file's bytes
  // 80..83 are text, a count of at least 0x09090909 triangles (7.5 GB).
  const bool has_header = data.size() >= kStlHeader;
  const uint64_t count =
      has_header ? load_le_u32(reinterpret_cast<const unsigned char*>(data.data()) + 80) : 0;
  const uint64_t binary_size = kStlHeader + count * kStlRecord;
  if (has_header && binary_size == data.size()) return parse_binary_stl(path, data, precision);
  const std::string as_binary = "its header's count, " + std::to_string(count) +
                                " triangles, would take 84 + 50 x " + std::to_string(count) +
                                " = " + std::to_string(binary_size) + " bytes, the file has " +
                                std::to_string(data.size());
  if (begins_with_solid(data)) {
    try {
      return AsciiStlParser(path, data, precision).parse();
    } catch (const std::runtime_error& e) {
      if (!has_header || !holds_binary_bytes(data)) throw;
      // A binary file whose header begins with "solid" and whose size is
      // off (truncated, or with bytes after the triangles) fails as ASCII:
      // say what it would be as binary too.
      throw std::runtime_error(std::string(e.what()) +
                               " (read as ASCII STL, as it begins with 'solid'; as binary STL " +
                               as_binary + ")");
    }
  }
  if (!has_header)
    fail(path, "not an STL file: " + std::to_string(data.size()) +
                   " bytes, shorter than a binary STL's 84-byte header, and no 'solid' (ASCII "
                   "STL) at the start");
  fail(path, "binary STL of the wrong size: " + as_binary +
                 " (and it does not begin with 'solid', as ASCII STL does)");
}

TriangleMesh parse_ply_mesh(const std::string& path, const std::string& data, Precision precision) {
  const ply::Header h = ply::parse_header(path, data);
  const size_t vi = h.find("vertex"), fi = h.find("face");
  if (vi == h.elements.size()) fail(path, "PLY file has no vertex element");
  if (fi == h.elements.size())
    fail(path,
         "PLY file has no face element: points, not a mesh (expected 'element face N' "
         "with a list 'vertex_indices')");
  const ply::Element& ve = h.elements[vi];
  const ply::Element& fe = h.elements[fi];
  int col[3] = {-1, -1, -1};
  static const char* const names[3] = {"x", "y", "z"};
  bool double_property = false;
  for (int d = 0; d < 3; ++d) {
    const size_t p = ve.find(names[d]);
    if (p == ve.props.size())
      fail(path, std::string("PLY vertex element has no '") + names[d] + "' property");
    if (ve.props[p].is_list)
      fail(path, std::string("PLY vertex property ") + names[d] + " is a list");
    col[d] = static_cast<int>(p);
    double_property |= ve.props[p].type == ply::Type::F64;
  }
  size_t list = fe.find("vertex_indices");
  if (list == fe.props.size()) list = fe.find("vertex_index");
  if (list == fe.props.size())
    fail(path, "PLY face element has no 'vertex_indices' (or 'vertex_index') property");
  if (!fe.props[list].is_list || !ply::is_integer(fe.props[list].type))
    fail(path, "PLY face property '" + fe.props[list].name +
                   "' is not a list of integers (expected e.g. 'property list uchar int "
                   "vertex_indices')");
  check_vertex_count(path, ve.count, "PLY vertex element of " + std::to_string(ve.count));

  TriangleMesh mesh;
  mesh.doubles = io::reads_doubles(precision, double_property);
  // A vertex takes at least 3 bytes and a face at least 4 (binary; more in
  // text), so the file size bounds the reservations.
  const int64_t size = static_cast<int64_t>(data.size());
  mesh.vertices.reserve(static_cast<size_t>(std::min(ve.count, size / 3)) * 3);
  mesh.triangles.reserve(static_cast<size_t>(std::min(fe.count, size / 4)) * 3);
  PlyMeshVisitor visitor{path, h, vi, fi, list, {col[0], col[1], col[2]}, mesh};
  ply::walk(path, data, h, visitor);
  note_fans(path, visitor.polygons, mesh.triangle_count(), &mesh);
  require_triangles(path, mesh, "PLY file of 0 faces");
  return mesh;
}

TriangleMesh parse_obj_mesh(const std::string& path, const std::string& data, Precision precision) {
  TriangleMesh mesh;
  mesh.doubles = io::reads_doubles(precision, true);  // decimal text: doubles
  io::LineReader lines(path, data, 0, "an OBJ");
  std::string line;
  std::vector<std::string> words;
  std::vector<int32_t> polygon = {};
  int64_t polygons = 0;
  // The largest positive index beyond the vertices read so far, and its
  // line: OBJ allows it if the vertex comes later in the file.
  int64_t forward = 0, forward_line = 0;
  static const char* const axes[3] = {"x", "y", "z"};
  while (lines.next(&line)) {
    split_words(line, &words);
    if (words.empty() || words[0][0] == '#') continue;
    const std::string at = "line " + std::to_string(lines.line_no());
    const int64_t n = mesh.vertex_count();
    if (words[0] == "v") {
      const size_t values = words.size() - 1;
      if (values != 3 && values != 4 && values != 6 && values != 7)
        fail(path, at + ": expected 'v x y z [w]' or 'v x y z r g b [a]', found " +
                       std::to_string(values) + " values");
      check_vertex_count(path, n + 1, at);
      for (size_t i = 1; i <= values; ++i) {
        double x;
        if (!io::parse_double(words[i], &x))
          fail(path, at + ": not a number '" + excerpt(words[i]) + "' in a 'v' line");
        if (i <= 3)
          mesh.vertices.push_back(finite_coordinate(path, x, mesh.doubles, [&] {
            return at + ": " + axes[i - 1] + " of vertex " + std::to_string(n + 1) +
                   " (OBJ numbering)";
          }));
      }
    } else if (words[0] == "f") {
      if (words.size() < 4)
        fail(path, at + ": a face of " + std::to_string(words.size() - 1) +
                       " vertices (a face has at least 3)");
      polygon.clear();
      for (size_t i = 1; i < words.size(); ++i) {
        // v, v/vt, v//vn or v/vt/vn: integers, vt empty only before vn.
        const std::string& entry = words[i];
        const size_t s1 = entry.find('/');
        const size_t s2 = s1 == std::string::npos ? s1 : entry.find('/', s1 + 1);
        int64_t index = 0, other = 0;
        bool ok = parse_int64(entry.substr(0, s1), &index) &&
                  (s2 == std::string::npos || entry.find('/', s2 + 1) == std::string::npos);
        if (ok && s1 != std::string::npos) {
          const std::string vt = entry.substr(s1 + 1, s2 == std::string::npos ? s2 : s2 - s1 - 1);
          ok = s2 == std::string::npos ? parse_int64(vt, &other)
                                       : (vt.empty() || parse_int64(vt, &other)) &&
                                             parse_int64(entry.substr(s2 + 1), &other);
        }
        if (!ok)
          fail(path, at + ": face entry '" + excerpt(entry) +
                         "' is not v, v/vt, v//vn or v/vt/vn (integers)");
        if (index == 0) fail(path, at + ": vertex index 0 (OBJ counts from 1)");
        if (index < 0) {
          if (index < -n)
            fail(path, at + ": relative vertex index " + std::to_string(index) + ", but only " +
                           std::to_string(n) + " vertices precede it");
          index += n;  // -1: the last vertex so far
        } else {
          if (index > INT32_MAX)
            fail(path, at + ": vertex index " + std::to_string(index) +
                           " (a mesh has at most 2^31 - 1 vertices)");
          if (index > n && index > forward) {
            forward = index;
            forward_line = lines.line_no();
          }
          index -= 1;
        }
        polygon.push_back(static_cast<int32_t>(index));
      }
      if (polygon.size() > 3) ++polygons;
      add_fan(&mesh, polygon.data(), polygon.size());
    }
  }
  if (forward > mesh.vertex_count())
    fail(path, "line " + std::to_string(forward_line) + ": vertex index " +
                   std::to_string(forward) + ", but the file has " +
                   std::to_string(mesh.vertex_count()) + " vertices");
  note_fans(path, polygons, mesh.triangle_count(), &mesh);
  require_triangles(path, mesh, "OBJ file without an 'f' line");
  return mesh;
}

// ---- Writers ---------------------------------------------------------------------------
namespace {

// A coordinate that reads back as itself: 9 significant digits for a
// float32 value, 17 for a double.
std::string coordinate_text(double v, bool doubles) {
  char buf[40];
  std::snprintf(buf, sizeof buf, doubles ? "%.17g" : "%.9g", v);
  return buf;
}

template <class T>
void append_value(std::string* s, T v, bool big_endian) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  if (big_endian == io::host_is_little_endian()) std::reverse(b, b + sizeof(T));
  s->append(b, sizeof(T));
}

// The unit normal of a triangle by the right-hand rule, 0 without area.
void unit_normal(const double* a, const double* b, const double* c, double n[3]) {
  const double u[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
  const double v[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
  n[0] = u[1] * v[2] - u[2] * v[1];
  n[1] = u[2] * v[0] - u[0] * v[2];
  n[2] = u[0] * v[1] - u[1] * v[0];
  const double len = std::sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
  for (int d = 0; d < 3; ++d) n[d] = len > 0 && std::isfinite(len) ? n[d] / len : 0.0;
}

std::string stl_bytes(const TriangleMesh& mesh, bool binary) {
  const int64_t t_count = mesh.triangle_count();
  std::string s;
  if (binary) {
    std::string header = "binary STL written by knn-gpgpu";
    header.resize(80, ' ');
    s = header;
    append_value(&s, static_cast<uint32_t>(t_count), false);
  } else {
    s = "solid knn-gpgpu\n";
  }
  for (int64_t t = 0; t < t_count; ++t) {
    const double* corner[3];
    for (int c = 0; c < 3; ++c)
      corner[c] = &mesh.vertices[static_cast<size_t>(mesh.triangles[t * 3 + c]) * 3];
    double n[3];
    unit_normal(corner[0], corner[1], corner[2], n);
    if (binary) {
      for (const double x : n) append_value(&s, static_cast<float>(x), false);
      for (const double* p : corner)
        for (int d = 0; d < 3; ++d) append_value(&s, static_cast<float>(p[d]), false);
      append_value(&s, uint16_t{0}, false);
      continue;
    }
    s += "facet normal " + coordinate_text(n[0], false) + " " + coordinate_text(n[1], false) + " " +
         coordinate_text(n[2], false) + "\n  outer loop\n";
    for (const double* p : corner)
      s += "    vertex " + coordinate_text(p[0], mesh.doubles) + " " +
           coordinate_text(p[1], mesh.doubles) + " " + coordinate_text(p[2], mesh.doubles) + "\n";
    s += "  endloop\nendfacet\n";
  }
  if (!binary) s += "endsolid knn-gpgpu\n";
  return s;
}

std::string ply_bytes(const TriangleMesh& mesh, MeshFormat format) {
  const bool ascii = format == MeshFormat::PlyAscii;
  const bool big = format == MeshFormat::PlyBinaryBigEndian;
  const char* type = mesh.doubles ? "double" : "float";
  std::string s = std::string("ply\nformat ") +
                  (ascii ? "ascii"
                   : big ? "binary_big_endian"
                         : "binary_little_endian") +
                  " 1.0\ncomment written by knn-gpgpu\nelement vertex " +
                  std::to_string(mesh.vertex_count()) + "\nproperty " + type + " x\nproperty " +
                  type + " y\nproperty " + type + " z\nelement face " +
                  std::to_string(mesh.triangle_count()) +
                  "\nproperty list uchar int vertex_indices\nend_header\n";
  for (int64_t v = 0; v < mesh.vertex_count(); ++v) {
    const double* p = &mesh.vertices[static_cast<size_t>(v) * 3];
    if (ascii) {
      s += coordinate_text(p[0], mesh.doubles) + " " + coordinate_text(p[1], mesh.doubles) + " " +
           coordinate_text(p[2], mesh.doubles) + "\n";
    } else {
      for (int d = 0; d < 3; ++d) {
        if (mesh.doubles) {
          append_value(&s, p[d], big);
        } else {
          append_value(&s, static_cast<float>(p[d]), big);
        }
      }
    }
  }
  for (int64_t t = 0; t < mesh.triangle_count(); ++t) {
    const int32_t* tri = &mesh.triangles[static_cast<size_t>(t) * 3];
    if (ascii) {
      s += "3 " + std::to_string(tri[0]) + " " + std::to_string(tri[1]) + " " +
           std::to_string(tri[2]) + "\n";
    } else {
      append_value(&s, uint8_t{3}, big);
      for (int c = 0; c < 3; ++c) append_value(&s, tri[c], big);
    }
  }
  return s;
}

std::string obj_bytes(const TriangleMesh& mesh) {
  std::string s = "# written by knn-gpgpu\n";
  for (int64_t v = 0; v < mesh.vertex_count(); ++v) {
    const double* p = &mesh.vertices[static_cast<size_t>(v) * 3];
    s += "v " + coordinate_text(p[0], mesh.doubles) + " " + coordinate_text(p[1], mesh.doubles) +
         " " + coordinate_text(p[2], mesh.doubles) + "\n";
  }
  for (int64_t t = 0; t < mesh.triangle_count(); ++t) {
    const int32_t* tri = &mesh.triangles[static_cast<size_t>(t) * 3];
    s += "f " + std::to_string(int64_t{tri[0]} + 1) + " " + std::to_string(int64_t{tri[1]} + 1) +
         " " + std::to_string(int64_t{tri[2]} + 1) + "\n";
  }
  return s;
}

}  // namespace

std::string mesh_file_bytes(const TriangleMesh& mesh, MeshFormat format) {
  switch (format) {
    case MeshFormat::StlBinary: return stl_bytes(mesh, true);
    case MeshFormat::StlAscii: return stl_bytes(mesh, false);
    case MeshFormat::PlyAscii:
    case MeshFormat::PlyBinaryLittleEndian:
    case MeshFormat::PlyBinaryBigEndian: return ply_bytes(mesh, format);
    case MeshFormat::Obj: return obj_bytes(mesh);
  }
  return "";
}

}  // namespace knn_cli
