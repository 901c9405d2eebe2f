#include "mesh_format.h"

#include <cstring>
#include <string>

#include "../common/error.h"
#include "../include/knn_gpgpu.h"
#include "index_format.h"

namespace knn {
namespace {

constexpr char kMagic[8] = {'K', 'N', 'N', 'G', 'M', 'E', 'S', 'H'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kByteOrderMarker = 0x01020304u;
constexpr uint32_t kSwappedByteOrderMarker = 0x04030201u;
constexpr size_t kHeaderBytes = 64, kChecksumBytes = 4;
// Header field offsets (mesh_format.h).
constexpr size_t kVersionAt = 8, kMarkerAt = 12, kHeaderBytesAt = 16, kScalarAt = 20,
                 kVerticesAt = 24, kTrianglesAt = 32, kPayloadAt = 40, kReservedAt = 48;

template <class T>
void put(unsigned char* out, size_t at, T value) {
  std::memcpy(out + at, &value, sizeof value);
}
template <class T>
T get(const unsigned char* in, size_t at) {
  T value;
  std::memcpy(&value, in + at, sizeof value);
  return value;
}

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
  std::memset(out, 0, kHeaderBytes);
  std::memcpy(out, kMagic, sizeof kMagic);
  put<uint32_t>(out, kVersionAt, kVersion);
  put<uint32_t>(out, kMarkerAt, kByteOrderMarker);
  put<uint32_t>(out, kHeaderBytesAt, static_cast<uint32_t>(kHeaderBytes));
  put<uint32_t>(out, kScalarAt, static_cast<uint32_t>(mesh.scalar));
  put<uint64_t>(out, kVerticesAt, static_cast<uint64_t>(mesh.n_vertices));
  put<uint64_t>(out, kTrianglesAt, static_cast<uint64_t>(mesh.n_triangles));
  put<uint64_t>(out, kPayloadAt, static_cast<uint64_t>(v_bytes + t_bytes));
  if (v_bytes > 0) std::memcpy(out + kHeaderBytes, vertices, v_bytes);
  std::memcpy(out + kHeaderBytes + v_bytes, triangles, t_bytes);
  const size_t checked = kHeaderBytes + v_bytes + t_bytes;
  put<uint32_t>(out, checked, crc32c(out, checked));
}

SavedMesh read_serialized_mesh(const unsigned char* in, size_t bytes,
                               const unsigned char** vertices, const unsigned char** triangles) {
  const auto corrupt = [](const std::string& what) {
    fail(KNN_ERR_INVALID_ARGUMENT, "the buffer is not a valid serialized mesh: " + what);
  };
  if (bytes < kHeaderBytes + kChecksumBytes)
    corrupt(format("it holds %zu bytes, fewer than the %zu of a header and checksum (truncated)",
                   bytes, kHeaderBytes + kChecksumBytes));
  if (std::memcmp(in, kMagic, sizeof kMagic) != 0)
    corrupt("it does not start with the magic \"KNNGMESH\"");
  const uint32_t marker = get<uint32_t>(in, kMarkerAt);
  if (marker == kSwappedByteOrderMarker)
    fail(KNN_ERR_UNSUPPORTED,
         "the serialized mesh was written on a host of the other byte order; this library reads "
         "its own byte order only");
  if (marker != kByteOrderMarker)
    corrupt(format("its endianness marker is 0x%08x, not 0x01020304", marker));
  const uint32_t version = get<uint32_t>(in, kVersionAt);
  if (version != kVersion)
    fail(KNN_ERR_UNSUPPORTED,
         format("the serialized mesh has format version %u; this library reads version %u", version,
                kVersion));
  const uint32_t header = get<uint32_t>(in, kHeaderBytesAt);
  if (header != kHeaderBytes)
    corrupt(format("its header size is %u, not %zu", header, kHeaderBytes));
  SavedMesh mesh;
  const uint32_t scalar = get<uint32_t>(in, kScalarAt);
  if (scalar != KNN_SCALAR_FLOAT32 && scalar != KNN_SCALAR_FLOAT64)
    corrupt(
        format("its scalar is %u, not KNN_SCALAR_FLOAT32 (0) or KNN_SCALAR_FLOAT64 (1)", scalar));
  mesh.scalar = static_cast<int>(scalar);
  const uint64_t n_vertices = get<uint64_t>(in, kVerticesAt);
  if (n_vertices > INT32_MAX)
    corrupt(format("its vertex count is %llu, beyond 2^31 - 1", ull(n_vertices)));
  const uint64_t n_triangles = get<uint64_t>(in, kTrianglesAt);
  if (n_triangles < 1 || n_triangles > KNN_MESH_MAX_TRIANGLES)
    corrupt(
        format("its triangle count is %llu, not 1 .. KNN_MESH_MAX_TRIANGLES", ull(n_triangles)));
  mesh.n_vertices = static_cast<int64_t>(n_vertices);
  mesh.n_triangles = static_cast<int64_t>(n_triangles);
  const uint64_t payload = vertex_bytes(mesh) + triangle_bytes(mesh);
  if (get<uint64_t>(in, kPayloadAt) != payload)
    corrupt(format("its payload size is %llu, but %llu vertices and %llu triangles take %llu bytes",
                   ull(get<uint64_t>(in, kPayloadAt)), ull(n_vertices), ull(n_triangles),
                   ull(payload)));
  for (size_t at = kReservedAt; at < kHeaderBytes; ++at)
    if (in[at] != 0) corrupt(format("its reserved header byte %zu is not zero", at));
  // Checked against the buffer's length before anything is read or allocated.
  const uint64_t expected = kHeaderBytes + payload + kChecksumBytes;
  if (bytes < expected)
    corrupt(format("it holds %zu bytes, but its header describes %llu (truncated)", bytes,
                   ull(expected)));
  if (bytes > expected)
    corrupt(format("it holds %zu bytes, but its header describes %llu (trailing bytes)", bytes,
                   ull(expected)));
  const size_t checked = kHeaderBytes + static_cast<size_t>(payload);
  const uint32_t stored = get<uint32_t>(in, checked), computed = crc32c(in, checked);
  if (stored != computed)
    corrupt(
        format("its CRC-32C is 0x%08x but the contents give 0x%08x (corrupted)", stored, computed));
  *vertices = in + kHeaderBytes;
  *triangles = in + kHeaderBytes + static_cast<size_t>(vertex_bytes(mesh));
  return mesh;
}

}  // namespace knn
