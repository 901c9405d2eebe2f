"""The side-by-side table of the mesh benchmark (issue 48, item 8) from the
RESULT lines of bench_mesh and the peer drivers:

    python3 mesh_table.py results.txt [--markdown]

Each RESULT line: row contender build_ms query_ms checked wrong max_error.
A cell is build + query in ms (float32 closest point unless named f64). The
speedups are the fastest peer's total divided by ours (> 1: ours is faster):
  GPU x   ours-cuda against the fastest cuBQL builder, host arrays both
  GPUd x  ours-cuda-dev against the fastest cuBQL builder, device arrays both
  CPU x   ours-cuda against the fastest CPU peer (libigl, CGAL, Open3D)
  OMP x   ours-omp against the fastest CPU peer on the same cores
Every contender's distances were checked on 1000 samples against the
float64 brute force; the last column names any that failed.
"""
import sys

CPU_PEERS = ("libigl", "cgal", "open3d")


def parse(path):
    results, order = {}, []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 8 or parts[0] != "RESULT":
                continue
            row, who = parts[1], parts[2]
            build, query = float(parts[3]), float(parts[4])
            checked, wrong = int(parts[5]), int(parts[6])
            if row not in results:
                results[row] = {}
                order.append(row)
            results[row][who] = (build, query, checked, wrong, parts[7])
    return results, order


def total(cells, who):
    return cells[who][0] + cells[who][1] if who in cells else None


def fastest(cells, names):
    best = None
    for who in names:
        t = total(cells, who)
        if t is not None and (best is None or t < best[1]):
            best = (who, t)
    return best


def fmt(t):
    if t is None:
        return "-"
    return f"{t:.1f}" if t < 100 else f"{t:.0f}"


def named(best):
    """A cuBQL cell: the fastest builder's total and its name."""
    if best is None:
        return "-"
    builder = best[0][len("cubql-"):]
    return f"{fmt(best[1])} ({builder[:-4] if builder.endswith('-dev') else builder})"


def ratio(peer, ours):
    if peer is None or ours is None or ours <= 0:
        return "-"
    return f"{peer / ours:.1f}"


def main(argv):
    markdown = "--markdown" in argv
    path = [a for a in argv if not a.startswith("--")][0]
    results, order = parse(path)
    header = ["row", "ours-cuda", "cuda-dev", "cuda-f64", "ours-omp", "omp-f64",
              "cuBQL", "cuBQL-dev", "libigl", "CGAL", "Open3D",
              "GPU x", "GPUd x", "CPU x", "OMP x", "checks"]
    lines = []
    for row in order:
        cells = results[row]
        cubql = [w for w in cells if w.startswith("cubql-")]
        gpu_host = fastest(cells, [w for w in cubql if not w.endswith("-dev")])
        gpu_dev = fastest(cells, [w for w in cubql if w.endswith("-dev")])
        cpu = fastest(cells, CPU_PEERS)
        failed = [w for w, c in cells.items() if c[3] != 0 or c[2] == 0]
        ours_cuda, ours_omp = total(cells, "ours-cuda"), total(cells, "ours-omp")
        lines.append([
            row, fmt(ours_cuda), fmt(total(cells, "ours-cuda-dev")),
            fmt(total(cells, "ours-cuda-f64")), fmt(ours_omp), fmt(total(cells, "ours-omp-f64")),
            named(gpu_host), named(gpu_dev),
            fmt(total(cells, "libigl")), fmt(total(cells, "cgal")), fmt(total(cells, "open3d")),
            ratio(gpu_host[1] if gpu_host else None, ours_cuda),
            ratio(gpu_dev[1] if gpu_dev else None, total(cells, "ours-cuda-dev")),
            ratio(cpu[1] if cpu else None, ours_cuda),
            ratio(cpu[1] if cpu else None, ours_omp),
            "ok" if not failed else "FAILED: " + ",".join(failed)])
    # Columns nobody filled are left out (the CPU run has no GPU columns).
    filled = [i for i in range(1, len(header) - 1) if any(l[i] != "-" for l in lines)]
    keep = [0] + filled + [len(header) - 1]
    table = [[header[i] for i in keep]] + [[l[i] for i in keep] for l in lines]
    if markdown:
        print("| " + " | ".join(table[0]) + " |")
        print("|" + "---|" * len(keep))
        for l in table[1:]:
            print("| " + " | ".join(l) + " |")
    else:
        widths = [max(len(l[i]) for l in table) for i in range(len(keep))]
        for l in table:
            cells = [c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(l, widths))]
            print("  ".join(cells))
    print("cells: build + query ms, float32 closest point unless f64;"
          " x: fastest peer / ours (> 1: ours faster)")


if __name__ == "__main__":
    main(sys.argv[1:])
