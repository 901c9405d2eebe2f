// The one device of a handle: the backend a build of one device takes, and
// that device made current for the length of a call (the index's, the
// quadtree's and the mesh's calls run on the device they were built on).
#pragma once

#include "../common/error.h"
#include "../common/non_copyable.h"
#include "backends.h"
#include "device_choice.h"
#include "options.h"

namespace knn {

// Makes `device` current for the scope (nothing when -1 or already current)
// and restores the caller's current device afterwards.
class DeviceScope : NonCopyable {
 public:
  explicit DeviceScope(int device) {
    if (device < 0) return;
    const int current = device_backend().current_device();
    if (current == device) return;
    device_backend().set_device(device);
    previous_ = current;
  }
  ~DeviceScope() {
    if (previous_ < 0) return;
    try {
      device_backend().set_device(previous_);
    } catch (...) {
      // The call's own status already says what failed on the device.
    }
  }

 private:
  int previous_ = -1;
};

// The backend of a build on the calling thread's current device:
// KNN_BACKEND_OPENMP as asked, else CUDA where a device is present (NO_DEVICE
// where CUDA was asked and none is). The device checks of an index build
// come first; opt->device, when set, must be the current device. `what`
// names the handle in messages ("the quadtree").
inline int choose_one_device_backend(const knn_options& o, const char* what) {
  if (o.backend == KNN_BACKEND_OPENMP) return KNN_BACKEND_OPENMP;
  const int devices = device_backend().device_count();
  check_device_number(o.device, devices);
  check_device_list(o, devices);
  const bool device = devices > 0;
  if (o.backend == KNN_BACKEND_CUDA && !device)
    fail(KNN_ERR_NO_DEVICE,
         "opt->backend is KNN_BACKEND_CUDA but no usable CUDA device is present");
  if (device && o.device >= 0 && o.device != device_backend().current_device())
    fail(KNN_ERR_UNSUPPORTED,
         format("opt->device is %d but the calling thread's current device is %d; select the "
                "device with cuSetDevice before building %s",
                o.device, device_backend().current_device(), what));
  return device ? KNN_BACKEND_CUDA : KNN_BACKEND_OPENMP;
}

}  // namespace knn
