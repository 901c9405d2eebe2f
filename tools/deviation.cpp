// deviation.cpp - see deviation.h.
#include "deviation.h"

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
#include "mesh_io.h"
#include "point_io.h"
#include "progress_bar.h"

namespace knn_cli {
namespace {

// The most histogram bins: a picture of 800 pixels shows no more.
constexpr int kMaxBins = 10000;

// The library's calls for a mesh of Scalar.
template <class Scalar>
struct MeshCalls;

template <>
struct MeshCalls<float> {
  static constexpr const char* kBuild = "knn_mesh_build";
  static constexpr const char* kReport = "knn_mesh_deviation_report";
  static constexpr const char* kPrecision = "float32";
  static constexpr const char* kFormat = "%.9g";  // reads back as the same float
  static constexpr const char* kPlyType = "float";
  static int build(const float* v, int64_t nv, const int32_t* t, int64_t nt, const knn_options* o,
                   knn_mesh** out) {
    return knn_mesh_build(v, nv, t, nt, o, out);
  }
  static constexpr const char* kAlign = "knn_mesh_align_ex";
  static int align(const knn_mesh* mesh, const float* p, int64_t m, const knn_align_params* a,
                   knn_align_result* r, const knn_options* o) {
    return knn_mesh_align_ex(mesh, p, m, nullptr, a, r, o);
  }
  static int report(const knn_mesh* mesh, const float* p, int64_t m, double max_distance,
                    double tolerance, const double* pct, int n_pct, double* pct_values,
                    const double* edges, int n_bins, int64_t* counts, float* signed_distances,
                    knn_deviation_report* r, const knn_options* o) {
    // A max distance past float32's range is no limit, as +infinity is.
    return knn_mesh_deviation_report(mesh, p, m, static_cast<float>(max_distance), tolerance, pct,
                                     n_pct, pct_values, edges, n_bins, counts, signed_distances, r,
                                     o);
  }
};

template <>
struct MeshCalls<double> {
  static constexpr const char* kBuild = "knn_mesh_build_f64";
  static constexpr const char* kReport = "knn_mesh_deviation_report_f64";
  static constexpr const char* kPrecision = "float64";
  static constexpr const char* kFormat = "%.17g";
  static constexpr const char* kPlyType = "double";
  static int build(const double* v, int64_t nv, const int32_t* t, int64_t nt, const knn_options* o,
                   knn_mesh** out) {
    return knn_mesh_build_f64(v, nv, t, nt, o, out);
  }
  static constexpr const char* kAlign = "knn_mesh_align_ex_f64";
  static int align(const knn_mesh* mesh, const double* p, int64_t m, const knn_align_params* a,
                   knn_align_result* r, const knn_options* o) {
    return knn_mesh_align_ex_f64(mesh, p, m, nullptr, a, r, o);
  }
  static int report(const knn_mesh* mesh, const double* p, int64_t m, double max_distance,
                    double tolerance, const double* pct, int n_pct, double* pct_values,
                    const double* edges, int n_bins, int64_t* counts, double* signed_distances,
                    knn_deviation_report* r, const knn_options* o) {
    return knn_mesh_deviation_report_f64(mesh, p, m, max_distance, tolerance, pct, n_pct,
                                         pct_values, edges, n_bins, counts, signed_distances, r, o);
  }
};

struct MeshDeleter {
  void operator()(knn_mesh* m) const { knn_mesh_free(m); }
};

std::string number(double v, const char* format) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// The fewest digits that read back as v (0.05, not 0.050000000000000003).
std::string shortest(double v) {
  for (int digits = 1; digits < 17; ++digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) return buf;
  }
  return number(v, "%.17g");
}

// "950 (95.00 %)" of the measured points.
std::string count_share(int64_t count, int64_t of) {
  char buf[64];
  std::snprintf(buf, sizeof buf, " (%.2f %%)", of > 0 ? 100.0 * count / of : 0.0);
  return std::to_string(count) + (of > 0 ? buf : "");
}

void print_line(const std::string& key, const std::string& value) {
  std::printf("%-14s%s\n", key.c_str(), value.c_str());
}

std::string backend_name(int backend) {
  return backend == KNN_BACKEND_CUDA ? "cuda" : backend == KNN_BACKEND_OPENMP ? "openmp" : "?";
}

// ---- Alignment -------------------------------------------------------------------------
// Fits the scan to the mesh, prints the fit, and moves the scan's points (in
// double, then rounded to Scalar into `points`; `moved` gets the double
// coordinates for --out).
template <class Scalar>
void align_scan(const DeviationArgs& a, const knn_mesh* mesh, const knn_options& opt,
                std::vector<Scalar>* points, PointTable* moved, ProgressReporter& progress) {
  using Calls = MeshCalls<Scalar>;
  const int64_t m = static_cast<int64_t>(points->size() / 3);
  knn_align_params params;
  std::memset(&params, 0, sizeof params);
  params.struct_size = sizeof params;
  params.max_correspondence = a.max_distance;  // 0: every point, as +infinity
  params.max_iterations = a.align_iterations;
  params.kept_fraction = a.align_keep;
  knn_align_result r;
  std::memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  progress.step("aligning " + std::to_string(m) + " points to the design");
  check(Calls::align(mesh, points->data(), m, &params, &r, &opt), Calls::kAlign);
  print_line("aligned", r.converged ? "yes, " + std::to_string(r.iterations) + " iterations"
                                    : "NO: not converged after " + std::to_string(r.iterations) +
                                          " iterations (the report below is of the transform "
                                          "reached)");
  if (!r.converged)
    std::fprintf(stderr, "knn-gpgpu: the alignment did not converge (%d iterations)\n",
                 r.iterations);
  print_line("align_rms", number(r.rms, "%.9g"));
  print_line("align_kept", std::to_string(r.n_kept));
  static const char* const kDirections[] = {"rotation x",    "rotation y",    "rotation z",
                                            "translation x", "translation y", "translation z"};
  std::string unobserved;
  for (int k = 0; k < 6; ++k)
    if (r.degenerate_directions & (1 << k))
      unobserved += (unobserved.empty() ? "" : ", ") + std::string(kDirections[k]);
  if (!unobserved.empty()) print_line("unobserved", unobserved + " (left as they were)");
  for (int row = 0; row < 4; ++row) {
    std::string line;
    for (int col = 0; col < 4; ++col)
      line += (col ? " " : "") + number(r.transform[4 * row + col], "%.17g");
    print_line(row == 0 ? "transform" : "", line);
  }
  for (int64_t i = 0; i < m; ++i) {
    const double* x = moved->coords.data() + 3 * i;
    double y[3];
    for (int k = 0; k < 3; ++k)
      y[k] = r.transform[4 * k] * x[0] + r.transform[4 * k + 1] * x[1] +
             r.transform[4 * k + 2] * x[2] + r.transform[4 * k + 3];
    for (int k = 0; k < 3; ++k) {
      moved->coords[static_cast<size_t>(3 * i + k)] = y[k];
      (*points)[static_cast<size_t>(3 * i + k)] = static_cast<Scalar>(y[k]);
    }
  }
}

// ---- The per-point PLY ---------------------------------------------------------------
// Binary little endian: x y z and the deviation in the precision computed,
// then the colour; written in blocks, so a scan of 10^8 points needs no
// second copy of itself.
template <class Scalar>
void write_deviation_ply(const std::string& path, const PointTable& scan, const Scalar* d,
                         double tolerance, double range) {
  struct Closer {
    std::FILE* f;
    ~Closer() {
      if (f) std::fclose(f);
    }
  } file{std::fopen(path.c_str(), "wb")};
  std::FILE* f = file.f;
  if (!f) throw std::runtime_error(path + ": cannot create (" + std::strerror(errno) + ")");
  const int64_t m = scan.size();
  const char* t = MeshCalls<Scalar>::kPlyType;
  const std::string header =
      std::string(
          "ply\nformat binary_little_endian 1.0\ncomment knn-gpgpu deviation: signed "
          "distance to the design, negative inside; tolerance ") +
      shortest(tolerance) + ", colour range " + shortest(range) + "\nelement vertex " +
      std::to_string(m) + "\nproperty " + t + " x\nproperty " + t + " y\nproperty " + t +
      " z\nproperty " + t +
      " deviation\nproperty uchar red\nproperty uchar green\nproperty uchar blue\nend_header\n";
  bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size();
  const bool swap = !io::host_is_little_endian();
  auto put = [&](std::vector<char>* buf, auto v) {
    char b[sizeof v];
    std::memcpy(b, &v, sizeof v);
    if (swap) std::reverse(b, b + sizeof v);
    buf->insert(buf->end(), b, b + sizeof v);
  };
  constexpr int64_t kBlock = 1 << 16;
  std::vector<char> buf;
  for (int64_t start = 0; start < m && ok; start += kBlock) {
    buf.clear();
    for (int64_t i = start; i < std::min(m, start + kBlock); ++i) {
      for (int k = 0; k < 3; ++k)
        put(&buf, static_cast<Scalar>(scan.coords[static_cast<size_t>(i) * 3 + k]));
      put(&buf, d[i]);
      const Rgb c = deviation_colour(d[i], tolerance, range);
      put(&buf, c.r);
      put(&buf, c.g);
      put(&buf, c.b);
    }
    ok = std::fwrite(buf.data(), 1, buf.size(), f) == buf.size();
  }
  file.f = nullptr;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) throw std::runtime_error(path + ": write error");
}

