// mesh_io.h - triangle mesh readers (and writers) of the knn-gpgpu tool: the
// design a scan is compared with (`knn-gpgpu deviation`, docs/cli.md).
//
// Readers return the vertices (x, y, z each, file order) and triangles
// (three vertex indices each, every index in [0, vertices)), and throw
// std::runtime_error with a one-line message naming the file and the line,
// record or byte offset where a malformed file goes wrong and what was
// expected there. Sizes a header claims are checked against the file's size
// before anything is allocated for them; what a file holds bounds the
// memory (the file's size times a small constant). A coordinate that is not
// finite in the precision read is refused with its place. A mesh with no
// triangle is refused (nothing to measure against).
//
// Formats, chosen by the file extension (case-insensitive):
//   .stl  binary or ASCII. Binary when the file's size is exactly what the
//         count in its 84-byte header says (84 + 50 per triangle), whatever
//         its first bytes are (binary files that begin with "solid" exist);
//         else ASCII when it begins with "solid" (solid / facet normal /
//         outer loop / 3 x vertex / endloop / endfacet / endsolid,
//         keywords in any case, several solids in a row). STL's triangles
//         carry their corners' coordinates, not indices: corners with
//         identical coordinates (bit for bit in the precision read, -0 = +0)
//         are welded into one vertex, numbered in order of first appearance,
//         so a closed solid comes out closed. The normals are ignored.
//         At most 715,827,882 triangles (their corners numbered in int32).
//   .ply  ascii, binary_little_endian or binary_big_endian (ply_format.h):
//         the vertex element's x y z, and the face element's list
//         'vertex_indices' (or 'vertex_index') of any integer type and
//         count type; faces of more than 3 vertices are fan-triangulated
//         (v0 v1 v2, v0 v2 v3, ...); other properties and elements are
//         skipped, but walked (the data must match the header's counts).
//   .obj  'v x y z [w]' (or 'v x y z r g b [a]': colours) and 'f' lines, f's
//         entries as v, v/vt, v//vn or v/vt/vn; indices count from 1, a
//         negative one counts back from the last vertex so far (-1: the
//         last); polygons fan-triangulated; every other line (vt, vn, g, o,
//         s, usemtl, mtllib, l, comments) ignored.
// Lines of text files are limited to 64 KiB, and a NUL byte in them is an
// error. At most 2^31 - 1 vertices.
#ifndef KNN_TOOLS_MESH_IO_H
#define KNN_TOOLS_MESH_IO_H

#include <cstdint>
#include <string>
#include <vector>

#include "point_io.h"

namespace knn_cli {

struct TriangleMesh {
  std::vector<double> vertices;    // n x 3; float32 values unless `doubles`
  std::vector<int32_t> triangles;  // t x 3, each index in [0, n)
  bool doubles = false;            // read in float64 (else every value is a float32)
  // What the reader did that the user should know (polygons split into
  // triangles), "PATH: ..."; empty when there is nothing to say.
  std::string notice;
  int64_t vertex_count() const { return static_cast<int64_t>(vertices.size() / 3); }
  int64_t triangle_count() const { return static_cast<int64_t>(triangles.size() / 3); }
  std::vector<float> float_vertices() const;  // exact for a mesh read in float32
};

// Precision as for point tables: Float32 rounds every coordinate to float32
// (welding STL corners after the rounding), Float64 keeps the file's
// values, Auto is Float64 for files of doubles (ASCII STL, OBJ, PLY with a
// double x, y or z) and Float32 for the others (binary STL, PLY of floats).
TriangleMesh read_mesh(const std::string& path, Precision precision = Precision::Float32);

// The same parsers on a file's bytes in memory; `name` only labels messages.
TriangleMesh parse_stl_mesh(const std::string& name, const std::string& bytes,
                            Precision precision = Precision::Float32);
TriangleMesh parse_ply_mesh(const std::string& name, const std::string& bytes,
                            Precision precision = Precision::Float32);
TriangleMesh parse_obj_mesh(const std::string& name, const std::string& bytes,
                            Precision precision = Precision::Float32);

// Writers: a mesh as a file of each format. PLY and OBJ keep the mesh as it
// is (float or double coordinates, written so that they read back
// exactly); STL writes each triangle's corners (binary: as float32, so only
// a float32 mesh reads back exactly; ASCII: with the digits that read back
// exactly) and a unit normal by the right-hand rule (0 for a triangle
// without area).
enum class MeshFormat {
  StlBinary,
  StlAscii,
  PlyAscii,
  PlyBinaryLittleEndian,
  PlyBinaryBigEndian,
  Obj
};
std::string mesh_file_bytes(const TriangleMesh& mesh, MeshFormat format);

}  // namespace knn_cli

#endif
