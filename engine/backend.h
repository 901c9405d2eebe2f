// What a backend (an engine family: CUDA, OpenMP) offers the ABI layer: the
// factory above the per-structure engines (index_engine.h, quadtree_engine.h,
// mesh_engine.h), its devices and their memory, and the device-memory
// estimates the planners compare with a budget. src/ reaches a backend only
// through this interface; src/backends.cpp is the one file that registers
// the implementations (cuda/cuda_backend.h, openmp/omp_backend.h).
//
// Calls are per build or per batch of queries, never per point, so a virtual
// call costs nothing measurable. Every function throws knn::Error on failure.
//
// Every backend implements the pure virtuals (the structures and the
// classic tree's build); the defaults answer for what a backend lacks: no
// devices, 0 device bytes, and KNN_ERR_INTERNAL for an operation it does not
// offer (device memory on a host backend, the host search of the classic
// tree on a device backend), which the planners ask only of the backend that
// has it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "../common/kdtree_layout.h"
#include "cloud_align.h"
#include "device_budget.h"
#include "index_engine.h"
#include "mesh_engine.h"
#include "quadtree_engine.h"
#include "stats_engine.h"

namespace knn {

// Device memory on the current device for the life of the object, freed on
// that device.
class DeviceAllocation {
 public:
  virtual ~DeviceAllocation() = default;
  virtual void* get() const = 0;
  virtual int device() const = 0;
};

// A stream of the current device for copies between devices, so that a
// share's transfers overlap its search; destruction waits for the copies
// still in flight.
class DeviceCopyStream {
 public:
  virtual ~DeviceCopyStream() = default;
  // Enqueues a copy of `bytes` from src (memory of src_device) to dst (memory
  // of dst_device), peer to peer where the devices allow it.
  virtual void copy(void* dst, int dst_device, const void* src, int src_device, size_t bytes) = 0;
  // Waits for every copy enqueued so far.
  virtual void wait() = 0;
};

// A classic tree (common/kdtree_layout.h) uploaded to the current device, for
// the engines that answer its queries (src/classic_engines.h).
class UploadedClassicTree {
 public:
  virtual ~UploadedClassicTree() = default;
  virtual int64_t size() const = 0;
  // The tree's points as an index engine of the current device, answering
  // with the tree's indices (Node.id) and its ties: the grid (nullptr when
  // the points make a poor grid) or the bucket kd-tree.
  virtual std::unique_ptr<IndexEngine> grid_of_points(const IndexParams& params) const = 0;
  virtual std::unique_ptr<IndexEngine> kdtree_of_points(const IndexParams& params) const = 0;
};

// A classic tree (or a subtree cut from one) in the layout a backend searches
// on the host, made once where one tree answers many batches.
class ClassicTreeSearch {
 public:
  virtual ~ClassicTreeSearch() = default;
  // The k nearest nodes of m queries (3 floats each) into rows of k, on
  // `threads` threads (0: the default team; 1 inside a parallel region).
  virtual void knn(const float* queries, int64_t m, int k, int threads, int32_t* indices,
                   float* sq_distances) const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // ---- What it is ---------------------------------------------------------
  virtual int kind() const = 0;  // KNN_BACKEND_CUDA or KNN_BACKEND_OPENMP
  virtual const char* name() const = 0;

