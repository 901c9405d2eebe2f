// What knn_mesh_build does before an engine sees the mesh (contract section
// 6): the checks of the caller's arrays, the host copies the handle keeps
// (serialization and copies on other engines are made from them), and for
// the OpenMP engine the closed-and-oriented test and the pseudonormals it
// takes its signs from (engine/mesh_engine.h, MeshGeometry), by the
// definitions the CUDA engine's own preparation uses.
#pragma once

#include <cstdint>
#include <vector>

#include "../common/host_vector.h"
#include "../engine/mesh_engine.h"

namespace knn {

// The vertex and triangle counts, the arrays (NULL), every index in
// [0, n_vertices) (naming the triangle and the index), every coordinate
// finite and within coordinate_limit<Scalar>(3) (naming the vertex and the
// axis). Host arrays; `threads` as knn_options.threads. Throws knn::Error.
template <typename Scalar>
void check_mesh(const Scalar* vertices, int64_t n_vertices, const int32_t* triangles,
                int64_t n_triangles, int threads);

// A checked mesh, copied, with what the engines share computed.
template <typename Scalar>
struct PreparedMesh {
  HostVector<Scalar> vertices;    // n_vertices x 3
  HostVector<int32_t> triangles;  // n_triangles x 3
  bool closed_oriented = false;
  // Closed and oriented meshes only (else empty): MeshGeometry's.
  HostVector<Scalar> vertex_normals;  // n_vertices x 3
  HostVector<Scalar> edge_normals;    // n_triangles x 9

  int64_t n_vertices() const { return static_cast<int64_t>(vertices.size() / 3); }
  int64_t n_triangles() const { return static_cast<int64_t>(triangles.size() / 3); }
  MeshGeometry<Scalar> geometry() const;
};

// The copies and, with_signs, the closed-and-oriented test (every
// undirected edge run by exactly two triangles in opposite directions; a
// triangle that repeats a vertex index makes the mesh not closed) and, for a
// closed one, the pseudonormals (common/geometry/pseudonormals.h). The
// OpenMP engine takes them from here; the CUDA engine derives the same on
// its device (cuda/mesh/mesh_prepare.cu), so its builds skip them. The mesh
// must have passed check_mesh. Polls the calling thread's cancel flag
// between phases.
template <typename Scalar>
PreparedMesh<Scalar> prepare_mesh(const Scalar* vertices, int64_t n_vertices,
                                  const int32_t* triangles, int64_t n_triangles, int threads,
                                  bool with_signs);

// The same over host copies the mesh takes over (a load's arrays, copied
// out of its buffer once): n_vertices x 3 and n_triangles x 3.
template <typename Scalar>
PreparedMesh<Scalar> prepare_mesh(HostVector<Scalar> vertices, HostVector<int32_t> triangles,
                                  int threads, bool with_signs);

}  // namespace knn
