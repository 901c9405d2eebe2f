/*
 * abi_layout.c - prints the C layout of knn_gpgpu.h as "name value" lines.
 *
 * The binding tests (Python, Common Lisp, C#) compare their own structure
 * sizes, field offsets and constants with what the C compiler says here:
 *
 *   cc -std=c99 -I<prefix>/include bindings/abi_layout.c -o abi_layout
 *   ./abi_layout > abi_layout.txt     # KNN_ABI_LAYOUT=abi_layout.txt for the tests
 *
 * It needs only the header (no library).
 */
#include <stddef.h>
#include <stdio.h>

#include <knn_gpgpu.h>

#define SIZE(type, name) printf("sizeof.%s %lu\n", name, (unsigned long)sizeof(type))
#define OFFSET(type, name, field) \
  printf("offsetof.%s.%s %lu\n", name, #field, (unsigned long)offsetof(type, field))
#define CONST(c) printf("const.%s %ld\n", #c, (long)(c))

int main(void) {
  SIZE(struct Point, "Point");
  OFFSET(struct Point, "Point", p);
  SIZE(struct Node, "Node");
  OFFSET(struct Node, "Node", p);
  OFFSET(struct Node, "Node", left);
  OFFSET(struct Node, "Node", right);
  OFFSET(struct Node, "Node", id);
  /* The bindings mirror version 1 of knn_options (they pass struct_size =
   * its extent, and the library reads just those fields): its extent is the
   * size they must match. The version-2 device list is not bound yet. */
  printf("sizeof.knn_options %lu\n",
         (unsigned long)(offsetof(knn_options, device_memory_limit) + sizeof(size_t)));
  OFFSET(knn_options, "knn_options", struct_size);
  OFFSET(knn_options, "knn_options", backend);
  OFFSET(knn_options, "knn_options", device);
  OFFSET(knn_options, "knn_options", structure);
  OFFSET(knn_options, "knn_options", leaf_size);
  OFFSET(knn_options, "knn_options", threads);
  OFFSET(knn_options, "knn_options", device_memory_limit);
  SIZE(knn_progress, "knn_progress");
  OFFSET(knn_progress, "knn_progress", done);
  OFFSET(knn_progress, "knn_progress", total);
  OFFSET(knn_progress, "knn_progress", stage);
  OFFSET(knn_progress, "knn_progress", sequence);
  SIZE(knn_deviation_report, "knn_deviation_report");
  OFFSET(knn_deviation_report, "knn_deviation_report", struct_size);
  OFFSET(knn_deviation_report, "knn_deviation_report", n_points);
  OFFSET(knn_deviation_report, "knn_deviation_report", n_measured);
  OFFSET(knn_deviation_report, "knn_deviation_report", n_beyond);
  OFFSET(knn_deviation_report, "knn_deviation_report", n_within_tolerance);
  OFFSET(knn_deviation_report, "knn_deviation_report", n_above_tolerance);
  OFFSET(knn_deviation_report, "knn_deviation_report", n_below_tolerance);
  OFFSET(knn_deviation_report, "knn_deviation_report", n_below_bins);
  OFFSET(knn_deviation_report, "knn_deviation_report", n_above_bins);
  OFFSET(knn_deviation_report, "knn_deviation_report", min);
  OFFSET(knn_deviation_report, "knn_deviation_report", max);
  OFFSET(knn_deviation_report, "knn_deviation_report", mean);
  OFFSET(knn_deviation_report, "knn_deviation_report", rms);
  SIZE(knn_align_params, "knn_align_params");
  OFFSET(knn_align_params, "knn_align_params", struct_size);
  OFFSET(knn_align_params, "knn_align_params", max_correspondence);
  OFFSET(knn_align_params, "knn_align_params", max_iterations);
  OFFSET(knn_align_params, "knn_align_params", coarse_start);
  OFFSET(knn_align_params, "knn_align_params", kept_fraction);
  OFFSET(knn_align_params, "knn_align_params", tolerance_rotation);
  OFFSET(knn_align_params, "knn_align_params", tolerance_translation);
  SIZE(knn_align_result, "knn_align_result");
  OFFSET(knn_align_result, "knn_align_result", struct_size);
  OFFSET(knn_align_result, "knn_align_result", transform);
  OFFSET(knn_align_result, "knn_align_result", rms);
  OFFSET(knn_align_result, "knn_align_result", n_kept);
  OFFSET(knn_align_result, "knn_align_result", iterations);
  OFFSET(knn_align_result, "knn_align_result", converged);
  OFFSET(knn_align_result, "knn_align_result", degenerate_directions);
  OFFSET(knn_align_result, "knn_align_result", n_degenerate);
  SIZE(size_t, "size_t");
  SIZE(int, "int");

  CONST(KNN_OK);
  CONST(KNN_ERR_INVALID_ARGUMENT);
  CONST(KNN_ERR_NONFINITE_INPUT);
  CONST(KNN_ERR_HOST_OUT_OF_MEMORY);
  CONST(KNN_ERR_DEVICE_OUT_OF_MEMORY);
  CONST(KNN_ERR_NO_DEVICE);
  CONST(KNN_ERR_DEVICE);
  CONST(KNN_ERR_INVALID_TREE);
  CONST(KNN_ERR_UNSUPPORTED);
  CONST(KNN_ERR_CANCELLED);
  CONST(KNN_ERR_INTERNAL);
  CONST(KNN_BACKEND_AUTO);
  CONST(KNN_BACKEND_CUDA);
  CONST(KNN_BACKEND_OPENMP);
  CONST(KNN_STRUCTURE_AUTO);
  CONST(KNN_STRUCTURE_KDTREE);
  CONST(KNN_STRUCTURE_GRID);
  CONST(KNN_STRUCTURE_BRUTE_FORCE);
  CONST(KNN_VERSION_NUMBER);
  CONST(KNN_SCALAR_FLOAT32);
  CONST(KNN_SCALAR_FLOAT64);
  CONST(KNN_MESH_MAX_TRIANGLES);
  return 0;
}
