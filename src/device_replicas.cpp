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

// The points a share stages at a time where it must (peer copies, all-kNN's
// extra slot): at most this many bytes of a piece's staging (both buffers)
// or host scratch, so that it stays small next to the engine's own chunks.
constexpr size_t kStagingBytes = size_t{256} << 20;
constexpr int64_t kStagingMaxPoints = int64_t{1} << 20;

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

// All-kNN rows of width + 1 on the host for one piece, in its host scratch,
// delivered with the row's own index dropped (else the last slot) into the
// caller's rows: host memory in place, device memory by one copy per piece
// (packed in the scratch first).
template <typename Scalar>
class ExcludeSelfRows {
 public:
  // The scratch of one row: the scalars first, so that they stay aligned.
  static size_t bytes_per_row(int width, bool want_sq, bool outputs_on_device) {
    const size_t slot = sizeof(int32_t) + (want_sq ? sizeof(Scalar) : 0);
    return slot * (static_cast<size_t>(width) + 1 + (outputs_on_device ? width : 0));
  }

  ExcludeSelfRows(void* scratch, int64_t rows, int width, bool want_sq, bool outputs_on_device)
      : width_(width), on_device_(outputs_on_device) {
    const size_t wide = static_cast<size_t>(rows) * (width + 1);
    const size_t packed = outputs_on_device ? static_cast<size_t>(rows) * width : 0;
    char* at = static_cast<char*>(scratch);
    auto take = [&at](size_t bytes) {
      char* part = at;
      at += bytes;
      return part;
    };
    if (want_sq) {
      sq_ = reinterpret_cast<Scalar*>(take(wide * sizeof(Scalar)));
      packed_sq_ = reinterpret_cast<Scalar*>(take(packed * sizeof(Scalar)));
    }
    index_ = reinterpret_cast<int32_t*>(take(wide * sizeof(int32_t)));
    packed_index_ = reinterpret_cast<int32_t*>(take(packed * sizeof(int32_t)));
  }
  int32_t* index() { return index_; }
  Scalar* sq() { return sq_; }

  // Rows [0, n) are those of points first .. first + n - 1.
  void deliver(int64_t n, int64_t first, int32_t* out_index, Scalar* out_sq) {
    int32_t* index_dst = on_device_ ? packed_index_ : out_index;
    Scalar* sq_dst = on_device_ ? packed_sq_ : out_sq;
    for (int64_t r = 0; r < n; ++r) {
      const int32_t self = static_cast<int32_t>(first + r);
      const int32_t* row = index_ + r * (width_ + 1);
      drop_self(row, row, width_, self, index_dst + r * width_);
      if (out_sq) drop_self(row, sq_ + r * (width_ + 1), width_, self, sq_dst + r * width_);
    }
    if (!on_device_) return;
    const size_t slots = static_cast<size_t>(n) * width_;
    device_backend().copy_to_device(out_index, packed_index_, sizeof(int32_t) * slots);
    if (out_sq) device_backend().copy_to_device(out_sq, packed_sq_, sizeof(Scalar) * slots);
  }

 private:
  int width_;
  bool on_device_;
  int32_t *index_ = nullptr, *packed_index_ = nullptr;
  Scalar *sq_ = nullptr, *packed_sq_ = nullptr;
};

// A read array of a share copied to `device` in one peer copy, for a share
// that would otherwise read it in place from the owner's memory: an index
// search reads its queries one by one in leaf order, a scattered peer read
// each. On two H200s (10^7 x 10^7, k = 8) that share took 25.6 ms reading in
// place and 23.0 ms from queries of its own; the copy costs about 0.2 ms, and
// the split went from 1.68x to 1.79x. The copy takes at most half of the
// share's budget, which from then on is the share's explicit limit less the
// copy; NULL where it does not fit, and the share reads in place.
std::unique_ptr<DeviceAllocation> copied_here(const DeviceOps& ops, const void* data, size_t bytes,
                                              int owner, int device, size_t& limit) {
  const size_t budget = ops.budget(limit);
  if (bytes == 0 || bytes > budget / 2) return nullptr;
  std::unique_ptr<DeviceAllocation> copy;
  try {
    copy = ops.allocate(bytes);
  } catch (const Error& e) {
    if (e.status() != KNN_ERR_DEVICE_OUT_OF_MEMORY) throw;
    return nullptr;
  }
  const std::unique_ptr<DeviceCopyStream> stream = ops.copy_stream();
  stream->copy(copy->get(), device, data, owner, bytes);
  stream->wait();
  limit = budget - bytes;  // > 0: bytes <= budget / 2
  return copy;
}

// The device budget of one share on `device`: the call's limit, divided
// among the shares that run on that device at once (a device listed twice),
// so that together they stay within it.
size_t share_device_limit(const DeviceOps& ops, const std::vector<int>& devices, int device,
                          size_t call_limit) {
  const int64_t alongside = std::count(devices.begin(), devices.end(), device);
  if (alongside <= 1) return call_limit;
  return ops.budget(call_limit) / static_cast<size_t>(alongside);
}

