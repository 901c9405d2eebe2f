// Cancellation of long calls (knn_set_cancel_flag). A host thread registers a
// flag; any thread may set it to non-zero; the calls this thread makes then
// stop at their next check with KNN_ERR_CANCELLED. Engines check between
// chunks of work: take the flag once on the calling thread (cancel_flag()),
// then poll it from any thread (throw_if_cancelled).
#pragma once

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

// Throws Error(KNN_ERR_CANCELLED) when cancel_requested(flag).
void throw_if_cancelled(const volatile int* flag);
// Throws Error(KNN_ERR_CANCELLED): for work that saw the flag set and
// stopped, whatever the flag holds by the time it can throw.
[[noreturn]] void throw_cancelled();

}  // namespace knn
