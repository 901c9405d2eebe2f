// Progress of long calls (knn_set_progress). A host thread registers a
// knn_progress; the calls it makes then publish their stage and the work
// units done of it, which any thread may read while the call runs. Writers
// are cheap: one atomic add per chunk of work (a block of queries, a level of
// a tree), never per point. Like the cancel flag, take the pointer once on
// the calling thread (progress()) and hand it to worker threads.
#pragma once

#include <cstdint>

#include "../common/non_copyable.h"
#include "../include/knn_gpgpu.h"

namespace knn {

// The calling thread's registered progress, or NULL.
knn_progress* progress();
void set_progress(knn_progress* p);

// Starts a stage: done = 0, then total, then stage, then sequence + 1 (in
// that order, so that a reader never sees done > total). NULL does nothing.
void progress_begin(knn_progress* p, int stage, int64_t total);
// Adds finished units, from any thread.
void progress_add(knn_progress* p, int64_t units);
// The stage is complete: done = total.
void progress_finish(knn_progress* p);
// Units done so far of the current stage (0 for NULL).
int64_t progress_done(const knn_progress* p);
// Resets a record being registered: done, total and sequence 0, stage
// KNN_PROGRESS_IDLE (atomic stores). NULL does nothing.
void progress_clear(knn_progress* p);
// Begins the current stage again from `done` units (sequence + 1, stage and
// total kept), for work that starts over: a device call that the CPU answers
// again, from what the stage had done before that call.
void progress_restart(knn_progress* p, int64_t done);

// The progress of one call on the calling thread: begins a stage where a
// progress is registered, and completes it when finish() is called (a call
// that fails leaves done where it stopped).
class ProgressStage {
 public:
  ProgressStage(int stage, int64_t total) : p_(progress()) { progress_begin(p_, stage, total); }
  knn_progress* get() const { return p_; }
  void finish() const { progress_finish(p_); }

 private:
  knn_progress* p_;
};

// Hides the calling thread's progress for its scope: for inner work whose
// units are not the stage's (a split tree runs each query several times and
// reports whole blocks itself).
class ProgressMute : NonCopyable {
 public:
  ProgressMute() : saved_(progress()) { set_progress(nullptr); }
  ~ProgressMute() { set_progress(saved_); }

 private:
  knn_progress* saved_;
};

}  // namespace knn
