#include "index_format.h"

#include <cstring>
#include <string>

#include "../common/error.h"
#include "../include/knn_gpgpu.h"
#include "framing.h"

namespace knn {
namespace {

constexpr char kMagic[8] = {'K', 'N', 'N', 'G', 'I', 'N', 'D', 'X'};

// Header field offsets (index_format.h).
constexpr size_t kVersionAt = 8, kMarkerAt = 12, kHeaderBytesAt = 16, kDimAt = 20, kNAt = 24,
                 kStructureAt = 32, kLeafSizeAt = 36, kPayloadAt = 40, kScalarAt = 48,
                 kReservedAt = 52;
constexpr Framing kFraming{"index", kMagic, kMarkerAt, kIndexFormatHeaderBytes};

unsigned long long ull(uint64_t v) { return static_cast<unsigned long long>(v); }

}  // namespace

size_t serialized_index_bytes(int64_t n, int dim, int scalar) {
  return kIndexFormatHeaderBytes +
         static_cast<size_t>(n) * static_cast<size_t>(dim) * scalar_bytes(scalar) +
         kIndexFormatChecksumBytes;
}

void write_serialized_index(const SavedIndex& index, const void* points, unsigned char* out) {
  const bool float64 = index.scalar == KNN_SCALAR_FLOAT64;
  const size_t payload =
      static_cast<size_t>(index.n) * static_cast<size_t>(index.dim) * scalar_bytes(index.scalar);
  write_opening(kFraming, out);
  // float32 indexes keep writing version 1, byte for byte as before.
  write_field<uint32_t>(out, kVersionAt,
                        float64 ? kIndexFormatVersionFloat64 : kIndexFormatVersion);
  if (float64) write_field<uint32_t>(out, kScalarAt, static_cast<uint32_t>(KNN_SCALAR_FLOAT64));
  write_field<uint32_t>(out, kHeaderBytesAt, static_cast<uint32_t>(kIndexFormatHeaderBytes));
  write_field<uint32_t>(out, kDimAt, static_cast<uint32_t>(index.dim));
  write_field<uint64_t>(out, kNAt, static_cast<uint64_t>(index.n));
  write_field<int32_t>(out, kStructureAt, index.structure);
  write_field<int32_t>(out, kLeafSizeAt, index.leaf_size);
  write_field<uint64_t>(out, kPayloadAt, payload);
  if (payload > 0) std::memcpy(out + kIndexFormatHeaderBytes, points, payload);
  write_checksum(out, kIndexFormatHeaderBytes + payload);
}

SavedIndex read_serialized_index(const unsigned char* in, size_t bytes,
                                 const unsigned char** points) {
  const auto corrupt = [](const std::string& why) { refuse_buffer(kFraming, why); };
  if (bytes < kIndexFormatHeaderBytes + kIndexFormatChecksumBytes)
    corrupt(format("it holds %zu bytes, fewer than the %zu of an empty index (truncated)", bytes,
                   kIndexFormatHeaderBytes + kIndexFormatChecksumBytes));
  check_opening(kFraming, in);
  const uint32_t version = read_field<uint32_t>(in, kVersionAt);
  if (version != kIndexFormatVersion && version != kIndexFormatVersionFloat64)
    fail(KNN_ERR_UNSUPPORTED,
         format("the serialized index has format version %u; this library reads versions %u "
                "and %u",
                version, kIndexFormatVersion, kIndexFormatVersionFloat64));
  const uint32_t header = read_field<uint32_t>(in, kHeaderBytesAt);
  if (header != kIndexFormatHeaderBytes)
    corrupt(format("its header size is %u, not %zu", header, kIndexFormatHeaderBytes));
  const uint32_t dim = read_field<uint32_t>(in, kDimAt);
  if (dim < 1 || dim > KNN_INDEX_MAX_DIM)
    corrupt(format("its dim is %u, not 1..%d", dim, KNN_INDEX_MAX_DIM));
  const uint64_t n = read_field<uint64_t>(in, kNAt);
  if (n > INT32_MAX) corrupt(format("its point count is %llu, beyond 2^31 - 1", ull(n)));
  const int32_t structure = read_field<int32_t>(in, kStructureAt);
  if (structure < KNN_STRUCTURE_KDTREE || structure > KNN_STRUCTURE_BRUTE_FORCE)
    corrupt(format("its structure is %d, not KDTREE (1), GRID (2) or BRUTE_FORCE (3)", structure));
  if (structure == KNN_STRUCTURE_GRID && dim != 3)
    corrupt(format("it holds a grid in dim %u (a grid is 3-D)", dim));
  const int32_t leaf_size = read_field<int32_t>(in, kLeafSizeAt);
  if (leaf_size < 0) corrupt(format("its leaf_size is %d, negative", leaf_size));
  const uint32_t scalar = read_field<uint32_t>(in, kScalarAt);
  if (version == kIndexFormatVersionFloat64 && scalar != KNN_SCALAR_FLOAT64)
    corrupt(format("it is format version 2 but its scalar field is %u, not KNN_SCALAR_FLOAT64 (1)",
                   scalar));
  const int kind = version == kIndexFormatVersionFloat64 ? KNN_SCALAR_FLOAT64 : KNN_SCALAR_FLOAT32;
  // n < 2^31, dim <= 4096, 8 bytes: the product cannot overflow 64 bits.
  const uint64_t payload = n * dim * scalar_bytes(kind);
  if (read_field<uint64_t>(in, kPayloadAt) != payload)
    corrupt(format("its payload size is %llu, but %llu points of dim %u take %llu bytes",
                   ull(read_field<uint64_t>(in, kPayloadAt)), ull(n), dim, ull(payload)));
  // In version 1 the scalar field is reserved too.
  check_framing(kFraming, in, bytes, version == kIndexFormatVersion ? kScalarAt : kReservedAt,
                payload);
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
