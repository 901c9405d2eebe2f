// Deterministic meshes and scans for the mesh benchmark (issue 48, item 8),
// shared by bench_mesh and the peer drivers in bench/peers_mesh, so that every
// contender answers the same points on the same triangles; plus the float64
// oracle every contender is checked against.
//
// Meshes (named by a spec):
//   torus-N   a UV torus (R = 1, r = 0.35) of about N triangles, vertices on
//             the analytic surface (no noise), closed and outward oriented
//   bumpy-N   a closed UV sphere of about N triangles whose radius carries
//             smooth bumps (1 + 0.12 sin(7 phi) sin^2(theta) cos(5 theta)),
//             outward oriented, one vertex at each pole
//   PATH.off  a mesh read from an OFF file (the real scanned mesh: the
//             Stanford bunny of Debian's libcgal-demo, data/meshes/bunny00.off)
// N is a count such as 1e6.
//
// Scans: n points, 99 % of them on the surface (a triangle chosen with
// probability proportional to its area, a uniform point of it) moved along
// the triangle's normal by Gaussian noise of sigma 0.002 x the bounding-box
// diagonal; 1 % far outliers, uniform in direction at 1 to 2 diagonals from
// the box centre. Point i depends only on (seed, i).
//
// The oracle: the squared distance of kOracleSamples sampled scan points to
// the mesh, in float64 over all triangles (a box test first, which skips no
// triangle that could be nearer), with its own closest-point arithmetic:
// the least of the three edge distances and, when the projection falls in
// the triangle, the plane distance.
//
// Files (native little-endian), written once per data folder so that the
// Python peer reads the same data:
//   <mesh>.mesh            int64 n_vertices, int64 n_triangles,
//                          float32 vertices[n_vertices][3], int32 triangles[n_triangles][3]
//   <mesh>_x_<n>.scan      int64 n, float32 points[n][3]
//   <mesh>_x_<n>.oracle    int64 count, int64 index[count], float64 sq_distance[count]
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "datasets.h"

namespace knn_bench {
namespace mesh {

constexpr uint64_t kScanSeed = 48;
constexpr int64_t kOracleSamples = 1000;
constexpr double kPi = 3.14159265358979323846;

struct Mesh {
  std::string name;
  std::vector<float> vertices;     // n_vertices x 3
  std::vector<int32_t> triangles;  // n_triangles x 3
  int64_t n_vertices() const { return static_cast<int64_t>(vertices.size() / 3); }
  int64_t n_triangles() const { return static_cast<int64_t>(triangles.size() / 3); }
};

// "1e6", "1000000": a positive whole count; throws otherwise.
inline int64_t parse_count(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(v >= 1) || v > 4e9 || v != std::floor(v))
    throw std::runtime_error("bad count '" + text + "'");
  return static_cast<int64_t>(v);
}

// The short name of a count in file and row names: 1e6 for 1000000, else digits.
inline std::string count_name(int64_t n) {
  int exponent = 0;
  int64_t rest = n;
  while (rest >= 10 && rest % 10 == 0) {
    rest /= 10;
    ++exponent;
  }
  if (exponent < 3) return std::to_string(n);
  return std::to_string(rest) + "e" + std::to_string(exponent);
}

// A grid of nu x nv vertices, periodic in u, turned into triangles: quad
// (i, j) (i along u, j along v) gives (i,j) (i+1,j) (i+1,j+1) and
// (i,j) (i+1,j+1) (i,j+1), which face the side of du x dv.
inline void add_grid_triangles(std::vector<int32_t>& triangles, int64_t first, int64_t nu,
                               int64_t nv, bool periodic_v) {
  const int64_t quads_v = periodic_v ? nv : nv - 1;
  auto at = [&](int64_t i, int64_t j) {
    return static_cast<int32_t>(first + (i % nu) * nv + (j % nv));
  };
  for (int64_t i = 0; i < nu; ++i)
    for (int64_t j = 0; j < quads_v; ++j) {
      const int32_t v00 = at(i, j), v10 = at(i + 1, j), v11 = at(i + 1, j + 1), v01 = at(i, j + 1);
      triangles.insert(triangles.end(), {v00, v10, v11, v00, v11, v01});
    }
}

// The torus: p(u, v) = ((R + r cos v) cos u, (R + r cos v) sin u, r sin v);
// dp/du x dp/dv points outward. 2 nu nv triangles with nu / nv = R / r.
inline Mesh make_torus(int64_t target_triangles) {
  const double R = 1.0, r = 0.35;
  const int64_t nv = std::max<int64_t>(3, std::llround(std::sqrt(target_triangles * r / (2 * R))));
  const int64_t nu = std::max<int64_t>(3, std::llround(target_triangles / (2.0 * nv)));
  Mesh mesh;
  mesh.name = "torus-" + count_name(target_triangles);
  mesh.vertices.resize(static_cast<size_t>(3 * nu * nv));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < nu; ++i)
    for (int64_t j = 0; j < nv; ++j) {
      const double u = 2 * kPi * i / nu, v = 2 * kPi * j / nv;
      float* p = &mesh.vertices[static_cast<size_t>(3 * (i * nv + j))];
      p[0] = static_cast<float>((R + r * std::cos(v)) * std::cos(u));
      p[1] = static_cast<float>((R + r * std::cos(v)) * std::sin(u));
      p[2] = static_cast<float>(r * std::sin(v));
    }
  mesh.triangles.reserve(static_cast<size_t>(6 * nu * nv));
  add_grid_triangles(mesh.triangles, 0, nu, nv, true);
  return mesh;
}

