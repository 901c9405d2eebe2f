// The distributed index: the C entry points of knn_gpgpu_mpi.h.
//
// Build: validate and agree; sample the points and cut space into one region
// per rank (decomposition.h); send every point, with its global index, to its
// region's rank; build the local index there (the core library's index API);
// exchange every rank's bounding box and size.
// kNN: send each query to the rank of its region; search there; forward the
// query to every other rank whose box lies within the current k-th distance
// (box distance <= k-th: a point at exactly that distance with a smaller
// index must still be found); merge the lists by (squared distance, global
// index); send the rows back to the asking rank, in its order.
// Radius: send each query to every rank whose box lies within the radius;
// merge there on the asking rank.
//
// Exactness: every squared distance comes from a local engine, which computes
// the contract's float32 value; region points are stored in ascending global
// index, so the local tie order (smaller local index) is the global one; and
// the box distance, computed in the same float order, never exceeds the
// distance of any point in the box (rounding is monotone), so no rank that
// could hold a closer point (or an equal one with a smaller index) is skipped.
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

namespace {

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

}  // namespace

struct knn_dindex {
  uint64_t marker = kLiveMarker;
  std::unique_ptr<Collective> collective;
  Settings settings{};
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
  mutable Stats stats;

  ~knn_dindex() {
    marker = 0;
    knn_index_free(local);
  }
};

