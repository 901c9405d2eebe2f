#!/usr/bin/env bash
# Gathers what the statistics side by side (scripts/stats-peers.sh) needs on
# a machine without PCL (the GPU machine reaches no registry) into
# .peers/stats/ (ignored, never committed): PCL's driver built here with
# PCL_NO_PRECOMPILE (NormalEstimationOMP, StatisticalOutlierRemoval and
# their kd-tree compiled from PCL's headers into the driver, so that only
# libpcl_common and what it links come along) for x86-64-v3, and those
# libraries in .peers/stats/lib. Carry .peers with the tree.
#   scripts/stats-peers-prepare.sh
# Needs PCL's headers (Debian's libpcl-dev, or STATS_PCL_INCLUDE: the
# pcl-1.x include folder) and runtime (libpcl-common1.13, libflann-dev,
# libeigen3-dev, libboost-dev).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/.peers/stats
pcl_include=${STATS_PCL_INCLUDE:-$(find /usr/include -maxdepth 1 -name 'pcl-1.*' | sort | tail -1)}
[ -d "$pcl_include/pcl" ] || { echo "no PCL headers (libpcl-dev, or STATS_PCL_INCLUDE)"; exit 1; }
common=$(find /usr/lib -name 'libpcl_common.so.*' | sort | tail -1)
[ -n "$common" ] || { echo "no libpcl_common (libpcl-common1.x)"; exit 1; }
rm -rf "$dest"
mkdir -p "$dest/lib"
g++ -O3 -march=x86-64-v3 -std=c++17 -fopenmp -DNDEBUG -DPCL_NO_PRECOMPILE -isystem "$pcl_include" \
  -isystem /usr/include/eigen3 "$root/bench/peers_stats/pcl_driver.cpp" -o "$dest/pcl_driver" "$common" \
  -llz4
# The libraries beyond the C and C++ runtimes and OpenMP, which every machine of ours has.
ldd "$dest/pcl_driver" | awk '$3 ~ /^\// {print $3}' |
  grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|libgomp|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$dest/lib/"; done
echo ".peers/stats: $(du -sh "$dest" | cut -f1)"
ls -la "$dest" "$dest/lib" | sed 's/^/  /'
