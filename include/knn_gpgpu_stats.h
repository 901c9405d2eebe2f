/* SPDX-License-Identifier: Apache-2.0 */
/* knn_gpgpu: neighbourhood statistics of an index's own 3-D points (contract
 * section 7): normals and curvature, outlier scores and the inliers they
 * keep, neighbour counts within a radius, the distance to the k-th neighbour.
 *
 * Included by knn_gpgpu.h (the one include for hosts); the general rules of
 * that header (status codes, knn_last_error, options, device memory,
 * cancellation and progress, threads, live handles) and those of the index
 * API (knn_gpgpu_index.h: backends, structures, the _f64 family, several
 * devices, host and device arrays) hold here as well.
 *
 * The statistics are computed where the index lives, from the exact k-lists
 * of the index's own search (the same lists knn_index_query returns for a
 * point's own coordinates: nearest first, ties by the smaller index, in the
 * index's scalar): on a CUDA index the lists are written chunk by chunk into
 * device scratch and reduced there, and never cross to the host; the OpenMP
 * engine reduces each chunk of lists in host scratch. Every backend,
 * structure and device count returns bit-identical results.
 *
 * Common rules of every call below:
 *  - The index must hold 3-D points (any other dim: INVALID_ARGUMENT) and
 *    be of the call's family: the float calls take an index of
 *    knn_index_build, the _f64 calls one of knn_index_build_f64 (the other:
 *    INVALID_ARGUMENT naming the twin to call). Results are per indexed
 *    point, in input order (row i of n).
 *  - "The k nearest of point i" are the first k entries of the kNN list of
 *    point i's own coordinates; point i itself is there at distance 0 (or,
 *    when more than k points equal it, others of the same coordinates are:
 *    the coordinates, and so every statistic, are the same). "The k nearest
 *    others" are the k nearest after dropping one entry at distance 0 (point
 *    i itself): the entries 2 .. k + 1 of that list. Squared distances are
 *    the index API's (knn_gpgpu.h "Results": rounded in the index's scalar,
 *    no fused multiply-add); Euclidean distances are their square roots,
 *    taken in float64 (correctly rounded) and rounded to the output scalar.
 *  - k >= 1 (else INVALID_ARGUMENT); k larger than the points there are
 *    takes all there are (k nearest: min(k, n); k nearest others:
 *    min(k, n - 1)), except knn_index_kth_distances (below); any k up to
 *    INT32_MAX is valid. The search's lists hold min(k, n) entries (normals)
 *    or min(k + 1, n) (the calls over others); on the CUDA backend they have
 *    the limits of knn_index_query (knn_gpgpu_index.h: an AUTO index adds
 *    its kd-tree for lists the grid or brute force cannot keep, an explicit
 *    structure answers UNSUPPORTED).
 *  - n = 0: nothing is read or written, KNN_OK (n_kept, where asked, is 0).
 *  - Outputs (normals, curvature, scores, distances, counts, kept ids) of
 *    one call are all host memory or all device memory (a mix:
 *    INVALID_ARGUMENT), for a CUDA index memory of its own device (another
 *    device's: INVALID_ARGUMENT); an OpenMP index writes device outputs
 *    through host buffers. n_kept and viewpoint are host memory.
 *    Each array holds n entries (normals 3 n: x, y, z per point) and is
 *    written whole on success.
 *  - Options: as knn_index_query: threads, device_memory_limit (a CUDA
 *    index keeps a device copy of the points, 3 n scalars, for the call,
 *    and sizes its chunks so that their lists take at most a quarter of the
 *    budget left; each chunk's search plans within the budget) and the
 *    device list ("Several devices": the points of each chunk are cut into
 *    shares, one per listed device, each answered whole there; results
 *    identical to one device's).
 *    An index KNN_BACKEND_AUTO put on the GPU whose device has no memory for
 *    a chunk answers it on the CPU, identically (knn_gpgpu_index.h).
 *  - Progress: the search runs as one KNN_PROGRESS_QUERY stage of n points
 *    (done grows chunk by chunk); knn_index_normals without a viewpoint
 *    adds two more: the search of the orientation graph (n points; none
 *    when k = 1) and the propagation (n points). Cancellation: checked
 *    between chunks and every 2^18 points of each pass of the propagation
 *    (KNN_ERR_CANCELLED).
 *  - Errors: as knn_index_query_self (INVALID_ARGUMENT for a NULL or dead
 *    index, NULL outputs with n > 0, k < 1, n * 3 scalars beyond
 *    PTRDIFF_MAX bytes, a bad option, a negative or NaN radius, a non-finite
 *    viewpoint or ratio; DEVICE_OUT_OF_MEMORY, HOST_OUT_OF_MEMORY, DEVICE,
 *    CANCELLED, UNSUPPORTED for lists beyond a CUDA structure's limit).
 *    A call refused before computing starts leaves every output untouched.
 *    A failure after it started writes the missing values into every
 *    output: normals and curvature NaN, mean and k-th distances +infinity,
 *    counts 0, kept ids -1 and *n_kept 0.
 */
