// The searches' walks over the uniform grid of common/grid_layout.h, shared
// by the OpenMP and the CUDA engine: the cells of a shell in the order they
// are taken, the walk of growing shells of a k-nearest search and its stop
// (exact by the layout's lower bounds; "Ties" and "Curves" in
// grid_layout.h), the cells around a query, and the ball of a radius search.
#pragma once

#include <cstdint>

#include "grid_layout.h"
#include "host_device.h"

namespace knn {

// The cells of one axis within r of the query's cell qc that lie in the
// grid, in the order the walk takes them: qc, then the nearer and the
// farther side alternately going outwards, then the rest of the longer side.
// Clamped to the grid, so a shell of a flat or collinear data set costs its
// few cells, not 2r + 1 tests per axis.
struct OutwardCells {
  int32_t center, side, near_count, far_count;

  KNN_HD OutwardCells(int32_t qc, int32_t cells, int32_t r, int32_t nearer)
      : center(qc), side(nearer) {
    const int32_t below = qc < r ? qc : r;
    const int32_t above = cells - 1 - qc < r ? cells - 1 - qc : r;
    near_count = side < 0 ? below : above;
    far_count = side < 0 ? above : below;
  }
  KNN_HD int32_t count() const { return 1 + near_count + far_count; }
  KNN_HD int32_t at(int32_t i) const {
    const int32_t both = near_count < far_count ? near_count : far_count;
    if (i <= 2 * both) return center + (i + 1) / 2 * (i % 2 ? side : -side);
    return center + (i - both) * (near_count > far_count ? side : -side);
  }
};

// What a scan of a run of cells (walk_shells' visit_range) may leave out.
// Within a cell the points are in ascending index order.
template <typename Scalar>
struct CellScan {
  Scalar bound;   // lower bound of the distance of every point of the run
  int32_t swept;  // points of a smaller index were offered by the index sweep
  // Whether the point `id` and the rest of its cell (larger indices, no
  // nearer than `bound`) can no longer beat the k-th candidate.
  KNN_HD bool rest_of_cell_loses(int32_t id, const BasicNeighbor<Scalar>& kth) const {
    return id > kth.index && !(bound < kth.sq_distance);
  }
  KNN_HD bool already_offered(int32_t id) const { return id < swept; }
  // Whether the two tests above can rule out any point of the run: a scan
  // may take the plain loop when they cannot (the k-th only shrinks, so a
  // point the plain loop offers in vain is merely one the list rejects).
  KNN_HD bool may_rule_out(const BasicNeighbor<Scalar>& kth) const {
    return swept > 0 || !(bound < kth.sq_distance);
  }
};

// The cube of cells within Chebyshev distance `radius` of `center`: what the
// shells have covered.
struct ShellCube {
  int32_t center[3], radius;
  template <typename Scalar>
  KNN_HD bool contains(const BasicGridLayout<Scalar>& g, Scalar x, Scalar y, Scalar z) const {
    const int32_t c[3] = {g.cell_on_axis(x, 0), g.cell_on_axis(y, 1), g.cell_on_axis(z, 2)};
    for (int a = 0; a < 3; ++a)
      if (c[a] < center[a] - radius || c[a] > center[a] + radius) return false;
    return true;
  }
};

// Index-sweep steps between two reads of the k-th candidate.
constexpr int32_t kGridSweepStep = 32;

// Runs (a row of cells, or one cell) a k-nearest walk over n points may
// visit while its list is not yet full before it gives up
// (ShellWalk::Isolated): 1 in kGridIsolatedPointsPerRun of the points, so
// that a walk that gives up costs at most half the scan of every point that
// replaces it (on the GPU one lane walks while a warp scans, 32 points a
// step), and at least kGridIsolatedMinRuns (shells out to r = 4 or so) and
// k, the list's length: a walk among the points reads a point or more a run,
// so it gives up only when its runs averaged less than one point, and the
// runs it read cost about what offering its k points would. Without k a
// list longer than the runs allowed gave up among the points: 20,000 points
// on a row of cells along x (a target each, two runs a shell), all-kNN k =
// 1000: 6.4 s with every query scanning all points, 0.4 s walking, 2 cores.
constexpr int64_t kGridIsolatedMinRuns = 256;
constexpr int64_t kGridIsolatedPointsPerRun = 64;
KNN_HD int64_t isolated_walk_runs(int64_t n, int k) {
  const int64_t share = n / kGridIsolatedPointsPerRun;
  const int64_t most = share > kGridIsolatedMinRuns ? share : kGridIsolatedMinRuns;
  return most > k ? most : k;
}

// The k-nearest walk: shells of cells around the query's cell (Chebyshev
// distance r = 0, 1, ...), ended when the bound of everything beyond the
// shell exceeds the current k-th candidate. kth() returns it afresh (it
// shrinks as points are offered): (+infinity, INT32_MAX) while the list is
// not full.
//
// A shell is walked as runs of cells along x, which are contiguous in cell
// order: visit_range(first_key, last_key, scan) offers the points of cells
// first_key..last_key that scan (a CellScan) does not rule out, and returns
// how many it read. The rows on the shell's z and y faces are whole runs
// [qx - r, qx + r]; the others hold only the two cells x = qx +- r. A plane
// or row is skipped when its bound (the x gap taken as the query's own, the
// smallest on the run) exceeds the k-th distance: float addition is
// monotone, so ((0 + y^2) + z^2) bounds every cell of the run from below.
// Planes and rows go from the query's own outwards, the nearer side first,
// so that the k-th distance shrinks early and prunes the rest.
//
// Ties. When the bound beyond the shell equals the k-th distance, points
// beyond can only tie, and only those of a smaller index than the k-th can
// enter. The walk then also sweeps indices upwards from 0:
// sweep(first, last, cube) offers the points first..last-1 lying outside the
// cube (those inside were offered by the shells, or ruled out). Once the
// sweep passes the k-th's index the search is complete. The sweep advances
// by as many points as the shells have read since its last step, so it
// costs at most what the walk costs; the shells skip the points it offered
// (CellScan::swept: a point of a smaller index in a later shell was outside
// the cube when swept).
//
// Isolated queries. A query away from the points (inside a scanned object,
// off a surface, an outlier) would walk shell after shell of empty cells,
// row by row, until its list fills. So a walk that has visited more runs
// than runs_allowed (isolated_walk_runs) with its list not yet full ends
// there, unfinished, and says so; the caller offers every point instead
// (one run over all cells: O(n)), which costs more than the runs allowed
// did. A query where the points merely thin out (a density ramp, the far
// edge of a scan) fills its list a few shells on and finishes its walk:
// ending every walk whose 3 x 3 x 3 cells held no point sent such queries
// to the O(n) scan (10^7 points of density rising as x, k = 72: 1455 ms
// against the kd-tree's 149, H200).
enum class ShellWalk { Complete, Isolated };

template <typename Scalar, class Kth, class VisitRange, class Sweep>
KNN_HD ShellWalk walk_shells(const BasicGridLayout<Scalar>& g, const Scalar q[3],
                             int64_t runs_allowed, Kth&& kth, VisitRange&& visit_range,
                             Sweep&& sweep) {
  const int32_t qc[3] = {g.cell_on_axis(q[0], 0), g.cell_on_axis(q[1], 1), g.cell_on_axis(q[2], 2)};
  const int32_t side_y = g.nearer_side(q[1], 1, qc[1]), side_z = g.nearer_side(q[2], 2, qc[2]);
  const Scalar own_x = g.box_gap(q[0], 0);
  const Scalar own_x_sq = mul_rn(own_x, own_x);
  int32_t swept = 0;   // indices below were offered by the sweep
  int64_t credit = 0;  // points and runs read by the shells, not yet matched by the sweep
  int64_t runs = 0;    // runs visited
  const auto visit = [&](uint32_t first_key, uint32_t last_key, Scalar bound) {
    const int64_t points = visit_range(first_key, last_key, CellScan<Scalar>{bound, swept});
    ++runs;
    credit += 1 + points;
  };
  for (int32_t r = 0;; ++r) {
    const int32_t x0 = qc[0] - r > 0 ? qc[0] - r : 0;
    const int32_t x1 = qc[0] + r < g.cells[0] - 1 ? qc[0] + r : g.cells[0] - 1;
    const OutwardCells zs(qc[2], g.cells[2], r, side_z), ys(qc[1], g.cells[1], r, side_y);
    for (int32_t iz = 0; iz < zs.count(); ++iz) {
      const int32_t cz = zs.at(iz);
      const Scalar gz = g.axis_gap(q[2], 2, qc[2], cz);
      const Scalar z_sq = mul_rn(gz, gz);
      if (z_sq > kth().sq_distance) continue;
      const bool z_face = cz == qc[2] - r || cz == qc[2] + r;
      for (int32_t iy = 0; iy < ys.count(); ++iy) {
        const int32_t cy = ys.at(iy);
        const Scalar gy = g.axis_gap(q[1], 1, qc[1], cy);
        const Scalar y_sq = mul_rn(gy, gy);
        const Scalar row_bound = add_rn(add_rn(own_x_sq, y_sq), z_sq);
        if (row_bound > kth().sq_distance) continue;
        if (z_face || cy == qc[1] - r || cy == qc[1] + r) {
          visit(g.key(x0, cy, cz), g.key(x1, cy, cz), row_bound);
          continue;
        }
        // The two x faces (r > 0 here: at r = 0 every row is a face row).
        for (int32_t cx = qc[0] - r; cx <= qc[0] + r; cx += 2 * r) {
          if (cx < 0 || cx >= g.cells[0]) continue;
          const Scalar gx = g.axis_gap(q[0], 0, qc[0], cx);
          const Scalar cell_bound = add_rn(add_rn(mul_rn(gx, gx), y_sq), z_sq);
          if (!(cell_bound > kth().sq_distance))
            visit(g.key(cx, cy, cz), g.key(cx, cy, cz), cell_bound);
        }
      }
    }
    if (g.shell_covers_grid(qc, r)) return ShellWalk::Complete;
    BasicNeighbor<Scalar> k = kth();
    if (runs > runs_allowed && k.sq_distance == grid_infinity<Scalar>()) return ShellWalk::Isolated;
    const Scalar beyond = g.beyond_shell_bound(q, qc, r);
    if (beyond > k.sq_distance) return ShellWalk::Complete;
    if (beyond < k.sq_distance || k.sq_distance == grid_infinity<Scalar>()) continue;
    const ShellCube cube{{qc[0], qc[1], qc[2]}, r};
    while (credit > 0 && swept < k.index) {
      int32_t step = k.index - swept < kGridSweepStep ? k.index - swept : kGridSweepStep;
      if (credit < step) step = static_cast<int32_t>(credit);
      sweep(swept, swept + step, cube);
      swept += step;
      credit -= step;
      k = kth();
    }
    if (swept >= k.index) return ShellWalk::Complete;
  }
}

// The points in the 3 x 3 x 3 cells around q's own (clamped to the grid),
// read as the rows along x of the nine (y, z) pairs; start(key) is the
// position of cell key's first point in cell order (start(key + 1) its end).
template <typename Scalar, class Start>
KNN_HD int64_t points_around(const BasicGridLayout<Scalar>& g, const Scalar q[3], Start&& start) {
  int32_t lo[3], hi[3];
  for (int a = 0; a < 3; ++a) {
    const int32_t c = g.cell_on_axis(q[a], a);
    lo[a] = c > 0 ? c - 1 : 0;
    hi[a] = c + 1 < g.cells[a] ? c + 1 : g.cells[a] - 1;
  }
  int64_t points = 0;
  for (int32_t cz = lo[2]; cz <= hi[2]; ++cz)
    for (int32_t cy = lo[1]; cy <= hi[1]; ++cy)
      points += start(g.key(hi[0], cy, cz) + 1) - start(g.key(lo[0], cy, cz));
  return points;
}

// Whether those cells hold no point. Such a query may lie away from the
// points (inside a scanned object, off a surface), where walk_shells may
// cross row after row of empty cells until its runs allowed are spent and
// the search then scans every point for it.
template <typename Scalar, class Start>
KNN_HD bool no_point_around(const BasicGridLayout<Scalar>& g, const Scalar q[3], Start&& start) {
  return points_around(g, q, start) == 0;
}

// Whether q lies more than one cell width beyond the points' box on an axis
// the grid splits. The 3 x 3 x 3 cells around its own cell, unclamped, then
// hold no point, though the clamped ones by the box's face that
// points_around reads may: its walk then reads every cell of a cap of that
// face, which widens as the root of q's distance (a sphere of that radius
// grazing the face). Uniform points, queries 3 box widths away, 2 cores,
// n = m = 5 * 10^4, k = 8: grid 502 ms, kd-tree 199 (bench/bench_auto.cpp
// "queries-outside").
template <typename Scalar>
KNN_HD bool beyond_the_box(const BasicGridLayout<Scalar>& g, const Scalar q[3]) {
  for (int a = 0; a < 3; ++a)
    if (g.cells[a] > 1 && static_cast<double>(g.box_gap(q[a], a)) * g.inv_width[a] > 1.0)
      return true;
  return false;
}

// The queries AUTO counts as away from the points (share_of_isolated_queries):
// at most one point around them (none: off the points; one: an outlier of
// the indexed points asking for its own neighbours, as all-kNN calls and
// the statistics do), or beyond the box. The search itself hands only those
// with none to a scan of every point; the others walk shells of empty cells
// out to their neighbours (a thread each, its warp waiting). Either costs
// the grid far more than the kd-tree, which descends to the points near them.
template <typename Scalar, class Start>
KNN_HD bool away_from_points(const BasicGridLayout<Scalar>& g, const Scalar q[3], Start&& start) {
  return beyond_the_box(g, q) || points_around(g, q, start) <= 1;
}

// The radius walk: every cell whose bound is within r2 (the square of the
// radius in the scalar type), and no other. The per-axis ranges are grown from the
// query's cell while their one-axis bound stays within r2.
// visit_cell(key, key) has the form of walk_shells' visit_range.
template <typename Scalar, class VisitCell>
KNN_HD void walk_ball(const BasicGridLayout<Scalar>& g, const Scalar q[3], Scalar r2,
                      VisitCell&& visit_cell) {
  const int32_t qc[3] = {g.cell_on_axis(q[0], 0), g.cell_on_axis(q[1], 1), g.cell_on_axis(q[2], 2)};
  int32_t lo[3], hi[3];
  for (int a = 0; a < 3; ++a) {
    lo[a] = hi[a] = qc[a];
    while (hi[a] + 1 < g.cells[a]) {
      const Scalar gap = g.axis_gap(q[a], a, qc[a], hi[a] + 1);
      if (!(mul_rn(gap, gap) <= r2)) break;
      ++hi[a];
    }
    while (lo[a] > 0) {
      const Scalar gap = g.axis_gap(q[a], a, qc[a], lo[a] - 1);
      if (!(mul_rn(gap, gap) <= r2)) break;
      --lo[a];
    }
  }
  for (int32_t cz = lo[2]; cz <= hi[2]; ++cz)
    for (int32_t cy = lo[1]; cy <= hi[1]; ++cy)
      for (int32_t cx = lo[0]; cx <= hi[0]; ++cx)
        if (g.cell_bound(q, qc, cx, cy, cz) <= r2) visit_cell(g.key(cx, cy, cz), g.key(cx, cy, cz));
}

}  // namespace knn
