/* SPDX-License-Identifier: Apache-2.0 */
/* knn_gpgpu: point in polygon over a quadtree (section 4 of the
 * manual).
 *
 * A part of knn_gpgpu.h, the one include for hosts, which includes it after
 * the index part (whose knn_options and knn_backend it takes); the general
 * rules at the top of that header hold here.
 * Include knn_gpgpu.h, not this file: it includes the parts inside its
 * extern "C" block. */
#ifndef KNN_GPGPU_QUADTREE_H
#define KNN_GPGPU_QUADTREE_H

#ifndef KNN_GPGPU_H
#error "include knn_gpgpu.h, which includes this part"
#endif

/* =========================================================================
 * 4. Point in polygon over a quadtree (2-D)
 * ========================================================================= */

typedef struct knn_quadtree knn_quadtree; /* opaque */

/* Build a quadtree over n points (n rows of x, y; host memory), 0 <= n <=
 * 2^31 - 1; the tree keeps its own copy. Free with knn_quadtree_free (NULL is
 * fine). Options: backend AUTO (default) builds on the CUDA engine when a
 * usable device is present, else on OpenMP; KNN_BACKEND_CUDA without a device
 * is KNN_ERR_NO_DEVICE; device -1 (default) or the calling thread's current
 * device (select another with cuSetDevice first). The options are checked as
 * knn_index_build checks them, with the same messages (INVALID_ARGUMENT): an
 * unknown backend or structure (a valid structure is ignored: the tree is a
 * quadtree), device below -1, negative leaf_size or threads, a bad
 * device_count or negative devices entry, and where devices are present a
 * device or devices entry beyond them; the polygon calls check their
 * options the same way (they use threads and device_memory_limit). leaf_size is the leaf
 * capacity: a node is split while it holds more points than that (0 = the
 * engine's default, 64 on OpenMP), down to a 2^16 x 2^16 grid cell over the
 * points' bounding box, so equal points share one leaf whatever their number.
 * threads limits the OpenMP engine (0 = all cores); the queries take their
 * own options (NULL = defaults) and run on the tree's engine. NaN/Inf points
 * are KNN_ERR_NONFINITE_INPUT naming the first. */
KNN_API int KNN_CALL knn_quadtree_build(const float* xy, int64_t n, const knn_options* opt,
                                        knn_quadtree** out);
/* Free a quadtree; NULL is fine. A pointer that is not a live quadtree
 * (freed, or not made by knn_quadtree_build or knn_quadtree_build_f64) is
 * refused with INVALID_ARGUMENT "not a live quadtree" by every call, free
 * included, without reading it. Freeing a tree while point-in-polygon calls
 * on it run is safe, as for knn_index_free: the tree stops being live at
 * once, the running calls finish with their full results, and its memory is
 * released when the last of them returns. */
KNN_API int KNN_CALL knn_quadtree_free(knn_quadtree* tree);

/* Polygons: vertices_xy holds all ring vertices as (x, y) pairs (floats;
 * doubles for the _f64 calls below); ring r spans vertices
 * [ring_offsets[r], ring_offsets[r+1]) (n_rings + 1 offsets);
 * polygon p spans rings [polygon_offsets[p], polygon_offsets[p+1])
 * (n_polygons + 1 offsets). The first ring of a polygon is its outer
 * boundary, the others are holes. Rings may be open or closed, in any
 * orientation, concave. Offsets count vertices, not floats. All arrays are
 * host memory.
 * Checks (KNN_ERR_INVALID_ARGUMENT, the message names the element):
 * ring_offsets[0] == 0 and non-decreasing, ring_offsets[n_rings] being the
 * number of vertices, which an array must be able to hold (at most
 * PTRDIFF_MAX / 8 float vertices, PTRDIFF_MAX / 16 double ones; checked
 * before any vertex is read); polygon_offsets[0] == 0, strictly increasing (every
 * polygon has an outer ring) and polygon_offsets[n_polygons] == n_rings; every
 * ring keeps at least 3 vertices once consecutive repeats (the closing repeat
 * of a closed ring included) are dropped, so a closed triangle of 4 vertices
 * is fine and a back-and-forth segment is not; arrays non-NULL where they
 * have entries (n_rings = n_polygons = 0 takes NULLs); n_rings + 1 and
 * n_polygons + 1 offsets, and ring_offsets[n_rings] vertices of two scalars,
 * within PTRDIFF_MAX bytes (checked before the arrays are read). A NaN/Inf
 * vertex is
 * KNN_ERR_NONFINITE_INPUT naming the vertex.
 * Inside rule: even-odd crossings of a ray from the point towards +x over all
 * rings of the polygon (holes included). An edge (a, b) counts when exactly
 * one endpoint has y > the point's y (half-open: horizontal edges never
 * count, a vertex on the ray counts once) and it crosses the ray strictly
 * right of the point. The decision is exact for the float inputs (no
 * rounding can flip it), and for double inputs within the range given with
 * the _f64 calls, and identical on both backends.
 * Boundary rule: the answer for a point p is the plain even-odd answer for p
 * nudged infinitesimally right, then (far less) up. So a point exactly on an
 * edge belongs to the polygon lying to its right (above it, on a horizontal
 * edge); a point on an edge or a vertex shared by adjacent polygons that
 * tile a region belongs to exactly one of them; the unit square [0,1]^2
 * holds (0,0), (0,0.5) and (0.5,0) but not (1,0.5), (0.5,1) or (1,1).
 * knn_points_in_polygons_count writes counts[p], the number of points inside
 * polygon p; knn_points_in_polygons then fills point_indices with those
 * points, polygon p at [out_offsets[p], out_offsets[p+1]), ascending.
 * out_offsets must be the running sum of the counts (out_offsets[0] == 0,
 * out_offsets[p+1] - out_offsets[p] == counts[p]); the call recounts and
 * refuses disagreeing offsets before writing anything. On a failure after
 * computing started (cancellation, device error) counts are all 0; a
 * failure while filling (after the offsets passed) leaves
 * point_indices[0 .. out_offsets[n_polygons]) all -1, one before untouched. */
