// The planner behind queryAll/cuQueryAll/mpQueryAll and buildKdTree: it
// decides which engine runs what, from the device budget (Backend::device_budget:
// KNN_DEVICE_MEMORY_LIMIT, else free memory less a margin), and composes the engines (chunked GPU
// queries, a CPU share at the same time, a tree split with an exact merge, CPU fallback).
#pragma once

#include <cstddef>
#include <cstdint>

#include "../include/knn_gpgpu.h"

namespace knn {

enum class Engine { Auto, Cuda, OpenMP };

void build_tree(const Point* points, int64_t n, Node* tree, Engine engine);

// Device bytes of a whole GPU call of m queries with k neighbours against n
// nodes, whichever device-side form answers it (getNeededBytesForQueryAll).
size_t query_bytes_needed(int64_t m, int k, int64_t n);
// Device bytes of the search's own scratch in such a call (the tree, the
// queries and the rows excluded: getNeededBytesInSearch).
size_t search_bytes_needed(int64_t m, int k, int64_t n);

// Checks the tree (KNN_ERR_INVALID_TREE) on the engine that runs, then
// answers; result gets m rows of k indices.
void query_tree(const Point* queries, int64_t m, const Node* tree, int64_t n, int k,
                int32_t* result, Engine engine);

}  // namespace knn
