#!/usr/bin/env bash
# The distributed index's host-side checks (run by scripts/test.sh after
# ctest, whose mpi_index_np1..4 tests cover the C library; and on its own):
#
#   1. installs what is missing (Debian 12): libopenmpi-dev openmpi-bin, and
#      Debian's python3-mpi4py python3-numpy python3-pytest (mpi4py must use
#      the same MPI as libknn_gpgpu_mpi; Debian's is built on this Open MPI);
#   2. uses $KNN_BUILD_DIR when it holds libknn_gpgpu_mpi, else builds its own
#      CPU tree (build-mpi-check in the repository);
#   3. the Python module knn_gpgpu.mpi under mpirun with 1, 2 and 3 ranks;
#   4. scripts/mpi-scaling.sh with tiny sizes (1 and 2 ranks), so the script
#      the scaling figures come from keeps working.
# About 15 s once the packages are installed.
#
# Environment: KNN_BUILD_DIR, KNN_JOBS (default 2), KNN_MPI_NO_INSTALL=1
# (never run apt-get).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
JOBS=${KNN_JOBS:-2}
START=$SECONDS
say() { printf '[mpi] %s\n' "$*"; }
die() { printf '[mpi] FAILED: %s\n' "$*" >&2; exit 1; }
# Open MPI refuses to start as root (CI containers) unless told, and its
# shared-memory single copy (CMA) fails where containers forbid ptrace; the
# ranks share the cores, one OpenMP thread each.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
       OMPI_MCA_btl_vader_single_copy_mechanism=none \
       OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive PYTHONDONTWRITEBYTECODE=1

# ---- 1. Packages -------------------------------------------------------------------
PY=/usr/bin/python3
need=()
for pkg in libopenmpi-dev openmpi-bin python3-mpi4py python3-numpy python3-pytest; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
done
if ((${#need[@]})); then
  [[ ${KNN_MPI_NO_INSTALL:-0} == 1 ]] && die "missing ${need[*]} (KNN_MPI_NO_INSTALL=1)"
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    { command -v sudo >/dev/null && sudo -n true 2>/dev/null; } || die "missing ${need[*]} and no sudo"
    sudo=(sudo -n)
  fi
  say "apt-get install ${need[*]}"
  apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -y -q -o DPkg::Lock::Timeout=600
       --no-install-recommends install "${need[@]}")
  "${apt[@]}" >/dev/null 2>&1 ||
    { "${sudo[@]}" apt-get -q -o DPkg::Lock::Timeout=600 update >/dev/null 2>&1; "${apt[@]}"; } ||
    die "apt-get install ${need[*]} failed"
fi

# ---- 2. The libraries --------------------------------------------------------------
BUILD=${KNN_BUILD_DIR:-}
if [[ -z $BUILD || ! -e $BUILD/mpi/libknn_gpgpu_mpi.so.1 ]]; then
  [[ -n $BUILD ]] && say "$BUILD has no libknn_gpgpu_mpi; building build-mpi-check"
  BUILD=$ROOT/build-mpi-check
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKNN_WITH_CUDA=OFF -DKNN_WITH_MPI=ON \
    -DKNN_BUILD_TESTS=OFF -DKNN_BUILD_BENCH=ON >/dev/null || die "configure failed"
  cmake --build "$BUILD" -j "$JOBS" --target knn_gpgpu_mpi bench_mpi >/dev/null || die "build failed"
fi
BUILD=$(cd "$BUILD" && pwd)
[[ -x $BUILD/mpi/bench_mpi ]] || cmake --build "$BUILD" -j "$JOBS" --target bench_mpi >/dev/null ||
  die "cannot build bench_mpi"

# ---- 3. Python under mpirun ----------------------------------------------------------
for np in 1 2 3; do
  t=$SECONDS
  (cd "$ROOT/bindings/python" &&
    KNN_GPGPU_LIBRARY=$BUILD/libknn_gpgpu.so.1 KNN_GPGPU_MPI_LIBRARY=$BUILD/mpi/libknn_gpgpu_mpi.so.1 \
    PYTHONPATH=$ROOT/bindings/python/src mpirun -np "$np" "$PY" -m pytest -q -p no:cacheprovider \
      -o addopts= tests/test_mpi.py) >"$BUILD/mpi-python-np$np.log" 2>&1 ||
    { tail -n 40 "$BUILD/mpi-python-np$np.log"; die "Python tests with $np ranks (log: $BUILD/mpi-python-np$np.log)"; }
  grep -q 'skipped' "$BUILD/mpi-python-np$np.log" &&
    { tail -n 5 "$BUILD/mpi-python-np$np.log"; die "Python tests skipped with $np ranks"; }
  say "Python, $np ranks: $(grep -E 'passed' "$BUILD/mpi-python-np$np.log" | tail -n 1 | sed 's/\x1b\[[0-9;]*m//g') ($((SECONDS - t)) s)"
done

# ---- 4. The scaling script, tiny ------------------------------------------------------
KNN_BUILD_DIR=$BUILD KNN_MPI_RANKS="1 2" KNN_MPI_N=20000 KNN_MPI_M=4000 KNN_MPI_N_PER_RANK=10000 \
  KNN_MPI_M_PER_RANK=2000 KNN_MPI_REPEAT=1 KNN_MPI_LOG=$BUILD/mpi-scaling-check.log \
  "$ROOT/scripts/mpi-scaling.sh" >"$BUILD/mpi-scaling-check.out" 2>&1 ||
  { cat "$BUILD/mpi-scaling-check.out"; die "scripts/mpi-scaling.sh"; }
rows=$(grep -cE '^(strong|weak) ' "$BUILD/mpi-scaling-check.out")
[[ $rows == 4 ]] || { cat "$BUILD/mpi-scaling-check.out"; die "mpi-scaling.sh printed $rows rows, not 4"; }
say "mpi-scaling.sh: 4 rows"
say "all MPI checks passed in $((SECONDS - START)) s"
