#include "validate.h"

#include <string>

#include "../common/error.h"
#include "../common/first_index.h"
#include "../common/float_math.h"

namespace knn {

void check_array(const void* array, int64_t count, const char* array_name,
                 const char* count_name) {
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

void check_finite(const float* rows, int64_t n, int dim, const char* what) {
  const int64_t first_bad = first_index_where(n, [rows, dim](int64_t i) {
    for (int d = 0; d < dim; ++d)
      if (!is_finite_float(rows[i * dim + d])) return true;
    return false;
  });
  if (first_bad == n) return;
  for (int d = 0; d < dim; ++d) {
    const float v = rows[first_bad * dim + d];
    if (!is_finite_float(v))
      fail(KNN_ERR_NONFINITE_INPUT,
           format("%s %lld has a%s coordinate (dimension %d)", what,
                  static_cast<long long>(first_bad), v != v ? " NaN" : "n infinite", d));
  }
}

void check_offsets_match_counts(const int64_t* offsets, const int64_t* counts, int64_t rows,
                                const char* offsets_name, const char* row_name) {
  // Compared with the running sum of the counts rather than by differences of
  // the caller's offsets, which could overflow.
  int64_t expected = 0;
  for (int64_t i = 0; i <= rows; ++i) {
    if (offsets[i] != expected) {
      const std::string why =
          i == 0 ? std::string("it must be 0")
                 : format("%s[p+1] - %s[p] must be %s p's count", offsets_name, offsets_name,
                          row_name);
      fail(KNN_ERR_INVALID_ARGUMENT,
           format("%s[%lld] is %lld but the counts give %lld (%s)", offsets_name,
                  static_cast<long long>(i), static_cast<long long>(offsets[i]),
                  static_cast<long long>(expected), why.c_str()));
    }
    if (i < rows) expected += counts[i];
  }
}

}  // namespace knn
