// Run by test_reliability (Threads.ManyOpenMPThreadsUnderAMemoryLimit) as a
// process of its own, with OMP_NUM_THREADS far beyond the machine, a large
// OMP_STACKSIZE and at most two processors: limits its address space to
// what it maps at start plus argv[1] MiB, then builds an index
// (opt.threads = 4) and a classic tree (mpBuildKdTree) of 10^5 points and
// checks their nearest neighbours against the brute-force oracle.
// Exit 0: every call returned KNN_OK with the oracle's answer, or
// KNN_ERR_HOST_OUT_OF_MEMORY; 2: a call failed otherwise or answered wrong.
// libgomp ending the process shows as exit 1 or a signal.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "knn_gpgpu.h"
#include "oracle.h"
#include "test_data.h"

namespace {

using knn_test::Dist;

constexpr int64_t kPoints = 100000;
constexpr int kQueries = 64, kK = 4, kDim = 3;

// Bytes of address space the process maps now (/proc/self/statm).
rlim_t mapped_bytes() {
  unsigned long long pages = 0;
  FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr || std::fscanf(statm, "%llu", &pages) != 1) std::exit(3);
  std::fclose(statm);
  return static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE));
}

// KNN_OK with `same` true, or a clean host out-of-memory status.
bool acceptable(const char* call, int status, bool same) {
  if (status == KNN_ERR_HOST_OUT_OF_MEMORY) {
    std::fprintf(stderr, "%s: %s (accepted)\n", call, knn_last_error());
    return true;
  }
  if (status != KNN_OK) {
    std::fprintf(stderr, "%s: %s: %s\n", call, knn_status_string(status), knn_last_error());
    return false;
  }
  if (!same) std::fprintf(stderr, "%s: answers differ from the oracle's\n", call);
  return same;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 3;
  const std::vector<float> rows = knn_test::make_rows(Dist::Uniform, kPoints, kDim, 41);
  const std::vector<float> queries = knn_test::make_query_rows(Dist::Uniform, kQueries, kDim, 42);
  const knn_test::KnnResult want =
      knn_test::oracle_knn(rows.data(), kPoints, queries.data(), kQueries, kDim, kK);
  const rlim_t limit = mapped_bytes() + (static_cast<rlim_t>(std::atoll(argv[1])) << 20);
  const rlimit address_space{limit, limit};
  if (setrlimit(RLIMIT_AS, &address_space) != 0) return 3;

  bool ok = true;
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  opt.structure = KNN_STRUCTURE_KDTREE;
  opt.threads = 4;
  knn_index* index = nullptr;
  int status = knn_index_build(rows.data(), kPoints, kDim, &opt, &index);
  if (status == KNN_OK) {
    std::vector<int32_t> idx(static_cast<size_t>(kQueries) * kK, -7);
    status = knn_index_query(index, queries.data(), kQueries, kK, idx.data(), nullptr, &opt);
    const std::vector<int> got(idx.begin(), idx.end());
    ok &= acceptable("knn_index_query", status, knn_test::same_rows(want.idx, got, kQueries, kK));
    knn_index_free(index);
  } else {
    ok &= acceptable("knn_index_build", status, false);
  }

  const std::vector<Point> points = knn_test::to_points(rows);
  const std::vector<Point> query_points = knn_test::to_points(queries);
  std::vector<Node> tree(points.size());
  status = mpBuildKdTree(points.data(), static_cast<int>(kPoints), tree.data());
  if (status == KNN_OK) {
    std::vector<int> idx(static_cast<size_t>(kQueries) * kK, -7);
    status = mpQueryAll(query_points.data(), tree.data(), kQueries, static_cast<int>(kPoints), kK,
                        idx.data());
    ok &= acceptable("mpQueryAll", status, knn_test::same_rows(want.idx, idx, kQueries, kK));
  } else {
    ok &= acceptable("mpBuildKdTree", status, false);
  }
  return ok ? 0 : 2;
}
