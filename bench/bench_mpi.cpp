// Strong and weak scaling of the distributed index (knn_gpgpu_mpi.h): build,
// all-kNN (exclude_self) and kNN of m queries, with the time of each phase
// (the slowest rank's) and the bytes ranks sent each other per point or query.
//
//   mpirun -np 4 bench_mpi --mode strong --n 4000000 --m 1000000 --k 8
//   mpirun -np 4 bench_mpi --mode weak --n 1000000 --m 250000     (per rank)
//
// Options: --mode strong|weak (n and m total, or per rank), --n, --m, --dim
// (3), --k (8), --backend auto|cpu|gpu (auto), --repeat (3: the fastest run of
// each operation is reported), --seed. The points are uniform in the unit
// cube, generated from their global index (a hash), so strong scaling indexes
// the same points at every rank count. Prints key=value lines on rank 0
// (scripts/mpi-scaling.sh reads them).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "knn_gpgpu_mpi.h"

namespace {

struct Args {
  std::string mode = "strong", backend = "auto";
  int64_t n = 1000000, m = 100000;
  int dim = 3, k = 8, repeat = 3;
  uint64_t seed = 1;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "bench_mpi: %s\n(see the comment at the top of bench/bench_mpi.cpp)\n", why);
  MPI_Abort(MPI_COMM_WORLD, 2);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string key = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + key).c_str());
    std::string value = argv[++i];
    if (key == "--mode")
      a.mode = value;
    else if (key == "--backend")
      a.backend = value;
    else if (key == "--n")
      a.n = std::atoll(value.c_str());
    else if (key == "--m")
      a.m = std::atoll(value.c_str());
    else if (key == "--dim")
      a.dim = std::atoi(value.c_str());
    else if (key == "--k")
      a.k = std::atoi(value.c_str());
    else if (key == "--repeat")
      a.repeat = std::atoi(value.c_str());
    else if (key == "--seed")
      a.seed = std::strtoull(value.c_str(), nullptr, 10);
    else
      usage(("unknown option " + key).c_str());
  }
  if (a.mode != "strong" && a.mode != "weak") usage("--mode is strong or weak");
  if (a.n < 0 || a.m < 0 || a.dim < 1 || a.k < 1 || a.repeat < 1) usage("bad sizes");
  return a;
}

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Rows [first, first + count) of the global point set identified by seed.
std::vector<float> rows(int64_t first, int64_t count, int dim, uint64_t seed) {
  std::vector<float> out(static_cast<size_t>(count * dim));
  for (int64_t i = 0; i < count * dim; ++i)
    out[i] = static_cast<float>(
                 mix(seed * 0x100000001b3ull + static_cast<uint64_t>(first * dim + i)) >> 40) /
             static_cast<float>(1 << 24);
  return out;
}

// This rank's [first, first + count) of `total` items in even blocks.
std::pair<int64_t, int64_t> block(int64_t total, int rank, int ranks) {
  int64_t first = total * rank / ranks, last = total * (rank + 1) / ranks;
  return {first, last - first};
}

struct Measure {
  double total = 1e300;
  double phases[4] = {0, 0, 0, 0};
  int64_t bytes = 0, forwarded = 0;
};

// The slowest rank's time of a collective call and of its phases; the bytes
// and forwards of all ranks.
template <class Call>
void measure(const knn_dindex* const* index, Measure& best, Call&& call) {
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  int status = call();
  double mine = MPI_Wtime() - start;
  if (status != KNN_OK) {
    std::fprintf(stderr, "bench_mpi: %s\n", knn_mpi_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  double local[5] = {mine, 0, 0, 0, 0}, slowest[5];
  int64_t traffic[2] = {0, 0}, total_traffic[2];
  knn_dindex_last_stats(*index, &traffic[0], &traffic[1], local + 1);
  MPI_Allreduce(local, slowest, 5, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(traffic, total_traffic, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (slowest[0] < best.total) {
    best.total = slowest[0];
    std::copy(slowest + 1, slowest + 5, best.phases);
    best.bytes = total_traffic[0];
    best.forwarded = total_traffic[1];
  }
}

void report(int rank, const char* op, const Measure& r, int64_t items, const char* per) {
  if (rank != 0) return;
  std::printf(
      "op=%s seconds=%.4f phase0=%.4f phase1=%.4f phase2=%.4f phase3=%.4f "
      "rate_per_s=%.4g bytes_per_%s=%.1f forwarded_per_%s=%.3f\n",
      op, r.total, r.phases[0], r.phases[1], r.phases[2], r.phases[3],
      items / std::max(r.total, 1e-9), per, items ? double(r.bytes) / items : 0.0, per,
      items ? double(r.forwarded) / items : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  Args a = parse(argc, argv);
  bool weak = a.mode == "weak";
  int64_t n_total = weak ? a.n * ranks : a.n, m_total = weak ? a.m * ranks : a.m;
  auto [p_first, n_local] = block(n_total, rank, ranks);
  auto [q_first, m_local] = block(m_total, rank, ranks);
  std::vector<float> points = rows(p_first, n_local, a.dim, a.seed);
  std::vector<float> queries = rows(q_first, m_local, a.dim, a.seed + 1);

  knn_mpi_options opt;
  knn_mpi_options_init(&opt);
  knn_options engine;
  knn_options_init(&engine);
  opt.local = &engine;
  engine.backend = a.backend == "cpu"   ? KNN_BACKEND_OPENMP
                   : a.backend == "gpu" ? KNN_BACKEND_CUDA
                                        : KNN_BACKEND_AUTO;
  if (rank == 0)
    std::printf("bench_mpi mode=%s ranks=%d omp_threads=%s n=%lld m=%lld dim=%d k=%d backend=%s\n",
                a.mode.c_str(), ranks,
                std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "all",
                (long long)n_total, (long long)m_total, a.dim, a.k, a.backend.c_str());

  MPI_Comm world = MPI_COMM_WORLD;
  knn_dindex* index = nullptr;
  Measure build, self, query;
  for (int r = 0; r < a.repeat; ++r) {
    if (index) knn_dindex_free(index);
    index = nullptr;
    measure(&index, build,
            [&] { return knn_dindex_build(&world, points.data(), n_local, a.dim, &opt, &index); });
  }
  std::vector<int64_t> ids(static_cast<size_t>(std::max(n_local, m_local) * a.k));
  std::vector<float> dists(ids.size());
  for (int r = 0; r < a.repeat; ++r)
    measure(&index, self,
            [&] { return knn_dindex_query_self(index, a.k, 1, ids.data(), dists.data()); });
  for (int r = 0; r < a.repeat; ++r)
    measure(&index, query, [&] {
      return knn_dindex_query(index, queries.data(), m_local, a.k, ids.data(), dists.data());
    });
  report(rank, "build", build, n_total, "point");
  report(rank, "allknn", self, n_total, "query");
  report(rank, "query", query, m_total, "query");
  knn_dindex_free(index);
  MPI_Finalize();
  return 0;
}
