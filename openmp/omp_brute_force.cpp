// CPU brute force in any dimension: every query against every reference row.
#include "knn_list.h"
#include "omp_engine.h"
#include "thread_scratch.h"

namespace knn {
namespace omp {

void brute_force(const float* ref, int64_t n, const float* queries, int64_t m, int dim, int k,
                 int32_t* indices, float* sq_distances) {
  const int capacity = list_capacity(k, n);
  ThreadScratch<Neighbor> storage(omp_get_max_threads(), static_cast<size_t>(capacity));
#pragma omp parallel num_threads(storage.threads())
  {
    Neighbor* const mine = storage.mine();
#pragma omp for schedule(dynamic, 64)
    for (int64_t i = 0; i < m; ++i) {
      KnnList list(mine, capacity);
      const float* q = queries + i * dim;
      for (int64_t j = 0; j < n; ++j)
        list.offer(squared_distance(q, ref + j * dim, dim), static_cast<int32_t>(j));
      const int64_t row = i * k;
      list.write(indices ? indices + row : nullptr, sq_distances ? sq_distances + row : nullptr, k);
    }
  }
}

}  // namespace omp
}  // namespace knn
