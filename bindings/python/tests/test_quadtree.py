"""Point in polygon against the real engines and an exact Python oracle.

The oracle is the header's rule written out in exact rational arithmetic: an
edge (a, b) of any ring of the polygon counts when exactly one endpoint has
y > the point's y and it crosses the horizontal line strictly right of the
point; the point is inside when the count is odd. (The header's "nudge right,
then up" boundary rule reduces to exactly this test; the hand-computed cases
below check it independently.)
"""

from __future__ import annotations

import threading
from fractions import Fraction

import numpy as np
import pytest

import knn_gpgpu as knn
from knn_gpgpu import Status, _library

from conftest import random_points
from spy_native import SpyNative

SQUARE = [[0, 0], [4, 0], [4, 4], [0, 4]]
HOLE = [[1, 1], [3, 1], [3, 3], [1, 3]]
TRIANGLE = [[5, 0], [9, 0], [7, 3]]


def backends(has_device):
    return ["auto", "openmp"] + (["cuda"] if has_device else [])


# ---- the oracle ---------------------------------------------------------------------
def crossings(px, py, ring):
    """Edges of `ring` crossed by the ray from (px, py) towards +x (exact)."""
    count = 0
    v = [(float(x), float(y)) for x, y in np.asarray(ring, np.float32)]
    for i in range(len(v)):
        (x1, y1), (x2, y2) = v[i], v[(i + 1) % len(v)]
        if (y1 > py) == (y2 > py):
            continue
        # crossing x - px = ((x1 - px) * (y2 - y1) + (py - y1) * (x2 - x1)) / (y2 - y1)
        f = Fraction
        num = (f(x1) - f(px)) * (f(y2) - f(y1)) + (f(py) - f(y1)) * (f(x2) - f(x1))
        if num != 0 and (num > 0) == (y2 > y1):
            count += 1
    return count


def inside(px, py, rings):
    return sum(crossings(px, py, r) for r in rings) % 2 == 1


def oracle_members(xy, polygons):
    xy = np.asarray(xy, np.float32)
    return [[i for i, (x, y) in enumerate(xy) if inside(float(x), float(y), rings)]
            for rings in polygons]


def members_of(tree, polygons, **kw):
    got = tree.points_in_each_polygon(*knn.pack_polygons(polygons), **kw)
    return [g.tolist() for g in got]


# ---- packing --------------------------------------------------------------------------
def test_pack_polygons():
    xy, rings, polys = knn.pack_polygons([[SQUARE, HOLE], [TRIANGLE]])
    assert xy.dtype == np.float64 and xy.shape == (11, 2)          # Python numbers: doubles
    f32 = [[np.asarray(r, np.float32) for r in p] for p in [[SQUARE, HOLE], [TRIANGLE]]]
    assert knn.pack_polygons(f32)[0].dtype == np.float32            # float32 rings stay float32
    np.testing.assert_array_equal(rings, [0, 4, 8, 11])
    np.testing.assert_array_equal(polys, [0, 2, 3])
    assert rings.dtype == polys.dtype == np.int64
    xy, rings, polys = knn.pack_polygons([])
    assert xy.shape == (0, 2) and rings.tolist() == [0] and polys.tolist() == [0]


# ---- the header's rule, by hand ---------------------------------------------------------
UNIT = [[0, 0], [1, 0], [1, 1], [0, 1]]
UNIT_POINTS = np.array([[0, 0], [0, 0.5], [0.5, 0], [0.5, 0.5], [1e-7, 1 - 1e-7],
                        [1, 0.5], [0.5, 1], [1, 1], [1, 0], [0, 1], [-1e-7, 0.5],
                        [0.5, -1e-7], [2, 2], [1, 1e-7]], np.float32)
UNIT_INSIDE = [0, 1, 2, 3, 4]


@pytest.mark.parametrize("ring", [UNIT, UNIT[::-1], UNIT + UNIT[:1], (UNIT + UNIT[:1])[::-1],
                                  UNIT[2:] + UNIT[:2]],
                         ids=["ccw-open", "cw-open", "ccw-closed", "cw-closed", "rotated"])
def test_unit_square_boundary_rule(lib, has_device, ring):
    # The header: [0,1]^2 holds (0,0), (0,0.5) and (0.5,0) but not (1,0.5),
    # (0.5,1) or (1,1); (1,0) and (0,1) are corners on the right / top edge.
    assert oracle_members(UNIT_POINTS, [[ring]]) == [UNIT_INSIDE]
    for backend in backends(has_device):
        with knn.Quadtree(UNIT_POINTS, backend=backend) as tree:
            assert members_of(tree, [[ring]]) == [UNIT_INSIDE], backend
            np.testing.assert_array_equal(
                tree.points_in_polygons_count(*knn.pack_polygons([[ring]])), [5])


