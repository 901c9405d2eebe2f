#include "device_replicas.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>

#include "../common/error.h"
#include "../common/non_copyable.h"
#include "../engine/mesh_engine.h"
#include "../engine/progress.h"
#include "backends.h"

namespace knn {
namespace {

// Rows a share stages at a time where it must (peer copies, all-kNN's extra
// slot): at most this many bytes of rows, so that the staging stays small
// next to the engine's own chunks.
constexpr size_t kStagingRowBytes = size_t{256} << 20;
constexpr int64_t kStagingMaxQueries = int64_t{1} << 20;

// Selects `device` for the scope and the one current before afterwards.
class SelectedDevice : NonCopyable {
 public:
  SelectedDevice(const DeviceOps& ops, int device) : ops_(ops), previous_(ops.current()) {
    if (device != previous_) ops_.select(device);
  }
  ~SelectedDevice() {
    try {
      if (previous_ >= 0 && ops_.current() != previous_) ops_.select(previous_);
    } catch (...) {
      // Freeing a copy has no status to report; the next call selects again.
    }
  }

 private:
  const DeviceOps& ops_;
  int previous_;
};

// Drops the row's own index `self` from a row of width + 1 (else its last
// slot) into `out` (width slots).
template <class T>
void drop_self(const int32_t* index_row, const T* row, int width, int32_t self, T* out) {
  int at = 0;
  bool dropped = false;
  for (int j = 0; j <= width && at < width; ++j) {
    if (!dropped && index_row[j] == self) {
      dropped = true;
      continue;
    }
    out[at++] = row[j];
  }
}

// All-kNN rows of width + 1 on the host for one piece, delivered with the
// row's own index dropped (else the last slot) into the caller's rows: host
// memory in place, device memory by one copy per piece.
template <typename Scalar>
class ExcludeSelfRows {
 public:
  ExcludeSelfRows(int64_t piece, int width, bool want_sq, bool outputs_on_device)
      : width_(width), on_device_(outputs_on_device) {
    const size_t rows = static_cast<size_t>(piece);
    index_.resize(rows * (width + 1));
    if (want_sq) sq_.resize(index_.size());
    if (on_device_) {
      packed_index_.resize(rows * width);
      if (want_sq) packed_sq_.resize(rows * width);
    }
  }
  int32_t* index() { return index_.data(); }
  Scalar* sq() { return sq_.empty() ? nullptr : sq_.data(); }

  // Rows [0, n) are those of points first .. first + n - 1.
  void deliver(int64_t n, int64_t first, int32_t* out_index, Scalar* out_sq) {
    int32_t* index_dst = on_device_ ? packed_index_.data() : out_index;
    Scalar* sq_dst = on_device_ ? packed_sq_.data() : out_sq;
    for (int64_t r = 0; r < n; ++r) {
      const int32_t self = static_cast<int32_t>(first + r);
      const int32_t* row = index_.data() + r * (width_ + 1);
      drop_self(row, row, width_, self, index_dst + r * width_);
      if (out_sq) drop_self(row, sq_.data() + r * (width_ + 1), width_, self, sq_dst + r * width_);
    }
    if (!on_device_) return;
    const size_t slots = static_cast<size_t>(n) * width_;
    device_backend().copy_to_device(out_index, packed_index_.data(), sizeof(int32_t) * slots);
    if (out_sq) device_backend().copy_to_device(out_sq, packed_sq_.data(), sizeof(Scalar) * slots);
  }

