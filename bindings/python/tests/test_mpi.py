"""knn_gpgpu.mpi under mpirun (scripts/checks/mpi.sh runs it with 1 to 3 ranks):

    mpirun -np 3 python -m pytest -q bindings/python/tests/test_mpi.py

Every rank runs every test, in the same order (the calls are collective).
Answers are compared bit for bit with knn_gpgpu.Index over the union of every
rank's points and, on small cases, with the numpy oracle of conftest.py.
Skipped where mpi4py or libknn_gpgpu_mpi is missing (a plain pytest run of the
bindings without MPI).
"""

from __future__ import annotations

import numpy as np
import pytest

import knn_gpgpu
from conftest import oracle

MPI = pytest.importorskip("mpi4py.MPI")
kmpi = pytest.importorskip("knn_gpgpu.mpi")


@pytest.fixture(scope="module", autouse=True)
def mpi_library():
    try:
        kmpi.load_mpi_library()
    except knn_gpgpu.LibraryNotFoundError as exc:
        pytest.skip(str(exc))


def split(total: int, comm, seed: int):
    """Uneven slices of `total` items, some ranks empty: (first, last) of this rank."""
    rng = np.random.default_rng(seed)
    weights = rng.integers(0, 4, comm.size).astype(float)
    if weights.sum() == 0:
        weights[-1] = 1
    cuts = np.concatenate([[0], np.floor(np.cumsum(weights) / weights.sum() * total)]).astype(int)
    cuts[-1] = total
    return cuts[comm.rank], cuts[comm.rank + 1]


def union_index(points):
    return knn_gpgpu.Index(points, backend="openmp")


@pytest.mark.parametrize("dim,n,seed", [(3, 2000, 1), (2, 500, 2), (6, 300, 3)])
def test_knn_self_radius_match_the_union(dim, n, seed):
    comm = MPI.COMM_WORLD
    rng = np.random.default_rng(seed)
    pts = rng.random((n, dim), dtype=np.float32)
    pts[::5] = pts[1::5][: len(pts[::5])]          # duplicates: ties by global index
    queries = rng.random((150, dim), dtype=np.float32)
    p0, p1 = split(n, comm, seed)
    q0, q1 = split(len(queries), comm, seed + 100)
    mine = comm.allgather(pts[p0:p1])               # the oracle sees the gathered union
    union = np.concatenate(mine)
    assert np.array_equal(union, pts)
    with kmpi.DistributedIndex(comm, pts[p0:p1], backend="openmp") as index, \
            union_index(union) as single:
        assert (index.n_global, index.offset, index.n_local) == (n, p0, p1 - p0)
        for k in (1, 8, 33):
            d2, ind = index.query(queries[q0:q1], k)
            want_d2, want_ind = single.query(queries[q0:q1], k)
            np.testing.assert_array_equal(ind, want_ind)
            assert ind.dtype == np.int64
            np.testing.assert_array_equal(d2.view(np.int32), want_d2.view(np.int32))
            if n <= 500:
                o_d2, o_ind = oracle(pts, queries[q0:q1], k)
                np.testing.assert_array_equal(ind, o_ind)
                np.testing.assert_array_equal(d2, o_d2)
        for exclude in (True, False):
            d2, ind = index.query_self(8, exclude_self=exclude)
            want_d2, want_ind = single.query_self(8, exclude_self=exclude)
            np.testing.assert_array_equal(ind, want_ind[p0:p1])
            np.testing.assert_array_equal(d2, want_d2[p0:p1])
        r = 0.15
        got = index.radius(queries[q0:q1], r, max_neighbors=12)
        want = single.radius(queries[q0:q1], r, max_neighbors=12)
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_array_equal(got.sq_distances, want.sq_distances)
        np.testing.assert_array_equal(got.counts, want.counts)
        assert tuple(got) == (got.sq_distances, got.indices, got.counts)
        counted = index.radius(queries[q0:q1], r, max_neighbors=0)
        assert counted.indices is None and counted.sq_distances is None
        np.testing.assert_array_equal(counted.counts, want.counts)
        # The 1.0 order, indices first, with its warning.
        with pytest.warns(DeprecationWarning, match="DistributedIndex.query returns"):
            legacy = index.query(queries[q0:q1], 8, distances_first=False)
        want_d2, want_ind = index.query(queries[q0:q1], 8)
        np.testing.assert_array_equal(legacy[0], want_ind)
        np.testing.assert_array_equal(legacy[1], want_d2)
        with pytest.warns(DeprecationWarning, match="DistributedIndex.radius returns"):
            old = index.radius(queries[q0:q1], r, max_neighbors=12, distances_first=False)
        np.testing.assert_array_equal(old[0], want.indices)
        np.testing.assert_array_equal(old[1], want.sq_distances)
        assert index.last_stats()["bytes_sent"] >= 0


def test_a_sub_communicator():
    """Any communicator: the even and the odd ranks each index their own union."""
    world = MPI.COMM_WORLD
    sub = world.Split(world.rank % 2, world.rank)
    rng = np.random.default_rng(7 + world.rank % 2)
    pts = rng.random((400, 3), dtype=np.float32)
    p0, p1 = split(len(pts), sub, 11)
    try:
        with kmpi.DistributedIndex(sub, pts[p0:p1], backend="openmp") as index, \
                union_index(pts) as single:
            assert index.size == sub.size and index.rank == sub.rank
            _, ind = index.query(pts[:10], 5)
            np.testing.assert_array_equal(ind, single.query(pts[:10], 5)[1])
    finally:
        sub.Free()


def test_a_bad_rank_fails_every_rank():
    comm = MPI.COMM_WORLD
    last = comm.size - 1
    pts = np.random.default_rng(5).random((50, 3), dtype=np.float32)
    if comm.rank == last:
        pts[3, 1] = np.nan
    with pytest.raises(knn_gpgpu.NonfiniteInputError, match="rank %d: point 3" % last):
        kmpi.DistributedIndex(comm, pts, backend="openmp")

    # Points of the wrong shape on the last rank: its ValueError, and the
    # library's refusal everywhere else (no rank waits).
    flat = np.zeros(6, dtype=np.float32) if comm.rank == last else np.zeros((2, 3), np.float32)
    expected = ValueError if comm.rank == last else knn_gpgpu.InvalidArgumentError
    with pytest.raises(expected):
        kmpi.DistributedIndex(comm, flat, backend="openmp")

    good = np.random.default_rng(comm.rank).random((40, 3), dtype=np.float32)
    with kmpi.DistributedIndex(comm, good, backend="openmp") as index:
        # Queries of the wrong shape on the last rank only: that rank raises the
        # binding's ValueError, every other rank the library's refusal.
        q = good[:5, :2] if comm.rank == last else good[:5]
        expected = ValueError if comm.rank == last else knn_gpgpu.InvalidArgumentError
        with pytest.raises(expected):
            index.query(q, 3)
        # A cancel flag raised on one rank stops every rank.
        flag = knn_gpgpu.CancelFlag()
        with kmpi.DistributedIndex(comm, good, backend="openmp", cancel_flag=flag) as flagged:
            if comm.rank == last:
                flag.cancel()
            with pytest.raises(knn_gpgpu.CancelledError):
                flagged.query(good[:5], 3)
            flag.reset()
            assert flagged.query(good[:5], 3)[0].shape == (5, 3)
        # The index still answers.
        _, ind = index.query(good[:5], 1)
        assert ind[:, 0].tolist() == [index.offset + i for i in range(5)]
