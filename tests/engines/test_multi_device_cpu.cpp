// Several devices per call, on the CPU: the device list of the options and of
// KNN_DEVICES (parsing, precedence, refusals with their messages), the cut
// into contiguous shares, the threads that run them, and the split of index
// calls over copies, run over OpenMP engines standing in for devices (a
// stand-in device switch), compared bit for bit with the whole call on one
// engine; and the same for the closest points of a mesh (its copies in
// DeviceCopies, its split by split_points) over OpenMP mesh engines; and,
// for both, arrays of other stand-in devices staged in pieces through
// stand-in device memory (tests/support/fake_devices.h). The CUDA side of
// the same code: tests/gpu/test_multi_gpu.cpp,
// tests/gpu/test_mesh_multi_gpu.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "../../common/error.h"
#include "../../engine/cancel.h"
#include "../../engine/index_engine.h"
#include "../../engine/mesh_engine.h"
#include "../../engine/progress.h"
#include "../../src/device_choice.h"
#include "../../src/device_replicas.h"
#include "../../src/mesh_handle.h"
#include "fake_devices.h"
#include "index_test_helpers.h"
#include "mesh_test_cases.h"
#include "scoped_env.h"
#include "test_data.h"

namespace {

using knn::DeviceChoice;
using knn::Error;

// Runs f and returns the status and message of the knn::Error it throws
// (KNN_OK and "" when it returns).
template <class F>
std::pair<int, std::string> error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.status(), e.what()};
  }
  return {KNN_OK, ""};
}

::testing::AssertionResult refused(std::pair<int, std::string> got, int status,
                                   const std::string& message) {
  if (got.first != status)
    return ::testing::AssertionFailure()
           << "status " << got.first << " (" << got.second << "), want " << status;
  if (got.second.find(message) == std::string::npos)
    return ::testing::AssertionFailure()
           << "message \"" << got.second << "\" lacks \"" << message << "\"";
  return ::testing::AssertionSuccess();
}

using knn_test::ScopedEnv;

knn_options v2_options() {
  knn_options o;
  knn_options_init_v2(&o);
  return o;
}

// ---- KNN_DEVICES --------------------------------------------------------------

