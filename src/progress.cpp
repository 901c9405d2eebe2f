// knn_set_progress, the ABI entry point of the progress registry
// (engine/progress.cpp).
#include "../engine/progress.h"

#include "abi_barrier.h"

extern "C" KNN_API int KNN_CALL knn_set_progress(knn_progress* progress) {
  return knn::guarded("knn_set_progress", [&] {
    knn::progress_clear(progress);
    knn::set_progress(progress);
  });
}
