// The OpenMP uniform grid of the index API (3-D only).
//
// Build. The grid's resolution comes from the bounding box and n
// (common/grid_layout.h); every point gets its cell key, a counting sort by
// key (stable: a cell's points keep ascending index) gives the points in cell
// order and the start of every cell. When the occupancy shows a poor grid,
// the points are binned again with finer cells as for a surface
// (finer_grid_layout); when no grid is good (clustered data, all points
// equal; with params.refuse_curves, points on a curve) the build returns
// nullptr and the API uses the kd-tree.
//
// Search. k nearest: shells of cells around the query's cell, stopped by the
// exact bounds of grid_layout.h, with its index sweep when only ties remain
// (the points' positions by index serve it). Radius: exactly the cells whose
// bound is within the radius. Queries run in cell order, so the queries of one block
// read the same cells. One template over the scalar type (float, double).
//
// Cancellation: every loop over the points or the cells, the build's and the
// queries' sort alike, runs in runs that read the caller's flag
// (for_each_run), so a cancelled build of millions of points stops within
// milliseconds.
#include <algorithm>
#include <limits>
#include <vector>

#include "../common/error.h"
#include "../common/float_math.h"
#include "../common/grid_layout.h"
#include "../common/grid_walk.h"
#include "../engine/cancel.h"
#include "../engine/index_engine.h"
#include "omp_index_support.h"
#include "omp_tuning.h"

namespace knn {
namespace omp {
namespace {

// Positions 0..count-1 ordered by key (stable) by a counting sort over the
// cells, and with starts != nullptr the first position of every key (cells +
// 1 entries of Position: 32 bits for the points of an index, which number
// fewer than 2^31, so a refined grid's starts take 4 bytes a cell).
template <typename Position>
std::vector<int64_t> counting_order(const std::vector<uint32_t>& keys, int64_t cells,
                                    std::vector<Position>* starts, const volatile int* cancel) {
  const int64_t count = static_cast<int64_t>(keys.size());
  std::vector<Position> first;
  resize_polling(first, static_cast<size_t>(cells) + 1, cancel);
  for_each_run(count, cancel, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) ++first[keys[static_cast<size_t>(i)] + size_t{1}];
  });
  for_each_run(cells, cancel, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) first[c + 1] += first[c];
  });
  std::vector<int64_t> order;
  resize_polling(order, keys.size(), cancel);
  std::vector<Position> next;
  next.reserve(static_cast<size_t>(cells));
  for_each_run(cells, cancel, [&](int64_t begin, int64_t end) {
    next.insert(next.end(), first.begin() + begin, first.begin() + end);
  });
  for_each_run(count, cancel, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      order[static_cast<size_t>(next[keys[static_cast<size_t>(i)]]++)] = i;
  });
  if (starts) *starts = std::move(first);
  return order;
}

// Queries ordered by key (stable): the counting sort, or, for a batch far
// smaller than the grid (a refined grid has up to 16 cells a point), a
// comparison sort, so that the cost follows the batch and not the grid.
std::vector<int64_t> query_order(const std::vector<uint32_t>& keys, int64_t cells,
                                 const volatile int* cancel) {
  if (static_cast<int64_t>(keys.size()) >= cells / 4)
    return counting_order<int64_t>(keys, cells, nullptr, cancel);
  throw_if_cancelled(cancel);
  std::vector<int64_t> order(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return keys[static_cast<size_t>(a)] < keys[static_cast<size_t>(b)];
  });
  return order;
}

template <typename Scalar>
std::vector<uint32_t> cell_keys(const BasicGridLayout<Scalar>& grid, const Scalar* xyz,
                                int64_t count, int threads, const volatile int* cancel) {
  std::vector<uint32_t> keys;
  keys.reserve(static_cast<size_t>(count));
  for_each_run(count, cancel, [&](int64_t begin, int64_t end) {
    keys.resize(static_cast<size_t>(end));
#pragma omp parallel for num_threads(team_for(threads, end - begin, 4096)) schedule(static)
    for (int64_t i = begin; i < end; ++i)
      keys[static_cast<size_t>(i)] = grid.key_of(xyz[3 * i], xyz[3 * i + 1], xyz[3 * i + 2]);
  });
  return keys;
}

