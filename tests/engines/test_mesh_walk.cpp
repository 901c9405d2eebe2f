// The CUDA mesh engine's arithmetic replayed on the host, where CI has no
// GPU: the build of cuda/mesh/mesh_build.cu step by step with the functions
// its kernels call (cuda/mesh/mesh_walk.h and common/geometry/mesh_layout.h:
// codes, leaves, boxes, moments, clusters), its bottom-up pass in shuffled
// orders of arrival (one interleaving of the GPU's threads each), and its
// per-point answers over the replayed tree (geometry::answer_point, the walk
// both engines run). The tree must not depend on the order of arrival, and
// the answers must be the OpenMP engine's bit for bit: ids, squared distances, closest points,
// weights and signed distances, signs of open meshes included (winding sums over the tree,
// sensitive to every node and cluster).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "../../common/geometry/mesh_bvh.h"
#include "../../common/geometry/mesh_layout.h"
#include "../../common/geometry/mesh_walk.h"
#include "../../cuda/mesh/mesh_walk.h"
#include "../../engine/mesh_engine.h"
#include "../../openmp/mesh/mesh_tree.h"
#include "mesh_test_cases.h"

namespace knn_test {
namespace {

using knn::cuda::LeafNormals;
using knn::cuda::LeafTriangle;
using knn::cuda::MeshBox;
using knn::cuda::MeshNode;
namespace walk = knn::cuda::mesh_walk;
namespace geo = knn::geometry;

template <class S>
struct ReplayedMesh {
  int64_t n = 0;
  bool closed = false;
  std::vector<MeshNode<S>> nodes;
  std::vector<LeafTriangle<S>> leaves;
  std::vector<LeafNormals<S>> normals;
  std::vector<S> vertex_normals;
  std::vector<geo::WindingCluster> clusters;

  walk::MeshView<S> view() const {
    return {
        {nodes.data(), leaves.data(), closed ? normals.data() : nullptr,
         closed ? vertex_normals.data() : nullptr, closed ? nullptr : clusters.data(), n, closed},
        {}};
  }
};

// mesh_build.cu, one step after the other; the bottom-up pass takes the
// leaves in an order shuffled by `seed`, each climbing while it is the
// second to arrive, as a GPU thread does.
template <class S>
ReplayedMesh<S> replay_build(const TestMesh<S>& mesh, uint64_t seed) {
  ReplayedMesh<S> r;
  const int64_t n = r.n = mesh.n_triangles();
  r.closed = mesh.closed;
  const S* v = mesh.vertices.data();
  const int32_t* tri = mesh.triangles.data();
  // 1. The centroids' box (the GPU's CUB reduction: exact min and max).
  double lo[3], hi[3];
  for (int d = 0; d < 3; ++d) {
    lo[d] = std::numeric_limits<double>::infinity();
    hi[d] = -lo[d];
  }
  for (int64_t t = 0; t < n; ++t)
    for (int d = 0; d < 3; ++d) {
      const double c = geo::triangle_centroid(v[3 * tri[3 * t] + d], v[3 * tri[3 * t + 1] + d],
                                              v[3 * tri[3 * t + 2] + d]);
      lo[d] = std::fmin(lo[d], c);
      hi[d] = std::fmax(hi[d], c);
    }
  // 2. Codes, and the stable sort of (code, id).
  std::vector<uint64_t> codes(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) codes[t] = walk::triangle_code(v, tri, t, lo, hi);
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return codes[a] < codes[b]; });
  std::vector<uint64_t> sorted(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) sorted[j] = codes[order[j]];
  // 3. Internal nodes and parents; the leaves.
  const int64_t internal = n - 1;
  r.nodes.resize(static_cast<size_t>(internal));
  std::vector<int32_t> parents(static_cast<size_t>(internal + n), -1);
  for (int64_t i = 0; i < internal; ++i) {
    geo::karras_children(sorted.data(), n, i, &r.nodes[i].child[0], &r.nodes[i].child[1]);
    for (const int32_t ref : r.nodes[i].child)
      parents[geo::is_leaf_ref(ref) ? internal + geo::leaf_of_ref(ref) : ref] =
          static_cast<int32_t>(i);
  }
  r.leaves.resize(static_cast<size_t>(n));
  if (r.closed) r.normals.resize(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j)
    geo::gather_leaf(v, tri, r.closed ? mesh.edge_normals.data() : nullptr, order[j], &r.leaves[j],
                     r.closed ? &r.normals[j] : nullptr);
  r.vertex_normals = mesh.vertex_normals;
  // 4. Boxes, moments and clusters bottom-up.
  std::vector<int32_t> arrivals(static_cast<size_t>(n));
  std::iota(arrivals.begin(), arrivals.end(), 0);
  std::shuffle(arrivals.begin(), arrivals.end(), std::mt19937_64(seed));
  std::vector<int> visits(static_cast<size_t>(internal), 0);
  std::vector<geo::WindingMoments> moments(static_cast<size_t>(internal));
  if (!r.closed) r.clusters.resize(static_cast<size_t>(internal));
  for (const int32_t j : internal > 0 ? arrivals : std::vector<int32_t>()) {
    MeshBox<S> box = geo::leaf_box(r.leaves[j]);
    int32_t ref = geo::leaf_ref(j);
    int32_t node = parents[internal + j];
    for (;;) {
      MeshNode<S>& parent = r.nodes[node];
      const int side = parent.child[0] == ref ? 0 : 1;
      parent.box[side] = box;
      if (visits[node]++ == 0) break;
      const MeshBox<S> other = parent.box[1 - side];
      box = side == 0 ? geo::join_boxes(box, other) : geo::join_boxes(other, box);
      if (!r.closed) {
        geo::WindingMoments m[2];
        for (int c = 0; c < 2; ++c)
          m[c] = geo::is_leaf_ref(parent.child[c])
                     ? geo::leaf_moments(r.leaves[geo::leaf_of_ref(parent.child[c])])
                     : moments[parent.child[c]];
        moments[node] = geo::combine_moments(m[0], m[1]);
        r.clusters[node] = geo::node_cluster(moments[node], box);
      }
      if (node == 0) break;
      ref = node;
      node = parents[node];
    }
  }
  return r;
}

