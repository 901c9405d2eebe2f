// Replacement malloc for tests/support/parallel_malloc_hook.h.
#include "parallel_malloc_hook.h"

#include <omp.h>

#include <atomic>
#include <cerrno>
#include <cstddef>

// A sanitizer's runtime owns malloc (it frees only its own blocks): no
// replacement there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KNN_SANITIZER_OWNS_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define KNN_SANITIZER_OWNS_MALLOC 1
#endif
#endif
#if defined(__GLIBC__) && !defined(KNN_SANITIZER_OWNS_MALLOC)
#define KNN_REPLACE_MALLOC 1
#endif

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

#ifdef KNN_REPLACE_MALLOC
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

#ifdef KNN_REPLACE_MALLOC
extern "C" void* __libc_malloc(size_t size);

extern "C" void* malloc(size_t size) {
  if (!knn_test::parallel_malloc::fails()) return __libc_malloc(size);
  errno = ENOMEM;
  return nullptr;
}
#endif
