// The point-in-polygon tests' independent oracle. Nothing here comes from the
// library's sources.
//
// Exact side: every float is an integer multiple of 2^-149, so scaling by
// 2^149 turns the orientation determinant of float inputs into a determinant
// of integers (below 2^278 each), which a small sign-magnitude big integer
// computes exactly. Doubles (and mixes) are scaled by 2^-e, e the smallest
// exponent of the six coordinates' last significant bits, to integers the
// same way. The inside test applies the contract's rule (even-odd
// crossings of a ray towards +x, half-open in y, crossing strictly right of
// the point) with that exact determinant.
// Independent side: a long double crossing test, used only for points far
// from every edge, where rounding cannot matter.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "../../common/math_constants.h"
#include "oracle.h"

namespace knn_test {

// ---- Exact integers -------------------------------------------------------------

class BigInt {
 public:
  BigInt() = default;

  // f * 2^149, exactly (every float, subnormals included, is m * 2^e with
  // e >= -149 and |m| < 2^24).
  static BigInt scaled_float(float f) {
    BigInt r;
    if (f == 0.0f) return r;
    int exponent = 0;
    const double mantissa =
        std::frexp(static_cast<double>(f), &exponent);           // f = mantissa * 2^exponent
    int64_t m = static_cast<int64_t>(std::ldexp(mantissa, 24));  // exact: 24 bits
    int shift = exponent - 24 + 149;
    for (; shift < 0; ++shift) m /= 2;  // subnormals: the dropped bits are zeros
    r.negative_ = m < 0;
    r.limbs_.push_back(static_cast<uint32_t>(m < 0 ? -m : m));
    r.shift_left(shift);
    return r;
  }

  // m * 2^shift, exactly (shift >= 0).
  static BigInt shifted(int64_t m, int shift) {
    BigInt r;
    if (m == 0) return r;
    r.negative_ = m < 0;
    const uint64_t magnitude = m < 0 ? 0 - static_cast<uint64_t>(m) : static_cast<uint64_t>(m);
    r.limbs_.push_back(static_cast<uint32_t>(magnitude));
    r.limbs_.push_back(static_cast<uint32_t>(magnitude >> 32));
    r.shift_left(shift);
    return r;
  }

  int sign() const { return limbs_.empty() ? 0 : (negative_ ? -1 : 1); }

  friend BigInt operator-(const BigInt& a, const BigInt& b) {
    BigInt nb = b;
    nb.negative_ = !nb.negative_;
    return add(a, nb);
  }

  friend BigInt operator*(const BigInt& a, const BigInt& b) {
    BigInt r;
    if (a.limbs_.empty() || b.limbs_.empty()) return r;
    std::vector<uint64_t> acc(a.limbs_.size() + b.limbs_.size() + 1, 0);
    for (size_t i = 0; i < a.limbs_.size(); ++i) {
      uint64_t carry = 0;
      for (size_t j = 0; j < b.limbs_.size(); ++j) {
        const uint64_t t = acc[i + j] + static_cast<uint64_t>(a.limbs_[i]) * b.limbs_[j] + carry;
        acc[i + j] = t & 0xffffffffu;
        carry = t >> 32;
      }
      acc[i + b.limbs_.size()] += carry;
    }
    for (const uint64_t limb : acc) r.limbs_.push_back(static_cast<uint32_t>(limb));
    r.negative_ = a.negative_ != b.negative_;
    r.trim();
    return r;
  }

 private:
  void trim() {
    while (!limbs_.empty() && limbs_.back() == 0) limbs_.pop_back();
    if (limbs_.empty()) negative_ = false;
  }

  void shift_left(int bits) {
    const int whole = bits / 32;
    const int part = bits % 32;
    std::vector<uint32_t> out(static_cast<size_t>(whole), 0);
    uint32_t carry = 0;
    for (const uint32_t limb : limbs_) {
      out.push_back(part == 0 ? limb : (limb << part) | carry);
      carry = part == 0 ? 0 : limb >> (32 - part);
    }
    out.push_back(carry);
    limbs_ = out;
    trim();
  }

  // |a| compared with |b|.
  static int compare_magnitude(const BigInt& a, const BigInt& b) {
    if (a.limbs_.size() != b.limbs_.size()) return a.limbs_.size() < b.limbs_.size() ? -1 : 1;
    for (size_t i = a.limbs_.size(); i-- > 0;)
      if (a.limbs_[i] != b.limbs_[i]) return a.limbs_[i] < b.limbs_[i] ? -1 : 1;
    return 0;
  }

