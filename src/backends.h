// The backends of this library (engine/backend.h), registered in
// src/backends.cpp: every planner and entry point of src/ chooses and calls a
// backend through these, by kind, availability and device list, and names
// no engine's own functions.
#pragma once

#include "../engine/backend.h"

namespace knn {

// The backend without devices, always available: OpenMP.
const Backend& host_backend();
// The backend with devices: CUDA (in a build without CUDA its stand-in,
// which has no devices and answers every device operation with
// KNN_ERR_NO_DEVICE).
const Backend& device_backend();
// The backend of a KNN_BACKEND_CUDA or KNN_BACKEND_OPENMP handle.
const Backend& backend_of(int kind);

}  // namespace knn
