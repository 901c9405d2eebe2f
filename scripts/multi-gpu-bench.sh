#!/usr/bin/env bash
# One device against every device of the host (issue #24), on a machine with
# one or more NVIDIA GPUs: Release build for sm_90, the multi-device tests
# (a two-way split forced onto one GPU; two devices where present), then
# bench/gpu/bench_multi_gpu.cu. Prints the devices, the date and the table
# last (speedup = one device / all devices); results and logs go to $OUT
# (default: <build>/out).
#   scripts/multi-gpu-bench.sh [quick|full|bench|test] [bench_multi_gpu args...]
#   full (default)  build, tests, 10^8-point all-kNN (k = 100) into host
#                   memory and 10^7 x 10^7 (k = 8) on device arrays
#   quick           build, tests, the same rows at 10^6 points
#   bench           build, the full benchmark only
#   test            build, the tests only
# Sizes: pass bench_multi_gpu's options after the mode, e.g.
#   scripts/multi-gpu-bench.sh bench --n-self 2e7 --rows self,device --repeats 5
# Host memory for the full run: about n * k * 4 bytes of rows (40 GB at 10^8,
# k = 100) plus the points and the classic tree (4 GB).
set -uo pipefail
mode=${1:-full}
[ $# -gt 0 ] && shift
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KNN_BUILD_DIR:-$root/build-multi-gpu}
out=${OUT:-$build/out}
mkdir -p "$out"

case $mode in
  full | bench) size_args=() ;;
  quick) size_args=(--quick) ;;
  test) size_args=() ;;
  *) echo "usage: $0 [quick|full|bench|test] [bench_multi_gpu args...]" >&2; exit 2 ;;
esac

date -u '+%Y-%m-%d %H:%M UTC' | tee "$out/date.txt"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader |
  tee "$out/devices.txt" || true
nvidia-smi topo -m >"$out/topology.txt" 2>&1 || true

if ! { cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
         -DCMAKE_CUDA_ARCHITECTURES=90 -DKNN_WITH_CUDA=ON ${KNN_CMAKE_ARGS:-} >"$out/configure.log" 2>&1 &&
       cmake --build "$build" -j "$(nproc)" --target test_multi_gpu test_multi_device_cpu \
         bench_multi_gpu >"$out/build.log" 2>&1; }; then
  tail -40 "$out/configure.log" "$out/build.log"
  echo "build FAILED"
  exit 1
fi

status=0
if [ "$mode" != bench ]; then
  if (cd "$build" && ctest -R 'test_multi_gpu|test_multi_device_cpu' --output-on-failure \
        --timeout 900 >"$out/ctest.log" 2>&1); then
    echo "tests: $(grep -E 'tests passed|tests failed' "$out/ctest.log" | tail -1)," \
         "$(grep -c '(Skipped)' "$out/ctest.log") skipped (the two-device tests skip on one GPU)"
  else
    status=1
    grep -E 'Failed|\*\*\*|tests passed|tests failed' "$out/ctest.log" | tail -30
  fi
fi

if [ "$mode" != test ]; then
  if "$build/bench/gpu/bench_multi_gpu" "${size_args[@]}" "$@" 2>&1 | tee "$out/bench_multi_gpu.txt";
     [ "${PIPESTATUS[0]}" -ne 0 ]; then
    status=1
    echo "bench_multi_gpu FAILED (see $out/bench_multi_gpu.txt)"
  fi
fi
exit $status
