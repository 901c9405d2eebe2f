/* SPDX-License-Identifier: Apache-2.0 */
/*
 * knn_gpgpu.h - exact spatial search on NVIDIA GPUs and on the CPU (OpenMP).
 *
 * This header is the whole public interface of libknn_gpgpu.so / knn_gpgpu.dll
 * and its manual. It compiles as C99 and as C++ and uses only <stddef.h> and
 * <stdint.h> types.
 *
 * ---------------------------------------------------------------------------
 * General rules (they hold for every function below unless it says otherwise)
 * ---------------------------------------------------------------------------
 * Status.   Every function that can fail returns an int status: KNN_OK (0) or
 *           one of the KNN_ERR_* codes. knn_last_error() then says what went
 *           wrong and where ("point 1234 has a NaN coordinate"). The library
 *           never exits, aborts, prints, or lets a C++ exception escape.
 * Outputs.  A call that fails validation (bad pointer, count, k, dimension,
 *           non-finite coordinate, invalid tree) leaves every output buffer
 *           untouched. A call that fails after computing has started (device
 *           error, device out of memory where the call cannot recover) writes
 *           every output slot with the "missing" value (index -1, squared
 *           distance +infinity), so outputs are never half-written.
 * Ownership. Input arrays are only read, during the call. The library never
 *           keeps a pointer to a caller array after the call returns. Output
 *           arrays are written only inside the sizes the call documents.
 * Threads.  Every function may be called from any number of host threads at
 *           once; in particular any number of threads may query the same tree
 *           or index at once. knn_last_error() is per thread. Freeing a
 *           handle (knn_index_free, knn_quadtree_free) while other calls on
 *           it run is safe: the handle stops being live when the free is
 *           called, so calls that begin after it (and a second free) are
 *           refused with INVALID_ARGUMENT "not a live ..."; calls already
 *           running on it finish normally with their full results, and its
 *           memory (device memory included) is released when the last of
 *           them returns, on that call's thread. The free itself neither
 *           waits for them nor fails.
 * Coordinates. Every coordinate must be finite (else KNN_ERR_NONFINITE_INPUT,
 *           naming the point and dimension). The distance-based calls (the
 *           classic API, knn_brute_force, the index API) also refuse, with
 *           KNN_ERR_INVALID_ARGUMENT naming the point, a coordinate whose
 *           magnitude exceeds 2^e, e = floor((125 - ceil(log2 dim)) / 2):
 *           2^62 (4.6e18) for dim 1..2, 2^61 (2.3e18) for dim 3..8, 2^60 for
 *           dim 9..16, 2^56 for dim 4096 (the float64 calls of section 3:
 *           e = floor((1021 - ceil(log2 dim)) / 2), 2^509 for dim 3..8).
 *           Within it no squared distance overflows to +infinity (which
 *           would make a real neighbour look like a missing slot and break
 *           the order); points and queries are checked alike, and a classic
 *           query refuses a caller's tree holding such a point with
 *           KNN_ERR_INVALID_TREE (the result untouched). Point in polygon
 *           decides exactly for any finite coordinates and has no such
 *           limit.
 * Counts.   n = 0 is valid and does nothing. Negative counts, NULL arrays with
 *           a positive count, and k < 1 are KNN_ERR_INVALID_ARGUMENT. Offsets
 *           are computed in 64 bits (i * k for 10^8 queries and k = 100 works).
 *           A count no array can match is KNN_ERR_INVALID_ARGUMENT naming it,
 *           refused before anything is read, allocated or written: an array
 *           of count (or rows * row length: m * k, m * dim, n_qp * k,
 *           n_ref * dim...) elements whose byte count exceeds PTRDIFF_MAX,
 *           and count + 1 offsets (m + 1, n_rings + 1, n_polygons + 1) beyond
 *           it. Counts below that are the caller's word: the arrays must
 *           hold them.
 * Results.  Exact and deterministic: the k nearest reference points by squared
 *           Euclidean distance, ascending, ties broken by the smaller original
 *           index. The squared distance is the float32 value
 *               ((d0*d0 + d1*d1) + d2*d2) + ...     d_i = q_i - p_i
 *           with every operation rounded to float32 and no fused multiply-add,
 *           so every backend and every structure returns bit-identical indices
 *           and distances. When fewer than k reference points exist, the
 *           missing slots hold index -1 and squared distance +infinity. A query
 *           equal to reference points finds them at distance 0, ordered by
 *           index like any other tie.
 * Devices.  The CUDA backend uses the calling thread's current device (see
 *           cuSetDevice); a large call may also use the host's other devices
 *           (section 3, "Several devices": queryAll and the index API), and
 *           the caller's current device is the same when the call returns.
 *           The library changes no process-wide CUDA state. Memory it
 *           has used is kept for the next call, up to a cap, and freed at
 *           exit: pinned host staging up to 1 GiB, and on each device up to
 *           1 GiB or a sixteenth of its memory, whichever is less (asking
 *           the driver for memory serializes the threads of a process);
 *           getFreeBytesOnGpu and the planners count those idle bytes as
 *           free. A
 *           library built without CUDA, or run where no GPU is usable, answers
 *           CUDA-only calls with KNN_ERR_NO_DEVICE; automatic calls then run on
 *           the CPU.
 * Unloading. The library may be unloaded (dlclose, FreeLibrary) after use:
 *           it keeps its code mapped until the process exits (-z nodelete on
 *           Linux, a pinned module on Windows) so that OpenMP worker threads
 *           that outlive a call never run unmapped code.
 * Calling convention. KNN_CALL: the platform's default C convention (cdecl on
 *           x86-64 Windows, the System V ABI elsewhere). Structures use natural
 *           alignment; Point and Node have the same layout everywhere, and
 *           knn_options the same on every 64-bit platform (112 bytes, of which
 *           version 1 is the first 40).
 * Threads of the CPU engine. OpenMP. Every parallel region of a call
 *           runs on one team: knn_options.threads where the call takes
 *           options, else (threads 0, the classic calls, knn_brute_force)
 *           the OpenMP default, omp_get_max_threads() (OMP_NUM_THREADS, all
 *           cores when unset); either way at most
 *           KNN_MAX_THREADS_PER_PROCESSOR times omp_get_num_procs(). The
 *           regions create no OpenMP tasks, and the builds allocate what
 *           their regions need before these open; a host allocation that
 *           fails inside a region is caught there: the call returns
 *           KNN_ERR_HOST_OUT_OF_MEMORY. Out of the library's reach: libgomp
 *           ends the process (exit 1, "Thread creation failed", "out of
 *           memory allocating") when it cannot create the threads of the
 *           team a region asks for, or allocate that team, as the region
 *           opens (under a tight ulimit -v, say); where memory is that short,
 *           ask for fewer threads (knn_options.threads, OMP_NUM_THREADS) or
 *           smaller stacks (OMP_STACKSIZE). Hosts that call from several
 *           threads at once may prefer OMP_WAIT_POLICY=passive.
 * Device memory. Every GPU plan of a call (its chunks of queries, the tree
 *           split of queryAll, the point-in-polygon fill, the choice of the
 *           GPU by buildKdTree and by an index build with KNN_BACKEND_AUTO,
 *           which take it only when the build's estimate fits) takes one
 *           budget per device: knn_options.device_memory_limit when non-zero
 *           (index and point-in-polygon calls), else KNN_DEVICE_MEMORY_LIMIT
 *           when set, but never more than the device's free memory less a
 *           margin of max(256 MiB, free / 16) (the CUDA context grows, the
 *           allocator fragments, other threads and processes allocate); with
 *           neither limit, that free memory less the margin. It counts what
 *           the call allocates, beside an index's resident structure. A CUDA
 *           index build (kd-tree, grid, brute force) whose device estimate
 *           exceeds the limit in force is refused with DEVICE_OUT_OF_MEMORY
 *           (an AUTO backend builds on the CPU instead); without a limit a
 *           build allocates what it needs (at most knn_estimate_build_bytes).
 * Environment. KNN_DEVICE_MEMORY_LIMIT: the limit above, for every call
 *           whose options set no device_memory_limit (the classic calls have
 *           none), in bytes, decimal digits only; unset, empty or 0: no
 *           limit; any other value ("8G", "-1") makes the calls that read it
 *           fail with INVALID_ARGUMENT. It applies on each device.
 *           KNN_CPU_SHARE=1/0 forces the CPU share of queryAll on or off
 *           (default: on where it helps); KNN_DEVICES ("all", or "0,1")
 *           names the devices a call uses (section 3, "Several devices").
 *           The calls that may run on a device check these two the same way
 *           with or without one, so that a setting one host accepts no other
 *           host refuses: INVALID_ARGUMENT naming the variable and quoting
 *           its text, before any output is written. They are buildKdTree,
 *           cuBuildKdTree, queryAll and cuQueryAll (not the mp calls), and
 *           the index, mesh and point-in-polygon calls whose backend (for a
 *           query, the build's) is not KNN_BACKEND_OPENMP. Such a call checks
 *           KNN_DEVICE_MEMORY_LIMIT unless its options (or, for a query, the
 *           build's) set device_memory_limit, and KNN_DEVICES (its syntax;
 *           whether the devices exist, where it is used) when it is
 *           queryAll, cuQueryAll, an index call, knn_mesh_build,
 *           knn_mesh_deserialize, knn_mesh_closest or knn_mesh_signed_distance
 *           (or an _f64 twin) whose options and build name no device (device
 *           -1) and no device list; point in polygon, buildKdTree and
 *           knn_mesh_deviation_report use one device and never read
 *           KNN_DEVICES.
 * This release. Every section runs on both engines: the classic 3-D API
 *           (section 2); the index API (section 3): kd-tree and brute force
 *           in any dimension and the uniform grid in 3-D; point-in-polygon
 *           over a quadtree (section 4).
 */
