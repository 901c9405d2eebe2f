// How the engines' builders (the functions that make an engine of each
// structure: index_engine.h, quadtree_engine.h, mesh_engine.h,
// stats_engine.h, cloud_align.h) are written once for both engines and both precisions.
// Each builder's signature is one macro of Scalar, next to its structure's
// engine (KNN_KDTREE_INDEX_BUILDER, ...); every engine defines the builder in
// its own namespace (omp, cuda) as a template over Scalar, declared and
// instantiated from that one signature, and each backend's overrides
// (engine/backend.h, KNN_BACKEND_BUILDERS) forward to it.
#pragma once

// The declaration of `builder`'s template in the current namespace.
#define KNN_DECLARE_BUILDER(builder) \
  template <typename Scalar>         \
  builder(Scalar)

// Its float and double instantiations, after its definition.
#define KNN_INSTANTIATE_BUILDER(builder) \
  template builder(float);               \
  template builder(double)
