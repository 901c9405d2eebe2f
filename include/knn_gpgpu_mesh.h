/* knn_gpgpu: triangle meshes. Exact closest point, signed distance and the
 * deviation report of a scan against a design (contract section 6).
 *
 * Included by knn_gpgpu.h (the one include for hosts); the general rules of
 * that header (status codes, knn_last_error, options, device memory,
 * cancellation and progress, threads, live handles) hold here as well.
 *
 * Definitions, identical on every backend (the CUDA engine and the OpenMP
 * engine answer with the same bits):
 *  - The closest point of a triangle (a, b, c) to a point q: when the
 *    triangle has an area and q's projection onto its plane lies inside or
 *    on it, that projection (the face); otherwise the nearest of the closest
 *    points of its edges ab, bc, ca (ties to the first), an edge's being
 *    p0 + t (p1 - p0) with t clamped to [0, 1] (exactly p0 or p1 at the
 *    ends). Slivers (the sine of the angle at a below 1/32), whose computed
 *    normal may be mostly rounding, answer with the nearest of their face
 *    point (rebuilt from its barycentric weights, so on the triangle) and
 *    their edges' points. Degenerate triangles (no area: needles, points,
 *    repeated vertices) are valid and have only their edges. Every
 *    operation is one rounding in the mesh's scalar (float for
 *    knn_mesh_build, double for _f64), with no fused multiply-add.
 *  - The squared distance is that from q to the closest point reported
 *    ((dx*dx + dy*dy) + dz*dz, rounded each step). The nearest triangle is
 *    the one of least squared distance, ties to the smaller triangle id.
 *  - max_distance: a point whose least squared distance exceeds
 *    max_distance * max_distance (rounded in the mesh's scalar) is "beyond":
 *    triangle id -1, squared and signed distance +infinity, closest point
 *    and barycentric NaN. Such points cost little (the search stops at that
 *    radius). +infinity means no limit; negative or NaN is INVALID_ARGUMENT.
 *  - Signed distance: the Euclidean distance (sqrt of the squared one,
 *    correctly rounded), negative inside. A mesh is "closed and oriented"
 *    when every edge is shared by exactly two triangles that run it in
 *    opposite directions (knn_mesh_info says which). Such a mesh takes the
 *    sign from the angle-weighted pseudonormal of the closest feature (face,
 *    edge or vertex; Baerentzen and Aanaes 2005): exact for points off the
 *    surface, whatever their distance. Any other mesh (open, with holes,
 *    non-manifold, inconsistently oriented, a triangle soup) takes it from
 *    the generalized winding number w (Jacobson et al. 2013): inside when
 *    w >= 1/2. w is summed over the BVH with the far-field approximation of
 *    Barill et al. 2018 (clusters farther than twice their radius count as
 *    one dipole), accurate to a few hundredths in w (up to 0.034 measured on
 *    icospheres with and without a hole, from points 0.05 or more from the
 *    surface): points within that of w = 1/2 (near a hole's rim) may take
 *    either sign, the same on every backend. Winding numbers use outward
 *    normals by the right-hand rule: triangle (a, b, c) faces the side from
 *    which a, b, c run counter-clockwise. A point on the surface (distance
 *    0) gets +0.
 *  - Barycentric weights (w0, w1, w2) of the closest point: w0 a + w1 b +
 *    w2 c, sum 1 up to rounding; on an edge the third is 0, at a vertex one
 *    is 1.
 *
 * Limits: at most KNN_MESH_MAX_TRIANGLES triangles and INT32_MAX vertices;
 * vertices finite and within the coordinate limit of the index API
 * (general rules); indices in [0, n_vertices). A mesh of 0 triangles is
 * refused (INVALID_ARGUMENT): nothing is closest to anything.
 *
 * Points and outputs of the query calls may be host arrays or device arrays
 * (CUDA meshes; the OpenMP engine refuses device arrays with
 * INVALID_ARGUMENT), chunked to the device budget as for the index.
 * Several devices: a CUDA mesh answers knn_mesh_closest and
 * knn_mesh_signed_distance (and their _f64 twins) on every device of the
 * call's device list as the index does (knn_gpgpu.h, knn_options "Several
 * devices", rules 1-4: the build's opt->device alone; else the call's
 * devices, else the build's; else KNN_DEVICES; else every usable device once
 * the call has KNN_MIN_QUERIES_PER_DEVICE points per device, the mesh's own
 * device first). The mesh is copied to each other device on the first call
 * that uses it (built there from the vertices and triangles the mesh keeps,
 * as knn_mesh_build builds; the copies live until knn_mesh_free, and
 * knn_estimate_mesh_bytes is the need of each device); the points are cut
 * into contiguous shares, one per listed device (a device listed twice takes
 * two shares, which divide its budget; {0, 0} forces a split on one GPU);
 * every point is answered whole on one device, so the results are
 * bit-identical to one device's. The device list is settled before any
 * output is written: a refused list, or a listed device whose copy does not
 * fit (DEVICE_OUT_OF_MEMORY), leaves the outputs untouched; a device of the
 * default list whose copy does not fit is left out. Device arrays of the
 * caller stay where they are: a share reads and writes those of its own
 * device in place and copies those of another device there and back in
 * pieces (peer copies, counted in the share's budget). A device that fails
 * fails the call after every share has stopped; the outputs then hold the
 * "beyond" values. knn_mesh_deviation_report runs on the mesh's own device
 * alone (its summary sorts all values together) and never reads
 * KNN_DEVICES; its device arrays of another device are copied there whole
 * and back.
 * m = 0 points is valid: nothing is read or written (a deviation report
 * says it measured nothing). The outputs of all one call are host memory
 * or all device memory, not a mix (INVALID_ARGUMENT).
 * Outputs are written fully on success; on failure they are left untouched
 * (a failure before the engines run) or fully written with the "beyond"
 * values (a failure while they run, cancellation included).
 */
