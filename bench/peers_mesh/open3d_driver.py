"""Open3D's RaycastingScene.compute_closest_points (float32, all cores): the
mesh benchmark's Open3D contender (issue 48, item 8).

    python open3d_driver.py DIR MESH N [N ...] [--repeats R]

Reads the files bench_mesh_data wrote (bench/mesh_datasets.h gives their
layout), builds the scene once (build ms: add_triangles, then a first
query of one point, since Open3D builds its BVH lazily on the first query),
answers each scan (query ms), checks the distances of the oracle's samples
and prints the RESULT lines the scripts read, as the C++ drivers do. Timing:
one warm-up, then the median of R runs (default 3); the warm-up alone when
it took more than 3 s.
"""
import sys
import time

import numpy as np
import open3d as o3d

SLOW_MS = 3000.0


def read_mesh(path):
    with open(path, "rb") as f:
        nv, nt = np.fromfile(f, np.int64, 2)
        vertices = np.fromfile(f, np.float32, 3 * nv).reshape(nv, 3)
        triangles = np.fromfile(f, np.int32, 3 * nt).reshape(nt, 3)
    return vertices, triangles


def read_scan(path):
    with open(path, "rb") as f:
        (n,) = np.fromfile(f, np.int64, 1)
        return np.fromfile(f, np.float32, 3 * n).reshape(n, 3)


def read_oracle(path):
    with open(path, "rb") as f:
        (count,) = np.fromfile(f, np.int64, 1)
        index = np.fromfile(f, np.int64, count)
        sq_distance = np.fromfile(f, np.float64, count)
    return index, sq_distance


def count_name(n):
    exponent, rest = 0, n
    while rest >= 10 and rest % 10 == 0:
        rest //= 10
        exponent += 1
    return str(n) if exponent < 3 else f"{rest}e{exponent}"


def timed_ms(repeats, run, setup=lambda: None):
    setup()
    start = time.perf_counter()
    run()
    warmup = 1000 * (time.perf_counter() - start)
    if warmup > SLOW_MS:
        return warmup
    samples = []
    for _ in range(repeats):
        setup()
        start = time.perf_counter()
        run()
        samples.append(1000 * (time.perf_counter() - start))
    return float(np.median(samples))


def main(argv):
    repeats = 3
    if "--repeats" in argv:
        at = argv.index("--repeats")
        repeats = max(1, int(argv[at + 1]))
        del argv[at : at + 2]
    if len(argv) < 3:
        sys.exit("usage: open3d_driver.py DIR MESH N [N ...] [--repeats R]")
    folder, mesh_name, sizes = argv[0], argv[1], [int(float(s)) for s in argv[2:]]
    vertices, triangles = read_mesh(f"{folder}/{mesh_name}.mesh")
    lo, hi = vertices.min(0).astype(np.float64), vertices.max(0).astype(np.float64)
    diagonal = float(np.linalg.norm(hi - lo))
    v = o3d.core.Tensor(vertices)
    t = o3d.core.Tensor(triangles.astype(np.uint32))
    one_point = o3d.core.Tensor(vertices[:1])
    scene = None

    def build():
        nonlocal scene
        scene = o3d.t.geometry.RaycastingScene()
        scene.add_triangles(v, t)
        scene.compute_closest_points(one_point)

    build_ms = timed_ms(repeats, build)
    for n in sizes:
        row = f"{mesh_name}_x_{count_name(n)}"
        scan = read_scan(f"{folder}/{row}.scan")
        points = o3d.core.Tensor(scan)
        index, oracle_sq = read_oracle(f"{folder}/{row}.oracle")
        answer = {}

        def query():
            answer["r"] = scene.compute_closest_points(points)

        query_ms = timed_ms(repeats, query)
        closest = answer["r"]["points"].numpy()[index].astype(np.float64)
        got = np.linalg.norm(closest - scan[index].astype(np.float64), axis=1)
        expected = np.sqrt(oracle_sq)
        error = np.abs(got - expected)
        wrong = int(np.count_nonzero(~(error <= 1e-5 * (diagonal + expected))))
        max_error = float(np.nanmax(np.where(np.isnan(error), np.inf, error)))
        print(f"RESULT {row} open3d {build_ms:.3f} {query_ms:.3f} {len(index)} {wrong}"
              f" {max_error:.3g}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
