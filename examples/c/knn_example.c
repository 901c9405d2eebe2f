/*
 * knn_example.c - the classic knn_gpgpu API from plain C.
 *
 * Reads 3-D points from a text file (one point per line, coordinates
 * separated by spaces, tabs or commas; blank lines and lines starting with #
 * are skipped), builds the kd-tree, finds the k nearest points of every point
 * and prints the first rows.
 *
 *   knn_example [--check] POINTS_FILE [K [ROWS]]      (defaults: K = 3, ROWS = 10)
 *
 * It then sorts the points' (x, y) into two rectangles that tile their bounding
 * box and share the edge x = mid (a point's x near the middle), with the
 * point-in-polygon API (a quadtree; a point on the shared edge belongs to the
 * rectangle on its right, so every point lands in exactly one).
 *
 * Last, the float64 family (knn_index_build_f64, knn_index_query_self_f64):
 * the same cloud moved to a UTM-like northing, 4.5e6 + each coordinate as a
 * double, where float32 would lose the millimetres.
 *
 * --check compares every row with knn_brute_force, checks each point's
 * rectangle against x < mid, compares the float64 rows with a double brute
 * force written here (the contract's order, ties by index), and exits 1 on a
 * mismatch.
 * Exit status 0 on success, 1 on any error (the message names the library's
 * status and knn_last_error()).
 *
 * Build against an installed knn_gpgpu:
 *   CMake:      find_package(knn_gpgpu 1 REQUIRED) + knn_gpgpu::knn_gpgpu
 *   pkg-config: cc -std=c99 knn_example.c $(pkg-config --cflags --libs knn_gpgpu)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <knn_gpgpu.h>

/* Print the failed call, its status and the library's message; return 1. */
static int report(const char* call, int status) {
  fprintf(stderr, "knn_example: %s failed: %s\n  %s\n", call, knn_status_string(status),
          knn_last_error());
  return 1;
}

/* Read "x y z" rows (separators: blanks or commas) into a growing array. */
static struct Point* read_points(const char* path, int* count) {
  FILE* file = fopen(path, "r");
  struct Point* points = NULL;
  size_t n = 0, capacity = 0;
  char line[4096];
  long line_no = 0;
  if (file == NULL) {
    fprintf(stderr, "knn_example: cannot open %s: %s\n", path, strerror(errno));
    return NULL;
  }
  while (fgets(line, sizeof line, file) != NULL) {
    char* cursor = line;
    char* end;
    float xyz[3];
    int got = 0;
    ++line_no;
    for (char* c = line; *c; ++c)
      if (*c == ',') *c = ' ';
    while (*cursor == ' ' || *cursor == '\t') ++cursor;
    if (*cursor == '\0' || *cursor == '\n' || *cursor == '\r' || *cursor == '#') continue;
    for (;;) {
      double v = strtod(cursor, &end);
      if (end == cursor) break;
      if (got < 3) xyz[got] = (float)v;
      ++got;
      cursor = end;
    }
    while (*cursor == ' ' || *cursor == '\t' || *cursor == '\r' || *cursor == '\n') ++cursor;
    if (got != 3 || *cursor != '\0') {
      fprintf(stderr, "knn_example: %s:%ld: expected 3 numbers (x y z)\n", path, line_no);
      free(points);
      fclose(file);
      return NULL;
    }
    if (n == capacity) {
      size_t grown = capacity ? 2 * capacity : 256;
      struct Point* bigger = (struct Point*)realloc(points, grown * sizeof *points);
      if (bigger == NULL || grown > 2147483647u) {
        fprintf(stderr, "knn_example: too many points in %s\n", path);
        free(bigger ? bigger : points);
        fclose(file);
        return NULL;
      }
      points = bigger;
      capacity = grown;
    }
    memcpy(points[n].p, xyz, sizeof xyz);
    ++n;
  }
  fclose(file);
  *count = (int)n;
  if (points == NULL) points = (struct Point*)malloc(sizeof *points); /* n = 0: not NULL */
  return points;
}