#ifndef KNN_GPGPU_STATS_H
#define KNN_GPGPU_STATS_H

#include "knn_gpgpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* =========================================================================
 * 7. Neighbourhood statistics of an index (3-D)
 * ========================================================================= */

/* The orientation graph of knn_index_normals without a viewpoint joins each
 * point to its min(k - 1, KNN_ORIENTATION_NEIGHBORS) nearest others. */
#define KNN_ORIENTATION_NEIGHBORS 8

/* Normals and surface variation (curvature) by principal components.
 *
 * For point p_i, with q_1 .. q_m its m = min(k, n) nearest (itself
 * included; the list order, nearest first, ties by index):
 *  - d_j = q_j - q_1 and the mean c of the d_j, then e_j = d_j - c, all in
 *    float64 with every operation rounded and no fused multiply-add (the
 *    scalar's coordinates converted exactly); the e_j are scaled by the
 *    power of two that brings their largest magnitude into [1/2, 1) (exact,
 *    so that no float64 coordinate within the index's limit overflows), and
 *    their scatter matrix S = sum_j e_j e_j^T is summed in list order.
 *  - S's eigenvalues l0 <= l1 <= l2 and orthonormal eigenvectors come from a
 *    cyclic Jacobi solver in float64 (sweeps over the pairs (0,1), (0,2),
 *    (1,2); a rotation zeroes an entry whose magnitude exceeds 2^-60 times
 *    the larger of the two diagonal entries it joins; at most 64 sweeps, and
 *    it stops after a sweep that rotated nothing), every operation correctly
 *    rounded (+, -, *, /, sqrt: IEEE 754 on the CPU and the GPU alike).
 *  - The normal is the eigenvector of l0 (of equal eigenvalues, the one of
 *    the lowest solver column), divided by its length, signed so that its
 *    component of largest magnitude (ties: the first of x, y, z) is
 *    positive, then oriented (below).
 *  - curvature[i] = l0 / (l0 + l1 + l2) (0 .. 1/3), eigenvalues that
 *    rounding left below 0 taken as 0; 0 when the sum is 0.
 * Degenerate neighbourhoods are defined, never NaN: all m points equal (or
 *  m = 1: k = 1, n = 1) give the normal (0, 0, 1) before orientation and
 *  curvature 0; collinear points give a unit normal perpendicular to their
 *  line (up to rounding; which one is the solver's, the same on every
 *  backend) and curvature 0 up to rounding; coplanar ones the plane's
 *  normal.
 * Orientation. With a viewpoint v (3 scalars of host memory, finite, else
 *  INVALID_ARGUMENT): a normal n with dot(n, v - p_i) < 0 is negated, so
 *  every normal satisfies dot(n, v - p_i) >= 0 (the dot product in float64,
 *  ((n_x (v_x - p_x) + n_y (v_y - p_y)) + n_z (v_z - p_z)) rounded at each
 *  step, n as rounded to the output scalar); one with the dot product
 *  exactly 0 keeps the sign above.
 *  Without one (viewpoint NULL), consistently over the cloud by
 *  propagation (Hoppe et al. 1992): the graph joins each point to its
 *  g = min(k - 1, KNN_ORIENTATION_NEIGHBORS) nearest others (an edge where
 *  either lists the other), weighted 1 - |dot(n_i, n_j)| (float64, from the
 *  normals as written in the output scalar; this rule's dot products are
 *  ((x x' + y y') + z z'), rounded at each step). In each connected part the
 *  seed is the point of largest z (ties: the smallest index), whose normal
 *  is signed so that its first non-zero component of (z, y, x) is positive;
 *  the part's minimum spanning tree under the order (weight, smaller id,
 *  larger id) (unique: ties cannot make two) carries the orientation out
 *  from the seed: a child's normal is negated when its dot product with its
 *  oriented parent's is negative, kept when it is 0 or more. Every part
 *  (several scans, outliers: k = 1 makes every point a part of its own) is
 *  decided by that same seed rule, independently of the others. The graph
 *  comes from a second search of g + 1 neighbours whose lists are kept in
 *  host memory: the propagation needs about 12 g + 140 bytes of host
 *  memory per point (2.4 GB for 10^7 points at g = 8) and runs on the
 *  call's threads (knn_options.threads), its result the same for any count
 *  (10^6 points at g = 8: about 0.5 s on 2 cores, 0.85 s on one); a
 *  closed surface ends with all normals outward or all inward (outward
 *  when its topmost point's normal has a positive z).
 * Accuracy. float64 (_f64): within 1e-5 rad of the exact eigenvector of
 *  the same neighbourhood (as a float64 LAPACK solve, numpy.linalg.eigh,
 *  finds it) wherever the eigen-gap allows it, (l1 - l0) >= 1e-8 (l0 + l1 +
 *  l2); at most 1e-7 rad measured against a long-double oracle on spheres,
 *  planes, cylinders, noisy scans, clusters and a 1e6 offset; the solver's
 *  error grows as the gap shrinks (a flat neighbourhood is well
 *  conditioned, a nearly isotropic one is not). float32: the same float64
 *  computation on the float32 coordinates, rounded to float32 at the end:
 *  within 3e-7 rad of the exact eigenvector for the float32 coordinates
 *  under the same gap condition (the rounding of the output; at most
 *  7.4e-8 rad measured in tests/api/test_neighbourhood_stats.cpp on the clouds
 *  above); the neighbourhood itself may differ
 *  from a float64 index's at near ties of distance (each is exact in its
 *  own precision).
 * normals: 3 n scalars (x, y, z per point); curvature: n scalars or NULL. */
