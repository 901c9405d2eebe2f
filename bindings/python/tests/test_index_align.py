"""Index.align (knn_index_align): a known rigid motion of a box's surface
samples, with noise and 5 % outliers, recovered against other samples of the
same surface (numpy oracle: the motion the test applied), point to plane
(normals by numpy from the index's own 10-NN) and point to point; the same
transform bit for bit on every backend present; bad arguments refused."""

from __future__ import annotations

import numpy as np
import pytest

import knn_gpgpu as knn
from test_mesh_align import BOX_F, BOX_V, gap, moved, rigid, surface_samples


def pca_normals(index, points):
    """The smallest principal direction of each point's 10 nearest (numpy)."""
    _, nearest = index.query(points, 10)
    around = points[nearest] - points[nearest].mean(axis=1, keepdims=True)
    _, vectors = np.linalg.eigh(np.einsum("nki,nkj->nij", around, around))
    return np.ascontiguousarray(vectors[:, :, 0])


@pytest.mark.parametrize("planes", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("backend", ["openmp", "cuda"])
def test_recovers_a_known_motion(has_device, dtype, backend, planes):
    if backend == "cuda" and not has_device:
        pytest.skip("no CUDA device")
    rng = np.random.default_rng(3)
    target = surface_samples(BOX_V, BOX_F, 8000, 0, 0, rng).astype(dtype)
    truth = rigid([1, 2, 3], 0.12, [0.05, -0.04, 0.03])
    scan = moved(surface_samples(BOX_V, BOX_F, 1500, 0.002, 0.05, rng), np.linalg.inv(truth))
    with knn.Index(target, backend=backend) as index:
        normals = pca_normals(index, target).astype(dtype) if planes else None
        fit = index.align(scan.astype(dtype), normals, max_correspondence=0.3,
                          kept_fraction=0.9, max_iterations=100)
    assert fit.converged and fit.n_degenerate == 0
    angle, shift = gap(fit.transform, truth, np.array([1.0, 0.5, 0.3]))
    assert angle < 5e-3 and shift < 5e-3
    assert fit.transform.shape == (4, 4) and fit.transform.dtype == np.float64
    assert np.array_equal(fit.transform[3], [0, 0, 0, 1])
    assert 0.9 * 1500 * 0.9 < fit.kept <= 1500 and fit.rms < 0.03


def test_every_backend_gives_the_same_bits(has_device):
    if not has_device:
        pytest.skip("no CUDA device")
    rng = np.random.default_rng(8)
    target = surface_samples(BOX_V, BOX_F, 6000, 0, 0, rng).astype(np.float32)
    scan = moved(surface_samples(BOX_V, BOX_F, 2000, 0.003, 0.05, rng),
                 rigid([0, 1, 1], 0.08, [0.02, 0.01, 0.0])).astype(np.float32)
    for planes in (True, False):
        fits = []
        for backend in ("openmp", "cuda"):
            with knn.Index(target, backend=backend) as index:
                normals = pca_normals(index, target) if planes else None
                fits.append(index.align(scan, normals, max_correspondence=0.3,
                                        kept_fraction=0.9))
        assert fits[0].transform.tobytes() == fits[1].transform.tobytes()
        assert fits[0][1:] == fits[1][1:]


def test_refusals(lib):
    rng = np.random.default_rng(1)
    target = surface_samples(BOX_V, BOX_F, 300, 0, 0, rng)
    scan = surface_samples(BOX_V, BOX_F, 100, 0, 0, rng)
    with knn.Index(target, backend="openmp") as index:
        for bad in ({"max_correspondence": 0}, {"max_iterations": 0}, {"kept_fraction": 1.5},
                    {"initial": np.eye(3)}):
            with pytest.raises(ValueError):
                index.align(scan, **bad)
        with pytest.raises(ValueError, match="300 rows"):
            index.align(scan, np.ones((299, 3)))
        with pytest.raises(knn.NonfiniteInputError):
            index.align(np.r_[scan, [[np.nan, 0, 0]]])
        assert index.align(scan, initial=np.eye(4)).converged
    with knn.Index(target[:, :2].copy(), backend="openmp") as flat:
        with pytest.raises(knn.InvalidArgumentError, match="dim 2"):
            flat.align(scan)