static int parse_positive(const char* text, const char* what, int* out) {
  char* end;
  long v = strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < 1 || v > 100000) {
    fprintf(stderr, "knn_example: %s must be a positive integer, got '%s'\n", what, text);
    return 0;
  }
  *out = (int)v;
  return 1;
}

/* Point in polygon (header section 4) over the points' x, y: two rectangles
 * tiling the bounding box grown by 1, split at x = mid. Returns 0 on success
 * (1 after printing why). */
static int polygon_demo(const struct Point* points, int n, int check) {
  float x0 = 0.0f, x1 = 0.0f, y0 = 0.0f, y1 = 0.0f, mid;
  float* xy = (float*)malloc(2 * (size_t)n * sizeof(float) + 1);
  int64_t* members = (int64_t*)malloc((size_t)n * sizeof(int64_t) + 1);
  knn_quadtree* tree = NULL;
  int64_t counts[2], out_offsets[3];
  const int64_t ring_offsets[3] = {0, 4, 8}, polygon_offsets[3] = {0, 1, 2};
  int status, result = 1;
  if (xy == NULL || members == NULL) {
    fprintf(stderr, "knn_example: out of memory\n");
    goto done;
  }
  for (int i = 0; i < n; ++i) {
    const float x = points[i].p[0], y = points[i].p[1];
    xy[2 * i] = x;
    xy[2 * i + 1] = y;
    if (i == 0 || x < x0) x0 = x;
    if (i == 0 || x > x1) x1 = x;
    if (i == 0 || y < y0) y0 = y;
    if (i == 0 || y > y1) y1 = y;
  }
  /* Split at the point x nearest the middle of the box: that point (and any
     other with this x) lies on the shared edge; the boundary rule puts it on
     the right. */
  mid = x0;
  for (int i = 0; i < n; ++i) {
    const float centre = x0 + (x1 - x0) / 2.0f, x = points[i].p[0];
    if ((x > centre ? x - centre : centre - x) < (mid > centre ? mid - centre : centre - mid))
      mid = x;
  }
  x0 -= 1.0f, x1 += 1.0f, y0 -= 1.0f, y1 += 1.0f;
  {
    /* Two rings of 4 vertices (open; any orientation), one polygon each. */
    const float vertices[16] = {x0, y0, mid, y0, mid, y1, x0, y1, mid, y0, x1, y0, x1, y1, mid, y1};
    status = knn_quadtree_build(xy, n, NULL, &tree);
    if (status != KNN_OK) {
      report("knn_quadtree_build", status);
      goto done;
    }
    status = knn_points_in_polygons_count(tree, vertices, ring_offsets, 2, polygon_offsets, 2,
                                          counts, NULL);
    if (status != KNN_OK) {
      report("knn_points_in_polygons_count", status);
      goto done;
    }
    out_offsets[0] = 0;
    out_offsets[1] = counts[0];
    out_offsets[2] = counts[0] + counts[1];
    status = knn_points_in_polygons(tree, vertices, ring_offsets, 2, polygon_offsets, 2,
                                    out_offsets, members, NULL);
    if (status != KNN_OK) {
      report("knn_points_in_polygons", status);
      goto done;
    }
  }
  printf("point in polygon: %lld points with x < %g, %lld with x >= %g\n", (long long)counts[0],
         (double)mid, (long long)counts[1], (double)mid);
  result = 0;
  if (check) {
    /* Each rectangle's list is ascending; together they hold every point once. */
    int64_t at[2];
    at[0] = out_offsets[0];
    at[1] = out_offsets[1];
    for (int i = 0; i < n; ++i) {
      const int side = points[i].p[0] < mid ? 0 : 1;
      if (at[side] >= out_offsets[side + 1] || members[at[side]] != i) {
        fprintf(stderr, "knn_example: point %d is not in rectangle %d alone\n", i, side);
        result = 1;
        break;
      }
      ++at[side];
    }
    if (result == 0 && (at[0] != out_offsets[1] || at[1] != out_offsets[2])) {
      fprintf(stderr, "knn_example: the rectangles hold extra points\n");
      result = 1;
    }
    if (result == 0) printf("check: every point in exactly one rectangle, by x < mid\n");
  }
done:
  knn_quadtree_free(tree);
  free(xy);
  free(members);
  return result;
}

