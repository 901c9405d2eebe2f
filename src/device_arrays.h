// Caller's arrays that may be host or device memory (the index's and the
// mesh's calls take both): which they are, and the coordinate checks made
// where the rows live.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../common/coordinate_limit.h"
#include "backends.h"
#include "validate.h"

namespace knn {

inline bool on_device(const void* p) {
  return p != nullptr && device_backend().is_device_pointer(p);
}

// `count` values from the host into an array of host or device memory.
template <typename T>
void write_values(T* dst, const T* src, int64_t count, bool device) {
  if (count <= 0) return;
  if (device)
    device_backend().copy_to_device(dst, src, static_cast<size_t>(count) * sizeof(T));
  else
    std::copy(src, src + count, dst);
}

// `count` copies of value into an array of host or device memory (`device`);
// a device array is written from a host piece of at most 2^18 values at a
// time. A null array is left alone.
template <typename T>
void fill_values(T* array, int64_t count, T value, bool device) {
  if (array == nullptr) return;
  if (!device) return std::fill(array, array + count, value);
  const std::vector<T> piece(static_cast<size_t>(std::min<int64_t>(count, 1 << 18)), value);
  for (int64_t done = 0; done < count;) {
    const int64_t part = std::min<int64_t>(count - done, static_cast<int64_t>(piece.size()));
    device_backend().copy_to_device(array + done, piece.data(),
                                    static_cast<size_t>(part) * sizeof(T));
    done += part;
  }
}

// fill_values as the best effort of a call that has failed already (its
// status reports that first failure).
template <typename T>
void try_fill_values(T* array, int64_t count, T value, bool device) noexcept {
  try {
    fill_values(array, count, value, device);
  } catch (...) {
  }
}

// Arrays the engines never read on the device: refused when they are
// (defined in src/mesh_api.cpp).
void check_host_array(const void* p, const char* name);

// Every coordinate finite and within coordinate_limit<Scalar>(dim), wherever
// the rows live; names the first bad row. Host rows are scanned by `threads`.
template <typename Scalar>
void check_coordinate_rows(const Scalar* rows, int64_t n, int dim, bool rows_on_device,
                           const char* what, int threads) {
  if (!rows_on_device) return check_coordinates(rows, n, dim, what, threads);
  const Scalar limit = coordinate_limit<Scalar>(dim);
  const int64_t bad = device_backend().first_beyond_on_device(rows, n * dim, limit);
  if (bad < 0) return;
  Scalar value = 0;
  device_backend().copy_to_host(&value, rows + bad, sizeof value);
  fail_coordinate(value, bad / dim, static_cast<int>(bad % dim), dim, limit, what);
}

}  // namespace knn
