"""Mesh.align (knn_mesh_align_ex): a known rigid motion of a box's surface
samples, with noise and 5 % outliers, recovered (numpy oracle: the motion the
test applied); a flat plate's unobserved directions reported; the same
transform bit for bit on every backend present; bad arguments refused."""

from __future__ import annotations

import math

import numpy as np
import pytest

import knn_gpgpu as knn

# A box [0, 2] x [0, 1] x [0, 0.6], two triangles a face, facing out.
BOX_V = np.array([[x, y, z] for x in (0.0, 2.0) for y in (0.0, 1.0) for z in (0.0, 0.6)])
BOX_F = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                  [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]], np.int32)


def rotation(axis, angle):
    k = np.asarray(axis, float) / np.linalg.norm(axis)
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(angle) * kx + (1 - math.cos(angle)) * kx @ kx


def rigid(axis, angle, shift):
    t = np.eye(4)
    t[:3, :3] = rotation(axis, angle)
    t[:3, 3] = shift
    return t


def surface_samples(vertices, faces, n, noise, outliers, rng):
    a, b, c = (vertices[faces[:, k]] for k in range(3))
    area = 0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=1)
    tri = rng.choice(len(faces), size=n, p=area / area.sum())
    r1, r2 = np.sqrt(rng.random(n))[:, None], rng.random(n)[:, None]
    pts = (1 - r1) * a[tri] + r1 * (1 - r2) * b[tri] + r1 * r2 * c[tri]
    pts += rng.normal(0, noise, pts.shape) if noise else 0
    wild = rng.random(n) < outliers
    lo, hi = vertices.min(0) - 0.5, vertices.max(0) + 0.5
    pts[wild] = lo + rng.random((wild.sum(), 3)) * (hi - lo)
    return pts


def moved(points, t):
    return points @ t[:3, :3].T + t[:3, 3]


def gap(a, b, at):
    angle = math.acos(min(1.0, max(-1.0, (np.trace(a[:3, :3] @ b[:3, :3].T) - 1) / 2)))
    return angle, float(np.linalg.norm(moved(at[None], a) - moved(at[None], b)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("backend", ["openmp", "cuda"])
def test_recovers_a_known_motion(has_device, dtype, backend):
    if backend == "cuda" and not has_device:
        pytest.skip("no CUDA device")
    rng = np.random.default_rng(3)
    truth = rigid([1, 2, 3], 0.12, [0.05, -0.04, 0.03])
    scan = moved(surface_samples(BOX_V, BOX_F, 3000, 0.002, 0.05, rng), np.linalg.inv(truth))
    with knn.Mesh(BOX_V, BOX_F, dtype=dtype, backend=backend) as box:
        fit = box.align(scan.astype(dtype), max_correspondence=0.3, kept_fraction=0.9)
    assert fit.converged
    assert fit.iterations >= 2 and fit.n_degenerate == 0
    angle, shift = gap(fit.transform, truth, np.array([1.0, 0.5, 0.3]))
    assert angle < 2e-3 and shift < 2e-3
    assert fit.transform.shape == (4, 4) and fit.transform.dtype == np.float64
    np.testing.assert_allclose(fit.transform[:3, :3] @ fit.transform[:3, :3].T, np.eye(3),
                               atol=1e-12)
    assert np.array_equal(fit.transform[3], [0, 0, 0, 1])
    assert 0.9 * 3000 * 0.9 < fit.kept <= 3000 and fit.rms < 0.01


def test_flat_plate_reports_its_unobserved_directions(lib):
    plate_v = np.array([[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]], float)
    plate_f = np.array([[0, 1, 2], [0, 2, 3]], np.int32)
    rng = np.random.default_rng(5)
    flat = np.c_[rng.uniform(-0.8, 0.8, (400, 2)), np.zeros(400)]
    scan = moved(flat, np.linalg.inv(rigid([1, 0.3, 0], 0.05, [0.2, -0.1, 0.04])))
    with knn.Mesh(plate_v, plate_f, backend="openmp") as plate:
        fit = plate.align(scan)
    assert fit.converged and fit.n_degenerate == 3
    assert fit.degenerate_directions == 4 | 8 | 16  # rotation z, translations x and y
    assert np.abs(moved(scan, fit.transform)[:, 2]).max() < 1e-9


def test_every_backend_gives_the_same_bits(has_device):
    if not has_device:
        pytest.skip("no CUDA device")
    rng = np.random.default_rng(8)
    scan = moved(surface_samples(BOX_V, BOX_F, 5000, 0.003, 0.05, rng),
                 rigid([0, 1, 1], 0.08, [0.02, 0.01, 0.0]))
    fits = []
    for backend in ("openmp", "cuda"):
        with knn.Mesh(BOX_V, BOX_F, dtype=np.float32, backend=backend) as box:
            fits.append(box.align(scan.astype(np.float32), max_correspondence=0.3,
                                  kept_fraction=0.9))
    assert fits[0].transform.tobytes() == fits[1].transform.tobytes()
    assert fits[0][1:] == fits[1][1:]


def test_refusals(lib):
    scan = surface_samples(BOX_V, BOX_F, 100, 0, 0, np.random.default_rng(1))
    with knn.Mesh(BOX_V, BOX_F, backend="openmp") as box:
        for bad in ({"max_correspondence": 0}, {"max_correspondence": -1.0},
                    {"max_iterations": 0}, {"kept_fraction": 1.5},
                    {"tolerance_rotation": -1e-3}, {"initial": np.eye(3)}):
            with pytest.raises(ValueError):
                box.align(scan, **bad)
        scaled = np.eye(4)
        scaled[:3, :3] *= 1.1
        with pytest.raises(knn.InvalidArgumentError, match="not a rotation"):
            box.align(scan, initial=scaled)
        with pytest.raises(knn.NonfiniteInputError):
            box.align(np.r_[scan, [[np.nan, 0, 0]]])
        # A start the fit can take: the identity and the simple defaults.
        assert box.align(scan, initial=np.eye(4)).converged
