"""close() while other threads are inside calls on the object (issue #51):
the calls finish with their full answers (against the oracles), the library
object is freed when the last of them returns, and calls made after close()
raise ValueError. Never a crash, never an answer from another object."""

from __future__ import annotations

import copy
import ctypes
import gc
import threading
import time

import numpy as np
import pytest

import knn_gpgpu as knn
from knn_gpgpu import _library

from conftest import oracle, random_points
from spy_native import SpyNative

pytestmark = pytest.mark.filterwarnings("ignore:Index\\.[a-z_]+ returns:DeprecationWarning")

SQUARE = [[0.0, 0.0], [4.0, 0.0], [4.0, 4.0], [0.0, 4.0]]


# ---- close() in the gap between reading the handle and the library call -----------------
# Another thread's close() can land after a method has read the handle and
# before the library runs: the spy closes the object right there. Freed at
# once (as before the fix), the call would pass a dead handle, refused at
# best, and at worst reused by another object's build, whose sizes differ
# from the arrays this call passes.

def test_index_closed_just_before_the_library_call(lib, monkeypatch):
    spy = SpyNative(lib)
    monkeypatch.setattr(_library, "_native", spy)
    pts = random_points(51, 500, 3)
    queries = random_points(52, 40, 3)
    want_d, want_i = oracle(pts, queries, 6)
    index = knn.Index(pts, backend="openmp")
    spy.before["knn_index_query"] = index.close
    d2, ind = index.query(queries, 6, distances_first=True)
    np.testing.assert_array_equal(ind, want_i)
    np.testing.assert_array_equal(d2, want_d)
    assert index.closed
    names = [c[0] for c in spy.calls]
    assert names[-2:] == ["knn_index_query", "knn_index_free"]   # freed by the last call
    assert names.count("knn_index_free") == 1
    with pytest.raises(ValueError, match="closed"):
        index.query(queries, 1, distances_first=False)
    index.close()                                                  # nothing left to free
    assert [c[0] for c in spy.calls].count("knn_index_free") == 1


def test_quadtree_closed_just_before_the_library_call(lib, monkeypatch):
    spy = SpyNative(lib)
    monkeypatch.setattr(_library, "_native", spy)
    xy = np.random.default_rng(53).uniform(-1.0, 5.0, size=(400, 2)).astype(np.float32)
    want = int(np.count_nonzero((xy[:, 0] > 0) & (xy[:, 0] < 4) & (xy[:, 1] > 0) & (xy[:, 1] < 4)))
    tree = knn.Quadtree(xy, backend="openmp")
    spy.before["knn_points_in_polygons_count_f64"] = tree.close
    counts = tree.points_in_polygons_count(*knn.pack_polygons([[SQUARE]]))
    assert counts.tolist() == [want]
    names = [c[0] for c in spy.calls]
    assert names[-2:] == ["knn_points_in_polygons_count_f64", "knn_quadtree_free"]
    with pytest.raises(ValueError, match="closed"):
        tree.points_in_polygons_count(*knn.pack_polygons([[SQUARE]]))


# ---- close() from another thread while threads query ---------------------------------------

def test_close_while_threads_query(lib):
    pts = random_points(54, 5000, 3)
    queries = random_points(55, 1000, 3)
    want_d, want_i = oracle(pts, queries, 8)
    for _ in range(3):
        index = knn.Index(pts, backend="openmp")
        answered = threading.Semaphore(0)
        failures = []

        def work():
            first = True
            while True:
                try:
                    d2, ind = index.query(queries, 8, distances_first=True)
                except ValueError as e:                  # closed: the only way out
                    assert "closed" in str(e)
                    if first:
                        answered.release()
                    return
                except Exception as e:                   # noqa: BLE001 - reported below
                    failures.append(repr(e))
                    answered.release()
                    return
                if not (np.array_equal(ind, want_i) and np.array_equal(d2, want_d)):
                    failures.append("a query in flight during close() got a wrong answer")
                if first:
                    first = False
                    answered.release()

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for _ in threads:
            assert answered.acquire(timeout=60)
        time.sleep(0.01)                                 # queries in flight
        index.close()
        for t in threads:
            t.join(60)
            assert not t.is_alive()
        assert failures == []
        assert index.closed


# ---- copies share the handle ---------------------------------------------------------------
# A field-by-field copy shared the handle but not the count of calls in flight:
# each copy freed it (the second free refused by the library, or, once the
# address was reused, freeing another object), and deepcopy failed on the
# ctypes pointer.

