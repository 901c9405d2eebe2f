// The OpenMP index kd-tree's build schedule and hand-over to the search
// (the tree and its build: omp_index_kdtree.h), and its factory.

#include "omp_index_kdtree.h"

namespace knn {
namespace omp {

template <typename Scalar>
void KdTreeIndex<Scalar>::run(const Item& item) {
  const size_t o = static_cast<size_t>(item.node);
  const int64_t slot = item.slot;
  const KdNode* chunked = item.step == Step::kNode ? nullptr : &chunked_node(o);
  const int64_t first = chunked ? chunked->begin + (slot - chunked->first_chunk) * kChunkPoints : 0;
  const int64_t last = chunked ? std::min(first + kChunkPoints, int64_t{chunked->end}) : 0;
  switch (item.step) {
    case Step::kRootChunk: {
      copy_rows(points_, first, last);
      Scalar* const into[2] = {chunk_box(slot, 0), chunk_box(slot, 1)};
      fit_range(0, first, last, n_, into);
      if (!last_of_pass(o)) return;
      Scalar* const root[2] = {box(0), box(0)};
      merge_chunk_boxes(o, root);
      return publish_node(0);
    }
    case Step::kGather:
      gather(o, slot, first, last);
      if (!last_of_pass(o)) return;
      select_median(o);
      return publish_pass(Step::kCountLower, o);
    case Step::kCountLower:
      count_lower(o, slot, first, last);
      if (!last_of_pass(o)) return;
      make_cursors(o);
      return publish_pass(Step::kMove, o);
    case Step::kMove:
      move_chunk(o, slot, first, last);
      if (!last_of_pass(o)) return;
      return publish_pass(Step::kFit, o);
    case Step::kFit: {
      Scalar* const into[2] = {chunk_box(slot, 0), chunk_box(slot, 1)};
      fit_range(chunked->buffer ^ 1, first, last, chunked->mid(), into);
      if (!last_of_pass(o)) return;
      Scalar* const children[2] = {child_box(*chunked, 0), child_box(*chunked, 1)};
      merge_chunk_boxes(o, children);
      progress_add(report_, 1);
      publish_node(static_cast<size_t>(chunked->first_child));
      return publish_node(static_cast<size_t>(chunked->first_child) + 1);
    }
    case Step::kNode: {
      const KdNode& node = nodes_[o];
      if (node.size() <= kTaskPoints) return progress_add(report_, build_whole(o));
      if (cancel_->poll()) return;
      progress_add(report_, 1);
      if (node.first_child < 0) return;
      split_whole(o);
      publish(Step::kNode, node.first_child, 0, 1);
      return publish(Step::kNode, node.first_child + 1, 0, 1);
    }
  }
}

// A thread of the build's team: takes items until every one is taken or
// the build is cancelled (then items stop being published).
template <typename Scalar>
void KdTreeIndex<Scalar>::work() {
  for (size_t i = queue_.taken.fetch_add(1); i < queue_.size; i = queue_.taken.fetch_add(1)) {
    const auto stopped = [this] { return cancel_->stopped(); };
    if (!wait_for_flag(queue_.published[i], stopped) || stopped()) return;
    run(queue_.items[i]);
  }
}

template <typename Scalar>
void KdTreeIndex<Scalar>::build(const Scalar* points, int threads, const volatile int* cancel) {
  if (n_ == 0) {
    search_.allocate(dim_, 0, 0);
    return;
  }
  throw_if_cancelled(cancel);  // the build polls before large nodes only
  // Every leaf holds more than half a leaf (its parent held more than a
  // leaf and split in halves), so this bounds the node count.
  const int64_t max_leaves = n_ / ((int64_t{leaf_size_} + 1) / 2) + 1;
  if (2 * max_leaves > INT32_MAX)
    fail(KNN_ERR_UNSUPPORTED,
         format("a kd-tree of %lld points with leaf_size %d needs more than 2^31 nodes; use a "
                "larger leaf_size",
                static_cast<long long>(n_), leaf_size_));
  nodes_.reserve(static_cast<size_t>(2 * max_leaves));
  make_shape();
  // Progress in nodes, and one more unit for the hand-over.
  knn_progress* const report = progress();
  progress_begin(report, KNN_PROGRESS_BUILD, static_cast<int64_t>(nodes_.size()) + 1);
  const size_t scalars = static_cast<size_t>(n_) * static_cast<size_t>(dim_);
  for (Buffer& b : buffers_) {
    b.rows.reset(new Scalar[scalars]);
    b.ids.reset(new int32_t[static_cast<size_t>(n_)]);
  }
  keys_.reset(new Key[static_cast<size_t>(n_)]);
  boxes_.resize(nodes_.size() * 2 * static_cast<size_t>(dim_));
  queue_.size = item_count();
  queue_.items.reset(new Item[queue_.size]);
  queue_.published.reset(new std::atomic<bool>[queue_.size]);
  for (size_t i = 0; i < queue_.size; ++i)
    queue_.published[i].store(false, std::memory_order_relaxed);
  pending_.reset(new std::atomic<int64_t>[chunked_.size()]);
  LoopStop cancellation(cancel);
  cancel_ = &cancellation;
  points_ = points;
  report_ = report;
  if (nodes_[0].first_chunk < 0) {
    copy_rows(points, 0, n_);
    Scalar* const root[2] = {box(0), box(0)};
    fit_range(0, 0, n_, n_, root);
    publish_node(0);
  } else {
    publish_pass(Step::kRootChunk, 0);  // chunked_[0] is the root
  }
#pragma omp parallel num_threads(threads)
  work();
  if (cancellation.stopped()) throw_cancelled();
  hand_over(threads);
  progress_add(report, 1);
}

// Fills search_ from the built tree: the points in bucket order (one plane
// per dimension, each leaf from the buffer it was built in), each inner
// node's two sides as the bounds its children lie within on the split
// dimension, every node's smallest index. The build's arrays are freed.
template <typename Scalar>
void KdTreeIndex<Scalar>::hand_over(int threads) {
  keys_.reset();
  search_.allocate(dim_, n_, static_cast<int64_t>(nodes_.size()));
  const int64_t node_count = static_cast<int64_t>(nodes_.size());
#pragma omp parallel for num_threads(threads) schedule(dynamic, 256)
  for (int64_t i = 0; i < node_count; ++i) {
    const KdNode& node = nodes_[static_cast<size_t>(i)];
    if (node.first_child >= 0) continue;
    const int32_t* ids = buffers_[node.buffer].ids.get();
    int32_t min_index = INT32_MAX;
    for (int64_t p = node.begin; p < node.end; ++p) {
      const Scalar* x = row(node.buffer, p);
      for (int d = 0; d < dim_; ++d) search_.plane(d)[p] = x[d];
      search_.ids[static_cast<size_t>(p)] = ids[p];
      min_index = std::min(min_index, ids[p]);
    }
    auto& s = search_.nodes[static_cast<size_t>(i)];
    s.begin = node.begin, s.end = node.end, s.min_index = min_index;
  }
  // Children come after their parent: backwards, every child is done first.
  for (size_t i = nodes_.size(); i-- > 0;) {
    const KdNode& node = nodes_[i];
    if (node.first_child < 0) continue;
    auto& s = search_.nodes[i];
    const size_t left = static_cast<size_t>(node.first_child);
    s.first_child = node.first_child;
    s.split_dim = node.split_dim;
    s.min_index = std::min(search_.nodes[left].min_index, search_.nodes[left + 1].min_index);
    s.left_max = box(left)[dim_ + node.split_dim];
    s.right_min = box(left + 1)[node.split_dim];
  }
  std::copy(box(0), box(0) + dim_, search_.lo.begin());
  std::copy(box(0) + dim_, box(0) + 2 * dim_, search_.hi.begin());
  for (Buffer& b : buffers_) b = Buffer{};
  std::vector<KdNode>().swap(nodes_);
  std::vector<Scalar>().swap(boxes_);
  std::vector<int64_t>().swap(chunk_lefts_);
  std::vector<int64_t>().swap(chunk_inside_);
  std::vector<Scalar>().swap(chunk_boxes_);
  std::vector<int32_t>().swap(chunked_);
  std::vector<int32_t>().swap(chunk_owner_);
  std::vector<ChunkedSplit>().swap(splits_);
  queue_.items.reset();
  queue_.published.reset();
  pending_.reset();
}

template <typename Scalar>
std::unique_ptr<BasicIndexEngine<Scalar>> build_kdtree_index(const Scalar* points, int64_t n,
                                                             int dim, const IndexParams& params) {
  return std::make_unique<KdTreeIndex<Scalar>>(points, n, dim, params);
}

KNN_INSTANTIATE_BUILDER(KNN_KDTREE_INDEX_BUILDER);

}  // namespace omp
}  // namespace knn
