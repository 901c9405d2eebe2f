// Freeing a handle while calls on it run (issue #51, item 3): the calls in
// flight finish normally with their full answers (checked against the
// brute-force oracles), the handle is destroyed when the last of them
// returns, and calls that begin after the free are refused as not live.
//
// A call is paused at a known point by a page of its input that the test has
// made unreadable (PausingPages): the library's first read of it, after the
// call has taken the handle and before it uses the engine, stops in a
// SIGSEGV handler. There the handle is freed from the call itself, or by the
// test's main thread while the call waits; then the page is made readable
// and the read goes on. Before the fix the call went on with a freed handle:
// a crash, or heap-use-after-free under ASan. The stress tests free while
// several threads call without pausing anything.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "index_oracle64.h"
#include "index_test_helpers.h"
#include "pip_api_calls.h"
#include "pip_oracle.h"

#if defined(__linux__)
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>
#define KNN_TEST_PAUSING_PAGES 1
#endif

namespace knn_test {
namespace {

constexpr auto kPatience = std::chrono::seconds(20);  // a call that never pauses fails, not hangs

#if defined(KNN_TEST_PAUSING_PAGES)

// Pages of memory whose first access after arm() runs an action on the
// accessing thread (inside the call that reads them), then lets the access
// go on. One armed set at a time; any other SIGSEGV keeps its default
// action (the process ends, as it would without the handler).
class PausingPages {
 public:
  explicit PausingPages(size_t bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_ = (bytes + page - 1) / page * page;
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base_ = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
  }
  ~PausingPages() {
    armed_.store(nullptr);
    if (base_) munmap(base_, size_);
  }
  PausingPages(const PausingPages&) = delete;
  PausingPages& operator=(const PausingPages&) = delete;

  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(base_);
  }

  // The next access runs on_access (once, however many threads touch the
  // pages meanwhile: the others wait for it).
  void arm(std::function<void()> on_access) {
    on_access_ = std::move(on_access);
    claimed_.store(false);
    done_.store(false);
    struct sigaction action = {};
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, nullptr);
    armed_.store(this);
    ASSERT_EQ(mprotect(base_, size_, PROT_NONE), 0);
  }
  bool fired() const { return done_.load(); }

 private:
  static void on_fault(int, siginfo_t* info, void*) {
    const int saved_errno = errno;
    PausingPages* self = armed_.load();
    const char* at = static_cast<const char*>(info->si_addr);
    if (self == nullptr || at < self->base_ || at >= self->base_ + self->size_) {
      signal(SIGSEGV, SIG_DFL);  // not ours: the access faults again and ends the process
    } else if (!self->claimed_.exchange(true)) {
      self->on_access_();
      mprotect(self->base_, self->size_, PROT_READ | PROT_WRITE);
      self->done_.store(true);
    } else {
      while (!self->done_.load()) sched_yield();
    }
    errno = saved_errno;
  }

  static std::atomic<PausingPages*> armed_;
  char* base_ = nullptr;
  size_t size_ = 0;
  std::function<void()> on_access_;
  std::atomic<bool> claimed_{false}, done_{false};
};
std::atomic<PausingPages*> PausingPages::armed_{nullptr};

#define KNN_SKIP_WITHOUT_PAUSING_PAGES() (void)0
#else
// Elsewhere the stress tests below still run.
class PausingPages {
 public:
  explicit PausingPages(size_t) {}
  template <class T>
  T* as() const {
    return nullptr;
  }
  void arm(std::function<void()>) {}
  bool fired() const { return false; }
};
#define KNN_SKIP_WITHOUT_PAUSING_PAGES() GTEST_SKIP() << "pausing a call needs mprotect (Linux)"
#endif

// Where the handle is freed while the call is paused.
enum class FreedBy { TheCallItself, AnotherThread };

// Runs `call` on a thread of its own and frees its handle (`free_handle`,
// which returns the free's status) while the call is paused at its first read
// of `gate`: from inside the call, or from this thread, which then checks
// `refused_meanwhile` (calls that begin after the free) before letting the
// call go on. Returns the call's status.
int free_during_call(PausingPages& gate, FreedBy by, const std::function<int()>& call,
                     const std::function<int()>& free_handle,
                     const std::function<void()>& refused_meanwhile) {
  std::atomic<bool> paused{false}, resume{false}, returned{false};
  std::atomic<int> free_status{-1};
  gate.arm([&] {
    if (by == FreedBy::TheCallItself) {
      free_status.store(free_handle());
      return;
    }
    paused.store(true);
    while (!resume.load()) std::this_thread::yield();
  });
  std::atomic<int> status{-1};
  std::thread caller([&] {
    status.store(call());
    returned.store(true);
  });
  if (by == FreedBy::AnotherThread) {
    const auto give_up = std::chrono::steady_clock::now() + kPatience;
    while (!paused.load() && !returned.load() && std::chrono::steady_clock::now() < give_up)
      std::this_thread::yield();
    EXPECT_TRUE(paused.load()) << "the call never read its input";
    if (paused.load()) {
      free_status.store(free_handle());
      refused_meanwhile();
    }
    resume.store(true);
  }
  caller.join();
  EXPECT_TRUE(gate.fired());
  EXPECT_EQ(free_status.load(), KNN_OK) << "free while a call is in flight";
  return status.load();
}

