#!/usr/bin/env bash
# Host-language bindings check (run by scripts/test.sh after ctest, and on its own).
#
#   1. installs what is missing (Debian 12): cmake, gcc, make, pkg-config,
#      sbcl + cl-cffi, mono-mcs + mono-runtime;
#   2. installs the library into a scratch prefix, from $KNN_BUILD_DIR when it is
#      set and built, else from its own CPU build (build-bindings in the repo);
#   3. Python: not here; scripts/checks/python-package.sh builds and tests the
#      package (`pip install ./bindings/python` from a clean venv, timed; the
#      manylinux wheel; pytest and mypy);
#   4. Common Lisp: SBCL + CFFI from the Debian registry, bindings/lisp tests;
#      the README's steps literally, against the system and library that
#      `cmake --install` put into the prefix (ASDF's default registry, with the
#      prefix's share/ on XDG_DATA_DIRS as /usr/local/share is by default); a
#      missing library signals KNN-LIBRARY-NOT-FOUND;
#   5. C#: mcs builds KnnGpgpu.dll (KnnGpgpu.cs, KnnMesh.cs, KnnStats.cs) and the test program, mono runs it twice
#      (library found through LD_LIBRARY_PATH + dllmap, then KNN_GPGPU_LIBRARY),
#      then with the library next to KnnGpgpu.dll, then with none; every csharp
#      block of README.md, bindings/csharp/README.md and docs/bindings.md is
#      compiled as written and run (the NuGet package: scripts/checks/windows.sh,
#      which has the Windows DLL);
#   6. C: examples/c (knn_example, mesh_deviation) built against the installed
#      package with CMake find_package and with pkg-config, run with --check,
#      outputs compared.
# Prints a summary and exits non-zero when a step fails. Safe without a TTY
# or stdin (CI=true); under a minute once the packages are installed.
#
# Environment:
#   KNN_BUILD_DIR            a configured and built tree to install from
#   KNN_BINDINGS_WORK        scratch folder (default: <build dir>/bindings-check)
#   KNN_BINDINGS_STEPS       subset to run, e.g. "lisp c" (default: all of
#                            lisp csharp c)
#   KNN_BINDINGS_NO_INSTALL  1: never run apt-get (missing tools fail the step)
#   KNN_BINDINGS_ALLOW_SKIP  1: a step whose tools are missing is SKIPPED, not FAILED
#   KNN_JOBS                 parallel build jobs (default 2)
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
JOBS=${KNN_JOBS:-2}
STEPS=${KNN_BINDINGS_STEPS:-lisp csharp c}
START=$SECONDS
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
       PYTHONDONTWRITEBYTECODE=1 CMAKE_BUILD_PARALLEL_LEVEL=$JOBS

say() { printf '[bindings] %s\n' "$*"; }
die() { printf '[bindings] FAILED: %s\n' "$*" >&2; exit 1; }
want() { [[ " $STEPS " == *" $1 "* ]]; }

# ---- where things go -------------------------------------------------------------
OWN_BUILD=$ROOT/build-bindings
if [[ -n ${KNN_BUILD_DIR:-} && -f $KNN_BUILD_DIR/CMakeCache.txt ]] &&
   compgen -G "$KNN_BUILD_DIR/libknn_gpgpu.so*" >/dev/null; then
  LIB_BUILD=$(cd "$KNN_BUILD_DIR" && pwd)
  REUSE=1
else
  [[ -n ${KNN_BUILD_DIR:-} ]] && say "KNN_BUILD_DIR=$KNN_BUILD_DIR is not built; using $OWN_BUILD"
  LIB_BUILD=$OWN_BUILD
  REUSE=0
fi
WORK=${KNN_BINDINGS_WORK:-$LIB_BUILD/bindings-check}
PREFIX=$WORK/prefix
LOGS=$WORK/logs
mkdir -p "$WORK" "$LOGS" || die "cannot create $WORK"
WORK=$(cd "$WORK" && pwd)   # absolute: some steps change directory
PREFIX=$WORK/prefix
LOGS=$WORK/logs

