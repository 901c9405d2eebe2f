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
#include "dindex_common.h"

using namespace dindex_detail;

namespace {

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
