/* SPDX-License-Identifier: Apache-2.0 */
/* knn_gpgpu: the index API (section 3 of the manual): knn_index,
 * knn_options (which the later parts take too) and the _f64 family.
 *
 * A part of knn_gpgpu.h, the one include for hosts, which includes it after
 * the classic part; the general rules at the top of that header hold here.
 * Include knn_gpgpu.h, not this file: it includes the parts inside its
 * extern "C" block. */
#ifndef KNN_GPGPU_INDEX_H
#define KNN_GPGPU_INDEX_H

#ifndef KNN_GPGPU_H
#error "include knn_gpgpu.h, which includes this part"
#endif

/* =========================================================================
 * 3. The index API (any dimension, resident on the device)
 * ========================================================================= */

/* An index owns a copy of n points of dim floats (dim 1..KNN_INDEX_MAX_DIM)
 * and answers kNN, all-kNN and radius queries on them, exactly and with the
 * results of the general rules' "Results" (knn_gpgpu.h), whichever backend
 * and structure serve it (they return bit-identical answers).
 *
 * Backends. KNN_BACKEND_CUDA: the GPU (KNN_ERR_NO_DEVICE without one); the
 *   index lives in device memory between calls. KNN_BACKEND_OPENMP: the CPU.
 *   KNN_BACKEND_AUTO: the GPU when a device is usable and the build's device
 *   estimate (knn_estimate_build_bytes) fits the device budget (general
 *   rules, "Device memory": device_memory_limit, else
 *   KNN_DEVICE_MEMORY_LIMIT, never beyond the free memory less the margin),
 *   else the CPU; an
 *   automatic GPU build that runs out of device memory anyway, or that the
 *   GPU engine cannot serve, is built on the CPU instead. A call on an index
 *   that KNN_BACKEND_AUTO put on the GPU, which runs out of device memory
 *   (the device budget holds not even one query, or an allocation fails), is
 *   answered on the CPU instead, with the same results and no error: the
 *   CPU engine of the index's structure (AUTO: the CPU's choice) is built
 *   for that call from a host copy of the points (n * dim scalars of host
 *   memory and the CPU build's time) and freed before it returns; the next
 *   call tries the device again. An index built for KNN_BACKEND_CUDA fails
 *   such a call with DEVICE_OUT_OF_MEMORY (below, "Errors").
 * Structures. KNN_STRUCTURE_KDTREE: a bucket kd-tree (leaf_size points per
 *   bucket; default 32 up to dim 6 and 128 from dim 7 on the CPU and the
 *   GPU, except 64 up to dim 3 on the GPU), any dimension.
 *   KNN_STRUCTURE_GRID: a uniform grid, dim 3 only (other dims:
 *   KNN_ERR_UNSUPPORTED). Points on a surface (a scan, a CAD model's
 *   skin) get finer cells than their bounding box suggests, up to 16 cells
 *   a point; on data that would still make a poor grid (strongly
 *   clustered, all points equal) the kd-tree serves instead, and
 *   knn_index_info reports KNN_STRUCTURE_KDTREE. KNN_STRUCTURE_AUTO takes
 *   no grid for points on a curve (a line, a helix, a circle, thin
 *   across: a few times the spacing of its points or less) either,
 *   judged the same way on the CPU and the GPU: there the grid's walks
 *   read a few points a shell and the kd-tree is as fast or faster
 *   (OpenMP, all-kNN k = 1000 of 20,000 points: on a line along x 0.45 s
 *   against 0.68 s on the grid, on a circle 0.42 s against 10.3 s on a
 *   grid refined for it); an explicit KNN_STRUCTURE_GRID is not refused
 *   for a curve alone (a line along an axis keeps its row of cells).
 *   Points stacked several at each location (duplicates) are no curve
 *   when their locations fill space, judged from cells four times as
 *   wide: AUTO keeps the grid for them, and a kd-tree serves their short
 *   lists (below).
 *   A kNN query whose walk of
 *   cells crosses empty ones for long (inside a scanned object, off its
 *   surface, an outlier) is answered by a scan of every point (O(n) for
 *   that query) rather than a walk across all of them; where the points only
 *   thin out the walk goes on to them. An AUTO index hands calls with many
 *   queries that have no point in the 3 x 3 x 3 grid cells around their own
 *   to a kd-tree (below).
 *   KNN_STRUCTURE_BRUTE_FORCE:
 *   every query against every point, any dimension. KNN_STRUCTURE_AUTO:
 *   brute force for up to 2048 points on the CPU (16384 on the GPU), for
 *   dim > 16 (a kd-tree prunes little there), and on the GPU for dim 13..16
 *   below 2^(dim + 4) points (the measured H100 crossover); the grid for dim
 *   3, the kd-tree otherwise: the index's primary structure, chosen at
 *   build time and reported by knn_index_info.
 *   AUTO also decides at query time, when k is known. On the GPU the grid is
 *   the faster 3-D structure for every list of up to 256 neighbours (H200,
 *   10^7 x 10^7, query: uniform k = 100 78 vs 185 ms with the kd-tree, on a
 *   sphere's surface 76 vs 123 ms; k = 256 on the sphere 273 vs 267 ms), the
 *   kd-tree for longer ones, and the GPU grid and brute force keep at most
 *   2048 neighbours per query (below). So an AUTO index on the GPU adds a
 *   kd-tree beside its primary structure at the first kNN or all-kNN call
 *   whose lists (k, k + 1 with exclude_self) hold more than 256 entries on a
 *   grid, and at the first call of any kind whose lists the primary refuses (k,
 *   k + 1, or a radius or CSR row beyond 2048 on a grid, or on a brute force of
 *   more than 2048 points); from then on those calls are served by the kd-tree,
 *   the others by the primary. A kNN call on a grid whose queries lie away from
 *   the points is served by the kd-tree too: when the share of an evenly spaced
 *   sample of its queries (at most 4096; for all-kNN, of the indexed points)
 *   with at most one point in the 3 x 3 x 3 grid cells around their own, or
 *   more than one cell width beyond the points' bounding box, times n,
 *   exceeds 1024 (the grid walks shells of empty cells for the first kind,
 *   then scans all n points for those with none, and a widening cap of the
 *   box's face for the second; H100, 10^6 points of a scanned torus 0.5 % of
 *   them sprayed over its box, all-kNN k = 16: 11.5 ms against 76.3 ms on
 *   the grid; 10^6 points on a sphere, 10^5 queries in its bounding cube,
 *   k = 8: 51 ms against 384 ms). The statistics
 *   (knn_gpgpu_stats.h) ask the same of their lists. On a grid of stacked
 *   points (above), kNN and all-kNN calls whose lists hold fewer entries than
 *   a point's own cell holds on average are served by the kd-tree on both
 *   backends (every list scans crowded cells: OpenMP, 2 cores, 2 x 10^5
 *   points 16 at each location, k = 8 129 ms against 157 ms on the grid, k =
 *   100 266 ms against 165 ms). The kd-tree is
 *   built once (concurrent callers wait for the first one's build), from the
 *   index's own points (copied device to device, never through host memory:
 *   n * dim scalars of device memory for the time of the build, counted in
 *   device_memory_limit), on the index's device, with leaves sized for the long
 *   lists that mostly reach it (128 points up to dim 3, the default above from
 *   dim 4); it lives until knn_index_free and its device memory counts in
 *   knn_estimate_query_bytes. A kd-tree build that runs out of memory (host or
 *   device) leaves the call to the primary structure where it can serve it (no
 *   error; a later call tries again), else the call fails with that status (for
 *   device memory on an index that KNN_BACKEND_AUTO put on the GPU, the CPU
 *   answers instead: "Backends" above). No CPU structure limits k: an AUTO
 *   index on the CPU adds the kd-tree only for kNN calls whose queries lie
 *   away from the points (the share as above, times n, above 4096: the
 *   OpenMP grid's scan costs as the GPU's does) and for short lists on stacked
 *   points, and takes the kd-tree as
 *   its primary where the grid would need finer cells for a surface (on the
 *   CPU the kd-tree is faster there; on the GPU the finer grid is). An index
 *   built with an explicit structure never adds one. These thresholds are
 *   tuning, not contract: a later release may move them (the answers never
 *   change).
 * Devices. The CUDA backend builds on opt->device when it is >= 0, else on
 *   the calling thread's current device; the index remembers its device and
 *   every later call on it runs there. The caller's current device is
 *   restored before each call returns. A device number beyond the devices
 *   present is KNN_ERR_INVALID_ARGUMENT; KNN_BACKEND_OPENMP ignores the
 *   device, and so does AUTO where there is no device at all (it then runs
 *   on the CPU).
 * Host and device arrays. In a build with CUDA, points, queries and outputs
 *   may each be host or device memory (the library asks the driver). The GPU
 *   engines use device arrays in place; the CPU engines copy device inputs to
 *   the host and write device outputs through host buffers. The outputs of one
 *   call must be all host or all device memory (else INVALID_ARGUMENT). A
 *   GPU call whose host outputs come to 64 MiB or more faults their pages in
 *   on spare host threads while the device searches (it writes a zero into
 *   one byte of each page ahead of the results), so that output into freshly
 *   allocated memory costs about what output into warm memory does.
 * Errors. Validation failures (NULL pointers with positive counts, negative
 *   counts, n > 2147483647 (indices are int32), m * k, n * k (all-kNN),
 *   m * max_neighbors or m * dim elements of the call's scalar (4 bytes, 8
 *   for the _f64 calls) or m counts beyond PTRDIFF_MAX bytes, m + 1 offsets
 *   likewise (the CSR calls), dim out of range, k < 1, a
 *   negative or NaN radius, max_neighbors < 0, bad options, a handle that is
 *   not a live index, NaN/Inf coordinates naming the first bad point or query
 *   and dimension) leave every output untouched. Failures after computing has
 *   started (device out of memory, a device error, cancellation) write the
 *   missing value into every output slot: index -1, squared distance
 *   +infinity, count 0.
 * Threads. Any number of host threads may query one index at once, and
 *   knn_index_free may be called while they do (see knn_index_free). */
