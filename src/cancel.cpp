// knn_set_cancel_flag, the ABI entry point of the cancel registry
// (engine/cancel.cpp).
#include "../engine/cancel.h"

#include "abi_barrier.h"

extern "C" KNN_API int KNN_CALL knn_set_cancel_flag(const volatile int* flag) {
  return knn::guarded("knn_set_cancel_flag", [&] { knn::set_cancel_flag(flag); });
}
