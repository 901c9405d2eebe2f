// progress_bar.cpp - see progress_bar.h.
#include "progress_bar.h"

#ifdef _WIN32
#include <io.h>
#define KNN_CLI_STDERR_IS_TTY() (_isatty(_fileno(stderr)) != 0)
#else
#include <unistd.h>
#define KNN_CLI_STDERR_IS_TTY() (isatty(STDERR_FILENO) == 1)
#endif

#include <cstdio>

namespace knn_cli {
namespace {

constexpr auto kBarPeriod = std::chrono::milliseconds(100);
constexpr auto kLinePeriod = std::chrono::seconds(5);
// A bar only for calls that last: quick ones would just flicker.
constexpr double kBarAfterSeconds = 0.5;
constexpr int kBarWidth = 30;

// Plain aligned loads, as the header allows (the library writes atomically).
int64_t load(const int64_t* at) { return *static_cast<const volatile int64_t*>(at); }
int32_t load(const int32_t* at) { return *static_cast<const volatile int32_t*>(at); }

const char* stage_name(int stage) {
  switch (stage) {
    case KNN_PROGRESS_BUILD: return "build";
    case KNN_PROGRESS_QUERY: return "query";
  }
  return "work";
}

// 1234567 -> "1.23M".
std::string compact(double v) {
  char text[32];
  if (v >= 1e9)
    std::snprintf(text, sizeof text, "%.2fG", v / 1e9);
  else if (v >= 1e6)
    std::snprintf(text, sizeof text, "%.2fM", v / 1e6);
  else if (v >= 1e4)
    std::snprintf(text, sizeof text, "%.1fk", v / 1e3);
  else
    std::snprintf(text, sizeof text, "%.0f", v);
  return text;
}

// 75 -> "1:15".
std::string clock_time(double seconds) {
  if (!(seconds < 1e7)) return "?";
  const long s = static_cast<long>(seconds + 0.5);
  char text[32];
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(text, sizeof text, "%ld:%02ld", s / 60, s % 60);
  return text;
}

}  // namespace

ProgressMode progress_mode(bool forced) {
  if (KNN_CLI_STDERR_IS_TTY()) return ProgressMode::Bar;
  return forced ? ProgressMode::Lines : ProgressMode::Off;
}

ProgressReporter::ProgressReporter(ProgressMode mode) : mode_(mode), start_(Clock::now()) {
  if (mode_ == ProgressMode::Off) return;
  knn_set_progress(&record_);
  watcher_ = std::thread([this] { watch(); });
}

ProgressReporter::~ProgressReporter() {
  if (mode_ == ProgressMode::Off) return;
  stop_.store(true);
  watcher_.join();
  knn_set_progress(nullptr);
  std::lock_guard<std::mutex> lock(mutex_);
  report(true);
  clear_bar();
}

void ProgressReporter::step(const std::string& what) {
  if (mode_ == ProgressMode::Off) return;
  std::lock_guard<std::mutex> lock(mutex_);
  report(true);  // the previous call's last figures, before its label goes
  clear_bar();
  const double s = std::chrono::duration<double>(Clock::now() - start_).count();
  std::fprintf(stderr, "knn-gpgpu [%8.3f s] %s\n", s, what.c_str());
  std::fflush(stderr);
  label_ = what;
}

void ProgressReporter::watch() {
  while (!stop_.load()) {
    std::this_thread::sleep_for(kBarPeriod);
    std::lock_guard<std::mutex> lock(mutex_);
    report(false);
  }
}

void ProgressReporter::clear_bar() {
  if (!bar_drawn_) return;
  std::fprintf(stderr, "\r%*s\r", 110, "");
  std::fflush(stderr);
  bar_drawn_ = false;
}

// One look at the record: a new stage restarts the clock; then the bar is
// redrawn, or in lines mode a line printed every kLinePeriod and once at the
// stage's end (final_line: the caller is done with the stage).
void ProgressReporter::report(bool final_line) {
  const int32_t sequence = load(&record_.sequence);
  const int stage = load(&record_.stage);
  const int64_t total = load(&record_.total);
  const int64_t done = load(&record_.done);
  const Clock::time_point now = Clock::now();
  if (sequence != sequence_) {
    sequence_ = sequence;
    stage_start_ = now;
    last_line_ = now;
    line_pending_ = sequence > 0;
  }
  if (sequence == 0 || total <= 0) return;
  const double elapsed = std::chrono::duration<double>(now - stage_start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0.0;
  const double left = rate > 0 ? static_cast<double>(total - done) / rate : -1.0;
  const double percent = 100.0 * static_cast<double>(done) / static_cast<double>(total);
  const std::string what = label_.empty() ? stage_name(stage) : label_;
  char figures[160];
  std::snprintf(figures, sizeof figures, "%5.1f%%  %s/%s  %s/s  %s left", percent,
                compact(static_cast<double>(done)).c_str(),
                compact(static_cast<double>(total)).c_str(), compact(rate).c_str(),
                done >= total ? "0:00" : (left < 0 ? "?" : clock_time(left).c_str()));
  if (mode_ == ProgressMode::Bar) {
    if (final_line || elapsed < kBarAfterSeconds) return;
    const int filled = static_cast<int>(kBarWidth * done / total);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kBarWidth, '.');
    std::fprintf(stderr, "\r%-.40s %s [%s] %s", what.c_str(), stage_name(stage), bar.c_str(),
                 figures);
    std::fflush(stderr);
    bar_drawn_ = true;
    return;
  }
  const bool periodic = now - last_line_ >= kLinePeriod;
  if (!(periodic || (final_line && line_pending_))) return;
  const double s = std::chrono::duration<double>(now - start_).count();
  std::fprintf(stderr, "knn-gpgpu [%8.3f s] %s: %s %s\n", s, what.c_str(), stage_name(stage),
               figures);
  std::fflush(stderr);
  last_line_ = now;
  if (final_line) line_pending_ = false;
}

}  // namespace knn_cli
