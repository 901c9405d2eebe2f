// The CUDA bucket kd-tree as an IndexEngine: owns the tree on the device and
// runs every call through the shared query pipeline (query_chunks.cuh), in
// chunks sized so that the call stays within its device budget. One template
// over the scalar type serves the float32 and the float64 index.
#include <climits>
#include <memory>

#include "../core/pinned_pool.h"
#include "../core/query_chunks.cuh"
#include "../core/resident_rows_engine.cuh"
#include "../cuda_engine.h"
#include "../cuda_index.h"
#include "../device_rows_index.h"
#include "index_kdtree.cuh"

namespace knn {
namespace cuda {
namespace {

template <typename Scalar>
class KdTreeIndex final : public ResidentRowsEngine<Scalar> {
 public:
  // Over a copy of `points` (host or device as params says).
  KdTreeIndex(const Scalar* points, int64_t n, int dim, const IndexParams& params)
      : ResidentRowsEngine<Scalar>(KNN_STRUCTURE_KDTREE, n, dim) {
    shape(n, dim, params, 0);
    Stream stream;
    tree_.input.allocate(static_cast<size_t>(n) * dim);
    copy_points_in(tree_.input.get(), points, sizeof(Scalar) * n * dim, params.points_on_device,
                   stream.get());
    build_bucket_tree(tree_, stream.get());
  }
  // Over device rows that it keeps as its points in input order (already
  // allocated: the build needs the rest of its bytes).
  KdTreeIndex(DeviceBuffer<Scalar> rows, int64_t n, int dim, const IndexParams& params)
      : ResidentRowsEngine<Scalar>(KNN_STRUCTURE_KDTREE, n, dim) {
    shape(n, dim, params, aligned(rows.size() * sizeof(Scalar)));
    tree_.input = std::move(rows);
    Stream stream;
    build_bucket_tree(tree_, stream.get());
  }

  void knn(const Scalar* queries, int64_t m, int k, int32_t* indices, Scalar* sq_distances,
           const CallParams& call) const override {
    run(queries, m, k, Scalar(-1), false, indices, sq_distances, nullptr, call);
  }

  void knn_self(int k, bool exclude_self, int32_t* indices, Scalar* sq_distances,
                const CallParams& call) const override {
    CallParams own = call;
    own.queries_on_device = true;  // the index's own copy, in input order
    run(tree_.input.get(), tree_.n, k, Scalar(-1), exclude_self, indices, sq_distances, nullptr,
        own);
  }

  void radius(const Scalar* queries, int64_t m, Scalar radius, int max_neighbors, int32_t* indices,
              Scalar* sq_distances, int32_t* counts, const CallParams& call) const override {
    // Rounded to the scalar type, as the contract says (one operation).
    const Scalar radius_sq = radius * radius;
    run(queries, m, max_neighbors, radius_sq, false, indices, sq_distances, counts, call);
  }

 private:
  const Scalar* resident_rows() const override { return tree_.input.get(); }

  // The tree's size, dimension and levels, once n and the build's device
  // bytes (less those `allocated` already) are admitted.
  void shape(int64_t n, int dim, const IndexParams& params, size_t allocated) {
    if (n < 0 || n > INT32_MAX)
      fail(KNN_ERR_INVALID_ARGUMENT,
           format("the CUDA kd-tree indexes up to 2^31-1 points (int32 indices), got n = %lld",
                  static_cast<long long>(n)));
    const int leaf_size = kdtree_leaf_size(params.leaf_size, dim, LeafSizeFor::kGpu);
    const size_t build_bytes = kdtree_build_bytes(n, dim, leaf_size, sizeof(Scalar));
    require_build_within_limit(
        device_budget(params.device_memory_limit),
        build_bytes > allocated ? build_bytes - allocated : 0,
        format("building a CUDA kd-tree of %lld points in %d-D", static_cast<long long>(n), dim));
    tree_.n = n;
    tree_.dim = dim;
    tree_.levels = bucket_tree_levels(n, leaf_size);
  }

