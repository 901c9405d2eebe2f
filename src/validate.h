// Input checks shared by the entry points. Each throws knn::Error with a
// message that names the argument or the element at fault.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../common/coordinate_limit.h"
#include "../include/knn_gpgpu.h"

namespace knn {

// `count` >= 0, and `array` non-NULL when count > 0.
void check_array(const void* array, int64_t count, const char* array_name, const char* count_name);
void check_k(int k);
// An array of rows * row_length elements of element_bytes each fits the
// address space (its byte count, and so every offset into it, fits a
// ptrdiff_t); `what` names the product, e.g. "m * k". Checked before the
// array is read, written or allocated.
void check_slots(int64_t rows, int64_t row_length, size_t element_bytes, const char* what);
// An array of rows + 1 int64 offsets (CSR offsets, polygon and ring offsets)
// fits the address space: rows + 1 itself does not overflow, and neither
// does its byte count. `array` names the array, `rows_name` the count.
void check_offsets_size(int64_t rows, const char* array, const char* rows_name);
// Every coordinate of n rows of dim scalars (float or double) is finite;
// names the first bad row. `threads`: the call's thread count
// (knn_options.threads; 0: the default), as common/team_size.h takes it.
template <typename Scalar>
void check_finite(const Scalar* rows, int64_t n, int dim, const char* what, int threads);
// The rows + 1 offsets of CSR output rows are the running sum of the counts
// (offsets[0] == 0, offsets[i+1] - offsets[i] == counts[i]); names the first
// offset that is not ("out_offsets", "polygon": "... must be polygon p's count").
void check_offsets_match_counts(const int64_t* offsets, const int64_t* counts, int64_t rows,
                                const char* offsets_name, const char* row_name);

// check_finite, and every magnitude at most coordinate_limit<Scalar>(dim):
// beyond it, KNN_ERR_INVALID_ARGUMENT naming the row, dimension, value and
// limit.
template <typename Scalar>
void check_coordinates(const Scalar* rows, int64_t n, int dim, const char* what, int threads);
// The message of the first bad coordinate `value` (row, dimension) found by
// a scan against `limit`, thrown with its status.
template <typename Scalar>
[[noreturn]] void fail_coordinate(Scalar value, int64_t row, int d, int dim, Scalar limit,
                                  const char* what);

}  // namespace knn
