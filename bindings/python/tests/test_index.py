"""The index API against the real engines and the numpy brute-force oracle
(conftest.oracle: float32 ((d0*d0 + d1*d1) + d2*d2) + ..., ties by index)."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import knn_gpgpu as knn
from knn_gpgpu import Backend, IndexStructure, Status, _library

from conftest import oracle, random_points
from spy_native import FakeCudaArray, SpyNative

# These tests call Index.query/query_self/radius in the 1.0 order on purpose
# (the order callers of 1.0 rely on); test_spatial.test_return_order checks
# the warning and distances_first=True.
pytestmark = pytest.mark.filterwarnings("ignore:Index\\.[a-z_]+ returns:DeprecationWarning")

CONCRETE = (IndexStructure.KDTREE, IndexStructure.GRID, IndexStructure.BRUTE_FORCE)


def structures(dim):
    """Structures to request for points of `dim` (the grid is the 3-D structure)."""
    return ["auto", "kdtree", "brute_force"] + (["grid"] if dim == 3 else [])


def backends(has_device):
    return ["auto", "openmp"] + (["cuda"] if has_device else [])


def check_info(index, n, dim, backend, structure, has_device):
    info = index.info()
    assert (info.n, info.dim) == (n, dim)
    assert isinstance(info.n, int) and isinstance(info.backend, Backend)
    if backend == "openmp" or (backend == "auto" and not has_device):
        assert info.backend == Backend.OPENMP
    elif backend == "cuda":
        assert info.backend == Backend.CUDA
    assert info.structure in CONCRETE
    if structure == "grid":        # the kd-tree serves data that would make a poor grid
        assert info.structure in (IndexStructure.GRID, IndexStructure.KDTREE)
    elif structure != "auto":
        assert info.structure == IndexStructure[structure.upper()]


def self_oracle(pts, k, exclude_self):
    """All-kNN of pts in input order; exclude_self drops only each row's own index."""
    n = pts.shape[0]
    d, i = oracle(pts, pts, n)
    out_i = np.full((n, k), -1, np.int32)
    out_d = np.full((n, k), np.inf, np.float32)
    for row in range(n):
        keep = i[row] != row if exclude_self else np.ones(n, bool)
        ri, rd = i[row][keep][:k], d[row][keep][:k]
        out_i[row, :ri.size], out_d[row, :rd.size] = ri, rd
    return out_d, out_i


def radius_oracle(pts, queries, radius, max_neighbors):
    r2 = np.float32(radius) * np.float32(radius)
    d, i = oracle(pts, queries, pts.shape[0])
    counts = (d <= r2).sum(axis=1).astype(np.int32)
    m = queries.shape[0]
    ind = np.full((m, max_neighbors), -1, np.int32)
    dist = np.full((m, max_neighbors), np.inf, np.float32)
    for row in range(m):
        take = min(int(counts[row]), max_neighbors)
        ind[row, :take], dist[row, :take] = i[row, :take], d[row, :take]
    return ind, dist, counts


def same_bits(a, b):
    return np.asarray(a).tobytes() == np.asarray(b).tobytes()


def test_the_oracles_agree_with_knn_brute_force(lib):
    # The helpers above are checked against the library's independent CPU brute
    # force (knn_brute_force), so that an index failure below is the index's.
    for dim in (2, 3, 5):
        pts = random_points(dim, 120, dim, "lattice")
        d, i = knn.brute_force(pts, pts, k=130)
        sd, si = self_oracle(pts, 130, False)
        np.testing.assert_array_equal(si, i)
        assert same_bits(sd, d)
        xd, xi = self_oracle(pts, 5, True)
        for row in range(120):
            np.testing.assert_array_equal(xi[row], [j for j in i[row] if j != row][:5])
        ri, rd, rc = radius_oracle(pts, pts[:30], 2.0, 6)
        np.testing.assert_array_equal(rc, (d[:30] <= 4.0).sum(axis=1))
        for row in range(30):
            take = min(int(rc[row]), 6)
            assert ri[row].tolist() == i[row, :take].tolist() + [-1] * (6 - take)
            assert same_bits(rd[row, :take], d[row, :take]) and np.isinf(rd[row, take:]).all()


