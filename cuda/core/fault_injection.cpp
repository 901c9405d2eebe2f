// The device allocation fault hook (cuda_support.h). The count is process
// wide, so a test sees every allocation site of a call in order, and it
// restarts whenever the variable changes value, so that a test can walk
// N = 1, 2, 3, ... in one process; text after the number is ignored, so a
// test re-arms the same N with a new suffix ("3#17").
#include <cstdlib>
#include <mutex>
#include <string>

#include "cuda_support.h"

namespace knn {
namespace cuda {

void inject_device_alloc_fault(size_t bytes) {
  const char* setting = std::getenv("KNN_FAULT_DEVICE_ALLOC");
  if (setting == nullptr || *setting == '\0') return;
  static std::mutex mutex;
  static std::string armed_with;
  static unsigned long long counted = 0;
  std::lock_guard<std::mutex> lock(mutex);
  if (armed_with != setting) armed_with = setting, counted = 0;
  const unsigned long long target = std::strtoull(setting, nullptr, 10);
  if (++counted != target) return;
  fail(KNN_ERR_DEVICE_OUT_OF_MEMORY,
       format("cudaMalloc of %zu bytes: device allocation %llu failed by fault injection "
              "(KNN_FAULT_DEVICE_ALLOC)",
              bytes, target));
}

}  // namespace cuda
}  // namespace knn