KNN_API int KNN_CALL knn_index_normals(const knn_index* index, int k, const float* viewpoint,
                                       float* normals, float* curvature, const knn_options* opt);
KNN_API int KNN_CALL knn_index_normals_f64(const knn_index* index, int k, const double* viewpoint,
                                           double* normals, double* curvature,
                                           const knn_options* opt);

/* Outlier scores: mean_distances[i] is the mean Euclidean distance from p_i
 * to its m = min(k, n - 1) nearest others: the square roots (float64) of
 * their squared distances summed nearest first in float64, divided by m,
 * rounded to the output scalar; 0 when m is 0 (n = 1). */
KNN_API int KNN_CALL knn_index_outlier_scores(const knn_index* index, int k, float* mean_distances,
                                              const knn_options* opt);
KNN_API int KNN_CALL knn_index_outlier_scores_f64(const knn_index* index, int k,
                                                  double* mean_distances, const knn_options* opt);

/* Statistical outlier removal, the usual rule: with s_i the scores of
 * knn_index_outlier_scores (as that call writes them, converted to float64),
 * mean = (sum of s_i in index order) / n and the sample standard deviation
 * std = sqrt((sum of (s_i - mean)^2 in index order) / (n - 1)) (0 when
 * n = 1), all float64 rounded at each step, a point is kept when
 * s_i <= mean + std_ratio * std. kept (n int32 slots, host or device) gets
 * the kept ids in ascending order in kept[0 .. *n_kept) and -1 after them;
 * *n_kept (host) their number. std_ratio must be finite (any sign). */
