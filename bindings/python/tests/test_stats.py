"""Neighbourhood statistics (knn_gpgpu_stats.h) against a NumPy oracle: the
brute-force neighbourhoods of conftest's oracles (the contract's distances,
ties by index), their PCA by numpy.linalg.eigh in float64, the scores,
thresholds and counts by the header's definitions written again here."""

from __future__ import annotations

import math

import numpy as np
import pytest

import knn_gpgpu as knn

from conftest import oracle, oracle64

DTYPES = (np.float32, np.float64)
VIEWPOINT = (0.3, -0.2, 5.0)


# ---- clouds ----------------------------------------------------------------------------

def sphere(seed: int, n: int, radius: float = 2.0, centre=(0.0, 0.0, 0.0)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    d = rng.normal(size=(n, 3))
    return radius * d / np.linalg.norm(d, axis=1, keepdims=True) + np.asarray(centre)


def plane(seed: int, n: int) -> np.ndarray:
    """The plane through the origin with normal (1, 2, 2) / 3."""
    rng = np.random.default_rng(seed)
    u = np.array([2.0, -1.0, 0.0]) / math.sqrt(5.0)
    v = np.cross(np.array([1.0, 2.0, 2.0]) / 3.0, u)
    a, b = rng.uniform(-1, 1, size=(2, n))
    return a[:, None] * u + b[:, None] * v


def cylinder(seed: int, n: int, radius: float = 1.0) -> np.ndarray:
    """The side of a cylinder about the z axis, height 4."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 2 * math.pi, n)
    return np.stack([radius * np.cos(t), radius * np.sin(t), rng.uniform(-2, 2, n)], axis=1)


def neighbourhoods(points: np.ndarray, k: int) -> tuple:
    """(sq_distances, indices) of the k nearest of each point in the points' dtype."""
    if points.dtype == np.float64:
        return oracle64(points, points, k)
    return oracle(points, points, k)


def pca(points: np.ndarray, k: int) -> tuple:
    """Per point: eigenvalues (ascending) and eigenvectors of the scatter of its
    k nearest (itself included), float64, numpy.linalg.eigh."""
    _, ind = neighbourhoods(points, k)
    nb = points.astype(np.float64)[ind[:, :min(k, len(points))]]
    centred = nb - nb.mean(axis=1, keepdims=True)
    scatter = np.einsum("nki,nkj->nij", centred, centred)
    return np.linalg.eigh(scatter)


def angles(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle between the lines of a and b (sign ignored), radians."""
    dots = np.abs(np.sum(a.astype(np.float64) * b, axis=1))
    cross = np.linalg.norm(np.cross(a.astype(np.float64), b), axis=1)
    return np.arctan2(cross, dots)


# ---- normals ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ["sphere", "plane", "cylinder", "noisy"])
def test_normals_match_the_eigh_oracle(lib, dtype, shape):
    rng = np.random.default_rng(7)
    pts = {"sphere": lambda: sphere(1, 700), "plane": lambda: plane(2, 700),
           "cylinder": lambda: cylinder(3, 700),
           "noisy": lambda: sphere(4, 700) + rng.normal(0, 0.01, (700, 3))}[shape]()
    pts = pts.astype(dtype)
    k = 12
    with knn.Index(pts, backend="openmp") as index:
        normals, curvature = index.normals(k, viewpoint=VIEWPOINT)
    assert normals.dtype == dtype and normals.shape == (700, 3)
    assert curvature.dtype == dtype and curvature.shape == (700,)
    evals, evecs = pca(pts, k)
    gap_ok = (evals[:, 1] - evals[:, 0]) >= 1e-6 * evals.sum(axis=1)
    assert gap_ok.mean() > 0.95
    err = angles(normals, evecs[:, :, 0])
    assert err[gap_ok].max() < 1e-5, err[gap_ok].max()
    np.testing.assert_allclose(np.linalg.norm(normals.astype(np.float64), axis=1), 1.0,
                               atol=1e-6 if dtype == np.float32 else 1e-14)
    want_curvature = evals[:, 0] / evals.sum(axis=1)
    np.testing.assert_allclose(curvature, want_curvature,
                               atol=1e-7 if dtype == np.float32 else 1e-12)
    # Towards the viewpoint: dot(n, v - p) >= 0 everywhere (up to the output's rounding).
    towards = np.sum(normals.astype(np.float64) * (np.asarray(VIEWPOINT) - pts), axis=1)
    assert towards.min() >= (-1e-6 if dtype == np.float32 else -1e-14)
    assert np.mean(towards > 0) > 0.9
    if shape in ("sphere", "plane", "cylinder"):
        assert np.abs(curvature).max() < (0.05 if shape != "plane" else 1e-6)  # a surface, not a cloud


@pytest.mark.parametrize("dtype", DTYPES)
def test_normals_orientation_without_a_viewpoint(lib, dtype):
    # A closed sphere: every normal outward (the topmost point's normal is +z).
    pts = sphere(11, 900, centre=(1.0, -2.0, 0.5)).astype(dtype)
    normals, _ = knn.normals(pts, 10, backend="openmp")
    radial = pts.astype(np.float64) - np.array([1.0, -2.0, 0.5])
    assert np.all(np.sum(normals * radial, axis=1) > 0)
    # A plane: every normal (1, 2, 2) / 3, whose z is positive.
    normals, curvature = knn.normals(plane(12, 500).astype(dtype), 8, backend="openmp")
    assert np.all(normals @ np.array([1.0, 2.0, 2.0]) / 3.0 > 1 - 1e-6)
    # A cylinder's side: one sign of the radial component all round.
    pts = cylinder(13, 800).astype(dtype)
    normals, _ = knn.normals(pts, 10, backend="openmp")
    radial = np.sum(normals[:, :2].astype(np.float64) * pts[:, :2], axis=1)
    assert np.all(radial > 0) or np.all(radial < 0)
    # Two spheres far apart (two parts of the graph): each decided alone, outward.
    a = sphere(14, 400, 1.0, (0.0, 0.0, 0.0))
    b = sphere(15, 400, 1.0, (50.0, 0.0, 0.0))
    pts = np.concatenate([a, b]).astype(dtype)
    normals, _ = knn.normals(pts, 8, backend="openmp")
    centres = np.where(np.arange(800)[:, None] < 400, 0.0, np.array([50.0, 0.0, 0.0]))
    assert np.all(np.sum(normals * (pts.astype(np.float64) - centres), axis=1) > 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_normals_of_degenerate_neighbourhoods(lib, dtype):
    # All points equal: (0, 0, 1), curvature 0; below a viewpoint under them: negated.
    same = np.ones((20, 3), dtype=dtype)
    with knn.Index(same, backend="openmp") as index:
        normals, curvature = index.normals(5)
        np.testing.assert_array_equal(normals, np.tile([0.0, 0.0, 1.0], (20, 1)))
        np.testing.assert_array_equal(curvature, 0)
        normals, _ = index.normals(5, viewpoint=(1.0, 1.0, -3.0))
        np.testing.assert_array_equal(normals, np.tile([0.0, 0.0, -1.0], (20, 1)))
    # One point, k = 1.
    normals, curvature = knn.normals(np.array([[3.0, 4.0, 5.0]], dtype=dtype), 1)
    np.testing.assert_array_equal(normals, [[0.0, 0.0, 1.0]])
    np.testing.assert_array_equal(curvature, [0.0])
    # Collinear points: unit normals perpendicular to the line, curvature 0 (rounding).
    t = np.linspace(-1, 1, 50)
    direction = np.array([1.0, 2.0, -2.0]) / 3.0
    line = (t[:, None] * direction).astype(dtype)
    normals, curvature = knn.normals(line, 6)
    assert not np.isnan(normals).any() and not np.isnan(curvature).any()
    np.testing.assert_allclose(np.linalg.norm(normals.astype(np.float64), axis=1), 1.0, atol=1e-6)
    assert np.abs(normals @ direction).max() < 1e-5
    assert np.abs(curvature).max() < 1e-6
    # k larger than n takes every point.
    pts = sphere(16, 30).astype(dtype)
    np.testing.assert_array_equal(knn.normals(pts, 1000).normals, knn.normals(pts, 30).normals)


def test_normals_arguments(lib):
    with knn.Index(sphere(17, 50).astype(np.float32)) as index:
        normals, curvature = index.normals(5, curvature=False)
        assert curvature is None and normals.shape == (50, 3)
        out = np.empty((50, 3), np.float32)
        assert index.normals(5, out_normals=out).normals is out
        with pytest.raises(ValueError, match="viewpoint"):
            index.normals(5, viewpoint=(1.0, 2.0))
        with pytest.raises(knn.InvalidArgumentError):
            index.normals(0)
        with pytest.raises(knn.InvalidArgumentError):
            index.normals(5, viewpoint=(math.nan, 0.0, 0.0))
        with pytest.raises(ValueError, match="dtype"):
            index.normals(5, out_normals=np.empty((50, 3), np.float64))
    with knn.Index(np.zeros((10, 2), np.float32)) as flat:
        with pytest.raises(knn.InvalidArgumentError):
            flat.normals(3)
    with knn.Index(np.zeros((0, 3), np.float32)) as empty:
        normals, curvature = empty.normals(4)
        assert normals.shape == (0, 3) and curvature.shape == (0,)


# ---- outliers and densities --------------------------------------------------------------

def scores_oracle(points: np.ndarray, k: int) -> np.ndarray:
    """Mean distance to the k nearest others: entries 2 .. k + 1 of each list."""
    sq, _ = neighbourhoods(points, k + 1)
    m = min(k, len(points) - 1)
    if m == 0:
        return np.zeros(len(points))
    return np.sqrt(sq[:, 1:m + 1].astype(np.float64)).sum(axis=1) / m


def noisy_with_outliers(seed: int, n: int, n_out: int) -> tuple:
    """A noisy sphere and n_out points planted far from it (their indices)."""
    rng = np.random.default_rng(seed)
    surface = sphere(seed, n) + rng.normal(0, 0.005, (n, 3))
    spray = rng.uniform(-6, 6, (n_out, 3))
    spray *= (3.5 / np.linalg.norm(spray, axis=1, keepdims=True)) * rng.uniform(1, 1.5, (n_out, 1))
    pts = np.concatenate([surface, spray])
    planted = np.arange(n, n + n_out)
    order = rng.permutation(len(pts))
    return pts[order], np.flatnonzero(np.isin(order, planted))


@pytest.mark.parametrize("dtype", DTYPES)
def test_outlier_scores_and_statistical_inliers(lib, dtype):
    pts, planted = noisy_with_outliers(21, 1500, 25)
    pts = pts.astype(dtype)
    k = 8
    with knn.Index(pts, backend="openmp") as index:
        scores = index.outlier_scores(k)
        assert scores.dtype == dtype
        np.testing.assert_allclose(scores, scores_oracle(pts, k),
                                   rtol=1e-6 if dtype == np.float32 else 1e-13)
        for ratio in (2.0, 1.0, 0.0, -0.5):
            kept = index.statistical_inliers(k, std_ratio=ratio)
            # The header's rule on the scores as written: sums in index order.
            s = scores.astype(np.float64)
            mean = np.cumsum(s)[-1] / len(s)
            std = math.sqrt(np.cumsum((s - mean) ** 2)[-1] / (len(s) - 1))
            want = np.flatnonzero(s <= mean + ratio * std)
            assert kept.n_kept == len(want)
            assert kept.ids.dtype == np.int32
            np.testing.assert_array_equal(kept.ids, want)
        kept = index.statistical_inliers(k, 2.0)
        assert not np.isin(planted, kept.ids).any(), "a planted outlier was kept"
        assert kept.n_kept > 1400
        out = np.empty(len(pts), np.int32)
        res = index.statistical_inliers(k, 2.0, out=out)
        np.testing.assert_array_equal(out[:res.n_kept], kept.ids)
        assert np.all(out[res.n_kept:] == -1)
        with pytest.raises(knn.InvalidArgumentError):
            index.statistical_inliers(k, math.inf)


@pytest.mark.parametrize("dtype", DTYPES)
def test_kth_distances_neighbor_counts_and_radius_inliers(lib, dtype):
    pts, planted = noisy_with_outliers(31, 800, 12)
    pts = np.concatenate([pts, pts[:5]]).astype(dtype)        # exact duplicates count
    n = len(pts)
    with knn.Index(pts, backend="openmp") as index:
        for k in (1, 4, 9):
            sq, _ = neighbourhoods(pts, k + 1)
            np.testing.assert_allclose(index.kth_distances(k), np.sqrt(sq[:, k].astype(np.float64)),
                                       rtol=1e-6 if dtype == np.float32 else 1e-15)
        assert np.all(np.isinf(index.kth_distances(n)))
        radius = 0.2
        d = pts[:, None, :].astype(dtype) - pts[None, :, :]
        sq = (d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1]) + d[..., 2] * d[..., 2]
        limit = dtype(radius) * dtype(radius)
        want = np.sum(sq <= limit, axis=1) - 1
        counts = index.neighbor_counts(radius)
        assert counts.dtype == np.int64
        np.testing.assert_array_equal(counts, want)
        assert counts[:5].min() >= 1 and np.all(counts[-5:] >= 1)
        for minimum in (0, 1, 5):
            kept = index.radius_inliers(radius, minimum)
            np.testing.assert_array_equal(kept.ids, np.flatnonzero(want >= minimum))
        assert index.radius_inliers(radius, 0).n_kept == n
        assert not np.isin(planted, index.radius_inliers(radius, 3).ids).any()
        with pytest.raises(knn.InvalidArgumentError):
            index.neighbor_counts(-1.0)
        with pytest.raises(knn.InvalidArgumentError):
            index.radius_inliers(radius, -1)


def test_kdtree_and_module_level_forms(lib):
    pts, _ = noisy_with_outliers(41, 600, 6)
    tree = knn.KDTree(pts, backend="openmp")                  # float64 data: a float64 index
    with knn.Index(pts, backend="openmp") as index:
        for a, b in zip(tree.normals(9, (0, 0, 0)), index.normals(9, (0, 0, 0))):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(tree.outlier_scores(5), index.outlier_scores(5))
        np.testing.assert_array_equal(knn.outlier_scores(pts, 5), index.outlier_scores(5))
        np.testing.assert_array_equal(tree.kth_distances(3), knn.kth_distances(pts, 3))
        np.testing.assert_array_equal(tree.neighbor_counts(0.3), knn.neighbor_counts(pts, 0.3))
        np.testing.assert_array_equal(tree.statistical_inliers(5).ids,
                                      knn.statistical_inliers(pts, 5).ids)
        np.testing.assert_array_equal(tree.radius_inliers(0.3, 2).ids,
                                      knn.radius_inliers(pts, 0.3, 2).ids)
        np.testing.assert_array_equal(knn.normals(pts, 9).normals, index.normals(9).normals)
    tree.close()


def test_estimate_stats_bytes(lib):
    small = knn.estimate_stats_bytes(1000, 16)
    assert small > 0
    assert knn.estimate_stats_bytes(10 ** 6, 16) > small
    assert knn.estimate_stats_bytes(10 ** 6, 32) > knn.estimate_stats_bytes(10 ** 6, 16)
    assert knn.estimate_stats_bytes(1000, 16, dtype=np.float64) >= small
    assert knn.estimate_stats_bytes(1000, 0) == 0
    with pytest.raises(TypeError):
        knn.estimate_stats_bytes(1000, 16, dtype=np.int32)


def test_progress_and_cancel(lib):
    pts = sphere(51, 3000).astype(np.float32)
    with knn.Index(pts, backend="openmp") as index:
        progress = knn.Progress()
        with progress:
            index.outlier_scores(8)
            snap = progress.snapshot()
        assert snap.stage == knn.ProgressStage.QUERY
        assert snap.total == 3000 and snap.done == 3000
        flag = knn.CancelFlag()
        flag.cancel()
        with flag:
            with pytest.raises(knn.CancelledError):
                index.normals(8)
        flag.reset()
        with flag:
            assert index.normals(8).normals.shape == (3000, 3)


# ---- device arrays -----------------------------------------------------------------------

def test_device_arrays_answer_as_host_arrays(lib, has_device):
    """torch CUDA tensors in and out: the OpenMP index's results, bit for bit."""
    if not has_device:
        pytest.skip("no CUDA device")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    pts, _ = noisy_with_outliers(61, 4000, 40)
    for dtype, tdtype in ((np.float32, torch.float32), (np.float64, torch.float64)):
        host_pts = pts.astype(dtype)
        with knn.Index(host_pts, backend="openmp") as cpu, \
                knn.Index(torch.from_numpy(host_pts).cuda(), backend="cuda") as gpu:
            want = cpu.normals(16, (0, 0, 0))
            out_n = torch.empty((4000, 3), dtype=tdtype, device="cuda")
            out_c = torch.empty(4000, dtype=tdtype, device="cuda")
            got = gpu.normals(16, (0, 0, 0), out_normals=out_n, out_curvature=out_c)
            torch.cuda.synchronize()
            assert got.normals is out_n and got.curvature is out_c
            np.testing.assert_array_equal(out_n.cpu().numpy(), want.normals)
            np.testing.assert_array_equal(out_c.cpu().numpy(), want.curvature)
            np.testing.assert_array_equal(gpu.normals(16).normals, cpu.normals(16).normals)
            kept = torch.empty(4000, dtype=torch.int32, device="cuda")
            res = gpu.statistical_inliers(16, 2.0, out=kept)
            torch.cuda.synchronize()
            ref = cpu.statistical_inliers(16, 2.0)
            assert res.n_kept == ref.n_kept
            np.testing.assert_array_equal(kept.cpu().numpy()[:res.n_kept], ref.ids)
            np.testing.assert_array_equal(gpu.outlier_scores(16), cpu.outlier_scores(16))
            np.testing.assert_array_equal(gpu.neighbor_counts(0.1), cpu.neighbor_counts(0.1))
            # a KDTree over device data answers on the device, in torch tensors
            tree = knn.KDTree(torch.from_numpy(host_pts).cuda(), backend="cuda")
            scores = tree.outlier_scores(16)
            assert isinstance(scores, torch.Tensor) and scores.is_cuda
            np.testing.assert_array_equal(scores.cpu().numpy(), cpu.outlier_scores(16))
            tree.close()


def test_device_outputs_without_a_device(lib, has_device):
    if has_device:
        pytest.skip("a CUDA device is usable here")

    class FakeDeviceOutput:
        __cuda_array_interface__ = {"shape": (10,), "typestr": "<f4", "data": (1 << 40, False),
                                    "version": 3, "strides": None}

    with knn.Index(sphere(71, 10).astype(np.float32)) as index:
        with pytest.raises(knn.NoDeviceError):
            index.outlier_scores(3, out=FakeDeviceOutput())
        with pytest.raises(ValueError, match="all host or all device"):
            index.normals(3, out_curvature=FakeDeviceOutput())