TEST(DeviceList, ParsesListsAndAll) {
  EXPECT_EQ(knn::parse_device_list("0,1", 2), (std::vector<int>{0, 1}));
  EXPECT_EQ(knn::parse_device_list("0,0", 1), (std::vector<int>{0, 0}));
  EXPECT_EQ(knn::parse_device_list(" 1 , 0 ", 2), (std::vector<int>{1, 0}));
  EXPECT_EQ(knn::parse_device_list("2", 3), (std::vector<int>{2}));
  EXPECT_EQ(knn::parse_device_list("all", 3), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(knn::parse_device_list(" all ", 1), (std::vector<int>{0}));
  std::string sixteen = "0";
  for (int i = 1; i < KNN_MAX_DEVICES; ++i) sixteen += ",0";
  EXPECT_EQ(knn::parse_device_list(sixteen.c_str(), 1).size(), size_t{KNN_MAX_DEVICES});
}

TEST(DeviceList, RefusesGarbageNamingTheFault) {
  auto parse = [](const char* text, int present) {
    return error_of([&] { knn::parse_device_list(text, present); });
  };
  EXPECT_TRUE(
      refused(parse("", 2), KNN_ERR_INVALID_ARGUMENT, "KNN_DEVICES is \"\": entry 1 is empty"));
  EXPECT_TRUE(refused(parse("0,", 2), KNN_ERR_INVALID_ARGUMENT, "entry 2 is empty"));
  EXPECT_TRUE(refused(parse(",1", 2), KNN_ERR_INVALID_ARGUMENT, "entry 1 is empty"));
  EXPECT_TRUE(refused(parse("gpu0", 2), KNN_ERR_INVALID_ARGUMENT,
                      "KNN_DEVICES is \"gpu0\": entry 1 (\"gpu0\") is not a device number"));
  EXPECT_TRUE(refused(parse("-1", 2), KNN_ERR_INVALID_ARGUMENT, "(\"-1\") is not a device number"));
  EXPECT_TRUE(
      refused(parse("0;1", 2), KNN_ERR_INVALID_ARGUMENT, "(\"0;1\") is not a device number"));
  EXPECT_TRUE(
      refused(parse("0 1", 2), KNN_ERR_INVALID_ARGUMENT, "(\"0 1\") is not a device number"));
  EXPECT_TRUE(refused(parse("99999999999", 2), KNN_ERR_INVALID_ARGUMENT, "is not a device number"));
  EXPECT_TRUE(refused(parse("ALL", 2), KNN_ERR_INVALID_ARGUMENT, "is not a device number"));
  EXPECT_TRUE(refused(
      parse("0,2", 2), KNN_ERR_INVALID_ARGUMENT,
      "KNN_DEVICES is \"0,2\": entry 2 is device 2; this machine has 2 CUDA devices (0..1)"));
  EXPECT_TRUE(
      refused(parse("1", 1), KNN_ERR_INVALID_ARGUMENT,
              "KNN_DEVICES is \"1\": entry 1 is device 1; this machine has 1 CUDA device (0..0)"));
  EXPECT_TRUE(refused(parse("0", 0), KNN_ERR_NO_DEVICE,
                      "KNN_DEVICES is \"0\"; no usable CUDA device is present"));
  EXPECT_TRUE(refused(parse("all", 0), KNN_ERR_NO_DEVICE, "no usable CUDA device"));
  std::string seventeen = "0";
  for (int i = 1; i <= KNN_MAX_DEVICES; ++i) seventeen += ",0";
  EXPECT_TRUE(refused(parse(seventeen.c_str(), 1), KNN_ERR_INVALID_ARGUMENT,
                      "lists more than KNN_MAX_DEVICES (16) devices"));
}

// ---- The rules of the header, in order ------------------------------------------

TEST(DeviceChoice, PinnedThenListThenEnvironmentThenAll) {
  knn_options o = v2_options();
  o.device_count = 3;
  o.devices[0] = 1, o.devices[1] = 0, o.devices[2] = 1;
  const ScopedEnv env("KNN_DEVICES", "0");
  DeviceChoice c = knn::choose_devices(1, o, 2, 0);  // rule 1
  EXPECT_EQ(c.devices, (std::vector<int>{1}));
  EXPECT_TRUE(c.forced);
  c = knn::choose_devices(-1, o, 2, 0);  // rule 2
  EXPECT_EQ(c.devices, (std::vector<int>{1, 0, 1}));
  EXPECT_TRUE(c.forced);
  o.device_count = 0;
  c = knn::choose_devices(-1, o, 2, 0);  // rule 3
  EXPECT_EQ(c.devices, (std::vector<int>{0}));
  EXPECT_TRUE(c.forced);
  {
    const ScopedEnv empty("KNN_DEVICES", "");
    c = knn::choose_devices(-1, o, 3, 1);  // rule 4: the call's own device first
    EXPECT_EQ(c.devices, (std::vector<int>{1, 0, 2}));
    EXPECT_FALSE(c.forced);
    EXPECT_TRUE(knn::choose_devices(-1, o, 0, -1).devices.empty());
  }
  o.device_count = 1;
  o.devices[0] = 2;
  EXPECT_TRUE(refused(error_of([&] { knn::choose_devices(-1, o, 2, 0); }), KNN_ERR_INVALID_ARGUMENT,
                      "opt->devices[0] is 2; this machine has 2 CUDA devices (0..1)"));
  const ScopedEnv garbage("KNN_DEVICES", "zero");
  o.device_count = 0;
  EXPECT_TRUE(refused(error_of([&] { knn::choose_devices(-1, o, 2, 0); }), KNN_ERR_INVALID_ARGUMENT,
                      "KNN_DEVICES is \"zero\""));
}

TEST(DeviceChoice, DefaultListGrowsWithTheWorkAndForcedListsNeverGetEmptyShares) {
  DeviceChoice all{{0, 1, 2, 3}, false};
  const int64_t per = KNN_MIN_QUERIES_PER_DEVICE;
  EXPECT_TRUE(knn::devices_for(all, 0).empty());
  EXPECT_EQ(knn::devices_for(all, 1), (std::vector<int>{0}));
  EXPECT_EQ(knn::devices_for(all, 2 * per - 1), (std::vector<int>{0}));
  EXPECT_EQ(knn::devices_for(all, 2 * per), (std::vector<int>{0, 1}));
  EXPECT_EQ(knn::devices_for(all, 100 * per), (std::vector<int>{0, 1, 2, 3}));
  DeviceChoice forced{{0, 0, 1}, true};
  EXPECT_EQ(knn::devices_for(forced, 1), (std::vector<int>{0}));
  EXPECT_EQ(knn::devices_for(forced, 2), (std::vector<int>{0, 0}));
  EXPECT_EQ(knn::devices_for(forced, 3), (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(knn::devices_for(forced, 1000), (std::vector<int>{0, 0, 1}));
}

TEST(DeviceChoice, SharesAreContiguousBalancedAndOverflowFree) {
  for (int64_t m : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1000003}, int64_t{1} << 62}) {
    for (int shares = 1; shares <= KNN_MAX_DEVICES; ++shares) {
      EXPECT_EQ(knn::share_begin(m, shares, 0), 0);
      EXPECT_EQ(knn::share_begin(m, shares, shares), m);
      for (int s = 0; s < shares; ++s) {
        const int64_t size = knn::share_begin(m, shares, s + 1) - knn::share_begin(m, shares, s);
        EXPECT_GE(size, m / shares) << m << " " << shares << " " << s;
        EXPECT_LE(size, m / shares + 1) << m << " " << shares << " " << s;
      }
    }
  }
}

// ---- The share threads ----------------------------------------------------------

TEST(RunShares, EachShareOnItsOwnThreadAndDeviceWithTheCallersFlagAndProgress) {
  volatile int flag = 0;
  knn::set_cancel_flag(&flag);
  knn_progress record{};
  knn::set_progress(&record);
  knn_test::fake_current = 5;
  const std::vector<int> devices{0, 1, 0};
  std::mutex mutex;
  std::set<std::thread::id> threads;
  std::vector<int> seen(devices.size(), -1);
  knn::run_shares(devices, knn_test::fake_ops().select, [&](int s, int device) {
    std::lock_guard<std::mutex> lock(mutex);
    threads.insert(std::this_thread::get_id());
    EXPECT_EQ(device, devices[s]);
    seen[s] = knn_test::fake_current;
    EXPECT_EQ(knn::cancel_flag(), &flag);
    EXPECT_EQ(knn::progress(), &record);
  });
  EXPECT_EQ(seen, devices);
  EXPECT_EQ(threads.size(), devices.size());
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
  EXPECT_EQ(knn_test::fake_current, 5);  // the caller's device untouched
  knn::set_cancel_flag(nullptr);
  knn::set_progress(nullptr);
}

TEST(RunShares, AFailureOtherThanCancellationWinsAndEveryShareFinishes) {
  std::atomic<int> finished{0};
  auto result = error_of([&] {
    knn::run_shares({0, 1, 2, 3}, knn_test::fake_ops().select, [&](int s, int) {
      ++finished;
      if (s == 0) knn::throw_cancelled();
      if (s == 2) knn::fail(KNN_ERR_DEVICE, "share 2 failed");
      if (s == 3) knn::fail(KNN_ERR_DEVICE_OUT_OF_MEMORY, "share 3 failed");
    });
  });
  EXPECT_EQ(finished.load(), 4);
  EXPECT_TRUE(refused(result, KNN_ERR_DEVICE, "share 2 failed"));
  result = error_of([&] {
    knn::run_shares({0, 1}, knn_test::fake_ops().select, [&](int s, int) {
      if (s == 1) knn::throw_cancelled();
    });
  });
  EXPECT_EQ(result.first, KNN_ERR_CANCELLED);
}

// ---- Index calls split over copies (OpenMP engines standing in) -----------------

// One OpenMP thread per engine call: the shares already run side by side, and
// the answer is the same for any thread count.
knn::CallParams one_thread() {
  knn::CallParams call;
  call.threads = 1;
  return call;
}

// The OpenMP builds of one structure, in the precision of the test.
template <typename Scalar>
using EngineOf = std::unique_ptr<knn::BasicIndexEngine<Scalar>>;

template <typename Scalar>
struct BasicStructure {
  const char* name;
  EngineOf<Scalar> (*build)(const Scalar*, int64_t, int, const knn::IndexParams&);
  int dim;
};

template <typename Scalar>
EngineOf<Scalar> build_grid(const Scalar* p, int64_t n, int, const knn::IndexParams& params) {
  return knn::omp::build_grid_index(p, n, params);
}
template <typename Scalar>
EngineOf<Scalar> build_kdtree(const Scalar* p, int64_t n, int dim, const knn::IndexParams& params) {
  return knn::omp::build_kdtree_index(p, n, dim, params);
}
template <typename Scalar>
EngineOf<Scalar> build_brute(const Scalar* p, int64_t n, int dim, const knn::IndexParams& params) {
  return knn::omp::build_brute_force_index(p, n, dim, params);
}

template <typename Scalar>
const BasicStructure<Scalar> kStructures[] = {{"kdtree", build_kdtree<Scalar>, 3},
                                              {"kdtree5", build_kdtree<Scalar>, 5},
                                              {"brute", build_brute<Scalar>, 2},
                                              {"grid", build_grid<Scalar>, 3}};

// Rows of the test's precision from the float generators; the float64 rows
// are scaled by 1 + 2^-40, so that they need a double's mantissa (while
// duplicates stay duplicates).
template <typename Scalar>
std::vector<Scalar> in_precision(const std::vector<float>& rows) {
  if constexpr (std::is_same_v<Scalar, float>) {
    return rows;
  } else {
    std::vector<double> wide(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) wide[i] = rows[i] * (1.0 + 0x1p-40);
    return wide;
  }
}

// One data set and the split calls on it against the whole calls on the home engine.
template <typename Scalar>
struct SplitCase {
  const BasicStructure<Scalar>& structure;
  std::vector<Scalar> points;
  int64_t n;
  EngineOf<Scalar> home;
  knn::BasicDeviceReplicas<Scalar> replicas{knn_test::fake_ops()};
  std::map<int, int> builds_on;  // stand-in device -> copies built there

  SplitCase(const BasicStructure<Scalar>& s, std::vector<Scalar> rows)
      : structure(s), points(std::move(rows)), n(static_cast<int64_t>(points.size()) / s.dim) {
    home = s.build(points.data(), n, s.dim, knn::IndexParams{});
    if (!home) home = build_kdtree(points.data(), n, s.dim, knn::IndexParams{});  // grid declined
  }

  std::vector<int> prepare(const std::vector<int>& devices) {
    std::mutex mutex;
    return replicas.prepare(devices, true, *home, 0, [&](const Scalar* host_points) {
      std::lock_guard<std::mutex> lock(mutex);
      ++builds_on[knn_test::fake_current];
      EXPECT_EQ(std::vector<Scalar>(host_points, host_points + points.size()), points);
      EngineOf<Scalar> copy = structure.build(host_points, n, structure.dim, knn::IndexParams{});
      return copy ? std::move(copy)
                  : build_kdtree(host_points, n, structure.dim, knn::IndexParams{});
    });
  }

  void split(const std::vector<int>& devices, knn::BasicSplitCall<Scalar> call,
             const knn::BasicShareWork<Scalar>& work) {
    knn::split_over_devices(devices, replicas, *home, 0, call, work);
  }
};

template <typename Scalar>
const knn::BasicShareWork<Scalar> kKnn =
    [](const knn::BasicIndexEngine<Scalar>& e, const Scalar* q, int64_t count, int width,
       int32_t* i, Scalar* d, int32_t*,
       const knn::CallParams& call) { e.knn(q, count, width, i, d, call); };

// The listed devices as a call of m queries (and an all-kNN of n rows) uses them.
template <typename Scalar>
void expect_split_equals_whole(SplitCase<Scalar>& c, const std::vector<int>& listed,
                               const std::vector<Scalar>& queries, int k) {
  const int dim = c.structure.dim;
  const int64_t m = static_cast<int64_t>(queries.size()) / dim;
  const size_t slots = static_cast<size_t>(m) * k;
  const std::vector<int> devices = knn::devices_for(DeviceChoice{listed, true}, m);
  const std::vector<int> self_devices = knn::devices_for(DeviceChoice{listed, true}, c.n);
  ASSERT_EQ(c.prepare(devices), devices);
  ASSERT_EQ(c.prepare(self_devices), self_devices);
  SCOPED_TRACE(std::string(c.structure.name) + (sizeof(Scalar) == 8 ? " float64" : " float32") +
               " n=" + std::to_string(c.n) + " m=" + std::to_string(m) + " k=" + std::to_string(k) +
               " shares=" + std::to_string(devices.size()));
  // kNN of queries.
  std::vector<int32_t> want_i(slots), got_i(slots, -7);
  std::vector<Scalar> want_d(slots), got_d(slots, Scalar{-7});
  c.home->knn(queries.data(), m, k, want_i.data(), want_d.data(), one_thread());
  knn::BasicSplitCall<Scalar> call;
  call.queries = queries.data(), call.m = m, call.dim = dim, call.row_width = k;
  call.indices = got_i.data(), call.sq_distances = got_d.data();
  call.call = one_thread();
  c.split(devices, call, kKnn<Scalar>);
  EXPECT_TRUE(knn_test::same_rows(want_i, got_i, m, k));
  EXPECT_TRUE(knn_test::same_bits(want_d, got_d));

  // All-kNN, with and without the point itself (distances optional).
  for (bool exclude : {false, true}) {
    const size_t self_slots = static_cast<size_t>(c.n) * k;
    std::vector<int32_t> self_i(self_slots), split_i(self_slots, -7);
    std::vector<Scalar> self_d(self_slots), split_d(self_slots, Scalar{-7});
    c.home->knn_self(k, exclude, self_i.data(), self_d.data(), one_thread());
    knn::BasicSplitCall<Scalar> all;
    all.queries = c.replicas.host_points(*c.home), all.m = c.n, all.dim = dim;
    all.row_width = k, all.exclude_self = exclude;
    all.indices = split_i.data(), all.sq_distances = split_d.data();
    all.call = one_thread();
    c.split(self_devices, all, kKnn<Scalar>);
    EXPECT_TRUE(knn_test::same_rows(self_i, split_i, c.n, k)) << "exclude " << exclude;
    EXPECT_TRUE(knn_test::same_bits(self_d, split_d)) << "exclude " << exclude;
    std::vector<int32_t> only_i(self_slots, -7);
    all.sq_distances = nullptr, all.indices = only_i.data();
    c.split(self_devices, all, kKnn<Scalar>);
    EXPECT_TRUE(knn_test::same_rows(self_i, only_i, c.n, k)) << "exclude " << exclude;
  }

  // Radius rows and counts, and counting alone.
  const Scalar radius = Scalar{3} / 10;
  const int width = std::max(1, k / 2);
  std::vector<int32_t> ri(static_cast<size_t>(m) * width), rc(static_cast<size_t>(m));
  std::vector<Scalar> rd(ri.size());
  c.home->radius(queries.data(), m, radius, width, ri.data(), rd.data(), rc.data(), one_thread());
  std::vector<int32_t> si(ri.size(), -7), sc(rc.size(), -7), counted(rc.size(), -7);
  std::vector<Scalar> sd(rd.size(), Scalar{-7});
  const knn::BasicShareWork<Scalar> rows = [&](const knn::BasicIndexEngine<Scalar>& e,
                                               const Scalar* q, int64_t count, int w, int32_t* i,
                                               Scalar* d, int32_t* n, const knn::CallParams& p) {
    e.radius(q, count, radius, w, i, d, n, p);
  };
  knn::BasicSplitCall<Scalar> r;
  r.queries = queries.data(), r.m = m, r.dim = dim, r.row_width = width;
  r.indices = si.data(), r.sq_distances = sd.data(), r.counts = sc.data();
  r.call = one_thread();
  c.split(devices, r, rows);
  EXPECT_EQ(sc, rc);
  EXPECT_TRUE(knn_test::same_rows(ri, si, m, width));
  EXPECT_TRUE(knn_test::same_bits(rd, sd));
  r.row_width = 0, r.indices = nullptr, r.sq_distances = nullptr, r.counts = counted.data();
  c.split(devices, r, rows);
  EXPECT_EQ(counted, rc);
}

template <typename Scalar>
void expect_splits_equal_whole_calls() {
  const std::vector<std::vector<int>> device_lists{{0, 0}, {1, 0, 2}, {0, 1, 1, 2, 0}};
  for (const BasicStructure<Scalar>& s : kStructures<Scalar>) {
    for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{301}}) {
      for (knn_test::Dist dist : {knn_test::Dist::Uniform, knn_test::Dist::Duplicates}) {
        SplitCase<Scalar> c(s, in_precision<Scalar>(knn_test::make_rows(dist, n, s.dim, 11 + n)));
        for (const std::vector<int>& listed : device_lists) {
          for (int64_t m : {int64_t{1}, int64_t{257}}) {
            const std::vector<Scalar> queries =
                in_precision<Scalar>(knn_test::make_query_rows(dist, m, s.dim, 5 + m));
            for (int k : {1, static_cast<int>(n) + 3})
              expect_split_equals_whole(c, listed, queries, k);
          }
        }
        // One copy per stand-in device other than the home one (0), however
        // often it was listed or asked for.
        for (const auto& built : c.builds_on) {
          EXPECT_NE(built.first, 0);
          EXPECT_EQ(built.second, 1) << "device " << built.first;
        }
      }
    }
  }
}

