// progress_bar.h - progress of the tool's long library calls on stderr.
//
// The reporter registers a knn_progress for the calling thread (the one
// that makes the library calls) and a watcher thread polls it: on a
// terminal it redraws one bar line with the stage, percentage, rate and
// time left; with --progress on a non-terminal (a log, CI) it prints a plain
// line every few seconds and a final line for each stage it saw. Stage lines
// (step) say what the tool does next, with the elapsed time.
#ifndef KNN_TOOLS_PROGRESS_BAR_H
#define KNN_TOOLS_PROGRESS_BAR_H

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "knn_gpgpu.h"

namespace knn_cli {

enum class ProgressMode { Off, Bar, Lines };

// Bar on a terminal; with `forced` (--progress) lines elsewhere; else off.
ProgressMode progress_mode(bool forced);

class ProgressReporter {
 public:
  explicit ProgressReporter(ProgressMode mode);
  ~ProgressReporter();
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  // A stage line ("knn-gpgpu [  1.234 s] building the index"); it also
  // names the bar of the calls that follow.
  void step(const std::string& what);

 private:
  using Clock = std::chrono::steady_clock;
  void watch();
  void report(bool final_line);
  void clear_bar();

  ProgressMode mode_;
  Clock::time_point start_;
  knn_progress record_{};
  std::mutex mutex_;  // stderr and the fields below
  std::string label_;
  int32_t sequence_ = -1;  // the stage being shown
  Clock::time_point stage_start_;
  Clock::time_point last_line_;
  bool line_pending_ = false;  // lines mode: the stage has no final line yet
  bool bar_drawn_ = false;
  std::atomic<bool> stop_{false};
  std::thread watcher_;
};

}  // namespace knn_cli

#endif
