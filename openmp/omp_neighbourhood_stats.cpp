// The OpenMP engine's reducer of neighbourhood statistics (engine/stats_engine.h):
// a host copy of the index's points and their Morton order over all of them
// (point_order.h), the chunks taken along that order, so that a chunk is a
// patch of the cloud and its rows gather neighbours the rows before them
// read, in cache (10^6 points of a scanned torus in random order, 2 cores:
// the normals at k = 100 3.60 -> 3.19 s against each chunk sorted alone);
// each chunk's lists in host scratch, its rows reduced by the team
// (common/geometry/neighbourhood.h: the definition the CUDA reducer shares).
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "../common/geometry/neighbourhood.h"
#include "../common/team_size.h"
#include "../engine/cancel.h"
#include "../engine/stats_engine.h"
#include "point_order.h"

namespace knn {
namespace omp {
namespace {

// List entries one chunk holds: 4 Mi (48 MiB of float64 lists), enough that
// each chunk's search fills the team, small enough for any host.
constexpr int64_t kChunkSlots = int64_t{1} << 22;

template <typename Scalar>
class OmpListReducer final : public BasicListReducer<Scalar> {
 public:
  OmpListReducer(const BasicIndexEngine<Scalar>& engine, const StatsRequest<Scalar>& request,
                 const CallParams& call)
      : request_(request),
        threads_(team_size(call.threads)),
        points_(static_cast<size_t>(engine.size()) * 3),
        rows_(std::max<int64_t>(1, std::min<int64_t>(engine.size(), kChunkSlots / request.list_k))),
        indices_(static_cast<size_t>(rows_ * request.list_k)),
        sq_distances_(static_cast<size_t>(rows_ * request.list_k)),
        queries_(static_cast<size_t>(rows_ * 3)) {
    const int64_t n = engine.size();
    if (n == 0) return;
    engine.copy_points(points_.data());
    // The sort's scratch (16 bytes a point) lives only here; the order stays.
    PointOrder sorter(n, cancel_flag());
    const uint32_t* sorted = sorter.sort(
        points_.data(), n, box_of_points(points_.data(), n, threads_), threads_, cancel_flag());
    order_.assign(sorted, sorted + n);
  }

  const Scalar* chunk_queries(int64_t first, int64_t count) override {
    const uint32_t* chunk = order_.data() + first;
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t row = 0; row < count; ++row)
      for (int c = 0; c < 3; ++c) queries_[3 * row + c] = points_[3 * int64_t{chunk[row]} + c];
    return queries_.data();
  }
  int64_t chunk_rows() const override { return rows_; }
  int32_t* list_indices() const override { return indices_.data(); }
  Scalar* list_sq_distances() const override { return sq_distances_.data(); }

  void reduce(int64_t first, int64_t count) override {
    const StatsRequest<Scalar>& r = request_;
    const int64_t width = r.list_k;
    const Scalar* viewpoint = r.has_viewpoint ? r.viewpoint : nullptr;
    const int64_t out_width = r.what == NeighbourhoodStatistic::Normals ? 3 : 1;
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t row = 0; row < count; ++row) {
      const int64_t i = order_[static_cast<size_t>(first + row)];
      write_statistic(r.what, r.k, r.list_k, r.n, points_.data(), indices_.data() + row * width,
                      sq_distances_.data() + row * width, i, r.values + i * out_width,
                      r.curvature ? r.curvature + i : nullptr, viewpoint);
    }
  }

 private:
  StatsRequest<Scalar> request_;
  int threads_;
  std::vector<Scalar> points_;
  int64_t rows_;
  mutable std::vector<int32_t> indices_;
  mutable std::vector<Scalar> sq_distances_;
  std::vector<uint32_t> order_;  // the points in Morton order; chunks are runs of it
  std::vector<Scalar> queries_;
};

}  // namespace

KNN_DECLARE_BUILDER(KNN_LIST_REDUCER_BUILDER) {
  return std::make_unique<OmpListReducer<Scalar>>(engine, request, call);
}
KNN_INSTANTIATE_BUILDER(KNN_LIST_REDUCER_BUILDER);

}  // namespace omp
}  // namespace knn
