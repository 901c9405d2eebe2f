// The one device budget (engine/device_budget.h) that every GPU plan takes
// (the classic planner, the index engines' query chunks, an automatic
// build's backend, the point-in-polygon fill, the shares of a split call),
// on the host: the margin, the reading of KNN_DEVICE_MEMORY_LIMIT, the
// precedence device_memory_limit > KNN_DEVICE_MEMORY_LIMIT > free memory,
// the refusal of a budget too small for one query and of a build beyond the
// limit, with their messages.
// The figures are worked out by hand here, not by the rule's own code.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "../../engine/device_budget.h"
#include "knn_gpgpu.h"

namespace knn_test {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kGiB = size_t{1} << 30;

// The status and message a call throws with; KNN_OK and "" when it returns.
template <class Call>
std::pair<int, std::string> refusal(Call call) {
  try {
    call();
  } catch (const knn::Error& e) {
    return {e.status(), e.what()};
  }
  return {KNN_OK, ""};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(DeviceBudget, MarginIsTheLargerOf256MiBAndASixteenth) {
  EXPECT_EQ(knn::device_memory_margin(0), 256 * kMiB);
  EXPECT_EQ(knn::device_memory_margin(1 * kGiB), 256 * kMiB);
  EXPECT_EQ(knn::device_memory_margin(4 * kGiB), 256 * kMiB);  // 4 GiB / 16 = 256 MiB
  EXPECT_EQ(knn::device_memory_margin(4 * kGiB + 16 * kMiB), 257 * kMiB);
  EXPECT_EQ(knn::device_memory_margin(80 * kGiB), 5 * kGiB);
}

TEST(DeviceBudget, FreeMemoryLessTheMarginWithoutALimit) {
  const knn::DeviceBudget budget = knn::device_budget_of(0, nullptr, 80 * kGiB);
  EXPECT_EQ(budget.limit, 0u);
  EXPECT_EQ(budget.bytes(), 75 * kGiB);
  EXPECT_TRUE(contains(budget.describe(), "85899345920 free bytes less a margin of 5368709120"))
      << budget.describe();
  EXPECT_EQ(knn::device_budget_of(0, nullptr, 1 * kGiB).bytes(), 768 * kMiB);
  // Less free than the margin, or no device at all: nothing to use.
  EXPECT_EQ(knn::device_budget_of(0, nullptr, 200 * kMiB).bytes(), 0u);
  EXPECT_EQ(knn::device_budget_of(0, nullptr, 0).bytes(), 0u);
}

TEST(DeviceBudget, EnvironmentValueIsDecimalBytesAndNothingElse) {
  EXPECT_EQ(knn::parse_device_memory_limit(nullptr), 0u);
  EXPECT_EQ(knn::parse_device_memory_limit(""), 0u);
  EXPECT_EQ(knn::parse_device_memory_limit("0"), 0u);
  EXPECT_EQ(knn::parse_device_memory_limit("4096"), 4096u);
  EXPECT_EQ(knn::parse_device_memory_limit("0067108864"), 64 * kMiB);
  const std::string max = std::to_string(std::numeric_limits<size_t>::max());
  EXPECT_EQ(knn::parse_device_memory_limit(max.c_str()), std::numeric_limits<size_t>::max());
  // One more than size_t holds, units, signs, blanks, hexadecimal, fractions.
  std::string beyond = max;
  ++beyond.back();  // ...615 -> ...616 on 64 bits, ...295 -> ...296 on 32
  for (const char* text :
       {beyond.c_str(), "8G", "64MiB", "-1", "+64", " 64", "64 ", "0x100", "1e9", "1.5", "abc"}) {
    const auto [status, message] = refusal([&] { knn::parse_device_memory_limit(text); });
    EXPECT_EQ(status, KNN_ERR_INVALID_ARGUMENT) << text;
    EXPECT_TRUE(contains(message, std::string("KNN_DEVICE_MEMORY_LIMIT is \"") + text + "\""))
        << message;
  }
}

TEST(DeviceBudget, CallLimitThenEnvironmentThenFreeMemory) {
  const size_t free_bytes = 8 * kGiB;  // usable: 8 GiB - 512 MiB
  const knn::DeviceBudget call = knn::device_budget_of(100 * kMiB, "50000000", free_bytes);
  EXPECT_EQ(call.limit, 100 * kMiB);
  EXPECT_STREQ(call.limit_source, "device_memory_limit");
  EXPECT_EQ(call.bytes(), 100 * kMiB);
  EXPECT_EQ(call.describe(), "104857600 bytes, the device_memory_limit");

  const knn::DeviceBudget env = knn::device_budget_of(0, "50000000", free_bytes);
  EXPECT_EQ(env.limit, 50000000u);
  EXPECT_STREQ(env.limit_source, "KNN_DEVICE_MEMORY_LIMIT");
  EXPECT_EQ(env.bytes(), 50000000u);

  // "0" and "" in the environment: no limit, as device_memory_limit = 0.
  for (const char* none : {"0", ""})
    EXPECT_EQ(knn::device_budget_of(0, none, free_bytes).bytes(), 8 * kGiB - 512 * kMiB) << none;

  // The call's own limit wins: the environment is not even read.
  EXPECT_EQ(refusal([&] { knn::device_budget_of(1 * kMiB, "8G", free_bytes); }).first, KNN_OK);
  EXPECT_EQ(refusal([&] { knn::device_budget_of(0, "8G", free_bytes); }).first,
            KNN_ERR_INVALID_ARGUMENT);
}

TEST(DeviceBudget, ALimitNeverGoesBeyondTheFreeMemoryLessTheMargin) {
  const knn::DeviceBudget budget = knn::device_budget_of(16 * kGiB, nullptr, 8 * kGiB);
  EXPECT_EQ(budget.limit, 16 * kGiB);
  EXPECT_EQ(budget.bytes(), 8 * kGiB - 512 * kMiB);
  EXPECT_TRUE(contains(budget.describe(), "(less than the device_memory_limit, 17179869184)"))
      << budget.describe();
  EXPECT_EQ(knn::device_budget_of(0, "17179869184", 8 * kGiB).bytes(), 8 * kGiB - 512 * kMiB);
  // Without a device the budget is 0 whatever the limit.
  EXPECT_EQ(knn::device_budget_of(64 * kMiB, nullptr, 0).bytes(), 0u);
}

TEST(DeviceBudget, ChunkIsWhatFitsAfterTheFixedBytes) {
  const knn::DeviceBudget budget = knn::device_budget_of(64 * kMiB, nullptr, 80 * kGiB);
  // (64 MiB - 1 MiB) / 1000 bytes = 66060 queries (66060.288).
  EXPECT_EQ(knn::queries_within_budget(budget, 1000, 1 * kMiB, int64_t{1} << 20), 66060);
  EXPECT_EQ(knn::queries_within_budget(budget, 1000, 1 * kMiB, 5000), 5000);
  // Exactly one query: fixed + per_query == budget.
  EXPECT_EQ(knn::queries_within_budget(budget, 1 * kMiB, 63 * kMiB, 100), 1);
  // 0 bytes per query counts as 1, never a division by zero.
  EXPECT_EQ(knn::queries_within_budget(budget, 0, 0, 7), 7);
}

TEST(DeviceBudget, TooSmallForOneQueryIsRefusedSayingWhy) {
  const knn::DeviceBudget limited = knn::device_budget_of(0, "4096", 80 * kGiB);
  const auto [status, message] =
      refusal([&] { knn::queries_within_budget(limited, 1000, 4000, 100); });
  EXPECT_EQ(status, KNN_ERR_DEVICE_OUT_OF_MEMORY);
  EXPECT_EQ(message,
            "a query chunk needs 4000 device bytes fixed plus 1000 per query, but the device "
            "budget is 4096 bytes, the KNN_DEVICE_MEMORY_LIMIT");
  // Fixed bytes alone beyond the budget.
  EXPECT_EQ(refusal([&] { knn::queries_within_budget(limited, 1, 4097, 100); }).first,
            KNN_ERR_DEVICE_OUT_OF_MEMORY);
  // A full device: the message gives the free memory and the margin.
  const knn::DeviceBudget full = knn::device_budget_of(0, nullptr, 100 * kMiB);
  const std::string why = refusal([&] { knn::queries_within_budget(full, 1, 0, 100); }).second;
  EXPECT_TRUE(
      contains(why, "0 bytes, the device's 104857600 free bytes less a margin of 268435456"))
      << why;
}

TEST(DeviceBudget, ABuildBeyondTheLimitInForceIsRefusedAndNoneWithout) {
  const std::string what = "building a CUDA grid of 1000 points";
  // Within, or exactly at, the limit: built.
  const knn::DeviceBudget option = knn::device_budget_of(64 * kMiB, nullptr, 80 * kGiB);
  EXPECT_EQ(refusal([&] { knn::require_build_within_limit(option, 64 * kMiB, what); }).first,
            KNN_OK);
  const auto [status, message] =
      refusal([&] { knn::require_build_within_limit(option, 64 * kMiB + 1, what); });
  EXPECT_EQ(status, KNN_ERR_DEVICE_OUT_OF_MEMORY);
  EXPECT_EQ(message,
            "building a CUDA grid of 1000 points needs 67108865 device bytes, more than the "
            "device_memory_limit (67108864)");
  const knn::DeviceBudget env = knn::device_budget_of(0, "4096", 80 * kGiB);
  EXPECT_EQ(refusal([&] { knn::require_build_within_limit(env, 4097, what); }).second,
            "building a CUDA grid of 1000 points needs 4097 device bytes, more than the "
            "KNN_DEVICE_MEMORY_LIMIT (4096)");
  // Without a limit a build is not refused beforehand, even beyond the free
  // memory: the allocation says whether the device holds it.
  const knn::DeviceBudget none = knn::device_budget_of(0, nullptr, 1 * kGiB);
  EXPECT_EQ(refusal([&] { knn::require_build_within_limit(none, 2 * kGiB, what); }).first, KNN_OK);
}

}  // namespace
}  // namespace knn_test
