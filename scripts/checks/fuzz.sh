#!/usr/bin/env bash
# Fuzz check (run by scripts/test.sh after ctest, and on its own): builds the
# libFuzzer targets of fuzz/ with clang, ASan and UBSan in build-fuzz/, then
#   1. replays every file of fuzz/corpus/<target>/ (the seeds and every crash
#      found so far, kept as regression inputs): each must pass;
#   2. fuzzes each target for KNN_FUZZ_SECONDS (default 20) from those seeds,
#      with fuzz/<target>.dict as its dictionary when there is one.
# A crash, a sanitizer report, a leak or a timeout fails the check; the input
# that caused it is left in build-fuzz/findings/ (docs/fuzzing.md: turn it
# into a corpus file and a unit test).
#
# Environment:
#   KNN_FUZZ_SECONDS   fuzzing time per target (default 20; 0: replay only)
#   KNN_FUZZ_TARGETS   subset to run (default: all of them)
#   KNN_FUZZ_ROOT      where build-fuzz/ goes (default: the repository root)
#   KNN_JOBS           parallel build jobs (default: all cores)
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
JOBS=${KNN_JOBS:-$(nproc 2>/dev/null || echo 2)}
SECONDS_PER_TARGET=${KNN_FUZZ_SECONDS:-20}
TARGETS=${KNN_FUZZ_TARGETS:-fuzz_api_args fuzz_tree fuzz_polygons fuzz_point_parsers fuzz_mesh_readers \
  fuzz_index_oracle fuzz_pip_exact fuzz_options fuzz_geojson fuzz_index_deserialize fuzz_counts \
  fuzz_mesh_build}
DIR=${KNN_FUZZ_ROOT:-$ROOT}/build-fuzz
say() { printf '[fuzz] %s\n' "$*"; }

command -v clang++ >/dev/null 2>&1 || {
  say "clang++ not found (Debian: apt-get install clang; scripts/test.sh installs it)"
  exit 1
}

flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
mkdir -p "$DIR"
say "configure and build $DIR (clang, $flags)"
# -O1 -g1 (line tables), as the sanitizer builds: half the compile time.
CC=clang CXX=clang++ cmake -S "$ROOT" -B "$DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
  -DKNN_BUILD_FUZZERS=ON -DKNN_WITH_CUDA=OFF -DKNN_BUILD_TESTS=OFF -DKNN_BUILD_BENCH=OFF \
  "-DCMAKE_C_FLAGS=$flags" "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=$flags" \
  "-DCMAKE_SHARED_LINKER_FLAGS=$flags" >"$DIR/fuzz-configure.log" 2>&1 || {
  cat "$DIR/fuzz-configure.log"
  say "configure failed"
  exit 1
}
# shellcheck disable=SC2086 # a list of targets
cmake --build "$DIR" --parallel "$JOBS" --target $TARGETS || {
  say "build failed"
  exit 1
}

# One OpenMP thread: each input is small, and a thread pool per process only
# slows the fuzzer down. Leaks count as findings.
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export LSAN_OPTIONS=suppressions=$ROOT/fuzz/lsan.supp  # clang's OpenMP pool, see the file
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p "$DIR/findings"
failed=()
for target in $TARGETS; do
  exe=$DIR/fuzz/$target
  seeds=$ROOT/fuzz/corpus/$target
  dict=()
  [[ -f $ROOT/fuzz/$target.dict ]] && dict=("-dict=$ROOT/fuzz/$target.dict")
  work=$DIR/corpus/$target  # grows while fuzzing; the repository's stays as is
  mkdir -p "$work"
  say "$target: replaying $(find "$seeds" -type f | wc -l) corpus files"
  if ! "$exe" -runs=0 -artifact_prefix="$DIR/findings/$target-" "$seeds" \
      >"$DIR/$target-replay.log" 2>&1; then
    tail -n 30 "$DIR/$target-replay.log"
    failed+=("$target (corpus replay)")
    continue
  fi
  ((SECONDS_PER_TARGET > 0)) || continue
  say "$target: fuzzing for ${SECONDS_PER_TARGET}s"
  if ! "$exe" "${dict[@]}" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
      -max_len=4096 -print_final_stats=1 -artifact_prefix="$DIR/findings/$target-" \
      "$work" "$seeds" >"$DIR/$target-fuzz.log" 2>&1; then
    tail -n 40 "$DIR/$target-fuzz.log"
    failed+=("$target (finding in $DIR/findings)")
    continue
  fi
  grep -E '^stat::number_of_executed_units' "$DIR/$target-fuzz.log" | sed "s/^/[fuzz]   /"
done

if ((${#failed[@]})); then
  say "FAILED: ${failed[*]}"
  exit 1
fi
say "all fuzz targets clean"
