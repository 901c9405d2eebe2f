#include "index_format.h"

#include <array>
#include <cstring>
#include <string>

#include "../common/error.h"
#include "../include/knn_gpgpu.h"

namespace knn {
namespace {

constexpr char kMagic[8] = {'K', 'N', 'N', 'G', 'I', 'N', 'D', 'X'};
constexpr uint32_t kByteOrderMarker = 0x01020304u;
constexpr uint32_t kSwappedByteOrderMarker = 0x04030201u;

// Header field offsets (index_format.h).
constexpr size_t kVersionAt = 8, kMarkerAt = 12, kHeaderBytesAt = 16, kDimAt = 20, kNAt = 24,
                 kStructureAt = 32, kLeafSizeAt = 36, kPayloadAt = 40, kScalarAt = 48,
                 kReservedAt = 52;

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

// The byte-at-a-time table of the reflected CRC-32C, eight tables deep so that
// eight bytes are folded per step (slicing-by-8).
using CrcTables = std::array<std::array<uint32_t, 256>, 8>;
CrcTables make_crc_tables() {
  CrcTables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int bit = 0; bit < 8; ++bit) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    t[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; ++b)
    for (size_t s = 1; s < 8; ++s) t[s][b] = (t[s - 1][b] >> 8) ^ t[0][t[s - 1][b] & 0xFFu];
  return t;
}

unsigned long long ull(uint64_t v) { return static_cast<unsigned long long>(v); }

}  // namespace

uint32_t crc32c(const unsigned char* data, size_t bytes) {
  static const CrcTables t = make_crc_tables();
  uint32_t c = 0xFFFFFFFFu;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    // Bytes assembled explicitly: the result does not depend on the host's order.
    const uint32_t lo = c ^ (uint32_t{data[i]} | uint32_t{data[i + 1]} << 8 |
                             uint32_t{data[i + 2]} << 16 | uint32_t{data[i + 3]} << 24);
    c = t[7][lo & 0xFFu] ^ t[6][(lo >> 8) & 0xFFu] ^ t[5][(lo >> 16) & 0xFFu] ^ t[4][lo >> 24] ^
        t[3][data[i + 4]] ^ t[2][data[i + 5]] ^ t[1][data[i + 6]] ^ t[0][data[i + 7]];
  }
  for (; i < bytes; ++i) c = (c >> 8) ^ t[0][(c ^ data[i]) & 0xFFu];
  return c ^ 0xFFFFFFFFu;
}

size_t serialized_index_bytes(int64_t n, int dim, int scalar) {
  return kIndexFormatHeaderBytes +
         static_cast<size_t>(n) * static_cast<size_t>(dim) * scalar_bytes(scalar) +
         kIndexFormatChecksumBytes;
}

void write_serialized_index(const SavedIndex& index, const void* points, unsigned char* out) {
  const bool float64 = index.scalar == KNN_SCALAR_FLOAT64;
  const size_t payload =
      static_cast<size_t>(index.n) * static_cast<size_t>(index.dim) * scalar_bytes(index.scalar);
  std::memset(out, 0, kIndexFormatHeaderBytes);
  std::memcpy(out, kMagic, sizeof kMagic);
  // float32 indexes keep writing version 1, byte for byte as before.
  put<uint32_t>(out, kVersionAt, float64 ? kIndexFormatVersionFloat64 : kIndexFormatVersion);
  if (float64) put<uint32_t>(out, kScalarAt, static_cast<uint32_t>(KNN_SCALAR_FLOAT64));
  put<uint32_t>(out, kMarkerAt, kByteOrderMarker);
  put<uint32_t>(out, kHeaderBytesAt, static_cast<uint32_t>(kIndexFormatHeaderBytes));
  put<uint32_t>(out, kDimAt, static_cast<uint32_t>(index.dim));
  put<uint64_t>(out, kNAt, static_cast<uint64_t>(index.n));
  put<int32_t>(out, kStructureAt, index.structure);
  put<int32_t>(out, kLeafSizeAt, index.leaf_size);
  put<uint64_t>(out, kPayloadAt, payload);
  if (payload > 0) std::memcpy(out + kIndexFormatHeaderBytes, points, payload);
  put<uint32_t>(out, kIndexFormatHeaderBytes + payload,
                crc32c(out, kIndexFormatHeaderBytes + payload));
}

