#!/usr/bin/env bash
# GPU verification on a machine with an NVIDIA GPU (the H100 the device tool
# lends): Release build for sm_90, every test including the GPU ones,
# compute-sanitizer over every kernel, then the GPU benchmark. Prints a short
# table last.
#   scripts/gpu-check.sh [full|quick|sanitize|memcheck|racecheck|bench|scale|report|faults]
#   full (default)  build, ctest, memcheck + racecheck, benchmark
#   quick           build, ctest, benchmark --quick (10^6 points)
#   sanitize        build, memcheck + racecheck over every GPU test binary
#                   and the classic agreement sweep (memcheck, racecheck:
#                   one of the two)
#   bench           build, benchmark (10^7 points)
#   scale           build, 10^8-point all-kNN and the tree-split benchmark
#   report          build, `knn-gpgpu bench classic|index|pip` JSON for
#                   scripts/plot_bench.py (the README's plots)
#   faults          build, device allocation fault injection, memory-limit
#                   and soak tests (test_fault_injection), cancellation
# KNN_CMAKE_ARGS adds configure options; results and logs go to $OUT if set.
set -uo pipefail
mode=${1:-full}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KNN_BUILD_DIR:-$root/build-gpu-check}
out=${OUT:-$build/out}
mkdir -p "$out"
summary=()
note() { summary+=("$(printf '%-34s %s' "$1" "$2")"); }
wants() { case " $2 " in *" $mode "*) return 0 ;; *) return 1 ;; esac; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
if cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
     -DKNN_WITH_CUDA=ON ${KNN_CMAKE_ARGS:-} >"$out/configure.log" 2>&1 &&
   cmake --build "$build" -j "$(nproc)" >"$out/build.log" 2>&1; then
  note "build (sm_90)" "ok"
else
  tail -40 "$out/configure.log" "$out/build.log"
  note "build (sm_90)" "FAILED"
  printf '%s\n' "${summary[@]}"
  exit 1
fi

status=0
if wants ctest "full quick" && [ -d "$build/tests" ]; then
  if (cd "$build" && ctest --output-on-failure -j 4 --timeout 900 >"$out/ctest.log" 2>&1); then
    note "ctest (GPU tests included)" "$(grep -E 'tests passed|tests failed' "$out/ctest.log" | tail -1)"
  else
    status=1
    grep -E 'Failed|\*\*\*|tests passed|tests failed' "$out/ctest.log" | tail -30
    note "ctest (GPU tests included)" "FAILED: $(grep -E 'tests failed' "$out/ctest.log" | tail -1)"
  fi
  note "ctest skipped" "$(grep -c '(Skipped)' "$out/ctest.log")"
  # The measured peaks against the helpers, for bench/RESULTS.md.
  [ -x "$build/tests/test_gpu_memory_peak" ] &&
    "$build/tests/test_gpu_memory_peak" 2>&1 | grep -E "build peak" | sed 's/^/  /' >"$out/memory_peak.txt"
fi

if wants faults "faults"; then
  # Every device allocation made to fail in turn (KNN_FAULT_DEVICE_ALLOC):
  # clean errors or the CPU path, no device memory leaked.
  for t in test_fault_injection test_cancel; do
    if "$build/tests/$t" >"$out/$t.log" 2>&1; then
      note "$t" "$(grep -E '^\[  PASSED  \]|SKIPPED' "$out/$t.log" | head -1)"
    else
      status=1
      tail -30 "$out/$t.log"
      note "$t" "FAILED"
    fi
  done
fi

