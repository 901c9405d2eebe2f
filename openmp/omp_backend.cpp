// The OpenMP engine behind engine/backend.h (openmp/omp_backend.h): each
// function forwards to the engine's own (omp_engine.h, index_engine.h,
// quadtree_engine.h, mesh_engine.h). A host backend: no devices, no device
// memory (the defaults of Backend).
#include "omp_backend.h"

#include <memory>
#include <vector>

#include "../engine/index_engine.h"
#include "../engine/mesh_engine.h"
#include "../engine/quadtree_engine.h"
#include "../engine/stats_engine.h"
#include "../include/knn_gpgpu.h"
#include "kd_search.h"
#include "omp_engine.h"

namespace knn {
namespace omp {
namespace {

class TreeSearch final : public ClassicTreeSearch {
 public:
  TreeSearch(const Node* tree, int64_t n, int root_dim)
      : tree_(classic_search_tree(tree, n, root_dim)) {}
  void knn(const float* queries, int64_t m, int k, int threads, int32_t* indices,
           float* sq_distances) const override {
    search_knn(tree_, queries, m, k, threads, indices, sq_distances);
  }

 private:
  SearchTree tree_;
};

// The backend's build_kdtree_index_of: the kd-tree of another engine's
// points, from a host copy of them.
KNN_DECLARE_BUILDER(KNN_KDTREE_INDEX_OF_BUILDER) {
  std::vector<Scalar> points(static_cast<size_t>(source.size()) *
                             static_cast<size_t>(source.dim()));
  if (!points.empty()) source.copy_points(points.data());
  return build_kdtree_index(points.data(), source.size(), source.dim(), params);
}

class OmpBackend final : public Backend {
 public:
  int kind() const override { return KNN_BACKEND_OPENMP; }
  const char* name() const override { return "OpenMP"; }

  KNN_BACKEND_BUILDERS(omp)

  void build_classic_tree(const Point* points, int64_t n, Node* tree) const override {
    build_kdtree(points, n, tree);
  }
  void check_classic_tree(const Node* tree, int64_t n) const override { check_tree(tree, n); }
  void query_classic_tree(const Node* tree, int64_t n, const Point* queries, int64_t m, int k,
                          int32_t* indices, float* sq_distances) const override {
    query_kdtree(tree, n, queries, m, k, indices, sq_distances);
  }
  std::unique_ptr<ClassicTreeSearch> classic_tree_search(const Node* tree, int64_t n,
                                                         int root_dim) const override {
    return std::make_unique<TreeSearch>(tree, n, root_dim);
  }
  void classic_brute_force(const float* ref, int64_t n, const float* queries, int64_t m, int dim,
                           int k, int32_t* indices, float* sq_distances) const override {
    brute_force(ref, n, queries, m, dim, k, indices, sq_distances);
  }
};

}  // namespace

const Backend& omp_backend() {
  static const OmpBackend backend;
  return backend;
}

}  // namespace omp
}  // namespace knn
