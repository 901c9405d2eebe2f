/*
 * abi_load_test: loads the shared library at run time exactly as a host
 * would (dlopen / LoadLibrary, as Lisp FFIs, .NET, Python ctypes and AML do),
 * resolves every function the public header declares, runs a multi-threaded
 * build and query, unloads the library while OpenMP worker threads may still
 * be winding down, waits, and does it all again. A crash or a missing symbol
 * fails it. Usage: abi_load_test [path of the library]
 * Prints "N passed, N failed" at the end; exits non-zero on failure.
 */
#if !defined(_WIN32) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200112L /* nanosleep under -std=c99 */
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "knn_api_names.h" /* generated from the header: KNN_API_NAMES */
#include "knn_gpgpu.h"

#if defined(_WIN32)
#include <windows.h>
typedef HMODULE library_handle;
#define DEFAULT_LIBRARY "knn_gpgpu.dll"
#else
#include <dlfcn.h>
#include <time.h>
typedef void* library_handle;
#define DEFAULT_LIBRARY "libknn_gpgpu.so"
#endif

typedef void (*any_function)(void);

static library_handle open_library(const char* path) {
#if defined(_WIN32)
  return LoadLibraryA(path);
#else
  return dlopen(path, RTLD_NOW | RTLD_LOCAL);
#endif
}

static void close_library(library_handle lib) {
#if defined(_WIN32)
  FreeLibrary(lib);
#else
  dlclose(lib);
#endif
}

/* Is the library still mapped after close_library? (It should be: the DLL
 * pins itself and the Linux build is linked -z nodelete; informational.) */
static int still_resident(const char* path) {
#if defined(_WIN32)
  HMODULE module = NULL;
  const char* name = strrchr(path, '\\') ? strrchr(path, '\\') + 1 : path;
  if (strrchr(name, '/')) name = strrchr(name, '/') + 1;
  module = GetModuleHandleA(name);
  return module != NULL;
#elif defined(RTLD_NOLOAD)
  void* again = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (again != NULL) dlclose(again);
  return again != NULL;
#else
  (void)path;
  return -1;
#endif
}

static any_function find_function(library_handle lib, const char* name) {
#if defined(_WIN32)
  return (any_function)GetProcAddress(lib, name);
#else
  /* POSIX guarantees that a function's address survives the trip through
   * void*; memcpy keeps ISO C (-pedantic) quiet about the conversion. */
  any_function f;
  void* symbol = dlsym(lib, name);
  memcpy(&f, &symbol, sizeof f);
  return f;
#endif
}

static void sleep_ms(int ms) {
#if defined(_WIN32)
  Sleep((DWORD)ms);
#else
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (long)(ms % 1000) * 1000000L;
  nanosleep(&ts, NULL);
#endif
}

static const char* const api_names[] = {KNN_API_NAMES};

typedef int (*version_fn)(void);
typedef const char* (*text_fn)(void);
typedef int (*build_fn)(const struct Point*, int, struct Node*);
typedef int (*query_fn)(const struct Point*, const struct Node*, int, int, int, int*);

static int passed = 0, failed = 0;

static void report(int ok, const char* what, const char* detail) {
  if (ok) {
    ++passed;
    printf("[ PASS ] %s\n", what);
  } else {
    ++failed;
    printf("[ FAIL ] %s: %s\n", what, detail);
  }
  fflush(stdout);
}

/* One load / use / unload cycle. */
static void cycle(const char* path, int round) {
  enum { N = 60000, M = 20000, K = 4 };
  char what[96];
  library_handle lib = open_library(path);
  size_t i, missing = 0;
  const char* first_missing = "";
  struct Point* points;
  struct Node* tree;
  int* result;
  int status = -1, resident;
  unsigned seed = 12345u;
  version_fn version;
  text_fn last_error;
  build_fn build;
  query_fn query;

  sprintf(what, "round %d: load %s", round, path);
  report(lib != NULL, what, "the library could not be loaded");
  if (lib == NULL) return;

  for (i = 0; i < sizeof api_names / sizeof api_names[0]; ++i)
    if (find_function(lib, api_names[i]) == NULL) {
      if (missing++ == 0) first_missing = api_names[i];
    }
  sprintf(what, "round %d: all %lu header functions resolve", round,
          (unsigned long)(sizeof api_names / sizeof api_names[0]));
  report(missing == 0, what, first_missing);

  version = (version_fn)find_function(lib, "knn_version");
  last_error = (text_fn)find_function(lib, "knn_last_error");
  build = (build_fn)find_function(lib, "mpBuildKdTree");
  query = (query_fn)find_function(lib, "mpQueryAll");
  if (version && last_error && build && query) {
    points = (struct Point*)malloc((size_t)N * sizeof *points);
    tree = (struct Node*)malloc((size_t)N * sizeof *tree);
    result = (int*)malloc((size_t)M * K * sizeof *result);
    if (points == NULL || tree == NULL || result == NULL) {
      printf("out of host memory\n");
      exit(2);
    }
    for (i = 0; i < 3 * (size_t)N; ++i) {
      seed = seed * 1664525u + 1013904223u;
      points[i / 3].p[i % 3] = (float)(seed >> 8) / 65536.0f;
    }
    status = version() == KNN_VERSION_NUMBER ? KNN_OK : -1;
    if (status == KNN_OK) status = build(points, N, tree);
    if (status == KNN_OK) status = query(points, tree, M, N, K, result);
    if (status == KNN_OK && (result[0] != 0 || result[(size_t)(M - 1) * K] != M - 1))
      status = -2; /* each query is a reference point: nearest is itself */
    sprintf(what, "round %d: multi-threaded build and query through the loaded symbols", round);
    report(status == KNN_OK, what, status == -2 ? "wrong neighbours" : last_error());
    free(points);
    free(tree);
    free(result);
  } else {
    report(0, "resolve knn_version/knn_last_error/mpBuildKdTree/mpQueryAll", "missing");
  }

  /* Unload right away, while worker threads may still be spinning in the
   * OpenMP runtime, then give them time to run: unmapped code would crash. */
  close_library(lib);
  resident = still_resident(path);
  printf("         library %s after unloading\n", resident < 0 ? "may stay mapped"
                                                  : resident   ? "stays mapped"
                                                               : "is unmapped");
  sleep_ms(300);
  sprintf(what, "round %d: unloaded while OpenMP threads wind down, still alive", round);
  report(1, what, "");
}

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : DEFAULT_LIBRARY;
  int round;
  for (round = 1; round <= 3; ++round) cycle(path, round);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
