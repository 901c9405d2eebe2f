// The aligners of knn_index_align (engine/cloud_align.h) through the
// backends (engine/backend.h), one ICP step at a time, against the host sum
// of the definition written out here (common/geometry/align_terms.h: the
// scan moved and rounded, the OpenMP kd-tree's k = 1 lists, the trim's
// threshold ranked by a full sort, cloud_block_sums of every block of
// kAlignSumBlock points added in block order), bit for bit (memcmp of the
// sums):
//  - the OpenMP aligner for 1 and 3 threads, its searches in one chunk and
//    in chunks of 777 points (no whole number of sum blocks), two steps from
//    one aligner;
//  - (skipped without a device) the CUDA aligner on a CUDA kd-tree and brute
//    force, its lists in device memory, in the chunks of a device budget a
//    few hundred points above the smallest it accepts, with host and device
//    scans and normals;
// float and double, point-to-plane (some normals zero: the fallback along
// p - q) and point-to-point, every point within reach or some beyond it,
// with and without a trim.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../../common/error.h"
#include "../../common/geometry/align_terms.h"
#include "../../cuda/core/launch_policy.h"
#include "../../cuda/cuda_backend.h"
#include "../../engine/backend.h"
#include "../../engine/cloud_align.h"
#include "../../openmp/omp_backend.h"

namespace {

using knn::geometry::AlignFrame;
using knn::geometry::AlignSums;

constexpr int64_t kTargets = 3000;
constexpr int64_t kScan = 5000;  // not a whole number of sum blocks

// The test's cloud: targets uniform in [-1, 1]^3; normals Gaussian, every
// 97th zero; scan points near targets (noise 0.05), 5 % uniform in
// [-2, 2]^3.
template <typename Scalar>
struct Cloud {
  std::vector<Scalar> targets, normals, scan;
};

template <typename Scalar>
Cloud<Scalar> make_cloud(unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> unit(-1, 1), wide(-2, 2), coin(0, 1);
  std::normal_distribution<double> gauss(0, 1);
  Cloud<Scalar> c;
  for (int64_t i = 0; i < 3 * kTargets; ++i) c.targets.push_back(static_cast<Scalar>(unit(rng)));
  for (int64_t i = 0; i < kTargets; ++i)
    for (int d = 0; d < 3; ++d)
      c.normals.push_back(i % 97 == 0 ? Scalar{0} : static_cast<Scalar>(gauss(rng)));
  for (int64_t i = 0; i < kScan; ++i) {
    const bool outlier = coin(rng) < 0.05;
    for (int d = 0; d < 3; ++d)
      c.scan.push_back(static_cast<Scalar>(
          outlier ? wide(rng)
                  : c.targets[static_cast<size_t>(3 * (i % kTargets) + d)] + 0.05 * gauss(rng)));
  }
  return c;
}

// The rotation by `angle` about `axis` (Rodrigues, double), a translation,
// and the frame's centre and scale.
AlignFrame frame_of(const double (&axis)[3], double angle, const double (&shift)[3]) {
  const double len = std::sqrt(axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2]);
  const double k[3] = {axis[0] / len, axis[1] / len, axis[2] / len};
  const double c = std::cos(angle), s = std::sin(angle), t = 1 - c;
  AlignFrame f;
  const double r[9] = {
      t * k[0] * k[0] + c,        t * k[0] * k[1] - s * k[2], t * k[0] * k[2] + s * k[1],
      t * k[1] * k[0] + s * k[2], t * k[1] * k[1] + c,        t * k[1] * k[2] - s * k[0],
      t * k[2] * k[0] - s * k[1], t * k[2] * k[1] + s * k[0], t * k[2] * k[2] + c};
  std::copy(r, r + 9, f.rotation);
  std::copy(shift, shift + 3, f.translation);
  f.centre[0] = 0.1, f.centre[1] = 0.2, f.centre[2] = -0.1;
  f.inverse_scale = 1 / 0.7;
  return f;
}

const AlignFrame& first_step() {
  static const AlignFrame f = frame_of({1, 2, -1}, 0.05, {0.01, -0.02, 0.015});
  return f;
}
const AlignFrame& second_step() {
  static const AlignFrame f = frame_of({-0.5, 1, 3}, 0.02, {-0.01, 0.0, 0.02});
  return f;
}

struct Case {
  bool planes;
  double max_sq;
  double kept_fraction;
  std::string name() const {
    return std::string(planes ? "planes" : "points") + " max_sq " + std::to_string(max_sq) +
           " kept " + std::to_string(kept_fraction);
  }
};

std::vector<Case> cases() {
  const double all = INFINITY;
  return {{true, all, 1.0},   {false, all, 1.0}, {true, 0.01, 1.0},
          {false, 0.01, 0.8}, {true, all, 0.7},  {true, 0.02, 0.9}};
}

knn::IndexParams params() {
  knn::IndexParams p;
  p.leaf_size = 16;
  return p;
}

