#!/usr/bin/env bash
# Strong and weak scaling of the distributed index (bench_mpi) over 1..16
# ranks of the CPU engine on one host, OMP_NUM_THREADS = cores / ranks, and
# a short table of the results (docs/distributed.md explains the columns).
#
#   scripts/mpi-scaling.sh                  run (defaults: a few seconds)
#   KNN_MPI_N=16000000 KNN_MPI_M=4000000 KNN_MPI_N_PER_RANK=2000000 \
#     KNN_MPI_M_PER_RANK=500000 scripts/mpi-scaling.sh       the device host
#   scripts/mpi-scaling.sh mpirun ARGS...   mpirun ARGS with the same Open MPI, e.g.
#     KNN_MPI_PREFIX=DIR/root scripts/mpi-scaling.sh mpirun --oversubscribe -np 4 \
#       -x KNN_MPI_TEST_BACKEND=cuda build/mpi/tests/test_mpi_index
#   scripts/mpi-scaling.sh pack DIR         download Open MPI's Debian packages
#                                           (with their libraries) and unpack
#                                           them under DIR/root, for a machine
#                                           without network: then run there with
#                                           KNN_MPI_PREFIX=DIR/root
#
# Environment:
#   KNN_BUILD_DIR       a build with bench_mpi (default: build; it is built here
#                       when missing: cmake --build $KNN_BUILD_DIR --target bench_mpi)
#   KNN_MPI_PREFIX      an Open MPI tree to use instead of the one on PATH: the
#                       root of unpacked .deb files (DIR/root, holding usr/) or an
#                       install prefix (holding bin/mpirun); sets PATH,
#                       LD_LIBRARY_PATH and OPAL_PREFIX
#   KNN_MPI_RANKS       rank counts (default: "1 2 4 8 16")
#   KNN_MPI_CORES       cores shared by the ranks (default: nproc)
#   KNN_MPI_MODES       "strong weak" (default both)
#   KNN_MPI_N, KNN_MPI_M                  strong scaling: points and queries in all
#                                         (default 400000 and 100000)
#   KNN_MPI_N_PER_RANK, KNN_MPI_M_PER_RANK weak scaling: per rank (default 100000, 25000)
#   KNN_MPI_DIM, KNN_MPI_K               (default 3 and 8)
#   KNN_MPI_BACKEND     cpu | auto | gpu (default cpu: ranks of the CPU engine)
#   KNN_MPI_REPEAT      runs per operation, the fastest reported (default 3)
#   KNN_MPI_LOG         raw output (default: $KNN_BUILD_DIR/mpi-scaling.log)
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { printf 'mpi-scaling.sh: %s\n' "$*" >&2; exit 1; }

