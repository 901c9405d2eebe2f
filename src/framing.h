// What the serialized formats (index_format.h, mesh_format.h) share: fields at
// byte offsets in the writer's byte order, and the frame around a payload: a
// magic and an endianness marker open a fixed-size header whose tail is
// reserved (zero), the payload follows, and a CRC-32C of every byte before it
// closes the buffer. The readers check through these functions, so both
// formats refuse a damaged buffer with the same words.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace knn {

template <class T>
void write_field(unsigned char* out, size_t at, T value) {
  std::memcpy(out + at, &value, sizeof value);
}
template <class T>
T read_field(const unsigned char* in, size_t at) {
  T value;
  std::memcpy(&value, in + at, sizeof value);
  return value;
}

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `bytes` bytes.
uint32_t crc32c(const unsigned char* data, size_t bytes);

// A serialized format: `what` names it in messages ("index", "mesh"); its
// magic is 8 bytes at offset 0, its endianness marker 4 bytes at marker_at.
struct Framing {
  const char* what;
  const char* magic;  // 8 bytes, no terminator
  size_t marker_at;
  size_t header_bytes;
};

// The buffer of a serialize call of `what` ("index", "mesh"), which takes
// `needed` bytes.
void check_serialize_buffer(const char* what, const void* buffer, size_t bytes, size_t needed);

// The arguments of a deserialize call, before its header is read: NULL with 0
// bytes is an empty buffer (refused later as truncated), and no buffer holds
// more than PTRDIFF_MAX bytes.
void check_deserialize_buffer(const void* buffer, size_t bytes);

// Throws Error(KNN_ERR_INVALID_ARGUMENT): "the buffer is not a valid
// serialized <what>: <why>".
[[noreturn]] void refuse_buffer(const Framing& framing, const std::string& why);

// The magic and the endianness marker of a buffer of at least header_bytes:
// Error(KNN_ERR_UNSUPPORTED) for the other byte order.
void check_opening(const Framing& framing, const unsigned char* in);

// The frame once the header's fields are checked: the reserved header bytes
// [reserved_at, header_bytes) zero, the buffer's length exactly header, payload
// and checksum (checked before anything is allocated), then the checksum.
void check_framing(const Framing& framing, const unsigned char* in, size_t bytes,
                   size_t reserved_at, uint64_t payload);

// Zeroes the header and writes the magic and this host's endianness marker.
void write_opening(const Framing& framing, unsigned char* out);

// Writes the checksum of the first `checked` bytes of out behind them.
void write_checksum(unsigned char* out, size_t checked);

}  // namespace knn