# ---- kNN queries ---------------------------------------------------------------------
@pytest.mark.parametrize("dim", [2, 3, 5])
@pytest.mark.parametrize("kind", ["uniform", "duplicates", "lattice"])
def test_query_matches_oracle(lib, has_device, dim, kind):
    pts = random_points(10 * dim + len(kind), 300, dim, kind)
    queries = np.concatenate([random_points(dim + 1, 40, dim, kind), pts[:10]])
    want_d, want_i = oracle(pts, queries, 40)
    for backend in backends(has_device):
        for structure in structures(dim):
            with knn.Index(pts, backend=backend, structure=structure) as index:
                check_info(index, 300, dim, backend, structure, has_device)
                for k in (1, 4, 17, 40):
                    ind, d2 = index.query(queries, k, distances_first=False)
                    assert ind.shape == d2.shape == (50, k)
                    assert ind.dtype == np.int32 and d2.dtype == np.float32
                    np.testing.assert_array_equal(ind, want_i[:, :k],
                                                  err_msg="%s %s k=%d" % (backend, structure, k))
                    assert same_bits(d2, want_d[:, :k]), (backend, structure, k)


@pytest.mark.parametrize("dim", [1, 16])
def test_other_dimensions(lib, dim):
    pts = random_points(dim, 400, dim, "duplicates")
    queries = random_points(dim + 1, 30, dim)
    want_d, want_i = oracle(pts, queries, 9)
    for structure in structures(dim):
        with knn.Index(pts, structure=structure) as index:
            ind, d2 = index.query(queries, 9, distances_first=False)
            np.testing.assert_array_equal(ind, want_i)
            assert same_bits(d2, want_d)


def test_larger_index_and_k_1024(lib):
    pts = random_points(21, 20000, 3, "clustered")
    queries = random_points(22, 100, 3, "clustered")
    want_d, want_i = oracle(pts, queries, 10)
    with knn.Index(pts) as index:                      # AUTO picks by size and dimension
        ind, d2 = index.query(queries, 10, distances_first=False)
        np.testing.assert_array_equal(ind, want_i)
        assert same_bits(d2, want_d)
    pts = random_points(23, 1100, 2, "lattice")
    want_d, want_i = oracle(pts, pts[:12], 1024)
    for structure in ("kdtree", "brute_force"):
        with knn.Index(pts, structure=structure) as index:
            ind, d2 = index.query(pts[:12], 1024, distances_first=False)
            np.testing.assert_array_equal(ind, want_i)
            assert same_bits(d2, want_d)


def test_fewer_points_than_k_and_empty_inputs(lib):
    pts = random_points(3, 5, 3)
    with knn.Index(pts, backend="openmp") as index:
        ind, d2 = index.query(pts, 8, distances_first=False)
        assert (ind[:, 5:] == -1).all() and np.isinf(d2[:, 5:]).all()
        want_d, want_i = oracle(pts, pts, 8)
        np.testing.assert_array_equal(ind, want_i)
        assert (d2[:, 0] == 0).all()
        ind, d2 = index.query(np.empty((0, 3), np.float32), 4, distances_first=False)
        assert ind.shape == d2.shape == (0, 4)
    with knn.Index(np.empty((0, 2), np.float32)) as empty:
        assert empty.info()[:2] == (0, 2)
        ind, d2 = empty.query(np.ones((3, 2), np.float32), 2, distances_first=False)
        assert (ind == -1).all() and np.isinf(d2).all()
        res = empty.radius(np.ones((3, 2), np.float32), 1.0, 2, distances_first=False)
        assert (res.counts == 0).all() and (res.indices == -1).all()


@pytest.mark.parametrize("leaf_size", [1, 5, 64])
def test_options_do_not_change_answers(lib, leaf_size):
    pts = random_points(leaf_size, 500, 3, "duplicates")
    queries = random_points(leaf_size + 1, 40, 3)
    want_d, want_i = oracle(pts, queries, 7)
    opt = knn.Options(backend="openmp", structure="kdtree", leaf_size=leaf_size, threads=2)
    with knn.Index(pts, options=opt, device_memory_limit=1 << 20) as index:
        assert index.info().structure == IndexStructure.KDTREE
        for per_call in (None, knn.Options(threads=1)):
            ind, d2 = index.query(queries, 7, options=per_call, distances_first=False)
            np.testing.assert_array_equal(ind, want_i)
            assert same_bits(d2, want_d)


def test_the_index_owns_a_copy(lib):
    pts = random_points(4, 200, 3)
    queries = random_points(5, 20, 3)
    want_d, want_i = oracle(pts, queries, 5)
    index = knn.Index(pts)
    pts[:] = 0                                          # the caller's array changes
    del pts
    gc.collect()
    ind, d2 = index.query(queries, 5, distances_first=False)
    np.testing.assert_array_equal(ind, want_i)
    assert same_bits(d2, want_d)
    index.close()