// ---- The histogram picture -----------------------------------------------------------
std::string xml_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += static_cast<unsigned char>(c) < 0x20 ? '?' : c;
    }
  }
  return out;
}

std::string hex(Rgb c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
  return buf;
}

// Bars of the bins over [-R, R] (coloured as the points are), the points
// below and above that range as grey bars at the sides, dashed lines at
// -t and +t, counts in each bar's data-count and tooltip.
void write_histogram_svg(const std::string& path, const std::string& title,
                         const std::vector<double>& edges, const std::vector<int64_t>& counts,
                         const knn_deviation_report& r, double tolerance, double range) {
  constexpr double kWidth = 900, kHeight = 480;
  constexpr double x0 = 110, x1 = 790, y0 = 60, y1 = 400;  // the plot's frame
  auto x_of = [&](double v) { return x0 + (v + range) / (2 * range) * (x1 - x0); };
  int64_t top = std::max<int64_t>({1, r.n_below_bins, r.n_above_bins});
  for (const int64_t c : counts) top = std::max(top, c);
  constexpr double y_top = y0 + 16;  // the tallest bar's top: room for its count above
  auto height = [&](int64_t c) {
    return static_cast<double>(c) / static_cast<double>(top) * (y1 - y_top);
  };
  auto fmt = [](double v) { return number(v, "%.6g"); };
  auto px = [](double v) { return number(v, "%.2f"); };

  TextFile f(path);
  f.line("<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
  f.line("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + px(kWidth) + "\" height=\"" +
         px(kHeight) + "\" viewBox=\"0 0 " + px(kWidth) + " " + px(kHeight) +
         "\" font-family=\"sans-serif\" font-size=\"12\">");
  f.line("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
  f.line("<text x=\"" + px(kWidth / 2) + "\" y=\"28\" text-anchor=\"middle\" font-size=\"15\">" +
         xml_escape(title) + "</text>");
  f.line("<text x=\"" + px(kWidth / 2) + "\" y=\"46\" text-anchor=\"middle\">" +
         std::to_string(r.n_measured) +
         " measured points: " + count_share(r.n_within_tolerance, r.n_measured) + " within &#177;" +
         fmt(tolerance) + ", " + count_share(r.n_above_tolerance, r.n_measured) + " above, " +
         count_share(r.n_below_tolerance, r.n_measured) + " below</text>");
  for (size_t b = 0; b < counts.size(); ++b) {
    const double left = x_of(edges[b]), right = x_of(edges[b + 1]), h = height(counts[b]);
    const Rgb c = deviation_colour((edges[b] + edges[b + 1]) / 2, tolerance, range);
    f.line("<rect class=\"bin\" x=\"" + px(left) + "\" y=\"" + px(y1 - h) + "\" width=\"" +
           px(right - left) + "\" height=\"" + px(h) + "\" fill=\"" + hex(c) +
           "\" stroke=\"white\" stroke-width=\"0.5\" data-from=\"" + shortest(edges[b]) +
           "\" data-to=\"" + shortest(edges[b + 1]) + "\" data-count=\"" +
           std::to_string(counts[b]) + "\"><title>[" + fmt(edges[b]) + ", " + fmt(edges[b + 1]) +
           (b + 1 == counts.size() ? "]" : ")") + ": " + std::to_string(counts[b]) +
           " points</title></rect>");
    // The count over its bar, where the bar is wide enough to hold it.
    if (right - left >= 28 && counts[b] > 0)
      f.line("<text class=\"bin-count\" x=\"" + px((left + right) / 2) + "\" y=\"" +
             px(y1 - h - 4) + "\" text-anchor=\"middle\" font-size=\"10\">" +
             std::to_string(counts[b]) + "</text>");
  }
  // The points outside [-R, R], beside the frame.
  const struct {
    const char* cls;
    int64_t count;
    double left;
    std::string label;
  } outside[] = {{"below-range", r.n_below_bins, x0 - 70, "< " + fmt(-range)},
                 {"above-range", r.n_above_bins, x1 + 30, "> " + fmt(range)}};
  for (const auto& o : outside) {
    const double h = height(o.count);
    f.line("<rect class=\"" + std::string(o.cls) + "\" x=\"" + px(o.left) + "\" y=\"" + px(y1 - h) +
           "\" width=\"40\" height=\"" + px(h) + "\" fill=\"#999999\" data-count=\"" +
           std::to_string(o.count) + "\"><title>" + xml_escape(o.label) + ": " +
           std::to_string(o.count) + " points</title></rect>");
    f.line("<text x=\"" + px(o.left + 20) + "\" y=\"" + px(y1 + 18) + "\" text-anchor=\"middle\">" +
           xml_escape(o.label) + "</text>");
  }
  // Frame, axis labels, zero and the tolerance lines.
  f.line("<rect x=\"" + px(x0) + "\" y=\"" + px(y0) + "\" width=\"" + px(x1 - x0) + "\" height=\"" +
         px(y1 - y0) + "\" fill=\"none\" stroke=\"#333333\"/>");
  f.line("<text x=\"" + px(x0 - 6) + "\" y=\"" + px(y_top + 4) + "\" text-anchor=\"end\">" +
         std::to_string(top) + "</text>");
  f.line("<text x=\"" + px(x0 - 6) + "\" y=\"" + px(y1) + "\" text-anchor=\"end\">0</text>");
  f.line("<line x1=\"" + px(x_of(0)) + "\" y1=\"" + px(y0) + "\" x2=\"" + px(x_of(0)) + "\" y2=\"" +
         px(y1) + "\" stroke=\"#333333\" stroke-width=\"0.5\"/>");
  std::vector<double> ticks = {-range, 0, range};
  if (tolerance > 0 && tolerance < range) {
    ticks.push_back(-tolerance);
    ticks.push_back(tolerance);
    for (const double t : {-tolerance, tolerance})
      f.line("<line class=\"tolerance\" data-value=\"" + shortest(t) + "\" x1=\"" + px(x_of(t)) +
             "\" y1=\"" + px(y0) + "\" x2=\"" + px(x_of(t)) + "\" y2=\"" + px(y1) +
             "\" stroke=\"#cc0000\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/>");
  }
  for (const double t : ticks)
    f.line("<text x=\"" + px(x_of(t)) + "\" y=\"" + px(y1 + 18) + "\" text-anchor=\"middle\">" +
           fmt(t) + "</text>");
  f.line("<text x=\"" + px((x0 + x1) / 2) + "\" y=\"" + px(y1 + 44) +
         "\" text-anchor=\"middle\">signed deviation (negative inside the design)</text>");
  f.line("</svg>");
  f.close();
}

template <class Scalar>
int deviation_in(const DeviationArgs& a, const PointTable& scan, const TriangleMesh& design,
                 double range, ProgressReporter& progress) {
  using Calls = MeshCalls<Scalar>;
  const int64_t m = scan.size();
  std::vector<Scalar> points(scan.coords.begin(), scan.coords.end());
  const std::vector<Scalar> vertices(design.vertices.begin(), design.vertices.end());
  knn_options opt;
  knn_options_init(&opt);
  opt.backend = backend_value(a.backend);
  progress.step("building the mesh of " + std::to_string(design.triangle_count()) + " triangles (" +
                a.backend + ", " + Calls::kPrecision + ")");
  knn_mesh* raw = nullptr;
  check(Calls::build(vertices.data(), design.vertex_count(), design.triangles.data(),
                     design.triangle_count(), &opt, &raw),
        Calls::kBuild);
  const std::unique_ptr<knn_mesh, MeshDeleter> mesh(raw);
  int64_t n_vertices = 0, n_triangles = 0;
  int scalar = 0, backend = 0, closed = 0;
  check(knn_mesh_info(mesh.get(), &n_vertices, &n_triangles, &scalar, &backend, &closed),
        "knn_mesh_info");

  // The scan as measured: moved by the fit with --align.
  PointTable aligned;
  if (a.align) {
    aligned = scan;
    align_scan(a, mesh.get(), opt, &points, &aligned, progress);
  }
  const PointTable& measured = a.align ? aligned : scan;

  const int n_pct = static_cast<int>(sizeof kDeviationPercentiles / sizeof(double));
  std::vector<double> pct_values(static_cast<size_t>(n_pct));
  const int n_bins = a.histogram.empty() ? 0 : a.bins;
  std::vector<double> edges;
  std::vector<int64_t> counts(static_cast<size_t>(n_bins));
  if (n_bins > 0) {
    for (int b = 0; b <= n_bins; ++b) edges.push_back(-range + 2 * range * b / n_bins);
    edges.back() = range;
  }
  std::vector<Scalar> signed_distances(a.out.empty() ? 0 : static_cast<size_t>(m));
  knn_deviation_report r;
  std::memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  progress.step("deviation of " + std::to_string(m) + " points");
  check(Calls::report(mesh.get(), points.data(), m, a.max_distance, a.tolerance,
                      kDeviationPercentiles, n_pct, pct_values.data(),
                      n_bins ? edges.data() : nullptr, n_bins, n_bins ? counts.data() : nullptr,
                      a.out.empty() ? nullptr : signed_distances.data(), &r, &opt),
        Calls::kReport);

  const char* format = Calls::kFormat;
  print_line("scan", a.scan + ": " + std::to_string(m) + " points");
  print_line("design", a.design + ": " + std::to_string(n_vertices) + " vertices, " +
                           std::to_string(n_triangles) + " triangles, " +
                           (closed ? "closed and oriented (signs from pseudonormals)"
                                   : "not closed and oriented (signs from the winding number)"));
  print_line("computed", std::string(Calls::kPrecision) + ", " + backend_name(backend));
  print_line("max_distance", std::isinf(a.max_distance) ? "inf" : shortest(a.max_distance));
  print_line("measured", std::to_string(r.n_measured));
  print_line("beyond", std::to_string(r.n_beyond));
  print_line("min", number(r.min, format));
  print_line("max", number(r.max, format));
  print_line("mean", number(r.mean, format));
  print_line("rms", number(r.rms, format));
  for (int i = 0; i < n_pct; ++i)
    print_line("p" + number(kDeviationPercentiles[i], "%g"), number(pct_values[i], format));
  print_line("tolerance", shortest(a.tolerance));
  print_line("within", count_share(r.n_within_tolerance, r.n_measured));
  print_line("above", count_share(r.n_above_tolerance, r.n_measured));
  print_line("below", count_share(r.n_below_tolerance, r.n_measured));
  std::fflush(stdout);

  if (!a.out.empty()) {
    progress.step("writing " + a.out);
    write_deviation_ply(a.out, measured, signed_distances.data(), a.tolerance, range);
  }
  if (!a.histogram.empty()) {
    progress.step("writing " + a.histogram);
    write_histogram_svg(a.histogram, "Deviation of " + a.scan + " from " + a.design, edges, counts,
                        r, a.tolerance, range);
  }
  progress.step("done");
  return 0;
}

}  // namespace

double deviation_range(const DeviationArgs& a) {
  if (a.range != 0) {
    if (!(a.range > 0) || !std::isfinite(a.range))
      throw std::runtime_error("--range must be a finite number > 0");
    return a.range;
  }
  const double from_tolerance =
      a.tolerance > 0 ? 4 * a.tolerance : std::numeric_limits<double>::infinity();
  const double r = std::min(from_tolerance, a.max_distance);
  if (!(r > 0) || !std::isfinite(r))
    throw std::runtime_error(
        "the histogram and the colours span [-R, R], R = min(4 x --tol, --max-distance), and "
        "that is not a positive finite number here: give --range R");
  return r;
}

Rgb deviation_colour(double d, double tolerance, double range) {
  if (!std::isfinite(d)) return {128, 128, 128};
  const double magnitude = std::fabs(d);
  if (magnitude <= tolerance) return {0, 255, 0};
  const double s =
      range > tolerance ? std::min(1.0, (magnitude - tolerance) / (range - tolerance)) : 1.0;
  const uint8_t fade = static_cast<uint8_t>(std::lround(255 * (1 - s)));
  return d > 0 ? Rgb{255, fade, 0} : Rgb{0, fade, 255};
}

int run_deviation(const DeviationArgs& a) {
  ProgressReporter progress(progress_mode(a.progress));
  if (!(a.tolerance >= 0) || !std::isfinite(a.tolerance))
    throw std::runtime_error("--tol must be a finite number >= 0");
  if (!(a.max_distance >= 0))
    throw std::runtime_error("--max-distance must be a number >= 0 (or inf, the default)");
  if (!(a.align_keep > 0 && a.align_keep <= 1))
    throw std::runtime_error("--align-keep must lie in (0, 1]");
  if (a.align_iterations < 1) throw std::runtime_error("--align-iterations must be at least 1");
  if (a.bins < 1 || a.bins > kMaxBins)
    throw std::runtime_error("--bins must be from 1 to " + std::to_string(kMaxBins));
  if (!a.out.empty() && extension_of(a.out) != ".ply")
    throw std::runtime_error(a.out + ": --out must end in .ply");
  if (!a.histogram.empty() && extension_of(a.histogram) != ".svg")
    throw std::runtime_error(a.histogram + ": --histogram must end in .svg");
  // Checked before any work: a run of minutes should not fail at the end.
  const double range =
      a.out.empty() && a.histogram.empty() && a.range == 0 ? 0 : deviation_range(a);

  const Precision precision = a.f64 ? Precision::Float64 : Precision::Float32;
  progress.step("reading " + a.scan);
  const PointTable scan = read_table(a.scan, 3, 3, precision);
  progress.step("reading " + a.design);
  const TriangleMesh design = read_mesh(a.design, precision);
  if (!design.notice.empty()) std::fprintf(stderr, "knn-gpgpu: %s\n", design.notice.c_str());
  progress.step("read " + std::to_string(scan.size()) + " points and " +
                std::to_string(design.triangle_count()) + " triangles");
  return a.f64 ? deviation_in<double>(a, scan, design, range, progress)
               : deviation_in<float>(a, scan, design, range, progress);
}

}  // namespace knn_cli