TEST(SplitOverDevices, BitIdenticalToTheWholeCallOnAwkwardData) {
  expect_splits_equal_whole_calls<float>();
}

// The _f64 calls take the same split (one template): the float64 engines'
// rows, bit for bit, on data that needs a double's mantissa.
TEST(SplitOverDevices, Float64BitIdenticalToTheWholeCallOnAwkwardData) {
  expect_splits_equal_whole_calls<double>();
}

TEST(SplitOverDevices, ACopyThatDoesNotFitDropsItsDeviceUnlessTheListWasForced) {
  SplitCase<float> c(kStructures<float>[0],
                     knn_test::make_rows(knn_test::Dist::Uniform, 100, 3, 3));
  auto build = [&](const float* p) -> std::unique_ptr<knn::IndexEngine> {
    if (knn_test::fake_current == 2) knn::fail(KNN_ERR_DEVICE_OUT_OF_MEMORY, "device 2 is full");
    return build_kdtree(p, c.n, 3, knn::IndexParams{});
  };
  EXPECT_EQ(c.replicas.prepare({0, 2, 1}, false, *c.home, 0, build), (std::vector<int>{0, 1}));
  EXPECT_TRUE(refused(error_of([&] {
                        c.replicas.prepare({0, 2}, true, *c.home, 0, build);
                      }),
                      KNN_ERR_DEVICE_OUT_OF_MEMORY, "device 2 is full"));
  // A copy made beside the failed one (device 3) is kept, not made again.
  std::atomic<int> built_on_three{0};
  auto counting = [&](const float* p) -> std::unique_ptr<knn::IndexEngine> {
    if (knn_test::fake_current == 3) ++built_on_three;
    return build(p);
  };
  EXPECT_TRUE(refused(error_of([&] {
                        c.replicas.prepare({0, 3, 2}, true, *c.home, 0, counting);
                      }),
                      KNN_ERR_DEVICE_OUT_OF_MEMORY, "device 2 is full"));
  EXPECT_EQ(built_on_three.load(), 1);
  EXPECT_EQ(c.replicas.prepare({0, 3}, true, *c.home, 0, counting), (std::vector<int>{0, 3}));
  EXPECT_EQ(built_on_three.load(), 1);
  // Another failure fails the call, listed or not.
  auto broken = [&](const float*) -> std::unique_ptr<knn::IndexEngine> {
    knn::fail(KNN_ERR_DEVICE, "device 4 fell off the bus");
  };
  EXPECT_TRUE(refused(error_of([&] {
                        c.replicas.prepare({0, 4}, false, *c.home, 0, broken);
                      }),
                      KNN_ERR_DEVICE, "device 4 fell off the bus"));
}

