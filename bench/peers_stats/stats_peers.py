"""The neighbourhood statistics side by side (issue 49, item 4): one
contender on one cloud per process, run by scripts/stats-peers.sh.

    python stats_peers.py data N PATH.npy                  a scan-like cloud
    python stats_peers.py run CONTENDER TASK PATH.npy K OUT.npy [--repeats R]
    python stats_peers.py table RESULTS DIR                 the table, last

The cloud: a torus (R 1, r 0.35) sampled uniformly by area, with Gaussian
noise (sigma 5e-4) as a scanner leaves it, and 0.5 % of the points sprayed
through its bounding box (ghosts); the planted ids go to PATH.spray.npy.

TASK normals: unit normals of each point's K nearest (itself included),
oriented towards the viewpoint VIEWPOINT (all contenders apply that rule);
OUT gets (n, 3) float32. TASK outliers: statistical outlier removal over the
K nearest others with std ratio STD_RATIO (PCL's setMeanK(K); Open3D counts
the point itself, so its nb_neighbors is K + 1); OUT gets the kept ids.

Contenders (each times what its users pay from points in memory to the
answer: the search structure's build and the call):
  ours-omp, ours-cuda   knn_gpgpu.Index(points, backend=...) + Index.normals
                        / Index.statistical_inliers (float32 points, host
                        arrays); the build is also printed apart
  open3d                the legacy CPU API: PointCloud.estimate_normals
                        (KDTreeSearchParamKNN) + orient_normals_towards_camera_location,
                        remove_statistical_outlier
  open3d-cuda           the tensor API on CUDA:0: t.geometry.PointCloud
                        estimate_normals(max_nn=K) + orient_normals_towards_camera_location,
                        remove_statistical_outliers
  torch-cuda            a PyTorch implementation as its users write it:
                        torch.cdist + torch.topk over chunks of queries,
                        torch.linalg.eigh of the 3 x 3 covariances; past
                        TORCH_BUDGET_S seconds it stops and extrapolates its
                        time from the share of queries it answered (marked ~)
PCL runs as its own C++ driver (pcl_driver.cpp). Each RESULT line:
  RESULT contender task n k ms build_ms answered
Timing: a warm-up call on 2000 points first (contexts, lazy loading), then
the median of R runs (default 3; 1 when a run takes more than 20 s).
"""
import math
import os
import statistics
import sys
import time

import numpy as np

VIEWPOINT = (0.0, 0.0, 0.0)
STD_RATIO = 2.0
SLOW_S = 20.0
TORCH_BUDGET_S = float(os.environ.get("TORCH_BUDGET_S", "60"))


# ---- the cloud -----------------------------------------------------------------------------

def make_cloud(n, seed=49):
    rng = np.random.default_rng(seed)
    big, small = 1.0, 0.35
    n_spray = n // 200
    n_surface = n - n_spray
    # Uniform by area: the tube angle v has density proportional to R + r cos v.
    v = np.empty(0)
    while v.size < n_surface:
        cand = rng.uniform(0, 2 * np.pi, 2 * n_surface)
        keep = rng.uniform(0, big + small, cand.size) < big + small * np.cos(cand)
        v = np.concatenate([v, cand[keep]])
    v = v[:n_surface]
    u = rng.uniform(0, 2 * np.pi, n_surface)
    ring = big + small * np.cos(v)
    surface = np.stack([ring * np.cos(u), ring * np.sin(u), small * np.sin(v)], axis=1)
    surface += rng.normal(0, 5e-4, surface.shape)
    spray = rng.uniform([-1.4, -1.4, -0.4], [1.4, 1.4, 0.4], (n_spray, 3))
    points = np.concatenate([surface, spray]).astype(np.float32)
    order = rng.permutation(n)
    planted = np.flatnonzero(order >= n_surface)
    return np.ascontiguousarray(points[order]), planted


# ---- timing --------------------------------------------------------------------------------

def timed(repeats, run):
    """Median ms of ``repeats`` runs of ``run`` (one when the first is slow),
    and the last run's result."""
    samples, result = [], None
    for i in range(repeats):
        start = time.perf_counter()
        result = run()
        samples.append(1000 * (time.perf_counter() - start))
        if samples[-1] > 1000 * SLOW_S:
            break
    return statistics.median(samples), result


# ---- contenders ----------------------------------------------------------------------------

