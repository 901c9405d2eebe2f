// Index serialization (knn_index_serialized_size / _serialize / _deserialize):
// a loaded index answers bit-identically to the saved one (kNN, all-kNN,
// radius) on every structure, and to the oracle; a CPU index loads onto the
// GPU and back where a device is present; every truncation, every single-byte
// corruption, trailing bytes and hostile headers are refused with a status,
// a message and *out NULL.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "index_test_helpers.h"

namespace knn_test {
namespace {

IndexHandle deserialize(const std::vector<unsigned char>& buffer, const knn_options& opt) {
  knn_index* index = nullptr;
  const int status = knn_index_deserialize(buffer.data(), buffer.size(), &opt, &index);
  EXPECT_EQ(status, KNN_OK) << knn_last_error();
  return IndexHandle(status == KNN_OK ? index : nullptr);
}

struct Info {
  int64_t n = -1;
  int dim = -1, backend = -1, structure = -1;
};
Info info_of(const knn_index* index) {
  Info i;
  EXPECT_EQ(knn_index_info(index, &i.n, &i.dim, &i.backend, &i.structure), KNN_OK);
  return i;
}

class Serialize : public ::testing::TestWithParam<IndexConfig> {
 protected:
  void SetUp() override { KNN_SKIP_WITHOUT_BACKEND(GetParam()); }
};

// Save, load on the same backend: same info, bit-identical answers, and the
// loaded index saves to the same bytes.
TEST_P(Serialize, LoadedIndexAnswersBitIdentically) {
  // A leaf size of its own on the kd-tree: the format keeps it.
  const knn_options opt =
      options_for(GetParam(), 0, GetParam().structure == KNN_STRUCTURE_KDTREE ? 7 : 0);
  const std::vector<int> dims =
      GetParam().structure == KNN_STRUCTURE_GRID ? std::vector<int>{3} : std::vector<int>{1, 3, 9};
  for (const int dim : dims)
    for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{3000}}) {
      SCOPED_TRACE("dim=" + std::to_string(dim) + " n=" + std::to_string(n));
      const std::vector<float> points = make_rows(Dist::Duplicates, n, dim, 11);
      const std::vector<float> queries = make_query_rows(Dist::Duplicates, 200, dim, 12);
      IndexHandle saved = build_index(points, dim, opt);
      ASSERT_TRUE(saved);
      const std::vector<unsigned char> bytes = serialize(saved.get());
      EXPECT_EQ(bytes.size(), 64 + static_cast<size_t>(n) * dim * 4 + 4);
      IndexHandle loaded = deserialize(bytes, opt);
      ASSERT_TRUE(loaded);
      const Info a = info_of(saved.get()), b = info_of(loaded.get());
      EXPECT_EQ(a.n, b.n);
      EXPECT_EQ(a.dim, b.dim);
      EXPECT_EQ(a.backend, b.backend);
      EXPECT_EQ(a.structure, b.structure);
      const KnnResult want = oracle_knn(points.data(), n, queries.data(), 200, dim, 6);
      const KnnResult got = query_index(loaded.get(), queries, dim, 6);
      EXPECT_TRUE(same_knn(want, got));
      EXPECT_TRUE(same_knn(query_index(saved.get(), queries, dim, 6), got));
      EXPECT_TRUE(
          same_knn(query_self(saved.get(), n, 4, true), query_self(loaded.get(), n, 4, true)));
      EXPECT_TRUE(same_radius(radius_index(saved.get(), queries, dim, 0.2f, 9),
                              radius_index(loaded.get(), queries, dim, 0.2f, 9)));
      EXPECT_EQ(serialize(loaded.get()), bytes);
    }
}

