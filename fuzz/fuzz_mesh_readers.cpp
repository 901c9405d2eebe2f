// Fuzz target: the knn-gpgpu tool's mesh readers (tools/mesh_io.h) on
// arbitrary bytes: STL (binary and ASCII), PLY (every format) and OBJ, in
// float32, float64 or the file's precision. The first byte picks the reader
// and the precision, the second the writer of the round trip; the rest is
// the file.
//
// Oracle: a reader either throws std::runtime_error with a one-line message
// naming the file, or returns a mesh that
//   - has at least one triangle, indices in [0, vertices), at most 2^31 - 1
//     vertices, finite coordinates, float32 values when read in float32;
//   - (STL) has its corners welded: no two vertices alike (-0 = +0), every
//     vertex a corner, numbered in order of first appearance;
//   - written by any writer and read back is the same mesh: PLY and OBJ
//     give the same vertices and triangles, STL the same corners of every
//     triangle (and, from an STL mesh, the very same mesh);
//   - builds as a library mesh (knn_mesh_build / _f64, OpenMP) unless a
//     coordinate is beyond the coordinate limit, and a corner of its first
//     triangle is at distance 0 from it.
#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "../tools/mesh_io.h"
#include "fuzz_support.h"

namespace {

using knn_cli::MeshFormat;
using knn_cli::Precision;
using knn_cli::TriangleMesh;
using knn_fuzz::expect;

enum class Reader { Stl, Ply, Obj };

TriangleMesh parse(Reader reader, const std::string& bytes, Precision precision) {
  switch (reader) {
    case Reader::Stl: return knn_cli::parse_stl_mesh("fuzz.stl", bytes, precision);
    case Reader::Ply: return knn_cli::parse_ply_mesh("fuzz.ply", bytes, precision);
    case Reader::Obj: return knn_cli::parse_obj_mesh("fuzz.obj", bytes, precision);
  }
  return {};
}

void expect_valid(const TriangleMesh& m, Reader reader, Precision precision) {
  expect(m.vertices.size() % 3 == 0 && m.triangles.size() % 3 == 0, "a partial row", 0);
  expect(!m.triangles.empty(), "a mesh without triangles", 0);
  expect(m.vertex_count() <= INT32_MAX, "more vertices than int32 indices reach", 0);
  for (const int32_t i : m.triangles)
    expect(i >= 0 && i < m.vertex_count(), "a triangle index out of range", 0);
  for (const double v : m.vertices) {
    expect(std::isfinite(v), "a coordinate that is not finite", 0);
    expect(m.doubles || static_cast<double>(static_cast<float>(v)) == v,
           "a float32 mesh with a value that is not a float32", 0);
  }
  if (precision == Precision::Float32) expect(!m.doubles, "read in float64 when asked float32", 0);
  if (precision == Precision::Float64) expect(m.doubles, "read in float32 when asked float64", 0);
  expect(m.notice.empty() ||
             (m.notice.rfind("fuzz.", 0) == 0 && m.notice.find('\n') == std::string::npos),
         "a notice that does not name the file, or of several lines", 0);
  if (reader != Reader::Stl) return;
  // Welded: the vertices are the distinct corners, in order of first use.
  int32_t next = 0;
  for (const int32_t i : m.triangles) {
    expect(i <= next, "STL vertices not numbered in order of first appearance", 0);
    next = std::max(next, i + 1);
  }
  expect(next == m.vertex_count(), "an STL vertex that is no corner", 0);
  std::vector<std::array<double, 3>> v;
  for (int64_t i = 0; i < m.vertex_count(); ++i)
    v.push_back(
        {m.vertices[i * 3] + 0.0, m.vertices[i * 3 + 1] + 0.0, m.vertices[i * 3 + 2] + 0.0});
  std::sort(v.begin(), v.end());
  expect(std::adjacent_find(v.begin(), v.end()) == v.end(), "two STL vertices alike (unwelded)", 0);
}

bool same_corners(const TriangleMesh& a, const TriangleMesh& b) {
  if (a.triangle_count() != b.triangle_count()) return false;
  for (size_t c = 0; c < a.triangles.size(); ++c)
    for (int d = 0; d < 3; ++d)
      if (a.vertices[static_cast<size_t>(a.triangles[c]) * 3 + d] !=
          b.vertices[static_cast<size_t>(b.triangles[c]) * 3 + d])
        return false;
  return true;
}

void expect_round_trip(const TriangleMesh& m, Reader reader, MeshFormat format) {
  // Binary STL holds float32 corners only.
  if (format == MeshFormat::StlBinary && m.doubles) format = MeshFormat::StlAscii;
  const std::string bytes = knn_cli::mesh_file_bytes(m, format);
  const Reader back_reader = format == MeshFormat::Obj ? Reader::Obj
                             : format == MeshFormat::StlBinary || format == MeshFormat::StlAscii
                                 ? Reader::Stl
                                 : Reader::Ply;
  TriangleMesh back;
  try {
    back = parse(back_reader, bytes, m.doubles ? Precision::Float64 : Precision::Float32);
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr, "read back: %s\n", e.what());
    knn_fuzz::finding("a written mesh does not read back", 0);
  }
  expect(back.doubles == m.doubles, "the round trip changed the precision", 0);
  if (back_reader == Reader::Stl) {
    expect(same_corners(back, m), "the STL round trip changed a corner", 0);
    if (reader == Reader::Stl)
      expect(back.vertices == m.vertices && back.triangles == m.triangles,
             "an STL mesh written as STL reads back as another mesh", 0);
  } else {
    expect(back.vertices == m.vertices && back.triangles == m.triangles,
           "the round trip changed the mesh", 0);
  }
}

