#!/usr/bin/env bash
# GPU verification on a machine with an NVIDIA GPU (the H100 the device tool
# lends): Release build for sm_90, every test including the GPU ones,
# compute-sanitizer over every kernel, then the GPU benchmark. Prints a short
# table last.
#   scripts/gpu-check.sh [full|quick|sanitize|bench|scale|faults]
#   full (default)  build, ctest, memcheck + racecheck, benchmark
#   quick           build, ctest, benchmark --quick (10^6 points)
#   sanitize        build, memcheck + racecheck
#   bench           build, benchmark (10^7 points)
#   scale           build, 10^8-point all-kNN and the tree-split benchmark
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

if wants sanitizer "full sanitize" && command -v compute-sanitizer >/dev/null; then
  # The agreement sweep reaches every kernel (build, register, warp and heap
  # searches) on awkward sizes; racecheck, far slower, gets the small sweep.
  for tool in memcheck racecheck; do
    args=(--sweep)
    extra=()
    [ "$tool" = memcheck ] && extra=(--leak-check full)
    [ "$tool" = racecheck ] && args+=(--small)
    if compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 9 \
         "$build/bench/gpu/bench_gpu" "${args[@]}" >"$out/$tool.log" 2>&1; then
      note "compute-sanitizer $tool" "$(grep -E 'SUMMARY' "$out/$tool.log" | tail -1)"
    else
      status=1
      tail -30 "$out/$tool.log"
      note "compute-sanitizer $tool" "FAILED: $(grep -E 'SUMMARY' "$out/$tool.log" | tail -1)"
    fi
  done
fi

bench_args=()
case "$mode" in
  quick) bench_args=(--quick) ;;
  scale) bench_args=(--scale) ;;
esac
if wants bench "full quick bench scale"; then
  if "$build/bench/gpu/bench_gpu" "${bench_args[@]}" >"$out/bench_gpu.txt" 2>&1; then
    note "bench_gpu ${bench_args[*]}" "ok"
  else
    status=1
    tail -20 "$out/bench_gpu.txt"
    note "bench_gpu ${bench_args[*]}" "FAILED"
  fi
fi

echo
echo "==== gpu-check summary ($mode) ===="
printf '%s\n' "${summary[@]}"
[ -s "$out/memory_peak.txt" ] && cat "$out/memory_peak.txt"
[ -f "$out/bench_gpu.txt" ] && grep -E " ms |sweep" "$out/bench_gpu.txt" | sed 's/  */ /g'
exit $status