// The bumpy sphere: rings at polar angle theta_j = pi j / n_rings (j = 1 ..
// n_rings - 1) of nu vertices each, then the north and south poles.
// u runs along the azimuth phi and the rings along theta, so that
// dp/dtheta x dp/dphi (outward) is the grid's du x dv with u = theta: the
// grid is laid with the rings as its first index.
inline Mesh make_bumpy_sphere(int64_t target_triangles) {
  const int64_t n_rings = std::max<int64_t>(3, std::llround(std::sqrt(target_triangles / 4.0)));
  const int64_t nu = std::max<int64_t>(3, std::llround(target_triangles / (2.0 * (n_rings - 1))));
  const int64_t rings = n_rings - 1;
  auto radius = [](double theta, double phi) {
    const double s = std::sin(theta);
    return 1.0 + 0.12 * std::sin(7 * phi) * s * s * std::cos(5 * theta);
  };
  Mesh mesh;
  mesh.name = "bumpy-" + count_name(target_triangles);
  mesh.vertices.resize(static_cast<size_t>(3 * (rings * nu + 2)));
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < rings; ++j)
    for (int64_t i = 0; i < nu; ++i) {
      const double theta = kPi * (j + 1) / n_rings, phi = 2 * kPi * i / nu;
      const double rho = radius(theta, phi);
      float* p = &mesh.vertices[static_cast<size_t>(3 * (j * nu + i))];
      p[0] = static_cast<float>(rho * std::sin(theta) * std::cos(phi));
      p[1] = static_cast<float>(rho * std::sin(theta) * std::sin(phi));
      p[2] = static_cast<float>(rho * std::cos(theta));
    }
  const int32_t north = static_cast<int32_t>(rings * nu), south = north + 1;
  float* poles = &mesh.vertices[static_cast<size_t>(3 * north)];
  poles[0] = poles[1] = poles[3] = poles[4] = 0.0f;
  poles[2] = 1.0f;
  poles[5] = -1.0f;
  // Grid over (ring j, azimuth i): first index along theta, second along phi.
  add_grid_triangles(mesh.triangles, 0, rings, nu, true);
  // add_grid_triangles wraps the first index too; drop the quads that join
  // the last ring to the first.
  mesh.triangles.resize(static_cast<size_t>(6 * (rings - 1) * nu));
  for (int64_t i = 0; i < nu; ++i) {
    const int32_t a = static_cast<int32_t>(i), b = static_cast<int32_t>((i + 1) % nu);
    const int32_t last = static_cast<int32_t>((rings - 1) * nu);
    mesh.triangles.insert(mesh.triangles.end(), {north, a, b, last + a, south, last + b});
  }
  return mesh;
}

