// Per-thread cancellation flags (engine/cancel.h).
#include "../engine/cancel.h"

#include "../common/error.h"
#include "abi_barrier.h"

namespace knn {
namespace {
thread_local const volatile int* registered_flag = nullptr;
}

const volatile int* cancel_flag() { return registered_flag; }
void set_cancel_flag(const volatile int* flag) { registered_flag = flag; }

void throw_cancelled() { fail(KNN_ERR_CANCELLED, "cancelled by the caller's flag"); }

void throw_if_cancelled(const volatile int* flag) {
  if (flag != nullptr && *flag != 0) throw_cancelled();
}

}  // namespace knn

extern "C" KNN_API int KNN_CALL knn_set_cancel_flag(const volatile int* flag) {
  return knn::guarded("knn_set_cancel_flag", [&] { knn::set_cancel_flag(flag); });
}