 private:
  int width_;
  bool on_device_;
  std::vector<int32_t> index_, packed_index_;
  std::vector<Scalar> sq_, packed_sq_;
};

// The queries of a share copied to `device` in one peer copy, for a share
// that would otherwise read them in place from the owner's memory: its
// search reads them one by one in leaf order, a scattered peer read each.
// On two H200s (10^7 x 10^7, k = 8) that share took 25.6 ms reading in place
// and 23.0 ms from queries of its own; the copy costs about 0.2 ms, and the
// split went from 1.68x to 1.79x. The copy takes at most half of the
// share's budget (Backend::device_budget), which from then on is the share's
// explicit limit less the copy; NULL where it does not fit, and the share
// reads in place.
template <typename Scalar>
std::unique_ptr<DeviceAllocation> queries_copied_here(const Scalar* queries, size_t bytes,
                                                      int owner, int device, CallParams& call) {
  const size_t budget = device_backend().device_budget(call.device_memory_limit).bytes();
  if (bytes == 0 || bytes > budget / 2) return nullptr;
  std::unique_ptr<DeviceAllocation> copy;
  try {
    copy = device_backend().allocate(bytes);
  } catch (const Error& e) {
    if (e.status() != KNN_ERR_DEVICE_OUT_OF_MEMORY) throw;
    return nullptr;
  }
  const std::unique_ptr<DeviceCopyStream> stream = device_backend().copy_stream();
  stream->copy(copy->get(), device, queries, owner, bytes);
  stream->wait();
  call.device_memory_limit = budget - bytes;  // > 0: bytes <= budget / 2
  return copy;
}

}  // namespace

DeviceOps device_ops(const Backend& backend) {
  return DeviceOps{
      [&backend](int device) { backend.set_device(device); },
      [&backend] { return backend.current_device(); },
      [&backend](const void* p) { return backend.device_of(p); },
      [&backend](int device, int owner) { return backend.reaches_in_place(device, owner); }};
}

template <class Engine>
DeviceCopies<Engine>::~DeviceCopies() {
  for (auto& copy : copies_) {
    const SelectedDevice on_its_device(ops_, copy.first.device);
    copy.second.reset();
  }
}

template <class Engine>
void DeviceCopies<Engine>::remember_build(const knn_options& o) {
  build_pinned_ = o.device;
  build_devices_.assign(o.devices, o.devices + o.device_count);
}

template <class Engine>
std::vector<int> DeviceCopies<Engine>::devices_for_call(int home_device,
                                                        const knn_options& call_opt, int64_t work,
                                                        int structure,
                                                        const BuilderSource& source) const {
  if (home_device < 0) return {};
  knn_options o = call_opt;
  if (o.device_count == 0) {
    o.device_count = static_cast<int>(build_devices_.size());
    std::copy(build_devices_.begin(), build_devices_.end(), o.devices);
  }
  const DeviceChoice choice =
      choose_devices(build_pinned_, o, device_backend().device_count(), home_device);
  const std::vector<int> devices = devices_for(choice, work);
  if (devices.empty() || (devices.size() == 1 && devices.front() == home_device)) return {};
  const std::vector<int> usable = prepare(devices, choice.forced, home_device, structure, source);
  if (usable.empty() || (usable.size() == 1 && usable.front() == home_device)) return {};
  return usable;
}

template <class Engine>
std::vector<int> DeviceCopies<Engine>::prepare(std::vector<int> devices, bool forced,
                                               int home_device, int structure,
                                               const BuilderSource& source) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int> missing;
  for (int d : std::set<int>(devices.begin(), devices.end()))
    if (d != home_device && copies_.count(CopyKey{d, structure}) == 0) missing.push_back(d);
  if (missing.empty()) return devices;
  const Builder build = source();
  std::vector<std::unique_ptr<Engine>> built(missing.size());
  std::vector<int> refused;
  std::mutex refused_mutex;
  // The copies made are kept even when another fails: they are freed with
  // their owner, each on its own device, as engines must be.
  auto keep_built = [&] {
    for (size_t s = 0; s < missing.size(); ++s)
      if (built[s]) copies_.emplace(CopyKey{missing[s], structure}, std::move(built[s]));
  };
  try {
    run_shares(missing, ops_.select, [&](int s, int) {
      const ProgressMute not_the_call;  // a copy's build is no part of the call's stage
      try {
        built[s] = build();
      } catch (const Error& e) {
        if (forced || e.status() != KNN_ERR_DEVICE_OUT_OF_MEMORY) throw;
        std::lock_guard<std::mutex> refused_lock(refused_mutex);
        refused.push_back(missing[s]);
      }
    });
  } catch (...) {
    keep_built();
    throw;
  }
  keep_built();
  devices.erase(
      std::remove_if(
          devices.begin(), devices.end(),
          [&](int d) { return std::find(refused.begin(), refused.end(), d) != refused.end(); }),
      devices.end());
  return devices;
}

template <class Engine>
const Engine& DeviceCopies<Engine>::copy_on(int device, int structure) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto found = copies_.find(CopyKey{device, structure});
  if (found == copies_.end())
    fail(KNN_ERR_INTERNAL, format("no copy of structure %d on device %d", structure, device));
  return *found->second;
}

template <typename Scalar>
typename DeviceCopies<BasicIndexEngine<Scalar>>::BuilderSource BasicDeviceReplicas<Scalar>::source(
    const Engine& home, const BasicCopyBuilder<Scalar>& build) const {
  return [this, &home, &build] {
    const Scalar* points = host_points(home);
    return [points, &build] { return build(points); };
  };
}

