// What the OpenMP index engines (omp_index_kdtree.cpp, omp_index_brute_force.cpp)
// share: the k-list (knn_list.h), the writer of radius rows, and the parallel
// loop that runs blocks of queries with cancellation and error capture.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <vector>

#include "../common/neighbor.h"
#include "../common/team_size.h"
#include "../engine/cancel.h"
#include "../engine/index_engine.h"
#include "../engine/progress.h"
#include "knn_list.h"

namespace knn {
namespace omp {

// Writes one radius row from the candidates found (any order): sorted by
// (distance, index), the first max_neighbors kept, -1 / +infinity padding,
// the true count. Any output may be NULL.
template <typename Scalar>
void write_radius_row(std::vector<BasicNeighbor<Scalar>>& found, int max_neighbors,
                      int32_t* indices, Scalar* sq_distances, int32_t* count) {
  if (count) *count = static_cast<int32_t>(found.size());
  if (max_neighbors == 0) return;
  const size_t keep = std::min(found.size(), static_cast<size_t>(max_neighbors));
  auto nearer = [](const BasicNeighbor<Scalar>& a, const BasicNeighbor<Scalar>& b) {
    return closer(a, b);
  };
  // closer() is a total order (indices are distinct), so any sort gives the
  // same rows; partial_sort's heap sort is several times slower than an
  // introsort on the whole row, which is the usual case (the row fits).
  const auto kept_end = found.begin() + static_cast<std::ptrdiff_t>(keep);
  if (kept_end != found.end()) std::nth_element(found.begin(), kept_end, found.end(), nearer);
  std::sort(found.begin(), kept_end, nearer);
  for (size_t j = 0; j < static_cast<size_t>(max_neighbors); ++j) {
    const bool hit = j < keep;
    if (indices) indices[j] = hit ? found[j].index : -1;
    if (sq_distances)
      sq_distances[j] = hit ? found[j].sq_distance : std::numeric_limits<Scalar>::infinity();
  }
}

// Runs body(state, block) for the blocks of `items` work items, per_block
// each (block b holds items [b * per_block, min(items, (b + 1) * per_block))),
// on `threads` threads, each thread with one State made by make_state() when
// it takes its first block (per-thread buffers, allocated once). Each finished
// block adds its items to the calling thread's progress. Exceptions cannot
// leave an OpenMP region: the first one is kept, the remaining blocks are
// skipped, and it is rethrown here; a set cancel flag skips the remaining
// blocks likewise and ends in KNN_ERR_CANCELLED.
template <class MakeState, class Body>
void for_each_block(int64_t items, int64_t per_block, int threads, const volatile int* cancel,
                    MakeState make_state, Body body) {
  using State = decltype(make_state());
  const int64_t blocks = (items + per_block - 1) / per_block;
  knn_progress* const report = progress();
  std::exception_ptr error;
  std::atomic<bool> stop{false};
#pragma omp parallel num_threads(team_for(threads, blocks))
  {
    std::optional<State> state;
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < blocks; ++b) {
      if (stop.load(std::memory_order_relaxed) || cancel_requested(cancel)) continue;
      try {
        if (!state) state.emplace(make_state());
        body(*state, b);
        progress_add(report, std::min(per_block, items - b * per_block));
      } catch (...) {
#pragma omp critical(knn_omp_index_error)
        if (!error) error = std::current_exception();
        stop.store(true, std::memory_order_relaxed);
      }
    }
  }
  if (error) std::rethrow_exception(error);
  throw_if_cancelled(cancel);
}

// The bins of a radius_bins call, one tally per block of queries (so that
// the sums add up in block order, whatever thread ran a block), added up
// once every block is done.
class BinTallies {
 public:
  BinTallies(const RadiusBins& bins, int64_t blocks, bool sums)
      : bins_(bins),
        width_(static_cast<size_t>(bins.n_bins) + 1),
        counts_(static_cast<size_t>(blocks) * width_, 0),
        sums_(sums ? counts_.size() : 0, 0.0) {}

  // Whether the tallies of `blocks` blocks stay small (at most 2^22 entries):
  // else the engine declines and the caller bins rows, run by run.
  static bool fit(int64_t blocks, const RadiusBins& bins) {
    return blocks * (int64_t{bins.n_bins} + 1) <= (int64_t{1} << 22);
  }

  // Adds the pair (query q, point p) at squared distance sq to block b's tally.
  void add(int64_t b, int64_t q, double sq, int32_t p) {
    const size_t at = static_cast<size_t>(b) * width_ + static_cast<size_t>(bins_.bin_of(sq));
    ++counts_[at];
    if (!sums_.empty())
      sums_[at] += (bins_.query_weights ? bins_.query_weights[q] : 1.0) *
                   (bins_.point_weights ? bins_.point_weights[p] : 1.0);
  }

  void add_up(int64_t* counts, double* sums) const {
    for (size_t at = 0; at < counts_.size(); ++at) {
      counts[at % width_] += counts_[at];
      if (sums) sums[at % width_] += sums_[at];
    }
  }

 private:
  const RadiusBins& bins_;
  size_t width_;
  std::vector<int64_t> counts_;
  std::vector<double> sums_;
};

}  // namespace omp
}  // namespace knn