#ifndef KNN_GPGPU_H
#define KNN_GPGPU_H

#include <stddef.h>
#include <stdint.h>

/* ---- Version ----------------------------------------------------------- */
#define KNN_VERSION_MAJOR 1
#define KNN_VERSION_MINOR 0
#define KNN_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH, the value knn_version() returns. */
#define KNN_VERSION_NUMBER (KNN_VERSION_MAJOR * 10000 + KNN_VERSION_MINOR * 100 + KNN_VERSION_PATCH)

/* ---- Export and calling convention --------------------------------------
 * Building the DLL defines KNN_GPGPU_BUILDING; consumers of the DLL define
 * nothing; a static library user defines KNN_GPGPU_STATIC. */
#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(KNN_GPGPU_STATIC)
#define KNN_API
#elif defined(KNN_GPGPU_BUILDING)
#define KNN_API __declspec(dllexport)
#else
#define KNN_API __declspec(dllimport)
#endif
#define KNN_CALL __cdecl
#else
#if defined(KNN_GPGPU_BUILDING) && (defined(__GNUC__) || defined(__clang__))
#define KNN_API __attribute__((visibility("default")))
#else
#define KNN_API
#endif
#define KNN_CALL
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Status codes (values never change once released) ------------------ */
enum knn_status {
  KNN_OK = 0,
  KNN_ERR_INVALID_ARGUMENT = 1,     /* a NULL pointer, a bad count, k, dim...  */
  KNN_ERR_NONFINITE_INPUT = 2,      /* a NaN or infinite coordinate            */
  KNN_ERR_HOST_OUT_OF_MEMORY = 3,   /* host allocation failed                  */
  KNN_ERR_DEVICE_OUT_OF_MEMORY = 4, /* device allocation failed                */
  KNN_ERR_NO_DEVICE = 5,            /* no usable GPU, or built without CUDA    */
  KNN_ERR_DEVICE = 6,               /* a CUDA call or kernel failed            */
  KNN_ERR_INVALID_TREE = 7,         /* a Node array that is not a valid tree   */
  KNN_ERR_UNSUPPORTED = 8,          /* valid request this build cannot serve   */
  KNN_ERR_CANCELLED = 9,            /* the caller cancelled a long call        */
  KNN_ERR_INTERNAL = 10             /* a bug: please report the message        */
};

