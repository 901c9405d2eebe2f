// cuda/peer_copy.h in a build without CUDA: no device memory exists, so no
// share ever needs moving; a call that asks anyway reports no device.
#include "../../common/error.h"
#include "../peer_copy.h"

namespace knn {
namespace cuda {

int device_of(const void*) { return -1; }
bool reaches_in_place(int, int) { return false; }

PeerStream::PeerStream() {
  fail(KNN_ERR_NO_DEVICE, "this knn_gpgpu was built without CUDA (KNN_WITH_CUDA=OFF)");
}
PeerStream::~PeerStream() = default;
void PeerStream::copy(void*, int, const void*, int, size_t) {}
void PeerStream::wait() {}

PeerStaging::PeerStaging(size_t) {
  fail(KNN_ERR_NO_DEVICE, "this knn_gpgpu was built without CUDA (KNN_WITH_CUDA=OFF)");
}

PeerStaging::~PeerStaging() = default;

}  // namespace cuda
}  // namespace knn
