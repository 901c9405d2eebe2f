"""knn_gpgpu.Mesh against an independent float64 numpy oracle.

The oracle (below) computes the closest point of every triangle to every
point by the textbook regions: the projection onto the plane when it lies in
the triangle, else the nearest clamped point of the three edges. It is
vectorised over (points x triangles) in float64 and shares no code with the
library. Signs are checked on closed meshes (an icosphere, a cube, the same
flipped) and an open one (a box without its lid), the report against numpy
statistics with the header's nearest-rank rule.
"""

from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import pytest

import knn_gpgpu as knn

# ---- meshes ------------------------------------------------------------------------


def icosphere(level: int):
    """Unit icosphere, outward (counter-clockwise seen from outside)."""
    t = (1.0 + 5.0 ** 0.5) / 2.0
    v = [[-1, t, 0], [1, t, 0], [-1, -t, 0], [1, -t, 0], [0, -1, t], [0, 1, t], [0, -1, -t],
         [0, 1, -t], [t, 0, -1], [t, 0, 1], [-t, 0, -1], [-t, 0, 1]]
    f = [[0, 11, 5], [0, 5, 1], [0, 1, 7], [0, 7, 10], [0, 10, 11], [1, 5, 9], [5, 11, 4],
         [11, 10, 2], [10, 7, 6], [7, 1, 8], [3, 9, 4], [3, 4, 2], [3, 2, 6], [3, 6, 8],
         [3, 8, 9], [4, 9, 5], [2, 4, 11], [6, 2, 10], [8, 6, 7], [9, 8, 1]]
    verts = [np.array(p, dtype=np.float64) / np.linalg.norm(p) for p in v]
    for _ in range(level):
        cache = {}

        def mid(i, j):
            key = (min(i, j), max(i, j))
            if key not in cache:
                p = verts[i] + verts[j]
                verts.append(p / np.linalg.norm(p))
                cache[key] = len(verts) - 1
            return cache[key]

        nf = []
        for a, b, c in f:
            ab, bc, ca = mid(a, b), mid(b, c), mid(c, a)
            nf += [[a, ab, ca], [b, bc, ab], [c, ca, bc], [ab, bc, ca]]
        f = nf
    return np.array(verts), np.array(f, dtype=np.int32)


def cube():
    """The cube [-1, 1]^3, 12 triangles, outward."""
    v = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], np.float64)
    quads = [[0, 1, 3, 2], [4, 6, 7, 5], [0, 4, 5, 1], [2, 3, 7, 6], [0, 2, 6, 4], [1, 5, 7, 3]]
    f = []
    for a, b, c, d in quads:
        f += [[a, b, c], [a, c, d]]
    return v, np.array(f, dtype=np.int32)


def outward(v, f):
    """True when every triangle's normal points away from the origin."""
    n = np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]])
    return bool(np.all(np.einsum("ij,ij->i", n, v[f].mean(axis=1)) > 0))


def open_box():
    """The cube without its lid (the two triangles of z = 1)."""
    v, f = cube()
    lid = np.all(v[f][:, :, 2] == 1, axis=1)
    return v, f[~lid]


def with_degenerates(v, f):
    """Adds a needle, a point triangle and a repeated-vertex triangle."""
    extra_v = np.array([[3, 0, 0], [4, 0, 0], [5, 0, 0], [0, 3, 3]], np.float64)
    base = v.shape[0]
    extra_f = np.array([[base, base + 1, base + 2], [base + 3, base + 3, base + 3],
                        [base, base, base + 1]], np.int32)
    return np.vstack([v, extra_v]), np.vstack([f, extra_f])


# ---- the oracle ----------------------------------------------------------------------


