"""KDTree's scipy surface beyond the Euclidean basics, each against scipy itself:
periodic boxes, Minkowski p, query_ball_tree, sparse_distance_matrix,
weights, pickling and KDTree.from_index, and the cost of per-point radii."""

from __future__ import annotations

import pickle
import time

import numpy as np
import pytest

import knn_gpgpu as knn
from knn_gpgpu import _library

from spy_native import SpyNative

spatial = pytest.importorskip("scipy.spatial")


def cloud(seed: int, n: int, m: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).random((n, m))


@pytest.mark.parametrize("boxsize", [1.0, (1.0, 0.0, 2.0)])
@pytest.mark.parametrize("p", [2.0, 1.0, np.inf, 3.0])
def test_periodic_and_minkowski_like_scipy(lib, boxsize, p):
    data = cloud(1, 400) * np.where(np.asarray(boxsize) > 0, boxsize, 1.0)
    ours, theirs = knn.KDTree(data, boxsize=boxsize), spatial.KDTree(data, boxsize=boxsize)
    x = cloud(2, 60) * 3 - 1                                  # outside the box too: wrapped
    d, i = ours.query(x, k=5, p=p)
    dd, ii = theirs.query(x, k=5, p=p)
    np.testing.assert_allclose(d, dd, rtol=1e-12)
    np.testing.assert_array_equal(i, ii)                      # no ties in a random cloud
    r = 0.15
    for a, b in zip(ours.query_ball_point(x, r, p=p), theirs.query_ball_point(x, r, p=p)):
        assert a == sorted(b)
    assert ours.query_pairs(r, p=p) == theirs.query_pairs(r, p=p)
    radii = [0.05, 0.1, 0.2]
    np.testing.assert_array_equal(ours.count_neighbors(ours, radii, p=p),
                                  theirs.count_neighbors(theirs, radii, p=p))
    other = knn.KDTree(cloud(3, 300) * np.where(np.asarray(boxsize) > 0, boxsize, 1.0),
                       boxsize=boxsize)
    other_theirs = spatial.KDTree(other.data, boxsize=boxsize)
    got = ours.sparse_distance_matrix(other, r, p=p, output_type="dict")
    want = theirs.sparse_distance_matrix(other_theirs, r, p=p, output_type="dict")
    assert got.keys() == want.keys()
    np.testing.assert_allclose([got[key] for key in want], list(want.values()), rtol=1e-12)
    assert ours.query_ball_tree(other, r, p=p) == [sorted(v) for v in
                                                    theirs.query_ball_tree(other_theirs, r, p=p)]


def test_periodic_refusals_like_scipy(lib):
    with pytest.raises(ValueError, match="greater than the size"):
        knn.KDTree([[0.5, 1.0]], boxsize=1.0)
    with pytest.raises(ValueError, match="Negative"):
        knn.KDTree([[-0.1, 0.5]], boxsize=(1.0, 1.0))
    knn.KDTree([[-0.1, 0.5]], boxsize=(0.0, 1.0))             # 0: not periodic there


def test_sparse_distance_matrix_outputs_and_weights(lib):
    a, b = cloud(4, 200), cloud(5, 150)
    ours, theirs = knn.KDTree(a), spatial.KDTree(a)
    o2, t2 = knn.KDTree(b), spatial.KDTree(b)
    want = theirs.sparse_distance_matrix(t2, 0.2).toarray()
    for kind in ("dok_matrix", "coo_matrix"):
        got = ours.sparse_distance_matrix(o2, 0.2, output_type=kind)
        assert type(got).__name__ == kind
        np.testing.assert_array_equal(got.toarray(), want)
    arr = ours.sparse_distance_matrix(o2, 0.2, output_type="ndarray")
    assert arr.dtype == theirs.sparse_distance_matrix(t2, 0.2, output_type="ndarray").dtype
    w1, w2 = np.random.default_rng(6).random(200), np.random.default_rng(7).random(150)
    r = np.linspace(0.05, 0.3, 6)
    np.testing.assert_allclose(ours.count_neighbors(o2, r, weights=(w1, w2), cumulative=False),
                               theirs.count_neighbors(t2, r, weights=(w1, w2), cumulative=False),
                               rtol=1e-12)


