#include "page_toucher.h"

#include <algorithm>
#include <cstdint>

namespace knn {
namespace {
// A page on every host the library runs on is at least this large; touching
// every 4 KiB of a larger page costs one fault and a few cache lines more.
constexpr size_t kPageBytes = 4096;
// Ranges are handed out in pieces of this size, so that every thread takes
// part in one large range.
constexpr size_t kPieceBytes = size_t{4} << 20;
}  // namespace

PageToucher::PageToucher(int threads) {
  for (int t = 0; t < std::max(threads, 1); ++t) threads_.emplace_back([this] { work(); });
}

PageToucher::~PageToucher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    pieces_.clear();
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

int64_t PageToucher::touch(void* data, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t ticket = static_cast<int64_t>(pending_.size());
  int64_t pieces = 0;
  for (size_t at = 0; at < bytes; at += kPieceBytes, ++pieces)
    pieces_.push_back({static_cast<char*>(data) + at, std::min(kPieceBytes, bytes - at), ticket});
  pending_.push_back(pieces);
  wake_.notify_all();
  return ticket;
}

void PageToucher::wait(int64_t ticket) {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_[static_cast<size_t>(ticket)] == 0; });
}

int PageToucher::threads_beside(int busy) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores - busy);
}

void PageToucher::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !pieces_.empty(); });
    if (stop_) return;
    const Piece piece = pieces_.front();
    pieces_.pop_front();
    lock.unlock();
    // One write a page faults it in: the piece's first byte, then the first
    // byte of every page that begins inside it (bytes of the range only,
    // whatever its alignment). Volatile, so that the compiler keeps every
    // store to memory nobody reads yet.
    volatile char* const p = piece.data;
    p[0] = 0;
    const auto start = reinterpret_cast<uintptr_t>(piece.data);
    for (size_t at = kPageBytes - start % kPageBytes; at < piece.bytes; at += kPageBytes) p[at] = 0;
    lock.lock();
    if (--pending_[static_cast<size_t>(piece.ticket)] == 0) done_.notify_all();
  }
}

}  // namespace knn
