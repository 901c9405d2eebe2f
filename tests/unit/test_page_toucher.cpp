// The first touch of output pages ahead of the copies (engine/page_toucher.h,
// issue 53 item 6): every page a range overlaps is resident once its ticket
// is waited for (mincore, the kernel's own account, on fresh anonymous
// memory), no byte outside the ranges is written, and a toucher destroyed
// with work queued stops cleanly. The CUDA copy-out that uses it is checked
// in test_index_gpu (KdTreeGpu.AllKnnIntoFreshHostMemoryAnswersAsIntoWarmMemory).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "../../engine/page_toucher.h"

namespace {

#if defined(__linux__)
// Fresh anonymous memory (no page resident) of `bytes`, unmapped at the end.
class FreshPages {
 public:
  explicit FreshPages(size_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
  }
  ~FreshPages() {
    if (data_) munmap(data_, bytes_);
  }
  FreshPages(const FreshPages&) = delete;
  FreshPages& operator=(const FreshPages&) = delete;
  char* data() const { return data_; }

  // Residency of every page, from the kernel.
  std::vector<bool> resident() const {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> v((bytes_ + page - 1) / page);
    EXPECT_EQ(mincore(data_, bytes_, v.data()), 0);
    std::vector<bool> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = (v[i] & 1) != 0;
    return out;
  }

 private:
  char* data_ = nullptr;
  size_t bytes_;
};

TEST(PageToucher, EveryPageARangeOverlapsIsResidentOnceWaitedForAndNoOther) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages = 3000;  // several pieces of the toucher
  FreshPages fresh(pages * page);
  ASSERT_NE(fresh.data(), nullptr);
  for (bool r : fresh.resident()) ASSERT_FALSE(r);
  // Ranges of odd alignments and lengths, pages apart.
  struct Range {
    size_t first, bytes;
  };
  const std::vector<Range> ranges = {{page + 100, 5},
                                     {3 * page - 1, 2},
                                     {10 * page + 7, 9 * page},
                                     {40 * page, page},
                                     {50 * page + 1, 2000 * page + 13}};
  knn::PageToucher toucher(3);
  std::vector<int64_t> tickets;
  for (const Range& r : ranges) tickets.push_back(toucher.touch(fresh.data() + r.first, r.bytes));
  // Waited for in reverse order: each ticket stands for its own range.
  for (size_t i = tickets.size(); i-- > 0;) toucher.wait(tickets[i]);
  std::vector<bool> expected(pages, false);
  for (const Range& r : ranges)
    for (size_t p = r.first / page; p <= (r.first + r.bytes - 1) / page; ++p) expected[p] = true;
  const std::vector<bool> resident = fresh.resident();
  for (size_t p = 0; p < pages; ++p) EXPECT_EQ(resident[p], expected[p]) << "page " << p;
}
#endif

TEST(PageToucher, WritesNoByteOutsideItsRanges) {
  std::vector<unsigned char> buffer(size_t{10} << 20, 0xAB);
  const size_t first = 12345, bytes = (size_t{6} << 20) + 777;
  {
    knn::PageToucher toucher(2);
    toucher.wait(toucher.touch(buffer.data() + first, bytes));
    toucher.wait(toucher.touch(buffer.data(), 0));  // an empty range is done at once
  }
  for (size_t i = 0; i < buffer.size(); ++i) {
    if (i < first || i >= first + bytes) {
      ASSERT_EQ(buffer[i], 0xAB) << i;
    }
  }
}

TEST(PageToucher, DestroyedWithWorkQueuedStopsCleanly) {
  std::vector<char> buffer(size_t{64} << 20);
  for (int round = 0; round < 20; ++round) {
    knn::PageToucher toucher(knn::PageToucher::threads_beside(0));
    for (size_t at = 0; at < buffer.size(); at += size_t{1} << 20)
      toucher.touch(buffer.data() + at, size_t{1} << 20);
  }
  EXPECT_GE(knn::PageToucher::threads_beside(1 << 20), 1);
}

}  // namespace
