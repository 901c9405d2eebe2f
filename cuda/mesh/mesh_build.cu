// The GPU build of a mesh's BVH: common/geometry/mesh_bvh.h's LBVH, node for
// node the tree every engine builds (layout: mesh_layout.h).
//
//   1. the box of the triangles' centroids (double): one CUB reduction over
//      the centroids computed on the fly;
//   2. the Morton code of every centroid, and a CUB radix sort of (code,
//      triangle id) over the code's 63 bits: stable, and the ids start
//      ascending, so equal codes end ordered by id;
//   3. the internal nodes from the sorted codes (karras_children), a thread
//      per node, which also names every node's and leaf's parent; the
//      triangles gathered into leaf order;
//   4. the boxes bottom-up: a thread per leaf climbs towards the root; at
//      each node the first child to arrive leaves its box (and, for open
//      meshes, its moments) and stops, the second computes the node from
//      both children, left and right in their fixed roles (exact min / max
//      boxes, left + right moments), so the order of arrival changes no bit.
// The host reads the caller's cancel flag between the steps.
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>

#include <algorithm>
#include <memory>

#include "../../common/geometry/mesh_bvh.h"
#include "../../engine/cancel.h"
#include "../core/pinned_pool.h"
#include "../core/point_order.cuh"
#include "../cuda_engine.h"
#include "cuda_mesh.cuh"
#include "mesh_prepare.cuh"

namespace knn {
namespace cuda {
namespace {

template <typename Scalar>
__device__ void centroid_of(const Scalar* vertices, const int32_t* triangles, int64_t t,
                            double c[3]) {
  const Scalar* a = vertices + 3 * static_cast<int64_t>(triangles[3 * t]);
  const Scalar* b = vertices + 3 * static_cast<int64_t>(triangles[3 * t + 1]);
  const Scalar* p = vertices + 3 * static_cast<int64_t>(triangles[3 * t + 2]);
  for (int d = 0; d < 3; ++d) c[d] = geometry::triangle_centroid(a[d], b[d], p[d]);
}

// The centroid of triangle t as a box of one point.
template <typename Scalar>
struct CentroidAsBox {
  const Scalar* vertices;
  const int32_t* triangles;
  __device__ OrderBox operator()(int64_t t) const {
    OrderBox box;
    centroid_of(vertices, triangles, t, box.lo);
    for (int d = 0; d < 3; ++d) box.hi[d] = box.lo[d];
    return box;
  }
};

template <typename Scalar>
__global__ void morton_codes(const Scalar* vertices, const int32_t* triangles, int64_t n,
                             const OrderBox* bounds, uint64_t* codes, int32_t* ids) {
  const OrderBox b = *bounds;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < n;
       t += int64_t{gridDim.x} * blockDim.x) {
    codes[t] = mesh_walk::triangle_code(vertices, triangles, t, b.lo, b.hi);
    ids[t] = static_cast<int32_t>(t);
  }
}

// Internal node i's children, and the parent of each: parents[c] for an
// internal child c, parents[n - 1 + j] for leaf j.
template <typename Scalar>
__global__ void internal_nodes(const uint64_t* codes, int64_t n, MeshNode<Scalar>* nodes,
                               int32_t* parents) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n - 1;
       i += int64_t{gridDim.x} * blockDim.x) {
    int32_t left = 0, right = 0;
    geometry::karras_children(codes, n, i, &left, &right);
    nodes[i].child[0] = left;
    nodes[i].child[1] = right;
    const int32_t children[2] = {left, right};
    for (const int32_t ref : children)
      parents[geometry::is_leaf_ref(ref) ? n - 1 + geometry::leaf_of_ref(ref) : ref] =
          static_cast<int32_t>(i);
  }
}

// The triangles in leaf order, and (closed meshes) their edges' pseudonormals
// and corners' vertex numbers.
template <typename Scalar>
__global__ void gather_leaves(const Scalar* vertices, const int32_t* triangles,
                              const Scalar* edge_normals, const int32_t* ids, int64_t n,
                              LeafTriangle<Scalar>* leaves, LeafNormals<Scalar>* normals) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < n;
       j += int64_t{gridDim.x} * blockDim.x) {
    LeafTriangle<Scalar> leaf;
    LeafNormals<Scalar> leaf_normals;
    geometry::gather_leaf(vertices, triangles, edge_normals, ids[j], &leaf,
                          normals != nullptr ? &leaf_normals : nullptr);
    leaves[j] = leaf;
    if (normals != nullptr) normals[j] = leaf_normals;
  }
}

// Loads that bypass L1: another thread wrote these before its fence.
template <typename Scalar>
__device__ MeshBox<Scalar> load_box_l2(const MeshBox<Scalar>* box) {
  MeshBox<Scalar> r;
  for (int d = 0; d < 3; ++d) {
    r.lo[d] = __ldcg(box->lo + d);
    r.hi[d] = __ldcg(box->hi + d);
  }
  return r;
}

