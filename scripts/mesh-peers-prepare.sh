#!/usr/bin/env bash
# Gathers what the mesh side-by-side (issue 48, item 8) needs beside the
# project into .peers/ (ignored, never committed): the peers' headers and the
# real scanned mesh, for scripts/mesh-peers.sh to carry to the GPU machine
# (which reaches no network) and for scripts/mesh-peers-cpu.sh here.
#   scripts/mesh-peers-prepare.sh CUBQL LIBIGL
# CUBQL, LIBIGL: a checkout or a bare git directory of ingowald/cuBQL and
# libigl/libigl. Also needs Debian's libeigen3-dev, libcgal-dev, libboost-dev
# and libcgal-demo (apt-get install them first). Copies:
#   .peers/cuBQL/cuBQL     cuBQL's headers (all: 0.7 MB)
#   .peers/eigen3/Eigen    Eigen's headers (all)
#   .peers/libigl/igl      the libigl headers libigl_driver.cpp includes
#   .peers/cgal/{CGAL,boost}  the CGAL and Boost headers cgal_driver.cpp
#                          includes, plus all of boost/config (another
#                          compiler there may select other config headers)
#   .peers/data/bunny00.off   the Stanford bunny (75408 triangles) of
#                          libcgal-demo's data/meshes
#   .peers/prebuilt/       libigl_driver and cgal_driver built here
#                          (-march=x86-64-v3), used there only if its own
#                          build of them fails
# and prints the size of .peers and of the tracked tree (the device tool
# carries at most 64 MiB in all).
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,22p' "$0"; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
peers=$root/.peers
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A folder of a checkout or of a git directory's HEAD, into $tmp/<name>.
export_tree() {
  local src=$1 path=$2 name=$3
  mkdir -p "$tmp/$name"
  if [ -d "$src/$path" ]; then
    cp -a "$src/$path" "$tmp/$name/"
  else
    git -C "$src" archive HEAD "$path" | tar -x -C "$tmp/$name"
  fi
}
export_tree "$1" cuBQL cubql
export_tree "$2" include/igl libigl

# Only this script's folders: .peers/nanoflann (scripts/nanoflann-prepare.sh) stays.
rm -rf "$peers"/{cuBQL,eigen3,libigl,cgal,data,prebuilt}
mkdir -p "$peers"/{cuBQL,eigen3,libigl,cgal,data,prebuilt}
cp -a "$tmp/cubql/cuBQL" "$peers/cuBQL/"
cp -a /usr/include/eigen3/Eigen "$peers/eigen3/"

# The headers a driver includes (those under prefix/sub), from the
# compiler's dependency list, copied under dest with their paths below prefix.
copy_dependencies() {
  local deps=$1 prefix=$2 dest=$3 sub=${4:-}
  tr -s " \\\\" '\n' <"$deps" | grep "^$prefix/$sub" | sort -u | while read -r f; do
    mkdir -p "$dest/$(dirname "${f#"$prefix"/}")"
    cp "$f" "$dest/${f#"$prefix"/}"
  done
}
flags=(-std=c++17 -fopenmp -DNDEBUG -I"$root/include" -I"$root/bench")
g++ "${flags[@]}" -isystem "$tmp/libigl/include" -isystem /usr/include/eigen3 -M \
  "$root/bench/peers_mesh/libigl_driver.cpp" -MF "$tmp/libigl.d"
copy_dependencies "$tmp/libigl.d" "$tmp/libigl/include" "$peers/libigl"
g++ "${flags[@]}" -M "$root/bench/peers_mesh/cgal_driver.cpp" -MF "$tmp/cgal.d"
for lib in CGAL boost; do
  copy_dependencies "$tmp/cgal.d" /usr/include "$peers/cgal" "$lib/"
done
cp -a /usr/include/boost/config "$peers/cgal/boost/"

tar -xzf /usr/share/doc/libcgal-demo/data.tar.gz -C "$tmp" data/meshes/bunny00.off
cp "$tmp/data/meshes/bunny00.off" "$peers/data/"

# The fallback binaries, from the copied headers (which checks the copies).
cpu_flags=(-O3 -march=x86-64-v3 "${flags[@]}")
g++ "${cpu_flags[@]}" -isystem "$peers/libigl" -isystem "$peers/eigen3" \
  "$root/bench/peers_mesh/libigl_driver.cpp" -o "$peers/prebuilt/libigl_driver" 2>/dev/null
g++ "${cpu_flags[@]}" -isystem "$peers/cgal" \
  "$root/bench/peers_mesh/cgal_driver.cpp" -o "$peers/prebuilt/cgal_driver" 2>/dev/null

echo ".peers: $(du -sh "$peers" | cut -f1)"
du -sh "$peers"/* | sed 's/^/  /'
echo "tracked tree: $(git -C "$root" ls-files -z | (cd "$root" && xargs -0 cat) | wc -c) bytes"