#ifndef KNN_GPGPU_MESH_H
#define KNN_GPGPU_MESH_H

#include "knn_gpgpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most triangles one mesh holds. */
#define KNN_MESH_MAX_TRIANGLES 1073741823

typedef struct knn_mesh knn_mesh; /* opaque */

/* Build a mesh over n_vertices vertices (x, y, z each) and n_triangles
 * triangles (three vertex indices each, int32). The mesh owns copies of
 * both; the BVH is built on the chosen backend (opt->backend: AUTO takes the
 * current CUDA device when there is one, else OpenMP; opt->structure and
 * opt->leaf_size are ignored). vertices and triangles are host arrays.
 * Errors: INVALID_ARGUMENT (NULL arrays, counts, device arrays, an index
 * out of range: "triangle 12 has vertex index 99 (n_vertices is 50)", a
 * coordinate beyond the limit), NONFINITE_INPUT ("vertex 7 has a NaN
 * coordinate (dimension 1)": dimensions 0, 1, 2 are x, y, z), NO_DEVICE,
 * HOST_OUT_OF_MEMORY, DEVICE_OUT_OF_MEMORY, DEVICE, CANCELLED. */
KNN_API int KNN_CALL knn_mesh_build(const float* vertices, int64_t n_vertices,
                                    const int32_t* triangles, int64_t n_triangles,
                                    const knn_options* opt, knn_mesh** out);
KNN_API int KNN_CALL knn_mesh_build_f64(const double* vertices, int64_t n_vertices,
                                        const int32_t* triangles, int64_t n_triangles,
                                        const knn_options* opt, knn_mesh** out);
/* Free a mesh; NULL is fine; a pointer that is not a live mesh is refused
 * (INVALID_ARGUMENT), as for the index (live handles, deferred release). */
KNN_API int KNN_CALL knn_mesh_free(knn_mesh* mesh);

/* What a mesh is: any output may be NULL. scalar: KNN_SCALAR_FLOAT32 or
 * KNN_SCALAR_FLOAT64; backend: KNN_BACKEND_CUDA or KNN_BACKEND_OPENMP;
 * closed_oriented: 1 when signs come from pseudonormals, 0 when from the
 * winding number (see above). */
KNN_API int KNN_CALL knn_mesh_info(const knn_mesh* mesh, int64_t* n_vertices, int64_t* n_triangles,
                                   int* scalar, int* backend, int* closed_oriented);

