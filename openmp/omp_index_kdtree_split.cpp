// The node splits of the OpenMP index kd-tree (omp_index_kdtree.h): a
// chunked node's passes and its steps between them, a whole node's split on
// one thread and a small subtree's build.

#include "omp_index_kdtree.h"

namespace knn {
namespace omp {

// ---- Chunked nodes -------------------------------------------------------------------
// A chunked node's split is four passes over its chunks (one work item
// per chunk) with a step on one thread between them, done by the thread
// that finishes the pass's last chunk. The median: an evenly spaced sample
// brackets the rank size / 2 between two of its keys (bracket), every
// chunk counts its keys below the bracket and gathers those inside it (a
// few percent of them; gather), and only those go through select_rank
// (select_median). Should the bracket miss the rank (a sample unlike the
// node), the selection runs over every key: the same key, found slower.
// Then every chunk counts its keys below the median (count_lower), the
// counts become each chunk's cursors, every chunk moves its rows to the
// other buffer from its cursors (move), and every chunk of the children's
// ranges fits its part of their boxes (fit).

// Node o's split dimension (the widest of its box) and the sample's
// bracket of its median.
template <typename Scalar>
void KdTreeIndex<Scalar>::bracket(size_t o) {
  KdNode& node = chunked_node(o);
  node.split_dim = widest_dim(box(chunked_index(o)));
  Key* keys = &keys_[static_cast<size_t>(node.begin)];
  const int64_t size = node.size(), rank = node.mid() - node.begin;
  int64_t samples = 32;  // about 4 sqrt(size), at most 4096
  while (samples < 4096 && samples * samples < 16 * size) samples *= 2;
  for (int64_t j = 0; j < samples; ++j)
    keys[j] = key_at(node.buffer, node.begin + j * size / samples, node.split_dim);
  std::sort(keys, keys + samples);
  // The sample's rank of the median is off by about sqrt(samples) / 2:
  // a bracket of 4 such errors either side.
  int64_t spread = 2;
  while (spread * spread < 4 * samples) ++spread;
  const int64_t at = rank * samples / size;
  ChunkedSplit& split = splits_[o];
  split.bounded_below = at - spread >= 0;
  split.bounded_above = at + spread < samples;
  split.low = keys[split.bounded_below ? at - spread : 0];
  split.high = keys[split.bounded_above ? at + spread : samples - 1];
}

// A chunk's keys below the bracket counted, those inside it gathered at
// the chunk's own positions of keys_.
template <typename Scalar>
void KdTreeIndex<Scalar>::gather(size_t o, int64_t slot, int64_t first, int64_t last) {
  const KdNode& node = chunked_node(o);
  const ChunkedSplit& split = splits_[o];
  Key* out = &keys_[static_cast<size_t>(first)];
  int64_t under = 0, taken = 0;
  for (int64_t p = first; p < last; ++p) {
    const Key key = key_at(node.buffer, p, node.split_dim);
    const bool is_below = split.bounded_below && key < split.low;
    const bool is_above = split.bounded_above && split.high < key;
    out[taken] = key;
    under += is_below;
    taken += !is_below && !is_above;
  }
  chunk_lefts_[static_cast<size_t>(slot)] = under;
  chunk_inside_[static_cast<size_t>(slot)] = taken;
}

// The chunks' gathered keys side by side from the node's first position
// (each moves down, never over keys still to move), and the selection.
template <typename Scalar>
void KdTreeIndex<Scalar>::select_median(size_t o) {
  const KdNode& node = chunked_node(o);
  Key* keys = &keys_[static_cast<size_t>(node.begin)];
  const int64_t rank = node.mid() - node.begin;
  int64_t below = 0, inside = 0;
  for (int64_t c = 0; c < node.chunks(); ++c) {
    const size_t slot = static_cast<size_t>(node.first_chunk + c);
    const Key* from = &keys[c * kChunkPoints];
    std::copy(from, from + chunk_inside_[slot], keys + inside);
    below += chunk_lefts_[slot];
    inside += chunk_inside_[slot];
  }
  ChunkedSplit& split = splits_[o];
  if (below <= rank && rank < below + inside) {
    split.median = select_rank(keys, inside, rank - below);
    return;
  }
  for (int64_t p = node.begin; p < node.end; ++p)
    keys[p - node.begin] = key_at(node.buffer, p, node.split_dim);
  split.median = select_rank(keys, node.size(), rank);
}

template <typename Scalar>
void KdTreeIndex<Scalar>::count_lower(size_t o, int64_t slot, int64_t first, int64_t last) {
  const KdNode& node = chunked_node(o);
  const Key median = splits_[o].median;
  int64_t lower = 0;
  for (int64_t p = first; p < last; ++p) lower += key_at(node.buffer, p, node.split_dim) < median;
  chunk_lefts_[static_cast<size_t>(slot)] = lower;
}

// Each chunk's count below the median becomes its lower half's cursor.
template <typename Scalar>
void KdTreeIndex<Scalar>::make_cursors(size_t o) {
  const KdNode& node = chunked_node(o);
  int64_t lower_before = 0;
  for (int64_t c = 0; c < node.chunks(); ++c) {
    int64_t& lefts = chunk_lefts_[static_cast<size_t>(node.first_chunk + c)];
    const int64_t lower = lefts;
    lefts = lower_before;
    lower_before += lower;
  }
}

// Moves positions [first, last) of the node's rows to the other buffer:
// those below the median's key to out[0], the others to out[1], each in
// order (the cursors advance). The side is an index, not a branch: it is a
// coin toss on most data.
template <typename Scalar>
template <int kDim>
void KdTreeIndex<Scalar>::move_sides(int buffer, int dim, Key median, int64_t first, int64_t last,
                                     int64_t out[2]) {
  const int width = kDim > 0 ? kDim : dim_;
  const Scalar* rows = buffers_[buffer].rows.get();
  const int32_t* ids = buffers_[buffer].ids.get();
  Scalar* out_rows = buffers_[buffer ^ 1].rows.get();
  int32_t* out_ids = buffers_[buffer ^ 1].ids.get();
  for (int64_t p = first; p < last; ++p) {
    const Scalar* x = rows + p * width;
    const int upper = !(Key::of(x[dim], ids[p]) < median);
    const int64_t to = out[upper]++;
    if constexpr (kDim == 0)
      std::copy(x, x + width, out_rows + to * width);
    else
      for (int d = 0; d < kDim; ++d) out_rows[to * kDim + d] = x[d];
    out_ids[to] = ids[p];
  }
}

template <typename Scalar>
void KdTreeIndex<Scalar>::move_range(const KdNode& node, Key median, int64_t first, int64_t last,
                                     int64_t out[2]) {
  with_dim([&](auto width) {
    move_sides<width>(node.buffer, node.split_dim, median, first, last, out);
  });
}

template <typename Scalar>
void KdTreeIndex<Scalar>::move_chunk(size_t o, int64_t slot, int64_t first, int64_t last) {
  const KdNode& node = chunked_node(o);
  const int64_t lower = chunk_lefts_[static_cast<size_t>(slot)];
  int64_t out[2] = {node.begin + lower, node.mid() + (first - node.begin) - lower};
  move_range(node, splits_[o].median, first, last, out);
}

// ---- Nodes that are not chunked ----------------------------------------------------

// Splits node i, which is not chunked, on the calling thread.
template <typename Scalar>
void KdTreeIndex<Scalar>::split_whole(size_t i) {
  KdNode& node = nodes_[i];
  node.split_dim = widest_dim(box(i));
  Key* keys = &keys_[static_cast<size_t>(node.begin)];
  for (int64_t p = node.begin; p < node.end; ++p)
    keys[p - node.begin] = key_at(node.buffer, p, node.split_dim);
  const Key median = select_rank(keys, node.size(), node.mid() - node.begin);
  int64_t out[2] = {node.begin, node.mid()};
  move_range(node, median, node.begin, node.end, out);
  Scalar* const children[2] = {child_box(node, 0), child_box(node, 1)};
  fit_range(node.buffer ^ 1, node.begin, node.end, node.mid(), children);
}

// Builds the subtree of node i (its box fitted, not chunked) on the calling
// thread; returns its node count.
template <typename Scalar>
int64_t KdTreeIndex<Scalar>::build_whole(size_t i) {
  if (nodes_[i].first_child < 0) return 1;
  split_whole(i);
  const size_t left = static_cast<size_t>(nodes_[i].first_child);
  return 1 + build_whole(left) + build_whole(left + 1);
}

// The schedule (omp_index_kdtree.cpp) runs the splits defined here: both
// scalars' classes instantiated, which makes every member defined so far.
template class KdTreeIndex<float>;
template class KdTreeIndex<double>;

}  // namespace omp
}  // namespace knn