// An OFF file of triangles (a polygon of more vertices is refused).
inline Mesh read_off(const std::string& path) {
  std::ifstream in(path);
  std::string magic;
  int64_t nv = 0, nf = 0, ne = 0;
  if (!(in >> magic >> nv >> nf >> ne) || magic != "OFF" || nv < 3 || nf < 1)
    throw std::runtime_error(path + ": not an OFF file of triangles");
  Mesh mesh;
  const size_t slash = path.find_last_of('/');
  mesh.name = path.substr(slash == std::string::npos ? 0 : slash + 1);
  mesh.name = mesh.name.substr(0, mesh.name.rfind('.'));
  mesh.vertices.resize(static_cast<size_t>(3 * nv));
  for (float& c : mesh.vertices)
    if (!(in >> c)) throw std::runtime_error(path + ": truncated vertex list");
  mesh.triangles.resize(static_cast<size_t>(3 * nf));
  for (int64_t f = 0; f < nf; ++f) {
    int corners = 0;
    int32_t* t = &mesh.triangles[static_cast<size_t>(3 * f)];
    if (!(in >> corners >> t[0] >> t[1] >> t[2]) || corners != 3 || t[0] < 0 || t[1] < 0 ||
        t[2] < 0 || t[0] >= nv || t[1] >= nv || t[2] >= nv)
      throw std::runtime_error(path + ": face " + std::to_string(f) + " is not a valid triangle");
  }
  return mesh;
}

// torus-N, bumpy-N or PATH.off.
inline Mesh make_mesh(const std::string& spec) {
  if (spec.size() > 4 && spec.compare(spec.size() - 4, 4, ".off") == 0) return read_off(spec);
  const size_t dash = spec.find('-');
  const std::string shape = spec.substr(0, dash);
  if (dash != std::string::npos && shape == "torus")
    return make_torus(parse_count(spec.substr(dash + 1)));
  if (dash != std::string::npos && shape == "bumpy")
    return make_bumpy_sphere(parse_count(spec.substr(dash + 1)));
  throw std::runtime_error("unknown mesh '" + spec + "' (torus-N, bumpy-N or PATH.off)");
}

struct Box {
  double lo[3], hi[3];
  double diagonal() const {
    return std::sqrt((hi[0] - lo[0]) * (hi[0] - lo[0]) + (hi[1] - lo[1]) * (hi[1] - lo[1]) +
                     (hi[2] - lo[2]) * (hi[2] - lo[2]));
  }
};

inline Box bounding_box(const Mesh& mesh) {
  Box box;
  for (int d = 0; d < 3; ++d) {
    box.lo[d] = std::numeric_limits<double>::infinity();
    box.hi[d] = -box.lo[d];
  }
  for (size_t i = 0; i < mesh.vertices.size(); ++i) {
    box.lo[i % 3] = std::min(box.lo[i % 3], static_cast<double>(mesh.vertices[i]));
    box.hi[i % 3] = std::max(box.hi[i % 3], static_cast<double>(mesh.vertices[i]));
  }
  return box;
}

