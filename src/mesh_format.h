// The byte format of a serialized mesh (knn_mesh_serialize /
// knn_mesh_deserialize), in the writer's byte order, which the endianness
// marker records:
//
//   offset  size  field
//        0     8  magic "KNNGMESH"
//        8     4  format version (1)
//       12     4  endianness marker 0x01020304 (a reader of the other byte
//                 order sees 0x04030201 and refuses the buffer)
//       16     4  header bytes (64)
//       20     4  scalar: KNN_SCALAR_FLOAT32 (0) or KNN_SCALAR_FLOAT64 (1)
//       24     8  n_vertices (0 .. 2^31 - 1)
//       32     8  n_triangles (1 .. KNN_MESH_MAX_TRIANGLES)
//       40     8  payload bytes (n_vertices * 3 scalars + n_triangles * 3 int32)
//       48    16  reserved, zero
//       64     -  the vertices (n_vertices x 3 scalars), then the triangles
//                 (n_triangles x 3 int32), in input order
//   64 + payload  4  CRC-32C of every byte before it
//
// As for the index (src/index_format.h), what is saved is the input, not the
// BVH: the tree and the pseudonormals are functions of the mesh, so a load
// rebuilds them bit for bit, on either backend. The reader checks the
// framing; the load then checks the mesh as a build does (indices in range,
// coordinates finite and within the limit).
#pragma once

#include <cstddef>
#include <cstdint>

namespace knn {

struct SavedMesh {
  int scalar = 0;  // KNN_SCALAR_FLOAT32 or KNN_SCALAR_FLOAT64
  int64_t n_vertices = 0;
  int64_t n_triangles = 0;
};

// Bytes of the serialized form of a mesh of these counts.
size_t serialized_mesh_bytes(const SavedMesh& mesh);

// Writes serialized_mesh_bytes(mesh) bytes to out: `vertices` holds
// n_vertices * 3 floats or doubles as mesh.scalar says.
void write_serialized_mesh(const SavedMesh& mesh, const void* vertices, const int32_t* triangles,
                           unsigned char* out);

// Checks a buffer's framing in full (sizes against `bytes` before anything
// is allocated, then the checksum) and returns its header; `vertices` and
// `triangles` point at the arrays inside the buffer (not aligned: copy them
// out with memcpy). Throws Error(KNN_ERR_INVALID_ARGUMENT) naming what is
// wrong, or Error(KNN_ERR_UNSUPPORTED) for a later version or the other byte
// order.
SavedMesh read_serialized_mesh(const unsigned char* buffer, size_t bytes,
                               const unsigned char** vertices, const unsigned char** triangles);

}  // namespace knn