template <typename Scalar>
class GridIndex final : public BasicIndexEngine<Scalar> {
 public:
  using List = BasicNeighborList<Scalar>;
  using Entry = BasicNeighbor<Scalar>;
  GridIndex(const BasicGridLayout<Scalar>& grid, const Scalar* points, int64_t n,
            const std::vector<int64_t>& order, std::vector<uint32_t> starts,
            double stacked_cell_points, const volatile int* cancel)
      : BasicIndexEngine<Scalar>({KNN_BACKEND_OPENMP, KNN_STRUCTURE_GRID, n, 3}),
        grid_(grid),
        n_(n),
        starts_(std::move(starts)),
        stacked_cell_points_(stacked_cell_points) {
    resize_polling(coords_, static_cast<size_t>(3 * n), cancel);
    resize_polling(ids_, static_cast<size_t>(n), cancel);
    resize_polling(positions_, static_cast<size_t>(n), cancel);
    for_each_run(n, cancel, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const int64_t id = order[static_cast<size_t>(p)];
        std::copy(points + 3 * id, points + 3 * id + 3, &coords_[static_cast<size_t>(3 * p)]);
        ids_[static_cast<size_t>(p)] = static_cast<int32_t>(id);
        positions_[static_cast<size_t>(id)] = static_cast<int32_t>(p);
      }
    });
  }

  double stacked_cell_points() const override { return stacked_cell_points_; }

  // Queries in device memory (an OpenMP index called with device arrays)
  // are read only once copied to the host to be answered: 0 for them.
  double share_of_isolated_queries(const Scalar* queries, int64_t m,
                                   const CallParams& call) const override {
    const bool own = queries == nullptr;  // the indexed points (in cell order)
    if (own) queries = coords_.data(), m = n_;
    if (m <= 0 || n_ == 0 || (call.queries_on_device && !own)) return 0.0;
    const int64_t sample = std::min(m, kPlacementSampleQueries);
    const auto start = [&](uint32_t key) { return starts_[key]; };
    int64_t isolated = 0;
    for (int64_t t = 0; t < sample; ++t)
      isolated += away_from_points(grid_, queries + 3 * (t * m / sample), start) ? 1 : 0;
    return static_cast<double>(isolated) / static_cast<double>(sample);
  }

  void knn(const Scalar* queries, int64_t m, int k, int32_t* indices, Scalar* sq_distances,
           const CallParams& call) const override {
    const int threads = team_size(call.threads);
    const volatile int* cancel = cancel_flag();
    const std::vector<int64_t> order =
        query_order(cell_keys(grid_, queries, m, threads, cancel), grid_.cell_count(), cancel);
    for_each_block(
        m, kGridQueriesPerBlock, threads, cancel, [&] { return List(k, n_); },
        [&](List& list, int64_t b) {
          for (int64_t i = b * kGridQueriesPerBlock;
               i < std::min(m, (b + 1) * kGridQueriesPerBlock); ++i) {
            const int64_t q = order[static_cast<size_t>(i)];
            nearest(queries + 3 * q, k, list);
            list.write(k, -1, indices + q * k, sq_distances ? sq_distances + q * k : nullptr);
          }
        });
  }

  // The stored points are in cell order already: the locality of the query sort.
  void knn_self(int k, bool exclude_self, int32_t* indices, Scalar* sq_distances,
                const CallParams& call) const override {
    const int take = exclude_self ? k + 1 : k;
    for_each_block(
        n_, kGridQueriesPerBlock, team_size(call.threads), cancel_flag(),
        [&] { return List(take, n_); },
        [&](List& list, int64_t b) {
          for (int64_t p = b * kGridQueriesPerBlock;
               p < std::min(n_, (b + 1) * kGridQueriesPerBlock); ++p) {
            const int64_t self = ids_[static_cast<size_t>(p)];
            nearest(&coords_[static_cast<size_t>(3 * p)], take, list);
            list.write(k, exclude_self ? static_cast<int32_t>(self) : -1, indices + self * k,
                       sq_distances ? sq_distances + self * k : nullptr);
          }
        });
  }

  void radius(const Scalar* queries, int64_t m, Scalar radius, int max_neighbors, int32_t* indices,
              Scalar* sq_distances, int32_t* counts, const CallParams& call) const override {
    const int64_t row = max_neighbors;
    each_within(queries, m, mul_rn(radius, radius), call,
                [&](int64_t, int64_t q, std::vector<Entry>& found) {
                  write_radius_row(found, max_neighbors, indices ? indices + q * row : nullptr,
                                   sq_distances ? sq_distances + q * row : nullptr,
                                   counts ? counts + q : nullptr);
                });
  }

  bool radius_bins(const Scalar* queries, int64_t m, Scalar radius, const RadiusBins& bins,
                   int64_t* counts, double* sums, const CallParams& call) const override {
    const int64_t blocks = (m + kGridQueriesPerBlock - 1) / kGridQueriesPerBlock;
    if (!BinTallies::fit(blocks, bins)) return false;
    BinTallies tallies(bins, blocks, sums != nullptr);
    each_within(queries, m, mul_rn(radius, radius), call,
                [&](int64_t b, int64_t q, const std::vector<Entry>& found) {
                  for (const Entry& e : found)
                    tallies.add(b, q, static_cast<double>(e.sq_distance), e.index);
                });
    tallies.add_up(counts, sums);
    return true;
  }

  void copy_points(Scalar* host_rows) const override {
    for (int64_t p = 0; p < n_; ++p)
      std::copy(&coords_[static_cast<size_t>(3 * p)], &coords_[static_cast<size_t>(3 * p)] + 3,
                host_rows + 3 * int64_t{ids_[static_cast<size_t>(p)]});
  }

 private:
  // visit(block, q, found) for each of the m queries, block by block of
  // kGridQueriesPerBlock in the order of their cells (neighbouring queries
  // share cells), found holding the points within squared distance r2 of
  // query q: the one radius walk behind the rows and the bins.
  template <typename Visit>
  void each_within(const Scalar* queries, int64_t m, Scalar r2, const CallParams& call,
                   Visit&& visit) const {
    const int threads = team_size(call.threads);
    const volatile int* cancel = cancel_flag();
    const std::vector<int64_t> order =
        query_order(cell_keys(grid_, queries, m, threads, cancel), grid_.cell_count(), cancel);
    for_each_block(
        m, kGridQueriesPerBlock, threads, cancel, [] { return std::vector<Entry>(); },
        [&](std::vector<Entry>& found, int64_t b) {
          for (int64_t i = b * kGridQueriesPerBlock;
               i < std::min(m, (b + 1) * kGridQueriesPerBlock); ++i) {
            const int64_t q = order[static_cast<size_t>(i)];
            found.clear();
            within(queries + 3 * q, r2, found);
            visit(b, q, found);
          }
        });
  }

  // The points of cells first_key..last_key (contiguous in cell order) that
  // `scan` does not rule out; returns how many were read. kth() gives the
  // current k-th candidate (the radius search passes a constant one that
  // rules nothing out).
  template <class Kth, class Offer>
  int64_t scan_cells(const Scalar* q, uint32_t first_key, uint32_t last_key,
                     const CellScan<Scalar>& scan, Kth&& kth, Offer&& offer) const {
    const int64_t begin = starts_[first_key], end = starts_[last_key + size_t{1}];
    if (!scan.may_rule_out(kth())) {
      for (int64_t p = begin; p < end; ++p) {
        const Scalar* c = &coords_[static_cast<size_t>(3 * p)];
        offer(squared_distance3(q[0], q[1], q[2], c[0], c[1], c[2]), ids_[static_cast<size_t>(p)]);
      }
      return end - begin;
    }
    int64_t read = 0;
    for (uint32_t cell = first_key; cell <= last_key; ++cell) {
      const int64_t cell_end = starts_[cell + size_t{1}];
      for (int64_t p = starts_[cell]; p < cell_end; ++p, ++read) {
        const int32_t id = ids_[static_cast<size_t>(p)];
        if (scan.rest_of_cell_loses(id, kth())) break;
        if (scan.already_offered(id)) continue;
        const Scalar* c = &coords_[static_cast<size_t>(3 * p)];
        offer(squared_distance3(q[0], q[1], q[2], c[0], c[1], c[2]), id);
      }
    }
    return read;
  }

  // The `take` nearest of q into `list` (which holds that many).
  void nearest(const Scalar* q, int take, List& list) const {
    list.reset();
    if (n_ == 0) return;
    const auto kth = [&] {
      return list.full() ? list.worst()
                         : Entry{std::numeric_limits<Scalar>::infinity(),
                                 std::numeric_limits<int32_t>::max()};
    };
    const auto offer = [&](Scalar d, int32_t id) { list.offer(d, id); };
    const ShellWalk walk = walk_shells(
        grid_, q, isolated_walk_runs(n_, take), kth,
        [&](uint32_t first_key, uint32_t last_key, const CellScan<Scalar>& scan) {
          return scan_cells(q, first_key, last_key, scan, kth, offer);
        },
        [&](int32_t first, int32_t last, const ShellCube& cube) {
          for (int32_t id = first; id < last; ++id) {
            const Scalar* c =
                &coords_[3 * static_cast<size_t>(positions_[static_cast<size_t>(id)])];
            if (!cube.contains(grid_, c[0], c[1], c[2]))
              offer(squared_distance3(q[0], q[1], q[2], c[0], c[1], c[2]), id);
          }
        });
    // An isolated query (grid_layout.h): every point in cell order, as the
    // CUDA grid does, into an emptied list (the walk's points come again).
    if (walk == ShellWalk::Isolated) {
      list.reset();
      scan_cells(q, 0, static_cast<uint32_t>(grid_.cell_count() - 1),
                 CellScan<Scalar>{Scalar(0), 0}, kth, offer);
    }
  }

  void within(const Scalar* q, Scalar r2, std::vector<Entry>& found) const {
    if (n_ == 0) return;
    const auto anything = [] {
      return Entry{std::numeric_limits<Scalar>::infinity(), std::numeric_limits<int32_t>::max()};
    };
    walk_ball(grid_, q, r2, [&](uint32_t first_key, uint32_t last_key) {
      scan_cells(q, first_key, last_key, CellScan<Scalar>{Scalar(0), 0}, anything,
                 [&](Scalar d, int32_t id) {
                   if (d <= r2) found.push_back(Entry{d, id});
                 });
    });
  }

  BasicGridLayout<Scalar> grid_;
  int64_t n_;
  std::vector<uint32_t> starts_;    // cell_count + 1 positions into coords_/ids_
  double stacked_cell_points_;      // BasicIndexEngine::stacked_cell_points
  std::vector<Scalar> coords_;      // x, y, z of the points in cell order
  std::vector<int32_t> ids_;        // their original indices
  std::vector<int32_t> positions_;  // the position in cell order of every index
};