// The scan: point i uses words 8i .. 8i+7 of the stream.
inline std::vector<float> make_scan(const Mesh& mesh, int64_t n, uint64_t seed = kScanSeed) {
  const int64_t nt = mesh.n_triangles();
  const float* v = mesh.vertices.data();
  const int32_t* t = mesh.triangles.data();
  auto corner = [&](int64_t tri, int k, int d) {
    return static_cast<double>(v[3 * t[3 * tri + k] + d]);
  };
  // Cumulative areas (and the unit normals) in double.
  std::vector<double> cumulative(static_cast<size_t>(nt));
  std::vector<float> normals(static_cast<size_t>(3 * nt));
  double total = 0;
  for (int64_t f = 0; f < nt; ++f) {
    double e1[3], e2[3];
    for (int d = 0; d < 3; ++d) {
      e1[d] = corner(f, 1, d) - corner(f, 0, d);
      e2[d] = corner(f, 2, d) - corner(f, 0, d);
    }
    const double nx = e1[1] * e2[2] - e1[2] * e2[1], ny = e1[2] * e2[0] - e1[0] * e2[2],
                 nz = e1[0] * e2[1] - e1[1] * e2[0];
    const double length = std::sqrt(nx * nx + ny * ny + nz * nz);
    total += 0.5 * length;
    cumulative[static_cast<size_t>(f)] = total;
    const double inv = length > 0 ? 1 / length : 0;
    normals[static_cast<size_t>(3 * f)] = static_cast<float>(nx * inv);
    normals[static_cast<size_t>(3 * f + 1)] = static_cast<float>(ny * inv);
    normals[static_cast<size_t>(3 * f + 2)] = static_cast<float>(nz * inv);
  }
  const Box box = bounding_box(mesh);
  const double diagonal = box.diagonal(), sigma = 0.002 * diagonal;
  const RandomStream rng(seed);
  std::vector<float> points(static_cast<size_t>(3 * n));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t c = 8 * static_cast<uint64_t>(i);
    float* p = &points[static_cast<size_t>(3 * i)];
    // Two Box-Muller normals (an outlier's direction takes three).
    const double r0 = std::sqrt(-2.0 * std::log(rng.unit_open_zero(c + 1)));
    const double a0 = 2 * kPi * rng.unit(c + 2);
    const double r1 = std::sqrt(-2.0 * std::log(rng.unit_open_zero(c + 3)));
    const double a1 = 2 * kPi * rng.unit(c + 4);
    if (rng.below(c, 100) == 0) {
      double dir[3] = {r0 * std::cos(a0), r0 * std::sin(a0), r1 * std::cos(a1)};
      const double length = std::sqrt(dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2]);
      const double distance = diagonal * (1 + rng.unit(c + 5));
      for (int d = 0; d < 3; ++d)
        p[d] = static_cast<float>(0.5 * (box.lo[d] + box.hi[d]) +
                                  (length > 0 ? dir[d] / length : d == 0) * distance);
      continue;
    }
    const double pick = total * rng.unit(c + 5);
    const int64_t f = std::min<int64_t>(
        nt - 1, std::upper_bound(cumulative.begin(), cumulative.end(), pick) - cumulative.begin());
    double s = rng.unit(c + 6), w = rng.unit(c + 7);
    if (s + w > 1) {  // fold the parallelogram onto the triangle
      s = 1 - s;
      w = 1 - w;
    }
    const double offset = sigma * r0 * std::cos(a0);
    for (int d = 0; d < 3; ++d)
      p[d] = static_cast<float>(corner(f, 0, d) + s * (corner(f, 1, d) - corner(f, 0, d)) +
                                w * (corner(f, 2, d) - corner(f, 0, d)) +
                                offset * normals[static_cast<size_t>(3 * f + d)]);
  }
  return points;
}

// ---- The float64 oracle -------------------------------------------------

inline double sq_distance_to_segment(const double q[3], const double a[3], const double b[3]) {
  double ab[3], aq[3];
  double ab_ab = 0, ab_aq = 0;
  for (int d = 0; d < 3; ++d) {
    ab[d] = b[d] - a[d];
    aq[d] = q[d] - a[d];
    ab_ab += ab[d] * ab[d];
    ab_aq += ab[d] * aq[d];
  }
  const double t = ab_ab > 0 ? std::min(1.0, std::max(0.0, ab_aq / ab_ab)) : 0.0;
  double sum = 0;
  for (int d = 0; d < 3; ++d) {
    const double e = aq[d] - t * ab[d];
    sum += e * e;
  }
  return sum;
}

inline void cross(const double u[3], const double v[3], double out[3]) {
  out[0] = u[1] * v[2] - u[2] * v[1];
  out[1] = u[2] * v[0] - u[0] * v[2];
  out[2] = u[0] * v[1] - u[1] * v[0];
}
inline double dot(const double u[3], const double v[3]) {
  return u[0] * v[0] + u[1] * v[1] + u[2] * v[2];
}