template <typename Scalar>
std::vector<int> BasicDeviceReplicas<Scalar>::devices_for_call(
    const Engine& home, int home_device, const knn_options& call_opt, int64_t work,
    const BasicCopyBuilder<Scalar>& build) const {
  if (home.backend() != KNN_BACKEND_CUDA) return {};
  return copies_.devices_for_call(home_device, call_opt, work, home.structure(),
                                  source(home, build));
}

template <typename Scalar>
std::vector<int> BasicDeviceReplicas<Scalar>::prepare(std::vector<int> devices, bool forced,
                                                      const Engine& home, int home_device,
                                                      const BasicCopyBuilder<Scalar>& build) const {
  return copies_.prepare(std::move(devices), forced, home_device, home.structure(),
                         source(home, build));
}

template <typename Scalar>
const BasicIndexEngine<Scalar>& BasicDeviceReplicas<Scalar>::on(int device, const Engine& home,
                                                                int home_device) const {
  return device == home_device ? home : copies_.copy_on(device, home.structure());
}

template <typename Scalar>
const Scalar* BasicDeviceReplicas<Scalar>::host_points(const Engine& home) const {
  std::lock_guard<std::mutex> lock(points_mutex_);
  if (!have_points_) {
    points_.resize(static_cast<size_t>(home.size()) * static_cast<size_t>(home.dim()));
    if (!points_.empty()) home.copy_points(points_.data());
    have_points_ = true;
  }
  return points_.data();
}

size_t share_device_limit(const std::vector<int>& devices, int device, size_t call_limit) {
  const int64_t alongside = std::count(devices.begin(), devices.end(), device);
  if (alongside <= 1) return call_limit;
  return device_backend().device_budget(call_limit).bytes() / static_cast<size_t>(alongside);
}