#define KNN_INDEX_MAX_DIM 4096

typedef struct knn_index knn_index; /* opaque */

enum knn_backend { KNN_BACKEND_AUTO = 0, KNN_BACKEND_CUDA = 1, KNN_BACKEND_OPENMP = 2 };
enum knn_structure {
  KNN_STRUCTURE_AUTO = 0,
  KNN_STRUCTURE_KDTREE = 1,
  KNN_STRUCTURE_GRID = 2,
  KNN_STRUCTURE_BRUTE_FORCE = 3
};

/* Options. Always initialise with knn_options_init, then set fields; the
 * library reads only the fields that lie wholly within the first struct_size
 * bytes (the rest get their defaults), so callers built against an older,
 * shorter struct keep working; struct_size must cover at least `backend`
 * (else INVALID_ARGUMENT). NULL everywhere means the defaults.
 * knn_options_init writes exactly the fields of this version-1 struct (40
 * bytes on 64-bit platforms), in every later release too: fields added later
 * get their defaults when struct_size says they are absent, and a versioned
 * initialiser of their own.
 * Version 2 adds device_count and devices (several devices, below); set them
 * after knn_options_init_v2, which writes every field of this struct.
 * Every field is checked where an opt is passed (unknown backend or
 * structure, device < -1, leaf_size < 0, threads < 0, device_count outside
 * 0..KNN_MAX_DEVICES, a listed device < 0 or beyond the devices present:
 * INVALID_ARGUMENT). A build uses all fields; a query or radius call uses
 * only threads, device_memory_limit (0: the build's values) and the device
 * list (device_count 0: the build's list) and ignores the others.
 * threads above KNN_MAX_THREADS_PER_PROCESSOR times the number of processors
 * (omp_get_num_procs()) are reduced to that number, and so is the default
 * (threads 0: omp_get_max_threads()): more never runs faster, and the OpenMP
 * runtime ends the process when it cannot start a team (general rules,
 * "Threads of the CPU engine").
 * Several devices. A CUDA index answers knn_index_query, knn_index_query_self,
 * knn_index_radius, knn_index_radius_count and the counting pass of
 * knn_index_radius_fill (its rows are filled on the index's own device), and
 * their _f64 twins, on several devices at once: the index is copied to each chosen device (on
 * the first call that uses it; the copies live until knn_index_free), the
 * queries are cut into contiguous shares, one per listed device, and every
 * query is answered whole on one device, so the results are bit-identical
 * to one device's. Which devices, first rule that applies:
 *   1. device >= 0 (the build's, for an index): that device alone;
 *   2. device_count > 0: devices[0 .. device_count-1], as listed; a device
 *      listed twice takes two shares (tests use {0, 0} to force a split on
 *      one GPU);
 *   3. the environment variable KNN_DEVICES: "all", or device numbers
 *      separated by commas ("0,1", "0,0"); anything else is INVALID_ARGUMENT;
 *   4. default: every usable device, once the call has at least
 *      KNN_MIN_QUERIES_PER_DEVICE queries per device (fewer devices below
 *      that; one GPU: unchanged, that device alone).
 *   In the default list the index's own device (for queryAll, the current
 *   device) takes the first share; a listed one is used as listed. Each
 *   device plans its chunks within its own budget (general rules, "Device
 *   memory"; a limit applies to each device, and shares of a device listed
 *   twice divide its budget). Device arrays of the caller stay where
 *   they are: a share on another device with peer access to them (NVLink or
 *   PCIe peer-to-peer) reads the queries and writes the rows in place, and one
 *   without copies them there and back in pieces (peer copies, counted in the
 *   share's budget). For this the library enables peer access between the
 *   devices of a call (cudaDeviceEnablePeerAccess, both directions, once per
 *   pair per process) where the hardware allows it; a host that enabled it
 *   already is unaffected. A device that fails fails the call (its status
 *   and message) after every share has stopped; all outputs then hold the
 *   missing values.
 *   Each device holds a full copy of the structure that serves the call (an
 *   AUTO index whose kd-tree serves long lists copies that too):
 *   knn_estimate_build_bytes is the need of each device (for an AUTO index
 *   with both, knn_estimate_query_bytes); the index also keeps its points in
 *   host memory (n * dim floats) from its first split call on, to build the
 *   copies and to serve all-kNN shares. KNN_MIN_QUERIES_PER_DEVICE is tuning,
 *   not contract (the answers never depend on it). A CUDA mesh answers
 *   knn_mesh_closest and knn_mesh_signed_distance (and their _f64 twins) by
 *   the same rules, its points for queries (knn_gpgpu_mesh.h, "Several
 *   devices"). */
