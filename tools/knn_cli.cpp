// knn_cli.cpp - the knn-gpgpu command-line tool (see docs/cli.md).
//
// A host of libknn_gpgpu like any other: it uses include/knn_gpgpu.h only.
// Exit status: 0 success, 1 bad input / I/O / library error, 2 the library
// lacks the engine a subcommand needs (KNN_ERR_UNSUPPORTED), 3 radius rows
// that --max-neighbors would cut (without --allow-truncation; nothing
// written), and CLI11's own non-zero codes for command-line errors.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#if KNN_CLI_HAVE_JSON
#include <nlohmann/json.hpp>

#include "bench.h"
#include "geojson.h"
#endif

#include "cli_support.h"
#include "deviation.h"
#include "knn_gpgpu.h"
#include "point_io.h"
#include "progress_bar.h"
#include "stats.h"

namespace {

using Clock = std::chrono::steady_clock;

using knn_cli::backend_value;
using knn_cli::check;
using knn_cli::LibraryError;
using knn_cli::read_table;

int point_count(const std::vector<float>& xyz, const std::string& path) {
  const size_t n = xyz.size() / 3;
  if (n > static_cast<size_t>(INT_MAX))
    throw std::runtime_error(path + ": " + std::to_string(n) +
                             " points exceed the classic API's limit of 2^31-1");
  return static_cast<int>(n);
}

// The contract's squared distance: float32, ((dx*dx + dy*dy) + dz*dz), no FMA
// (this file is compiled with -ffp-contract=off).
float squared_distance(const float* q, const float* p) {
  const float dx = q[0] - p[0];
  const float dy = q[1] - p[1];
  const float dz = q[2] - p[2];
  const float xx = dx * dx;
  const float yy = dy * dy;
  const float zz = dz * dz;
  return (xx + yy) + zz;
}

// --precision: float32, float64, or auto (float64 when an input file holds
// doubles; see knn_cli::Precision).
knn_cli::Precision precision_value(const std::string& name) {
  if (name == "float32") return knn_cli::Precision::Float32;
  if (name == "float64") return knn_cli::Precision::Float64;
  return knn_cli::Precision::Auto;
}

// Reference and query tables in one precision: float64 when either was read
// in float64 (a table read in float32 holds float32 values, which widen
// exactly). The query is the reference itself for --self.
bool agree_on_precision(knn_cli::PointTable& ref, knn_cli::PointTable& query) {
  const bool doubles = ref.doubles || query.doubles;
  ref.doubles = query.doubles = doubles;
  return doubles;
}

const char* precision_name(bool doubles) { return doubles ? "float64" : "float32"; }

struct IndexDeleter {
  void operator()(knn_index* p) const { knn_index_free(p); }
};

struct KnnArgs {
  std::string ref, query, out, backend = "auto", precision = "auto";
  bool self = false, exclude_self = false, distances = false;
  bool progress = false;  // --progress: progress lines even when stderr is not a terminal
  int k = 0;
};

// knn in float64: the index API's _f64 calls (a kd-tree, as the classic API
// builds; every structure answers the same), squared distances from the
// library in float64.
int run_knn_f64(const KnnArgs& a, const knn_cli::PointTable& ref, const knn_cli::PointTable& query,
                knn_cli::ProgressReporter& progress) {
  const int64_t n = ref.size(), m = query.size();
  progress.step("read " + std::to_string(n) + " reference and " + std::to_string(m) +
                " query points (float64)");
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = backend_value(a.backend);
  opt.structure = KNN_STRUCTURE_KDTREE;
  progress.step("building the kd-tree in float64 (" + a.backend + ")");
  knn_index* raw = nullptr;
  check(knn_index_build_f64(ref.coords.data(), n, 3, &opt, &raw), "knn_index_build_f64");
  const std::unique_ptr<knn_index, IndexDeleter> index(raw);
  const size_t cells = static_cast<size_t>(m) * static_cast<size_t>(a.k);
  std::vector<int32_t> idx(cells);
  std::vector<double> dist(a.distances ? cells : 0);
  progress.step("querying k=" + std::to_string(a.k));
  if (a.self) {
    check(knn_index_query_self_f64(index.get(), a.k, a.exclude_self ? 1 : 0, idx.data(),
                                   a.distances ? dist.data() : nullptr),
          "knn_index_query_self_f64");
  } else {
    check(knn_index_query_f64(index.get(), query.coords.data(), m, a.k, idx.data(),
                              a.distances ? dist.data() : nullptr, &opt),
          "knn_index_query_f64");
  }
  progress.step("writing " + a.out);
  if (knn_cli::extension_of(a.out) == ".npy") {
    knn_cli::write_npy_int32(a.out, idx.data(), m, a.k);
    if (a.distances)
      knn_cli::write_npy_float64(knn_cli::distance_path_for(a.out), dist.data(), m, a.k);
  } else {
    knn_cli::write_csv(a.out, idx.data(), a.distances ? dist.data() : nullptr, m, a.k);
  }
  progress.step("done");
  return 0;
}

int run_knn(const KnnArgs& a) {
  knn_cli::ProgressReporter progress(knn_cli::progress_mode(a.progress));
  if (a.query.empty() && !a.self) throw std::runtime_error("give --query FILE or --self");
  if (a.exclude_self && !a.self) throw std::runtime_error("--exclude-self needs --self");
  if (a.k < 1) throw std::runtime_error("--k must be at least 1");
  const std::string out_ext = knn_cli::extension_of(a.out);
  if (out_ext != ".npy" && out_ext != ".csv")
    throw std::runtime_error(a.out + ": output must end in .npy or .csv");

  progress.step("reading " + a.ref);
  const knn_cli::Precision precision = precision_value(a.precision);
  knn_cli::PointTable ref_table = read_table(a.ref, 3, 3, precision);
  knn_cli::PointTable query_table;
  if (!a.self) {
    progress.step("reading " + a.query);
    query_table = read_table(a.query, 3, 3, precision);
  }
  if (agree_on_precision(ref_table, a.self ? ref_table : query_table))
    return run_knn_f64(a, ref_table, a.self ? ref_table : query_table, progress);
  const std::vector<float> ref = ref_table.floats();
  const int n_ref = point_count(ref, a.ref);
  const std::vector<float> query_store = a.self ? std::vector<float>() : query_table.floats();
  const std::vector<float>& query = a.self ? ref : query_store;
  const int m = point_count(query, a.self ? a.ref : a.query);
  progress.step("read " + std::to_string(n_ref) + " reference and " + std::to_string(m) +
                " query points (float32)");

  const int k = a.k;
  if (a.exclude_self && k == INT_MAX) throw std::runtime_error("--k too large");
  const int k_ask = a.exclude_self ? k + 1 : k;

  const auto* ref_pts = reinterpret_cast<const Point*>(ref.data());
  const auto* query_pts = reinterpret_cast<const Point*>(query.data());
  std::vector<Node> tree(n_ref > 0 ? static_cast<size_t>(n_ref) : 1);
  progress.step("building the kd-tree (" + a.backend + ")");
  if (a.backend == "cuda") {
    check(cuBuildKdTree(ref_pts, n_ref, tree.data()), "cuBuildKdTree");
  } else if (a.backend == "openmp") {
    check(mpBuildKdTree(ref_pts, n_ref, tree.data()), "mpBuildKdTree");
  } else {
    check(buildKdTree(ref_pts, n_ref, tree.data()), "buildKdTree");
  }
  // The query points are checked by the query call; with --self they were
  // already checked by the build.
  progress.step("querying k=" + std::to_string(k_ask));
  std::vector<int> result(static_cast<size_t>(m) * static_cast<size_t>(k_ask));
  if (a.backend == "cuda") {
    check(cuQueryAll(query_pts, tree.data(), m, n_ref, k_ask, result.data()), "cuQueryAll");
  } else if (a.backend == "openmp") {
    check(mpQueryAll(query_pts, tree.data(), m, n_ref, k_ask, result.data()), "mpQueryAll");
  } else {
    check(queryAll(query_pts, tree.data(), m, n_ref, k_ask, result.data()), "queryAll");
  }

  std::vector<int32_t> idx(static_cast<size_t>(m) * static_cast<size_t>(k));
  for (size_t i = 0; i < static_cast<size_t>(m); ++i) {
    const int* row = result.data() + i * static_cast<size_t>(k_ask);
    int32_t* dst = idx.data() + i * static_cast<size_t>(k);
    if (!a.exclude_self) {
      for (int j = 0; j < k; ++j) dst[j] = row[j];
      continue;
    }
    // Drop the query's own index (only it); when it is not among the k+1
    // (more than k earlier duplicates), drop the last one instead.
    int skip = k_ask - 1;
    for (int j = 0; j < k_ask; ++j) {
      if (row[j] == static_cast<int>(i)) {
        skip = j;
        break;
      }
    }
    int o = 0;
    for (int j = 0; j < k_ask; ++j)
      if (j != skip) dst[o++] = row[j];
  }

  std::vector<float> dist;
  if (a.distances) {
    dist.resize(idx.size());
    for (size_t i = 0; i < static_cast<size_t>(m); ++i) {
      for (size_t j = 0; j < static_cast<size_t>(k); ++j) {
        const int32_t r = idx[i * k + j];
        dist[i * k + j] = r < 0 ? std::numeric_limits<float>::infinity()
                                : squared_distance(&query[i * 3], &ref[static_cast<size_t>(r) * 3]);
      }
    }
  }

  progress.step("writing " + a.out);
  if (out_ext == ".npy") {
    knn_cli::write_npy_int32(a.out, idx.data(), m, k);
    if (a.distances)
      knn_cli::write_npy_float32(knn_cli::distance_path_for(a.out), dist.data(), m, k);
  } else {
    knn_cli::write_csv(a.out, idx.data(), a.distances ? dist.data() : nullptr, m, k);
  }
  progress.step("done");
  return 0;
}

int run_info(bool json) {
  const int v = knn_version();
#if KNN_CLI_HAVE_JSON
  if (json) {
    nlohmann::json j;
    j["version"] = std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
                   std::to_string(v % 100);
    j["version_number"] = v;
    j["header_version_number"] = KNN_VERSION_NUMBER;
    j["cuda_device_count"] = cuGetDeviceCount();
    j["current_device"] = cuGetDevice();
    j["free_gpu_bytes"] = static_cast<uint64_t>(getFreeBytesOnGpu());
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
#else
  (void)json;
#endif
  std::printf("knn_gpgpu version: %d.%d.%d (header %d.%d.%d)\n", v / 10000, (v / 100) % 100,
              v % 100, KNN_VERSION_MAJOR, KNN_VERSION_MINOR, KNN_VERSION_PATCH);
  std::printf("CUDA devices: %d\n", cuGetDeviceCount());
  std::printf("current device: %d\n", cuGetDevice());
  std::printf("free GPU bytes: %zu\n", getFreeBytesOnGpu());
  return 0;
}

// Output files: .npy or .csv, checked before any work is done.
std::string table_extension(const std::string& path, const char* option) {
  const std::string ext = knn_cli::extension_of(path);
  if (ext != ".npy" && ext != ".csv")
    throw std::runtime_error(path + ": " + option + " must end in .npy or .csv");
  return ext;
}

// ---- radius: knn_index_build + knn_index_radius_count/_fill (or knn_index_radius) ------
struct RadiusArgs {
  std::string ref, query, out, counts, distances, offsets, backend = "auto", structure = "auto",
                                                           precision = "auto";
  bool self = false;
  bool progress = false;
  bool allow_truncation = false;
  double radius = -1;
  int max_neighbors = -1;  // not given: every neighbour, in CSR rows
};

// Exit status of a radius search whose rows --max-neighbors would cut,
// without --allow-truncation: nothing is written.
constexpr int kExitTruncated = 3;

// Rows as wide as the index API takes (1..KNN_INDEX_MAX_DIM); past that the
// reader names the line instead of the library refusing the whole array.
#ifdef KNN_INDEX_MAX_DIM
constexpr int kMaxReadDim = KNN_INDEX_MAX_DIM;
#else
constexpr int kMaxReadDim = 4096;
#endif

void write_counts(const std::string& path, const std::vector<int32_t>& counts) {
  if (knn_cli::extension_of(path) == ".npy") {
    knn_cli::write_npy_int32_vector(path, counts.data(), static_cast<int64_t>(counts.size()));
    return;
  }
  knn_cli::TextFile f(path);
  f.line("count");
  for (int32_t c : counts) f.line(std::to_string(c));
  f.close();
}

// The queries of a radius search and the calls for their precision.
struct RadiusSearch {
  const knn_index* index;
  bool doubles;
  const double* q64;  // the queries in float64 (doubles) ...
  const float* q32;   // ... or in float32
  int64_t m;
  double radius;
  const knn_options* opt;

  void count(int64_t* counts) const {
    if (doubles) {
      check(knn_index_radius_count_f64(index, q64, m, radius, counts, opt),
            "knn_index_radius_count_f64");
    } else {
      check(knn_index_radius_count(index, q32, m, static_cast<float>(radius), counts, opt),
            "knn_index_radius_count");
    }
  }
  void fill(const int64_t* offsets, int32_t* idx, float* d32, double* d64) const {
    if (doubles) {
      check(knn_index_radius_fill_f64(index, q64, m, radius, offsets, idx, d64, opt),
            "knn_index_radius_fill_f64");
    } else {
      check(
          knn_index_radius_fill(index, q32, m, static_cast<float>(radius), offsets, idx, d32, opt),
          "knn_index_radius_fill");
    }
  }
  void rows(int max_neighbors, int32_t* idx, float* d32, double* d64, int32_t* counts) const {
    if (doubles) {
      check(knn_index_radius_f64(index, q64, m, radius, max_neighbors, idx, d64, counts, opt),
            "knn_index_radius_f64");
    } else {
      check(knn_index_radius(index, q32, m, static_cast<float>(radius), max_neighbors, idx, d32,
                             counts, opt),
            "knn_index_radius");
    }
  }
};

// Every neighbour of every query (no --max-neighbors): counts, offsets,
// then the rows end to end (CSR), so no row is ever cut.
int radius_csr(const RadiusArgs& a, const RadiusSearch& search,
               knn_cli::ProgressReporter& progress) {
  const int64_t m = search.m;
  progress.step("radius search, r=" + std::to_string(a.radius) + ": counting");
  std::vector<int64_t> counts64(static_cast<size_t>(m));
  search.count(counts64.data());
  std::vector<int64_t> offsets(static_cast<size_t>(m) + 1);
  check(knn_offsets_from_counts(counts64.data(), m, offsets.data()), "knn_offsets_from_counts");
  const size_t total = static_cast<size_t>(offsets[static_cast<size_t>(m)]);
  std::vector<int32_t> idx;
  std::vector<float> dist;
  std::vector<double> dist64;
  if (!a.out.empty()) {
    progress.step("radius search: filling " + std::to_string(total) + " neighbours");
    idx.resize(total);
    if (!a.distances.empty() && search.doubles) dist64.resize(total);
    if (!a.distances.empty() && !search.doubles) dist.resize(total);
    search.fill(offsets.data(), idx.data(), dist.empty() ? nullptr : dist.data(),
                dist64.empty() ? nullptr : dist64.data());
    progress.step("writing " + a.out);
    const int64_t rows = static_cast<int64_t>(total);
    if (knn_cli::extension_of(a.out) == ".npy") {
      knn_cli::write_npy_int32(a.out, idx.data(), rows, -1);
    } else {
      knn_cli::write_csv_lists(a.out, offsets.data(), m, idx.data(),
                               static_cast<const float*>(nullptr));
    }
  }
  if (!a.distances.empty()) {
    progress.step("writing " + a.distances);
    const int64_t rows = static_cast<int64_t>(total);
    const bool npy = knn_cli::extension_of(a.distances) == ".npy";
    if (npy && search.doubles) {
      knn_cli::write_npy_float64(a.distances, dist64.data(), rows, -1);
    } else if (npy) {
      knn_cli::write_npy_float32(a.distances, dist.data(), rows, -1);
    } else if (search.doubles) {
      knn_cli::write_csv_lists(a.distances, offsets.data(), m, idx.data(), dist64.data());
    } else {
      knn_cli::write_csv_lists(a.distances, offsets.data(), m, idx.data(), dist.data());
    }
  }
  if (!a.offsets.empty()) {
    progress.step("writing " + a.offsets);
    if (knn_cli::extension_of(a.offsets) == ".npy") {
      knn_cli::write_npy_int64(a.offsets, offsets.data(), m + 1, -1);
    } else {
      knn_cli::TextFile f(a.offsets);
      f.line("offset");
      for (const int64_t o : offsets) f.line(std::to_string(o));
      f.close();
    }
  }
  if (!a.counts.empty()) {
    progress.step("writing " + a.counts);
    // A count is at most the index's size, which int32 indices bound.
    write_counts(a.counts, std::vector<int32_t>(counts64.begin(), counts64.end()));
  }
  progress.step("done");
  return 0;
}

// Rows of --max-neighbors slots (knn_index_radius). A query with more
// neighbours than that is reported, and without --allow-truncation nothing
// is written and the exit status says so: a cut row is never silent.
int radius_rows(const RadiusArgs& a, const RadiusSearch& search,
                knn_cli::ProgressReporter& progress) {
  const int64_t m = search.m;
  const size_t M = static_cast<size_t>(a.max_neighbors);
  std::vector<int32_t> idx(static_cast<size_t>(m) * M);
  const size_t n_dist = a.distances.empty() ? 0 : idx.size();
  std::vector<float> dist(search.doubles ? 0 : n_dist);
  std::vector<double> dist64(search.doubles ? n_dist : 0);
  std::vector<int32_t> counts(static_cast<size_t>(m));
  progress.step("radius search, r=" + std::to_string(a.radius) + ", at most " + std::to_string(M) +
                " per query");
  search.rows(a.max_neighbors, M ? idx.data() : nullptr, dist.empty() ? nullptr : dist.data(),
              dist64.empty() ? nullptr : dist64.data(), counts.data());
  int64_t truncated = 0, first = -1;
  for (int64_t i = 0; i < m; ++i) {
    if (M > 0 && counts[static_cast<size_t>(i)] > a.max_neighbors) {
      if (first < 0) first = i;
      ++truncated;
    }
  }
  if (truncated > 0) {
    char r_text[32];
    std::snprintf(r_text, sizeof r_text, "%.9g", a.radius);
    const std::string what =
        std::to_string(truncated) + " of " + std::to_string(m) + " queries have more than " +
        std::to_string(M) + " neighbours within " + r_text + " (the first: query " +
        std::to_string(first) + ", with " + std::to_string(counts[static_cast<size_t>(first)]) +
        "); --max-neighbors " + std::to_string(M) + " keeps only the nearest " + std::to_string(M) +
        " of each";
    if (!a.allow_truncation) {
      std::fprintf(stderr,
                   "knn-gpgpu: %s. Nothing written: leave --max-neighbors out for every "
                   "neighbour, or pass --allow-truncation to keep the cut rows\n",
                   what.c_str());
      return kExitTruncated;
    }
    std::fprintf(stderr, "knn-gpgpu: warning: %s (--allow-truncation)\n", what.c_str());
  }

  if (!a.out.empty()) {
    progress.step("writing " + a.out);
    if (knn_cli::extension_of(a.out) == ".npy") {
      knn_cli::write_npy_int32(a.out, idx.data(), m, a.max_neighbors);
    } else {
      knn_cli::write_csv(a.out, idx.data(), static_cast<const float*>(nullptr), m, a.max_neighbors);
    }
  }
  if (!a.distances.empty()) {
    progress.step("writing " + a.distances);
    const bool npy = knn_cli::extension_of(a.distances) == ".npy";
    if (npy && search.doubles) {
      knn_cli::write_npy_float64(a.distances, dist64.data(), m, a.max_neighbors);
    } else if (npy) {
      knn_cli::write_npy_float32(a.distances, dist.data(), m, a.max_neighbors);
    } else if (search.doubles) {
      knn_cli::write_csv_float64(a.distances, "d", dist64.data(), m, a.max_neighbors);
    } else {
      knn_cli::write_csv_float32(a.distances, "d", dist.data(), m, a.max_neighbors);
    }
  }
  if (!a.counts.empty()) {
    progress.step("writing " + a.counts);
    write_counts(a.counts, counts);
  }
  progress.step("done");
  return 0;
}

int run_radius(const RadiusArgs& a) {
  knn_cli::ProgressReporter progress(knn_cli::progress_mode(a.progress));
  if (a.query.empty() && !a.self) throw std::runtime_error("give --query FILE or --self");
  // +infinity is the library's "every point" radius; in float32 a value past
  // float32's range becomes it too, as the library's float argument would.
  if (!(a.radius >= 0)) throw std::runtime_error("--radius must be a number >= 0 (or inf)");
  const bool bounded = a.max_neighbors >= 0;
  if (a.allow_truncation && !bounded)
    throw std::runtime_error("--allow-truncation goes with --max-neighbors M");
  if (bounded && !a.offsets.empty())
    throw std::runtime_error(
        "--offsets is for rows of every neighbour: leave --max-neighbors out, or drop --offsets");
  // max_neighbors 0 is the library's counting call: only counts come back.
  if (a.max_neighbors == 0 && (!a.out.empty() || !a.distances.empty() || a.counts.empty()))
    throw std::runtime_error(
        "--max-neighbors 0 counts only: give --counts FILE, not --out or --distances");
  if (a.out.empty() && (a.max_neighbors > 0 || !a.distances.empty() || !a.offsets.empty()))
    throw std::runtime_error("--out FILE is required");
  if (a.out.empty() && a.counts.empty())
    throw std::runtime_error(
        "give --out FILE for the neighbours (or --counts FILE for counts only)");
  const std::string out_ext = a.out.empty() ? "" : table_extension(a.out, "--out");
  if (!a.counts.empty()) table_extension(a.counts, "--counts");
  const std::string dist_ext =
      a.distances.empty() ? "" : table_extension(a.distances, "--distances");
  if (!a.offsets.empty()) table_extension(a.offsets, "--offsets");
  if (!bounded && a.offsets.empty() && a.counts.empty() &&
      (out_ext == ".npy" || dist_ext == ".npy"))
    throw std::runtime_error(
        "without --max-neighbors a .npy --out or --distances holds every row end to end: give "
        "--offsets FILE (or --counts FILE) to split it into rows");

  progress.step("reading " + a.ref);
  const knn_cli::Precision precision = precision_value(a.precision);
  knn_cli::PointTable ref = read_table(a.ref, 1, kMaxReadDim, precision);
  knn_cli::PointTable query_store;
  if (!a.self) {
    progress.step("reading " + a.query);
    // Queries have the reference's dimension (any, when the reference file
    // has no rows to tell it).
    query_store = ref.dim > 0 ? read_table(a.query, ref.dim, ref.dim, precision)
                              : read_table(a.query, 1, kMaxReadDim, precision);
  }
  const bool doubles = agree_on_precision(ref, a.self ? ref : query_store);
  const knn_cli::PointTable& query = a.self ? ref : query_store;
  const int dim = ref.dim > 0 ? ref.dim : (query.dim > 0 ? query.dim : 3);
  const int64_t n = ref.size(), m = query.size();
  progress.step("read " + std::to_string(n) + " reference and " + std::to_string(m) +
                " query points of dimension " + std::to_string(dim) + " (" +
                precision_name(doubles) + ")");

  knn_options opt;
  knn_options_init(&opt);
  opt.backend = backend_value(a.backend);
  opt.structure = a.structure == "kdtree"        ? KNN_STRUCTURE_KDTREE
                  : a.structure == "grid"        ? KNN_STRUCTURE_GRID
                  : a.structure == "brute_force" ? KNN_STRUCTURE_BRUTE_FORCE
                                                 : KNN_STRUCTURE_AUTO;
  progress.step("building the index (" + a.backend + ", " + a.structure + ", " +
                precision_name(doubles) + ")");
  knn_index* raw = nullptr;
  std::vector<float> ref32, query32;  // the float32 tables as the float calls take them
  if (doubles) {
    check(knn_index_build_f64(ref.coords.data(), n, dim, &opt, &raw), "knn_index_build_f64");
  } else {
    ref32 = ref.floats();
    query32 = a.self ? std::vector<float>() : query.floats();
    check(knn_index_build(ref32.data(), n, dim, &opt, &raw), "knn_index_build");
  }
  const std::unique_ptr<knn_index, IndexDeleter> index(raw);
  const RadiusSearch search{
      index.get(), doubles, query.coords.data(), a.self ? ref32.data() : query32.data(), m,
      a.radius,    &opt};
  return bounded ? radius_rows(a, search, progress) : radius_csr(a, search, progress);
}

// ---- pip: knn_quadtree_build + knn_points_in_polygons[_count] -----------------------
struct PipArgs {
  std::string points, polygons, out, pairs, backend = "auto", id_property, precision = "auto";
  bool progress = false;
};

#if KNN_CLI_HAVE_JSON
struct QuadtreeDeleter {
  void operator()(knn_quadtree* p) const { knn_quadtree_free(p); }
};

// The vertices of a polygon set as the library takes them: the _f64 calls on
// the doubles when they were read in float64, else the float calls on their
// float32 values (exact).
class PolygonCalls {
 public:
  PolygonCalls(const std::vector<double>& vertices, bool doubles)
      : v64_(vertices), doubles_(doubles) {
    if (!doubles) v32_.assign(vertices.begin(), vertices.end());
  }
  void count(const knn_quadtree* tree, const int64_t* rings, int64_t n_rings,
             const int64_t* polygons, int64_t n_polygons, int64_t* counts,
             const knn_options* opt) const {
    if (doubles_) {
      check(knn_points_in_polygons_count_f64(tree, v64_.data(), rings, n_rings, polygons,
                                             n_polygons, counts, opt),
            "knn_points_in_polygons_count_f64");
    } else {
      check(knn_points_in_polygons_count(tree, v32_.data(), rings, n_rings, polygons, n_polygons,
                                         counts, opt),
            "knn_points_in_polygons_count");
    }
  }
  void fill(const knn_quadtree* tree, const int64_t* rings, int64_t n_rings,
            const int64_t* polygons, int64_t n_polygons, const int64_t* offsets, int64_t* points,
            const knn_options* opt) const {
    if (doubles_) {
      check(knn_points_in_polygons_f64(tree, v64_.data(), rings, n_rings, polygons, n_polygons,
                                       offsets, points, opt),
            "knn_points_in_polygons_f64");
    } else {
      check(knn_points_in_polygons(tree, v32_.data(), rings, n_rings, polygons, n_polygons, offsets,
                                   points, opt),
            "knn_points_in_polygons");
    }
  }

 private:
  const std::vector<double>& v64_;
  bool doubles_;
  std::vector<float> v32_;
};

// Some of a layer's polygons as a polygon set of their own (the library's
// flat arrays), for knn_points_in_polygons over just those.
struct PolygonSubset {
  std::vector<double> vertices;
  std::vector<int64_t> rings{0}, polygons{0};
  PolygonSubset(const knn_cli::PolygonLayer& L, const std::vector<int64_t>& which) {
    for (const int64_t p : which) {
      for (int64_t r = L.polygon_offsets[p]; r < L.polygon_offsets[p + 1]; ++r) {
        const int64_t v0 = L.ring_offsets[r], v1 = L.ring_offsets[r + 1];
        vertices.insert(vertices.end(), L.vertices.begin() + 2 * v0, L.vertices.begin() + 2 * v1);
        rings.push_back(static_cast<int64_t>(vertices.size() / 2));
      }
      polygons.push_back(static_cast<int64_t>(rings.size()) - 1);
    }
  }
};

// Points of every polygon of `set`: offsets (n_polygons + 1) and indices,
// ascending within each polygon, from the counts the library gave.
void points_of(const knn_quadtree* tree, const PolygonCalls& calls, const int64_t* rings,
               int64_t n_rings, const int64_t* polygons, int64_t n_polygons, const knn_options* opt,
               std::vector<int64_t>* offsets, std::vector<int64_t>* points) {
  std::vector<int64_t> counts(static_cast<size_t>(n_polygons));
  calls.count(tree, rings, n_rings, polygons, n_polygons, counts.data(), opt);
  offsets->assign(1, 0);
  for (const int64_t c : counts) offsets->push_back(offsets->back() + c);
  points->assign(static_cast<size_t>(offsets->back()), 0);
  calls.fill(tree, rings, n_rings, polygons, n_polygons, offsets->data(), points->data(), opt);
}

int run_pip(const PipArgs& a) {
  knn_cli::ProgressReporter progress(knn_cli::progress_mode(a.progress));
  if (knn_cli::extension_of(a.out) != ".csv")
    throw std::runtime_error(a.out + ": --out must end in .csv");
  const std::string pairs_ext = a.pairs.empty() ? "" : table_extension(a.pairs, "--pairs");

  progress.step("reading " + a.polygons);
  const knn_cli::Precision precision = precision_value(a.precision);
  const knn_cli::PolygonLayer L = knn_cli::read_geojson(a.polygons, a.id_property, precision);
  progress.step("read " + std::to_string(L.features()) + " features, " +
                std::to_string(L.polygons()) + " polygons, " + std::to_string(L.rings()) +
                " rings");
  progress.step("reading " + a.points);
  const knn_cli::PointTable pts = read_table(a.points, 2, 3, precision);
  const int64_t n = pts.size();
  std::vector<double> xy(static_cast<size_t>(n) * 2);
  for (int64_t i = 0; i < n; ++i) {
    xy[2 * i] = pts.coords[static_cast<size_t>(i) * pts.dim];
    xy[2 * i + 1] = pts.coords[static_cast<size_t>(i) * pts.dim + 1];
  }

  knn_options opt;
  knn_options_init(&opt);
  opt.backend = backend_value(a.backend);
  // Points and polygons each in the precision read: the library combines
  // either with either, deciding on the exact values.
  progress.step("building the quadtree of " + std::to_string(n) + " points (" + a.backend + ", " +
                precision_name(pts.doubles) + "; polygons in " + precision_name(L.doubles) + ")");
  knn_quadtree* raw = nullptr;
  if (pts.doubles) {
    check(knn_quadtree_build_f64(xy.data(), n, &opt, &raw), "knn_quadtree_build_f64");
  } else {
    const std::vector<float> xy32(xy.begin(), xy.end());
    check(knn_quadtree_build(xy32.data(), n, &opt, &raw), "knn_quadtree_build");
  }
  const std::unique_ptr<knn_quadtree, QuadtreeDeleter> tree(raw);
  const PolygonCalls layer_calls(L.vertices, L.doubles);

  // Counts per polygon first: they are all that a feature of one polygon
  // needs, and they show which multi-part features can count a point twice
  // (those with two or more non-empty parts that overlap).
  progress.step("counting points in " + std::to_string(L.polygons()) + " polygons");
  const int64_t F = L.features(), P = L.polygons();
  std::vector<int64_t> poly_counts(static_cast<size_t>(P));
  layer_calls.count(tree.get(), L.ring_offsets.data(), L.rings(), L.polygon_offsets.data(), P,
                    poly_counts.data(), &opt);
  std::vector<int64_t> feature_counts(static_cast<size_t>(F), 0);
  std::vector<char> needs_union(static_cast<size_t>(F), 0);
  std::vector<int64_t> union_polygons;  // polygons of the features in needs_union
  for (int64_t f = 0; f < F; ++f) {
    int non_empty = 0;
    for (int64_t p = L.feature_offsets[f]; p < L.feature_offsets[f + 1]; ++p) {
      feature_counts[f] += poly_counts[p];
      non_empty += poly_counts[p] > 0;
    }
    if (non_empty >= 2 || !a.pairs.empty()) {
      needs_union[f] = 1;
      for (int64_t p = L.feature_offsets[f]; p < L.feature_offsets[f + 1]; ++p)
        union_polygons.push_back(p);
    }
  }

  // Point lists of those features: the union of their parts' lists (sorted,
  // duplicates removed), so a point in two overlapping parts counts once.
  std::vector<int64_t> pair_points, pair_features;
  if (!union_polygons.empty()) {
    progress.step("listing the points of " + std::to_string(union_polygons.size()) + " polygons");
    std::vector<int64_t> offsets, points;
    if (static_cast<int64_t>(union_polygons.size()) == P) {
      // Every polygon (--pairs, or every feature multi-part): no copy.
      points_of(tree.get(), layer_calls, L.ring_offsets.data(), L.rings(), L.polygon_offsets.data(),
                P, &opt, &offsets, &points);
    } else {
      const PolygonSubset sub(L, union_polygons);
      points_of(tree.get(), PolygonCalls(sub.vertices, L.doubles), sub.rings.data(),
                static_cast<int64_t>(sub.rings.size()) - 1, sub.polygons.data(),
                static_cast<int64_t>(union_polygons.size()), &opt, &offsets, &points);
    }
    size_t q = 0;  // position in union_polygons / offsets
    std::vector<int64_t> merged;
    for (int64_t f = 0; f < F; ++f) {
      if (!needs_union[f]) continue;
      const int64_t parts = L.feature_offsets[f + 1] - L.feature_offsets[f];
      merged.assign(points.begin() + offsets[q], points.begin() + offsets[q + parts]);
      q += static_cast<size_t>(parts);
      if (parts > 1) {
        std::sort(merged.begin(), merged.end());
        merged.erase(std::unique(merged.begin(), merged.end()), merged.end());
      }
      feature_counts[f] = static_cast<int64_t>(merged.size());
      if (!a.pairs.empty()) {
        pair_points.insert(pair_points.end(), merged.begin(), merged.end());
        pair_features.insert(pair_features.end(), merged.size(), f);
      }
    }
  }

  progress.step("writing " + a.out);
  {
    knn_cli::TextFile f(a.out);
    f.line("feature,id,count");
    for (int64_t i = 0; i < F; ++i)
      f.line(std::to_string(i) + "," + knn_cli::csv_field(L.ids[i]) + "," +
             std::to_string(feature_counts[i]));
    f.close();
  }
  if (!a.pairs.empty()) {
    progress.step("writing " + a.pairs);
    const size_t np = pair_points.size();
    if (pairs_ext == ".npy") {
      std::vector<int64_t> rows(np * 2);
      for (size_t i = 0; i < np; ++i) {
        rows[2 * i] = pair_points[i];
        rows[2 * i + 1] = pair_features[i];
      }
      knn_cli::write_npy_int64(a.pairs, rows.data(), static_cast<int64_t>(np), 2);
    } else {
      knn_cli::TextFile f(a.pairs);
      f.line("point,feature");
      for (size_t i = 0; i < np; ++i)
        f.line(std::to_string(pair_points[i]) + "," + std::to_string(pair_features[i]));
      f.close();
    }
  }
  progress.step("done");
  return 0;
}
#else
int run_pip(const PipArgs&) {
  throw std::runtime_error(
      "pip reads GeoJSON with nlohmann-json, and this knn-gpgpu was built without it "
      "(Debian: nlohmann-json3-dev)");
}
#endif

// An int option's range, with a message a user can read: CLI11's
// PositiveNumber answers "--k 0" with "Value 0 not in range 0.000000 to"
// and the 309 digits of DBL_MAX.
CLI::Validator int_at_least(int min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || end == text.c_str() || *end != '\0')
          return "'" + text + "' is not an integer";
        if (errno == ERANGE || v > INT_MAX)
          return text + " is too large (at most " + std::to_string(INT_MAX) + ")";
        if (v < min) return "must be at least " + std::to_string(min) + ", not " + text;
        return "";
      },
      "INT>=" + std::to_string(min));
}

}  // namespace

