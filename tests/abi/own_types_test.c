/*
 * own_types_test: a C99 host that has its own `struct Point` and `struct
 * Node` (as geometry code often does) and still uses the library. It defines
 * KNN_GPGPU_NO_CLASSIC_TYPES before including the header, so the header's
 * structs take the tags knn_point / knn_node, and calls
 *   - the index API with the host's own points converted to float rows, and
 *   - the classic API (mpBuildKdTree + mpQueryAll) through knn_point/knn_node,
 * checking both against a brute-force oracle of the contract (float32
 * squared distances, no FMA, ties by the smaller index) computed on the
 * host's own types. Exits non-zero on any failure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* The host's types, declared before the library's header. */
struct Point {
  double x, y;
};
struct Node {
  struct Point where;
  struct Node* next;
};

#define KNN_GPGPU_NO_CLASSIC_TYPES
#include "knn_gpgpu.h"

enum { N = 500, K = 5 };

static int failures = 0;

static void expect(int ok, const char* what, int row) {
  if (!ok && failures++ < 10) fprintf(stderr, "FAIL: %s (query %d)\n", what, row);
}

/* The contract's squared distance of two 2-D points taken as float32. */
static float sq_distance(const struct Point* a, const struct Point* b) {
  float dx = (float)a->x - (float)b->x;
  float dy = (float)a->y - (float)b->y;
  float dx2 = dx * dx;
  float dy2 = dy * dy;
  return dx2 + dy2;
}

/* The k nearest of points[] to q, by (distance, index): selection by scanning. */
static void oracle(const struct Point* points, int n, const struct Point* q, int k, int* out) {
  int j, i;
  for (j = 0; j < k; ++j) {
    int best = -1;
    float best_d = INFINITY;
    for (i = 0; i < n; ++i) {
      int taken = 0, t;
      float d = sq_distance(&points[i], q);
      for (t = 0; t < j; ++t) taken |= out[t] == i;
      if (!taken && d < best_d) {
        best = i;
        best_d = d;
      }
    }
    out[j] = best;
  }
}

int main(void) {
  static struct Point host[N];
  static struct Node list[N]; /* the host's own Node type stays usable */
  static float rows[2 * N];
  static knn_point classic_points[N];
  static knn_node tree[N];
  static int32_t index_result[N * K];
  static int classic_result[N * K];
  int expected[K];
  knn_options opt;
  knn_index* index = NULL;
  int i, j, status;

  /* Coordinates on a coarse lattice: many exact ties, decided by index. */
  srand(7);
  for (i = 0; i < N; ++i) {
    host[i].x = (double)(rand() % 40) * 0.25;
    host[i].y = (double)(rand() % 40) * 0.25;
    list[i].where = host[i];
    list[i].next = i + 1 < N ? &list[i + 1] : NULL;
    rows[2 * i] = (float)host[i].x;
    rows[2 * i + 1] = (float)host[i].y;
    classic_points[i].p[0] = (float)host[i].x;
    classic_points[i].p[1] = (float)host[i].y;
    classic_points[i].p[2] = 0.0f;
  }

  /* The index API, 2-D. */
  knn_options_init(&opt);
  opt.backend = KNN_BACKEND_OPENMP;
  status = knn_index_build(rows, N, 2, &opt, &index);
  expect(status == KNN_OK, knn_last_error(), -1);
  if (status == KNN_OK) {
    status = knn_index_query(index, rows, N, K, index_result, NULL, NULL);
    expect(status == KNN_OK, knn_last_error(), -1);
    expect(knn_index_free(index) == KNN_OK, "knn_index_free", -1);
  }

  /* The classic API through the prefixed types (3-D with z = 0). */
  expect(getTreeSize(N) == sizeof tree, "getTreeSize(N) == N * sizeof(knn_node)", -1);
  status = mpBuildKdTree(classic_points, N, tree);
  expect(status == KNN_OK, knn_last_error(), -1);
  status = mpQueryAll(classic_points, tree, N, N, K, classic_result);
  expect(status == KNN_OK, knn_last_error(), -1);

  for (i = 0; i < N; ++i) {
    oracle(host, N, &list[i].where, K, expected);
    for (j = 0; j < K; ++j) {
      expect(index_result[i * K + j] == expected[j], "knn_index_query differs from the oracle", i);
      expect(classic_result[i * K + j] == expected[j], "mpQueryAll differs from the oracle", i);
    }
  }
  if (failures != 0) {
    fprintf(stderr, "own_types_test: %d failures\n", failures);
    return 1;
  }
  printf(
      "own_types_test: index and classic calls with the host's own Point/Node: OK "
      "(%d queries, k = %d)\n",
      N, K);
  return 0;
}
