/*
 * mesh_deviation.c - scan versus design with knn_gpgpu's mesh calls, from plain C.
 *
 * The design is a cube of side 2 (8 vertices, 12 triangles); the scan is
 * N points sampled on its faces, moved off the surface by up to +-0.02 (the
 * part's deviation) plus 1 % far outliers. The program builds the mesh, asks
 * for the deviation report (tolerance 0.01, outliers beyond 0.5 left out) and
 * prints it.
 *
 *   mesh_deviation [--check] [N [TOLERANCE]]      (defaults: N = 20000, TOLERANCE = 0.01)
 *
 * --check also asks for the per-point signed distances and compares them with
 * the cube's exact signed distance written here, and the report's counts,
 * extremes, percentiles and histogram with those distances sorted by qsort;
 * it exits 1 on a mismatch. Exit status 0 on success, 1 on any error (the
 * message names the library's status and knn_last_error()).
 *
 * Build against an installed knn_gpgpu:
 *   CMake:      find_package(knn_gpgpu 1 REQUIRED) + knn_gpgpu::knn_gpgpu
 *   pkg-config: cc -std=c99 mesh_deviation.c $(pkg-config --cflags --libs knn_gpgpu) -lm
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <knn_gpgpu.h>

#define N_PERCENTILES 5
#define N_BINS 4

static int report_failure(const char* call, int status) {
  fprintf(stderr, "mesh_deviation: %s failed: %s\n  %s\n", call, knn_status_string(status),
          knn_last_error());
  return 1;
}

/* A reproducible uniform number in [0, 1) (64-bit LCG, the top 53 bits). */
static double uniform(uint64_t* state) {
  *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(*state >> 11) / 9007199254740992.0;
}

/* The scan: points on the cube's faces, off by up to +-0.02 along the face
 * normal, and every 100th point a far outlier. */
static void make_scan(double* points, int64_t n) {
  uint64_t state = 48;
  int64_t i;
  for (i = 0; i < n; ++i) {
    double* p = points + 3 * i;
    const int face = (int)(uniform(&state) * 6.0);
    const int axis = face / 2;
    const double side = face % 2 ? 1.0 : -1.0;
    p[0] = 2.0 * uniform(&state) - 1.0;
    p[1] = 2.0 * uniform(&state) - 1.0;
    p[2] = 2.0 * uniform(&state) - 1.0;
    p[axis] = side * (1.0 + 0.04 * uniform(&state) - 0.02);
    if (i % 100 == 99) p[axis] = side * 6.0;
  }
}

/* The exact signed distance to the cube [-1, 1]^3: outside, the length of
 * the excess over the faces; inside, minus the distance to the nearest face. */
static double cube_signed_distance(const double* p) {
  double outside = 0.0, inside = -1e300;
  int k;
  for (k = 0; k < 3; ++k) {
    const double q = fabs(p[k]) - 1.0;
    if (q > 0.0) outside += q * q;
    if (q > inside) inside = q;
  }
  return outside > 0.0 ? sqrt(outside) : inside;
}

