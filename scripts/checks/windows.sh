#!/usr/bin/env bash
# Windows DLL check (run by scripts/test.sh after ctest, and on its own).
#
#   1. installs the MinGW-w64 cross compilers (g++-mingw-w64-x86-64-posix) when
#      they are missing;
#   2. cross-builds every target the mingw-cross preset configures (the
#      preset itself: knn_gpgpu.dll + its import library, CPU engine, the
#      gtest programs of tests/, examples/c), then the C ABI tests
#      (tests/abi) as .exe files against the installed package, as a
#      Windows host project would;
#   3. checks that the DLL exports exactly the functions of the header, that
#      the import library covers them, and that the DLL needs no MinGW runtime
#      DLL (libgomp, winpthread, libstdc++, libgcc are linked in);
#   4. runs the .exe files under Wine (scripts/windows-wine-test.sh), which it
#      installs when missing: the ABI tests, the example, and every gtest
#      program but the 9 GB one (see docs/windows.md for the times).
#
# Environment:
#   KNN_WINE=0            build and check only, no Wine run
#   KNN_WINE=1 (default)  run under Wine, installing wine64 when missing
#   KNN_WIN_BUILD_DIR     build folder (default: build-win in the repository)
#   KNN_JOBS              parallel build jobs (default 2)
#   KNN_CMAKE_GENERATOR   CMake generator (default: Ninja when installed)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${KNN_WIN_BUILD_DIR:-$ROOT/build-win}
JOBS=${KNN_JOBS:-2}
WINE_MODE=${KNN_WINE:-1}
TOOLCHAIN=$ROOT/cmake/toolchains/mingw-w64-x86_64.cmake
TRIPLE=x86_64-w64-mingw32
OBJDUMP=$TRIPLE-objdump
NM=$TRIPLE-nm
START=$SECONDS

say() { printf '[windows] %s\n' "$*"; }
fail() {
  printf '[windows] FAILED: %s\n' "$*" >&2
  exit 1
}

# ---- 1. Tools -------------------------------------------------------------------
# apt-get install, with `apt-get update` only when the package lists do not
# have the package yet (a fresh machine), and waiting for another apt to finish.
apt_install() {
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || fail "need root (or sudo) to install: $*"
    sudo=(sudo)
  fi
  local apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -y -q
             -o DPkg::Lock::Timeout=600 --no-install-recommends)
  if ! "${apt[@]}" install "$@" >/tmp/knn-apt-$$.log 2>&1; then
    say "apt-get update (package lists are missing or stale)"
    "${sudo[@]}" apt-get -q -o DPkg::Lock::Timeout=600 update >/dev/null
    "${apt[@]}" install "$@" >/tmp/knn-apt-$$.log 2>&1 ||
      { tail -20 /tmp/knn-apt-$$.log >&2; rm -f /tmp/knn-apt-$$.log; fail "apt-get install $*"; }
  fi
  rm -f /tmp/knn-apt-$$.log
}

if ! command -v $TRIPLE-g++-posix >/dev/null || ! command -v $OBJDUMP >/dev/null; then
  t=$SECONDS
  say "installing g++-mingw-w64-x86-64-posix"
  apt_install g++-mingw-w64-x86-64-posix
  say "installed the MinGW-w64 compilers in $((SECONDS - t)) s"
fi
command -v cmake >/dev/null || apt_install cmake
GENERATOR=()
if [[ -n ${KNN_CMAKE_GENERATOR:-} ]]; then
  GENERATOR=(-G "$KNN_CMAKE_GENERATOR")
elif command -v ninja >/dev/null; then
  GENERATOR=(-G Ninja)
fi

# ---- 2. Cross build -------------------------------------------------------------
t=$SECONDS
# A folder configured for another target cannot be reused.
if [[ -f $BUILD/CMakeCache.txt ]] &&
   ! grep -q "CMAKE_TOOLCHAIN_FILE:.*mingw-w64-x86_64.cmake" "$BUILD/CMakeCache.txt"; then
  fail "$BUILD exists and is not a MinGW cross build; remove it or set KNN_WIN_BUILD_DIR"
fi
# The generator is chosen when a folder is first configured, and kept.
generator_for() { [[ -f $1/CMakeCache.txt ]] || printf '%s\n' "${GENERATOR[@]}"; }
mkdir -p "$BUILD"
mapfile -t MAIN_GEN < <(generator_for "$BUILD")
# The documented preset, so that CI builds what a user of it gets (every
# target it configures), in the folder chosen here.
(cd "$ROOT" && cmake --preset mingw-cross -B "$BUILD" "${MAIN_GEN[@]}" \
  ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER}) \
  >"$BUILD/configure.log" 2>&1 ||
  { tail -30 "$BUILD/configure.log" >&2; fail "configure (log: $BUILD/configure.log)"; }
say "building every target of the mingw-cross preset ($JOBS jobs)"
cmake --build "$BUILD" -j "$JOBS" >"$BUILD/build.log" 2>&1 ||
  { grep -E 'error|FAILED' "$BUILD/build.log" | head -30 >&2; fail "build (log: $BUILD/build.log)"; }
