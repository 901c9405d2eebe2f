"""Point in polygon: the real library (UNSUPPORTED in this release) and the
binding's plumbing and bounds checks."""

from __future__ import annotations

import numpy as np
import pytest

import knn_gpgpu as knn
from knn_gpgpu import Status, _library

from conftest import random_points
from fake_engine import FakeNative, inside

SQUARE = [[0, 0], [4, 0], [4, 4], [0, 4]]
HOLE = [[1, 1], [3, 1], [3, 3], [1, 3]]
TRIANGLE = [[5, 0], [9, 0], [7, 3]]


def polygons():
    return knn.pack_polygons([[SQUARE, HOLE], [TRIANGLE]])


def oracle_members(xy, polys):
    out = []
    for rings in polys:
        rings = [np.asarray(r, np.float32) for r in rings]
        out.append([i for i, (x, y) in enumerate(xy)
                    if inside(x, y, rings[0]) and not any(inside(x, y, h) for h in rings[1:])])
    return out


def quadtree_available() -> bool:
    try:
        with knn.Quadtree(np.zeros((3, 2), np.float32)):
            return True
    except knn.UnsupportedError:
        return False


def test_pack_polygons():
    xy, rings, polys = polygons()
    assert xy.dtype == np.float32 and xy.shape == (11, 2)
    np.testing.assert_array_equal(rings, [0, 4, 8, 11])
    np.testing.assert_array_equal(polys, [0, 2, 3])
    assert rings.dtype == polys.dtype == np.int64


def test_real_library(lib):
    pts = random_points(1, 300, 2) / 10 + 4.5
    if not quadtree_available():
        with pytest.raises(knn.UnsupportedError) as info:
            knn.Quadtree(pts, backend="openmp")
        assert info.value.status == Status.UNSUPPORTED
        assert info.value.function == "knn_quadtree_build"
        assert lib.knn_quadtree_free(None) == Status.OK
        assert lib.knn_points_in_polygons_count(None, None, None, 0, None, 0, None, None) != 0
        assert lib.knn_points_in_polygons(None, None, None, 0, None, 0, None, None, None) != 0
        return
    with knn.Quadtree(pts) as tree:
        offs, ind = tree.points_in_polygons(*polygons())
        want = oracle_members(pts, [[SQUARE, HOLE], [TRIANGLE]])
        assert [ind[offs[p]:offs[p + 1]].tolist() for p in range(2)] == want


def test_plumbing_through_the_stand_in(lib, monkeypatch):
    fake = FakeNative(lib)
    monkeypatch.setattr(_library, "_native", fake)
    rng = np.random.default_rng(3)
    pts = rng.uniform(-1, 10, size=(400, 2)).astype(np.float32)
    want = oracle_members(pts, [[SQUARE, HOLE], [TRIANGLE]])
    with knn.Quadtree(pts, threads=2) as tree:
        assert fake.calls[-1] == ("knn_quadtree_build", 400, pts.ctypes.data)
        counts = tree.points_in_polygons_count(*polygons())
        assert counts.dtype == np.int64
        np.testing.assert_array_equal(counts, [len(w) for w in want])
        offs, ind = knn.points_in_polygons(tree, *polygons())
        assert offs.tolist() == [0, len(want[0]), len(want[0]) + len(want[1])]
        assert [ind[offs[p]:offs[p + 1]].tolist() for p in range(2)] == want
        offs2, ind2 = tree.points_in_polygons(*polygons(), out_offsets=offs)
        np.testing.assert_array_equal(ind2, ind)
        with pytest.raises(knn.InvalidArgumentError, match="disagree"):
            tree.points_in_polygons(*polygons(), out_offsets=offs + [0, 1, 1])
        np.testing.assert_array_equal(knn.points_in_polygons_count(tree, *polygons()), counts)
    assert tree.closed and fake.calls[-1][0] == "knn_quadtree_free"
    with pytest.raises(ValueError, match="closed"):
        tree.points_in_polygons_count(*polygons())


def test_offsets_are_bounds_checked_before_the_call(lib, monkeypatch):
    fake = FakeNative(lib)
    monkeypatch.setattr(_library, "_native", fake)
    tree = knn.Quadtree(np.zeros((3, 2), np.float32))
    xy, rings, polys = polygons()
    calls = len(fake.calls)
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
    assert len(fake.calls) == calls                                 # nothing reached C
    tree.close()