/* For each of the m points (m x 3): the closest triangle (triangle_ids,
 * required), its squared distance, the closest point (m x 3) and its
 * barycentric weights (m x 3); every output but triangle_ids may be NULL.
 * A mesh answers only its own precision: knn_mesh_closest on a float64
 * mesh (and _f64 on a float32 one) is INVALID_ARGUMENT. */
KNN_API int KNN_CALL knn_mesh_closest(const knn_mesh* mesh, const float* points, int64_t m,
                                      float max_distance, int32_t* triangle_ids,
                                      float* sq_distances, float* closest, float* barycentric,
                                      const knn_options* opt);
KNN_API int KNN_CALL knn_mesh_closest_f64(const knn_mesh* mesh, const double* points, int64_t m,
                                          double max_distance, int32_t* triangle_ids,
                                          double* sq_distances, double* closest,
                                          double* barycentric, const knn_options* opt);

/* The signed distance of each point (m, required) and its closest triangle
 * (m or NULL). */
KNN_API int KNN_CALL knn_mesh_signed_distance(const knn_mesh* mesh, const float* points, int64_t m,
                                              float max_distance, float* signed_distances,
                                              int32_t* triangle_ids, const knn_options* opt);
KNN_API int KNN_CALL knn_mesh_signed_distance_f64(const knn_mesh* mesh, const double* points,
                                                  int64_t m, double max_distance,
                                                  double* signed_distances, int32_t* triangle_ids,
                                                  const knn_options* opt);

/* The deviation report of a scan against a design: the signed distances of
 * the points summarised where they were computed (on the mesh's own device
 * for a CUDA mesh, whatever the device list: the per-point values come back
 * only when signed_distances is not NULL). Definitions, over the measured points (those within
 * max_distance), all functions of their values sorted ascending and so identical on every backend:
 *   min, max     the least and greatest signed distance;
 *   mean, rms    in double: the sum and the sum of squares taken over the
 *                sorted values in blocks of 4096 (sequential within a
 *                block, then the blocks in order);
 *   percentiles  nearest rank: for p in [0, 100], the sorted value at
 *                position ceil(p / 100 * measured) - 1 (at least 0);
 *   histogram    bin b counts bin_edges[b] <= d < bin_edges[b + 1], the
 *                last bin also d = bin_edges[n_bins]; values outside the
 *                edges are counted in below_bins and above_bins;
 *   tolerance t  within: -t <= d <= t; above: d > t; below: d < -t.
 * With no measured point the statistics are NaN and the counts 0.
 * Set report->struct_size = sizeof(knn_deviation_report) before the call;
 * the library writes the fields within it. percentiles (n_percentiles, each
 * in [0, 100]) and percentile_values may be NULL when n_percentiles is 0;
 * bin_edges (n_bins + 1, strictly ascending, finite) and bin_counts
 * (n_bins) may be NULL when n_bins is 0. tolerance >= 0. These four arrays
 * and the report are host memory; points and signed_distances may be
 * device arrays as for the other query calls. m = 0 is valid (a report of
 * no point). A failure while the engine runs leaves the report of no
 * measured point (every point beyond, NaN statistics and percentiles, bin
 * counts 0) and signed_distances +infinity. */
typedef struct knn_deviation_report {
  size_t struct_size;         /* = sizeof(knn_deviation_report)               */
  int64_t n_points;           /* m                                            */
  int64_t n_measured;         /* points within max_distance                   */
  int64_t n_beyond;           /* points beyond it                             */
  int64_t n_within_tolerance; /* -t <= d <= t                                 */
  int64_t n_above_tolerance;  /* d > t                                        */
  int64_t n_below_tolerance;  /* d < -t                                       */
  int64_t n_below_bins;       /* d < bin_edges[0]                             */
  int64_t n_above_bins;       /* d > bin_edges[n_bins]                        */
  double min, max, mean, rms;
} knn_deviation_report;
KNN_API int KNN_CALL knn_mesh_deviation_report(
    const knn_mesh* mesh, const float* points, int64_t m, float max_distance, double tolerance,
    const double* percentiles, int n_percentiles, double* percentile_values,
    const double* bin_edges, int n_bins, int64_t* bin_counts, float* signed_distances,
    knn_deviation_report* report, const knn_options* opt);
