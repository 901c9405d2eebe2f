// The closed-and-oriented test and the pseudonormals of a mesh on the device
// (mesh_prepare.cuh), by the definitions the host preparation uses
// (common/geometry/pseudonormals.h), so the same bits:
//   1. every half-edge's undirected edge as one key (smaller vertex x
//      n_vertices + larger), radix sorted with the half-edge (stable, so a
//      key's half-edges stay in ascending order); a triangle repeating a
//      vertex leaves the mesh open;
//   2. a thread per run of equal keys: exactly two half-edges, run in
//      opposite directions, each the other's partner; anything else leaves
//      the mesh open (a flag read back once);
//   3. closed meshes: every triangle's unit normal, every half-edge's
//      pseudonormal (its triangle's and its partner's), the corners sorted
//      by vertex (stable: corner order within a vertex) and a thread per
//      vertex summing its corners' terms in that order.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>

#include "../../common/geometry/pseudonormals.h"
#include "../../engine/cancel.h"
#include "../core/radix_sort_temp.cuh"
#include "../cuda_engine.h"
#include "mesh_prepare.cuh"

namespace knn {
namespace cuda {
namespace {

using geometry::Double3;

__global__ void half_edge_keys(const int32_t* triangles, int64_t halves, int64_t n_vertices,
                               uint64_t* keys, uint32_t* ids, int* open) {
  for (int64_t h = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; h < halves;
       h += int64_t{gridDim.x} * blockDim.x) {
    const int32_t from = geometry::half_edge_from(triangles, h);
    const int32_t to = geometry::half_edge_to(triangles, h);
    if (from == to) *open = 1;  // a triangle repeating a vertex
    const uint64_t low = static_cast<uint64_t>(min(from, to));
    const uint64_t high = static_cast<uint64_t>(max(from, to));
    keys[h] = low * static_cast<uint64_t>(n_vertices) + high;
    ids[h] = static_cast<uint32_t>(h);
  }
}

__global__ void pair_runs(const uint64_t* keys, const uint32_t* ids, int64_t halves,
                          const int32_t* triangles, uint32_t* partner, int* open) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < halves;
       j += int64_t{gridDim.x} * blockDim.x) {
    if (j > 0 && keys[j - 1] == keys[j]) continue;  // not the start of a run
    const bool two =
        j + 1 < halves && keys[j + 1] == keys[j] && (j + 2 == halves || keys[j + 2] != keys[j]);
    if (!two) {
      *open = 1;
      continue;
    }
    const uint32_t h0 = ids[j], h1 = ids[j + 1];
    // Opposite directions: the two runs start at different ends.
    if (geometry::half_edge_from(triangles, h0) == geometry::half_edge_from(triangles, h1)) {
      *open = 1;
      continue;
    }
    partner[h0] = h1;
    partner[h1] = h0;
  }
}

template <typename Scalar>
__global__ void unit_normals(const Scalar* vertices, const int32_t* triangles, int64_t n,
                             Double3* unit) {
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < n;
       t += int64_t{gridDim.x} * blockDim.x)
    unit[t] = geometry::unit_normal(vertices, triangles, t);
}

template <typename Scalar>
__global__ void edge_normals_of(const Double3* unit, const uint32_t* partner, int64_t halves,
                                Scalar* edge_normals) {
  for (int64_t h = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; h < halves;
       h += int64_t{gridDim.x} * blockDim.x)
    geometry::store3(edge_normals + 3 * h, geometry::edge_sum(unit[h / 3], unit[partner[h] / 3]));
}

__global__ void corner_keys(const int32_t* triangles, int64_t corners, uint64_t* keys,
                            uint32_t* ids) {
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < corners;
       c += int64_t{gridDim.x} * blockDim.x) {
    keys[c] = static_cast<uint64_t>(triangles[c]);
    ids[c] = static_cast<uint32_t>(c);
  }
}

// Vertex v's corners are the sorted run of key v (none for a vertex no
// triangle uses: a zero pseudonormal, as on the host).
template <typename Scalar>
__global__ void vertex_normals_of(const Scalar* vertices, const int32_t* triangles,
                                  const Double3* unit, const uint64_t* keys, const uint32_t* ids,
                                  int64_t corners, int64_t n_vertices, Scalar* vertex_normals) {
  for (int64_t v = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; v < n_vertices;
       v += int64_t{gridDim.x} * blockDim.x) {
    int64_t lo = 0, hi = corners;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (keys[mid] < static_cast<uint64_t>(v))
        lo = mid + 1;
      else
        hi = mid;
    }
    Double3 sum{0, 0, 0};
    for (int64_t j = lo; j < corners && keys[j] == static_cast<uint64_t>(v); ++j)
      sum = geometry::add_corner(sum, geometry::corner_angle(vertices, triangles, ids[j]),
                                 unit[ids[j] / 3]);
    geometry::store3(vertex_normals + 3 * v, sum);
  }
}

}  // namespace

