"""close() while other threads are inside calls on the object (issue #51):
the calls finish with their full answers (against the oracles), the library
object is freed when the last of them returns, and calls made after close()
raise ValueError. Never a crash, never an answer from another object."""

from __future__ import annotations

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
        index.query(queries, 1)
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
