// How a work item of the CPU kd-tree builds (omp_kdtree_build.cpp,
// omp_index_kdtree.cpp) waits for a flag another thread of its team sets:
// without OpenMP (no task, no lock, nothing allocated). A few yields first,
// as most waits are short, then short sleeps, so that a long one (the
// root's median, found by one thread) leaves the processors to other work.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

namespace knn {
namespace omp {

// Returns once `flag` is set (true), or once stop() holds (false).
template <class Stop>
bool wait_for_flag(const std::atomic<bool>& flag, Stop stop) {
  constexpr int kYields = 64;
  for (int waited = 0; !flag.load(std::memory_order_acquire); ++waited) {
    if (stop()) return false;
    if (waited < kYields)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

}  // namespace omp
}  // namespace knn