def test_concurrent_queries_on_one_index(lib):
    pts = random_points(6, 3000, 3)
    queries = random_points(7, 200, 3)
    want_i = oracle(pts, queries, 8)[1]
    with knn.Index(pts) as index:
        results = []

        def work():
            for _ in range(5):
                results.append(index.query(queries, 8, distances_first=False)[0])

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(results) == 20 and all(np.array_equal(r, want_i) for r in results)


# ---- all-kNN ------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [2, 3, 5])
@pytest.mark.parametrize("exclude_self", [False, True])
def test_query_self(lib, has_device, dim, exclude_self):
    pts = random_points(30 + dim, 250, dim, "duplicates")      # ~8 copies of each point
    for structure in structures(dim):
        with knn.Index(pts, structure=structure) as index:
            for k in (1, 6, 20):
                want_d, want_i = self_oracle(pts, k, exclude_self)
                ind, d2 = index.query_self(k, exclude_self=exclude_self, distances_first=False)
                assert ind.shape == (250, k)
                np.testing.assert_array_equal(ind, want_i, err_msg="%s k=%d" % (structure, k))
                assert same_bits(d2, want_d)
                if exclude_self:
                    assert (ind != np.arange(250)[:, None]).all()
                    # other copies at distance 0 are kept
                    assert (d2[:, 0] == 0).sum() > 200
            ind_only, none = index.query_self(3, exclude_self=exclude_self, distances=False, distances_first=False)
            assert none is None
            np.testing.assert_array_equal(ind_only, self_oracle(pts, 3, exclude_self)[1])


def test_query_self_with_fewer_points_than_k(lib):
    pts = random_points(8, 4, 3)
    with knn.Index(pts) as index:
        ind, d2 = index.query_self(6, exclude_self=True, distances_first=False)
        want_d, want_i = self_oracle(pts, 6, True)
        np.testing.assert_array_equal(ind, want_i)
        assert (ind[:, 3:] == -1).all() and np.isinf(d2[:, 3:]).all()


# ---- radius -------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [2, 3, 5])
def test_radius_matches_oracle(lib, has_device, dim):
    pts = random_points(40 + dim, 400, dim, "lattice")          # integer grid: distances tie
    queries = np.concatenate([random_points(41 + dim, 30, dim, "lattice"),
                              random_points(42 + dim, 10, dim) / 30])
    for backend in backends(has_device):
        for structure in structures(dim):
            with knn.Index(pts, backend=backend, structure=structure) as index:
                overflow = empty = False
                for radius, max_nb in ((1.0, 8), (2.0, 16), (0.0, 4), (3.5, 3)):
                    want_i, want_d, want_c = radius_oracle(pts, queries, radius, max_nb)
                    overflow |= bool((want_c > max_nb).any())
                    empty |= bool((want_c == 0).any())
                    res = index.radius(queries, radius, max_nb, distances_first=False)
                    what = "%s %s r=%g" % (backend, structure, radius)
                    assert res.counts.dtype == np.int32 and res.counts.shape == (40,)
                    np.testing.assert_array_equal(res.counts, want_c, err_msg=what)
                    np.testing.assert_array_equal(res.indices, want_i, err_msg=what)
                    assert same_bits(res.sq_distances, want_d), what
                assert overflow and empty          # rows beyond max_neighbors, empty rows
                counting = index.radius(queries, 2.0, 0, distances_first=False)
                assert counting.indices is None and counting.sq_distances is None
                np.testing.assert_array_equal(counting.counts,
                                              radius_oracle(pts, queries, 2.0, 0)[2])
                no_d = index.radius(queries, 1.0, 5, distances=False, distances_first=False)
                assert no_d.sq_distances is None
                np.testing.assert_array_equal(no_d.indices, radius_oracle(pts, queries, 1.0, 5)[0])


def test_radius_boundary_is_inclusive_in_float32(lib):
    pts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0.1, 0.2, 0.3], [2, 0, 0]], np.float32)
    q = np.zeros((1, 3), np.float32)
    with knn.Index(pts) as index:
        res = index.radius(q, 1.0, 5, distances_first=False)                   # squared distance 1 <= 1*1
        assert res.counts.tolist() == [4]
        assert res.indices.tolist() == [[0, 3, 1, 2, -1]]
        f = np.float32
        d3 = (f(0.1) * f(0.1) + f(0.2) * f(0.2)) + f(0.3) * f(0.3)
        assert res.sq_distances[0].tolist() == [0, d3, 1, 1, np.inf]