/* Static, never NULL text for a status; "unknown status" for unknown codes. */
KNN_API const char* KNN_CALL knn_status_string(int status);
/* Text of the last failure on the calling thread ("" when the last call on
 * this thread succeeded). Valid until this thread's next call into the
 * library; copy it to keep it. Never NULL, and never empty after a failure,
 * even one for lack of host memory (the text needs no allocation; texts
 * longer than 2047 bytes are cut). */
KNN_API const char* KNN_CALL knn_last_error(void);
/* KNN_VERSION_NUMBER of the loaded library (compare with the header's). */
KNN_API int KNN_CALL knn_version(void);
/* Cancellation. Registers a flag for the calling thread (NULL unregisters).
 * While it is registered, every long call this thread makes (tree, index and
 * quadtree builds on either backend, AUTO's included, knn_index_deserialize,
 * classic, index and point-in-polygon queries, knn_brute_force) checks *flag
 * between chunks of work (CPU loops over the points: every 2^18 items; GPU
 * builds: between their steps and levels); once any thread has set it to
 * non-zero, the call stops with KNN_ERR_CANCELLED, within milliseconds on
 * the CPU, and its outputs hold the "missing" values (index -1, squared
 * distance +infinity; counts 0; a build's *out NULL), as after any failure
 * once computing has started. Arguments are checked first: a call refused
 * for them reports that, flag or not. The flag must stay valid while
 * registered; reset it to 0 before the next call.
 * The library reads the flag with an atomic load while the call runs, so the
 * host's store must be atomic too for the pair to be free of data races:
 * C11 atomic_store on an atomic_int (same size and alignment as int on every
 * supported platform), __atomic_store_n / std::atomic_ref<int> in C/C++,
 * Interlocked / Volatile.Write in C#, or at the least a store through a
 * volatile int lvalue (not a plain int store, which the compiler may delay
 * or drop). */
