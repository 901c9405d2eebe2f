// The shared query pipeline (query_chunks.cuh). Each slot owns a stream and,
// for the arrays that live on the host, device buffers plus pinned staging.
// While slot A's chunk searches on the device, the host fills slot B's pinned
// queries and empties the rows slot B brought back, so PCIe and host copies
// hide behind the search.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "../../common/non_copyable.h"
#include "../../engine/cancel.h"
#include "../../engine/page_toucher.h"
#include "../../engine/progress.h"
#include "../cuda_engine.h"
#include "cuda_support.h"
#include "memory_model.h"
#include "pinned_pool.h"
#include "query_chunks.cuh"

namespace knn {
namespace cuda {
namespace {

// What the call wants and where its arrays live.
template <typename Scalar>
struct CallShape {
  int dim;
  int row_width;
  bool want_indices, want_sq, want_counts;
  bool stage_in, stage_out;

  size_t query_bytes(int64_t q) const { return sizeof(Scalar) * static_cast<size_t>(q) * dim; }
  size_t row_values(int64_t q) const { return static_cast<size_t>(q) * row_width; }
};

// Device and pinned buffers of one slot. Empty buffers (size 0) for what the
// call does not stage.
template <typename Scalar>
struct Slot : NonCopyable {
  Stream stream;
  DeviceBuffer<Scalar> queries;
  DeviceBuffer<int32_t> indices;
  DeviceBuffer<Scalar> sq_distances;
  DeviceBuffer<int32_t> counts;
  PinnedLease host_queries;
  PinnedLease host_indices;
  PinnedLease host_sq_distances;
  PinnedLease host_counts;
  int64_t first = 0;
  int64_t count = 0;
  // The PageToucher's tickets for this chunk's rows in the caller's arrays.
  std::vector<int64_t> touched;

  Slot(const CallShape<Scalar>& s, int64_t chunk)
      : queries(s.stage_in ? s.query_bytes(chunk) / sizeof(Scalar) : 0),
        indices(s.stage_out && s.want_indices ? s.row_values(chunk) : 0),
        sq_distances(s.stage_out && s.want_sq ? s.row_values(chunk) : 0),
        counts(s.stage_out && s.want_counts ? static_cast<size_t>(chunk) : 0),
        host_queries(s.stage_in ? s.query_bytes(chunk) : 0),
        host_indices(s.stage_out && s.want_indices ? sizeof(int32_t) * s.row_values(chunk) : 0),
        host_sq_distances(s.stage_out && s.want_sq ? sizeof(Scalar) * s.row_values(chunk) : 0),
        host_counts(s.stage_out && s.want_counts ? sizeof(int32_t) * chunk : 0) {}

