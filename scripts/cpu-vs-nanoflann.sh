#!/usr/bin/env bash
# The CPU engine against nanoflann 1.12.1 (issue 53, item 4): builds
# bench_cpu and bench_index_cpu (CPU only) and runs both on every row
# (uniform and clustered, k = 8 and 100; bench_index_cpu in DIMS), all
# threads, nanoflann at its best leaf size of the sweep for each row.
#   scripts/cpu-vs-nanoflann.sh [OUT]       (OUT: default BUILD/nanoflann-out)
# Needs .peers/nanoflann from scripts/nanoflann-prepare.sh (carry it to a
# machine without network); without it the benchmarks fall back to the
# system's nanoflann and say so. Environment: N, M (default 1e6), DIMS
# (3,8,16), NF_LEAVES (10,16,24,32,48,64), REPEATS (3), BUILD (build-nanoflann),
# CPU_TIME=1 to time the process's CPU time instead of the wall clock (a
# machine shared with other work; with OMP_WAIT_POLICY=passive).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-}
build=${BUILD:-$root/build-nanoflann}
n=${N:-1e6} m=${M:-1e6} dims=${DIMS:-3,8,16} leaves=${NF_LEAVES:-10,16,24,32,48,64}
repeats=${REPEATS:-3}
out=${out:-$build/nanoflann-out}
[ -f "$root/.peers/nanoflann/COMMIT" ] ||
  echo "cpu-vs-nanoflann: no .peers/nanoflann (scripts/nanoflann-prepare.sh): the system's nanoflann is used" >&2
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DKNN_WITH_CUDA=OFF -DKNN_WITH_MPI=OFF \
  -DKNN_BUILD_TESTS=OFF -DKNN_BUILD_BENCH=ON >/dev/null
cmake --build "$build" -j"$(nproc)" --target bench_cpu bench_index_cpu >/dev/null
mkdir -p "$out"
timing=()
# CPU time of the work, not of OpenMP threads spinning between regions.
[ "${CPU_TIME:-0}" = 1 ] && timing=(--cpu-time) && export OMP_WAIT_POLICY=passive
"$build/bench/bench_cpu" --n "$n" --m "$m" --k 8,100 --dist both --leaf "$leaves" \
  --repeats "$repeats" --json "$out/bench_cpu.json" ${timing[@]+"${timing[@]}"} | tee "$out/bench_cpu.txt"
"$build/bench/bench_index_cpu" --n "$n" --m "$m" --dims "$dims" --k 8,100 --dist both \
  --nanoflann-leaf "$leaves" --repeats "$repeats" ${timing[@]+"${timing[@]}"} |
  tee "$out/bench_index_cpu.txt"
echo "wrote $out/bench_cpu.{txt,json} and $out/bench_index_cpu.txt"