KNN_API int KNN_CALL knn_set_cancel_flag(const volatile int* flag);
/* Progress. Registers a progress record for the calling thread (NULL
 * unregisters); registering zeroes it. While it is registered, the long
 * calls this thread makes (the classic builds and queries, and the index
 * API's builds, queries and radius calls, on both engines; point in polygon
 * does not report yet) publish into it what they are doing, so that another
 * thread (a progress bar, a UI) can poll it during the call:
 *   stage     the kind of work (enum knn_progress_stage);
 *   total     work units of the stage (queries for queries and radius calls,
 *             query points for queryAll; levels of the tree for a CPU index
 *             kd-tree build; 1 for other builds);
 *   done      units finished so far, 0 .. total, non-decreasing within a
 *             stage, updated per chunk of work (a block of queries, a device
 *             chunk, a tree level), equal to total when the stage completes;
 *   sequence  incremented when a stage begins: one call may run several
 *             stages (a radius fill counts, then fills; a device call that
 *             falls back to the CPU begins its stage again, from the
 *             units done before that call).
 * The library writes done, then total, then stage, then sequence with atomic
 * operations (release order) when a stage begins, and adds to done
 * atomically; read the fields with atomic or plain aligned 64-bit loads
 * (reading sequence and stage first, then total, then done gives done <=
 * total). A call that fails leaves done where it stopped. The record must stay
 * valid while registered; one record per thread (the writers of two threads
 * would mix). Cheap: one atomic add per chunk, never per point. */
enum knn_progress_stage {
  KNN_PROGRESS_IDLE = 0,  /* nothing started since registration       */
  KNN_PROGRESS_BUILD = 1, /* building a tree, an index or a quadtree */
  KNN_PROGRESS_QUERY = 2  /* answering queries (kNN, radius, counts) */
};
typedef struct knn_progress {
  int64_t done;
  int64_t total;
  int32_t stage;    /* enum knn_progress_stage */
  int32_t sequence; /* stages begun since registration */
} knn_progress;
KNN_API int KNN_CALL knn_set_progress(knn_progress* progress);

/* =========================================================================
 * 2. The classic 3-D API
 * ========================================================================= */

/* Type names. The classic API's types are `struct Point` and `struct Node`;
 * knn_point and knn_node name the same types. A host that has types of its
 * own called Point or Node (a C struct tag cannot be declared twice) defines
 * KNN_GPGPU_NO_CLASSIC_TYPES before including this header: the two structs
 * are then declared under the tags knn_point and knn_node instead, with the
 * same members and layout, and the host uses the knn_point and knn_node
 * typedefs for the classic calls. The functions and their symbols are the
 * same either way; only the tag a translation unit sees differs. */
