// The CUDA point-in-polygon quadtree: what the build leaves on the device and
// the engine object that answers count/fill (contract section 4).
//
// Layout (all on the device, nothing on the host but sizes):
//   - the points sorted by Morton key of their quantised coordinates
//     (stable: index order within a key), as Coord2<P> (P = float or double,
//     the build's scalar: one template serves both), and their original ids;
//   - the nodes, level by level (the root is node 0; the children of a node
//     are contiguous, in Morton order). Every node is a contiguous range
//     [begin, end) of sorted points and carries the tight bounding box of
//     those points, so every geometric test on a node is exact.
// A node is a leaf when it holds at most leaf_capacity points or sits at the
// depth guard (duplicates and near-duplicates that no split separates).
//
// Queries (quadtree_query.cu) walk the tree a thread per polygon for many
// small polygons, else as (polygon, node) pairs breadth first over slices of
// bounded size; the answers depend only on the shared predicate
// common/pip_predicate.h, never on the tree's shape, so they equal the
// OpenMP engine's bit for bit.
#pragma once

#include <cstdint>

#include "../../engine/quadtree_engine.h"
#include "../core/cuda_support.h"

namespace knn {
namespace cuda {

// A point (x, y) and a box (min x, min y, max x, max y) of scalar T, aligned
// as float2/float4 (double2/double4) so that each loads in one instruction.
template <class T>
struct alignas(2 * sizeof(T)) Coord2 {
  T x, y;
};
template <class T>
struct alignas(4 * sizeof(T)) Box4 {
  T x, y, z, w;
};

__host__ __device__ inline float min_of(float a, float b) { return fminf(a, b); }
__host__ __device__ inline double min_of(double a, double b) { return fmin(a, b); }
__host__ __device__ inline float max_of(float a, float b) { return fmaxf(a, b); }
__host__ __device__ inline double max_of(double a, double b) { return fmax(a, b); }

template <class P>
struct QuadNode {
  Box4<P> box;    // min x, min y, max x, max y of the node's points
  int64_t begin;  // sorted points [begin, end)
  int64_t end;
  int32_t first_child;  // index of the first child; -1 for a leaf
  int32_t child_count;
};

// Default points per leaf: a warp tests a leaf's points in one step.
constexpr int kDefaultLeafCapacity = 32;

// Point ids are 32-bit on the device (sort payload and outputs), so one tree
// holds fewer than 2^31 points.
constexpr int64_t kMaxQuadtreePoints = int64_t{0x7fffffff};

// Temporary storage for a sequence of CUB calls on one stream: grown when a
// call needs more (after the stream has finished with the old block), never
// freed while work may still use it.
class CubScratch {
 public:
  explicit CubScratch(cudaStream_t stream) : stream_(stream) {}
  // `algorithm(temp, bytes)` is a CUB call: with temp == nullptr it sizes
  // `bytes`, otherwise it runs.
  template <class Algorithm>
  void run(Algorithm&& algorithm, const char* what) {
    size_t bytes = 0;
    check(algorithm(static_cast<void*>(nullptr), bytes), what);
    if (bytes > buffer_.size()) {
      check(cudaStreamSynchronize(stream_), what);
      buffer_.allocate(bytes);
    }
    check(algorithm(static_cast<void*>(buffer_.get()), bytes), what);
  }

 private:
  cudaStream_t stream_;
  DeviceBuffer<unsigned char> buffer_;
};

// What the query kernels read of a tree.
template <class P>
struct QuadtreeView {
  const QuadNode<P>* nodes;
  const Coord2<P>* xy;  // sorted points
  const int32_t* ids;   // original index of each sorted point
};

template <class P>
class CudaQuadtree final : public QuadtreeEngine {
 public:
  CudaQuadtree(int device, int64_t n, DeviceBuffer<Coord2<P>> xy, DeviceBuffer<int32_t> ids,
               DeviceBuffer<QuadNode<P>> nodes)
      : device_(device),
        n_(n),
        xy_(std::move(xy)),
        ids_(std::move(ids)),
        nodes_(std::move(nodes)) {}

  int backend() const override { return KNN_BACKEND_CUDA; }
  int64_t size() const override { return n_; }
  int64_t node_count() const { return static_cast<int64_t>(nodes_.size()); }
  QuadtreeView<P> view() const { return {nodes_.get(), xy_.get(), ids_.get()}; }

  // Defined in quadtree_query.cu, which instantiates the class for float
  // and double points.
  void count(const PolygonSet<float>& polygons, int64_t* counts,
             const QuadtreeParams& call) const override;
  void count(const PolygonSet<double>& polygons, int64_t* counts,
             const QuadtreeParams& call) const override;
  void fill(const PolygonSet<float>& polygons, const int64_t* out_offsets, int64_t* point_indices,
            const QuadtreeParams& call) const override;
  void fill(const PolygonSet<double>& polygons, const int64_t* out_offsets,
            int64_t* point_indices, const QuadtreeParams& call) const override;

 private:
  // V: the vertices' scalar.
  template <class V>
  void count_polygons(const PolygonSet<V>& polygons, int64_t* counts,
                      const QuadtreeParams& call) const;
  template <class V>
  void fill_polygons(const PolygonSet<V>& polygons, const int64_t* out_offsets,
                     int64_t* point_indices, const QuadtreeParams& call) const;

  int device_;
  int64_t n_;
  DeviceBuffer<Coord2<P>> xy_;
  DeviceBuffer<int32_t> ids_;
  DeviceBuffer<QuadNode<P>> nodes_;
};

}  // namespace cuda
}  // namespace knn