/* The contract's float64 squared distance: ((dx*dx + dy*dy) + dz*dz), every
 * operation rounded to double: one operation per statement, built in ISO C99
 * mode (-std=c99), where GCC and Clang contract nothing into a fused
 * multiply-add. */
static double sq_distance64(const double* a, const double* b) {
  const double dx = a[0] - b[0], dy = a[1] - b[1], dz = a[2] - b[2];
  const double xx = dx * dx, yy = dy * dy, zz = dz * dz;
  const double xy = xx + yy;
  return xy + zz;
}

/* True when (d, j) comes before (e, l): smaller distance, ties by index. */
static int before(double d, int j, double e, int l) { return d < e || (d == e && j < l); }

/* Double precision (the _f64 family): the cloud at 4.5e6 + x in double, the
 * k nearest of every point with knn_index_query_self_f64. Returns 0 on
 * success (1 after printing why). */
static int double_demo(const struct Point* points, int n, int k, int rows, int check) {
  double* xyz = (double*)malloc(3 * (size_t)n * sizeof(double) + 1);
  int32_t* ind = (int32_t*)malloc((size_t)n * (size_t)k * sizeof(int32_t) + 1);
  double* d2 = (double*)malloc((size_t)n * (size_t)k * sizeof(double) + 1);
  knn_index* index = NULL;
  int status, result = 1;
  if (xyz == NULL || ind == NULL || d2 == NULL) {
    fprintf(stderr, "knn_example: out of memory\n");
    goto done;
  }
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < 3; ++c) xyz[3 * i + c] = 4.5e6 + (double)points[i].p[c];
  status = knn_index_build_f64(xyz, n, 3, NULL, &index);
  if (status != KNN_OK) {
    report("knn_index_build_f64", status);
    goto done;
  }
  status = knn_index_query_self_f64(index, k, 0, ind, d2);
  if (status != KNN_OK) {
    report("knn_index_query_self_f64", status);
    goto done;
  }
  printf("float64, the cloud at 4.5e6 + x: %d points, k = %d\n", n, k);
  for (int i = 0; i < n && i < rows && i < 3; ++i) {
    printf("%6d:", i);
    for (int j = 0; j < k; ++j)
      printf(" %d (%.17g)", ind[(size_t)i * k + j], d2[(size_t)i * k + j]);
    printf("\n");
  }
  result = 0;
  if (check) {
    /* Row i must be the k smallest (distance, index) pairs, in order: every
       listed pair before the next, and no other point before the last. */
    for (int i = 0; i < n && result == 0; ++i) {
      const int32_t* row = ind + (size_t)i * k;
      const double* drow = d2 + (size_t)i * k;
      const int take = k < n ? k : n;
      for (int j = 0; j < take && result == 0; ++j) {
        if (row[j] < 0 || row[j] >= n ||
            drow[j] != sq_distance64(&xyz[3 * (size_t)i], &xyz[3 * (size_t)row[j]]) ||
            (j > 0 && !before(drow[j - 1], row[j - 1], drow[j], row[j])))
          result = 1;
      }
      for (int p = 0; p < n && result == 0 && take > 0; ++p) {
        int listed = 0;
        for (int j = 0; j < take; ++j) listed |= row[j] == p;
        if (!listed && before(sq_distance64(&xyz[3 * (size_t)i], &xyz[3 * (size_t)p]), p,
                              drow[take - 1], row[take - 1]))
          result = 1;
      }
      for (int j = take; j < k && result == 0; ++j)
        if (row[j] != -1) result = 1;
      if (result)
        fprintf(stderr, "knn_example: float64 row %d disagrees with the brute force\n", i);
    }
    if (result == 0) printf("check: all %d float64 rows equal a double brute force\n", n);
  }
