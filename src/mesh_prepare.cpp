#include "mesh_prepare.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>

#include "../common/error.h"
#include "../common/first_index.h"
#include "../common/geometry/pseudonormals.h"
#include "../common/team_size.h"
#include "../engine/cancel.h"
#include "validate.h"

namespace knn {
namespace {

constexpr int64_t kMaxVertices = INT32_MAX;

using geometry::half_edge_from;
using geometry::half_edge_to;

// Items [0, n_items) bucketed by key_of(item) in [0, n_keys): offsets
// (n_keys + 1 entries) and value_of(item) of every item, each bucket sorted
// ascending, so that the result does not depend on the threads' order. The
// counts and cursors are std::atomic (MSVC's OpenMP 2.0 has no atomic
// capture).
template <class Value, class KeyOf, class ValueOf>
void bucket(int64_t n_keys, int64_t n_items, const KeyOf& key_of, const ValueOf& value_of,
            int threads, HostVector<uint32_t>& offsets, HostVector<Value>& values) {
  const int team = team_size(threads);
  const std::unique_ptr<std::atomic<uint32_t>[]> slot(
      new std::atomic<uint32_t>[static_cast<size_t>(n_keys)]);
#pragma omp parallel for num_threads(team) schedule(static)
  for (int64_t k = 0; k < n_keys; ++k) slot[k].store(0, std::memory_order_relaxed);
#pragma omp parallel for num_threads(team) schedule(static)
  for (int64_t item = 0; item < n_items; ++item)
    slot[key_of(item)].fetch_add(1, std::memory_order_relaxed);
  offsets.resize(static_cast<size_t>(n_keys) + 1);
  offsets[0] = 0;
  for (int64_t k = 0; k < n_keys; ++k) {
    offsets[k + 1] = offsets[k] + slot[k].load(std::memory_order_relaxed);
    slot[k].store(offsets[k], std::memory_order_relaxed);  // now the bucket's cursor
  }
  values.resize(static_cast<size_t>(n_items));
#pragma omp parallel for num_threads(team) schedule(static)
  for (int64_t item = 0; item < n_items; ++item)
    values[slot[key_of(item)].fetch_add(1, std::memory_order_relaxed)] = value_of(item);
#pragma omp parallel for num_threads(team) schedule(dynamic, 4096)
  for (int64_t k = 0; k < n_keys; ++k)
    std::sort(values.begin() + offsets[k], values.begin() + offsets[k + 1]);
}

// The partner of every half-edge (the other run of its undirected edge), or
// false when some edge is not run by exactly two triangles in opposite
// directions. Edges are bucketed by their smaller vertex, each entry the
// larger vertex (high 32 bits) and the half-edge (low 32 bits).
bool pair_half_edges(const int32_t* triangles, int64_t n_vertices, int64_t n_triangles, int threads,
                     HostVector<uint32_t>& partner) {
  const int64_t halves = 3 * n_triangles;
  const int64_t repeated = first_index_where(n_triangles, threads, [triangles](int64_t t) {
    const int32_t* c = triangles + 3 * t;
    return c[0] == c[1] || c[1] == c[2] || c[2] == c[0];
  });
  if (repeated < n_triangles) return false;
  HostVector<uint32_t> offsets;
  HostVector<uint64_t> entries;
  bucket<uint64_t>(
      n_vertices, halves,
      [triangles](int64_t h) {
        return std::min(half_edge_from(triangles, h), half_edge_to(triangles, h));
      },
      [triangles](int64_t h) {
        const int64_t high = std::max(half_edge_from(triangles, h), half_edge_to(triangles, h));
        return static_cast<uint64_t>(high) << 32 | static_cast<uint64_t>(h);
      },
      threads, offsets, entries);
  throw_if_cancelled(cancel_flag());
  partner.resize(static_cast<size_t>(halves));
  std::atomic<bool> paired{true};
#pragma omp parallel for num_threads(team_size(threads)) schedule(dynamic, 4096)
  for (int64_t v = 0; v < n_vertices; ++v) {
    if (!paired.load(std::memory_order_relaxed)) continue;
    for (uint32_t j = offsets[v]; j < offsets[v + 1]; j += 2) {
      const uint64_t a = entries[j];
      const bool pair = j + 1 < offsets[v + 1] && entries[j + 1] >> 32 == a >> 32 &&
                        (j + 2 == offsets[v + 1] || entries[j + 2] >> 32 != a >> 32);
      if (!pair) {
        paired.store(false, std::memory_order_relaxed);
        break;
      }
      const uint32_t h0 = static_cast<uint32_t>(a), h1 = static_cast<uint32_t>(entries[j + 1]);
      // Opposite directions: the two runs start at different ends.
      if (half_edge_from(triangles, h0) == half_edge_from(triangles, h1)) {
        paired.store(false, std::memory_order_relaxed);
        break;
      }
      partner[h0] = h1;
      partner[h1] = h0;
    }
  }
  return paired.load();
}

// The angle-weighted vertex pseudonormals (the corners of a vertex summed in
// corner order) and the edge pseudonormals (the two unit normals of an
// edge's triangles, its own first). The unit normals are computed once
// (24 bytes a triangle for the length of the call).
template <typename Scalar>
void pseudonormals(PreparedMesh<Scalar>& mesh, const HostVector<uint32_t>& partner, int threads) {
  using geometry::Double3;
  const Scalar* vertices = mesh.vertices.data();
  const int32_t* triangles = mesh.triangles.data();
  const int64_t n_vertices = mesh.n_vertices(), n_triangles = mesh.n_triangles();
  const int team = team_size(threads);
  HostVector<Double3> unit(static_cast<size_t>(n_triangles));
#pragma omp parallel for num_threads(team) schedule(static)
  for (int64_t t = 0; t < n_triangles; ++t) unit[t] = geometry::unit_normal(vertices, triangles, t);
  mesh.edge_normals.resize(static_cast<size_t>(n_triangles) * 9);
  Scalar* edge = mesh.edge_normals.data();
#pragma omp parallel for num_threads(team) schedule(static)
  for (int64_t h = 0; h < 3 * n_triangles; ++h)
    geometry::store3(edge + 3 * h, geometry::edge_sum(unit[h / 3], unit[partner[h] / 3]));
  throw_if_cancelled(cancel_flag());
  HostVector<uint32_t> offsets;
  HostVector<uint32_t> corners;
  bucket<uint32_t>(
      n_vertices, 3 * n_triangles, [triangles](int64_t c) { return int64_t{triangles[c]}; },
      [](int64_t c) { return static_cast<uint32_t>(c); }, threads, offsets, corners);
  throw_if_cancelled(cancel_flag());
  mesh.vertex_normals.resize(static_cast<size_t>(n_vertices) * 3);
  Scalar* normal = mesh.vertex_normals.data();
#pragma omp parallel for num_threads(team) schedule(dynamic, 4096)
  for (int64_t v = 0; v < n_vertices; ++v) {
    Double3 sum{0, 0, 0};
    for (uint32_t j = offsets[v]; j < offsets[v + 1]; ++j)
      sum = geometry::add_corner(sum, geometry::corner_angle(vertices, triangles, corners[j]),
                                 unit[corners[j] / 3]);
    geometry::store3(normal + 3 * v, sum);
  }
}

// A copy of source[0, count), written a run at a time by the team (each
// thread faults in the pages it writes), the caller's flag polled per run.
template <typename T>
HostVector<T> copy_polling(const T* source, int64_t count, int threads) {
  HostVector<T> copy(static_cast<size_t>(count));
  const int64_t runs = (count + kCancelRunItems - 1) / kCancelRunItems;
  LoopStop stop(cancel_flag());
#pragma omp parallel for num_threads(team_size(threads)) schedule(dynamic, 1)
  for (int64_t r = 0; r < runs; ++r) {
    if (stop.poll()) continue;
    const int64_t begin = r * kCancelRunItems, end = std::min(count, begin + kCancelRunItems);
    std::memcpy(copy.data() + begin, source + begin, static_cast<size_t>(end - begin) * sizeof(T));
  }
  if (stop.stopped()) throw_cancelled();
  return copy;
}

}  // namespace

template <typename Scalar>
void check_mesh(const Scalar* vertices, int64_t n_vertices, const int32_t* triangles,
                int64_t n_triangles, int threads) {
  check_array(vertices, n_vertices, "vertices", "n_vertices");
  check_array(triangles, n_triangles, "triangles", "n_triangles");
  if (n_triangles == 0)
    fail(KNN_ERR_INVALID_ARGUMENT,
         "n_triangles is 0; a mesh needs at least one triangle (nothing is closest to an empty "
         "mesh)");
  if (n_triangles > KNN_MESH_MAX_TRIANGLES)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("n_triangles is %lld; a mesh holds at most %lld (KNN_MESH_MAX_TRIANGLES)",
                static_cast<long long>(n_triangles),
                static_cast<long long>(KNN_MESH_MAX_TRIANGLES)));
  if (n_vertices > kMaxVertices)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("n_vertices is %lld; a mesh holds at most %lld (indices are int32)",
                static_cast<long long>(n_vertices), static_cast<long long>(kMaxVertices)));
  const int64_t bad = first_index_where(3 * n_triangles, threads, [=](int64_t j) {
    return triangles[j] < 0 || triangles[j] >= n_vertices;
  });
  if (bad < 3 * n_triangles)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("triangle %lld has vertex index %d (n_vertices is %lld); indices must lie in "
                "[0, n_vertices)",
                static_cast<long long>(bad / 3), triangles[bad],
                static_cast<long long>(n_vertices)));
  check_coordinates(vertices, n_vertices, 3, "vertex", threads);
}