  // Work still queued on the stream may read or write these buffers: wait
  // for it before they go back to the allocator and the pinned pool (on the
  // error path too; a failure here is already being reported).
  ~Slot() { cudaStreamSynchronize(stream.get()); }
};

void download(const void* device_src, void* pinned_dst, size_t bytes, cudaStream_t stream) {
  check(cudaMemcpyAsync(pinned_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync (query results to host)");
}

// Calls whose host outputs are at least this large fault the caller's pages
// in ahead of the copies (engine/page_toucher.h); below it the threads cost
// more than the faults they would hide.
constexpr size_t kTouchOutputsFromBytes = size_t{64} << 20;

}  // namespace

int64_t chunk_queries_for(size_t bytes_per_query, size_t fixed_bytes, const CallParams& call,
                          int64_t max_chunk) {
  return queries_within_budget(device_budget(call.device_memory_limit), bytes_per_query,
                               fixed_bytes, max_chunk);
}

template <typename Scalar>
void for_each_query_chunk(const Scalar* queries, int64_t m, int dim, int row_width,
                          int32_t* indices, Scalar* sq_distances, int32_t* counts,
                          const CallParams& call, int64_t chunk_queries,
                          const ChunkSearch<Scalar>& search) {
  if (m <= 0) return;
  const volatile int* cancel = cancel_flag();
  knn_progress* const report = progress();
  const CallShape<Scalar> shape{dim,
                                row_width,
                                indices != nullptr && row_width > 0,
                                sq_distances != nullptr && row_width > 0,
                                counts != nullptr,
                                !call.queries_on_device,
                                !call.outputs_on_device};
  const int64_t chunk = std::max<int64_t>(1, std::min(chunk_queries, m));
  // With more than one chunk a second slot overlaps one chunk's transfers
  // (and, for device arrays, its tail of idle SMs) with the next chunk.
  const int slot_count = m > chunk ? kPipelineSlots : 1;

  std::vector<std::unique_ptr<Slot<Scalar>>> slots;
  for (int i = 0; i < slot_count; ++i)
    slots.push_back(std::make_unique<Slot<Scalar>>(shape, chunk));

  // The first write into fresh host memory faults every page: the rows of a
  // chunk are faulted in by threads of their own while the device searches
  // it, and its copy waits for them (on an error the toucher drops what it
  // has not reached and joins its threads before the call returns).
  const size_t output_bytes = shape.row_values(m) * ((shape.want_indices ? sizeof(int32_t) : 0) +
                                                     (shape.want_sq ? sizeof(Scalar) : 0)) +
                              (shape.want_counts ? static_cast<size_t>(m) * sizeof(int32_t) : 0);
  std::optional<PageToucher> toucher;
  if (shape.stage_out && output_bytes >= kTouchOutputsFromBytes)
    toucher.emplace(PageToucher::threads_beside(kHostCopyThreads + 1));
  auto touch_rows = [&](Slot<Scalar>& s) {
    s.touched.clear();
    if (!toucher) return;
    const size_t values = shape.row_values(s.count);
    const size_t row0 = shape.row_values(s.first);
    if (shape.want_indices)
      s.touched.push_back(toucher->touch(indices + row0, values * sizeof(int32_t)));
    if (shape.want_sq)
      s.touched.push_back(toucher->touch(sq_distances + row0, values * sizeof(Scalar)));
    if (shape.want_counts)
      s.touched.push_back(
          toucher->touch(counts + s.first, static_cast<size_t>(s.count) * sizeof(int32_t)));
  };

  // Waits for a slot's chunk and moves its rows to the caller's host arrays.
  auto deliver = [&](Slot<Scalar>& s) {
    s.stream.synchronize();
    if (shape.stage_out) {
      for (const int64_t ticket : s.touched) toucher->wait(ticket);
      const size_t values = shape.row_values(s.count);
      const size_t row0 = shape.row_values(s.first);
      if (shape.want_indices)
        staging_copy(indices + row0, s.host_indices.template as<int32_t>(),
                     values * sizeof(int32_t));
      if (shape.want_sq)
        staging_copy(sq_distances + row0, s.host_sq_distances.template as<Scalar>(),
                     values * sizeof(Scalar));
      if (shape.want_counts)
        staging_copy(counts + s.first, s.host_counts.template as<int32_t>(),
                     static_cast<size_t>(s.count) * sizeof(int32_t));
    }
    progress_add(report, s.count);
    s.count = 0;
  };

  // The next chunk: the call's queries in order, or the shared source's.
  int64_t next = 0;
  auto take = [&](int64_t* count) {
    if (call.query_source != nullptr) return call.query_source->take(chunk, count);
    *count = std::min(chunk, m - next);
    next += *count;
    return next - *count;
  };

  for (int64_t turn = 0;; ++turn) {
    throw_if_cancelled(cancel);
    const int slot_index = static_cast<int>(turn % slot_count);
    Slot<Scalar>& s = *slots[static_cast<size_t>(slot_index)];
    if (s.count > 0) deliver(s);
    const int64_t first = take(&s.count);
    if (s.count == 0) break;
    s.first = first;
    touch_rows(s);
    const cudaStream_t stream = s.stream.get();

    QueryChunk<Scalar> c{};
    c.first = first;
    c.count = s.count;
    c.slot = slot_index;
    if (shape.stage_in) {
      const size_t bytes = shape.query_bytes(s.count);
      staging_copy(s.host_queries.template as<Scalar>(), queries + static_cast<size_t>(first) * dim,
                   bytes);
      check(cudaMemcpyAsync(s.queries.get(), s.host_queries.template as<Scalar>(), bytes,
                            cudaMemcpyHostToDevice, stream),
            "cudaMemcpyAsync (queries to device)");
      c.queries = s.queries.get();
    } else {
      c.queries = queries + static_cast<size_t>(first) * dim;
    }
    const size_t row0 = shape.row_values(first);
    if (shape.stage_out) {
      c.indices = shape.want_indices ? s.indices.get() : nullptr;
      c.sq_distances = shape.want_sq ? s.sq_distances.get() : nullptr;
      c.counts = shape.want_counts ? s.counts.get() : nullptr;
    } else {
      c.indices = shape.want_indices ? indices + row0 : nullptr;
      c.sq_distances = shape.want_sq ? sq_distances + row0 : nullptr;
      c.counts = shape.want_counts ? counts + first : nullptr;
    }

    search(c, stream);

    if (shape.stage_out) {
      const size_t values = shape.row_values(s.count);
      if (shape.want_indices)
        download(s.indices.get(), s.host_indices.template as<int32_t>(), values * sizeof(int32_t),
                 stream);
      if (shape.want_sq)
        download(s.sq_distances.get(), s.host_sq_distances.template as<Scalar>(),
                 values * sizeof(Scalar), stream);
      if (shape.want_counts)
        download(s.counts.get(), s.host_counts.template as<int32_t>(),
                 static_cast<size_t>(s.count) * sizeof(int32_t), stream);
    }
  }
  for (auto& s : slots)
    if (s->count > 0) deliver(*s);
}

template void for_each_query_chunk<float>(const float*, int64_t, int, int, int32_t*, float*,
                                          int32_t*, const CallParams&, int64_t,
                                          const ChunkSearch<float>&);
template void for_each_query_chunk<double>(const double*, int64_t, int, int, int32_t*, double*,
                                           int32_t*, const CallParams&, int64_t,
                                           const ChunkSearch<double>&);

}  // namespace cuda
}  // namespace knn