def test_point_on_shared_edge_goes_to_the_polygon_on_its_right(lib):
    left = [[0, 0], [1, 0], [1, 1], [0, 1]]
    right = [[1, 0], [2, 0], [2, 1], [1, 1]]
    below = [[1, -1], [2, -1], [2, 0], [1, 0]]
    pts = np.array([[1, 0.5],     # on the vertical edge left|right -> right
                    [1.5, 0],     # on the horizontal edge right/below -> right (above it)
                    [1, 0],       # corner of all three -> right (nudged right, then up)
                    [0.5, 0.5], [1.5, -0.5], [3, 3]], np.float32)
    with knn.Quadtree(pts) as tree:
        assert members_of(tree, [[left], [right], [below]]) == [[3], [0, 1, 2], [4]]


@pytest.mark.parametrize("leaf_size", [0, 1, 3])
def test_square_tiling_every_point_in_exactly_one(lib, has_device, leaf_size):
    # 4 x 4 unit squares, alternating orientation, some closed; points on a
    # 0.25 lattice (many on shared edges and corners) plus random ones.
    tiles = []
    for j in range(4):
        for i in range(4):
            ring = [[i, j], [i + 1, j], [i + 1, j + 1], [i, j + 1]]
            if (i + j) % 2:
                ring = ring[::-1]
            if i == 2:
                ring = ring + ring[:1]
            tiles.append([ring])
    g = np.arange(-0.5, 4.75, 0.25, dtype=np.float32)
    lattice = np.stack(np.meshgrid(g, g), axis=-1).reshape(-1, 2)
    rnd = np.random.default_rng(5).uniform(-0.5, 4.5, size=(300, 2)).astype(np.float32)
    pts = np.concatenate([lattice, rnd])
    # By the rule, a point of [0,4)^2 belongs to square (floor x, floor y), others to none.
    want = [[] for _ in tiles]
    for idx, (x, y) in enumerate(pts):
        if 0 <= x < 4 and 0 <= y < 4:
            want[int(np.floor(y)) * 4 + int(np.floor(x))].append(idx)
    assert oracle_members(pts, tiles) == want
    for backend in backends(has_device):
        with knn.Quadtree(pts, backend=backend, leaf_size=leaf_size) as tree:
            got = members_of(tree, tiles)
            assert got == want, backend
            counts = tree.points_in_polygons_count(*knn.pack_polygons(tiles))
            assert counts.tolist() == [len(w) for w in want]
            assert counts.sum() == ((pts >= 0) & (pts < 4)).all(axis=1).sum()


def test_triangle_tiling_with_diagonals(lib, has_device):
    # Each unit square split along its diagonal: points on diagonals, edges and
    # vertices land in exactly one triangle (those inside the covered region).
    tris = []
    for j in range(3):
        for i in range(3):
            a, b, c, d = [i, j], [i + 1, j], [i + 1, j + 1], [i, j + 1]
            tris += [[[a, b, c]], [[a, c, d]]]
    g = np.arange(-0.25, 3.5, 0.125, dtype=np.float32)
    pts = np.stack(np.meshgrid(g, g), axis=-1).reshape(-1, 2)
    want = oracle_members(pts, tris)
    seen = np.zeros(len(pts), int)
    for w in want:
        seen[w] += 1
    covered = ((pts >= 0) & (pts < 3)).all(axis=1)
    np.testing.assert_array_equal(seen, covered.astype(int))      # the oracle agrees
    for backend in backends(has_device):
        with knn.Quadtree(pts, backend=backend, leaf_size=2) as tree:
            assert members_of(tree, tris) == want, backend


# ---- random points, holes, concave rings ------------------------------------------------
COMB = [[10, 0], [16, 0], [16, 5], [15, 5], [15, 1], [14, 1], [14, 5], [13, 5], [13, 1],
        [12, 1], [12, 5], [11, 5], [11, 1], [10, 1]]               # concave, open
STAR = [[3 + 2.5 * np.cos(t) * (1 if k % 2 == 0 else 0.4), 8 + 2.5 * np.sin(t) *
         (1 if k % 2 == 0 else 0.4)] for k, t in enumerate(np.linspace(0, 2 * np.pi, 10,
                                                                        endpoint=False))]