# ---- pack: Open MPI and its libraries as unpacked Debian packages -------------------
if [[ ${1:-} == pack ]]; then
  dir=${2:?usage: scripts/mpi-scaling.sh pack DIR}
  mkdir -p "$dir/debs" "$dir/root" || die "cannot create $dir"
  # The runtime closure of mpirun and libmpi, without the C/C++ runtime and
  # what every Debian system has (loading a second libc would break things).
  mapfile -t pkgs < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
      --no-breaks --no-replaces --no-enhances openmpi-bin libopenmpi3 openmpi-common |
    grep -E '^[a-z0-9]' | grep -vE '^(libc6|libgcc-s1|libstdc\+\+6|gcc-[0-9]+-base|debconf|dpkg|perl.*|libcrypt1|tar|zlib1g|libzstd1|liblzma5|libbz2-1.0|libselinux1|libpcre2.*|libudev1|libsystemd0|libcap2|libgcrypt20|libgpg-error0|liblz4-1|init-system-helpers|sensible-utils|lsb-base|.*:i386)$' |
    sort -u)
  (cd "$dir/debs" && apt-get download "${pkgs[@]}") || die "apt-get download failed"
  for deb in "$dir"/debs/*.deb; do dpkg -x "$deb" "$dir/root" || die "cannot unpack $deb"; done
  echo "unpacked ${#pkgs[@]} packages into $dir/root; on the target: KNN_MPI_PREFIX=$dir/root $0"
  exit 0
fi

# ---- Open MPI from a given tree ----------------------------------------------------
# Debian names the launcher mpirun.openmpi (mpirun is an alternatives link
# that unpacked .deb files lack); orterun is the same program.
mpirun=mpirun
if [[ -n ${KNN_MPI_PREFIX:-} ]]; then
  prefix=$(cd "$KNN_MPI_PREFIX" && pwd) || die "KNN_MPI_PREFIX=$KNN_MPI_PREFIX does not exist"
  [[ -x $prefix/usr/bin/orterun ]] && prefix=$prefix/usr   # unpacked .deb files
  mpirun=
  for name in mpirun mpirun.openmpi orterun; do
    [[ -x $prefix/bin/$name ]] && { mpirun=$prefix/bin/$name; break; }
  done
  [[ -n $mpirun ]] || die "no mpirun, mpirun.openmpi or orterun in bin/ or usr/bin/ under $KNN_MPI_PREFIX"
  libs=()
  for d in "$prefix"/lib/x86_64-linux-gnu/openmpi/lib "$prefix"/lib/x86_64-linux-gnu \
           "$prefix"/lib64 "$prefix"/lib "$(dirname "$prefix")"/lib/x86_64-linux-gnu; do
    [[ -d $d ]] && libs+=("$d")
  done
  # Open MPI finds its components, help files and configuration relative to
  # OPAL_PREFIX (its own --prefix is /usr for Debian's build).
  export OPAL_PREFIX=$prefix PATH=$prefix/bin:$PATH
  LD_LIBRARY_PATH=$(IFS=:; echo "${libs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export LD_LIBRARY_PATH
  echo "Open MPI: $mpirun (OPAL_PREFIX=$prefix)"
fi
command -v "$mpirun" >/dev/null || die "no mpirun: install openmpi-bin, or set KNN_MPI_PREFIX"

# ---- mpirun: any job with this Open MPI (e.g. the tests on the device host) --------
if [[ ${1:-} == mpirun ]]; then
  shift
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  exec "$mpirun" -x LD_LIBRARY_PATH "$@"
fi

build=${KNN_BUILD_DIR:-build}
[[ $build = /* ]] || build=$ROOT/$build
bench=$build/mpi/bench_mpi
if [[ ! -x $bench ]]; then
  [[ -f $build/CMakeCache.txt ]] || die "no build in $build (set KNN_BUILD_DIR)"
  cmake --build "$build" --target bench_mpi || die "cannot build bench_mpi in $build"
fi

ranks_list=${KNN_MPI_RANKS:-1 2 4 8 16}
cores=${KNN_MPI_CORES:-$(nproc)}
log=${KNN_MPI_LOG:-$build/mpi-scaling.log}
: >"$log"
common=(--dim "${KNN_MPI_DIM:-3}" --k "${KNN_MPI_K:-8}" --backend "${KNN_MPI_BACKEND:-cpu}"
        --repeat "${KNN_MPI_REPEAT:-3}")
# Root in a container: Open MPI refuses unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

for mode in ${KNN_MPI_MODES:-strong weak}; do
  if [[ $mode == strong ]]; then
    sizes=(--n "${KNN_MPI_N:-400000}" --m "${KNN_MPI_M:-100000}")
  else
    sizes=(--n "${KNN_MPI_N_PER_RANK:-100000}" --m "${KNN_MPI_M_PER_RANK:-25000}")
  fi
  for np in $ranks_list; do
    threads=$((cores / np))
    ((threads >= 1)) || threads=1
    # Each rank on its own cores (its threads stay there); more ranks than
    # cores oversubscribe (correct, but not a scaling figure).
    if ((np * threads <= cores)); then
      place=(--map-by "slot:PE=$threads" --bind-to core)
    else
      place=(--oversubscribe --bind-to none)
    fi
    echo "== $mode np=$np OMP_NUM_THREADS=$threads" | tee -a "$log"
    OMP_NUM_THREADS=$threads "$mpirun" "${place[@]}" -np "$np" -x OMP_NUM_THREADS \
      -x LD_LIBRARY_PATH "$bench" --mode "$mode" "${sizes[@]}" "${common[@]}" >>"$log" 2>&1 ||
      { tail -n 20 "$log"; die "bench_mpi failed ($mode, np=$np): see $log"; }
  done
done

# ---- The table -----------------------------------------------------------------------
awk '
  function field(line, key,   i, n, kv) {
    n = split(line, kv, " ")
    for (i = 1; i <= n; i++) if (index(kv[i], key "=") == 1) return substr(kv[i], length(key) + 2)
    return ""
  }
  /^bench_mpi / { mode = field($0, "mode"); np = field($0, "ranks"); th = field($0, "omp_threads")
                  n = field($0, "n"); m = field($0, "m"); next }
  /^op=/ { op = field($0, "op"); t[mode, np, op] = field($0, "seconds")
           b[mode, np, op] = field($0, op == "build" ? "bytes_per_point" : "bytes_per_query")
           f[mode, np, op] = field($0, op == "build" ? "forwarded_per_point" : "forwarded_per_query")
           if (!((mode, np) in seen)) { seen[mode, np] = 1; order[++count] = mode SUBSEP np
                                        threads[mode, np] = th; nn[mode, np] = n; mm[mode, np] = m } }
  END {
    printf "%-6s %5s %4s %11s %9s %9s %9s %8s %8s %9s %9s %7s\n", "mode", "ranks", "thr", "n",
           "build s", "allknn s", "query s", "B/query", "fwd/q", "allknn/s", "query/s", "effic."
    for (i = 1; i <= count; i++) {
      split(order[i], key, SUBSEP); mode = key[1]; np = key[2]
      if (!((mode, 1, "allknn") in t)) base = ""; else base = t[mode, 1, "allknn"]
      eff = ""
      if (base != "" && t[mode, np, "allknn"] > 0)
        eff = sprintf("%.2f", mode == "strong" ? base / (np * t[mode, np, "allknn"]) : base / t[mode, np, "allknn"])
      printf "%-6s %5d %4s %11d %9.4f %9.4f %9.4f %8.1f %8.3f %9.3g %9.3g %7s\n", mode, np,
             threads[mode, np], nn[mode, np], t[mode, np, "build"], t[mode, np, "allknn"],
             t[mode, np, "query"], b[mode, np, "query"], f[mode, np, "query"],
             nn[mode, np] / t[mode, np, "allknn"], mm[mode, np] / t[mode, np, "query"], eff
    }
  }' "$log"
echo "raw output: $log (effic.: all-kNN time at 1 rank over np x time at np ranks (strong), or over time at np (weak))"
