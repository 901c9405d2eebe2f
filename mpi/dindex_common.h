// What the files of the distributed index share (mpi/dindex.cpp: build and
// the other entry points; mpi/dindex_search.cpp: kNN and radius search):
// the handle, the call's guard, checks and row helpers.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../common/coordinate_limit.h"
#include "collective.h"
#include "decomposition.h"
#include "knn_gpgpu.h"
#include "knn_gpgpu_mpi.h"

using knn_mpi::Collective;
using knn_mpi::Deadline;
using knn_mpi::Decomposition;
using knn_mpi::Exchange;
using knn_mpi::Failure;

namespace dindex_detail {

constexpr uint64_t kLiveMarker = 0x6b6e6e5f6d706969ull;  // cleared by knn_dindex_free
constexpr int64_t kMaxRowsPerRank = 2147483647;          // MPI counts and local indices are int

struct Stats {
  int64_t bytes_sent = 0;
  int64_t forwarded = 0;
  double phase_seconds[4] = {0, 0, 0, 0};
};

// Times the phases of one call: lap(i) adds the time since the last lap.
class PhaseClock {
 public:
  explicit PhaseClock(Stats& stats) : stats_(stats), last_(MPI_Wtime()) {}
  void lap(int phase) {
    double now = MPI_Wtime();
    stats_.phase_seconds[phase] += now - last_;
    last_ = now;
  }

 private:
  Stats& stats_;
  double last_;
};

struct Settings {
  knn_mpi_options options;  // its `local` is NULL: see `local`
  knn_options local;        // the local index's options
};

}  // namespace dindex_detail

struct knn_dindex {
  uint64_t marker = dindex_detail::kLiveMarker;
  std::unique_ptr<Collective> collective;
  dindex_detail::Settings settings{};
  int dim = 0;
  int64_t n_global = 0, n_local = 0, offset = 0;
  Decomposition regions;
  std::vector<int64_t> region_sizes;  // points in each rank's region
  std::vector<float> boxes;           // per rank: dim lows, then dim highs
  std::vector<float> region_points;   // this rank's region, rows of dim
  std::vector<int64_t> region_ids;    // their global indices, ascending
  knn_index* local = nullptr;
  Exchange contributed;                  // this rank's points -> their regions
  std::vector<int64_t> contributed_row;  // send row j is this rank's point contributed_row[j]
  // The last call's traffic: queries take a const index (they change no
  // state a caller can see) and record it here.
  mutable dindex_detail::Stats stats;

  ~knn_dindex() {
    marker = 0;
    knn_index_free(local);
  }
};

