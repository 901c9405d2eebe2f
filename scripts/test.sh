#!/usr/bin/env bash
# Builds knn_gpgpu and runs every test: the one command CI runs (.ci/run) and
# the one a developer runs on a fresh Debian 12 machine.
#
#   scripts/test.sh
#
# Environment:
#   KNN_BUILD_DIR   build directory (default: build)
#   KNN_WITH_CUDA   AUTO (default: the CUDA engine when nvcc is found), ON, OFF
#   KNN_JOBS        parallel build and test jobs (default: all cores)
#   KNN_CUDA_ARCHITECTURES  CMAKE_CUDA_ARCHITECTURES of the main build
#                   (default: the project's list, CMakeLists.txt); .ci/run
#                   sets one architecture
#
# Steps: install the Debian packages that are missing (apt-get update once,
# only then), configure (Release, warnings as errors: KNN_WARNINGS_AS_ERRORS),
# build, ctest --output-on-failure (every
# label, the large test included; GPU tests skip themselves without a
# device), then every executable scripts/checks/*.sh in sorted order. Exits
# non-zero if anything failed.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
repo_root=$(pwd)
build_dir=${KNN_BUILD_DIR:-build}
with_cuda=${KNN_WITH_CUDA:-AUTO}
jobs=${KNN_JOBS:-$(nproc 2>/dev/null || echo 2)}
cuda_archs=()
[ -n "${KNN_CUDA_ARCHITECTURES:-}" ] && cuda_archs=("-DCMAKE_CUDA_ARCHITECTURES=$KNN_CUDA_ARCHITECTURES")

step() { printf '\n==== [%4d s] %s\n' "$SECONDS" "$*"; }
die() { printf 'test.sh: %s\n' "$*" >&2; exit 1; }

# ---- Packages ------------------------------------------------------------------
packages=(cmake g++ libgtest-dev libnanoflann-dev pkg-config libcli11-dev nlohmann-json3-dev
  clang libclang-rt-dev libomp-dev  # clang: the libFuzzer targets (scripts/checks/fuzz.sh)
  libopenmpi-dev openmpi-bin  # MPI: libknn_gpgpu_mpi and its ctest -L mpi tests
  clang-format-14)                  # scripts/checks/format.sh
if command -v dpkg-query >/dev/null 2>&1; then
  missing=()
  for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' ||
      missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    step "installing ${missing[*]}"
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then
      command -v sudo >/dev/null 2>&1 || die "missing packages (${missing[*]}) and no sudo"
      sudo=(sudo)
    fi
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update ||
      die "apt-get update failed"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y --no-install-recommends "${missing[@]}" ||
      die "apt-get install ${missing[*]} failed"
  fi
else
  echo "test.sh: no dpkg-query (not Debian); assuming ${packages[*]} are installed"
fi

# ---- Configure and build -------------------------------------------------------------
step "configure $build_dir (Release, KNN_WITH_CUDA=$with_cuda${KNN_CUDA_ARCHITECTURES:+, CUDA architectures $KNN_CUDA_ARCHITECTURES})"
cmake -S "$repo_root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release \
  -DKNN_WITH_CUDA="$with_cuda" -DKNN_BUILD_TESTS=ON -DKNN_WARNINGS_AS_ERRORS=ON "${cuda_archs[@]}" ||
  die "configure failed"

step "build ($jobs jobs)"
cmake --build "$build_dir" --parallel "$jobs" || die "build failed"

# ---- Tests ------------------------------------------------------------------------------
failed=()
step "ctest"
start=$SECONDS
if ! (cd "$build_dir" && ctest --output-on-failure --parallel "$jobs"); then
  failed+=("ctest")
fi
echo "ctest took $((SECONDS - start)) s"

if [ -d scripts/checks ]; then
  # The checks find the tree just built through these.
  KNN_BUILD_DIR=$(cd "$build_dir" && pwd)
  export KNN_BUILD_DIR KNN_JOBS=$jobs
  while IFS= read -r check; do
    [ -f "$check" ] && [ -x "$check" ] || continue
    step "$check"
    # No stdin: a check that reads it (mpirun does) would eat the list of checks.
    if ! "$check" </dev/null; then
      failed+=("$check")
    fi
  done < <(find scripts/checks -maxdepth 1 -name '*.sh' -print | LC_ALL=C sort)
fi

echo
echo "test.sh took $SECONDS s"
if ((${#failed[@]})); then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "all tests passed"
