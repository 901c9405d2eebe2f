#!/usr/bin/env bash
# Runs the cross-built Windows tests under Wine, installing wine64 when it
# is missing: tests/abi as .exe files next to the installed knn_gpgpu.dll,
# examples/c, and every gtest program of the build's bin/ folder (each once,
# all its tests in one process: ctest would start Wine once per test case)
# except test_large_offsets (9 GB). KNN_WINE_TESTS: a regex of the programs
# to run (default all). Under Wine these programs run about 10 times slower
# than natively (ClassicCpuSweep: 4.5 s native, 48 s under Wine, same
# machine), so by default the four longest programs leave out their
# parameterized sweeps over distributions and dimensions (gtest filter
# -*/*: the same code as on Linux, where ctest runs them); KNN_WINE_FULL=1
# runs every test.
#
#   scripts/windows-wine-test.sh            cross-build first (via
#                                           scripts/checks/windows.sh, KNN_WINE=0)
#                                           when the .exe files are missing
#   scripts/windows-wine-test.sh --no-build run what is there
#
# Measured on a 2-core Debian 12 machine: installing wine64 (without
# recommends) ~10 s, creating the Wine prefix ~15 s (once per build folder),
# the two tests ~5 s.
#
# Environment: KNN_WIN_BUILD_DIR (default build-win), KNN_WINEPREFIX (default
# <build>/wineprefix).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${KNN_WIN_BUILD_DIR:-$ROOT/build-win}
TESTS=$BUILD/abi
say() { printf '[wine] %s\n' "$*"; }
fail() {
  printf '[wine] FAILED: %s\n' "$*" >&2
  exit 1
}

if [[ ${1:-} != --no-build && ! -f $TESTS/abi_c_api_test.exe ]]; then
  say "no cross build yet: running scripts/checks/windows.sh first"
  KNN_WINE=0 bash "$ROOT/scripts/checks/windows.sh"
fi
[[ -f $TESTS/abi_c_api_test.exe ]] || fail "no $TESTS/abi_c_api_test.exe (run scripts/checks/windows.sh)"

# Debian's wine64 package installs /usr/lib/wine/wine64 (the `wine` package
# adds /usr/bin/wine); take whichever is there.
find_wine() {
  local w
  for w in wine64 wine /usr/lib/wine/wine64 /usr/lib64/wine/wine64; do
    if command -v "$w" >/dev/null 2>&1; then
      command -v "$w"
      return 0
    fi
  done
  return 1
}

WINE=$(find_wine || true)
if [[ -z $WINE ]]; then
  t=$SECONDS
  say "installing wine64"
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || fail "need root (or sudo) to install wine64"
    sudo=(sudo)
  fi
  apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -y -q
       -o DPkg::Lock::Timeout=600 --no-install-recommends install wine64)
  if ! "${apt[@]}" >/tmp/knn-wine-apt-$$.log 2>&1; then
    say "apt-get update (package lists are missing or stale)"
    "${sudo[@]}" apt-get -q -o DPkg::Lock::Timeout=600 update >/dev/null
    "${apt[@]}" >/tmp/knn-wine-apt-$$.log 2>&1 ||
      { tail -20 /tmp/knn-wine-apt-$$.log >&2; rm -f /tmp/knn-wine-apt-$$.log; fail "apt-get install wine64"; }
  fi
  rm -f /tmp/knn-wine-apt-$$.log
  WINE=$(find_wine) || fail "wine64 installed but not found"
  say "installed wine64 in $((SECONDS - t)) s"
fi
WINESERVER=$(dirname "$WINE")/wineserver
[[ -x $WINESERVER ]] || WINESERVER=$(command -v wineserver || echo "")

export WINEPREFIX=${KNN_WINEPREFIX:-$BUILD/wineprefix}
export WINEARCH=win64
export WINEDEBUG=-all
export WINEDLLOVERRIDES="mscoree,mshtml=" # no Mono/Gecko download prompts
unset DISPLAY                              # console programs only

if [[ ! -f $WINEPREFIX/system.reg ]]; then
  t=$SECONDS
  say "creating the Wine prefix $WINEPREFIX"
  # wineboot reports the 32-bit helpers that a 64-bit-only Wine lacks; harmless.
  timeout 300 "$WINE" wineboot --init >/dev/null 2>&1 || true
  if [[ -n $WINESERVER ]]; then timeout 120 "$WINESERVER" -w || true; fi
  [[ -f $WINEPREFIX/system.reg ]] || fail "could not create the Wine prefix"
  say "Wine prefix ready in $((SECONDS - t)) s"
