// Replacement malloc for tests/parallel_malloc_hook.h.
#include "parallel_malloc_hook.h"

#include <omp.h>

#include <atomic>
#include <cerrno>
#include <cstddef>

namespace knn_test {
namespace parallel_malloc {
namespace {

std::atomic<bool> armed{false};
std::atomic<int64_t> failures{0};

}  // namespace

// Whether this malloc fails: armed, and made inside a parallel region.
bool fails() {
  if (!armed.load(std::memory_order_acquire) || !omp_in_parallel()) return false;
  failures.fetch_add(1);
  return true;
}

#if defined(__GLIBC__)
bool available() { return true; }
#else
bool available() { return false; }
#endif
void arm() {
  failures = 0;
  armed.store(true, std::memory_order_release);
}
void disarm() { armed.store(false, std::memory_order_release); }
int64_t failed() { return failures.load(); }

}  // namespace parallel_malloc
}  // namespace knn_test

#if defined(__GLIBC__)
extern "C" void* __libc_malloc(size_t size);

extern "C" void* malloc(size_t size) {
  if (!knn_test::parallel_malloc::fails()) return __libc_malloc(size);
  errno = ENOMEM;
  return nullptr;
}
#endif