#define KNN_MAX_THREADS_PER_PROCESSOR 4
/* The most devices one call uses (entries of knn_options.devices). */
#define KNN_MAX_DEVICES 16
/* The default device list (rule 4 above) gives each device at least this
 * many queries (or points, for all-kNN): below it one device answers sooner. */
#define KNN_MIN_QUERIES_PER_DEVICE 262144
typedef struct knn_options {
  size_t struct_size;         /* = sizeof(knn_options)                        */
  int backend;                /* enum knn_backend, default AUTO               */
  int device;                 /* CUDA device number, default -1 = current     */
  int structure;              /* enum knn_structure, default AUTO             */
  int leaf_size;              /* points per leaf/bucket, 0 = library default  */
  int threads;                /* CPU threads, 0 = all cores                   */
  size_t device_memory_limit; /* 0 = KNN_DEVICE_MEMORY_LIMIT, else the free
                                 memory less the margin; set it to make the
                                 library plan as if only this many bytes
                                 were free, on each device ("Device memory",
                                 general rules; tests use it to force chunks) */
  /* version 2 (struct_size >= offsetof(knn_options, devices) + device_count * sizeof(int)) */
  int device_count;             /* entries of devices in use, 0 = default     */
  int devices[KNN_MAX_DEVICES]; /* CUDA device numbers, one share each        */
} knn_options;