template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> build_grid(const Scalar* points, int64_t n,
                                                     const IndexParams& params) {
  const int threads = team_size(params.threads);
  const volatile int* cancel = cancel_flag();
  const int target = grid_points_per_cell(params.leaf_size);
  Scalar lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
  if (n > 0) {
    for (int a = 0; a < 3; ++a) {
      Scalar l = points[a], h = points[a];
      for_each_run(n, cancel, [&](int64_t begin, int64_t end) {
#pragma omp parallel for num_threads(threads) schedule(static) reduction(min : l) reduction(max : h)
        for (int64_t i = begin; i < end; ++i) {
          l = std::min(l, points[3 * i + a]);
          h = std::max(h, points[3 * i + a]);
        }
      });
      lo[a] = l, hi[a] = h;
    }
  }
  BasicGridLayout<Scalar> grid = make_grid_layout(lo, hi, n, target);
  std::vector<uint32_t> starts;
  std::vector<int64_t> order;
  // The sum of squared counts of the grid `levels` steps up from the current one.
  auto sum_of_squares_up = [&](int levels) {
    std::vector<uint64_t> coarse(static_cast<size_t>(grid.coarse_cell_count(levels)), 0);
    for_each_run(grid.cell_count(), cancel, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c)
        coarse[grid.coarse_key_of_cell(static_cast<uint32_t>(c), levels)] +=
            starts[c + 1] - starts[c];
    });
    uint64_t sum = 0;
    for (const uint64_t count : coarse) sum += count * count;
    return sum;
  };
  double stacked_points = 0.0;
  for (int refinements = 0;; ++refinements) {
    const int64_t cells = grid.cell_count();
    order = counting_order(cell_keys(grid, points, n, threads, cancel), cells, &starts, cancel);
    uint64_t sum_sq = 0;
    for_each_run(cells, cancel, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        const uint64_t count = starts[c + 1] - starts[c];
        sum_sq += count * count;
      }
    });
    const bool kept = grid_is_kept(sum_sq, n, target, refinements);
    const bool judge_curve = grid_curve_is_judged(params.refuse_curves, n);
    if (kept && !judge_curve) break;
    const uint64_t coarse_sum = sum_of_squares_up(1);
    bool stacked = false;
    if (judge_curve && grid_on_curve(sum_sq, coarse_sum, n)) {
      if (!grid_curve_is_stacked(sum_sq, coarse_sum, sum_of_squares_up(2))) return nullptr;
      stacked = true;
    }
    if (kept) {
      stacked_points = stacked ? mean_own_cell(sum_sq, n) : 0.0;
      break;
    }
    if (!params.refine_grid || refinements == kGridMaxRefinements) return nullptr;
    if (!finer_grid_layout(grid, sum_sq, coarse_sum, n, target, refinements, grid)) return nullptr;
  }
  return std::make_unique<GridIndex<Scalar>>(grid, points, n, order, std::move(starts),
                                             stacked_points, cancel);
}

}  // namespace

template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> build_grid_index(const Scalar* points, int64_t n,
                                                           const IndexParams& params) {
  return build_grid(points, n, params);
}

KNN_INSTANTIATE_BUILDER(KNN_GRID_INDEX_BUILDER);

}  // namespace omp
}  // namespace knn
