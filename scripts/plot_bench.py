#!/usr/bin/env python3
"""Plots the JSON that `knn-gpgpu bench <suite>` writes (docs/cli.md).

    scripts/plot_bench.py bench_classic.json [more.json ...] --out-dir plots/

Writes, into --out-dir (default: the current folder):
  time_<suite>_<operation>.png  median time against n, one line per backend,
                                structure (and polygon set), with the min-max
                                spread of the repeats as bars (log-log); the
                                legend states every size (m, k, polygons)
  crossover_classic.png         CPU time / GPU time against n per operation,
                                from CPU and GPU figures of the same run
                                (file); above 1 the GPU wins
and prints the crossover sizes (where openmp and cuda take the same time,
interpolated in log n) as text. Only figures measured in one run are ever
divided by each other. Needs matplotlib (Debian: python3-matplotlib);
--text-only prints the text without it.
"""
import argparse
import json
import math
import os
import sys
from collections import defaultdict


def load(paths):
    """All timed records of all files, each with its suite, run and host; failed ones apart."""
    timed, failed = [], []
    for run, path in enumerate(paths):
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if doc.get("schema") != "knn-gpgpu-bench/1":
            sys.exit(f"{path}: not a knn-gpgpu bench document (schema {doc.get('schema')!r})")
        host = f"{doc.get('host_threads', '?')} CPU threads, {doc.get('cuda_devices', 0)} GPU"
        for rec in doc["results"]:
            rec = dict(rec, suite=doc["suite"], k_run=doc["k"], run=run, host=host,
                       repeats_run=doc.get("repeats"))
            (timed if rec["status"] == "KNN_OK" else failed).append(rec)
    return timed, failed


def line_key(r):
    """What one plotted line holds: a run's backend, structure and polygon set."""
    return (r["run"], r["backend"], r["structure"], r.get("polygons", ""))


def series(records):
    """(suite, operation) -> line_key -> sorted records."""
    out = defaultdict(lambda: defaultdict(list))
    for r in records:
        out[(r["suite"], r["operation"])][line_key(r)].append(r)
    for lines in out.values():
        for recs in lines.values():
            recs.sort(key=lambda r: r["n"])
    return out


def sizes_label(recs):
    """The sizes other than n that a line ran with, stated in full."""
    r0 = recs[0]
    op = r0["operation"]
    parts = []
    if r0.get("polygons"):
        parts.append(f"{r0['polygons']}: {r0['m']:,} polygons"
                     + (f", {r0['vertices']:,} vertices" if "vertices" in r0 else ""))
    elif op in ("query", "radius"):
        ms = [(r["n"], r["m"]) for r in recs]
        if all(m == n for n, m in ms):
            parts.append("m = n queries")
        elif len({m for _, m in ms}) == 1:
            parts.append(f"m = {ms[0][1]:,} queries")
        else:
            cap = max(m for _, m in ms)
            if all(m == min(n, cap) for n, m in ms):
                parts.append(f"m = min(n, {cap:,}) queries")
            else:
                parts.append("m = " + ", ".join(f"{m:,}" for _, m in ms) + " queries")
        parts.append(f"k = {r0['k'] or r0['k_run']}")
        if op == "radius":
            parts.append("r holding k on average, rows of k")
    return "; ".join(parts)


def line_label(key, recs, runs):
    run, backend, structure, polygons = key
    label = f"{backend} {structure}"
    sizes = sizes_label(recs)
    if sizes:
        label += f" ({sizes})"
    if runs > 1:
        label += f" [run {run + 1}: {recs[0]['host']}]"
    return label


def crossovers(data):
    """(suite, op, run) -> (cpu, gpu) median lists of the kd-tree, both from one run."""
    pairs = {}
    for (suite, op), lines in sorted(data.items()):
        for key, recs in lines.items():
            run, backend, structure, polygons = key
            if backend != "openmp" or structure != "kdtree":
                continue
            gpu = lines.get((run, "cuda", structure, polygons))
            if gpu:
                pairs[(suite, op, run)] = ([(r["n"], r["median_s"]) for r in recs],
                                           [(r["n"], r["median_s"]) for r in gpu])
    return pairs


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


def text_report(data):
    for (suite, op, run), (cpu, gpu) in sorted(crossovers(data).items()):
        n = crossover(cpu, gpu)
        where = f"n ~ {n:.3g}" if n else "none in the measured range"
        print(f"{suite} {op} (run {run + 1}): CPU/GPU crossover {where}")


def plot(data, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for (suite, op), lines in sorted(data.items()):
        fig, ax = plt.subplots(figsize=(7.2, 4.8))
        dims = sorted({r["dim"] for recs in lines.values() for r in recs})
        repeats = sorted({r["repeats"] for recs in lines.values() for r in recs})
        runs = len({key[0] for key in lines})  # files in this plot
        for key, recs in sorted(lines.items()):
            ns = [r["n"] for r in recs]
            med = [1e3 * r["median_s"] for r in recs]
            lo = [1e3 * (r["median_s"] - r["min_s"]) for r in recs]
            hi = [1e3 * (r["max_s"] - r["median_s"]) for r in recs]
            ax.errorbar(ns, med, yerr=[lo, hi], marker="o", capsize=3,
                        label=line_label(key, recs, runs))
        hosts = " | ".join(sorted({r["host"] for recs in lines.values() for r in recs}))
        ax.set(xscale="log", yscale="log", xlabel="n (points)", ylabel="time (ms)",
               title=f"{suite} {op}, {'/'.join(str(d) for d in dims)}-D uniform points, median "
                     f"of {'/'.join(str(r) for r in repeats)} runs, bars: min to max\n{hosts}")
        ax.title.set_fontsize(10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        written.append(os.path.join(out_dir, f"time_{suite}_{op}.png"))
        fig.savefig(written[-1], dpi=120, bbox_inches="tight")
        plt.close(fig)

    pairs = crossovers(data)
    if pairs:
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        for (suite, op, run), (cpu, gpu) in sorted(pairs.items()):
            both = sorted(set(dict(cpu)) & set(dict(gpu)))
            repeated = sum(1 for s_, o_, _ in pairs if (s_, o_) == (suite, op)) > 1
            label = f"{suite} {op}" + (f" (run {run + 1})" if repeated else "")
            ax.plot(both, [dict(cpu)[n] / dict(gpu)[n] for n in both], marker="o", label=label)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set(xscale="log", yscale="log", xlabel="n (points)",
               ylabel="CPU time / GPU time (>1: GPU faster)",
               title="kd-tree, CPU against GPU in the same run (medians)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
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
    text_report(data)
    if args.text_only:
        return
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit("matplotlib is not installed (Debian: apt-get install python3-matplotlib); "
                 "use --text-only for the text report")
    os.makedirs(args.out_dir, exist_ok=True)
    for path in plot(data, args.out_dir):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
