// The uniform grid of the 3-D grid index, shared by the OpenMP and the CUDA
// engine: the choice of resolution, the cell of a coordinate, and the lower
// bounds that let a search stop growing its shells exactly.
//
// Points are binned by cell; a cell key orders cells x fastest, so a row of
// cells along x is one contiguous run of the points sorted by key. The
// resolution aims at `target` points per cell over the bounding box; an axis
// whose extent is small against the cell size (all z equal: a plane) gets
// one cell. The cell count stays below n (and 2^30), so cell keys fit in
// 32 bits and the cell-start array is no larger than the points (a grid
// refined for a surface, below: up to kGridMaxRefinedCellsPerPoint n).
//
// Surfaces. Points of a scan lie on a surface: over the bounding box's cells
// they fill few cells, and fill them far above the target (10^7 points on a
// sphere, n/3 cells: 136 points in a point's own cell). There the own-cell
// count falls with the cell's area rather than its volume, so a poor grid is
// binned again with finer cells (finer_grid_layout: the growth law measured
// between the grid and one of cells twice as wide tells a surface from a
// cluster), up to kGridMaxRefinedCellsPerPoint cells a point; the finer grid is kept
// only when it is good (kGridRefinedOccupancyFactor), else the data is
// refused as before (clusters, all points equal) and the index uses its
// kd-tree. Only empty cells are added, and a walk reads a row of cells as
// one run, so they cost the search little. H100, 10^7 points on a sphere,
// 10^7 queries on it, float32, build + query: k = 8 22.7 ms (kd-tree 40.3),
// k = 30 41.3 ms (kd-tree 84.7). Gaussian clusters and curves, for which
// the law predicts no good grid within the cap, are refused without another
// binning.
//
// Curves. Points on a curve (a line, a helix, a circle, a scan line) fill
// their cells well when the curve runs along an axis: the grid is then one
// row of cells, a Poisson target each, and a poor-grid test sees nothing
// wrong. But a shell of such a grid holds two cells, a few points, so a
// list of k costs k / target runs (OpenMP, 2 loaded cores, all-kNN: 10^6
// points, k = 8 and 100, even with the kd-tree; 20,000 points, k = 1000,
// 0.68 s against 0.45). Off an axis a curve makes a poor grid, and a grid
// refined for it walks r^2 cells for r of curve (a circle in a plane, 20,000
// points, k = 1000: 10.3 s against the kd-tree's 0.42). So an automatic choice
// (IndexParams::refuse_curves) refuses a grid on which the points lie on a
// curve at the cell scale (grid_on_curve: the own-cell count, less the point
// itself, grows as side^1 rather than side^2 or ^3 from a cell to its
// coarse cell), and the kd-tree serves; an explicit KNN_STRUCTURE_GRID keeps
// its row of cells (the caller asked for it).
//
// Stacked points. Points stacked at few locations (each written several
// times: duplicates) add the same others to a point's own cell at every
// scale, so their occupancy grows slowly from a cell to its coarse cell
// whatever the shape of the locations: 2e5 points, 16 at each of 12,500
// uniform locations, own-cell others 18 growing to 39, like a curve's. Two
// steps up (cells four times as wide, 207) tell them apart: the growth of
// the increments, (207 - 39) / (39 - 18) = 8, is a volume's, where a
// curve's stays 2 (grid_curve_is_stacked). Such a grid is kept, and its
// crowded cells make lists shorter than a cell's points dearer than the
// kd-tree's (src/index_planner.h, serving_structure): 2 loaded cores,
// n = m = 2e5, build + query ms, kd-tree against grid: k = 1 118 against
// 155, k = 8 129 against 157; k = 100 (m = 5e4) 266 against 165; all-kNN
// of 2e4 points at k = 1000 796 against 375.
//
// Exactness. Cells are found in double arithmetic (the same IEEE operations
// on both backends, so both bin every point alike). A search visits cells and
// stops when a lower bound of the float32 squared distance to every point it
// has not seen exceeds its current k-th distance. The bounds below are lower
// bounds of the contract's float32 distance, not of the real one:
//   - per axis, a float g with g <= |fl(p_a - q_a)| for every point p of the
//     cells concerned. The cell boundary is computed in double and moved out
//     by a margin far above the double rounding of the binning, the gap to
//     the query is shrunk by a relative margin above the rounding of the
//     subtraction, and the result is rounded down to float. Then the real
//     |p_a - q_a| >= g, and because rounding is monotone and g is a float,
//     |fl(p_a - q_a)| >= g too;
//   - fl(g*g) <= fl(d*d) for |d| >= g, and float addition is monotone in each
//     argument, so combining the axes' squared gaps in the contract's order
//     ((x + y) + z) gives a lower bound of the point's float32 distance.
// A search that stops only when this bound is strictly greater than its k-th
// distance can miss no point that ties with or beats the k-th.
//
// Ties. When squared distances underflow (points 1e-30 apart: every float32
// distance is 0) or repeat, bounds equal the k-th distance and the distance
// alone can never end a walk: only indices decide, and the k smallest may lie
// at the other end of the data. Two rules keep such searches at O(k) (see
// walk_shells): a scan skips every point that ties at best and has a larger
// index than the k-th, and since a cell's points are stored in ascending
// index order, the OpenMP scan leaves the cell there (CellScan); and when
// everything beyond the shells can at best tie, the walk also sweeps the
// points in index order, which ends the search as soon as it passes the
// k-th's index.
//
// Scalar. The layout is a template over the scalar type of the points
// (BasicGridLayout<float>, GridLayout, for the float32 index;
// BasicGridLayout<double> for the float64 one). Binning and boundaries are
// in double for both; only the last step differs: a float32 gap is rounded
// down to float (at_most), a float64 gap is already a double, and the
// relative shrink (1e-14, far above 2^-53) covers the rounding of its
// product too. Everything said above of float32 holds of float64 with
// "float" read as the scalar type.
#pragma once