TEST(SplitOverDevices, AShareThatFailsFailsTheCallAfterTheOthersFinish) {
  SplitCase<float> c(kStructures<float>[0],
                     knn_test::make_rows(knn_test::Dist::Uniform, 100, 3, 3));
  ASSERT_EQ(c.prepare({0, 1}), (std::vector<int>{0, 1}));
  const std::vector<float> queries = knn_test::make_query_rows(knn_test::Dist::Uniform, 50, 3, 9);
  std::vector<int32_t> idx(50 * 4, -7);
  knn::SplitCall call;
  call.queries = queries.data(), call.m = 50, call.dim = 3, call.row_width = 4;
  call.indices = idx.data();
  std::atomic<int> ran{0};
  const knn::ShareWork failing = [&](const knn::IndexEngine& e, const float* q, int64_t count,
                                     int width, int32_t* i, float* d, int32_t* n,
                                     const knn::CallParams& p) {
    ++ran;
    if (knn_test::fake_current == 1) knn::fail(KNN_ERR_DEVICE, "the second device failed");
    kKnn<float>(e, q, count, width, i, d, n, p);
  };
  EXPECT_TRUE(refused(error_of([&] {
                        c.split({0, 1}, call, failing);
                      }),
                      KNN_ERR_DEVICE, "the second device failed"));
  EXPECT_EQ(ran.load(), 2);
}

// ---- Arrays of other devices, staged (stand-in device memory) -----------------

// The rows of a stand-in device block, on the host.
template <class T>
std::vector<T> host_of(const knn_test::FakeDevices::Block& block, size_t n) {
  return std::vector<T>(block.as<T>(), block.as<T>() + n);
}

// What the work of every piece saw: its arrays' devices, its budget, its points.
struct PieceLog {
  std::mutex mutex;
  int pieces = 0;
  int64_t points = 0;
  std::map<int, std::pair<size_t, size_t>> limits;  // device -> least and most budget

  // Every array given is host memory or memory of the piece's device (or
  // of a device it reaches, where `peers` allows).
  void note(const knn_test::FakeDevices& memory, const std::vector<const void*>& arrays,
            int64_t count, size_t limit, bool peers) {
    for (const void* a : arrays) {
      const int owner = a ? memory.owner(a) : -1;
      if (owner < 0 || owner == knn_test::fake_current) continue;
      EXPECT_TRUE(peers && memory.peers.count({knn_test::fake_current, owner}))
          << "device " << knn_test::fake_current << " given memory of device " << owner;
    }
    std::lock_guard<std::mutex> lock(mutex);
    ++pieces;
    points += count;
    auto range = limits.emplace(knn_test::fake_current, std::make_pair(limit, limit)).first;
    range->second.first = std::min(range->second.first, limit);
    range->second.second = std::max(range->second.second, limit);
  }

  // Every piece on a device of `budget` bytes (the share's) planned from
  // less, and from at least half (what the staging leaves).
  ::testing::AssertionResult within(int device, size_t budget) const {
    const auto range = limits.find(device);
    if (range == limits.end()) return ::testing::AssertionFailure() << "device " << device;
    if (range->second.first >= budget / 2 && range->second.second < budget)
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "device " << device << ": budgets " << range->second.first << " .. "
           << range->second.second << " of " << budget;
  }
};