def test_pickle_and_from_index(lib):
    data = cloud(8, 300)
    for tree in (knn.KDTree(data), knn.cKDTree(data, leafsize=4),
                 knn.KDTree(data, boxsize=1.0)):
        copy = pickle.loads(pickle.dumps(tree))
        assert type(copy) is type(tree) and copy.leafsize == tree.leafsize
        np.testing.assert_array_equal(copy.data, data)
        np.testing.assert_array_equal(copy.boxsize, tree.boxsize)
        for got, want in zip(copy.query(data[:20], k=4), tree.query(data[:20], k=4)):
            np.testing.assert_array_equal(got, want)
    index = pickle.loads(pickle.dumps(knn.Index(data)))      # an Index pickles too
    again = knn.KDTree.from_index(knn.Index.deserialize(index.serialize()))
    np.testing.assert_array_equal(again.data, data)
    assert again.query_pairs(0.1) == spatial.KDTree(data).query_pairs(0.1)


def test_attributes_like_scipy(lib):
    data = cloud(9, 100, 4)
    ours, theirs = knn.KDTree(data), spatial.KDTree(data)
    assert (ours.n, ours.m, ours.leafsize) == (theirs.n, theirs.m, theirs.leafsize)
    assert knn.cKDTree(data).leafsize == spatial.cKDTree(data).leafsize
    assert ours.data is data                                  # no copy, as scipy's
    assert knn.KDTree(data, copy_data=True).data is not data
    np.testing.assert_array_equal(ours.maxes, theirs.maxes)
    np.testing.assert_array_equal(ours.mins, theirs.mins)
    with pytest.raises(AttributeError, match="tree"):
        ours.tree


def test_per_point_radii_cost_grows_linearly(lib):
    """Issue #52: 20,000 per-point radii took 11.2 s (a scan of the rows per
    distinct radius: quadratic). Four times the queries must cost about four
    times as much (< 6x, best of three), not sixteen."""
    tree = knn.KDTree(cloud(10, 20000), backend="openmp")
    rng = np.random.default_rng(11)
    x = rng.random((16000, 3))
    radii = 0.01 + 0.02 * rng.random(16000)                   # every radius distinct
    best = {4000: np.inf, 16000: np.inf}
    for _ in range(5):  # interleaved, one thread: a loaded machine slows both alike
        for m in best:
            t0 = time.perf_counter()
            tree.query_ball_point(x[:m], radii[:m], workers=1)
            best[m] = min(best[m], time.perf_counter() - t0)
    assert best[16000] < 6 * best[4000], best


def test_per_point_radii_take_few_library_calls(lib, monkeypatch):
    """The cause of issue #52's 11.2 s: a library call (and a scan of all rows)
    per distinct radius. Rows are grouped by radius now: 16,000 distinct radii
    spanning a factor of 3 take a handful of calls."""
    spy = SpyNative(lib)
    monkeypatch.setattr(_library, "_native", spy)
    tree = knn.KDTree(cloud(12, 5000), backend="openmp")
    rng = np.random.default_rng(13)
    x, radii = rng.random((16000, 3)), 0.01 + 0.02 * rng.random(16000)
    got = tree.query_ball_point(x, radii)
    calls = [c for c in spy.calls if c[0].startswith("knn_index_radius")]
    assert 0 < len(calls) <= 2 * 8, len(calls)                 # count + fill per group
    theirs = spatial.cKDTree(tree.data).query_ball_point(x[:300], radii[:300])
    assert [sorted(v) for v in theirs] == list(got[:300])
