// The saved format's entry points of the index API (contract section 3,
// "Serialization"): the index's points and build settings written in the
// format of src/index_format.*, and an index rebuilt from them on load.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../engine/cancel.h"
#include "abi_barrier.h"
#include "framing.h"
#include "index_format.h"
#include "index_handle.h"
#include "options.h"

namespace knn {
namespace {

template <typename Scalar>
void serialize(const knn_index& ix, const BasicIndexEngine<Scalar>& engine, unsigned char* buffer) {
  std::vector<Scalar> points(static_cast<size_t>(engine.size()) * engine.dim());
  if (!points.empty()) engine.copy_points(points.data());
  SavedIndex saved;
  saved.n = engine.size();
  saved.dim = engine.dim();
  saved.structure = engine.structure();
  saved.leaf_size = ix.leaf_size;
  saved.scalar = ix.scalar();
  write_serialized_index(saved, points.data(), buffer);
}

// The index of a checked buffer's points (`payload`, unaligned) of precision
// Scalar, rebuilt with the saved structure and leaf size. The format records
// the structure that served, not whether AUTO chose it: a load that asks for
// AUTO (the default) makes the loaded index automatic (its kd-tree, if a call
// wants one, is rebuilt on first use like any AUTO index's).
template <typename Scalar>
knn_index* deserialize(const SavedIndex& saved, const unsigned char* payload, knn_options o) {
  // Copied a run at a time, reading the cancel flag: the load of a large
  // file is a long call too.
  const size_t count = static_cast<size_t>(saved.n) * static_cast<size_t>(saved.dim);
  std::vector<Scalar> points;
  points.reserve(count);
  for_each_run(static_cast<int64_t>(count), cancel_flag(), [&](int64_t begin, int64_t end) {
    points.resize(static_cast<size_t>(end));
    std::memcpy(points.data() + begin, payload + begin * sizeof(Scalar),
                static_cast<size_t>(end - begin) * sizeof(Scalar));
  });
  const bool automatic = o.structure == KNN_STRUCTURE_AUTO;
  o.struct_size = sizeof o;
  o.structure = saved.structure;
  o.leaf_size = saved.leaf_size;
  knn_index* index = build_index(points.data(), saved.n, saved.dim, &o);
  index->automatic = automatic;  // not yet returned: no other thread sees it
  return index;
}

}  // namespace
}  // namespace knn

extern "C" {

KNN_API int KNN_CALL knn_index_serialized_size(const knn_index* index, size_t* bytes) {
  return knn::guarded("knn_index_serialized_size", [&] {
    const knn::HandleUse<knn_index> use = knn::use_index(index);
    const knn_index& ix = *use;
    if (bytes == nullptr) knn::fail(KNN_ERR_INVALID_ARGUMENT, "bytes is NULL");
    *bytes = knn::serialized_index_bytes(ix.size(), ix.dim(), ix.scalar());
  });
}

KNN_API int KNN_CALL knn_index_serialize(const knn_index* index, void* buffer, size_t bytes) {
  return knn::guarded("knn_index_serialize", [&] {
    const knn::HandleUse<knn_index> use = knn::use_index(index);
    const knn_index& ix = *use;
    const size_t needed = knn::serialized_index_bytes(ix.size(), ix.dim(), ix.scalar());
    knn::check_serialize_buffer("index", buffer, bytes, needed);
    knn::DeviceScope scope(ix.device);
    unsigned char* const out = static_cast<unsigned char*>(buffer);
    if (ix.engine64)
      knn::serialize(ix, *ix.engine64, out);
    else
      knn::serialize(ix, *ix.engine32, out);
  });
}

KNN_API int KNN_CALL knn_index_deserialize(const void* buffer, size_t bytes, const knn_options* opt,
                                           knn_index** out) {
  return knn::guarded("knn_index_deserialize", [&] {
    knn::clear_out(out);
    const knn_options o = knn::read_options(opt);
    knn::check_deserialize_buffer(buffer, bytes);
    const unsigned char* payload = nullptr;
    const knn::SavedIndex saved =
        knn::read_serialized_index(static_cast<const unsigned char*>(buffer), bytes, &payload);
    *out = saved.scalar == KNN_SCALAR_FLOAT64 ? knn::deserialize<double>(saved, payload, o)
                                              : knn::deserialize<float>(saved, payload, o);
  });
}

}  // extern "C"