// Index calls whose queries and outputs are memory of stand-in devices other
// than the shares': staged in pieces (two buffers, copies that land only
// when waited for), within the share's budget, the rows bit for bit the
// whole call's; with peer access, read and written in place or the queries
// copied over whole.
template <typename Scalar>
void expect_staged_index_split_equals_whole() {
  const int dim = 3, k = 8;
  const int64_t n = 301, m = 1000;
  const std::vector<Scalar> points =
      in_precision<Scalar>(knn_test::make_rows(knn_test::Dist::Duplicates, n, dim, 17));
  const std::vector<Scalar> queries =
      in_precision<Scalar>(knn_test::make_query_rows(knn_test::Dist::Duplicates, m, dim, 23));
  knn_test::FakeDevices memory;
  const EngineOf<Scalar> home = build_kdtree(points.data(), n, dim, knn::IndexParams{});
  knn::BasicDeviceReplicas<Scalar> replicas{memory.ops()};
  const std::vector<int> devices{0, 1, 2, 1};
  ASSERT_EQ(replicas.prepare(
                devices, true, *home, 0,
                [&](const Scalar* p) { return build_kdtree(p, n, dim, knn::IndexParams{}); }),
            devices);
  const size_t slots = static_cast<size_t>(m) * k;
  std::vector<int32_t> want_i(slots);
  std::vector<Scalar> want_d(slots);
  home->knn(queries.data(), m, k, want_i.data(), want_d.data(), one_thread());
  const Scalar radius = Scalar{3} / 10;
  std::vector<int32_t> radius_i(slots), radius_c(static_cast<size_t>(m));
  std::vector<Scalar> radius_d(slots);
  home->radius(queries.data(), m, radius, k, radius_i.data(), radius_d.data(), radius_c.data(),
               one_thread());
  const auto on = [&](int device, auto* from, size_t count) {
    return memory.array(device, count, from);
  };

  // Queries on device 3, outputs on device 2: device 2's shares stage the
  // queries alone, the others both. 12000 bytes a call: 6000 for each of
  // device 1's two shares; a piece's two buffers take at most half.
  for (bool peers : {false, true}) {
    SCOPED_TRACE(peers ? "device 0 reaches devices 2 and 3" : "no peer access");
    memory.peers.clear();
    if (peers) memory.peers = {{0, 2}, {0, 3}};
    const auto q = on(3, queries.data(), queries.size());
    const auto i = on(2, static_cast<int32_t*>(nullptr), slots);
    const auto d = on(2, static_cast<Scalar*>(nullptr), slots);
    const auto c = on(2, static_cast<int32_t*>(nullptr), static_cast<size_t>(m));
    knn::BasicSplitCall<Scalar> call;
    call.queries = q->template as<Scalar>(), call.m = m, call.dim = dim, call.row_width = k;
    call.indices = i->template as<int32_t>(), call.sq_distances = d->template as<Scalar>();
    call.call = one_thread();
    call.call.queries_on_device = call.call.outputs_on_device = true;
    call.call.device_memory_limit = 12000;
    PieceLog log;
    const knn::BasicShareWork<Scalar> noted =
        [&](const knn::BasicIndexEngine<Scalar>& e, const Scalar* qs, int64_t count, int width,
            int32_t* is, Scalar* ds, int32_t* cs, const knn::CallParams& p) {
          log.note(memory, {qs, is, ds, cs}, count, p.device_memory_limit, true);
          EXPECT_TRUE(p.queries_on_device && p.outputs_on_device);
          // The stand-in engine reads and writes host memory: the blocks are.
          if (cs)
            e.radius(qs, count, radius, width, is, ds, cs, p);
          else
            e.knn(qs, count, width, is, ds, p);
        };
    const size_t copied_before = memory.copied();
    knn::split_over_devices(devices, replicas, *home, 0, call, noted);
    EXPECT_TRUE(knn_test::same_rows(want_i, host_of<int32_t>(*i, slots), m, k));
    EXPECT_TRUE(knn_test::same_bits(want_d, host_of<Scalar>(*d, slots)));
    EXPECT_EQ(log.points, m);
    EXPECT_GT(log.pieces, 4 * static_cast<int>(devices.size()));  // several pieces a share
    // Staging (or the copy) within half of each share's budget (device 1:
    // 6000 bytes) and counted in it.
    EXPECT_TRUE(log.within(0, 12000));
    EXPECT_TRUE(log.within(1, 6000));
    EXPECT_TRUE(log.within(2, 12000));
    EXPECT_GT(memory.copied(), copied_before);

    // Radius rows and counts over the same staging.
    call.counts = c->template as<int32_t>();
    knn::split_over_devices(devices, replicas, *home, 0, call, noted);
    EXPECT_EQ(host_of<int32_t>(*c, static_cast<size_t>(m)), radius_c);
    EXPECT_TRUE(knn_test::same_rows(radius_i, host_of<int32_t>(*i, slots), m, k));
    EXPECT_TRUE(knn_test::same_bits(radius_d, host_of<Scalar>(*d, slots)));

    // A budget that holds no piece's staging fails the call.
    call.call.device_memory_limit = 100;
    EXPECT_TRUE(refused(
        error_of([&] { knn::split_over_devices(devices, replicas, *home, 0, call, noted); }),
        KNN_ERR_DEVICE_OUT_OF_MEMORY, "bytes of staging for arrays of another"));
  }

  // Host outputs, queries on device 3 that every device reaches: each share
  // copies its queries over whole where half its budget holds them (device
  // 2's allocation fails: it reads them in place), its budget less the copy.
  {
    memory.peers = {{0, 3}, {1, 3}, {2, 3}};
    memory.full = {2};
    const auto q = on(3, queries.data(), queries.size());
    std::vector<int32_t> got_i(slots, -7);
    std::vector<Scalar> got_d(slots, Scalar{-7});
    knn::BasicSplitCall<Scalar> call;
    call.queries = q->template as<Scalar>(), call.m = m, call.dim = dim, call.row_width = k;
    call.indices = got_i.data(), call.sq_distances = got_d.data();
    call.call = one_thread();
    call.call.queries_on_device = true;
    std::map<int, int> own_queries, peer_queries;
    std::mutex mutex;
    const knn::BasicShareWork<Scalar> noting_queries = [&](const knn::BasicIndexEngine<Scalar>& e,
                                                           const Scalar* qs, int64_t count,
                                                           int width, int32_t* is, Scalar* ds,
                                                           int32_t*, const knn::CallParams& p) {
      const int owner = memory.owner(qs);
      {
        std::lock_guard<std::mutex> lock(mutex);
        ++(owner == knn_test::fake_current ? own_queries : peer_queries)[knn_test::fake_current];
      }
      // Device 1's two shares each plan from half of it.
      const size_t budget = knn_test::fake_current == 1 ? memory.free_bytes / 2 : memory.free_bytes;
      const size_t copy = sizeof(Scalar) * dim * static_cast<size_t>(count);
      if (owner == knn_test::fake_current) {
        EXPECT_EQ(p.device_memory_limit, budget - copy);
      }
      e.knn(qs, count, width, is, ds, p);
    };
    knn::split_over_devices(devices, replicas, *home, 0, call, noting_queries);
    EXPECT_TRUE(knn_test::same_rows(want_i, got_i, m, k));
    EXPECT_TRUE(knn_test::same_bits(want_d, got_d));
    EXPECT_EQ(own_queries, (std::map<int, int>{{0, 1}, {1, 2}}));
    EXPECT_EQ(peer_queries, (std::map<int, int>{{2, 1}}));
    memory.full.clear();
  }

  // All-kNN with the point itself dropped, its queries staged in pieces:
  // each piece's rows of k + 1 in host scratch, delivered at its offset.
  memory.peers.clear();
  for (bool with_sq : {true, false}) {
    const auto own = on(3, points.data(), points.size());
    const size_t self_slots = static_cast<size_t>(n) * k;
    std::vector<int32_t> self_i(self_slots), split_i(self_slots, -7);
    std::vector<Scalar> self_d(self_slots), split_d(self_slots, Scalar{-7});
    home->knn_self(k, true, self_i.data(), self_d.data(), one_thread());
    knn::BasicSplitCall<Scalar> all;
    all.queries = own->template as<Scalar>(), all.m = n, all.dim = dim, all.row_width = k;
    all.exclude_self = true;
    all.indices = split_i.data(), all.sq_distances = with_sq ? split_d.data() : nullptr;
    all.call = one_thread();
    all.call.queries_on_device = true;
    all.call.device_memory_limit = 400;
    PieceLog log;
    const knn::BasicShareWork<Scalar> wide_rows =
        [&](const knn::BasicIndexEngine<Scalar>& e, const Scalar* qs, int64_t count, int width,
            int32_t* is, Scalar* ds, int32_t*, const knn::CallParams& p) {
          log.note(memory, {qs, is, ds}, count, p.device_memory_limit, false);
          EXPECT_EQ(width, k + 1);
          EXPECT_FALSE(p.outputs_on_device);
          e.knn(qs, count, width, is, ds, p);
        };
    knn::split_over_devices(devices, replicas, *home, 0, all, wide_rows);
    EXPECT_TRUE(knn_test::same_rows(self_i, split_i, n, k)) << "with_sq " << with_sq;
    if (with_sq) {
      EXPECT_TRUE(knn_test::same_bits(self_d, split_d));
    }
    EXPECT_GT(log.pieces, 4 * static_cast<int>(devices.size()));
  }
  EXPECT_EQ(memory.live_blocks(), 0u);  // every staging buffer freed
}