namespace dindex_detail {

inline thread_local std::string last_error;

// A failed call of the core library, with its status and message.
inline void check_engine(int status, const char* call) {
  if (status == KNN_OK) return;
  // The core library's message names its function already ("knn_index_build: ...").
  std::string message = knn_last_error();
  if (message.rfind(call, 0) != 0) message = std::string(call) + ": " + message;
  throw Failure(status, message);
}

inline void require(bool ok, int status, const std::string& message) {
  if (!ok) throw Failure(status, message);
}

// The core library's coordinate rule (finite, and within
// knn::coordinate_limit(dim)), checked on the caller's own rows before any of
// them moves to another rank: the message names the row as the caller
// numbered it on this rank. Checked after the move, the local engine would
// name another rank and that rank's row of the point.
inline void check_coordinates(const float* rows, int64_t n, int dim, const char* what) {
  const float limit = knn::coordinate_limit(dim);
  for (int64_t i = 0; i < n; ++i)
    for (int d = 0; d < dim; ++d) {
      const float v = rows[i * dim + d];
      if (!std::isfinite(v))
        throw Failure(KNN_ERR_NONFINITE_INPUT,
                      std::string(what) + " " + std::to_string(i) + " has a " +
                          (std::isnan(v) ? "NaN" : "infinite") + " coordinate (dimension " +
                          std::to_string(d) + ")");
      if (std::fabs(v) > limit) {
        char text[300];
        std::snprintf(text, sizeof text,
                      "%s %lld has coordinate %g (dimension %d); in %d dimension%s coordinates "
                      "must lie within +-%g, so that squared distances stay finite in float32",
                      what, static_cast<long long>(i), static_cast<double>(v), d, dim,
                      dim == 1 ? "" : "s", static_cast<double>(limit));
        throw Failure(KNN_ERR_INVALID_ARGUMENT, text);
      }
    }
}

// Rows of `width` output slots of 8 bytes (int64 indices; the float
// distances take less) for `rows` rows fit the address space.
inline void check_slots(int64_t rows, int64_t width, const char* what) {
  const int64_t max_slots = PTRDIFF_MAX / static_cast<int64_t>(sizeof(int64_t));
  if (rows > 0 && width > max_slots / rows)
    throw Failure(KNN_ERR_INVALID_ARGUMENT,
                  std::string(what) + " = " + std::to_string(rows) + " * " + std::to_string(width) +
                      " output slots of 8 bytes exceed the " + std::to_string(max_slots) +
                      " an array can address");
}

// Every rank passed the same value (else INVALID_ARGUMENT on every rank).
inline void require_same(Collective& c, int64_t value, const char* what) {
  int64_t lo = c.all_reduce(value, MPI_MIN), hi = c.all_reduce(value, MPI_MAX);
  if (lo != hi)
    throw Failure(KNN_ERR_INVALID_ARGUMENT, std::string(what) + " differs across ranks (" +
                                                std::to_string(lo) + " and " + std::to_string(hi) +
                                                "); every rank must pass the same");
}

// Squared distance from q to the box [lo, hi], in the contract's float order:
// a lower bound of the squared distance to every point inside.
inline float box_sq_distance(const float* q, const float* lo, const float* hi, int dim) {
  float sum = 0.0f;
  for (int d = 0; d < dim; ++d) {
    float gap = 0.0f;
    if (q[d] < lo[d])
      gap = lo[d] - q[d];
    else if (q[d] > hi[d])
      gap = q[d] - hi[d];
    sum += gap * gap;
  }
  return sum;
}

struct Neighbour {
  float sq_distance;
  int64_t id;
};
// (distance, global index); missing entries (-1) sort after every real one.
inline bool nearer(const Neighbour& a, const Neighbour& b) {
  if (a.sq_distance != b.sq_distance) return a.sq_distance < b.sq_distance;
  return static_cast<uint64_t>(a.id) < static_cast<uint64_t>(b.id);
}

// Lays out rows grouped by destination: returns, for each send row, the item
// it carries, and fills rows_to_rank.
inline std::vector<int64_t> group_by_rank(const std::vector<int>& rank_of_item, int ranks,
                                          std::vector<int64_t>& rows_to_rank) {
  rows_to_rank.assign(ranks, 0);
  for (int r : rank_of_item) ++rows_to_rank[r];
  std::vector<int64_t> next(ranks, 0);
  for (int p = 1; p < ranks; ++p) next[p] = next[p - 1] + rows_to_rank[p - 1];
  std::vector<int64_t> item_of_row(rank_of_item.size());
  for (size_t i = 0; i < rank_of_item.size(); ++i) item_of_row[next[rank_of_item[i]]++] = i;
  return item_of_row;
}

// The inverse of a row -> item list: the rows of item i are
// rows[first[i] .. first[i + 1]), in row order.
struct RowsOfItem {
  std::vector<int64_t> first, rows;
  RowsOfItem(const std::vector<int64_t>& item_of_row, int64_t items) : first(items + 1, 0) {
    for (int64_t item : item_of_row) ++first[item + 1];
    for (int64_t i = 0; i < items; ++i) first[i + 1] += first[i];
    rows.resize(item_of_row.size());
    std::vector<int64_t> next(first.begin(), first.end() - 1);
    for (size_t j = 0; j < item_of_row.size(); ++j)
      rows[next[item_of_row[j]]++] = static_cast<int64_t>(j);
  }
};

inline std::vector<float> gather_rows(const float* rows, int dim,
                                      const std::vector<int64_t>& which) {
  std::vector<float> out(which.size() * dim);
  for (size_t j = 0; j < which.size(); ++j)
    std::memcpy(&out[j * dim], rows + which[j] * dim, sizeof(float) * dim);
  return out;
}

// Local engine results (int32 local indices) as global indices.
inline std::vector<int64_t> to_global(const knn_dindex& x, const std::vector<int32_t>& local) {
  std::vector<int64_t> ids(local.size());
  for (size_t i = 0; i < local.size(); ++i) ids[i] = local[i] < 0 ? -1 : x.region_ids[local[i]];
  return ids;
}

// Registers the options' cancel flag for this thread during one call.
class CancelScope {
 public:
  explicit CancelScope(const volatile int* flag) : active_(flag != nullptr) {
    if (active_) knn_set_cancel_flag(flag);
  }
  ~CancelScope() {
    if (active_) knn_set_cancel_flag(nullptr);
  }