#if defined(KNN_GPGPU_NO_CLASSIC_TYPES)
#define KNN_POINT_TAG knn_point
#define KNN_NODE_TAG knn_node
#else
#define KNN_POINT_TAG Point
#define KNN_NODE_TAG Node
#endif

/* One 3-D point, 12 bytes. */
struct KNN_POINT_TAG {
  float p[3];
};

/* One kd-tree node, 24 bytes. */
struct KNN_NODE_TAG {
  float p[3]; /* the point, bit-equal to points[id].p                         */
  int left;   /* index of the left child in the Node array, or -1             */
  int right;  /* index of the right child, or -1                              */
  int id;     /* index of the point in the array the tree was built from      */
};

typedef struct KNN_POINT_TAG knn_point;
typedef struct KNN_NODE_TAG knn_node;
#undef KNN_POINT_TAG
#undef KNN_NODE_TAG

/* Tree layout (what buildKdTree writes, what queries accept).
 *   - tree[0] is the root; the tree is balanced and stored breadth first
 *     ("heap order"): node i has children 2i+1 and 2i+2 where those are < n,
 *     and -1 otherwise; the height is ceil(log2(n+1)) and the last level is
 *     filled from the left.
 *   - the split dimension of a node is its depth mod 3 (x at the root);
 *     every node of its left subtree has coordinate <= the node's on that
 *     dimension, every node of its right subtree >=.
 *   - the node's point is the median of its subtree's points in the order
 *     (coordinate, original index), at the rank that the heap shape gives the
 *     left subtree. The tree is therefore a function of the input alone: both
 *     backends, any thread count, give the byte-identical array.
 *   - id is a permutation of 0..n-1; p equals points[id].p.
 * Queries check this layout (links, ids, kd order) and refuse anything else
 * with KNN_ERR_INVALID_TREE, naming the first bad node. The array is caller
 * owned (getTreeSize(n) bytes) and can be saved and loaded by the host. */

/* Build the tree of n points into `tree` (getTreeSize(n) bytes).
 * buildKdTree runs on the GPU when one is usable and the build fits its
 * device budget ("Device memory", general rules), otherwise on the CPU; the result is identical.
 * cuBuildKdTree runs on the GPU only (KNN_ERR_NO_DEVICE without one), mpBuildKdTree on the CPU only
 * (all cores). Errors: NULL points/tree with n > 0, n < 0 (INVALID_ARGUMENT); a NaN/Inf coordinate
 * (NONFINITE_INPUT, naming the point); device failures (DEVICE_OUT_OF_MEMORY, DEVICE). */
KNN_API int KNN_CALL buildKdTree(const knn_point* points, int n, knn_node* tree);
KNN_API int KNN_CALL cuBuildKdTree(const knn_point* points, int n, knn_node* tree);
KNN_API int KNN_CALL mpBuildKdTree(const knn_point* points, int n, knn_node* tree);

/* All k nearest neighbours of n_qp query points in a tree of n_tree nodes.
 * result[i*k + j] (n_qp * k ints, 64-bit offsets) receives the original index
 * (Node.id) of query i's j-th nearest point; -1 where n_tree < k.
 * queryAll plans within the device budget ("Device memory", general rules
 * above: the free memory less the margin, or KNN_DEVICE_MEMORY_LIMIT): it
 * runs the queries in chunks that fit, overlaps transfers with compute,
 * splits the tree when the tree itself does not fit and merges the partial
 * lists exactly, runs a share of the queries on the CPU at the same time,
 * and runs on the CPU alone when no device is usable. It never fails for lack of device memory.
 * On the GPU a query runs on an index of the tree's points, made on the device from the uploaded
 * and checked tree: lists of k <= 256 over more than 16384 nodes on the grid (the index API's GRID)
 * where the points make a good grid and the queries lie on them, as an AUTO index would answer
 * them, and every other call on the bucket kd-tree (the index API's KDTREE); the rows are the same.
 * With several devices (KNN_DEVICES, or by default every device once there are at least
 * KNN_MIN_QUERIES_PER_DEVICE queries per device; section 3, "Several
 * devices") queryAll and cuQueryAll copy the tree to each of them and every
 * device takes chunks of queries from the same pool, the CPU share beside
 * them; when the tree does not fit, each device takes the next part of the
 * split tree and the partial lists are merged exactly. A KNN_DEVICES that is not a device list is
 * INVALID_ARGUMENT (result untouched). cuQueryAll runs
 * on the GPU only, also in chunks, and fails with DEVICE_OUT_OF_MEMORY when
 * the tree and one small chunk do not fit; mpQueryAll runs on the CPU only.
 * Every path returns the identical result. Errors: INVALID_ARGUMENT (NULL
 * arrays with positive counts, negative counts, k < 1, n_qp * k result ints
 * beyond PTRDIFF_MAX bytes), NONFINITE_INPUT (a
 * query coordinate), INVALID_TREE, DEVICE_OUT_OF_MEMORY / DEVICE (CUDA only).
 * Every call checks the whole tree first (one pass over the n_tree nodes,
 * milliseconds for 10^6), so a host that sends many small query batches to
 * one tree should build a resident index once (knn_index_build, below),
 * which answers without per-call tree checks. */
