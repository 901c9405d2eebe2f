#!/usr/bin/env bash
# The mesh side-by-side (issue 48, item 8) on the GPU machine, in one call:
# builds the library (sm_90) with bench_mesh, the peer drivers (cuBQL with
# nvcc; libigl and CGAL with g++ -march=native, OpenMP / std::thread over
# every core) from the headers in .peers/ (scripts/mesh-peers-prepare.sh
# gathers them; carry .peers), writes the meshes, scans and oracles, runs
# every contender on every row, and prints ONE table last
# (bench/peers_mesh/mesh_table.py). The results, the table and an archive of
# the logs go to $OUT if set.
#   scripts/mesh-peers.sh [MESH ...]
# MESH: torus-N, bumpy-N or PATH.off (default, in this order: torus-1e4
# torus-1e6 torus-1e7 .peers/data/bunny00.off bumpy-1e6), each against scans of MESH_SCANS
# points (default "1e6 1e7"). MESH_PEERS_BUDGET (seconds, default 450): no
# contender starts after it, so the table comes out within one call.
# MESH_OURS_ARGS: more options of bench_mesh (--closest-only: no signed rows).
# MESH_CONTENDERS: those to run (default "ours cubql libigl cgal open3d").
# MESH_OURS_DRIVER: a bench_mesh built beforehand (its library found by
# LD_LIBRARY_PATH or its run path): the library is not built here.
# MESH_PEERS_MODE=cpu (scripts/mesh-peers-cpu.sh): the machine without a GPU:
# the library without CUDA (in build-cpu, ccache's folder), no cuBQL, and
# Open3D's RaycastingScene through MESH_PEERS_PYTHON (default
# .peers-venv/bin/python, a venv with open3d-cpu) when it imports open3d.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
peers=$root/.peers
mode=${MESH_PEERS_MODE:-gpu}
if [ "$mode" = cpu ]; then
  build=${KNN_BUILD_DIR:-$root/build-cpu}
  cmake_args=(-DKNN_WITH_CUDA=OFF -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
              -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  jobs=$(nproc)
  budget=${MESH_PEERS_BUDGET:-100000}
else
  build=${KNN_BUILD_DIR:-$root/build-mesh-peers}
  cmake_args=(-G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DKNN_WITH_CUDA=ON)
  jobs=16
  budget=${MESH_PEERS_BUDGET:-450}
fi
out=${OUT:-$build/mesh-peers}
data=${MESH_DATA:-/tmp/knn-mesh-data}
read -r -a scans <<<"${MESH_SCANS:-1e6 1e7}"
meshes=("$@")
[ ${#meshes[@]} -gt 0 ] || meshes=(torus-1e4 torus-1e6 torus-1e7 "$peers/data/bunny00.off" bumpy-1e6)
python=${MESH_PEERS_PYTHON:-$root/.peers-venv/bin/python}
# $OUT gets few files (the device tool brings back at most 8): the results,
# the table, the machine, and the logs in one archive.
logs=$build/mesh-peers-logs
rm -rf "$logs"
mkdir -p "$build/peers" "$out" "$data" "$logs"
results=$out/results.txt
: >"$results"
log() { printf '[%4ds] %s\n' "$SECONDS" "$*"; }

[ -d "$peers/cuBQL" ] || { echo "no .peers/: run scripts/mesh-peers-prepare.sh and carry .peers"; exit 1; }
{
  date -u '+%Y-%m-%d %H:%M UTC'
  [ "$mode" = cpu ] || nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  echo "$(nproc) CPU threads: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  g++ --version | head -1
  [ "$mode" = cpu ] || nvcc --version | tail -1
} | tee "$out/machine.txt"

# Everything builds at once: the data generator first (it needs no library)
# so that the data are written while the rest compiles.
cpu_flags=(-O3 -march=native -std=c++17 -fopenmp -DNDEBUG -I"$root/include" -I"$root/bench")
g++ "${cpu_flags[@]}" "$root/bench/mesh_data.cpp" -o "$build/peers/bench_mesh_data" || exit 1
(
  for m in "${meshes[@]}"; do "$build/peers/bench_mesh_data" "$data" "$m" "${scans[@]}" || exit 1; done
) >"$logs/data.log" 2>&1 &
data_job=$!
ours_job=
if [ -z "${MESH_OURS_DRIVER:-}" ]; then
  (cmake -S "$root" -B "$build" "${cmake_args[@]}" -DCMAKE_BUILD_TYPE=Release -DKNN_BUILD_BENCH=ON \
     -DKNN_WITH_MPI=OFF &&
   cmake --build "$build" --target bench_mesh -j "$jobs") >"$logs/build.log" 2>&1 &
  ours_job=$!
fi
cubql_job=
if [ "$mode" != cpu ]; then
  nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr --extended-lambda -Xcompiler=-fopenmp \
    -I"$root/include" -I"$root/bench" -I"$peers/cuBQL" "$root/bench/peers_mesh/cubql_driver.cu" \
    -o "$build/peers/cubql_driver" >"$logs/build-cubql.log" 2>&1 &
  cubql_job=$!
fi
declare -A cpu_job driver
g++ "${cpu_flags[@]}" -isystem "$peers/libigl" -isystem "$peers/eigen3" \
  "$root/bench/peers_mesh/libigl_driver.cpp" -o "$build/peers/libigl_driver" >"$logs/build-libigl.log" 2>&1 &
cpu_job[libigl]=$!
g++ "${cpu_flags[@]}" -isystem "$peers/cgal" "$root/bench/peers_mesh/cgal_driver.cpp" \
  -o "$build/peers/cgal_driver" >"$logs/build-cgal.log" 2>&1 &
cpu_job[cgal]=$!

if [ -n "${MESH_OURS_DRIVER:-}" ]; then
  driver[ours]=$MESH_OURS_DRIVER
elif wait $ours_job; then
  driver[ours]=$build/bench/bench_mesh
else
  tail -30 "$logs/build.log"
  log "bench_mesh build FAILED"
fi
if [ -n "$cubql_job" ]; then
  if wait "$cubql_job"; then
    driver[cubql]=$build/peers/cubql_driver
  else
    tail -20 "$logs/build-cubql.log"
    log "cuBQL build FAILED"
  fi
fi
if [ "$mode" = cpu ] && "$python" -c 'import open3d' 2>/dev/null; then
  driver[open3d]="$python $root/bench/peers_mesh/open3d_driver.py"
fi
for peer in libigl cgal; do
  if wait "${cpu_job[$peer]}"; then
    driver[$peer]=$build/peers/${peer}_driver
  else
    tail -5 "$logs/build-$peer.log"
    log "$peer: build here failed, using .peers/prebuilt (built on the 2-core machine, -march=x86-64-v3)"
    driver[$peer]=$peers/prebuilt/${peer}_driver
  fi
done
log "builds done"
wait $data_job || { cat "$logs/data.log"; log "data FAILED"; exit 1; }
log "data written: $(grep -c MESH "$logs/data.log") meshes"

# One contender on one mesh: its RESULT lines to the results, the rest to
# its log; nothing starts past the budget.
run() {
  local name=$1 mesh=$2
  shift 2
  case " ${MESH_CONTENDERS:-ours cubql libigl cgal open3d} " in
    *" $name "*) ;;
    *) return ;;
  esac
  local left=$((budget - SECONDS))
  if [ $left -le 5 ]; then
    log "$name on $mesh: skipped (budget)"
    return
  fi
  log "$name on $mesh"
  timeout "$left" "$@" >"$logs/$name.$mesh.log" 2>&1 || log "$name on $mesh: exit $?"
  grep '^RESULT' "$logs/$name.$mesh.log" | tee -a "$results" | sed 's/^/    /'
}
for m in "${meshes[@]}"; do
  name=$(awk -v spec="$m" '$2 == spec {print $3}' "$logs/data.log")
  # shellcheck disable=SC2086  # options, split on purpose
  [ -n "${driver[ours]:-}" ] &&
    run ours "$name" "${driver[ours]}" "$data" "$m" "${scans[@]}" ${MESH_OURS_ARGS:-}
  [ -n "${driver[cubql]:-}" ] && run cubql "$name" "${driver[cubql]}" "$data" "$name" "${scans[@]}"
  run libigl "$name" "${driver[libigl]}" "$data" "$name" "${scans[@]}"
  run cgal "$name" "${driver[cgal]}" "$data" "$name" "${scans[@]}"
  # shellcheck disable=SC2086  # the interpreter and the script
  [ -n "${driver[open3d]:-}" ] && run open3d "$name" ${driver[open3d]} "$data" "$name" "${scans[@]}"
done
log "done"
echo
cat "$out/machine.txt"
tar -czf "$out/logs.tar.gz" -C "$logs" .
python3 "$root/bench/peers_mesh/mesh_table.py" "$results" | tee "$out/table.txt"