template <typename Scalar>
void split_over_devices(const std::vector<int>& devices,
                        const BasicDeviceReplicas<Scalar>& replicas,
                        const BasicIndexEngine<Scalar>& home, int home_device,
                        const BasicSplitCall<Scalar>& split, const BasicShareWork<Scalar>& work) {
  const DeviceOps& ops = replicas.ops();
  const int shares = static_cast<int>(devices.size());
  const int queries_owner = split.call.queries_on_device ? ops.owner(split.queries) : -1;
  const void* any_output = split.indices        ? static_cast<const void*>(split.indices)
                           : split.sq_distances ? static_cast<const void*>(split.sq_distances)
                                                : static_cast<const void*>(split.counts);
  const int outputs_owner = split.call.outputs_on_device ? ops.owner(any_output) : -1;
  const size_t width = static_cast<size_t>(split.row_width);
  run_shares(devices, ops.select, [&](int s, int device) {
    const BasicIndexEngine<Scalar>& engine = replicas.on(device, home, home_device);
    const int64_t first = share_begin(split.m, shares, s);
    const int64_t count = share_begin(split.m, shares, s + 1) - first;
    const Scalar* queries = split.queries + first * split.dim;
    int32_t* indices = split.indices ? split.indices + first * split.row_width : nullptr;
    Scalar* sq = split.sq_distances ? split.sq_distances + first * split.row_width : nullptr;
    int32_t* counts = split.counts ? split.counts + first : nullptr;
    // Shares on the same device run at once: each plans from its part of
    // the device's budget, so that together they stay within it.
    CallParams share_call = split.call;
    share_call.device_memory_limit =
        share_device_limit(devices, device, share_call.device_memory_limit);
    // Host and managed memory every device reads in place (owner -1), and so
    // does a device with peer access to the owner.
    auto in_reach = [&](int owner) {
      return owner < 0 || owner == device || (ops.reaches && ops.reaches(device, owner));
    };
    const bool queries_here = !split.call.queries_on_device || in_reach(queries_owner);
    const bool outputs_here = !split.call.outputs_on_device || in_reach(outputs_owner);
    if (queries_here && outputs_here && !split.exclude_self) {
      std::unique_ptr<DeviceAllocation> own_queries;
      if (split.call.queries_on_device && queries_owner >= 0 && queries_owner != device)
        own_queries =
            queries_copied_here(queries, sizeof(Scalar) * static_cast<size_t>(count) * split.dim,
                                queries_owner, device, share_call);
      if (own_queries) queries = static_cast<const Scalar*>(own_queries->get());
      return work(engine, queries, count, split.row_width, indices, sq, counts, share_call);
    }

    // Staged in pieces: queries of another device copied here, rows written
    // here (or on the host, for all-kNN's extra slot) and moved to the
    // caller's. Two buffers of each, so that one piece's copies (on their own
    // streams) overlap the next piece's search.
    const int engine_width = split.row_width + (split.exclude_self ? 1 : 0);
    const size_t row_bytes =
        std::max<size_t>(1, engine_width * (sizeof(int32_t) + sizeof(Scalar)) + sizeof(int32_t));
    const int64_t piece = std::min<int64_t>(
        {count, kStagingMaxQueries, std::max<int64_t>(1, kStagingRowBytes / row_bytes)});
    const size_t piece_slots = static_cast<size_t>(piece) * engine_width;
    const bool stage_rows = !split.exclude_self && !outputs_here;
    CallParams call = share_call;
    if (!queries_here) call.queries_on_device = true;
    if (split.exclude_self) call.outputs_on_device = false;
    struct Buffers {
      std::unique_ptr<DeviceAllocation> queries, indices, sq, counts;
    } stage[2];
    for (Buffers& b : stage) {
      if (!queries_here) b.queries = device_backend().allocate(sizeof(Scalar) * piece * split.dim);
      if (stage_rows && indices)
        b.indices = device_backend().allocate(sizeof(int32_t) * piece_slots);
      if (stage_rows && sq) b.sq = device_backend().allocate(sizeof(Scalar) * piece_slots);
      if (stage_rows && counts)
        b.counts = device_backend().allocate(sizeof(int32_t) * static_cast<size_t>(piece));
    }
    // All-kNN's rows of width + 1 on the host, and (device outputs) packed.
    ExcludeSelfRows<Scalar> host_rows(split.exclude_self ? piece : 0, split.row_width,
                                      sq != nullptr, split.call.outputs_on_device);
    // Declared after the buffers: destroyed first, waiting for their copies.
    std::unique_ptr<DeviceCopyStream> in, out[2];
    if (!queries_here) in = device_backend().copy_stream();
    if (stage_rows)
      for (auto& o : out) o = device_backend().copy_stream();
    auto fetch = [&](int64_t done, int b) {
      const int64_t n = std::min(piece, count - done);
      in->copy(stage[b].queries->get(), device, queries + done * split.dim, queries_owner,
               sizeof(Scalar) * n * split.dim);
    };
    if (in) fetch(0, 0);
    for (int64_t done = 0, p = 0; done < count; done += piece, ++p) {
      const int b = static_cast<int>(p % 2);
      const int64_t n = std::min(piece, count - done);
      const Scalar* q = queries + done * split.dim;
      if (in) {
        in->wait();  // this piece's queries are here
        if (done + piece < count) fetch(done + piece, 1 - b);
        q = static_cast<const Scalar*>(stage[b].queries->get());
      }
      const size_t at = static_cast<size_t>(done) * width;
      int32_t* out_index = indices ? indices + at : nullptr;
      Scalar* out_sq = sq ? sq + at : nullptr;
      int32_t* out_count = counts ? counts + done : nullptr;
      if (split.exclude_self) {
        work(engine, q, n, engine_width, host_rows.index(), host_rows.sq(), nullptr, call);
        host_rows.deliver(n, first + done, out_index, out_sq);
      } else if (!stage_rows) {
        work(engine, q, n, split.row_width, out_index, out_sq, out_count, call);
      } else {
        out[b]->wait();  // the rows of the piece before last have left these buffers
        const Buffers& here = stage[b];
        work(engine, q, n, split.row_width,
             here.indices ? static_cast<int32_t*>(here.indices->get()) : nullptr,
             here.sq ? static_cast<Scalar*>(here.sq->get()) : nullptr,
             here.counts ? static_cast<int32_t*>(here.counts->get()) : nullptr, call);
        const size_t piece_slots_here = static_cast<size_t>(n) * width;
        if (out_index)
          out[b]->copy(out_index, outputs_owner, here.indices->get(), device,
                       sizeof(int32_t) * piece_slots_here);
        if (out_sq)
          out[b]->copy(out_sq, outputs_owner, here.sq->get(), device,
                       sizeof(Scalar) * piece_slots_here);
        if (out_count)
          out[b]->copy(out_count, outputs_owner, here.counts->get(), device,
                       sizeof(int32_t) * static_cast<size_t>(n));
      }
    }
    for (auto& o : out)
      if (o) o->wait();
  });
}

