// The engines' part of the alignment of a scan to an index's points
// (knn_index_align, include/knn_gpgpu_stats.h): an aligner keeps the scan,
// the target normals and every scan point's k = 1 list where its backend
// keeps them, and sums each ICP step's normal equations there
// (common/geometry/align_terms.h, cloud_block_sums). src/index_align_api.cpp
// drives it, as src/stats_calls.cpp drives a statistics reducer
// (stats_engine.h): for each chunk of the scan the aligner moves the points
// (its queries), the index's one query path (answer_call, k = 1) writes the
// chunk's lists into the aligner's arrays at the chunk's rows, and once every
// chunk is answered the aligner ranks the trim's threshold and sums the
// step. The OpenMP aligner keeps everything in host memory and sums on the
// host threads; the CUDA one on the index's device, so the lists never cross
// to the host: only the blocks' sums come back. Both sum every block of
// kAlignSumBlock scan points in point order, then add the blocks in block
// order (geometry::sum_of_blocks), so a step's sums are the same bits on
// either.
#pragma once

#include <cstdint>
#include <memory>

#include "../common/geometry/align_terms.h"
#include "index_engine.h"

namespace knn {

// One alignment call against the points of an index engine (n = its size).
template <typename Scalar>
struct CloudAlignRequest {
  // The m scan points (x, y, z each). The CUDA aligner takes host memory or
  // memory of the current device; the OpenMP one host memory only.
  const Scalar* points = nullptr;
  int64_t m = 0;
  // n target normals (x, y, z per index point in input order), or null for
  // point-to-point terms; memory as for points.
  const Scalar* normals = nullptr;
  // The index's points in input order in host memory, which the caller
  // holds for the call (the OpenMP aligner reads them in place; the CUDA
  // one reads the engine's resident rows instead).
  const Scalar* host_targets = nullptr;
  // Whether the steps trim by a kept fraction below 1 (the CUDA aligner
  // then reserves the sort of the squared distances).
  bool trims = false;
};

template <typename Scalar>
class BasicCloudAligner {
 public:
  virtual ~BasicCloudAligner() = default;
  // Scan points one chunk holds at most: the queries of one search.
  virtual int64_t chunk_points() const = 0;
  // The device_memory_limit of the chunks' searches: the call's, less what
  // the aligner keeps on the device for the call (the call's own limit for
  // a host aligner).
  virtual size_t search_memory_limit() const = 0;
  // Moves scan points [first, first + count) by the step's motion, each
  // rounded to Scalar (geometry::move_point, rounded3), into the aligner's
  // memory, and returns them: the chunk's queries.
  virtual const Scalar* move(int64_t first, int64_t count, const geometry::AlignFrame& frame) = 0;
  // Every scan point's nearest index point and its squared distance (the
  // k = 1 lists, m entries each, in the aligner's memory): the search of a
  // chunk writes its rows at the chunk's first point.
  virtual int32_t* nearest() const = 0;
  virtual Scalar* sq_distances() const = 0;
  // Once every chunk's lists are written: the step's sums, the kept points
  // those within max_sq (double), lowered to the trim's rank
  // (geometry::trim_position) among them when kept_fraction < 1.
  virtual geometry::AlignSums sums(const geometry::AlignFrame& frame, double max_sq,
                                   double kept_fraction) = 0;
};

// Each engine's aligner (engine/builders.h) of one call against the points
// of `engine`: for the CUDA aligner a CUDA engine of the current device,
// whose resident points it reads in place; the OpenMP one takes any engine
// (it reads request.host_targets).
#define KNN_CLOUD_ALIGNER_BUILDER(Scalar)                                               \
  std::unique_ptr<BasicCloudAligner<Scalar>> make_cloud_aligner(                        \
      const BasicIndexEngine<Scalar>& engine, const CloudAlignRequest<Scalar>& request, \
      const CallParams& call)

namespace omp {
// Host memory throughout: the moved points, lists and blocks of the whole
// scan at once (one chunk), summed on call.threads threads.
KNN_DECLARE_BUILDER(KNN_CLOUD_ALIGNER_BUILDER);
}  // namespace omp

}  // namespace knn
