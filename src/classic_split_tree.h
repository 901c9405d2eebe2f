// A classic query whose tree does not fit the device: the tree cut into
// parts that the devices take in turn, their lists merged exactly
// (src/classic_split_tree.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "../include/knn_gpgpu.h"

namespace knn {

// The tree does not fit: the parts take turns on the devices, first each with
// the queries whose descent leads into it, then each with the other queries
// whose current k-th neighbour is not nearer than the part's box; their lists
// are merged exactly into the answer. With several devices, each takes the
// next part as it becomes free: the choice of a part's queries and the merge
// of its lists hold one lock (they read and write the shared k-th distances),
// the parts' searches run at the same time. A part chosen against a k-th
// distance that a later merge lowers serves a few queries more, never fewer,
// and the merge keeps the k smallest (distance, index) pairs in any order:
// the answer is the one-device answer.
void query_split_tree(const Point* queries, int64_t m, const Node* tree, int64_t n, int k,
                      int32_t* result, const std::vector<int>& devices);

}  // namespace knn