// One share of split_points, its arrays at the share's first point:
// `staged` marks those to stage through memory of the share's device.
struct ShareArrays {
  const std::vector<PointArray>& arrays;
  const std::vector<int>& owners;
  std::vector<bool> staged;
  size_t staged_per_point = 0;

  char* at(size_t a, const PointPiece& share, int64_t done) const {
    return static_cast<char*>(share.arrays[a]) + done * arrays[a].bytes_per_point;
  }
  size_t bytes(size_t a, int64_t points) const {
    return static_cast<size_t>(points) * arrays[a].bytes_per_point;
  }
};

// A share in pieces: arrays of another device staged (two buffers of each,
// so that one piece's copies, on their own streams, overlap the next
// piece's work) and the rules' host scratch.
void run_in_pieces(const DeviceOps& ops, const ShareArrays& s, const PointSplitRules& rules,
                   PointPiece share, const PointShareWork& work) {
  const int device = share.device;
  const int64_t count = share.count;
  const size_t staged = s.staged_per_point;
  const size_t budget = staged > 0 ? ops.budget(share.device_memory_limit) : 0;
  // Pieces keep their staging (every buffer) within half the budget, the
  // engine taking the rest, and within kStagingBytes with the host scratch.
  const auto piece_for = [&](size_t buffers) {
    if (rules.whole_shares) return count;
    const size_t per_point = buffers * staged + rules.host_bytes_per_point;
    int64_t piece =
        std::min({count, kStagingMaxPoints, std::max<int64_t>(1, kStagingBytes / per_point)});
    if (staged > 0) piece = std::min(piece, std::max<int64_t>(1, budget / 2 / (buffers * staged)));
    return piece;
  };
  const size_t buffers = staged > 0 && piece_for(1) < count ? 2 : 1;
  const int64_t piece = piece_for(buffers);
  if (staged > 0) {
    const size_t staging_bytes = buffers * static_cast<size_t>(piece) * staged;
    if (staging_bytes >= budget)
      fail(KNN_ERR_DEVICE_OUT_OF_MEMORY,
           format("device %d: %zu bytes of staging for arrays of another device exceed the "
                  "budget of %zu bytes",
                  device, staging_bytes, budget));
    share.device_memory_limit = budget - staging_bytes;
  }
  const size_t n_arrays = s.arrays.size();
  std::vector<char> scratch(static_cast<size_t>(piece) * rules.host_bytes_per_point);
  std::vector<std::unique_ptr<DeviceAllocation>> stage[2];
  bool reads = false, writes = false;
  for (size_t b = 0; b < buffers; ++b) {
    stage[b].resize(n_arrays);
    for (size_t a = 0; a < n_arrays; ++a) {
      if (!s.staged[a]) continue;
      stage[b][a] = ops.allocate(s.bytes(a, piece));
      (s.arrays[a].written ? writes : reads) = true;
    }
  }
  // Declared after the buffers: destroyed first, waiting for their copies.
  std::unique_ptr<DeviceCopyStream> in, out[2];
  if (reads) in = ops.copy_stream();
  if (writes)
    for (size_t b = 0; b < buffers; ++b) out[b] = ops.copy_stream();
  const auto fetch = [&](int64_t done, size_t b) {
    const int64_t n = std::min(piece, count - done);
    for (size_t a = 0; a < n_arrays; ++a)
      if (s.staged[a] && !s.arrays[a].written)
        in->copy(stage[b][a]->get(), device, s.at(a, share, done), s.owners[a], s.bytes(a, n));
  };
  if (in) fetch(0, 0);
  PointPiece p = share;
  p.host_scratch = scratch.empty() ? nullptr : scratch.data();
  for (int64_t done = 0, i = 0; done < count; done += piece, ++i) {
    const size_t b = static_cast<size_t>(i) % buffers;
    p.first = share.first + done;
    p.count = std::min(piece, count - done);
    if (in) {
      in->wait();  // this piece's arrays are here
      if (done + piece < count) fetch(done + piece, 1 - b);
    }
    if (out[b]) out[b]->wait();  // the piece before last has left these buffers
    for (size_t a = 0; a < n_arrays; ++a)
      if (share.arrays[a]) p.arrays[a] = s.staged[a] ? stage[b][a]->get() : s.at(a, share, done);
    work(p);
    for (size_t a = 0; a < n_arrays; ++a)
      if (s.staged[a] && s.arrays[a].written)
        out[b]->copy(s.at(a, share, done), s.owners[a], stage[b][a]->get(), device,
                     s.bytes(a, p.count));
  }
  for (auto& o : out)
    if (o) o->wait();
}

}  // namespace

