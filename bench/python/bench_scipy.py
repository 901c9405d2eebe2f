"""knn_gpgpu.KDTree against scipy.spatial.cKDTree and pykdtree, same run.

    python bench/python/bench_scipy.py [--sizes 1000,100000] [--repeat 5]
                                       [--workers 1] [--clock cpu]

Prints, per operation and size, the median of --repeat times (ms) of each
library (build excluded) and the ratio scipy / ours (> 1: ours faster).
Uniform points in the unit cube (3-D); queries: the points themselves.
--workers: the threads of ours and of scipy's calls that take ``workers``
(default -1: all cores; another count also sets OMP_NUM_THREADS, which
the library's default follows); --clock cpu measures the process's CPU time
instead of wall time (steadier on a loaded machine; meaningful with
--workers 1). pykdtree has only k-nearest queries. Missing libraries are
left out. Then the binding's own cost of a call: a 1-point query on a
4-point tree, less the C call it makes (knn_index_query_f64 with the same
buffers, called directly), in microseconds.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np

import knn_gpgpu as knn

try:
    from scipy.spatial import cKDTree
except ImportError:  # pragma: no cover
    cKDTree = None
try:
    from pykdtree.kdtree import KDTree as PyKDTree
except ImportError:  # pragma: no cover
    PyKDTree = None


def median_ms(fn: Callable[[], Any], repeat: int, clock: Callable[[], float]) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return float(np.median(times)) * 1e3


def binding_overhead_us(clock: Callable[[], float], calls: int = 20000) -> Dict[str, float]:
    """A 1-point k = 1 query on a 4-point float64 tree through KDTree.query,
    and the C call alone (knn_index_query_f64, buffers made once), per call."""
    pts = np.random.default_rng(2).random((4, 3))
    tree = knn.KDTree(pts)
    one = pts[1].copy()
    ind = np.empty(1, np.int32)
    dist = np.empty(1, np.float64)
    lib = knn._library.native()
    query = lib.untyped("knn_index_query_f64")
    handle = tree.index._acquire()
    try:
        args = (handle, one.ctypes.data, 1, 1, ind.ctypes.data, dist.ctypes.data, None)
        c_us = median_ms(lambda: [query(*args) for _ in range(calls)], 5, clock) * 1e3 / calls
    finally:
        tree.index._release()
    py_us = median_ms(lambda: [tree.query(one) for _ in range(calls)], 5, clock) * 1e3 / calls
    return {"KDTree.query": py_us, "C call": c_us, "binding": py_us - c_us}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,100000")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--workers", type=int, default=-1)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = ap.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    w = args.workers
    if w != -1:  # query_pairs and count_neighbors take no workers: the library's default
        os.environ["OMP_NUM_THREADS"] = str(w)  # read when the library loads, below
    rng = np.random.default_rng(1)
    rows: List[List[str]] = []
    for n in [int(s) for s in args.sizes.split(",")]:
        pts = rng.random((n, 3))
        r = (8.0 / n) ** (1 / 3) * 0.5          # about 4 neighbours per ball
        radii = r * (0.5 + rng.random(n))        # per-point radii
        ours = knn.KDTree(pts)
        sci = cKDTree(pts) if cKDTree else None
        pyk = PyKDTree(pts) if PyKDTree else None
        one = pts[n // 2]
        cases: Dict[str, Dict[str, Optional[Callable[[], Any]]]] = {
            "query 1 point k=1 (x1000)": {
                "ours": lambda: [ours.query(one) for _ in range(1000)],
                "scipy": (lambda: [sci.query(one) for _ in range(1000)]) if sci else None,
                "pykdtree": (lambda: [pyk.query(one[None], k=1) for _ in range(1000)])
                if pyk else None},
            "query all k=8": {
                "ours": lambda: ours.query(pts, k=8, workers=w),
                "scipy": (lambda: sci.query(pts, k=8, workers=w)) if sci else None,
                "pykdtree": (lambda: pyk.query(pts, k=8)) if pyk else None},
            "query_ball_point per-point r": {
                "ours": lambda: ours.query_ball_point(pts, radii, workers=w),
                "scipy": (lambda: sci.query_ball_point(pts, radii, workers=w)) if sci else None,
                "pykdtree": None},
            "query_pairs": {
                "ours": lambda: ours.query_pairs(r),
                "scipy": (lambda: sci.query_pairs(r)) if sci else None,
                "pykdtree": None},
            "query_pairs ndarray": {
                "ours": lambda: ours.query_pairs(r, output_type="ndarray"),
                "scipy": (lambda: sci.query_pairs(r, output_type="ndarray")) if sci else None,
                "pykdtree": None},
            "count_neighbors 4 radii": {
                "ours": lambda: ours.count_neighbors(ours, [r / 2, r, 1.5 * r, 2 * r]),
                "scipy": (lambda: sci.count_neighbors(sci, [r / 2, r, 1.5 * r, 2 * r]))
                if sci else None,
                "pykdtree": None},
        }
        for name, fns in cases.items():
            got = {lib: (median_ms(fn, args.repeat, clock) if fn else None)
                   for lib, fn in fns.items()}
            ratio = (got["scipy"] / got["ours"]) if got["scipy"] and got["ours"] else None
            rows.append([name, str(n)] + ["%.2f" % v if v is not None else "-"
                                          for v in got.values()]
                        + ["%.2f" % ratio if ratio else "-"])
    head = ["operation", "n", "ours ms", "scipy ms", "pykdtree ms", "scipy/ours"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()
    print("binding overhead per call (us, %s clock): %s" % (
        args.clock, ", ".join("%s %.2f" % kv for kv in binding_overhead_us(clock).items())))


if __name__ == "__main__":
    main()