__device__ geometry::Vec3<double> load3_l2(const geometry::Vec3<double>* v) {
  return {__ldcg(&v->x), __ldcg(&v->y), __ldcg(&v->z)};
}

__device__ geometry::WindingMoments load_moments_l2(const geometry::WindingMoments* m) {
  geometry::WindingMoments r;
  r.area_normal = load3_l2(&m->area_normal);
  r.area_centroid = load3_l2(&m->area_centroid);
  r.area = __ldcg(&m->area);
  return r;
}

// A thread per leaf climbs towards the root (see the top of the file).
template <typename Scalar>
__global__ void climb(const LeafTriangle<Scalar>* leaves, int64_t n, const int32_t* parents,
                      unsigned* visits, MeshNode<Scalar>* nodes, geometry::WindingMoments* moments,
                      geometry::WindingCluster* clusters) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < n;
       j += int64_t{gridDim.x} * blockDim.x) {
    MeshBox<Scalar> box = geometry::leaf_box(leaves[j]);
    int32_t ref = geometry::leaf_ref(static_cast<int32_t>(j));
    int32_t node = parents[n - 1 + j];
    for (;;) {
      MeshNode<Scalar>* parent = nodes + node;
      const int side = parent->child[0] == ref ? 0 : 1;
      parent->box[side] = box;
      __threadfence();
      if (atomicAdd(visits + node, 1u) == 0) break;  // the sibling computes the node
      // left, then right, whichever arrived first
      const MeshBox<Scalar> other = load_box_l2(parent->box + (1 - side));
      box = side == 0 ? geometry::join_boxes(box, other) : geometry::join_boxes(other, box);
      if (moments != nullptr) {
        geometry::WindingMoments m[2];
        for (int c = 0; c < 2; ++c) {
          const int32_t child = parent->child[c];
          m[c] = geometry::is_leaf_ref(child)
                     ? geometry::leaf_moments(leaves[geometry::leaf_of_ref(child)])
                     : load_moments_l2(moments + child);
        }
        const geometry::WindingMoments sum = geometry::combine_moments(m[0], m[1]);
        moments[node] = sum;
        clusters[node] = geometry::node_cluster(sum, box);
      }
      if (node == 0) break;
      ref = node;
      node = parents[node];
    }
  }
}