/* Fill *opt with the defaults (struct_size included). NULL is ignored.
 * knn_options_init writes the version-1 fields only and sets struct_size to
 * their extent (40 bytes on 64-bit platforms); knn_options_init_v2 writes
 * every field of this version (device_count 0, devices all -1) and sets
 * struct_size = sizeof(knn_options). Use the second to set the device list. */
KNN_API void KNN_CALL knn_options_init(knn_options* opt);
KNN_API void KNN_CALL knn_options_init_v2(knn_options* opt);

/* Build an index over n points of dim floats each (row-major, n rows). The
 * index owns a copy of the points (on the device for the CUDA backend); the
 * caller's array may change or go once the call returns. *out receives the
 * handle, NULL on failure (out itself must not be NULL). n = 0 builds an
 * empty index whose queries return only missing slots. Free the index with
 * knn_index_free. Errors: INVALID_ARGUMENT, NONFINITE_INPUT ("point 12 has a
 * NaN coordinate (dimension 2)"), UNSUPPORTED (GRID with dim != 3),
 * NO_DEVICE (CUDA without a device), HOST_OUT_OF_MEMORY,
 * DEVICE_OUT_OF_MEMORY, DEVICE, CANCELLED. */
KNN_API int KNN_CALL knn_index_build(const float* points, int64_t n, int dim,
                                     const knn_options* opt, knn_index** out);
