// Cancellation of long calls (knn_set_cancel_flag). A host thread registers a
// flag; any thread may set it to non-zero; the calls this thread makes then
// stop at their next check with KNN_ERR_CANCELLED. Engines check between
// chunks of work: take the flag once on the calling thread (cancel_flag()),
// then poll it from any thread (throw_if_cancelled).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../common/non_copyable.h"

namespace knn {

// The calling thread's registered flag, or NULL.
const volatile int* cancel_flag();
void set_cancel_flag(const volatile int* flag);

// Whether *flag is non-zero; NULL never cancels. The caller's thread stores
// into the flag while the library's threads read it, so the read is an
// atomic (relaxed) load, not a plain one: a plain read racing with the
// store is undefined behaviour in C and C++ (and ThreadSanitizer says so).
// Every poll of a flag goes through here.
bool cancel_requested(const volatile int* flag);

// The stop of a parallel loop: exceptions cannot leave an OpenMP region, so
// its threads skip the rest of the work once one of them sees the caller's
// flag set (poll) or stops the loop for another reason (set); the caller
// throws after the region.
class LoopStop : NonCopyable {
 public:
  explicit LoopStop(const volatile int* flag) : flag_(flag) {}

  // Whether the loop is stopped, the flag polled first while it is not.
  bool poll() {
    if (!stopped() && cancel_requested(flag_)) set();
    return stopped();
  }
  bool stopped() const { return stopped_.load(std::memory_order_relaxed); }
  void set() { stopped_.store(true, std::memory_order_relaxed); }

 private:
  const volatile int* flag_;
  std::atomic<bool> stopped_{false};
};

// Throws Error(KNN_ERR_CANCELLED) when cancel_requested(flag).
void throw_if_cancelled(const volatile int* flag);
// Throws Error(KNN_ERR_CANCELLED): for work that saw the flag set and
// stopped, whatever the flag holds by the time it can throw.
[[noreturn]] void throw_cancelled();

// Items per run of for_each_run: a poll per run costs nothing, and the
// slowest loop cut this way (a scatter of 2^18 items to random places) runs
// about a millisecond per run, so a cancelled build stops within a few.
constexpr int64_t kCancelRunItems = int64_t{1} << 18;

// Runs body(begin, end) over [0, count) in runs of kCancelRunItems, reading
// the flag before each: the loops of a build over all its points or cells
// (serial ones, or one parallel region per run), which would otherwise run
// to their end after the flag is set.
template <class Body>
void for_each_run(int64_t count, const volatile int* flag, Body&& body) {
  for (int64_t begin = 0; begin < count; begin += kCancelRunItems) {
    throw_if_cancelled(flag);
    body(begin, std::min(count, begin + kCancelRunItems));
  }
}

// Grows `v` to `count` value-initialised elements a run at a time, reading
// the flag before each: the first touch of hundreds of megabytes takes a
// tenth of a second and more (100 MB zeroed: 145-190 ms on a loaded 2-core
// machine).
template <class T>
void resize_polling(std::vector<T>& v, size_t count, const volatile int* flag) {
  v.reserve(count);
  for_each_run(static_cast<int64_t>(count), flag,
               [&](int64_t, int64_t end) { v.resize(static_cast<size_t>(end)); });
}

}  // namespace knn
