// How the CPU benchmarks meet a failed library call: an exception that names
// the call, its status and the library's message (main reports it, exits 1).
#pragma once

#include <stdexcept>
#include <string>

#include "knn_gpgpu.h"

namespace knn_bench {

inline void check_status(int status, const char* call) {
  if (status != KNN_OK)
    throw std::runtime_error(std::string(call) + " failed: " + knn_status_string(status) + ": " +
                             knn_last_error());
}

}  // namespace knn_bench