fi

status=0
failed=()  # programs that failed twice
flaky=()   # programs that failed once and then passed
LOGS=$BUILD/wine-logs
mkdir -p "$LOGS"
# run_once FOLDER LOG PROGRAM ARGS...: one Wine run, its output shown and kept.
run_once() {
  local dir=$1 log=$2 rc=0
  shift 2
  (cd "$dir" && timeout 600 "$WINE" "$@") >"$log" 2>&1 || rc=$?
  cat "$log"
  return $rc
}
# run_exe FOLDER PROGRAM ARGS...: the .exe files find knn_gpgpu.dll in their
# own folder, as on Windows. A program that fails is run once more, so that
# one failure under the emulator (a Wine hiccup on a loaded 2-core machine)
# is told apart from a failing test; either way its failing lines are
# repeated in the summary at the end, and a second failure fails the check.
run_exe() {
  local dir=$1 t=$SECONDS rc=0 name
  shift
  name=$(basename "$1" .exe)
  say "running $* under $(basename "$WINE")"
  run_once "$dir" "$LOGS/$name.log" "$@" || rc=$?
  say "$1: exit code $rc, $((SECONDS - t)) s"
  [[ $rc -eq 0 ]] && return 0
  cp "$LOGS/$name.log" "$LOGS/$name.first.log"
  say "running $1 again after exit code $rc"
  rc=0
  run_once "$dir" "$LOGS/$name.log" "$@" || rc=$?
  say "$1 (second run): exit code $rc"
  if [[ $rc -eq 0 ]]; then flaky+=("$name"); else failed+=("$name"); status=1; fi
}
# The lines of a program's log that say what failed.
failure_lines() {
  grep -E 'Failure|FAILED|Expected|Which is|error|abort|exception|Value of|Actual' "$1" |
    head -25 | sed 's/^/    /'
}
t=$SECONDS
run_exe "$TESTS" ./abi_c_api_test.exe
run_exe "$TESTS" ./abi_load_test.exe knn_gpgpu.dll
# examples/c, checked against knn_brute_force (Wine maps / to drive Z:).
if [[ -f $BUILD/bin/knn_example.exe && -f $ROOT/examples/c/points.txt ]]; then
  run_exe "$BUILD/bin" ./knn_example.exe --check "$ROOT/examples/c/points.txt" 4 5
fi
# examples/c/mesh_deviation.c, checked against the cube's exact signed distance.
if [[ -f $BUILD/bin/mesh_deviation.exe ]]; then
  run_exe "$BUILD/bin" ./mesh_deviation.exe --check 5000
fi
# The gtest programs, as ctest would run them (OMP_WAIT_POLICY=passive: a
# 2-core machine), each in one Wine process. Programs of the label `large`
# need 9 GB and are left to a real Windows machine.
export OMP_WAIT_POLICY=passive
for exe in "$BUILD"/bin/test_*.exe; do
  [[ -f $exe ]] || continue
  name=$(basename "$exe" .exe)
  [[ $name == test_large_offsets ]] && continue
  [[ $name =~ ${KNN_WINE_TESTS:-.} ]] || continue
  filter=()
  if [[ ${KNN_WINE_FULL:-0} != 1 && $name =~ ^test_(brute_force|classic_cpu|index_cpu|grid_cpu)$ ]]; then
    filter=("--gtest_filter=-*/*")
  fi
  run_exe "$BUILD/bin" "./$name.exe" --gtest_brief=1 "${filter[@]}"
done
# Let the Wine server of this prefix exit before returning.
if [[ -n $WINESERVER ]]; then timeout 60 "$WINESERVER" -w || true; fi
say "tests under Wine took $((SECONDS - t)) s"
for name in "${flaky[@]}"; do
  say "WARNING: $name failed once and passed when run again; its first run said:"
  failure_lines "$LOGS/$name.first.log"
done
for name in "${failed[@]}"; do
  say "$name failed twice; its last run said:"
  failure_lines "$LOGS/$name.log"
done
[[ $status -eq 0 ]] || fail "failed under Wine: ${failed[*]}"
say "OK"