  // ---- Devices (a host backend has none) ----------------------------------
  // Usable devices; 0 without a driver, a device, or support in this build.
  virtual int device_count() const { return 0; }
  virtual void set_device(int device) const;
  virtual int current_device() const { return -1; }  // -1 when there is none
  virtual size_t free_device_bytes() const { return 0; }
  // What a call may allocate on the current device (engine/device_budget.h):
  // call_limit, else KNN_DEVICE_MEMORY_LIMIT, never more than the free
  // memory less the margin; 0 bytes without a device.
  DeviceBudget device_budget(size_t call_limit) const {
    return device_budget_of(call_limit, std::getenv(kDeviceMemoryLimitVar), free_device_bytes());
  }
  // Whether p is memory of a device of this backend that the current device
  // reads; false for host memory and NULL.
  virtual bool is_device_pointer(const void* p) const {
    (void)p;
    return false;
  }
  // The device whose memory p is; -1 for host memory, memory every device
  // reads in place, and NULL.
  virtual int device_of(const void* p) const {
    (void)p;
    return -1;
  }
  // Whether work on `device` reads and writes memory of `owner` in place
  // (enabling peer access where the hardware allows it).
  virtual bool reaches_in_place(int device, int owner) const {
    (void)device, (void)owner;
    return false;
  }
  // The most chunks of queries one device engine has in flight, and the
  // host threads each device's engine keeps busy copying: what CPU threads
  // sharing a call leave alone.
  virtual int chunks_in_flight() const { return 0; }
  virtual int host_copy_threads() const { return 0; }

  // ---- Device memory ------------------------------------------------------
  // Synchronous copies between device and host memory.
  virtual void copy_to_host(void* host_dst, const void* device_src, size_t bytes) const;
  virtual void copy_to_device(void* device_dst, const void* host_src, size_t bytes) const;
  // The "missing" value (index -1, squared distance +infinity) into `count`
  // slots of device arrays; either pointer may be NULL.
  virtual void fill_missing_on_device(int32_t* indices, float* sq_distances, int64_t count) const;
  virtual void fill_missing_on_device(int32_t* indices, double* sq_distances, int64_t count) const;
  // Index of the first of count scalars of a device array whose magnitude is
  // not at most `limit` (NaN and infinities included), or -1.
  virtual int64_t first_beyond_on_device(const float* values, int64_t count, float limit) const;
  virtual int64_t first_beyond_on_device(const double* values, int64_t count, double limit) const;
  // `bytes` of memory on the current device (KNN_ERR_DEVICE_OUT_OF_MEMORY
  // when they do not fit), and a stream for copies between devices.
  virtual std::unique_ptr<DeviceAllocation> allocate(size_t bytes) const;
  virtual std::unique_ptr<DeviceCopyStream> copy_stream() const;

  // ---- Index structures (index_engine.h) ----------------------------------
  // The kd-tree and the brute force of n points of dim scalars, and the grid
  // (dim 3 only; nullptr when the data would make a poor grid). `points` is
  // host memory, or device memory where params.points_on_device says.
  virtual std::unique_ptr<IndexEngine> build_kdtree_index(const float* points, int64_t n, int dim,
                                                          const IndexParams& params) const = 0;
  virtual std::unique_ptr<IndexEngine64> build_kdtree_index(const double* points, int64_t n,
                                                            int dim,
                                                            const IndexParams& params) const = 0;
  virtual std::unique_ptr<IndexEngine> build_brute_force_index(const float* points, int64_t n,
                                                               int dim,
                                                               const IndexParams& params) const = 0;
  virtual std::unique_ptr<IndexEngine64> build_brute_force_index(
      const double* points, int64_t n, int dim, const IndexParams& params) const = 0;
  virtual std::unique_ptr<IndexEngine> build_grid_index(const float* points, int64_t n,
                                                        const IndexParams& params) const = 0;
  virtual std::unique_ptr<IndexEngine64> build_grid_index(const double* points, int64_t n,
                                                          const IndexParams& params) const = 0;
  // The kd-tree of the points of `source`, an engine of this backend (on the
  // current device for a device backend, whose points then never pass
  // through host memory).
  virtual std::unique_ptr<IndexEngine> build_kdtree_index_of(const IndexEngine& source,
                                                             const IndexParams& params) const = 0;
  virtual std::unique_ptr<IndexEngine64> build_kdtree_index_of(const IndexEngine64& source,
                                                               const IndexParams& params) const = 0;

