#!/usr/bin/env bash
# Peak device memory per configuration of the side-by-side run (issue #53,
# item 5), sampled while ../shared/peers/run.sh runs, so the timings and the
# peaks come from the same processes:
#   scripts/peers-memory.sh <run.sh arguments>
# The harness runs us_api (ours, through the public API) and cukd_bench
# (cudaKDTree) as one process per configuration, each with PEER_ONLY=<config>
# in its environment, one after the other. NVML (nvidia-smi in loop mode,
# every 5 ms) samples the card's used memory; a second loop notes when each
# process of a configuration starts and ends. A configuration's figure is the
# peak while its process ran less the card's use just before it started, so
# it includes the process's CUDA context and loaded modules. jz-tree runs
# every configuration in one JAX process that preallocates most of the card,
# so its configurations cannot be told apart this way; it is not in the table.
# The sampling costs host time: the host-array rows of a run with it read
# slower (U1M_k8 end to end 5.5 -> 15.5 ms on an H100) than a run without it,
# so take timings from a run without it.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/peers-memory}
mkdir -p "$out"
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -lms 5 \
  > "$out/nvml.csv" 2>/dev/null &
sampler=$!
(
  declare -A live
  while :; do
    now=$(date +%s.%N)
    for pid in $(pgrep -f 'us_api|cukd_bench'); do
      [ -n "${live[$pid]:-}" ] && continue
      config=$({ tr '\0' '\n' < /proc/$pid/environ; } 2>/dev/null | sed -n 's/^PEER_ONLY=//p')
      exe=$(basename "$(readlink /proc/$pid/exe 2>/dev/null)")
      [ -n "$config" ] && [ -n "$exe" ] && { live[$pid]="$exe $config"; echo "start $now $pid $exe $config"; }
    done
    for pid in "${!live[@]}"; do
      [ -d /proc/$pid ] || { echo "end $now $pid ${live[$pid]}"; unset "live[$pid]"; }
    done
    sleep 0.01
  done
) > "$out/processes.txt" &
mapper=$!
bash "$root/.peers/harness/run.sh" "$@"
status=$?
kill $sampler $mapper 2>/dev/null
wait 2>/dev/null
python3 - "$out/nvml.csv" "$out/processes.txt" <<'PY'
import collections
import datetime
import sys

samples = []
for line in open(sys.argv[1]):
    parts = [p.strip() for p in line.split(",")]
    try:
        t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        samples.append((t, int(parts[1])))
    except (ValueError, IndexError):
        continue
spans = {}
for line in open(sys.argv[2]):
    event, t, pid, exe, config = line.split()
    span = spans.setdefault(pid, [exe, config, None, None])
    span[2 if event == "start" else 3] = float(t)
rows = collections.defaultdict(dict)
for exe, config, t0, t1 in spans.values():
    if t0 is None or t1 is None:
        continue
    before = [m for t, m in samples if t0 - 1.0 <= t < t0]
    during = [m for t, m in samples if t0 <= t <= t1]
    if before and during:
        rows[config][exe] = max(during) - min(before)
print("\npeak device memory per configuration, MiB: the card's used memory (NVML, every 5 ms)")
print("while the process ran, less the card's use just before it started (so the CUDA")
print("context and loaded modules count; jz-tree is not here: one JAX process for all)")
print(f"{'config':<12} {'ours (us_api)':>14} {'cudaKDTree':>12}")
for config in sorted(rows):
    cells = [str(rows[config].get(e, "-")) for e in ("us_api", "cukd_bench")]
    print(f"{config:<12} {cells[0]:>14} {cells[1]:>12}")
PY
exit $status
