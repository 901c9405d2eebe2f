"""Bad input: library errors carry the status and knn_last_error(); shape mistakes
are caught in Python (ValueError/TypeError, never a KnnError) before any call."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest

import knn_gpgpu as knn
from knn_gpgpu import Status

from conftest import random_points


def test_nan_point_names_its_index(lib):
    pts = random_points(1, 50)
    pts[17, 2] = np.nan
    for build in (knn.build_kdtree, knn.mp_build_kdtree):
        with pytest.raises(knn.KnnError) as info:
            build(pts)
        err = info.value
        assert isinstance(err, knn.NonfiniteInputError)
        assert err.status == Status.NONFINITE_INPUT
        assert err.status_name == "NONFINITE_INPUT"
        assert "17" in err.message and "NaN" in err.message
        assert err.function in ("buildKdTree", "mpBuildKdTree")
        assert "KNN_ERR_NONFINITE_INPUT" in str(err) and "17" in str(err)


def test_infinite_query_names_its_index(lib):
    pts = random_points(2, 20)
    tree = knn.build_kdtree(pts)
    q = pts.copy()
    q[7, 0] = np.inf
    with pytest.raises(knn.NonfiniteInputError) as info:
        knn.query_all(q, tree, 2)
    assert info.value.status == Status.NONFINITE_INPUT
    assert "query point 7" in info.value.message
    ref = random_points(3, 10, 4)
    ref[3, 1] = -np.inf
    with pytest.raises(knn.NonfiniteInputError, match="3"):
        knn.brute_force(ref, ref[:2] * 0, 2)


@pytest.mark.parametrize("k", [0, -1, -(2**31)])
def test_bad_k_is_invalid_argument(lib, k):
    pts = random_points(4, 10)
    tree = knn.build_kdtree(pts)
    for call in (lambda: knn.query_all(pts, tree, k), lambda: knn.mp_query_all(pts, tree, k),
                 lambda: knn.brute_force(pts, pts, k)):
        with pytest.raises(knn.InvalidArgumentError) as info:
            call()
        assert info.value.status == Status.INVALID_ARGUMENT
        assert "k is %d" % k in info.value.message
        assert isinstance(info.value, ValueError)      # generic handlers still work


def test_failed_query_leaves_out_untouched(lib):
    pts = random_points(5, 10)
    tree = knn.build_kdtree(pts)
    out = np.full((10, 0), 7, np.intc)
    with pytest.raises(knn.InvalidArgumentError):
        knn.query_all(pts, tree, 0, out=out)
    bad = pts.copy()
    bad[0, 0] = np.nan
    out = np.full((10, 3), 7, np.intc)
    with pytest.raises(knn.NonfiniteInputError):
        knn.query_all(bad, tree, 3, out=out)
    assert (out == 7).all()


def test_corrupt_tree_is_invalid_tree(lib):
    pts = random_points(6, 31)
    tree = knn.build_kdtree(pts)
    bad = tree.copy()
    bad["left"][0] = 5
    with pytest.raises(knn.InvalidTreeError) as info:
        knn.query_all(pts, bad, 2)
    assert info.value.status == Status.INVALID_TREE and info.value.message
    bad = tree.copy()
    bad["id"][3] = bad["id"][4]
    with pytest.raises(knn.InvalidTreeError):
        knn.query_all(pts, bad, 2)


@pytest.mark.parametrize("shape", [(10,), (10, 2), (10, 4), (2, 5, 3), ()])
def test_wrong_point_shapes_raise_value_error_before_the_call(lib, shape):
    bad = np.zeros(shape, np.float32)
    for call in (lambda: knn.build_kdtree(bad), lambda: knn.mp_build_kdtree(bad),
                 lambda: knn.query_all(bad, knn.build_kdtree(np.zeros((3, 3))), 1)):
        with pytest.raises(ValueError) as info:
            call()
        assert not isinstance(info.value, knn.KnnError)
        assert "shape" in str(info.value)


def test_other_python_side_checks(lib):
    pts = random_points(7, 10)
    tree = knn.build_kdtree(pts)
    with pytest.raises(ValueError, match="shape"):
        knn.brute_force(np.zeros((5, 4)), np.zeros((5, 3)), 1)   # dim mismatch
    with pytest.raises(TypeError, match="NODE_DTYPE"):
        knn.query_all(pts, np.zeros((10, 6), np.float32), 1)     # not a Node array
    with pytest.raises(ValueError, match="1-D"):
        knn.query_all(pts, tree.reshape(2, 5), 1)
    with pytest.raises(ValueError, match="dtype"):
        knn.query_all(pts, tree, 2, out=np.zeros((10, 2), np.int64))
    with pytest.raises(ValueError, match="shape"):
        knn.query_all(pts, tree, 2, out=np.zeros((10, 3), np.intc))
    with pytest.raises(ValueError, match="C-contiguous"):
        knn.query_all(pts, tree, 2, out=np.zeros((2, 10), np.intc).T)
    with pytest.raises(ValueError, match="shape"):
        knn.build_kdtree(pts, out=np.zeros(9, knn.NODE_DTYPE))
    with pytest.raises(TypeError):
        knn.build_kdtree(np.array([["a", "b", "c"]]))
    with pytest.raises(OverflowError):
        knn.query_all(pts, tree, 2**31)
    with pytest.raises(TypeError):
        knn.query_all(pts, tree, 2.5)


def test_raw_calls_refuse_null_pointers(lib):
    status = lib.buildKdTree(None, 5, None)
    assert status == Status.INVALID_ARGUMENT
    assert "NULL" in knn.last_error()
    assert lib.buildKdTree(None, -1, None) == Status.INVALID_ARGUMENT
    assert lib.buildKdTree(None, 0, None) == Status.OK              # n = 0 does nothing
    assert knn.last_error() == ""                                    # cleared on success


def test_status_strings(lib):
    for status in Status:
        text = knn.status_string(status)
        assert text and (status.name in text)
    assert knn.status_string(12345) == "unknown status"
    assert knn.status_string(-1) == "unknown status"


def test_error_classes_and_pickling():
    assert knn.errors.error_class(Status.NO_DEVICE) is knn.NoDeviceError
    assert knn.errors.error_class(999) is knn.KnnError
    err = knn.errors.make_error(999, "strange", "f")
    assert err.status == 999 and err.status_name == "UNKNOWN(999)"
    for code in Status:
        if code == Status.OK:
            continue
        err = knn.errors.make_error(code, "msg %d" % code, "fn")
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and back.status == code and back.message == err.message
    assert issubclass(knn.HostOutOfMemoryError, MemoryError)
    assert issubclass(knn.DeviceOutOfMemoryError, MemoryError)


def test_last_error_is_per_thread(lib):
    pts = random_points(8, 100)
    bad = pts.copy()
    errors = {}

    def fail(slot):
        b = bad.copy()
        b[slot, 0] = np.nan
        for _ in range(20):
            try:
                knn.build_kdtree(b)
            except knn.NonfiniteInputError as exc:
                errors.setdefault(slot, set()).add(exc.message)
            knn.build_kdtree(pts)

    threads = [threading.Thread(target=fail, args=(s,)) for s in range(10, 18)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for slot, messages in errors.items():
        assert len(messages) == 1, messages            # never another thread's text
        (message,) = messages
        assert message.startswith("buildKdTree: ") and "point %d " % slot in message
    assert len(errors) == 8