HOLE_CW = [[1.5, 1.5], [1.5, 2.5], [2.5, 2.5], [2.5, 1.5]]           # clockwise
SMALL_HOLE = [[0.5, 3], [0.9, 3.5], [0.5, 3.8]]
POLYGONS = [
    [SQUARE, HOLE],                                  # square with a square hole
    [TRIANGLE],
    [[[-2, -2], [20, -2], [20, 12], [-2, 12], [-2, -2]], SQUARE, COMB],  # closed, two holes
    [COMB],
    [STAR],
    [[[0, 0], [8, 0], [8, 8], [0, 8]], HOLE_CW, SMALL_HOLE, [[5, 5], [7, 5], [6, 7]]],
    [[[1, 1], [3, 1], [3, 3], [1, 3]]],             # equals HOLE: its edges are shared
]


def cloud(seed, n):
    rng = np.random.default_rng(seed)
    pts = rng.uniform([-3, -3], [21, 13], size=(n, 2))
    snapped = np.round(pts[: n // 2] * 4) / 4         # half on a 0.25 lattice: edges, vertices
    return np.concatenate([snapped, pts[n // 2:]]).astype(np.float32)


@pytest.mark.parametrize("leaf_size", [0, 1, 16])
def test_polygons_with_holes_match_the_oracle(lib, has_device, leaf_size):
    pts = cloud(leaf_size + 1, 1500)
    want = oracle_members(pts, POLYGONS)
    assert all(len(w) > 5 for w in want)
    vertices, rings, polys = knn.pack_polygons(POLYGONS)
    for backend in backends(has_device):
        with knn.Quadtree(pts, backend=backend, leaf_size=leaf_size, threads=2) as tree:
            assert tree.n == 1500
            counts = tree.points_in_polygons_count(vertices, rings, polys)
            assert counts.dtype == np.int64
            assert counts.tolist() == [len(w) for w in want], backend
            offs, ind = tree.points_in_polygons(vertices, rings, polys)
            assert offs.tolist() == np.concatenate([[0], np.cumsum(counts)]).tolist()
            assert ind.dtype == np.int64 and ind.shape == (int(counts.sum()),)
            assert [ind[offs[p]:offs[p + 1]].tolist() for p in range(len(POLYGONS))] == want
            each = knn.points_in_each_polygon(tree, vertices, rings, polys,
                                              options=knn.Options(threads=1))
            assert [e.tolist() for e in each] == want
            # explicit, correct out_offsets are accepted
            offs2, ind2 = knn.points_in_polygons(tree, vertices, rings, polys, out_offsets=offs)
            np.testing.assert_array_equal(ind2, ind)


def test_equal_points_and_extreme_coordinates(lib, has_device):
    # 2000 copies of one point (on an edge), a few others, far-away outliers.
    pts = np.concatenate([np.tile([[4, 2]], (2000, 1)), [[2, 2], [0.5, 0.5], [1e6, -1e6],
                                                         [-3e7, 5]]]).astype(np.float32)
    polys = [[SQUARE, HOLE], [[[4, 0], [8, 0], [8, 4], [4, 4]]]]
    want = [[2001], list(range(2000))]                # (4, 2) lies on the shared edge x = 4
    assert oracle_members(pts, polys) == want
    for backend in backends(has_device):
        with knn.Quadtree(pts, backend=backend, leaf_size=1) as tree:
            assert members_of(tree, polys) == want


def test_empty_inputs(lib):
    with knn.Quadtree(np.empty((0, 2), np.float32)) as tree:
        assert tree.n == 0
        assert tree.points_in_polygons_count(*knn.pack_polygons([[SQUARE]])).tolist() == [0]
        assert members_of(tree, [[SQUARE], [TRIANGLE]]) == [[], []]
    with knn.Quadtree(cloud(3, 50)) as tree:
        assert tree.points_in_polygons_count(*knn.pack_polygons([])).shape == (0,)
        offs, ind = tree.points_in_polygons(*knn.pack_polygons([]))
        assert offs.tolist() == [0] and ind.shape == (0,)
        assert tree.points_in_each_polygon(*knn.pack_polygons([])) == []


def test_concurrent_queries_on_one_tree(lib):
    pts = cloud(9, 3000)
    packed = knn.pack_polygons(POLYGONS)
    with knn.Quadtree(pts) as tree:
        want = tree.points_in_polygons(*packed)[1]
        results = []

        def work():
            for _ in range(5):
                results.append(tree.points_in_polygons(*packed)[1])

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(results) == 20
        assert all(np.array_equal(r, want) for r in results)


# ---- errors -----------------------------------------------------------------------------
def test_nan_point_is_refused_naming_it(lib):
    pts = cloud(4, 40)
    pts[7, 1] = np.nan
    with pytest.raises(knn.NonfiniteInputError) as info:
        knn.Quadtree(pts)
    err = info.value
    assert err.status == Status.NONFINITE_INPUT and err.function == "knn_quadtree_build"
    assert err.message.startswith("knn_quadtree_build") and "point 7" in err.message
    pts[7, 1] = np.inf
    with pytest.raises(knn.NonfiniteInputError, match="point 7"):
        knn.Quadtree(pts, backend="openmp")


def bad(tree, polygons_or_arrays, exc, *fragments, function="knn_points_in_polygons_count"):
    args = (knn.pack_polygons(polygons_or_arrays) if isinstance(polygons_or_arrays, list)
            else polygons_or_arrays)
    args = (np.asarray(args[0], np.float32),) + tuple(args[1:])  # the float call's own text
    with pytest.raises(exc) as info:
        tree.points_in_polygons_count(*args)
    err = info.value
    assert err.function == function and err.message.startswith(function), err.message
    for fragment in fragments:
        assert fragment in err.message, (fragment, err.message)
    assert knn.last_error() == err.message            # the library's own text, unchanged
    return err


def test_bad_polygons_are_refused_with_the_library_text(lib):
    with knn.Quadtree(cloud(5, 200)) as tree:
        good = tree.points_in_polygons_count(*knn.pack_polygons(POLYGONS))
        xy, rings, polys = knn.pack_polygons([[SQUARE, HOLE], [TRIANGLE]])
        xy = xy.astype(np.float32)                      # the float calls (see test_f64.py)
        bad(tree, [[SQUARE, [[0, 0], [1, 1]]]], knn.InvalidArgumentError, "ring 1",
            "fewer than 3")
        bad(tree, [[SQUARE], [[[0, 0], [1, 0], [0, 0]]]], knn.InvalidArgumentError,
            "ring 1")                                   # back and forth: 2 distinct vertices
        bad(tree, [[SQUARE + [[0, 4], [0, 4]]], [[[0, 0], [0, 0], [1, 1], [1, 1], [0, 0]]]],
            knn.InvalidArgumentError, "ring 1")         # repeats dropped: 2 left
        bad(tree, (xy, [0, 4, 3, 11], polys), knn.InvalidArgumentError,
            "ring_offsets decreases at ring 1")
        bad(tree, (xy, [1, 4, 8, 11], polys), knn.InvalidArgumentError, "ring_offsets[0] is 1")
        bad(tree, (xy, rings, [0, 2, 2, 3]), knn.InvalidArgumentError, "polygon 1 has no ring")
        bad(tree, (xy, rings, [0, 2]), knn.InvalidArgumentError, "must equal n_rings")
        nan_xy = xy.copy()
        nan_xy[5, 0] = np.nan
        bad(tree, (nan_xy, rings, polys), knn.NonfiniteInputError, "vertex 5")
        with pytest.raises(knn.InvalidArgumentError) as info:
            tree.points_in_polygons_count(xy, rings, polys, options=knn.Options(threads=-1))
        assert "opt->threads is -1" in info.value.message
        # out_offsets that disagree with the counts
        offs, _ = tree.points_in_polygons(xy, rings, polys)
        wrong = offs.copy()
        wrong[1:] += 1
        with pytest.raises(knn.InvalidArgumentError) as info:
            tree.points_in_polygons(xy, rings, polys, out_offsets=wrong)
        assert info.value.function == "knn_points_in_polygons"
        assert "out_offsets[1] is %d but the counts give %d" % (offs[1] + 1, offs[1]) \
            in info.value.message
        # the tree still works after every refusal
        np.testing.assert_array_equal(
            tree.points_in_polygons_count(*knn.pack_polygons(POLYGONS)), good)


def test_backend_and_option_errors(lib, has_device):
    pts = cloud(6, 30)
    with pytest.raises(knn.InvalidArgumentError, match="opt->leaf_size is -2"):
        knn.Quadtree(pts, leaf_size=-2)
    with pytest.raises(ValueError, match="backend"):
        knn.Quadtree(pts, backend="opencl")               # the binding's own check
    if not has_device:
        with pytest.raises(knn.NoDeviceError) as info:
            knn.Quadtree(pts, backend="cuda")
        assert info.value.function == "knn_quadtree_build"
        assert "KNN_BACKEND_CUDA" in info.value.message


def test_cancel_flag_stops_a_count(lib):
    pts = cloud(7, 2000)
    packed = knn.pack_polygons(POLYGONS)
    with knn.Quadtree(pts, backend="openmp") as tree:
        want = tree.points_in_polygons_count(*packed)
        flag = knn.CancelFlag()
        with flag:
            flag.cancel()
            with pytest.raises(knn.CancelledError) as info:
                tree.points_in_polygons_count(*packed)
            assert info.value.status == Status.CANCELLED
            assert "cancel" in info.value.message
            flag.reset()
            np.testing.assert_array_equal(tree.points_in_polygons_count(*packed), want)
        flag.cancel()                                      # unregistered: no effect
        np.testing.assert_array_equal(tree.points_in_polygons_count(*packed), want)
    with pytest.raises(TypeError):
        knn.set_cancel_flag(1)


def test_raw_calls_with_null_handles(lib):
    assert lib.knn_quadtree_free(None) == Status.OK
    assert lib.knn_points_in_polygons_count(None, None, None, 0, None, 0, None, None) \
        == Status.INVALID_ARGUMENT
    assert knn.last_error() == "knn_points_in_polygons_count: tree is NULL"
    assert lib.knn_points_in_polygons(None, None, None, 0, None, 0, None, None, None) \
        == Status.INVALID_ARGUMENT
    assert lib.knn_quadtree_build(None, 3, None, None) == Status.INVALID_ARGUMENT


# ---- the binding's marshalling ------------------------------------------------------------
def test_marshalling_zero_copy_and_lifetime(lib, monkeypatch):
    spy = SpyNative(lib)
    monkeypatch.setattr(_library, "_native", spy)
    pts = cloud(8, 400)
    with knn.Quadtree(pts, threads=2, leaf_size=4) as tree:
        build = spy.named("knn_quadtree_build")[-1]
        assert build[1:3] == (pts.ctypes.data, 400)                # zero copy
        assert build[3].threads == 2 and build[3].leaf_size == 4
        xy, rings, polys = knn.pack_polygons(POLYGONS)
        xy = xy.astype(np.float32)                                  # float32 vertices: the float call
        opt = knn.Options(threads=1)
        counts = tree.points_in_polygons_count(xy, rings, polys, options=opt)
        call = spy.named("knn_points_in_polygons_count")[-1]
        assert call[2:7] == (xy.ctypes.data, rings.ctypes.data, len(rings) - 1,
                             polys.ctypes.data, len(POLYGONS))
        assert call[8] is opt
        assert counts.tolist() == [len(w) for w in oracle_members(pts, POLYGONS)]
        # other input types are converted once and give the same answer
        lists = tree.points_in_polygons_count(xy.astype(np.float64).tolist(), rings.tolist(),
                                              polys.astype(np.int32))
        np.testing.assert_array_equal(lists, counts)
    assert tree.closed and spy.calls[-1][0] == "knn_quadtree_free"
    with pytest.raises(ValueError, match="closed"):
        tree.points_in_polygons_count(xy, rings, polys)
    tree.close()                                                    # twice is fine


def test_offsets_are_bounds_checked_before_the_call(lib, monkeypatch):
    spy = SpyNative(lib)
    monkeypatch.setattr(_library, "_native", spy)
    tree = knn.Quadtree(np.zeros((3, 2), np.float32))
    xy, rings, polys = knn.pack_polygons([[SQUARE, HOLE], [TRIANGLE]])
    calls = len(spy.calls)
    with pytest.raises(ValueError, match="ring_offsets"):
        tree.points_in_polygons_count(xy[:10], rings, polys)          # runs past the vertices
    with pytest.raises(ValueError, match="ring_offsets"):
        tree.points_in_polygons_count(xy, rings - 1, polys)
    with pytest.raises(ValueError, match="polygon_offsets"):
        tree.points_in_polygons_count(xy, rings, [0, 2, 4])           # past the rings
    with pytest.raises(TypeError, match="integers"):
        tree.points_in_polygons_count(xy, rings.astype(float), polys)
    with pytest.raises(ValueError, match="1-D"):
        tree.points_in_polygons_count(xy, rings.reshape(2, 2), polys)
    with pytest.raises(ValueError, match="shape"):
        tree.points_in_polygons_count(xy.reshape(-1), rings, polys)
    with pytest.raises(ValueError, match="out_offsets"):
        tree.points_in_polygons(xy, rings, polys, out_offsets=[0, 1])
    with pytest.raises(ValueError, match="negative"):
        tree.points_in_polygons(xy, rings, polys, out_offsets=[0, -1, 0])
    with pytest.raises(ValueError, match="shape"):
        knn.Quadtree(np.zeros((4, 3), np.float32))
    assert len(spy.calls) == calls                                   # nothing reached C
    tree.close()
