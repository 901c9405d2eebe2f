#include "mesh_format.h"

#include <cstring>
#include <string>

#include "../common/error.h"
#include "../include/knn_gpgpu.h"
#include "framing.h"
#include "index_format.h"

namespace knn {
namespace {

constexpr char kMagic[8] = {'K', 'N', 'N', 'G', 'M', 'E', 'S', 'H'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 64, kChecksumBytes = 4;
// Header field offsets (mesh_format.h).
constexpr size_t kVersionAt = 8, kMarkerAt = 12, kHeaderBytesAt = 16, kScalarAt = 20,
                 kVerticesAt = 24, kTrianglesAt = 32, kPayloadAt = 40, kReservedAt = 48;
constexpr Framing kFraming{"mesh", kMagic, kMarkerAt, kHeaderBytes};

unsigned long long ull(uint64_t v) { return static_cast<unsigned long long>(v); }

// Within the limits both counts are below 2^32 and a row at most 24 bytes:
// no product overflows 64 bits.
uint64_t vertex_bytes(const SavedMesh& mesh) {
  return static_cast<uint64_t>(mesh.n_vertices) * 3 * scalar_bytes(mesh.scalar);
}
uint64_t triangle_bytes(const SavedMesh& mesh) {
  return static_cast<uint64_t>(mesh.n_triangles) * 3 * sizeof(int32_t);
}

}  // namespace

size_t serialized_mesh_bytes(const SavedMesh& mesh) {
  return kHeaderBytes + static_cast<size_t>(vertex_bytes(mesh) + triangle_bytes(mesh)) +
         kChecksumBytes;
}

void write_serialized_mesh(const SavedMesh& mesh, const void* vertices, const int32_t* triangles,
                           unsigned char* out) {
  const size_t v_bytes = static_cast<size_t>(vertex_bytes(mesh));
  const size_t t_bytes = static_cast<size_t>(triangle_bytes(mesh));
  write_opening(kFraming, out);
  write_field<uint32_t>(out, kVersionAt, kVersion);
  write_field<uint32_t>(out, kHeaderBytesAt, static_cast<uint32_t>(kHeaderBytes));
  write_field<uint32_t>(out, kScalarAt, static_cast<uint32_t>(mesh.scalar));
  write_field<uint64_t>(out, kVerticesAt, static_cast<uint64_t>(mesh.n_vertices));
  write_field<uint64_t>(out, kTrianglesAt, static_cast<uint64_t>(mesh.n_triangles));
  write_field<uint64_t>(out, kPayloadAt, static_cast<uint64_t>(v_bytes + t_bytes));
  if (v_bytes > 0) std::memcpy(out + kHeaderBytes, vertices, v_bytes);
  std::memcpy(out + kHeaderBytes + v_bytes, triangles, t_bytes);
  write_checksum(out, kHeaderBytes + v_bytes + t_bytes);
}

SavedMesh read_serialized_mesh(const unsigned char* in, size_t bytes,
                               const unsigned char** vertices, const unsigned char** triangles) {
  const auto corrupt = [](const std::string& why) { refuse_buffer(kFraming, why); };
  if (bytes < kHeaderBytes + kChecksumBytes)
    corrupt(format("it holds %zu bytes, fewer than the %zu of a header and checksum (truncated)",
                   bytes, kHeaderBytes + kChecksumBytes));
  check_opening(kFraming, in);
  const uint32_t version = read_field<uint32_t>(in, kVersionAt);
  if (version != kVersion)
    fail(KNN_ERR_UNSUPPORTED,
         format("the serialized mesh has format version %u; this library reads version %u", version,
                kVersion));
  const uint32_t header = read_field<uint32_t>(in, kHeaderBytesAt);
  if (header != kHeaderBytes)
    corrupt(format("its header size is %u, not %zu", header, kHeaderBytes));
  SavedMesh mesh;
  const uint32_t scalar = read_field<uint32_t>(in, kScalarAt);
  if (scalar != KNN_SCALAR_FLOAT32 && scalar != KNN_SCALAR_FLOAT64)
    corrupt(
        format("its scalar is %u, not KNN_SCALAR_FLOAT32 (0) or KNN_SCALAR_FLOAT64 (1)", scalar));
  mesh.scalar = static_cast<int>(scalar);
  const uint64_t n_vertices = read_field<uint64_t>(in, kVerticesAt);
  if (n_vertices > INT32_MAX)
    corrupt(format("its vertex count is %llu, beyond 2^31 - 1", ull(n_vertices)));
  const uint64_t n_triangles = read_field<uint64_t>(in, kTrianglesAt);
  if (n_triangles < 1 || n_triangles > KNN_MESH_MAX_TRIANGLES)
    corrupt(
        format("its triangle count is %llu, not 1 .. KNN_MESH_MAX_TRIANGLES", ull(n_triangles)));
  mesh.n_vertices = static_cast<int64_t>(n_vertices);
  mesh.n_triangles = static_cast<int64_t>(n_triangles);
  const uint64_t payload = vertex_bytes(mesh) + triangle_bytes(mesh);
  if (read_field<uint64_t>(in, kPayloadAt) != payload)
    corrupt(format("its payload size is %llu, but %llu vertices and %llu triangles take %llu bytes",
                   ull(read_field<uint64_t>(in, kPayloadAt)), ull(n_vertices), ull(n_triangles),
                   ull(payload)));
  check_framing(kFraming, in, bytes, kReservedAt, payload);
  *vertices = in + kHeaderBytes;
  *triangles = in + kHeaderBytes + static_cast<size_t>(vertex_bytes(mesh));
  return mesh;
}

}  // namespace knn