KNN_API int KNN_CALL queryAll(const knn_point* query_points, const knn_node* tree, int n_qp,
                              int n_tree, int k, int* result);
KNN_API int KNN_CALL cuQueryAll(const knn_point* query_points, const knn_node* tree, int n_qp,
                                int n_tree, int k, int* result);
KNN_API int KNN_CALL mpQueryAll(const knn_point* query_points, const knn_node* tree, int n_qp,
                                int n_tree, int k, int* result);

/* Memory helpers. They compute in 64 bits, need no device, return 0 for
 * negative arguments and SIZE_MAX where the byte count does not fit a
 * size_t (they never wrap to a smaller figure). They are honest: a GPU call whose need is at most
 * its device budget (the free memory less the margin, "Device memory" in the general rules) does
 * not fail for lack of memory, and its peak device use stays within the figure (every buffer is
 * counted in whole 2 MiB pages of the device allocator; a device test measures the real peak). */
/* Bytes of the Node array of an n-node tree. */
KNN_API size_t KNN_CALL getTreeSize(int n_tree);
/* Device bytes cuBuildKdTree needs for n points. */
KNN_API size_t KNN_CALL getNeededBytesForBuildingKdTree(int n_tree);
/* Device bytes to run the whole call at once: the tree (as uploaded, and the kd-tree of its
 * points) and every query's result rows on the device together, or, for trees of more than 16384
 * nodes (where the grid of the tree's points may answer, queryAll above), the tree, the grid and a
 * pipeline of queries if that is more. cuQueryAll streams the queries in chunks (at most 2^19
 * queries each), so its real peak is usually far lower; queryAll plans its chunks within the device
 * budget when less than this fits it. */
KNN_API size_t KNN_CALL getNeededBytesForQueryAll(int n_qp, int k, int n_tree);
/* Device bytes of the search kernels' own working storage for n_qp queries,
 * run as block_num blocks of thread_num threads (0 for either: the library's
 * choice); excludes the tree, queries and results. */
KNN_API size_t KNN_CALL getNeededBytesInSearch(int n_qp, int k, int n_tree, int thread_num,
                                               int block_num);
/* Free bytes on the calling thread's current device, counting the device
 * memory the library keeps idle for its next call; 0 when there is none. */
KNN_API size_t KNN_CALL getFreeBytesOnGpu(void);

/* Device selection for the calling thread (wraps cudaSetDevice/GetDevice).
 * cuSetDevice: INVALID_ARGUMENT for a device number out of range, NO_DEVICE
 * without devices. cuGetDevice: the current device, -1 when there is none.
 * cuGetDeviceCount: the number of usable devices, 0 when none (not an error). */
KNN_API int KNN_CALL cuSetDevice(int device);
KNN_API int KNN_CALL cuGetDevice(void);
KNN_API int KNN_CALL cuGetDeviceCount(void);

