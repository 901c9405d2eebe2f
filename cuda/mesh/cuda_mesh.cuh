// The CUDA engine of a triangle mesh (engine/mesh_engine.h): what the build
// (mesh_build.cu) leaves on the device, in the layout of mesh_layout.h, and
// the engine object whose queries mesh_query.cu defines.
#pragma once

#include <cstdint>

#include "../../engine/mesh_engine.h"
#include "../core/cuda_support.h"
#include "mesh_layout.h"
#include "mesh_walk.h"

namespace knn {
namespace cuda {

template <typename Scalar>
using MeshView = mesh_walk::MeshView<Scalar>;

template <typename Scalar>
class CudaMesh final : public MeshEngine<Scalar> {
 public:
  CudaMesh(int device, int64_t n, bool closed_oriented, DeviceBuffer<MeshNode<Scalar>> nodes,
           DeviceBuffer<LeafTriangle<Scalar>> leaves, DeviceBuffer<LeafNormals<Scalar>> normals,
           DeviceBuffer<Scalar> vertex_normals, DeviceBuffer<geometry::WindingCluster> clusters,
           const MeshBox<Scalar>& bounds)
      : device_(device),
        n_(n),
        closed_oriented_(closed_oriented),
        nodes_(std::move(nodes)),
        leaves_(std::move(leaves)),
        normals_(std::move(normals)),
        vertex_normals_(std::move(vertex_normals)),
        clusters_(std::move(clusters)),
        bounds_(bounds) {}

  int backend() const override { return KNN_BACKEND_CUDA; }
  int64_t n_triangles() const override { return n_; }
  bool closed_oriented() const override { return closed_oriented_; }
  MeshView<Scalar> view() const {
    return {{nodes_.get(), leaves_.get(), normals_.get(), vertex_normals_.get(), clusters_.get(),
             n_, closed_oriented_},
            bounds_};
  }

  // mesh_query.cu
  void closest(const Scalar* points, int64_t m, Scalar max_distance, const MeshResults<Scalar>& out,
               const MeshParams& call) const override;
  // closest() within a squared distance given as such: the alignment step's
  // limit, max_sq in the mesh's scalar, as the OpenMP engine's walk takes it
  // (its square root squared again need not give the same bits).
  void closest_within_sq(const Scalar* points, int64_t m, Scalar max_sq,
                         const MeshResults<Scalar>& out, const MeshParams& call) const;
  void deviation(const Scalar* points, int64_t m, Scalar max_distance,
                 const DeviationRequest& request, DeviationSummary* summary,
                 Scalar* signed_distances, const MeshParams& call) const override;
  // mesh_align.cu
  geometry::AlignSums align_step(const Scalar* points, int64_t m, const AlignStep& step,
                                 const MeshParams& call) const override;

 private:
  int device_;
  int64_t n_;
  bool closed_oriented_;
  DeviceBuffer<MeshNode<Scalar>> nodes_;
  DeviceBuffer<LeafTriangle<Scalar>> leaves_;
  DeviceBuffer<LeafNormals<Scalar>> normals_;
  DeviceBuffer<Scalar> vertex_normals_;
  DeviceBuffer<geometry::WindingCluster> clusters_;
  MeshBox<Scalar> bounds_;
};

}  // namespace cuda
}  // namespace knn