# ---- errors ----------------------------------------------------------------------------------
def test_nonfinite_inputs_name_their_index(lib):
    pts = random_points(9, 20, 4)
    pts[6, 3] = np.nan
    with pytest.raises(knn.NonfiniteInputError) as info:
        knn.Index(pts)
    err = info.value
    assert err.status == Status.NONFINITE_INPUT and err.function == "knn_index_build"
    assert err.message.startswith("knn_index_build") and "point 6" in err.message
    pts[6, 3] = 1.0
    with knn.Index(pts) as index:
        queries = random_points(10, 20, 4)
        queries[13, 0] = np.inf
        out_i = np.full((20, 3), 77, np.int32)
        out_d = np.full((20, 3), 7.0, np.float32)
        with pytest.raises(knn.NonfiniteInputError) as info:
            index.query(queries, 3, out_indices=out_i, out_distances=out_d, distances_first=False)
        assert info.value.function == "knn_index_query" and "13" in info.value.message
        assert (out_i == 77).all() and (out_d == 7.0).all()     # validation failed: untouched
        with pytest.raises(knn.NonfiniteInputError, match="13"):
            index.radius(queries, 1.0, 2, distances_first=False)


def test_bad_arguments_are_invalid_argument(lib, has_device):
    pts = random_points(11, 30, 3)
    with knn.Index(pts) as index:
        for k in (0, -3):
            with pytest.raises(knn.InvalidArgumentError) as info:
                index.query(pts, k, distances_first=False)
            assert info.value.function == "knn_index_query"
            assert info.value.message.startswith("knn_index_query")
            with pytest.raises(knn.InvalidArgumentError):
                index.query_self(k, distances_first=False)
        with pytest.raises(knn.InvalidArgumentError):
            index.radius(pts, 1.0, -1, distances_first=False)
        want = index.query(pts, 2, distances_first=False)[0]                  # still usable after refusals
        np.testing.assert_array_equal(want, oracle(pts, pts, 2)[1])
    with knn.Index(pts) as index:
        for radius in (-1.0, float("nan")):
            with pytest.raises(knn.InvalidArgumentError) as info:
                index.radius(pts, radius, 2, distances_first=False)
            assert info.value.function == "knn_index_radius"
        res = index.radius(pts[:3], float("inf"), 30, distances_first=False)         # +infinity is allowed
        assert (res.counts == 30).all()
        np.testing.assert_array_equal(res.indices, oracle(pts, pts[:3], 30)[1])
    with pytest.raises(knn.InvalidArgumentError):
        knn.Index(pts, structure=9)
    with pytest.raises(knn.InvalidArgumentError):
        knn.Index(pts, threads=-1)
    with pytest.raises(knn.InvalidArgumentError):
        knn.Index(pts, device=-2)
    with pytest.raises(knn.UnsupportedError) as info:       # the grid is 3-D only
        knn.Index(random_points(12, 30, 2), structure="grid")
    assert info.value.function == "knn_index_build"
    if not has_device:
        with pytest.raises(knn.NoDeviceError) as info:
            knn.Index(pts, backend="cuda")
        assert info.value.function == "knn_index_build"


def test_raw_index_calls_with_null_handles(lib):
    assert lib.knn_index_free(None) == Status.OK
    assert lib.knn_index_info(None, None, None, None, None) == Status.INVALID_ARGUMENT
    assert knn.last_error().startswith("knn_index_info")
    assert lib.knn_index_query(None, None, 0, 1, None, None, None) == Status.INVALID_ARGUMENT
    assert lib.knn_index_query_self(None, 1, 0, None, None) == Status.INVALID_ARGUMENT
    assert lib.knn_index_radius(None, None, 0, 1.0, 0, None, None, None, None) \
        == Status.INVALID_ARGUMENT
    assert lib.knn_index_build(None, 5, 3, None, None) == Status.INVALID_ARGUMENT


def test_estimates(lib):
    assert knn.estimate_build_bytes(1000, 3) > 0
    assert knn.estimate_build_bytes(10**6, 3) > knn.estimate_build_bytes(1000, 3)
    # whole 2 MiB pages: small sizes may round to the same figure, never to less
    assert knn.estimate_build_bytes(1000, 16) >= knn.estimate_build_bytes(1000, 3)
    assert knn.estimate_build_bytes(10**6, 16) > knn.estimate_build_bytes(10**6, 3)
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