template <class S>
Answers<S> replay_queries(const ReplayedMesh<S>& mesh, const std::vector<S>& points,
                          S max_distance) {
  const int64_t m = static_cast<int64_t>(points.size() / 3);
  Answers<S> a(m);
  const walk::PointOutputs<S> out{a.ids.data(), a.sq.data(), a.closest.data(), a.bary.data(),
                                  a.signed_d.data()};
  const S max_sq = knn::mul_rn(max_distance, max_distance);
  for (int64_t i = 0; i < m; ++i) {
    bool overflow = false;
    geo::answer_point(mesh.view(), points.data(), i, max_sq, out, &overflow);
    EXPECT_FALSE(overflow) << "point " << i;
  }
  return a;
}

template <class S>
bool same_tree(const ReplayedMesh<S>& a, const ReplayedMesh<S>& b) {
  const auto bytes_equal = [](const auto& x, const auto& y) {
    return x.size() == y.size() &&
           (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) == 0);
  };
  return bytes_equal(a.nodes, b.nodes) && bytes_equal(a.leaves, b.leaves) &&
         bytes_equal(a.clusters, b.clusters);
}

// The replayed GPU tree is the OpenMP engine's, node for node, leaf for leaf
// and cluster for cluster (the two layouts hold the same fields), and the
// winding sums over both are the same bits.
template <class S>
void expect_same_as_openmp_tree(const TestMesh<S>& mesh, const ReplayedMesh<S>& gpu,
                                const std::vector<S>& points) {
  const knn::omp::MeshTree<S> cpu = knn::omp::build_mesh_tree(mesh.geometry(), 2);
  ASSERT_EQ(cpu.nodes.size(), gpu.nodes.size());
  for (size_t i = 0; i < gpu.nodes.size(); ++i)
    for (int c = 0; c < 2; ++c) {
      ASSERT_EQ(cpu.nodes[i].child[c], gpu.nodes[i].child[c]) << "node " << i;
      for (int d = 0; d < 3; ++d) {
        ASSERT_EQ(std::memcmp(&cpu.nodes[i].box[c].lo[d], &gpu.nodes[i].box[c].lo[d], sizeof(S)), 0)
            << "node " << i;
        ASSERT_EQ(std::memcmp(&cpu.nodes[i].box[c].hi[d], &gpu.nodes[i].box[c].hi[d], sizeof(S)), 0)
            << "node " << i;
      }
    }
  ASSERT_EQ(cpu.leaves.size(), gpu.leaves.size());
  for (size_t j = 0; j < gpu.leaves.size(); ++j) {
    ASSERT_EQ(cpu.leaves[j].id, gpu.leaves[j].id) << "leaf " << j;
    ASSERT_EQ(std::memcmp(cpu.leaves[j].corner, gpu.leaves[j].corner, sizeof(S) * 9), 0);
  }
  ASSERT_EQ(cpu.clusters.size(), gpu.clusters.size());
  if (!gpu.clusters.empty()) {
    ASSERT_EQ(std::memcmp(cpu.clusters.data(), gpu.clusters.data(),
                          gpu.clusters.size() * sizeof(gpu.clusters[0])),
              0);
  }
  if (mesh.closed) return;
  for (size_t i = 0; i < points.size() / 3; ++i) {
    bool overflow = false;
    const geo::Vec3<double> q{points[3 * i], points[3 * i + 1], points[3 * i + 2]};
    const double got = geo::solid_angle_sum<S>(gpu.view(), q, &overflow);
    const double expected = geo::solid_angle_sum<S>(cpu.arrays(), q, &overflow);
    ASSERT_EQ(std::memcmp(&got, &expected, sizeof got), 0) << "point " << i;
  }
}

