// test_mesh_io.cpp - the tool's mesh readers (tools/mesh_io.h) on small files
// the tests write byte by byte themselves (every format and variant), every
// kind of malformed file, and the writers read back. The expected meshes
// come from the tests' own tables, not from the readers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "mesh_io.h"

namespace {

using knn_cli::MeshFormat;
using knn_cli::Precision;
using knn_cli::TriangleMesh;

// ---- The reference solid: a unit cube, 8 corners, 12 outward triangles ----------------
const double kCube[8][3] = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0},
                            {0, 0, 1}, {1, 0, 1}, {1, 1, 1}, {0, 1, 1}};
const int kCubeTris[12][3] = {{0, 2, 1}, {0, 3, 2}, {4, 5, 6}, {4, 6, 7}, {0, 1, 5}, {0, 5, 4},
                              {2, 3, 7}, {2, 7, 6}, {1, 2, 6}, {1, 6, 5}, {3, 0, 4}, {3, 4, 7}};

// Every directed edge once, and its reverse once: closed and consistently
// oriented (what the library's pseudonormal signs need).
bool closed_and_oriented(const TriangleMesh& m) {
  std::map<std::pair<int, int>, int> directed;
  for (int64_t t = 0; t < m.triangle_count(); ++t)
    for (int e = 0; e < 3; ++e)
      ++directed[{m.triangles[t * 3 + e], m.triangles[t * 3 + (e + 1) % 3]}];
  for (const auto& [edge, count] : directed) {
    if (count != 1) return false;
    const auto back = directed.find({edge.second, edge.first});
    if (back == directed.end() || back->second != 1) return false;
  }
  return !directed.empty();
}

// The coordinates of corner c of triangle t.
std::vector<double> corner(const TriangleMesh& m, int64_t t, int c) {
  const double* p = &m.vertices[static_cast<size_t>(m.triangles[t * 3 + c]) * 3];
  return {p[0], p[1], p[2]};
}

void expect_cube(const TriangleMesh& m) {
  ASSERT_EQ(m.vertex_count(), 8);
  ASSERT_EQ(m.triangle_count(), 12);
  for (int t = 0; t < 12; ++t)
    for (int c = 0; c < 3; ++c) {
      const double* want = kCube[kCubeTris[t][c]];
      EXPECT_EQ(corner(m, t, c), std::vector<double>(want, want + 3)) << t << " " << c;
    }
  EXPECT_TRUE(closed_and_oriented(m));
}

// ---- Writers of the test's own -------------------------------------------------------
template <class T>
void put(std::string* s, T v, bool big_endian = false) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // the tests run on little-endian hosts
  if (big_endian) std::reverse(b, b + sizeof(T));
  s->append(b, sizeof(T));
}

std::string binary_stl(const std::string& header80, const std::vector<std::vector<float>>& tris) {
  std::string s = header80;
  s.resize(80, ' ');
  put(&s, static_cast<uint32_t>(tris.size()));
  for (const auto& t : tris) {
    for (int i = 0; i < 3; ++i) put(&s, 0.0f);  // normal, ignored
    for (float v : t) put(&s, v);
    put(&s, uint16_t{0});
  }
  return s;
}

std::vector<std::vector<float>> cube_soup() {
  std::vector<std::vector<float>> tris;
  for (const auto& t : kCubeTris) {
    std::vector<float> v;
    for (int c = 0; c < 3; ++c)
      for (int d = 0; d < 3; ++d) v.push_back(static_cast<float>(kCube[t[c]][d]));
    tris.push_back(v);
  }
  return tris;
}

std::string ascii_stl_cube(const char* facet_kw, const char* eol) {
  std::string s = std::string("solid cube") + eol;
  for (const auto& t : kCubeTris) {
    s += std::string("  ") + facet_kw + " normal 0 0 0" + eol + "    outer loop" + eol;
    for (int c = 0; c < 3; ++c) {
      char line[128];
      std::snprintf(line, sizeof line, "      vertex %g %g %g%s", kCube[t[c]][0], kCube[t[c]][1],
                    kCube[t[c]][2], eol);
      s += line;
    }
    s += std::string("    endloop") + eol + "  endfacet" + eol;
  }
  return s + "endsolid cube" + eol;
}

