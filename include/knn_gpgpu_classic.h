/* SPDX-License-Identifier: Apache-2.0 */
/* knn_gpgpu: the classic 3-D API (section 2 of the manual).
 *
 * A part of knn_gpgpu.h, the one include for hosts, which includes it; the
 * general rules at the top of that header hold here.
 * Include knn_gpgpu.h, not this file: it includes the parts inside its
 * extern "C" block. */
#ifndef KNN_GPGPU_CLASSIC_H
#define KNN_GPGPU_CLASSIC_H

#ifndef KNN_GPGPU_H
#error "include knn_gpgpu.h, which includes this part"
#endif

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
 * of knn_gpgpu.h: the free memory less the margin, or KNN_DEVICE_MEMORY_LIMIT): it
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
 * one tree should build a resident index once (knn_index_build, knn_gpgpu_index.h),
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

#endif /* KNN_GPGPU_CLASSIC_H */