namespace {

thread_local std::string last_error;

// A failed call of the core library, with its status and message.
void check_engine(int status, const char* call) {
  if (status == KNN_OK) return;
  // The core library's message names its function already ("knn_index_build: ...").
  std::string message = knn_last_error();
  if (message.rfind(call, 0) != 0) message = std::string(call) + ": " + message;
  throw Failure(status, message);
}

void require(bool ok, int status, const std::string& message) {
  if (!ok) throw Failure(status, message);
}

// The core library's coordinate rule (finite, and within
// knn::coordinate_limit(dim)), checked on the caller's own rows before any of
// them moves to another rank: the message names the row as the caller
// numbered it on this rank. Checked after the move, the local engine would
// name another rank and that rank's row of the point.
void check_coordinates(const float* rows, int64_t n, int dim, const char* what) {
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
void check_slots(int64_t rows, int64_t width, const char* what) {
  const int64_t max_slots = PTRDIFF_MAX / static_cast<int64_t>(sizeof(int64_t));
  if (rows > 0 && width > max_slots / rows)
    throw Failure(KNN_ERR_INVALID_ARGUMENT,
                  std::string(what) + " = " + std::to_string(rows) + " * " + std::to_string(width) +
                      " output slots of 8 bytes exceed the " + std::to_string(max_slots) +
                      " an array can address");
}

// Every rank passed the same value (else INVALID_ARGUMENT on every rank).
void require_same(Collective& c, int64_t value, const char* what) {
  int64_t lo = c.all_reduce(value, MPI_MIN), hi = c.all_reduce(value, MPI_MAX);
  if (lo != hi)
    throw Failure(KNN_ERR_INVALID_ARGUMENT, std::string(what) + " differs across ranks (" +
                                                std::to_string(lo) + " and " + std::to_string(hi) +
                                                "); every rank must pass the same");
}

// Squared distance from q to the box [lo, hi], in the contract's float order:
// a lower bound of the squared distance to every point inside.
float box_sq_distance(const float* q, const float* lo, const float* hi, int dim) {
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
bool nearer(const Neighbour& a, const Neighbour& b) {
  if (a.sq_distance != b.sq_distance) return a.sq_distance < b.sq_distance;
  return static_cast<uint64_t>(a.id) < static_cast<uint64_t>(b.id);
}

// Lays out rows grouped by destination: returns, for each send row, the item
// it carries, and fills rows_to_rank.
std::vector<int64_t> group_by_rank(const std::vector<int>& rank_of_item, int ranks,
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

std::vector<float> gather_rows(const float* rows, int dim, const std::vector<int64_t>& which) {
  std::vector<float> out(which.size() * dim);
  for (size_t j = 0; j < which.size(); ++j)
    std::memcpy(&out[j * dim], rows + which[j] * dim, sizeof(float) * dim);
  return out;
}

// Local engine results (int32 local indices) as global indices.
std::vector<int64_t> to_global(const knn_dindex& x, const std::vector<int32_t>& local) {
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

const knn_dindex* live(const knn_dindex* index) {
  if (index == nullptr || index->marker != kLiveMarker)
    throw Failure(KNN_ERR_INVALID_ARGUMENT, "the handle is not a live distributed index");
  return index;
}

Deadline deadline_of(const knn_mpi_options& o) {
  return Deadline{MPI_Wtime(), o.time_limit_seconds, o.cancel_flag};
}

// The caller's options as the index keeps them: its own copy of the local
// options (the caller's struct may go after the build).
Settings read_options(const knn_mpi_options* opt) {
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

// ---- Build ------------------------------------------------------------------

// Rank j of a node builds on device j mod count when the caller left the
// device to the library and the backend may use a GPU.
void choose_device(Collective& c, knn_options& local) {
  MPI_Comm node;
  knn_mpi::check_mpi(
      MPI_Comm_split_type(c.comm(), MPI_COMM_TYPE_SHARED, c.rank(), MPI_INFO_NULL, &node),
      "MPI_Comm_split_type");
  int node_rank = 0;
  int rc = MPI_Comm_rank(node, &node_rank);
  MPI_Comm_free(&node);
  knn_mpi::check_mpi(rc, "MPI_Comm_rank");
  if (local.device != -1 || local.backend == KNN_BACKEND_OPENMP) return;
  int devices = cuGetDeviceCount();
  if (devices > 0) local.device = node_rank % devices;
}

int64_t sample_size(const knn_mpi_options& o, int64_t n_global, int dim, int ranks) {
  int64_t wanted = o.sample_size;
  if (wanted == 0) {
    // Enough for balanced quantiles at every level, and at most ~64 MiB of
    // sample rows gathered on every rank.
    wanted =
        std::max<int64_t>(int64_t{64} * ranks, std::min<int64_t>(65536, (int64_t{1} << 24) / dim));
  }
  // Every rank holds the whole sample: at most 2^26 floats (256 MiB).
  return std::min({wanted, n_global, (int64_t{1} << 26) / dim});
}

void build(knn_dindex& x, const float* points, const Deadline& deadline) {
  Collective& c = *x.collective;
  int ranks = c.size(), dim = x.dim;
  PhaseClock clock(x.stats);

  // Global indices, and the sample that places the regions.
  x.n_global = c.all_reduce(x.n_local, MPI_SUM);
  x.offset = c.exclusive_prefix_sum(x.n_local);
  int64_t total_sample = sample_size(x.settings.options, x.n_global, dim, ranks);
  std::vector<float> mine;
  c.phase("sampling", deadline, [&] {
    int64_t take =
        x.n_local == 0
            ? 0
            : std::min(x.n_local, std::max<int64_t>(
                                      1, (total_sample * x.n_local + x.n_global - 1) / x.n_global));
    mine.resize(static_cast<size_t>(take * dim));
    for (int64_t j = 0; j < take; ++j)
      std::memcpy(&mine[j * dim], points + (j * x.n_local / take) * dim, sizeof(float) * dim);
  });
  std::vector<float> sample = c.all_gather(mine);
  c.phase("decomposition", deadline, [&] {
    x.regions = Decomposition(sample, static_cast<int64_t>(sample.size()) / dim, dim, ranks);
  });
  clock.lap(0);

  // Every point, with its global index, to its region's rank. Rows arrive
  // grouped by source rank in source order: ascending global index.
  std::vector<float> send_points;
  std::vector<int64_t> send_ids, rows_to_rank;
  c.phase("routing points", deadline, [&] {
    std::vector<int> owner(static_cast<size_t>(x.n_local));
    for (int64_t i = 0; i < x.n_local; ++i) owner[i] = x.regions.owner(points + i * dim);
    x.contributed_row = group_by_rank(owner, ranks, rows_to_rank);
    send_points = gather_rows(points, dim, x.contributed_row);
    send_ids.resize(x.contributed_row.size());
    for (size_t j = 0; j < send_ids.size(); ++j) send_ids[j] = x.offset + x.contributed_row[j];
  });
  x.contributed = knn_mpi::plan_exchange(c, rows_to_rank, deadline);
  x.region_points = knn_mpi::exchange_rows(c, x.contributed, send_points.data(), dim, deadline,
                                           &x.stats.bytes_sent);
  x.region_ids =
      knn_mpi::exchange_rows(c, x.contributed, send_ids.data(), 1, deadline, &x.stats.bytes_sent);
  clock.lap(1);

  // The local index over this rank's region, and its bounding box.
  knn_options local = x.settings.local;
  choose_device(c, local);
  std::vector<float> box(2 * static_cast<size_t>(dim));
  c.phase("local build", deadline, [&] {
    send_points = {};
    send_ids = {};
    int64_t n = x.contributed.total_recv;
    check_engine(knn_index_build(x.region_points.data(), n, dim, &local, &x.local),
                 "knn_index_build");
    for (int d = 0; d < dim; ++d) {
      box[d] = INFINITY;
      box[dim + d] = -INFINITY;
    }
    for (int64_t i = 0; i < n; ++i)
      for (int d = 0; d < dim; ++d) {
        box[d] = std::min(box[d], x.region_points[i * dim + d]);
        box[dim + d] = std::max(box[dim + d], x.region_points[i * dim + d]);
      }
  });
  clock.lap(2);
  x.boxes = c.all_gather(box);
  x.region_sizes = c.all_gather(std::vector<int64_t>{x.contributed.total_recv});
  clock.lap(3);
}

// ---- kNN --------------------------------------------------------------------

// The queries to send to other ranks: one row per (query i, rank p) where
// p's region is not empty, p is not `self` (-1: keep every rank) and p's box
// lies within within(i) (a squared distance) of query i. Rows are grouped by
// rank; rows_to_rank counts them, query_of_row names each row's query and
// send holds the rows' coordinates.
struct Forwarding {
  std::vector<int64_t> rows_to_rank, query_of_row;
  std::vector<float> send;
};

template <class SquaredBound>
Forwarding plan_forwarding(const knn_dindex& x, const float* queries, int64_t m, int ranks,
                           int self, const SquaredBound& within) {
  const int dim = x.dim;
  std::vector<int> target;
  std::vector<int64_t> query_of;
  for (int64_t i = 0; i < m; ++i) {
    const float bound = within(i);
    for (int p = 0; p < ranks; ++p) {
      if (p == self || x.region_sizes[p] == 0) continue;
      const float* lo = &x.boxes[static_cast<size_t>(p) * 2 * dim];
      if (box_sq_distance(queries + i * dim, lo, lo + dim, dim) <= bound) {
        target.push_back(p);
        query_of.push_back(i);
      }
    }
  }
  Forwarding f;
  f.query_of_row = group_by_rank(target, ranks, f.rows_to_rank);
  for (auto& r : f.query_of_row) r = query_of[r];
  f.send = gather_rows(queries, dim, f.query_of_row);
  return f;
}

// The queries sent where plan_forwarding says (one phase named `phase`, then
// the exchange): query_of_row names the query of each sent row, `out` is
// the exchange (its reverse brings the answers back) and `asked` holds the
// rows other ranks sent here. Adds the rows sent to the call's statistics.
struct Routed {
  std::vector<int64_t> query_of_row;
  Exchange out;
  std::vector<float> asked;
};

template <class SquaredBound>
Routed route_queries(const knn_dindex& x, const char* phase, const float* queries, int64_t m,
                     int self, const SquaredBound& within, const Deadline& deadline) {
  Collective& c = *x.collective;
  Routed r;
  std::vector<int64_t> rows_to_rank;
  std::vector<float> send;
  c.phase(phase, deadline, [&] {
    Forwarding f = plan_forwarding(x, queries, m, c.size(), self, within);
    rows_to_rank = std::move(f.rows_to_rank);
    r.query_of_row = std::move(f.query_of_row);
    send = std::move(f.send);
    x.stats.forwarded += static_cast<int64_t>(r.query_of_row.size());
  });
  r.out = knn_mpi::plan_exchange(c, rows_to_rank, deadline);
  r.asked = knn_mpi::exchange_rows(c, r.out, send.data(), x.dim, deadline, &x.stats.bytes_sent);
  return r;
}

// Completes the k nearest of `m` queries held by their region's rank (rows of
// dim floats), given the local engine's answers (ids global, k per query):
// forwards each query to the other ranks whose boxes lie within its k-th
// distance and merges their answers into ids / dists in place.
void complete_knn(const knn_dindex& x, const float* queries, int64_t m, int k,
                  std::vector<int64_t>& ids, std::vector<float>& dists, const Deadline& deadline,
                  PhaseClock& clock) {
  Collective& c = *x.collective;
  Routed routed = route_queries(
      x, "forwarding", queries, m, c.rank(), [&](int64_t i) { return dists[i * k + k - 1]; },
      deadline);
  const std::vector<int64_t>& row_order = routed.query_of_row;  // send row -> query
  const Exchange& out = routed.out;
  const std::vector<float>& asked = routed.asked;
  clock.lap(1);

  // Answer the queries other ranks forwarded here.
  std::vector<int64_t> answer_ids;
  std::vector<float> answer_dists;
  c.phase("forwarded search", deadline, [&] {
    int64_t n_asked = out.total_recv;
    std::vector<int32_t> local(static_cast<size_t>(n_asked * k));
    answer_dists.resize(local.size());
    check_engine(knn_index_query(x.local, asked.data(), n_asked, k, local.data(),
                                 answer_dists.data(), nullptr),
                 "knn_index_query");
    answer_ids = to_global(x, local);
  });
  Exchange back = out.reversed();
  std::vector<int64_t> got_ids =
      knn_mpi::exchange_rows(c, back, answer_ids.data(), k, deadline, &x.stats.bytes_sent);
  std::vector<float> got_dists =
      knn_mpi::exchange_rows(c, back, answer_dists.data(), k, deadline, &x.stats.bytes_sent);
  clock.lap(2);

  // Merge: received row j answers query row_order[j].
  c.phase("merge", deadline, [&] {
    RowsOfItem of(row_order, m);
    std::vector<Neighbour> all;
    for (int64_t i = 0; i < m; ++i) {
      if (of.first[i] == of.first[i + 1]) continue;
      all.clear();
      for (int j = 0; j < k; ++j) all.push_back({dists[i * k + j], ids[i * k + j]});
      for (int64_t t = of.first[i]; t < of.first[i + 1]; ++t)
        for (int j = 0; j < k; ++j)
          all.push_back({got_dists[of.rows[t] * k + j], got_ids[of.rows[t] * k + j]});
      std::partial_sort(all.begin(), all.begin() + k, all.end(), nearer);
      for (int j = 0; j < k; ++j) {
        dists[i * k + j] = all[j].sq_distance;
        ids[i * k + j] = all[j].id;
      }
    }
  });
}

// Writes rows of k (ids, dists) received in `row_item` order into the
// caller's outputs.
void place_rows(const std::vector<int64_t>& row_item, int k, const std::vector<int64_t>& ids,
                const std::vector<float>& dists, int64_t* out_ids, float* out_dists) {
  for (size_t j = 0; j < row_item.size(); ++j) {
    std::memcpy(out_ids + row_item[j] * k, &ids[j * k], sizeof(int64_t) * k);
    if (out_dists) std::memcpy(out_dists + row_item[j] * k, &dists[j * k], sizeof(float) * k);
  }
}

void fill_knn_missing(int64_t rows, int k, int64_t* ids, float* dists) {
  if (ids) std::fill(ids, ids + rows * k, int64_t{-1});
  if (dists) std::fill(dists, dists + rows * k, INFINITY);
}

}  // namespace

// ---- Entry points -----------------------------------------------------------

extern "C" {

void knn_mpi_options_init(knn_mpi_options* opt) {
  if (opt == nullptr) return;
  std::memset(opt, 0, sizeof *opt);
  opt->struct_size = sizeof *opt;
}

const char* knn_mpi_last_error(void) { return last_error.c_str(); }

int knn_dindex_build(knn_mpi_comm comm, const float* points, int64_t n_local, int dim,
                     const knn_mpi_options* opt, knn_dindex** out) {
  bool armed = false;
  return guarded(
      "knn_dindex_build", armed,
      [&] {
        // A NULL out fails in the agreed validation below, so that the other
        // ranks do not wait for this one; a NULL comm cannot be agreed on.
        if (out) *out = nullptr;
        require(comm != nullptr, KNN_ERR_INVALID_ARGUMENT,
                "comm is NULL (pass the address of an MPI_Comm)");
        auto x = std::make_unique<knn_dindex>();
        x->collective = std::make_unique<Collective>(*static_cast<const MPI_Comm*>(comm));
        Collective& c = *x->collective;
        Deadline deadline;
        c.phase("validation", deadline, [&] {
          x->settings = read_options(opt);
          deadline = deadline_of(x->settings.options);
          require(n_local >= 0, KNN_ERR_INVALID_ARGUMENT, "n_local is negative");
          require(n_local <= kMaxRowsPerRank, KNN_ERR_INVALID_ARGUMENT,
                  "n_local exceeds 2^31 - 1 points on one rank: spread them over more ranks");
          require(points != nullptr || n_local == 0, KNN_ERR_INVALID_ARGUMENT, "points is NULL");
          require(
              dim >= 1 && dim <= KNN_INDEX_MAX_DIM, KNN_ERR_INVALID_ARGUMENT,
              "dim " + std::to_string(dim) + " is out of 1.." + std::to_string(KNN_INDEX_MAX_DIM));
          require(out != nullptr, KNN_ERR_INVALID_ARGUMENT, "out is NULL");
          check_coordinates(points, n_local, dim, "point");
        });
        // The deadline of a rank whose options failed was agreed away above;
        // from here every rank holds its own valid options.
        require_same(c, dim, "dim");
        CancelScope cancel(x->settings.options.cancel_flag);
        x->dim = dim;
        x->n_local = n_local;
        build(*x, points, deadline);
        *out = x.release();
      },
      [] {});
}

int knn_dindex_free(knn_dindex* index) {
  bool armed = false;
  return guarded(
      "knn_dindex_free", armed,
      [&] {
        if (index == nullptr) return;
        delete live(index);
      },
      [] {});
}

int knn_dindex_info(const knn_dindex* index, int64_t* n_global, int64_t* n_local, int64_t* offset,
                    int* dim, int64_t* n_region, int* rank, int* size) {
  bool armed = false;
  return guarded(
      "knn_dindex_info", armed,
      [&] {
        const knn_dindex& x = *live(index);
        if (n_global) *n_global = x.n_global;
        if (n_local) *n_local = x.n_local;
        if (offset) *offset = x.offset;
        if (dim) *dim = x.dim;
        if (n_region) *n_region = x.contributed.total_recv;
        if (rank) *rank = x.collective->rank();
        if (size) *size = x.collective->size();
      },
      [] {});
}

int knn_dindex_query(const knn_dindex* index, const float* queries, int64_t m_local, int k,
                     int64_t* indices, float* sq_distances) {
  bool armed = false;
  return guarded(
      "knn_dindex_query", armed,
      [&] {
        const knn_dindex& x = *live(index);
        Collective& c = *x.collective;
        Deadline deadline = deadline_of(x.settings.options);
        CancelScope cancel(x.settings.options.cancel_flag);
        c.phase("validation", deadline, [&] {
          require(m_local >= 0 && m_local <= kMaxRowsPerRank, KNN_ERR_INVALID_ARGUMENT,
                  "m_local is negative or exceeds 2^31 - 1");
          require(k >= 1, KNN_ERR_INVALID_ARGUMENT, "k must be >= 1");
          require(m_local == 0 || (queries && indices), KNN_ERR_INVALID_ARGUMENT,
                  "queries or indices is NULL");
          check_slots(m_local, k, "m_local * k");
          check_coordinates(queries, m_local, x.dim, "query");
        });
        require_same(c, k, "k");
        armed = true;
        x.stats = Stats{};
        PhaseClock clock(x.stats);
        int dim = x.dim, ranks = c.size();

        // Each query to its region's rank.
        std::vector<int64_t> rows_to_rank, route;
        std::vector<float> send;
        c.phase("routing queries", deadline, [&] {
          std::vector<int> owner(static_cast<size_t>(m_local));
          for (int64_t i = 0; i < m_local; ++i) owner[i] = x.regions.owner(queries + i * dim);
          route = group_by_rank(owner, ranks, rows_to_rank);
          send = gather_rows(queries, dim, route);
        });
        Exchange to_owner = knn_mpi::plan_exchange(c, rows_to_rank, deadline);
        std::vector<float> held =
            knn_mpi::exchange_rows(c, to_owner, send.data(), dim, deadline, &x.stats.bytes_sent);
        int64_t m_held = to_owner.total_recv;
        clock.lap(0);

        std::vector<int64_t> ids;
        std::vector<float> dists;
        c.phase("local search", deadline, [&] {
          std::vector<int32_t> local(static_cast<size_t>(m_held * k));
          dists.resize(local.size());
          check_engine(
              knn_index_query(x.local, held.data(), m_held, k, local.data(), dists.data(), nullptr),
              "knn_index_query");
          ids = to_global(x, local);
        });
        complete_knn(x, held.data(), m_held, k, ids, dists, deadline, clock);

        // The rows back to the asking ranks, in their order.
        Exchange back = to_owner.reversed();
        std::vector<int64_t> got_ids =
            knn_mpi::exchange_rows(c, back, ids.data(), k, deadline, &x.stats.bytes_sent);
        std::vector<float> got_dists =
            knn_mpi::exchange_rows(c, back, dists.data(), k, deadline, &x.stats.bytes_sent);
        place_rows(route, k, got_ids, got_dists, indices, sq_distances);
        clock.lap(3);
      },
      [&] { fill_knn_missing(m_local, k, indices, sq_distances); });
}

int knn_dindex_query_self(const knn_dindex* index, int k, int exclude_self, int64_t* indices,
                          float* sq_distances) {
  bool armed = false;
  int64_t rows = 0;
  return guarded(
      "knn_dindex_query_self", armed,
      [&] {
        const knn_dindex& x = *live(index);
        Collective& c = *x.collective;
        Deadline deadline = deadline_of(x.settings.options);
        CancelScope cancel(x.settings.options.cancel_flag);
        c.phase("validation", deadline, [&] {
          require(k >= 1, KNN_ERR_INVALID_ARGUMENT, "k must be >= 1");
          require(x.n_local == 0 || indices, KNN_ERR_INVALID_ARGUMENT, "indices is NULL");
          check_slots(x.n_local, k, "n_local * k");
        });
        require_same(c, k, "k");
        require_same(c, exclude_self != 0, "exclude_self");
        rows = x.n_local;
        armed = true;
        x.stats = Stats{};
        PhaseClock clock(x.stats);
        clock.lap(0);  // the queries are already on their region's rank

        int64_t m_held = x.contributed.total_recv;
        std::vector<int64_t> ids;
        std::vector<float> dists;
        c.phase("local search", deadline, [&] {
          std::vector<int32_t> local(static_cast<size_t>(m_held * k));
          dists.resize(local.size());
          check_engine(knn_index_query_self(x.local, k, exclude_self, local.data(), dists.data()),
                       "knn_index_query_self");
          ids = to_global(x, local);
        });
        complete_knn(x, x.region_points.data(), m_held, k, ids, dists, deadline, clock);

        Exchange back = x.contributed.reversed();
        std::vector<int64_t> got_ids =
            knn_mpi::exchange_rows(c, back, ids.data(), k, deadline, &x.stats.bytes_sent);
        std::vector<float> got_dists =
            knn_mpi::exchange_rows(c, back, dists.data(), k, deadline, &x.stats.bytes_sent);
        place_rows(x.contributed_row, k, got_ids, got_dists, indices, sq_distances);
        clock.lap(3);
      },
      [&] { fill_knn_missing(rows, k, indices, sq_distances); });
}

int knn_dindex_radius(const knn_dindex* index, const float* queries, int64_t m_local, float radius,
                      int max_neighbors, int64_t* indices, float* sq_distances, int64_t* counts) {
  bool armed = false;
  return guarded(
      "knn_dindex_radius", armed,
      [&] {
        const knn_dindex& x = *live(index);
        Collective& c = *x.collective;
        Deadline deadline = deadline_of(x.settings.options);
        CancelScope cancel(x.settings.options.cancel_flag);
        c.phase("validation", deadline, [&] {
          require(m_local >= 0 && m_local <= kMaxRowsPerRank, KNN_ERR_INVALID_ARGUMENT,
                  "m_local is negative or exceeds 2^31 - 1");
          require(!(radius < 0.0f) && !std::isnan(radius), KNN_ERR_INVALID_ARGUMENT,
                  "radius must be >= 0 (and not NaN)");
          require(max_neighbors >= 0, KNN_ERR_INVALID_ARGUMENT, "max_neighbors must be >= 0");
          require(m_local == 0 || queries, KNN_ERR_INVALID_ARGUMENT, "queries is NULL");
          require(m_local == 0 || max_neighbors > 0 || counts, KNN_ERR_INVALID_ARGUMENT,
                  "counts is NULL in a counting call (max_neighbors = 0)");
          require(m_local == 0 || max_neighbors == 0 || indices, KNN_ERR_INVALID_ARGUMENT,
                  "indices is NULL");
          check_slots(m_local, max_neighbors, "m_local * max_neighbors");
          check_coordinates(queries, m_local, x.dim, "query");
        });
        uint32_t radius_bits;
        std::memcpy(&radius_bits, &radius, sizeof radius_bits);
        require_same(c, radius_bits, "radius (its float bits)");
        require_same(c, max_neighbors, "max_neighbors");
        armed = true;
        x.stats = Stats{};
        PhaseClock clock(x.stats);
        int width = max_neighbors;

        // Each query to every rank whose box lies within the radius (the
        // statistics were reset above, so forwarded counts this call's rows).
        float sq_radius = radius * radius;
        Routed routed = route_queries(
            x, "routing queries", queries, m_local, -1, [&](int64_t) { return sq_radius; },
            deadline);
        const std::vector<int64_t>& route = routed.query_of_row;
        const Exchange& out = routed.out;
        const std::vector<float>& asked = routed.asked;
        clock.lap(0);

        std::vector<int64_t> ids;
        std::vector<float> dists;
        std::vector<int32_t> found;
        c.phase("local search", deadline, [&] {
          int64_t n_asked = out.total_recv;
          std::vector<int32_t> local(static_cast<size_t>(n_asked * width));
          dists.resize(local.size());
          found.resize(static_cast<size_t>(n_asked));
          check_engine(knn_index_radius(x.local, asked.data(), n_asked, radius, width,
                                        width ? local.data() : nullptr,
                                        width ? dists.data() : nullptr, found.data(), nullptr),
                       "knn_index_radius");
          ids = to_global(x, local);
        });
        clock.lap(1);
        Exchange back = out.reversed();
        std::vector<int64_t> got_ids =
            knn_mpi::exchange_rows(c, back, ids.data(), width, deadline, &x.stats.bytes_sent);
        std::vector<float> got_dists =
            knn_mpi::exchange_rows(c, back, dists.data(), width, deadline, &x.stats.bytes_sent);
        std::vector<int32_t> got_counts =
            knn_mpi::exchange_rows(c, back, found.data(), 1, deadline, &x.stats.bytes_sent);
        clock.lap(2);

        c.phase("merge", deadline, [&] {
          // Received row j answers query route[j]; a query's rows are merged
          // by (distance, global index) and its counts summed.
          RowsOfItem of(route, m_local);
          std::vector<Neighbour> all;
          for (int64_t i = 0; i < m_local; ++i) {
            int64_t total = 0;
            all.clear();
            for (int64_t t = of.first[i]; t < of.first[i + 1]; ++t) {
              int64_t row = of.rows[t];
              total += got_counts[row];
              for (int j = 0; j < width; ++j)
                all.push_back({got_dists[row * width + j], got_ids[row * width + j]});
            }
            if (counts) counts[i] = total;
            if (width == 0) continue;
            all.resize(std::max<size_t>(all.size(), static_cast<size_t>(width)),
                       Neighbour{INFINITY, -1});
            std::partial_sort(all.begin(), all.begin() + width, all.end(), nearer);
            for (int j = 0; j < width; ++j) {
              indices[i * width + j] = all[j].id;
              if (sq_distances) sq_distances[i * width + j] = all[j].sq_distance;
            }
          }
        });
        clock.lap(3);
      },
      [&] {
        int64_t slots = m_local * max_neighbors;
        if (indices) std::fill(indices, indices + slots, int64_t{-1});
        if (sq_distances) std::fill(sq_distances, sq_distances + slots, INFINITY);
        if (counts) std::fill(counts, counts + m_local, int64_t{0});
      });
}

int knn_dindex_last_stats(const knn_dindex* index, int64_t* bytes_sent, int64_t* forwarded_queries,
                          double phase_seconds[4]) {
  bool armed = false;
  return guarded(
      "knn_dindex_last_stats", armed,
      [&] {
        const knn_dindex& x = *live(index);
        if (bytes_sent) *bytes_sent = x.stats.bytes_sent;
        if (forwarded_queries) *forwarded_queries = x.stats.forwarded;
        if (phase_seconds)
          std::copy(x.stats.phase_seconds, x.stats.phase_seconds + 4, phase_seconds);
      },
      [] {});
}

}  // extern "C"
