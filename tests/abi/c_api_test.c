/*
 * c_api_test: a plain C99 host of the shared library (libknn_gpgpu.so /
 * knn_gpgpu.dll), built with -std=c99 -pedantic -Wall -Wextra -Werror
 * -ffp-contract=off. It includes only the public header and links only the
 * shared library, like any host would, and checks real results against its
 * own brute-force oracle that follows the contract's definitions:
 *   squared distance = ((d0*d0 + d1*d1) + d2*d2) + ...   (float32, no FMA)
 *   order            = ascending distance, ties by the smaller index
 *   missing slots    = index -1, distance +infinity
 * Prints "N passed, N failed" at the end; exits non-zero on any failure.
 */
#if !defined(_WIN32) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200112L /* pthreads under -std=c99 */
#endif

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "knn_gpgpu.h"

#if defined(_WIN32)
#include <windows.h>
#else
#include <pthread.h>
#endif

int knn_abi_layout_checked(void); /* abi_layout.c */

/* ---- Reporting ------------------------------------------------------------ */

static int tests_passed = 0;
static int tests_failed = 0;
static int current_failures = 0;

/* Records one failed expectation of the running test (details for the first few). */
static void failure(const char* fmt, ...) {
  va_list args;
  if (current_failures < 8) {
    fputs("    FAIL: ", stdout);
    va_start(args, fmt);
    vprintf(fmt, args);
    va_end(args);
    fputc('\n', stdout);
  }
  ++current_failures;
}

#define EXPECT(condition, ...)              \
  do {                                      \
    if (!(condition)) failure(__VA_ARGS__); \
  } while (0)

static void run_test(const char* name, void (*test)(void)) {
  current_failures = 0;
  test();
  if (current_failures == 0) {
    ++tests_passed;
    printf("[ PASS ] %s\n", name);
  } else {
    ++tests_failed;
    printf("[ FAIL ] %s (%d failed expectations)\n", name, current_failures);
  }
  fflush(stdout);
}

/* ---- Deterministic random numbers ------------------------------------------ */

typedef struct {
  uint64_t state;
} rng_t;

