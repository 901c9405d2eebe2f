"""The index API: the real library (UNSUPPORTED in this release, real answers
once the engine lands) and the binding's plumbing through a numpy stand-in."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import knn_gpgpu as knn
from knn_gpgpu import Status, _library

from conftest import oracle, random_points
from fake_engine import FakeCudaArray, FakeNative


def engine_available() -> bool:
    try:
        with knn.Index(np.zeros((4, 3), np.float32)):
            return True
    except knn.UnsupportedError:
        return False


@pytest.fixture
def fake(lib, monkeypatch):
    engine = FakeNative(lib)
    monkeypatch.setattr(_library, "_native", engine)
    return engine


# ---- the real library ------------------------------------------------------------
def test_build_raises_status_carrying_error_or_works(lib):
    pts = random_points(1, 100)
    if engine_available():
        with knn.Index(pts) as index:
            assert index.info().n == 100
        return
    with pytest.raises(knn.KnnError) as info:
        knn.Index(pts, backend="openmp", structure="kdtree", threads=2)
    err = info.value
    assert isinstance(err, knn.UnsupportedError)
    assert err.status == Status.UNSUPPORTED and err.status_name == "UNSUPPORTED"
    assert err.function == "knn_index_build" and err.message.startswith("knn_index_build")


@pytest.mark.parametrize("dim", [1, 2, 3, 7, 16])
def test_real_engine_answers(lib, dim):
    if not engine_available():
        pytest.skip("this build's index engine answers KNN_ERR_UNSUPPORTED")
    pts = random_points(dim, 500, dim, "duplicates")
    queries = random_points(dim + 1, 64, dim)
    for backend in ("auto", "openmp"):
        with knn.Index(pts, backend=backend) as index:
            assert index.info()[:2] == (500, dim)
            ind, d2 = index.query(queries, 9)
            want_d, want_i = oracle(pts, queries, 9)
            np.testing.assert_array_equal(ind, want_i)
            assert d2.tobytes() == want_d.tobytes()
            ind, _ = index.query_self(4, exclude_self=True, distances=False)
            assert (ind != np.arange(500)[:, None]).all()
            res = index.radius(queries, 0.3, 16)
            full_d, full_i = oracle(pts, queries, 500)
            r2 = np.float32(0.3) * np.float32(0.3)
            np.testing.assert_array_equal(res.counts, (full_d <= r2).sum(axis=1))


def test_raw_index_calls_with_null_handles(lib):
    assert lib.knn_index_free(None) == Status.OK
    assert lib.knn_index_info(None, None, None, None, None) != Status.OK
    assert knn.last_error().startswith("knn_index_info")
    assert lib.knn_index_query(None, None, 0, 1, None, None, None) != Status.OK
    assert lib.knn_index_query_self(None, 1, 0, None, None) != Status.OK
    assert lib.knn_index_radius(None, None, 0, 1.0, 0, None, None, None, None) != Status.OK


def test_estimates(lib):
    assert knn.estimate_build_bytes(1000, 3) > 0
    assert knn.estimate_build_bytes(10**6, 3) > knn.estimate_build_bytes(1000, 3)
    assert knn.estimate_build_bytes(1000, 16) > knn.estimate_build_bytes(1000, 3)
    assert knn.estimate_query_bytes(10**5, 8, 1000, 3) > knn.estimate_query_bytes(10, 8, 1000, 3)
    assert knn.estimate_query_bytes(1000, 64, 1000, 3) > knn.estimate_query_bytes(1000, 1, 1000, 3)
    assert knn.Index.estimate_build_bytes(-1, 3) == 0
    assert knn.estimate_query_bytes(10, 0, 10, 3) == 0
    opt = knn.Options(backend="cuda")
    assert knn.estimate_query_bytes(10**4, 8, 10**4, 3, opt) > 0


def test_options_validation(lib):
    with pytest.raises(ValueError, match="backend"):
        knn.Options(backend="opencl")
    with pytest.raises(TypeError, match="unknown option"):
        knn.options.resolve(None, colour="red")
    with pytest.raises(TypeError):
        knn.options.resolve("openmp")
    assert knn.options.resolve(None) is None
    base = knn.Options(threads=2)
    merged = knn.options.resolve(base, backend="openmp")
    assert (merged.threads, merged.backend, base.backend) == (2, knn.Backend.OPENMP, 0)


# ---- binding plumbing through the stand-in engine ------------------------------
@pytest.mark.parametrize("dim", [1, 3, 16])
def test_query_plumbing(fake, dim):
    pts = random_points(dim, 120, dim, "lattice")
    queries = random_points(dim + 5, 33, dim)
    opt = knn.Options(threads=3)
    with knn.Index(pts, options=opt, backend="openmp") as index:
        build = fake.calls[-1]
        assert build[:3] == ("knn_index_build", 120, dim)
        assert build[3] == pts.ctypes.data                       # zero copy
        assert build[4].backend == knn.Backend.OPENMP and build[4].threads == 3
        assert opt.backend == knn.Backend.AUTO                   # caller's options untouched
        assert (index.n, index.dim) == (120, dim)
        assert index.info() == (120, dim, knn.Backend.OPENMP, knn.IndexStructure.BRUTE_FORCE)
        ind, d2 = index.query(queries, 7)
        want_d, want_i = oracle(pts, queries, 7)
        np.testing.assert_array_equal(ind, want_i)
        np.testing.assert_array_equal(d2, want_d)
        assert fake.calls[-1][3] == queries.ctypes.data and fake.calls[-1][6] is None
        ind2, none = index.query(queries.astype(np.float64), 7, distances=False, options=opt)
        assert none is None and fake.calls[-1][5] == 0           # NULL sq_distances
        assert fake.calls[-1][6] is opt
        np.testing.assert_array_equal(ind2, want_i)
        out_i = np.empty((33, 7), np.int32)
        out_d = np.empty((33, 7), np.float32)
        r_i, r_d = index.query(queries, 7, out_indices=out_i, out_distances=out_d)
        assert r_i is out_i and r_d is out_d
        np.testing.assert_array_equal(out_i, want_i)
        with pytest.raises(ValueError, match="shape"):
            index.query(np.zeros((5, dim + 1)), 3)               # caught before the call
        assert fake.calls[-1][0] == "knn_index_query" and fake.calls[-1][1] == 33
        with pytest.raises(knn.InvalidArgumentError, match="k is 0"):
            index.query(queries, 0)
    assert index.closed and fake.calls[-1][0] == "knn_index_free"
    with pytest.raises(ValueError, match="closed"):
        index.query(queries, 1)
    index.close()                                                # twice is fine


def test_query_self_and_radius_plumbing(fake):
    pts = random_points(3, 200, 2, "duplicates")
    index = knn.Index(pts)
    ind, d2 = index.query_self(5)
    np.testing.assert_array_equal(ind, oracle(pts, pts, 5)[1])
    ind, _ = index.query_self(5, exclude_self=True, distances=False)
    assert fake.calls[-1] == ("knn_index_query_self", 5, 1)
    assert (ind != np.arange(200)[:, None]).all()
    queries = random_points(4, 17, 2) * 0.01
    res = index.radius(queries, 0.25, 8)
    full_d, full_i = oracle(pts, queries, 200)
    r2 = np.float32(0.25) * np.float32(0.25)
    np.testing.assert_array_equal(res.counts, (full_d <= r2).sum(axis=1))
    assert res.indices.shape == (17, 8) and res.sq_distances.shape == (17, 8)
    take = np.minimum(res.counts, 8)
    for row in range(17):
        np.testing.assert_array_equal(res.indices[row, :take[row]], full_i[row, :take[row]])
        assert (res.indices[row, take[row]:] == -1).all()
    counting = index.radius(queries, 0.25, 0)
    assert counting.indices is None and counting.sq_distances is None
    assert fake.calls[-1][3:6] == (0, 0, 0)          # max_neighbors 0, NULL rows
    np.testing.assert_array_equal(counting.counts, res.counts)
    handle_calls = len(fake.objects)
    del index
    gc.collect()
    assert len(fake.objects) == handle_calls - 1                 # freed by the finaliser


def test_build_errors_through_the_stand_in(fake):
    pts = random_points(5, 10, 4)
    pts[6, 3] = np.nan
    with pytest.raises(knn.NonfiniteInputError, match="point 6"):
        knn.Index(pts)
    with pytest.raises(ValueError, match="2-D"):
        knn.Index(np.zeros(12, np.float32))
    assert not [c for c in fake.calls if c[0] == "knn_index_build" and c[1] == 12]


def test_device_arrays_are_passed_through(lib, monkeypatch):
    engine = FakeNative(lib, device_count=1)
    monkeypatch.setattr(_library, "_native", engine)
    pts = random_points(6, 50, 3)
    dev_pts = FakeCudaArray(pts)
    with knn.Index(dev_pts) as index:
        assert engine.calls[-1][3] == pts.ctypes.data            # the device pointer itself
        q = random_points(7, 9, 3)
        out_i = FakeCudaArray(np.zeros((9, 4), np.int32))
        out_d = FakeCudaArray(np.zeros((9, 4), np.float32))
        r_i, r_d = index.query(FakeCudaArray(q), 4, out_indices=out_i, out_distances=out_d)
        assert r_i is out_i and r_d is out_d                     # the caller's objects back
        assert engine.calls[-1][3:6] == (q.ctypes.data, out_i.host.ctypes.data,
                                         out_d.host.ctypes.data)
        want_d, want_i = oracle(pts, q, 4)
        np.testing.assert_array_equal(out_i.host, want_i)
        # host queries, device outputs; device counts for radius
        counts = FakeCudaArray(np.zeros(9, np.int32))
        res = index.radius(q, 1.0, 0, out_counts=counts)
        assert res.counts is counts
        with pytest.raises(ValueError, match="dtype"):
            index.query(FakeCudaArray(q.astype(np.float64)), 4)
        with pytest.raises(ValueError, match="C-contiguous"):
            index.query(FakeCudaArray(q, strides=(4, 36)), 4)
        with pytest.raises(ValueError, match="read-only"):
            index.query(q, 4, out_indices=FakeCudaArray(np.zeros((9, 4), np.int32),
                                                        readonly=True))


def test_device_arrays_refused_without_a_device(lib, has_device):
    if has_device:
        pytest.skip("a CUDA device is usable here")
    with pytest.raises(knn.NoDeviceError) as info:
        knn.Index(FakeCudaArray(random_points(8, 10)))
    assert info.value.status == Status.NO_DEVICE
    assert "__cuda_array_interface__" in info.value.message