// The step's sums as the definition gives them, summed here on the host.
template <typename Scalar>
AlignSums host_sums(const Cloud<Scalar>& c, const knn::BasicIndexEngine<Scalar>& engine,
                    const AlignFrame& f, const Case& k) {
  std::vector<Scalar> moved;
  for (int64_t i = 0; i < kScan; ++i) {
    const knn::geometry::Vec3<Scalar> q =
        knn::geometry::rounded3<Scalar>(knn::geometry::move_point(f, c.scan.data() + 3 * i));
    moved.insert(moved.end(), {q.x, q.y, q.z});
  }
  std::vector<int32_t> nearest(kScan);
  std::vector<Scalar> sq(kScan);
  engine.knn(moved.data(), kScan, 1, nearest.data(), sq.data(), knn::CallParams{});
  double threshold = k.max_sq;
  std::vector<Scalar> measured;
  for (int64_t i = 0; i < kScan; ++i)
    if (nearest[i] >= 0 && static_cast<double>(sq[i]) <= k.max_sq) measured.push_back(sq[i]);
  std::sort(measured.begin(), measured.end());
  if (k.kept_fraction < 1 && !measured.empty())
    threshold = static_cast<double>(measured[static_cast<size_t>(
        knn::geometry::trim_position(k.kept_fraction, static_cast<int64_t>(measured.size())))]);
  AlignSums total = knn::geometry::no_align_sums();
  for (int64_t first = 0; first < kScan; first += knn::geometry::kAlignSumBlock)
    knn::geometry::add_block(
        total, knn::geometry::cloud_block_sums(
                   c.scan.data(), nearest.data(), sq.data(), first,
                   std::min(knn::geometry::kAlignSumBlock, kScan - first), threshold, f,
                   c.targets.data(), k.planes ? c.normals.data() : nullptr));
  return total;
}

// The step's sums through an aligner, its searches on `engine` in chunks
// of `chunk` points (the search's own default budget: the aligner's
// accounting is not what these tests check).
template <typename Scalar>
AlignSums aligner_sums(knn::BasicCloudAligner<Scalar>& aligner,
                       const knn::BasicIndexEngine<Scalar>& engine, int64_t chunk,
                       bool lists_on_device, const AlignFrame& f, const Case& k) {
  knn::CallParams call;
  call.queries_on_device = call.outputs_on_device = lists_on_device;
  for (int64_t first = 0; first < kScan; first += chunk) {
    const int64_t count = std::min(chunk, kScan - first);
    const Scalar* queries = aligner.move(first, count, f);
    engine.knn(queries, count, 1, aligner.nearest() + first, aligner.sq_distances() + first, call);
  }
  return aligner.sums(f, k.max_sq, k.kept_fraction);
}

bool same_bits(const AlignSums& a, const AlignSums& b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

template <typename Scalar>
knn::CloudAlignRequest<Scalar> request_of(const Scalar* scan, const Scalar* normals,
                                          const Cloud<Scalar>& c, const Case& k) {
  knn::CloudAlignRequest<Scalar> r;
  r.points = scan;
  r.m = kScan;
  r.normals = k.planes ? normals : nullptr;
  r.host_targets = c.targets.data();
  r.trims = k.kept_fraction < 1;
  return r;
}

template <typename Scalar>
class CloudAligner : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CloudAligner, Scalars);

TYPED_TEST(CloudAligner, OpenMPSumsAsTheDefinitionForAnyThreadsAndChunks) {
  using Scalar = TypeParam;
  const Cloud<Scalar> c = make_cloud<Scalar>(3);
  const knn::Backend& omp = knn::omp::omp_backend();
  const auto engine = omp.build_kdtree_index(c.targets.data(), kTargets, 3, params());
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.name());
    const AlignSums first = host_sums(c, *engine, first_step(), k);
    const AlignSums second = host_sums(c, *engine, second_step(), k);
    EXPECT_GT(first.kept, 0);
    EXPECT_LE(first.kept, kScan);
    for (const int threads : {1, 3})
      for (const int64_t chunk : {kScan, int64_t{777}}) {
        SCOPED_TRACE("threads " + std::to_string(threads) + " chunk " + std::to_string(chunk));
        knn::CallParams call;
        call.threads = threads;
        const auto aligner = omp.make_cloud_aligner(
            *engine, request_of(c.scan.data(), c.normals.data(), c, k), call);
        ASSERT_EQ(aligner->chunk_points(), kScan);
        EXPECT_TRUE(
            same_bits(aligner_sums(*aligner, *engine, chunk, false, first_step(), k), first));
        EXPECT_TRUE(
            same_bits(aligner_sums(*aligner, *engine, chunk, false, second_step(), k), second));
      }
  }
}

