#!/usr/bin/env bash
# The neighbourhood statistics side by side (issue 49, item 4): normals and
# statistical outlier removal of the same scan-like clouds, in the same run,
# by ours and by every peer this machine has, and ONE table last (ms, the
# ratio to ours, and how each answer agrees with ours).
#   scripts/stats-peers.sh
# Contenders (bench/peers_stats/stats_peers.py says what each one times):
#   ours-omp      the OpenMP engine, through the Python binding
#   ours-cuda     the CUDA engine, when a GPU is present
#   open3d        Open3D's legacy CPU API, when the Python imports open3d
#   open3d-cuda   Open3D's tensor API on CUDA, when that Open3D has CUDA
#   torch-cuda    a PyTorch implementation (cdist + topk + eigh), when torch
#                 sees a GPU
#   pcl           PCL's NormalEstimationOMP / StatisticalOutlierRemoval
#                 (bench/peers_stats/pcl_driver.cpp, built here) when PCL's
#                 headers and libraries are found: Debian's libpcl-dev, or
#                 STATS_PCL_INCLUDE (the pcl-1.13 include folder) with the
#                 runtime libraries on the system; else the driver that
#                 scripts/stats-peers-prepare.sh put into .peers/stats/
#                 (with the PCL and FLANN libraries it needs: carry .peers
#                 to the GPU machine, which reaches no registry)
# Those absent are named and skipped. Environment:
#   STATS_SIZES        point counts (default "1e6 1e7")
#   STATS_K            neighbourhood sizes (default "16 30 100")
#   STATS_TASKS        default "normals outliers"
#   STATS_REPEATS      timed runs per cell (default 3; 1 past 20 s a run)
#   STATS_PEERS_PYTHON the interpreter (default .peers-venv/bin/python when
#                      it exists, else python3); needs numpy
#   STATS_PEERS_BUDGET seconds; no contender starts after it (default 100000,
#                      450 on a GPU machine so the table comes out in one call)
#   KNN_BUILD_DIR      the library's build folder (default build-cpu without
#                      a GPU, so ccache's folder; build-stats-peers with one)
#   OUT                where the results, the table and the logs go
# On a machine shared with other work, OMP_WAIT_POLICY=passive keeps the
# OpenMP contenders (ours, Open3D, PCL's NormalEstimationOMP) from spinning
# against each other's threads; it is passed through to every contender.
# The machine without a GPU: python3 -m venv .peers-venv &&
#   .peers-venv/bin/pip install numpy open3d-cpu; apt-get install
#   libpcl-features1.13 libpcl-filters1.13 libpcl-search1.13 libflann-dev
#   libeigen3-dev libboost-dev (and libpcl-dev, or its headers).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
gpu=0
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && gpu=1
if [ $gpu = 1 ]; then
  build=${KNN_BUILD_DIR:-$root/build-stats-peers}
  cmake_args=(-DKNN_WITH_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=${STATS_CUDA_ARCH:-90}")
  command -v ninja >/dev/null && cmake_args+=(-G Ninja)
  budget=${STATS_PEERS_BUDGET:-450}
else
  build=${KNN_BUILD_DIR:-$root/build-cpu}
  cmake_args=(-DKNN_WITH_CUDA=OFF -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
              -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  budget=${STATS_PEERS_BUDGET:-100000}
fi
out=${OUT:-$build/stats-peers}
data=${STATS_DATA:-/tmp/knn-stats-data}
read -r -a sizes <<<"${STATS_SIZES:-1e6 1e7}"
read -r -a ks <<<"${STATS_K:-16 30 100}"
read -r -a tasks <<<"${STATS_TASKS:-normals outliers}"
repeats=${STATS_REPEATS:-3}
python=${STATS_PEERS_PYTHON:-}
if [ -z "$python" ]; then
  python=python3
  [ -x "$root/.peers-venv/bin/python" ] && python=$root/.peers-venv/bin/python
fi
driver=$root/bench/peers_stats/stats_peers.py
logs=$build/stats-peers-logs
rm -rf "$logs"
mkdir -p "$out" "$data" "$logs" "$build/peers"
results=$out/results.txt
: >"$results"
log() { printf '[%5ds] %s\n' "$SECONDS" "$*"; }

{
  date -u '+%Y-%m-%d %H:%M UTC'
  [ $gpu = 1 ] && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  echo "$(nproc) CPU threads: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  echo "python: $("$python" -c 'import sys, numpy; print(sys.version.split()[0], "numpy", numpy.__version__)')"
} | tee "$out/machine.txt"

# The library (the Python binding loads it from the build folder).
(cmake -S "$root" -B "$build" "${cmake_args[@]}" -DCMAKE_BUILD_TYPE=Release -DKNN_BUILD_BENCH=OFF &&
 cmake --build "$build" --target knn_gpgpu -j "$(nproc)") >"$logs/build.log" 2>&1 &
ours_job=$!
# PCL's driver, where PCL's headers are.
pcl_include=${STATS_PCL_INCLUDE:-$(ls -d /usr/include/pcl-1.* 2>/dev/null | tail -1)}
pcl_job=
if [ -n "$pcl_include" ] && [ -d "$pcl_include/pcl" ]; then
  pcl_libs=()
  for lib in features filters search kdtree common; do
    so=$(ls /usr/lib/*/libpcl_$lib.so* 2>/dev/null | sort | tail -1)
    [ -n "$so" ] && pcl_libs+=("$so")
  done
  g++ -O3 -march=native -std=c++17 -fopenmp -DNDEBUG -isystem "$pcl_include" \
    -isystem /usr/include/eigen3 "$root/bench/peers_stats/pcl_driver.cpp" -o "$build/peers/pcl_driver" \
    "${pcl_libs[@]}" >"$logs/build-pcl.log" 2>&1 &
  pcl_job=$!
fi
for n in "${sizes[@]}"; do
  "$python" "$driver" data "$n" "$data/cloud-$(printf '%.0f' "$n").npy" || { log "data FAILED"; exit 1; }
done
log "data written: ${sizes[*]} points"
wait $ours_job || { tail -30 "$logs/build.log"; log "library build FAILED"; exit 1; }
lib=$(ls "$build"/libknn_gpgpu.so.? 2>/dev/null | head -1)
export KNN_GPGPU_LIBRARY=$lib PYTHONPATH=$root/bindings/python/src${PYTHONPATH:+:$PYTHONPATH}

declare -a contenders=(ours-omp)
absent=()
probe() { "$python" -c "$1" >/dev/null 2>&1; }
if probe 'import knn_gpgpu as k, sys; sys.exit(k.get_device_count() < 1)'; then
  contenders=(ours-cuda ours-omp)
else
  absent+=("ours-cuda (no CUDA device)")
fi
if probe 'import open3d'; then
  contenders+=(open3d)
  if probe 'import open3d, sys; sys.exit(not open3d.core.cuda.is_available())'; then
    contenders+=(open3d-cuda)
  else
    absent+=("open3d-cuda (this Open3D has no CUDA)")
  fi
else
  absent+=("open3d, open3d-cuda (no open3d for $python)")
fi
if probe 'import torch, sys; sys.exit(not torch.cuda.is_available())'; then
  contenders+=(torch-cuda)
else
  absent+=("torch-cuda (no torch with a GPU)")
fi
pcl_driver=$build/peers/pcl_driver
prebuilt=$root/.peers/stats
prebuilt_runs() {  # the driver answers its usage (exit 2), so it loads with its libraries
  [ -x "$prebuilt/pcl_driver" ] || return 1
  LD_LIBRARY_PATH=$prebuilt/lib "$prebuilt/pcl_driver" >/dev/null 2>&1
  [ $? = 2 ]
}
if [ -n "$pcl_job" ] && wait "$pcl_job"; then
  contenders+=(pcl)
elif prebuilt_runs; then
  [ -n "$pcl_job" ] && tail -5 "$logs/build-pcl.log"
  log "pcl: the driver of .peers/stats (built by scripts/stats-peers-prepare.sh)"
  pcl_driver=$prebuilt/pcl_driver
  export LD_LIBRARY_PATH=$prebuilt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  contenders+=(pcl)
else
  [ -n "$pcl_job" ] && tail -5 "$logs/build-pcl.log"
  absent+=("pcl (no PCL headers here, no .peers/stats/pcl_driver)")
fi
log "contenders: ${contenders[*]}"
for a in "${absent[@]}"; do log "absent: $a"; done
printf 'absent: %s\n' "${absent[@]}" >>"$out/machine.txt"

one() {  # contender task n k
  local who=$1 task=$2 n=$3 k=$4 left=$((budget - SECONDS))
  local cloud=$data/cloud-$n.npy stem=$data/$task-$n-$k
  if [ $left -le 5 ]; then
    log "$who $task n=$n k=$k: skipped (budget)"
    return
  fi
  local cmd=("$python" "$driver" run "$who" "$task" "$cloud" "$k" "$stem.$who.npy" --repeats "$repeats")
  if [ "$who" = pcl ]; then
    local arg=$STATS_VIEWPOINT
    [ "$task" = outliers ] && arg=2.0
    cmd=("$pcl_driver" "$task" "$cloud" "$k" "$arg" "$stem.$who.npy" "$repeats")
  fi
  timeout "$left" "${cmd[@]}" >"$logs/$who.$task.$n.$k.log" 2>&1 ||
    log "$who $task n=$n k=$k: exit $? ($(tail -1 "$logs/$who.$task.$n.$k.log"))"
  grep '^RESULT' "$logs/$who.$task.$n.$k.log" | tee -a "$results" | sed 's/^/    /'
}
STATS_VIEWPOINT=0,0,0  # stats_peers.py's VIEWPOINT
for size in "${sizes[@]}"; do
  n=$(printf '%.0f' "$size")
  for task in "${tasks[@]}"; do
    for k in "${ks[@]}"; do
      log "$task n=$n k=$k"
      for who in "${contenders[@]}"; do one "$who" "$task" "$n" "$k"; done
    done
  done
done
log "done"
cp "$data"/cloud-*.spray.npy "$out/" 2>/dev/null
tar -czf "$out/logs.tar.gz" -C "$logs" .
echo
cat "$out/machine.txt"
"$python" "$driver" table "$results" "$data" | tee "$out/table.txt"
