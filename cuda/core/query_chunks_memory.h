// Device memory of the shared query pipeline (query_chunks.cuh), as a
// function of the sizes alone: host-only, so that the memory estimates of the
// C ABI answer without a device and in builds without CUDA.
#pragma once

#include <cstddef>

#include "../../engine/index_engine.h"
#include "memory_model.h"

namespace knn {
namespace cuda {

// Pipeline slots: two, so that one chunk's transfers overlap the other's search.
constexpr int kPipelineSlots = 2;

// Device bytes per query the pipeline itself allocates over all slots: the
// staged queries when they are on the host, the staged output rows when the
// outputs are on the host; nothing for device arrays (used in place).
// scalar_bytes: 4 for float32 coordinates and distances, 8 for float64.
inline size_t pipeline_bytes_per_query(int dim, int row_width, bool want_indices, bool want_sq,
                                       bool want_counts, const CallParams& call,
                                       size_t scalar_bytes) {
  size_t per_slot = 0;
  if (!call.queries_on_device) per_slot += scalar_bytes * static_cast<size_t>(dim);
  if (!call.outputs_on_device)
    per_slot +=
        static_cast<size_t>(row_width) * ((want_indices ? 4 : 0) + (want_sq ? scalar_bytes : 0)) +
        (want_counts ? 4 : 0);
  return kPipelineSlots * per_slot;
}

// Whole-page slack of the pipeline's buffers (every buffer is counted in
// whole pages, memory_model.h): one for the queries, three for the outputs.
inline size_t pipeline_fixed_bytes(const CallParams& call) {
  const int buffers = (call.queries_on_device ? 0 : 1) + (call.outputs_on_device ? 0 : 3);
  return static_cast<size_t>(kPipelineSlots * buffers) * kAllocAlignment;
}

}  // namespace cuda
}  // namespace knn