/* Free an index and everything it holds; NULL is fine. A pointer that is not
 * a live index (already freed, or not made by knn_index_build) is refused
 * with INVALID_ARGUMENT "not a live index", here and by every call that takes
 * an index: the library keeps the set of live handles and looks a pointer up
 * there before reading it, so a double free or a stale handle never touches
 * freed memory. (An address that a later build reuses is that later index.)
 * Calls on the index running on other threads when it is freed: the index
 * stops being live at once (calls that begin afterwards, and a second free,
 * are refused as above), the running calls finish normally with their full
 * results, and the index and its memory, device memory included, are
 * released when the last of them returns (on that call's thread; until then
 * the address is not reused). knn_index_free never waits for them and
 * returns KNN_OK for any live index. */
KNN_API int KNN_CALL knn_index_free(knn_index* index);
/* Size, dimension, backend and structure that actually serve the index (never
 * AUTO; for an AUTO index its primary structure, even once it has added a
 * kd-tree for long lists, see "Structures" above); any output pointer may be
 * NULL. */
KNN_API int KNN_CALL knn_index_info(const knn_index* index, int64_t* n, int* dim, int* backend,
                                    int* structure);
/* k nearest neighbours of m queries (m rows of dim floats): indices[i*k + j]
 * and sq_distances[i*k + j] (may be NULL), nearest first, ties by the smaller
 * index; slots beyond the index's size hold -1 / +infinity. Any k >= 1 on
 * the kd-tree and on the OpenMP backend. On the CUDA backend the brute force
 * keeps at most 2048 neighbours per query (k, or k + 1 with exclude_self, or
 * the longest row of a radius or CSR fill call) and the grid what the
 * device's shared memory holds (2048 or fewer); beyond that the call fails
 * with KNN_ERR_UNSUPPORTED naming the limit (outputs as for any failure
 * once computing started): an AUTO index answers such calls through the
 * kd-tree it adds (see "Structures" above); with an explicit structure build
 * with KNN_STRUCTURE_KDTREE (or the OpenMP backend) for longer lists. */
KNN_API int KNN_CALL knn_index_query(const knn_index* index, const float* queries, int64_t m, int k,
                                     int32_t* indices, float* sq_distances, const knn_options* opt);
/* All-kNN of the indexed points themselves, in input order: row i (n rows of
 * k) holds the k nearest of point i. exclude_self != 0 drops only point i's
 * own index; other points equal to it stay (at distance 0, by index). With
 * exclude_self, rows of an index of n <= k points end in -1 / +infinity. */
KNN_API int KNN_CALL knn_index_query_self(const knn_index* index, int k, int exclude_self,
                                          int32_t* indices, float* sq_distances);
/* Points within `radius` of each query: squared distance <= radius*radius
 * (the product rounded to float32; radius may be +infinity, not negative or
 * NaN), ordered by (distance, index), in rows of max_neighbors per query:
 * indices[i*max_neighbors + j] and sq_distances (may be NULL); unused slots
 * hold -1 / +infinity. counts[i] (may be NULL when max_neighbors > 0) is the
 * true number within the radius, which may exceed max_neighbors.
 * max_neighbors = 0 is a counting call: counts is required, indices and
 * sq_distances are not read. */
KNN_API int KNN_CALL knn_index_radius(const knn_index* index, const float* queries, int64_t m,
                                      float radius, int max_neighbors, int32_t* indices,
                                      float* sq_distances, int32_t* counts, const knn_options* opt);

/* Radius search into CSR rows, for any number of neighbours per query: count,
 * take offsets from the counts, fill. The predicate and order are those of
 * knn_index_radius (squared distance <= radius*radius rounded to float32,
 * ordered by (distance, index)); all sizes and offsets are 64-bit, so the
 * total may exceed 2^31.
 *   knn_index_radius_count writes counts[i] (m int64), the number of points
 *     within the radius of query i.
 *   knn_offsets_from_counts writes offsets[0] = 0 and offsets[i+1] =
 *     offsets[i] + counts[i] (m + 1 int64, host memory); negative counts or a
 *     sum beyond INT64_MAX are INVALID_ARGUMENT and leave offsets untouched.
 *   knn_index_radius_fill writes query i's neighbours to indices[offsets[i]
 *     .. offsets[i+1]) and sq_distances (may be NULL) at the same positions,
 *     nearest first. offsets (m + 1 entries) must be the running sum of the
 *     counts, else INVALID_ARGUMENT naming the first bad entry: offsets no
 *     search could give (offsets[0] not 0, a row shorter than 0 or longer
 *     than the index) are refused before anything is written; others are
 *     checked against each row's search as it is filled, and a row that
 *     disagrees fails the call as below (indices all -1).
 *     indices may be NULL only when offsets[m] is 0.
 * queries, counts, offsets, indices and sq_distances may each be host or
 * device memory (indices and sq_distances of one kind); the rows are staged
 * through host memory in runs (at most 2^22 padded slots each, or one query),
 * so a device engine fills device outputs by one copy per run. A fill
 * searches once, as a count does.
 * Errors: as knn_index_radius. On a failure after computing started
 * (cancellation, device error) counts are all 0; a fill that fails after it
 * began searching (those, or a row that disagrees with its offsets) leaves
 * indices[0 .. offsets[m]) all -1 and sq_distances +infinity, one that fails
 * before leaves them untouched. */
