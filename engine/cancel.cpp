// Per-thread cancellation flags (engine/cancel.h): the engines' half, which
// links without the ABI layer (src/cancel.cpp holds knn_set_cancel_flag).
#include "cancel.h"

#include "../common/error.h"

namespace knn {
namespace {
thread_local const volatile int* registered_flag = nullptr;
}

const volatile int* cancel_flag() { return registered_flag; }
void set_cancel_flag(const volatile int* flag) { registered_flag = flag; }

bool cancel_requested(const volatile int* flag) {
  if (flag == nullptr) return false;
#if defined(__GNUC__) || defined(__clang__)
  // A relaxed atomic load: defined against the host's atomic (or volatile)
  // store, and no fence on the hot path; the value only has to arrive.
  return __atomic_load_n(flag, __ATOMIC_RELAXED) != 0;
#else
  // MSVC: an aligned int read through a volatile glvalue is a single,
  // untorn load that the compiler neither caches nor elides (/volatile:iso
  // or /volatile:ms alike); MSVC documents volatile accesses for this use.
  return *flag != 0;
#endif
}

void throw_cancelled() { fail(KNN_ERR_CANCELLED, "cancelled by the caller's flag"); }

void throw_if_cancelled(const volatile int* flag) {
  if (cancel_requested(flag)) throw_cancelled();
}

}  // namespace knn
