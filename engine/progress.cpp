// Per-thread progress of long calls (engine/progress.h): the engines' half,
// which links without the ABI layer (src/progress.cpp holds knn_set_progress).
// The fields are written with atomic operations (GCC/Clang __atomic builtins,
// Interlocked on MSVC), so a host thread may read them with plain aligned
// 64-bit loads or atomics.
#include "progress.h"

#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#endif

namespace knn {
namespace {
thread_local knn_progress* registered_progress = nullptr;

// Stores `value` into a field, or adds it to the field (kAdd), with release
// order; the fields are int64_t or int32_t.
enum class Update { kStore, kAdd };
template <Update kUpdate, class T>
void update(T* at, T value) {
  static_assert(sizeof(T) == 8 || sizeof(T) == 4);
  constexpr bool add = kUpdate == Update::kAdd;
#if defined(_MSC_VER) && !defined(__clang__)
  if constexpr (sizeof(T) == 8) {
    volatile long long* const field = reinterpret_cast<volatile long long*>(at);
    add ? _InterlockedExchangeAdd64(field, value) : _InterlockedExchange64(field, value);
  } else {
    volatile long* const field = reinterpret_cast<volatile long*>(at);
    add ? _InterlockedExchangeAdd(field, value) : _InterlockedExchange(field, value);
  }
#else
  if constexpr (add)
    __atomic_fetch_add(at, value, __ATOMIC_RELEASE);
  else
    __atomic_store_n(at, value, __ATOMIC_RELEASE);
#endif
}
template <class T>
void store(T* at, T value) {
  update<Update::kStore>(at, value);
}
template <class T>
void add(T* at, T value) {
  update<Update::kAdd>(at, value);
}
int64_t load64(const int64_t* at) {
#if defined(_MSC_VER) && !defined(__clang__)
  return _InterlockedCompareExchange64(
      reinterpret_cast<volatile long long*>(const_cast<int64_t*>(at)), 0, 0);
#else
  return __atomic_load_n(at, __ATOMIC_ACQUIRE);
#endif
}
}  // namespace

knn_progress* progress() { return registered_progress; }
void set_progress(knn_progress* p) { registered_progress = p; }

void progress_begin(knn_progress* p, int stage, int64_t total) {
  if (p == nullptr) return;
  store<int64_t>(&p->done, 0);
  store<int64_t>(&p->total, total);
  store<int32_t>(&p->stage, stage);
  add<int32_t>(&p->sequence, 1);
}

void progress_add(knn_progress* p, int64_t units) {
  if (p != nullptr && units > 0) add<int64_t>(&p->done, units);
}

void progress_finish(knn_progress* p) {
  if (p != nullptr) store<int64_t>(&p->done, load64(&p->total));
}

int64_t progress_done(const knn_progress* p) { return p != nullptr ? load64(&p->done) : 0; }

void progress_clear(knn_progress* p) {
  if (p == nullptr) return;
  // Atomic stores: a host thread may already be polling the record.
  store<int64_t>(&p->done, 0);
  store<int64_t>(&p->total, 0);
  store<int32_t>(&p->stage, KNN_PROGRESS_IDLE);
  store<int32_t>(&p->sequence, 0);
}

void progress_restart(knn_progress* p, int64_t done) {
  if (p == nullptr) return;
  store<int64_t>(&p->done, done);
  add<int32_t>(&p->sequence, 1);
}

}  // namespace knn