TEST(SplitOverDevices, ArraysOfOtherDevicesStagedInPiecesBitIdentical) {
  expect_staged_index_split_equals_whole<float>();
  expect_staged_index_split_equals_whole<double>();
}

// ---- The options through the API ------------------------------------------------

TEST(DeviceOptions, RefusedWithPreciseMessages) {
  const std::vector<float> points = knn_test::make_rows(knn_test::Dist::Uniform, 50, 3, 1);
  auto build_with = [&](const knn_options& o) {
    knn_index* index = nullptr;
    const int status = knn_index_build(points.data(), 50, 3, &o, &index);
    if (index) knn_index_free(index);
    return status;
  };
  knn_options o = v2_options();
  o.device_count = KNN_MAX_DEVICES + 1;
  EXPECT_TRUE(knn_test::fails_with(build_with(o), KNN_ERR_INVALID_ARGUMENT,
                                   "opt->device_count is 17; it must be from 0 (default) to "
                                   "KNN_MAX_DEVICES (16)"));
  o.device_count = -1;
  EXPECT_TRUE(
      knn_test::fails_with(build_with(o), KNN_ERR_INVALID_ARGUMENT, "opt->device_count is -1"));
  o.device_count = 2;
  o.devices[0] = 0, o.devices[1] = -3;
  EXPECT_TRUE(knn_test::fails_with(build_with(o), KNN_ERR_INVALID_ARGUMENT,
                                   "opt->devices[1] is -3; a device number is 0 or more"));
  o.devices[1] = 0;
  o.struct_size = offsetof(knn_options, devices) + sizeof(int);  // covers one entry
  EXPECT_TRUE(knn_test::fails_with(build_with(o), KNN_ERR_INVALID_ARGUMENT,
                                   "opt->device_count is 2 but opt->struct_size"));
  // A version-1 caller: whatever lies past its struct is never read.
  knn_options v1 = v2_options();
  knn_options_init(&v1);
  v1.device_count = 9999;
  v1.devices[0] = -5;
  v1.backend = KNN_BACKEND_OPENMP;
  EXPECT_EQ(build_with(v1), KNN_OK) << knn_last_error();

  // A query call checks its own options the same way.
  knn_options cpu = v2_options();
  cpu.backend = KNN_BACKEND_OPENMP;
  knn_test::IndexHandle index = knn_test::build_index(points, 3, cpu);
  ASSERT_TRUE(index);
  std::vector<int32_t> idx(4 * 2, -7);
  knn_options q = v2_options();
  q.device_count = 1;
  q.devices[0] = -1;
  EXPECT_TRUE(knn_test::fails_with(
      knn_index_query(index.get(), points.data(), 4, 2, idx.data(), nullptr, &q),
      KNN_ERR_INVALID_ARGUMENT, "opt->devices[0] is -1"));
  EXPECT_EQ(idx, std::vector<int32_t>(8, -7));  // refused before any output was written
}

TEST(DeviceOptions, TheCpuEngineIgnoresTheDeviceList) {
  const std::vector<float> points = knn_test::make_rows(knn_test::Dist::Uniform, 300, 3, 2);
  knn_options plain = v2_options();
  plain.backend = KNN_BACKEND_OPENMP;
  knn_options listed = plain;
  listed.device_count = 2;
  listed.devices[0] = 0, listed.devices[1] = 0;
  knn_test::IndexHandle a = knn_test::build_index(points, 3, plain);
  knn_test::IndexHandle b = knn_test::build_index(points, 3, listed);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(knn_test::same_knn(knn_test::query_self(a.get(), 300, 5, true),
                                 knn_test::query_self(b.get(), 300, 5, true)));
  EXPECT_TRUE(knn_test::same_knn(knn_test::query_index(a.get(), points, 3, 7, &plain),
                                 knn_test::query_index(b.get(), points, 3, 7, &listed)));
}

// ---- A mesh's closest points over shares -------------------------------------

