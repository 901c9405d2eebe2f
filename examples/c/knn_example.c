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
 * --check compares every row with knn_brute_force, checks each point's
 * rectangle against x < mid, and exits 1 on a mismatch.
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

done:
  free(points);
  free(tree);
  free(neighbours);
  return exit_code;
}
