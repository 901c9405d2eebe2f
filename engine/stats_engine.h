// The engines' part of the neighbourhood statistics (include/knn_gpgpu_stats.h):
// a reducer turns the kNN lists of chunks of an index's own points into
// per-point statistics, where the lists are. src/stats_calls.cpp drives it:
// for each chunk of points the index's one query path (answer_call) writes
// the chunk's lists into the reducer's scratch, taking the reducer's copy of
// those points as its queries (in the order the reducer chose: their Morton
// order, so that neighbouring rows search the same nodes and gather the same
// neighbours), and the reducer then writes the chunk's outputs
// (common/geometry/neighbourhood.h). The order changes no bit: each row's
// list and statistic depend on its point alone. The OpenMP reducer keeps points and
// lists in host memory; the CUDA one in device memory, so the lists never
// cross to the host.
#pragma once

#include <cstdint>
#include <memory>

#include "../common/geometry/neighbourhood.h"
#include "index_engine.h"

namespace knn {

// One statistics call. Outputs live where outputs_on_device says (the CUDA
// reducer takes either; the OpenMP one host memory only).
template <typename Scalar>
struct StatsRequest {
  NeighbourhoodStatistic what = NeighbourhoodStatistic::Normals;
  int k = 0;                    // the caller's k
  int list_k = 0;               // entries per list: k for normals, k + 1 for the others
  int64_t n = 0;                // the index's points
  Scalar* values = nullptr;     // normals (3 n) or distances (n)
  Scalar* curvature = nullptr;  // n, or null (normals only)
  bool has_viewpoint = false;   // normals: orient towards viewpoint
  Scalar viewpoint[3] = {0, 0, 0};
  bool outputs_on_device = false;
};

template <typename Scalar>
class BasicListReducer {
 public:
  virtual ~BasicListReducer() = default;
  // Points one chunk holds at most, and its lists (rows of list_k, row r of
  // the chunk at r * list_k), in the reducer's memory.
  virtual int64_t chunk_rows() const = 0;
  virtual int32_t* list_indices() const = 0;
  virtual Scalar* list_sq_distances() const = 0;
  // The queries of chunk [first, first + count) (count <= chunk_rows()) of
  // the reducer's sequence of the points, which covers each point once (the
  // OpenMP reducer: all points in Morton order; the CUDA one: the points
  // [first, first + count), each chunk in its Morton order): rows of x, y, z
  // in the reducer's memory; row r of the chunk's lists is the r-th of
  // them. Ready when it returns.
  virtual const Scalar* chunk_queries(int64_t first, int64_t count) = 0;
  // Writes the outputs of the points of the last chunk_queries from the
  // chunk's lists.
  virtual void reduce(int64_t first, int64_t count) = 0;
};

// Each engine's reducer (engine/builders.h) of one statistics call over
// chunks of the lists of `engine`, an index engine of its backend.
#define KNN_LIST_REDUCER_BUILDER(Scalar)                                           \
  std::unique_ptr<BasicListReducer<Scalar>> make_list_reducer(                     \
      const BasicIndexEngine<Scalar>& engine, const StatsRequest<Scalar>& request, \
      const CallParams& call)

namespace omp {
// Over a host copy of the engine's points, with chunks of 2^22 list entries
// (one row at least); host outputs only.
KNN_DECLARE_BUILDER(KNN_LIST_REDUCER_BUILDER);
}  // namespace omp

}  // namespace knn
