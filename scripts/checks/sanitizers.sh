#!/usr/bin/env bash
# Sanitizer check (run by scripts/test.sh after ctest, and on its own).
#
#   1. ASan + UBSan: a CPU-only build (-O1 -g1) in build-asan/ with
#      -fsanitize=address,undefined -fno-sanitize-recover=undefined, then
#      ctest -LE large (labels cpu, abi, gpu, which skips, and example_c),
#      leak detection on; any report fails.
#   2. TSan: test_concurrency, test_cancel, test_api_misc and test_stress in
#      build-tsan/ with -fsanitize=thread; the concurrency tests, the
#      cancellation tests (a flag raised by another thread while a call
#      polls it), the per-thread last-error tests and the 16-thread stress
#      test (KNN_STRESS_SECONDS=3)
#      run with OMP_NUM_THREADS=1 (libgomp is not instrumented: see
#      docs/sanitizers.md); any report fails.
# Each build first proves that its sanitizer is live: a small canary program
# with a known bug, built with the same compiler and flags, must be reported.
# Prints a summary and exits non-zero when a step fails. docs/sanitizers.md
# says what runs, the options, the exclusions and the measured time.
#
# Environment:
#   KNN_JOBS             parallel build and test jobs (default: all cores)
#   KNN_SANITIZER_ROOT   where build-asan/ and build-tsan/ go (default: the
#                        repository root, where /build*/ is git-ignored)
#   KNN_SANITIZER_STEPS  subset to run, e.g. "tsan" (default: "asan tsan")
#   CXX, CC              compilers (default: what CMake finds; tested with g++ 12)
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
JOBS=${KNN_JOBS:-$(nproc 2>/dev/null || echo 2)}
SAN_ROOT=${KNN_SANITIZER_ROOT:-$ROOT}
STEPS=${KNN_SANITIZER_STEPS:-asan tsan}
ASAN_DIR=$SAN_ROOT/build-asan
TSAN_DIR=$SAN_ROOT/build-tsan
START=$SECONDS

say() { printf '[sanitizers] %s\n' "$*"; }
want() { [[ " $STEPS " == *" $1 "* ]]; }

results=()
failed=0
record() { # record <step> <ok|FAILED> <seconds> [note]
  results+=("$(printf '%-6s %-7s %4ss  %s' "$1" "$2" "$3" "${4:-}")")
  [ "$2" = ok ] || failed=1
}

# Newer kernels randomize mmap with more entropy than gcc 12's TSan runtime
# expects ("unexpected memory mapping"); running without address-space
# randomization avoids it. Used for the TSan run only, when available.
norandom=()
if command -v setarch >/dev/null 2>&1 && setarch "$(uname -m)" -R true 2>/dev/null; then
  norandom=(setarch "$(uname -m)" -R)
fi