// A mesh engine that notes on which stand-in device it answers how many
// points, and fails the test where that is not the device it was built on.
template <typename S>
class NotingMeshEngine : public knn::MeshEngine<S> {
 public:
  NotingMeshEngine(std::unique_ptr<knn::MeshEngine<S>> inner, int device,
                   std::map<int, int64_t>* answered, std::mutex* mutex,
                   const knn_test::FakeDevices* memory = nullptr, PieceLog* log = nullptr)
      : inner_(std::move(inner)),
        device_(device),
        answered_(answered),
        mutex_(mutex),
        memory_(memory),
        log_(log) {}
  int backend() const override { return inner_->backend(); }
  int64_t n_triangles() const override { return inner_->n_triangles(); }
  bool closed_oriented() const override { return inner_->closed_oriented(); }
  void closest(const S* points, int64_t m, S max_distance, const knn::MeshResults<S>& out,
               const knn::MeshParams& call) const override {
    EXPECT_EQ(knn_test::fake_current, device_);
    if (log_)
      log_->note(*memory_,
                 {points, out.triangle_ids, out.sq_distances, out.closest, out.barycentric,
                  out.signed_distances},
                 m, call.device_memory_limit, false);
    {
      std::lock_guard<std::mutex> lock(*mutex_);
      (*answered_)[device_] += m;
    }
    inner_->closest(points, m, max_distance, out, call);
  }
  void deviation(const S*, int64_t, S, const knn::DeviationRequest&, knn::DeviationSummary*, S*,
                 const knn::MeshParams&) const override {
    ADD_FAILURE() << "a split never asks for a deviation report";
  }
  knn::geometry::AlignSums align_step(const S*, int64_t, const knn::AlignStep&,
                                      const knn::MeshParams&) const override {
    ADD_FAILURE() << "a split never asks for an alignment step";
    return {};
  }

 private:
  std::unique_ptr<knn::MeshEngine<S>> inner_;
  int device_;
  std::map<int, int64_t>* answered_;
  std::mutex* mutex_;
  const knn_test::FakeDevices* memory_;
  PieceLog* log_;
};

template <typename S>
void expect_mesh_split_equals_whole(const knn_test::TestMesh<S>& mesh) {
  const knn::MeshParams params;
  std::map<int, int64_t> answered;
  std::map<int, int> builds_on;
  std::mutex mutex;
  const auto noting = [&](int device) {
    return std::make_unique<NotingMeshEngine<S>>(knn::omp::build_mesh(mesh.geometry(), params),
                                                 device, &answered, &mutex);
  };
  knn_test::fake_current = 0;
  const std::unique_ptr<knn::MeshEngine<S>> home = noting(0);
  knn::DeviceCopies<knn::MeshEngine<S>> copies{knn_test::fake_ops()};
  int sources = 0;
  const auto source = [&] {
    ++sources;
    return [&]() -> std::unique_ptr<knn::MeshEngine<S>> {
      {
        std::lock_guard<std::mutex> lock(mutex);
        ++builds_on[knn_test::fake_current];
      }
      return noting(knn_test::fake_current);
    };
  };
  // Device 0 listed twice (two shares on the home engine), 2 twice (two on
  // one copy), 1 once: a copy on each other device, made once.
  const std::vector<int> devices = {0, 2, 1, 2, 0};
  ASSERT_EQ(copies.prepare(devices, true, 0, 0, source), devices);
  ASSERT_EQ(copies.prepare(devices, true, 0, 0, source), devices);
  EXPECT_EQ(sources, 1);
  EXPECT_EQ(builds_on, (std::map<int, int>{{1, 1}, {2, 1}}));

  const std::vector<S> points = knn_test::points_for(mesh, 1500, 11);
  const int64_t m = static_cast<int64_t>(points.size() / 3);
  for (const S max_distance : {std::numeric_limits<S>::infinity(), S(0.05)}) {
    SCOPED_TRACE(double(max_distance));
    answered.clear();
    const knn_test::Answers<S> whole = knn_test::engine_closest(*home, points, max_distance);
    answered.clear();
    knn_test::Answers<S> split(m);
    knn::closest_on_devices(devices, copies, *home, 0, points.data(), m, max_distance,
                            split.results(), params);
    EXPECT_SAME_BITS(split.ids, whole.ids);
    EXPECT_SAME_BITS(split.sq, whole.sq);
    EXPECT_SAME_BITS(split.closest, whole.closest);
    EXPECT_SAME_BITS(split.bary, whole.bary);
    EXPECT_SAME_BITS(split.signed_d, whole.signed_d);
    std::map<int, int64_t> want;
    for (int s = 0; s < 5; ++s)
      want[devices[s]] += knn::share_begin(m, 5, s + 1) - knn::share_begin(m, 5, s);
    EXPECT_EQ(answered, want);

    // Outputs not asked for stay NULL on every share (a signed distance call).
    knn_test::Answers<S> few(m);
    knn::MeshResults<S> r = few.results();
    r.sq_distances = r.closest = r.barycentric = nullptr;
    knn::closest_on_devices(devices, copies, *home, 0, points.data(), m, max_distance, r, params);
    EXPECT_SAME_BITS(few.ids, whole.ids);
    EXPECT_SAME_BITS(few.signed_d, whole.signed_d);
    EXPECT_EQ(few.closest, std::vector<S>(few.closest.size(), S(7)));
  }
}

TEST(MeshSplit, BitIdenticalToTheWholeCallClosedAndOpenFloatAndDouble) {
  expect_mesh_split_equals_whole(knn_test::torus<float>(40, 24));
  expect_mesh_split_equals_whole(knn_test::open_torus<float>(40, 24));
  expect_mesh_split_equals_whole(knn_test::torus<double>(40, 24));
  expect_mesh_split_equals_whole(knn_test::open_torus<double>(40, 24));
  expect_mesh_split_equals_whole(knn_test::soup<double>(500, 3));
}

TEST(MeshSplit, AShareThatFailsFailsTheCallAfterTheOthersFinish) {
  const knn_test::TestMesh<float> mesh = knn_test::torus<float>(20, 12);
  std::map<int, int64_t> answered;
  std::mutex mutex;
  const NotingMeshEngine<float> home(knn::omp::build_mesh(mesh.geometry(), {}), 0, &answered,
                                     &mutex);
  knn::DeviceCopies<knn::MeshEngine<float>> copies{knn_test::fake_ops()};
  const std::vector<float> points = knn_test::points_for(mesh, 200, 5);
  const int64_t m = static_cast<int64_t>(points.size() / 3);
  knn_test::Answers<float> out(m);
  // Device 1 has no copy: its share fails, device 0's still runs.
  knn_test::fake_current = 0;
  EXPECT_TRUE(refused(error_of([&] {
                        knn::closest_on_devices({0, 1}, copies, home, 0, points.data(), m,
                                                std::numeric_limits<float>::infinity(),
                                                out.results(), {});
                      }),
                      KNN_ERR_INTERNAL, "no copy of structure 0 on device 1"));
  EXPECT_EQ(answered, (std::map<int, int64_t>{{0, knn::share_begin(m, 2, 1)}}));
}