def ours(backend):
    import knn_gpgpu as knn

    def build(points):
        start = time.perf_counter()
        index = knn.Index(points, backend=backend)
        return index, 1000 * (time.perf_counter() - start)

    def normals(points, k):
        index, build_ms = build(points)
        with index:
            return index.normals(k, VIEWPOINT, curvature=False).normals, build_ms

    def outliers(points, k):
        index, build_ms = build(points)
        with index:
            return index.statistical_inliers(k, STD_RATIO).ids, build_ms

    return {"normals": normals, "outliers": outliers}


def open3d_legacy():
    import open3d as o3d

    def cloud(points):
        return o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points.astype(np.float64)))

    def normals(pcd, k):
        pcd.estimate_normals(o3d.geometry.KDTreeSearchParamKNN(knn=k))
        pcd.orient_normals_towards_camera_location(np.asarray(VIEWPOINT, np.float64))
        return np.asarray(pcd.normals, dtype=np.float32), 0.0

    def outliers(pcd, k):
        _, kept = pcd.remove_statistical_outlier(nb_neighbors=k + 1, std_ratio=STD_RATIO)
        return np.asarray(kept, dtype=np.int64), 0.0

    return {"normals": normals, "outliers": outliers, "prepare": cloud}


def open3d_cuda():
    import open3d as o3d
    import open3d.core as o3c
    if not o3d.core.cuda.is_available():
        raise RuntimeError("this Open3D has no CUDA device")
    device = o3c.Device("CUDA:0")

    def cloud(points):
        return o3d.t.geometry.PointCloud(o3c.Tensor.from_numpy(points).to(device))

    def normals(pcd, k):
        pcd.estimate_normals(max_nn=k, radius=None)
        pcd.orient_normals_towards_camera_location(
            o3c.Tensor(np.asarray(VIEWPOINT, np.float32), device=device))
        return pcd.point.normals.cpu().numpy().astype(np.float32), 0.0

    def outliers(pcd, k):
        _, mask = pcd.remove_statistical_outliers(nb_neighbors=k + 1, std_ratio=STD_RATIO)
        return np.flatnonzero(mask.cpu().numpy()), 0.0

    return {"normals": normals, "outliers": outliers, "prepare": cloud, "fresh": True}


