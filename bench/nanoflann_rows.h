// The nanoflann contender of the CPU benchmarks: its view of point rows, the
// kd-tree type over them (L2_Simple, uint32_t indices), its build on all
// threads, and the sweep that finds its best leaf size for each row.
//
// The header is the pinned release of scripts/nanoflann-prepare.sh (1.12.1)
// where it was prepared, else the system's (bench/CMakeLists.txt; Debian's
// 1.4.3 has no threaded build). KNN_NANOFLANN_SOURCE names which.
#pragma once

#include <omp.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <nanoflann.hpp>
#include <string>
#include <utility>
#include <vector>

#include "bench_timer.h"

#ifndef KNN_NANOFLANN_SOURCE
#define KNN_NANOFLANN_SOURCE "unknown"
#endif

namespace knn_bench {

// `count` rows of floats, one after another. Dim > 0 fixes the row length at
// compile time (nanoflann's DIM, and constant-stride access: the 3-D
// benchmarks time nanoflann at its best); Dim = -1 takes it from `dim`.
template <int Dim>
struct NanoflannRows {
  const float* data;
  size_t count;
  size_t dim = Dim > 0 ? Dim : 0;

  size_t kdtree_get_point_count() const { return count; }
  float kdtree_get_pt(uint32_t i, size_t d) const {
    return data[i * (Dim > 0 ? static_cast<size_t>(Dim) : dim) + d];
  }
  template <class BoundingBox>
  bool kdtree_get_bbox(BoundingBox&) const {
    return false;  // nanoflann computes it
  }
};

template <int Dim>
using NanoflannTree =
    nanoflann::KDTreeSingleIndexAdaptor<nanoflann::L2_Simple_Adaptor<float, NanoflannRows<Dim>>,
                                        NanoflannRows<Dim>, Dim, uint32_t>;

// NANOFLANN_VERSION is 0xMmP up to 1.5.x and 0xMMmmPP since; both orders agree
// on ">= 1.5.0".
#if NANOFLANN_VERSION >= 0x150
constexpr bool kNanoflannThreadedBuild = true;
using NanoflannSearchParams = nanoflann::SearchParameters;
using NanoflannMatches = std::vector<nanoflann::ResultItem<uint32_t, float>>;
#else
constexpr bool kNanoflannThreadedBuild = false;
using NanoflannSearchParams = nanoflann::SearchParams;
using NanoflannMatches = std::vector<std::pair<uint32_t, float>>;
#endif

// The build parameters: leaf size, and as many build threads as ours has
// (omp_get_max_threads(): all of them unless OMP_NUM_THREADS says fewer).
inline nanoflann::KDTreeSingleIndexAdaptorParams nanoflann_params(int leaf) {
#if NANOFLANN_VERSION >= 0x150
  return nanoflann::KDTreeSingleIndexAdaptorParams(static_cast<size_t>(leaf),
                                                   nanoflann::KDTreeSingleIndexAdaptorFlags::None,
                                                   static_cast<unsigned>(omp_get_max_threads()));
#else
  return nanoflann::KDTreeSingleIndexAdaptorParams(static_cast<size_t>(leaf));
#endif
}

// "1.12.1 (pinned <commit>), build on 16 threads", for the output.
inline std::string nanoflann_description() {
#ifdef NANOFLANN_VERSION_STRING
  std::string text = NANOFLANN_VERSION_STRING;
#else
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%x", NANOFLANN_VERSION);
  std::string text = hex;
#endif
  text += std::string(" (") + KNN_NANOFLANN_SOURCE + "), build on ";
  text += kNanoflannThreadedBuild ? std::to_string(omp_get_max_threads()) + " threads"
                                  : std::string("1 thread (this version has no threaded build)");
  return text;
}

// The default leaf sizes swept for nanoflann's best (its default is 10).
inline std::vector<int> default_nanoflann_leaves() { return {10, 16, 24, 32, 48, 64}; }

// nanoflann's best leaf size for each k of a data set: one timed build per
// leaf size and one timed query run per (leaf size, k), the smallest
// build + query winning. A sweep round only picks the leaf size; the figures
// of the table are timed afterwards, against ours, with repeats.
struct LeafSweep {
  std::vector<int> leaves;
  std::vector<double> build_ms;               // [leaf]
  std::vector<std::vector<double>> query_ms;  // [k][leaf]

  size_t best(size_t k) const {
    size_t best = 0;
    for (size_t l = 1; l < leaves.size(); ++l)
      if (build_ms[l] + query_ms[k][l] < build_ms[best] + query_ms[k][best]) best = l;
    return best;
  }
};

// build(l) builds (and keeps) the tree of leaves[l]; query(l, k) runs the
// queries of ks[k] on it.
template <class Build, class Query>
LeafSweep sweep_leaves(const std::vector<int>& leaves, size_t k_count, Build&& build,
                       Query&& query) {
  LeafSweep s;
  s.leaves = leaves;
  s.query_ms.assign(k_count, std::vector<double>(leaves.size()));
  for (size_t l = 0; l < leaves.size(); ++l) {
    s.build_ms.push_back(time_once_ms([&] { build(l); }));
    for (size_t k = 0; k < k_count; ++k) s.query_ms[k][l] = time_once_ms([&] { query(l, k); });
  }
  return s;
}

// One line per k: "leaf sweep k=8 (build + query ms): 10: 120+900 16: ... best 24".
inline void print_sweep(const LeafSweep& s, const std::vector<int>& ks) {
  for (size_t k = 0; k < ks.size(); ++k) {
    std::printf("nanoflann leaf sweep, k=%d (build + query ms):", ks[k]);
    for (size_t l = 0; l < s.leaves.size(); ++l)
      std::printf(" %d: %.0f+%.0f", s.leaves[l], s.build_ms[l], s.query_ms[k][l]);
    std::printf("; best %d\n", s.leaves[s.best(k)]);
  }
  std::fflush(stdout);
}

}  // namespace knn_bench