KNN_API int KNN_CALL knn_index_statistical_inliers(const knn_index* index, int k, double std_ratio,
                                                   int32_t* kept, int64_t* n_kept,
                                                   const knn_options* opt);
KNN_API int KNN_CALL knn_index_statistical_inliers_f64(const knn_index* index, int k,
                                                       double std_ratio, int32_t* kept,
                                                       int64_t* n_kept, const knn_options* opt);

/* Density: the distance to the k-th nearest other, per point (the Euclidean
 * distance of entry k + 1 of point i's list, as above); +infinity when
 * fewer than k others exist (k >= n). */
KNN_API int KNN_CALL knn_index_kth_distances(const knn_index* index, int k, float* distances,
                                             const knn_options* opt);
KNN_API int KNN_CALL knn_index_kth_distances_f64(const knn_index* index, int k, double* distances,
                                                 const knn_options* opt);

/* Density by radius: counts[i] (n int64, host or device) is the number of
 * other points within radius of p_i, squared distance <= radius * radius
 * rounded in the index's scalar (knn_index_radius's predicate; points equal
 * to p_i count, p_i itself does not). radius >= 0, +infinity allowed
 * (negative or NaN: INVALID_ARGUMENT). */
KNN_API int KNN_CALL knn_index_neighbor_counts(const knn_index* index, float radius,
                                               int64_t* counts, const knn_options* opt);
KNN_API int KNN_CALL knn_index_neighbor_counts_f64(const knn_index* index, double radius,
                                                   int64_t* counts, const knn_options* opt);

/* Radius outlier removal: keeps the points with at least min_neighbors
 * others within radius (counts as knn_index_neighbor_counts; min_neighbors
 * >= 0, else INVALID_ARGUMENT; 0 keeps every point). kept and *n_kept as
 * knn_index_statistical_inliers. */
KNN_API int KNN_CALL knn_index_radius_inliers(const knn_index* index, float radius,
                                              int64_t min_neighbors, int32_t* kept, int64_t* n_kept,
                                              const knn_options* opt);
KNN_API int KNN_CALL knn_index_radius_inliers_f64(const knn_index* index, double radius,
                                                  int64_t min_neighbors, int32_t* kept,
                                                  int64_t* n_kept, const knn_options* opt);

/* Device bytes a statistics call with lists of k neighbours on a CUDA index
 * of n 3-D points would need at most (for the calls over others pass k + 1):
 * the engine's search of a chunk (knn_estimate_query_bytes) with the chunk's
 * lists, the points, the chunk's queries in their Morton order and the
 * outputs; a call plans its chunks
 * within the device budget, so less memory means more chunks, not failure,
 * down to one chunk's need. No device needed; 0 for n < 0 or k < 1,
 * SIZE_MAX for n > INT32_MAX or a byte count beyond size_t. The _f64 twin:
 * for a float64 index. */
KNN_API size_t KNN_CALL knn_estimate_stats_bytes(int64_t n, int k, const knn_options* opt);
KNN_API size_t KNN_CALL knn_estimate_stats_bytes_f64(int64_t n, int k, const knn_options* opt);

/* ---- Alignment to the index's points ------------------------------------ */

