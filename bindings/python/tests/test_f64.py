"""float64 end to end: the dtype picks the entry point, nothing is rounded silently.

Oracles: a numpy float64 brute force computed in the contract's order
(((d0*d0 + d1*d1) + d2*d2) + ..., every operation a separate rounded float64
numpy operation, ties by the smaller index), scipy's cKDTree, and exact
rational arithmetic (fractions) for point in polygon.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import knn_gpgpu as knn
from knn_gpgpu import _library

from conftest import all_sq64, oracle64
from spy_native import FakeCudaArray, SpyNative

STRUCTURES = ["kdtree", "grid", "brute_force"]


def utm_cloud(seed: int, n: int) -> np.ndarray:
    """A 10 m cube at millimetre-ish spacing, offset to 4.5e6 m (a UTM northing)."""
    rng = np.random.default_rng(seed)
    return 4.5e6 + rng.uniform(0.0, 10.0, size=(n, 3))


@pytest.fixture(scope="module")
def utm():
    return utm_cloud(1, 1500), utm_cloud(2, 200)


# ---- kNN, self, radius on offset data ------------------------------------------------------
def backends(has_device):
    return ["openmp", "auto"] + (["cuda"] if has_device else [])


@pytest.mark.parametrize("structure", STRUCTURES)
def test_utm_offset_knn_equals_float64_brute_force(lib, utm, structure, has_device):
    pts, q = utm
    want_sq, want_ind = oracle64(pts, q, 8)
    for backend in backends(has_device):
        check_utm_index(pts, q, want_sq, want_ind, backend, structure)


def check_utm_index(pts, q, want_sq, want_ind, backend, structure):
    with knn.Index(pts, backend=backend, structure=structure) as index:
        assert index.dtype == np.float64
        sq, ind = index.query(q, 8, distances_first=True)
        assert sq.dtype == np.float64 and ind.dtype == np.int32
        np.testing.assert_array_equal(ind, want_ind)
        assert sq.tobytes() == want_sq.tobytes()                 # bit for bit
        # all-kNN of the indexed points, with and without each point itself
        self_sq, self_ind = index.query_self(5, exclude_self=True, distances_first=True)
        acc = all_sq64(pts, pts[:300])
        np.fill_diagonal(acc[:, :300], np.inf)
        order = np.argsort(acc, axis=1, kind="stable")[:, :5]
        np.testing.assert_array_equal(self_ind[:300], order)
        assert self_sq[:300].tobytes() == np.take_along_axis(acc, order, axis=1).tobytes()


def test_utm_offset_float32_would_be_wrong(utm):
    """Why the float64 path exists: the same data rounded to float32 loses the answer
    (so the test above can tell a silent float32 conversion from the real thing)."""
    pts, q = utm
    _, want = oracle64(pts, q, 8)
    _, rounded = oracle64(pts.astype(np.float32), q.astype(np.float32), 8)
    assert (rounded != want).any()


def test_utm_offset_radius_rows_and_csr(lib, utm):
    pts, q = utm
    r = 0.9
    acc = all_sq64(pts, q)
    within = acc <= r * r                                         # the contract: r*r in float64
    with knn.Index(pts, backend="openmp") as index:
        sq, ind, counts = index.radius(q, r, 64, distances_first=True)
        assert sq.dtype == np.float64
        np.testing.assert_array_equal(counts, within.sum(axis=1))
        assert counts.max() < 64
        csr = index.radius_csr(q, r)
        assert csr.sq_distances.dtype == np.float64
        np.testing.assert_array_equal(index.radius_counts(q, r), within.sum(axis=1))
        for i in range(q.shape[0]):
            members = np.flatnonzero(within[i])
            order = members[np.lexsort((members, acc[i, members]))]
            np.testing.assert_array_equal(ind[i, :counts[i]], order)
            assert sq[i, :counts[i]].tobytes() == acc[i, order].tobytes()
            lo, hi = csr.offsets[i], csr.offsets[i + 1]
            np.testing.assert_array_equal(csr.indices[lo:hi], order)
            assert csr.sq_distances[lo:hi].tobytes() == acc[i, order].tobytes()


def test_kdtree_matches_scipy_on_offset_data(lib, utm):
    scipy_spatial = pytest.importorskip("scipy.spatial")
    pts, q = utm
    ours = knn.cKDTree(pts, backend="openmp")
    theirs = scipy_spatial.cKDTree(pts)
    assert ours.index.dtype == np.float64 and ours.data.dtype == np.float64
    d, i = ours.query(q, k=6)
    td, ti = theirs.query(q, k=6)
    np.testing.assert_array_equal(i, ti)
    np.testing.assert_allclose(d, td, rtol=1e-12, atol=0)
    want_sq, _ = oracle64(pts, q, 6)
    np.testing.assert_array_equal(d, np.sqrt(want_sq))           # sqrt of the exact value
    got = ours.query_ball_point(q[:50], 0.75)
    want = theirs.query_ball_point(q[:50], 0.75)
    assert [sorted(g) for g in got] == [sorted(w) for w in want]
    assert ours.query_pairs(0.3) == theirs.query_pairs(0.3)
    assert ours.count_neighbors(knn.cKDTree(q), 0.5) == theirs.count_neighbors(
        scipy_spatial.cKDTree(q), 0.5)


# ---- the dtype picks the entry point; nothing silent ------------------------------------
def test_dtype_picks_the_entry_point_zero_copy(lib, monkeypatch, utm):
    pts, q = utm
    spy = SpyNative(lib)
    monkeypatch.setattr(_library, "_native", spy)
    with knn.Index(pts, backend="openmp") as index64:
        assert spy.named("knn_index_build_f64")[-1][1] == pts.ctypes.data      # zero copy
        index64.query(q, 3, distances_first=True)
        assert spy.named("knn_index_query_f64")[-1][2] == q.ctypes.data
        index64.radius(q, 0.5, 4, distances_first=True)
        assert spy.named("knn_index_radius_f64")[-1][4] == 0.5
        index64.query_self(2, distances_first=True)
        assert spy.named("knn_index_query_self_f64")
    p32, q32 = pts.astype(np.float32) - np.float32(4.5e6), q.astype(np.float32) - np.float32(4.5e6)
    with knn.Index(p32, backend="openmp") as index32:
        assert index32.dtype == np.float32
        assert spy.named("knn_index_build")[-1][1] == p32.ctypes.data
        sq, _ = index32.query(q32, 3, distances_first=True)
        assert sq.dtype == np.float32
        assert spy.named("knn_index_query")[-1][2] == q32.ctypes.data
    assert not spy.named("knn_index_query_f64")[1:]              # exactly one _f64 query


def test_integers_build_a_float64_index(lib):
    pts = np.arange(30, dtype=np.int64).reshape(10, 3) * 1000003
    with knn.Index(pts, backend="openmp") as index:
        assert index.dtype == np.float64
        sq, ind = index.query(pts[:2], 2, distances_first=True)
        want_sq, want_ind = oracle64(pts.astype(np.float64), pts[:2].astype(np.float64), 2)
        np.testing.assert_array_equal(ind, want_ind)
        np.testing.assert_array_equal(sq, want_sq)


def test_long_double_is_not_rounded_silently(lib):
    wide = np.zeros((4, 3), dtype=np.longdouble)
    if wide.dtype.itemsize <= 8:
        pytest.skip("long double is double on this platform")
    with pytest.raises(TypeError, match="wider than float64"):
        knn.Index(wide)


def test_float64_index_takes_float32_queries_exactly(lib, utm):
    pts, _ = utm
    q32 = (pts[:40] + 0.25).astype(np.float32)
    with knn.Index(pts, backend="openmp") as index:
        a = index.query(q32, 4, distances_first=True)
        b = index.query(q32.astype(np.float64), 4, distances_first=True)
    assert a.sq_distances.dtype == np.float64
    np.testing.assert_array_equal(a.indices, b.indices)
    assert a.sq_distances.tobytes() == b.sq_distances.tobytes()


def test_float32_index_refuses_rounding_float64_queries(lib):
    rng = np.random.default_rng(3)
    pts = rng.uniform(-1, 1, size=(200, 3)).astype(np.float32)
    with knn.Index(pts, backend="openmp") as index:
        q = rng.uniform(-1, 1, size=(5, 3))                       # float64, not float32 values
        with pytest.raises(TypeError, match=r"not a float32.*float64 points.*astype"):
            index.query(q, 3, distances_first=True)
        with pytest.raises(TypeError, match="not a float32"):
            index.radius_csr(q, 0.5)
        with pytest.raises(TypeError, match="not a float32"):
            index.radius(q, 0.5, 3, distances_first=True)
        exact = q.astype(np.float32).astype(np.float64)           # float64 holding float32 values
        a = index.query(exact, 3, distances_first=True)
        b = index.query(exact.astype(np.float32), 3, distances_first=True)
        np.testing.assert_array_equal(a.indices, b.indices)
        assert a.sq_distances.dtype == np.float32
        np.testing.assert_array_equal(a.sq_distances, b.sq_distances)
        index.query([[0, 1, 2]], 1, distances_first=True)         # small integers are exact
    tree = knn.KDTree(pts, backend="openmp")                      # scipy-shaped: same rule
    with pytest.raises(TypeError, match="not a float32"):
        tree.query(q)


def test_cuda_float64_tensors_in_place(lib, has_device, utm):
    """Real device memory (torch CUDA tensors through DLPack and
    __cuda_array_interface__): float64 tensors go to the _f64 calls, answers
    bit-identical to the float64 brute force."""
    if not has_device:
        pytest.skip("no CUDA device")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    pts, q = utm
    want_sq, want_ind = oracle64(pts, q, 8)
    dpts, dq = torch.from_numpy(pts).cuda(), torch.from_numpy(q).cuda()
    out_ind = torch.empty((q.shape[0], 8), dtype=torch.int32, device="cuda")
    out_sq = torch.empty((q.shape[0], 8), dtype=torch.float64, device="cuda")
    torch.cuda.synchronize()
    for backend in ("cuda", "auto"):
        with knn.Index(dpts, backend=backend) as index:
            assert index.dtype == np.float64
            sq, ind = index.query(dq, 8, distances_first=True)            # host outputs
            np.testing.assert_array_equal(ind, want_ind)
            assert sq.tobytes() == want_sq.tobytes()
            index.query(dq, 8, out_indices=out_ind, out_distances=out_sq, distances_first=True)
            torch.cuda.synchronize()
            np.testing.assert_array_equal(out_ind.cpu().numpy(), want_ind)
            assert out_sq.cpu().numpy().tobytes() == want_sq.tobytes()


def test_device_float64_arrays_go_to_the_f64_calls(lib, monkeypatch, has_device, utm):
    if has_device:
        pytest.skip("host memory posing as device memory only works without a device")
    pts, q = utm
    spy = SpyNative(lib, device_count=1)
    monkeypatch.setattr(_library, "_native", spy)
    with knn.Index(FakeCudaArray(pts)) as index:
        assert spy.named("knn_index_build_f64")[-1][1] == pts.ctypes.data
        out_sq = np.empty((q.shape[0], 4), np.float64)
        out_ind = np.empty((q.shape[0], 4), np.int32)
        index.query(FakeCudaArray(q), 4, out_indices=FakeCudaArray(out_ind),
                    out_distances=FakeCudaArray(out_sq), distances_first=True)
        call = spy.named("knn_index_query_f64")[-1]
        assert call[2] == q.ctypes.data and call[6] == out_sq.ctypes.data
        with pytest.raises(ValueError, match="float32"):
            index.query(q, 4, out_distances=FakeCudaArray(out_sq.astype(np.float32)),
                        distances_first=True)
    want_sq, want_ind = oracle64(pts, q, 4)
    np.testing.assert_array_equal(out_ind, want_ind)
    assert out_sq.tobytes() == want_sq.tobytes()


def test_serialize_keeps_the_precision(lib, utm):
    pts, q = utm
    with knn.Index(pts, backend="openmp") as index:
        want = index.query(q, 3, distances_first=True)
        data = index.serialize()
    with knn.Index.deserialize(data, backend="openmp") as loaded:
        assert loaded.dtype == np.float64 and "float64" in repr(loaded)
        got = loaded.query(q, 3, distances_first=True)
    np.testing.assert_array_equal(got.indices, want.indices)
    assert got.sq_distances.tobytes() == want.sq_distances.tobytes()


def test_estimates_by_dtype(lib):
    small = knn.estimate_build_bytes(10 ** 6, 3, dtype=np.float32)
    large = knn.estimate_build_bytes(10 ** 6, 3, dtype=np.float64)
    assert large > small > 0
    assert knn.estimate_query_bytes(10 ** 5, 8, 10 ** 6, 3, dtype="float64") >= \
        knn.estimate_query_bytes(10 ** 5, 8, 10 ** 6, 3)
    with pytest.raises(TypeError, match="float32 or float64"):
        knn.estimate_build_bytes(10, 3, dtype=np.int32)


# ---- point in polygon in float64 ------------------------------------------------------
def inside_exact(px: float, py: float, rings) -> bool:
    """The header's rule in exact rational arithmetic, on the float64 values."""
    count = 0
    px, py = float(px), float(py)
    for ring in rings:
        v = [(Fraction(float(x)), Fraction(float(y))) for x, y in ring]
        for i in range(len(v)):
            (x1, y1), (x2, y2) = v[i], v[(i + 1) % len(v)]
            if (y1 > py) == (y2 > py):
                continue
            num = (x1 - Fraction(px)) * (y2 - y1) + (Fraction(py) - y1) * (x2 - x1)
            if num != 0 and (num > 0) == (y2 > y1):
                count += 1
    return count % 2 == 1


