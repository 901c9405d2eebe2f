// First touch of a caller's output pages ahead of the copies that fill them
// (issue 53, item 6). A freshly allocated host buffer is only address space:
// each page costs a fault and the kernel's zeroing the first time it is
// written. An all-kNN of 10^8 points at k = 100 into 40 GB of fresh host
// memory spent 4.98 s (H200), the search and the copies a fraction of that:
// the copy threads faulted the pages in one by one as they wrote. A
// PageToucher faults a range in on threads of its own, in the background,
// while the device searches; the copy into the range waits for its ticket
// and then writes warm pages.
//
// It writes a zero into one byte of every page of the ranges it is given:
// only for output ranges that the call writes in full afterwards (or fills
// with the missing value on a failure), never for input.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "../common/non_copyable.h"

namespace knn {

class PageToucher : NonCopyable {
 public:
  // `threads` background threads (at least 1).
  explicit PageToucher(int threads);
  // Stops touching (ranges not yet reached are left as they are: the copies
  // will fault them) and joins the threads.
  ~PageToucher();

  // Queues [data, data + bytes) and returns its ticket.
  int64_t touch(void* data, size_t bytes);
  // Returns once the range of `ticket` is touched.
  void wait(int64_t ticket);

  // Threads a toucher beside the copy threads of a call gets on this host:
  // the cores left over by `busy` threads, at least 1.
  static int threads_beside(int busy);

 private:
  struct Piece {
    char* data;
    size_t bytes;
    int64_t ticket;
  };
  void work();

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<Piece> pieces_;
  std::vector<int64_t> pending_;  // pieces not yet touched, per ticket
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace knn