template <typename Scalar>
DerivedSigns<Scalar> derive_signs(const Scalar* vertices, int64_t n_vertices,
                                  const int32_t* triangles, int64_t n_triangles, cudaStream_t s) {
  const int64_t halves = 3 * n_triangles;
  const size_t uh = static_cast<size_t>(halves);
  DerivedSigns<Scalar> signs;
  DeviceBuffer<uint64_t> keys_a(uh), keys_b(uh);
  DeviceBuffer<uint32_t> ids_a(uh), ids_b(uh), partner(uh);
  DeviceBuffer<int> open(1);
  check(cudaMemsetAsync(open.get(), 0, sizeof(int), s), "mesh prepare: cudaMemsetAsync");
  half_edge_keys<<<blocks_for(half_edge_keys, halves), kBlock, 0, s>>>(
      triangles, halves, n_vertices, keys_a.get(), ids_a.get(), open.get());
  check_launch("mesh prepare: half_edge_keys");
  const uint64_t nv = static_cast<uint64_t>(n_vertices);
  const int edge_bits = key_bits_below<uint64_t>(nv * nv),
            vertex_bits = key_bits_below<uint64_t>(nv);
  cub::DoubleBuffer<uint64_t> keys(keys_a.get(), keys_b.get());
  cub::DoubleBuffer<uint32_t> ids(ids_a.get(), ids_b.get());
  size_t edge_bytes = 0, corner_bytes = 0;
  check(cub::DeviceRadixSort::SortPairs(nullptr, edge_bytes, keys, ids, halves, 0, edge_bits, s),
        "mesh prepare: radix sort (size)");
  check(
      cub::DeviceRadixSort::SortPairs(nullptr, corner_bytes, keys, ids, halves, 0, vertex_bits, s),
      "mesh prepare: radix sort (size)");
  DeviceBuffer<unsigned char> temp(
      checked_cub_temp(std::max(edge_bytes, corner_bytes), cub_temp_bytes(halves)));
  check(cub::DeviceRadixSort::SortPairs(temp.get(), edge_bytes, keys, ids, halves, 0, edge_bits, s),
        "mesh prepare: radix sort (edges)");
  pair_runs<<<blocks_for(pair_runs, halves), kBlock, 0, s>>>(keys.Current(), ids.Current(), halves,
                                                             triangles, partner.get(), open.get());
  check_launch("mesh prepare: pair_runs");
  int is_open = 0;
  check(cudaMemcpyAsync(&is_open, open.get(), sizeof is_open, cudaMemcpyDeviceToHost, s),
        "mesh prepare: cudaMemcpyAsync");
  check(cudaStreamSynchronize(s), "mesh prepare: cudaStreamSynchronize");
  throw_if_cancelled(cancel_flag());
  if (is_open != 0) return signs;

  signs.closed_oriented = true;
  signs.edge_normals = DeviceBuffer<Scalar>(9 * static_cast<size_t>(n_triangles));
  signs.vertex_normals = DeviceBuffer<Scalar>(3 * static_cast<size_t>(n_vertices));
  DeviceBuffer<Double3> unit(static_cast<size_t>(n_triangles));
  unit_normals<<<blocks_for(unit_normals<Scalar>, n_triangles), kBlock, 0, s>>>(
      vertices, triangles, n_triangles, unit.get());
  check_launch("mesh prepare: unit_normals");
  edge_normals_of<<<blocks_for(edge_normals_of<Scalar>, halves), kBlock, 0, s>>>(
      unit.get(), partner.get(), halves, signs.edge_normals.get());
  check_launch("mesh prepare: edge_normals_of");
  keys = cub::DoubleBuffer<uint64_t>(keys_a.get(), keys_b.get());
  ids = cub::DoubleBuffer<uint32_t>(ids_a.get(), ids_b.get());
  corner_keys<<<blocks_for(corner_keys, halves), kBlock, 0, s>>>(triangles, halves, keys_a.get(),
                                                                 ids_a.get());
  check_launch("mesh prepare: corner_keys");
  check(cub::DeviceRadixSort::SortPairs(temp.get(), corner_bytes, keys, ids, halves, 0, vertex_bits,
                                        s),
        "mesh prepare: radix sort (corners)");
  vertex_normals_of<<<blocks_for(vertex_normals_of<Scalar>, n_vertices), kBlock, 0, s>>>(
      vertices, triangles, unit.get(), keys.Current(), ids.Current(), halves, n_vertices,
      signs.vertex_normals.get());
  check_launch("mesh prepare: vertex_normals_of");
  check(cudaStreamSynchronize(s), "mesh prepare: cudaStreamSynchronize");
  throw_if_cancelled(cancel_flag());
  return signs;
}

template DerivedSigns<float> derive_signs(const float*, int64_t, const int32_t*, int64_t,
                                          cudaStream_t);
template DerivedSigns<double> derive_signs(const double*, int64_t, const int32_t*, int64_t,
                                           cudaStream_t);

}  // namespace cuda
}  // namespace knn
