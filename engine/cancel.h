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

// Throws Error(KNN_ERR_CANCELLED) when flag is set; NULL never cancels.
void throw_if_cancelled(const volatile int* flag);
// Throws Error(KNN_ERR_CANCELLED): for work that saw the flag set and
// stopped, whatever the flag holds by the time it can throw.
[[noreturn]] void throw_cancelled();

}  // namespace knn
