// Memory helpers of the index API (cuda_index.h): telling device arrays from
// host ones, synchronous copies, and the two small kernels the API layer
// needs on arrays it must not copy to the host (missing-slot fill, finiteness
// check of device coordinates).
#include <cmath>
#include <cstdint>
#include <limits>

#include "../../common/non_copyable.h"
#include "../cuda_engine.h"
#include "../cuda_index.h"
#include "../peer_copy.h"
#include "cuda_support.h"
#include "launch_policy.h"

namespace knn {
namespace cuda {
namespace {

// Both kernels are grid-stride loops whose result does not depend on the
// grid size (a fill, and the smallest failing index by atomicMin): launched
// with blocks_for (launch_policy.h).

// Makes the device that holds p current for its lifetime (the caller's
// current device may be another: arrays of several devices per call), and
// restores the caller's. A kernel must run where the memory it touches is.
class OnDeviceOf : NonCopyable {
 public:
  explicit OnDeviceOf(const void* p) {
    const int owner = device_of(p);
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (owner >= 0 && owner != previous_) {
      check(cudaSetDevice(owner), "cudaSetDevice");
      switched_ = true;
    }
  }
  ~OnDeviceOf() {
    if (switched_) cudaSetDevice(previous_);
  }

 private:
  int previous_ = 0;
  bool switched_ = false;
};

template <typename Scalar>
__global__ void fill_missing_kernel(int32_t* indices, Scalar* sq_distances, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    if (indices) indices[i] = -1;
    if (sq_distances) sq_distances[i] = std::numeric_limits<Scalar>::infinity();
  }
}

template <typename Scalar>
__global__ void first_beyond_kernel(const Scalar* values, int64_t count, Scalar limit,
                                    unsigned long long* first) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    if (!(fabs(values[i]) <= limit)) {
      atomicMin(first, static_cast<unsigned long long>(i));
      return;  // later items of this thread have larger indices
    }
  }
}

template <typename Scalar>
void fill_missing(int32_t* indices, Scalar* sq_distances, int64_t count) {
  if (count <= 0 || (indices == nullptr && sq_distances == nullptr)) return;
  const OnDeviceOf here(indices ? static_cast<const void*>(indices) : sq_distances);
  Stream stream;
  fill_missing_kernel<Scalar>
      <<<blocks_for(fill_missing_kernel<Scalar>, count), kBlock, 0, stream.get()>>>(
          indices, sq_distances, count);
  check_launch("fill_missing_kernel");
  stream.synchronize();
}

template <typename Scalar>
int64_t first_beyond(const Scalar* values, int64_t count, Scalar limit) {
  if (count <= 0) return -1;
  const OnDeviceOf here(values);
  Stream stream;
  DeviceBuffer<unsigned long long> first(1);
  check(cudaMemsetAsync(first.get(), 0xff, sizeof(unsigned long long), stream.get()),
        "cudaMemsetAsync");
  first_beyond_kernel<Scalar>
      <<<blocks_for(first_beyond_kernel<Scalar>, count), kBlock, 0, stream.get()>>>(
          values, count, limit, first.get());
  check_launch("first_beyond_kernel");
  unsigned long long found = 0;
  check(cudaMemcpyAsync(&found, first.get(), sizeof found, cudaMemcpyDeviceToHost, stream.get()),
        "cudaMemcpyAsync");
  stream.synchronize();
  return found == std::numeric_limits<unsigned long long>::max() ? -1 : static_cast<int64_t>(found);
}

}  // namespace

bool is_device_pointer(const void* p) {
  // Without a device, asking the runtime would only produce an error.
  if (p == nullptr || device_count() == 0) return false;
  return device_may_use_in_place(p, -1);
}

void copy_to_host(void* host_dst, const void* device_src, size_t bytes) {
  if (bytes == 0) return;
  check(cudaMemcpy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}

void copy_to_device(void* device_dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  check(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
}

template <typename Scalar>
void fill_missing_on_device(int32_t* indices, Scalar* sq_distances, int64_t count) {
  fill_missing(indices, sq_distances, count);
}
template void fill_missing_on_device(int32_t*, float*, int64_t);
template void fill_missing_on_device(int32_t*, double*, int64_t);

template <typename Scalar>
int64_t first_beyond_on_device(const Scalar* values, int64_t count, Scalar limit) {
  return first_beyond(values, count, limit);
}
template int64_t first_beyond_on_device(const float*, int64_t, float);
template int64_t first_beyond_on_device(const double*, int64_t, double);

}  // namespace cuda
}  // namespace knn