# ---- results ---------------------------------------------------------------------
declare -a SUMMARY=()
FAILED=0
record() { # status name seconds [note]
  SUMMARY+=("$(printf '%-5s %-26s %4ss  %s' "$1" "$2" "$3" "${4:-}")")
  [[ $1 == FAIL ]] && FAILED=1
  return 0
}
# run_step NAME COMMAND...: runs in a subshell with its output in logs/NAME.log, no stdin.
run_step() {
  local name=$1 t=$SECONDS
  shift
  say "$name ..."
  if ("$@") >"$LOGS/$name.log" 2>&1 </dev/null; then
    record PASS "$name" $((SECONDS - t)) "$(last_line "$LOGS/$name.log")"
    return 0
  fi
  record FAIL "$name" $((SECONDS - t)) "log: $LOGS/$name.log"
  say "$name FAILED; last lines of $LOGS/$name.log:"
  tail -n 40 "$LOGS/$name.log" | sed 's/^/    /'
  return 1
}
last_line() { grep -v '^[[:space:]]*$' "$1" | tail -n 1 | cut -c1-90; }
missing_tools() { # step reason
  if [[ ${KNN_BINDINGS_ALLOW_SKIP:-0} == 1 ]]; then record SKIP "$1" 0 "$2"
  else record FAIL "$1" 0 "$2"; fi
}

finish() {
  echo
  say "summary (logs in $LOGS):"
  printf '  %s\n' "${SUMMARY[@]}"
  if [[ $FAILED != 0 ]]; then
    say "FAILED after $((SECONDS - START)) s"
    exit 1
  fi
  local skipped
  skipped=$(printf '%s\n' "${SUMMARY[@]}" | grep -c '^SKIP' || true)
  if [[ $skipped != 0 ]]; then
    say "bindings checks passed, $skipped step(s) SKIPPED, in $((SECONDS - START)) s"
  else
    say "all bindings checks passed in $((SECONDS - START)) s"
  fi
  exit 0
}

# ---- 1. Tools --------------------------------------------------------------------
APT_UPDATED=0
apt_install() {
  [[ ${KNN_BINDINGS_NO_INSTALL:-0} == 1 ]] && return 1
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo=(sudo -n)
    else say "cannot install $* (not root, no password-less sudo)"; return 1; fi
  fi
  command -v apt-get >/dev/null || { say "cannot install $* (no apt-get)"; return 1; }
  local apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -y -q
             -o DPkg::Lock::Timeout=600 --no-install-recommends install)
  local t=$SECONDS
  say "apt-get install $*"
  if ! "${apt[@]}" "$@" >"$LOGS/apt.log" 2>&1 </dev/null; then
    if [[ $APT_UPDATED == 0 ]]; then
      say "apt-get update (package lists missing or stale)"
      "${sudo[@]}" apt-get -q -o DPkg::Lock::Timeout=600 update >>"$LOGS/apt.log" 2>&1 </dev/null
      APT_UPDATED=1
    fi
    "${apt[@]}" "$@" >>"$LOGS/apt.log" 2>&1 </dev/null ||
      { tail -n 20 "$LOGS/apt.log" | sed 's/^/    /'; return 1; }
  fi
  say "installed $* in $((SECONDS - t)) s"
}

