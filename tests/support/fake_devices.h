// Devices that exist only as a number: DeviceOps (src/device_replicas.h) whose
// select() records the device in a thread-local "current device", so the
// multi-device code (run_shares, BasicDeviceReplicas) runs and can be watched
// on a machine without a GPU. Every array is host memory and no device reaches
// another's.
#pragma once

#include "../../src/device_replicas.h"

namespace knn_test {

// The calling thread's selected fake device (-1: none yet).
inline thread_local int fake_current = -1;

inline knn::DeviceOps fake_ops() {
  return knn::DeviceOps{[](int d) { fake_current = d; }, [] { return fake_current; },
                        [](const void*) { return -1; }, [](int, int) { return false; }};
}

}  // namespace knn_test
