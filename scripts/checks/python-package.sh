#!/usr/bin/env bash
# Python package check (run by scripts/test.sh after ctest, and on its own).
#
#   1. the root and bindings/python pyproject.toml agree on [project];
#   2. the CPU wheel of the release script (scripts/release/build-wheels.sh
#      cpu): a clean venv, the package built with build isolation and
#      installed as `pip install ./bindings/python` does, TIMED, failing above
#      KNN_INSTALL_LIMIT_S; nothing written into the source tree; auditwheel
#      repair into a manylinux_* wheel bundling libgomp; that wheel installed
#      in place of the raw one and the binding's pytest suite run against it
#      (no KNN_GPGPU_LIBRARY, no LD_LIBRARY_PATH), with the knn-gpgpu console
#      script;
#   2b. with nvcc, the CUDA wheel of the same script for one architecture,
#      repaired and tested in the same way (a subset of the tests);
#   3. mypy --strict over the package (bindings/python/mypy.ini).
#
# The install limit, 180 s: issue #52 asks for at most 3 minutes on a 2-core
# machine without a GPU. The build is a plain CMake build with no compiler
# cache, as on a user's machine. Measured 2026-12-07 (CPU time, user +
# system, which the load of the machine does not change): the library alone,
# as before the tool came into the package, 61 CPU-seconds; library and tool
# 89. Issue #52 timed the library alone at 110 s of wall time from a clean
# venv on an idle 2-core machine, so this build should take about 125 s; the
# limit leaves about 55 s for a CI machine busy with something else (CI runs
# its checks one after another). On the development machine shared by eight
# builds (load average 18) the same install took 394-469 s: time it on a
# quiet machine before calling a failure here a regression.
#
# Environment:
#   KNN_BUILD_DIR        scratch goes to <dir>/python-package (default: build-python
#                        in the repository)
#   KNN_INSTALL_LIMIT_S  the limit in seconds (default 180; 0: none)
#   KNN_PYTHON           Python interpreter for the venvs (default: python3)
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PY=${KNN_PYTHON:-python3}
LIMIT=${KNN_INSTALL_LIMIT_S:-180}
if [[ -n ${KNN_BUILD_DIR:-} && -d $KNN_BUILD_DIR ]]; then
  WORK=$(cd "$KNN_BUILD_DIR" && pwd)/python-package
else
  WORK=$ROOT/build-python
fi
START=$SECONDS
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PYTHONDONTWRITEBYTECODE=1

say() { printf '[python-package] %s\n' "$*"; }
die() { printf '[python-package] FAILED: %s\n' "$*" >&2; exit 1; }

if ! command -v "$PY" >/dev/null || ! "$PY" -c 'import venv, ensurepip' 2>/dev/null; then
  say "installing python3 python3-venv"
  env DEBIAN_FRONTEND=noninteractive apt-get -y -q -o DPkg::Lock::Timeout=600 \
    --no-install-recommends install python3 python3-venv >/dev/null ||
    die "no $PY with venv and ensurepip, and apt-get could not install python3-venv"
fi
mkdir -p "$WORK" || die "cannot create $WORK"

# ---- 1. one [project] for `pip install .` and `pip install ./bindings/python` ----
"$PY" - "$ROOT" <<'PY' || die "the two pyproject.toml files disagree"
import sys
try:
    import tomllib
except ImportError:
    sys.exit(print("no tomllib (Python < 3.11): the two pyproject.toml files are not compared"))
root = sys.argv[1]
def project(path):
    with open(path, "rb") as f:
        table = tomllib.load(f)["project"]
    return {k: v for k, v in table.items() if k not in ("readme", "license-files")}
a, b = project(root + "/pyproject.toml"), project(root + "/bindings/python/pyproject.toml")
if a != b:
    sys.exit("pyproject.toml and bindings/python/pyproject.toml differ in [project]: %s"
             % sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k)))
print("[python-package] the root and bindings/python pyproject.toml agree on [project]")
PY

# ---- 2. the CPU wheel: timed install, manylinux, tests -----------------------------
limit=()
[[ $LIMIT != 0 ]] && limit=(KNN_WHEEL_BUILD_LIMIT_S="$LIMIT")
env "${limit[@]}" KNN_WHEEL_DIR="$WORK" KNN_PYTHON="$PY" "$ROOT/scripts/release/build-wheels.sh" cpu ||
  die "scripts/release/build-wheels.sh cpu"

# ---- 2b. the CUDA wheel, one architecture ----------------------------------------------
# The release's CUDA variant (scripts/release/build-wheels.sh cuda) as CI can
# afford it: Turing machine code and its PTX instead of the release's eight
# architectures (each one a full nvcc pass, about 4 CPU-minutes here). What it
# checks is the packaging of a CUDA build: the static CUDA runtime, the
# manylinux repair, a library that loads and answers on a machine without a
# GPU or driver. The CPU wheel above runs the whole suite; this one the
# loading, package, index, device-array and README tests. Skipped without nvcc.
if command -v nvcc >/dev/null 2>&1; then
  KNN_WHEEL_DIR="$WORK" KNN_PYTHON="$PY" KNN_RELEASE_CUDA_ARCHITECTURES="75-real;75-virtual" \
    KNN_WHEEL_TESTS="tests/test_loading.py tests/test_package.py tests/test_index.py \
tests/test_device.py tests/test_readme.py" \
    "$ROOT/scripts/release/build-wheels.sh" cuda || die "scripts/release/build-wheels.sh cuda"
else
  say "no nvcc: the CUDA wheel is not built"
fi

# ---- 3. mypy --strict ------------------------------------------------------------------
MYPY=$WORK/mypy-venv
if ! "$MYPY/bin/python" -c 'import mypy, numpy' 2>/dev/null; then
  rm -rf "$MYPY"
  "$PY" -m venv "$MYPY" && "$MYPY/bin/python" -m pip install -q --progress-bar off mypy numpy ||
    die "could not install mypy"
fi
(cd "$ROOT/bindings/python" && "$MYPY/bin/python" -m mypy --cache-dir "$WORK/mypy-cache") ||
  die "mypy"

limit_text="limit $LIMIT s"
[[ $LIMIT == 0 ]] && limit_text="no limit"
say "passed in $((SECONDS - START)) s: install from a clean venv $(cat "$WORK/cpu/install-seconds") s" \
    "($limit_text), $(basename "$WORK"/wheelhouse/cpu/knn_gpgpu-*.whl)"