static uint64_t rng_next(rng_t* r) { /* splitmix64 */
  uint64_t z = (r->state += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

/* Uniform float in [lo, hi). */
static float rng_float(rng_t* r, float lo, float hi) {
  const float unit = (float)(rng_next(r) >> 40) / 16777216.0f; /* 24 bits */
  return lo + (hi - lo) * unit;
}

static int rng_int(rng_t* r, int n) { return (int)(rng_next(r) % (uint64_t)n); }

/* Random coordinates: uniform reals, or a coarse integer grid (many exact
 * duplicates and equal distances, so that tie-breaking is exercised). */
static void fill_coords(rng_t* r, float* xs, int count, int grid) {
  int i;
  for (i = 0; i < count; ++i)
    xs[i] = grid ? (float)rng_int(r, grid) : rng_float(r, -100.0f, 100.0f);
}

/* ---- The oracle ------------------------------------------------------------- */

static float oracle_sq_distance(const float* q, const float* p, int dim) {
  float sum = (q[0] - p[0]) * (q[0] - p[0]);
  int d;
  for (d = 1; d < dim; ++d) {
    const float diff = q[d] - p[d];
    sum = sum + diff * diff;
  }
  return sum;
}

/* k nearest of n_ref rows for each of n_query rows: indices and distances,
 * ascending by (distance, index), -1/+inf where n_ref < k. */
static void oracle_knn(const float* ref, int n_ref, const float* query, int n_query, int dim, int k,
                       int* ind, float* dist) {
  int i, j, s;
  for (i = 0; i < n_query; ++i) {
    int* row_i = ind + (size_t)i * k;
    float* row_d = dist + (size_t)i * k;
    for (s = 0; s < k; ++s) {
      row_i[s] = -1;
      row_d[s] = INFINITY;
    }
    for (j = 0; j < n_ref; ++j) {
      const float d = oracle_sq_distance(query + (size_t)i * dim, ref + (size_t)j * dim, dim);
      /* Visiting j in increasing order, an equal distance never displaces an
       * earlier index: insert after every entry that is <= d. */
      if (row_i[k - 1] >= 0 && !(d < row_d[k - 1])) continue;
      for (s = k - 1; s > 0 && (row_i[s - 1] < 0 || d < row_d[s - 1]); --s) {
        row_i[s] = row_i[s - 1];
        row_d[s] = row_d[s - 1];
      }
      row_i[s] = j;
      row_d[s] = d;
    }
  }
}

/* The coordinates of an array of points as floats (no subscript, so that an
 * empty array allocated as 1 byte raises no bounds warning). */
#define COORDS(points) ((float*)(void*)(points))

static int same_float_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* Does `text` contain `number` as a whole decimal number (not part of a longer one)? */
static int mentions_number(const char* text, long number) {
  char digits[32];
  const char* at = text;
  size_t len;
  sprintf(digits, "%ld", number);
  len = strlen(digits);
  while ((at = strstr(at, digits)) != NULL) {
    const int digit_before = at > text && at[-1] >= '0' && at[-1] <= '9';
    const int digit_after = at[len] >= '0' && at[len] <= '9';
    if (!digit_before && !digit_after) return 1;
    ++at;
  }
  return 0;
}

static void* checked_malloc(size_t bytes) {
  void* p = malloc(bytes == 0 ? 1 : bytes);
  if (p == NULL) {
    printf("out of host memory (%lu bytes)\n", (unsigned long)bytes);
    exit(2);
  }
  return p;
}

/* ---- Helpers around the classic API ------------------------------------------ */

#define GUARD_WORDS 16
#define GUARD_VALUE 0x5EEDBEEF

/* An int buffer of `count` slots followed by guard words that must survive. */
static int* guarded_ints(size_t count) {
  int* p = (int*)checked_malloc((count + GUARD_WORDS) * sizeof(int));
  size_t i;
  for (i = 0; i < count + GUARD_WORDS; ++i) p[i] = GUARD_VALUE;
  return p;
}

static int guards_intact(const int* p, size_t count) {
  size_t i;
  for (i = count; i < count + GUARD_WORDS; ++i)
    if (p[i] != GUARD_VALUE) return 0;
  return 1;
}

static int tree_depth(int i) {
  int depth = 0;
  for (++i; i > 1; i >>= 1) ++depth;
  return depth;
}

/* Checks the documented tree layout against the points it was built from. */
static void check_tree_layout(const struct Point* points, const struct Node* tree, int n,
                              const char* label) {
  char* seen = (char*)checked_malloc((size_t)n);
  int i;
  memset(seen, 0, (size_t)n);
  for (i = 0; i < n; ++i) {
    const struct Node* node = &tree[i];
    const int want_left = 2 * i + 1 < n ? 2 * i + 1 : -1;
    const int want_right = 2 * i + 2 < n ? 2 * i + 2 : -1;
    int child, parent;
    EXPECT(node->left == want_left && node->right == want_right,
           "%s: node %d has children (%d, %d), want (%d, %d)", label, i, node->left, node->right,
           want_left, want_right);
    if (node->id < 0 || node->id >= n || seen[node->id]) {
      failure("%s: node %d has id %d (out of range or repeated)", label, i, node->id);
      continue;
    }
    seen[node->id] = 1;
    EXPECT(memcmp(node->p, points[node->id].p, sizeof node->p) == 0,
           "%s: node %d's point differs from points[%d]", label, i, node->id);
    /* kd order against every ancestor */
    for (child = i; child > 0; child = parent) {
      int split;
      parent = (child - 1) / 2;
      split = tree_depth(parent) % 3; /* x at the root */
      if (child == 2 * parent + 1)
        EXPECT(node->p[split] <= tree[parent].p[split],
               "%s: node %d is left of ancestor %d but larger on dimension %d", label, i, parent,
               split);
      else
        EXPECT(node->p[split] >= tree[parent].p[split],
               "%s: node %d is right of ancestor %d but smaller on dimension %d", label, i, parent,
               split);
    }
  }
  free(seen);
}

/* Builds with mpBuildKdTree and buildKdTree (byte-identical), checks the
 * layout, and checks mpQueryAll and queryAll against the oracle. */
static void check_classic_case(rng_t* r, int n, int m, int k, int grid) {
  struct Point* points = (struct Point*)checked_malloc((size_t)n * sizeof *points);
  struct Point* queries = (struct Point*)checked_malloc((size_t)m * sizeof *queries);
  struct Node* tree_mp = (struct Node*)checked_malloc(getTreeSize(n));
  struct Node* tree_auto = (struct Node*)checked_malloc(getTreeSize(n));
  int* want = (int*)checked_malloc((size_t)m * k * sizeof(int));
  float* want_dist = (float*)checked_malloc((size_t)m * k * sizeof(float));
  int* got = guarded_ints((size_t)m * k);
  int status, q, s, i;
  char label[96];

  sprintf(label, "n=%d m=%d k=%d%s", n, m, k, grid ? " (grid)" : "");
  fill_coords(r, COORDS(points), 3 * n, grid);
  fill_coords(r, COORDS(queries), 3 * m, grid);
  /* some queries exactly on reference points */
  for (q = 0; q < m && n > 0; q += 3) queries[q] = points[rng_int(r, n)];

  EXPECT(getTreeSize(n) == (size_t)n * 24, "%s: getTreeSize", label);
  status = mpBuildKdTree(points, n, tree_mp);
  EXPECT(status == KNN_OK, "%s: mpBuildKdTree returned %d (%s)", label, status, knn_last_error());
  status = buildKdTree(points, n, tree_auto);
  EXPECT(status == KNN_OK, "%s: buildKdTree returned %d (%s)", label, status, knn_last_error());
  EXPECT(n == 0 || memcmp(tree_mp, tree_auto, getTreeSize(n)) == 0,
         "%s: buildKdTree and mpBuildKdTree trees differ", label);
  check_tree_layout(points, tree_mp, n, label);

  oracle_knn(COORDS(points), n, COORDS(queries), m, 3, k, want, want_dist);
  for (i = 0; i < 2; ++i) {
    const char* function = i == 0 ? "mpQueryAll" : "queryAll";
    status = i == 0 ? mpQueryAll(queries, tree_mp, m, n, k, got)
                    : queryAll(queries, tree_mp, m, n, k, got);
    EXPECT(status == KNN_OK, "%s: %s returned %d (%s)", label, function, status, knn_last_error());
    EXPECT(guards_intact(got, (size_t)m * k), "%s: %s wrote past n_qp*k", label, function);
    for (q = 0; q < m; ++q)
      for (s = 0; s < k; ++s) {
        const size_t at = (size_t)q * k + s;
        EXPECT(got[at] == want[at], "%s: %s query %d slot %d: got %d, want %d", label, function, q,
               s, got[at], want[at]);
      }
  }
  free(points);
  free(queries);
  free(tree_mp);
  free(tree_auto);
  free(want);
  free(want_dist);
  free(got);
}

/* ---- Tests ---------------------------------------------------------------- */

static void test_version_and_layout(void) {
  EXPECT(knn_abi_layout_checked() == 1, "layout checks not linked");
  EXPECT(knn_version() == KNN_VERSION_NUMBER, "knn_version() is %d, the header says %d",
         knn_version(), KNN_VERSION_NUMBER);
  EXPECT(sizeof(struct Node) == 24 && sizeof(struct Point) == 12, "struct sizes");
  EXPECT(getTreeSize(0) == 0 && getTreeSize(-5) == 0, "getTreeSize of 0 and of a negative n");
  EXPECT(getTreeSize(1000) == 24000, "getTreeSize(1000)");
}

static void test_status_strings(void) {
  static const int unknown[] = {-1, 11, 99, 12345, INT_MIN, INT_MAX};
  const char* ok_text = knn_status_string(KNN_OK);
  const char* unknown_text = knn_status_string(-1);
  int code;
  size_t i;
  EXPECT(ok_text != NULL && ok_text[0] != '\0', "knn_status_string(KNN_OK) is empty");
  EXPECT(unknown_text != NULL, "knn_status_string(-1) is NULL");
  for (code = KNN_OK; code <= KNN_ERR_INTERNAL; ++code) {
    const char* text = knn_status_string(code);
    EXPECT(text != NULL && text[0] != '\0', "knn_status_string(%d) is empty", code);
    EXPECT(text != NULL && unknown_text != NULL && strcmp(text, unknown_text) != 0,
           "knn_status_string(%d) is the unknown-status text", code);
  }
  for (i = 0; i < sizeof unknown / sizeof unknown[0]; ++i) {
    const char* text = knn_status_string(unknown[i]);
    EXPECT(text != NULL && strstr(text, "unknown") != NULL,
           "knn_status_string(%d) is \"%s\", want an unknown-status text", unknown[i],
           text ? text : "(null)");
  }
}

static void test_options_init(void) {
  knn_options opt;
  memset(&opt, 0xAB, sizeof opt);
  knn_options_init(&opt);
  /* Version 1 only: a caller built against the 40-byte struct gets no write past it. */
  EXPECT(opt.struct_size == offsetof(knn_options, device_memory_limit) + sizeof(size_t),
         "struct_size is %lu", (unsigned long)opt.struct_size);
  EXPECT(opt.backend == KNN_BACKEND_AUTO, "default backend %d", opt.backend);
  EXPECT(opt.device == -1, "default device %d", opt.device);
  EXPECT(opt.structure == KNN_STRUCTURE_AUTO, "default structure %d", opt.structure);
  EXPECT(opt.device_memory_limit == 0, "default device_memory_limit");
  EXPECT(opt.device_count == (int)0xABABABAB, "device_count written by knn_options_init");
  knn_options_init(NULL); /* ignored, no crash */
  memset(&opt, 0xAB, sizeof opt);
  knn_options_init_v2(&opt);
  EXPECT(opt.struct_size == sizeof(knn_options), "v2 struct_size is %lu",
         (unsigned long)opt.struct_size);
  EXPECT(opt.device_count == 0 && opt.devices[0] == -1 && opt.devices[KNN_MAX_DEVICES - 1] == -1,
         "v2 device list %d %d", opt.device_count, opt.devices[0]);
  knn_options_init_v2(NULL);
}

static void test_classic_random(void) {
  static const int sizes[] = {0, 1, 2, 3, 5, 8, 31, 100, 1000, 4097};
  rng_t r = {42};
  size_t i;
  for (i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    const int n = sizes[i];
    check_classic_case(&r, n, 37, 1, 0);
    check_classic_case(&r, n, 37, 8, 0);
    check_classic_case(&r, n, 11, n + 3, 0); /* k > n: missing slots are -1 */
  }
  check_classic_case(&r, 100, 0, 4, 0); /* no queries */
}

static void test_classic_ties(void) {
  rng_t r = {7};
  check_classic_case(&r, 500, 200, 10, 3); /* coordinates in {0, 1, 2} */
  check_classic_case(&r, 2000, 100, 40, 5);
  check_classic_case(&r, 64, 50, 64, 2); /* every point, all ties */
}

static void test_empty_tree(void) {
  struct Point q[2] = {{{1.0f, 2.0f, 3.0f}}, {{0.0f, 0.0f, 0.0f}}};
  int result[6] = {7, 7, 7, 7, 7, 7};
  int status = mpBuildKdTree(NULL, 0, NULL);
  int i;
  EXPECT(status == KNN_OK, "mpBuildKdTree of no points returned %d", status);
  EXPECT(knn_last_error()[0] == '\0', "knn_last_error after success is \"%s\"", knn_last_error());
  status = queryAll(q, NULL, 2, 0, 3, result);
  EXPECT(status == KNN_OK, "queryAll against an empty tree returned %d (%s)", status,
         knn_last_error());
  for (i = 0; i < 6; ++i) EXPECT(result[i] == -1, "slot %d is %d, want -1", i, result[i]);
  EXPECT(mpQueryAll(NULL, NULL, 0, 0, 1, NULL) == KNN_OK, "mpQueryAll with nothing to do");
}

static void test_brute_force(void) {
  static const int dims[] = {1, 2, 3, 5, 16};
  static const int refs[] = {0, 1, 10, 300};
  rng_t r = {2024};
  size_t a, b;
  int pass;
  for (a = 0; a < sizeof dims / sizeof dims[0]; ++a)
    for (b = 0; b < sizeof refs / sizeof refs[0]; ++b)
      for (pass = 0; pass < 3; ++pass) {
        const int dim = dims[a], n = refs[b], m = 20;
        const int k = pass == 0 ? 1 : pass == 1 ? 7 : n + 2;
        const int grid = pass == 1 ? 3 : 0;
        float* ref = (float*)checked_malloc((size_t)n * dim * sizeof(float));
        float* query = (float*)checked_malloc((size_t)m * dim * sizeof(float));
        int* want = (int*)checked_malloc((size_t)m * k * sizeof(int));
        float* want_d = (float*)checked_malloc((size_t)m * k * sizeof(float));
        int* got = guarded_ints((size_t)m * k);
        float* got_d = (float*)checked_malloc((size_t)m * k * sizeof(float));
        int* got2 = guarded_ints((size_t)m * k);
        int status, s;
        fill_coords(&r, ref, n * dim, grid);
        fill_coords(&r, query, m * dim, grid);
        oracle_knn(ref, n, query, m, dim, k, want, want_d);
        status = knn_brute_force(ref, n, query, m, dim, k, got_d, got);
        EXPECT(status == KNN_OK, "knn_brute_force dim=%d n=%d k=%d returned %d (%s)", dim, n, k,
               status, knn_last_error());
        EXPECT(guards_intact(got, (size_t)m * k), "knn_brute_force wrote past n_query*k");
        for (s = 0; s < m * k; ++s) {
          EXPECT(got[s] == want[s], "brute force dim=%d n=%d k=%d slot %d: index %d, want %d", dim,
                 n, k, s, got[s], want[s]);
          EXPECT(same_float_bits(got_d[s], want_d[s]),
                 "brute force dim=%d n=%d k=%d slot %d: distance %.9g, want %.9g", dim, n, k, s,
                 (double)got_d[s], (double)want_d[s]);
        }
        /* either output may be NULL */
        status = knn_brute_force(ref, n, query, m, dim, k, NULL, got2);
        EXPECT(status == KNN_OK && memcmp(got, got2, (size_t)m * k * sizeof(int)) == 0,
               "knn_brute_force with sq_dist NULL differs (status %d)", status);
        status = knn_brute_force(ref, n, query, m, dim, k, got_d, NULL);
        EXPECT(status == KNN_OK, "knn_brute_force with ind NULL returned %d", status);
        free(ref);
        free(query);
        free(want);
        free(want_d);
        free(got);
        free(got_d);
        free(got2);
      }
}

/* A failing call returns `want`, leaves a message that mentions `number`
 * (unless it is LONG_MIN) and leaves the output untouched. */
static void expect_failure(int status, int want, long number, const int* output, size_t count,
                           const char* what) {
  const char* message = knn_last_error();
  size_t i;
  EXPECT(status == want, "%s: status %d (%s), want %d", what, status, knn_status_string(status),
         want);
  EXPECT(message != NULL && message[0] != '\0', "%s: knn_last_error() is empty", what);
  if (number != LONG_MIN && message != NULL)
    EXPECT(mentions_number(message, number), "%s: message \"%s\" does not mention %ld", what,
           message, number);
  for (i = 0; output != NULL && i < count; ++i)
    if (output[i] != GUARD_VALUE) {
      failure("%s: output slot %lu written by a failing call", what, (unsigned long)i);
      break;
    }
}

static void test_bad_input(void) {
  enum { N = 2000, M = 20, K = 4 };
  rng_t r = {99};
  struct Point* points = (struct Point*)checked_malloc(N * sizeof *points);
  struct Point* queries = (struct Point*)checked_malloc(M * sizeof *queries);
  struct Node* tree = (struct Node*)checked_malloc(getTreeSize(N));
  struct Node* bad_tree = (struct Node*)checked_malloc(getTreeSize(N));
  int* result = guarded_ints(M * K);
  float dist[M * K];
  int status;

  fill_coords(&r, COORDS(points), 3 * N, 0);
  fill_coords(&r, COORDS(queries), 3 * M, 0);
  EXPECT(mpBuildKdTree(points, N, tree) == KNN_OK, "build");

  expect_failure(mpBuildKdTree(NULL, N, tree), KNN_ERR_INVALID_ARGUMENT, N, NULL, 0,
                 "mpBuildKdTree(NULL points, n>0)");
  expect_failure(buildKdTree(points, N, NULL), KNN_ERR_INVALID_ARGUMENT, N, NULL, 0,
                 "buildKdTree(NULL tree, n>0)");
  expect_failure(mpBuildKdTree(points, -3, tree), KNN_ERR_INVALID_ARGUMENT, -3, NULL, 0,
                 "mpBuildKdTree(n<0)");
  expect_failure(mpQueryAll(queries, tree, M, N, 0, result), KNN_ERR_INVALID_ARGUMENT, 0, result,
                 M * K, "mpQueryAll(k=0)");
  expect_failure(queryAll(queries, tree, M, N, -2, result), KNN_ERR_INVALID_ARGUMENT, -2, result,
                 M * K, "queryAll(k<0)");
  expect_failure(queryAll(NULL, tree, M, N, K, result), KNN_ERR_INVALID_ARGUMENT, M, result, M * K,
                 "queryAll(NULL queries)");
  expect_failure(mpQueryAll(queries, tree, M, N, K, NULL), KNN_ERR_INVALID_ARGUMENT, M, NULL, 0,
                 "mpQueryAll(NULL result)");
  expect_failure(mpQueryAll(queries, tree, -1, N, K, result), KNN_ERR_INVALID_ARGUMENT, -1, result,
                 M * K, "mpQueryAll(n_qp<0)");

  /* NaN and infinity: the message names the first offending index */
  points[1234].p[1] = NAN;
  points[1500].p[0] = NAN;
  expect_failure(mpBuildKdTree(points, N, bad_tree), KNN_ERR_NONFINITE_INPUT, 1234, NULL, 0,
                 "mpBuildKdTree(NaN at point 1234)");
  points[1234].p[1] = 0.0f;
  points[1500].p[0] = 0.0f;
  queries[13].p[2] = INFINITY;
  expect_failure(queryAll(queries, tree, M, N, K, result), KNN_ERR_NONFINITE_INPUT, 13, result,
                 M * K, "queryAll(+inf at query 13)");
  queries[13].p[2] = -INFINITY;
  expect_failure(mpQueryAll(queries, tree, M, N, K, result), KNN_ERR_NONFINITE_INPUT, 13, result,
                 M * K, "mpQueryAll(-inf at query 13)");
  queries[13].p[2] = 1.0f;
  points[42].p[2] = NAN;
  expect_failure(knn_brute_force(COORDS(points), N, COORDS(queries), M, 3, K, dist, result),
                 KNN_ERR_NONFINITE_INPUT, 42, result, M * K, "knn_brute_force(NaN at ref 42)");
  points[42].p[2] = 0.5f;
  expect_failure(knn_brute_force(COORDS(points), N, COORDS(queries), M, 0, K, dist, result),
                 KNN_ERR_INVALID_ARGUMENT, 0, result, M * K, "knn_brute_force(dim=0)");
  expect_failure(knn_brute_force(NULL, N, COORDS(queries), M, 3, K, dist, result),
                 KNN_ERR_INVALID_ARGUMENT, N, result, M * K, "knn_brute_force(NULL ref)");

  /* a Node array that is not a tree */
  memcpy(bad_tree, tree, getTreeSize(N));
  bad_tree[700].left = 5;
  expect_failure(mpQueryAll(queries, bad_tree, M, N, K, result), KNN_ERR_INVALID_TREE, LONG_MIN,
                 result, M * K, "mpQueryAll(broken link)");
  memcpy(bad_tree, tree, getTreeSize(N));
  bad_tree[10].id = bad_tree[11].id;
  expect_failure(queryAll(queries, bad_tree, M, N, K, result), KNN_ERR_INVALID_TREE, LONG_MIN,
                 result, M * K, "queryAll(repeated id)");

  /* the library is still usable, and a success clears the message */
  status = mpQueryAll(queries, tree, M, N, K, result);
  EXPECT(status == KNN_OK, "mpQueryAll after errors returned %d (%s)", status, knn_last_error());
  EXPECT(knn_last_error()[0] == '\0', "knn_last_error after a success is \"%s\"", knn_last_error());
  EXPECT(guards_intact(result, M * K), "guard words");
  free(points);
  free(queries);
  free(tree);
  free(bad_tree);
  free(result);
}

static void test_device_calls_without_device(void) {
  struct Point p[4] = {{{0, 0, 0}}, {{1, 0, 0}}, {{0, 1, 0}}, {{0, 0, 1}}};
  struct Node tree[4];
  int result[4];
  const int devices = cuGetDeviceCount();
  EXPECT(devices >= 0, "cuGetDeviceCount() is %d", devices);
  EXPECT(getNeededBytesForQueryAll(1000, 8, 100000) > 0, "getNeededBytesForQueryAll is 0");
  EXPECT(getNeededBytesForBuildingKdTree(100000) > 0, "getNeededBytesForBuildingKdTree is 0");
  EXPECT(getNeededBytesForQueryAll(-1, 8, 10) == 0, "getNeededBytesForQueryAll(-1) is not 0");
  if (devices > 0) return; /* the device paths are for the GPU tests */
  EXPECT(getFreeBytesOnGpu() == 0, "getFreeBytesOnGpu() without a device");
  EXPECT(cuGetDevice() == -1, "cuGetDevice() without a device is %d", cuGetDevice());
  EXPECT(cuSetDevice(0) == KNN_ERR_NO_DEVICE, "cuSetDevice(0) without a device");
  EXPECT(cuBuildKdTree(p, 4, tree) == KNN_ERR_NO_DEVICE, "cuBuildKdTree without a device");
  EXPECT(mpBuildKdTree(p, 4, tree) == KNN_OK, "mpBuildKdTree");
  EXPECT(cuQueryAll(p, tree, 4, 4, 1, result) == KNN_ERR_NO_DEVICE, "cuQueryAll without a device");
  EXPECT(queryAll(p, tree, 4, 4, 1, result) == KNN_OK && result[0] == 0 && result[3] == 3,
         "queryAll falls back to the CPU");
}

/* The index API: either served (then checked against the oracle) or refused
 * with a clear status; never a silent success with wrong data. */
static void test_index_api(void) {
  static const int dims[] = {2, 3, 7};
  rng_t r = {5};
  size_t a;
  EXPECT(knn_index_free(NULL) == KNN_OK, "knn_index_free(NULL)");
  for (a = 0; a < sizeof dims / sizeof dims[0]; ++a) {
    enum { N = 500, M = 40, K = 6 };
    const int dim = dims[a];
    float* pts = (float*)checked_malloc((size_t)N * dim * sizeof(float));
    float* qs = (float*)checked_malloc((size_t)M * dim * sizeof(float));
    int want[M * K];
    int32_t got[M * K];
    float want_d[M * K], got_d[M * K];
    knn_index* index = NULL;
    int64_t n_info = -1;
    int dim_info = -1, s, status;
    fill_coords(&r, pts, N * dim, a == 1 ? 4 : 0);
    fill_coords(&r, qs, M * dim, a == 1 ? 4 : 0);
    status = knn_index_build(pts, N, dim, NULL, &index);
    if (status != KNN_OK) {
      EXPECT(status == KNN_ERR_UNSUPPORTED || status == KNN_ERR_NO_DEVICE,
             "knn_index_build dim=%d returned %d (%s)", dim, status, knn_last_error());
      EXPECT(index == NULL, "a failed knn_index_build left a handle");
      EXPECT(knn_last_error()[0] != '\0', "knn_index_build failed without a message");
    } else {
      EXPECT(knn_index_info(index, &n_info, &dim_info, NULL, NULL) == KNN_OK && n_info == N &&
                 dim_info == dim,
             "knn_index_info dim=%d", dim);
      oracle_knn(pts, N, qs, M, dim, K, want, want_d);
      status = knn_index_query(index, qs, M, K, got, got_d, NULL);
      EXPECT(status == KNN_OK, "knn_index_query dim=%d returned %d (%s)", dim, status,
             knn_last_error());
      for (s = 0; status == KNN_OK && s < M * K; ++s) {
        EXPECT(got[s] == want[s], "index dim=%d slot %d: index %d, want %d", dim, s, got[s],
               want[s]);
        EXPECT(same_float_bits(got_d[s], want_d[s]), "index dim=%d slot %d: distance", dim, s);
      }
      EXPECT(knn_index_free(index) == KNN_OK, "knn_index_free");
    }
    free(pts);
    free(qs);
  }
}

/* ---- Threads: one tree, four host threads ----------------------------------- */

enum { T_POINTS = 20000, T_QUERIES = 3000, T_K = 8, T_THREADS = 4, T_ROUNDS = 4 };

struct thread_job {
  const struct Point* queries;
  const struct Node* tree;
  const int* expected;
  int number;
  int mismatches;
  int errors;
  int message_mixups;
};

static void thread_body(struct thread_job* job) {
  int* result = (int*)checked_malloc((size_t)T_QUERIES * T_K * sizeof(int));
  int round, i;
  for (round = 0; round < T_ROUNDS; ++round) {
    /* a failing call whose message names this thread's own bad k */
    const int bad_k = -(job->number * 10 + round + 1);
    int status = mpQueryAll(job->queries, job->tree, T_QUERIES, T_POINTS, bad_k, result);
    if (status != KNN_ERR_INVALID_ARGUMENT || !mentions_number(knn_last_error(), bad_k))
      ++job->message_mixups;
    status = (round % 2 == 0 ? queryAll : mpQueryAll)(job->queries, job->tree, T_QUERIES, T_POINTS,
                                                      T_K, result);
    if (status != KNN_OK) ++job->errors;
    if (knn_last_error()[0] != '\0') ++job->message_mixups;
    for (i = 0; i < T_QUERIES * T_K; ++i)
      if (result[i] != job->expected[i]) ++job->mismatches;
  }
  free(result);
}

#if defined(_WIN32)
typedef HANDLE thread_handle;
static DWORD WINAPI thread_entry(LPVOID arg) {
  thread_body((struct thread_job*)arg);
  return 0;
}
static int thread_start(thread_handle* t, struct thread_job* job) {
  *t = CreateThread(NULL, 0, thread_entry, job, 0, NULL);
  return *t != NULL;
}
static void thread_join(thread_handle t) {
  WaitForSingleObject(t, INFINITE);
  CloseHandle(t);
}
#else
typedef pthread_t thread_handle;
static void* thread_entry(void* arg) {
  thread_body((struct thread_job*)arg);
  return NULL;
}
static int thread_start(thread_handle* t, struct thread_job* job) {
  return pthread_create(t, NULL, thread_entry, job) == 0;
}
static void thread_join(thread_handle t) { pthread_join(t, NULL); }
#endif

static void test_threads(void) {
  rng_t r = {31337};
  struct Point* points = (struct Point*)checked_malloc(T_POINTS * sizeof *points);
  struct Point* queries = (struct Point*)checked_malloc(T_QUERIES * sizeof *queries);
  struct Node* tree = (struct Node*)checked_malloc(getTreeSize(T_POINTS));
  int* expected = (int*)checked_malloc((size_t)T_QUERIES * T_K * sizeof(int));
  int* oracle = (int*)checked_malloc((size_t)T_QUERIES * T_K * sizeof(int));
  float* oracle_d = (float*)checked_malloc((size_t)T_QUERIES * T_K * sizeof(float));
  struct thread_job jobs[T_THREADS];
  thread_handle threads[T_THREADS];
  int started[T_THREADS];
  int t, i;

  fill_coords(&r, COORDS(points), 3 * T_POINTS, 0);
  fill_coords(&r, COORDS(queries), 3 * T_QUERIES, 0);
  EXPECT(mpBuildKdTree(points, T_POINTS, tree) == KNN_OK, "build");
  EXPECT(mpQueryAll(queries, tree, T_QUERIES, T_POINTS, T_K, expected) == KNN_OK, "query");
  /* the single-threaded answer itself, on a sample of queries */
  oracle_knn(COORDS(points), T_POINTS, COORDS(queries), 200, 3, T_K, oracle, oracle_d);
  for (i = 0; i < 200 * T_K; ++i)
    EXPECT(expected[i] == oracle[i], "slot %d: %d, want %d", i, expected[i], oracle[i]);

  for (t = 0; t < T_THREADS; ++t) {
    jobs[t].queries = queries;
    jobs[t].tree = tree;
    jobs[t].expected = expected;
    jobs[t].number = t;
    jobs[t].mismatches = jobs[t].errors = jobs[t].message_mixups = 0;
    started[t] = thread_start(&threads[t], &jobs[t]);
    EXPECT(started[t], "could not start thread %d", t);
  }
  for (t = 0; t < T_THREADS; ++t) {
    if (!started[t]) continue;
    thread_join(threads[t]);
    EXPECT(jobs[t].errors == 0, "thread %d: %d failed queries", t, jobs[t].errors);
    EXPECT(jobs[t].mismatches == 0, "thread %d: %d wrong neighbours", t, jobs[t].mismatches);
    EXPECT(jobs[t].message_mixups == 0,
           "thread %d: knn_last_error() showed another thread's message %d times", t,
           jobs[t].message_mixups);
  }
  free(points);
  free(queries);
  free(tree);
  free(expected);
  free(oracle);
  free(oracle_d);
}

int main(void) {
  printf("knn_gpgpu C ABI test (library version %d, header %d)\n", knn_version(),
         KNN_VERSION_NUMBER);
  run_test("version and layout", test_version_and_layout);
  run_test("status strings", test_status_strings);
  run_test("knn_options_init", test_options_init);
  run_test("classic API on random points (sizes 0..4097, k > n)", test_classic_random);
  run_test("classic API with duplicates and ties", test_classic_ties);
  run_test("classic API with an empty tree", test_empty_tree);
  run_test("knn_brute_force, dims 1..16", test_brute_force);
  run_test("bad input: status, message, untouched outputs", test_bad_input);
  run_test("device calls without a device", test_device_calls_without_device);
  run_test("index API: served correctly or refused clearly", test_index_api);
  run_test("4 threads querying one tree", test_threads);
  printf("%d passed, %d failed\n", tests_passed, tests_failed);
  return tests_failed == 0 ? 0 : 1;
}
