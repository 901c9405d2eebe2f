"""AUTO's choice of structure against each structure forced, on the same data.

    python3 bench/python/auto_choice.py [--backend cuda|openmp] [--scale N]
    python3 bench/python/auto_choice.py --calls --n 1e6   # every call, host arrays

Default: for each case (a scanned torus with 0.5 % of its points sprayed
over its box, from bench/peers_stats/stats_peers.py; uniform, 64 Gaussian
blobs and a sphere's surface with queries drawn alike) the ms of AUTO, the
grid and the kd-tree, index build excluded, median of 3 after a warm-up, and
AUTO over the faster forced structure. On the CUDA backend the arrays are
device arrays (CuPy), so the rows time the search alone.

--calls: the scanned torus only, host arrays, every call of the statistics'
kind (kNN of the points as queries, all-kNN, normals, mean distances; k = 16
and 100) per structure, with the points in their order and in Morton order.

--scale N divides every size (a smoke test on a machine without a GPU:
--backend openmp --scale 100). KNN_GPGPU_LIBRARY and PYTHONPATH as for the
binding's tests.
"""
import argparse
import importlib.util
import os
import statistics
import sys
import time

import numpy as np

import knn_gpgpu as knn

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "stats_peers", os.path.join(HERE, "..", "peers_stats", "stats_peers.py"))
stats_peers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stats_peers)

STRUCTURES = ("auto", "grid", "kdtree")
VIEWPOINT = (0.0, 0.0, 10.0)


def uniform(rng, n):
    return rng.random((n, 3), dtype=np.float32)


def blobs(rng, n):
    centres = rng.random((64, 3))
    return (centres[rng.integers(0, 64, n)] + rng.normal(0, 0.01, (n, 3))).astype(np.float32)


def sphere(rng, n):
    g = rng.normal(size=(n, 3))
    return (g / np.linalg.norm(g, axis=1, keepdims=True)).astype(np.float32)


def torus(rng, n):
    return stats_peers.make_cloud(n)[0]


def morton_order(points):
    lo, hi = points.min(0), points.max(0)
    cell = np.clip(((points - lo) / np.maximum(hi - lo, 1e-30) * 1023).astype(np.uint64), 0, 1023)

    def spread(v):
        v = v & 0x3FF
        v = (v | (v << 16)) & 0x030000FF
        v = (v | (v << 8)) & 0x0300F00F
        v = (v | (v << 4)) & 0x030C30C3
        return (v | (v << 2)) & 0x09249249

    return np.argsort(spread(cell[:, 0]) | spread(cell[:, 1]) << 1 | spread(cell[:, 2]) << 2,
                      kind="stable")


def timed(run, sync, repeats=3):
    run()
    sync()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        sync()
        samples.append(1000 * (time.perf_counter() - start))
    return statistics.median(samples)


def choice_table(backend, scale):
    device = backend == "cuda"
    if device:
        import cupy as cp
        to_array, empty, sync = cp.asarray, cp.empty, cp.cuda.runtime.deviceSynchronize
    else:
        to_array, empty, sync = np.asarray, np.empty, lambda: None
    rng = np.random.default_rng(7)
    cases = [("torus with spray", torus, 10**6, 16, "all-kNN"),
             ("uniform", uniform, 10**7, 8, "kNN"),
             ("sphere", sphere, 10**7, 8, "kNN"),
             ("64 blobs", blobs, 10**7, 8, "kNN")]
    print("data | n | k | call | AUTO | grid | kd-tree | AUTO / best (ms, build excluded)")
    for name, make, n, k, call in cases:
        n //= scale
        points = make(rng, n)
        queries = points if call == "all-kNN" else make(rng, n)
        p, q = to_array(points), to_array(queries)
        indices, distances = empty((n, k), np.int32), empty((n, k), np.float32)
        ms = {}
        for structure in STRUCTURES:
            with knn.Index(p, options=knn.Options(backend=backend, structure=structure)) as ix:
                if call == "all-kNN":
                    run = lambda: ix.query_self(k, out_indices=indices, out_distances=distances)
                else:
                    run = lambda: ix.query(q, k, out_indices=indices, out_distances=distances)
                ms[structure] = timed(run, sync)
        best = min(ms["grid"], ms["kdtree"])
        print(f"{name} | {n:.0e} | {k} | {call} | {ms['auto']:.2f} | {ms['grid']:.2f} | "
              f"{ms['kdtree']:.2f} | {ms['auto'] / best:.2f}", flush=True)


def calls_table(backend, n):
    points = torus(None, n)
    orders = {"input": points, "Morton": np.ascontiguousarray(points[morton_order(points)])}
    print("structure | order | call | k | ms (host arrays)")
    for structure in STRUCTURES:
        for order, p in orders.items():
            with knn.Index(p, options=knn.Options(backend=backend, structure=structure)) as ix:
                for k in (16, 100):
                    calls = {"kNN of the points": lambda: ix.query(p, k),
                             "all-kNN": lambda: ix.query_self(k),
                             "normals": lambda: ix.normals(k, VIEWPOINT, curvature=False),
                             "mean distances": lambda: ix.outlier_scores(k)}
                    for name, run in calls.items():
                        print(f"{structure} | {order} | {name} | {k} | "
                              f"{timed(run, lambda: None):.1f}", flush=True)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="cuda", choices=("cuda", "openmp"))
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--calls", action="store_true")
    parser.add_argument("--n", type=float, default=1e6)
    args = parser.parse_args(argv)
    if args.calls:
        calls_table(args.backend, int(args.n) // args.scale)
    else:
        choice_table(args.backend, args.scale)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