// ---- The index ------------------------------------------------------------------------

struct Case {
  int backend;
  FreedBy by;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(backend_name(info.param.backend)) +
         (info.param.by == FreedBy::TheCallItself ? "FreedInsideTheCall" : "FreedByAnotherThread");
}

class FreeDuringCall : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    KNN_SKIP_WITHOUT_PAUSING_PAGES();
    const IndexConfig config{GetParam().backend, KNN_STRUCTURE_KDTREE};
    KNN_SKIP_WITHOUT_BACKEND(config);
  }
};

constexpr int64_t kPoints = 4000, kQueries = 500;
constexpr int kDim = 3, kK = 6;

// A kNN query paused while its index is freed gets the oracle's answer.
TEST_P(FreeDuringCall, IndexQueryFinishesWithTheFullAnswer) {
  const std::vector<float> points = make_rows(Dist::Uniform, kPoints, kDim, 51);
  const std::vector<float> queries = make_rows(Dist::Uniform, kQueries, kDim, 52);
  const KnnResult want = oracle_knn(points.data(), kPoints, queries.data(), kQueries, kDim, kK);
  const knn_options opt = options_for({GetParam().backend, KNN_STRUCTURE_KDTREE});
  knn_index* index = nullptr;
  ASSERT_EQ(knn_index_build(points.data(), kPoints, kDim, &opt, &index), KNN_OK)
      << knn_last_error();
  PausingPages gate(queries.size() * sizeof(float));
  std::copy(queries.begin(), queries.end(), gate.as<float>());
  std::vector<int32_t> idx(kQueries * kK, -7);
  std::vector<float> dist(kQueries * kK, -7.0f);
  const int status = free_during_call(
      gate, GetParam().by,
      [&] {
        return knn_index_query(index, gate.as<float>(), kQueries, kK, idx.data(), dist.data(),
                               nullptr);
      },
      [&] { return knn_index_free(index); },
      [&] {
        int64_t n = -1;
        EXPECT_TRUE(fails_with(knn_index_info(index, &n, nullptr, nullptr, nullptr),
                               KNN_ERR_INVALID_ARGUMENT, "not a live index"));
        EXPECT_EQ(n, -1);
      });
  ASSERT_EQ(status, KNN_OK) << knn_last_error();
  KnnResult got;
  got.m = kQueries;
  got.k = kK;
  got.idx.assign(idx.begin(), idx.end());
  got.dist = dist;
  EXPECT_TRUE(same_knn(want, got));
  EXPECT_TRUE(fails_with(knn_index_free(index), KNN_ERR_INVALID_ARGUMENT, "not a live index"));
}

// The float64 family, on a radius call (rows and true counts).
TEST_P(FreeDuringCall, IndexRadiusF64FinishesWithTheFullAnswer) {
  const std::vector<float> p32 = make_rows(Dist::Clustered, kPoints, kDim, 53);
  const std::vector<float> q32 = make_rows(Dist::Clustered, kQueries, kDim, 54);
  const std::vector<double> points(p32.begin(), p32.end()), queries(q32.begin(), q32.end());
  const double radius = 0.4;
  const int width = 16;
  const Rows64 want = oracle_radius64(points, queries, kDim, radius, width);
  ASSERT_GT(*std::max_element(want.counts.begin(), want.counts.end()), width);  // rows fill up
  const knn_options opt = options_for({GetParam().backend, KNN_STRUCTURE_KDTREE});
  knn_index* index = nullptr;
  ASSERT_EQ(knn_index_build_f64(points.data(), kPoints, kDim, &opt, &index), KNN_OK)
      << knn_last_error();
  PausingPages gate(queries.size() * sizeof(double));
  std::copy(queries.begin(), queries.end(), gate.as<double>());
  Rows64 got;
  got.m = kQueries;
  got.width = width;
  got.idx.assign(kQueries * width, -7);
  got.dist.assign(kQueries * width, -7.0);
  got.counts.assign(kQueries, -7);
  const int status = free_during_call(
      gate, GetParam().by,
      [&] {
        return knn_index_radius_f64(index, gate.as<double>(), kQueries, radius, width,
                                    got.idx.data(), got.dist.data(), got.counts.data(), nullptr);
      },
      [&] { return knn_index_free(index); },
      [&] {
        std::vector<int32_t> idx(kK, -7);
        EXPECT_TRUE(fails_with(
            knn_index_query_f64(index, queries.data(), 1, kK, idx.data(), nullptr, nullptr),
            KNN_ERR_INVALID_ARGUMENT, "not a live index"));
        EXPECT_EQ(idx[0], -7);
      });
  ASSERT_EQ(status, KNN_OK) << knn_last_error();
  EXPECT_TRUE(same_rows64(want, got));
  EXPECT_TRUE(fails_with(knn_index_free(index), KNN_ERR_INVALID_ARGUMENT, "not a live index"));
}

