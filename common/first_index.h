// The first index of a range for which a predicate holds, searched by a team
// of threads: what the input and tree checks use to name the first bad
// element. Written without an OpenMP min-reduction so that every compiler's
// OpenMP (MSVC's included) builds it.
#pragma once

#include <cstdint>
#include <vector>

#include "team_size.h"

namespace knn {

// `threads`: the call's thread count, as team_size takes it (0: the default).
template <class Predicate>
int64_t first_index_where(int64_t n, int threads, const Predicate& holds) {
  constexpr int64_t kBlock = int64_t{1} << 14;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<int64_t> first(static_cast<size_t>(blocks), n);
#pragma omp parallel for num_threads(team_for(team_size(threads), blocks)) schedule(dynamic, 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t end = (b + 1) * kBlock < n ? (b + 1) * kBlock : n;
    for (int64_t i = b * kBlock; i < end; ++i)
      if (holds(i)) {
        first[static_cast<size_t>(b)] = i;
        break;
      }
  }
  for (const int64_t i : first)
    if (i < n) return i;
  return n;
}

}  // namespace knn
