// The team size of every OpenMP region of the library: each names it in a
// num_threads clause. A region without one starts omp_get_max_threads()
// threads (OMP_NUM_THREADS) whatever the caller asked for, and libgomp ends
// the process when it cannot create them (under a memory limit, say).
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

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

// The team for `items` work items of which one thread should take at least
// `grain`: a small call (one query from Python) runs on the calling thread
// and wakes no idle team, which cost 0.3-1.5 ms on a loaded 2-core machine.
inline int team_for(int threads, int64_t items, int64_t grain = 1) {
  const int64_t useful = (items + grain - 1) / std::max<int64_t>(grain, 1);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, useful)));
}

}  // namespace knn