# compute-sanitizer over the GPU tests and the classic agreement sweep (400
# cases, every classic kernel on awkward sizes).
#   memcheck (with the leak check): every GPU test binary, all of it, except
#     the tests that measure device memory (the tool's own allocations move
#     it) and the million-point cases (the same kernels run in the smaller
#     cases; instrumented, they would take hours);
#   racecheck (shared-memory hazards; instrumentation costs 100x more): the
#     cases that reach every kernel with shared memory (warp lists of 33 and
#     1024, the grid's shared lists, brute-force tiles, the PIP frontier and
#     thread paths) and the small sweep.
declare -A racecheck_filter=(
  [test_index_gpu]='Data/KdTreeGpuDist.*:Dims/KdTreeGpuDims.*/2'
  [test_grid_gpu]='AllDistributions/GridGpu.KnnMatchesOpenMpAndOracle/Uniform:AllDistributions/GridGpu.SelfMatchesOracle/Clustered'
  [test_index_brute_force_gpu]='Dims/BruteForceGpuDim.KnnMatchesOracle/2:BruteForceGpu.SelfMatchesOracle'
  [test_pip_gpu]='PipGpu.UniformPointsAssortedPolygonsMatchOracle:PipGpu.ManyFewEdgePolygonsTakeTheThreadPathAndMatchOracle:PipGpu.SquareTilingPutsEveryGridPointInOneSquare'
)
memcheck_tests=(test_index_gpu test_index_brute_force_gpu test_grid_gpu test_pip_gpu
                test_gpu_agreement test_fault_injection test_cancel)
memcheck_skip='GpuMemoryPeak.*:*MemoryHelperIsHonest*:*SoakLeavesDeviceMemoryFlat*'
memcheck_skip+=':*MillionPointsMillionQueries*:*MillionsOfPointsStayWithinTheMemoryModel*'
# Errors a sanitizer log reports (memcheck's ERROR SUMMARY, racecheck's
# RACECHECK SUMMARY; leaks count as errors under --leak-check full).
sanitizer_errors() {
  grep -oE '(ERROR|RACECHECK) SUMMARY: [0-9]+' "$1" | awk '{s += $3} END {print s + 0}'
}
sanitize_with() {
  local tool=$1 extra=() sweep=(--sweep) failed=0 errors=0 runs=0 t filter
  local tests=("${memcheck_tests[@]}")
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  [ "$tool" = racecheck ] && sweep+=(--small) && tests=("${!racecheck_filter[@]}")
  for t in "${tests[@]}" sweep; do
    local log="$out/$tool.$t.log" cmd=("$build/bench/gpu/bench_gpu" "${sweep[@]}")
    if [ "$t" != sweep ]; then
      [ -x "$build/tests/$t" ] || continue
      filter="-$memcheck_skip"
      [ "$tool" = racecheck ] && filter=${racecheck_filter[$t]}
      cmd=("$build/tests/$t" --gtest_filter="$filter")
    fi
    runs=$((runs + 1))
    if ! compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 9 "${cmd[@]}" >"$log" 2>&1; then
      failed=$((failed + 1))
      tail -30 "$log"
    fi
    errors=$((errors + $(sanitizer_errors "$log")))
  done
  [ $failed -eq 0 ] || status=1
  note "compute-sanitizer $tool" \
       "$([ $failed -eq 0 ] && echo ok || echo FAILED): $runs runs, $errors reports, $failed failed"
}
if command -v compute-sanitizer >/dev/null; then
  wants sanitizer "full sanitize memcheck" && sanitize_with memcheck
  wants sanitizer "full sanitize racecheck" && sanitize_with racecheck
fi

if wants report "report"; then
  # The JSON behind the README's plots (scripts/plot_bench.py).
  cli="$build/tools/knn-gpgpu"
  for suite in classic index pip; do
    sizes=10000,100000,1000000,10000000
    [ "$suite" = index ] && sizes=10000,100000,1000000
    args=(bench "$suite" --sizes "$sizes" --out "$out/bench_$suite.json")
    [ "$suite" = classic ] && args+=(--k 8)
    # Real polygons beside the star polygons: Natural Earth's countries.
    [ "$suite" = pip ] && args+=(--polygons "$root/bench/data/naturalearth_lowres.geojson")
    if "$cli" "${args[@]}" >"$out/bench_$suite.log" 2>&1; then
      note "knn-gpgpu bench $suite" "ok ($sizes)"
    else
      status=1
      tail -20 "$out/bench_$suite.log"
      note "knn-gpgpu bench $suite" "FAILED"
    fi
  done
fi

echo
echo "==== gpu-check summary ($mode) ===="
printf '%s\n' "${summary[@]}"
[ -s "$out/memory_peak.txt" ] && cat "$out/memory_peak.txt"
[ -f "$out/bench_gpu.txt" ] && grep -E " ms |sweep" "$out/bench_gpu.txt" | sed 's/  */ /g'
exit $status