template <typename Scalar>
MeshGeometry<Scalar> PreparedMesh<Scalar>::geometry() const {
  MeshGeometry<Scalar> g;
  g.vertices = vertices.data();
  g.n_vertices = n_vertices();
  g.triangles = triangles.data();
  g.n_triangles = n_triangles();
  g.closed_oriented = closed_oriented;
  g.vertex_normals = closed_oriented ? vertex_normals.data() : nullptr;
  g.edge_normals = closed_oriented ? edge_normals.data() : nullptr;
  return g;
}

template <typename Scalar>
PreparedMesh<Scalar> prepare_mesh(const Scalar* vertices, int64_t n_vertices,
                                  const int32_t* triangles, int64_t n_triangles, int threads,
                                  bool with_signs) {
  HostVector<Scalar> vertex_copy = copy_polling(vertices, 3 * n_vertices, threads);
  HostVector<int32_t> triangle_copy = copy_polling(triangles, 3 * n_triangles, threads);
  return prepare_mesh(std::move(vertex_copy), std::move(triangle_copy), threads, with_signs);
}

template <typename Scalar>
PreparedMesh<Scalar> prepare_mesh(HostVector<Scalar> vertices, HostVector<int32_t> triangles,
                                  int threads, bool with_signs) {
  PreparedMesh<Scalar> mesh;
  mesh.vertices = std::move(vertices);
  mesh.triangles = std::move(triangles);
  if (!with_signs) return mesh;
  HostVector<uint32_t> partner;
  mesh.closed_oriented = pair_half_edges(mesh.triangles.data(), mesh.n_vertices(),
                                         mesh.n_triangles(), threads, partner);
  throw_if_cancelled(cancel_flag());
  if (mesh.closed_oriented) pseudonormals(mesh, partner, threads);
  return mesh;
}

template void check_mesh(const float*, int64_t, const int32_t*, int64_t, int);
template void check_mesh(const double*, int64_t, const int32_t*, int64_t, int);
template struct PreparedMesh<float>;
template struct PreparedMesh<double>;
template PreparedMesh<float> prepare_mesh(const float*, int64_t, const int32_t*, int64_t, int,
                                          bool);
template PreparedMesh<double> prepare_mesh(const double*, int64_t, const int32_t*, int64_t, int,
                                           bool);
template PreparedMesh<float> prepare_mesh(HostVector<float>, HostVector<int32_t>, int, bool);
template PreparedMesh<double> prepare_mesh(HostVector<double>, HostVector<int32_t>, int, bool);

}  // namespace knn
