// The OpenMP engine's alignment step (engine/mesh_engine.h align_step): the
// closest search of the moved points over the engine's BVH, the trimming
// threshold, and the normal equations' block sums
// (common/geometry/align_terms.h).
#pragma once

#include <cstdint>

#include "../../engine/mesh_engine.h"
#include "mesh_tree.h"

namespace knn {
namespace omp {

template <typename Scalar>
geometry::AlignSums align_step(const MeshTree<Scalar>& tree, const Scalar* points, int64_t m,
                               const AlignStep& step, const MeshParams& call);

}  // namespace omp
}  // namespace knn
