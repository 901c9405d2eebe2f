// Status texts, the per-thread last error, and the version.
#include <cstdio>

#include "abi_barrier.h"

namespace knn {
namespace {
// A fixed buffer, not a std::string: reporting a failure never allocates, so
// a call that ran out of host memory still says so (and where), and a
// failed call leaves no allocation behind. Longer messages are cut.
constexpr size_t kMaxLastError = 2048;
thread_local char last_error[kMaxLastError];
}  // namespace

void set_last_error(const char* function, const char* message) noexcept {
  std::snprintf(last_error, sizeof last_error, "%s: %s", function, message);
}

void clear_last_error() noexcept { last_error[0] = '\0'; }

}  // namespace knn

extern "C" {

KNN_API const char* KNN_CALL knn_status_string(int status) {
  switch (status) {
    case KNN_OK: return "KNN_OK: success";
    case KNN_ERR_INVALID_ARGUMENT: return "KNN_ERR_INVALID_ARGUMENT: invalid argument";
    case KNN_ERR_NONFINITE_INPUT: return "KNN_ERR_NONFINITE_INPUT: NaN or infinite coordinate";
    case KNN_ERR_HOST_OUT_OF_MEMORY: return "KNN_ERR_HOST_OUT_OF_MEMORY: host out of memory";
    case KNN_ERR_DEVICE_OUT_OF_MEMORY: return "KNN_ERR_DEVICE_OUT_OF_MEMORY: device out of memory";
    case KNN_ERR_NO_DEVICE: return "KNN_ERR_NO_DEVICE: no usable CUDA device";
    case KNN_ERR_DEVICE: return "KNN_ERR_DEVICE: CUDA device error";
    case KNN_ERR_INVALID_TREE: return "KNN_ERR_INVALID_TREE: not a valid kd-tree";
    case KNN_ERR_UNSUPPORTED: return "KNN_ERR_UNSUPPORTED: not supported by this build";
    case KNN_ERR_CANCELLED: return "KNN_ERR_CANCELLED: cancelled";
    case KNN_ERR_INTERNAL: return "KNN_ERR_INTERNAL: internal error";
    default: return "unknown status";
  }
}

KNN_API const char* KNN_CALL knn_last_error(void) { return knn::last_error; }

KNN_API int KNN_CALL knn_version(void) { return KNN_VERSION_NUMBER; }

}  // extern "C"
