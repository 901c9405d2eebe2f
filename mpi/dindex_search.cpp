// The search entry points of the distributed index (knn_gpgpu_mpi.h):
// kNN, all-kNN and radius, with the forwarding of queries between ranks
// (mpi/dindex.cpp says how; mpi/dindex_common.h holds what both files share).
#include "dindex_common.h"

using namespace dindex_detail;

namespace {

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

// The local engine's k nearest of `rows` queries, in phase `phase`: `engine`
// fills rows of k int32 ids and distances (returns its status; `function`
// names it), the ids made global.
template <class EngineCall>
void search_locally(const knn_dindex& x, const char* phase, int64_t rows, int k,
                    const Deadline& deadline, const char* function, const EngineCall& engine,
                    std::vector<int64_t>& ids, std::vector<float>& dists) {
  x.collective->phase(phase, deadline, [&] {
    std::vector<int32_t> local(static_cast<size_t>(rows * k));
    dists.resize(local.size());
    check_engine(engine(local.data(), dists.data()), function);
    ids = to_global(x, local);
  });
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
  search_locally(
      x, "forwarded search", out.total_recv, k, deadline, "knn_index_query",
      [&](int32_t* local, float* d) {
        return knn_index_query(x.local, asked.data(), out.total_recv, k, local, d, nullptr);
      },
      answer_ids, answer_dists);
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

// Sends rows of k (ids, dists) back along `exchange` reversed and writes
// what comes back, in `row_item` order, into the caller's outputs.
void return_rows(const knn_dindex& x, const Exchange& exchange,
                 const std::vector<int64_t>& row_item, int k, const std::vector<int64_t>& ids,
                 const std::vector<float>& dists, const Deadline& deadline, int64_t* out_ids,
                 float* out_dists) {
  Collective& c = *x.collective;
  Exchange back = exchange.reversed();
  std::vector<int64_t> got_ids =
      knn_mpi::exchange_rows(c, back, ids.data(), k, deadline, &x.stats.bytes_sent);
  std::vector<float> got_dists =
      knn_mpi::exchange_rows(c, back, dists.data(), k, deadline, &x.stats.bytes_sent);
  for (size_t j = 0; j < row_item.size(); ++j) {
    std::memcpy(out_ids + row_item[j] * k, &got_ids[j * k], sizeof(int64_t) * k);
    if (out_dists) std::memcpy(out_dists + row_item[j] * k, &got_dists[j * k], sizeof(float) * k);
  }
}

// A search call (`function`, guarded: a failure is its status and message):
// the live index, the call's deadline and cancel flag, `validate` (this rank's
// arguments) in the validation phase and `agree` (the arguments every rank
// must pass alike); then, armed (a failure from here on runs fill_missing on
// the outputs), the statistics reset and `search` run.
template <class Validate, class Agree, class Search, class Fill>
int run_search(const char* function, const knn_dindex* index, const Validate& validate,
               const Agree& agree, const Search& search, const Fill& fill_missing) {
  bool armed = false;
  return guarded(
      function, armed,
      [&] {
        const knn_dindex& x = *live(index);
        Collective& c = *x.collective;
        Deadline deadline = deadline_of(x.settings.options);
        CancelScope cancel(x.settings.options.cancel_flag);
        c.phase("validation", deadline, [&] { validate(x); });
        agree(c);
        armed = true;
        x.stats = Stats{};
        PhaseClock clock(x.stats);
        search(x, c, deadline, clock);
      },
      fill_missing);
}

// The query count of a call on this rank.
void check_rows(int64_t m_local) {
  require(m_local >= 0 && m_local <= kMaxRowsPerRank, KNN_ERR_INVALID_ARGUMENT,
          "m_local is negative or exceeds 2^31 - 1");
}

void fill_knn_missing(int64_t rows, int k, int64_t* ids, float* dists) {
  if (ids) std::fill(ids, ids + rows * k, int64_t{-1});
  if (dists) std::fill(dists, dists + rows * k, INFINITY);
}

}  // namespace

extern "C" {

int knn_dindex_query(const knn_dindex* index, const float* queries, int64_t m_local, int k,
                     int64_t* indices, float* sq_distances) {
  return run_search(
      "knn_dindex_query", index,
      [&](const knn_dindex& x) {
        check_rows(m_local);
        require(k >= 1, KNN_ERR_INVALID_ARGUMENT, "k must be >= 1");
        require(m_local == 0 || (queries && indices), KNN_ERR_INVALID_ARGUMENT,
                "queries or indices is NULL");
        check_slots(m_local, k, "m_local * k");
        check_coordinates(queries, m_local, x.dim, "query");
      },
      [&](Collective& c) { require_same(c, k, "k"); },
      [&](const knn_dindex& x, Collective& c, const Deadline& deadline, PhaseClock& clock) {
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
        search_locally(
            x, "local search", m_held, k, deadline, "knn_index_query",
            [&](int32_t* local, float* d) {
              return knn_index_query(x.local, held.data(), m_held, k, local, d, nullptr);
            },
            ids, dists);
        complete_knn(x, held.data(), m_held, k, ids, dists, deadline, clock);
        // The rows back to the asking ranks, in their order.
        return_rows(x, to_owner, route, k, ids, dists, deadline, indices, sq_distances);
        clock.lap(3);
      },
      [&] { fill_knn_missing(m_local, k, indices, sq_distances); });
}

int knn_dindex_query_self(const knn_dindex* index, int k, int exclude_self, int64_t* indices,
                          float* sq_distances) {
  int64_t rows = 0;
  return run_search(
      "knn_dindex_query_self", index,
      [&](const knn_dindex& x) {
        require(k >= 1, KNN_ERR_INVALID_ARGUMENT, "k must be >= 1");
        require(x.n_local == 0 || indices, KNN_ERR_INVALID_ARGUMENT, "indices is NULL");
        check_slots(x.n_local, k, "n_local * k");
        rows = x.n_local;
      },
      [&](Collective& c) {
        require_same(c, k, "k");
        require_same(c, exclude_self != 0, "exclude_self");
      },
      [&](const knn_dindex& x, Collective&, const Deadline& deadline, PhaseClock& clock) {
        clock.lap(0);  // the queries are already on their region's rank
        int64_t m_held = x.contributed.total_recv;
        std::vector<int64_t> ids;
        std::vector<float> dists;
        search_locally(
            x, "local search", m_held, k, deadline, "knn_index_query_self",
            [&](int32_t* local, float* d) {
              return knn_index_query_self(x.local, k, exclude_self, local, d);
            },
            ids, dists);
        complete_knn(x, x.region_points.data(), m_held, k, ids, dists, deadline, clock);
        return_rows(x, x.contributed, x.contributed_row, k, ids, dists, deadline, indices,
                    sq_distances);
        clock.lap(3);
      },
      [&] { fill_knn_missing(rows, k, indices, sq_distances); });
}

int knn_dindex_radius(const knn_dindex* index, const float* queries, int64_t m_local, float radius,
                      int max_neighbors, int64_t* indices, float* sq_distances, int64_t* counts) {
  return run_search(
      "knn_dindex_radius", index,
      [&](const knn_dindex& x) {
        check_rows(m_local);
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
      },
      [&](Collective& c) {
        uint32_t radius_bits;
        std::memcpy(&radius_bits, &radius, sizeof radius_bits);
        require_same(c, radius_bits, "radius (its float bits)");
        require_same(c, max_neighbors, "max_neighbors");
      },
      [&](const knn_dindex& x, Collective& c, const Deadline& deadline, PhaseClock& clock) {
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

}  // extern "C"
