// The OpenMP engine's reducer of neighbourhood statistics (engine/stats_engine.h):
// a host copy of the index's points, each chunk's points as the queries in
// their Morton order (point_order.h: consecutive rows search the same nodes
// and gather the same neighbours, in cache), the chunk's lists in host
// scratch, its rows reduced by the team
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
        order_(rows_, cancel_flag()),
        queries_(static_cast<size_t>(rows_ * 3)) {
    if (points_.empty()) return;
    engine.copy_points(points_.data());
    box_ = box_of_points(points_.data(), engine.size(), threads_);
  }

  const Scalar* chunk_queries(int64_t first, int64_t count) override {
    const Scalar* chunk = points_.data() + 3 * first;
    chunk_order_ = order_.sort(chunk, count, box_, threads_, cancel_flag());
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t row = 0; row < count; ++row)
      for (int c = 0; c < 3; ++c) queries_[3 * row + c] = chunk[3 * int64_t{chunk_order_[row]} + c];
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
      const int64_t i = first + chunk_order_[row];
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
  PointOrder order_;
  OrderBox box_{};
  const uint32_t* chunk_order_ = nullptr;  // the last chunk's, from chunk_queries
  std::vector<Scalar> queries_;
};

}  // namespace

KNN_DECLARE_BUILDER(KNN_LIST_REDUCER_BUILDER) {
  return std::make_unique<OmpListReducer<Scalar>>(engine, request, call);
}
KNN_INSTANTIATE_BUILDER(KNN_LIST_REDUCER_BUILDER);

}  // namespace omp
}  // namespace knn
