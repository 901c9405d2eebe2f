// Fuzz target: knn_index_deserialize on arbitrary buffers. The first input
// byte picks the mode: even, the rest of the input is the buffer as is (the
// checksum then refuses almost everything, which exercises the header
// checks); odd, its CRC-32C (the last 4 bytes) is recomputed first, so the
// fuzzer reaches the checks and the build behind a valid checksum. Checked: a
// listed status with a message and *out NULL on refusal; on success the
// loaded index re-serializes to exactly the input and its kNN answers equal
// knn_brute_force's on the buffer's points (a float64 index, format version
// 2: a float64 brute force written here).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "fuzz_support.h"

namespace {

using knn_fuzz::check_status;
using knn_fuzz::expect;

// Bitwise CRC-32C, written independently of the library's table version.
uint32_t crc32c_bitwise(const unsigned char* data, size_t bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < bytes; ++i) {
    c ^= data[i];
    for (int bit = 0; bit < 8; ++bit) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return ~c;
}

// The loaded index against knn_brute_force over the buffer's own points (at
// offset 64, n rows of dim floats), with those points as queries.
void check_answers(knn_index* index, const std::vector<unsigned char>& buffer) {
  int64_t n = 0;
  int dim = 0;
  check_status(knn_index_info(index, &n, &dim, nullptr, nullptr));
  if (n == 0) return;
  std::vector<float> points(static_cast<size_t>(n) * dim);
  std::memcpy(points.data(), buffer.data() + 64, points.size() * sizeof(float));
  const int k = static_cast<int>(n < 4 ? n : 4);
  std::vector<int32_t> got(static_cast<size_t>(n) * k);
  std::vector<float> got_sq(got.size());
  std::vector<int> want(got.size());
  std::vector<float> want_sq(got.size());
  const int status =
      knn_index_query(index, points.data(), n, k, got.data(), got_sq.data(), nullptr);
  check_status(status);
  expect(status == KNN_OK, "a loaded index refused a query on its own points", status);
  const int oracle = knn_brute_force(points.data(), static_cast<int>(n), points.data(),
                                     static_cast<int>(n), dim, k, want_sq.data(), want.data());
  expect(oracle == KNN_OK, "knn_brute_force refused the loaded points", oracle);
  for (size_t i = 0; i < got.size(); ++i) {
    expect(got[i] == want[i], "a loaded index answered another index than brute force", status);
    expect(std::memcmp(&got_sq[i], &want_sq[i], sizeof(float)) == 0,
           "a loaded index answered another distance than brute force", status);
  }
}

// The same for a float64 index: its points as doubles, against the
// contract's float64 distance ((d0*d0 + d1*d1) + ...) in a brute force here
// (compiled with -ffp-contract=off), ties by index.
void check_answers64(knn_index* index, const std::vector<unsigned char>& buffer) {
  int64_t n = 0;
  int dim = 0;
  check_status(knn_index_info(index, &n, &dim, nullptr, nullptr));
  if (n == 0) return;
  std::vector<double> points(static_cast<size_t>(n) * dim);
  std::memcpy(points.data(), buffer.data() + 64, points.size() * sizeof(double));
  const int k = static_cast<int>(n < 4 ? n : 4);
  std::vector<int32_t> got(static_cast<size_t>(n) * k);
  std::vector<double> got_sq(got.size());
  const int status =
      knn_index_query_f64(index, points.data(), n, k, got.data(), got_sq.data(), nullptr);
  check_status(status);
  expect(status == KNN_OK, "a loaded float64 index refused a query on its own points", status);
  std::vector<std::pair<double, int32_t>> all(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double* q = &points[static_cast<size_t>(i) * dim];
    for (int64_t j = 0; j < n; ++j) {
      const double* p = &points[static_cast<size_t>(j) * dim];
      double sum = 0;
      for (int d = 0; d < dim; ++d)
        sum = d == 0 ? (q[d] - p[d]) * (q[d] - p[d]) : sum + (q[d] - p[d]) * (q[d] - p[d]);
      all[static_cast<size_t>(j)] = {sum, static_cast<int32_t>(j)};
    }
    std::partial_sort(all.begin(), all.begin() + k, all.end());
    for (int j = 0; j < k; ++j) {
      const size_t s = static_cast<size_t>(i) * k + j;
      expect(got[s] == all[static_cast<size_t>(j)].second,
             "a loaded float64 index answered another index than brute force", status);
      expect(std::memcmp(&got_sq[s], &all[static_cast<size_t>(j)].first, sizeof(double)) == 0,
             "a loaded float64 index answered another distance than brute force", status);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool fix_checksum = (data[0] & 1u) != 0;
  std::vector<unsigned char> buffer(data + 1, data + size);
  if (fix_checksum && buffer.size() >= 4) {
    const uint32_t crc = crc32c_bitwise(buffer.data(), buffer.size() - 4);
    std::memcpy(buffer.data() + buffer.size() - 4, &crc, 4);
  }
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  knn_index* index = reinterpret_cast<knn_index*>(&opt);  // must be cleared on failure
  // A copy of exactly `size - 1` bytes on the heap: ASan sees any read past it.
  const int status = knn_index_deserialize(buffer.data(), buffer.size(), &opt, &index);
  check_status(status);
  if (status != KNN_OK) {
    expect(index == nullptr, "a refused load left *out set", status);
    return 0;
  }
  size_t bytes = 0;
  check_status(knn_index_serialized_size(index, &bytes));
  expect(bytes == buffer.size(), "a loaded index serializes to another size", status);
  std::vector<unsigned char> again(bytes);
  check_status(knn_index_serialize(index, again.data(), again.size()));
  // The same bytes, except that a grid the points make poor is served (and
  // saved again) as a kd-tree (include/knn_gpgpu.h, Structures).
  int structure = 0;
  check_status(knn_index_info(index, nullptr, nullptr, nullptr, &structure));
  int32_t saved_structure = 0;
  std::memcpy(&saved_structure, buffer.data() + 32, 4);
  if (structure == saved_structure) {
    expect(again == buffer, "a loaded index serializes to other bytes", status);
  } else {
    expect(saved_structure == KNN_STRUCTURE_GRID && structure == KNN_STRUCTURE_KDTREE,
           "a loaded index has another structure than its buffer's", status);
    expect(std::memcmp(again.data() + 64, buffer.data() + 64, bytes - 68) == 0,
           "a loaded index serializes other points", status);
  }
  int scalar = -1;
  check_status(knn_index_scalar(index, &scalar));
  if (scalar == KNN_SCALAR_FLOAT64)
    check_answers64(index, buffer);
  else
    check_answers(index, buffer);
  check_status(knn_index_free(index));
  return 0;
}