# configure_build <dir> <sanitizer flags> [targets...]
configure_build() {
  local dir=$1 flags=$2
  shift 2
  # KNN_WITH_MPI=OFF: Open MPI's own allocations (kept until exit by design)
  # would be reported as leaks; the MPI library is checked by scripts/checks/mpi.sh.
  # -O1 -g1 (line tables): half the compile time of -O2 -g, which made this
  # the longest stage of CI; reports keep their file:line stacks.
  cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
    -DKNN_WITH_CUDA=OFF -DKNN_WITH_MPI=OFF -DKNN_BUILD_BENCH=OFF -DKNN_BUILD_TESTS=ON \
    "-DCMAKE_C_FLAGS=$flags" "-DCMAKE_CXX_FLAGS=$flags" \
    "-DCMAKE_EXE_LINKER_FLAGS=$flags" "-DCMAKE_SHARED_LINKER_FLAGS=$flags" \
    "-DCMAKE_MODULE_LINKER_FLAGS=$flags" >"$dir/sanitizers-configure.log" 2>&1 || {
    cat "$dir/sanitizers-configure.log"
    say "configure $dir failed"
    return 1
  }
  local targets=()
  (($#)) && targets=(--target "$@")
  cmake --build "$dir" --parallel "$JOBS" "${targets[@]}" || {
    say "build $dir failed"
    return 1
  }
}

# canary <dir> <flags> <expected report regex> <source> [runner...]: the
# sanitizer must catch the bug in <source>, else the check proves nothing.
canary() {
  local dir=$1 flags=$2 expect=$3 src=$4
  shift 4
  local name=${flags%% *}
  local cxx
  cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$dir/CMakeCache.txt")
  printf '%s\n' "$src" >"$dir/canary.cpp"
  # shellcheck disable=SC2086 # flags are words
  "${cxx:-c++}" -g -O1 $flags -pthread "$dir/canary.cpp" -o "$dir/canary" >"$dir/canary.log" 2>&1 || {
    cat "$dir/canary.log"
    say "canary: cannot build with $flags"
    return 1
  }
  if "$@" "$dir/canary" >>"$dir/canary.log" 2>&1; then
    say "canary: the program with a known bug exited 0 under $flags"
    return 1
  fi
  grep -Eq "$expect" "$dir/canary.log" || {
    cat "$dir/canary.log"
    say "canary: no '$expect' report under $flags"
    return 1
  }
  say "canary: $name caught the planted bug ($expect)"
}

# Sanitizer reports in a log: fails the step even if the test itself passed
# (a report printed from a child process, or after the test's own verdict).
reports_in() {
  grep -E 'ERROR: (Address|Leak|Thread|UndefinedBehavior)Sanitizer|WARNING: ThreadSanitizer|runtime error:|SUMMARY: (Address|Leak|Thread|UndefinedBehavior)Sanitizer' "$1"
}

# ---- 1. ASan + UBSan -------------------------------------------------------------
if want asan; then
  t0=$SECONDS
  say "ASan+UBSan build in $ASAN_DIR ($JOBS jobs)"
  mkdir -p "$ASAN_DIR"
  flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
  if configure_build "$ASAN_DIR" "$flags" &&
    canary "$ASAN_DIR" "$flags" 'heap-buffer-overflow' \
      '#include <vector>
int main(int argc, char**) { std::vector<int> v(4); return v.data()[argc + 3]; }' &&
    canary "$ASAN_DIR" "$flags" 'runtime error: signed integer overflow' \
      '#include <climits>
int main(int argc, char**) { volatile int x = INT_MAX - 1 + argc; return x + argc > 0 ? 0 : 2; }'; then
    build_s=$((SECONDS - t0))
    # Every test but label large: cpu, abi (the dlopen tests included: the
    # executables carry the ASan runtime, so loading the ASan library works),
    # gpu (they skip in this CUDA-less build, after the no-device path ran)
    # and the unlabelled example_c. Excluded: large (test_large_offsets: 8.6 GB
    # of results, far more with ASan's shadow memory and redzones).
    export ASAN_OPTIONS=detect_leaks=1:check_initialization_order=1:strict_init_order=1
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    log=$ASAN_DIR/sanitizers-ctest.log
    say "ctest -LE large (ASAN_OPTIONS=$ASAN_OPTIONS UBSAN_OPTIONS=$UBSAN_OPTIONS)"
    t1=$SECONDS
    (cd "$ASAN_DIR" && ctest --output-on-failure --parallel "$JOBS" -LE large) \
      >"$log" 2>&1
    rc=$?
    tail -n 25 "$log"
    ntests=$(grep -Eo 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | grep -Eo '[0-9]+$')
    if [ "$rc" -ne 0 ]; then
      record asan FAILED $((SECONDS - t0)) "ctest failed (log: $log)"
    elif reports_in "$log" >/dev/null; then
      reports_in "$log" | head -n 20
      record asan FAILED $((SECONDS - t0)) "sanitizer reports (log: $log)"
    elif [ -z "$ntests" ] || [ "$ntests" -eq 0 ]; then
      record asan FAILED $((SECONDS - t0)) "no tests ran (log: $log)"
    else
      record asan ok $((SECONDS - t0)) "$ntests tests, 0 reports (build ${build_s}s, ctest $((SECONDS - t1))s)"
    fi
    unset ASAN_OPTIONS UBSAN_OPTIONS
  else
    record asan FAILED $((SECONDS - t0)) "configure/build/canary failed"
  fi
fi

# ---- 2. TSan ----------------------------------------------------------------------------
if want tsan; then
  t0=$SECONDS
  say "TSan build in $TSAN_DIR ($JOBS jobs): test_concurrency test_cancel test_api_misc test_stress"
  mkdir -p "$TSAN_DIR"
  flags="-fsanitize=thread -fno-omit-frame-pointer"
  # The canary's second write waits, through a relaxed flag (no
  # happens-before), until the first is done, so the race is in TSan's
  # shadow every run: two increments at once were missed about 1 run in 60
  # (CI, 2026-12-02), a loop of 10^4 each 1 in 200; this missed 0 of 300.
  if configure_build "$TSAN_DIR" "$flags" test_concurrency test_cancel test_api_misc test_stress &&
    canary "$TSAN_DIR" "$flags" 'WARNING: ThreadSanitizer: data race' \
      '#include <atomic>
#include <thread>
int counter;
std::atomic<int> written{0};
int main() {
  std::thread t([] { counter = 1; written.store(1, std::memory_order_relaxed); });
  while (written.load(std::memory_order_relaxed) == 0) {}
  counter = 2;
  t.join();
  return 0;
}' \
      "${norandom[@]}"; then
    build_s=$((SECONDS - t0))
    # OMP_NUM_THREADS=1: libgomp is not built with TSan, so its barriers and
    # thread pool are invisible to it and every OpenMP region with more than
    # one thread reports false races. With one OpenMP thread per host thread
    # only the host threads race: exactly what these tests are about.
    export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:history_size=4
    export KNN_STRESS_SECONDS=${KNN_STRESS_SECONDS:-3}
    log=$TSAN_DIR/sanitizers-tsan.log
    : >"$log"
    t1=$SECONDS
    rc=0
    ntests=0
    limit=()
    command -v timeout >/dev/null 2>&1 && limit=(timeout 600)
    for run in "test_concurrency:*" "test_cancel:*" "test_api_misc:LastError.*" "test_stress:*"; do
      exe=${run%%:*} filter=${run#*:}
      say "${norandom[*]:+${norandom[*]} }$exe --gtest_filter=$filter (OMP_NUM_THREADS=1, TSAN_OPTIONS=$TSAN_OPTIONS)"
      # ctest is not in the way here: a time limit of our own, so that a
      # deadlock fails the check instead of hanging CI.
      "${limit[@]}" "${norandom[@]}" "$TSAN_DIR/tests/$exe" "--gtest_filter=$filter" \
        >"$log.part" 2>&1 || rc=1
      n=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log.part")
      ntests=$((ntests + ${n:-0}))
      tail -n 3 "$log.part"
      cat "$log.part" >>"$log"
      rm -f "$log.part"
    done
    if [ "$rc" -ne 0 ]; then
      reports_in "$log" | head -n 20
      record tsan FAILED $((SECONDS - t0)) "a test failed (log: $log)"
    elif reports_in "$log" >/dev/null; then
      reports_in "$log" | head -n 20
      record tsan FAILED $((SECONDS - t0)) "sanitizer reports (log: $log)"
    elif [ "$ntests" -eq 0 ]; then
      record tsan FAILED $((SECONDS - t0)) "no tests ran (log: $log)"
    else
      record tsan ok $((SECONDS - t0)) "$ntests tests, 0 reports (build ${build_s}s, tests $((SECONDS - t1))s)"
    fi
    unset OMP_NUM_THREADS OMP_WAIT_POLICY TSAN_OPTIONS KNN_STRESS_SECONDS
  else
    record tsan FAILED $((SECONDS - t0)) "configure/build/canary failed"
  fi
fi

# ---- Summary ----------------------------------------------------------------------------
echo
say "summary ($((SECONDS - START)) s in all, $JOBS jobs)"
for line in "${results[@]}"; do say "  $line"; done
if ((failed)); then
  say "FAILED"
  exit 1
fi
say "all sanitizer runs clean"
