// Fuzz target: knn_mesh_build / _f64 on fuzzed meshes (counts, indices in
// and out of range, repeated and shared vertices, NaN, infinities and huge
// coordinates from raw bits), then the query calls on the mesh built. The
// oracle, written apart from the library (tests/support/mesh_oracle.h and a map of
// directed edges here):
//   - a mesh with an index outside [0, n_vertices) is refused with
//     INVALID_ARGUMENT, one with a NaN or infinite coordinate with
//     NONFINITE_INPUT, a coordinate beyond the limit with INVALID_ARGUMENT;
//     *out is then NULL;
//   - a mesh accepted says closed_oriented exactly when every directed edge
//     occurs once and its reverse once, and no triangle repeats a vertex;
//   - its closest point of each point is a witness: the point of its
//     barycentric weights on its triangle, at its distance, and no farther
//     than the long-double brute force's nearest; its signed distance has
//     that magnitude; a serialized copy loads and answers with the same bits.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "fuzz_support.h"
#include "mesh_oracle.h"

namespace {

using knn_fuzz::check_status;
using knn_fuzz::expect;

bool closed_oriented(const std::vector<int32_t>& t) {
  std::map<std::pair<int32_t, int32_t>, int> runs;
  for (size_t i = 0; i < t.size(); i += 3)
    for (int c = 0; c < 3; ++c) {
      const int32_t a = t[i + c], b = t[i + (c + 1) % 3];
      if (a == b) return false;
      ++runs[{a, b}];
    }
  for (const auto& run : runs) {
    const auto reverse = runs.find({run.first.second, run.first.first});
    if (run.second != 1 || reverse == runs.end() || reverse->second != 1) return false;
  }
  return true;
}

template <class S>
int build(const std::vector<S>& v, int64_t nv, const std::vector<int32_t>& t, int64_t nt,
          const knn_options* o, knn_mesh** out) {
  if constexpr (sizeof(S) == 8)
    return knn_mesh_build_f64(v.data(), nv, t.data(), nt, o, out);
  else
    return knn_mesh_build(v.data(), nv, t.data(), nt, o, out);
}

template <class S>
void fuzz(FuzzedDataProvider& in) {
  const bool raw = in.ConsumeIntegralInRange<int>(0, 7) == 0;  // NaN, infinities, huge values
  const int64_t nv = in.ConsumeIntegralInRange<int64_t>(0, 12);
  const int64_t nt = in.ConsumeIntegralInRange<int64_t>(0, 16);
  std::vector<S> v;
  for (int64_t i = 0; i < 3 * nv; ++i) {
    if (raw) {
      v.push_back(static_cast<S>(knn_fuzz::next_float(in, true)));
    } else {
      v.push_back(static_cast<S>(in.ConsumeIntegralInRange<int>(-4, 4)));
    }
  }
  std::vector<int32_t> t;
  for (int64_t i = 0; i < 3 * nt; ++i)
    t.push_back(in.ConsumeBool() ? in.ConsumeIntegral<int32_t>()
                                 : in.ConsumeIntegralInRange<int32_t>(0, 11));
  knn_options o;
  knn_options_init(&o);
  o.backend = KNN_BACKEND_OPENMP;
  o.threads = in.ConsumeIntegralInRange<int>(1, 3);
  knn_mesh* mesh = reinterpret_cast<knn_mesh*>(&mesh);
  const int status = build(v, nv, t, nt, &o, &mesh);
  check_status(status);

  bool index_bad = false, nonfinite = false, huge = false;
  for (int32_t i : t) index_bad = index_bad || i < 0 || i >= nv;
  const S limit = std::ldexp(S(1), (std::numeric_limits<S>::max_exponent - 3 - 2) / 2);
  for (S c : v) {
    nonfinite = nonfinite || !std::isfinite(c);
    huge = huge || (std::isfinite(c) && std::fabs(c) > limit);
  }
  if (nt == 0 || index_bad || nonfinite || huge) {
    expect(status == KNN_ERR_INVALID_ARGUMENT || status == KNN_ERR_NONFINITE_INPUT,
           "a bad mesh was not refused", status);
    // Which refusal comes first is the library's order; a mesh with only
    // non-finite faults must say so.
    if (nt > 0 && !index_bad && !huge)
      expect(status == KNN_ERR_NONFINITE_INPUT, "NaN/Inf not NONFINITE_INPUT", status);
    expect(mesh == nullptr, "*out not NULL after a refusal", status);
    return;
  }
  expect(status == KNN_OK, "a valid mesh was refused", status);
  int closed = -1;
  expect(knn_mesh_info(mesh, nullptr, nullptr, nullptr, nullptr, &closed) == KNN_OK, "info", 0);
  expect(closed == (closed_oriented(t) ? 1 : 0), "closed_oriented differs from the definition", 0);

  knn_mesh_oracle::Mesh oracle;
  oracle.vertices.assign(v.begin(), v.end());
  oracle.triangles = t;
  std::vector<S> q;
  const int64_t m = in.ConsumeIntegralInRange<int64_t>(1, 6);
  for (int64_t i = 0; i < 3 * m; ++i)
    q.push_back(static_cast<S>(in.ConsumeIntegralInRange<int>(-12, 12)) / S(2));
  std::vector<int32_t> ids(m);
  std::vector<S> sq(m), sd(m), at(3 * m), weights(3 * m);
  const S inf = std::numeric_limits<S>::infinity();
  int a, b;
  if constexpr (sizeof(S) == 8) {
    a = knn_mesh_closest_f64(mesh, q.data(), m, inf, ids.data(), sq.data(), at.data(),
                             weights.data(), &o);
    b = knn_mesh_signed_distance_f64(mesh, q.data(), m, inf, sd.data(), nullptr, &o);
  } else {
    a = knn_mesh_closest(mesh, q.data(), m, inf, ids.data(), sq.data(), at.data(), weights.data(),
                         &o);
    b = knn_mesh_signed_distance(mesh, q.data(), m, inf, sd.data(), nullptr, &o);
  }
  expect(a == KNN_OK && b == KNN_OK, "a query on a valid mesh failed", a ? a : b);
  // The definition rounds in S: its distances are exact to a few units in
  // the last place of the largest coordinate in play (a segment 1e35 long
  // passing near the point is measured to about eps * 1e35). The long-double
  // oracle's region logic is not that good on slivers of such triangles (its
  // products of dot products cancel: a 2e38-long sliver put a point 6 from
  // the face at 1.5e25), so the library's answer is checked as a witness: its
  // weights give a point of its triangle, at its distance, and no triangle of
  // the oracle's is nearer. A too-small distance needs a false witness, a
  // too-large one loses to the oracle.
  const long double tol = sizeof(S) == 4 ? 1e-4L : 1e-10L;
  const long double eps = std::numeric_limits<S>::epsilon();
  long double magnitude = 6;  // the points' coordinates are at most 6
  for (S c : v) magnitude = std::max(magnitude, std::fabs(static_cast<long double>(c)));
  const long double slack = 64 * eps * magnitude;
  for (int64_t i = 0; i < m; ++i) {
    const knn_mesh_oracle::P3 p{q[3 * i], q[3 * i + 1], q[3 * i + 2]};
    const long double best = std::sqrt(knn_mesh_oracle::nearest(oracle, p).sq);
    const long double distance = std::sqrt(static_cast<long double>(sq[i]));
    const long double allowed = tol * (1 + std::min(best, distance)) + slack;
    expect(ids[i] >= 0 && ids[i] < nt, "closest id out of range", 0);
    knn_mesh_oracle::P3 witness{0, 0, 0};
    long double weight_sum = 0;
    for (int c = 0; c < 3; ++c) {
      const long double w = weights[3 * i + c];
      expect(w >= -64 * eps && w <= 1 + 64 * eps, "a barycentric weight outside [0, 1]", 0);
      weight_sum += w;
      witness = witness + w * oracle.corner(ids[i], c);
    }
    expect(std::fabs(weight_sum - 1) <= 64 * eps, "the barycentric weights do not sum to 1", 0);
    const knn_mesh_oracle::P3 closest{at[3 * i], at[3 * i + 1], at[3 * i + 2]};
    expect(std::sqrt(knn_mesh_oracle::norm2(closest - witness)) <= allowed,
           "the closest point is not the point of its weights", 0);
    expect(std::fabs(std::sqrt(knn_mesh_oracle::norm2(p - closest)) - distance) <= allowed,
           "the squared distance is not that of the closest point", 0);
    expect(distance <= best + allowed, "the closest triangle is not one of least distance", 0);
    expect(std::fabs(std::fabs(static_cast<long double>(sd[i])) - distance) <= allowed,
           "the signed distance's magnitude differs from the closest distance", 0);
  }
  // A serialized copy loads and answers with the same bits.
  size_t bytes = 0;
  expect(knn_mesh_serialized_size(mesh, &bytes) == KNN_OK, "serialized_size", 0);
  std::vector<unsigned char> buffer(bytes);
  expect(knn_mesh_serialize(mesh, buffer.data(), bytes) == KNN_OK, "serialize", 0);
  knn_mesh* loaded = nullptr;
  expect(knn_mesh_deserialize(buffer.data(), bytes, &o, &loaded) == KNN_OK, "deserialize", 0);
  std::vector<S> sd2(m);
  if constexpr (sizeof(S) == 8)
    a = knn_mesh_signed_distance_f64(loaded, q.data(), m, inf, sd2.data(), nullptr, &o);
  else
    a = knn_mesh_signed_distance(loaded, q.data(), m, inf, sd2.data(), nullptr, &o);
  expect(a == KNN_OK && std::memcmp(sd.data(), sd2.data(), m * sizeof(S)) == 0,
         "the loaded mesh answers other bits", a);
  knn_mesh_free(loaded);
  knn_mesh_free(mesh);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  if (in.ConsumeBool())
    fuzz<float>(in);
  else
    fuzz<double>(in);
  return 0;
}
