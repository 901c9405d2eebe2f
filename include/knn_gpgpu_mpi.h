/*
 * knn_gpgpu_mpi.h - a distributed index over MPI (libknn_gpgpu_mpi.so).
 *
 * A separate library on top of libknn_gpgpu: the core library has no MPI
 * dependency; this one links MPI and the core library's public index API
 * (section 3 of knn_gpgpu.h), which serves as the engine of every rank (the
 * GPU when one is usable, else OpenMP). Design, launch and scaling plan:
 * docs/distributed.md.
 *
 * ---------------------------------------------------------------------------
 * Rules (on top of knn_gpgpu.h's general rules, which all hold here)
 * ---------------------------------------------------------------------------
 * Collective. Every function taking a knn_mpi_comm or a knn_dindex is
 *           collective: every rank of the communicator calls it, in the same
 *           order, with the same k / radius / max_neighbors / exclude_self
 *           (checked: a mismatch is INVALID_ARGUMENT on every rank). Counts
 *           of points and queries are per rank and may differ, 0 included.
 * Global indices. Rank r's point i has global index offset_r + i, where
 *           offset_r is the number of points of ranks 0..r-1 (rank order of
 *           the communicator). Indices are int64_t.
 * Results.  Bit-identical to knn_gpgpu's single-process index over the union
 *           of all ranks' points in global index order: the same float32
 *           squared distances, ascending, ties by the smaller global index,
 *           missing slots -1 / +infinity. Each rank receives the answers to
 *           its own queries, in its own order.
 * Agreement. Every rank returns the same status. A rank with bad input, a
 *           local engine error or a cancelled flag makes all ranks fail with
 *           that status; knn_mpi_last_error() says which rank and why
 *           ("knn_dindex_build: rank 2: point 12 has a NaN coordinate
 *           (dimension 1)"; the lowest failing rank is named). Points and
 *           queries are checked (finite, within knn_gpgpu.h's coordinate
 *           limit) on the rank that passes them, before any moves to
 *           another rank, so the message names that rank and the row as
 *           the caller numbered it there. The library
 *           never aborts the job: it works on a duplicate of the caller's
 *           communicator whose error handler is MPI_ERRORS_RETURN. An MPI
 *           call that fails is KNN_ERR_INTERNAL with MPI's message; after
 *           such a failure MPI itself gives no guarantee that other ranks
 *           return. What cannot be agreed is refused at once on the rank
 *           that passes it, and the other ranks then wait: a NULL comm, and
 *           an index handle that is not live (NULL, freed) on some ranks
 *           only.
 * Outputs.  As in knn_gpgpu.h: validation failures leave outputs untouched;
 *           failures once computing has started write missing values (index
 *           -1, squared distance +infinity, count 0) into every output slot.
 * MPI.      MPI must be initialised (MPI_Init or MPI_Init_thread) before and
 *           finalised after every call. Calls on one communicator (or on
 *           indices built on it) must not overlap from several threads; a
 *           rank's own engine still uses all its OpenMP threads (set
 *           OMP_NUM_THREADS = cores / ranks per node).
 * Devices.  With opt->local->device = -1 (or local NULL) and a backend that
 *           may use a GPU, rank j of a node (MPI_COMM_TYPE_SHARED) builds on
 *           device j mod the device count, so one rank per GPU needs no
 *           setup. Any other device number is used as given.
 */
#ifndef KNN_GPGPU_MPI_H
#define KNN_GPGPU_MPI_H

#include <stddef.h>
#include <stdint.h>

#include "knn_gpgpu.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#if defined(KNN_GPGPU_MPI_BUILDING)
#define KNN_MPI_API __declspec(dllexport)
#else
#define KNN_MPI_API __declspec(dllimport)
#endif
#elif defined(KNN_GPGPU_MPI_BUILDING) && (defined(__GNUC__) || defined(__clang__))
#define KNN_MPI_API __attribute__((visibility("default")))
#else
#define KNN_MPI_API
#endif