// A PLY header of a vertex (x y z float plus extras) and a face element.
std::string ply_header(const char* format, int64_t n_vertices, int64_t n_faces,
                       const char* face_list = "property list uchar int vertex_indices") {
  return std::string("ply\nformat ") + format + " 1.0\ncomment test\nelement vertex " +
         std::to_string(n_vertices) +
         "\nproperty float x\nproperty float y\nproperty float nx\nproperty float z\n"
         "element face " +
         std::to_string(n_faces) + "\n" + face_list + "\nproperty uchar red\nend_header\n";
}

// The message of the exception a parse throws ("" when it throws none).
template <class F>
std::string error_of(F&& parse) {
  try {
    parse();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_LT(message.size(), 500u) << message;
}

// ---- STL -----------------------------------------------------------------------------
TEST(MeshIoStl, BinaryCubeWeldsIntoAClosedMesh) {
  const TriangleMesh m = knn_cli::parse_stl_mesh("cube.stl", binary_stl("cube", cube_soup()));
  expect_cube(m);
  EXPECT_FALSE(m.doubles);
  EXPECT_EQ(m.notice, "");
  // First appearance numbers the vertices: triangle 0's corners are 0, 1, 2.
  EXPECT_EQ(std::vector<int32_t>(m.triangles.begin(), m.triangles.begin() + 3),
            (std::vector<int32_t>{0, 1, 2}));
}

// A surface of 40 x 40 quads: 1681 vertices, more than the welding table's
// first size holds, each corner shared by up to 6 triangles.
TEST(MeshIoStl, LargeGridWeldsEveryCorner) {
  const int n = 40;
  auto at = [](int i, int j) {
    return std::vector<float>{static_cast<float>(i) * 0.25f, static_cast<float>(j) * -0.5f,
                              static_cast<float>((i * 7 + j * 3) % 5)};
  };
  std::vector<std::vector<float>> tris;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      for (const auto& t : {std::vector<std::pair<int, int>>{{i, j}, {i + 1, j}, {i + 1, j + 1}},
                            std::vector<std::pair<int, int>>{{i, j}, {i + 1, j + 1}, {i, j + 1}}}) {
        std::vector<float> v;
        for (const auto& [a, b] : t)
          for (float x : at(a, b)) v.push_back(x);
        tris.push_back(v);
      }
  const TriangleMesh m = knn_cli::parse_stl_mesh("grid.stl", binary_stl("grid", tris));
  EXPECT_EQ(m.vertex_count(), (n + 1) * (n + 1));
  ASSERT_EQ(m.triangle_count(), 2 * n * n);
  std::map<std::vector<double>, int32_t> index_of;
  for (int64_t t = 0; t < m.triangle_count(); ++t)
    for (int c = 0; c < 3; ++c) {
      const std::vector<double> p = corner(m, t, c);
      const std::vector<float>& want = tris[static_cast<size_t>(t)];
      EXPECT_EQ(p, (std::vector<double>{want[c * 3], want[c * 3 + 1], want[c * 3 + 2]}));
      // One index per coordinate triple.
      const auto [it, fresh] = index_of.emplace(p, m.triangles[t * 3 + c]);
      EXPECT_EQ(it->second, m.triangles[t * 3 + c]);
      (void)fresh;
    }
}

TEST(MeshIoStl, BinaryBeginningWithSolidIsReadAsBinary) {
  const TriangleMesh m =
      knn_cli::parse_stl_mesh("cube.stl", binary_stl("solid made by a CAD system", cube_soup()));
  expect_cube(m);
}

TEST(MeshIoStl, AsciiCubeInEveryLayout) {
  for (const char* kw : {"facet", "FACET"})
    for (const char* eol : {"\n", "\r\n"}) {
      SCOPED_TRACE(std::string(kw) + (eol[0] == '\r' ? " crlf" : " lf"));
      expect_cube(knn_cli::parse_stl_mesh("cube.stl", ascii_stl_cube(kw, eol)));
    }
  // Two solids one after the other (some exporters write one per part), a
  // nameless solid and keywords split over lines.
  const std::string two = ascii_stl_cube("facet", "\n") +
                          "solid\nfacet normal 0 0 1 outer\nloop vertex 5 5 5 vertex 6 5 5\n"
                          "vertex 5 6 5 endloop endfacet endsolid\n";
  const TriangleMesh m = knn_cli::parse_stl_mesh("two.stl", two);
  EXPECT_EQ(m.vertex_count(), 11);
  EXPECT_EQ(m.triangle_count(), 13);
  EXPECT_EQ(corner(m, 12, 2), (std::vector<double>{5, 6, 5}));
}

TEST(MeshIoStl, AsciiPrecisionAndSignedZeros) {
  const std::string s =
      "solid t\nfacet normal 0 0 1\nouter loop\nvertex 0.1 0 -0\nvertex 1 0 0\nvertex 0 1 0\n"
      "endloop\nendfacet\nfacet normal 0 0 1\nouter loop\nvertex 0.1 -0 0\nvertex 0 1 0\n"
      "vertex 1 1 0\nendloop\nendfacet\nendsolid t\n";
  const TriangleMesh f = knn_cli::parse_stl_mesh("t.stl", s, Precision::Float32);
  const TriangleMesh d = knn_cli::parse_stl_mesh("t.stl", s, Precision::Float64);
  const TriangleMesh a = knn_cli::parse_stl_mesh("t.stl", s, Precision::Auto);
  EXPECT_FALSE(f.doubles);
  EXPECT_TRUE(d.doubles);
  EXPECT_TRUE(a.doubles);  // decimal text holds doubles
  EXPECT_EQ(f.vertices[0], static_cast<double>(0.1f));
  EXPECT_EQ(d.vertices[0], 0.1);
  // (0.1, 0, -0) and (0.1, -0, 0) are one vertex: 4 vertices, not 5.
  for (const TriangleMesh* m : {&f, &d}) {
    EXPECT_EQ(m->vertex_count(), 4);
    EXPECT_EQ(m->triangles[3], 0);
  }
}

TEST(MeshIoStl, BinaryFloat64KeepsTheFloatValues) {
  std::vector<std::vector<float>> tris = {{0.1f, 0.2f, 0.3f, 1, 0, 0, 0, 1, 0}};
  const TriangleMesh m =
      knn_cli::parse_stl_mesh("f.stl", binary_stl("x", tris), Precision::Float64);
  EXPECT_TRUE(m.doubles);
  EXPECT_EQ(m.vertices[1], static_cast<double>(0.2f));
}

TEST(MeshIoStl, MalformedFilesNameTheRecordOrLine) {
  const std::string good = binary_stl("cube", cube_soup());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::vector<float>> bad_tris = cube_soup();
  bad_tris[1][7] = nan;  // triangle 1, corner 2, y
  std::string huge_count = binary_stl("x", {});
  huge_count[80] = huge_count[81] = huge_count[82] = huge_count[83] = '\xff';
  const std::string ascii = ascii_stl_cube("facet", "\n");
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = ascii;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  const struct {
    const char* name;
    std::string bytes, expect;
  } cases[] = {
      {"short", good.substr(0, good.size() - 1),
       "binary STL of the wrong size: its header's count, 12 triangles, would take 84 + 50 x 12 "
       "= 684 bytes, the file has 683"},
      {"long", good + "x", "the file has 685 (and it does not begin with 'solid'"},
      {"huge_count", huge_count, "4294967295 triangles, would take"},
      {"tiny", "abc", "not an STL file: 3 bytes, shorter than a binary STL's 84-byte header"},
      {"empty", "", "not an STL file: 0 bytes"},
      {"zero", binary_stl("x", {}), "binary STL of 0 triangles: no triangles"},
      {"nan", binary_stl("x", bad_tris),
       "binary STL triangle 1 (byte offset 134): y of corner 2 is not a finite float32"},
      {"no_facet", "solid x\nendsolid x\n", "ASCII STL without a facet"},
      {"no_endloop", replace("    endloop\n  endfacet\nendsolid", "  endfacet\nendsolid"),
       "line 84: expected 'endloop' in facet 11 (a facet has 3 vertices), found 'endfacet'"},
      {"four_vertices", replace("    endloop", "      vertex 1 1 1\n    endloop"),
       "line 7: expected 'endloop' in facet 0 (a facet has 3 vertices), found 'vertex'"},
      {"word", replace("vertex 0 0 0", "vertex 0 zero 0"),
       "line 4: expected a number (y of vertex 0 in facet 0), found 'zero'"},
      {"nan_text", replace("vertex 0 0 0", "vertex 0 0 nan"),
       "line 4: z of vertex 0 in facet 0 is not a finite float32 coordinate"},
      {"over_float", replace("vertex 0 0 0", "vertex 1e39 0 0"),
       "line 4: x of vertex 0 in facet 0 is not a finite float32"},
      {"ends", ascii.substr(0, ascii.find("endfacet")), "the file ends in facet 0"},
      {"no_endsolid", ascii.substr(0, ascii.rfind("endsolid")),
       "the file ends inside a solid (expected 'endsolid')"},
      {"after_endsolid", ascii + "junk\n",
       "line 87: expected 'solid' or the end of the file after 'endsolid', found 'junk'"},
      {"stray", replace("  facet normal 0 0 0\n", "  facet normal 0 0 0\n  loop\n"),
       "line 3: expected 'outer' in facet 0, found 'loop'"},
      {"nul", replace("vertex 0 0 0", std::string("vertex 0\0 0", 11)),
       "line 4, column 15: a NUL byte"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string e = error_of([&] { knn_cli::parse_stl_mesh("bad.stl", c.bytes); });
    expect_error(e, "bad.stl: ");
    expect_error(e, c.expect);
  }
  // A text file's error is about the text only.
  EXPECT_EQ(error_of([&] {
              knn_cli::parse_stl_mesh("t.stl", replace("endloop", "endlop"));
            }).find("binary"),
            std::string::npos);
  // A binary file whose header begins with "solid", one byte short: it
  // fails as ASCII, and the message says what it would be as binary.
  const std::string solid = binary_stl("solid part", cube_soup());
  const std::string e =
      error_of([&] { knn_cli::parse_stl_mesh("s.stl", solid.substr(0, solid.size() - 1)); });
  expect_error(e,
               "read as ASCII STL, as it begins with 'solid'; as binary STL its header's "
               "count, 12 triangles, would take 84 + 50 x 12 = 684 bytes, the file has 683");
}

// ---- PLY -----------------------------------------------------------------------------
// A square pyramid: 5 vertices, a quad base (split in two) and 4 sides.
const float kPyramid[5][3] = {{0, 0, 0}, {2, 0, 0}, {2, 2, 0}, {0, 2, 0}, {1, 1, 1.5f}};
const std::vector<std::vector<int>> kPyramidFaces = {
    {0, 3, 2, 1}, {0, 1, 4}, {1, 2, 4}, {2, 3, 4}, {3, 0, 4}};
// The fan of the faces above, as the reader must give it.
const std::vector<int32_t> kPyramidTriangles = {0, 3, 2, 0, 2, 1, 0, 1, 4,
                                                1, 2, 4, 2, 3, 4, 3, 0, 4};

void expect_pyramid(const TriangleMesh& m) {
  ASSERT_EQ(m.vertex_count(), 5);
  for (int v = 0; v < 5; ++v)
    for (int d = 0; d < 3; ++d) EXPECT_EQ(m.vertices[v * 3 + d], kPyramid[v][d]);
  EXPECT_EQ(m.triangles, kPyramidTriangles);
  EXPECT_TRUE(closed_and_oriented(m));
  EXPECT_NE(m.notice.find("1 faces of more than 3 vertices fan-triangulated (6 triangles"),
            std::string::npos)
      << m.notice;
}

std::string ply_pyramid_ascii() {
  std::string s = ply_header("ascii", 5, 5);
  for (const auto& v : kPyramid)
    s += std::to_string(v[0]) + " " + std::to_string(v[1]) + " 0.5 " + std::to_string(v[2]) + "\n";
  for (const auto& f : kPyramidFaces) {
    s += std::to_string(f.size());
    for (int i : f) s += " " + std::to_string(i);
    s += " 200\n";
  }
  return s;
}

// Binary, with the face list's count and index types given (any integer
// types), little or big endian.
template <class Count, class Index>
std::string ply_pyramid_binary(const char* count_type, const char* index_type, bool big) {
  std::string s = ply_header(
      big ? "binary_big_endian" : "binary_little_endian", 5, 5,
      (std::string("property list ") + count_type + " " + index_type + " vertex_indices").c_str());
  for (const auto& v : kPyramid) {
    put(&s, v[0], big);
    put(&s, v[1], big);
    put(&s, 0.5f, big);
    put(&s, v[2], big);
  }
  for (const auto& f : kPyramidFaces) {
    put(&s, static_cast<Count>(f.size()), big);
    for (int i : f) put(&s, static_cast<Index>(i), big);
    put(&s, uint8_t{200}, big);
  }
  return s;
}

TEST(MeshIoPly, EveryFormatAndListType) {
  expect_pyramid(knn_cli::parse_ply_mesh("a.ply", ply_pyramid_ascii()));
  for (bool big : {false, true}) {
    SCOPED_TRACE(big ? "big endian" : "little endian");
    expect_pyramid(knn_cli::parse_ply_mesh(
        "b.ply", ply_pyramid_binary<uint8_t, int32_t>("uchar", "int", big)));
    expect_pyramid(knn_cli::parse_ply_mesh(
        "b.ply", ply_pyramid_binary<uint8_t, uint32_t>("uint8", "uint", big)));
    expect_pyramid(knn_cli::parse_ply_mesh(
        "b.ply", ply_pyramid_binary<uint16_t, int16_t>("ushort", "short", big)));
    expect_pyramid(knn_cli::parse_ply_mesh(
        "b.ply", ply_pyramid_binary<int32_t, uint16_t>("int", "uint16", big)));
    expect_pyramid(knn_cli::parse_ply_mesh(
        "b.ply", ply_pyramid_binary<uint32_t, uint8_t>("uint", "uchar", big)));
    expect_pyramid(
        knn_cli::parse_ply_mesh("b.ply", ply_pyramid_binary<int8_t, int8_t>("char", "int8", big)));
  }
}

TEST(MeshIoPly, DoublesOtherElementsAndVertexIndexName) {
  // Faces before vertices, an element between (with a list), doubles,
  // 'vertex_index' as the list's name.
  std::string s =
      "ply\nformat binary_little_endian 1.0\nelement face 2\nproperty list uchar uint "
      "vertex_index\nelement edge 1\nproperty list uchar int pair\nproperty float w\n"
      "element vertex 4\nproperty double x\nproperty double y\nproperty double z\nend_header\n";
  for (const auto& f : std::vector<std::vector<uint32_t>>{{0, 1, 2}, {0, 2, 3}}) {
    put(&s, uint8_t{3});
    for (uint32_t i : f) put(&s, i);
  }
  put(&s, uint8_t{2});
  put(&s, int32_t{0});
  put(&s, int32_t{1});
  put(&s, 1.0f);
  const double v[4][3] = {{0.1, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0.3}};
  for (const auto& p : v)
    for (double x : p) put(&s, x);
  const TriangleMesh d = knn_cli::parse_ply_mesh("d.ply", s, Precision::Auto);
  EXPECT_TRUE(d.doubles);
  EXPECT_EQ(d.vertices[0], 0.1);
  EXPECT_EQ(d.vertices[11], 0.3);
  EXPECT_EQ(d.triangles, (std::vector<int32_t>{0, 1, 2, 0, 2, 3}));
  EXPECT_EQ(d.notice, "");
  const TriangleMesh f = knn_cli::parse_ply_mesh("d.ply", s, Precision::Float32);
  EXPECT_FALSE(f.doubles);
  EXPECT_EQ(f.vertices[0], static_cast<double>(0.1f));
}

TEST(MeshIoPly, MalformedFilesNameTheLineOrRow) {
  const std::string ascii = ply_pyramid_ascii();
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = ascii;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  std::string bin = ply_pyramid_binary<uint8_t, int32_t>("uchar", "int", false);
  std::string bin_bad_index = bin;
  // Face 2 starts after the 5 vertices of 16 bytes, face 0 (18 bytes) and
  // face 1 (14); its second index is 5 bytes in.
  const size_t face2 = bin.find("end_header\n") + 11 + 5 * 16 + 18 + 14;
  const int32_t minus_one = -1;
  std::memcpy(&bin_bad_index[face2 + 5], &minus_one, 4);
  const struct {
    const char* name;
    std::string bytes, expect;
  } cases[] = {
      {"points_only",
       "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\n"
       "property float z\nend_header\n1 2 3\n",
       "PLY file has no face element: points, not a mesh"},
      {"no_list", replace("property list uchar int vertex_indices", "property list uchar int ids"),
       "PLY face element has no 'vertex_indices' (or 'vertex_index') property"},
      {"float_list",
       replace("property list uchar int vertex_indices",
               "property list uchar float vertex_indices"),
       "PLY face property 'vertex_indices' is not a list of integers"},
      {"scalar_list",
       replace("property list uchar int vertex_indices", "property int vertex_indices"),
       "is not a list of integers"},
      {"no_z", replace("property float z\n", ""), "PLY vertex element has no 'z' property"},
      {"index_high", replace("3 0 1 4 200", "3 0 1 5 200"),
       "PLY line 19: face 1 has the vertex index 5 (the file has 5 vertices: indices 0 to 4)"},
      {"index_fraction", replace("3 0 1 4 200", "3 0 1.5 4 200"),
       "PLY line 19: face 1 has the vertex index 1.5"},
      {"two_vertices", replace("3 0 1 4 200", "2 0 1 200"),
       "PLY line 19: face 1 has 2 vertices (a face has at least 3)"},
      {"short_list", replace("3 0 1 4 200", "3 0 1"), "PLY line 19: list shorter than its count"},
      {"nan_vertex", replace("2.000000 0.000000 0.5 0.000000", "2 nan 0.5 0"),
       "PLY line 14: y of vertex 1 is not a finite float32 coordinate"},
      {"truncated", ascii.substr(0, ascii.size() - 12),
       "truncated PLY: element 'face' ends at 4 of 5"},
      {"extra_line", ascii + "3 0 1 2 0\n", "1 more line of data follows the last element"},
      {"bin_index", bin_bad_index,
       "PLY element 'face' row 2 (byte offset " + std::to_string(face2) +
           "): face 2 has the vertex index -1 (the file has 5 vertices"},
      {"bin_truncated", bin.substr(0, bin.size() - 3),
       "truncated PLY: element 'face' ends at 4 of 5"},
      {"bin_trailing", bin + "xy", "2 more bytes follow the last element"},
      {"huge_count",
       "ply\nformat binary_little_endian 1.0\nelement vertex 4611686018427387904\nproperty "
       "float x\nproperty float y\nproperty float z\nelement face 1\nproperty list uchar int "
       "vertex_indices\nend_header\n0123456789ab",
       "more than 2^31 - 1 vertices"},
      {"huge_faces",
       "ply\nformat binary_little_endian 1.0\nelement vertex 3\nproperty float x\nproperty float "
       "y\nproperty float z\nelement face 4611686018427387904\nproperty list uint int "
       "vertex_indices\nend_header\n" +
           std::string(36, '\0') + "\xff\xff\xff\xff",
       "truncated PLY: element 'face' ends at 0 of 4611686018427387904"},
      {"not_ply", "solid x\n", "not a PLY file"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::string e;
    EXPECT_NO_THROW(e = error_of([&] { knn_cli::parse_ply_mesh("bad.ply", c.bytes); }));
    expect_error(e, "bad.ply: ");
    expect_error(e, c.expect);
  }
}

// ---- OBJ -----------------------------------------------------------------------------
TEST(MeshIoObj, EveryFaceFormRelativeIndicesAndIgnoredLines) {
  const std::string s =
      "# a pyramid\nmtllib p.mtl\no pyramid\n"
      "v 0 0 0\nv 2 0 0 1.0\nv 2 2 0 0.5 0.5 0.5\nv 0 2 0\nv 1 1 1.5\n"
      "vt 0 0\nvt 1 0\nvt 1 1\nvn 0 0 -1\nvn 0 0 1\ng base\nusemtl grey\ns off\n"
      "f 1/1/1 4/2/1 3/3/1 2/1/1\n"  // quad, v/vt/vn
      "f 1//2 2//2 5//2\n"           // v//vn
      "f 2/1 3/2 5/3\n"              // v/vt
      "f -3 -2 -1\n"                 // relative: the last three vertices, 3 4 5
      "\tf   4   -5   5  \r\n"       // whitespace, CRLF, -5 = vertex 1
      "l 1 2\n";
  const TriangleMesh m = knn_cli::parse_obj_mesh("p.obj", s);
  ASSERT_EQ(m.vertex_count(), 5);
  for (int v = 0; v < 5; ++v)
    for (int d = 0; d < 3; ++d) EXPECT_EQ(m.vertices[v * 3 + d], kPyramid[v][d]);
  EXPECT_EQ(m.triangles, kPyramidTriangles);
  EXPECT_TRUE(closed_and_oriented(m));
  EXPECT_NE(m.notice.find("p.obj: 1 faces of more than 3 vertices"), std::string::npos) << m.notice;
  EXPECT_FALSE(m.doubles);
  EXPECT_TRUE(knn_cli::parse_obj_mesh("p.obj", s, Precision::Auto).doubles);
}

TEST(MeshIoObj, ForwardReferencesAreAllowedWhenTheVertexComes) {
  const TriangleMesh m = knn_cli::parse_obj_mesh("f.obj", "f 1 2 3\nv 0 0 0\nv 1 0 0\nv 0 1 0\n");
  EXPECT_EQ(m.triangles, (std::vector<int32_t>{0, 1, 2}));
}

TEST(MeshIoObj, MalformedFilesNameTheLine) {
  const std::string v3 = "v 0 0 0\nv 1 0 0\nv 0 1 0\n";
  const struct {
    const char* name;
    std::string bytes, expect;
  } cases[] = {
      {"zero", v3 + "f 0 1 2\n", "line 4: vertex index 0 (OBJ counts from 1)"},
      {"beyond", v3 + "f 1 2 3\nf 1 2 9\nf 1 2 4\n", "line 5: vertex index 9, but the file has 3"},
      {"relative", v3 + "f -1 -2 -4\n",
       "line 4: relative vertex index -4, but only 3 vertices precede it"},
      {"two", v3 + "f 1 2\n", "line 4: a face of 2 vertices (a face has at least 3)"},
      {"entry", v3 + "f 1/2/3/4 2 3\n",
       "line 4: face entry '1/2/3/4' is not v, v/vt, v//vn or v/vt/vn"},
      {"entry_text", v3 + "f 1 b 3\n", "face entry 'b' is not"},
      {"entry_slash", v3 + "f 1/ 2 3\n", "face entry '1/' is not"},
      {"huge_index", v3 + "f 1 2 99999999999999999999\n", "face entry '99999999999999999999'"},
      {"int32", v3 + "f 1 2 2147483648\n", "line 4: vertex index 2147483648 (a mesh has at most"},
      {"v_count", "v 1 2\n", "line 1: expected 'v x y z [w]' or 'v x y z r g b [a]', found 2"},
      {"v_word", "v 1 two 3\n", "line 1: not a number 'two' in a 'v' line"},
      {"v_nan", "v 1 2 3\nv 1 nan 3\n", "line 2: y of vertex 2 (OBJ numbering) is not a finite"},
      {"no_face", v3, "OBJ file without an 'f' line: no triangles"},
      {"nul", std::string("v 0 0 0\nf 1\0 1 1\n", 17), "line 2, column 4: a NUL byte"},
      {"long_line", "v 0 0 0 " + std::string(70000, '0') + "\n", "line 1 is 70008 bytes long"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string e = error_of([&] { knn_cli::parse_obj_mesh("bad.obj", c.bytes); });
    expect_error(e, "bad.obj: ");
    expect_error(e, c.expect);
  }
}

// ---- Files and writers -----------------------------------------------------------------
TEST(MeshIo, ReadMeshChoosesByExtension) {
  const std::string dir = ::testing::TempDir();
  const std::string stl = dir + "/mesh_io_cube.STL", obj = dir + "/mesh_io_cube.obj";
  {
    std::ofstream(stl, std::ios::binary) << binary_stl("x", cube_soup());
    std::ofstream(obj, std::ios::binary) << "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n";
  }
  expect_cube(knn_cli::read_mesh(stl));
  EXPECT_EQ(knn_cli::read_mesh(obj).triangle_count(), 1);
  expect_error(error_of([&] { knn_cli::read_mesh(dir + "/mesh_io_cube.off"); }),
               "unknown mesh file type '.off' (expected .stl .ply .obj)");
  expect_error(error_of([&] { knn_cli::read_mesh(dir + "/mesh_io_missing.stl"); }),
               "mesh_io_missing.stl: cannot open");
  std::remove(stl.c_str());
  std::remove(obj.c_str());
}

// Every writer read back: PLY and OBJ give the same mesh; STL the same
// corners (welded: the writer's input has a duplicated vertex).
TEST(MeshIo, WritersReadBackAsTheSameMesh) {
  for (bool doubles : {false, true}) {
    SCOPED_TRACE(doubles ? "float64" : "float32");
    TriangleMesh m;
    m.doubles = doubles;
    const double v[6][3] = {{0.1, -0.0, 1e-30}, {1, 0, 0},          {0, 1, 0},
                            {1, 1, 3e25},       {0.1, -0.0, 1e-30}, {-7.25, 0.3, 2}};
    for (const auto& p : v)
      for (double x : p)
        m.vertices.push_back(doubles ? x : static_cast<double>(static_cast<float>(x)));
    m.triangles = {0, 1, 2, 1, 3, 2, 4, 3, 5, 2, 2, 5};  // a degenerate one too
    const Precision precision = doubles ? Precision::Float64 : Precision::Float32;
    for (MeshFormat f : {MeshFormat::PlyAscii, MeshFormat::PlyBinaryLittleEndian,
                         MeshFormat::PlyBinaryBigEndian, MeshFormat::Obj}) {
      const std::string bytes = knn_cli::mesh_file_bytes(m, f);
      const TriangleMesh back = f == MeshFormat::Obj
                                    ? knn_cli::parse_obj_mesh("w.obj", bytes, precision)
                                    : knn_cli::parse_ply_mesh("w.ply", bytes, precision);
      EXPECT_EQ(back.vertices, m.vertices) << static_cast<int>(f);
      EXPECT_EQ(back.triangles, m.triangles) << static_cast<int>(f);
      EXPECT_EQ(back.doubles, doubles);
    }
    for (MeshFormat f : {MeshFormat::StlAscii, MeshFormat::StlBinary}) {
      if (doubles && f == MeshFormat::StlBinary) continue;  // float32 corners
      const TriangleMesh back =
          knn_cli::parse_stl_mesh("w.stl", knn_cli::mesh_file_bytes(m, f), precision);
      EXPECT_EQ(back.vertex_count(), 5) << static_cast<int>(f);  // 0 and 4 welded
      ASSERT_EQ(back.triangle_count(), m.triangle_count());
      for (int64_t t = 0; t < m.triangle_count(); ++t)
        for (int c = 0; c < 3; ++c) EXPECT_EQ(corner(back, t, c), corner(m, t, c));
    }
  }
  // The binary STL normal: right-hand rule, unit length, 0 without area.
  TriangleMesh m;
  m.vertices = {0, 0, 0, 2, 0, 0, 0, 2, 0, 5, 5, 5};
  m.triangles = {0, 1, 2, 3, 3, 3};
  const std::string b = knn_cli::mesh_file_bytes(m, MeshFormat::StlBinary);
  ASSERT_EQ(b.size(), 84u + 2 * 50);
  EXPECT_NE(b.compare(0, 5, "solid"), 0);
  float n[6];
  std::memcpy(n, b.data() + 84, 12);
  std::memcpy(n + 3, b.data() + 134, 12);
  EXPECT_EQ(std::vector<float>(n, n + 6), (std::vector<float>{0, 0, 1, 0, 0, 0}));
}

}  // namespace
