// The team size of every OpenMP region of the library: each names it in a
// num_threads clause. A region without one starts omp_get_max_threads()
// threads (OMP_NUM_THREADS) whatever the caller asked for, and libgomp ends
// the process when it cannot create them (under a memory limit, say).
#pragma once

#include <omp.h>

#include <algorithm>

#include "../include/knn_gpgpu.h"

namespace knn {

// The most CPU threads one call uses: KNN_MAX_THREADS_PER_PROCESSOR per
// processor of this machine (more never runs faster).
inline int max_threads() {
  return KNN_MAX_THREADS_PER_PROCESSOR * std::max(1, omp_get_num_procs());
}

// The threads of a call that asked for `requested` (knn_options.threads; 0:
// the OpenMP default, omp_get_max_threads()), at most max_threads().
inline int team_size(int requested) {
  return std::min(requested > 0 ? requested : omp_get_max_threads(), max_threads());
}

// The classic calls have no options: every region of theirs runs on
// team_size(kClassicThreads), the default team (OMP_NUM_THREADS, at most
// max_threads()).
constexpr int kClassicThreads = 0;

}  // namespace knn