template <class S>
void replay_cases() {
  for (auto& c : awkward_meshes<S>()) {
    SCOPED_TRACE(c.name);
    const ReplayedMesh<S> gpu = replay_build(c.mesh, 1);
    EXPECT_TRUE(same_tree(gpu, replay_build(c.mesh, 2))) << "the order of arrival changed the tree";
    const auto cpu = knn::omp::build_mesh(c.mesh.geometry(), knn::MeshParams{});
    const std::vector<S> points = points_for(c.mesh, 500, 11);
    expect_same_as_openmp_tree(c.mesh, gpu, points);
    for (const double max_distance :
         {std::numeric_limits<double>::infinity(), 0.1 * c.scale, 0.0}) {
      SCOPED_TRACE(max_distance);
      const S limit = static_cast<S>(max_distance);
      const Answers<S> got = replay_queries(gpu, points, limit);
      const Answers<S> expected = engine_closest(*cpu, points, limit);
      EXPECT_SAME_BITS(expected.ids, got.ids);
      EXPECT_SAME_BITS(expected.sq, got.sq);
      EXPECT_SAME_BITS(expected.closest, got.closest);
      EXPECT_SAME_BITS(expected.bary, got.bary);
      EXPECT_SAME_BITS(expected.signed_d, got.signed_d);
    }
  }
}

TEST(MeshWalk, ReplayedGpuEngineMatchesOpenMpFloat) { replay_cases<float>(); }

TEST(MeshWalk, ReplayedGpuEngineMatchesOpenMpDouble) { replay_cases<double>(); }

// An open mesh whose winding sums use far clusters: the signs inside the
// tube and outside it.
TEST(MeshWalk, OpenMeshSignsFromTheClusters) {
  const TestMesh<double> mesh = open_torus<double>(60, 30);
  const ReplayedMesh<double> gpu = replay_build(mesh, 3);
  const std::vector<double> points = {-1, 0, 0, 0, -1, 0, 0, 0, 0, 5, 5, 5, -1, 0, 0.9};
  const Answers<double> a = replay_queries(gpu, points, std::numeric_limits<double>::infinity());
  EXPECT_LT(a.signed_d[0], 0);
  EXPECT_LT(a.signed_d[1], 0);
  EXPECT_GT(a.signed_d[2], 0);
  EXPECT_GT(a.signed_d[3], 0);
  EXPECT_GT(a.signed_d[4], 0);
  const auto cpu = knn::omp::build_mesh(mesh.geometry(), knn::MeshParams{});
  EXPECT_SAME_BITS(engine_closest(*cpu, points, std::numeric_limits<double>::infinity()).signed_d,
                   a.signed_d);
}

}  // namespace
}  // namespace knn_test
