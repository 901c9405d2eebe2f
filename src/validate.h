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
// The rows + 1 offsets of CSR output rows are the running sum of the counts
// (offsets[0] == 0, offsets[i+1] - offsets[i] == counts[i]); names the first
// offset that is not ("out_offsets", "polygon": "... must be polygon p's count").
void check_offsets_match_counts(const int64_t* offsets, const int64_t* counts, int64_t rows,
                                const char* offsets_name, const char* row_name);

}  // namespace knn
