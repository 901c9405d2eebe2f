// The query pipeline every CUDA index engine shares: a call's m queries run
// in chunks that fit the device budget. Host arrays are staged through pinned
// buffers on two slots (two streams), so that one chunk's upload and the
// previous chunk's download overlap the search; device arrays are used in
// place. Engines only write the search of one chunk. Templates over the
// scalar type of the coordinates and distances (float or double), defined
// once in query_chunks.cu for both.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "../../engine/index_engine.h"
#include "query_chunks_memory.h"

namespace knn {
namespace cuda {

// One chunk of a call; every pointer is device memory.
template <typename Scalar>
struct QueryChunk {
  const Scalar* queries;  // count * dim scalars
  int64_t first, count;   // the chunk's queries are [first, first + count) of the call
  int32_t* indices;       // count * row_width slots, or null when the caller passed null
  Scalar* sq_distances;   // count * row_width slots, or null
  int32_t* counts;        // count slots (radius calls), or null
  int slot;               // pipeline slot, 0 .. kPipelineSlots-1 (see below)
};

// Chunks on different slots (kPipelineSlots, query_chunks_memory.h) may run
// at the same time on their two streams; chunks on the same slot never do.
// An engine that reuses scratch across chunks keeps one per slot (indexed by
// QueryChunk::slot).

template <typename Scalar>
using ChunkSearch = std::function<void(const QueryChunk<Scalar>&, cudaStream_t)>;

// Runs `search` over the call's m queries (host or device as `call` says) in
// chunks of at most chunk_queries (taken from call.query_source where there
// is one: then only those), and delivers the output rows (row_width per
// query; counts one per query) to the caller's arrays, host or device as
// `call` says. A null output array is never written. Checks the calling
// thread's cancel flag between chunks. Returns when every row is delivered.
template <typename Scalar>
void for_each_query_chunk(const Scalar* queries, int64_t m, int dim, int row_width,
                          int32_t* indices, Scalar* sq_distances, int32_t* counts,
                          const CallParams& call, int64_t chunk_queries,
                          const ChunkSearch<Scalar>& search);

// Largest chunk whose device bytes (bytes_per_query each, plus fixed_bytes)
// fit the call's budget on the current device (device_budget, cuda_engine.h:
// call.device_memory_limit, else KNN_DEVICE_MEMORY_LIMIT, never beyond the
// free memory less the margin). Capped at max_chunk (kMaxChunkQueries,
// memory_model.h, unless the engine allows more). Throws
// KNN_ERR_DEVICE_OUT_OF_MEMORY when not even one query fits.
// bytes_per_query should include the pipeline's own staging per query:
// pipeline_bytes_per_query() and pipeline_fixed_bytes() (query_chunks_memory.h).
int64_t chunk_queries_for(size_t bytes_per_query, size_t fixed_bytes, const CallParams& call,
                          int64_t max_chunk = kMaxChunkQueries);

}  // namespace cuda
}  // namespace knn