/* The communicator: the ADDRESS of an MPI_Comm handle of the MPI this library
 * was built with (MPI_Comm is a pointer in Open MPI and an int in MPICH; its
 * address passes through any language as a plain pointer). The library reads
 * the handle during the call only and works on its own duplicate.
 *   C / C++:  MPI_Comm comm = MPI_COMM_WORLD;  knn_dindex_build(&comm, ...)
 *             (or KNN_MPI_COMM(comm), defined when <mpi.h> is included first)
 *   Fortran-style integer handles (mpi / mpi_f08 %MPI_VAL), through a C shim:
 *             MPI_Comm comm = MPI_Comm_f2c(fortran_handle);  pass &comm
 *   mpi4py:   MPI._addressof(comm), an integer address (ctypes.c_void_p);
 *             or MPI._handleof(comm) stored into a ctypes variable of the
 *             size of MPI_Comm, whose address is passed (knn_gpgpu.mpi does
 *             the former). */
typedef const void* knn_mpi_comm;
#if defined(MPI_VERSION)
#define KNN_MPI_COMM(comm) ((knn_mpi_comm) & (comm))
#endif

/* Options of the distributed index. Initialise with knn_mpi_options_init,
 * then set fields; struct_size as in knn_options (fields beyond it get their
 * defaults; it must cover `local`). The local options are a pointer, so
 * that knn_options may grow (by its own struct_size) without moving the
 * fields here. Every rank should pass the same options.
 * The index keeps them: its queries honour the same time limit (per call)
 * and cancel flag, and run the local engine with the build's options.
 * time_limit_seconds and cancel_flag are checked on each rank at every phase
 * boundary (build:
 * validation, decomposition, redistribution, local build; queries: routing,
 * local search, forwarding, merge) and the ranks agree: once any rank's limit
 * has passed or its flag is non-zero, every rank returns KNN_ERR_CANCELLED.
 * The cancel flag is also registered with knn_set_cancel_flag for this
 * thread during the call (so the local engine stops mid-phase) and the
 * thread's registration is NULL when the call returns; with cancel_flag NULL
 * a flag the caller registered stays and stops only the local engine (whose
 * CANCELLED status is then agreed like any other failure). */
typedef struct knn_mpi_options {
  size_t struct_size;              /* = sizeof(knn_mpi_options)                 */
  const knn_options* local;        /* each rank's local index (backend,
                                      structure, device, leaf_size, threads),
                                      checked as in knn_gpgpu.h; read during
                                      the build, which keeps a copy; NULL =
                                      the defaults                             */
  double time_limit_seconds;       /* per call, from entry (MPI_Wtime);
                                      0 = none; finite and >= 0                */
  const volatile int* cancel_flag; /* NULL = none                              */
  int64_t sample_size;             /* points sampled over all ranks for the
                                      decomposition; 0 = the default
                                      (max(64 x ranks, min(65536, 2^24 / dim)));
                                      at most 2^26 / dim are taken; >= 0       */
} knn_mpi_options;

/* Fill *opt with the defaults (local NULL: knn_options_init's). NULL is
 * ignored. */
KNN_MPI_API void KNN_CALL knn_mpi_options_init(knn_mpi_options* opt);

/* The message of this thread's last failed call of this library, "" after
 * success. Never NULL; valid until this thread's next call. */
KNN_MPI_API const char* KNN_CALL knn_mpi_last_error(void);

typedef struct knn_dindex knn_dindex; /* opaque, one per rank */

/* Collective. Build the distributed index over the union of every rank's
 * n_local points (dim floats each, row-major; n_local may be 0 on any rank,
 * and dim must be the same on every rank). The points are redistributed by a
 * spatial decomposition (sampled recursive coordinate bisection, one region
 * per rank) and each rank builds its local index over the points of its
 * region; the caller's array may change or go after the call. *out receives
 * this rank's handle, NULL on failure. A NULL comm is refused at once on
 * that rank (the others then wait for it: there is no communicator to agree
 * on); every other failure is agreed. Errors: INVALID_ARGUMENT (NULL comm or
 * out, n_local < 0, points NULL with n_local > 0, dim out of 1..
 * KNN_INDEX_MAX_DIM or different across ranks, bad options, MPI not
 * initialised, more than INT32_MAX points in one rank's region),
 * NONFINITE_INPUT, HOST_OUT_OF_MEMORY, the local engine's errors
 * (knn_index_build), CANCELLED, INTERNAL (an MPI failure). */
