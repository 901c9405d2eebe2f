// Pinned (page-locked) host staging buffers, kept for reuse across calls.
// Pinning hundreds of megabytes costs more than the transfers it speeds up,
// so the pool keeps what calls return, up to a cap, for the next call, and
// frees what it keeps idle at process exit.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>

#include "../../common/non_copyable.h"

namespace knn {
namespace cuda {

class PinnedLease : NonCopyable {
 public:
  explicit PinnedLease(size_t bytes);  // throws HOST_OUT_OF_MEMORY / DEVICE
  ~PinnedLease();

  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// memcpy between pageable and pinned host memory over a few threads
// (kHostCopyThreads): one core cannot keep up with the PCIe link. Serial
// when called from inside a parallel region.
void staging_copy(void* dst, const void* src, size_t bytes);

// Pageable host memory to and from the device through two pinned pieces of
// the pool: the host threads (staging_copy) fill or drain one piece while
// the other crosses the link on `stream`. A pageable cudaMemcpy is staged
// by the driver on one thread (about 7 GB/s on the H100 host, where these
// copies ran 3x faster). Both return when the copy is done.
void upload_staged(void* device_dst, const void* host_src, size_t bytes, cudaStream_t stream);
void download_staged(void* host_dst, const void* device_src, size_t bytes, cudaStream_t stream);
// The upload in pieces of at most piece_bytes, each handed to
// land(offset, length, pinned) once staged: land enqueues on `stream` what
// takes it on (its copy to the device, kernels after it); the pinned piece
// is refilled only after that work is done.
void upload_staged_pieces(const void* host_src, size_t bytes, size_t piece_bytes,
                          cudaStream_t stream,
                          const std::function<void(size_t, size_t, const void*)>& land);
// `bytes` of points into device memory from device memory (one device copy)
// or from pageable host memory (upload_staged); returns when done.
void copy_points_in(void* device_dst, const void* src, size_t bytes, bool src_on_device,
                    cudaStream_t stream);

}  // namespace cuda
}  // namespace knn