// The squared distance from q to triangle (a, b, c), in double.
inline double sq_distance_to_triangle(const double q[3], const double a[3], const double b[3],
                                      const double c[3]) {
  double best = std::min({sq_distance_to_segment(q, a, b), sq_distance_to_segment(q, b, c),
                          sq_distance_to_segment(q, c, a)});
  double ab[3], ac[3], n[3];
  for (int d = 0; d < 3; ++d) {
    ab[d] = b[d] - a[d];
    ac[d] = c[d] - a[d];
  }
  cross(ab, ac, n);
  const double nn = dot(n, n);
  if (nn > 0) {
    // q's projection is inside when it lies left of every edge, seen along n.
    const double* corners[3] = {a, b, c};
    bool inside = true;
    for (int k = 0; k < 3 && inside; ++k) {
      const double* p0 = corners[k];
      const double* p1 = corners[(k + 1) % 3];
      double edge[3], to_q[3], side[3];
      for (int d = 0; d < 3; ++d) {
        edge[d] = p1[d] - p0[d];
        to_q[d] = q[d] - p0[d];
      }
      cross(edge, to_q, side);
      inside = dot(side, n) >= 0;
    }
    if (inside) {
      double aq[3];
      for (int d = 0; d < 3; ++d) aq[d] = q[d] - a[d];
      const double h = dot(n, aq);
      best = std::min(best, h * h / nn);
    }
  }
  return best;
}

struct Oracle {
  std::vector<int64_t> index;       // sampled scan points
  std::vector<double> sq_distance;  // their squared distance to the mesh
};

// The sampled points: kOracleSamples (or n) distinct-enough indices spread
// over the scan, fixed by n alone.
inline std::vector<int64_t> oracle_samples(int64_t n) {
  const int64_t count = std::min(n, kOracleSamples);
  const RandomStream rng(0x0dac1e);
  std::vector<int64_t> index(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k)
    index[static_cast<size_t>(k)] =
        static_cast<int64_t>(rng.word(static_cast<uint64_t>(k)) % static_cast<uint64_t>(n));
  return index;
}

inline Oracle compute_oracle(const Mesh& mesh, const std::vector<float>& scan) {
  const int64_t nt = mesh.n_triangles();
  // The triangles' boxes (float bounds of float vertices are exact).
  std::vector<float> lo(static_cast<size_t>(3 * nt)), hi(static_cast<size_t>(3 * nt));
#pragma omp parallel for schedule(static)
  for (int64_t f = 0; f < nt; ++f)
    for (int d = 0; d < 3; ++d) {
      const float x0 = mesh.vertices[3 * mesh.triangles[3 * f] + d];
      const float x1 = mesh.vertices[3 * mesh.triangles[3 * f + 1] + d];
      const float x2 = mesh.vertices[3 * mesh.triangles[3 * f + 2] + d];
      lo[static_cast<size_t>(3 * f + d)] = std::min({x0, x1, x2});
      hi[static_cast<size_t>(3 * f + d)] = std::max({x0, x1, x2});
    }
  Oracle oracle;
  oracle.index = oracle_samples(static_cast<int64_t>(scan.size() / 3));
  const int64_t count = static_cast<int64_t>(oracle.index.size());
  oracle.sq_distance.assign(static_cast<size_t>(count), std::numeric_limits<double>::infinity());
  // Groups of samples meet the triangles block by block, so that a block
  // stays in cache while every sample of the group is tested against it.
  constexpr int64_t kGroup = 16, kBlock = 4096;
  const int64_t groups = (count + kGroup - 1) / kGroup;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t first_sample = g * kGroup, end_sample = std::min(count, first_sample + kGroup);
    for (int64_t first = 0; first < nt; first += kBlock) {
      const int64_t last = std::min(nt, first + kBlock);
      for (int64_t k = first_sample; k < end_sample; ++k) {
        const float* p = &scan[static_cast<size_t>(3 * oracle.index[static_cast<size_t>(k)])];
        const double q[3] = {p[0], p[1], p[2]};
        double& best = oracle.sq_distance[static_cast<size_t>(k)];
        for (int64_t f = first; f < last; ++f) {
          double box = 0;
          for (int d = 0; d < 3; ++d) {
            const double below = lo[static_cast<size_t>(3 * f + d)] - q[d];
            const double above = q[d] - hi[static_cast<size_t>(3 * f + d)];
            const double gap = std::max({below, above, 0.0});
            box += gap * gap;
          }
          // The box distance is a lower bound: a margin covers its rounding.
          if (box > best * (1 + 1e-12)) continue;
          double corners[3][3];
          for (int c = 0; c < 3; ++c)
            for (int d = 0; d < 3; ++d)
              corners[c][d] = mesh.vertices[3 * mesh.triangles[3 * f + c] + d];
          best = std::min(best, sq_distance_to_triangle(q, corners[0], corners[1], corners[2]));
        }
      }
    }
  }
  return oracle;
}

