#!/usr/bin/env python3
"""Plots the JSON that `knn-gpgpu bench <suite>` writes (docs/cli.md).

    scripts/plot_bench.py bench_classic.json [more.json ...] --out-dir plots/

Writes, into --out-dir (default: the current folder):
  time_<suite>_<operation>.png  median time against n, one line per
                                backend and structure (log-log)
  speedup_classic.png           our time against the published figures of
                                ../shared/BENCHMARKS.md where the
                                configuration matches (k and n), as a factor
  crossover_classic.png         CPU time / GPU time against n per
                                operation; above 1 the GPU wins
and prints the crossover sizes (where openmp and cuda take the same time,
interpolated in log n) and the speed-ups as text. Needs matplotlib
(Debian: python3-matplotlib); --text-only prints the text without it.
"""
import argparse
import json
import math
import os
import sys
from collections import defaultdict

# Published figures from ../shared/BENCHMARKS.md (one H100, 16 cores, uniform
# data, n = m, k = 8), in milliseconds. GPU query figures are kernel-only;
# ours include the host copies a C caller pays, so the "+copies" figures are
# the fair bar where the table gives them.
PUBLISHED = {
    # (operation, backend, n, k): [(label, ms), ...]
    ("build", "cuda", 10**6, 8): [("cudaKDTree", 8.6), ("2014 thesis", 46)],
    ("build", "cuda", 10**7, 8): [("cudaKDTree", 75), ("2014 thesis", 576)],
    ("query", "cuda", 10**6, 8): [("cudaKDTree +copies", 10.8), ("2014 thesis", 20)],
    ("query", "cuda", 10**7, 8): [("cudaKDTree +copies", 134), ("2014 thesis", 238)],
    ("query", "cuda", 10**6, 100): [("cudaKDTree", 110), ("2014 thesis", 217)],
    ("build", "openmp", 10**6, 8): [("nanoflann (1 thread)", 371), ("scipy cKDTree", 668)],
    ("build", "openmp", 10**7, 8): [("nanoflann (1 thread)", 6718), ("scipy cKDTree", 10426)],
    ("query", "openmp", 10**6, 8): [("nanoflann (OpenMP)", 211), ("scipy cKDTree", 370)],
    ("query", "openmp", 10**7, 8): [("nanoflann (OpenMP)", 4063)],
    ("query", "openmp", 10**6, 100): [("nanoflann (OpenMP)", 1869)],
}


def load(paths):
    """All timed records of all files, each with its suite; failed ones apart."""
    timed, failed = [], []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if doc.get("schema") != "knn-gpgpu-bench/1":
            sys.exit(f"{path}: not a knn-gpgpu bench document (schema {doc.get('schema')!r})")
        for rec in doc["results"]:
            rec = dict(rec, suite=doc["suite"], k_run=doc["k"])
            (timed if rec["status"] == "KNN_OK" else failed).append(rec)
    return timed, failed


def series(records):
    """(suite, operation) -> (backend, structure) -> sorted [(n, median_ms)]."""
    out = defaultdict(lambda: defaultdict(list))
    for r in records:
        out[(r["suite"], r["operation"])][(r["backend"], r["structure"])].append(
            (r["n"], 1e3 * r["median_s"]))
    for lines in out.values():
        for points in lines.values():
            points.sort()
    return out


def crossover(cpu, gpu):
    """The n where the CPU and GPU times meet, interpolated in log n and log
    time between the two measured sizes around it; None if they never do."""
    both = sorted(set(dict(cpu)) & set(dict(gpu)))
    ratio = [(n, dict(cpu)[n] / dict(gpu)[n]) for n in both]
    for (n0, r0), (n1, r1) in zip(ratio, ratio[1:]):
        if (r0 - 1) * (r1 - 1) <= 0 and r0 != r1:
            t = math.log(r0) / (math.log(r0) - math.log(r1))
            return math.exp(math.log(n0) + t * (math.log(n1) - math.log(n0)))
    return None


def speedups(records):
    rows = []
    for r in records:
        key = (r["operation"], r["backend"], r["n"], r["k"] or r["k_run"])
        if r["suite"] != "classic" or r["m"] not in (0, r["n"]):
            continue
        for label, ms in PUBLISHED.get(key, []):
            rows.append((f"{r['operation']} {r['backend']} n={r['n']:.0e} k={key[3]} vs {label}",
                         ms / (1e3 * r["median_s"])))
    return rows


def text_report(data, records):
    for (suite, op), lines in sorted(data.items()):
        cpu, gpu = lines.get(("openmp", "kdtree")), lines.get(("cuda", "kdtree"))
        if cpu and gpu:
            n = crossover(cpu, gpu)
            where = f"n ~ {n:.3g}" if n else "none in the measured range"
            print(f"{suite} {op}: CPU/GPU crossover {where}")
    for label, factor in speedups(records):
        print(f"speed-up {label}: {factor:.2f}x")


def plot(data, records, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for (suite, op), lines in sorted(data.items()):
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        for (backend, structure), points in sorted(lines.items()):
            ns, ms = zip(*points)
            ax.plot(ns, ms, marker="o", label=f"{backend} {structure}")
        ax.set(xscale="log", yscale="log", xlabel="n (points)", ylabel="median time (ms)",
               title=f"{suite}: {op}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        written.append(os.path.join(out_dir, f"time_{suite}_{op}.png"))
        fig.savefig(written[-1], dpi=120, bbox_inches="tight")
        plt.close(fig)

    rows = speedups(records)
    if rows:
        fig, ax = plt.subplots(figsize=(7.5, 0.4 * len(rows) + 1.5))
        labels, factors = zip(*rows)
        ax.barh(range(len(rows)), factors, color=["tab:green" if f >= 1 else "tab:red" for f in factors])
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_yticks(range(len(rows)), labels, fontsize=8)
        ax.set(xscale="log", xlabel="speed-up (published ms / our ms)",
               title="against ../shared/BENCHMARKS.md")
        written.append(os.path.join(out_dir, "speedup_classic.png"))
        fig.savefig(written[-1], dpi=120, bbox_inches="tight")
        plt.close(fig)

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    drawn = False
    for (suite, op), lines in sorted(data.items()):
        cpu, gpu = lines.get(("openmp", "kdtree")), lines.get(("cuda", "kdtree"))
        if not (cpu and gpu):
            continue
        both = sorted(set(dict(cpu)) & set(dict(gpu)))
        ax.plot(both, [dict(cpu)[n] / dict(gpu)[n] for n in both], marker="o", label=f"{suite} {op}")
        drawn = True
    if drawn:
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set(xscale="log", yscale="log", xlabel="n (points)",
               ylabel="CPU time / GPU time (>1: GPU faster)", title="CPU/GPU crossover")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        written.append(os.path.join(out_dir, "crossover_classic.png"))
        fig.savefig(written[-1], dpi=120, bbox_inches="tight")
    plt.close(fig)
    return written


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("json", nargs="+", help="files written by knn-gpgpu bench")
    parser.add_argument("--out-dir", default=".", help="where the PNG files go")
    parser.add_argument("--text-only", action="store_true", help="print the text report only")
    args = parser.parse_args()
    records, failed = load(args.json)
    for r in failed:
        print(f"not timed: {r['suite']} {r['operation']} {r['backend']} {r['structure']} "
              f"n={r['n']}: {r['status']}")
    data = series(records)
    text_report(data, records)
    if args.text_only:
        return
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit("matplotlib is not installed (Debian: apt-get install python3-matplotlib); "
                 "use --text-only for the text report")
    os.makedirs(args.out_dir, exist_ok=True)
    for path in plot(data, records, args.out_dir):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