  // ---- Point-in-polygon (quadtree_engine.h) and meshes (mesh_engine.h) ----
  virtual std::unique_ptr<QuadtreeEngine> build_quadtree(const float* xy, int64_t n,
                                                         const QuadtreeParams& params) const = 0;
  virtual std::unique_ptr<QuadtreeEngine> build_quadtree(const double* xy, int64_t n,
                                                         const QuadtreeParams& params) const = 0;
  virtual std::unique_ptr<MeshEngine<float>> build_mesh(const MeshGeometry<float>& mesh,
                                                        const MeshParams& params) const = 0;
  virtual std::unique_ptr<MeshEngine<double>> build_mesh(const MeshGeometry<double>& mesh,
                                                         const MeshParams& params) const = 0;

  // ---- Neighbourhood statistics (stats_engine.h), alignment (cloud_align.h)
  // The reducer of one statistic over chunks of an index's kNN lists, where
  // this backend keeps them (an engine of this backend).
  virtual std::unique_ptr<BasicListReducer<float>> make_list_reducer(
      const IndexEngine& engine, const StatsRequest<float>& request,
      const CallParams& call) const = 0;
  virtual std::unique_ptr<BasicListReducer<double>> make_list_reducer(
      const IndexEngine64& engine, const StatsRequest<double>& request,
      const CallParams& call) const = 0;
  // The aligner of one knn_index_align call (cloud_align.h): a device
  // backend's for an engine of its own on the current device, the host
  // backend's for any engine.
  virtual std::unique_ptr<BasicCloudAligner<float>> make_cloud_aligner(
      const IndexEngine& engine, const CloudAlignRequest<float>& request,
      const CallParams& call) const = 0;
  virtual std::unique_ptr<BasicCloudAligner<double>> make_cloud_aligner(
      const IndexEngine64& engine, const CloudAlignRequest<double>& request,
      const CallParams& call) const = 0;

  // ---- Device memory estimates (functions of the sizes alone) -------------
  // scalar_bytes: 4 for the float32 engines, 8 for the float64 ones. Every
  // figure grows with every size; a host backend's are 0.
  // Building an index of `structure` (KNN_STRUCTURE_*; AUTO: the largest of
  // all), and that index resident with one call of m queries and k.
  virtual size_t index_build_bytes(int structure, int64_t n, int dim, size_t scalar_bytes) const;
  virtual size_t index_query_bytes(int structure, int64_t m, int k, int64_t n, int dim,
                                   size_t scalar_bytes) const;
  // The resident points of an index (and their original indices).
  virtual size_t index_points_bytes(int64_t n, int dim, size_t scalar_bytes) const;
  // The kd-tree's build at the default leaf size; the kd-tree resident at
  // `leaf_size` (float points); it with one call of m queries and k.
  virtual size_t kdtree_build_bytes(int64_t n, int dim, size_t scalar_bytes) const;
  virtual size_t kdtree_resident_bytes(int64_t n, int dim, int leaf_size) const;
  virtual size_t kdtree_query_bytes(int64_t m, int k, int64_t n, int dim, int leaf_size,
                                    size_t scalar_bytes) const;
  // The grid's build of n float points (dim 3).
  virtual size_t grid_build_bytes(int64_t n) const;
  // A statistics call's reducer over the n points of an index with lists of
  // list_k, beside the search: every row in one chunk, host outputs.
  virtual size_t stats_reducer_bytes(int64_t n, int list_k, size_t scalar_bytes) const;
  // A mesh's build at its peak (the mesh resident plus the build's scratch),
  // what the build reserves before it knows whether the mesh is closed.
  virtual size_t mesh_build_bytes(int64_t n_vertices, int64_t n_triangles,
                                  size_t scalar_bytes) const;

