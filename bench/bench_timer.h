// Wall-clock timing for the benchmarks: one warm-up run (its time is kept
// apart, never in the median), then the median of N timed repeats (N = 5
// unless the caller says otherwise), in milliseconds.
//
//   double ms = knn_bench::median_ms([&] { run(); });
//   knn_bench::Timing t = knn_bench::measure([&] { run(); }, 3,
//                                            [&] { reset(); });  // untimed
//
// `setup`, when given, runs before the warm-up and before every repeat,
// outside the timed region (to free what the previous run made, reset an
// output, ...). A run that fails should throw; the exception propagates.
// For GPU work the run must synchronise before it returns: this is host
// wall-clock time.
//
// measure_interleaved times several contenders round-robin (A B C, A B C,
// ...), so that a machine whose speed drifts during the run (shared or
// virtual machines) slows every contender alike and their ratios stay fair.
#pragma once

#include <algorithm>
#include <chrono>
#include <ctime>
#include <functional>
#include <vector>

namespace knn_bench {

constexpr int kDefaultRepeats = 5;

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// What time_once_ms measures: the wall clock (the default), or the CPU time
// of the whole process, every thread summed (the CPU benchmarks' --cpu-time:
// on a machine shared with other work, the wall clock says more about the
// others than about the code timed; CPU time counts the work done, but not
// time spent waiting for a processor). Threads that spin while they wait
// count too: under libgomp's default (active) wait policy every thread
// spins after each parallel region, which on 2 threads tripled the CPU time
// of a 20,000-query call; run with OMP_WAIT_POLICY=passive to count the work
// alone.
enum class TimeBase { Wall, ProcessCpu };

inline TimeBase& time_base() {
  static TimeBase base = TimeBase::Wall;
  return base;
}

inline double process_cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) * 1e-6;
}

// Time of one run of f, in milliseconds (no warm-up).
template <class F>
double time_once_ms(F&& f) {
  if (time_base() == TimeBase::ProcessCpu) {
    const double start = process_cpu_ms();
    f();
    return process_cpu_ms() - start;
  }
  const Clock::time_point start = Clock::now();
  f();
  return ms_since(start);
}

struct Timing {
  double median_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  double warmup_ms = 0;            // the first run (cold caches, lazy set-up)
  std::vector<double> samples_ms;  // in run order, warm-up excluded
};

inline double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

// Fills median, min and max from the samples (at least one).
inline void summarise(Timing& t) {
  t.median_ms = median_of(t.samples_ms);
  t.min_ms = *std::min_element(t.samples_ms.begin(), t.samples_ms.end());
  t.max_ms = *std::max_element(t.samples_ms.begin(), t.samples_ms.end());
}

struct NoSetup {
  void operator()() const {}
};

// Warm-up, then `repeats` timed runs (at least 1).
template <class Run, class Setup = NoSetup>
Timing measure(Run&& run, int repeats = kDefaultRepeats, Setup&& setup = Setup()) {
  repeats = std::max(repeats, 1);
  Timing t;
  setup();
  // Warm-up: page faults, caches, thread pools, lazy initialisation.
  t.warmup_ms = time_once_ms(run);
  for (int r = 0; r < repeats; ++r) {
    setup();
    t.samples_ms.push_back(time_once_ms(run));
  }
  summarise(t);
  return t;
}

// Median of `repeats` runs after a warm-up, in milliseconds.
template <class Run, class Setup = NoSetup>
double median_ms(Run&& run, int repeats = kDefaultRepeats, Setup&& setup = Setup()) {
  return measure(run, repeats, setup).median_ms;
}

// One contender of measure_interleaved: what to time, and what to do before
// each run outside the timed region (may be empty).
struct Contender {
  std::function<void()> run;
  std::function<void()> setup;
};

// A warm-up of every contender, then `repeats` rounds in which each runs once
// in turn. Returns one Timing per contender, in the order given.
inline std::vector<Timing> measure_interleaved(const std::vector<Contender>& contenders,
                                               int repeats = kDefaultRepeats) {
  repeats = std::max(repeats, 1);
  std::vector<Timing> timings(contenders.size());
  for (int round = -1; round < repeats; ++round)
    for (size_t c = 0; c < contenders.size(); ++c) {
      if (contenders[c].setup) contenders[c].setup();
      const double ms = time_once_ms(contenders[c].run);
      if (round < 0)
        timings[c].warmup_ms = ms;
      else
        timings[c].samples_ms.push_back(ms);
    }
  for (Timing& t : timings) summarise(t);
  return timings;
}

}  // namespace knn_bench
