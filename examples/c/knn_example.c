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
 * --check compares every row with knn_brute_force and exits 1 on a mismatch.
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
         knn_version() / 10000, knn_version() / 100 % 100, knn_version() % 100,
         cuGetDeviceCount(), n, path, k);
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

done:
  free(points);
  free(tree);
  free(neighbours);
  return exit_code;
}
