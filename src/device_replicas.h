// A CUDA index or mesh on several devices (include/knn_gpgpu.h, "Several
// devices"): copies of the engine on the other devices, built on first use
// (one per device and structure: an AUTO index that serves a call from its
// query-time kd-tree, src/lazy_kdtree.h, serves it from kd-tree copies),
// and the one split of a call into contiguous shares of points
// (split_points, which the index calls take through split_over_devices and
// the mesh calls directly), each answered by the copy on its device, so
// that the results are the one device's.
//
// Plain C++ over the engine interface: the device operations are
// parameters, so that the CPU-only tests run the same split over OpenMP
// engines standing in for devices. One code path for both precisions: each
// piece is a template over the scalar type (float for the knn_index_* calls,
// double for their _f64 twins), instantiated for both in device_replicas.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "../common/non_copyable.h"
#include "../engine/index_engine.h"
#include "../include/knn_gpgpu.h"
#include "backends.h"
#include "device_choice.h"

namespace knn {

// How the split selects a device on its threads and finds the current one,
// and the memory it stages a share's arrays through.
struct DeviceOps {
  std::function<void(int device)> select;
  std::function<int()> current;           // -1: none
  std::function<int(const void*)> owner;  // the device of a device array, -1 for host memory
  // Whether work on `device` reads and writes memory of `owner` in place
  // (peer access).
  std::function<bool(int device, int owner)> reaches;
  // What a call may allocate on the current device (Backend::device_budget).
  std::function<size_t(size_t call_limit)> budget;
  // Memory of the current device, and a stream of copies between devices.
  std::function<std::unique_ptr<DeviceAllocation>(size_t bytes)> allocate;
  std::function<std::unique_ptr<DeviceCopyStream>()> copy_stream;
};
// A backend's (Backend::set_device, current_device, device_of,
// reaches_in_place, device_budget, allocate, copy_stream); the backend
// outlives the operations.
DeviceOps device_ops(const Backend& backend);

// Copies of one engine on other devices, one per device and structure (0
// for engines of one structure), each built on the first call that uses its
// device, under that device, from what the owner keeps on the host, and
// freed on its own device with the owner. One store for every engine that
// answers on several devices: the index (BasicDeviceReplicas below) and the
// mesh (src/mesh_handle.h).
template <class Engine>
class DeviceCopies : NonCopyable {
 public:
  // Builds one copy on the current device (called on that device's thread).
  using Builder = std::function<std::unique_ptr<Engine>()>;
  // Makes what the copies are built from (a host copy of the points, a
  // prepared mesh) and returns their builder; called on the calling thread,
  // only where a copy is missing, before the builds start.
  using BuilderSource = std::function<Builder()>;

  explicit DeviceCopies(DeviceOps ops = device_ops(device_backend())) : ops_(std::move(ops)) {}
  ~DeviceCopies();  // frees each copy on its own device

  // The build's device options, the defaults of every later call.
  void remember_build(const knn_options& o);

  // The devices a call of `work` queries uses (`call_opt`'s list over the
  // build's, then KNN_DEVICES, then every device: choose_devices, with
  // home_device first in the default list), with copies of `structure`
  // made on those that lack one. Empty where the call is home_device's
  // alone. Devices of the default list whose copy does not fit
  // (DEVICE_OUT_OF_MEMORY) are left out; a listed one fails the call.
  std::vector<int> devices_for_call(int home_device, const knn_options& call_opt, int64_t work,
                                    int structure, const BuilderSource& source) const;

  // Makes a copy of `structure` on each device of `devices` other than
  // home_device that lacks one, concurrently (one host thread per device).
  // Returns `devices` less those whose copy did not fit
  // (DEVICE_OUT_OF_MEMORY) unless `forced`, where that fails the call.
  std::vector<int> prepare(std::vector<int> devices, bool forced, int home_device, int structure,
                           const BuilderSource& source) const;

  // The copy of `structure` on `device` (made by prepare).
  const Engine& copy_on(int device, int structure) const;

  const DeviceOps& ops() const { return ops_; }

 private:
  DeviceOps ops_;
  int build_pinned_ = -1;
  std::vector<int> build_devices_;
  mutable std::mutex mutex_;
  struct CopyKey {
    int device;
    int structure;
    bool operator<(const CopyKey& o) const {
      return device != o.device ? device < o.device : structure < o.structure;
    }
  };
  mutable std::map<CopyKey, std::unique_ptr<Engine>> copies_;
};

// Builds a copy of the home engine (its structure) on the current device
// from the index's points (host rows).
template <typename Scalar>
using BasicCopyBuilder =
    std::function<std::unique_ptr<BasicIndexEngine<Scalar>>(const Scalar* host_points)>;

// The copies of an index's engines, and its points on the host they are
// built from.
template <typename Scalar>
class BasicDeviceReplicas {
 public:
  using Engine = BasicIndexEngine<Scalar>;

  explicit BasicDeviceReplicas(DeviceOps ops = device_ops(device_backend()))
      : copies_(std::move(ops)) {}

  // The build's device options, the defaults of every later call.
  void remember_build(const knn_options& o) { copies_.remember_build(o); }

  // DeviceCopies::devices_for_call for the home engine's structure; empty
  // also where the home engine is not a CUDA engine.
  std::vector<int> devices_for_call(const Engine& home, int home_device,
                                    const knn_options& call_opt, int64_t work,
                                    const BasicCopyBuilder<Scalar>& build) const;

