// The CUDA engine as a backend (engine/backend.h): the one entry point the
// ABI layer's registration (src/backends.cpp) takes it from. Plain C++; a
// build without CUDA compiles the same adapter over cuda/no_cuda/, whose
// functions report no device.
#pragma once

#include "../engine/backend.h"

namespace knn {
namespace cuda {

const Backend& cuda_backend();

}  // namespace cuda
}  // namespace knn
