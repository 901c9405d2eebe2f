// The default leaf (bucket) sizes of the index API's kd-trees, the rules of
// the CUDA engine (cuda/kdtree/) and the OpenMP engine
// (openmp/omp_index_kdtree.cpp) side by side: the same from 4-D up, so that
// both build the same tree shape from n and dim there, and apart in 3-D and
// below, where their searches want different leaves.
#pragma once

namespace knn {

// A warp's worth of points, so that the warp search scans a leaf in one step
// and the thread search amortises a node visit over many distance
// computations; the smallest default, so the estimates made with it bound
// every default tree.
constexpr int kKdTreeDefaultLeafSize = 32;

// Which engine's default leaf size.
enum class LeafSizeFor { kCpu, kGpu };

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
// 8-D 72 -> 61 ms, 16-D 239 -> 187 ms.
//
// Up to 3-D the GPU takes two warps' worth: its warp lists (k > 16) scan a
// leaf 32 points a step, and bigger leaves spare them node visits, while
// its thread lists (k <= 16) are indifferent to 64. H100, 10^7 points and
// queries, float32, build + query ms, leaf 32 / 64 / 128: uniform k = 8
// 66.1 / 66.2 / 73.2, k = 30 139.2 / 123.3 / 113.2; sphere surface k = 8
// 45.2 / 44.3 / 46.4, k = 30 95.5 / 86.4 / 81.2; all-kNN k = 100 231.3 /
// 205.7 / 185.9. The CPU stays at 32 there (64: 5 % slower).
inline int kdtree_default_leaf_size(int dim, LeafSizeFor engine) {
  if (dim >= 7) return 4 * kKdTreeDefaultLeafSize;
  if (dim <= 3 && engine == LeafSizeFor::kGpu) return 2 * kKdTreeDefaultLeafSize;
  return kKdTreeDefaultLeafSize;
}

// The GPU leaf size of a kd-tree that only serves lists of more than 16 (the
// warp lists): an AUTO index's second, lazy kd-tree, which serves only the
// lists its grid or brute force hand on. Up to 3-D 128 (the figures above:
// 10-20 % faster than 64 at k = 30 and 100); from 4-D the default, which was
// measured there.
inline int kdtree_long_list_leaf_size(int dim) {
  return dim <= 3 ? 4 * kKdTreeDefaultLeafSize : kdtree_default_leaf_size(dim, LeafSizeFor::kGpu);
}

// The leaf size a kd-tree build uses: the one asked for (IndexParams /
// knn_options leaf_size), else the engine's default.
inline int kdtree_leaf_size(int asked, int dim, LeafSizeFor engine) {
  return asked > 0 ? asked : kdtree_default_leaf_size(dim, engine);
}

}  // namespace knn
