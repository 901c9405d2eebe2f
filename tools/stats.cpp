// stats.cpp - see stats.h.
#include "stats.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "cli_support.h"
#include "io_util.h"
#include "knn_gpgpu.h"
#include "point_io.h"
#include "progress_bar.h"

namespace knn_cli {
namespace {

// The library's calls for an index of Scalar.
template <class Scalar>
struct StatsCalls;

template <>
struct StatsCalls<float> {
  static constexpr const char* kPrecision = "float32";
  static constexpr const char* kPlyType = "float";
  static constexpr const char* kFormat = "%.9g";  // reads back as the same float
  static int build(const float* p, int64_t n, const knn_options* o, knn_index** out) {
    return knn_index_build(p, n, 3, o, out);
  }
  static int normals(const knn_index* i, int k, const float* v, float* nrm, float* cur,
                     const knn_options* o) {
    return knn_index_normals(i, k, v, nrm, cur, o);
  }
  static int statistical(const knn_index* i, int k, double r, int32_t* kept, int64_t* n,
                         const knn_options* o) {
    return knn_index_statistical_inliers(i, k, r, kept, n, o);
  }
  static int radius(const knn_index* i, double r, int64_t c, int32_t* kept, int64_t* n,
                    const knn_options* o) {
    // A radius past float32's range is +infinity, as the float argument takes it.
    return knn_index_radius_inliers(i, static_cast<float>(r), c, kept, n, o);
  }
};

template <>
struct StatsCalls<double> {
  static constexpr const char* kPrecision = "float64";
  static constexpr const char* kPlyType = "double";
  static constexpr const char* kFormat = "%.17g";
  static int build(const double* p, int64_t n, const knn_options* o, knn_index** out) {
    return knn_index_build_f64(p, n, 3, o, out);
  }
  static int normals(const knn_index* i, int k, const double* v, double* nrm, double* cur,
                     const knn_options* o) {
    return knn_index_normals_f64(i, k, v, nrm, cur, o);
  }
  static int statistical(const knn_index* i, int k, double r, int32_t* kept, int64_t* n,
                         const knn_options* o) {
    return knn_index_statistical_inliers_f64(i, k, r, kept, n, o);
  }
  static int radius(const knn_index* i, double r, int64_t c, int32_t* kept, int64_t* n,
                    const knn_options* o) {
    return knn_index_radius_inliers_f64(i, r, c, kept, n, o);
  }
};

struct IndexDeleter {
  void operator()(knn_index* p) const { knn_index_free(p); }
};

// Output files: a PLY (binary little endian, one vertex element) or a text
// table (.xyz .txt .csv: a header line naming the columns, then one row per
// point), checked before any work is done.
bool is_ply_output(const std::string& path, const char* what) {
  const std::string ext = extension_of(path);
  if (ext == ".ply") return true;
  if (ext == ".xyz" || ext == ".txt" || ext == ".csv") return false;
  throw std::runtime_error(path + ": " + what + " must end in .ply, .xyz, .txt or .csv");
}

// Writes rows of columns: column c of point i is value(i, c), in Scalar.
// Blocks of 2^16 points, so a cloud of 10^8 points needs no second copy.
template <class Scalar, class Value>
void write_points(const std::string& path, const std::vector<std::string>& columns, int64_t n,
                  const std::string& comment, Value value) {
  const bool ply = extension_of(path) == ".ply";
  struct Closer {
    std::FILE* f;
    ~Closer() {
      if (f) std::fclose(f);
    }
  } file{std::fopen(path.c_str(), ply ? "wb" : "w")};
  std::FILE* f = file.f;
  if (!f) throw std::runtime_error(path + ": cannot create (" + std::strerror(errno) + ")");
  std::string header;
  const char sep = extension_of(path) == ".csv" ? ',' : ' ';
  if (ply) {
    header = "ply\nformat binary_little_endian 1.0\ncomment " + comment + "\nelement vertex " +
             std::to_string(n) + "\n";
    for (const std::string& c : columns)
      header += std::string("property ") + StatsCalls<Scalar>::kPlyType + " " + c + "\n";
    header += "end_header\n";
  } else {
    for (size_t c = 0; c < columns.size(); ++c)
      header += (c ? std::string(1, sep) : "") + columns[c];
    header += "\n";
  }
  bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size();
  const bool swap = !io::host_is_little_endian();
  const size_t cols = columns.size();
  constexpr int64_t kBlock = 1 << 16;
  std::string buf;
  for (int64_t start = 0; start < n && ok; start += kBlock) {
    buf.clear();
    for (int64_t i = start; i < std::min(n, start + kBlock); ++i) {
      for (size_t c = 0; c < cols; ++c) {
        const Scalar v = value(i, c);
        if (ply) {
          char b[sizeof v];
          std::memcpy(b, &v, sizeof v);
          if (swap) std::reverse(b, b + sizeof v);
          buf.append(b, sizeof v);
        } else {
          char text[40];
          std::snprintf(text, sizeof text, StatsCalls<Scalar>::kFormat, static_cast<double>(v));
          if (c) buf += sep;
          buf += text;
        }
      }
      if (!ply) buf += '\n';
    }
    ok = std::fwrite(buf.data(), 1, buf.size(), f) == buf.size();
  }
  file.f = nullptr;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) throw std::runtime_error(path + ": write error");
}

template <class Scalar>
std::unique_ptr<knn_index, IndexDeleter> build_index(const std::vector<Scalar>& points,
                                                     const std::string& backend, knn_options* opt,
                                                     ProgressReporter& progress) {
  knn_options_init(opt);
  opt->backend = backend_value(backend);
  const int64_t n = static_cast<int64_t>(points.size() / 3);
  progress.step("building the index of " + std::to_string(n) + " points (" + backend + ", " +
                StatsCalls<Scalar>::kPrecision + ")");
  knn_index* raw = nullptr;
  check(StatsCalls<Scalar>::build(points.data(), n, opt, &raw),
        sizeof(Scalar) == 8 ? "knn_index_build_f64" : "knn_index_build");
  return std::unique_ptr<knn_index, IndexDeleter>(raw);
}

std::string backend_of(const knn_index* index) {
  int backend = 0;
  check(knn_index_info(index, nullptr, nullptr, &backend, nullptr), "knn_index_info");
  return backend == KNN_BACKEND_CUDA ? "cuda" : backend == KNN_BACKEND_OPENMP ? "openmp" : "?";
}

template <class Scalar>
int normals_in(const NormalsArgs& a, const PointTable& cloud, ProgressReporter& progress) {
  const std::vector<Scalar> points(cloud.coords.begin(), cloud.coords.end());
  const int64_t n = cloud.size();
  knn_options opt;
  const auto index = build_index(points, a.backend, &opt, progress);
  std::vector<Scalar> viewpoint(a.viewpoint.begin(), a.viewpoint.end());
  std::vector<Scalar> normals(static_cast<size_t>(n) * 3), curvature(static_cast<size_t>(n));
  progress.step("normals of " + std::to_string(n) + " points, k=" + std::to_string(a.k) +
                (viewpoint.empty() ? ", oriented over the cloud" : ", towards the viewpoint"));
  check(
      StatsCalls<Scalar>::normals(index.get(), a.k, viewpoint.empty() ? nullptr : viewpoint.data(),
                                  normals.data(), curvature.data(), &opt),
      sizeof(Scalar) == 8 ? "knn_index_normals_f64" : "knn_index_normals");
  std::printf("normals of %lld points, k=%d, %s, %s, %s\n", static_cast<long long>(n), a.k,
              StatsCalls<Scalar>::kPrecision, backend_of(index.get()).c_str(),
              viewpoint.empty() ? "oriented consistently over the cloud"
                                : "oriented towards the viewpoint");
  std::fflush(stdout);
  progress.step("writing " + a.out);
  write_points<Scalar>(
      a.out, {"x", "y", "z", "nx", "ny", "nz", "curvature"}, n,
      "knn-gpgpu normals: k " + std::to_string(a.k) + ", curvature l0 / (l0 + l1 + l2)",
      [&](int64_t i, size_t c) {
        const size_t at = static_cast<size_t>(i) * 3 + c;
        return c < 3 ? points[at] : c < 6 ? normals[at - 3] : curvature[static_cast<size_t>(i)];
      });
  progress.step("done");
  return 0;
}

template <class Scalar>
int outliers_in(const OutliersArgs& a, const PointTable& cloud, ProgressReporter& progress) {
  const std::vector<Scalar> points(cloud.coords.begin(), cloud.coords.end());
  const int64_t n = cloud.size();
  knn_options opt;
  const auto index = build_index(points, a.backend, &opt, progress);
  std::vector<int32_t> kept(static_cast<size_t>(n));
  int64_t n_kept = 0;
  std::string rule;
  if (!a.by_radius) {
    char text[64];
    std::snprintf(text, sizeof text, "%g", a.std_ratio);
    rule = "mean distance to the " + std::to_string(a.k) + " nearest others <= mean + " + text +
           " x std over the cloud";
    progress.step("statistical outliers of " + std::to_string(n) +
                  " points, k=" + std::to_string(a.k));
    check(
        StatsCalls<Scalar>::statistical(index.get(), a.k, a.std_ratio, kept.data(), &n_kept, &opt),
        sizeof(Scalar) == 8 ? "knn_index_statistical_inliers_f64"
                            : "knn_index_statistical_inliers");
  } else {
    char text[64];
    std::snprintf(text, sizeof text, "%.9g", a.radius);
    rule = "at least " + std::to_string(a.min_neighbours) + " others within " + text;
    progress.step("radius outliers of " + std::to_string(n) + " points");
    check(StatsCalls<Scalar>::radius(index.get(), a.radius, a.min_neighbours, kept.data(), &n_kept,
                                     &opt),
          sizeof(Scalar) == 8 ? "knn_index_radius_inliers_f64" : "knn_index_radius_inliers");
  }
  std::printf("kept %lld of %lld points, dropped %lld (%s; %s, %s)\n",
              static_cast<long long>(n_kept), static_cast<long long>(n),
              static_cast<long long>(n - n_kept), rule.c_str(), StatsCalls<Scalar>::kPrecision,
              backend_of(index.get()).c_str());
  std::fflush(stdout);
  progress.step("writing " + a.out);
  write_points<Scalar>(a.out, {"x", "y", "z"}, n_kept,
                       "knn-gpgpu outliers: the points kept (" + rule + ")",
                       [&](int64_t i, size_t c) {
                         return points[static_cast<size_t>(kept[static_cast<size_t>(i)]) * 3 + c];
                       });
  progress.step("done");
  return 0;
}

PointTable read_cloud(const std::string& path, bool f64, ProgressReporter& progress) {
  progress.step("reading " + path);
  PointTable cloud = read_table(path, 3, 3, f64 ? Precision::Float64 : Precision::Float32);
  progress.step("read " + std::to_string(cloud.size()) + " points");
  return cloud;
}

}  // namespace