DeviceOps device_ops(const Backend& backend) {
  return DeviceOps{
      [&backend](int device) { backend.set_device(device); },
      [&backend] { return backend.current_device(); },
      [&backend](const void* p) { return backend.device_of(p); },
      [&backend](int device, int owner) { return backend.reaches_in_place(device, owner); },
      [&backend](size_t call_limit) { return backend.device_budget(call_limit).bytes(); },
      [&backend](size_t bytes) { return backend.allocate(bytes); },
      [&backend] { return backend.copy_stream(); }};
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

void split_points(const std::vector<int>& devices, const DeviceOps& ops, int64_t m,
                  const std::vector<PointArray>& arrays, size_t device_memory_limit,
                  const PointSplitRules& rules, const PointShareWork& work) {
  const int shares = static_cast<int>(devices.size());
  std::vector<int> owners(arrays.size(), -1);
  for (size_t a = 0; a < arrays.size(); ++a)
    if (arrays[a].data) owners[a] = ops.owner(arrays[a].data);
  run_shares(devices, ops.select, [&](int s, int device) {
    PointPiece share;
    share.device = device;
    share.first = share_begin(m, shares, s);
    share.count = share_begin(m, shares, s + 1) - share.first;
    share.device_memory_limit = share_device_limit(ops, devices, device, device_memory_limit);
    share.arrays.assign(arrays.size(), nullptr);
    ShareArrays layout{arrays, owners, std::vector<bool>(arrays.size(), false)};
    // Host and managed memory every device reads in place (owner -1), and
    // with peers_in_place so does a device with peer access to the owner.
    const auto elsewhere = [&](size_t a) { return owners[a] >= 0 && owners[a] != device; };
    for (size_t a = 0; a < arrays.size(); ++a) {
      if (!arrays[a].data) continue;
      share.arrays[a] =
          static_cast<char*>(arrays[a].data) + share.first * arrays[a].bytes_per_point;
      layout.staged[a] = elsewhere(a) && !(rules.peers_in_place && ops.reaches(device, owners[a]));
      if (layout.staged[a]) layout.staged_per_point += arrays[a].bytes_per_point;
    }
    if (share.count > 0 && (layout.staged_per_point > 0 || rules.host_bytes_per_point > 0))
      return run_in_pieces(ops, layout, rules, std::move(share), work);
    // Whole, read arrays that a reached peer holds copied over first.
    std::vector<std::unique_ptr<DeviceAllocation>> copies;
    for (size_t a = 0; a < arrays.size(); ++a) {
      if (!arrays[a].data || arrays[a].written || !elsewhere(a)) continue;
      copies.push_back(copied_here(ops, share.arrays[a], layout.bytes(a, share.count), owners[a],
                                   device, share.device_memory_limit));
      if (copies.back()) share.arrays[a] = copies.back()->get();
    }
    work(share);
  });
}

template <typename Scalar>
void split_over_devices(const std::vector<int>& devices,
                        const BasicDeviceReplicas<Scalar>& replicas,
                        const BasicIndexEngine<Scalar>& home, int home_device,
                        const BasicSplitCall<Scalar>& split, const BasicShareWork<Scalar>& work) {
  const int width = split.row_width;
  const size_t slots = static_cast<size_t>(width);
  std::vector<PointArray> arrays{
      {const_cast<Scalar*>(split.queries), sizeof(Scalar) * split.dim, false}};
  PointSplitRules rules;
  rules.peers_in_place = true;
  if (split.exclude_self)
    rules.host_bytes_per_point = ExcludeSelfRows<Scalar>::bytes_per_row(
        width, split.sq_distances != nullptr, split.call.outputs_on_device);
  else
    arrays.insert(arrays.end(), {{split.indices, sizeof(int32_t) * slots, true},
                                 {split.sq_distances, sizeof(Scalar) * slots, true},
                                 {split.counts, sizeof(int32_t), true}});
  split_points(
      devices, replicas.ops(), split.m, arrays, split.call.device_memory_limit, rules,
      [&](const PointPiece& piece) {
        const BasicIndexEngine<Scalar>& engine = replicas.on(piece.device, home, home_device);
        const Scalar* queries = static_cast<const Scalar*>(piece.arrays[0]);
        CallParams call = split.call;
        call.device_memory_limit = piece.device_memory_limit;
        if (!split.exclude_self)
          return work(engine, queries, piece.count, width, static_cast<int32_t*>(piece.arrays[1]),
                      static_cast<Scalar*>(piece.arrays[2]), static_cast<int32_t*>(piece.arrays[3]),
                      call);
        // The rows of width + 1 on the host, delivered to the caller's.
        call.outputs_on_device = false;
        ExcludeSelfRows<Scalar> rows(piece.host_scratch, piece.count, width,
                                     split.sq_distances != nullptr, split.call.outputs_on_device);
        work(engine, queries, piece.count, width + 1, rows.index(), rows.sq(), nullptr, call);
        const size_t at = static_cast<size_t>(piece.first) * slots;
        rows.deliver(piece.count, piece.first, split.indices + at,
                     split.sq_distances ? split.sq_distances + at : nullptr);
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
