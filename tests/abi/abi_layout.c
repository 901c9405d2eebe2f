/*
 * Compile-time checks of the public structures' layout, in C99 (the header
 * must stay C99, so no _Static_assert): a failed check declares an array of
 * negative size and stops the build with an error on that line.
 *
 * Hosts that declare these structures themselves (Lisp FFI, C# P/Invoke,
 * Python ctypes, AML) rely on exactly these numbers; changing any of them
 * is an ABI break.
 */
#include <stddef.h>
#include <stdint.h>

#include "knn_gpgpu.h"

#define KNN_ABI_CHECK(name, condition) typedef char knn_abi_check_##name[(condition) ? 1 : -1]

/* ---- struct Point: three floats ----------------------------------------- */
KNN_ABI_CHECK(float_is_4_bytes, sizeof(float) == 4);
KNN_ABI_CHECK(int_is_4_bytes, sizeof(int) == 4);
KNN_ABI_CHECK(point_size, sizeof(struct Point) == 12);
KNN_ABI_CHECK(point_p, offsetof(struct Point, p) == 0);

/* ---- struct Node: 24 bytes, p[3] then left, right, id -------------------- */
KNN_ABI_CHECK(node_size, sizeof(struct Node) == 24);
KNN_ABI_CHECK(node_p, offsetof(struct Node, p) == 0);
KNN_ABI_CHECK(node_left, offsetof(struct Node, left) == 12);
KNN_ABI_CHECK(node_right, offsetof(struct Node, right) == 16);
KNN_ABI_CHECK(node_id, offsetof(struct Node, id) == 20);
/* An array of nodes has no padding between elements (getTreeSize = n * 24). */
KNN_ABI_CHECK(node_array_stride, sizeof(struct Node[2]) == 48);

/* ---- knn_options ----------------------------------------------------------
 * 64-bit platforms, LP64 (Linux, macOS) and LLP64 (Windows) alike: size_t is
 * 8 bytes there, so the layout is the same on both:
 *   struct_size 0, backend 8, device 12, structure 16, leaf_size 20,
 *   threads 24, (4 bytes padding), device_memory_limit 32: version 1 ends
 *   at 40; version 2 adds device_count 40, devices[16] 44, size 112.
 * On 32-bit platforms (ILP32) size_t is 4 bytes and everything packs:
 *   0, 4, 8, 12, 16, 20, device_memory_limit 24, version 1 ends at 28;
 *   device_count 28, devices 32, size 96. */
#if SIZE_MAX == UINT64_MAX
KNN_ABI_CHECK(size_t_is_8_bytes, sizeof(size_t) == 8);
KNN_ABI_CHECK(options_struct_size, offsetof(knn_options, struct_size) == 0);
KNN_ABI_CHECK(options_backend, offsetof(knn_options, backend) == 8);
KNN_ABI_CHECK(options_device, offsetof(knn_options, device) == 12);
KNN_ABI_CHECK(options_structure, offsetof(knn_options, structure) == 16);
KNN_ABI_CHECK(options_leaf_size, offsetof(knn_options, leaf_size) == 20);
KNN_ABI_CHECK(options_threads, offsetof(knn_options, threads) == 24);
KNN_ABI_CHECK(options_device_memory_limit, offsetof(knn_options, device_memory_limit) == 32);
KNN_ABI_CHECK(options_v1_end, offsetof(knn_options, device_memory_limit) + sizeof(size_t) == 40);
KNN_ABI_CHECK(options_device_count, offsetof(knn_options, device_count) == 40);
KNN_ABI_CHECK(options_devices, offsetof(knn_options, devices) == 44);
KNN_ABI_CHECK(options_size, sizeof(knn_options) == 112);
#elif SIZE_MAX == UINT32_MAX
KNN_ABI_CHECK(size_t_is_4_bytes, sizeof(size_t) == 4);
KNN_ABI_CHECK(options_struct_size, offsetof(knn_options, struct_size) == 0);
KNN_ABI_CHECK(options_backend, offsetof(knn_options, backend) == 4);
KNN_ABI_CHECK(options_device, offsetof(knn_options, device) == 8);
KNN_ABI_CHECK(options_structure, offsetof(knn_options, structure) == 12);
KNN_ABI_CHECK(options_leaf_size, offsetof(knn_options, leaf_size) == 16);
KNN_ABI_CHECK(options_threads, offsetof(knn_options, threads) == 20);
KNN_ABI_CHECK(options_device_memory_limit, offsetof(knn_options, device_memory_limit) == 24);
KNN_ABI_CHECK(options_v1_end, offsetof(knn_options, device_memory_limit) + sizeof(size_t) == 28);
KNN_ABI_CHECK(options_device_count, offsetof(knn_options, device_count) == 28);
KNN_ABI_CHECK(options_devices, offsetof(knn_options, devices) == 32);
KNN_ABI_CHECK(options_size, sizeof(knn_options) == 96);
#else
#error "knn_gpgpu: size_t is neither 32 nor 64 bits; check knn_options' layout by hand"
#endif

/* ---- Enumerations: plain ints with fixed values ------------------------- */
KNN_ABI_CHECK(status_enum_is_int_sized, sizeof(enum knn_status) == sizeof(int));
KNN_ABI_CHECK(status_ok, KNN_OK == 0);
KNN_ABI_CHECK(status_invalid_argument, KNN_ERR_INVALID_ARGUMENT == 1);
KNN_ABI_CHECK(status_nonfinite_input, KNN_ERR_NONFINITE_INPUT == 2);
KNN_ABI_CHECK(status_host_oom, KNN_ERR_HOST_OUT_OF_MEMORY == 3);
KNN_ABI_CHECK(status_device_oom, KNN_ERR_DEVICE_OUT_OF_MEMORY == 4);
KNN_ABI_CHECK(status_no_device, KNN_ERR_NO_DEVICE == 5);
KNN_ABI_CHECK(status_device, KNN_ERR_DEVICE == 6);
KNN_ABI_CHECK(status_invalid_tree, KNN_ERR_INVALID_TREE == 7);
KNN_ABI_CHECK(status_unsupported, KNN_ERR_UNSUPPORTED == 8);
KNN_ABI_CHECK(status_cancelled, KNN_ERR_CANCELLED == 9);
KNN_ABI_CHECK(status_internal, KNN_ERR_INTERNAL == 10);
KNN_ABI_CHECK(backend_values,
              KNN_BACKEND_AUTO == 0 && KNN_BACKEND_CUDA == 1 && KNN_BACKEND_OPENMP == 2);
KNN_ABI_CHECK(structure_values, KNN_STRUCTURE_AUTO == 0 && KNN_STRUCTURE_KDTREE == 1 &&
                                    KNN_STRUCTURE_GRID == 2 && KNN_STRUCTURE_BRUTE_FORCE == 3);
KNN_ABI_CHECK(version_number,
              KNN_VERSION_NUMBER ==
                  KNN_VERSION_MAJOR * 10000 + KNN_VERSION_MINOR * 100 + KNN_VERSION_PATCH);

/* The runtime test calls this, so that the checks above are part of the
 * program that links the library (and the translation unit is not empty). */
int knn_abi_layout_checked(void) { return 1; }
