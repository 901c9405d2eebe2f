"""knn_gpgpu.KDTree against scipy.spatial.cKDTree itself.

Exact comparisons use points on an integer lattice: float32 holds them and
their squared distances exactly, so the library's sqrt(float32 squared
distance) and scipy's float64 distance are the same number, and distances
compare with ==. Ties abound there; scipy orders tied neighbours as it likes
(the library by index), so indices are compared where a distance is unique
and, for ties, as sets of equal-distance groups. Random real-valued clouds
compare with a float32 tolerance.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import knn_gpgpu as knn
from knn_gpgpu import _library
from knn_gpgpu import spatial as spatial_module

from conftest import oracle, oracle64, random_points
from spy_native import SpyNative

spatial = pytest.importorskip("scipy.spatial")

BACKENDS = ["openmp", "auto"]


def lattice(seed: int, n: int, dim: int, span: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(-span, span + 1, size=(n, dim)).astype(np.float64)


def assert_knn_equal(ours, theirs, pts, x):
    """Distances identical. Indices identical where the distance is held by one
    point only; where several points share it (scipy orders them as it likes),
    every returned index is at its returned distance and none repeats in a row.
    Missing slots hold index n in both."""
    (d1, i1), (d2, i2) = ours, theirs
    np.testing.assert_array_equal(d1, d2)
    assert i1.shape == np.shape(i2) and i1.dtype == np.intp
    n, dim = pts.shape
    x = np.asarray(x, dtype=np.float64).reshape(-1, dim)
    if x.shape[0] == 0:
        return
    rows_d = np.asarray(d1, dtype=np.float64).reshape(x.shape[0], -1)
    rows_i1 = i1.reshape(rows_d.shape)
    rows_i2 = np.asarray(i2).reshape(rows_d.shape)
    for q, row_d, row_i1, row_i2 in zip(x, rows_d, rows_i1, rows_i2):
        missing = np.isinf(row_d)
        assert np.all(row_i1[missing] == n) and np.all(row_i2[missing] == n)
        all_d = np.sqrt(((pts - q) ** 2).sum(axis=1))
        np.testing.assert_array_equal(all_d[row_i1[~missing]], row_d[~missing])
        assert len(set(row_i1[~missing].tolist())) == int((~missing).sum())
        unique = np.array([np.count_nonzero(all_d == v) == 1 for v in row_d[~missing]],
                          dtype=bool)
        np.testing.assert_array_equal(row_i1[~missing][unique], row_i2[~missing][unique])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dim", [1, 2, 3, 5])
def test_query_matches_scipy_exactly_on_a_lattice(lib, backend, dim):
    pts = lattice(dim, 300, dim)
    x = lattice(100 + dim, 70, dim, span=5)
    ours = knn.KDTree(pts, backend=backend)
    theirs = spatial.cKDTree(pts)
    for k in (1, 2, 7, 33):
        d, i = ours.query(x, k=k)
        assert_knn_equal((d, i), theirs.query(x, k=k), pts, x)
        # ties: ascending index inside every group of equal distances
        if k > 1:
            same = d[:, 1:] == d[:, :-1]
            assert np.all(i[:, 1:][same] > i[:, :-1][same])


@pytest.mark.parametrize("backend", BACKENDS)
def test_query_shapes_like_scipy(lib, backend):
    pts = lattice(1, 40, 3)
    ours = knn.cKDTree(pts, backend=backend)
    theirs = spatial.cKDTree(pts)
    one = np.array([0.0, 1.0, -1.0])
    # scipy's KDTree gives one point's index as a numpy integer, cKDTree as an int.
    got_kd, want_kd = knn.KDTree(pts, backend=backend).query(one), spatial.KDTree(pts).query(one)
    assert [type(v) for v in got_kd] == [type(v) for v in want_kd] == [float, np.intp]
    many = lattice(2, 24, 3).reshape(2, 3, 4, 3)
    cases = [(one, 1), (one, 3), (one, [1]), (one, [2, 5]), (many, 1), (many, 4),
             (many, [1, 3, 40]), (many[0, 0, :1], 1), (np.zeros((0, 3)), 1),
             (np.zeros((0, 3)), 3), (one.tolist(), 2), (many.tolist(), [3])]
    for x, k in cases:
        got = ours.query(x, k=k)
        want = theirs.query(x, k=k)
        if np.ndim(want[0]) == 0:       # one point, k = 1: Python scalars as cKDTree
            assert type(got[0]) is float and type(got[1]) is int
            assert got == (float(want[0]), int(want[1]))
            continue
        assert got[0].shape == want[0].shape and got[1].shape == want[1].shape, (x, k)
        assert got[0].dtype == np.float64
        assert_knn_equal(got, want, pts, x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_k_beyond_n_and_distance_upper_bound(lib, backend):
    pts = lattice(3, 9, 2)
    ours = knn.KDTree(pts, backend=backend)
    theirs = spatial.cKDTree(pts)
    x = lattice(4, 15, 2, span=6)
    got = ours.query(x, k=14)                                 # k > n: inf / n
    assert_knn_equal(got, theirs.query(x, k=14), pts, x)
    assert np.all(got[1][:, 9:] == 9) and np.all(np.isinf(got[0][:, 9:]))
    for bound in (0.0, 1.0, 2.0, math.sqrt(5.0), 3.5, math.inf):   # strict, as scipy
        assert_knn_equal(ours.query(x, k=5, distance_upper_bound=bound),
                         theirs.query(x, k=5, distance_upper_bound=bound), pts, x)
    empty = knn.KDTree(np.zeros((0, 2)), backend=backend)
    assert_knn_equal(empty.query(x, k=3), spatial.cKDTree(np.zeros((0, 2))).query(x, k=3),
                     np.zeros((0, 2)), x)


def test_k_beyond_n_searches_only_n(lib, monkeypatch):
    spy = SpyNative(lib)
    monkeypatch.setattr(_library, "_native", spy)
    pts = lattice(30, 9, 2)
    ours = knn.KDTree(pts, backend="openmp")
    x = lattice(31, 6, 2, span=6)
    theirs = spatial.cKDTree(pts)
    for k in (14, [2, 9, 10, 40]):
        got = ours.query(x, k=k)
        assert spy.named("knn_index_query_f64")[-1][4] == 9          # the library's k: n
        assert_knn_equal(got, theirs.query(x, k=k), pts, x)
    assert np.all(got[1][:, 2:] == 9) and np.all(np.isinf(got[0][:, 2:]))


def test_k_beyond_int_is_refused_before_any_allocation(lib):
    """k = 2**31 made the binding allocate 16 GiB of ranks before the library
    refused it; now it is refused first (run under an address-space limit well
    below that, so that an allocation fails instead of succeeding slowly)."""
    resource = pytest.importorskip("resource")
    ours = knn.KDTree(lattice(32, 9, 2), backend="openmp")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as statm:
        in_use = int(statm.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (in_use + (2 << 30), hard))
    try:
        for k in (2**31, [1, 2**31]):
            with pytest.raises(OverflowError, match="k = 2147483648"):
                ours.query([[0.0, 0.0]], k=k)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert ours.query([0.0, 0.0], k=1)[1] in range(9)             # and the next call works


@pytest.mark.parametrize("backend", BACKENDS)
def test_duplicates(lib, backend):
    base = lattice(5, 6, 3)
    pts = base[np.random.default_rng(6).integers(0, 6, size=200)]      # ~33 copies each
    ours = knn.KDTree(pts, backend=backend)
    theirs = spatial.cKDTree(pts)
    d, i = ours.query(base, k=50)
    assert_knn_equal((d, i), theirs.query(base, k=50), pts, base)
    got = ours.query_ball_point(base, 0.0)
    want = theirs.query_ball_point(base, 0.0)
    assert [sorted(a) for a in got] == [sorted(b) for b in want]
    assert ours.query_pairs(0.0) == theirs.query_pairs(0.0)


def test_real_valued_clouds_in_either_precision(lib):
    pts32, x32 = random_points(7, 2000, 4), random_points(8, 300, 4)
    pts, x = pts32.astype(np.float64), x32.astype(np.float64)
    # float64 data computes in float64: scipy's answer, bit for bit the float64 oracle
    ours = knn.KDTree(pts, backend="openmp")
    d, i = ours.query(x, k=10)
    want_d, want_i = spatial.cKDTree(pts).query(x, k=10)
    np.testing.assert_allclose(d, want_d, rtol=1e-12)
    gaps = np.diff(want_d, axis=1)
    unique = np.ones_like(want_d, dtype=bool)
    unique[:, 1:] &= gaps > 1e-9 * want_d[:, 1:]
    unique[:, :-1] &= gaps > 1e-9 * want_d[:, 1:]
    np.testing.assert_array_equal(i[unique], want_i[unique])
    sq64, ind64 = oracle64(pts, x, 10)
    np.testing.assert_array_equal(i, ind64)
    np.testing.assert_array_equal(d, np.sqrt(sq64))
    # float32 data computes in float32: bit for bit the contract's float32 oracle
    d32, i32 = knn.KDTree(pts32, backend="openmp").query(x32, k=10)
    sq, ind = oracle(pts32, x32, 10)
    np.testing.assert_array_equal(i32, ind)
    np.testing.assert_array_equal(d32, np.sqrt(sq.astype(np.float64)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_query_ball_point_matches_scipy(lib, backend):
    pts = lattice(9, 400, 3)
    x = lattice(10, 30, 3, span=5)
    ours = knn.KDTree(pts, backend=backend)
    theirs = spatial.cKDTree(pts)
    for r in (0.0, 1.0, math.sqrt(2.0), 2.0, math.sqrt(5.0), 3.0, 100.0):  # on lattice distances
        got = ours.query_ball_point(x, r)
        want = theirs.query_ball_point(x, r)
        assert got.shape == want.shape and got.dtype == object
        assert [g for g in got] == [sorted(w) for w in want]
        counts = ours.query_ball_point(x, r, return_length=True)
        np.testing.assert_array_equal(counts, theirs.query_ball_point(x, r, return_length=True))
    # one point, per-point radii, leading shape
    assert ours.query_ball_point(x[0], 2.0) == sorted(theirs.query_ball_point(x[0], 2.0))
    assert ours.query_ball_point(x[0], 2.0, return_length=True) == \
        theirs.query_ball_point(x[0], 2.0, return_length=True)
    radii = np.array([0.0, 1.0, 2.0] * 10)
    got = ours.query_ball_point(x, radii)
    assert [g for g in got] == [sorted(w) for w in theirs.query_ball_point(x, radii)]
    shaped = x.reshape(5, 6, 3)
    got = ours.query_ball_point(shaped, 2.0)
    want = theirs.query_ball_point(shaped, 2.0)
    assert got.shape == want.shape == (5, 6)
    assert [g for g in got.ravel()] == [sorted(w) for w in want.ravel()]


def test_unbounded_lists_beyond_one_call(lib, monkeypatch):
    # Rows wider than the fill budget: the lists are gathered over several
    # fixed-row calls, and the result is the same.
    from knn_gpgpu import spatial as ours_module
    pts = lattice(11, 500, 2, span=3)           # 49 sites, ~10 copies each
    ours = knn.KDTree(pts, backend="openmp")
    theirs = spatial.cKDTree(pts)
    want = sorted(theirs.query_pairs(1.5))
    for budget in (5, 64):
        monkeypatch.setattr(ours_module, "_ROW_SLOT_BUDGET", budget)
        assert sorted(ours.query_pairs(1.5)) == want
        got = ours.query_ball_point(pts[:40], 2.0)
        assert [g for g in got] == [sorted(w) for w in theirs.query_ball_point(pts[:40], 2.0)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_query_pairs_and_count_neighbors(lib, backend):
    pts = lattice(12, 250, 3, span=3)
    other = lattice(13, 120, 3, span=3)
    ours = knn.KDTree(pts, backend=backend)
    theirs = spatial.cKDTree(pts)
    for r in (0.0, 1.0, math.sqrt(2.0), 2.0, 50.0):
        assert ours.query_pairs(r) == theirs.query_pairs(r)
        array = ours.query_pairs(r, output_type="ndarray")
        assert array.dtype == np.intp and array.shape[1] == 2
        assert sorted(array.tolist()) == array.tolist()             # lexicographic
        assert set(map(tuple, array.tolist())) == theirs.query_pairs(r)
    other_ours = knn.KDTree(other, backend=backend)
    other_theirs = spatial.cKDTree(other)
    for r in (1.0, 2.0):
        assert ours.count_neighbors(other_ours, r) == theirs.count_neighbors(other_theirs, r)
    radii = np.array([0.0, 1.0, math.sqrt(2.0), 1.5, math.sqrt(3.0), 2.0, 3.0])
    for cumulative in (True, False):
        np.testing.assert_array_equal(
            ours.count_neighbors(other_ours, radii, cumulative=cumulative),
            theirs.count_neighbors(other_theirs, radii, cumulative=cumulative))
    assert ours.count_neighbors(other, 2.0) == theirs.count_neighbors(other_theirs, 2.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pairs_and_counts_come_from_the_library(lib, dtype, monkeypatch):
    """query_pairs and count_neighbors (weights too) are answered by
    knn_index_radius_pairs / knn_index_count_neighbors, equal to scipy's on
    points with ties and duplicates, float32 and float64 (scipy reads the
    same values in float64); radii that float32 rounding would misjudge
    (r * r just below a squared distance) included."""
    rng = np.random.default_rng(5)
    pts = np.concatenate([lattice(21, 300, 3, span=4), rng.random((300, 3)) * 4]).astype(dtype)
    other = np.concatenate([lattice(22, 80, 3, span=4), rng.random((80, 3)) * 4]).astype(dtype)
    spy = SpyNative(_library.native())
    monkeypatch.setattr(_library, "_native", spy)
    ours, theirs = knn.KDTree(pts), spatial.cKDTree(pts.astype(np.float64))
    other_theirs = spatial.cKDTree(other.astype(np.float64))
    just_below = float(np.nextafter(1.0, 0.0))      # r * r < 1 = a lattice squared distance
    for r in (0.0, 0.3, just_below, 1.0, math.sqrt(2.0), 1.7):
        assert ours.query_pairs(r) == theirs.query_pairs(r), r
        want = theirs.query_pairs(r, output_type="ndarray")   # scipy's own order
        got = ours.query_pairs(r, output_type="ndarray")      # lexicographic
        np.testing.assert_array_equal(got, want[np.lexsort((want[:, 1], want[:, 0]))])
    radii = np.array([1.7, 0.0, just_below, 1.0, 0.3, 1.0, math.inf])
    np.testing.assert_array_equal(ours.count_neighbors(knn.KDTree(other), radii),
                                  theirs.count_neighbors(other_theirs, radii))
    w_self, w_other = rng.random(len(pts)), rng.random(len(other))
    for weights in ((w_self, w_other), (None, w_other), (w_self, None)):
        np.testing.assert_allclose(
            ours.count_neighbors(knn.KDTree(other), radii, weights=weights),
            theirs.count_neighbors(other_theirs, radii, weights=weights), rtol=1e-12)
    np.testing.assert_allclose(ours.count_neighbors(ours, radii, weights=w_self),
                               theirs.count_neighbors(theirs, radii, weights=w_self), rtol=1e-12)
    called = {c[0] for c in spy.calls}
    assert "knn_index_radius_pairs" in called
    assert {"knn_index_count_neighbors", "knn_index_count_neighbors_f64"} & called


def test_index_radius_pairs_and_count_neighbors_against_numpy(lib):
    """Index.radius_pairs (with and without the points' own counts) and
    Index.count_neighbors against numpy's brute force in float64."""
    pts = lattice(23, 200, 2, span=3).astype(np.float64)
    index = knn.Index(pts)
    d2 = ((pts[:, None, :] - pts[None, :, :]) ** 2).sum(axis=-1)
    for r in (0.0, 1.0, 1.5):
        i, j = np.nonzero(np.triu(d2 <= r * r, k=1))
        want = np.stack([i, j], axis=1)
        np.testing.assert_array_equal(index.radius_pairs(r), want)
        own = index.radius_counts(pts, r)
        np.testing.assert_array_equal(index.radius_pairs(r, self_counts=own), want)
    with pytest.raises(ValueError, match="self_counts"):
        index.radius_pairs(1.0, self_counts=np.ones(3, dtype=np.int64))
    # A capacity guess, short, right or long, gives the same pairs (one call
    # when it suffices, two when short) on the kd-tree's one-search pairs and
    # on the radius rows of brute force.
    for structure in ("kdtree", "brute_force"):
        other = knn.Index(pts, structure=structure, leaf_size=3)
        for r in (0.0, 1.0, 1.5):
            i, j = np.nonzero(np.triu(d2 <= r * r, k=1))
            want = np.stack([i, j], axis=1)
            for guess in (0, 1, len(want) - 1, len(want), len(want) + 1, 3 * len(want) + 7):
                got = other.radius_pairs(r, capacity=max(guess, 0))
                np.testing.assert_array_equal(got, want, err_msg="%s r=%s capacity=%d"
                                              % (structure, r, guess))
    radii = np.array([1.5, 0.0, 1.0])
    np.testing.assert_array_equal(index.count_neighbors(pts[:50], radii),
                                  [(d2[:50] <= x * x).sum() for x in radii])
    w = np.linspace(0.5, 2.0, 200)
    np.testing.assert_allclose(
        index.count_neighbors(pts[:50], radii, query_weights=w[:50], point_weights=w,
                              weighted=True),
        [(np.outer(w[:50], w) * (d2[:50] <= x * x)).sum() for x in radii], rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_per_point_radii_with_rows_longer_than_guessed(lib, dtype, monkeypatch):
    """Per-point radii in groups: after the first group each is asked for rows
    of a guessed width, and rows longer than that are searched again. Sparse
    points, then a stack of duplicates that the wider balls of later groups
    take in whole: those rows exceed the guesses from the sparse groups."""
    rng = np.random.default_rng(9)
    pts = np.concatenate([rng.random((400, 3)) * 10, np.full((300, 3), 5.0)]).astype(dtype)
    radii = np.geomspace(0.2, 3.0, len(pts))       # the stack's points: the widest balls
    ours, theirs = knn.KDTree(pts), spatial.cKDTree(pts.astype(np.float64))
    widths = []
    real_rows = spatial_module._rows_within

    def recording(index, q, radius, width, options):
        widths.append((width, int(index.radius(q, radius, 0).counts.max())))
        return real_rows(index, q, radius, width, options)

    monkeypatch.setattr(spatial_module, "_rows_within", recording)
    got = ours.query_ball_point(pts, radii)
    want = theirs.query_ball_point(pts.astype(np.float64), radii)
    assert [g for g in got] == [sorted(w) for w in want]
    assert any(longest > width for width, longest in widths)   # the redo ran


def test_refusals(lib):
    ours = knn.KDTree(lattice(14, 20, 2), backend="openmp")
    with pytest.raises(ValueError, match="length 2"):
        ours.query([0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="k"):
        ours.query([0.0, 0.0], k=0)
    with pytest.raises(ValueError, match="k"):
        ours.query([0.0, 0.0], k=[0, 2])                     # scipy crashes on this one
    with pytest.raises(ValueError, match="workers"):
        ours.query([0.0, 0.0], workers=0)
    with pytest.raises(ValueError, match="p-norms"):
        ours.query([0.0, 0.0], p=0.5)
    with pytest.raises(ValueError, match="r must be"):
        ours.query_ball_point([0.0, 0.0], -1.0)
    with pytest.raises(ValueError, match="non-decreasing"):
        ours.count_neighbors(ours, [2.0, 1.0], cumulative=False)
    with pytest.raises(ValueError, match="Two different trees"):
        ours.count_neighbors(knn.KDTree(lattice(14, 20, 2)), 1.0, weights=np.ones(20))
    with pytest.raises(knn.NonfiniteInputError):
        ours.query([0.0, math.nan])
    d, i = ours.query([0.0, 0.0], k=2, workers=1)          # still usable; workers reaches the call
    assert d.shape == (2,)
    ours.close()
    with pytest.raises(ValueError, match="closed"):
        ours.query([0.0, 0.0])


def test_workers_reach_the_library(lib, monkeypatch):
    spy = SpyNative(lib)
    monkeypatch.setattr(_library, "_native", spy)
    ours = knn.KDTree(lattice(15, 20, 2), backend="openmp")   # float64 data: the _f64 calls
    ours.query([[0.0, 0.0]], k=2, workers=3)
    opt = spy.named("knn_index_query_f64")[-1][-1]
    assert opt != 0                                            # options passed, not NULL
    ours.query([[0.0, 0.0]], k=2)
    assert spy.named("knn_index_query_f64")[-1][-1] in (0, None)   # the library's default


# ---- DLPack ------------------------------------------------------------------------

class HostTensor:
    """Exposes only the DLPack protocol (no __array__), over numpy's exporter."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.streams = []

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return self.array.__dlpack__()


class PosingDeviceTensor(HostTensor):
    """Claims CUDA memory (device type 2) over a host numpy capsule: a library
    without a device reads host memory through the pointer it is given."""

    def __dlpack_device__(self):
        return (2, 0)


def test_dlpack_host_input_is_zero_copy(lib, monkeypatch):
    if not hasattr(np.ndarray, "__dlpack__"):
        pytest.skip("numpy too old to export DLPack")
    pts = random_points(16, 300, 3)
    q = random_points(17, 40, 3)
    spy = SpyNative(lib)
    monkeypatch.setattr(_library, "_native", spy)
    with knn.Index(HostTensor(pts), backend="openmp") as index:
        assert spy.named("knn_index_build")[-1][1] == pts.ctypes.data   # the same memory
        tensor = HostTensor(q)
        sq, ind = index.query(tensor, 5, distances_first=True)
        assert spy.named("knn_index_query")[-1][2] == q.ctypes.data
        assert tensor.streams == [None]                       # host: no stream
    want_sq, want_ind = oracle(pts, q, 5)
    np.testing.assert_array_equal(ind, want_ind)
    np.testing.assert_array_equal(sq, want_sq)
    tree = knn.KDTree(HostTensor(pts.astype(np.float64)))     # converted like any host array
    d, i = tree.query(HostTensor(q[:3]), k=2)
    np.testing.assert_array_equal(i, want_ind[:3, :2])
    with pytest.raises(TypeError, match="not an integer or float"):
        knn.Index(HostTensor(np.zeros((3, 2), np.complex64)))


def test_dlpack_device_input_passes_the_pointer(lib, monkeypatch, has_device):
    if has_device:
        pytest.skip("host memory posing as device memory only works without a device")
    pts = random_points(18, 200, 3)
    q = random_points(19, 30, 3)
    spy = SpyNative(lib, device_count=1)
    monkeypatch.setattr(_library, "_native", spy)
    source = PosingDeviceTensor(pts)
    with knn.Index(source) as index:
        assert spy.named("knn_index_build")[-1][1] == pts.ctypes.data
        assert source.streams == [1]                          # the legacy default stream
        sq, ind = index.query(PosingDeviceTensor(q), 4, distances_first=True)
        assert spy.named("knn_index_query")[-1][2] == q.ctypes.data
    want_sq, want_ind = oracle(pts, q, 4)
    np.testing.assert_array_equal(ind, want_ind)
    np.testing.assert_array_equal(sq, want_sq)
    wide = pts.astype(np.float64)
    with knn.Index(PosingDeviceTensor(wide)) as index:          # float64: the _f64 family
        assert spy.named("knn_index_build_f64")[-1][1] == wide.ctypes.data
        assert index.dtype == np.float64
        with pytest.raises(ValueError, match="dtype float32, and this index holds float64"):
            index.query(PosingDeviceTensor(q), 4, distances_first=True)   # never converted
    with pytest.raises(ValueError, match="dtype"):
        knn.Index(PosingDeviceTensor(pts.astype(np.int32)))       # never converted
    with pytest.raises(ValueError, match="C-contiguous"):
        knn.Index(PosingDeviceTensor(pts.T))


def test_dlpack_torch_cpu(lib):
    torch = pytest.importorskip("torch")
    pts = torch.rand(100, 3)
    q = torch.rand(10, 3)
    with knn.Index(pts, backend="openmp") as index:
        sq, ind = index.query(q, 3, distances_first=True)
    want_sq, want_ind = oracle(pts.numpy(), q.numpy(), 3)
    np.testing.assert_array_equal(ind, want_ind)
    np.testing.assert_array_equal(sq, want_sq)


# ---- one return order ------------------------------------------------------------------

def test_return_order(lib):
    pts = random_points(20, 100, 3)
    q = random_points(21, 10, 3)
    want_sq, want_ind = oracle(pts, q, 4)
    with knn.Index(pts, backend="openmp") as index:
        new = index.query(q, 4, distances_first=True)
        assert isinstance(new, knn.KnnResult)
        sq, ind = new
        np.testing.assert_array_equal(ind, want_ind)
        np.testing.assert_array_equal(sq, want_sq)
        with warnings.catch_warnings():
            warnings.simplefilter("error")                    # the default: no warning
            default = index.query(q, 4)
            rows = index.radius(q, 30.0, 3)
            self_sq, self_ind = index.query_self(2)
        assert isinstance(default, knn.KnnResult)             # distances first by default
        np.testing.assert_array_equal(default[1], want_ind)
        np.testing.assert_array_equal(default[0], new.sq_distances)
        assert isinstance(rows, knn.RadiusRows)
        with pytest.warns(DeprecationWarning, match="removed in 1.2"):
            old = index.query(q, 4, distances_first=False)   # the 1.0 order, still reachable
        assert isinstance(old, knn.LegacyKnnResult)
        np.testing.assert_array_equal(old[0], want_ind)
        np.testing.assert_array_equal(old.sq_distances, new.sq_distances)
        with pytest.warns(DeprecationWarning, match="removed in 1.2"):
            old_rows = index.radius(q, 30.0, 3, distances_first=False)
        np.testing.assert_array_equal(rows[1], old_rows[0])
        with pytest.warns(DeprecationWarning, match="removed in 1.2"):
            assert isinstance(index.query_self(2, distances_first=False), knn.LegacyKnnResult)
        np.testing.assert_array_equal(self_ind, oracle(pts, pts, 2)[1])
    b_sq, b_ind = knn.brute_force(pts, q, k=4)                # already distances first
    np.testing.assert_array_equal(b_ind, want_ind)
    d, i = knn.KDTree(pts).query(q, k=4)
    np.testing.assert_array_equal(i, want_ind)


def test_device_points_and_queries(lib, monkeypatch, has_device):
    # Device arrays (host memory posing as device memory, which a library
    # without a device reads as host memory): the lists are gathered over row
    # ranges of the device array by pointer offsets, and the counts of a
    # radius that is no float32 square are settled without gathering rows.
    if has_device:
        pytest.skip("host memory posing as device memory only works without a device")
    from knn_gpgpu import spatial as ours_module
    from spy_native import FakeCudaArray
    spy = SpyNative(lib, device_count=1)
    monkeypatch.setattr(_library, "_native", spy)
    monkeypatch.setattr(ours_module, "_ROW_SLOT_BUDGET", 64)
    pts = lattice(22, 300, 2, span=3).astype(np.float32)
    theirs = spatial.cKDTree(pts)
    ours = knn.KDTree(FakeCudaArray(pts))
    assert ours.data.host is pts                               # used in place, not copied
    assert ours.query_pairs(math.sqrt(2.0)) == theirs.query_pairs(math.sqrt(2.0))
    queries = FakeCudaArray(pts[:50].copy())
    np.testing.assert_array_equal(
        ours.query_ball_point(queries, math.sqrt(2.0), return_length=True),
        theirs.query_ball_point(pts[:50], math.sqrt(2.0), return_length=True))
    d, i = ours.query(queries, k=3)
    np.testing.assert_array_equal(d, theirs.query(pts[:50], k=3)[0])
