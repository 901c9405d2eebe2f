"""knn_gpgpu.KDTree against scipy.spatial.cKDTree and pykdtree, same run.

    python bench/python/bench_scipy.py [--sizes 1000,100000] [--repeat 3]

Prints, per operation and size, the best of --repeat wall times (ms) of each
library (build excluded) and the ratio scipy / ours (> 1: ours faster).
Uniform points in the unit cube (3-D); queries: the points themselves.
pykdtree has only k-nearest queries. Missing libraries are left out.
"""

from __future__ import annotations

import argparse
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


def best(fn: Callable[[], Any], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
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
                "ours": lambda: ours.query(pts, k=8),
                "scipy": (lambda: sci.query(pts, k=8, workers=-1)) if sci else None,
                "pykdtree": (lambda: pyk.query(pts, k=8)) if pyk else None},
            "query_ball_point per-point r": {
                "ours": lambda: ours.query_ball_point(pts, radii),
                "scipy": (lambda: sci.query_ball_point(pts, radii, workers=-1)) if sci else None,
                "pykdtree": None},
            "query_pairs": {
                "ours": lambda: ours.query_pairs(r),
                "scipy": (lambda: sci.query_pairs(r)) if sci else None,
                "pykdtree": None},
            "count_neighbors 4 radii": {
                "ours": lambda: ours.count_neighbors(ours, [r / 2, r, 1.5 * r, 2 * r]),
                "scipy": (lambda: sci.count_neighbors(sci, [r / 2, r, 1.5 * r, 2 * r]))
                if sci else None,
                "pykdtree": None},
        }
        for name, fns in cases.items():
            got = {lib: (best(fn, args.repeat) if fn else None) for lib, fn in fns.items()}
            ratio = (got["scipy"] / got["ours"]) if got["scipy"] and got["ours"] else None
            rows.append([name, str(n)] + ["%.2f" % v if v is not None else "-"
                                          for v in got.values()]
                        + ["%.2f" % ratio if ratio else "-"])
    head = ["operation", "n", "ours ms", "scipy ms", "pykdtree ms", "scipy/ours"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