static int compare_doubles(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* The report against the per-point distances: 0 when everything agrees. */
static int check(const double* points, const double* sd, int64_t n, double max_distance,
                 double tolerance, const double* percentiles, const double* percentile_values,
                 const double* edges, const int64_t* counts, const knn_deviation_report* r) {
  double* measured = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  int64_t i, m = 0, within = 0, above = 0, below = 0, bins[N_BINS] = {0};
  int k, bad = 0;
  if (measured == NULL) {
    fprintf(stderr, "mesh_deviation: out of memory\n");
    return 1;
  }
  for (i = 0; i < n; ++i) {
    const double exact = cube_signed_distance(points + 3 * i);
    if (fabs(exact) > max_distance) {
      bad |= !isinf(sd[i]);
      continue;
    }
    if (fabs(sd[i] - exact) > 1e-12) {
      fprintf(stderr, "check: point %lld: signed distance %.17g, exact %.17g\n", (long long)i,
              sd[i], exact);
      bad = 1;
    }
    measured[m++] = sd[i];
  }
  qsort(measured, (size_t)m, sizeof(double), compare_doubles);
  for (i = 0; i < m; ++i) {
    const double d = measured[i];
    within += d >= -tolerance && d <= tolerance;
    above += d > tolerance;
    below += d < -tolerance;
    for (k = 0; k < N_BINS; ++k)
      if (edges[k] <= d && (d < edges[k + 1] || (k == N_BINS - 1 && d == edges[N_BINS]))) ++bins[k];
  }
  bad |= r->n_measured != m || r->n_beyond != n - m || r->n_within_tolerance != within ||
         r->n_above_tolerance != above || r->n_below_tolerance != below;
  bad |= m > 0 && (r->min != measured[0] || r->max != measured[m - 1]);
  for (k = 0; k < N_PERCENTILES; ++k) {
    int64_t rank = (int64_t)ceil(percentiles[k] / 100.0 * (double)m) - 1;
    if (rank < 0) rank = 0;
    bad |= m > 0 && percentile_values[k] != measured[rank];
  }
  for (k = 0; k < N_BINS; ++k) bad |= counts[k] != bins[k];
  free(measured);
  if (bad) fprintf(stderr, "check: the report disagrees with the per-point distances\n");
  return bad;
}

int main(int argc, char** argv) {
  static const double vertices[8 * 3] = {-1, -1, -1, -1, -1, 1, -1, 1, -1, -1, 1, 1,
                                         1,  -1, -1, 1,  -1, 1, 1,  1, -1, 1,  1, 1};
  static const int32_t triangles[12 * 3] = {0, 1, 3, 0, 3, 2, 4, 6, 7, 4, 7, 5, 0, 4, 5, 0, 5, 1,
                                            2, 3, 7, 2, 7, 6, 0, 2, 6, 0, 6, 4, 1, 5, 7, 1, 7, 3};
  const double percentiles[N_PERCENTILES] = {0, 5, 50, 95, 100};
  const double edges[N_BINS + 1] = {-0.02, -0.01, 0.0, 0.01, 0.02};
  const double max_distance = 0.5;
  double percentile_values[N_PERCENTILES];
  int64_t counts[N_BINS];
  knn_deviation_report r;
  knn_mesh* design = NULL;
  double *scan, *sd = NULL;
  int64_t n = 20000;
  double tolerance = 0.01;
  int arg = 1, checking = 0, status, closed = 0, failed;
  if (arg < argc && strcmp(argv[arg], "--check") == 0) {
    checking = 1;
    ++arg;
  }
  if (arg < argc) n = atoll(argv[arg++]);
  if (arg < argc) tolerance = atof(argv[arg++]);
  if (n < 1) {
    fprintf(stderr, "usage: mesh_deviation [--check] [N [TOLERANCE]]\n");
    return 1;
  }
  scan = malloc(sizeof(double) * 3 * (size_t)n);
  if (checking) sd = malloc(sizeof(double) * (size_t)n);
  if (scan == NULL || (checking && sd == NULL)) {
    fprintf(stderr, "mesh_deviation: out of memory\n");
    return 1;
  }
  make_scan(scan, n);

  status = knn_mesh_build_f64(vertices, 8, triangles, 12, NULL, &design);
  if (status != KNN_OK) return report_failure("knn_mesh_build_f64", status);
  status = knn_mesh_info(design, NULL, NULL, NULL, NULL, &closed);
  if (status != KNN_OK) return report_failure("knn_mesh_info", status);

  memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  status = knn_mesh_deviation_report_f64(design, scan, n, max_distance, tolerance, percentiles,
                                         N_PERCENTILES, percentile_values, edges, N_BINS, counts,
                                         sd, &r, NULL);
  if (status != KNN_OK) return report_failure("knn_mesh_deviation_report_f64", status);

  printf("design: 12 triangles, %s (signs from %s)\n", closed ? "closed and oriented" : "open",
         closed ? "pseudonormals" : "winding numbers");
  printf("scan: %lld points, %lld measured, %lld beyond %.3g\n", (long long)r.n_points,
         (long long)r.n_measured, (long long)r.n_beyond, max_distance);
  printf("deviation: min %.6f  max %.6f  mean %.6f  rms %.6f\n", r.min, r.max, r.mean, r.rms);
  printf("tolerance +-%.4g: %lld within, %lld above, %lld below\n", tolerance,
         (long long)r.n_within_tolerance, (long long)r.n_above_tolerance,
         (long long)r.n_below_tolerance);
  {
    int k;
    for (k = 0; k < N_PERCENTILES; ++k)
      printf("p%-3g %+.6f\n", percentiles[k], percentile_values[k]);
    for (k = 0; k < N_BINS; ++k)
      printf("[%+.2f, %+.2f%c %lld\n", edges[k], edges[k + 1], k == N_BINS - 1 ? ']' : ')',
             (long long)counts[k]);
  }
  failed = checking && check(scan, sd, n, max_distance, tolerance, percentiles, percentile_values,
                             edges, counts, &r);
  if (checking && !failed) printf("check: every distance and statistic agrees\n");
  knn_mesh_free(design);
  free(scan);
  free(sd);
  return failed;
}