KNN_API int KNN_CALL knn_index_radius_count(const knn_index* index, const float* queries, int64_t m,
                                            float radius, int64_t* counts, const knn_options* opt);
KNN_API int KNN_CALL knn_offsets_from_counts(const int64_t* counts, int64_t m, int64_t* offsets);
KNN_API int KNN_CALL knn_index_radius_fill(const knn_index* index, const float* queries, int64_t m,
                                           float radius, const int64_t* offsets, int32_t* indices,
                                           float* sq_distances, const knn_options* opt);

/* Pairs within a radius and pair counts, answered in the library (no row
 * reaches the caller; at most 2^22 entries are staged at a time). Both use
 * the radius search of knn_index_radius_count / _fill (its predicate), on any
 * backend and structure, and serve float32 and float64 indexes.
 *
 * knn_index_radius_pairs: every pair (i, j), i < j, of the indexed points
 *   whose squared distance is <= radius*radius in the index's precision (a
 *   float32 index takes radius rounded to float, then the predicate of
 *   knn_index_radius; a float64 one that of knn_index_radius_f64). Each pair
 *   is written once, as pairs[2p] = i, pairs[2p+1] = j, ordered by i, then j;
 *   capacity counts pairs (pairs holds 2 * capacity int64, host memory).
 *   *count (required) receives the number of pairs: call with pairs NULL and
 *   capacity 0 for that number alone (KNN_OK), then with a capacity at least
 *   that. A smaller capacity is INVALID_ARGUMENT with *count written and
 *   pairs untouched. radius: not negative or NaN (+infinity: every pair).
 *   A count of pairs may exceed 2^31 (int64 throughout). self_counts (may
 *   be NULL, host or device memory, n int64) saves the call its counting
 *   search: the counts knn_index_radius_count(_f64) gives for the indexed
 *   points themselves (in input order) at this radius; the number of pairs
 *   is then (sum - n) / 2. Entries outside 1..n, or a sum that no distance
 *   gives, are INVALID_ARGUMENT before anything is written; other wrong
 *   counts fail the fill (INVALID_ARGUMENT, pairs as after a failure).
 *   Without self_counts, an OpenMP kd-tree index finds each pair once, in
 *   one search that also counts them: a call whose capacity suffices needs
 *   no size query first (a short one costs that search and writes *count);
 *   the pairs are held while they fit (about 12 bytes a pair and 16 a point
 *   beside pairs). An AUTO index on the OpenMP backend served by another
 *   structure does the same on the kd-tree it adds for long lists (built on
 *   the first such call and kept, see "Structures").
 *   Other engines search every point's radius row, counting, then filling.
 *
 * knn_index_count_neighbors (_f64 for a float64 index, as knn_index_radius):
 *   for each of n_radii radii (any order; a negative radius holds no pair,
 *   +infinity every pair, NaN is INVALID_ARGUMENT), the number of (query,
 *   point) pairs whose squared distance is <= radii[b]*radii[b] rounded to
 *   double, into counts[b] (int64); the squared distance is the index's own
 *   (a float32 index's converted exactly to double), so the test is
 *   scipy.spatial's d*d <= r*r for every radius, without the rounding of
 *   knn_index_radius. weighted_counts[b] (double) receives the sum over the
 *   same pairs of query_weights[query] * point_weights[point] (a NULL weight
 *   array counts as all 1; weights are used as given, NaN included). counts
 *   or weighted_counts may be NULL, not both. No pair is held: the OpenMP
 *   kd-tree and grid count into every radius during one search at the
 *   largest (host queries); other engines count with one counting search
 *   per distinct radius (float64, no weighted_counts) or bin the rows of
 *   one search at the largest radius. The weighted sums are added in an
 *   order that may change with the thread count. queries may be host or
 *   device memory; radii, the weights (m and n entries) and the outputs are
 *   host memory. The outputs are written only on success.
 *
 * Errors: as knn_index_radius (a NULL or dead index, bad options, NaN or
 * out-of-range coordinates, cancellation, device errors). On a failure of
 * knn_index_radius_pairs after it began writing (cancellation, device
 * error), pairs[0 .. 2 * *count) are all -1. */