  static BigInt add(const BigInt& a, const BigInt& b) {
    BigInt r;
    if (a.negative_ == b.negative_) {
      r.negative_ = a.negative_;
      uint64_t carry = 0;
      for (size_t i = 0; i < std::max(a.limbs_.size(), b.limbs_.size()); ++i) {
        const uint64_t t = carry + (i < a.limbs_.size() ? a.limbs_[i] : 0) +
                           (i < b.limbs_.size() ? b.limbs_[i] : 0);
        r.limbs_.push_back(static_cast<uint32_t>(t));
        carry = t >> 32;
      }
      r.limbs_.push_back(static_cast<uint32_t>(carry));
    } else {
      const bool a_larger = compare_magnitude(a, b) >= 0;
      const BigInt& big = a_larger ? a : b;
      const BigInt& small = a_larger ? b : a;
      r.negative_ = big.negative_;
      int64_t borrow = 0;
      for (size_t i = 0; i < big.limbs_.size(); ++i) {
        int64_t t = static_cast<int64_t>(big.limbs_[i]) - borrow -
                    (i < small.limbs_.size() ? small.limbs_[i] : 0);
        borrow = t < 0 ? 1 : 0;
        if (t < 0) t += int64_t{1} << 32;
        r.limbs_.push_back(static_cast<uint32_t>(t));
      }
    }
    r.trim();
    return r;
  }

  bool negative_ = false;
  std::vector<uint32_t> limbs_;  // magnitude, least significant first
};

// Exact sign of (bx-ax)*(py-ay) - (px-ax)*(by-ay).
inline int oracle_orientation(float ax, float ay, float bx, float by, float px, float py) {
  const BigInt Ax = BigInt::scaled_float(ax), Ay = BigInt::scaled_float(ay);
  const BigInt Bx = BigInt::scaled_float(bx), By = BigInt::scaled_float(by);
  const BigInt Px = BigInt::scaled_float(px), Py = BigInt::scaled_float(py);
  return ((Bx - Ax) * (Py - Ay) - (Px - Ax) * (By - Ay)).sign();
}

// Exact sign of (bx-ax)*(py-ay) - (px-ax)*(by-ay) for doubles: each nonzero
// value is m * 2^e with m an integer of at most 53 bits (frexp); all six are
// scaled by 2^-min(e) to integers.
inline int oracle_orientation(double ax, double ay, double bx, double by, double px, double py) {
  const double v[6] = {ax, ay, bx, by, px, py};
  int64_t mantissa[6] = {0, 0, 0, 0, 0, 0};
  int exponent[6] = {0, 0, 0, 0, 0, 0};
  int min_exponent = 1 << 20;
  for (int i = 0; i < 6; ++i) {
    if (v[i] == 0.0) continue;
    int e = 0;
    const double f = std::frexp(v[i], &e);  // v = f * 2^e, 0.5 <= |f| < 1
    mantissa[i] = static_cast<int64_t>(std::ldexp(f, 53));
    exponent[i] = e - 53;
    min_exponent = std::min(min_exponent, exponent[i]);
  }
  BigInt b[6];
  for (int i = 0; i < 6; ++i)
    if (mantissa[i] != 0) b[i] = BigInt::shifted(mantissa[i], exponent[i] - min_exponent);
  return ((b[2] - b[0]) * (b[5] - b[1]) - (b[4] - b[0]) * (b[3] - b[1])).sign();
}

// ---- Polygon sets ---------------------------------------------------------------

template <class T>
struct BasicVec2 {
  T x, y;
};
using Vec2 = BasicVec2<float>;
using Vec2d = BasicVec2<double>;

// The arrays the API takes, built ring by ring, vertices of scalar T.
template <class T>
struct BasicPolygonArrays {
  std::vector<T> xy;
  std::vector<int64_t> ring_offsets{0};
  std::vector<int64_t> polygon_offsets{0};

  int64_t n_rings() const { return static_cast<int64_t>(ring_offsets.size()) - 1; }
  int64_t n_polygons() const { return static_cast<int64_t>(polygon_offsets.size()) - 1; }

  // Starts a polygon with its outer ring; add_hole appends rings to it.
  void add_polygon(const std::vector<BasicVec2<T>>& outer) {
    add_ring(outer);
    polygon_offsets.push_back(n_rings());
  }
  void add_hole(const std::vector<BasicVec2<T>>& hole) {
    add_ring(hole);
    polygon_offsets.back() = n_rings();
  }
  // The same polygons with vertices of scalar U (exact from float to double).
  template <class U>
  BasicPolygonArrays<U> as() const {
    BasicPolygonArrays<U> out;
    out.xy.assign(xy.begin(), xy.end());
    out.ring_offsets = ring_offsets;
    out.polygon_offsets = polygon_offsets;
    return out;
  }

