// The CUDA engine's aligner of a scan to an index's points
// (engine/cloud_align.h, cuda_index.h make_cloud_aligner): the index's
// resident points read in place, the scan and the normals in place where
// they are memory of the index's device (else one device copy each for the
// call), every scan point's k = 1 list and every block's sums in device
// memory. Each step moves the scan chunk by chunk (the chunks' queries), the
// searches write the lists on the device, and the step's threshold and block
// sums are taken there by the mesh alignment's own code
// (../core/align_sums.cuh; the trim's sort scratch allocated once for the
// call): only the blocks' sums come back, added in block order on the host
// as the OpenMP aligner adds its blocks.
//
// Chunks and devices: a chunk's search (one device, or shares over several
// devices, src/device_replicas.h) writes its lists at the chunk's rows of
// the one array of every scan point's list, on the index's device; the
// blocks are cut from that array only once every chunk is answered. So the
// blocks, and the order they are added in, are the call's whatever the
// chunks and the shares (no block straddles anything, and no chunk or share
// need be a whole number of blocks), and the trim ranks the whole scan's
// distances at once, as the OpenMP aligner does.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "../../common/error.h"
#include "../../common/geometry/align_terms.h"
#include "../../common/saturating.h"
#include "../../engine/cloud_align.h"
#include "../core/align_sums.cuh"
#include "../core/cuda_support.h"
#include "../core/launch_policy.h"
#include "../core/memory_model.h"
#include "../core/pinned_pool.h"
#include "../core/resident_rows_engine.cuh"
#include "../cuda_engine.h"
#include "../cuda_index.h"

namespace knn {
namespace cuda {
namespace {

// The sums of a block of scan points against their nearest index points.
template <typename Scalar>
struct CloudBlockSums {
  const Scalar* points;
  const int32_t* nearest;
  const Scalar* sq;
  double threshold;
  geometry::AlignFrame frame;
  const Scalar* targets;
  const Scalar* normals;
  KNN_HD geometry::AlignSums operator()(int64_t first, int64_t count) const {
    return geometry::cloud_block_sums(points, nearest, sq, first, count, threshold, frame, targets,
                                      normals);
  }
};

// The points a CUDA index engine keeps on its device (every one does).
template <typename Scalar>
const Scalar* resident_points(const BasicIndexEngine<Scalar>& engine) {
  const auto* rows = dynamic_cast<const ResidentRowsEngine<Scalar>*>(&engine);
  if (rows == nullptr)
    fail(KNN_ERR_INTERNAL, "the CUDA aligner was given an engine without resident points");
  return rows->resident_rows();
}

template <typename Scalar>
class CudaCloudAligner final : public BasicCloudAligner<Scalar> {
 public:
  CudaCloudAligner(const BasicIndexEngine<Scalar>& engine, const CloudAlignRequest<Scalar>& request,
                   const CallParams& call)
      : m_(request.m),
        blocks_(align_sum_blocks(request.m)),
        points_(request.points),
        normals_(request.normals),
        targets_(resident_points(engine)) {
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    const size_t um = static_cast<size_t>(m_);
    const size_t scan_bytes = 3 * um * sizeof(Scalar);
    const size_t normal_bytes = 3 * static_cast<size_t>(engine.size()) * sizeof(Scalar);
    const bool copy_scan = !device_may_use_in_place(request.points, device);
    const bool copy_normals =
        request.normals != nullptr && !device_may_use_in_place(request.normals, device);
    // For the whole call: every scan point's list, every block's sums,
    // device copies of a host scan and host normals, and for a trim the
    // ranking's sort.
    size_t fixed = aligned(um * sizeof(int32_t)) + aligned(um * sizeof(Scalar)) +
                   aligned(static_cast<size_t>(blocks_) * sizeof(geometry::AlignSums));
    if (copy_scan) fixed = saturating_add(fixed, aligned(scan_bytes));
    if (copy_normals) fixed = saturating_add(fixed, aligned(normal_bytes));
    if (request.trims) fixed = saturating_add(fixed, TrimRanking<Scalar>::bytes(m_));
    const DeviceBudget budget = device_budget(call.device_memory_limit);
    chunk_ = std::min(
        m_, queries_within_budget(budget, 3 * sizeof(Scalar) * kAlignChunkBudgetShare,
                                  saturating_add(fixed, kAllocAlignment), kAlignChunkPoints));
    // The searches' share: what the budget leaves beside ours.
    const size_t ours =
        saturating_add(fixed, aligned(static_cast<size_t>(chunk_) * 3 * sizeof(Scalar)));
    search_limit_ = budget.bytes() > ours ? budget.bytes() - ours : 1;

    nearest_.allocate(um);
    sq_.allocate(um);
    sums_.allocate(static_cast<size_t>(blocks_));
    moved_.allocate(static_cast<size_t>(chunk_) * 3);
    if (copy_scan) {
      scan_copy_.allocate(3 * um);
      copy_points_in(scan_copy_.get(), request.points, scan_bytes, false, stream_.get());
      points_ = scan_copy_.get();
    }
    if (request.trims) trim_ = std::make_unique<TrimRanking<Scalar>>(m_);
    if (copy_normals) {
      normals_copy_.allocate(3 * static_cast<size_t>(engine.size()));
      copy_points_in(normals_copy_.get(), request.normals, normal_bytes, false, stream_.get());
      normals_ = normals_copy_.get();
    }
  }

  int64_t chunk_points() const override { return chunk_; }
  size_t search_memory_limit() const override { return search_limit_; }

  const Scalar* move(int64_t first, int64_t count, const geometry::AlignFrame& frame) override {
    move_points(points_ + 3 * first, count, frame, moved_.get(), stream_.get());
    // The search runs on streams of its own.
    stream_.synchronize();
    return moved_.get();
  }

  int32_t* nearest() const override { return nearest_.get(); }
  Scalar* sq_distances() const override { return sq_.get(); }

  geometry::AlignSums sums(const geometry::AlignFrame& frame, double max_sq,
                           double kept_fraction) override {
    const cudaStream_t s = stream_.get();
    double threshold = max_sq;
    if (kept_fraction < 1.0) {
      if (!trim_) fail(KNN_ERR_INTERNAL, "an alignment step trims, but its request did not say so");
      threshold = trim_->threshold(nearest_.get(), sq_.get(), max_sq, kept_fraction, s);
    }
    sum_blocks(m_,
               CloudBlockSums<Scalar>{points_, nearest_.get(), sq_.get(), threshold, frame,
                                      targets_, normals_},
               sums_.get(), s);
    return blocks_in_order(sums_.get(), blocks_, s);
  }

 private:
  int64_t m_;
  int64_t blocks_;
  int64_t chunk_ = 0;
  size_t search_limit_ = 0;
  const Scalar* points_;
  const Scalar* normals_;
  const Scalar* targets_;
  DeviceBuffer<int32_t> nearest_;
  DeviceBuffer<Scalar> sq_, moved_, scan_copy_, normals_copy_;
  DeviceBuffer<geometry::AlignSums> sums_;
  std::unique_ptr<TrimRanking<Scalar>> trim_;
  // Closed before the buffers are given back (close_stream waits for its
  // work).
  Stream stream_;
};

}  // namespace

KNN_DECLARE_BUILDER(KNN_CLOUD_ALIGNER_BUILDER) {
  return std::make_unique<CudaCloudAligner<Scalar>>(engine, request, call);
}
KNN_INSTANTIATE_BUILDER(KNN_CLOUD_ALIGNER_BUILDER);

}  // namespace cuda
}  // namespace knn