# Values the C fields cannot hold were wrapped by ctypes (leaf_size = 2**32 + 1
# reached the library as 1, device = 2**32 - 1 as -1, device_memory_limit = -1
# as SIZE_MAX): each is refused naming its field, however it is set.
@pytest.mark.parametrize("field, value, error", [
    ("leaf_size", 2**32 + 1, OverflowError),
    ("leaf_size", 2**31, OverflowError),
    ("threads", 2**32 + 4, OverflowError),
    ("threads", -2**31 - 1, OverflowError),
    ("device", 2**32 - 1, OverflowError),
    ("backend", 2**32 + 2, OverflowError),
    ("structure", 2**33 + 1, OverflowError),
    ("device_memory_limit", -1, ValueError),
    ("device_memory_limit", 2**64, OverflowError),
])
def test_options_out_of_range_name_the_field(lib, field, value, error):
    with pytest.raises(error, match=field):
        knn.Options(**{field: value})
    opt = knn.Options()
    with pytest.raises(error, match=field):
        setattr(opt, field, value)
    assert getattr(opt, field) == getattr(knn.Options(), field)     # left as it was
    with pytest.raises(error, match=field):
        knn.options.resolve(None, **{field: value})
    with pytest.raises(error, match=field):
        knn.Index(random_points(1, 10), **{"backend": "openmp", field: value})


def test_options_limits_themselves_pass(lib):
    opt = knn.Options(leaf_size=2**31 - 1, threads=2**31 - 1, device=-1,
                      device_memory_limit=2**64 - 1)
    assert (opt.leaf_size, opt.threads, opt.device_memory_limit) == (2**31 - 1, 2**31 - 1,
                                                                     2**64 - 1)
    pts = random_points(2, 50)
    with knn.Index(pts, options=opt, backend="openmp") as index:    # threads capped inside
        want_d, want_i = oracle(pts, pts[:5], 3)
        got = index.query(pts[:5], 3, distances_first=True)
        np.testing.assert_array_equal(got.indices, want_i)


def test_index_query_k_beyond_int_names_the_index_call(lib):
    with knn.Index(random_points(3, 20), backend="openmp") as index:
        with pytest.raises(OverflowError, match="knn_index_query") as raised:
            index.query(random_points(4, 2), 2**31, distances_first=True)
        assert "classic" not in str(raised.value)
        with pytest.raises(OverflowError, match="knn_index_query_self"):
            index.query_self(2**31, distances_first=True)
        with pytest.raises(OverflowError, match="knn_index_radius"):
            index.radius(random_points(4, 2), 0.5, 2**31, distances_first=True)


# ---- the binding's marshalling (real engine underneath) -----------------------------------
@pytest.mark.parametrize("dim", [1, 3, 16])
def test_query_marshalling(lib, monkeypatch, dim):
    spy = SpyNative(lib)
    monkeypatch.setattr(_library, "_native", spy)
    pts = random_points(dim, 120, dim, "lattice")
    queries = random_points(dim + 5, 33, dim)
    opt = knn.Options(threads=3)
    with knn.Index(pts, options=opt, backend="openmp") as index:
        build = spy.named("knn_index_build")[-1]
        assert build[1:4] == (pts.ctypes.data, 120, dim)          # zero copy
        assert build[4].backend == knn.Backend.OPENMP and build[4].threads == 3
        assert opt.backend == knn.Backend.AUTO                     # caller's options untouched
        assert (index.n, index.dim) == (120, dim)
        want_d, want_i = oracle(pts, queries, 7)
        ind, d2 = index.query(queries, 7, distances_first=False)
        np.testing.assert_array_equal(ind, want_i)
        assert same_bits(d2, want_d)
        call = spy.named("knn_index_query")[-1]
        assert call[2] == queries.ctypes.data and call[7] == 0     # NULL options
        ind2, none = index.query(queries.astype(np.float64), 7, distances=False, options=opt, distances_first=False)
        call = spy.named("knn_index_query")[-1]
        assert none is None and call[6] == 0 and call[7] is opt    # NULL sq_distances
        np.testing.assert_array_equal(ind2, want_i)
        out_i = np.empty((33, 7), np.int32)
        out_d = np.empty((33, 7), np.float32)
        r_i, r_d = index.query(queries, 7, out_indices=out_i, out_distances=out_d, distances_first=False)
        assert r_i is out_i and r_d is out_d
        assert spy.named("knn_index_query")[-1][5:7] == (out_i.ctypes.data, out_d.ctypes.data)
        np.testing.assert_array_equal(out_i, want_i)
        calls = len(spy.calls)
        with pytest.raises(ValueError, match="shape"):
            index.query(np.zeros((5, dim + 1)), 3, distances_first=False)                 # caught before the call
        with pytest.raises(ValueError, match="dtype"):
            index.query(queries, 7, out_indices=np.empty((33, 7), np.int64), distances_first=False)
        assert len(spy.calls) == calls
    assert index.closed and spy.calls[-1][0] == "knn_index_free"
    with pytest.raises(ValueError, match="closed"):
        index.query(queries, 1, distances_first=False)
    index.close()                                                  # twice is fine


