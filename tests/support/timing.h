// Wall-clock timing for the tests that bound a running time as a ratio of
// two timings taken in the same process (so that a slow or loaded machine
// slows both alike).
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace knn_test {

// The seconds each of `runs` calls took, ascending.
inline std::vector<double> sorted_seconds(int runs, const std::function<void()>& call) {
  std::vector<double> times;
  for (int run = 0; run < runs; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times;
}

// The fastest of `runs` calls (runs >= 1): what the machine's load adds is
// left out.
inline double best_seconds(int runs, const std::function<void()>& call) {
  return sorted_seconds(runs, call).front();
}

// The median of `runs` calls (runs odd): one slow or fast outlier is left out.
inline double median_seconds(int runs, const std::function<void()>& call) {
  return sorted_seconds(runs, call)[static_cast<size_t>(runs / 2)];
}

}  // namespace knn_test
