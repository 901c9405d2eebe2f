#include "validate.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "../common/error.h"
#include "../common/first_index.h"
#include "../common/float_math.h"

namespace knn {

void check_array(const void* array, int64_t count, const char* array_name, const char* count_name) {
  if (count < 0)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("%s is %lld; it must not be negative", count_name, static_cast<long long>(count)));
  if (count > 0 && array == nullptr)
    fail(KNN_ERR_INVALID_ARGUMENT, format("%s is NULL while %s is %lld", array_name, count_name,
                                          static_cast<long long>(count)));
}

void check_k(int k) {
  if (k < 1) fail(KNN_ERR_INVALID_ARGUMENT, format("k is %d; it must be at least 1", k));
}

void check_slots(int64_t rows, int64_t row_length, size_t element_bytes, const char* what) {
  // Arrays are addressed by ptrdiff_t: beyond this no caller array exists.
  const int64_t max_elements = PTRDIFF_MAX / static_cast<int64_t>(element_bytes);
  if (rows > 0 && row_length > max_elements / rows)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("%s = %lld * %lld elements of %zu bytes exceed the %lld such an array can address",
                what, static_cast<long long>(rows), static_cast<long long>(row_length),
                element_bytes, static_cast<long long>(max_elements)));
}

void check_offsets_size(int64_t rows, const char* array, const char* rows_name) {
  constexpr int64_t kMaxRows = PTRDIFF_MAX / static_cast<int64_t>(sizeof(int64_t)) - 1;
  if (rows > kMaxRows)
    fail(KNN_ERR_INVALID_ARGUMENT,
         format("%s is %lld; %s holds %s + 1 int64 entries, more than an array can address "
                "(%s is at most %lld)",
                rows_name, static_cast<long long>(rows), array, rows_name, rows_name,
                static_cast<long long>(kMaxRows)));
}

namespace {

// The first row with a coordinate whose magnitude is not <= limit (NaN and
// infinities included), or n.
template <typename Scalar>
int64_t first_row_beyond(const Scalar* rows, int64_t n, int dim, Scalar limit, int threads) {
  return first_index_where(n, threads, [rows, dim, limit](int64_t i) {
    for (int d = 0; d < dim; ++d)
      if (!(std::fabs(rows[i * dim + d]) <= limit)) return true;
    return false;
  });
}

template <typename Scalar>
void check_rows(const Scalar* rows, int64_t n, int dim, const char* what, Scalar limit,
                int threads) {
  const int64_t row = first_row_beyond(rows, n, dim, limit, threads);
  if (row == n) return;
  for (int d = 0; d < dim; ++d) {
    const Scalar v = rows[row * dim + d];
    if (!(std::fabs(v) <= limit)) fail_coordinate(v, row, d, dim, limit, what);
  }
}

// The scalar type's name in messages.
const char* scalar_name(float) { return "float32"; }
const char* scalar_name(double) { return "float64"; }

}  // namespace

template <typename Scalar>
void fail_coordinate(Scalar value, int64_t row, int d, int dim, Scalar limit, const char* what) {
  if (!is_finite_float(value))
    fail(KNN_ERR_NONFINITE_INPUT,
         format("%s %lld has a%s coordinate (dimension %d)", what, static_cast<long long>(row),
                value != value ? " NaN" : "n infinite", d));
  fail(KNN_ERR_INVALID_ARGUMENT,
       format("%s %lld has coordinate %g (dimension %d); in %d dimension%s coordinates must lie "
              "within +-%g, so that squared distances stay finite in %s",
              what, static_cast<long long>(row), static_cast<double>(value), d, dim,
              dim == 1 ? "" : "s", static_cast<double>(limit), scalar_name(value)));
}

template <typename Scalar>
void check_finite(const Scalar* rows, int64_t n, int dim, const char* what, int threads) {
  check_rows(rows, n, dim, what, std::numeric_limits<Scalar>::max(), threads);
}

template <typename Scalar>
void check_coordinates(const Scalar* rows, int64_t n, int dim, const char* what, int threads) {
  check_rows(rows, n, dim, what, coordinate_limit<Scalar>(dim), threads);
}

template void check_finite<float>(const float*, int64_t, int, const char*, int);
template void check_finite<double>(const double*, int64_t, int, const char*, int);
template void check_coordinates<float>(const float*, int64_t, int, const char*, int);
template void check_coordinates<double>(const double*, int64_t, int, const char*, int);
template void fail_coordinate<float>(float, int64_t, int, int, float, const char*);
template void fail_coordinate<double>(double, int64_t, int, int, double, const char*);

void check_offsets_match_counts(const int64_t* offsets, const int64_t* counts, int64_t rows,
                                const char* offsets_name, const char* row_name) {
  // Compared with the running sum of the counts rather than by differences of
  // the caller's offsets, which could overflow.
  int64_t expected = 0;
  for (int64_t i = 0; i <= rows; ++i) {
    if (offsets[i] != expected) {
      const std::string why = i == 0 ? std::string("it must be 0")
                                     : format("%s[p+1] - %s[p] must be %s p's count", offsets_name,
                                              offsets_name, row_name);
      fail(KNN_ERR_INVALID_ARGUMENT,
           format("%s[%lld] is %lld but the counts give %lld (%s)", offsets_name,
                  static_cast<long long>(i), static_cast<long long>(offsets[i]),
                  static_cast<long long>(expected), why.c_str()));
    }
    if (i < rows) expected += counts[i];
  }
}

}  // namespace knn
