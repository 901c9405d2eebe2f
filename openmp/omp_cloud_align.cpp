// The OpenMP engine's aligner of a scan to an index's points
// (engine/cloud_align.h): the caller's host scan, normals and index points
// read in place, the moved points and the lists of the whole scan in host
// memory (one chunk), and each step's threshold and block sums on the team
// (omp_align_sums.h: the mesh alignment's own), the blocks added in order as
// the CUDA aligner adds the blocks it sums on the device.
#include <cstdint>
#include <memory>
#include <vector>

#include "../common/geometry/align_terms.h"
#include "../common/team_size.h"
#include "../engine/cancel.h"
#include "../engine/cloud_align.h"
#include "omp_align_sums.h"

namespace knn {
namespace omp {
namespace {

template <typename Scalar>
class OmpCloudAligner final : public BasicCloudAligner<Scalar> {
 public:
  OmpCloudAligner(const CloudAlignRequest<Scalar>& request, const CallParams& call)
      : request_(request), threads_(team_size(call.threads)), limit_(call.device_memory_limit) {
    const volatile int* cancel = cancel_flag();
    resize_polling(moved_, static_cast<size_t>(3 * request.m), cancel);
    resize_polling(nearest_, static_cast<size_t>(request.m), cancel);
    resize_polling(sq_, static_cast<size_t>(request.m), cancel);
  }

  int64_t chunk_points() const override { return request_.m; }
  size_t search_memory_limit() const override { return limit_; }

  const Scalar* move(int64_t first, int64_t count, const geometry::AlignFrame& frame) override {
    const Scalar* points = request_.points;
    Scalar* moved = moved_.data();
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t i = first; i < first + count; ++i) {
      const geometry::Vec3<Scalar> q =
          geometry::rounded3<Scalar>(geometry::move_point(frame, points + 3 * i));
      moved[3 * i] = q.x;
      moved[3 * i + 1] = q.y;
      moved[3 * i + 2] = q.z;
    }
    return moved + 3 * first;
  }

  int32_t* nearest() const override { return nearest_.data(); }
  Scalar* sq_distances() const override { return sq_.data(); }

  geometry::AlignSums sums(const geometry::AlignFrame& frame, double max_sq,
                           double kept_fraction) override {
    const volatile int* cancel = cancel_flag();
    const CloudAlignRequest<Scalar>& r = request_;
    const double threshold =
        kept_threshold(nearest_.data(), sq_.data(), r.m, max_sq, kept_fraction, cancel);
    return sum_blocks_in_order(
        r.m, threads_,
        [&](int64_t first, int64_t count) {
          return geometry::cloud_block_sums(r.points, nearest_.data(), sq_.data(), first, count,
                                            threshold, frame, r.host_targets, r.normals);
        },
        cancel);
  }

 private:
  CloudAlignRequest<Scalar> request_;
  int threads_;
  size_t limit_;
  std::vector<Scalar> moved_;
  mutable std::vector<int32_t> nearest_;
  mutable std::vector<Scalar> sq_;
};

}  // namespace

KNN_DECLARE_BUILDER(KNN_CLOUD_ALIGNER_BUILDER) {
  (void)engine;  // the request's host_targets stand for its points
  return std::make_unique<OmpCloudAligner<Scalar>>(request, call);
}
KNN_INSTANTIATE_BUILDER(KNN_CLOUD_ALIGNER_BUILDER);

}  // namespace omp
}  // namespace knn