KNN_API int KNN_CALL knn_mesh_deviation_report_f64(
    const knn_mesh* mesh, const double* points, int64_t m, double max_distance, double tolerance,
    const double* percentiles, int n_percentiles, double* percentile_values,
    const double* bin_edges, int n_bins, int64_t* bin_counts, double* signed_distances,
    knn_deviation_report* report, const knn_options* opt);

/* Serialization: the mesh's vertices and triangles in a versioned,
 * checksummed little-endian format; deserialize validates as a build does and
 * rebuilds the BVH (the same tree: it is a function of the mesh) on
 * opt's backend. Errors as for the index's. */
KNN_API int KNN_CALL knn_mesh_serialized_size(const knn_mesh* mesh, size_t* bytes);
KNN_API int KNN_CALL knn_mesh_serialize(const knn_mesh* mesh, void* buffer, size_t bytes);
KNN_API int KNN_CALL knn_mesh_deserialize(const void* buffer, size_t bytes, const knn_options* opt,
                                          knn_mesh** out);

/* Device bytes a CUDA mesh build of this size needs at its peak (the mesh
 * and its BVH resident plus the build's scratch); 0 for impossible sizes.
 * scalar: KNN_SCALAR_FLOAT32 or KNN_SCALAR_FLOAT64. */
KNN_API size_t KNN_CALL knn_estimate_mesh_bytes(int64_t n_vertices, int64_t n_triangles, int scalar,
                                                const knn_options* opt);

/* ---- Alignment: the best fit of a scan to the mesh (contract section 8) ---
 * Finds the rigid motion T (a rotation and a translation) that moves the m
 * scan points onto the mesh's surface, by ICP point to plane: each
 * iteration moves the points by the current T (in double), finds every
 * moved point's closest point c on the mesh (the definition above, on the
 * mesh's engine: on the device for a CUDA mesh, where only the sums come
 * back), keeps the correspondences within max_correspondence (and, with a
 * kept fraction f < 1, those whose squared distance is at most the nearest
 * rank ceil(f * measured)-th smallest among them: trimming of outliers),
 * and sums in float64, whatever the mesh's precision, the point-to-plane
 * normal equations of the kept points (the plane through c with the unit
 * normal of its triangle). The 6 x 6 system is solved on the host by its
 * eigen-decomposition, rotations taken about the scan's centroid (as moved)
 * and scaled by the scan's RMS radius about it: directions whose eigenvalue
 * is below 1e-6 times the largest are not observed by the surface (a flat
 * plate: its in-plane translations and the rotation about its normal; a
 * cylinder: the rotation about its axis and the translation along it) and
 * are left unchanged (reported, see degenerate_directions). The step's
 * small rotation is applied exactly (Rodrigues) and the rotation
 * re-orthonormalised. The fit stops when a step rotates by at most the
 * rotation tolerance and moves the scan's centroid by at most the
 * translation tolerance (converged), at the iteration cap, or when fewer
 * than 6 points are kept (not converged). The scan's centroid and radius
 * are read once per call (device points: copied out piece by piece for it).
 * Progress: one query stage of m x (max_iterations + 1) x starts points
 * (starts: 5 with coarse_start, else 1), finished at its total when the fit
 * returns; the cancel flag is read between blocks of points. Deterministic: sums in fixed blocks of
 * point order, so the same input gives the same transform bit for bit on every backend.
 *
 * initial: 16 doubles, a row-major 4 x 4 rigid transform (its 3 x 3 part a
 * rotation within 1e-6, determinant +1, last row 0 0 0 1; finite), or NULL
 * for the identity. transform (16, required) receives the fitted transform
 * (row-major; it maps the points to the mesh: mesh point = transform *
 * (x, y, z, 1)); rms (or NULL) the root mean square distance of the kept
 * correspondences at that transform (NaN when none is kept). m = 0 gives
 * the initial transform and a NaN rms. Outputs are written only on success
 * (a failure, cancellation included, leaves them untouched). Points may be
 * host arrays, or device arrays of a CUDA mesh's device. knn_mesh_align
 * does not say whether the fit converged: knn_mesh_align_ex does.
 * Errors: INVALID_ARGUMENT (NULL transform, max_correspondence negative or
 * NaN, max_iterations < 0, an initial transform that is not rigid or not
 * finite, a mesh of the other precision), NONFINITE_INPUT (points), and as
 * for knn_mesh_closest. */