KNN_API int KNN_CALL knn_index_radius_pairs(const knn_index* index, double radius,
                                            const int64_t* self_counts, int64_t capacity,
                                            int64_t* pairs, int64_t* count, const knn_options* opt);
KNN_API int KNN_CALL knn_index_count_neighbors(const knn_index* index, const float* queries,
                                               int64_t m, const double* radii, int64_t n_radii,
                                               const double* query_weights,
                                               const double* point_weights, int64_t* counts,
                                               double* weighted_counts, const knn_options* opt);
KNN_API int KNN_CALL knn_index_count_neighbors_f64(const knn_index* index, const double* queries,
                                                   int64_t m, const double* radii, int64_t n_radii,
                                                   const double* query_weights,
                                                   const double* point_weights, int64_t* counts,
                                                   double* weighted_counts, const knn_options* opt);

/* Serialization of an index to and from a caller's buffer (host memory).
 * knn_index_serialized_size writes the byte count of the serialized form
 * (64 + n * dim * 4 + 4; 64 + n * dim * 8 + 4 for a float64 index);
 * knn_index_serialize writes exactly that many bytes
 * to buffer (bytes must be at least that, else INVALID_ARGUMENT; nothing is
 * written then); knn_index_deserialize builds a new index from such a buffer
 * into *out (NULL on failure; free it with knn_index_free).
 * The format (version 1) holds a magic ("KNNGINDX"), the format version, a
 * byte-order marker, n, dim, the structure that served the index and its
 * leaf_size, the points in input order, and a CRC-32C of everything before
 * it. A float64 index writes version 2: the same fields, a scalar field
 * (KNN_SCALAR_FLOAT64) in the header and the points as doubles; a float32
 * index keeps writing version 1, byte for byte. knn_index_deserialize reads
 * both and makes an index of the buffer's precision. The structure itself
 * is rebuilt on load from those (a build is a function of its points and
 * options), so a load costs one build and the
 * loaded index answers bit-identically to the saved one on either backend:
 * an index saved from the GPU loads on the CPU and back.
 * Options at load: opt's backend, device, threads and device_memory_limit
 * apply as in knn_index_build; its leaf_size is ignored and the buffer's
 * structure serves. The format records the structure that served, not
 * whether AUTO chose it, and a kd-tree an AUTO index added is not saved: a
 * load whose opt->structure is KNN_STRUCTURE_AUTO (the default, and NULL)
 * makes an AUTO index with the buffer's structure as its primary (it adds
 * its kd-tree again on first use), any other value an index of the buffer's
 * structure alone.
 * A buffer that is truncated, has trailing bytes, a bad magic, header field
 * or checksum is refused with INVALID_ARGUMENT saying which, and so is bytes
 * beyond PTRDIFF_MAX (no buffer is that large: refused before the header is
 * read); a later format
 * version or the other byte order is UNSUPPORTED. Every size in the buffer is
 * checked against `bytes` before anything is allocated, so a hostile buffer
 * costs at most its own size. Other errors: as knn_index_build. */
KNN_API int KNN_CALL knn_index_serialized_size(const knn_index* index, size_t* bytes);
KNN_API int KNN_CALL knn_index_serialize(const knn_index* index, void* buffer, size_t bytes);
KNN_API int KNN_CALL knn_index_deserialize(const void* buffer, size_t bytes, const knn_options* opt,
                                           knn_index** out);

/* Device bytes a CUDA index build / a kNN call on it would need at most, for
 * the structure opt asks for (AUTO or NULL: the largest of the structures the
 * planner may pick; for a call on more than 2048 points also the kd-tree an
 * AUTO index may add beside it, its build or its resident tree with the
 * call's scratch, since any earlier call may have added it). No device
 * needed; they compute in 64 bits, grow with every argument and return 0 for
 * negative sizes, dim < 1 or k < 1, and SIZE_MAX for sizes no index serves
 * (n > INT32_MAX, dim > KNN_INDEX_MAX_DIM) or whose byte count does not fit a
 * size_t. */
KNN_API size_t KNN_CALL knn_estimate_build_bytes(int64_t n, int dim, const knn_options* opt);
KNN_API size_t KNN_CALL knn_estimate_query_bytes(int64_t m, int k, int64_t n, int dim,
                                                 const knn_options* opt);

