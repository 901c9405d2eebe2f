// Helpers of the index API tests, shared by the CPU tests and the GPU tests:
// build an index on a given backend and structure, run each call, and compare
// with the oracles (tests/support/oracle.h, tests/support/index_oracle.h) bit for bit.
//
// A test suite parameterised by IndexConfig runs the same cases on every
// backend: instantiate it with the configs of yours (see test_index_cpu.cpp).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "index_oracle.h"
#include "knn_gpgpu.h"
#include "oracle.h"
#include "test_data.h"

namespace knn_test {

// The call failed with `want` and a knn_last_error() that mentions
// `message_part`.
inline ::testing::AssertionResult fails_with(int status, int want,
                                             const std::string& message_part) {
  if (status != want)
    return ::testing::AssertionFailure() << "status " << status << " (" << knn_status_string(status)
                                         << "), want " << want << "; message: " << knn_last_error();
  const std::string message = knn_last_error();
  if (message.find(message_part) == std::string::npos)
    return ::testing::AssertionFailure()
           << "message \"" << message << "\" lacks \"" << message_part << "\"";
  return ::testing::AssertionSuccess();
}

struct IndexConfig {
  int backend = KNN_BACKEND_OPENMP;
  int structure = KNN_STRUCTURE_KDTREE;
};

inline const char* backend_name(int backend) {
  switch (backend) {
    case KNN_BACKEND_AUTO: return "Auto";
    case KNN_BACKEND_CUDA: return "Cuda";
    case KNN_BACKEND_OPENMP: return "OpenMP";
  }
  return "UnknownBackend";
}

inline const char* structure_name(int structure) {
  switch (structure) {
    case KNN_STRUCTURE_AUTO: return "Auto";
    case KNN_STRUCTURE_KDTREE: return "KdTree";
    case KNN_STRUCTURE_GRID: return "Grid";
    case KNN_STRUCTURE_BRUTE_FORCE: return "BruteForce";
  }
  return "UnknownStructure";
}

inline void PrintTo(const IndexConfig& c, std::ostream* os) {
  *os << backend_name(c.backend) << structure_name(c.structure);
}

struct IndexConfigName {
  template <class ParamInfo>
  std::string operator()(const ParamInfo& info) const {
    return std::string(backend_name(info.param.backend)) + structure_name(info.param.structure);
  }
};

// Skips the running test when the config needs a device this machine lacks.
#define KNN_SKIP_WITHOUT_BACKEND(config)                                 \
  do {                                                                   \
    if ((config).backend == KNN_BACKEND_CUDA && cuGetDeviceCount() == 0) \
      GTEST_SKIP() << "no CUDA device";                                  \
  } while (0)

struct IndexDeleter {
  void operator()(knn_index* index) const { EXPECT_EQ(knn_index_free(index), KNN_OK); }
};
using IndexHandle = std::unique_ptr<knn_index, IndexDeleter>;

inline knn_options options_for(const IndexConfig& c, int threads = 0, int leaf_size = 0) {
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = c.backend;
  opt.structure = c.structure;
  opt.threads = threads;
  opt.leaf_size = leaf_size;
  return opt;
}

// Builds the index or fails the test (check with ASSERT_TRUE(index)).
// The serialized form of an index (the buffer prefilled with 0xAB).
inline std::vector<unsigned char> serialize(const knn_index* index) {
  size_t bytes = 0;
  EXPECT_EQ(knn_index_serialized_size(index, &bytes), KNN_OK) << knn_last_error();
  std::vector<unsigned char> buffer(bytes, 0xAB);
  EXPECT_EQ(knn_index_serialize(index, buffer.data(), buffer.size()), KNN_OK) << knn_last_error();
  return buffer;
}

inline IndexHandle build_index(const std::vector<float>& points, int dim, const knn_options& opt) {
  knn_index* index = nullptr;
  const int64_t n = static_cast<int64_t>(points.size()) / dim;
  const int status =
      knn_index_build(points.empty() ? nullptr : points.data(), n, dim, &opt, &index);
  EXPECT_EQ(status, KNN_OK) << knn_last_error();
  return IndexHandle(status == KNN_OK ? index : nullptr);
}

inline IndexHandle build_index(const std::vector<float>& points, int dim, const IndexConfig& c) {
  return build_index(points, dim, options_for(c));
}

inline KnnResult query_index(const knn_index* index, const std::vector<float>& queries, int dim,
                             int k, const knn_options* opt = nullptr) {
  KnnResult r;
  r.m = static_cast<int64_t>(queries.size()) / dim;
  r.k = k;
  r.idx.assign(static_cast<size_t>(r.m) * k, -7);
  r.dist.assign(static_cast<size_t>(r.m) * k, -7.0f);
  const int status = knn_index_query(index, queries.empty() ? nullptr : queries.data(), r.m, k,
                                     reinterpret_cast<int32_t*>(r.idx.data()), r.dist.data(), opt);
  EXPECT_EQ(status, KNN_OK) << knn_last_error();
  return r;
}

inline KnnResult query_self(const knn_index* index, int64_t n, int k, bool exclude_self) {
  KnnResult r;
  r.m = n;
  r.k = k;
  r.idx.assign(static_cast<size_t>(n) * k, -7);
  r.dist.assign(static_cast<size_t>(n) * k, -7.0f);
  const int status = knn_index_query_self(index, k, exclude_self ? 1 : 0,
                                          reinterpret_cast<int32_t*>(r.idx.data()), r.dist.data());
  EXPECT_EQ(status, KNN_OK) << knn_last_error();
  return r;
}

inline RadiusResult radius_index(const knn_index* index, const std::vector<float>& queries, int dim,
                                 float radius, int max_neighbors,
                                 const knn_options* opt = nullptr) {
  RadiusResult r;
  r.m = static_cast<int64_t>(queries.size()) / dim;
  r.max_neighbors = max_neighbors;
  r.idx.assign(static_cast<size_t>(r.m) * max_neighbors, -7);
  r.dist.assign(static_cast<size_t>(r.m) * max_neighbors, -7.0f);
  r.counts.assign(static_cast<size_t>(r.m), -7);
  const int status = knn_index_radius(
      index, queries.empty() ? nullptr : queries.data(), r.m, radius, max_neighbors,
      max_neighbors > 0 ? reinterpret_cast<int32_t*>(r.idx.data()) : nullptr,
      max_neighbors > 0 ? r.dist.data() : nullptr, reinterpret_cast<int32_t*>(r.counts.data()),
      opt);
  EXPECT_EQ(status, KNN_OK) << knn_last_error();
  return r;
}

// Radius search into CSR rows through the API, and its rows against the
// radius oracle with every hit kept.
struct Csr {
  std::vector<int64_t> counts, offsets;
  std::vector<int32_t> idx;
  std::vector<float> dist;
};

// Count, offsets, fill through the API; sq_distances only when asked.
inline Csr radius_csr(const knn_index* index, const std::vector<float>& queries, int dim,
                      float radius, bool want_dist = true) {
  Csr r;
  const int64_t m = static_cast<int64_t>(queries.size()) / dim;
  const float* q = queries.empty() ? nullptr : queries.data();
  r.counts.assign(static_cast<size_t>(m), -7);
  EXPECT_EQ(knn_index_radius_count(index, q, m, radius, r.counts.data(), nullptr), KNN_OK)
      << knn_last_error();
  r.offsets.assign(static_cast<size_t>(m) + 1, -7);
  EXPECT_EQ(knn_offsets_from_counts(r.counts.data(), m, r.offsets.data()), KNN_OK)
      << knn_last_error();
  const size_t total = static_cast<size_t>(r.offsets.back());
  r.idx.assign(total, -7);
  r.dist.assign(total, -7.0f);
  EXPECT_EQ(
      knn_index_radius_fill(index, q, m, radius, r.offsets.data(), total ? r.idx.data() : nullptr,
                            want_dist && total ? r.dist.data() : nullptr, nullptr),
      KNN_OK)
      << knn_last_error();
  return r;
}

// The oracle's rows (every hit kept) against the CSR rows.
inline ::testing::AssertionResult same_as_oracle(const RadiusResult& want, const Csr& got,
                                                 bool dist) {
  int64_t at = 0;
  for (int64_t i = 0; i < want.m; ++i) {
    const int count = want.counts[static_cast<size_t>(i)];
    if (got.counts[static_cast<size_t>(i)] != count)
      return ::testing::AssertionFailure()
             << "query " << i << ": count " << got.counts[static_cast<size_t>(i)] << ", oracle "
             << count;
    if (got.offsets[static_cast<size_t>(i)] != at)
      return ::testing::AssertionFailure()
             << "offsets[" << i << "] is " << got.offsets[static_cast<size_t>(i)] << ", want "
             << at;
    for (int j = 0; j < count; ++j, ++at) {
      const size_t w = static_cast<size_t>(i) * want.max_neighbors + j;
      const size_t g = static_cast<size_t>(at);
      if (got.idx[g] != want.idx[w])
        return ::testing::AssertionFailure() << "query " << i << " entry " << j << ": index "
                                             << got.idx[g] << ", oracle " << want.idx[w];
      const float expected = dist ? want.dist[w] : -7.0f;  // untouched without sq_distances
      if (std::memcmp(&got.dist[g], &expected, sizeof expected) != 0)
        return ::testing::AssertionFailure() << "query " << i << " entry " << j << ": distance "
                                             << got.dist[g] << ", want " << expected;
    }
  }
  if (static_cast<int64_t>(got.idx.size()) != at)
    return ::testing::AssertionFailure() << "total " << got.idx.size() << ", oracle " << at;
  return ::testing::AssertionSuccess();
}

// Indices equal and distances bit-equal.
inline ::testing::AssertionResult same_knn(const KnnResult& want, const KnnResult& got) {
  if (want.m != got.m || want.k != got.k) return ::testing::AssertionFailure() << "shapes differ";
  ::testing::AssertionResult rows = same_rows(want.idx, got.idx, want.m, want.k);
  if (!rows) return rows;
  return same_bits(want.dist, got.dist);
}

inline ::testing::AssertionResult same_radius(const RadiusResult& want, const RadiusResult& got) {
  if (want.counts != got.counts) {
    for (size_t i = 0; i < want.counts.size(); ++i)
      if (want.counts[i] != got.counts[i])
        return ::testing::AssertionFailure() << "query " << i << ": count " << got.counts[i]
                                             << ", the oracle's " << want.counts[i];
  }
  ::testing::AssertionResult rows = same_rows(want.idx, got.idx, want.m, want.max_neighbors);
  if (!rows) return rows;
  return same_bits(want.dist, got.dist);
}

// One kNN case: an index over n points of `dist`, m queries, against the
// float32 oracle and the double check.
inline void expect_knn_like_oracle(const knn_options& opt, Dist dist, int64_t n, int64_t m, int dim,
                                   int k, uint64_t seed) {
  SCOPED_TRACE(describe(dist, n, m, k, seed, ("dim=" + std::to_string(dim)).c_str()));
  const std::vector<float> points = make_rows(dist, n, dim, seed);
  const std::vector<float> queries = make_query_rows(dist, m, dim, seed + 1);
  IndexHandle index = build_index(points, dim, opt);
  ASSERT_TRUE(index);
  const KnnResult got = query_index(index.get(), queries, dim, k);
  const KnnResult want = oracle_knn(points.data(), n, queries.data(), m, dim, k);
  EXPECT_TRUE(same_knn(want, got));
  EXPECT_TRUE(kth_matches_double(points.data(), n, queries.data(), m, dim, k, got.idx.data()));
}

}  // namespace knn_test
