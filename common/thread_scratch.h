// Per-thread scratch of a parallel region, allocated before the region opens.
// An allocation inside a region could throw std::bad_alloc where nothing
// catches it (an exception leaving an OpenMP region ends the process); here
// it throws on the calling thread, where the API turns it into
// KNN_ERR_HOST_OUT_OF_MEMORY. The region must run on at most threads()
// threads (num_threads(scratch.threads())).
#pragma once

#include <omp.h>

#include <cstddef>
#include <vector>

namespace knn {

template <class T>
class ThreadScratch {
 public:
  ThreadScratch(int threads, size_t per_thread)
      : threads_(threads),
        per_thread_(per_thread),
        data_(static_cast<size_t>(threads) * per_thread) {}

  int threads() const { return threads_; }
  // This thread's `per_thread` entries; call it inside the region.
  T* mine() { return data_.data() + static_cast<size_t>(omp_get_thread_num()) * per_thread_; }

 private:
  int threads_;
  size_t per_thread_;
  std::vector<T> data_;
};

}  // namespace knn