#include <cmath>
#include <cstdint>

#include "float_math.h"
#include "host_device.h"
#include "neighbor.h"

namespace knn {

// Resolution defaults and limits (IndexParams.leaf_size overrides the target).
// 3 points per cell: on an H100, uniform 10^7 x 10^7, targets 2 to 4 are the
// fastest for k = 1 to 16 (bench/gpu/bench_grid.cu --sweep-target); larger
// cells cost more distances, smaller ones more cells per shell.
constexpr int kGridDefaultPointsPerCell = 3;
// The target a grid build aims at: the one asked for (IndexParams.leaf_size),
// else the default.
inline int grid_points_per_cell(int asked) { return asked > 0 ? asked : kGridDefaultPointsPerCell; }
// Cells never outnumber the points by more than this (memory: one 32-bit
// start per cell), nor 2^30 in all.
constexpr double kGridMaxCellsPerPoint = 1.0;
constexpr int64_t kGridMaxCells = int64_t{1} << 30;
// A grid is poor when a point's own cell holds on average more than this many
// times the points a uniform grid would give it (target + 1: a Poisson cell
// seen from one of its points). Judged only from this many points on: below
// it any grid is as fast as brute force and the engine keeps it.
constexpr double kGridPoorOccupancyFactor = 8.0;
constexpr int64_t kGridMinPointsToJudge = 1024;
// A poor grid is binned again with finer cells (see "Surfaces" above), at
// most this many times, up to this many cells a point (one 32-bit start per
// cell on the GPU: 4 bytes a cell, counted in the memory helpers), and kept
// only when a point's own cell holds at most this many times target + 1
// (10^7 points on a sphere: 11.2 points with the cap of 16 cells a point,
// which searches 2x faster than the kd-tree on an H100; 32 cells a point
// gained 2 ms of query and lost 3 ms of build; a looser grid is slower).
constexpr int kGridMaxRefinements = 2;
constexpr double kGridMaxRefinedCellsPerPoint = 16.0;
constexpr double kGridRefinedOccupancyFactor = 3.0;
// A finer grid is tried only when its predicted occupancy is within this
// factor of the one it must meet (the prediction assumes one growth law
// over a range of scales; 10^7 points on a sphere: predicted 10, found 11),
// and only for data whose occupancy grows at least as side^this (below,
// finer cells barely split the points).
constexpr double kGridRefinedPredictionSlack = 2.0;
constexpr double kGridMinOccupancyExponent = 0.5;
// The points lie on a curve at the cell scale (see "Curves" above) when the
// others in a point's own cell grow less than this from a cell to its coarse
// cell: side^1.5, between a curve's 2 (side^1) and a surface's 4 (side^2).
constexpr double kGridCurveMaxGrowth = 2.8284271247461903;
// ... unless the increments of the others grow at least this much from the
// coarse step to the next (side^2.5, between a surface's 4 and a volume's
// 8): points stacked at locations that fill space (see "Stacked points").
constexpr double kGridStackedMinGrowth = 5.656854249492381;

// HUGE_VAL, not numeric_limits: callable from device code without
// --expt-relaxed-constexpr (hosts such as the benchmarks compile this header).
template <typename Scalar>
KNN_HD Scalar grid_infinity() {
  return static_cast<Scalar>(HUGE_VAL);
}

// The largest float <= x (x >= 0; values beyond float's range give FLT_MAX).
KNN_HD float float_at_most(double x) {
#if defined(__CUDA_ARCH__)
  return __double2float_rd(x);
#else
  float f = static_cast<float>(x);
  if (static_cast<double>(f) > x) f = std::nextafter(f, -grid_infinity<float>());
  return f;
#endif
}

// The largest Scalar <= x: float_at_most for float, x itself for double.
KNN_HD float at_most(double x, float) { return float_at_most(x); }
KNN_HD double at_most(double x, double) { return x; }

template <typename Scalar>
struct BasicGridLayout {
  Scalar box_lo[3], box_hi[3];  // bounding box of the indexed points
  double width[3];              // cell width per axis (0: one cell)
  double inv_width[3];          // cells per unit of length (0: one cell)
  double margin[3];             // slack on cell boundaries, far above double rounding
  int32_t cells[3];

