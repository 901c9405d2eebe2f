// The OpenMP engine's alignment step (omp_mesh_align.h): one pass finds
// every moved point's closest leaf, the threshold follows (nth_element of
// the measured squared distances when a fraction trims), and a second pass
// sums the terms of align_terms.h block by block; the blocks are added in
// order on the calling thread, as the CUDA engine adds its blocks.
#include "omp_mesh_align.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "../../common/geometry/mesh_walk.h"
#include "../../common/team_size.h"
#include "../../engine/cancel.h"
#include "../omp_index_support.h"
#include "mesh_tree.h"

namespace knn {
namespace omp {
namespace {

template <typename Scalar>
struct LeafCorners {
  const geometry::LeafTriangle<Scalar>* leaves;
  void operator()(int32_t leaf, geometry::Vec3<Scalar>& a, geometry::Vec3<Scalar>& b,
                  geometry::Vec3<Scalar>& c) const {
    a = geometry::leaf_corner(leaves[leaf], 0);
    b = geometry::leaf_corner(leaves[leaf], 1);
    c = geometry::leaf_corner(leaves[leaf], 2);
  }
};

// The threshold of the kept points: max_sq, lowered to the squared distance
// at the trimming rank among the points within it.
template <typename Scalar>
double kept_threshold(const std::vector<int32_t>& leaves, const std::vector<Scalar>& sq,
                      const AlignStep& step, const volatile int* cancel) {
  if (!(step.kept_fraction < 1.0)) return step.max_sq;
  std::vector<Scalar> measured;
  resize_polling(measured, sq.size(), cancel);
  size_t count = 0;
  for (size_t i = 0; i < sq.size(); ++i)
    if (leaves[i] >= 0 && static_cast<double>(sq[i]) <= step.max_sq) measured[count++] = sq[i];
  if (count == 0) return step.max_sq;
  const auto at =
      measured.begin() + geometry::trim_position(step.kept_fraction, static_cast<int64_t>(count));
  std::nth_element(measured.begin(), at, measured.begin() + static_cast<std::ptrdiff_t>(count));
  return static_cast<double>(*at);
}

}  // namespace

template <typename Scalar>
geometry::AlignSums align_step(const MeshTree<Scalar>& tree, const Scalar* points, int64_t m,
                               const AlignStep& step, const MeshParams& call) {
  const int threads = team_size(call.threads);
  const volatile int* cancel = cancel_flag();
  const int64_t block = geometry::kAlignSumBlock;
  const int64_t blocks = (m + block - 1) / block;
  std::vector<int32_t> leaves;
  std::vector<Scalar> sq;
  resize_polling(leaves, static_cast<size_t>(m), cancel);
  resize_polling(sq, static_cast<size_t>(m), cancel);
  const Scalar limit = geometry::search_limit<Scalar>(step.max_sq);
  struct NoState {};
  for_each_block(
      m, block, threads, cancel, [] { return NoState{}; },
      [&](NoState&, int64_t b) {
        const int64_t end = std::min(m, (b + 1) * block);
        for (int64_t i = b * block; i < end; ++i) {
          const geometry::Vec3<Scalar> q =
              geometry::rounded3<Scalar>(geometry::move_point(step.frame, points + 3 * i));
          bool overflow = false;  // never: the stack holds the deepest path (mesh_layout.h)
          const geometry::Nearest<Scalar> nearest =
              geometry::nearest_leaf(tree.arrays(), q, limit, &overflow);
          leaves[i] = nearest.leaf;
          sq[i] = nearest.sq_distance;
        }
      });
  const double threshold = kept_threshold(leaves, sq, step, cancel);
  std::vector<geometry::AlignSums> sums;
  resize_polling(sums, static_cast<size_t>(blocks), cancel);
  const LeafCorners<Scalar> corners{tree.leaves.data()};
  // No exceptions, and cheap beside the search: a plain loop (the
  // progress counts the search's points only).
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t b = 0; b < blocks; ++b)
    sums[b] =
        geometry::align_block_sums(points, leaves.data(), sq.data(), b * block,
                                   std::min(block, m - b * block), threshold, step.frame, corners);
  geometry::AlignSums total = geometry::no_align_sums();
  for (const geometry::AlignSums& s : sums) geometry::add_block(total, s);
  return total;
}

template geometry::AlignSums align_step(const MeshTree<float>&, const float*, int64_t,
                                        const AlignStep&, const MeshParams&);
template geometry::AlignSums align_step(const MeshTree<double>&, const double*, int64_t,
                                        const AlignStep&, const MeshParams&);

}  // namespace omp
}  // namespace knn