// The library's coordinate limit for 3-D points (knn_gpgpu.h, general
// rules): 2^61 in float32, 2^509 in float64.
bool within_limit(const TriangleMesh& m) {
  const double limit = m.doubles ? std::ldexp(1.0, 509) : std::ldexp(1.0, 61);
  for (const double v : m.vertices)
    if (std::fabs(v) > limit) return false;
  return true;
}

template <class Scalar>
void expect_builds(const TriangleMesh& m,
                   int (*build)(const Scalar*, int64_t, const int32_t*, int64_t, const knn_options*,
                                knn_mesh**),
                   int (*closest)(const knn_mesh*, const Scalar*, int64_t, Scalar, int32_t*,
                                  Scalar*, Scalar*, Scalar*, const knn_options*)) {
  const std::vector<Scalar> v(m.vertices.begin(), m.vertices.end());
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  knn_mesh* mesh = nullptr;
  const int st =
      build(v.data(), m.vertex_count(), m.triangles.data(), m.triangle_count(), &opt, &mesh);
  knn_fuzz::check_status(st);
  if (!within_limit(m)) {
    expect(st == KNN_ERR_INVALID_ARGUMENT && mesh == nullptr,
           "a mesh beyond the coordinate limit was not refused", st);
    return;
  }
  expect(st == KNN_OK, "a valid mesh from a reader was refused", st);
  int64_t nv = 0, nt = 0;
  knn_fuzz::check_status(knn_mesh_info(mesh, &nv, &nt, nullptr, nullptr, nullptr));
  expect(nv == m.vertex_count() && nt == m.triangle_count(), "knn_mesh_info's counts", 0);
  const Scalar* q = &v[static_cast<size_t>(m.triangles[0]) * 3];
  int32_t id = -2;
  Scalar sq = -1;
  const int qs =
      closest(mesh, q, 1, static_cast<Scalar>(INFINITY), &id, &sq, nullptr, nullptr, &opt);
  knn_fuzz::check_status(qs);
  expect(qs == KNN_OK && id >= 0 && sq == 0, "a corner of the mesh is not at distance 0", qs);
  knn_mesh_free(mesh);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const Reader reader = static_cast<Reader>(data[0] % 3);
  const Precision precision = static_cast<Precision>((data[0] / 3) % 3);  // Auto, 32, 64
  const MeshFormat writer = static_cast<MeshFormat>(data[1] % 6);
  const std::string bytes(reinterpret_cast<const char*>(data) + 2, size - 2);
  TriangleMesh m;
  try {
    m = parse(reader, bytes, precision);
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    expect(what.rfind("fuzz.", 0) == 0, "a reader's message does not name the file", 0);
    expect(what.find('\n') == std::string::npos, "a reader's message is not one line", 0);
    expect(what.size() < 600, "a reader's message copies the file", 0);
    return 0;
  }
  expect_valid(m, reader, precision);
  expect_round_trip(m, reader, writer);
  if (m.doubles) {
    expect_builds<double>(m, knn_mesh_build_f64, knn_mesh_closest_f64);
  } else {
    expect_builds<float>(m, knn_mesh_build, knn_mesh_closest);
  }
  return 0;
}
