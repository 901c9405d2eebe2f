// The OpenMP engine as a backend (engine/backend.h): the one entry point the
// ABI layer's registration (src/backends.cpp) takes it from.
#pragma once

#include "../engine/backend.h"

namespace knn {
namespace omp {

const Backend& omp_backend();

}  // namespace omp
}  // namespace knn
