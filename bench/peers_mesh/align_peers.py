"""Best-fit alignment side by side (issue 50, item 5): knn_gpgpu's point-to-plane
ICP against a mesh, and Open3D's point-to-plane ICP (the legacy pipeline and
the tensor one, on the CPU, and the tensor one on CUDA when its build has it;
and, where torch sees a GPU, a PyTorch point-to-plane ICP written as its users
would, since Open3D's CUDA build cannot be brought to the GPU machine)
against points sampled from the same mesh with its normals, as Open3D's users
align a scan to a design. Same scan, same start, same iteration cap, in one
run; prints one table last.

    python align_peers.py [--mesh bumpy-1e5|torus-N|PATH.off] [--scan 1e6] [--iterations 30]

Each contender runs the full iteration cap (tolerances far below what a step
reaches), so the per-iteration time compares like with like. The scan is the
mesh's surface sampled by area, with Gaussian noise of 1e-3 of the box
diagonal and 1% outliers, moved by a known rigid motion (5 degrees about a
skew axis, 2% of the diagonal); the error columns are the fitted transform's
distance from the inverse of that motion."""

import argparse
import math
import os
import sys
import time

import numpy as np


def torus(n_triangles, bumps=0.0):
    """A torus (R = 1, r = 0.3) of about n_triangles triangles, a grid in (u, v);
    bumps > 0 modulates the tube's radius so that no rotation maps it onto itself
    (a plain torus turns freely about its axis: ICP cannot observe that turn)."""
    nv = max(3, int(round(math.sqrt(n_triangles / 2 / 3.3))))
    nu = max(3, int(round(n_triangles / 2 / nv)))
    u = np.arange(nu) * (2 * math.pi / nu)
    v = np.arange(nv) * (2 * math.pi / nv)
    uu, vv = np.meshgrid(u, v, indexing="ij")
    tube = 0.3 * (1.0 + bumps * np.sin(3 * uu + 0.5) * np.cos(2 * vv) + bumps * np.sin(uu))
    ring = 1.0 + tube * np.cos(vv)
    vertices = np.stack([ring * np.cos(uu), ring * np.sin(uu), tube * np.sin(vv)], -1).reshape(-1, 3)
    i, j = np.meshgrid(np.arange(nu), np.arange(nv), indexing="ij")
    a = i * nv + j
    b = ((i + 1) % nu) * nv + j
    c = ((i + 1) % nu) * nv + (j + 1) % nv
    d = i * nv + (j + 1) % nv
    faces = np.concatenate([np.stack([a, b, c], -1).reshape(-1, 3),
                            np.stack([a, c, d], -1).reshape(-1, 3)])
    return vertices, faces.astype(np.int32)


def read_off(path):
    with open(path) as f:
        words = [w for line in f for w in line.split("#")[0].split()]
    if words[0] != "OFF":
        raise ValueError("%s: not an OFF file" % path)
    nv, nf = int(words[1]), int(words[2])
    at = 4
    vertices = np.array(words[at:at + 3 * nv], dtype=np.float64).reshape(nv, 3)
    at += 3 * nv
    faces = []
    for _ in range(nf):
        count = int(words[at])
        ids = [int(w) for w in words[at + 1:at + 1 + count]]
        faces.extend([ids[0], ids[t], ids[t + 1]] for t in range(1, count - 1))
        at += 1 + count
    return vertices, np.array(faces, dtype=np.int32)


def rotation(axis, angle):
    axis = np.asarray(axis, dtype=np.float64) / np.linalg.norm(axis)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * (k @ k)


def sample_surface(vertices, faces, m, rng):
    """m points on the triangles, chosen by area, with the triangles' unit normals."""
    tri = vertices[faces]
    cross = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    area = 0.5 * np.linalg.norm(cross, axis=1)
    pick = rng.choice(len(faces), size=m, p=area / area.sum())
    r1, r2 = rng.random(m), rng.random(m)
    s = np.sqrt(r1)
    w = np.stack([1 - s, s * (1 - r2), s * r2], -1)
    points = np.einsum("mk,mkd->md", w, tri[pick])
    normals = cross[pick] / np.maximum(2 * area[pick], 1e-300)[:, None]
    return points, normals