 private:
  bool active_;
};

// The exception barrier of every entry point: the status, and the message of
// knn_mpi_last_error(). `fill_missing` runs when a failure comes after the
// call began computing (armed), so outputs are never half-written.
template <class Body, class Fill>
int guarded(const char* function, bool& armed, Body&& body, Fill&& fill_missing) noexcept {
  last_error.clear();
  int status = KNN_OK;
  try {
    body();
    return KNN_OK;
  } catch (const Failure& f) {
    status = f.status();
    last_error = std::string(function) + ": " + f.what();
  } catch (const std::bad_alloc&) {
    status = KNN_ERR_HOST_OUT_OF_MEMORY;
    last_error = std::string(function) + ": host memory allocation failed";
  } catch (const std::exception& e) {
    status = KNN_ERR_INTERNAL;
    last_error = std::string(function) + ": " + e.what();
  } catch (...) {
    status = KNN_ERR_INTERNAL;
    last_error = std::string(function) + ": unknown internal exception";
  }
  if (armed) fill_missing();
  return status;
}

inline const knn_dindex* live(const knn_dindex* index) {
  if (index == nullptr || index->marker != kLiveMarker)
    throw Failure(KNN_ERR_INVALID_ARGUMENT, "the handle is not a live distributed index");
  return index;
}

inline Deadline deadline_of(const knn_mpi_options& o) {
  return Deadline{MPI_Wtime(), o.time_limit_seconds, o.cancel_flag};
}

// The caller's options as the index keeps them: its own copy of the local
// options (the caller's struct may go after the build).
inline Settings read_options(const knn_mpi_options* opt) {
  Settings s;
  knn_mpi_options_init(&s.options);
  knn_options_init(&s.local);
  if (opt == nullptr) return s;
  require(opt->struct_size >= offsetof(knn_mpi_options, local) + sizeof opt->local,
          KNN_ERR_INVALID_ARGUMENT,
          "opt->struct_size " + std::to_string(opt->struct_size) + " is too small");
  std::memcpy(&s.options, opt, std::min(opt->struct_size, sizeof s.options));
  s.options.struct_size = sizeof s.options;
  require(std::isfinite(s.options.time_limit_seconds) && s.options.time_limit_seconds >= 0.0,
          KNN_ERR_INVALID_ARGUMENT, "opt->time_limit_seconds must be finite and >= 0");
  require(s.options.sample_size >= 0, KNN_ERR_INVALID_ARGUMENT, "opt->sample_size must be >= 0");
  if (s.options.local) {
    // The known prefix of the caller's knn_options; its struct_size stays the
    // caller's (when not larger than ours), so the core library checks it.
    const knn_options* local = s.options.local;
    std::memcpy(&s.local, local,
                std::min(std::max(local->struct_size, sizeof local->struct_size), sizeof s.local));
    if (local->struct_size > sizeof s.local) s.local.struct_size = sizeof s.local;
  }
  s.options.local = nullptr;  // the copy above is what the index uses
  return s;
}

}  // namespace dindex_detail
