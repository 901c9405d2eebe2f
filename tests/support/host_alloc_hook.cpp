// Replacement operator new / delete with failure injection and live counts
// (tests/support/host_alloc_hook.h). Every block carries a header with its size, so
// that the live byte count is exact whichever delete form frees it.
#include "host_alloc_hook.h"

#include <atomic>
#include <cstdlib>
#include <new>
#ifdef _WIN32
#include <malloc.h>  // _aligned_malloc: the C runtime there has no posix_memalign
#endif

namespace knn_test {
namespace alloc_hook {
namespace {

std::atomic<bool> armed{false};
std::atomic<int64_t> fail_at{0};
std::atomic<bool> persistent{false};
std::atomic<int64_t> attempts{0};
std::atomic<int64_t> failures{0};
std::atomic<int64_t> live{0};
std::atomic<int64_t> bytes{0};
std::atomic<size_t> largest{0};
std::atomic<int64_t> peak{0};

// The header (the block's size and the header's length, just before the
// block) keeps the block aligned for any fundamental type; over-aligned
// requests get a header of `align` bytes.
constexpr size_t kHeader = alignof(std::max_align_t);

bool should_fail() {
  if (!armed.load(std::memory_order_acquire)) return false;
  const int64_t nth = attempts.fetch_add(1) + 1;
  const int64_t at = fail_at.load();
  if (nth == at || (persistent.load() && nth > at)) {
    failures.fetch_add(1);
    return true;
  }
  return false;
}

void note_request(size_t size) {
  size_t seen = largest.load(std::memory_order_relaxed);
  while (size > seen && !largest.compare_exchange_weak(seen, size)) {
  }
}

// An aligned block from the C runtime, which none of the replaced operators
// reach; freed by free_block.
void* aligned_block(size_t align, size_t size) {
#ifdef _WIN32
  return _aligned_malloc(size, align);
#else
  void* base = nullptr;
  return posix_memalign(&base, align, size) == 0 ? base : nullptr;
#endif
}

void free_block(void* base) {
#ifdef _WIN32
  _aligned_free(base);
#else
  std::free(base);
#endif
}

void* allocate(size_t size, size_t align) {
  note_request(size);
  if (should_fail()) return nullptr;
  const size_t header = align > kHeader ? align : kHeader;
  void* const base = aligned_block(header, header + size);
  if (base == nullptr) return nullptr;
  char* const user = static_cast<char*>(base) + header;
  reinterpret_cast<size_t*>(user)[-1] = header;
  reinterpret_cast<size_t*>(user)[-2] = size;
  live.fetch_add(1);
  const int64_t now = bytes.fetch_add(static_cast<int64_t>(size)) + static_cast<int64_t>(size);
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now)) {
  }
  return user;
}

void release(void* p) {
  if (p == nullptr) return;
  // The block's size and header length sit just before it (header >= 16).
  const size_t header = static_cast<size_t*>(p)[-1];
  const size_t size = static_cast<size_t*>(p)[-2];
  live.fetch_sub(1);
  bytes.fetch_sub(static_cast<int64_t>(size));
  free_block(static_cast<char*>(p) - header);
}

void* allocate_or_throw(size_t size, size_t align) {
  void* p = allocate(size, align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void arm(int64_t nth, Mode mode) {
  attempts = 0;
  failures = 0;
  fail_at = nth;
  persistent = mode == Mode::Persistent;
  armed.store(true, std::memory_order_release);
}
void disarm() { armed.store(false, std::memory_order_release); }
int64_t attempted() { return attempts.load(); }
int64_t failed() { return failures.load(); }
int64_t live_count() { return live.load(); }
int64_t live_bytes() { return bytes.load(); }
size_t largest_request() { return largest.load(); }
void reset_largest() { largest = 0; }
int64_t peak_live_bytes() { return peak.load(); }
void reset_peak() { peak = bytes.load(); }

}  // namespace alloc_hook
}  // namespace knn_test

using knn_test::alloc_hook::allocate;
using knn_test::alloc_hook::allocate_or_throw;
using knn_test::alloc_hook::release;

void* operator new(size_t size) { return allocate_or_throw(size, 0); }
void* operator new[](size_t size) { return allocate_or_throw(size, 0); }
void* operator new(size_t size, const std::nothrow_t&) noexcept { return allocate(size, 0); }
void* operator new[](size_t size, const std::nothrow_t&) noexcept { return allocate(size, 0); }
void* operator new(size_t size, std::align_val_t a) {
  return allocate_or_throw(size, static_cast<size_t>(a));
}
void* operator new[](size_t size, std::align_val_t a) {
  return allocate_or_throw(size, static_cast<size_t>(a));
}
void* operator new(size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(size, static_cast<size_t>(a));
}
void* operator new[](size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(size, static_cast<size_t>(a));
}
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, size_t) noexcept { release(p); }
void operator delete[](void* p, size_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