need=()
command -v cmake >/dev/null || need+=(cmake)
command -v make >/dev/null || need+=(make)
command -v cc >/dev/null || need+=(gcc)
command -v g++ >/dev/null || need+=(g++)
command -v pkg-config >/dev/null || need+=(pkg-config)
want lisp && { command -v sbcl >/dev/null || need+=(sbcl); }
want lisp && { [[ -f /usr/share/common-lisp/source/cl-cffi/cffi.asd ]] || need+=(cl-cffi); }
want csharp && { command -v mcs >/dev/null || need+=(mono-mcs); }
want csharp && { command -v mono >/dev/null || need+=(mono-runtime); }
if ((${#need[@]})); then
  t=$SECONDS
  if apt_install "${need[@]}"; then
    record PASS tools $((SECONDS - t)) "installed ${need[*]}"
  else
    why="could not install ${need[*]}"
    [[ ${KNN_BINDINGS_NO_INSTALL:-0} == 1 ]] && why="missing ${need[*]} (KNN_BINDINGS_NO_INSTALL=1)"
    [[ -s $LOGS/apt.log ]] && why+=" (log: $LOGS/apt.log)"
    # The steps that need them fail (or are skipped) on their own below.
    record NOTE tools $((SECONDS - t)) "$why"
  fi
else
  record PASS tools 0 "all present"
fi
command -v cmake >/dev/null && command -v cc >/dev/null || die "cmake and a C compiler are required"

# ---- 2. The library, installed into a scratch prefix -------------------------------
build_library() {
  if [[ $REUSE == 1 ]]; then
    echo "installing from KNN_BUILD_DIR=$LIB_BUILD"
  else
    cmake -S "$ROOT" -B "$LIB_BUILD" -DCMAKE_BUILD_TYPE=Release -DKNN_WITH_CUDA=OFF \
      -DKNN_BUILD_TESTS=OFF -DKNN_BUILD_BENCH=OFF -DCMAKE_INSTALL_PREFIX="$PREFIX" || return 1
    cmake --build "$LIB_BUILD" -j "$JOBS" || return 1
  fi
  rm -rf "$PREFIX"
  cmake --install "$LIB_BUILD" --prefix "$PREFIX" || return 1
  find "$PREFIX" -name 'libknn_gpgpu.so*' -o -name knn_gpgpu.h -o -name '*.pc' |
    sed "s|^$PREFIX/|installed |"
}
run_step library build_library

LIBFILE=$(find "$PREFIX" -name 'libknn_gpgpu.so.1' -print -quit 2>/dev/null)
if [[ -z $LIBFILE ]]; then
  record FAIL bindings 0 "not run: no libknn_gpgpu.so.1 under $PREFIX"
  finish
fi
LIBDIR=$(dirname "$LIBFILE")
INCDIR=$PREFIX/include
export KNN_GPGPU_INCLUDE=$INCDIR

# The header's layout as the C compiler sees it, for the Lisp and C# tests (the
# Python tests compile bindings/abi_layout.c themselves).
abi_layout() {
  cc -std=c99 -Wall -Wextra -pedantic -Werror -I"$INCDIR" "$ROOT/bindings/abi_layout.c" \
    -o "$WORK/abi_layout" && "$WORK/abi_layout" >"$WORK/abi_layout.txt" &&
    echo "$(wc -l <"$WORK/abi_layout.txt") sizes, offsets and constants"
}
run_step abi-layout abi_layout
ABI_ENV=()
[[ -s $WORK/abi_layout.txt ]] && ABI_ENV=(KNN_ABI_LAYOUT="$WORK/abi_layout.txt")

# ---- 3. Python: scripts/checks/python-package.sh --------------------------------------
# The package builds its own copy of the library from a clean venv, timed, and
# is tested there as a manylinux wheel: that check's, not one more build here.

# ---- 4. Common Lisp ----------------------------------------------------------------
lisp_tests() {
  env "${ABI_ENV[@]}" KNN_GPGPU_LIBRARY="$LIBFILE" XDG_CACHE_HOME="$WORK/lisp-cache" \
    sbcl --noinform --non-interactive --no-sysinit --no-userinit \
    --load "$ROOT/bindings/lisp/tests/run-tests.lisp"
}
# The README's steps, literally: nothing but ASDF's default registry, which
# searches <dir>/common-lisp/systems/ and source/ for each dir of XDG_DATA_DIRS
# (/usr/local/share and /usr/share by default; the scratch prefix here).
lisp_readme() {
  # The README's snippet, word for word, printing its value and where the library came from.
  cat >"$WORK/lisp-readme.lisp" <<'LISP'
(require :asdf)
(asdf:load-system "knn-gpgpu")
(print (let* ((pts (make-array 9 :element-type 'single-float
                                 :initial-contents '(0.0 0.0 0.0  1.0 0.0 0.0  0.0 3.0 0.0)))
              (tree (knn:build-kd-tree pts)))
         (knn:query-all pts tree 2)))
(format t "~&from ~A~%" (knn:library-path))
LISP
  cd "$WORK" &&
    env -u KNN_GPGPU_LIBRARY -u LD_LIBRARY_PATH XDG_DATA_DIRS="$PREFIX/share:/usr/local/share:/usr/share" \
      XDG_CACHE_HOME="$WORK/lisp-cache" sbcl --noinform --non-interactive --no-sysinit --no-userinit \
      --load "$WORK/lisp-readme.lisp" >"$WORK/lisp-readme.out" 2>&1
  grep -A1 '^#(' "$WORK/lisp-readme.out" || { cat "$WORK/lisp-readme.out"; return 1; }
  grep -q '^#(0 1 1 0 2 0)' "$WORK/lisp-readme.out" &&
    grep -q "^from /.*/share/common-lisp/source/knn-gpgpu/" "$WORK/lisp-readme.out"
}
# No library anywhere (the system from the checkout): the first call signals
# KNN-LIBRARY-NOT-FOUND, a KNN-ERROR that says what to install or set.
lisp_no_library() {
  env -u KNN_GPGPU_LIBRARY -u LD_LIBRARY_PATH XDG_CACHE_HOME="$WORK/lisp-cache" \
    sbcl --noinform --non-interactive --no-sysinit --no-userinit --eval '(require :asdf)' \
    --eval "(asdf:initialize-source-registry
              '(:source-registry (:directory \"$ROOT/bindings/lisp/\") :inherit-configuration))" \
    --eval '(asdf:load-system "knn-gpgpu")' \
    --eval '(handler-case (format t "~&loaded ~A ~A~%" (knn:tree-size 4) (knn:library-path))
              (knn:knn-error (e) (format t "~&signalled ~A: ~A~%" (type-of e) e)))' \
    >"$WORK/lisp-no-library.out" 2>&1
  grep -E '^(signalled|loaded)' "$WORK/lisp-no-library.out" || { cat "$WORK/lisp-no-library.out"; return 1; }
  grep -q '^signalled KNN-LIBRARY-NOT-FOUND: .*cmake --install.*KNN_GPGPU_LIBRARY' "$WORK/lisp-no-library.out"
}
if want lisp; then
  if command -v sbcl >/dev/null && [[ -f /usr/share/common-lisp/source/cl-cffi/cffi.asd ]]; then
    run_step lisp-sbcl lisp_tests
    run_step lisp-readme-steps lisp_readme
    if ldconfig -p 2>/dev/null | grep libknn_gpgpu >/dev/null; then
      record SKIP lisp-no-library 0 "libknn_gpgpu is in the ldconfig cache"
    else
      run_step lisp-no-library lisp_no_library
    fi
  else
    missing_tools lisp "sbcl or cl-cffi missing"
  fi
fi

# ---- 5. C# -------------------------------------------------------------------------
csharp_build() {
  local out=$WORK/csharp
  rm -rf "$out" && mkdir -p "$out" &&
    mcs -target:library -warn:4 -warnaserror -out:"$out/KnnGpgpu.dll" "$ROOT/bindings/csharp/KnnGpgpu.cs" \
      "$ROOT/bindings/csharp/KnnMesh.cs" "$ROOT/bindings/csharp/KnnStats.cs" &&
    mcs -warn:4 -warnaserror -r:"$out/KnnGpgpu.dll" -out:"$out/KnnGpgpuTests.exe" \
      "$ROOT/bindings/csharp/tests/KnnGpgpuTests.cs" "$ROOT/bindings/csharp/tests/KnnMeshTests.cs" \
      "$ROOT/bindings/csharp/tests/KnnStatsTests.cs" &&
    cp "$ROOT/bindings/csharp/KnnGpgpu.dll.config" "$out/" &&
    echo "built KnnGpgpu.dll and KnnGpgpuTests.exe"
}
csharp_ld_path() { # the dllmap + the loader's search path
  cd "$WORK/csharp" &&
    env -u KNN_GPGPU_LIBRARY "${ABI_ENV[@]}" LD_LIBRARY_PATH="$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      mono --debug KnnGpgpuTests.exe
}
csharp_env_var() { # KNN_GPGPU_LIBRARY alone, nothing on the search path
  cd "$WORK/csharp" &&
    env -u LD_LIBRARY_PATH "${ABI_ENV[@]}" KNN_GPGPU_LIBRARY="$LIBFILE" mono --debug KnnGpgpuTests.exe
}
csharp_bundled() { # the library next to KnnGpgpu.dll, nothing in the environment
  local dir=$WORK/csharp-bundled
  rm -rf "$dir" && cp -r "$WORK/csharp" "$dir" && cp "$LIBFILE" "$dir/" &&
    cd "$dir" && env -u LD_LIBRARY_PATH -u KNN_GPGPU_LIBRARY "${ABI_ENV[@]}" \
      mono --debug KnnGpgpuTests.exe --expect-loaded-from "$dir"
}
# Every csharp block of the READMEs and docs/bindings.md, compiled as written
# (whole programs: mcs has no top-level statements) and run.
csharp_readme() {
  local dir=$WORK/csharp-readme doc n=0 block
  rm -rf "$dir" && mkdir -p "$dir" || return 1
  for doc in README.md bindings/csharp/README.md docs/bindings.md; do
    awk -v out="$dir/$(tr '/.' '__' <<<"$doc")" '
      /^```csharp *$/ { n++; inside = 1; next }
      /^```/ { inside = 0 }
      inside { print > (out "-" n ".cs") }' "$ROOT/$doc" || return 1
  done
  for block in "$dir"/*.cs; do
    [[ -f $block ]] || { echo "no csharp blocks found"; return 1; }
    echo "== $(basename "$block")"
    # Warnings stay warnings: mcs flags the examples' unused results, which csc does not.
    mcs -r:"$WORK/csharp/KnnGpgpu.dll" -out:"$WORK/csharp/$(basename "$block" .cs).exe" "$block" ||
      return 1
    (cd "$WORK/csharp" && env "${ABI_ENV[@]}" KNN_GPGPU_LIBRARY="$LIBFILE" \
      mono --debug "$(basename "$block" .cs).exe") || return 1
    n=$((n + 1))
  done
  echo "$n csharp blocks compiled and run as written"
}
csharp_no_library() {
  cd "$WORK/csharp" && env -u LD_LIBRARY_PATH -u KNN_GPGPU_LIBRARY \
    mono --debug KnnGpgpuTests.exe --expect-no-library
}
if want csharp; then
  if command -v mcs >/dev/null && command -v mono >/dev/null; then
    run_step csharp-build csharp_build &&
      { run_step csharp-mono-ld-path csharp_ld_path; run_step csharp-mono-env-var csharp_env_var;
        run_step csharp-mono-bundled csharp_bundled
        run_step csharp-readme-snippets csharp_readme
        if [[ -f /usr/local/lib/libknn_gpgpu.so.1 ]] || ldconfig -p 2>/dev/null | grep libknn_gpgpu >/dev/null; then
          record SKIP csharp-no-library 0 "libknn_gpgpu is installed on this machine"
        else
          run_step csharp-no-library csharp_no_library
        fi; }
  else
    missing_tools csharp "mcs or mono missing"
  fi
fi

# ---- 6. C example ------------------------------------------------------------------
POINTS=$ROOT/examples/c/points.txt
c_cmake() {
  local b=$WORK/example-cmake
  rm -rf "$b"
  cmake -S "$ROOT/examples/c" -B "$b" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX" \
    -DCMAKE_C_FLAGS="-Werror" >/dev/null &&
    cmake --build "$b" &&
    "$b/knn_example" --check "$POINTS" 4 8 | tee "$WORK/example-cmake.out" &&
    "$b/mesh_deviation" --check | tee "$WORK/mesh-cmake.out"
}
c_pkgconfig() {
  local b=$WORK/example-pkgconfig pc=(pkg-config)
  rm -rf "$b" && mkdir -p "$b"
  # The .pc file names the prefix given at configure time; an installed copy
  # that lives elsewhere is read with that prefix redefined.
  if ! PKG_CONFIG_PATH=$LIBDIR/pkgconfig pkg-config --cflags knn_gpgpu | grep -q -- "-I$INCDIR"; then
    echo "note: knn_gpgpu.pc names another prefix; using --define-variable=prefix=$PREFIX"
    pc=(pkg-config "--define-variable=prefix=$PREFIX")
  fi
  PKG_CONFIG_PATH=$LIBDIR/pkgconfig make -f "$ROOT/examples/c/Makefile" BUILD_DIR="$b" \
    PKG_CONFIG="${pc[*]}" CFLAGS="-O2 -Werror" &&
    LD_LIBRARY_PATH=$LIBDIR "$b/knn_example" --check "$POINTS" 4 8 | tee "$WORK/example-pkgconfig.out" &&
    LD_LIBRARY_PATH=$LIBDIR "$b/mesh_deviation" --check | tee "$WORK/mesh-pkgconfig.out"
}
c_compare() {
  # Both builds print the same rows; bad input is refused with the library's status.
  diff "$WORK/example-cmake.out" "$WORK/example-pkgconfig.out" || return 1
  diff "$WORK/mesh-cmake.out" "$WORK/mesh-pkgconfig.out" || return 1
  printf '0 0 0\n1 nan 2\n' >"$WORK/bad-points.txt"
  if "$WORK/example-cmake/knn_example" "$WORK/bad-points.txt" 2>"$WORK/bad.err"; then
    echo "a NaN coordinate was accepted"
    return 1
  fi
  grep -q 'KNN_ERR_NONFINITE_INPUT' "$WORK/bad.err" && grep -q 'point 1' "$WORK/bad.err" ||
    { cat "$WORK/bad.err"; return 1; }
  printf '1 2\n' >"$WORK/bad-points.txt"
  ! "$WORK/example-cmake/knn_example" "$WORK/bad-points.txt" 2>/dev/null || return 1
  echo "identical output from both builds; NaN and short rows refused"
}
if want c; then
  c_ok=1
  run_step c-cmake-find-package c_cmake || c_ok=0
  if command -v pkg-config >/dev/null && command -v make >/dev/null; then
    run_step c-pkg-config c_pkgconfig || c_ok=0
    grep -q '^note: knn_gpgpu.pc names another prefix' "$LOGS/c-pkg-config.log" 2>/dev/null &&
      record NOTE c-pkg-config 0 "the installed knn_gpgpu.pc keeps the configure-time prefix"
  else
    missing_tools c-pkg-config "pkg-config or make missing"
    c_ok=0
  fi
  [[ $c_ok == 1 ]] && run_step c-compare c_compare
fi

# ---- Summary -------------------------------------------------------------------------
finish
