// The default leaf (bucket) size of the index API's kd-trees, one rule for
// the CUDA engine (cuda/kdtree/) and the OpenMP engine
// (openmp/omp_index_kdtree.cpp), so that both build the same tree shape
// from n and dim.
#pragma once

namespace knn {

// A warp's worth of points, so that the warp search scans a leaf in one step
// and the thread search amortises a node visit over many distance
// computations; the smallest default, so the estimates made with it bound
// every default tree.
constexpr int kKdTreeDefaultLeafSize = 32;

// From 7-D, where a query wants many leaves, four warps' worth: a quarter of
// the nodes to walk for the same points.
// GPU (cuda/kdtree/index_kdtree_search.cu, where the lanes take turns over a
// leaf): H100, k = 5, n = m, build included, against 64: 7-D 2^21 70.0 ->
// 65.7 ms, 9-D 2^20 104.8 -> 100.6 ms, 12-D 2^19 177.2 -> 160.5 ms; 256 was
// slower at every 7..12-D size. In 5-D 64 gained up to 5 % at k = 1..5 and
// lost 14 % at k = 11.
// CPU (the vectorized bucket scan of openmp/kd_search.cpp), one thread, 10^6
// points, query time against 32: uniform 8-D k = 8 (5*10^4 queries) 788 ->
// 708 ms, k = 100 360 -> 309 ms, 16-D k = 8 2300 -> 1508 ms; clustered
// 8-D 72 -> 61 ms, 16-D 239 -> 187 ms. 3-D stays at 32 (64: 5 % slower).
inline int kdtree_default_leaf_size(int dim) { return dim >= 7 ? 128 : kKdTreeDefaultLeafSize; }

}  // namespace knn
