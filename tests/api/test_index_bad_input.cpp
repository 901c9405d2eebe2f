// Bad input to the index API: each gets its status and a message that names
// the argument (and, for coordinates, the row and dimension), and leaves every
// output untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "index_test_helpers.h"

namespace knn_test {
namespace {

constexpr int32_t kUntouched = 0x5a5a5a5a;
constexpr float kUntouchedF = -7.25f;

knn_options cpu_options(int structure = KNN_STRUCTURE_KDTREE) {
  return options_for({KNN_BACKEND_OPENMP, structure});
}

int build(const std::vector<float>& points, int64_t n, int dim, const knn_options* opt,
          knn_index** out) {
  return knn_index_build(points.data(), n, dim, opt, out);
}

// ---- Build --------------------------------------------------------------

TEST(IndexBadInput, BuildArguments) {
  const std::vector<float> points = make_rows(Dist::Uniform, 100, 3, 1);
  const knn_options opt = cpu_options();
  knn_index* index = reinterpret_cast<knn_index*>(&index);
  EXPECT_TRUE(
      fails_with(build(points, 100, 3, &opt, nullptr), KNN_ERR_INVALID_ARGUMENT, "out is NULL"));
  EXPECT_TRUE(fails_with(knn_index_build(nullptr, 100, 3, &opt, &index), KNN_ERR_INVALID_ARGUMENT,
                         "points is NULL while n is 100"));
  EXPECT_EQ(index, nullptr) << "*out is NULL after a failure";
  EXPECT_TRUE(fails_with(build(points, -1, 3, &opt, &index), KNN_ERR_INVALID_ARGUMENT,
                         "n is -1; it must not be negative"));
  EXPECT_TRUE(fails_with(build(points, int64_t{INT32_MAX} + 1, 3, &opt, &index),
                         KNN_ERR_INVALID_ARGUMENT, "n is 2147483648; an index holds at most"));
  EXPECT_TRUE(fails_with(build(points, 10, 0, &opt, &index), KNN_ERR_INVALID_ARGUMENT,
                         "dim is 0; it must be from 1 to 4096"));
  EXPECT_TRUE(
      fails_with(build(points, 10, 4097, &opt, &index), KNN_ERR_INVALID_ARGUMENT, "dim is 4097"));
  EXPECT_TRUE(
      fails_with(build(points, 10, -3, &opt, &index), KNN_ERR_INVALID_ARGUMENT, "dim is -3"));
  EXPECT_EQ(index, nullptr);
}

TEST(IndexBadInput, BuildOptions) {
  const std::vector<float> points = make_rows(Dist::Uniform, 100, 3, 1);
  knn_index* index = nullptr;
  auto with = [&](auto change) {
    knn_options opt = cpu_options();
    change(opt);
    return build(points, 100, 3, &opt, &index);
  };
  EXPECT_TRUE(fails_with(with([](knn_options& o) { o.struct_size = 0; }), KNN_ERR_INVALID_ARGUMENT,
                         "opt->struct_size is 0; it must be at least"));
  EXPECT_TRUE(fails_with(with([](knn_options& o) { o.struct_size = 11; }), KNN_ERR_INVALID_ARGUMENT,
                         "opt->struct_size is 11"));
  EXPECT_TRUE(fails_with(with([](knn_options& o) { o.backend = 3; }), KNN_ERR_INVALID_ARGUMENT,
                         "opt->backend is 3"));
  EXPECT_TRUE(fails_with(with([](knn_options& o) { o.backend = -1; }), KNN_ERR_INVALID_ARGUMENT,
                         "opt->backend is -1"));
  EXPECT_TRUE(fails_with(with([](knn_options& o) { o.structure = 4; }), KNN_ERR_INVALID_ARGUMENT,
                         "opt->structure is 4"));
  EXPECT_TRUE(fails_with(with([](knn_options& o) { o.leaf_size = -2; }), KNN_ERR_INVALID_ARGUMENT,
                         "opt->leaf_size is -2"));
  EXPECT_TRUE(fails_with(with([](knn_options& o) { o.threads = -1; }), KNN_ERR_INVALID_ARGUMENT,
                         "opt->threads is -1"));
  EXPECT_TRUE(fails_with(with([](knn_options& o) { o.device = -2; }), KNN_ERR_INVALID_ARGUMENT,
                         "opt->device is -2"));
  EXPECT_EQ(index, nullptr);
}

// A caller built against a shorter struct: the fields past struct_size get
// their defaults, whatever the bytes there hold.
TEST(IndexBadInput, ShortOptionsStructReadsOnlyItsFields) {
  const std::vector<float> points = make_rows(Dist::Uniform, 100, 3, 1);
  knn_options opt = cpu_options(KNN_STRUCTURE_BRUTE_FORCE);
  opt.threads = -99;  // past struct_size: ignored
  opt.struct_size = offsetof(knn_options, structure) + sizeof(int);
  knn_index* index = nullptr;
  ASSERT_EQ(build(points, 100, 3, &opt, &index), KNN_OK) << knn_last_error();
  IndexHandle owned(index);
  int backend = -1, structure = -1;
  ASSERT_EQ(knn_index_info(index, nullptr, nullptr, &backend, &structure), KNN_OK);
  EXPECT_EQ(backend, KNN_BACKEND_OPENMP);
  EXPECT_EQ(structure, KNN_STRUCTURE_BRUTE_FORCE);
}

TEST(IndexBadInput, GridNeedsThreeDimensions) {
  const std::vector<float> points = make_rows(Dist::Uniform, 100, 2, 1);
  const knn_options opt = cpu_options(KNN_STRUCTURE_GRID);
  knn_index* index = nullptr;
  EXPECT_TRUE(fails_with(build(points, 100, 2, &opt, &index), KNN_ERR_UNSUPPORTED,
                         "KNN_STRUCTURE_GRID needs dim 3, dim is 2"));
  EXPECT_EQ(index, nullptr);
}

TEST(IndexBadInput, DeviceChoicesWithoutADevice) {
  if (cuGetDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  const std::vector<float> points = make_rows(Dist::Uniform, 100, 3, 1);
  knn_options opt = cpu_options();
  opt.backend = KNN_BACKEND_CUDA;
  knn_index* index = nullptr;
  EXPECT_TRUE(
      fails_with(build(points, 100, 3, &opt, &index), KNN_ERR_NO_DEVICE, "no usable CUDA device"));
  // AUTO runs on the CPU, whatever device number it names.
  opt.backend = KNN_BACKEND_AUTO;
  opt.device = 3;
  ASSERT_EQ(build(points, 100, 3, &opt, &index), KNN_OK) << knn_last_error();
  EXPECT_EQ(knn_index_free(index), KNN_OK);
}

TEST(IndexBadInput, DeviceNumberOutOfRange) {
  const int devices = cuGetDeviceCount();
  if (devices == 0) GTEST_SKIP() << "no CUDA device";
  const std::vector<float> points = make_rows(Dist::Uniform, 100, 3, 1);
  knn_options opt = cpu_options();
  opt.backend = KNN_BACKEND_CUDA;
  opt.device = devices;
  knn_index* index = nullptr;
  EXPECT_TRUE(fails_with(build(points, 100, 3, &opt, &index), KNN_ERR_INVALID_ARGUMENT,
                         "opt->device is " + std::to_string(devices)));
}

TEST(IndexBadInput, NonFinitePointsAreNamed) {
  for (const int structure : {KNN_STRUCTURE_KDTREE, KNN_STRUCTURE_BRUTE_FORCE}) {
    std::vector<float> points = make_rows(Dist::Uniform, 5000, 5, 1);
    points[4321 * 5 + 3] = std::numeric_limits<float>::quiet_NaN();
    points[4400 * 5 + 0] = std::numeric_limits<float>::infinity();
    const knn_options opt = cpu_options(structure);
    knn_index* index = nullptr;
    EXPECT_TRUE(fails_with(build(points, 5000, 5, &opt, &index), KNN_ERR_NONFINITE_INPUT,
                           "point 4321 has a NaN coordinate (dimension 3)"));
    points[4321 * 5 + 3] = 0.5f;
    EXPECT_TRUE(fails_with(build(points, 5000, 5, &opt, &index), KNN_ERR_NONFINITE_INPUT,
                           "point 4400 has an infinite coordinate (dimension 0)"));
    EXPECT_EQ(index, nullptr);
  }
}

// ---- Calls on an index ------------------------------------------------------

class IndexCallBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    points_ = make_rows(Dist::Uniform, 200, 4, 1);
    queries_ = make_rows(Dist::Uniform, 10, 4, 2);
    index_ = build_index(points_, 4, cpu_options());
    ASSERT_TRUE(index_);
  }
  bool untouched() const {
    for (int32_t v : idx_)
      if (v != kUntouched) return false;
    for (float v : dist_)
      if (v != kUntouchedF) return false;
    for (int32_t v : counts_)
      if (v != kUntouched) return false;
    return true;
  }
  std::vector<float> points_, queries_;
  IndexHandle index_;
  std::vector<int32_t> idx_ = std::vector<int32_t>(10 * 200, kUntouched);
  std::vector<float> dist_ = std::vector<float>(10 * 200, kUntouchedF);
  std::vector<int32_t> counts_ = std::vector<int32_t>(200, kUntouched);
};

TEST_F(IndexCallBadInput, Query) {
  const float* q = queries_.data();
  EXPECT_TRUE(fails_with(knn_index_query(nullptr, q, 10, 3, idx_.data(), dist_.data(), nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "index is NULL"));
  knn_index* i = index_.get();
  EXPECT_TRUE(fails_with(knn_index_query(i, nullptr, 10, 3, idx_.data(), dist_.data(), nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "queries is NULL while m is 10"));
  EXPECT_TRUE(fails_with(knn_index_query(i, q, -4, 3, idx_.data(), dist_.data(), nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "m is -4"));
  EXPECT_TRUE(fails_with(knn_index_query(i, q, 10, 0, idx_.data(), dist_.data(), nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "k is 0; it must be at least 1"));
  EXPECT_TRUE(fails_with(knn_index_query(i, q, 10, 3, nullptr, dist_.data(), nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "indices is NULL while m is 10"));
  knn_options opt = cpu_options();
  opt.threads = -3;
  EXPECT_TRUE(fails_with(knn_index_query(i, q, 10, 3, idx_.data(), dist_.data(), &opt),
                         KNN_ERR_INVALID_ARGUMENT, "opt->threads is -3"));
  opt = cpu_options();
  opt.struct_size = 4;
  EXPECT_TRUE(fails_with(knn_index_query(i, q, 10, 3, idx_.data(), dist_.data(), &opt),
                         KNN_ERR_INVALID_ARGUMENT, "opt->struct_size is 4"));
  std::vector<float> bad = queries_;
  bad[7 * 4 + 2] = -std::numeric_limits<float>::infinity();
  EXPECT_TRUE(fails_with(knn_index_query(i, bad.data(), 10, 3, idx_.data(), dist_.data(), nullptr),
                         KNN_ERR_NONFINITE_INPUT,
                         "query 7 has an infinite coordinate (dimension 2)"));
  EXPECT_TRUE(untouched());
  // m = 0 is valid and writes nothing; so are NULL distances.
  EXPECT_EQ(knn_index_query(i, nullptr, 0, 3, nullptr, nullptr, nullptr), KNN_OK);
  EXPECT_TRUE(untouched());
  EXPECT_EQ(knn_index_query(i, q, 10, 3, idx_.data(), nullptr, nullptr), KNN_OK);
  EXPECT_EQ(dist_[0], kUntouchedF);
}

TEST_F(IndexCallBadInput, QuerySelf) {
  EXPECT_TRUE(fails_with(knn_index_query_self(nullptr, 3, 1, idx_.data(), dist_.data()),
                         KNN_ERR_INVALID_ARGUMENT, "index is NULL"));
  EXPECT_TRUE(fails_with(knn_index_query_self(index_.get(), 0, 1, idx_.data(), dist_.data()),
                         KNN_ERR_INVALID_ARGUMENT, "k is 0"));
  EXPECT_TRUE(fails_with(knn_index_query_self(index_.get(), 3, 0, nullptr, dist_.data()),
                         KNN_ERR_INVALID_ARGUMENT, "indices is NULL"));
  EXPECT_TRUE(untouched());
}

TEST_F(IndexCallBadInput, Radius) {
  const float* q = queries_.data();
  knn_index* i = index_.get();
  int32_t* ind = idx_.data();
  float* d = dist_.data();
  int32_t* c = counts_.data();
  EXPECT_TRUE(fails_with(knn_index_radius(nullptr, q, 10, 1.0f, 4, ind, d, c, nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "index is NULL"));
  EXPECT_TRUE(fails_with(knn_index_radius(i, q, 10, -0.5f, 4, ind, d, c, nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "radius is -0.5; it must be a non-negative"));
  EXPECT_TRUE(fails_with(knn_index_radius(i, q, 10, std::nanf(""), 4, ind, d, c, nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "radius is nan"));
  EXPECT_TRUE(fails_with(knn_index_radius(i, q, 10, 1.0f, -1, ind, d, c, nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "max_neighbors is -1"));
  EXPECT_TRUE(fails_with(knn_index_radius(i, q, 10, 1.0f, 0, nullptr, nullptr, nullptr, nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "counts is NULL while max_neighbors is 0"));
  EXPECT_TRUE(fails_with(knn_index_radius(i, q, 10, 1.0f, 4, nullptr, d, c, nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "indices is NULL while m is 10"));
  EXPECT_TRUE(fails_with(knn_index_radius(i, nullptr, 10, 1.0f, 4, ind, d, c, nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "queries is NULL while m is 10"));
  std::vector<float> bad = queries_;
  bad[9 * 4 + 0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(fails_with(knn_index_radius(i, bad.data(), 10, 1.0f, 4, ind, d, c, nullptr),
                         KNN_ERR_NONFINITE_INPUT, "query 9 has a NaN coordinate (dimension 0)"));
  EXPECT_TRUE(untouched());
}

TEST_F(IndexCallBadInput, InfoAndFree) {
  int64_t n = -1;
  EXPECT_TRUE(fails_with(knn_index_info(nullptr, &n, nullptr, nullptr, nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "index is NULL"));
  EXPECT_EQ(n, -1);
  EXPECT_EQ(knn_index_free(nullptr), KNN_OK);
  // Not an index: the registry of live handles says so, without reading it.
  std::vector<uint64_t> garbage(16, 0x1234);
  const knn_index* fake = reinterpret_cast<const knn_index*>(garbage.data());
  EXPECT_TRUE(fails_with(knn_index_info(fake, &n, nullptr, nullptr, nullptr),
                         KNN_ERR_INVALID_ARGUMENT, "not a live index"));
  EXPECT_TRUE(fails_with(knn_index_free(const_cast<knn_index*>(fake)), KNN_ERR_INVALID_ARGUMENT,
                         "not a live index"));
}

}  // namespace
}  // namespace knn_test
