#include "framing.h"

#include <array>
#include <cstdint>

#include "../common/error.h"
#include "../include/knn_gpgpu.h"

namespace knn {
namespace {

constexpr uint32_t kByteOrderMarker = 0x01020304u;
constexpr uint32_t kSwappedByteOrderMarker = 0x04030201u;
constexpr size_t kChecksumBytes = 4;

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

void check_serialize_buffer(const char* what, const void* buffer, size_t bytes, size_t needed) {
  if (buffer == nullptr) fail(KNN_ERR_INVALID_ARGUMENT, "buffer is NULL");
  if (bytes < needed)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("buffer holds %zu bytes; this %s serializes to %zu (knn_%s_serialized_size)", bytes,
                what, needed, what));
}

void check_deserialize_buffer(const void* buffer, size_t bytes) {
  if (buffer == nullptr && bytes > 0)
    fail(KNN_ERR_INVALID_ARGUMENT, format("buffer is NULL while bytes is %zu", bytes));
  if (bytes > static_cast<size_t>(PTRDIFF_MAX))
    fail(KNN_ERR_INVALID_ARGUMENT, format("bytes is %zu; no buffer holds more than %lld bytes",
                                          bytes, static_cast<long long>(PTRDIFF_MAX)));
}

void refuse_buffer(const Framing& framing, const std::string& why) {
  fail(KNN_ERR_INVALID_ARGUMENT,
       std::string("the buffer is not a valid serialized ") + framing.what + ": " + why);
}

void check_opening(const Framing& framing, const unsigned char* in) {
  if (std::memcmp(in, framing.magic, 8) != 0)
    refuse_buffer(framing,
                  "it does not start with the magic \"" + std::string(framing.magic, 8) + "\"");
  const uint32_t marker = read_field<uint32_t>(in, framing.marker_at);
  if (marker == kSwappedByteOrderMarker)
    fail(KNN_ERR_UNSUPPORTED,
         format("the serialized %s was written on a host of the other byte order; this library "
                "reads its own byte order only",
                framing.what));
  if (marker != kByteOrderMarker)
    refuse_buffer(framing, format("its endianness marker is 0x%08x, not 0x01020304", marker));
}

void check_framing(const Framing& framing, const unsigned char* in, size_t bytes,
                   size_t reserved_at, uint64_t payload) {
  for (size_t at = reserved_at; at < framing.header_bytes; ++at)
    if (in[at] != 0) refuse_buffer(framing, format("its reserved header byte %zu is not zero", at));
  const uint64_t expected = framing.header_bytes + payload + kChecksumBytes;
  if (bytes < expected)
    refuse_buffer(framing, format("it holds %zu bytes, but its header describes %llu (truncated)",
                                  bytes, ull(expected)));
  if (bytes > expected)
    refuse_buffer(
        framing, format("it holds %zu bytes, but its header describes %llu (trailing bytes)", bytes,
                        ull(expected)));
  const size_t checked = framing.header_bytes + static_cast<size_t>(payload);
  const uint32_t stored = read_field<uint32_t>(in, checked), computed = crc32c(in, checked);
  if (stored != computed)
    refuse_buffer(framing, format("its CRC-32C is 0x%08x but the contents give 0x%08x (corrupted)",
                                  stored, computed));
}

void write_opening(const Framing& framing, unsigned char* out) {
  std::memset(out, 0, framing.header_bytes);
  std::memcpy(out, framing.magic, 8);
  write_field<uint32_t>(out, framing.marker_at, kByteOrderMarker);
}

void write_checksum(unsigned char* out, size_t checked) {
  write_field<uint32_t>(out, checked, crc32c(out, checked));
}

}  // namespace knn
