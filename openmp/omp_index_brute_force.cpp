// The OpenMP brute-force index: every query against every point, in any
// dimension. Work items are blocks of queries; each walks the points in
// blocks small enough to stay in the core's cache while all of its queries
// read them, so the points stream from memory once per query block rather
// than once per query. One template over the scalar type (float, double).
#include <algorithm>
#include <vector>

#include "../common/float_math.h"
#include "../engine/index_engine.h"
#include "../include/knn_gpgpu.h"
#include "omp_index_support.h"
#include "omp_tuning.h"

namespace knn {
namespace omp {
namespace {

template <typename Scalar>
class BruteForceIndex final : public BasicIndexEngine<Scalar> {
 public:
  using Entry = BasicNeighbor<Scalar>;
  BruteForceIndex(const Scalar* points, int64_t n, int dim)
      : BasicIndexEngine<Scalar>({KNN_BACKEND_OPENMP, KNN_STRUCTURE_BRUTE_FORCE, n, dim}),
        n_(n),
        dim_(dim),
        points_(points, points + n * dim),
        points_per_block_(
            std::max<int64_t>(1, kPointBytesPerBlock / (dim * int64_t{sizeof(Scalar)}))) {}

  void knn(const Scalar* queries, int64_t m, int k, int32_t* indices, Scalar* sq_distances,
           const CallParams& call) const override {
    nearest(queries, m, k, k, false, indices, sq_distances, call);
  }

  void knn_self(int k, bool exclude_self, int32_t* indices, Scalar* sq_distances,
                const CallParams& call) const override {
    nearest(points_.data(), n_, exclude_self ? int64_t{k} + 1 : k, k, exclude_self, indices,
            sq_distances, call);
  }

  void copy_points(Scalar* host_rows) const override {
    std::copy(points_.begin(), points_.end(), host_rows);
  }

  void radius(const Scalar* queries, int64_t m, Scalar radius, int max_neighbors, int32_t* indices,
              Scalar* sq_distances, int32_t* counts, const CallParams& call) const override {
    const Scalar r2 = mul_rn(radius, radius);
    const int64_t row = max_neighbors;
    using Found = std::vector<std::vector<Entry>>;
    for_each_block(
        m, kBruteForceQueriesPerBlock, team_size(call.threads), cancel_flag(),
        [] { return Found(static_cast<size_t>(kBruteForceQueriesPerBlock)); },
        [&](Found& found, int64_t b) {
          const int64_t first = b * kBruteForceQueriesPerBlock,
                        last = std::min(m, first + kBruteForceQueriesPerBlock);
          for (auto& f : found) f.clear();
          std::vector<int64_t> count(static_cast<size_t>(last - first), 0);
          for_each_point_block([&](int64_t begin, int64_t end) {
            for (int64_t q = first; q < last; ++q) {
              const Scalar* query = queries + q * dim_;
              const size_t slot = static_cast<size_t>(q - first);
              for (int64_t j = begin; j < end; ++j) {
                const Scalar d = squared_distance(query, point(j), dim_);
                if (d > r2) continue;
                ++count[slot];
                if (max_neighbors > 0) found[slot].push_back({d, static_cast<int32_t>(j)});
              }
            }
          });
          for (int64_t q = first; q < last; ++q) {
            const size_t slot = static_cast<size_t>(q - first);
            if (max_neighbors == 0) {
              counts[q] = static_cast<int32_t>(count[slot]);
              continue;
            }
            write_radius_row(found[slot], max_neighbors, indices + q * row,
                             sq_distances ? sq_distances + q * row : nullptr,
                             counts ? counts + q : nullptr);
          }
        });
  }

 private:
  const Scalar* point(int64_t j) const { return &points_[static_cast<size_t>(j * dim_)]; }

  template <class Visit>
  void for_each_point_block(Visit visit) const {
    for (int64_t begin = 0; begin < n_; begin += points_per_block_)
      visit(begin, std::min(n_, begin + points_per_block_));
  }

  // Rows of k for m queries, from lists of `take` entries; with skip_self,
  // query q is point q and its own index is dropped (take = k + 1).
  void nearest(const Scalar* queries, int64_t m, int64_t take, int k, bool skip_self,
               int32_t* indices, Scalar* sq_distances, const CallParams& call) const {
    using List = BasicNeighborList<Scalar>;
    using Lists = std::vector<List>;
    for_each_block(
        m, kBruteForceQueriesPerBlock, team_size(call.threads), cancel_flag(),
        [&] { return Lists(static_cast<size_t>(kBruteForceQueriesPerBlock), List(take, n_)); },
        [&](Lists& lists, int64_t b) {
          const int64_t first = b * kBruteForceQueriesPerBlock,
                        last = std::min(m, first + kBruteForceQueriesPerBlock);
          for (auto& list : lists) list.reset();
          for_each_point_block([&](int64_t begin, int64_t end) {
            for (int64_t q = first; q < last; ++q) {
              const Scalar* query = queries + q * dim_;
              List& list = lists[static_cast<size_t>(q - first)];
              for (int64_t j = begin; j < end; ++j)
                list.offer(squared_distance(query, point(j), dim_), static_cast<int32_t>(j));
            }
          });
          for (int64_t q = first; q < last; ++q)
            lists[static_cast<size_t>(q - first)].write(
                k, skip_self ? static_cast<int32_t>(q) : -1, indices + q * k,
                sq_distances ? sq_distances + q * k : nullptr);
        });
  }

  int64_t n_;
  int dim_;
  std::vector<Scalar> points_;
  int64_t points_per_block_;
};

}  // namespace

template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> build_brute_force_index(const Scalar* points, int64_t n,
                                                                  int dim, const IndexParams&) {
  return std::make_unique<BruteForceIndex<Scalar>>(points, n, dim);
}

KNN_INSTANTIATE_BUILDER(KNN_BRUTE_FORCE_INDEX_BUILDER);

}  // namespace omp
}  // namespace knn