KNN_API int KNN_CALL knn_mesh_align(const knn_mesh* mesh, const float* points, int64_t m,
                                    const double* initial, double max_correspondence,
                                    int max_iterations, double* transform, double* rms,
                                    const knn_options* opt);
KNN_API int KNN_CALL knn_mesh_align_f64(const knn_mesh* mesh, const double* points, int64_t m,
                                        const double* initial, double max_correspondence,
                                        int max_iterations, double* transform, double* rms,
                                        const knn_options* opt);

/* The parameters of knn_mesh_align_ex. Set struct_size =
 * sizeof(knn_align_params); a field of 0 (or beyond struct_size) takes its
 * default. NULL params: every default. */
typedef struct knn_align_params {
  size_t struct_size;
  double max_correspondence;    /* > 0; 0: +infinity (every point)                   */
  int max_iterations;           /* > 0; 0: 50                                        */
  int coarse_start;             /* 1: also start from the principal axes (below)     */
  double kept_fraction;         /* in (0, 1]; 0: 1 (no trimming)                     */
  double tolerance_rotation;    /* radians per step, > 0; 0: 1e-6 (float32 calls:
                                   1e-5, where float's steps stall near 1e-6)        */
  double tolerance_translation; /* length per step, > 0; 0: 1e-6 (float32: 1e-5) x
                                   the diagonal of the target's bounding box         */
} knn_align_params;

/* Bits of knn_align_result.degenerate_directions: a rotation about an axis
 * through the scan's centroid (as moved by the fit), or a translation along an
 * axis, that lies mostly (more than half its squared length) in the
 * directions the last step could not observe. */
#define KNN_ALIGN_ROTATION_X 1
#define KNN_ALIGN_ROTATION_Y 2
#define KNN_ALIGN_ROTATION_Z 4
#define KNN_ALIGN_TRANSLATION_X 8
#define KNN_ALIGN_TRANSLATION_Y 16
#define KNN_ALIGN_TRANSLATION_Z 32

/* What knn_mesh_align_ex found. Set struct_size = sizeof(knn_align_result);
 * the library writes the fields within it. */
typedef struct knn_align_result {
  size_t struct_size;
  double transform[16];      /* row-major 4 x 4, as knn_mesh_align's          */
  double rms;                /* of the kept correspondences; NaN when none    */
  int64_t n_kept;            /* correspondences kept at that transform        */
  int iterations;            /* steps taken (of the start kept)               */
  int converged;             /* 1: the last step was within the tolerances    */
  int degenerate_directions; /* KNN_ALIGN_* bits of the last step             */
  int n_degenerate;          /* how many of the 6 directions were unobserved  */
} knn_align_result;

/* knn_mesh_align with its parameters and a full result. converged is 0 when
 * the iteration cap was reached or too few points were kept: a fit that did
 * not converge is never reported as one. coarse_start = 1, for scans far
 * from their place: besides the initial transform, the four rotations that
 * carry the scan's principal axes (of its points about their centroid) onto
 * the mesh's (of its surface, area-weighted, about its centroid), with the
 * centroids matched, are tried (the axes' signs are ambiguous); each start
 * is fitted and the best kept: converged first, then the most kept points,
 * then the least rms (ties: the earlier start). Principal axes need a
 * shape whose three axes differ; a symmetric scan relies on the fit. */
KNN_API int KNN_CALL knn_mesh_align_ex(const knn_mesh* mesh, const float* points, int64_t m,
                                       const double* initial, const knn_align_params* params,
                                       knn_align_result* result, const knn_options* opt);
KNN_API int KNN_CALL knn_mesh_align_ex_f64(const knn_mesh* mesh, const double* points, int64_t m,
                                           const double* initial, const knn_align_params* params,
                                           knn_align_result* result, const knn_options* opt);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KNN_GPGPU_MESH_H */