KNN_API int KNN_CALL knn_points_in_polygons_count(const knn_quadtree* tree,
                                                  const float* vertices_xy,
                                                  const int64_t* ring_offsets, int64_t n_rings,
                                                  const int64_t* polygon_offsets,
                                                  int64_t n_polygons, int64_t* counts,
                                                  const knn_options* opt);
KNN_API int KNN_CALL knn_points_in_polygons(const knn_quadtree* tree, const float* vertices_xy,
                                            const int64_t* ring_offsets, int64_t n_rings,
                                            const int64_t* polygon_offsets, int64_t n_polygons,
                                            const int64_t* out_offsets, int64_t* point_indices,
                                            const knn_options* opt);

/* Double precision point in polygon (float64). knn_quadtree_build_f64 is
 * knn_quadtree_build with xy as n rows of two doubles (host memory; the tree
 * keeps its own copy, 16 bytes a point instead of 8, and its node boxes in
 * double); knn_points_in_polygons_count_f64 and knn_points_in_polygons_f64
 * are their float twins with vertices_xy as doubles (host memory). Every
 * other argument, option, check, error, output rule, ownership and thread
 * rule is the float call's; trees are freed with knn_quadtree_free.
 * Trees and polygons of either precision combine: a float tree takes double
 * polygons and a double tree float ones (a float converts to double
 * exactly). The answer is the inside and boundary rule above applied to the
 * exact values of the point and the vertices, with orientation signs that
 * no rounding can flip, so it is identical on both backends, for every
 * leaf_size and thread count, and a mix equals the all-double call on the
 * same values.
 * Coordinate range: the orientation test is exact for every double point
 * and vertex coordinate that is 0 or of magnitude within [2^-485, 2^500]
 * (about 1.0e-146 .. 3.3e150; this holds every float, so the float calls
 * have no such rule). Outside it, knn_quadtree_build_f64 refuses a point and
 * the _f64 polygon calls a vertex with KNN_ERR_INVALID_ARGUMENT naming the
 * point or vertex, its coordinate and the range; a NaN/Inf one is
 * KNN_ERR_NONFINITE_INPUT naming it, as in the float calls (the message
 * says "point i" or "vertex i" and the dimension, 0 for x, 1 for y). Nothing
 * is written before these checks pass.
 * Typical coordinates: projected frames (UTM or national grids at 10^6 m
 * with millimetre detail) and longitude/latitude in degrees with detail to
 * 1e-9 degree keep their full precision; rounding them to float32 (spacing
 * 0.5 m at 4.5e6, 1.5e-5 degree at 151) moves points across boundaries. */
KNN_API int KNN_CALL knn_quadtree_build_f64(const double* xy, int64_t n, const knn_options* opt,
                                            knn_quadtree** out);
KNN_API int KNN_CALL knn_points_in_polygons_count_f64(const knn_quadtree* tree,
                                                      const double* vertices_xy,
                                                      const int64_t* ring_offsets, int64_t n_rings,
                                                      const int64_t* polygon_offsets,
                                                      int64_t n_polygons, int64_t* counts,
                                                      const knn_options* opt);
KNN_API int KNN_CALL knn_points_in_polygons_f64(const knn_quadtree* tree, const double* vertices_xy,
                                                const int64_t* ring_offsets, int64_t n_rings,
                                                const int64_t* polygon_offsets, int64_t n_polygons,
                                                const int64_t* out_offsets, int64_t* point_indices,
                                                const knn_options* opt);

#endif /* KNN_GPGPU_QUADTREE_H */