def oracle_all(points, v, f):
    """(m, t) squared distances, (m, t, 3) closest points, in float64."""
    p = np.asarray(points, np.float64)[:, None, :]
    a, b, c = (np.asarray(v, np.float64)[f[:, i]][None, :, :] for i in range(3))
    best_d = np.full(p.shape[0:1] + a.shape[1:2], np.inf)
    best_p = np.zeros(best_d.shape + (3,))
    for p0, p1 in ((a, b), (b, c), (c, a)):
        d = p1 - p0
        length2 = np.sum(d * d, axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            t = np.where(length2 > 0, np.sum((p - p0) * d, axis=-1) / length2, 0.0)
        t = np.clip(t, 0.0, 1.0)
        q = p0 + t[..., None] * d
        dist = np.sum((p - q) ** 2, axis=-1)
        better = dist < best_d
        best_d = np.where(better, dist, best_d)
        best_p = np.where(better[..., None], q, best_p)
    n = np.cross(b - a, c - a)
    nn = np.sum(n * n, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.sum((p - a) * n, axis=-1) / nn
        proj = p - s[..., None] * n
        inside = nn > 0
        for u, w in ((a, b), (b, c), (c, a)):
            inside = inside & (np.sum(np.cross(w - u, proj - u) * n, axis=-1) >= 0)
        face_d = np.sum((p - proj) ** 2, axis=-1)
    use_face = inside & (face_d < best_d)
    best_d = np.where(use_face, face_d, best_d)
    best_p = np.where(use_face[..., None], proj, best_p)
    return best_d, best_p


def oracle_closest(points, v, f):
    """Least squared distance per point and the set of triangles attaining it."""
    d, p = oracle_all(points, v, f)
    return d.min(axis=1), d, p


def scan(seed, n, scale=2.0):
    return np.random.default_rng(seed).uniform(-scale, scale, size=(n, 3))


# ---- closest -------------------------------------------------------------------------

MESHES = {"icosphere": lambda: icosphere(2), "cube": cube, "open_box": open_box,
          "degenerate": lambda: with_degenerates(*cube())}


@pytest.mark.parametrize("name", sorted(MESHES))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("backend", ["openmp", "cuda"])
def test_closest_matches_float64_oracle(lib, has_device, name, dtype, backend):
    if backend == "cuda" and not has_device:
        pytest.skip("no CUDA device")
    v, f = MESHES[name]()
    v = v.astype(dtype)
    pts = scan(7, 300).astype(dtype)
    # points exactly on vertices and edge midpoints: distance 0
    some = f[np.arange(8) % len(f)]
    pts[:8] = v[some[:, 0]]
    pts[8:16] = (v[some[:, 0]] + v[some[:, 1]]) / dtype(2)
    best, all_d, all_p = oracle_closest(pts, v.astype(np.float64), f)
    with knn.Mesh(v, f, backend=backend) as mesh:
        assert mesh.dtype == np.dtype(dtype) and mesh.backend == knn.Backend[backend.upper()]
        sq, ids, cl = mesh.closest(pts)
        _, ids2, cl2, bc = mesh.closest_barycentric(pts)
    assert sq.dtype == dtype and cl.dtype == dtype and ids.dtype == np.int32
    assert sq.shape == ids.shape == (300,) and cl.shape == bc.shape == (300, 3)
    np.testing.assert_array_equal(ids, ids2)
    np.testing.assert_array_equal(cl, cl2)
    rtol, atol = (1e-12, 1e-14) if dtype == np.float64 else (2e-5, 1e-6)
    np.testing.assert_allclose(sq, best, rtol=rtol, atol=atol)
    rows = np.arange(300)
    # the reported triangle is a closest one, and the point is its closest point
    np.testing.assert_allclose(all_d[rows, ids], best, rtol=rtol, atol=atol)
    np.testing.assert_allclose(cl, all_p[rows, ids], rtol=0, atol=1e-12 if dtype == np.float64
                               else 1e-5)
    # ties go to the smaller id: no smaller id is strictly as close (within rounding)
    for i in range(300):
        closer = np.nonzero(all_d[i, :ids[i]] < best[i] - (1e-12 if dtype == np.float64 else
                                                              1e-5) * (1 + best[i]))[0]
        assert closer.size == 0, (i, ids[i], closer)
    # the squared distance is that to the reported closest point
    np.testing.assert_allclose(sq, np.sum((pts.astype(np.float64) - cl) ** 2, axis=1),
                               rtol=rtol, atol=atol)
    # barycentric weights rebuild the closest point and sum to one
    corners = v.astype(np.float64)[f[ids]]
    np.testing.assert_allclose(np.einsum("ij,ijk->ik", bc.astype(np.float64), corners), cl,
                               atol=1e-12 if dtype == np.float64 else 2e-5)
    np.testing.assert_allclose(bc.sum(axis=1), 1.0, atol=1e-12 if dtype == np.float64 else 1e-6)
    assert np.all(bc >= 0)
    assert np.all(sq[:16] <= (1e-24 if dtype == np.float64 else 1e-10))


def test_max_distance_and_open3d_dict(lib):
    v, f = icosphere(1)
    pts = scan(3, 200, scale=3.0)
    best, _, _ = oracle_closest(pts, v, f)
    limit = 0.75
    with knn.Mesh(v, f) as mesh:
        sq, ids, cl = mesh.closest(pts, max_distance=limit)
        full = mesh.compute_closest_points(pts)
        near = mesh.compute_closest_points(pts, limit)
        sd = mesh.signed_distance(pts, max_distance=limit)
        _, _, _, bc = mesh.closest_barycentric(pts)
    beyond = best > limit * limit
    assert 0 < beyond.sum() < 200
    np.testing.assert_array_equal(ids < 0, beyond)
    assert np.all(np.isinf(sq[beyond])) and np.all(np.isnan(cl[beyond]))
    assert np.all(np.isinf(sd[beyond])) and np.all(sd[beyond] > 0)
    np.testing.assert_allclose(sq[~beyond], best[~beyond], rtol=1e-12)
    assert set(full) >= {"points", "primitive_ids", "primitive_uvs"}
    assert full["primitive_uvs"].shape == (200, 2)
    np.testing.assert_array_equal(full["primitive_uvs"], bc[:, 1:])
    np.testing.assert_array_equal(near["primitive_ids"], ids)
    np.testing.assert_array_equal(near["points"][~beyond], cl[~beyond])
    # w0 = 1 - u - v rebuilds the points from (u, v) as Open3D's users do
    tri = v[f[full["primitive_ids"]]]
    u, w = full["primitive_uvs"][:, 0:1], full["primitive_uvs"][:, 1:2]
    rebuilt = (1 - u - w) * tri[:, 0] + u * tri[:, 1] + w * tri[:, 2]
    np.testing.assert_allclose(rebuilt, full["points"], atol=1e-12)


# ---- signed distance -----------------------------------------------------------------


def radial_points(seed, n):
    """Points at known sides of the unit icosphere of level 2 (its faces lie
    between radius 0.98 and 1): radius < 0.8 inside, > 1.05 outside."""
    rng = np.random.default_rng(seed)
    d = rng.normal(size=(n, 3))
    d /= np.linalg.norm(d, axis=1)[:, None]
    r = np.where(np.arange(n) % 2 == 0, rng.uniform(0.05, 0.8, n), rng.uniform(1.05, 2.5, n))
    return d * r[:, None], r < 1


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_signed_distance_on_closed_meshes(lib, dtype):
    v, f = icosphere(2)
    assert outward(v, f)
    pts, inside = radial_points(11, 400)
    pts = pts.astype(dtype)
    best, _, _ = oracle_closest(pts, v.astype(dtype).astype(np.float64), f)
    with knn.Mesh(v.astype(dtype), f) as mesh:
        assert mesh.closed_oriented
        sd, ids = mesh.signed_distance(pts, return_triangle_ids=True)
        sq, ids2, _ = mesh.closest(pts)
    assert sd.dtype == dtype
    np.testing.assert_array_equal(sd < 0, inside)
    np.testing.assert_array_equal(ids, ids2)
    np.testing.assert_allclose(np.abs(sd), np.sqrt(best), rtol=1e-6 if dtype == np.float32 else
                               1e-12)
    # the header: the distance is the correctly rounded sqrt of the squared one
    np.testing.assert_array_equal(np.abs(sd), np.sqrt(sq))
    # flipping every triangle flips every sign (the magnitudes round anew:
    # the corners come in another order)
    with knn.Mesh(v.astype(dtype), f[:, ::-1]) as flipped:
        assert flipped.closed_oriented
        back = flipped.signed_distance(pts)
    np.testing.assert_array_equal(back < 0, ~inside)
    np.testing.assert_allclose(back, -sd, rtol=1e-6 if dtype == np.float32 else 1e-12)


def test_exact_ties_go_to_the_smaller_triangle_id(lib):
    v, f = cube()
    corner = 7                                   # (1, 1, 1), shared by several triangles
    lid = [i for i, tri in enumerate(f) if set(tri) == {1, 5, 7} or set(tri) == {1, 7, 3}]
    with knn.Mesh(v, f) as mesh:
        ids = mesh.closest([[1.5, 1.5, 1.5], [0.0, 0.0, 5.0], [0.25, 0.25, 3.0]]).triangle_ids
    assert ids[0] == min(i for i, tri in enumerate(f) if corner in tri)
    assert ids[1] == min(lid)                    # on the lid's diagonal: two triangles tie
    assert ids[2] == min(lid)


def test_signed_distance_on_the_cube(lib):
    v, f = cube()
    assert outward(v, f)
    rng = np.random.default_rng(5)
    inner = rng.uniform(-0.9, 0.9, size=(100, 3))
    outer = rng.uniform(-3, 3, size=(300, 3))
    outer = outer[np.max(np.abs(outer), axis=1) > 1.1]
    pts = np.vstack([inner, outer])
    exact = np.where(np.arange(len(pts)) < 100, -(1 - np.max(np.abs(pts), axis=1)), np.nan)
    with knn.Mesh(v, f) as mesh:
        assert mesh.closed_oriented and mesh.n_triangles == 12 and mesh.n_vertices == 8
        sd = mesh.signed_distance(pts)
        # on the surface: +0
        on = mesh.signed_distance([[1.0, 0.25, -0.5], [1.0, 1.0, 1.0]])
    np.testing.assert_allclose(sd[:100], exact[:100], atol=1e-15)
    assert np.all(sd[100:] > 0)
    np.testing.assert_allclose(sd[100:], np.sqrt(oracle_closest(outer, v, f)[0]), rtol=1e-12)
    assert np.all(on == 0) and not np.any(np.signbit(on))


def test_signed_distance_on_an_open_mesh_uses_the_winding_number(lib):
    v, f = open_box()
    rng = np.random.default_rng(8)
    # inside the box, below the opening: winding number about 5/6 -> inside
    inner = np.column_stack([rng.uniform(-0.8, 0.8, (80, 2)), rng.uniform(-0.9, 0.0, 80)])
    # well outside: winding number about 0 -> outside
    outer = rng.uniform(-1, 1, (80, 3)) + np.array([3.0, 0.0, 0.0])
    pts = np.vstack([inner, outer])
    with knn.Mesh(v, f) as mesh:
        assert not mesh.closed_oriented and mesh.n_triangles == 10
        sd = mesh.signed_distance(pts)
    assert np.all(sd[:80] < 0) and np.all(sd[80:] > 0)
    np.testing.assert_allclose(np.abs(sd), np.sqrt(oracle_closest(pts, v, f)[0]), rtol=1e-12)


# ---- the deviation report ------------------------------------------------------------


def nearest_rank(sorted_values, p):
    k = max(int(math.ceil(p / 100.0 * len(sorted_values))) - 1, 0)
    return sorted_values[k]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_deviation_report_against_numpy(lib, dtype):
    v, f = icosphere(2)
    rng = np.random.default_rng(21)
    d = rng.normal(size=(2000, 3))
    d /= np.linalg.norm(d, axis=1)[:, None]
    r = 1.0 + rng.normal(0, 0.03, 2000)
    r[:20] = 3.0                                     # far outliers, beyond max_distance
    pts = (d * r[:, None]).astype(dtype)
    percentiles = [0, 0.1, 1, 12.5, 50, 87.5, 99, 100]
    edges = [-0.06, -0.03, -0.01, 0, 0.01, 0.03, 0.06]
    tol = 0.02
    with knn.Mesh(v.astype(dtype), f) as mesh:
        rep = mesh.deviation_report(pts, tol, percentiles=percentiles, bins=edges,
                                    max_distance=0.5, return_distances=True)
        sd = mesh.signed_distance(pts, max_distance=0.5)
        plain = mesh.deviation_report(pts, tol)
    assert isinstance(rep, knn.DeviationReport)
    np.testing.assert_array_equal(rep.signed_distances, sd)
    assert rep.signed_distances.dtype == dtype
    assert plain.signed_distances is None
    np.testing.assert_array_equal(plain.percentiles, knn.DEFAULT_PERCENTILES)
    measured = np.sort(sd[np.isfinite(sd)].astype(np.float64))
    assert rep.n_points == 2000 and rep.n_beyond == 20 and rep.n_measured == 1980
    assert rep.min == measured[0] and rep.max == measured[-1]
    np.testing.assert_allclose(rep.mean, measured.mean(), rtol=1e-12)
    np.testing.assert_allclose(rep.rms, np.sqrt(np.mean(measured ** 2)), rtol=1e-12)
    np.testing.assert_array_equal(rep.percentile_values,
                                  [nearest_rank(measured, p) for p in percentiles])
    assert rep.n_within_tolerance == np.sum(np.abs(measured) <= tol)
    assert rep.n_above_tolerance == np.sum(measured > tol)
    assert rep.n_below_tolerance == np.sum(measured < -tol)
    e = np.array(edges)
    inner = measured[(measured >= e[0]) & (measured <= e[-1])]
    expected = np.array([np.sum((inner >= e[b]) & (inner < e[b + 1])) for b in range(len(e) - 1)])
    expected[-1] += np.sum(inner == e[-1])
    np.testing.assert_array_equal(rep.bin_counts, expected)
    assert rep.n_below_bins == np.sum(measured < e[0])
    assert rep.n_above_bins == np.sum(measured > e[-1])
    assert rep.bin_counts.sum() + rep.n_below_bins + rep.n_above_bins == rep.n_measured
    assert rep.as_dict()["n_measured"] == 1980


def test_deviation_report_with_nothing_measured(lib):
    v, f = cube()
    with knn.Mesh(v, f) as mesh:
        rep = mesh.deviation_report([[10.0, 0, 0], [0, 20.0, 0]], 0.1, percentiles=[50],
                                    bins=[-1, 1], max_distance=1.0)
    assert (rep.n_points, rep.n_measured, rep.n_beyond) == (2, 0, 2)
    assert math.isnan(rep.min) and math.isnan(rep.mean) and math.isnan(rep.rms)
    assert np.isnan(rep.percentile_values[0]) and rep.bin_counts.tolist() == [0]
    assert rep.n_within_tolerance == rep.n_above_tolerance == rep.n_below_tolerance == 0


# ---- lifetime, pickling, precision ---------------------------------------------------


def test_pickle_and_serialize_round_trip(lib):
    v, f = with_degenerates(*icosphere(1))
    pts = scan(4, 100)
    for dtype in (np.float32, np.float64):
        with knn.Mesh(v.astype(dtype), f) as mesh:
            back = pickle.loads(pickle.dumps(mesh))
            again = knn.Mesh.deserialize(mesh.serialize(), backend="openmp")
            assert copy.copy(mesh) is mesh
            expect = mesh.closest_barycentric(pts.astype(dtype))
            for other in (back, again):
                assert other.info()[:3] == mesh.info()[:3]
                assert other.closed_oriented == mesh.closed_oriented
                for a, b in zip(other.closest_barycentric(pts.astype(dtype)), expect):
                    np.testing.assert_array_equal(a, b)
                other.close()
    with pytest.raises(knn.InvalidArgumentError):
        knn.Mesh.deserialize(b"not a mesh at all, not even close")
    with pytest.raises(knn.InvalidArgumentError):
        knn.Mesh.deserialize(b"")


def test_estimates(lib, has_device):
    big = knn.estimate_mesh_bytes(10**6, 2 * 10**6)
    small = knn.estimate_mesh_bytes(10**3, 2 * 10**3)
    wide = knn.estimate_mesh_bytes(10**6, 2 * 10**6, dtype=np.float64)
    assert knn.estimate_mesh_bytes(-1, 10) == knn.estimate_mesh_bytes(10, -1) == 0
    assert big >= small and wide >= big
    if has_device:   # a CUDA build's model (a build without CUDA answers 0)
        assert small > 0 and big > small and wide > big
    with pytest.raises(TypeError):
        knn.estimate_mesh_bytes(10, 10, dtype=np.int32)


def test_info_and_precision_rules(lib):
    v, f = cube()
    with knn.Mesh(v.astype(np.float32), f, threads=1) as m32:
        info = m32.info()
        assert info == (8, 12, np.dtype(np.float32), knn.Backend.OPENMP, True) or \
            info.backend == knn.Backend.CUDA
        assert "n_triangles=12" in repr(m32)
        # float64 points that are float32 values are taken; others refused
        m32.closest(np.array([[0.5, 0.25, 2.0]]))
        with pytest.raises(TypeError, match="this mesh holds float32 .* float32 vertices"):
            m32.closest(np.array([[0.1, 0.0, 2.0]]))
    with knn.Mesh(v.astype(np.int64), f) as m64:                  # integers: float64
        assert m64.dtype == np.float64
        assert m64.closest(np.array([[0.1, 0.0, 2.0]], np.float32)).sq_distances.dtype == \
            np.float64
    with knn.Mesh(v + 0.1, f, dtype=np.float32) as rounded:       # an explicit dtype rounds
        assert rounded.dtype == np.float32
    mesh = knn.Mesh(v, f)
    mesh.close()
    mesh.close()
    assert "closed" in repr(mesh)
    with pytest.raises(ValueError, match="closed"):
        mesh.closest([[0, 0, 0]])


# ---- bad input -----------------------------------------------------------------------


def test_bad_meshes_raise_the_mapped_errors(lib):
    v, f = cube()
    with pytest.raises(knn.InvalidArgumentError) as info:
        knn.Mesh(v, np.vstack([f, [[0, 1, 99]]]))
    assert "12" in info.value.message and "99" in info.value.message
    assert info.value.function == "knn_mesh_build_f64"
    with pytest.raises(knn.InvalidArgumentError):
        knn.Mesh(v, np.vstack([f, [[0, -1, 2]]]))
    bad = v.copy()
    bad[5, 1] = np.nan
    with pytest.raises(knn.NonfiniteInputError) as info:
        knn.Mesh(bad, f)
    assert "5" in info.value.message
    bad[5, 1] = np.inf
    with pytest.raises(knn.NonfiniteInputError):
        knn.Mesh(bad.astype(np.float32), f)
    with pytest.raises(knn.InvalidArgumentError):
        knn.Mesh(v, np.zeros((0, 3), np.int32))
    with pytest.raises(TypeError):
        knn.Mesh(v, f.astype(np.float64))
    with pytest.raises(OverflowError):
        knn.Mesh(v, np.array([[0, 1, 2 ** 40]]))
    with pytest.raises(ValueError):
        knn.Mesh(v[:, :2], f)
    with pytest.raises(ValueError):
        knn.Mesh(v, f[:, :2])
    with pytest.raises(TypeError):
        knn.Mesh(v, f, dtype=np.float16)


def test_bad_queries_raise_the_mapped_errors(lib):
    v, f = cube()
    with knn.Mesh(v, f) as mesh:
        pts = scan(1, 10)
        with pytest.raises(knn.InvalidArgumentError):
            mesh.closest(pts, max_distance=-1.0)
        with pytest.raises(knn.InvalidArgumentError):
            mesh.signed_distance(pts, max_distance=float("nan"))
        with pytest.raises(knn.InvalidArgumentError):
            mesh.deviation_report(pts, -0.1)
        with pytest.raises(knn.InvalidArgumentError):
            mesh.deviation_report(pts, 0.1, percentiles=[50, 101])
        with pytest.raises(knn.InvalidArgumentError):
            mesh.deviation_report(pts, 0.1, bins=[0, 1, 1, 2])
        with pytest.raises(knn.InvalidArgumentError):
            mesh.deviation_report(pts, 0.1, bins=[0, np.inf])
        with pytest.raises(ValueError):
            mesh.deviation_report(pts, 0.1, bins=[0])
        with pytest.raises(ValueError):
            mesh.closest(pts[:, :2])
        with pytest.raises(ValueError):
            mesh.closest(pts, out_sq_distances=np.empty(10, np.float32))
        bad = pts.copy()
        bad[3, 2] = np.nan
        with pytest.raises(knn.NonfiniteInputError):
            mesh.signed_distance(bad)
        # no point: empty answers, not an error
        none = mesh.closest_barycentric(np.empty((0, 3)))
        assert [a.shape for a in none] == [(0,), (0,), (0, 3), (0, 3)]
        empty = mesh.deviation_report(np.empty((0, 3)), 0.1, percentiles=[50])
        assert empty.n_points == 0 and np.isnan(empty.percentile_values[0])
        # after every failure the next call works
        assert mesh.closest(pts).triangle_ids.min() >= 0


def test_outputs_given_by_the_caller(lib):
    v, f = icosphere(1)
    pts = scan(9, 50)
    with knn.Mesh(v, f) as mesh:
        sq = np.empty(50)
        ids = np.empty(50, np.int32)
        cl = np.empty((50, 3))
        res = mesh.closest(pts, out_sq_distances=sq, out_triangle_ids=ids, out_closest_points=cl)
        assert res.sq_distances is sq and res.triangle_ids is ids and res.closest_points is cl
        out = np.empty(50)
        assert mesh.signed_distance(pts, out=out) is out
        np.testing.assert_allclose(sq, oracle_closest(pts, v, f)[0], rtol=1e-12)


# ---- device arrays (GPU machines) ----------------------------------------------------


def test_device_arrays_answer_as_host_arrays(lib, has_device):
    """torch CUDA tensors (DLPack) in and out give the host results, bit for bit."""
    if not has_device:
        pytest.skip("no CUDA device")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    v, f = icosphere(3)
    pts = scan(2, 5000)
    for dtype, tdtype in ((np.float32, torch.float32), (np.float64, torch.float64)):
        with knn.Mesh(v.astype(dtype), f, backend="cuda") as mesh, \
                knn.Mesh(v.astype(dtype), f, backend="openmp") as cpu:
            assert mesh.backend == knn.Backend.CUDA
            host = cpu.closest_barycentric(pts.astype(dtype))
            dq = torch.from_numpy(pts.astype(dtype)).cuda()
            out_ids = torch.empty(5000, dtype=torch.int32, device="cuda")
            out_sq = torch.empty(5000, dtype=tdtype, device="cuda")
            out_cl = torch.empty((5000, 3), dtype=tdtype, device="cuda")
            torch.cuda.synchronize()
            res = mesh.closest(dq, out_sq_distances=out_sq, out_triangle_ids=out_ids,
                               out_closest_points=out_cl)
            torch.cuda.synchronize()
            assert res.triangle_ids is out_ids and res.closest_points is out_cl
            np.testing.assert_array_equal(out_ids.cpu().numpy(), host.triangle_ids)
            np.testing.assert_array_equal(out_sq.cpu().numpy(), host.sq_distances)
            np.testing.assert_array_equal(out_cl.cpu().numpy(), host.closest_points)
            # device points, host outputs
            for a, b in zip(mesh.closest_barycentric(dq), host):
                np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(mesh.signed_distance(dq), cpu.signed_distance(
                pts.astype(dtype)))
            rep = mesh.deviation_report(dq, 0.01, bins=[-0.1, 0, 0.1])
            ref = cpu.deviation_report(pts.astype(dtype), 0.01, bins=[-0.1, 0, 0.1])
            assert rep.as_dict().keys() == ref.as_dict().keys()
            for key, value in ref.as_dict().items():
                np.testing.assert_array_equal(rep.as_dict()[key], value, err_msg=key)


def test_device_arrays_without_a_device(lib, has_device):
    if has_device:
        pytest.skip("a CUDA device is usable here")

    class FakeDevice:
        __cuda_array_interface__ = {"shape": (4, 3), "typestr": "<f8", "data": (1 << 40, False),
                                    "version": 3, "strides": None}

    class FakeDeviceOutput:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f8", "data": (1 << 40, False),
                                    "version": 3, "strides": None}

    v, f = cube()
    with knn.Mesh(v, f) as mesh:
        with pytest.raises(knn.NoDeviceError):
            mesh.closest(FakeDevice())
        # one device output among host ones is refused before the library is called
        with pytest.raises(ValueError, match="out_sq_distances is device memory"):
            mesh.closest(np.zeros((4, 3)), out_sq_distances=FakeDeviceOutput())
        with pytest.raises(ValueError, match="all host or all device"):
            mesh.signed_distance(np.zeros((4, 3)), out=FakeDeviceOutput(),
                                 return_triangle_ids=True)
