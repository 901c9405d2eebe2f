// The device memory one call may use on one device: the one rule behind
// every GPU plan (include/knn_gpgpu.h, "Device memory"): the classic
// planner's chunks, tree split and build choice, the backend an automatic
// index build picks, every CUDA index engine's query chunks, the
// point-in-polygon fill, and the shares of a call split over devices.
// Pure arithmetic over what the caller asked and what the device reports, so
// that the rule is tested without a device (tests/unit/test_device_budget.cpp);
// cuda::device_budget (cuda/cuda_engine.h) applies it to the current device.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "../common/error.h"

namespace knn {

// The environment variable that limits the device memory of every call that
// does not set knn_options.device_memory_limit itself.
constexpr const char* kDeviceMemoryLimitVar = "KNN_DEVICE_MEMORY_LIMIT";

// Free device memory the library leaves alone: max(256 MiB, free / 16).
// What free memory does not tell: the CUDA context grows after the budget is
// taken (modules loaded on a kernel's first launch, the local memory the
// driver reserves for every resident thread when a kernel with a larger
// stack first runs, which grows with the SM count, so with the device), the
// allocator rounds and fragments, and other threads and processes allocate
// on the same device meanwhile. The floor covers the context on a small
// device; the sixteenth scales with the device (5 GiB of an 80 GiB H100).
// It replaced two rules (the classic planner's max(256 MiB, free / 32) and
// the index engines' free / 10) and lies between them.
constexpr size_t kDeviceMemoryMarginFloor = size_t{256} << 20;
constexpr size_t kDeviceMemoryMarginDivisor = 16;

inline size_t device_memory_margin(size_t free_bytes) {
  return std::max(kDeviceMemoryMarginFloor, free_bytes / kDeviceMemoryMarginDivisor);
}

// The value of KNN_DEVICE_MEMORY_LIMIT in bytes: decimal digits only. NULL
// (unset), "" and "0" mean no limit (0), as device_memory_limit = 0 does.
// Anything else ("8G", "-1", " 64", a value beyond size_t) is refused with
// KNN_ERR_INVALID_ARGUMENT rather than read as some other number of bytes.
inline size_t parse_device_memory_limit(const char* text) {
  if (text == nullptr) return 0;
  size_t bytes = 0;
  const char* c = text;
  for (; *c >= '0' && *c <= '9'; ++c) {
    const size_t digit = static_cast<size_t>(*c - '0');
    if (bytes > (std::numeric_limits<size_t>::max() - digit) / 10) break;
    bytes = bytes * 10 + digit;
  }
  if (*c != '\0')
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("%s is \"%.64s\": it must be a number of bytes (decimal digits, at most %zu), or "
                "empty or 0 for no limit",
                kDeviceMemoryLimitVar, text, std::numeric_limits<size_t>::max()));
  return bytes;
}

// What one call may allocate on one device.
struct DeviceBudget {
  size_t limit = 0;  // the limit in force (0: none): device_memory_limit, else the environment's
  const char* limit_source = nullptr;  // "device_memory_limit" or kDeviceMemoryLimitVar
  size_t free_bytes = 0;               // the device's free memory when the budget was taken

  // Free memory less the margin: all the call may use, limit or not.
  size_t usable_free() const {
    const size_t margin = device_memory_margin(free_bytes);
    return free_bytes > margin ? free_bytes - margin : 0;
  }
  // The budget: the limit in force, but never more than usable_free().
  size_t bytes() const { return limit > 0 ? std::min(limit, usable_free()) : usable_free(); }

  // Which rule set bytes(), with the figures, for messages.
  std::string describe() const {
    if (limit > 0 && limit <= usable_free())
      return format("%zu bytes, the %s", limit, limit_source);
    return format("%zu bytes, the device's %zu free bytes less a margin of %zu%s", bytes(),
                  free_bytes, device_memory_margin(free_bytes),
                  limit > 0 ? format(" (less than the %s, %zu)", limit_source, limit).c_str() : "");
  }
};

// The budget of a call whose options set `call_limit` (0: none), with the
// environment variable's value `environment` (NULL: unset) and `free_bytes`
// free on the device. The call's own limit wins over the environment's, and
// the environment is then not read at all.
inline DeviceBudget device_budget_of(size_t call_limit, const char* environment,
                                     size_t free_bytes) {
  DeviceBudget budget;
  budget.free_bytes = free_bytes;
  if (call_limit > 0) {
    budget.limit = call_limit;
    budget.limit_source = "device_memory_limit";
  } else if ((budget.limit = parse_device_memory_limit(environment)) > 0) {
    budget.limit_source = kDeviceMemoryLimitVar;
  }
  return budget;
}

// Refuses a build of `what` whose device estimate `needed` exceeds the limit
// in force, with KNN_ERR_DEVICE_OUT_OF_MEMORY naming both. Only a limit the
// caller set bounds a build: without one, a build allocates what it needs
// (an automatic backend has compared the estimate with the whole budget
// first), and a device short of it says so at the allocation.
inline void require_build_within_limit(const DeviceBudget& budget, size_t needed,
                                       const std::string& what) {
  if (budget.limit != 0 && needed > budget.limit)
    fail(KNN_ERR_DEVICE_OUT_OF_MEMORY,
         format("%s needs %zu device bytes, more than the %s (%zu)", what.c_str(), needed,
                budget.limit_source, budget.limit));
}

// The most queries, at most max_queries, whose fixed_bytes plus
// bytes_per_query each fit the budget; KNN_ERR_DEVICE_OUT_OF_MEMORY, saying
// what one query needs and what the budget is, when not even one fits.
inline int64_t queries_within_budget(const DeviceBudget& budget, size_t bytes_per_query,
                                     size_t fixed_bytes, int64_t max_queries) {
  const size_t bytes = budget.bytes();
  const size_t per_query = std::max<size_t>(bytes_per_query, 1);
  if (bytes < fixed_bytes || (bytes - fixed_bytes) / per_query < 1)
    fail(KNN_ERR_DEVICE_OUT_OF_MEMORY,
         format("a query chunk needs %zu device bytes fixed plus %zu per query, but the device "
                "budget is %s",
                fixed_bytes, bytes_per_query, budget.describe().c_str()));
  const size_t fits = (bytes - fixed_bytes) / per_query;
  return static_cast<int64_t>(std::min<size_t>(fits, static_cast<size_t>(max_queries)));
}

}  // namespace knn
