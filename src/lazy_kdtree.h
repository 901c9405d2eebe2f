// The kd-tree an AUTO index adds at query time (src/index_planner.h,
// serving_structure): built on the first call that it serves, once, whatever
// the number of threads that ask at the same moment (the others wait for
// it), and kept until the index is freed. The index's primary structure
// stays; the kd-tree answers bit-identically to it (include/knn_gpgpu.h).
//
// Plain C++ over the engine interface: the build is a parameter, so that the
// CPU tests run the holder over OpenMP engines. One template over the scalar
// type, instantiated for float and double in lazy_kdtree.cpp.
#pragma once

#include <functional>
#include <memory>
#include <mutex>

#include "../engine/index_engine.h"

namespace knn {

template <typename Scalar>
class BasicLazyKdTree {
 public:
  using Engine = BasicIndexEngine<Scalar>;
  // Builds the kd-tree of the index's points on the index's backend and device.
  using Builder = std::function<std::unique_ptr<Engine>()>;

  // The engine that serves a call planned for `structure`: `primary` when
  // it is the primary's structure, else the kd-tree, built by `build` when
  // there is none yet. A build that fails for lack of memory (host or device)
  // leaves the call to `primary` where it can serve it (primary_serves; the
  // answer is the same) and a later call tries again; any other failure, and
  // a memory failure where the primary cannot serve, is thrown.
  const Engine& serving(const Engine& primary, int structure, bool primary_serves,
                        const Builder& build) const;

  // The kd-tree once built, else nullptr.
  const Engine* built() const;

 private:
  mutable std::mutex mutex_;
  mutable std::unique_ptr<Engine> kdtree_;
};

}  // namespace knn