// ---- Checks against the oracle --------------------------------------------

struct Check {
  int64_t checked = 0;
  int64_t wrong = 0;     // distance off by more than the tolerance
  double max_error = 0;  // largest |distance - oracle distance|
  double tolerance = 0;
};

// `sq_distance_of(i)` is a contender's squared distance for scan point i;
// relative is the allowed error relative to (diagonal + distance): about
// 1e-5 for float32 answers, 1e-12 for float64 ones.
template <class SqDistanceOf>
Check check_against(const Oracle& oracle, const Mesh& mesh, double relative,
                    SqDistanceOf&& sq_distance_of) {
  Check check;
  const double diagonal = bounding_box(mesh).diagonal();
  for (size_t k = 0; k < oracle.index.size(); ++k) {
    const double expected = std::sqrt(oracle.sq_distance[k]);
    const double got = std::sqrt(static_cast<double>(sq_distance_of(oracle.index[k])));
    const double error = std::fabs(got - expected);
    const double tolerance = relative * (diagonal + expected);
    check.tolerance = std::max(check.tolerance, tolerance);
    ++check.checked;
    if (!(error <= tolerance)) ++check.wrong;  // NaN counts as wrong
    check.max_error = std::max(check.max_error, std::isnan(error) ? HUGE_VAL : error);
  }
  return check;
}

// ---- Files ------------------------------------------------------------------

inline bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

template <class T>
void write_array(std::ofstream& out, const std::vector<T>& values) {
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(T)));
}
template <class T>
void read_array(std::ifstream& in, std::vector<T>& values, size_t count, const std::string& path) {
  values.resize(count);
  if (!in.read(reinterpret_cast<char*>(values.data()),
               static_cast<std::streamsize>(count * sizeof(T))))
    throw std::runtime_error(path + ": truncated");
}
inline int64_t read_count(std::ifstream& in, const std::string& path) {
  int64_t n = -1;
  if (!in.read(reinterpret_cast<char*>(&n), sizeof n) || n < 0 || n > (int64_t{1} << 34))
    throw std::runtime_error(path + ": bad header");
  return n;
}
inline std::ofstream open_out(const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error("cannot write " + path);
  return out;
}
inline std::ifstream open_in(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path + " (run bench_mesh --data first)");
  return in;
}

inline std::string mesh_path(const std::string& dir, const std::string& mesh) {
  return dir + "/" + mesh + ".mesh";
}
inline std::string row_name(const std::string& mesh, int64_t n_points) {
  return mesh + "_x_" + count_name(n_points);
}
inline std::string scan_path(const std::string& dir, const std::string& row) {
  return dir + "/" + row + ".scan";
}
inline std::string oracle_path(const std::string& dir, const std::string& row) {
  return dir + "/" + row + ".oracle";
}