 private:
  void add_ring(const std::vector<BasicVec2<T>>& ring) {
    for (const BasicVec2<T>& v : ring) {
      xy.push_back(v.x);
      xy.push_back(v.y);
    }
    ring_offsets.push_back(static_cast<int64_t>(xy.size() / 2));
  }
};

using PolygonArrays = BasicPolygonArrays<float>;
using PolygonArraysd = BasicPolygonArrays<double>;

// The contract's rule with the exact determinant; a mix of float and double
// is decided in double (exact conversions).
template <class T, class P>
bool oracle_inside(const BasicPolygonArrays<T>& set, int64_t polygon, P px, P py) {
  using C = decltype(T() + P());
  bool inside = false;
  for (int64_t r = set.polygon_offsets[polygon]; r < set.polygon_offsets[polygon + 1]; ++r) {
    const int64_t begin = set.ring_offsets[r], end = set.ring_offsets[r + 1];
    for (int64_t v = begin; v < end; ++v) {
      const int64_t w = v + 1 < end ? v + 1 : begin;
      const C ax = set.xy[2 * v], ay = set.xy[2 * v + 1];
      const C bx = set.xy[2 * w], by = set.xy[2 * w + 1];
      if ((ay > py) == (by > py)) continue;
      const int side = oracle_orientation(ax, ay, bx, by, C(px), C(py));
      if (side != 0 && (side > 0) == (by > ay)) inside = !inside;
    }
  }
  return inside;
}

// Every point against every polygon: polygon p's points, ascending.
template <class P, class T>
std::vector<std::vector<int64_t>> oracle_points_in_polygons(const std::vector<P>& xy,
                                                            const BasicPolygonArrays<T>& set) {
  std::vector<std::vector<int64_t>> result(static_cast<size_t>(set.n_polygons()));
  parallel_for(set.n_polygons(), [&](int64_t p) {
    for (int64_t i = 0; i < static_cast<int64_t>(xy.size() / 2); ++i)
      if (oracle_inside(set, p, xy[2 * i], xy[2 * i + 1])) result[p].push_back(i);
  });
  return result;
}

// Independent cross-check: crossings in long double; returns -1 when the
// point is within `margin` of an edge's line segment (undecided here).
inline int long_double_inside(const PolygonArrays& set, int64_t polygon, float px, float py,
                              long double margin) {
  bool inside = false;
  for (int64_t r = set.polygon_offsets[polygon]; r < set.polygon_offsets[polygon + 1]; ++r) {
    const int64_t begin = set.ring_offsets[r], end = set.ring_offsets[r + 1];
    for (int64_t v = begin; v < end; ++v) {
      const int64_t w = v + 1 < end ? v + 1 : begin;
      const long double ax = set.xy[2 * v], ay = set.xy[2 * v + 1];
      const long double bx = set.xy[2 * w], by = set.xy[2 * w + 1];
      const long double dx = bx - ax, dy = by - ay, len2 = dx * dx + dy * dy;
      long double t = len2 > 0 ? ((px - ax) * dx + (py - ay) * dy) / len2 : 0;
      t = std::min<long double>(1, std::max<long double>(0, t));
      const long double ex = ax + t * dx - px, ey = ay + t * dy - py;
      if (ex * ex + ey * ey <= margin * margin) return -1;
      // A vertex near the ray's line is decided by the half-open rule: skip.
      if (std::fabs(ay - py) <= margin) return -1;
      if ((ay > py) == (by > py)) continue;
      const long double x_cross = ax + (py - ay) * dx / dy;
      if (x_cross > px) inside = !inside;
    }
  }
  return inside ? 1 : 0;
}

// ---- Shapes -----------------------------------------------------------------------

inline std::vector<Vec2> rectangle(float x0, float y0, float x1, float y1) {
  return {{x0, y0}, {x1, y0}, {x1, y1}, {x0, y1}};
}

// A star-shaped ring around (cx, cy): `vertices` angles in order, radii in
// [r_min, r_max] (concave when r_min < r_max); clockwise when `clockwise`.
inline std::vector<Vec2> star(std::mt19937_64& rng, float cx, float cy, float r_min, float r_max,
                              int vertices, bool clockwise) {
  std::uniform_real_distribution<double> radius(r_min, r_max);
  std::vector<Vec2> ring;
  for (int i = 0; i < vertices; ++i) {
    const double angle = 2 * knn::kPi * i / vertices * (clockwise ? -1 : 1);
    const double r = radius(rng);
    ring.push_back({static_cast<float>(cx + r * std::cos(angle)),
                    static_cast<float>(cy + r * std::sin(angle))});
  }
  return ring;
}

// Points on the polygons' boundaries: every vertex, then every edge's
// midpoint (rounded to float, so near but not always on the edge).
inline std::vector<float> boundary_points(const PolygonArrays& set) {
  std::vector<float> xy = set.xy;
  for (int64_t r = 0; r < set.n_rings(); ++r)
    for (int64_t v = set.ring_offsets[r]; v < set.ring_offsets[r + 1]; ++v) {
      const int64_t w = v + 1 < set.ring_offsets[r + 1] ? v + 1 : set.ring_offsets[r];
      xy.push_back(0.5f * (set.xy[2 * v] + set.xy[2 * w]));
      xy.push_back(0.5f * (set.xy[2 * v + 1] + set.xy[2 * w + 1]));
    }
  return xy;
}

// Drawn in double: hi - lo may overflow float (-3e38 .. 3e38).
inline std::vector<float> uniform_points(std::mt19937_64& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<float> xy(static_cast<size_t>(2 * n));
  for (float& v : xy) v = static_cast<float>(u(rng));
  return xy;
}

}  // namespace knn_test
