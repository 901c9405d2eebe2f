// cli_support.h - what the tool's subcommands share (knn_cli.cpp,
// deviation.cpp): library errors as exceptions, the --backend names, and
// point files read with their notices shown.
#ifndef KNN_TOOLS_CLI_SUPPORT_H
#define KNN_TOOLS_CLI_SUPPORT_H

#include <cstdio>
#include <stdexcept>
#include <string>

#include "knn_gpgpu.h"
#include "point_io.h"

namespace knn_cli {

// A library call that failed: the status and knn_last_error() at the time.
// main() turns it into exit status 2 for KNN_ERR_UNSUPPORTED, else 1.
struct LibraryError : std::runtime_error {
  int status;
  LibraryError(const std::string& call, int st)
      : std::runtime_error(call + ": " + knn_status_string(st) + ": " + knn_last_error()),
        status(st) {}
};

inline void check(int status, const char* call) {
  if (status != KNN_OK) throw LibraryError(call, status);
}

// --backend: auto, cuda or openmp.
inline int backend_value(const std::string& name) {
  if (name == "cuda") return KNN_BACKEND_CUDA;
  if (name == "openmp") return KNN_BACKEND_OPENMP;
  return KNN_BACKEND_AUTO;
}

// A point file as the readers give it; what a reader chose for the user to
// know (the columns taken from a wider text file) goes to stderr, whether or
// not it is a terminal: results must not rest on a choice nobody saw.
inline PointTable read_table(const std::string& path, int min_dim, int max_dim,
                             Precision precision) {
  PointTable t = read_point_table(path, min_dim, max_dim, precision);
  if (!t.notice.empty()) std::fprintf(stderr, "knn-gpgpu: %s\n", t.notice.c_str());
  return t;
}

}  // namespace knn_cli

#endif
