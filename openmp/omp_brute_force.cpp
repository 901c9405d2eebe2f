// CPU brute force in any dimension: every query against every reference row.
#include <omp.h>

#include <vector>

#include "../engine/cancel.h"
#include "knn_list.h"
#include "omp_engine.h"

namespace knn {
namespace omp {

void brute_force(const float* ref, int64_t n, const float* queries, int64_t m, int dim, int k,
                 int32_t* indices, float* sq_distances) {
  // One list per thread, allocated here: an allocation inside the region
  // could throw where nothing catches it.
  const int threads = team_size(kClassicThreads);
  std::vector<BasicNeighborList<float>> lists(static_cast<size_t>(threads),
                                              BasicNeighborList<float>(k, n));
  // Read before every query (n distances each); the remaining queries are
  // skipped once it is set (an exception cannot leave the region).
  const volatile int* cancel = cancel_flag();
  LoopStop stop(cancel);
#pragma omp parallel num_threads(threads)
  {
    BasicNeighborList<float>& list = lists[static_cast<size_t>(omp_get_thread_num())];
#pragma omp for schedule(dynamic, 64)
    for (int64_t i = 0; i < m; ++i) {
      if (stop.poll()) continue;
      list.reset();
      const float* q = queries + i * dim;
      for (int64_t j = 0; j < n; ++j)
        list.offer(squared_distance(q, ref + j * dim, dim), static_cast<int32_t>(j));
      const int64_t row = i * k;
      list.write(k, -1, indices ? indices + row : nullptr,
                 sq_distances ? sq_distances + row : nullptr);
    }
  }
  if (stop.stopped()) throw_cancelled();
}

}  // namespace omp
}  // namespace knn
