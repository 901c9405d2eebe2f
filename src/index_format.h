// The byte format of a serialized index (knn_index_serialize /
// knn_index_deserialize). All fields in the writer's byte order, which the
// endianness marker records. A float32 index writes format version 1, a
// float64 index (knn_index_build_f64) version 2, which differs only in the
// scalar field and the width of the points; a reader takes both:
//
//   offset  size  field
//        0     8  magic "KNNGINDX"
//        8     4  format version (1, or 2 for float64 points)
//       12     4  endianness marker 0x01020304 (a reader of the other byte
//                 order sees 0x04030201 and refuses the buffer)
//       16     4  header bytes (64)
//       20     4  dim (1 .. KNN_INDEX_MAX_DIM)
//       24     8  n (0 .. 2^31 - 1)
//       32     4  structure that served the index (KDTREE, GRID or BRUTE_FORCE)
//       36     4  leaf_size the index was built with (0: the engine's default)
//       40     8  payload bytes (n * dim * scalar bytes: 4, or 8 in version 2)
//       48     4  version 2: scalar, KNN_SCALAR_FLOAT64 (1); version 1: zero
//                 (reserved, and a version-1 reader checks it so)
//       52    12  reserved, zero
//       64     -  the points, n rows of dim scalars, in input order
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

#include "../include/knn_gpgpu.h"

namespace knn {

constexpr uint32_t kIndexFormatVersion = 1;         // float32 points
constexpr uint32_t kIndexFormatVersionFloat64 = 2;  // float64 points
constexpr size_t kIndexFormatHeaderBytes = 64;
constexpr size_t kIndexFormatChecksumBytes = 4;

struct SavedIndex {
  int64_t n = 0;
  int dim = 0;
  int structure = 0;  // never AUTO
  int leaf_size = 0;
  int scalar = 0;  // KNN_SCALAR_FLOAT32 or KNN_SCALAR_FLOAT64
};

// Bytes of one coordinate of a knn_scalar.
inline size_t scalar_bytes(int scalar) { return scalar == KNN_SCALAR_FLOAT64 ? 8 : 4; }

// Bytes of the serialized form of an index of n points of dim coordinates of
// `scalar` (KNN_SCALAR_*).
size_t serialized_index_bytes(int64_t n, int dim, int scalar);

// Writes serialized_index_bytes(index.n, index.dim, index.scalar) bytes to
// out; `points` holds n * dim floats or doubles as index.scalar says.
void write_serialized_index(const SavedIndex& index, const void* points, unsigned char* out);

// Checks a buffer in full (sizes against `bytes` before anything is
// allocated, then the checksum) and returns its header; `points` is set to
// the first byte of its n * dim scalars inside the buffer (not aligned: copy
// them out with memcpy). Throws Error(KNN_ERR_INVALID_ARGUMENT) naming what is
// wrong, or Error(KNN_ERR_UNSUPPORTED) for a later format version or the other
// byte order.
SavedIndex read_serialized_index(const unsigned char* buffer, size_t bytes,
                                 const unsigned char** points);

}  // namespace knn