// A trim keeps fewer points than the reach alone, and point-to-point rows
// count three per point: the cases differ, so the comparison above cannot
// pass by comparing nothing.
TYPED_TEST(CloudAligner, TheCasesSumDifferentSteps) {
  using Scalar = TypeParam;
  const Cloud<Scalar> c = make_cloud<Scalar>(3);
  const auto engine =
      knn::omp::omp_backend().build_kdtree_index(c.targets.data(), kTargets, 3, params());
  const std::vector<Case> all = cases();
  const AlignSums planes = host_sums(c, *engine, first_step(), all[0]);
  const AlignSums points = host_sums(c, *engine, first_step(), all[1]);
  const AlignSums near = host_sums(c, *engine, first_step(), all[2]);
  const AlignSums trimmed = host_sums(c, *engine, first_step(), all[4]);
  EXPECT_EQ(planes.kept, kScan);
  EXPECT_EQ(points.kept, kScan);
  EXPECT_NE(planes.normal_matrix[0], points.normal_matrix[0]);
  EXPECT_LT(near.kept, kScan);
  EXPECT_GT(near.kept, kScan / 2);
  EXPECT_NEAR(static_cast<double>(trimmed.kept), 0.7 * kScan, 5.0);
}

// Device memory of the CUDA backend holding a host vector's values.
template <typename Scalar>
std::unique_ptr<knn::DeviceAllocation> on_device(const knn::Backend& cuda,
                                                 const std::vector<Scalar>& host) {
  std::unique_ptr<knn::DeviceAllocation> a = cuda.allocate(host.size() * sizeof(Scalar));
  cuda.copy_to_device(a->get(), host.data(), host.size() * sizeof(Scalar));
  return a;
}

// The CUDA aligner of the request with the smallest device budget it
// accepts (within 4 KiB, by bisection), plus `extra` bytes.
template <typename Scalar>
std::unique_ptr<knn::BasicCloudAligner<Scalar>> smallest_aligner(
    const knn::Backend& cuda, const knn::BasicIndexEngine<Scalar>& engine,
    const knn::CloudAlignRequest<Scalar>& request, size_t extra) {
  size_t refused = 0, accepted = size_t{1} << 31;
  while (accepted - refused > 4096) {
    knn::CallParams call;
    call.device_memory_limit = refused + (accepted - refused) / 2;
    try {
      cuda.make_cloud_aligner(engine, request, call);
      accepted = call.device_memory_limit;
    } catch (const knn::Error& e) {
      EXPECT_EQ(e.status(), KNN_ERR_DEVICE_OUT_OF_MEMORY) << e.what();
      refused = call.device_memory_limit;
    }
  }
  knn::CallParams call;
  call.device_memory_limit = accepted + extra;
  return cuda.make_cloud_aligner(engine, request, call);
}

TYPED_TEST(CloudAligner, CudaSumsOnTheDeviceAsTheDefinitionInChunks) {
  using Scalar = TypeParam;
  const knn::Backend& cuda = knn::cuda::cuda_backend();
  if (cuda.device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda.set_device(0);
  const Cloud<Scalar> c = make_cloud<Scalar>(3);
  const auto cpu =
      knn::omp::omp_backend().build_kdtree_index(c.targets.data(), kTargets, 3, params());
  const auto d_scan = on_device(cuda, c.scan);
  const auto d_normals = on_device(cuda, c.normals);
  // About 600 moved points per chunk beside the smallest budget.
  const size_t per_point = 3 * sizeof(Scalar) * knn::cuda::kAlignChunkBudgetShare;
  for (const int structure : {KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_BRUTE_FORCE}) {
    const auto gpu = structure == KNN_STRUCTURE_KDTREE
                         ? cuda.build_kdtree_index(c.targets.data(), kTargets, 3, params())
                         : cuda.build_brute_force_index(c.targets.data(), kTargets, 3, params());
    for (const Case& k : cases()) {
      const AlignSums first = host_sums(c, *cpu, first_step(), k);
      const AlignSums second = host_sums(c, *cpu, second_step(), k);
      for (const bool device_arrays : {false, true}) {
        SCOPED_TRACE(k.name() + " structure " + std::to_string(structure) +
                     (device_arrays ? " device arrays" : " host arrays"));
        const knn::CloudAlignRequest<Scalar> request =
            device_arrays ? request_of(static_cast<const Scalar*>(d_scan->get()),
                                       static_cast<const Scalar*>(d_normals->get()), c, k)
                          : request_of(c.scan.data(), c.normals.data(), c, k);
        const auto chunked = smallest_aligner(cuda, *gpu, request, 600 * per_point);
        const int64_t chunk = chunked->chunk_points();
        EXPECT_GE(chunk, 600);
        EXPECT_LT(chunk, kScan / 4);
        EXPECT_TRUE(cuda.is_device_pointer(chunked->nearest()));
        EXPECT_TRUE(cuda.is_device_pointer(chunked->sq_distances()));
        EXPECT_TRUE(same_bits(aligner_sums(*chunked, *gpu, chunk, true, first_step(), k), first));
        EXPECT_TRUE(same_bits(aligner_sums(*chunked, *gpu, chunk, true, second_step(), k), second));
        const auto whole = cuda.make_cloud_aligner(*gpu, request, knn::CallParams{});
        EXPECT_EQ(whole->chunk_points(), kScan);
        EXPECT_TRUE(same_bits(aligner_sums(*whole, *gpu, kScan, true, first_step(), k), first));
      }
    }
  }
}

}  // namespace