KNN_MPI_API int KNN_CALL knn_dindex_build(knn_mpi_comm comm, const float* points, int64_t n_local,
                                          int dim, const knn_mpi_options* opt, knn_dindex** out);

/* Collective (frees the duplicate communicator). NULL on every rank is fine;
 * NULL on some ranks only is INVALID_ARGUMENT on those and a hang risk on the
 * others: free on all ranks or none. */
KNN_MPI_API int KNN_CALL knn_dindex_free(knn_dindex* index);

/* Local, no communication. Any output may be NULL: the total number of points,
 * this rank's contribution and its global offset, the dimension, the number
 * of points in this rank's region (its local index), the rank and the size of
 * the communicator. */
KNN_MPI_API int KNN_CALL knn_dindex_info(const knn_dindex* index, int64_t* n_global,
                                         int64_t* n_local, int64_t* offset, int* dim,
                                         int64_t* n_region, int* rank, int* size);

/* Collective. The k nearest of this rank's m_local queries (rows of dim
 * floats) among all points: indices[i*k + j] (global) and sq_distances[i*k +
 * j] (may be NULL) for this rank's query i. k must be the same on every rank;
 * m_local may differ and be 0 (queries may then be NULL); m_local * k
 * beyond PTRDIFF_MAX / 8 slots is INVALID_ARGUMENT (n_local * k for
 * knn_dindex_query_self, m_local * max_neighbors for knn_dindex_radius). */
KNN_MPI_API int KNN_CALL knn_dindex_query(const knn_dindex* index, const float* queries,
                                          int64_t m_local, int k, int64_t* indices,
                                          float* sq_distances);

/* Collective. All-kNN of the indexed points: row i (n_local rows of k) holds
 * the k nearest of this rank's own point i (global index offset + i).
 * exclude_self != 0 drops only the point's own global index; equal points of
 * other indices stay, at distance 0 and in index order. */
KNN_MPI_API int KNN_CALL knn_dindex_query_self(const knn_dindex* index, int k, int exclude_self,
                                               int64_t* indices, float* sq_distances);

/* Collective. Points within radius of each of this rank's m_local queries,
 * as knn_index_radius: squared distance <= radius*radius (float32 product),
 * rows of max_neighbors by (distance, global index), unused slots -1 /
 * +infinity, counts[i] (may be NULL when max_neighbors > 0) the true number
 * within the radius over all ranks. max_neighbors = 0 counts only. radius
 * and max_neighbors must be the same on every rank. */
KNN_MPI_API int KNN_CALL knn_dindex_radius(const knn_dindex* index, const float* queries,
                                           int64_t m_local, float radius, int max_neighbors,
                                           int64_t* indices, float* sq_distances, int64_t* counts);

/* Local. Traffic of this rank's last call on the index (build or query;
 * reset by each call): bytes this rank sent to other ranks in the all-to-all
 * exchanges (not the small collectives), the rows it sent for search
 * elsewhere (kNN: pairs of a query and another rank after the local search;
 * radius: pairs of a query and every rank asked), and the seconds each phase
 * took on this rank (phase_seconds[0..3]); any output may be NULL. Query
 * phases: 0 routing to the region's rank; 1 local search and choosing the
 * ranks to forward to; 2 the forwarded search and its answers; 3 merge and
 * return. Build phases: 0 sample and decomposition; 1 redistribution; 2
 * local build; 3 box exchange. A rank's time includes its wait for the
 * slowest rank at the phase's exchange. */
KNN_MPI_API int KNN_CALL knn_dindex_last_stats(const knn_dindex* index, int64_t* bytes_sent,
                                               int64_t* forwarded_queries, double phase_seconds[4]);

#ifdef __cplusplus
}
#endif

#endif /* KNN_GPGPU_MPI_H */