def torch_cuda():
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA device")
    device = torch.device("cuda")
    state = {}

    def knn_chunks(points, k):
        """(start, distances, ids) of each chunk of queries, nearest first;
        stops past the budget (state['answered'] says how many)."""
        n = points.shape[0]
        chunk = max(1, min(n, (1 << 28) // max(n, 1)))
        start_time = time.perf_counter()
        for start in range(0, n, chunk):
            q = points[start:start + chunk]
            d = torch.cdist(q, points)
            dist, ids = torch.topk(d, min(k, n), dim=1, largest=False, sorted=True)
            yield start, dist, ids
            state["answered"] = min(n, start + chunk)
            if time.perf_counter() - start_time > TORCH_BUDGET_S:
                torch.cuda.synchronize()
                break

    def normals(points_np, k):
        points = torch.from_numpy(points_np).to(device)
        out = torch.zeros_like(points)
        vp = torch.tensor(VIEWPOINT, device=device)
        for start, _, ids in knn_chunks(points, k):
            nb = points[ids]
            centred = nb - nb.mean(dim=1, keepdim=True)
            cov = centred.transpose(1, 2) @ centred
            _, vectors = torch.linalg.eigh(cov)
            normal = vectors[:, :, 0]
            q = points[start:start + normal.shape[0]]
            flip = ((vp - q) * normal).sum(dim=1) < 0
            normal[flip] = -normal[flip]
            out[start:start + normal.shape[0]] = normal
        torch.cuda.synchronize()
        return out.cpu().numpy(), 0.0

    def outliers(points_np, k):
        points = torch.from_numpy(points_np).to(device)
        scores = torch.zeros(points.shape[0], device=device, dtype=torch.float64)
        for start, dist, _ in knn_chunks(points, k + 1):
            scores[start:start + dist.shape[0]] = dist[:, 1:].double().mean(dim=1)
        answered = state["answered"]
        s = scores[:answered]
        threshold = s.mean() + STD_RATIO * s.std()
        kept = torch.nonzero(s <= threshold).flatten()
        torch.cuda.synchronize()
        return kept.cpu().numpy(), 0.0

    return {"normals": normals, "outliers": outliers, "state": state}


CONTENDERS = {"ours-omp": lambda: ours("openmp"), "ours-cuda": lambda: ours("cuda"),
              "open3d": open3d_legacy, "open3d-cuda": open3d_cuda, "torch-cuda": torch_cuda}


def run(contender, task, path, k, out, repeats):
    points = np.load(path)
    n = points.shape[0]
    impl = CONTENDERS[contender]()
    prepare = impl.get("prepare", lambda p: p)
    call = impl[task]
    warm = prepare(points[:2000])
    call(warm, k)
    if impl.get("fresh"):
        # the tensor API keeps what it computed on the cloud: a new one per run
        ms, (result, build_ms) = timed(repeats, lambda: call(prepare(points), k))
    else:
        data = prepare(points)
        ms, (result, build_ms) = timed(repeats, lambda: call(data, k))
    answered = impl.get("state", {}).get("answered", n)
    if answered < n:
        ms *= n / answered
    np.save(out, result)
    print("RESULT %s %s %d %d %.3f %.3f %d" % (contender, task, n, k, ms, build_ms, answered))


# ---- the table -----------------------------------------------------------------------------

def angles_deg(a, b):
    dots = np.abs(np.sum(a.astype(np.float64) * b, axis=1))
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.degrees(np.arccos(np.clip(dots / norms, 0, 1)))


def agreement(task, mine, theirs, planted, answered, n):
    """How a contender's answer compares with ours (the OpenMP engine's)."""
    if task == "normals":
        a = angles_deg(mine[:answered], theirs[:answered, :3])
        bad = np.isnan(a) | (a > 1.0)
        return "p99 %.2g deg, %d > 1 deg" % (np.nanpercentile(a, 99), int(bad.sum()))
    if answered < n:
        return "threshold over the first %d points only" % answered
    mine_set, their_set = set(mine.tolist()), set(theirs.tolist())
    only_ours, only_theirs = len(mine_set - their_set), len(their_set - mine_set)
    spray_kept = len(set(planted.tolist()) & their_set)
    return "kept %d: +%d -%d vs ours; spray kept %d" % (len(their_set), only_theirs, only_ours,
                                                        spray_kept)


def table(results_path, directory):
    rows = []
    with open(results_path) as f:
        for line in f:
            p = line.split()
            if len(p) == 8 and p[0] == "RESULT":
                rows.append((p[1], p[2], int(p[3]), int(p[4]), float(p[5]), float(p[6]),
                             int(p[7])))
    cells = {}
    order = []
    for who, task, n, k, ms, build_ms, answered in rows:
        key = (task, n, k)
        if key not in cells:
            cells[key] = {}
            order.append(key)
        cells[key][who] = (ms, build_ms, answered)
    print("%-9s %-5s %4s  %-12s %19s %7s %7s  %s" % ("task", "n", "k", "contender", "ms",
                                                       "x cuda", "x omp", "agreement with ours-omp"))
    for task, n, k in order:
        row = cells[(task, n, k)]
        stem = os.path.join(directory, "%s-%d-%d" % (task, n, k))
        planted = np.load(os.path.join(directory, "cloud-%d.spray.npy" % n))
        mine = np.load("%s.ours-omp.npy" % stem) if "ours-omp" in row else None
        for who, (ms, build_ms, answered) in sorted(row.items(), key=lambda kv: kv[1][0]):
            theirs = np.load("%s.%s.npy" % (stem, who))
            agree = agreement(task, mine, theirs, planted, answered, n) if mine is not None else ""
            ratios = ["%7.2f" % (ms / row[base][0]) if base in row else "%7s" % "-"
                      for base in ("ours-cuda", "ours-omp")]
            label = ("~" if answered < n else "") + "%.1f" % ms
            if build_ms > 0:
                label += " (build %.0f)" % build_ms
            print("%-9s %-5s %4d  %-12s %19s %s %s  %s" % (task, count_name(n), k, who, label,
                                                           ratios[0], ratios[1], agree))
    print("x cuda, x omp: the contender's ms over ours-cuda's, ours-omp's (> 1: ours is "
          "faster). ~: extrapolated from the queries answered within the budget.")


def count_name(n):
    exponent, rest = 0, n
    while rest >= 10 and rest % 10 == 0:
        rest //= 10
        exponent += 1
    return str(n) if exponent < 3 else "%de%d" % (rest, exponent)


def main(argv):
    if len(argv) >= 3 and argv[0] == "data":
        points, planted = make_cloud(int(float(argv[1])))
        np.save(argv[2], points)
        np.save(argv[2].replace(".npy", ".spray.npy"), planted)
        return 0
    if len(argv) >= 6 and argv[0] == "run":
        repeats = int(argv[7]) if len(argv) >= 8 and argv[6] == "--repeats" else 3
        run(argv[1], argv[2], argv[3], int(argv[4]), argv[5], repeats)
        return 0
    if len(argv) == 3 and argv[0] == "table":
        table(argv[1], argv[2])
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