def test_self_and_radius_marshalling(lib, monkeypatch):
    spy = SpyNative(lib)
    monkeypatch.setattr(_library, "_native", spy)
    pts = random_points(3, 200, 2, "duplicates")
    index = knn.Index(pts)
    ind, _ = index.query_self(5, exclude_self=True, distances=False, distances_first=False)
    assert spy.calls[-1][2:4] == (5, 1) and spy.calls[-1][5] == 0
    np.testing.assert_array_equal(ind, self_oracle(pts, 5, True)[1])
    queries = random_points(4, 17, 2) * 0.01
    counting = index.radius(queries, 0.25, 0, distances_first=False)
    assert counting.indices is None and counting.sq_distances is None
    assert spy.calls[-1][5:8] == (0, 0, 0)                  # max_neighbors 0, NULL rows
    np.testing.assert_array_equal(counting.counts, radius_oracle(pts, queries, 0.25, 0)[2])
    counts = np.empty(17, np.int32)
    res = index.radius(queries, 0.25, 8, out_counts=counts, distances_first=False)
    assert res.counts is counts and spy.calls[-1][8] == counts.ctypes.data
    assert not spy.named("knn_index_free")
    del index, res
    gc.collect()
    frees = spy.named("knn_index_free")
    assert len(frees) == 1 and frees[0][1] != 0             # freed by the finaliser


def test_device_arrays_are_passed_through(lib, monkeypatch, has_device):
    if has_device:
        pytest.skip("host memory posing as device memory only works without a device")
    # A library without a usable device treats every pointer as host memory:
    # the real engine reads the FakeCudaArray's host buffer through the very
    # pointer the binding passed.
    spy = SpyNative(lib, device_count=1)
    monkeypatch.setattr(_library, "_native", spy)
    pts = random_points(6, 50, 3)
    with knn.Index(FakeCudaArray(pts)) as index:
        assert spy.named("knn_index_build")[-1][1] == pts.ctypes.data
        q = random_points(7, 9, 3)
        out_i = FakeCudaArray(np.zeros((9, 4), np.int32))
        out_d = FakeCudaArray(np.zeros((9, 4), np.float32))
        r_i, r_d = index.query(FakeCudaArray(q), 4, out_indices=out_i, out_distances=out_d, distances_first=False)
        assert r_i is out_i and r_d is out_d                     # the caller's objects back
        assert spy.calls[-1][2] == q.ctypes.data
        assert spy.calls[-1][5:7] == (out_i.host.ctypes.data, out_d.host.ctypes.data)
        want_d, want_i = oracle(pts, q, 4)
        np.testing.assert_array_equal(out_i.host, want_i)
        assert same_bits(out_d.host, want_d)
        counts = FakeCudaArray(np.zeros(9, np.int32))
        res = index.radius(q, 60.0, 0, out_counts=counts, distances_first=False)
        assert res.counts is counts
        np.testing.assert_array_equal(counts.host, radius_oracle(pts, q, 60.0, 0)[2])
        with pytest.raises(ValueError, match="dtype"):
            index.query(FakeCudaArray(q.astype(np.float64)), 4, distances_first=False)
        with pytest.raises(ValueError, match="C-contiguous"):
            index.query(FakeCudaArray(q, strides=(4, 36)), 4, distances_first=False)
        with pytest.raises(ValueError, match="read-only"):
            index.query(q, 4, out_indices=FakeCudaArray(np.zeros((9, 4), np.int32),
                                                        readonly=True), distances_first=False)


def test_device_arrays_refused_without_a_device(lib, has_device):
    if has_device:
        pytest.skip("a CUDA device is usable here")
    with pytest.raises(knn.NoDeviceError) as info:
        knn.Index(FakeCudaArray(random_points(8, 10)))
    assert info.value.status == Status.NO_DEVICE
    assert "__cuda_array_interface__" in info.value.message