inline void write_mesh(const std::string& path, const Mesh& mesh) {
  std::ofstream out = open_out(path);
  const int64_t counts[2] = {mesh.n_vertices(), mesh.n_triangles()};
  out.write(reinterpret_cast<const char*>(counts), sizeof counts);
  write_array(out, mesh.vertices);
  write_array(out, mesh.triangles);
  if (!out) throw std::runtime_error("cannot write " + path);
}
inline Mesh read_mesh(const std::string& path, const std::string& name) {
  std::ifstream in = open_in(path);
  Mesh mesh;
  mesh.name = name;
  const int64_t nv = read_count(in, path), nt = read_count(in, path);
  read_array(in, mesh.vertices, static_cast<size_t>(3 * nv), path);
  read_array(in, mesh.triangles, static_cast<size_t>(3 * nt), path);
  return mesh;
}
inline void write_points(const std::string& path, const std::vector<float>& points) {
  std::ofstream out = open_out(path);
  const int64_t n = static_cast<int64_t>(points.size() / 3);
  out.write(reinterpret_cast<const char*>(&n), sizeof n);
  write_array(out, points);
  if (!out) throw std::runtime_error("cannot write " + path);
}
inline std::vector<float> read_points(const std::string& path) {
  std::ifstream in = open_in(path);
  std::vector<float> points;
  read_array(in, points, static_cast<size_t>(3 * read_count(in, path)), path);
  return points;
}
inline void write_oracle(const std::string& path, const Oracle& oracle) {
  std::ofstream out = open_out(path);
  const int64_t count = static_cast<int64_t>(oracle.index.size());
  out.write(reinterpret_cast<const char*>(&count), sizeof count);
  write_array(out, oracle.index);
  write_array(out, oracle.sq_distance);
  if (!out) throw std::runtime_error("cannot write " + path);
}
inline Oracle read_oracle(const std::string& path) {
  std::ifstream in = open_in(path);
  Oracle oracle;
  const int64_t count = read_count(in, path);
  read_array(in, oracle.index, static_cast<size_t>(count), path);
  read_array(in, oracle.sq_distance, static_cast<size_t>(count), path);
  return oracle;
}

// One row's data as the drivers see it: from the folder's files.
struct Row {
  std::string name;
  Mesh mesh;
  std::vector<float> scan;
  Oracle oracle;
};
inline Row read_row(const std::string& dir, const std::string& mesh, int64_t n_points) {
  Row row;
  row.name = row_name(mesh, n_points);
  row.mesh = read_mesh(mesh_path(dir, mesh), mesh);
  row.scan = read_points(scan_path(dir, row.name));
  row.oracle = read_oracle(oracle_path(dir, row.name));
  return row;
}

// The name of the mesh a spec makes (torus-1e6; bunny00 for .../bunny00.off).
inline std::string mesh_name_of(const std::string& spec) {
  const size_t slash = spec.find_last_of('/');
  const std::string base = spec.substr(slash == std::string::npos ? 0 : slash + 1);
  if (base.size() > 4 && base.compare(base.size() - 4, 4, ".off") == 0)
    return base.substr(0, base.size() - 4);
  const size_t dash = base.find('-');
  if (dash == std::string::npos) return base;
  return base.substr(0, dash + 1) + count_name(parse_count(base.substr(dash + 1)));
}

// Makes the files of a mesh and its scans in dir, those not there already
// (the oracle costs seconds on the largest rows); returns the mesh's name.
inline std::string prepare_rows(const std::string& dir, const std::string& spec,
                                const std::vector<int64_t>& scan_sizes) {
  const std::string name = mesh_name_of(spec);
  bool complete = file_exists(mesh_path(dir, name));
  for (const int64_t n : scan_sizes)
    complete = complete && file_exists(scan_path(dir, row_name(name, n))) &&
               file_exists(oracle_path(dir, row_name(name, n)));
  if (complete) return name;
  Mesh mesh = make_mesh(spec);
  mesh.name = name;
  std::filesystem::create_directories(dir);
  if (!file_exists(mesh_path(dir, mesh.name))) write_mesh(mesh_path(dir, mesh.name), mesh);
  for (const int64_t n : scan_sizes) {
    const std::string row = row_name(mesh.name, n);
    if (file_exists(scan_path(dir, row)) && file_exists(oracle_path(dir, row))) continue;
    const std::vector<float> scan = make_scan(mesh, n);
    write_points(scan_path(dir, row), scan);
    write_oracle(oracle_path(dir, row), compute_oracle(mesh, scan));
  }
  return mesh.name;
}

// The machine-readable line every driver prints per (row, contender); the
// scripts build their table from these.
//   RESULT <row> <contender> <build ms> <query ms> <checked> <wrong> <max error>
inline void print_result(const std::string& row, const std::string& contender, double build_ms,
                         double query_ms, const Check& check) {
  std::printf("RESULT %s %s %.3f %.3f %lld %lld %.3g\n", row.c_str(), contender.c_str(), build_ms,
              query_ms, static_cast<long long>(check.checked), static_cast<long long>(check.wrong),
              check.max_error);
  std::fflush(stdout);
}

}  // namespace mesh
}  // namespace knn_bench
