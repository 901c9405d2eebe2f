// Input checks shared by the entry points. Each throws knn::Error with a
// message that names the argument or the element at fault.
#pragma once

#include <cstdint>

#include "../include/knn_gpgpu.h"

namespace knn {

// `count` >= 0, and `array` non-NULL when count > 0.
void check_array(const void* array, int64_t count, const char* array_name, const char* count_name);
void check_k(int k);
// rows * row_length output slots of 4 bytes each fit the address space (and
// every offset into them an int64_t); `what` names the product, e.g. "m * k".
void check_slots(int64_t rows, int64_t row_length, const char* what);
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

// The largest coordinate magnitude the distance-based calls accept in `dim`
// dimensions: 2^e with e = floor((M - 3 - ceil(log2 dim)) / 2), where M is
// the scalar type's max_exponent (128 for float32, 1024 for float64). For
// float32 (M - 3 = 125): 2^62 (4.6e18) for dim 1 and 2, 2^61 for dim 3 and 4,
// 2^56 for dim 4096; for float64 (M - 3 = 1021): 2^510 for dim 1 and 2,
// 2^509 (about 1.7e153) for dim 3 and 4. Why it is enough: for |p|, |q| <=
// L = 2^e the rounded difference is at most 2L (a power of two, and rounding
// is monotone), its square at most 4L^2, and the sum of dim such squares,
// rounded after every addition, at most dim * 4L^2 <= 2^(M - 1) < the
// type's max. So no squared distance (nor any bound the engines compute from
// the same operations) overflows to +infinity, which would make a real
// neighbour look like a missing slot.
template <typename Scalar = float>
Scalar coordinate_limit(int dim);
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
