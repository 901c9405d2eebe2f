// Input checks shared by the entry points. Each throws knn::Error with a
// message that names the argument or the element at fault.
#pragma once

#include <cstdint>

#include "../include/knn_gpgpu.h"

namespace knn {

// `count` >= 0, and `array` non-NULL when count > 0.
void check_array(const void* array, int64_t count, const char* array_name,
                 const char* count_name);
void check_k(int k);
// Every coordinate of n rows of dim floats is finite; names the first bad row.
void check_finite(const float* rows, int64_t n, int dim, const char* what);

}  // namespace knn
