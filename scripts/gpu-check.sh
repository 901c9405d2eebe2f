#!/usr/bin/env bash
# GPU verification on a machine with an NVIDIA GPU (the H100 the device tool
# lends): Release build for sm_90, every test including the GPU ones,
# compute-sanitizer memcheck on a small GPU set, then the GPU benchmark.
# Prints a short table last. Usage: scripts/gpu-check.sh [quick|full] (full by default)
#   quick: build, GPU tests, benchmark --quick;  full: everything.
set -uo pipefail
mode=${1:-full}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KNN_BUILD_DIR:-$root/build-gpu-check}
out=${OUT:-$build/out}
mkdir -p "$out"
summary=()
note() { summary+=("$(printf '%-34s %s' "$1" "$2")"); }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
jobs=$(nproc)
if cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
     -DKNN_WITH_CUDA=ON ${KNN_CMAKE_ARGS:-} >"$out/configure.log" 2>&1 &&
   cmake --build "$build" -j "$jobs" >"$out/build.log" 2>&1; then
  note "build (sm_90)" "ok"
else
  tail -40 "$out/build.log" "$out/configure.log"
  note "build (sm_90)" "FAILED"
  printf '%s\n' "${summary[@]}"
  exit 1
fi

status=0
if [ -f "$build/CTestTestfile.cmake" ] && [ -d "$build/tests" ]; then
  if (cd "$build" && ctest --output-on-failure -j 4 --timeout 900 >"$out/ctest.log" 2>&1); then
    note "ctest (all, GPU included)" "$(grep -E 'tests passed|tests failed' "$out/ctest.log" | tail -1)"
  else
    status=1
    grep -E 'Failed|\*\*\*|tests passed|tests failed' "$out/ctest.log" | tail -30
    note "ctest (all, GPU included)" "FAILED: $(grep -E 'tests failed' "$out/ctest.log" | tail -1)"
  fi
  skipped=$(grep -c "Skipped" "$out/ctest.log" || true)
  note "ctest skipped" "$skipped"
fi

if [ "$mode" = full ] && command -v compute-sanitizer >/dev/null; then
  gpu_test=$(ls "$build"/tests/test_gpu_agreement 2>/dev/null)
  if [ -n "$gpu_test" ]; then
    if compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 \
         "$gpu_test" --gtest_filter='*Small*:*Sweep*' >"$out/memcheck.log" 2>&1; then
      note "compute-sanitizer memcheck" "$(grep -E 'ERROR SUMMARY' "$out/memcheck.log" | tail -1)"
    else
      status=1
      tail -30 "$out/memcheck.log"
      note "compute-sanitizer memcheck" "FAILED: $(grep -E 'ERROR SUMMARY' "$out/memcheck.log" | tail -1)"
    fi
  fi
fi

bench_args=()
[ "$mode" = quick ] && bench_args+=(--quick)
if "$build/bench/gpu/bench_gpu" "${bench_args[@]}" | tee "$out/bench_gpu.txt"; then
  note "bench_gpu" "ok"
else
  status=1
  note "bench_gpu" "FAILED"
fi

echo
echo "==== gpu-check summary ($mode) ===="
printf '%s\n' "${summary[@]}"
grep -E "ms " "$out/bench_gpu.txt" | sed 's/  */ /g' | tail -40
exit $status
