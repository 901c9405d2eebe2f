// The base of the CUDA index engines: each keeps the indexed points on its
// device in input order (knn_self reads them there as its queries), so
// copying them out, to the host (serialization, the multi-device copies) or
// to another device array (the kd-tree an AUTO index adds), is the same for
// all three and lives here once.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../../engine/index_engine.h"
#include "../../include/knn_gpgpu.h"
#include "cuda_support.h"

namespace knn {
namespace cuda {

template <typename Scalar>
class ResidentRowsEngine : public BasicIndexEngine<Scalar> {
 public:
  void copy_points(Scalar* host_rows) const final { copy_rows(host_rows, cudaMemcpyDeviceToHost); }
  void copy_points_to_device(Scalar* device_rows) const final {
    copy_rows(device_rows, cudaMemcpyDeviceToDevice);
  }
  // size() rows of dim() scalars on device(), in input order, for the life
  // of the engine: what the aligner of knn_index_align reads in place
  // (cuda/stats/cloud_align.cu).
  virtual const Scalar* resident_rows() const = 0;

 protected:
  // Built on the current device, which the engine keeps.
  ResidentRowsEngine(int structure, int64_t n, int dim)
      : BasicIndexEngine<Scalar>({KNN_BACKEND_CUDA, structure, n, dim}) {
    check(cudaGetDevice(&device_), "cudaGetDevice");
  }
  int device() const { return device_; }

 private:
  // On a stream of its own, waited for: a device-to-device cudaMemcpy
  // returns before the copy is done, and the caller's next work (the
  // kd-tree build) runs on a non-blocking stream of its own.
  void copy_rows(Scalar* destination, cudaMemcpyKind kind) const {
    const size_t bytes =
        sizeof(Scalar) * static_cast<size_t>(this->size()) * static_cast<size_t>(this->dim());
    if (bytes == 0) return;
    const DeviceScope on_device(device_);
    Stream stream;
    check(cudaMemcpyAsync(destination, resident_rows(), bytes, kind, stream.get()),
          "cudaMemcpyAsync (index points in input order)");
    stream.synchronize();
  }

  int device_ = 0;
};

}  // namespace cuda
}  // namespace knn