template <typename Scalar>
std::unique_ptr<MeshEngine<Scalar>> build(const MeshGeometry<Scalar>& mesh,
                                          const MeshParams& params) {
  const int64_t n = mesh.n_triangles, nv = mesh.n_vertices;
  if (n < 1 || n > KNN_MESH_MAX_TRIANGLES || nv < 1 || nv > int64_t{0x7fffffff})
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("a CUDA mesh takes 1 to %d triangles and 1 to 2^31 - 1 vertices, not %lld and %lld",
                KNN_MESH_MAX_TRIANGLES, static_cast<long long>(n), static_cast<long long>(nv)));
  const DeviceBudget budget = device_budget(params.device_memory_limit);
  const size_t needed = mesh_build_bytes_either(nv, n, sizeof(Scalar));
  if (needed > budget.bytes())
    fail(KNN_ERR_DEVICE_OUT_OF_MEMORY,
         format("the CUDA build of a mesh of %lld triangles and %lld vertices needs %zu device "
                "bytes, more than the device budget (%s)",
                static_cast<long long>(n), static_cast<long long>(nv), needed,
                budget.describe().c_str()));
  const volatile int* cancel = cancel_flag();
  throw_if_cancelled(cancel);
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  Stream stream;
  const cudaStream_t s = stream.get();
  const size_t un = static_cast<size_t>(n), internal = un - 1;

  // The mesh as given, then whether it is closed and its pseudonormals
  // (derived here, mesh_prepare.cu: the geometry's own are not read).
  DeviceBuffer<Scalar> vertices(3 * static_cast<size_t>(nv));
  DeviceBuffer<int32_t> triangles(3 * un);
  upload_staged(vertices.get(), mesh.vertices, vertices.size() * sizeof(Scalar), s);
  upload_staged(triangles.get(), mesh.triangles, triangles.size() * sizeof(int32_t), s);
  throw_if_cancelled(cancel);
  DerivedSigns<Scalar> signs = derive_signs(vertices.get(), nv, triangles.get(), n, s);
  const bool closed = signs.closed_oriented;
  DeviceBuffer<Scalar>& edge_normals = signs.edge_normals;

  // What the mesh keeps, then the build's scratch (mesh_layout.h counts both).
  DeviceBuffer<MeshNode<Scalar>> nodes(internal);
  DeviceBuffer<LeafTriangle<Scalar>> leaves(un);
  DeviceBuffer<LeafNormals<Scalar>> normals(closed ? un : 0);
  DeviceBuffer<geometry::WindingCluster> clusters(closed ? 0 : internal);
  DeviceBuffer<uint64_t> codes_a(un), codes_b(un);
  DeviceBuffer<int32_t> ids_a(un), ids_b(un);
  DeviceBuffer<OrderBox> bounds(1);
  DeviceBuffer<int32_t> parents(internal + un);
  DeviceBuffer<unsigned> visits(internal);
  DeviceBuffer<geometry::WindingMoments> moments(closed ? 0 : internal);

  // 1-2. The centroids' box, the codes, the sort.
  const auto centroids =
      thrust::make_transform_iterator(thrust::counting_iterator<int64_t>(0),
                                      CentroidAsBox<Scalar>{vertices.get(), triangles.get()});
  const double inf = __builtin_huge_val();
  const OrderBox empty{{inf, inf, inf}, {-inf, -inf, -inf}};
  cub::DoubleBuffer<uint64_t> codes(codes_a.get(), codes_b.get());
  cub::DoubleBuffer<int32_t> ids(ids_a.get(), ids_b.get());
  size_t reduce_bytes = 0, sort_bytes = 0;
  check(cub::DeviceReduce::Reduce(nullptr, reduce_bytes, centroids, bounds.get(), n, BoxUnion(),
                                  empty, s),
        "mesh build: centroid box (size)");
  check(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, codes, ids, n, 0,
                                        3 * geometry::kMortonBitsPerAxis, s),
        "mesh build: radix sort (size)");
  DeviceBuffer<unsigned char> cub_temp(
      checked_cub_temp(std::max(reduce_bytes, sort_bytes), cub_temp_bytes(n)));
  check(cub::DeviceReduce::Reduce(cub_temp.get(), reduce_bytes, centroids, bounds.get(), n,
                                  BoxUnion(), empty, s),
        "mesh build: centroid box");
  morton_codes<<<blocks_for(morton_codes<Scalar>, n), kBlock, 0, s>>>(
      vertices.get(), triangles.get(), n, bounds.get(), codes_a.get(), ids_a.get());
  check_launch("mesh build: morton_codes");
  check(cub::DeviceRadixSort::SortPairs(cub_temp.get(), sort_bytes, codes, ids, n, 0,
                                        3 * geometry::kMortonBitsPerAxis, s),
        "mesh build: radix sort");
  stream.synchronize();
  throw_if_cancelled(cancel);

  // 3. Internal nodes, parents, leaves.
  if (n > 1) {
    internal_nodes<<<blocks_for(internal_nodes<Scalar>, n - 1), kBlock, 0, s>>>(
        codes.Current(), n, nodes.get(), parents.get());
    check_launch("mesh build: internal_nodes");
  }
  gather_leaves<<<blocks_for(gather_leaves<Scalar>, n), kBlock, 0, s>>>(
      vertices.get(), triangles.get(), edge_normals.get(), ids.Current(), n, leaves.get(),
      normals.get());
  check_launch("mesh build: gather_leaves");

  // 4. Boxes (and moments and clusters) bottom-up.
  if (n > 1) {
    check(cudaMemsetAsync(visits.get(), 0, internal * sizeof(unsigned), s),
          "mesh build: cudaMemsetAsync");
    climb<<<blocks_for(climb<Scalar>, n), kBlock, 0, s>>>(
        leaves.get(), n, parents.get(), visits.get(), nodes.get(), moments.get(), clusters.get());
    check_launch("mesh build: climb");
  }
  // The mesh's box (the query orders its points in it): the root's
  // children's, or the one triangle's.
  MeshBox<Scalar> box;
  if (n > 1) {
    MeshNode<Scalar> root;
    check(cudaMemcpyAsync(&root, nodes.get(), sizeof root, cudaMemcpyDeviceToHost, s),
          "mesh build: cudaMemcpyAsync");
    stream.synchronize();
    for (int d = 0; d < 3; ++d) {
      box.lo[d] = std::min(root.box[0].lo[d], root.box[1].lo[d]);
      box.hi[d] = std::max(root.box[0].hi[d], root.box[1].hi[d]);
    }
  } else {
    for (int d = 0; d < 3; ++d) {
      box.lo[d] = box.hi[d] = mesh.vertices[3 * static_cast<int64_t>(mesh.triangles[0]) + d];
      for (int k = 1; k < 3; ++k) {
        const Scalar x = mesh.vertices[3 * static_cast<int64_t>(mesh.triangles[k]) + d];
        box.lo[d] = std::min(box.lo[d], x);
        box.hi[d] = std::max(box.hi[d], x);
      }
    }
  }
  stream.synchronize();
  throw_if_cancelled(cancel);
  return std::make_unique<CudaMesh<Scalar>>(device, n, closed, std::move(nodes), std::move(leaves),
                                            std::move(normals), std::move(signs.vertex_normals),
                                            std::move(clusters), box);
}

}  // namespace

template <typename Scalar>
std::unique_ptr<MeshEngine<Scalar>> build_mesh(const MeshGeometry<Scalar>& mesh,
                                               const MeshParams& params) {
  return build(mesh, params);
}

KNN_INSTANTIATE_BUILDER(KNN_MESH_BUILDER);

}  // namespace cuda
}  // namespace knn
