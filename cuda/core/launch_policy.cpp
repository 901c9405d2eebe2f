// Device limits, cached per device, and the launch policy (launch_policy.h).
#include "launch_policy.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "cuda_support.h"

namespace knn {
namespace cuda {

DeviceLimits device_limits() {
  static std::mutex mutex;
  static std::map<int, DeviceLimits> cache;
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(mutex);
  const auto found = cache.find(device);
  if (found != cache.end()) return found->second;
  DeviceLimits limits;
  check(cudaDeviceGetAttribute(&limits.sm_count, cudaDevAttrMultiProcessorCount, device),
        "cudaDeviceGetAttribute (multiprocessors)");
  check(cudaDeviceGetAttribute(&limits.max_threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor,
                               device),
        "cudaDeviceGetAttribute (threads per multiprocessor)");
  check(cudaDeviceGetAttribute(&limits.shared_bytes_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                               device),
        "cudaDeviceGetAttribute (shared memory per block)");
  cache.emplace(device, limits);
  return limits;
}

unsigned grid_stride_blocks(const void* kernel, int block, int64_t items) {
  int resident_per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident_per_sm, kernel, block, 0),
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  const int64_t most =
      int64_t{kGridStrideWaves} * device_limits().sm_count * std::max(resident_per_sm, 1);
  return static_cast<unsigned>(std::min<int64_t>(most, grid_for(items, block)));
}

int64_t latency_hiding_threads() { return device_limits().resident_threads() / 2; }

}  // namespace cuda
}  // namespace knn