/* Aligns m scan points (3 scalars each, host arrays or device arrays of a
 * CUDA index's device) to the index's 3-D points by ICP, as
 * knn_mesh_align_ex aligns them to a mesh (knn_gpgpu_mesh.h "Alignment":
 * the same knn_align_params, knn_align_result, checks, solve, degenerate
 * directions, trimming by max_correspondence and kept_fraction, stopping
 * rule, coarse start and selection among starts). Differences:
 *  - Correspondence: each moved scan point p_i = R x_i + t (double, rounded
 *    to the index's scalar) takes its nearest index point q_j, the first
 *    entry of knn_index_query's list with k = 1 (ties: the smaller index),
 *    at the list's squared distance s_i.
 *  - Terms: with normals (n x 3 scalars, one per indexed point in input
 *    order, e.g. from knn_index_normals; host or device memory; any length,
 *    not necessarily unit) point-to-plane: the residual (q_j - p_i) . n_j
 *    with n_j normalised in double (a zero or non-finite normal: along
 *    p_i - q_j; p_i = q_j adds no term). normals NULL: point-to-point, the
 *    three residuals (q_j - p_i) . e for e = x, y, z (the squared distance
 *    linearised). Either way the 6 x 6 normal equations are summed in
 *    float64 in fixed blocks of scan points (common/geometry/align_terms.h).
 *  - The default translation tolerance is 1e-6 x the diagonal of the index
 *    points' bounding box; coarse_start matches the principal axes of the
 *    scan with those of the index's points (each point weighing alike).
 *  - The correspondences are computed through the index's query path, so
 *    every backend, structure and device list gives the same lists, and
 *    each step is summed where the index keeps its points, in the same
 *    blocks added in the same order: the same transform bit for bit on
 *    every backend. A CUDA index keeps the moved points, the k = 1 lists
 *    and the blocks' sums on its device (only the sums, 232 bytes per
 *    block of 1024 points, cross to the host each iteration), reads its
 *    own points and device points and normals in place, and copies host
 *    points and normals to the device once per call. Once per call too,
 *    the index's points are copied to the host (the bounding box, the
 *    coarse start), and device points as well (the scan's centroid and
 *    radius).
 *  - Memory on a CUDA index: for the call, every scan point's list (4 bytes
 *    and a scalar), the blocks' sums, the device copies of host points and
 *    normals, and with kept_fraction < 1 the sort of the squared distances
 *    (two keys of a scalar's width per point); the moved points go in
 *    chunks of at most a quarter of the budget left beside those, each
 *    chunk's search planning within the rest (device_memory_limit, else
 *    KNN_DEVICE_MEMORY_LIMIT, else the free memory; a budget that holds
 *    none of that: DEVICE_OUT_OF_MEMORY). An index KNN_BACKEND_AUTO put on
 *    the GPU whose device lacks that memory sums on the host instead (its
 *    lists cross to the host), and answers searches its device cannot hold
 *    on the CPU, identically (knn_gpgpu_index.h).
 *  - Progress: one KNN_PROGRESS_QUERY stage of m x (max_iterations + 1) x
 *    starts points; cancellation between iterations and inside each query.
 * m = 0 (or an index of no points) gives the initial transform, a NaN rms,
 * 0 kept, not converged. Outputs are written only on success.
 * Errors: INVALID_ARGUMENT (a NULL or dead index, an index not of 3-D
 * points, the other precision's index, NULL points with m > 0, NULL or
 * device result, a result->struct_size too small, params and initial as
 * knn_mesh_align_ex), NONFINITE_INPUT (points), and as knn_index_query. */
KNN_API int KNN_CALL knn_index_align(const knn_index* index, const float* points, int64_t m,
                                     const float* normals, const double* initial,
                                     const knn_align_params* params, knn_align_result* result,
                                     const knn_options* opt);
KNN_API int KNN_CALL knn_index_align_f64(const knn_index* index, const double* points, int64_t m,
                                         const double* normals, const double* initial,
                                         const knn_align_params* params, knn_align_result* result,
                                         const knn_options* opt);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KNN_GPGPU_STATS_H */