// A saved index loads on the other backend (AUTO and the other kind where a
// device is present) and answers the same.
TEST_P(Serialize, LoadsOnTheOtherBackend) {
  if (cuGetDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const knn_options opt = options_for(GetParam());
  const std::vector<float> points = make_rows(Dist::Clustered, 5000, 3, 21);
  const std::vector<float> queries = make_query_rows(Dist::Clustered, 300, 3, 22);
  IndexHandle saved = build_index(points, 3, opt);
  ASSERT_TRUE(saved);
  IndexConfig other = GetParam();
  other.backend = other.backend == KNN_BACKEND_CUDA ? KNN_BACKEND_OPENMP : KNN_BACKEND_CUDA;
  IndexHandle loaded = deserialize(serialize(saved.get()), options_for(other));
  ASSERT_TRUE(loaded);
  EXPECT_EQ(info_of(loaded.get()).backend, other.backend);
  EXPECT_EQ(info_of(loaded.get()).structure, info_of(saved.get()).structure);
  EXPECT_TRUE(
      same_knn(query_index(saved.get(), queries, 3, 8), query_index(loaded.get(), queries, 3, 8)));
}

const IndexConfig kConfigs[] = {
    {KNN_BACKEND_OPENMP, KNN_STRUCTURE_KDTREE}, {KNN_BACKEND_OPENMP, KNN_STRUCTURE_BRUTE_FORCE},
    {KNN_BACKEND_OPENMP, KNN_STRUCTURE_GRID},   {KNN_BACKEND_OPENMP, KNN_STRUCTURE_AUTO},
    {KNN_BACKEND_CUDA, KNN_STRUCTURE_KDTREE},   {KNN_BACKEND_CUDA, KNN_STRUCTURE_BRUTE_FORCE},
    {KNN_BACKEND_CUDA, KNN_STRUCTURE_GRID},
};
INSTANTIATE_TEST_SUITE_P(All, Serialize, ::testing::ValuesIn(kConfigs), IndexConfigName());

knn_options cpu_options() {
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  return opt;
}

// A refused load: a listed status, a message, *out NULL.
void expect_refused(const unsigned char* data, size_t bytes, const char* message_part) {
  const knn_options opt = cpu_options();
  knn_index* out = reinterpret_cast<knn_index*>(&out);  // not NULL: the call must clear it
  const int status = knn_index_deserialize(data, bytes, &opt, &out);
  EXPECT_TRUE(status == KNN_ERR_INVALID_ARGUMENT || status == KNN_ERR_UNSUPPORTED)
      << "status " << status << " for " << bytes << " bytes";
  EXPECT_EQ(out, nullptr);
  if (message_part) {
    EXPECT_NE(std::string(knn_last_error()).find(message_part), std::string::npos)
        << knn_last_error();
  }
  knn_index_free(status == KNN_OK ? out : nullptr);
}

std::vector<unsigned char> small_buffer() {
  const std::vector<float> points = make_rows(Dist::Uniform, 6, 2, 5);
  IndexHandle index = build_index(points, 2, cpu_options());
  return serialize(index.get());
}

TEST(SerializeRefusals, EveryTruncationAndTrailingBytes) {
  const std::vector<unsigned char> good = small_buffer();
  ASSERT_EQ(good.size(), 64u + 6 * 2 * 4 + 4);
  for (size_t len = 0; len < good.size(); ++len) expect_refused(good.data(), len, "truncated");
  std::vector<unsigned char> longer = good;
  longer.push_back(0);
  expect_refused(longer.data(), longer.size(), "trailing bytes");
}

// Flipping any bit of any byte is caught: by a header check or the checksum.
TEST(SerializeRefusals, EverySingleBitFlip) {
  const std::vector<unsigned char> good = small_buffer();
  for (size_t at = 0; at < good.size(); ++at)
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<unsigned char> bad = good;
      bad[at] ^= static_cast<unsigned char>(1u << bit);
      SCOPED_TRACE("byte " + std::to_string(at) + " bit " + std::to_string(bit));
      expect_refused(bad.data(), bad.size(), nullptr);
    }
  std::vector<unsigned char> bad = good;
  bad[64] ^= 1;  // a coordinate
  expect_refused(bad.data(), bad.size(), "CRC-32C");
  bad = good;
  bad[0] = 'X';
  expect_refused(bad.data(), bad.size(), "magic");
  bad = good;
  bad[8] = 2;  // version 2
  expect_refused(bad.data(), bad.size(), "format version 2");
  bad = good;
  std::swap(bad[12], bad[15]);
  std::swap(bad[13], bad[14]);
  expect_refused(bad.data(), bad.size(), "other byte order");
}

// A header that claims 2^31 - 1 points of dim 4096 in a 100-byte buffer is
// refused from the sizes alone (nothing of that size is allocated).
TEST(SerializeRefusals, HostileSizesRefusedBeforeAllocating) {
  std::vector<unsigned char> bad = small_buffer();
  const uint32_t dim = 4096;
  const uint64_t n = 2147483647u, payload = n * dim * 4;
  std::memcpy(&bad[20], &dim, 4);
  std::memcpy(&bad[24], &n, 8);
  std::memcpy(&bad[40], &payload, 8);
  expect_refused(bad.data(), bad.size(), "truncated");
  const uint64_t too_many = uint64_t{1} << 40;
  std::memcpy(&bad[24], &too_many, 8);
  expect_refused(bad.data(), bad.size(), "beyond 2^31 - 1");
}

TEST(SerializeRefusals, BadArguments) {
  const std::vector<unsigned char> good = small_buffer();
  knn_index* out = nullptr;
  EXPECT_EQ(knn_index_deserialize(nullptr, 10, nullptr, &out), KNN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(knn_last_error()).find("buffer is NULL while bytes is 10"),
            std::string::npos);
  EXPECT_EQ(knn_index_deserialize(nullptr, 0, nullptr, &out), KNN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(knn_last_error()).find("truncated"), std::string::npos);
  EXPECT_EQ(knn_index_deserialize(good.data(), good.size(), nullptr, nullptr),
            KNN_ERR_INVALID_ARGUMENT);
  const std::vector<float> points = make_rows(Dist::Uniform, 6, 2, 5);
  IndexHandle index = build_index(points, 2, cpu_options());
  std::vector<unsigned char> short_buffer(good.size() - 1, 0xCD);
  EXPECT_EQ(knn_index_serialize(index.get(), short_buffer.data(), short_buffer.size()),
            KNN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(knn_last_error()).find("serializes to 116"), std::string::npos)
      << knn_last_error();
  EXPECT_EQ(short_buffer, std::vector<unsigned char>(good.size() - 1, 0xCD));
  EXPECT_EQ(knn_index_serialized_size(index.get(), nullptr), KNN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(knn_index_serialized_size(nullptr, nullptr), KNN_ERR_INVALID_ARGUMENT);
  // The caller's leaf_size and structure are ignored at load: the buffer's serve.
  knn_options other = cpu_options();
  other.structure = KNN_STRUCTURE_GRID;
  other.leaf_size = 3;
  IndexHandle loaded = deserialize(good, other);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(serialize(loaded.get()), good);
}

}  // namespace
}  // namespace knn_test