// ---- The quadtree ---------------------------------------------------------------------

PolygonArraysd test_polygons() {
  std::mt19937_64 rng(55);
  PolygonArrays set;
  set.add_polygon(rectangle(0.1f, 0.1f, 0.6f, 0.5f));
  for (int i = 0; i < 6; ++i)
    set.add_polygon(star(rng, 0.2f + 0.12f * i, 0.6f, 0.05f, 0.2f, 40 + i, i % 2 == 0));
  return set.as<double>();
}

// Count, then fill (double vertices), each paused while the tree is freed.
TEST_P(FreeDuringCall, PointsInPolygonsFinishWithTheFullAnswer) {
  std::mt19937_64 rng(56);
  const std::vector<float> xy = uniform_points(rng, 20000, 0.0f, 1.0f);
  const PolygonArraysd set = test_polygons();
  const std::vector<std::vector<int64_t>> want = oracle_points_in_polygons(xy, set);
  const int64_t polygons = set.n_polygons();
  std::vector<int64_t> want_offsets(1, 0), want_indices;
  for (const std::vector<int64_t>& inside : want) {
    want_offsets.push_back(want_offsets.back() + static_cast<int64_t>(inside.size()));
    want_indices.insert(want_indices.end(), inside.begin(), inside.end());
  }
  ASSERT_GT(want_indices.size(), 1000u);
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = GetParam().backend;
  for (const bool fill : {false, true}) {
    SCOPED_TRACE(fill ? "knn_points_in_polygons_f64" : "knn_points_in_polygons_count_f64");
    knn_quadtree* tree = nullptr;
    ASSERT_EQ(knn_quadtree_build(xy.data(), static_cast<int64_t>(xy.size() / 2), &opt, &tree),
              KNN_OK)
        << knn_last_error();
    PausingPages gate(set.xy.size() * sizeof(double));
    std::copy(set.xy.begin(), set.xy.end(), gate.as<double>());
    std::vector<int64_t> counts(static_cast<size_t>(polygons), -7);
    std::vector<int64_t> indices(want_indices.size(), -7);
    const int status = free_during_call(
        gate, GetParam().by,
        [&] {
          return fill ? knn_points_in_polygons_f64(tree, gate.as<double>(), set.ring_offsets.data(),
                                                   set.n_rings(), set.polygon_offsets.data(),
                                                   polygons, want_offsets.data(), indices.data(),
                                                   nullptr)
                      : knn_points_in_polygons_count_f64(
                            tree, gate.as<double>(), set.ring_offsets.data(), set.n_rings(),
                            set.polygon_offsets.data(), polygons, counts.data(), nullptr);
        },
        [&] { return knn_quadtree_free(tree); },
        [&] {
          std::vector<int64_t> refused(static_cast<size_t>(polygons), -7);
          EXPECT_TRUE(fails_with(knn_points_in_polygons_count_f64(
                                     tree, set.xy.data(), set.ring_offsets.data(), set.n_rings(),
                                     set.polygon_offsets.data(), polygons, refused.data(), nullptr),
                                 KNN_ERR_INVALID_ARGUMENT, "not a live quadtree"));
          EXPECT_EQ(refused[0], -7);
        });
    ASSERT_EQ(status, KNN_OK) << knn_last_error();
    if (fill) {
      EXPECT_EQ(indices, want_indices);
    } else {
      for (int64_t p = 0; p < polygons; ++p)
        EXPECT_EQ(counts[static_cast<size_t>(p)], want_offsets[p + 1] - want_offsets[p]) << p;
    }
    EXPECT_TRUE(
        fails_with(knn_quadtree_free(tree), KNN_ERR_INVALID_ARGUMENT, "not a live quadtree"));
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, FreeDuringCall,
                         ::testing::Values(Case{KNN_BACKEND_OPENMP, FreedBy::TheCallItself},
                                           Case{KNN_BACKEND_OPENMP, FreedBy::AnotherThread},
                                           Case{KNN_BACKEND_CUDA, FreedBy::TheCallItself},
                                           Case{KNN_BACKEND_CUDA, FreedBy::AnotherThread}),
                         case_name);

// ---- Stress: several threads call while one frees ---------------------------------------

constexpr int kCallers = 4, kRounds = 12;

// Rounds of: kCallers threads call `call` (true: answered and checked;
// false: refused as not live, and then they stop) on a fresh handle from
// `make`, while this thread frees it once every caller has been answered.
template <class Handle>
void stress(const std::function<Handle*()>& make, const std::function<bool(Handle*)>& call,
            const std::function<int(Handle*)>& free_handle) {
  for (int round = 0; round < kRounds; ++round) {
    Handle* handle = make();
    ASSERT_NE(handle, nullptr);
    std::atomic<int> answered{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < kCallers; ++t)
      callers.emplace_back([&] {
        bool counted = false;
        while (call(handle))
          if (!counted) counted = true, answered.fetch_add(1);
        if (!counted) answered.fetch_add(1);  // refused before its first answer
      });
    const auto give_up = std::chrono::steady_clock::now() + kPatience;
    while (answered.load() < kCallers && std::chrono::steady_clock::now() < give_up)
      std::this_thread::yield();
    EXPECT_EQ(free_handle(handle), KNN_OK);
    for (std::thread& t : callers) t.join();
  }
}

TEST(FreeDuringCallStress, IndexQueries) {
  const int64_t n = 3000, m = 64;
  const int dim = 4, k = 5;
  const std::vector<float> points = make_rows(Dist::Uniform, n, dim, 57);
  const std::vector<float> queries = make_rows(Dist::Uniform, m, dim, 58);
  const KnnResult want = oracle_knn(points.data(), n, queries.data(), m, dim, k);
  const knn_options opt = options_for({KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE}, 1);
  stress<knn_index>(
      [&] {
        knn_index* index = nullptr;
        EXPECT_EQ(knn_index_build(points.data(), n, dim, &opt, &index), KNN_OK);
        return index;
      },
      [&](knn_index* index) {
        KnnResult got;
        got.m = m;
        got.k = k;
        got.idx.assign(static_cast<size_t>(m * k), -7);
        got.dist.assign(static_cast<size_t>(m * k), -7.0f);
        const int status =
            knn_index_query(index, queries.data(), m, k, reinterpret_cast<int32_t*>(got.idx.data()),
                            got.dist.data(), &opt);
        if (status != KNN_OK) {
          EXPECT_TRUE(fails_with(status, KNN_ERR_INVALID_ARGUMENT, "not a live index"));
          EXPECT_EQ(got.idx[0], -7);
          return false;
        }
        EXPECT_TRUE(same_knn(want, got));
        return true;
      },
      [](knn_index* index) { return knn_index_free(index); });
}

TEST(FreeDuringCallStress, PointsInPolygonsCounts) {
  std::mt19937_64 rng(59);
  const std::vector<float> xy = uniform_points(rng, 8000, 0.0f, 1.0f);
  const PolygonArrays set = test_polygons().as<float>();
  const std::vector<std::vector<int64_t>> want = oracle_points_in_polygons(xy, set);
  const knn_options opt = openmp_options(0, 1);
  stress<knn_quadtree>(
      [&] {
        knn_quadtree* tree = nullptr;
        EXPECT_EQ(knn_quadtree_build(xy.data(), static_cast<int64_t>(xy.size() / 2), &opt, &tree),
                  KNN_OK);
        return tree;
      },
      [&](knn_quadtree* tree) {
        std::vector<int64_t> counts(want.size(), -7);
        const int status = knn_points_in_polygons_count(
            tree, set.xy.data(), set.ring_offsets.data(), set.n_rings(), set.polygon_offsets.data(),
            set.n_polygons(), counts.data(), &opt);
        if (status != KNN_OK) {
          EXPECT_TRUE(fails_with(status, KNN_ERR_INVALID_ARGUMENT, "not a live quadtree"));
          EXPECT_EQ(counts[0], -7);
          return false;
        }
        for (size_t p = 0; p < want.size(); ++p)
          EXPECT_EQ(counts[p], static_cast<int64_t>(want[p].size())) << p;
        return true;
      },
      [](knn_quadtree* tree) { return knn_quadtree_free(tree); });
}

}  // namespace
}  // namespace knn_test
