// Calls of an index engine (engine/index_engine.h, linked from
// knn_gpgpu_engines) straight into the result types of the oracles, for the
// tests that check engines without the public API in between: the grid tests
// of both backends and the CUDA index tests.
//
// Outputs start at -7, a value no engine writes, so unwritten slots show.
// Engines report a refused call by throwing knn::Error; status_of turns that
// back into the status the API would return.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "../../common/error.h"
#include "../../engine/index_engine.h"
#include "index_oracle.h"
#include "knn_gpgpu.h"
#include "oracle.h"

namespace knn_test {

inline KnnResult engine_knn(const knn::IndexEngine& e, const std::vector<float>& queries, int k,
                            const knn::CallParams& call = {}) {
  KnnResult r;
  r.m = static_cast<int64_t>(queries.size()) / e.dim();
  r.k = k;
  r.idx.assign(static_cast<size_t>(r.m) * k, -7);
  r.dist.assign(static_cast<size_t>(r.m) * k, -7.0f);
  e.knn(queries.empty() ? nullptr : queries.data(), r.m, k,
        reinterpret_cast<int32_t*>(r.idx.data()), r.dist.data(), call);
  return r;
}

inline KnnResult engine_self(const knn::IndexEngine& e, int k, bool exclude_self,
                             const knn::CallParams& call = {}) {
  KnnResult r;
  r.m = e.size();
  r.k = k;
  r.idx.assign(static_cast<size_t>(r.m) * k, -7);
  r.dist.assign(static_cast<size_t>(r.m) * k, -7.0f);
  e.knn_self(k, exclude_self, reinterpret_cast<int32_t*>(r.idx.data()), r.dist.data(), call);
  return r;
}

// max_neighbors == 0 is a counting call: no rows, counts only. Without
// want_distances the distance row is not asked for (and stays -7).
inline RadiusResult engine_radius(const knn::IndexEngine& e, const std::vector<float>& queries,
                                  float radius, int max_neighbors, bool want_distances = true) {
  RadiusResult r;
  r.m = static_cast<int64_t>(queries.size()) / e.dim();
  r.max_neighbors = max_neighbors;
  r.idx.assign(static_cast<size_t>(r.m) * max_neighbors, -7);
  r.dist.assign(static_cast<size_t>(r.m) * max_neighbors, -7.0f);
  r.counts.assign(static_cast<size_t>(r.m), -7);
  const bool rows = max_neighbors > 0;
  e.radius(queries.data(), r.m, radius, max_neighbors,
           rows ? reinterpret_cast<int32_t*>(r.idx.data()) : nullptr,
           rows && want_distances ? r.dist.data() : nullptr,
           reinterpret_cast<int32_t*>(r.counts.data()), knn::CallParams{});
  return r;
}

// The status `call` ends with: KNN_OK, or that of the knn::Error it throws.
inline int status_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const knn::Error& e) {
    return e.status();
  }
  return KNN_OK;
}

}  // namespace knn_test