rm -rf "$BUILD/stage"
cmake --install "$BUILD" --prefix "$BUILD/stage" >/dev/null
mapfile -t ABI_GEN < <(generator_for "$BUILD/abi")
cmake -S "$ROOT/tests/abi" -B "$BUILD/abi" "${ABI_GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$TOOLCHAIN" \
  -Dknn_gpgpu_DIR="$BUILD/stage/lib/cmake/knn_gpgpu" >/dev/null
cmake --build "$BUILD/abi" -j "$JOBS"
say "cross build done in $((SECONDS - t)) s"

# What a Windows host gets: the installed DLL and import library.
DLL=$BUILD/stage/bin/knn_gpgpu.dll
IMPLIB=$BUILD/stage/lib/knn_gpgpu.dll.a
[[ -f $DLL ]] || fail "no $DLL"
[[ -f $IMPLIB ]] || fail "no import library $IMPLIB"

# ---- 3. Exports, import library, dependencies ------------------------------------
# knn_gpgpu.h and the parts it includes.
header_api=$(cd "$ROOT/include" &&
             grep -ho 'KNN_CALL [A-Za-z_][A-Za-z_0-9]*(' knn_gpgpu.h knn_gpgpu_classic.h \
               knn_gpgpu_index.h knn_gpgpu_quadtree.h knn_gpgpu_mesh.h knn_gpgpu_stats.h |
             sed 's/^KNN_CALL //; s/($//' | sort -u)
exports=$($OBJDUMP -p "$DLL" |
          sed -n '/\[Ordinal\/Name Pointer\] Table/,/^$/p' |
          awk '/^[[:space:]]*\[ *[0-9]+\]/ {print $NF}' | sort -u)
implib=$($NM -g "$IMPLIB" | awk '$2 == "I" && $3 ~ /^__imp_/ {sub(/^__imp_/, "", $3); print $3}' |
         sort -u)
n_api=$(wc -l <<<"$header_api")
if [[ $exports != "$header_api" ]]; then
  echo "exported by the DLL but not declared in the header:" >&2
  comm -13 <(echo "$header_api") <(echo "$exports") | sed 's/^/  /' >&2
  echo "declared in the header but not exported:" >&2
  comm -23 <(echo "$header_api") <(echo "$exports") | sed 's/^/  /' >&2
  fail "the export table of knn_gpgpu.dll is not the API"
fi
say "export table = the $n_api functions of include/knn_gpgpu.h and its parts"
[[ $implib == "$header_api" ]] ||
  fail "the import library does not list exactly the API: $(comm -3 <(echo "$header_api") <(echo "$implib") | tr -s '\n\t' '  ')"
say "import library $(basename "$IMPLIB") = the same $n_api functions"
DEF=$BUILD/stage/lib/knn_gpgpu.def
if [[ -f $DEF ]]; then
  def_names=$(awk 'NR > 1 && NF {print $1}' "$DEF" | sort -u)
  [[ $def_names == "$header_api" ]] || fail "knn_gpgpu.def does not list exactly the API"
  say "knn_gpgpu.def (for MSVC's lib /def) = the same $n_api functions"
fi

deps=$($OBJDUMP -p "$DLL" | awk '/DLL Name:/ {print $3}' | sort -u)
say "knn_gpgpu.dll imports from: $(tr '\n' ' ' <<<"$deps")"
runtime_dlls=$(grep -iE '^(libgomp|libwinpthread|libstdc\+\+|libgcc_s|libatomic|libquadmath)' <<<"$deps" || true)
[[ -z $runtime_dlls ]] || fail "knn_gpgpu.dll still needs MinGW runtime DLLs: $(tr '\n' ' ' <<<"$runtime_dlls")"
unexpected=$(grep -viE '^(kernel32|msvcrt|ucrtbase|api-ms-win-crt-.*|advapi32|user32|ws2_32|shell32|ole32)\.dll$' <<<"$deps" || true)
[[ -z $unexpected ]] || fail "knn_gpgpu.dll imports unexpected DLLs: $(tr '\n' ' ' <<<"$unexpected")"
for exe in "$BUILD"/abi/*.exe "$BUILD"/bin/*.exe; do
  exe_deps=$($OBJDUMP -p "$exe" | awk '/DLL Name:/ {print $3}' | sort -u | tr '\n' ' ')
  say "$(basename "$exe") imports from: $exe_deps"
  if grep -qiE 'libgomp|libwinpthread|libstdc\+\+|libgcc_s' <<<"$exe_deps"; then
    fail "$(basename "$exe") needs MinGW runtime DLLs"
  fi
done

# ---- 4. Run under Wine -------------------------------------------------------------
if [[ $WINE_MODE == 0 ]]; then
  say "Wine run skipped (KNN_WINE=0): run scripts/windows-wine-test.sh to run the .exe tests"
else
  bash "$ROOT/scripts/windows-wine-test.sh" --no-build
fi
say "OK in $((SECONDS - START)) s"
