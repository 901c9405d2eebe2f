// The mesh entry points (include/knn_gpgpu_mesh.h) of each precision, by
// overload on the scalar of the points, so that one test template calls the
// float functions or their _f64 twins. Arguments are the C functions' own.
#pragma once

#include <cstdint>

#include "knn_gpgpu.h"

namespace knn_test {

inline int mesh_build(const float* v, int64_t nv, const int32_t* t, int64_t nt,
                      const knn_options* o, knn_mesh** out) {
  return knn_mesh_build(v, nv, t, nt, o, out);
}
inline int mesh_build(const double* v, int64_t nv, const int32_t* t, int64_t nt,
                      const knn_options* o, knn_mesh** out) {
  return knn_mesh_build_f64(v, nv, t, nt, o, out);
}

inline int mesh_closest(const knn_mesh* h, const float* q, int64_t m, float md, int32_t* id,
                        float* sq, float* c, float* b, const knn_options* o) {
  return knn_mesh_closest(h, q, m, md, id, sq, c, b, o);
}
inline int mesh_closest(const knn_mesh* h, const double* q, int64_t m, double md, int32_t* id,
                        double* sq, double* c, double* b, const knn_options* o) {
  return knn_mesh_closest_f64(h, q, m, md, id, sq, c, b, o);
}

inline int mesh_signed_distance(const knn_mesh* h, const float* q, int64_t m, float md, float* s,
                                int32_t* id, const knn_options* o) {
  return knn_mesh_signed_distance(h, q, m, md, s, id, o);
}
inline int mesh_signed_distance(const knn_mesh* h, const double* q, int64_t m, double md, double* s,
                                int32_t* id, const knn_options* o) {
  return knn_mesh_signed_distance_f64(h, q, m, md, s, id, o);
}

inline int mesh_report(const knn_mesh* h, const float* q, int64_t m, float md, double tol,
                       const double* p, int np, double* pv, const double* e, int nb, int64_t* bc,
                       float* s, knn_deviation_report* r, const knn_options* o) {
  return knn_mesh_deviation_report(h, q, m, md, tol, p, np, pv, e, nb, bc, s, r, o);
}
inline int mesh_report(const knn_mesh* h, const double* q, int64_t m, double md, double tol,
                       const double* p, int np, double* pv, const double* e, int nb, int64_t* bc,
                       double* s, knn_deviation_report* r, const knn_options* o) {
  return knn_mesh_deviation_report_f64(h, q, m, md, tol, p, np, pv, e, nb, bc, s, r, o);
}

inline int mesh_align(const knn_mesh* h, const float* q, int64_t m, const double* initial,
                      double max_correspondence, int iterations, double* t, double* rms,
                      const knn_options* o) {
  return knn_mesh_align(h, q, m, initial, max_correspondence, iterations, t, rms, o);
}
inline int mesh_align(const knn_mesh* h, const double* q, int64_t m, const double* initial,
                      double max_correspondence, int iterations, double* t, double* rms,
                      const knn_options* o) {
  return knn_mesh_align_f64(h, q, m, initial, max_correspondence, iterations, t, rms, o);
}

inline int mesh_align_ex(const knn_mesh* h, const float* q, int64_t m, const double* initial,
                         const knn_align_params* params, knn_align_result* r,
                         const knn_options* o) {
  return knn_mesh_align_ex(h, q, m, initial, params, r, o);
}
inline int mesh_align_ex(const knn_mesh* h, const double* q, int64_t m, const double* initial,
                         const knn_align_params* params, knn_align_result* r,
                         const knn_options* o) {
  return knn_mesh_align_ex_f64(h, q, m, initial, params, r, o);
}

}  // namespace knn_test