int run_normals(const NormalsArgs& a) {
  ProgressReporter progress(progress_mode(a.progress));
  if (a.k < 1) throw std::runtime_error("--k must be at least 1");
  if (!a.viewpoint.empty()) {
    if (a.viewpoint.size() != 3) throw std::runtime_error("--viewpoint takes x,y,z");
    for (const double v : a.viewpoint)
      if (!std::isfinite(v)) throw std::runtime_error("--viewpoint: coordinates must be finite");
  }
  is_ply_output(a.out, "the output");
  const PointTable cloud = read_cloud(a.in, a.f64, progress);
  return a.f64 ? normals_in<double>(a, cloud, progress) : normals_in<float>(a, cloud, progress);
}

int run_outliers(const OutliersArgs& a) {
  ProgressReporter progress(progress_mode(a.progress));
  if (!a.by_radius && a.k < 1)
    throw std::runtime_error(
        "give one rule: --k K [--std S] (statistical) or --radius R --min-neighbours C (radius)");
  if (!a.by_radius && !std::isfinite(a.std_ratio))
    throw std::runtime_error("--std must be a finite number");
  if (a.by_radius && !(a.radius >= 0))
    throw std::runtime_error("--radius must be a number >= 0 (or inf)");
  if (a.by_radius && a.min_neighbours < 0)
    throw std::runtime_error("--min-neighbours must be at least 0");
  is_ply_output(a.out, "the output");
  const PointTable cloud = read_cloud(a.in, a.f64, progress);
  return a.f64 ? outliers_in<double>(a, cloud, progress) : outliers_in<float>(a, cloud, progress);
}

}  // namespace knn_cli