// --precision on a subcommand that reads coordinates.
void add_precision_option(CLI::App* command, std::string& precision) {
  command
      ->add_option("--precision", precision,
                   "auto (the default): compute in float64 when a file holds doubles (text "
                   ".xyz/.txt/.csv, GeoJSON, PLY double x/y/z, .npy float64), else in float32 "
                   "(PLY float, .npy float32, .bin/.f32); float64: always, float32 values "
                   "widen exactly; float32: round every coordinate to float32. float64 results "
                   "print with 17 significant digits and .npy distances are float64")
      ->check(CLI::IsMember({"auto", "float32", "float64"}));
}

// --progress on a subcommand whose long calls report progress.
void add_progress_flag(CLI::App* command, bool& progress) {
  command->add_flag("--progress", progress,
                    "progress of long calls on stderr: a bar on a terminal (the default there), "
                    "plain lines elsewhere");
}

int main(int argc, char** argv) {
  CLI::App app{"knn-gpgpu: exact k-nearest-neighbour search with libknn_gpgpu"};
  app.require_subcommand(1);

  KnnArgs ka;
  CLI::App* knn = app.add_subcommand("knn", "3-D k nearest neighbours (classic kd-tree API)");
  knn->add_option("--ref", ka.ref, "reference points (.xyz .txt .csv .ply .npy .bin .f32)")
      ->required();
  CLI::Option* q_opt = knn->add_option("--query", ka.query, "query points (same formats)");
  CLI::Option* self_opt = knn->add_flag("--self", ka.self, "query the reference points themselves");
  CLI::Option* excl_opt =
      knn->add_flag("--exclude-self", ka.exclude_self, "with --self: drop each point's own index");
  q_opt->excludes(self_opt);
  excl_opt->needs(self_opt);
  knn->add_option("--k", ka.k, "neighbours per query")->required()->check(int_at_least(1));
  knn->add_option("--out", ka.out, "result file: .npy (int32 (m,k)) or .csv")->required();
  knn->add_option("--backend", ka.backend, "auto, cuda or openmp")
      ->check(CLI::IsMember({"auto", "cuda", "openmp"}));
  knn->add_flag("--distances", ka.distances,
                "also write squared distances (OUT_dist.npy, or extra .csv columns), in the "
                "precision computed");
  add_precision_option(knn, ka.precision);
  add_progress_flag(knn, ka.progress);

  CLI::App* info = app.add_subcommand("info", "library version and CUDA devices");
  bool info_json = false;
#if KNN_CLI_HAVE_JSON
  info->add_flag("--json", info_json, "print one JSON object");
#endif

  RadiusArgs ra;
  CLI::App* radius =
      app.add_subcommand("radius", "points within a radius (index API, any dimension)");
  radius->add_option("--ref", ra.ref, "reference points (.xyz .txt .csv .ply .npy .bin .f32)")
      ->required();
  CLI::Option* rq_opt = radius->add_option("--query", ra.query, "query points (same dimension)");
  CLI::Option* rself_opt =
      radius->add_flag("--self", ra.self, "query the reference points themselves");
  rq_opt->excludes(rself_opt);
  radius->add_option("--radius", ra.radius, "search radius (squared distance <= radius^2)")
      ->required();
  CLI::Option* max_opt =
      radius
          ->add_option("--max-neighbors", ra.max_neighbors,
                       "rows of M slots, nearest first (0: counts only). Without it (the "
                       "default) every neighbour is written, rows end to end (CSR). A query with "
                       "more than M neighbours is reported on stderr and nothing is written "
                       "(exit 3) unless --allow-truncation is given")
          ->check(int_at_least(0));
  radius
      ->add_flag("--allow-truncation", ra.allow_truncation,
                 "with --max-neighbors: keep the nearest M of a query that has more, write the "
                 "outputs and exit 0 (the cut rows are still reported on stderr)")
      ->needs(max_opt);
  radius->add_option("--out", ra.out,
                     "indices: without --max-neighbors .npy int32 (total,), every row end to "
                     "end, or .csv 'query,index' one line per neighbour; with it .npy int32 "
                     "(m, M) or .csv, -1 = unused slot");
  radius
      ->add_option("--offsets", ra.offsets,
                   "without --max-neighbors: where each row starts in --out, .npy int64 (m+1,) "
                   "or .csv; row i is out[offsets[i]:offsets[i+1]]")
      ->excludes(max_opt);
  radius->add_option("--counts", ra.counts,
                     "true number within the radius per query: .npy (int32 (m,)) or .csv");
  radius->add_option("--distances", ra.distances,
                     "squared distances, laid out as --out (.csv: 'query,index,d'); .npy float32 "
                     "or float64 (the precision computed); inf = unused slot");
  add_precision_option(radius, ra.precision);
  radius->add_option("--backend", ra.backend, "auto, cuda or openmp")
      ->check(CLI::IsMember({"auto", "cuda", "openmp"}));
  radius->add_option("--structure", ra.structure, "auto, kdtree, grid or brute_force")
      ->check(CLI::IsMember({"auto", "kdtree", "grid", "brute_force"}));
  add_progress_flag(radius, ra.progress);

  PipArgs pa;
  CLI::App* pip = app.add_subcommand("pip", "count points in GeoJSON polygons (quadtree API)");
  pip->add_option("--points", pa.points,
                  "points, x and y used (.xyz .txt .csv .ply .npy .bin .f32)")
      ->required();
  pip->add_option("--polygons", pa.polygons, "GeoJSON FeatureCollection of Polygon/MultiPolygon")
      ->required();
  pip->add_option("--out", pa.out, "counts per feature, .csv (feature,id,count)")->required();
  pip->add_option("--pairs", pa.pairs, "(point, feature) pairs: .csv or .npy (int64 (p, 2))");
  pip->add_option("--id-property", pa.id_property,
                  "property that names a feature (default: the feature's id, else the "
                  "'id' or 'name' property)");
  pip->add_option("--backend", pa.backend, "auto, cuda or openmp")
      ->check(CLI::IsMember({"auto", "cuda", "openmp"}));
  add_precision_option(pip, pa.precision);
  add_progress_flag(pip, pa.progress);

  knn_cli::DeviationArgs da;
  CLI::App* deviation = app.add_subcommand(
      "deviation",
      "signed distance of a scan's points to its design's triangle mesh: report, "
      "per-point PLY, histogram (mesh API)");
  deviation->add_option("--scan", da.scan, "scan points (.xyz .txt .csv .ply .npy .bin .f32)")
      ->required();
  deviation->add_option("--design", da.design, "design mesh (.stl binary or ASCII, .ply, .obj)")
      ->required();
  deviation
      ->add_option("--tol", da.tolerance,
                   "tolerance t: a point is within when -t <= deviation <= t")
      ->required();
  deviation->add_option("--max-distance", da.max_distance,
                        "points farther than this from the design are not measured (counted as "
                        "beyond; default inf)");
  deviation->add_option("--out", da.out,
                        "per-point PLY: x y z, the signed deviation ('deviation', inf beyond "
                        "--max-distance) and its colour (red green blue)");
  deviation->add_option("--histogram", da.histogram, "histogram picture, .svg");
  deviation->add_option("--bins", da.bins, "histogram bins over [-R, R] (default 40)")
      ->check(int_at_least(1));
  deviation->add_option("--range", da.range,
                        "R, the half-width of the histogram and of the colour scale (default "
                        "min(4 x tol, max distance))");
  deviation->add_option("--backend", da.backend, "auto, cuda or openmp")
      ->check(CLI::IsMember({"auto", "cuda", "openmp"}));
  deviation->add_flag("--f64", da.f64,
                      "compute in float64 (knn_mesh_build_f64): files' values kept as they are; "
                      "else every coordinate is rounded to float32");
  deviation->add_flag("--align", da.align,
                      "first fit the scan to the design (ICP point to plane, knn_mesh_align_ex; "
                      "correspondences within --max-distance), print the transform, and report "
                      "the scan as moved by it");
  deviation->add_option("--align-keep", da.align_keep,
                        "with --align: the fraction of each step's correspondences kept, the "
                        "nearest (trims outliers; default 1)");
  deviation
      ->add_option("--align-iterations", da.align_iterations,
                   "with --align: the most iterations (default 50)")
      ->check(int_at_least(1));
  add_progress_flag(deviation, da.progress);

  knn_cli::NormalsArgs na;
  CLI::App* normals = app.add_subcommand(
      "normals",
      "unit normals and curvature of a point cloud, by principal components of each point's k "
      "nearest (knn_index_normals); writes x y z nx ny nz curvature");
  normals->add_option("in", na.in, "points (.xyz .txt .csv .ply .npy .bin .f32)")->required();
  normals
      ->add_option("out", na.out,
                   "output: .ply (binary, float or double properties x y z nx ny nz curvature) "
                   "or a text table (.xyz .txt .csv, a header line naming the columns)")
      ->required();
  normals->add_option("--k", na.k, "neighbours of each point, itself included (default 30)")
      ->check(int_at_least(1));
  normals
      ->add_option("--viewpoint", na.viewpoint,
                   "x,y,z: orient every normal towards this point (dot(n, v - p) >= 0); without "
                   "it normals are oriented consistently over the cloud (closed surfaces: all "
                   "outward or all inward)")
      ->delimiter(',')
      ->expected(3);
  normals->add_option("--backend", na.backend, "auto, cuda or openmp")
      ->check(CLI::IsMember({"auto", "cuda", "openmp"}));
  normals->add_flag("--f64", na.f64,
                    "compute in float64 (knn_index_build_f64): files' values kept as they are; "
                    "else every coordinate is rounded to float32");
  add_progress_flag(normals, na.progress);

  knn_cli::OutliersArgs oa;
  CLI::App* outliers = app.add_subcommand(
      "outliers",
      "drop a cloud's outliers, statistically (--k, --std) or by radius (--radius, "
      "--min-neighbours); writes the kept points and prints how many were dropped");
  outliers->add_option("in", oa.in, "points (.xyz .txt .csv .ply .npy .bin .f32)")->required();
  outliers
      ->add_option("out", oa.out,
                   "the kept points, in input order: .ply (binary x y z) or a text table "
                   "(.xyz .txt .csv)")
      ->required();
  CLI::Option* o_k =
      outliers
          ->add_option("--k", oa.k,
                       "statistical rule: keep a point when its mean distance to its k nearest "
                       "others is at most the cloud's mean + --std x standard deviation (PCL's "
                       "StatisticalOutlierRemoval with setMeanK(k))")
          ->check(int_at_least(1));
  outliers->add_option("--std", oa.std_ratio, "the statistical rule's multiplier (default 2)")
      ->needs(o_k);
  CLI::Option* o_radius =
      outliers->add_option("--radius", oa.radius,
                           "radius rule: keep the points with at least --min-neighbours others "
                           "within this distance");
  CLI::Option* o_min = outliers
                           ->add_option("--min-neighbours,--min-neighbors", oa.min_neighbours,
                                        "the radius rule's least number of others")
                           ->check(CLI::NonNegativeNumber);
  o_radius->needs(o_min)->excludes(o_k);
  o_min->needs(o_radius);
  outliers->add_option("--backend", oa.backend, "auto, cuda or openmp")
      ->check(CLI::IsMember({"auto", "cuda", "openmp"}));
  outliers->add_flag("--f64", oa.f64,
                     "compute in float64 (knn_index_build_f64); else every coordinate is "
                     "rounded to float32");
  add_progress_flag(outliers, oa.progress);

#if KNN_CLI_HAVE_JSON
  knn_cli::BenchArgs ba;
  CLI::App* bench = app.add_subcommand("bench", "time the library's API; results as JSON");
  bench->add_option("suite", ba.suite, "classic, index or pip")
      ->required()
      ->check(CLI::IsMember({"classic", "index", "pip"}));
  bench->add_option("--sizes", ba.sizes, "point counts n (default 1e4 1e5 1e6, and 1e7 on a GPU)")
      ->delimiter(',');
  bench->add_option("--k", ba.k, "neighbours per query")->check(int_at_least(1));
  bench->add_option("--repeats", ba.repeats, "timed runs per measurement (median reported)")
      ->check(int_at_least(1));
  bench->add_option("--warmup", ba.warmup, "untimed runs first")->check(int_at_least(0));
  bench->add_option("--out", ba.out, "JSON file, '-' for stdout");
  bench->add_option("--polygons", ba.polygons,
                    "pip: a GeoJSON file of polygons timed beside the star polygons");
  add_progress_flag(bench, ba.progress);
#endif

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    if (knn->parsed()) return run_knn(ka);
    if (info->parsed()) return run_info(info_json);
    if (radius->parsed()) return run_radius(ra);
    if (pip->parsed()) return run_pip(pa);
    if (deviation->parsed()) return knn_cli::run_deviation(da);
    if (normals->parsed()) return knn_cli::run_normals(na);
    if (outliers->parsed()) {
      oa.by_radius = o_radius->count() > 0;
      return knn_cli::run_outliers(oa);
    }
#if KNN_CLI_HAVE_JSON
    if (bench->parsed()) return knn_cli::run_bench(ba);
#endif
  } catch (const knn_cli::LibraryError& e) {
    std::fprintf(stderr, "knn-gpgpu: %s\n", e.what());
    return e.status == KNN_ERR_UNSUPPORTED ? 2 : 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "knn-gpgpu: out of host memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "knn-gpgpu: %s\n", e.what());
    return 1;
  }
  return 1;
}