done:
  knn_index_free(index);
  free(xyz);
  free(ind);
  free(d2);
  return result;
}

int main(int argc, char** argv) {
  int check = 0, k = 3, rows = 10, n = 0, status, first = 1, exit_code = 0;
  struct Point* points;
  struct Node* tree;
  int* neighbours;
  const char* path;

  if (argc > 1 && strcmp(argv[1], "--check") == 0) {
    check = 1;
    ++first;
  }
  if (argc - first < 1 || argc - first > 3) {
    fprintf(stderr, "usage: %s [--check] POINTS_FILE [K [ROWS]]\n", argv[0]);
    return 1;
  }
  path = argv[first];
  if (argc - first >= 2 && !parse_positive(argv[first + 1], "K", &k)) return 1;
  if (argc - first >= 3 && !parse_positive(argv[first + 2], "ROWS", &rows)) return 1;

  /* The loaded library must speak the header's major version. */
  if (knn_version() / 10000 != KNN_VERSION_MAJOR) {
    fprintf(stderr, "knn_example: library version %d, header version %d\n", knn_version(),
            KNN_VERSION_NUMBER);
    return 1;
  }
  points = read_points(path, &n);
  if (points == NULL) return 1;

  /* The caller owns the tree: getTreeSize(n) bytes. */
  tree = (struct Node*)malloc(getTreeSize(n) ? getTreeSize(n) : 1);
  neighbours = (int*)malloc((size_t)n * (size_t)k * sizeof(int) + 1);
  if (tree == NULL || neighbours == NULL) {
    fprintf(stderr, "knn_example: out of memory\n");
    free(points);
    free(tree);
    free(neighbours);
    return 1;
  }

  status = buildKdTree(points, n, tree);
  if (status != KNN_OK) {
    exit_code = report("buildKdTree", status);
    goto done;
  }
  status = queryAll(points, tree, n, n, k, neighbours);
  if (status != KNN_OK) {
    exit_code = report("queryAll", status);
    goto done;
  }

  printf("knn_gpgpu %d.%d.%d, %d CUDA device(s); %d points from %s; k = %d\n",
         knn_version() / 10000, knn_version() / 100 % 100, knn_version() % 100, cuGetDeviceCount(),
         n, path, k);
  for (int i = 0; i < n && i < rows; ++i) {
    printf("%6d (%g, %g, %g):", i, (double)points[i].p[0], (double)points[i].p[1],
           (double)points[i].p[2]);
    for (int j = 0; j < k; ++j) printf(" %d", neighbours[(size_t)i * (size_t)k + (size_t)j]);
    printf("\n");
  }
  if (n > rows) printf("... %d more rows\n", n - rows);

  if (check) {
    /* Same contract, other path: brute force must give the identical indices. */
    int* expected = (int*)malloc((size_t)n * (size_t)k * sizeof(int) + 1);
    if (expected == NULL) {
      fprintf(stderr, "knn_example: out of memory\n");
      exit_code = 1;
      goto done;
    }
    status = knn_brute_force(&points[0].p[0], n, &points[0].p[0], n, 3, k, NULL, expected);
    if (status != KNN_OK) {
      exit_code = report("knn_brute_force", status);
    } else if (memcmp(expected, neighbours, (size_t)n * (size_t)k * sizeof(int)) != 0) {
      fprintf(stderr, "knn_example: queryAll and knn_brute_force disagree\n");
      exit_code = 1;
    } else {
      printf("check: all %d rows equal knn_brute_force\n", n);
    }
    free(expected);
  }
  if (exit_code == 0) exit_code = polygon_demo(points, n, check);
  if (exit_code == 0) exit_code = double_demo(points, n, k, rows, check);

done:
  free(points);
  free(tree);
  free(neighbours);
  return exit_code;
}