// Points on one stand-in device, outputs on another, neither the shares'
// (the mesh engine reads only its own device's memory and host memory, peer
// access or not): staged in pieces within each share's budget, bit for bit
// the whole call's.
TEST(MeshSplit, ArraysOfOtherDevicesStagedInPiecesBitIdentical) {
  using S = double;
  const knn_test::TestMesh<S> mesh = knn_test::torus<S>(40, 24);
  knn_test::FakeDevices memory;
  memory.peers = {{0, 3}, {2, 1}};
  std::map<int, int64_t> answered;
  std::mutex mutex;
  PieceLog log;
  const auto noting = [&](int device) {
    return std::make_unique<NotingMeshEngine<S>>(knn::omp::build_mesh(mesh.geometry(), {}), device,
                                                 &answered, &mutex, &memory, &log);
  };
  knn_test::fake_current = 0;
  const std::unique_ptr<knn::MeshEngine<S>> home = noting(0);
  knn::DeviceCopies<knn::MeshEngine<S>> copies{memory.ops()};
  const std::vector<int> devices = {0, 2, 1, 2, 0};
  ASSERT_EQ(
      copies.prepare(devices, true, 0, 0,
                     [&] {
                       return [&] {
                         return std::unique_ptr<knn::MeshEngine<S>>(noting(knn_test::fake_current));
                       };
                     }),
      devices);
  const std::vector<S> points = knn_test::points_for(mesh, 1500, 13);
  const int64_t m = static_cast<int64_t>(points.size() / 3);
  const size_t n = static_cast<size_t>(m);
  const S inf = std::numeric_limits<S>::infinity();
  const knn_test::Answers<S> whole =
      knn_test::engine_closest(*knn::omp::build_mesh(mesh.geometry(), {}), points, inf);

  const auto p = memory.array(3, points.size(), points.data());
  const auto ids = memory.array<int32_t>(1, n);
  const auto sq = memory.array<S>(1, n), closest = memory.array<S>(1, 3 * n);
  const auto bary = memory.array<S>(1, 3 * n), signed_d = memory.array<S>(1, n);
  const knn::MeshResults<S> results{ids->as<int32_t>(), sq->as<S>(), closest->as<S>(),
                                    bary->as<S>(), signed_d->as<S>()};
  knn::MeshParams params;
  params.device_memory_limit = 40000;
  knn::closest_on_devices(devices, copies, *home, 0, p->as<S>(), m, inf, results, params);
  EXPECT_SAME_BITS(host_of<int32_t>(*ids, n), whole.ids);
  EXPECT_SAME_BITS(host_of<S>(*sq, n), whole.sq);
  EXPECT_SAME_BITS(host_of<S>(*closest, 3 * n), whole.closest);
  EXPECT_SAME_BITS(host_of<S>(*bary, 3 * n), whole.bary);
  EXPECT_SAME_BITS(host_of<S>(*signed_d, n), whole.signed_d);
  EXPECT_EQ(log.points, m);
  EXPECT_GT(log.pieces, 4 * static_cast<int>(devices.size()));
  EXPECT_TRUE(log.within(0, 20000));  // two shares each
  EXPECT_TRUE(log.within(2, 20000));
  EXPECT_TRUE(log.within(1, 40000));

  // A budget that holds no piece's staging fails the call.
  params.device_memory_limit = 100;
  EXPECT_TRUE(refused(error_of([&] {
                        knn::closest_on_devices(devices, copies, *home, 0, p->as<S>(), m, inf,
                                                results, params);
                      }),
                      KNN_ERR_DEVICE_OUT_OF_MEMORY, "bytes of staging for arrays of another"));
}

// ---- The device environment of the mesh calls ----------------------------------

TEST(MeshDeviceOptions, KnnDevicesIsCheckedByTheCallsThatMayUseSeveralDevices) {
  const knn_test::TestMesh<float> mesh = knn_test::torus<float>(12, 8);
  auto build_with = [&](const knn_options& o, knn_mesh** out) {
    return knn_mesh_build(mesh.vertices.data(), mesh.n_vertices(), mesh.triangles.data(),
                          mesh.n_triangles(), &o, out);
  };
  knn_options automatic = v2_options();  // may use a device: reads the environment
  knn_options cpu = v2_options();
  cpu.backend = KNN_BACKEND_OPENMP;
  knn_options listed = automatic;  // names its devices: KNN_DEVICES is not read
  listed.device_count = 2;
  listed.devices[0] = 0, listed.devices[1] = 0;
  knn_mesh *a = nullptr, *b = nullptr, *c = nullptr;
  {
    const ScopedEnv garbage(knn::kDeviceListVar, "0,x");
    knn_mesh* refused_build = nullptr;
    EXPECT_TRUE(knn_test::fails_with(build_with(automatic, &refused_build),
                                     KNN_ERR_INVALID_ARGUMENT, "KNN_DEVICES"));
    EXPECT_EQ(refused_build, nullptr);
  }
  ASSERT_EQ(build_with(automatic, &a), KNN_OK) << knn_last_error();
  ASSERT_EQ(build_with(cpu, &b), KNN_OK) << knn_last_error();
  ASSERT_EQ(build_with(listed, &c), KNN_OK) << knn_last_error();
  const float points[6] = {0, 0, 0, 2, 0, 0.5f};
  const float inf = std::numeric_limits<float>::infinity();
  {
    const ScopedEnv garbage(knn::kDeviceListVar, "0,x");
    int32_t ids[2] = {-7, -7};
    float sq[2] = {-7, -7}, signed_d[2] = {-7, -7};
    EXPECT_TRUE(knn_test::fails_with(
        knn_mesh_closest(a, points, 2, inf, ids, sq, nullptr, nullptr, nullptr),
        KNN_ERR_INVALID_ARGUMENT, "KNN_DEVICES"));
    EXPECT_TRUE(
        knn_test::fails_with(knn_mesh_signed_distance(a, points, 2, inf, signed_d, ids, nullptr),
                             KNN_ERR_INVALID_ARGUMENT, "KNN_DEVICES"));
    // Refused before any output was written.
    EXPECT_EQ(ids[0], -7);
    EXPECT_EQ(sq[0], -7.0f);
    EXPECT_EQ(signed_d[0], -7.0f);
    // The OpenMP mesh, a call or a build that names devices, and the
    // report (the mesh's device alone) do not read it.
    EXPECT_EQ(knn_mesh_closest(b, points, 2, inf, ids, sq, nullptr, nullptr, nullptr), KNN_OK)
        << knn_last_error();
    EXPECT_EQ(knn_mesh_closest(c, points, 2, inf, ids, sq, nullptr, nullptr, nullptr), KNN_OK)
        << knn_last_error();
    EXPECT_EQ(knn_mesh_closest(a, points, 2, inf, ids, sq, nullptr, nullptr, &listed), KNN_OK)
        << knn_last_error();
    knn_deviation_report report;
    report.struct_size = sizeof report;
    EXPECT_EQ(knn_mesh_deviation_report(a, points, 2, inf, 0.1, nullptr, 0, nullptr, nullptr, 0,
                                        nullptr, nullptr, &report, nullptr),
              KNN_OK)
        << knn_last_error();
  }
  for (knn_mesh* mesh : {a, b, c}) EXPECT_EQ(knn_mesh_free(mesh), KNN_OK);
}

}  // namespace