def make_scan(vertices, faces, m, rng):
    diagonal = float(np.linalg.norm(vertices.max(0) - vertices.min(0)))
    points, _ = sample_surface(vertices, faces, m, rng)
    points += rng.normal(scale=1e-3 * diagonal, size=points.shape)
    n_out = m // 100
    lo, hi = vertices.min(0), vertices.max(0)
    points[:n_out] = lo + (hi - lo) * (rng.random((n_out, 3)) * 1.4 - 0.2)
    motion = np.eye(4)
    motion[:3, :3] = rotation([1.0, 2.0, 3.0], math.radians(5.0))
    motion[:3, 3] = 0.02 * diagonal * np.array([0.6, -0.8, 0.0])
    centre = points.mean(0)
    moved = (points - centre) @ motion[:3, :3].T + centre + motion[:3, 3]
    # The transform that takes the scan back: the inverse of the motion about the centre.
    about = np.eye(4)
    about[:3, 3] = centre
    back = about @ np.linalg.inv(motion) @ np.linalg.inv(about)
    return moved, back, diagonal


def transform_error(found, truth, diagonal):
    delta = found @ np.linalg.inv(truth)
    angle = math.degrees(math.acos(max(-1.0, min(1.0, (np.trace(delta[:3, :3]) - 1) / 2))))
    return angle, float(np.linalg.norm(delta[:3, 3])) / diagonal


