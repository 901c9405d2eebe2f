// The OpenMP engine: the CPU backend and the reference every GPU kernel is
// checked against. It knows the tree layout (common/kdtree_layout.h) and
// nothing of the C ABI; failures are thrown as knn::Error.
#pragma once

#include <cstdint>

#include "../common/kdtree_layout.h"
#include "../common/team_size.h"
#include "kd_search.h"

namespace knn {
namespace omp {

// Builds the tree of n points (layout: common/kdtree_layout.h) on all cores.
void build_kdtree(const Point* points, int64_t n, Node* tree);

// Throws KNN_ERR_INVALID_TREE naming the first node that is not where the
// layout puts it; ids must be a permutation of 0..n-1.
void check_tree(const Node* tree, int64_t n);

// The tree (or a subtree cut from one, splitting first on root_dim) in the
// layout of the CPU search (kd_search.h): an O(n) pass; build it once where
// one tree answers many batches. The tree is trusted: check it first.
SearchTree classic_search_tree(const Node* tree, int64_t n, int root_dim);

// check_tree, then the k nearest tree nodes of each of m queries, the check
// and the read of the tree into the search layout being one parallel pass.
// Row i of `indices` (and of `sq_distances` unless NULL) is at offset i*k;
// slots past the tree's size get -1 / +infinity.
void query_kdtree(const Node* tree, int64_t n, const Point* queries, int64_t m, int k,
                  int32_t* indices, float* sq_distances);

// Exact k nearest rows of `ref` (n rows of dim floats) for m query rows.
void brute_force(const float* ref, int64_t n, const float* queries, int64_t m, int dim, int k,
                 int32_t* indices, float* sq_distances);

}  // namespace omp
}  // namespace knn