  KNN_HD int64_t cell_count() const { return int64_t{cells[0]} * cells[1] * cells[2]; }

  // The coarse grid `levels` steps up: cells 2^levels times as wide on every
  // axis, each a block of up to 2^levels cells a side (finer_grid_layout
  // compares the occupancy one step up with this grid's; the curve test
  // looks two steps up too). Its cell count, and the coarse cell that holds
  // cell `key`.
  KNN_HD int64_t coarse_cell_count(int levels = 1) const {
    const int32_t span = int32_t{1} << levels;
    return int64_t{(cells[0] + span - 1) >> levels} * ((cells[1] + span - 1) >> levels) *
           ((cells[2] + span - 1) >> levels);
  }
  KNN_HD uint32_t coarse_key_of_cell(uint32_t key, int levels = 1) const {
    const uint32_t span = uint32_t{1} << levels;
    const uint32_t x = key % static_cast<uint32_t>(cells[0]);
    const uint32_t yz = key / static_cast<uint32_t>(cells[0]);
    const uint32_t y = yz % static_cast<uint32_t>(cells[1]);
    const uint32_t z = yz / static_cast<uint32_t>(cells[1]);
    const uint32_t coarse_x = (static_cast<uint32_t>(cells[0]) + span - 1) >> levels;
    const uint32_t coarse_y = (static_cast<uint32_t>(cells[1]) + span - 1) >> levels;
    return ((z >> levels) * coarse_y + (y >> levels)) * coarse_x + (x >> levels);
  }

  // The cell of coordinate x on axis a, clamped into the grid (queries outside
  // the box belong to the nearest cell).
  KNN_HD int32_t cell_on_axis(Scalar x, int a) const {
    const double t = (static_cast<double>(x) - static_cast<double>(box_lo[a])) * inv_width[a];
    if (!(t > 0.0)) return 0;
    if (t >= static_cast<double>(cells[a] - 1)) return cells[a] - 1;
    return static_cast<int32_t>(t);
  }

  KNN_HD uint32_t key(int32_t cx, int32_t cy, int32_t cz) const {
    return (static_cast<uint32_t>(cz) * static_cast<uint32_t>(cells[1]) +
            static_cast<uint32_t>(cy)) *
               static_cast<uint32_t>(cells[0]) +
           static_cast<uint32_t>(cx);
  }

  KNN_HD uint32_t key_of(Scalar x, Scalar y, Scalar z) const {
    return key(cell_on_axis(x, 0), cell_on_axis(y, 1), cell_on_axis(z, 2));
  }

  // Scalar lower bound of |fl(p_a - q)| over all indexed points (0 inside the
  // box). Exact without margins: p_a >= box_lo[a], and rounding is monotone.
  KNN_HD Scalar box_gap(Scalar q, int a) const { return interval_gap(q, box_lo[a], box_hi[a]); }