/* Exact brute-force kNN in any dimension (CPU). ref holds n_ref rows of dim
 * floats, query n_query rows. sq_dist and ind receive n_query * k values,
 * row i at offset i*k; either may be NULL when not wanted. dim >= 1;
 * n_ref * dim, n_query * dim and n_query * k floats within PTRDIFF_MAX bytes
 * (else INVALID_ARGUMENT, nothing read or written).
 * Cancellable (knn_set_cancel_flag): a cancelled call writes -1 and
 * +infinity to every slot. */
KNN_API int KNN_CALL knn_brute_force(const float* ref, int n_ref, const float* query, int n_query,
                                     int dim, int k, float* sq_dist, int* ind);

/* =========================================================================
 * 3. The index API (any dimension, resident on the device)
 * ========================================================================= */

/* An index owns a copy of n points of dim floats (dim 1..KNN_INDEX_MAX_DIM)
 * and answers kNN, all-kNN and radius queries on them, exactly and with the
 * results of section "Results" above, whichever backend and structure serve
 * it (they return bit-identical answers).
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
 *   sample of its queries (at most 4096) with no point in the 3 x 3 x 3 grid
 *   cells around their own, times n, exceeds 131072 (the grid scans all n
 *   points for each such query; H100, 10^6 points on a sphere, 10^5 queries in
 *   its bounding cube, k = 8: 51 ms against 384 ms on the grid). The kd-tree is
 *   built once (concurrent callers wait for the first one's build), from the
 *   index's own points (copied device to device, never through host memory:
 *   n * dim scalars of device memory for the time of the build, counted in
 *   device_memory_limit), on the index's device, with leaves sized for the long
 *   lists that alone reach it (128 points up to dim 3, the default above from
 *   dim 4); it lives until knn_index_free and its device memory counts in
 *   knn_estimate_query_bytes. A kd-tree build that runs out of memory (host or
 *   device) leaves the call to the primary structure where it can serve it (no
 *   error; a later call tries again), else the call fails with that status (for
 *   device memory on an index that KNN_BACKEND_AUTO put on the GPU, the CPU
 *   answers instead: "Backends" above). No CPU structure limits k: an AUTO
 *   index on the CPU adds the kd-tree only for kNN calls whose queries lie
 *   away from the points (the share as above, times n, above 4096: the
 *   OpenMP grid's scan costs as the GPU's does), and takes the kd-tree as
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
 *   call must be all host or all device memory (else INVALID_ARGUMENT).
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
 *   without copies them there and back in pieces (peer copies). For this the
 *   library enables peer access between the devices of a call
 *   (cudaDeviceEnablePeerAccess, both directions, once per pair per process)
 *   where the hardware allows it; a host that enabled it already is
 *   unaffected. A device that fails fails the call (its status and message)
 *   after every share has stopped; all outputs then hold the missing values.
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
 *     counts: the call recounts and refuses offsets that disagree
 *     (INVALID_ARGUMENT naming the first bad entry) before writing anything.
 *     indices may be NULL only when offsets[m] is 0.
 * queries, counts, offsets, indices and sq_distances may each be host or
 * device memory (indices and sq_distances of one kind); the rows are staged
 * through host memory in runs (at most 2^22 padded slots each, or one query),
 * so a device engine fills device outputs by one copy per run. A fill
 * searches twice (the recount, then the rows), a count once.
 * Errors: as knn_index_radius. On a failure after computing started
 * (cancellation, device error) counts are all 0; a fill that fails after its
 * offsets passed leaves indices[0 .. offsets[m]) all -1 and sq_distances
 * +infinity, one that fails before leaves them untouched. */
KNN_API int KNN_CALL knn_index_radius_count(const knn_index* index, const float* queries, int64_t m,
                                            float radius, int64_t* counts, const knn_options* opt);
KNN_API int KNN_CALL knn_offsets_from_counts(const int64_t* counts, int64_t m, int64_t* offsets);
KNN_API int KNN_CALL knn_index_radius_fill(const knn_index* index, const float* queries, int64_t m,
                                           float radius, const int64_t* offsets, int32_t* indices,
                                           float* sq_distances, const knn_options* opt);

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

#ifdef __cplusplus
} /* extern "C" */
#endif

/* Triangle meshes: closest point, signed distance, the deviation report. */
#include "knn_gpgpu_mesh.h"

#endif /* KNN_GPGPU_H */