void split_points(const std::vector<int>& devices, const DeviceOps& ops, int64_t m,
                  const std::vector<PointArray>& arrays, size_t device_memory_limit,
                  bool whole_shares, const PointShareWork& work) {
  const int shares = static_cast<int>(devices.size());
  std::vector<int> owners(arrays.size(), -1);
  for (size_t a = 0; a < arrays.size(); ++a)
    if (arrays[a].data) owners[a] = ops.owner(arrays[a].data);
  run_shares(devices, ops.select, [&](int s, int device) {
    const int64_t first = share_begin(m, shares, s);
    const int64_t count = share_begin(m, shares, s + 1) - first;
    size_t limit = share_device_limit(devices, device, device_memory_limit);
    std::vector<char*> at(arrays.size(), nullptr);
    std::vector<bool> staged(arrays.size(), false);
    size_t staged_per_point = 0;
    for (size_t a = 0; a < arrays.size(); ++a) {
      if (!arrays[a].data) continue;
      at[a] = static_cast<char*>(arrays[a].data) + first * arrays[a].bytes_per_point;
      staged[a] = owners[a] >= 0 && owners[a] != device;
      if (staged[a]) staged_per_point += arrays[a].bytes_per_point;
    }
    if (staged_per_point == 0)
      return work(device, count, std::vector<void*>(at.begin(), at.end()), limit);

    // Pieces take at most half the share's budget, the engine the rest.
    const size_t budget = device_backend().device_budget(limit).bytes();
    const size_t most_staging = std::min(kStagingRowBytes, budget / 2);
    const int64_t piece = whole_shares
                              ? count
                              : std::min({count, kStagingMaxQueries,
                                          std::max<int64_t>(1, most_staging / staged_per_point)});
    const size_t staging_bytes = static_cast<size_t>(piece) * staged_per_point;
    if (staging_bytes >= budget)
      fail(KNN_ERR_DEVICE_OUT_OF_MEMORY,
           format("device %d: %zu bytes of staging for arrays of another device exceed the "
                  "budget of %zu bytes",
                  device, staging_bytes, budget));
    limit = budget - staging_bytes;
    std::vector<std::unique_ptr<DeviceAllocation>> staging(arrays.size());
    for (size_t a = 0; a < arrays.size(); ++a)
      if (staged[a])
        staging[a] =
            device_backend().allocate(static_cast<size_t>(piece) * arrays[a].bytes_per_point);
    // Declared after the buffers: destroyed first, waiting for their copies.
    const std::unique_ptr<DeviceCopyStream> stream = device_backend().copy_stream();
    std::vector<void*> piece_at(arrays.size(), nullptr);
    for (int64_t done = 0; done < count; done += piece) {
      const int64_t n = std::min(piece, count - done);
      for (size_t a = 0; a < arrays.size(); ++a) {
        if (!at[a]) continue;
        char* caller = at[a] + done * arrays[a].bytes_per_point;
        piece_at[a] = staged[a] ? staging[a]->get() : caller;
        if (staged[a] && !arrays[a].written)
          stream->copy(piece_at[a], device, caller, owners[a],
                       static_cast<size_t>(n) * arrays[a].bytes_per_point);
      }
      stream->wait();
      work(device, n, piece_at, limit);
      for (size_t a = 0; a < arrays.size(); ++a)
        if (staged[a] && arrays[a].written)
          stream->copy(at[a] + done * arrays[a].bytes_per_point, owners[a], piece_at[a], device,
                       static_cast<size_t>(n) * arrays[a].bytes_per_point);
      stream->wait();
    }
  });
}

// The float32 calls and their _f64 twins.
template class DeviceCopies<BasicIndexEngine<float>>;
template class DeviceCopies<BasicIndexEngine<double>>;
template class DeviceCopies<MeshEngine<float>>;
template class DeviceCopies<MeshEngine<double>>;
template class BasicDeviceReplicas<float>;
template class BasicDeviceReplicas<double>;
template void split_over_devices(const std::vector<int>&, const BasicDeviceReplicas<float>&,
                                 const BasicIndexEngine<float>&, int, const BasicSplitCall<float>&,
                                 const BasicShareWork<float>&);
template void split_over_devices(const std::vector<int>&, const BasicDeviceReplicas<double>&,
                                 const BasicIndexEngine<double>&, int,
                                 const BasicSplitCall<double>&, const BasicShareWork<double>&);

}  // namespace knn
