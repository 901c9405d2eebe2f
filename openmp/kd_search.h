// The CPU engine's one kd-tree search, behind both the classic API (a view of
// the caller's heap-ordered Node array, omp_kdtree_query.cpp) and the index
// kd-tree (omp_index_kdtree.cpp). Each builds a SearchTree; everything after
// that is here.
//
// The tree. Node 0 is the root; an inner node's children are first_child and
// first_child + 1. A node holds its own points, positions [begin, end): a
// leaf its bucket, a classic inner node the one point stored in it, an index
// inner node none. The points are kept in one plane per dimension, in
// position order, so that a bucket's coordinates are contiguous.
//
// Pruning. The search keeps, per dimension, the gap between the query and
// the box of the node it is in (the root's box, narrowed by every split on
// the way down: an inner node's left subtree lies at or below left_max on its
// split dimension, its right subtree at or above right_min). The bound of a
// node is the sum of the squared gaps in dimension order, in the tree's
// scalar type with the point distance's own operations; each gap is never
// more than the point's own coordinate difference and every rounded operation
// is monotone, so the bound never exceeds the distance of any point below the
// node. A
// node is entered only while it can hold a point that beats the k-th
// candidate in (distance, index) order: bound < k-th distance, or equal to
// it with a smaller index somewhere below (min_index). That last rule is what
// makes duplicates cheap: among equal points the search takes the child with
// the smaller indices first, and then skips every other one. Where the two
// children's bounds tie, the other child is deferred to a queue taken up best
// first by (bound, min_index) once the depth-first walk ends: where all
// distances tie (float32 underflow), the walk then enters about the leaves
// of the k smallest indices instead of ~k leaves per level.
//
// Only the changed dimension's gap is updated on a split, and the bound is
// summed again only when a gap grows (the far side of a split), which is
// nanoflann's incremental box distance computed so that it stays exact.
//
// Scalar is float (the classic API and knn_index_build) or double (the _f64
// family); the search is one template, instantiated for both in kd_search.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "../common/neighbor.h"
#include "../engine/index_engine.h"

namespace knn {
namespace omp {

// Points per block of a bucket scan: the distances of a block are computed
// side by side (one vector lane per point, each summed in dimension order).
constexpr int kScanLanes = 8;

template <typename Scalar>
struct BasicSearchNode {
  int32_t first_child = -1;  // -1: a leaf
  int32_t split_dim = 0;
  Scalar left_max = 0;         // left subtree: coordinate split_dim <= left_max
  Scalar right_min = 0;        // right subtree: coordinate split_dim >= right_min
  int32_t begin = 0, end = 0;  // the node's own points (positions)
  int32_t min_index = 0;       // smallest original index in the subtree
};

template <typename Scalar>
struct BasicSearchTree {
  using Node = BasicSearchNode<Scalar>;
  int dim = 0;
  int64_t size = 0;         // points
  int64_t stride = 0;       // scalars per plane: size + kScanLanes (a block may read past a bucket)
  std::vector<Node> nodes;  // empty for an empty tree
  std::vector<int32_t> ids;  // original index of each position
  // Coordinate d of position p at planes[d * stride + p]. Left uninitialized
  // but for the padding: the caller writes every position, in parallel
  // (a serial zero fill of the planes was a tenth of a 16-core query call).
  std::unique_ptr<Scalar[]> planes;
  std::vector<Scalar> lo, hi;  // the box of all points

  // Sizes every array (before any parallel region: nothing allocates later).
  void allocate(int dims, int64_t points, int64_t node_count) {
    dim = dims;
    size = points;
    stride = points + kScanLanes;
    nodes.assign(static_cast<size_t>(node_count), Node{});
    ids.assign(static_cast<size_t>(points), 0);
    planes.reset(new Scalar[static_cast<size_t>(stride) * static_cast<size_t>(dims)]);
    for (int d = 0; d < dims; ++d) std::fill(plane(d) + points, plane(d) + stride, Scalar{0});
    lo.assign(static_cast<size_t>(dims), Scalar{0});
    hi.assign(static_cast<size_t>(dims), Scalar{0});
  }
  Scalar* plane(int d) {
    return planes.get() + static_cast<size_t>(d) * static_cast<size_t>(stride);
  }
  const Scalar* plane(int d) const {
    return planes.get() + static_cast<size_t>(d) * static_cast<size_t>(stride);
  }
};
using SearchNode = BasicSearchNode<float>;
using SearchTree = BasicSearchTree<float>;

// k nearest points of m queries (row-major, tree.dim scalars each); row i of
// indices / sq_distances (the latter may be NULL) at offset i*k, padded with
// -1 / +infinity. threads 0: all.
template <typename Scalar>
void search_knn(const BasicSearchTree<Scalar>& tree, const Scalar* queries, int64_t m, int k,
                int threads, int32_t* indices, Scalar* sq_distances);

// All-kNN: the row of the point with original index i at offset i*k. With
// exclude_self the point itself is left out of its own row.
template <typename Scalar>
void search_knn_self(const BasicSearchTree<Scalar>& tree, int k, bool exclude_self, int threads,
                     int32_t* indices, Scalar* sq_distances);

// Points within squared distance r2 of each query: rows of max_neighbors
// (sorted, padded), the true counts; max_neighbors 0: counts only.
template <typename Scalar>
void search_radius(const BasicSearchTree<Scalar>& tree, const Scalar* queries, int64_t m, Scalar r2,
                   int max_neighbors, int threads, int32_t* indices, Scalar* sq_distances,
                   int32_t* counts);

// The pairs of m queries and the points within squared distance r2, into
// radius bins (engine/index_engine.h, RadiusBins; counts and sums zeroed,
// n_bins + 1 entries, sums may be NULL). False, with nothing counted, when
// the bins' tallies would not fit (BinTallies::fit).
template <typename Scalar>
bool search_radius_bins(const BasicSearchTree<Scalar>& tree, const Scalar* queries, int64_t m,
                        Scalar r2, const RadiusBins& bins, int threads, int64_t* counts,
                        double* sums);

}  // namespace omp
}  // namespace knn