/* Double precision (float64): the index API for double data, such as CAD
 * and GIS coordinates with large offsets (a UTM frame at 4.5e6 m with
 * millimetre spacing, where float32 cannot tell points 0.25 m apart).
 *
 * Families. An index built by knn_index_build_f64 holds its points as
 * doubles and answers only the _f64 calls below; an index built by
 * knn_index_build (or loaded from a version-1 buffer) answers only the float
 * calls. The precision-free calls serve both: knn_index_free,
 * knn_index_info, knn_index_scalar, knn_offsets_from_counts and
 * serialization. A call of the other family is refused with
 * INVALID_ARGUMENT whose message names the call to use (for example
 * "... call knn_index_query_f64 instead"), its outputs untouched.
 *
 * Each _f64 call is its float twin with double coordinates, radii and
 * squared distances (indices, counts and offsets stay int32 / int64): the
 * same arguments, checks, errors and messages, backends and structures,
 * several devices, host or device arrays (a device array holds doubles),
 * output rules on failure, progress, cancellation and thread safety. Read
 * the twin's documentation above for each.
 *
 * Exactness, as in float32: the squared distance is the double value
 * ((d0*d0 + d1*d1) + d2*d2) + ... with d_i = q_i - p_i and every operation
 * rounded to float64, no fused multiply-add; rows ascend by it, ties by the
 * smaller index, so every backend and structure returns bit-identical
 * indices and distances. Radius predicates keep squared distance <=
 * radius*radius rounded to float64. A float32 index and a float64 index of
 * the same (float-representable) points may rank near ties differently:
 * each is exact in its own precision.
 *
 * Coordinates: finite (NaN or infinity: NONFINITE_INPUT naming the point or
 * query and the dimension) and of magnitude at most 2^e with
 * e = floor((1021 - ceil(log2 dim)) / 2): 2^510 (3.4e153) for dim 1..2,
 * 2^509 (1.7e153) for dim 3..8, 2^508 for dim 9..16, 2^504 for dim 4096
 * (else INVALID_ARGUMENT naming the point, dimension, value and limit), so
 * that no float64 squared distance overflows.
 *
 * knn_index_scalar writes KNN_SCALAR_FLOAT32 or KNN_SCALAR_FLOAT64 to
 * *scalar (INVALID_ARGUMENT for a NULL or dead index or a NULL scalar).
 *
 * knn_estimate_build_bytes_f64 / knn_estimate_query_bytes_f64 answer as
 * their float twins for float64 storage (coordinates and distances take 8
 * bytes; indices and keys do not grow), saturating at SIZE_MAX. The planner
 * uses the same figure when AUTO weighs a device build.
 *
 * The classic API (section 2) stays float32: use this family for double
 * data. */
enum knn_scalar { KNN_SCALAR_FLOAT32 = 0, KNN_SCALAR_FLOAT64 = 1 };

KNN_API int KNN_CALL knn_index_build_f64(const double* points, int64_t n, int dim,
                                         const knn_options* opt, knn_index** out);
KNN_API int KNN_CALL knn_index_scalar(const knn_index* index, int* scalar);
KNN_API int KNN_CALL knn_index_query_f64(const knn_index* index, const double* queries, int64_t m,
                                         int k, int32_t* indices, double* sq_distances,
                                         const knn_options* opt);
KNN_API int KNN_CALL knn_index_query_self_f64(const knn_index* index, int k, int exclude_self,
                                              int32_t* indices, double* sq_distances);
KNN_API int KNN_CALL knn_index_radius_f64(const knn_index* index, const double* queries, int64_t m,
                                          double radius, int max_neighbors, int32_t* indices,
                                          double* sq_distances, int32_t* counts,
                                          const knn_options* opt);
KNN_API int KNN_CALL knn_index_radius_count_f64(const knn_index* index, const double* queries,
                                                int64_t m, double radius, int64_t* counts,
                                                const knn_options* opt);
KNN_API int KNN_CALL knn_index_radius_fill_f64(const knn_index* index, const double* queries,
                                               int64_t m, double radius, const int64_t* offsets,
                                               int32_t* indices, double* sq_distances,
                                               const knn_options* opt);
KNN_API size_t KNN_CALL knn_estimate_build_bytes_f64(int64_t n, int dim, const knn_options* opt);
KNN_API size_t KNN_CALL knn_estimate_query_bytes_f64(int64_t m, int k, int64_t n, int dim,
                                                     const knn_options* opt);

#endif /* KNN_GPGPU_INDEX_H */
