// Helpers the fuzz targets share: reading sizes and coordinates from the
// fuzzer's bytes, and the checks every status must pass.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "knn_gpgpu.h"

namespace knn_fuzz {

// A finding: print it and abort, which libFuzzer records as a crash with
// the input that caused it.
[[noreturn]] inline void finding(const char* what, int status) {
  std::fprintf(stderr, "knn fuzz finding: %s (status %d: %s; last error \"%s\")\n", what, status,
               knn_status_string(status), knn_last_error());
  std::abort();
}

inline void expect(bool ok, const char* what, int status) {
  if (!ok) finding(what, status);
}

// Every status is one the header lists, and a failure says what went wrong.
inline void check_status(int status) {
  expect(status >= KNN_OK && status <= KNN_ERR_INTERNAL, "status outside the header's list",
         status);
  expect(status != KNN_ERR_INTERNAL, "KNN_ERR_INTERNAL (a bug by definition)", status);
  if (status != KNN_OK) expect(knn_last_error()[0] != '\0', "a failure without a message", status);
}

// Floats from raw bytes when asked for, so NaN, infinity, subnormals and
// huge values all occur; else small integers, so ties and duplicates do.
inline float next_float(FuzzedDataProvider& in, bool raw) {
  if (raw) {
    uint32_t bits = in.ConsumeIntegral<uint32_t>();
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  return static_cast<float>(in.ConsumeIntegralInRange<int>(-4, 4));
}

inline std::vector<float> next_floats(FuzzedDataProvider& in, size_t count, bool raw) {
  std::vector<float> v(count);
  for (float& f : v) f = next_float(in, raw);
  return v;
}

// A count as a caller might pass it: usually small, sometimes negative.
inline int next_count(FuzzedDataProvider& in, int max) {
  return in.ConsumeIntegralInRange<int>(-2, max);
}

// Buffers sized for a count that may be negative; NULL when the fuzzer says
// so (the library must refuse NULL with a positive count, accept it with 0).
template <class T>
struct Buffer {
  std::vector<T> storage;
  bool null = false;
  Buffer(FuzzedDataProvider& in, long long count, T fill)
      : null(in.ConsumeIntegralInRange<int>(0, 15) == 0) {
    storage.assign(count > 0 ? static_cast<size_t>(count) : 0, fill);
  }
  T* get() { return null ? nullptr : storage.data(); }
};

}  // namespace knn_fuzz