  // Scalar lower bound of |fl(p_a - q)| over the points of cell c on axis a,
  // seen from a query in cell qc (see the header comment); +infinity for a
  // cell outside the grid, which holds no points.
  KNN_HD Scalar axis_gap(Scalar q, int a, int32_t qc, int32_t c) const {
    if (c < 0 || c >= cells[a]) return grid_infinity<Scalar>();
    const Scalar outside = box_gap(q, a);
    if (c == qc) return outside;
    // Relative shrink > 2^-52: covers the rounding of the subtraction below.
    constexpr double kShrink = 1.0 - 1e-14;
    double gap;
    if (c > qc) {  // points at or above the cell's lower boundary
      const double boundary =
          static_cast<double>(box_lo[a]) + static_cast<double>(c) * width[a] - margin[a];
      gap = boundary - static_cast<double>(q);
    } else {  // points at or below the cell's upper boundary
      const double boundary =
          static_cast<double>(box_lo[a]) + static_cast<double>(c + 1) * width[a] + margin[a];
      gap = static_cast<double>(q) - boundary;
    }
    if (!(gap > 0.0)) return outside;
    const Scalar g = at_most(gap * kShrink, Scalar());
    return g > outside ? g : outside;
  }

  // Lower bound of the squared distance (in the scalar type) from q to any
  // point of cell (cx, cy, cz), combining the axes in the contract's order.
  KNN_HD Scalar cell_bound(const Scalar q[3], const int32_t qc[3], int32_t cx, int32_t cy,
                           int32_t cz) const {
    const Scalar gx = axis_gap(q[0], 0, qc[0], cx);
    const Scalar gy = axis_gap(q[1], 1, qc[1], cy);
    const Scalar gz = axis_gap(q[2], 2, qc[2], cz);
    return add_rn(add_rn(mul_rn(gx, gx), mul_rn(gy, gy)), mul_rn(gz, gz));
  }

  // Lower bound of the float32 squared distance from q to any point outside
  // the cube of cells within Chebyshev distance r of qc: such a point lies, on
  // some axis, at least r + 1 cells away, and on every axis outside the box
  // if q is. +infinity when the cube already covers the grid.
  KNN_HD Scalar beyond_shell_bound(const Scalar q[3], const int32_t qc[3], int32_t r) const {
    Scalar outside_sq[3];
    for (int a = 0; a < 3; ++a) {
      const Scalar g = box_gap(q[a], a);
      outside_sq[a] = mul_rn(g, g);
    }
    Scalar best = grid_infinity<Scalar>();
    for (int a = 0; a < 3; ++a) {
      for (int side = -1; side <= 1; side += 2) {
        const Scalar g = axis_gap(q[a], a, qc[a], qc[a] + side * (r + 1));
        if (g == grid_infinity<Scalar>()) continue;  // no cells on that side
        Scalar sq[3] = {outside_sq[0], outside_sq[1], outside_sq[2]};
        sq[a] = mul_rn(g, g);
        const Scalar bound = add_rn(add_rn(sq[0], sq[1]), sq[2]);
        if (bound < best) best = bound;
      }
    }
    return best;
  }

  // -1 when q lies in the lower half of its cell on axis a, else +1: the side
  // whose neighbours are likelier to hold the nearest points.
  KNN_HD int32_t nearer_side(Scalar q, int a, int32_t qc) const {
    const double t = (static_cast<double>(q) - static_cast<double>(box_lo[a])) * inv_width[a];
    return t - static_cast<double>(qc) < 0.5 ? -1 : 1;
  }