def torch_icp(scan, target_points, target_normals, max_corr, iterations, chunk=4096):
    """Point-to-plane ICP on the GPU with PyTorch, as its users write it (no
    tree: torch has none): each iteration the moved scan's nearest target
    sample by torch.cdist over chunks of the scan, pairs beyond max_corr
    dropped, the linearised 6 x 6 normal equations summed and solved in
    float64, the small-angle step composed onto the transform."""
    import torch
    device = torch.device("cuda")
    source = torch.as_tensor(scan, dtype=torch.float32, device=device)
    target = torch.as_tensor(target_points, dtype=torch.float32, device=device)
    normals = torch.as_tensor(target_normals, dtype=torch.float32, device=device)
    transform = torch.eye(4, dtype=torch.float64, device=device)
    kept = 0
    for _ in range(iterations):
        moved = source @ transform[:3, :3].T.float() + transform[:3, 3].float()
        nearest = torch.empty(len(source), dtype=torch.int64, device=device)
        distance = torch.empty(len(source), dtype=torch.float32, device=device)
        for first in range(0, len(source), chunk):
            d, i = torch.cdist(moved[first:first + chunk], target).min(dim=1)
            distance[first:first + chunk] = d
            nearest[first:first + chunk] = i
        keep = distance <= max_corr
        p = moved[keep].double()
        q = target[nearest[keep]].double()
        n = normals[nearest[keep]].double()
        rows = torch.cat([torch.cross(p, n, dim=1), n], dim=1)
        residual = ((q - p) * n).sum(dim=1)
        step = torch.linalg.solve(rows.T @ rows, rows.T @ residual)
        a, b, c, x, y, z = step.tolist()
        update = torch.tensor([[1.0, -c, b, x], [c, 1.0, -a, y], [-b, a, 1.0, z],
                               [0.0, 0.0, 0.0, 1.0]], dtype=torch.float64, device=device)
        u, _, vh = torch.linalg.svd(update[:3, :3])  # the nearest rotation
        update[:3, :3] = u @ vh
        transform = update @ transform
        kept = int(keep.sum())
    torch.cuda.synchronize()
    return transform.cpu().numpy(), kept / len(source)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mesh", default="bumpy-1e5")
    parser.add_argument("--scan", default="1e6")
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--target-points", default="",
                        help="Open3D's target sample size (default: the scan's size)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    if args.mesh.startswith("torus-"):
        vertices, faces = torus(int(float(args.mesh[6:])))
    elif args.mesh.startswith("bumpy-"):
        vertices, faces = torus(int(float(args.mesh[6:])), bumps=0.2)
    else:
        vertices, faces = read_off(args.mesh)
    m = int(float(args.scan))
    scan, truth, diagonal = make_scan(vertices, faces, m, rng)
    max_corr = 0.05 * diagonal
    n_target = int(float(args.target_points)) if args.target_points else m
    print("mesh %s: %d vertices, %d triangles; scan %d points; cap %d iterations; "
          "max correspondence %.4g; threads %d" % (args.mesh, len(vertices), len(faces), m,
                                                   args.iterations, max_corr, os.cpu_count()),
          flush=True)
    rows = []

    def record(name, build_ms, times, iterations, transform, fitness):
        run_ms = float(np.median(times))
        angle, shift = transform_error(transform, truth, diagonal)
        rows.append((name, build_ms, run_ms, run_ms / max(iterations, 1), iterations, angle, shift,
                     fitness))
        print("  %-34s build %9.1f ms  fit %9.1f ms  %3d it  %8.2f ms/it  err %.2e deg %.2e diag"
              % (name, build_ms, run_ms, iterations, run_ms / max(iterations, 1), angle, shift),
              flush=True)

    try:
        import knn_gpgpu
        for backend in ("openmp", "cuda"):
            options = knn_gpgpu.Options(backend=backend)
            try:
                t = time.perf_counter()
                mesh = knn_gpgpu.Mesh(vertices.astype(np.float32), faces, options=options)
                build_ms = (time.perf_counter() - t) * 1e3
            except Exception as error:  # no GPU on this machine
                print("  knn_gpgpu %s: %s" % (backend, error))
                continue
            points = scan.astype(np.float32)
            times = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                fit = mesh.align(points, max_correspondence=max_corr,
                                 max_iterations=args.iterations, tolerance_rotation=1e-300,
                                 tolerance_translation=1e-300, options=options)
                times.append((time.perf_counter() - t) * 1e3)
            record("knn_gpgpu mesh (%s)" % mesh.backend, build_ms, times, fit.iterations,
                   fit.transform, fit.kept / m)
    except ImportError as error:
        print("  knn_gpgpu: %s" % error)

    try:
        import open3d as o3d
    except ImportError:
        print("  open3d: not installed")
        o3d = None
    if o3d is not None:
        target_points, target_normals = sample_surface(vertices, faces, n_target,
                                                       np.random.default_rng(11))
        criteria = o3d.pipelines.registration.ICPConvergenceCriteria(
            relative_fitness=0.0, relative_rmse=0.0, max_iteration=args.iterations)
        source = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(scan))
        target = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(target_points))
        target.normals = o3d.utility.Vector3dVector(target_normals)
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            result = o3d.pipelines.registration.registration_icp(
                source, target, max_corr, np.eye(4),
                o3d.pipelines.registration.TransformationEstimationPointToPlane(), criteria)
            times.append((time.perf_counter() - t) * 1e3)
        record("open3d legacy p2plane (cpu)", 0.0, times, args.iterations,
               np.asarray(result.transformation), result.fitness)
        devices = [o3d.core.Device("CPU:0")]
        if o3d.core.cuda.is_available():
            devices.append(o3d.core.Device("CUDA:0"))
        for device in devices:
            tsource = o3d.t.geometry.PointCloud(device)
            tsource.point.positions = o3d.core.Tensor(scan.astype(np.float32), device=device)
            ttarget = o3d.t.geometry.PointCloud(device)
            ttarget.point.positions = o3d.core.Tensor(target_points.astype(np.float32),
                                                      device=device)
            ttarget.point.normals = o3d.core.Tensor(target_normals.astype(np.float32),
                                                    device=device)
            tcriteria = o3d.t.pipelines.registration.ICPConvergenceCriteria(
                relative_fitness=0.0, relative_rmse=0.0, max_iteration=args.iterations)
            times = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                result = o3d.t.pipelines.registration.icp(
                    tsource, ttarget, max_corr, o3d.core.Tensor(np.eye(4)),
                    o3d.t.pipelines.registration.TransformationEstimationPointToPlane(),
                    tcriteria)
                times.append((time.perf_counter() - t) * 1e3)
            record("open3d tensor p2plane (%s)" % str(device).lower(), 0.0, times,
                   args.iterations, result.transformation.cpu().numpy(), result.fitness)

    try:
        import torch
        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    if cuda:
        target_points, target_normals = sample_surface(vertices, faces, n_target,
                                                       np.random.default_rng(11))
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            transform, fitness = torch_icp(scan, target_points, target_normals, max_corr,
                                           args.iterations)
            times.append((time.perf_counter() - t) * 1e3)
        record("torch p2plane (cuda)", 0.0, times, args.iterations, transform, fitness)
    else:
        print("  torch: not installed or no CUDA device")

    print("\n%-34s %10s %10s %8s %10s %10s %10s %8s" % (
        "contender", "build ms", "fit ms", "iters", "ms/iter", "err deg", "err/diag", "kept"))
    for name, build_ms, run_ms, per_it, iterations, angle, shift, fitness in rows:
        print("%-34s %10.1f %10.1f %8d %10.2f %10.2e %10.2e %8.3f" % (
            name, build_ms, run_ms, iterations, per_it, angle, shift, fitness))
    ours = [r for r in rows if r[0].startswith("knn_gpgpu")]
    peers = [r for r in rows if not r[0].startswith("knn_gpgpu")]
    for mine in ours:
        for peer in peers:
            print("ratio %s / %s per iteration: %.3f" % (mine[0], peer[0], mine[3] / peer[3]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
