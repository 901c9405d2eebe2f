// A CUDA mesh on several devices (include/knn_gpgpu_mesh.h, "A CUDA mesh
// answers on every device of the call's device list"): knn_mesh_closest and
// knn_mesh_signed_distance (and their _f64 twins) split over a device list
// answer bit for bit like the mesh on one device and like the OpenMP
// engine, for closed and open meshes, host and device arrays. On one GPU a
// two-way split is forced onto it (devices {0, 0}, KNN_DEVICES=0,0); the
// tests named TwoDevices* use devices 0 and 1 and skip where there is only
// one. Everything skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "knn_gpgpu.h"
#include "mesh_api_calls.h"
#include "mesh_test_cases.h"
#include "scoped_env.h"

namespace {

using knn_test::mesh_build;
using knn_test::mesh_closest;
using knn_test::mesh_signed_distance;
using knn_test::TestMesh;

#define SKIP_WITHOUT_TWO_DEVICES()                                             \
  do {                                                                         \
    if (cuGetDeviceCount() < 2) GTEST_SKIP() << "fewer than two CUDA devices"; \
  } while (0)

knn_options options(int backend, std::initializer_list<int> devices = {}) {
  knn_options o;
  knn_options_init_v2(&o);
  o.backend = backend;
  for (int d : devices) o.devices[o.device_count++] = d;
  return o;
}

// A mesh handle freed at the end of the scope.
struct MeshHandle {
  knn_mesh* mesh = nullptr;
  ~MeshHandle() { knn_mesh_free(mesh); }
};

template <class S>
int build(const TestMesh<S>& m, const knn_options& o, MeshHandle* out) {
  return mesh_build(m.vertices.data(), m.n_vertices(), m.triangles.data(), m.n_triangles(), &o,
                    &out->mesh);
}

// Every output of both calls, host memory.
template <class S>
struct Outputs {
  std::vector<int32_t> ids, signed_ids;
  std::vector<S> sq, closest, bary, signed_d;
  explicit Outputs(int64_t m)
      : ids(static_cast<size_t>(m), 7),
        signed_ids(static_cast<size_t>(m), 7),
        sq(static_cast<size_t>(m), 7),
        closest(static_cast<size_t>(3 * m), 7),
        bary(static_cast<size_t>(3 * m), 7),
        signed_d(static_cast<size_t>(m), 7) {}
};

template <class S>
void expect_same(const Outputs<S>& got, const Outputs<S>& want) {
  EXPECT_SAME_BITS(got.ids, want.ids);
  EXPECT_SAME_BITS(got.sq, want.sq);
  EXPECT_SAME_BITS(got.closest, want.closest);
  EXPECT_SAME_BITS(got.bary, want.bary);
  EXPECT_SAME_BITS(got.signed_d, want.signed_d);
  EXPECT_SAME_BITS(got.signed_ids, want.signed_ids);
}

// Both calls into host arrays.
template <class S>
Outputs<S> answers(const knn_mesh* mesh, const std::vector<S>& points, S max_distance,
                   const knn_options* o) {
  const int64_t m = static_cast<int64_t>(points.size() / 3);
  Outputs<S> out(m);
  EXPECT_EQ(mesh_closest(mesh, points.data(), m, max_distance, out.ids.data(), out.sq.data(),
                         out.closest.data(), out.bary.data(), o),
            KNN_OK)
      << knn_last_error();
  EXPECT_EQ(mesh_signed_distance(mesh, points.data(), m, max_distance, out.signed_d.data(),
                                 out.signed_ids.data(), o),
            KNN_OK)
      << knn_last_error();
  return out;
}

#if defined(KNN_TEST_WITH_CUDA)
// Both calls with points and outputs in memory of `array_device`.
template <class S>
Outputs<S> device_answers(const knn_mesh* mesh, const std::vector<S>& points, S max_distance,
                          const knn_options* o, int array_device) {
  const int64_t m = static_cast<int64_t>(points.size() / 3);
  const size_t n = static_cast<size_t>(m);
  Outputs<S> out(m);
  int previous = -1;
  EXPECT_EQ(cudaGetDevice(&previous), cudaSuccess);
  EXPECT_EQ(cudaSetDevice(array_device), cudaSuccess);
  {
    knn_test::DeviceArray<S> q(points), sq(n), c(3 * n), b(3 * n), sd(n);
    knn_test::DeviceArray<int32_t> ids(n), signed_ids(n);
    EXPECT_EQ(cudaSetDevice(previous), cudaSuccess);
    EXPECT_EQ(
        mesh_closest(mesh, q.get(), m, max_distance, ids.get(), sq.get(), c.get(), b.get(), o),
        KNN_OK)
        << knn_last_error();
    EXPECT_EQ(mesh_signed_distance(mesh, q.get(), m, max_distance, sd.get(), signed_ids.get(), o),
              KNN_OK)
        << knn_last_error();
    int after = -1;
    EXPECT_EQ(cudaGetDevice(&after), cudaSuccess);
    EXPECT_EQ(after, previous) << "the caller's current device changed";
    out.ids = ids.to_host(n), out.signed_ids = signed_ids.to_host(n);
    out.sq = sq.to_host(n), out.closest = c.to_host(3 * n), out.bary = b.to_host(3 * n);
    out.signed_d = sd.to_host(n);
  }
  EXPECT_EQ(cudaSetDevice(previous), cudaSuccess);
  return out;
}
#endif

// The meshes of the tests: closed (signs from pseudonormals), open (from the
// winding number), and a soup of degenerate triangles.
template <class S>
std::vector<knn_test::MeshCase<S>> meshes() {
  return {{"closed torus", knn_test::torus<S>(40, 24), 1, 0},
          {"open torus", knn_test::open_torus<S>(40, 24), 1, 0},
          {"soup", knn_test::soup<S>(700, 3), 1, 0}};
}

// The split over `devices` (named by the build, or by the call on a mesh
// built without a list) against the mesh on one device and the OpenMP mesh.
template <class S>
void expect_split_agrees(std::initializer_list<int> devices, bool device_arrays) {
  for (const knn_test::MeshCase<S>& c : meshes<S>()) {
    SCOPED_TRACE(c.name);
    MeshHandle one, listed, cpu;
    ASSERT_EQ(build(c.mesh, options(KNN_BACKEND_CUDA), &one), KNN_OK) << knn_last_error();
    ASSERT_EQ(build(c.mesh, options(KNN_BACKEND_CUDA, devices), &listed), KNN_OK)
        << knn_last_error();
    ASSERT_EQ(build(c.mesh, options(KNN_BACKEND_OPENMP), &cpu), KNN_OK) << knn_last_error();
    const knn_options call_list = options(KNN_BACKEND_AUTO, devices);
    const std::vector<S> points = knn_test::points_for(c.mesh, 20011, 17);
    for (const S max_distance : {std::numeric_limits<S>::infinity(), S(0.05)}) {
      SCOPED_TRACE(double(max_distance));
      const Outputs<S> want = answers(cpu.mesh, points, max_distance, nullptr);
      expect_same(answers(one.mesh, points, max_distance, nullptr), want);
      if (!device_arrays) {
        expect_same(answers(listed.mesh, points, max_distance, nullptr), want);
        expect_same(answers(one.mesh, points, max_distance, &call_list), want);
        continue;
      }
#if defined(KNN_TEST_WITH_CUDA)
      for (int array_device = 0; array_device < std::min(cuGetDeviceCount(), 2); ++array_device) {
        SCOPED_TRACE("arrays on device " + std::to_string(array_device));
        expect_same(device_answers(listed.mesh, points, max_distance, nullptr, array_device), want);
        expect_same(device_answers(one.mesh, points, max_distance, &call_list, array_device), want);
      }
#endif
    }
  }
}

TEST(MeshMultiGpu, ForcedTwoWaySplitOnOneDeviceIsBitIdentical) {
  SKIP_WITHOUT_DEVICE();
  expect_split_agrees<float>({0, 0}, false);
  expect_split_agrees<double>({0, 0}, false);
}

// The deviation report runs on the mesh's device alone, whatever the lists:
// the same report as the OpenMP engine's.
TEST(MeshMultiGpu, TheReportOfAListedMeshIsTheOneDeviceReport) {
  SKIP_WITHOUT_DEVICE();
  const TestMesh<double> mesh = knn_test::torus<double>(40, 24);
  MeshHandle listed, cpu;
  ASSERT_EQ(build(mesh, options(KNN_BACKEND_CUDA, {0, 0}), &listed), KNN_OK) << knn_last_error();
  ASSERT_EQ(build(mesh, options(KNN_BACKEND_OPENMP), &cpu), KNN_OK) << knn_last_error();
  const std::vector<double> points = knn_test::points_for(mesh, 20011, 37);
  const int64_t m = static_cast<int64_t>(points.size() / 3);
  const double percentiles[] = {0, 5, 50, 95, 100};
  const double edges[] = {-0.2, -0.05, 0, 0.05, 0.2};
  const knn_options call_list = options(KNN_BACKEND_AUTO, {0, 0});
  auto report = [&](const knn_mesh* h, const knn_options* o) {
    struct Got {
      knn_deviation_report r{};
      double p[5];
      int64_t b[4];
      std::vector<double> d;
    } got;
    got.r.struct_size = sizeof got.r;
    got.d.assign(static_cast<size_t>(m), 7);
    EXPECT_EQ(knn_mesh_deviation_report_f64(h, points.data(), m, 0.5, 0.01, percentiles, 5, got.p,
                                            edges, 4, got.b, got.d.data(), &got.r, o),
              KNN_OK)
        << knn_last_error();
    return got;
  };
  const auto want = report(cpu.mesh, nullptr);
  for (const knn_options* o : {static_cast<const knn_options*>(nullptr), &call_list}) {
    const auto got = report(listed.mesh, o);
    EXPECT_EQ(std::memcmp(&got.r, &want.r, sizeof got.r), 0);
    EXPECT_EQ(std::memcmp(got.p, want.p, sizeof got.p), 0);
    EXPECT_EQ(std::memcmp(got.b, want.b, sizeof got.b), 0);
    EXPECT_SAME_BITS(got.d, want.d);
  }
}

#if defined(KNN_TEST_WITH_CUDA)
TEST(MeshMultiGpu, DeviceArraysOnAForcedSplit) {
  SKIP_WITHOUT_DEVICE();
  expect_split_agrees<float>({0, 0}, true);
  expect_split_agrees<double>({0, 0}, true);
}

TEST(MeshMultiGpu, TwoDevicesDeviceArraysOnEitherDevice) {
  SKIP_WITHOUT_TWO_DEVICES();
  for (std::initializer_list<int> devices : {std::initializer_list<int>{0, 1}, {1, 0}, {0, 1, 1}}) {
    expect_split_agrees<float>(devices, true);
    expect_split_agrees<double>(devices, true);
  }
}

// A mesh on device 0 alone, the arrays on device 1: staged by peer copies
// (the engine reads only its own device's memory), for the report too.
TEST(MeshMultiGpu, TwoDevicesArraysOfTheOtherDeviceOnOneDevice) {
  SKIP_WITHOUT_TWO_DEVICES();
  const TestMesh<float> mesh = knn_test::torus<float>(40, 24);
  MeshHandle one;
  ASSERT_EQ(build(mesh, options(KNN_BACKEND_CUDA), &one), KNN_OK) << knn_last_error();
  const std::vector<float> points = knn_test::points_for(mesh, 20011, 23);
  const int64_t m = static_cast<int64_t>(points.size() / 3);
  const knn_options pinned = options(KNN_BACKEND_AUTO, {0});
  const float inf = std::numeric_limits<float>::infinity();
  expect_same(device_answers(one.mesh, points, inf, &pinned, 1),
              answers(one.mesh, points, inf, nullptr));
  const double percentiles[] = {0, 50, 90, 100};
  const double edges[] = {-0.1, 0, 0.1};
  double want_p[4], got_p[4];
  int64_t want_b[2], got_b[2];
  std::vector<float> want_d(static_cast<size_t>(m));
  knn_deviation_report want{}, got{};
  want.struct_size = got.struct_size = sizeof(knn_deviation_report);
  ASSERT_EQ(knn_mesh_deviation_report(one.mesh, points.data(), m, inf, 0.01, percentiles, 4, want_p,
                                      edges, 2, want_b, want_d.data(), &want, nullptr),
            KNN_OK)
      << knn_last_error();
  int previous = -1;
  ASSERT_EQ(cudaGetDevice(&previous), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  knn_test::DeviceArray<float> q(points), d(static_cast<size_t>(m));
  ASSERT_EQ(cudaSetDevice(previous), cudaSuccess);
  ASSERT_EQ(knn_mesh_deviation_report(one.mesh, q.get(), m, inf, 0.01, percentiles, 4, got_p, edges,
                                      2, got_b, d.get(), &got, nullptr),
            KNN_OK)
      << knn_last_error();
  EXPECT_SAME_BITS(d.to_host(static_cast<size_t>(m)), want_d);
  EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0);
  EXPECT_EQ(std::memcmp(got_p, want_p, sizeof got_p), 0);
  EXPECT_EQ(std::memcmp(got_b, want_b, sizeof got_b), 0);
}
#endif

TEST(MeshMultiGpu, SplitByTheEnvironment) {
  SKIP_WITHOUT_DEVICE();
  const TestMesh<double> mesh = knn_test::open_torus<double>(40, 24);
  MeshHandle one, cpu;
  ASSERT_EQ(build(mesh, options(KNN_BACKEND_CUDA), &one), KNN_OK) << knn_last_error();
  ASSERT_EQ(build(mesh, options(KNN_BACKEND_OPENMP), &cpu), KNN_OK) << knn_last_error();
  const std::vector<double> points = knn_test::points_for(mesh, 20011, 29);
  const double inf = std::numeric_limits<double>::infinity();
  const Outputs<double> want = answers(cpu.mesh, points, inf, nullptr);
  const knn_test::ScopedEnv split("KNN_DEVICES", "0,0");
  expect_same(answers(one.mesh, points, inf, nullptr), want);
}

TEST(MeshMultiGpu, GarbageInTheEnvironmentIsRefusedAndTouchesNoOutput) {
  SKIP_WITHOUT_DEVICE();
  const TestMesh<float> mesh = knn_test::torus<float>(12, 8);
  MeshHandle one;
  ASSERT_EQ(build(mesh, options(KNN_BACKEND_CUDA), &one), KNN_OK) << knn_last_error();
  const std::vector<float> points = knn_test::points_for(mesh, 100, 3);
  const int64_t m = static_cast<int64_t>(points.size() / 3);
  const float inf = std::numeric_limits<float>::infinity();
  for (const char* garbage : {"gpu0", "0,,1", "0,999", "-1"}) {
    SCOPED_TRACE(garbage);
    const knn_test::ScopedEnv env("KNN_DEVICES", garbage);
    const std::string message = std::string("KNN_DEVICES is \"") + garbage + "\"";
    Outputs<float> out(m);
    EXPECT_EQ(knn_mesh_closest(one.mesh, points.data(), m, inf, out.ids.data(), out.sq.data(),
                               nullptr, nullptr, nullptr),
              KNN_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(knn_last_error()).find(message), std::string::npos) << knn_last_error();
    EXPECT_EQ(knn_mesh_signed_distance(one.mesh, points.data(), m, inf, out.signed_d.data(),
                                       out.signed_ids.data(), nullptr),
              KNN_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(knn_last_error()).find(message), std::string::npos) << knn_last_error();
    expect_same(out, Outputs<float>(m));
  }
  // A device number beyond those present, in the call's options.
  const knn_options beyond = options(KNN_BACKEND_AUTO, {0, cuGetDeviceCount()});
  Outputs<float> out(m);
  EXPECT_EQ(knn_mesh_closest(one.mesh, points.data(), m, inf, out.ids.data(), out.sq.data(),
                             nullptr, nullptr, &beyond),
            KNN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(knn_last_error()).find("opt->devices[1] is"), std::string::npos)
      << knn_last_error();
  expect_same(out, Outputs<float>(m));
}

// Rule 1: a mesh built with opt->device answers on that device alone, even
// where a call lists others.
TEST(MeshMultiGpu, APinnedBuildAnswersOnItsDeviceAlone) {
  SKIP_WITHOUT_DEVICE();
  const TestMesh<float> mesh = knn_test::torus<float>(40, 24);
  knn_options pinned = options(KNN_BACKEND_CUDA);
  pinned.device = 0;
  MeshHandle one, cpu;
  ASSERT_EQ(build(mesh, pinned, &one), KNN_OK) << knn_last_error();
  ASSERT_EQ(build(mesh, options(KNN_BACKEND_OPENMP), &cpu), KNN_OK) << knn_last_error();
  const std::vector<float> points = knn_test::points_for(mesh, 5000, 31);
  const float inf = std::numeric_limits<float>::infinity();
  const knn_options listed = options(KNN_BACKEND_AUTO, {0, 0});
  expect_same(answers(one.mesh, points, inf, &listed), answers(cpu.mesh, points, inf, nullptr));
}

}  // namespace
