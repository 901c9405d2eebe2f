// Timing for the GPU benchmarks: GPU work between two CUDA events, and the
// warm-up-then-median loops the kernel-only and end-to-end figures use.
//
// The median here is the middle sample (of an even count, the upper of the
// two middle ones), as every GPU table has been measured; bench_timer.h's
// median_of averages the two middle ones instead. With the odd repeat counts
// the benchmarks use, the two agree.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "../../cuda/core/cuda_support.h"
#include "../bench_timer.h"

namespace knn_bench {

inline double middle_sample(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

// Milliseconds between events recorded on `stream` before and after `work`
// (which only enqueues: the stop event is waited for here).
inline double event_ms(cudaStream_t stream, const std::function<void()>& work) {
  cudaEvent_t start, stop;
  knn::cuda::check(cudaEventCreate(&start), "cudaEventCreate");
  knn::cuda::check(cudaEventCreate(&stop), "cudaEventCreate");
  knn::cuda::check(cudaEventRecord(start, stream), "cudaEventRecord");
  work();
  knn::cuda::check(cudaEventRecord(stop, stream), "cudaEventRecord");
  knn::cuda::check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  knn::cuda::check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms;
}

// One warm-up run, the stream drained, then the median of `repeats` runs
// timed with events on `stream`.
inline double median_event_ms(cudaStream_t stream, const std::function<void()>& work, int repeats) {
  work();
  knn::cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) samples.push_back(event_ms(stream, work));
  return middle_sample(samples);
}

// One warm-up run, then the median of `repeats` runs on the host clock (for
// calls that synchronise before they return, such as the C ABI's).
inline double median_host_ms(const std::function<void()>& work, int repeats) {
  work();
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) samples.push_back(time_once_ms(work));
  return middle_sample(samples);
}

}  // namespace knn_bench