# A stretch of border (degrees, lon/lat) whose eastern edge leans slightly, and
# towns 4e-6 degrees inside and outside it, where float32 (spacing 1.5e-5 at
# 129 degrees) cannot tell them apart.
BORDER = np.array([[129.0, -26.0], [129.0003, -14.9], [120.0, -14.9], [120.0, -26.0]])


def edge_x(y: float) -> float:
    (x1, y1), (x2, y2) = BORDER[0], BORDER[1]
    return x1 + (y - y1) * (x2 - x1) / (y2 - y1)


def towns() -> np.ndarray:
    ys = np.linspace(-25.5, -15.5, 41)
    inner = [(edge_x(y) - 4e-6, y) for y in ys]
    outer = [(edge_x(y) + 4e-6, y) for y in ys]
    return np.array(inner + outer)


def test_town_inside_the_border_stays_inside_in_float64(lib):
    xy = towns()
    rings = [BORDER]
    want = [i for i, (x, y) in enumerate(xy) if inside_exact(x, y, rings)]
    assert len(want) == 41                                        # the inner row, exactly
    vertices, ring_offsets, polygon_offsets = knn.pack_polygons([[BORDER]])
    assert vertices.dtype == np.float64
    with knn.Quadtree(xy, backend="openmp") as tree:
        got = tree.points_in_each_polygon(vertices, ring_offsets, polygon_offsets)
        assert got[0].tolist() == want
        counts = tree.points_in_polygons_count(vertices, ring_offsets, polygon_offsets)
        assert counts.tolist() == [41]
    # float32 rounding moves towns across the border (why float64 matters here)
    xy32, border32 = xy.astype(np.float32), BORDER.astype(np.float32)
    rounded = [i for i, (x, y) in enumerate(xy32) if inside_exact(x, y, [border32])]
    assert rounded != want


