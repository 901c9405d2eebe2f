// The byte format of a serialized index (knn_index_serialize /
// knn_index_deserialize). Format version 1, all fields in the writer's byte
// order, which the endianness marker records:
//
//   offset  size  field
//        0     8  magic "KNNGINDX"
//        8     4  format version (1)
//       12     4  endianness marker 0x01020304 (a reader of the other byte
//                 order sees 0x04030201 and refuses the buffer)
//       16     4  header bytes (64)
//       20     4  dim (1 .. KNN_INDEX_MAX_DIM)
//       24     8  n (0 .. 2^31 - 1)
//       32     4  structure that served the index (KDTREE, GRID or BRUTE_FORCE)
//       36     4  leaf_size the index was built with (0: the engine's default)
//       40     8  payload bytes (n * dim * 4)
//       48    16  reserved, zero
//       64     -  the points, n rows of dim float32, in input order
//   64 + payload  4  CRC-32C of every byte before it
//
// What is saved is the points and the options that decide the structure, not
// the structure itself: every structure is a function of the points and those
// options (the build is deterministic), so a rebuild on load answers bit for
// bit as the saved index did, on either backend. That keeps the format free of
// engine layouts (a CPU index loads onto a GPU and back) and keeps a reader
// from having to validate a tree it did not build. A load costs a build (the
// kd-tree of 10^6 3-D points builds in well under a second on two cores).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace knn {

constexpr uint32_t kIndexFormatVersion = 1;
constexpr size_t kIndexFormatHeaderBytes = 64;
constexpr size_t kIndexFormatChecksumBytes = 4;

struct SavedIndex {
  int64_t n = 0;
  int dim = 0;
  int structure = 0;  // never AUTO
  int leaf_size = 0;
};

// Bytes of the serialized form of an index of n points of dim floats.
size_t serialized_index_bytes(int64_t n, int dim);

// Writes serialized_index_bytes(index.n, index.dim) bytes to out.
void write_serialized_index(const SavedIndex& index, const float* points, unsigned char* out);

// Checks a buffer in full (sizes against `bytes` before anything is
// allocated, then the checksum) and returns its header and points. Throws
// Error(KNN_ERR_INVALID_ARGUMENT) naming what is wrong, or
// Error(KNN_ERR_UNSUPPORTED) for a later format version or the other byte
// order.
SavedIndex read_serialized_index(const unsigned char* buffer, size_t bytes,
                                 std::vector<float>& points);

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `bytes` bytes.
uint32_t crc32c(const unsigned char* data, size_t bytes);

}  // namespace knn