  // ---- The classic tree (common/kdtree_layout.h) --------------------------
  // Builds the tree of n host points into the host array `tree`.
  virtual void build_classic_tree(const Point* points, int64_t n, Node* tree) const = 0;
  // Device bytes of that build.
  virtual size_t classic_tree_build_bytes(int64_t n) const;
  // Throws KNN_ERR_INVALID_TREE naming the first node that is not where the
  // layout puts it.
  virtual void check_classic_tree(const Node* tree, int64_t n) const;
  // check_classic_tree, then the k nearest nodes of m queries (rows of k).
  virtual void query_classic_tree(const Node* tree, int64_t n, const Point* queries, int64_t m,
                                  int k, int32_t* indices, float* sq_distances) const;
  // The tree (splitting first on root_dim) in the layout of the host
  // search; the tree is trusted: check it first.
  virtual std::unique_ptr<ClassicTreeSearch> classic_tree_search(const Node* tree, int64_t n,
                                                                 int root_dim) const;
  // Exact k nearest rows of `ref` (n rows of dim floats) for m query rows.
  virtual void classic_brute_force(const float* ref, int64_t n, const float* queries, int64_t m,
                                   int dim, int k, int32_t* indices, float* sq_distances) const;
  // The tree uploaded to the current device (validated there with `check`,
  // with the host check's first defect and message).
  virtual std::unique_ptr<UploadedClassicTree> upload_classic_tree(const Node* tree, int64_t n,
                                                                   int root_dim, bool check) const;
  // Device bytes of a classic query of m queries with k neighbours on a tree
  // of n points: all at once on the bucket kd-tree of its points, or
  // through the grid of its points; the search's own scratch in each; and
  // the upload with the rows an engine of it adopts.
  virtual size_t classic_kdtree_query_bytes(int64_t m, int k, int64_t n) const;
  virtual size_t classic_grid_query_bytes(int64_t m, int k, int64_t n) const;
  virtual size_t classic_kdtree_search_bytes(int64_t m, int k) const;
  virtual size_t classic_grid_search_bytes(int64_t m, int k) const;
  virtual size_t classic_upload_bytes(int64_t n) const;

 protected:
  // KNN_ERR_INTERNAL: a planner asked this backend for what it does not offer.
  [[noreturn]] void not_offered(const char* what) const;
};

// The overrides of every structure's build (the pure virtuals above, both
// precisions) for a backend whose engine defines the builders in namespace
// `ns` (engine/builders.h): each forwards its arguments unchanged, so every
// backend writes KNN_BACKEND_BUILDERS(its namespace) in its class body.
#define KNN_BACKEND_BUILDERS_OF(ns, Scalar)                                                 \
  KNN_KDTREE_INDEX_BUILDER(Scalar) const override {                                         \
    return ns::build_kdtree_index(points, n, dim, params);                                  \
  }                                                                                         \
  KNN_BRUTE_FORCE_INDEX_BUILDER(Scalar) const override {                                    \
    return ns::build_brute_force_index(points, n, dim, params);                             \
  }                                                                                         \
  KNN_GRID_INDEX_BUILDER(Scalar) const override {                                           \
    return ns::build_grid_index(points, n, params);                                         \
  }                                                                                         \
  KNN_KDTREE_INDEX_OF_BUILDER(Scalar) const override {                                      \
    return ns::build_kdtree_index_of(source, params);                                       \
  }                                                                                         \
  KNN_QUADTREE_BUILDER(Scalar) const override { return ns::build_quadtree(xy, n, params); } \
  KNN_MESH_BUILDER(Scalar) const override { return ns::build_mesh(mesh, params); }          \
  KNN_LIST_REDUCER_BUILDER(Scalar) const override {                                         \
    return ns::make_list_reducer(engine, request, call);                                    \
  }                                                                                         \
  KNN_CLOUD_ALIGNER_BUILDER(Scalar) const override {                                        \
    return ns::make_cloud_aligner(engine, request, call);                                   \
  }
#define KNN_BACKEND_BUILDERS(ns)     \
  KNN_BACKEND_BUILDERS_OF(ns, float) \
  KNN_BACKEND_BUILDERS_OF(ns, double)

}  // namespace knn
