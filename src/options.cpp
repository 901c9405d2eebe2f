#include "options.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "../common/error.h"
#include "../common/team_size.h"

namespace knn {

knn_options read_options(const knn_options* opt) {
  knn_options o;
  knn_options_init_v2(&o);
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
  KNN_READ_FIELD(device_count);
#undef KNN_READ_FIELD
  if (o.device_count < 0 || o.device_count > KNN_MAX_DEVICES)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("opt->device_count is %d; it must be from 0 (default) to KNN_MAX_DEVICES (%d)",
                o.device_count, KNN_MAX_DEVICES));
  if (o.device_count > 0 && !has(offsetof(knn_options, devices), sizeof(int) * o.device_count))
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("opt->device_count is %d but opt->struct_size (%zu) does not cover that many "
                "entries of opt->devices (initialise options with knn_options_init_v2)",
                o.device_count, opt->struct_size));
  for (int i = 0; i < o.device_count; ++i) {
    o.devices[i] = opt->devices[i];
    if (o.devices[i] < 0)
      fail(KNN_ERR_INVALID_ARGUMENT,
           format("opt->devices[%d] is %d; a device number is 0 or more", i, o.devices[i]));
  }
  if (o.backend < KNN_BACKEND_AUTO || o.backend > KNN_BACKEND_OPENMP)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("opt->backend is %d; it must be KNN_BACKEND_AUTO (0), KNN_BACKEND_CUDA (1) or "
                "KNN_BACKEND_OPENMP (2)",
                o.backend));
  if (o.structure < KNN_STRUCTURE_AUTO || o.structure > KNN_STRUCTURE_BRUTE_FORCE)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("opt->structure is %d; it must be KNN_STRUCTURE_AUTO (0), _KDTREE (1), _GRID (2) "
                "or _BRUTE_FORCE (3)",
                o.structure));
  if (o.device < -1)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("opt->device is %d; it must be -1 (current device) or a device number", o.device));
  if (o.leaf_size < 0)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("opt->leaf_size is %d; it must be 0 (default) or positive", o.leaf_size));
  if (o.threads < 0)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("opt->threads is %d; it must be 0 (all cores) or positive", o.threads));
  o.threads = std::min(o.threads, max_threads());
  return o;
}

void check_device_number(int device, int devices) {
  if (device >= 0 && devices > 0 && device >= devices)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("opt->device is %d; this machine has %d CUDA device%s (0..%d)", device, devices,
                devices == 1 ? "" : "s", devices - 1));
}

size_t options_v1_size() { return offsetof(knn_options, device_memory_limit) + sizeof(size_t); }

}  // namespace knn

extern "C" {

KNN_API void KNN_CALL knn_options_init(knn_options* opt) {
  if (opt == nullptr) return;
  // Exactly the version-1 fields: a caller's struct may be that short.
  std::memset(opt, 0, knn::options_v1_size());
  opt->struct_size = knn::options_v1_size();
  opt->backend = KNN_BACKEND_AUTO;
  opt->device = -1;
  opt->structure = KNN_STRUCTURE_AUTO;
}

KNN_API void KNN_CALL knn_options_init_v2(knn_options* opt) {
  if (opt == nullptr) return;
  std::memset(opt, 0, sizeof(knn_options));
  knn_options_init(opt);
  opt->struct_size = sizeof(knn_options);
  opt->device_count = 0;
  for (int& device : opt->devices) device = -1;
}

}  // extern "C"
