// The build of the mesh BVH on the CPU, step by step as
// common/geometry/mesh_bvh.h defines it: centroids and their bounds in
// double, Morton codes, the triangles sorted by (code, id) with a stable
// radix sort, the internal nodes from Karras' rules (every node on its own,
// in parallel), then the boxes (and the winding clusters of open meshes)
// bottom-up: every leaf climbs towards the root, and the second child to
// reach a node finishes it (an atomic count per node), as on the GPU. A
// node's values are a function of its children's only, so the result does
// not depend on the threads or their timing.
//
// Cancellation: the flag is read between the runs of every pass over the
// triangles (engine/cancel.h for_each_run) and between the sort's passes.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <vector>

#include "../../common/geometry/mesh_bvh.h"
#include "../../common/geometry/mesh_winding_tree.h"
#include "../../engine/cancel.h"
#include "../../engine/progress.h"
#include "../../include/knn_gpgpu.h"
#include "../radix_sort.h"
#include "mesh_tree.h"

namespace knn {
namespace omp {
namespace {

// Progress units of a build: the codes, the sort, the nodes, the boxes.
constexpr int64_t kBuildSteps = 4;

// The centroids' bounds per axis, in double (min and max are exact, so the
// order of the reduction does not matter).
struct CentroidBounds {
  double lo[3], hi[3];
};

template <typename Scalar>
CentroidBounds centroid_bounds(const MeshGeometry<Scalar>& mesh, const double* centroids,
                               int threads, const volatile int* cancel) {
  const double inf = std::numeric_limits<double>::infinity();
  double lo0 = inf, lo1 = inf, lo2 = inf, hi0 = -inf, hi1 = -inf, hi2 = -inf;
  for_each_run(mesh.n_triangles, cancel, [&](int64_t begin, int64_t end) {
#pragma omp parallel for num_threads(threads) reduction(min              \
                                                        : lo0, lo1, lo2) \
    reduction(max                                                        \
              : hi0, hi1, hi2)
    for (int64_t t = begin; t < end; ++t) {
      const double* c = centroids + 3 * t;
      lo0 = std::min(lo0, c[0]), hi0 = std::max(hi0, c[0]);
      lo1 = std::min(lo1, c[1]), hi1 = std::max(hi1, c[1]);
      lo2 = std::min(lo2, c[2]), hi2 = std::max(hi2, c[2]);
    }
  });
  return CentroidBounds{{lo0, lo1, lo2}, {hi0, hi1, hi2}};
}

}  // namespace

template <typename Scalar>
MeshTree<Scalar> build_mesh_tree(const MeshGeometry<Scalar>& mesh, int threads) {
  const volatile int* cancel = cancel_flag();
  knn_progress* const report = progress();
  progress_begin(report, KNN_PROGRESS_BUILD, kBuildSteps);
  const int64_t n = mesh.n_triangles;
  const Scalar* v = mesh.vertices;
  const int32_t* tri = mesh.triangles;
  MeshTree<Scalar> tree;
  tree.n_triangles = n;
  tree.closed_oriented = mesh.closed_oriented;

  // 1. Centroids, their bounds, the codes; ids ascending for the sort.
  std::vector<double> centroids;
  resize_polling(centroids, static_cast<size_t>(3 * n), cancel);
  for_each_run(n, cancel, [&](int64_t begin, int64_t end) {
#pragma omp parallel for num_threads(threads)
    for (int64_t t = begin; t < end; ++t)
      for (int d = 0; d < 3; ++d)
        centroids[3 * t + d] = geometry::triangle_centroid(v[3 * int64_t{tri[3 * t]} + d],
                                                           v[3 * int64_t{tri[3 * t + 1]} + d],
                                                           v[3 * int64_t{tri[3 * t + 2]} + d]);
  });
  const CentroidBounds bounds = centroid_bounds(mesh, centroids.data(), threads, cancel);
  std::vector<uint64_t> codes, code_buffer;
  std::vector<int32_t> order, order_buffer;
  resize_polling(codes, static_cast<size_t>(n), cancel);
  resize_polling(order, static_cast<size_t>(n), cancel);
  for_each_run(n, cancel, [&](int64_t begin, int64_t end) {
#pragma omp parallel for num_threads(threads)
    for (int64_t t = begin; t < end; ++t) {
      uint32_t cell[3];
      for (int d = 0; d < 3; ++d)
        cell[d] = geometry::morton_cell(centroids[3 * t + d], bounds.lo[d], bounds.hi[d]);
      codes[t] = geometry::morton_code3(cell[0], cell[1], cell[2]);
      order[t] = static_cast<int32_t>(t);
    }
  });
  centroids = std::vector<double>();
  progress_add(report, 1);

  // 2. Sorted by (code, id): stable on ids given ascending.
  resize_polling(code_buffer, static_cast<size_t>(n), cancel);
  resize_polling(order_buffer, static_cast<size_t>(n), cancel);
  radix_sort(codes.data(), order.data(), code_buffer.data(), order_buffer.data(), n,
             3 * geometry::kMortonBitsPerAxis, threads, cancel);
  code_buffer = std::vector<uint64_t>();
  order_buffer = std::vector<int32_t>();
  resize_polling(tree.leaves, static_cast<size_t>(n), cancel);
  if (mesh.closed_oriented) {
    resize_polling(tree.leaf_normals, static_cast<size_t>(n), cancel);
    tree.vertex_normals.assign(mesh.vertex_normals, mesh.vertex_normals + 3 * mesh.n_vertices);
  }
  for_each_run(n, cancel, [&](int64_t begin, int64_t end) {
#pragma omp parallel for num_threads(threads)
    for (int64_t p = begin; p < end; ++p) {
      const int64_t t = order[p];
      geometry::gather_leaf(v, tri, mesh.closed_oriented ? mesh.edge_normals : nullptr, t,
                            &tree.leaves[p],
                            mesh.closed_oriented ? &tree.leaf_normals[p] : nullptr);
    }
  });
  order = std::vector<int32_t>();
  progress_add(report, 1);

  // 3. The internal nodes and every node's parent (-1: the root).
  const int64_t inner = n - 1;
  resize_polling(tree.nodes, static_cast<size_t>(inner), cancel);
  std::vector<int32_t> node_parent, leaf_parent;
  resize_polling(node_parent, static_cast<size_t>(inner), cancel);
  resize_polling(leaf_parent, static_cast<size_t>(n), cancel);
  if (inner > 0) node_parent[0] = -1;
  for_each_run(inner, cancel, [&](int64_t begin, int64_t end) {
#pragma omp parallel for num_threads(threads)
    for (int64_t i = begin; i < end; ++i) {
      MeshNode<Scalar>& node = tree.nodes[i];
      geometry::karras_children(codes.data(), n, i, &node.child[0], &node.child[1]);
      for (const int32_t child : node.child) {
        if (geometry::is_leaf_ref(child))
          leaf_parent[geometry::leaf_of_ref(child)] = static_cast<int32_t>(i);
        else
          node_parent[child] = static_cast<int32_t>(i);
      }
    }
  });
  codes = std::vector<uint64_t>();
  progress_add(report, 1);

  // 4. Boxes (and clusters) bottom-up: each leaf writes its box into its
  // parent; the second child to arrive finishes the parent and climbs on.
  const bool open = !mesh.closed_oriented;
  std::vector<geometry::WindingMoments> moments;
  if (open) {
    resize_polling(moments, static_cast<size_t>(inner), cancel);
    resize_polling(tree.clusters, static_cast<size_t>(inner), cancel);
  }
  const std::unique_ptr<std::atomic<uint8_t>[]> arrived(new std::atomic<uint8_t>[inner]);
  for_each_run(inner, cancel, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) arrived[i].store(0, std::memory_order_relaxed);
  });
  const auto child_moments = [&](int32_t ref) {
    return geometry::is_leaf_ref(ref)
               ? geometry::leaf_moments(tree.leaves[geometry::leaf_of_ref(ref)])
               : moments[ref];
  };
  for_each_run(n, cancel, [&](int64_t begin, int64_t end) {
#pragma omp parallel for num_threads(threads)
    for (int64_t p = begin; p < end; ++p) {
      int32_t ref = geometry::leaf_ref(static_cast<int32_t>(p));
      MeshBox<Scalar> box = geometry::leaf_box(tree.leaves[p]);
      int32_t parent = inner > 0 ? leaf_parent[p] : -1;
      while (parent >= 0) {
        MeshNode<Scalar>& node = tree.nodes[parent];
        node.box[node.child[0] == ref ? 0 : 1] = box;
        // The first child to arrive stops; the second sees its box (acquire).
        if (arrived[parent].fetch_add(1, std::memory_order_acq_rel) == 0) break;
        box = geometry::join_boxes(node.box[0], node.box[1]);
        if (open) {
          moments[parent] =
              geometry::combine_moments(child_moments(node.child[0]), child_moments(node.child[1]));
          tree.clusters[parent] = geometry::node_cluster(moments[parent], box);
        }
        ref = parent;
        parent = node_parent[parent];
      }
    }
  });
  progress_add(report, 1);
  return tree;
}

template MeshTree<float> build_mesh_tree(const MeshGeometry<float>&, int);
template MeshTree<double> build_mesh_tree(const MeshGeometry<double>&, int);

}  // namespace omp
}  // namespace knn
