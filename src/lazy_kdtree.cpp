#include "lazy_kdtree.h"

#include <new>

#include "../common/error.h"
#include "../engine/progress.h"

namespace knn {

template <typename Scalar>
const BasicIndexEngine<Scalar>& BasicLazyKdTree<Scalar>::serving(const Engine& primary,
                                                                 int structure, bool primary_serves,
                                                                 const Builder& build) const {
  if (structure == primary.structure()) return primary;
  // Held through the build: a second caller waits for the first one's tree.
  std::lock_guard<std::mutex> lock(mutex_);
  if (kdtree_) return *kdtree_;
  const ProgressMute not_the_call;  // the build is no part of the call's stage
  try {
    kdtree_ = build();
  } catch (const Error& e) {
    const bool memory =
        e.status() == KNN_ERR_DEVICE_OUT_OF_MEMORY || e.status() == KNN_ERR_HOST_OUT_OF_MEMORY;
    if (!memory || !primary_serves) throw;
    return primary;
  } catch (const std::bad_alloc&) {
    if (!primary_serves) throw;
    return primary;
  }
  if (!kdtree_) fail(KNN_ERR_INTERNAL, "the kd-tree of an AUTO index was not built");
  return *kdtree_;
}

template <typename Scalar>
const BasicIndexEngine<Scalar>* BasicLazyKdTree<Scalar>::built() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return kdtree_.get();
}

// The float32 calls and their _f64 twins.
template class BasicLazyKdTree<float>;
template class BasicLazyKdTree<double>;

}  // namespace knn