  // DeviceCopies::prepare for the home engine's structure, the copies built
  // from the home engine's points.
  std::vector<int> prepare(std::vector<int> devices, bool forced, const Engine& home,
                           int home_device, const BasicCopyBuilder<Scalar>& build) const;

  // The engine on `device`: the home engine on its own device, else the copy
  // of its structure.
  const Engine& on(int device, const Engine& home, int home_device) const;

  // The indexed points in input order on the host (copied from the home
  // engine once, kept for later all-kNN calls).
  const Scalar* host_points(const Engine& home) const;

  const DeviceOps& ops() const { return copies_.ops(); }

 private:
  typename DeviceCopies<Engine>::BuilderSource source(const Engine& home,
                                                      const BasicCopyBuilder<Scalar>& build) const;

  DeviceCopies<Engine> copies_;
  mutable std::mutex points_mutex_;
  mutable std::vector<Scalar> points_;
  mutable bool have_points_ = false;
};
using DeviceReplicas = BasicDeviceReplicas<float>;

// One per-point array of a call split by split_points: host memory, managed
// memory or memory of one device; NULL where not wanted.
struct PointArray {
  void* data = nullptr;
  size_t bytes_per_point = 0;
  bool written = false;  // an output; else only read
};

// How split_points runs a share's work.
struct PointSplitRules {
  // The work must see all its share's points at once: one piece per share.
  bool whole_shares = false;
  // The work reads and writes memory of a device that its share's device
  // reaches (DeviceOps::reaches, peer access) in place: such arrays are not
  // staged, and a read one is copied over whole first where nothing else is
  // staged and it fits in half the share's budget.
  bool peers_in_place = false;
  // Host memory the work needs for each point of a piece (PointPiece's
  // host_scratch); where nonzero, the share runs in pieces even when
  // nothing is staged.
  size_t host_bytes_per_point = 0;
};

// What the work of a share (or of a piece of one) is given: `count` points
// from the call's point `first`, on `device` (current), the arrays in the
// order given at the piece's first point (NULL stays NULL), each host
// memory, managed memory or memory of `device` (or, with peers_in_place, of
// a device it reaches), the piece's device budget, and its host scratch.
struct PointPiece {
  int device = -1;
  int64_t first = 0;
  int64_t count = 0;
  std::vector<void*> arrays;
  size_t device_memory_limit = 0;
  void* host_scratch = nullptr;  // host_bytes_per_point * count bytes; NULL where none
};
using PointShareWork = std::function<void(const PointPiece& piece)>;

// The one split of a call over devices: runs `work` over contiguous shares
// of m points, share s on devices[s] (run_shares), each within the call's
// device_memory_limit, divided among the shares that run on one device at
// once (a device listed twice). An array in memory of another device than
// the share's (and not reached in place, `rules`) is staged through memory
// of the share's device by peer copies (read arrays in, written ones back)
// in pieces, two buffers of each so that one piece's copies overlap the
// next piece's work (one piece per share where whole_shares); the staging
// takes at most half of the share's budget and the work gets the rest
// (DEVICE_OUT_OF_MEMORY where the staging of one piece does not fit).
// Throws the first failure; the caller writes the missing values.
void split_points(const std::vector<int>& devices, const DeviceOps& ops, int64_t m,
                  const std::vector<PointArray>& arrays, size_t device_memory_limit,
                  const PointSplitRules& rules, const PointShareWork& work);

// One index call over shares: m queries of dim scalars (host, or device
// memory as call.queries_on_device says), answered in rows of `row_width`
// slots (indices/sq_distances, either may be NULL) and one count per query
// (counts, may be NULL), host or device as call.outputs_on_device says.
// With exclude_self (all-kNN), the engine is asked for row_width + 1 and the
// row's own index (its query number) is dropped, else the last slot.
template <typename Scalar>
struct BasicSplitCall {
  const Scalar* queries = nullptr;
  int64_t m = 0;
  int dim = 0;
  int row_width = 0;
  bool exclude_self = false;
  int32_t* indices = nullptr;
  Scalar* sq_distances = nullptr;
  int32_t* counts = nullptr;
  CallParams call;
};
using SplitCall = BasicSplitCall<float>;

// The engine's work on `count` queries with rows of `width` slots.
template <typename Scalar>
using BasicShareWork = std::function<void(
    const BasicIndexEngine<Scalar>& engine, const Scalar* queries, int64_t count, int width,
    int32_t* indices, Scalar* sq_distances, int32_t* counts, const CallParams& call)>;
using ShareWork = BasicShareWork<float>;

// An index call over split_points (the queries and the outputs its
// per-point arrays; the engine may read and write a reached peer's memory
// in place), replicas.on(device) serving each share. With exclude_self the
// engine's rows of width + 1 go to host scratch, in pieces, and the rows
// with the point itself dropped to the caller's arrays (host memory in
// place, device memory by one copy per piece). Throws the first failure;
// the caller writes the missing values.
template <typename Scalar>
void split_over_devices(const std::vector<int>& devices,
                        const BasicDeviceReplicas<Scalar>& replicas,
                        const BasicIndexEngine<Scalar>& home, int home_device,
                        const BasicSplitCall<Scalar>& split, const BasicShareWork<Scalar>& work);

}  // namespace knn
