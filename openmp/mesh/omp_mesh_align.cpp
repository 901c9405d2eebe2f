// The OpenMP engine's alignment step (omp_mesh_align.h): one pass finds
// every moved point's closest leaf, the threshold follows (nth_element of
// the measured squared distances when a fraction trims), and a second pass
// sums the terms of align_terms.h block by block; the blocks are added in
// order on the calling thread, as the CUDA engine adds its blocks (both
// steps shared with the point cloud's aligner: ../omp_align_sums.h).
#include "omp_mesh_align.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "../../common/geometry/mesh_walk.h"
#include "../../common/team_size.h"
#include "../../engine/cancel.h"
#include "../omp_align_sums.h"
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

}  // namespace

template <typename Scalar>
geometry::AlignSums align_step(const MeshTree<Scalar>& tree, const Scalar* points, int64_t m,
                               const AlignStep& step, const MeshParams& call) {
  const int threads = team_size(call.threads);
  const volatile int* cancel = cancel_flag();
  const int64_t block = geometry::kAlignSumBlock;
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
  const double threshold =
      kept_threshold(leaves.data(), sq.data(), m, step.max_sq, step.kept_fraction, cancel);
  const LeafCorners<Scalar> corners{tree.leaves.data()};
  return sum_blocks_in_order(
      m, threads,
      [&](int64_t first, int64_t count) {
        return geometry::align_block_sums(points, leaves.data(), sq.data(), first, count, threshold,
                                          step.frame, corners);
      },
      cancel);
}

template geometry::AlignSums align_step(const MeshTree<float>&, const float*, int64_t,
                                        const AlignStep&, const MeshParams&);
template geometry::AlignSums align_step(const MeshTree<double>&, const double*, int64_t,
                                        const AlignStep&, const MeshParams&);

}  // namespace omp
}  // namespace knn
