#include "options.h"

#include <omp.h>

#include <algorithm>
#include <cstddef>

#include "../common/error.h"

namespace knn {

knn_options read_options(const knn_options* opt) {
  knn_options o;
  knn_options_init(&o);
  if (opt == nullptr) return o;
  constexpr size_t kMinSize = offsetof(knn_options, backend) + sizeof(int);
  if (opt->struct_size < kMinSize)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("opt->struct_size is %zu; it must be at least %zu (initialise options with "
                "knn_options_init)",
                opt->struct_size, kMinSize));
  auto has = [opt](size_t offset, size_t size) { return opt->struct_size >= offset + size; };
#define KNN_READ_FIELD(f) \
  if (has(offsetof(knn_options, f), sizeof opt->f)) o.f = opt->f
  KNN_READ_FIELD(backend);
  KNN_READ_FIELD(device);
  KNN_READ_FIELD(structure);
  KNN_READ_FIELD(leaf_size);
  KNN_READ_FIELD(threads);
  KNN_READ_FIELD(device_memory_limit);
#undef KNN_READ_FIELD
  if (o.backend < KNN_BACKEND_AUTO || o.backend > KNN_BACKEND_OPENMP)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("opt->backend is %d; it must be KNN_BACKEND_AUTO (0), KNN_BACKEND_CUDA (1) or "
                "KNN_BACKEND_OPENMP (2)",
                o.backend));
  if (o.leaf_size < 0)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("opt->leaf_size is %d; it must be 0 (default) or positive", o.leaf_size));
  if (o.threads < 0)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("opt->threads is %d; it must be 0 (all cores) or positive", o.threads));
  o.threads = std::min(o.threads, max_threads());
  return o;
}

int max_threads() { return KNN_MAX_THREADS_PER_PROCESSOR * std::max(1, omp_get_num_procs()); }

}  // namespace knn