def test_mixed_precision_trees_and_polygons(lib, monkeypatch):
    """A float32 tree with float64 vertices, a float64 tree with float32 vertices:
    decided on the exact values; the dtype picks each call."""
    rng = np.random.default_rng(9)
    edge = np.array([edge_x(y) for y in np.linspace(-25.5, -15.5, 200)])
    xy32 = np.stack([edge + rng.uniform(-3e-5, 3e-5, 200),
                     np.linspace(-25.5, -15.5, 200)], axis=1).astype(np.float32)
    spy = SpyNative(lib)
    monkeypatch.setattr(_library, "_native", spy)
    for points, border in ((xy32, BORDER), (xy32.astype(np.float64), BORDER.astype(np.float32))):
        want = [i for i, (x, y) in enumerate(points) if inside_exact(x, y, [border])]
        assert 0 < len(want) < 200
        with knn.Quadtree(points, backend="openmp") as tree:
            got = tree.points_in_each_polygon(*knn.pack_polygons([[border]]))
        assert got[0].tolist() == want
    assert len(spy.named("knn_quadtree_build")) == len(spy.named("knn_quadtree_build_f64")) == 1
    assert spy.named("knn_points_in_polygons_f64") and spy.named("knn_points_in_polygons")


def test_nan_double_vertex_is_named(lib):
    vertices, rings, polys = knn.pack_polygons([[BORDER]])
    vertices[2, 1] = math.nan
    with knn.Quadtree(towns(), backend="openmp") as tree:
        with pytest.raises(knn.NonfiniteInputError, match="vertex 2"):
            tree.points_in_polygons_count(vertices, rings, polys)
    with pytest.raises(knn.NonfiniteInputError, match="point 3"):
        bad = towns()
        bad[3, 0] = math.inf
        knn.Quadtree(bad)
    with pytest.raises(knn.NonfiniteInputError, match="point 4"):
        bad = utm_cloud(4, 10)
        bad[4, 2] = math.nan
        knn.Index(bad)
