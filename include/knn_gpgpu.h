/* SPDX-License-Identifier: Apache-2.0 */
/*
 * knn_gpgpu.h - exact spatial search on NVIDIA GPUs and on the CPU (OpenMP).
 *
 * This header and the parts it includes are the whole public interface of
 * libknn_gpgpu.so / knn_gpgpu.dll and its manual: the general rules below,
 * then one part per concept (knn_gpgpu_classic.h, knn_gpgpu_index.h,
 * knn_gpgpu_quadtree.h, knn_gpgpu_mesh.h, knn_gpgpu_stats.h), included at its end and installed
 * next to it. Hosts include this header only. It compiles as C99 and as C++
 * and uses only <stddef.h> and <stdint.h> types.
 *
 * ---------------------------------------------------------------------------
 * General rules (they hold for every function of every part unless it says
 * otherwise)
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
 * classic, index and point-in-polygon queries, knn_brute_force, the
 * neighbourhood statistics of knn_gpgpu_stats.h) checks *flag
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
 * calls this thread makes (the classic builds and queries, the index API's
 * builds, queries and radius calls and the neighbourhood statistics
 * (knn_gpgpu_stats.h), on both engines; point in polygon does not report
 * yet) publish into it what they are doing, so that another
 * thread (a progress bar, a UI) can poll it during the call:
 *   stage     the kind of work (enum knn_progress_stage);
 *   total     work units of the stage (queries for queries and radius calls,
 *             query points for queryAll; levels of the tree for a CPU index
 *             kd-tree build; 1 for other builds);
 *   done      units finished so far, 0 .. total, non-decreasing within a
 *             stage, updated per chunk of work (a block of queries, a device
 *             chunk, a tree level), equal to total when the stage completes;
 *   sequence  incremented when a stage begins: one call may run several
 *             stages (a device call that falls back to the CPU begins its
 *             stage again, from the units done before that call; a radius
 *             fill searches once, one query stage).
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

/* The parts, one per concept, in the order of the manual's sections (inside
 * this extern "C" block). */
#include "knn_gpgpu_classic.h"  /* 2. the classic 3-D API */
#include "knn_gpgpu_index.h"    /* 3. the index API */
#include "knn_gpgpu_quadtree.h" /* 4. point in polygon */

#ifdef __cplusplus
} /* extern "C" */
#endif

/* Triangle meshes: closest point, signed distance, the deviation report. */
#include "knn_gpgpu_mesh.h"
/* Neighbourhood statistics of an index: normals, outliers, density. */
#include "knn_gpgpu_stats.h"

#endif /* KNN_GPGPU_H */