SavedIndex read_serialized_index(const unsigned char* in, size_t bytes,
                                 const unsigned char** points) {
  const auto corrupt = [](const std::string& what) {
    fail(KNN_ERR_INVALID_ARGUMENT, "the buffer is not a valid serialized index: " + what);
  };
  if (bytes < kIndexFormatHeaderBytes + kIndexFormatChecksumBytes)
    corrupt(format("it holds %zu bytes, fewer than the %zu of an empty index (truncated)", bytes,
                   kIndexFormatHeaderBytes + kIndexFormatChecksumBytes));
  if (std::memcmp(in, kMagic, sizeof kMagic) != 0)
    corrupt("it does not start with the magic \"KNNGINDX\"");
  const uint32_t marker = get<uint32_t>(in, kMarkerAt);
  if (marker == kSwappedByteOrderMarker)
    fail(KNN_ERR_UNSUPPORTED,
         "the serialized index was written on a host of the other byte order; this library "
         "reads its own byte order only");
  if (marker != kByteOrderMarker)
    corrupt(format("its endianness marker is 0x%08x, not 0x01020304", marker));
  const uint32_t version = get<uint32_t>(in, kVersionAt);
  if (version != kIndexFormatVersion && version != kIndexFormatVersionFloat64)
    fail(KNN_ERR_UNSUPPORTED,
         format("the serialized index has format version %u; this library reads versions %u "
                "and %u",
                version, kIndexFormatVersion, kIndexFormatVersionFloat64));
  const uint32_t header = get<uint32_t>(in, kHeaderBytesAt);
  if (header != kIndexFormatHeaderBytes)
    corrupt(format("its header size is %u, not %zu", header, kIndexFormatHeaderBytes));
  const uint32_t dim = get<uint32_t>(in, kDimAt);
  if (dim < 1 || dim > KNN_INDEX_MAX_DIM)
    corrupt(format("its dim is %u, not 1..%d", dim, KNN_INDEX_MAX_DIM));
  const uint64_t n = get<uint64_t>(in, kNAt);
  if (n > INT32_MAX) corrupt(format("its point count is %llu, beyond 2^31 - 1", ull(n)));
  const int32_t structure = get<int32_t>(in, kStructureAt);
  if (structure < KNN_STRUCTURE_KDTREE || structure > KNN_STRUCTURE_BRUTE_FORCE)
    corrupt(format("its structure is %d, not KDTREE (1), GRID (2) or BRUTE_FORCE (3)", structure));
  if (structure == KNN_STRUCTURE_GRID && dim != 3)
    corrupt(format("it holds a grid in dim %u (a grid is 3-D)", dim));
  const int32_t leaf_size = get<int32_t>(in, kLeafSizeAt);
  if (leaf_size < 0) corrupt(format("its leaf_size is %d, negative", leaf_size));
  const uint32_t scalar = get<uint32_t>(in, kScalarAt);
  if (version == kIndexFormatVersionFloat64 && scalar != KNN_SCALAR_FLOAT64)
    corrupt(format("it is format version 2 but its scalar field is %u, not KNN_SCALAR_FLOAT64 (1)",
                   scalar));
  const int kind = version == kIndexFormatVersionFloat64 ? KNN_SCALAR_FLOAT64 : KNN_SCALAR_FLOAT32;
  // n < 2^31, dim <= 4096, 8 bytes: the product cannot overflow 64 bits.
  const uint64_t payload = n * dim * scalar_bytes(kind);
  if (get<uint64_t>(in, kPayloadAt) != payload)
    corrupt(format("its payload size is %llu, but %llu points of dim %u take %llu bytes",
                   ull(get<uint64_t>(in, kPayloadAt)), ull(n), dim, ull(payload)));
  // In version 1 the scalar field is reserved too.
  const size_t reserved = version == kIndexFormatVersion ? kScalarAt : kReservedAt;
  for (size_t at = reserved; at < kIndexFormatHeaderBytes; ++at)
    if (in[at] != 0) corrupt(format("its reserved header byte %zu is not zero", at));
  // Checked against the buffer's length before anything is allocated.
  const uint64_t expected = kIndexFormatHeaderBytes + payload + kIndexFormatChecksumBytes;
  if (bytes < expected)
    corrupt(format("it holds %zu bytes, but its header describes %llu (truncated)", bytes,
                   ull(expected)));
  if (bytes > expected)
    corrupt(format("it holds %zu bytes, but its header describes %llu (trailing bytes)", bytes,
                   ull(expected)));
  const size_t checked = kIndexFormatHeaderBytes + static_cast<size_t>(payload);
  const uint32_t stored = get<uint32_t>(in, checked), computed = crc32c(in, checked);
  if (stored != computed)
    corrupt(
        format("its CRC-32C is 0x%08x but the contents give 0x%08x (corrupted)", stored, computed));
  *points = in + kIndexFormatHeaderBytes;
  SavedIndex saved;
  saved.scalar = kind;
  saved.n = static_cast<int64_t>(n);
  saved.dim = static_cast<int>(dim);
  saved.structure = structure;
  saved.leaf_size = leaf_size;
  return saved;
}

}  // namespace knn
