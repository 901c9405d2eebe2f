// The distributed index against two oracles, under mpirun with any number of
// ranks: the single-process index (knn_gpgpu) over the union of every rank's
// points, built on each rank from the gathered parts, and on small cases a
// brute force written here in the contract's float order. Answers must match
// bit for bit (indices and squared distances). Then failures: a bad rank
// makes every rank return the same status, without a hang, and the next call
// works.
//
//   mpirun --oversubscribe -np 3 test_mpi_index
//   KNN_MPI_TEST_BACKEND=cuda mpirun -np 4 test_mpi_index   (ranks sharing a GPU)
//
// KNN_MPI_TEST_BACKEND (openmp, the default; auto; cuda) is the distributed
// index's local engine in the scenarios; the oracle always runs on OpenMP, so
// with cuda the GPU engine is checked against the CPU one across ranks. The
// failure cases always run on OpenMP.
//
// Every rank generates the same data from the same seeds and contributes the
// slice of it its scenario gives it (uneven, empty, everything on one rank).
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "knn_gpgpu.h"
#include "knn_gpgpu_mpi.h"

namespace {

int g_rank = 0, g_size = 1;
long g_checks = 0, g_failures = 0;

#define CHECK(cond, ...)                                                                  \
  do {                                                                                    \
    ++g_checks;                                                                           \
    if (!(cond)) {                                                                        \
      ++g_failures;                                                                       \
      if (g_failures < 20) {                                                              \
        std::fprintf(stderr, "[rank %d] %s:%d: %s: ", g_rank, __FILE__, __LINE__, #cond); \
        std::fprintf(stderr, __VA_ARGS__);                                                \
        std::fprintf(stderr, "\n");                                                       \
      }                                                                                   \
    }                                                                                     \
  } while (0)

// The local engine of the scenarios (KNN_MPI_TEST_BACKEND).
int scenario_backend() {
  const char* name = std::getenv("KNN_MPI_TEST_BACKEND");
  if (name == nullptr || std::strcmp(name, "openmp") == 0) return KNN_BACKEND_OPENMP;
  if (std::strcmp(name, "cuda") == 0) return KNN_BACKEND_CUDA;
  if (std::strcmp(name, "auto") == 0) return KNN_BACKEND_AUTO;
  std::fprintf(stderr, "KNN_MPI_TEST_BACKEND=%s: expected openmp, auto or cuda\n", name);
  MPI_Abort(MPI_COMM_WORLD, 2);
  return -1;
}

// Every rank saw the same status.
bool same_everywhere(int status) {
  int lo = 0, hi = 0;
  MPI_Allreduce(&status, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&status, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

struct Cloud {
  int dim = 3;
  std::vector<float> points;  // the union, rows of dim
  int64_t n() const { return static_cast<int64_t>(points.size()) / dim; }
};

Cloud uniform(int64_t n, int dim, uint64_t seed) {
  Cloud c;
  c.dim = dim;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-10.0f, 10.0f);
  c.points.resize(static_cast<size_t>(n * dim));
  for (float& x : c.points) x = u(rng);
  return c;
}

// A few dense Gaussian blobs far apart, with some points between them.
Cloud clustered(int64_t n, int dim, uint64_t seed) {
  Cloud c;
  c.dim = dim;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-100.0f, 100.0f);
  std::normal_distribution<float> g(0.0f, 0.5f);
  std::vector<float> centres(5 * dim);
  for (float& x : centres) x = u(rng);
  c.points.resize(static_cast<size_t>(n * dim));
  for (int64_t i = 0; i < n; ++i) {
    int blob = static_cast<int>(rng() % 6);
    for (int d = 0; d < dim; ++d)
      c.points[i * dim + d] = blob == 5 ? u(rng) : centres[blob * dim + d] + g(rng);
  }
  return c;
}

// Points on a coarse lattice: many exact duplicates and equal distances, so
// every tie is broken by the global index.
Cloud duplicates(int64_t n, int dim, uint64_t seed) {
  Cloud c;
  c.dim = dim;
  std::mt19937_64 rng(seed);
  c.points.resize(static_cast<size_t>(n * dim));
  for (float& x : c.points) x = static_cast<float>(rng() % 4);
  return c;
}

// Coordinates up to the largest magnitude the index accepts in 2-D (2^62,
// the header's coordinate rule): squared distances near float32's top.
Cloud huge(int64_t n, int dim, uint64_t seed) {
  Cloud c = uniform(n, dim, seed);
  for (float& x : c.points) x *= 4.6e18f / 10.0f;
  return c;
}

// Where each rank's slice of `total` items starts (size + 1 entries).
enum class Split { uneven, first_only, last_only, middle_empty };
std::vector<int64_t> split(int64_t total, Split how, uint64_t seed) {
  std::vector<int64_t> first(g_size + 1, 0);
  std::vector<double> weight(g_size, 0.0);
  std::mt19937_64 rng(seed);
  for (int r = 0; r < g_size; ++r) {
    switch (how) {
      case Split::uneven: weight[r] = (rng() % 4 == 0) ? 0.0 : 0.2 + double(rng() % 100); break;
      case Split::first_only: weight[r] = r == 0; break;
      case Split::last_only: weight[r] = r == g_size - 1; break;
      case Split::middle_empty: weight[r] = (r == g_size / 2 && g_size > 1) ? 0.0 : 1.0 + r; break;
    }
  }
  double sum = 0;
  for (double w : weight) sum += w;
  if (sum == 0) weight[0] = sum = 1;
  double acc = 0;
  for (int r = 0; r < g_size; ++r) {
    acc += weight[r];
    first[r + 1] = r == g_size - 1 ? total : static_cast<int64_t>(total * (acc / sum));
  }
  return first;
}

// Brute force in the contract's float order, ties by index.
std::vector<std::pair<float, int64_t>> brute_knn(const Cloud& c, const float* q, int k) {
  std::vector<std::pair<float, int64_t>> all;
  for (int64_t i = 0; i < c.n(); ++i) {
    float s = 0.0f;
    for (int d = 0; d < c.dim; ++d) {
      float diff = q[d] - c.points[i * c.dim + d];
      float sq = diff * diff;
      s = d == 0 ? sq : s + sq;
    }
    all.push_back({s, i});
  }
  std::sort(all.begin(), all.end());
  all.resize(std::min<size_t>(all.size(), k));
  while (static_cast<int>(all.size()) < k) all.push_back({INFINITY, -1});
  return all;
}

bool same_float(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

struct Scenario {
  const char* name;
  Cloud cloud;
  Split point_split, query_split;
  int64_t queries;
  bool brute;     // also check against the brute force (small cases)
  bool distinct;  // distinct coordinates: the regions must be balanced
};

// The gathered union, as the oracle sees it: every rank's slice, in rank
// order (an independent route to the same data as the generator's).
std::vector<float> gather_union(const std::vector<float>& mine) {
  int count = static_cast<int>(mine.size());
  std::vector<int> counts(g_size), displs(g_size);
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < g_size; ++r) {
    displs[r] = total;
    total += counts[r];
  }
  std::vector<float> all(total);
  MPI_Allgatherv(mine.data(), count, MPI_FLOAT, all.data(), counts.data(), displs.data(), MPI_FLOAT,
                 MPI_COMM_WORLD);
  return all;
}

void compare_rows(const char* what, const char* scenario, int64_t rows, int k,
                  const int64_t* got_ids, const float* got_d, const int32_t* want_ids,
                  const float* want_d) {
  int64_t bad = 0, first_bad = -1;
  for (int64_t i = 0; i < rows * k; ++i)
    if (got_ids[i] != want_ids[i] || !same_float(got_d[i], want_d[i])) {
      if (first_bad < 0) first_bad = i;
      ++bad;
    }
  CHECK(bad == 0,
        "%s %s k=%d: %lld of %lld slots differ, first at row %lld slot %lld: got %lld %.9g, want "
        "%d %.9g",
        scenario, what, k, (long long)bad, (long long)(rows * k),
        (long long)(first_bad / std::max(k, 1)), (long long)(first_bad % std::max(k, 1)),
        (long long)(first_bad >= 0 ? got_ids[first_bad] : 0),
        first_bad >= 0 ? got_d[first_bad] : 0.0, first_bad >= 0 ? want_ids[first_bad] : 0,
        first_bad >= 0 ? want_d[first_bad] : 0.0);
}

void run_scenario(const Scenario& s, uint64_t seed) {
  const Cloud& c = s.cloud;
  int dim = c.dim;
  std::vector<int64_t> pf = split(c.n(), s.point_split, seed);
  int64_t n_local = pf[g_rank + 1] - pf[g_rank];
  std::vector<float> mine(c.points.begin() + pf[g_rank] * dim,
                          c.points.begin() + pf[g_rank + 1] * dim);

  Cloud all_q = uniform(s.queries, dim, seed + 7);
  // Some queries equal to indexed points (distance 0, ties by index).
  for (int64_t i = 0; i < s.queries && c.n() > 0; i += 3)
    std::memcpy(&all_q.points[i * dim], &c.points[((i * 7919) % c.n()) * dim], sizeof(float) * dim);
  std::vector<int64_t> qf = split(s.queries, s.query_split, seed + 11);
  int64_t m = qf[g_rank + 1] - qf[g_rank];
  const float* q = all_q.points.data() + qf[g_rank] * dim;

  knn_mpi_options opt;
  knn_mpi_options_init(&opt);
  knn_options engine;
  knn_options_init(&engine);
  engine.backend = scenario_backend();
  opt.local = &engine;
  knn_dindex* dx = nullptr;
  MPI_Comm world = MPI_COMM_WORLD;
  int st = knn_dindex_build(&world, mine.data(), n_local, dim, &opt, &dx);
  CHECK(st == KNN_OK, "%s: build: %s", s.name, knn_mpi_last_error());
  if (st != KNN_OK) return;
  int64_t n_global = -1, offset = -1;
  int64_t n_region = -1, regions_total = 0, largest = 0;
  knn_dindex_info(dx, &n_global, nullptr, &offset, nullptr, &n_region, nullptr, nullptr);
  CHECK(n_global == c.n() && offset == pf[g_rank], "%s: info n %lld offset %lld", s.name,
        (long long)n_global, (long long)offset);
  // Every point in exactly one region; on distinct points (the sample is the
  // whole set at these sizes) the regions are balanced however the input
  // was split.
  MPI_Allreduce(&n_region, &regions_total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&n_region, &largest, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  CHECK(regions_total == c.n(), "%s: regions hold %lld points of %lld", s.name,
        (long long)regions_total, (long long)c.n());
  if (s.distinct)
    CHECK(largest <= c.n() / g_size + 2, "%s: the largest region holds %lld of %lld points", s.name,
          (long long)largest, (long long)c.n());

  // The oracle: the single-process index over the gathered union.
  std::vector<float> gathered = gather_union(mine);
  CHECK(gathered == c.points, "%s: the gathered union differs from the data", s.name);
  knn_options local;
  knn_options_init(&local);
  local.backend = KNN_BACKEND_OPENMP;
  knn_index* oracle = nullptr;
  CHECK(knn_index_build(gathered.data(), c.n(), dim, &local, &oracle) == KNN_OK, "oracle build");

  for (int k : {1, 6, 40}) {
    std::vector<int64_t> ids(m * k);
    std::vector<float> d(m * k);
    st = knn_dindex_query(dx, q, m, k, ids.data(), d.data());
    CHECK(st == KNN_OK, "%s: query: %s", s.name, knn_mpi_last_error());
    std::vector<int32_t> want(m * k);
    std::vector<float> want_d(m * k);
    knn_index_query(oracle, q, m, k, want.data(), want_d.data(), nullptr);
    compare_rows("kNN", s.name, m, k, ids.data(), d.data(), want.data(), want_d.data());
    if (s.brute) {
      for (int64_t i = 0; i < m; ++i) {
        auto b = brute_knn(c, q + i * dim, k);
        for (int j = 0; j < k; ++j)
          CHECK(b[j].second == ids[i * k + j] && same_float(b[j].first, d[i * k + j]),
                "%s: brute force query %lld slot %d: %lld vs %lld", s.name, (long long)i, j,
                (long long)b[j].second, (long long)ids[i * k + j]);
      }
    }
  }
  for (int exclude : {0, 1})
    for (int k : {1, 8}) {
      std::vector<int64_t> ids(n_local * k);
      std::vector<float> d(n_local * k);
      st = knn_dindex_query_self(dx, k, exclude, ids.data(), d.data());
      CHECK(st == KNN_OK, "%s: query_self: %s", s.name, knn_mpi_last_error());
      std::vector<int32_t> want(c.n() * k);
      std::vector<float> want_d(c.n() * k);
      knn_index_query_self(oracle, k, exclude, want.data(), want_d.data());
      compare_rows(exclude ? "all-kNN exclude_self" : "all-kNN", s.name, n_local, k, ids.data(),
                   d.data(), want.data() + offset * k, want_d.data() + offset * k);
    }

  // Radius: about 8 neighbours on average, truncated rows and a counting call.
  float radius = 0.0f;
  if (c.n() > 0) {
    double extent = 0;
    for (int d = 0; d < dim; ++d) {
      float lo = INFINITY, hi = -INFINITY;
      for (int64_t i = 0; i < c.n(); ++i) {
        lo = std::min(lo, c.points[i * dim + d]);
        hi = std::max(hi, c.points[i * dim + d]);
      }
      extent = std::max(extent, double(hi - lo));
    }
    radius = static_cast<float>(extent * std::pow(8.0 / c.n(), 1.0 / dim) / 2);
  }
  for (int max_neighbors : {0, 5, 64}) {
    int w = max_neighbors;
    std::vector<int64_t> ids(m * w), counts(m);
    std::vector<float> d(m * w);
    st = knn_dindex_radius(dx, q, m, radius, w, ids.data(), d.data(), counts.data());
    CHECK(st == KNN_OK, "%s: radius: %s", s.name, knn_mpi_last_error());
    std::vector<int32_t> want(m * w), want_counts(m);
    std::vector<float> want_d(m * w);
    knn_index_radius(oracle, q, m, radius, w, want.data(), want_d.data(), want_counts.data(),
                     nullptr);
    compare_rows("radius", s.name, m, w, ids.data(), d.data(), want.data(), want_d.data());
    bool counts_equal = true;
    for (int64_t i = 0; i < m; ++i) counts_equal &= counts[i] == want_counts[i];
    CHECK(counts_equal, "%s: radius counts differ (max_neighbors %d)", s.name, w);
  }
  knn_index_free(oracle);
  CHECK(knn_dindex_free(dx) == KNN_OK, "free");
}

// ---- Failures -----------------------------------------------------------------

void expect_everywhere(int status, int want, const char* what) {
  CHECK(same_everywhere(status), "%s: ranks disagree (this rank: %d)", what, status);
  CHECK(status == want, "%s: status %d (%s), want %d: %s", what, status, knn_status_string(status),
        want, knn_mpi_last_error());
}

void failures() {
  MPI_Comm world = MPI_COMM_WORLD;
  Cloud c = uniform(600, 3, 99);
  std::vector<int64_t> pf = split(c.n(), Split::uneven, 5);
  int64_t n_local = pf[g_rank + 1] - pf[g_rank];
  std::vector<float> mine(c.points.begin() + pf[g_rank] * 3, c.points.begin() + pf[g_rank + 1] * 3);
  knn_mpi_options opt;
  knn_mpi_options_init(&opt);
  knn_options cpu;
  knn_options_init(&cpu);
  cpu.backend = KNN_BACKEND_OPENMP;
  opt.local = &cpu;
  int last = g_size - 1;

  // A coordinate beyond the header's limit on the last rank: the same
  // refusal everywhere (its squared distances could overflow float32).
  {
    std::vector<float> bad = mine;
    bad.resize(bad.size() + 3, 1.0f);
    if (g_rank == last) bad[bad.size() - 1] = 1e30f;
    knn_dindex* dx = nullptr;
    int st = knn_dindex_build(&world, bad.data(), n_local + 1, 3, &opt, &dx);
    expect_everywhere(st, KNN_ERR_INVALID_ARGUMENT, "coordinate beyond the limit on the last rank");
    CHECK(dx == nullptr, "a failed build left *out set");
  }

  // A coordinate beyond the limit on rank 2 (the last rank with fewer),
  // not at its last point: the message names that rank and the point's index
  // as the caller gave it there (issue 51: the check ran after the points
  // moved, and named the rank and row the point had moved to).
  {
    const int culprit = std::min(2, last);
    const int64_t point = pf[culprit + 1] - pf[culprit];  // the first of two added rows
    std::vector<float> bad = mine;
    bad.resize(bad.size() + 6, 1.0f);
    if (g_rank == culprit) bad[point * 3 + 1] = 3e38f;
    knn_dindex* dx = nullptr;
    int st = knn_dindex_build(&world, bad.data(), n_local + 2, 3, &opt, &dx);
    expect_everywhere(st, KNN_ERR_INVALID_ARGUMENT, "3e38 on rank 2");
    const std::string want = "knn_dindex_build: rank " + std::to_string(culprit) + ": point " +
                             std::to_string(point) + " has coordinate 3e+38 (dimension 1)";
    CHECK(std::strncmp(knn_mpi_last_error(), want.c_str(), want.size()) == 0,
          "message '%s' does not begin with '%s'", knn_mpi_last_error(), want.c_str());
  }

  // A NaN on the last rank: every rank fails with its status, naming it.
  {
    std::vector<float> bad = mine;
    bad.resize(bad.size() + 3, 1.0f);
    if (g_rank == last) bad[bad.size() - 2] = NAN;
    knn_dindex* dx = reinterpret_cast<knn_dindex*>(&bad);  // must be overwritten with NULL
    int st = knn_dindex_build(&world, bad.data(), n_local + 1, 3, &opt, &dx);
    expect_everywhere(st, KNN_ERR_NONFINITE_INPUT, "NaN on the last rank");
    CHECK(dx == nullptr, "a failed build left *out set");
    std::string want =
        "rank " + std::to_string(last) + ": point " + std::to_string(pf[last + 1] - pf[last]);
    CHECK(std::strstr(knn_mpi_last_error(), want.c_str()) != nullptr, "message '%s' lacks '%s'",
          knn_mpi_last_error(), want.c_str());
  }
  // out NULL on the last rank only.
  {
    knn_dindex* dx = nullptr;
    int st =
        knn_dindex_build(&world, mine.data(), n_local, 3, &opt, g_rank == last ? nullptr : &dx);
    expect_everywhere(st, KNN_ERR_INVALID_ARGUMENT, "out NULL on the last rank");
    CHECK(dx == nullptr, "a failed build left *out set");
  }
  // Different dimensions.
  if (g_size > 1) {
    knn_dindex* dx = nullptr;
    int st = knn_dindex_build(&world, mine.data(), n_local / 2, g_rank == 0 ? 2 : 3, &opt, &dx);
    expect_everywhere(st, KNN_ERR_INVALID_ARGUMENT, "mismatched dim");
  }
  // Bad options on one rank.
  {
    knn_mpi_options small = opt;
    if (g_rank == last) small.struct_size = 4;
    knn_dindex* dx = nullptr;
    int st = knn_dindex_build(&world, mine.data(), n_local, 3, &small, &dx);
    expect_everywhere(st, KNN_ERR_INVALID_ARGUMENT, "bad options on the last rank");
  }
  // Bad local options on one rank: the core library refuses them there.
  {
    knn_options short_engine = cpu;
    if (g_rank == last) short_engine.struct_size = 4;
    knn_mpi_options bad = opt;
    bad.local = &short_engine;
    knn_dindex* dx = nullptr;
    int st = knn_dindex_build(&world, mine.data(), n_local, 3, &bad, &dx);
    expect_everywhere(st, KNN_ERR_INVALID_ARGUMENT, "bad local options on the last rank");
  }
  // A local engine error on one rank (a grid in 2-D is unsupported).
  {
    knn_mpi_options grid = opt;
    knn_options grid_engine = cpu;
    if (g_rank == last) grid_engine.structure = KNN_STRUCTURE_GRID;
    grid.local = &grid_engine;
    std::vector<float> flat(n_local * 2, 0.5f);
    for (size_t i = 0; i < flat.size(); ++i) flat[i] = mine[i];
    knn_dindex* dx = nullptr;
    int st = knn_dindex_build(&world, flat.data(), n_local, 2, &grid, &dx);
    expect_everywhere(st, KNN_ERR_UNSUPPORTED, "grid in 2-D on the last rank");
    CHECK(std::strstr(knn_mpi_last_error(), "knn_index_build") != nullptr, "message '%s'",
          knn_mpi_last_error());
  }
  // A cancel flag raised on one rank, then a time limit already passed.
  {
    volatile int flag = g_rank == last;
    knn_mpi_options cancel = opt;
    cancel.cancel_flag = &flag;
    knn_dindex* dx = nullptr;
    int st = knn_dindex_build(&world, mine.data(), n_local, 3, &cancel, &dx);
    expect_everywhere(st, KNN_ERR_CANCELLED, "cancel flag on the last rank");
    knn_mpi_options hurry = opt;
    hurry.time_limit_seconds = 1e-9;
    st = knn_dindex_build(&world, mine.data(), n_local, 3, &hurry, &dx);
    expect_everywhere(st, KNN_ERR_CANCELLED, "time limit");
  }
  // Queries: mismatched k leaves outputs untouched; a bad query fails
  // everywhere; then the same index answers correctly.
  knn_dindex* dx = nullptr;
  int st = knn_dindex_build(&world, mine.data(), n_local, 3, &opt, &dx);
  expect_everywhere(st, KNN_OK, "build after failures");
  if (st != KNN_OK) return;
  std::vector<float> q(mine.begin(), mine.begin() + std::min<int64_t>(n_local, 4) * 3);
  int64_t m = static_cast<int64_t>(q.size()) / 3;
  std::vector<int64_t> ids(m * 4, 12345);
  if (g_size > 1) {
    st = knn_dindex_query(dx, q.data(), m, g_rank == 0 ? 3 : 4, ids.data(), nullptr);
    expect_everywhere(st, KNN_ERR_INVALID_ARGUMENT, "mismatched k");
    CHECK(std::all_of(ids.begin(), ids.end(), [](int64_t v) { return v == 12345; }),
          "outputs written after a validation failure");
  }
  {
    std::vector<float> badq = q;
    badq.push_back(INFINITY);
    badq.push_back(0);
    badq.push_back(0);
    std::vector<int64_t> out((m + 1) * 4);
    st = knn_dindex_query(dx, badq.data(), g_rank == last ? m + 1 : m, 4, out.data(), nullptr);
    expect_everywhere(st, KNN_ERR_NONFINITE_INPUT, "infinite query on the last rank");
    st = knn_dindex_radius(dx, q.data(), m, g_rank == last ? -1.0f : 1.0f, 4, out.data(), nullptr,
                           nullptr);
    expect_everywhere(st, KNN_ERR_INVALID_ARGUMENT, "negative radius on the last rank");
  }
  // A query beyond the coordinate limit on rank 2: named as that rank's
  // query, before it is routed to the rank of its region.
  {
    const int culprit = std::min(2, last);
    const int64_t culprit_m = std::min<int64_t>(pf[culprit + 1] - pf[culprit], 4);
    std::vector<float> badq = q;
    badq.insert(badq.end(), {1.0f, 1.0f, g_rank == culprit ? -3e38f : 1.0f});
    std::vector<int64_t> out((m + 1) * 4, 12345);
    st = knn_dindex_query(dx, badq.data(), m + 1, 4, out.data(), nullptr);
    expect_everywhere(st, KNN_ERR_INVALID_ARGUMENT, "query -3e38 on rank 2");
    const std::string want = "knn_dindex_query: rank " + std::to_string(culprit) + ": query " +
                             std::to_string(culprit_m) + " has coordinate -3e+38 (dimension 2)";
    CHECK(std::strncmp(knn_mpi_last_error(), want.c_str(), want.size()) == 0,
          "message '%s' does not begin with '%s'", knn_mpi_last_error(), want.c_str());
    CHECK(std::all_of(out.begin(), out.end(), [](int64_t v) { return v == 12345; }),
          "outputs written after a refused query");
  }
  // Counts whose output rows no array can hold (m_local * k beyond 2^60
  // slots of 8 bytes) on one rank: refused before the queries are read.
  {
    const int culprit = std::min(2, last);
    const int64_t huge_m = g_rank == culprit ? 2147483647 : 1;
    const int big_k = 1 << 30;
    const std::vector<float> one_query(3, 0.5f);
    std::vector<int64_t> out(4, 12345);
    st = knn_dindex_query(dx, one_query.data(), huge_m, big_k, out.data(), nullptr);
    expect_everywhere(st, KNN_ERR_INVALID_ARGUMENT, "m_local * k beyond the address space");
    const std::string want = "knn_dindex_query: rank " + std::to_string(culprit) +
                             ": m_local * k = 2147483647 * 1073741824 output slots";
    CHECK(std::strncmp(knn_mpi_last_error(), want.c_str(), want.size()) == 0,
          "message '%s' does not begin with '%s'", knn_mpi_last_error(), want.c_str());
    st = knn_dindex_radius(dx, one_query.data(), huge_m, 1.0f, big_k, out.data(), nullptr, nullptr);
    expect_everywhere(st, KNN_ERR_INVALID_ARGUMENT, "m_local * max_neighbors");
    CHECK(std::strstr(knn_mpi_last_error(), "m_local * max_neighbors") != nullptr, "message '%s'",
          knn_mpi_last_error());
    CHECK(std::all_of(out.begin(), out.end(), [](int64_t v) { return v == 12345; }),
          "outputs written after a refused call");
  }
  st = knn_dindex_query(dx, q.data(), m, 4, ids.data(), nullptr);
  expect_everywhere(st, KNN_OK, "query after failures");
  for (int64_t i = 0; i < m; ++i) {
    auto b = brute_knn(c, q.data() + i * 3, 4);
    for (int j = 0; j < 4; ++j)
      CHECK(ids[i * 4 + j] == b[j].second, "query after failures: row %lld slot %d", (long long)i,
            j);
  }
  int64_t bytes = -1;
  double phases[4];
  CHECK(knn_dindex_last_stats(dx, &bytes, nullptr, phases) == KNN_OK && bytes >= 0, "stats");
  CHECK(knn_dindex_free(dx) == KNN_OK, "free");
  CHECK(knn_dindex_free(nullptr) == KNN_OK, "free(NULL)");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  double start = MPI_Wtime();

  Scenario scenarios[] = {
      {"uniform 3-D, uneven", uniform(4000, 3, 1), Split::uneven, Split::uneven, 300, false, true},
      {"clustered 2-D, uneven", clustered(4000, 2, 2), Split::uneven, Split::middle_empty, 300,
       false, true},
      {"duplicates 3-D, queries on rank 0", duplicates(1500, 3, 3), Split::uneven,
       Split::first_only, 200, true, false},
      {"all points on the last rank, 5-D", uniform(700, 5, 4), Split::last_only, Split::uneven, 120,
       true, true},
      {"fewer points than k, 7-D", uniform(23, 7, 5), Split::uneven, Split::last_only, 40, true,
       false},
      {"coordinates at the limit, 2-D", huge(30, 2, 7), Split::uneven, Split::uneven, 20, true,
       false},
      {"empty index", uniform(0, 3, 6), Split::uneven, Split::uneven, 20, true, false},
  };
  uint64_t seed = 100;
  for (const Scenario& s : scenarios) run_scenario(s, seed++);
  failures();

  long totals[2] = {g_checks, g_failures}, sums[2];
  MPI_Reduce(totals, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (g_rank == 0)
    std::printf("test_mpi_index: %d ranks, %ld checks, %ld failures, %.1f s\n", g_size, sums[0],
                sums[1], MPI_Wtime() - start);
  long any = g_failures, all = 0;
  MPI_Allreduce(&any, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}