def test_copies_are_the_object_itself(lib, monkeypatch):
    spy = SpyNative(lib)
    monkeypatch.setattr(_library, "_native", spy)
    pts = random_points(56, 300, 3)
    want_d, want_i = oracle(pts, pts, 4)
    index = knn.Index(pts, backend="openmp")
    shallow, deep = copy.copy(index), copy.deepcopy(index)
    for twin in (shallow, deep):
        d2, ind = twin.query(pts, 4, distances_first=True)
        np.testing.assert_array_equal(ind, want_i)
        np.testing.assert_array_equal(d2, want_d)
    shallow.close()
    assert index.closed and deep.closed
    index.close()
    deep.close()
    assert [c[0] for c in spy.calls].count("knn_index_free") == 1

    xy = np.random.default_rng(57).uniform(-1.0, 5.0, size=(200, 2)).astype(np.float32)
    inside = (xy[:, 0] > 0) & (xy[:, 0] < 4) & (xy[:, 1] > 0) & (xy[:, 1] < 4)
    tree = knn.Quadtree(xy, backend="openmp")
    tree_copy = copy.deepcopy(tree)
    del tree
    gc.collect()                                   # the copy keeps the tree alive
    assert tree_copy.points_in_polygons_count(*knn.pack_polygons([[SQUARE]])).tolist() == \
        [int(np.count_nonzero(inside))]
    tree_copy.close()
    assert [c[0] for c in spy.calls].count("knn_quadtree_free") == 1


def test_kdtree_copies_query_after_the_original_is_gone(lib):
    pts = random_points(58, 300, 3)
    want_d, want_i = oracle(pts, pts, 3)
    tree = knn.KDTree(pts, backend="openmp")
    copies = [copy.copy(tree), copy.deepcopy(tree)]
    del tree
    gc.collect()
    for twin in copies:
        d, i = twin.query(pts, k=3)
        np.testing.assert_array_equal(i, want_i)
        np.testing.assert_allclose(d * d, want_d, rtol=1e-5, atol=1e-6)


# ---- the distributed index (no MPI needed: a stand-in for libknn_gpgpu_mpi) ------------------

class FakeMpiLibrary:
    """Records the knn_dindex calls; ``during_query`` runs inside the next query."""

    def __init__(self) -> None:
        self.calls: list = []
        self.during_query = None

    def knn_mpi_options_init(self, opt) -> None:
        pass

    def knn_mpi_last_error(self) -> bytes:
        return b"fake"

    def knn_dindex_build(self, comm, points, n, dim, opt, out) -> int:
        ctypes.memmove(ctypes.addressof(out._obj), ctypes.byref(ctypes.c_void_p(0x1000)),
                       ctypes.sizeof(ctypes.c_void_p))
        return 0

    def knn_dindex_info(self, handle, n_global, n_local, offset, dim, n_region, rank,
                        size) -> int:
        dim._obj.value = 3
        return 0

    def knn_dindex_query(self, handle, queries, m, k, ind, d2) -> int:
        if self.during_query is not None:
            self.during_query, during = None, self.during_query
            during()
        self.calls.append(("knn_dindex_query", ctypes.cast(handle, ctypes.c_void_p).value))
        return 0

    def knn_dindex_free(self, handle) -> int:
        self.calls.append(("knn_dindex_free", ctypes.cast(handle, ctypes.c_void_p).value))
        return 0


def test_distributed_index_closed_during_a_call(monkeypatch):
    kmpi = pytest.importorskip("knn_gpgpu.mpi")
    fake = FakeMpiLibrary()
    monkeypatch.setattr(kmpi, "load_mpi_library", lambda: fake)
    monkeypatch.setattr(kmpi, "_comm_address", lambda comm: 0)
    index = kmpi.DistributedIndex(None, np.zeros((4, 3), dtype=np.float32))
    fake.during_query = index.close
    index.query(np.zeros((2, 3), dtype=np.float32), 1)
    assert fake.calls == [("knn_dindex_query", 0x1000), ("knn_dindex_free", 0x1000)]
    assert index.closed
    with pytest.raises(ValueError, match="closed"):
        index.query(np.zeros((2, 3), dtype=np.float32), 1)
    index.close()
    assert copy.copy(index) is index
    assert len(fake.calls) == 2
