"""The classic 3-D API through the binding: real answers against the numpy oracle."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import knn_gpgpu as knn
from knn_gpgpu import _arrays

from conftest import oracle, random_points

KINDS = ["uniform", "duplicates", "lattice", "clustered"]


def check_tree_layout(points: np.ndarray, tree: np.ndarray) -> None:
    """The documented layout: heap order, ids a permutation, p == points[id], kd order."""
    n = points.shape[0]
    assert tree.dtype == knn.NODE_DTYPE and tree.shape == (n,)
    assert sorted(tree["id"].tolist()) == list(range(n))
    np.testing.assert_array_equal(tree["p"], points[tree["id"]])
    i = np.arange(n)
    np.testing.assert_array_equal(tree["left"], np.where(2 * i + 1 < n, 2 * i + 1, -1))
    np.testing.assert_array_equal(tree["right"], np.where(2 * i + 2 < n, 2 * i + 2, -1))
    # kd order: every node of a left (right) subtree is <= (>=) the node on its axis.
    depth = np.floor(np.log2(i + 1)).astype(int)
    for node in range(n):
        axis = depth[node] % 3
        value = tree["p"][node, axis]
        for child, ok in ((2 * node + 1, np.less_equal), (2 * node + 2, np.greater_equal)):
            stack = [child]
            while stack:
                c = stack.pop()
                if c >= n:
                    continue
                assert ok(tree["p"][c, axis], value), (node, c)
                stack += [2 * c + 1, 2 * c + 2]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [1, 2, 7, 64, 333])
def test_build_layout_and_backends_identical(lib, has_device, kind, n):
    pts = random_points(n * 7 + len(kind), n, kind=kind)
    tree = knn.build_kdtree(pts)
    check_tree_layout(pts, tree)
    assert knn.mp_build_kdtree(pts).tobytes() == tree.tobytes()
    if has_device:
        assert knn.cu_build_kdtree(pts).tobytes() == tree.tobytes()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("n,m,k", [(1, 5, 1), (10, 10, 3), (257, 100, 8), (1000, 300, 17),
                                   (50, 20, 50)])
def test_query_all_matches_oracle(lib, has_device, kind, seed, n, m, k):
    pts = random_points(seed * 1000 + n, n, kind=kind)
    queries = np.concatenate([random_points(seed + 99, m - m // 2, kind=kind), pts[: m // 2]])
    tree = knn.build_kdtree(pts)
    _, want = oracle(pts, queries, k)
    got = knn.query_all(queries, tree, k)
    assert got.dtype == np.intc and got.shape == (queries.shape[0], k)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(knn.mp_query_all(queries, tree, k), want)
    if has_device:
        np.testing.assert_array_equal(knn.cu_query_all(queries, tree, k), want)


def test_fewer_points_than_k_pads_with_minus_one(lib):
    pts = random_points(5, 3)
    got = knn.query_all(pts, knn.build_kdtree(pts), 5)
    assert (got[:, 3:] == -1).all()
    np.testing.assert_array_equal(got, oracle(pts, pts, 5)[1])


def test_self_query_finds_duplicates_in_index_order(lib):
    pts = np.zeros((6, 3), np.float32)
    pts[3:] = 1.0
    got = knn.query_all(pts, knn.build_kdtree(pts), 3)
    np.testing.assert_array_equal(got[0], [0, 1, 2])
    np.testing.assert_array_equal(got[5], [3, 4, 5])


def test_empty_inputs_are_valid(lib):
    empty = np.empty((0, 3), np.float32)
    tree = knn.build_kdtree(empty)
    assert tree.shape == (0,)
    assert knn.query_all(empty, tree, 4).shape == (0, 4)
    res = knn.query_all(random_points(1, 2), tree, 2)
    np.testing.assert_array_equal(res, [[-1, -1], [-1, -1]])
    d, i = knn.brute_force(np.empty((0, 5)), np.empty((0, 5)), 3)
    assert d.shape == (0, 3) and i.shape == (0, 3)


def test_inputs_of_other_types_are_converted(lib):
    pts64 = random_points(3, 200).astype(np.float64)
    f32 = pts64.astype(np.float32)
    tree = knn.build_kdtree(f32)
    want = knn.query_all(f32, tree, 4)
    for variant in (pts64, np.asfortranarray(f32), f32.tolist(),
                    np.repeat(f32, 2, axis=0)[::2]):
        assert knn.build_kdtree(variant).tobytes() == tree.tobytes()
        np.testing.assert_array_equal(knn.query_all(variant, tree, 4), want)
    structured = np.zeros(200, knn.POINT_DTYPE)
    structured["p"] = f32
    assert knn.build_kdtree(structured).tobytes() == tree.tobytes()


def test_c_contiguous_float32_is_zero_copy():
    a = random_points(1, 10)
    assert _arrays.host_rows(a, "a", 3) is a
    assert not np.shares_memory(_arrays.host_rows(a.astype(np.float64), "a", 3), a)
    f = np.asfortranarray(a)
    assert _arrays.host_rows(f, "a", 3).flags.c_contiguous
    view = a[::2]
    assert not np.shares_memory(_arrays.host_rows(view, "a", 3), a)


def test_out_arrays_are_written_in_place(lib):
    pts = random_points(2, 50)
    tree_out = np.zeros(50, knn.NODE_DTYPE)
    tree = knn.build_kdtree(pts, out=tree_out)
    assert tree is tree_out
    res_out = np.zeros((50, 3), np.intc)
    assert knn.query_all(pts, tree, 3, out=res_out) is res_out
    np.testing.assert_array_equal(res_out, oracle(pts, pts, 3)[1])


def test_saved_tree_round_trip(lib, tmp_path):
    pts = random_points(4, 123)
    tree = knn.build_kdtree(pts)
    path = tmp_path / "tree.bin"
    tree.tofile(path)
    loaded = np.fromfile(path, dtype=knn.NODE_DTYPE)
    np.testing.assert_array_equal(knn.query_all(pts, loaded, 5), knn.query_all(pts, tree, 5))
    from_bytes = np.frombuffer(tree.tobytes(), dtype=knn.NODE_DTYPE)   # read-only is fine
    np.testing.assert_array_equal(knn.query_all(pts, from_bytes, 5), knn.query_all(pts, tree, 5))


@pytest.mark.parametrize("dim", [1, 2, 3, 5, 8, 16])
@pytest.mark.parametrize("kind", KINDS)
def test_brute_force_bit_identical_to_oracle(lib, dim, kind):
    ref = random_points(dim, 300, dim, kind)
    queries = np.concatenate([random_points(dim + 50, 60, dim, kind), ref[:20]])
    want_d, want_i = oracle(ref, queries, 12)
    d, i = knn.brute_force(ref, queries, 12)
    np.testing.assert_array_equal(i, want_i)
    assert d.tobytes() == want_d.tobytes()          # bit-identical float32


def test_brute_force_optional_outputs(lib):
    ref = random_points(8, 40, 4)
    d_only, none_i = knn.brute_force(ref, ref, 3, indices=False)
    none_d, i_only = knn.brute_force(ref, ref, 3, distances=False)
    assert none_i is None and none_d is None
    want_d, want_i = oracle(ref, ref, 3)
    np.testing.assert_array_equal(d_only, want_d)
    np.testing.assert_array_equal(i_only, want_i)


def test_brute_force_more_k_than_points(lib):
    ref = random_points(9, 4, 2)
    d, i = knn.brute_force(ref, ref, 6)
    assert (i[:, 4:] == -1).all() and np.isinf(d[:, 4:]).all()


def test_memory_helpers(lib):
    assert knn.tree_size(0) == 0
    assert knn.tree_size(1000) == 24 * 1000
    assert knn.tree_size(-5) == 0
    assert knn.tree_size(2**31 - 1) == 24 * (2**31 - 1)       # 64-bit arithmetic
    b1 = knn.needed_bytes_for_building_kdtree(1000)
    b2 = knn.needed_bytes_for_building_kdtree(100000)
    assert 0 < b1 < b2
    q1 = knn.needed_bytes_for_query_all(1000, 8, 1000)
    q2 = knn.needed_bytes_for_query_all(100000, 8, 1000)
    assert 0 < q1 < q2
    assert knn.needed_bytes_for_query_all(10**8, 100, 10**6) > q2          # no int overflow
    assert knn.needed_bytes_for_query_all(-1, 8, 10) == 0
    assert knn.needed_bytes_in_search(1000, 8, 1000) >= 0
    assert knn.needed_bytes_in_search(1000, 8, 1000, 256, 64) >= 0
    with pytest.raises(OverflowError):
        knn.tree_size(2**31)


def test_concurrent_queries_on_one_tree(lib):
    pts = random_points(11, 3000)
    tree = knn.build_kdtree(pts)
    want = oracle(pts, pts, 6)[1]
    results, errors = [None] * 8, []

    def work(slot):
        try:
            for _ in range(3):
                results[slot] = knn.query_all(pts, tree, 6)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for r in results:
        np.testing.assert_array_equal(r, want)