  // Rows of k (kNN: radius_sq < 0) or of max_neighbors = k (radius).
  void run(const Scalar* queries, int64_t m, int k, Scalar radius_sq, bool exclude_self,
           int32_t* indices, Scalar* sq_distances, int32_t* counts, const CallParams& call) const {
    if (m <= 0) return;
    const DeviceScope on_device(this->device());
    const int k_search = exclude_self ? k + 1 : k;
    const bool want_indices = indices != nullptr && k > 0;
    const bool want_sq = sq_distances != nullptr && k > 0;
    const bool want_counts = counts != nullptr;
    constexpr size_t kScalarBytes = sizeof(Scalar);
    const size_t per_query =
        kdtree_call_bytes_per_query(tree_.dim, k_search, k, exclude_self, want_indices, want_sq,
                                    want_counts, call, kScalarBytes);
    const int64_t chunk =
        chunk_queries_for(per_query, kdtree_call_fixed_bytes(call), call,
                          kdtree_max_chunk(tree_.dim, k_search, k, exclude_self, want_indices,
                                           want_sq, want_counts, call, kScalarBytes));
    SearchScratch<Scalar> scratch[kPipelineSlots];
    const BucketTreeView<Scalar> view = tree_.view();
    for_each_query_chunk<Scalar>(
        queries, m, tree_.dim, k, indices, sq_distances, counts, call, chunk,
        [&](const QueryChunk<Scalar>& c, cudaStream_t stream) {
          SearchScratch<Scalar>& s = scratch[c.slot];
          SearchRequest<Scalar> request{c.queries, c.count,        k_search, radius_sq,
                                        c.indices, c.sq_distances, c.counts, k};
          if (exclude_self) {
            const size_t wide = static_cast<size_t>(c.count) * k_search;
            if (s.wide_index.size() < wide) s.wide_index.allocate(wide);
            if (c.sq_distances && s.wide_dist.size() < wide) s.wide_dist.allocate(wide);
            request.indices = s.wide_index.get();
            request.sq_distances = c.sq_distances ? s.wide_dist.get() : nullptr;
            request.row_width = k_search;
          }
          search_bucket_tree(view, request, s, stream);
          if (exclude_self)
            drop_self(s.wide_index.get(), s.wide_dist.get(), c.count, c.first, k, c.indices,
                      c.sq_distances, stream);
        });
  }

  BucketTree<Scalar> tree_;
};

}  // namespace

template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> build_kdtree_index(const Scalar* points, int64_t n,
                                                             int dim, const IndexParams& params) {
  return std::make_unique<KdTreeIndex<Scalar>>(points, n, dim, params);
}

KNN_INSTANTIATE_BUILDER(KNN_KDTREE_INDEX_BUILDER);

template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> build_kdtree_index(DeviceBuffer<Scalar> rows, int64_t n,
                                                             int dim, const IndexParams& params) {
  return std::make_unique<KdTreeIndex<Scalar>>(std::move(rows), n, dim, params);
}

template std::unique_ptr<IndexEngine> build_kdtree_index(DeviceBuffer<float>, int64_t, int,
                                                         const IndexParams&);

template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> build_kdtree_index_of(
    const BasicIndexEngine<Scalar>& source, const IndexParams& params) {
  const int64_t n = source.size();
  const int dim = source.dim();
  const size_t count = static_cast<size_t>(n) * static_cast<size_t>(dim);
  // The copy is device memory of the build too: it counts against the limit.
  const size_t copy_bytes = count * sizeof(Scalar);
  IndexParams from_copy = params;
  from_copy.points_on_device = true;
  const DeviceBudget budget = device_budget(params.device_memory_limit);
  if (budget.limit != 0) {
    if (copy_bytes >= budget.limit)
      fail(KNN_ERR_DEVICE_OUT_OF_MEMORY,
           format("the device copy of %lld points in %d-D for a CUDA kd-tree needs %zu device "
                  "bytes, not less than the %s (%zu)",
                  static_cast<long long>(n), dim, copy_bytes, budget.limit_source, budget.limit));
    from_copy.device_memory_limit = budget.limit - copy_bytes;
  }
  DeviceBuffer<Scalar> rows(count);
  if (count > 0) source.copy_points_to_device(rows.get());
  // The engine copies the rows into storage of its own (KdTreeIndex), so the
  // copy goes when this returns.
  return build_kdtree_index(rows.get(), n, dim, from_copy);
}

KNN_INSTANTIATE_BUILDER(KNN_KDTREE_INDEX_OF_BUILDER);

}  // namespace cuda
}  // namespace knn