  KNN_HD bool shell_covers_grid(const int32_t qc[3], int32_t r) const {
    for (int a = 0; a < 3; ++a)
      if (qc[a] - r > 0 || qc[a] + r < cells[a] - 1) return false;
    return true;
  }
};

using GridLayout = BasicGridLayout<float>;

// The grid for points in [box_lo, box_hi] with about `wanted` cells, never
// more than `cap`.
template <typename Scalar>
BasicGridLayout<Scalar> grid_layout_with_cells(const Scalar box_lo[3], const Scalar box_hi[3],
                                               double wanted, double cap) {
  BasicGridLayout<Scalar> g{};
  double extent[3];
  for (int a = 0; a < 3; ++a) {
    g.box_lo[a] = box_lo[a];
    g.box_hi[a] = box_hi[a];
    extent[a] = static_cast<double>(box_hi[a]) - static_cast<double>(box_lo[a]);
    g.cells[a] = 1;
  }
  wanted = std::fmin(std::fmax(wanted, 1.0), cap);
  // Cubic cells over the axes that have an extent; an axis shorter than one
  // cell gets one cell and the others share the count (repeat: dropping an
  // axis makes the cells of the others larger). The side is computed from
  // logarithms: the product of the extents under- or overflows a double for
  // float64 data (extents of 1e-200 or 1e200), their logarithms do not.
  bool active[3] = {extent[0] > 0.0, extent[1] > 0.0, extent[2] > 0.0};
  for (int pass = 0; pass < 3; ++pass) {
    int d = 0;
    double log_volume = 0.0;
    for (int a = 0; a < 3; ++a)
      if (active[a]) ++d, log_volume += std::log(extent[a]);
    if (d == 0) break;
    const double side = std::exp((log_volume - std::log(wanted)) / d);
    bool dropped = false;
    for (int a = 0; a < 3; ++a)
      if (active[a] && extent[a] < side) active[a] = false, dropped = true;
    if (dropped) continue;
    for (int a = 0; a < 3; ++a)
      if (active[a])
        g.cells[a] =
            static_cast<int32_t>(std::fmin(std::fmax(std::floor(extent[a] / side), 1.0), cap));
    break;
  }
  // Rounding of exp may overshoot the cap by a little: trim the largest axis.
  while (static_cast<double>(g.cells[0]) * g.cells[1] * g.cells[2] > cap) {
    int a = 0;
    for (int b = 1; b < 3; ++b)
      if (g.cells[b] > g.cells[a]) a = b;
    --g.cells[a];
  }
  for (int a = 0; a < 3; ++a) {
    const bool split = g.cells[a] > 1;
    g.width[a] = split ? extent[a] / g.cells[a] : 0.0;
    g.inv_width[a] = split ? g.cells[a] / extent[a] : 0.0;
    // Binning and boundaries round at 2^-53 relative to these magnitudes.
    g.margin[a] = 1e-12 * (std::fabs(static_cast<double>(box_lo[a])) + extent[a]);
  }
  return g;
}

// The grid for n points in [box_lo, box_hi] aiming at `target` points per cell.
template <typename Scalar>
BasicGridLayout<Scalar> make_grid_layout(const Scalar box_lo[3], const Scalar box_hi[3], int64_t n,
                                         int target) {
  const double wanted = static_cast<double>(n) / grid_points_per_cell(target);
  const double cap = std::fmin(static_cast<double>(kGridMaxCells),
                               std::fmax(1.0, kGridMaxCellsPerPoint * static_cast<double>(n)));
  return grid_layout_with_cells(box_lo, box_hi, wanted, cap);
}

// The most cells a grid of n points may get, refined or not (the memory
// helpers' bound).
inline int64_t grid_max_cells(int64_t n) {
  const double most =
      std::fmin(static_cast<double>(kGridMaxCells),
                std::fmax(1.0, kGridMaxRefinedCellsPerPoint * static_cast<double>(n)));
  return static_cast<int64_t>(most);
}

// Occupancy seen from the points: sum over cells of count^2, divided by n,
// is the mean number of points in a point's own cell.
inline double mean_own_cell(uint64_t sum_of_squared_counts, int64_t n) {
  return n > 0 ? static_cast<double>(sum_of_squared_counts) / static_cast<double>(n) : 0.0;
}

// True when a point's own cell holds far more than a uniform grid's
// (target + 1). The sum is exact (64-bit integers) on both engines, so both
// decide alike.
inline bool grid_is_poor(uint64_t sum_of_squared_counts, int64_t n, int target) {
  if (n < kGridMinPointsToJudge) return false;
  return mean_own_cell(sum_of_squared_counts, n) > kGridPoorOccupancyFactor * (target + 1);
}

// True when the points lie on a curve at the scale of the grid whose sum of
// squared cell counts is sum_of_squared_counts and whose coarse grid's (cells
// twice as wide) is coarse_sum (see "Curves" above): the others in a point's
// own cell, sum / n - 1, grow by less than kGridCurveMaxGrowth to the coarse
// cell's (both sums count every point once in its own cell: coarse_sum >=
// sum >= n). Poisson cells of a target each give 2 on a curve, 4 on a
// surface, 8 in a volume. The sums are exact integers on both engines and
// this runs on the host, so both decide alike. A build that refuses curves
// (IndexParams::refuse_curves) tests every grid it tries, kept or not, before
// it keeps or refines it.
// Whether a build that refuses curves counts the coarse cells of a grid it
// would keep: only grids of kGridMinPointsToJudge points or more are judged,
// so smaller builds skip that pass (and its device scratch).
inline bool grid_curve_is_judged(bool refuse_curves, int64_t n) {
  return refuse_curves && n >= kGridMinPointsToJudge;
}

inline bool grid_on_curve(uint64_t sum_of_squared_counts, uint64_t coarse_sum, int64_t n) {
  if (n < kGridMinPointsToJudge) return false;
  const uint64_t points = static_cast<uint64_t>(n);
  const double others = static_cast<double>(sum_of_squared_counts - points);
  const double coarse_others = static_cast<double>(coarse_sum - points);
  return coarse_others < kGridCurveMaxGrowth * others;
}

// For a grid that grid_on_curve judged a curve, with coarser_sum the sum of
// squared counts two steps up (cells four times as wide: coarse_cell_count(2)):
// true when its points are stacked at locations that fill space rather than
// on a curve (see "Stacked points"). The sums are exact integers (coarser_sum
// >= coarse_sum >= sum), so both engines decide alike.
inline bool grid_curve_is_stacked(uint64_t sum_of_squared_counts, uint64_t coarse_sum,
                                  uint64_t coarser_sum) {
  const double step = static_cast<double>(coarse_sum - sum_of_squared_counts);
  const double next_step = static_cast<double>(coarser_sum - coarse_sum);
  return step > 0.0 && next_step >= kGridStackedMinGrowth * step;
}

// Whether a grid binned again with finer cells (after_refinements > 0) is
// good enough to keep; a first grid is kept unless it is poor.
inline bool grid_is_kept(uint64_t sum_of_squared_counts, int64_t n, int target,
                         int after_refinements) {
  if (after_refinements == 0) return !grid_is_poor(sum_of_squared_counts, n, target);
  return n < kGridMinPointsToJudge ||
         mean_own_cell(sum_of_squared_counts, n) <= kGridRefinedOccupancyFactor * (target + 1);
}

// How a point's own-cell count grows with the cell side, as side^e, from
// the grid's occupancy and its coarse grid's (cells twice as wide): e =
// log2(coarse / own), about 3 where the points fill space at this scale, 2
// on a surface, 1 on a curve, 0 where the cells no longer split them.
inline double occupancy_exponent(uint64_t sum_of_squared_counts, uint64_t coarse_sum) {
  if (sum_of_squared_counts == 0 || coarse_sum == 0) return 0.0;
  return std::fmin(
      std::log2(static_cast<double>(coarse_sum) / static_cast<double>(sum_of_squared_counts)), 3.0);
}

// The next try after grid `g`, which was not kept (see "Surfaces" above),
// from its occupancy (sum of squared counts) and its coarse grid's. The
// own-cell count falls as cells^(-e / s) (e: occupancy_exponent, s: the axes
// with more than one cell); the finer grid is the one that law brings to the
// target, capped, and it is tried only when the law predicts it good enough
// to keep (within kGridRefinedPredictionSlack): Gaussian clusters and curves
// are refused here, before a binning that could not succeed. False when no
// finer grid is tried: the refinements are spent, the cells would not split
// the points (all points equal), the cap is reached, or the prediction fails.
template <typename Scalar>
bool finer_grid_layout(const BasicGridLayout<Scalar>& g, uint64_t sum_of_squared_counts,
                       uint64_t coarse_sum, int64_t n, int target, int refinements_done,
                       BasicGridLayout<Scalar>& out) {
  if (refinements_done >= kGridMaxRefinements || n < kGridMinPointsToJudge) return false;
  int split_axes = 0;
  for (int a = 0; a < 3; ++a) split_axes += g.cells[a] > 1;
  const double e = occupancy_exponent(sum_of_squared_counts, coarse_sum);
  if (split_axes == 0 || !(e >= kGridMinOccupancyExponent)) return false;
  const double cells = static_cast<double>(g.cell_count());
  const double own = mean_own_cell(sum_of_squared_counts, n), goal = target + 1.0;
  const double cap = static_cast<double>(grid_max_cells(n));
  const double wanted = std::fmin(cells * std::pow(own / goal, split_axes / e), cap);
  out = grid_layout_with_cells(g.box_lo, g.box_hi, wanted, cap);
  // Less than twice the cells changes too little to pay for another binning.
  const double finer = static_cast<double>(out.cell_count());
  if (!(finer >= 2.0 * cells)) return false;
  const double predicted = own * std::pow(cells / finer, e / split_axes);
  return predicted <= kGridRefinedPredictionSlack * kGridRefinedOccupancyFactor * goal;
}

}  // namespace knn
