#!/usr/bin/env bash
# The main job: install what the build needs, build knn_gpgpu (Release), and
# run the demo: the kd-tree of a 10^6-point uniform cloud and the k = 8
# nearest neighbours of all its points (buildKdTree + queryAll, automatic
# backend), the timings, whether a CUDA device was found and which backends
# ran, and a correctness check of 100 queries against knn_brute_force.
#
#   scripts/demo.sh [demo options...]      e.g. scripts/demo.sh --n 1e7 --k 16
#
# It builds for the machine it runs on, and only what the demo needs (the
# library and bench/demo, no tests): with a GPU (nvidia-smi answers) the CUDA
# engine for that GPU's architecture only; without one the CPU engine only,
# even where nvcc is installed. A fresh 2-core machine without a GPU answers
# in about 2 minutes, package installs aside.
#
# Environment:
#   KNN_BUILD_DIR             build directory (default: <repo>/build)
#   KNN_WITH_CUDA             AUTO, ON, OFF (default: AUTO when nvidia-smi reports
#                             a GPU, else OFF)
#   CMAKE_CUDA_ARCHITECTURES  CUDA architectures (default: those nvidia-smi reports,
#                             e.g. 90 on an H100)
#   KNN_JOBS                  parallel build jobs (default: all cores)
# Exits non-zero when a step fails or the demo's checks fail.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${KNN_BUILD_DIR:-$root/build}
jobs=${KNN_JOBS:-$(nproc 2>/dev/null || echo 2)}

say() { printf '==> %s\n' "$*"; }
die() { printf 'demo.sh: %s\n' "$*" >&2; exit 1; }

# ---- Debian packages the build needs ------------------------------------
missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v make >/dev/null 2>&1 || missing+=(make)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
# libgomp: the OpenMP runtime (g++ normally brings it along).
if command -v dpkg-query >/dev/null 2>&1; then
  dpkg-query -W -f='${Status}' libgomp1 2>/dev/null | grep -q 'install ok installed' ||
    missing+=(libgomp1)
fi

if [ ${#missing[@]} -gt 0 ]; then
  say "installing missing packages: ${missing[*]}"
  command -v apt-get >/dev/null 2>&1 ||
    die "missing ${missing[*]} and no apt-get here: install them and run again"
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "missing ${missing[*]}: run as root or install them"
    sudo=(sudo)
  fi
  # Refresh the package lists only when one of the packages is unknown to them.
  for pkg in "${missing[@]}"; do
    if ! apt-cache policy "$pkg" 2>/dev/null | grep -q 'Candidate: [^(]'; then
      say "apt-get update (no install candidate for $pkg)"
      ${sudo[@]+"${sudo[@]}"} apt-get update
      break
    fi
  done
  ${sudo[@]+"${sudo[@]}"} env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
fi

# ---- The GPU present, if any ------------------------------------------------
# Compute capabilities of the GPUs ("9.0" -> 90), distinct, ;-separated.
gpu_archs=""
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu_archs=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
    tr -d ' .' | grep -E '^[0-9]+$' | sort -u | paste -sd ';' -) || gpu_archs=""
fi
if [ -n "${KNN_WITH_CUDA:-}" ]; then
  with_cuda=$KNN_WITH_CUDA
elif [ -n "$gpu_archs" ]; then
  with_cuda=AUTO
else
  with_cuda=OFF     # no GPU: compiling the CUDA engine would only cost minutes
fi
cuda_args=()
if [ "$with_cuda" != OFF ]; then
  # CUDA toolkits install nvcc outside PATH; let AUTO find the usual one.
  if ! command -v nvcc >/dev/null 2>&1 && [ -z "${CUDACXX:-}" ] &&
    [ -x /usr/local/cuda/bin/nvcc ]; then
    export CUDACXX=/usr/local/cuda/bin/nvcc
  fi
  archs=${CMAKE_CUDA_ARCHITECTURES:-$gpu_archs}
  [ -n "$archs" ] && cuda_args=(-DCMAKE_CUDA_ARCHITECTURES="$archs")
fi

# ---- Configure and build --------------------------------------------------
say "configuring $build_dir (Release, KNN_WITH_CUDA=$with_cuda${gpu_archs:+, GPU sm_${gpu_archs//;/, sm_}})"
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DKNN_WITH_CUDA="$with_cuda" \
  ${cuda_args[@]+"${cuda_args[@]}"} -DKNN_BUILD_BENCH=ON -DKNN_BUILD_TESTS=OFF
say "building the library and the demo ($jobs jobs)"
cmake --build "$build_dir" --target demo --parallel "$jobs"

# ---- Run ---------------------------------------------------------------------
demo="$build_dir/bench/demo"
[ -x "$demo" ] || die "the build produced no $demo"
say "running $demo $*"
"$demo" "$@"
