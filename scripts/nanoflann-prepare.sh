#!/usr/bin/env bash
# Brings nanoflann 1.12.1, the CPU benchmarks' peer (issue 53, item 4), into
# .peers/nanoflann (ignored, never committed): its header and licence, and
# the pinned commit in .peers/nanoflann/COMMIT. bench/CMakeLists.txt takes
# the header from there (KNN_NANOFLANN_DIR) and falls back to the system's
# (Debian's libnanoflann-dev, 1.4.3) only where this folder is absent; the
# benchmarks print which one they were built with.
#   scripts/nanoflann-prepare.sh [SOURCE]
# SOURCE: a checkout or a bare git directory of jlblancoc/nanoflann holding
# the pinned commit; without it, the repository is cloned from GitHub. The
# GPU machine reaches no network: prepare here and carry .peers/nanoflann
# (about 200 KB).
set -euo pipefail
# Release 1.12.1 ("1.12.1", 2026-08-08): NANOFLANN_VERSION 0x010C01.
readonly commit=7812aa08260b6971af2230b1ac446d54f7939822
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/.peers/nanoflann
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

source=${1:-}
if [ -z "$source" ]; then
  git clone --quiet --filter=blob:none --no-checkout https://github.com/jlblancoc/nanoflann "$tmp/src"
  source=$tmp/src
fi
git -C "$source" cat-file -e "$commit^{commit}" 2>/dev/null || {
  echo "nanoflann-prepare: $source does not hold commit $commit (release 1.12.1)" >&2
  exit 1
}
mkdir -p "$tmp/out"
git -C "$source" archive "$commit" include/nanoflann.hpp COPYING | tar -x -C "$tmp/out"
grep -q '#define NANOFLANN_VERSION 0x010C01' "$tmp/out/include/nanoflann.hpp" || {
  echo "nanoflann-prepare: the header at $commit is not version 1.12.1" >&2
  exit 1
}
echo "$commit" >"$tmp/out/COMMIT"
rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
mv "$tmp/out" "$dest"
echo "nanoflann 1.12.1 ($commit) in $dest: $(du -sh "$dest" | cut -f1)"
