#!/usr/bin/env bash
# Format check (run by scripts/test.sh after ctest, and on its own): every C,
# C++ and CUDA source that git tracks must be exactly as clang-format 14
# formats it under the committed .clang-format.
#
#   scripts/checks/format.sh          check; lists the files that differ and
#                                     shows the first differences
#   scripts/checks/format.sh --fix    reformat those files in place
#   scripts/checks/format.sh FILE...  check (or with --fix, fix) only these
#
# Environment: KNN_CLANG_FORMAT  the clang-format binary (default:
# clang-format-14, else clang-format, installed from Debian when missing).
# A few seconds for the whole tree.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1
say() { printf '[format] %s\n' "$*"; }

FIX=0
if [[ ${1:-} == --fix ]]; then
  FIX=1
  shift
fi

find_clang_format() {
  local c
  for c in "${KNN_CLANG_FORMAT:-}" clang-format-14 clang-format; do
    [[ -n $c ]] && command -v "$c" >/dev/null 2>&1 && { command -v "$c"; return 0; }
  done
  return 1
}
CF=$(find_clang_format || true)
if [[ -z $CF && $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  say "installing clang-format-14"
  DEBIAN_FRONTEND=noninteractive apt-get -y -q -o DPkg::Lock::Timeout=600 \
    --no-install-recommends install clang-format-14 >/dev/null 2>&1 ||
    { apt-get -q update >/dev/null 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get -y -q -o DPkg::Lock::Timeout=600 \
        --no-install-recommends install clang-format-14 >/dev/null 2>&1; }
  CF=$(find_clang_format || true)
fi
[[ -n $CF ]] || { say "no clang-format (Debian: apt-get install clang-format-14)"; exit 1; }
version=$("$CF" --version | grep -Eo '[0-9]+\.[0-9]+\.[0-9]+' | head -n 1)
[[ ${version%%.*} == 14 ]] ||
  say "note: $CF is version $version; the tree is formatted with 14, others may differ"

if (($#)); then
  files=("$@")
else
  mapfile -t files < <(git ls-files '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' '*.cu' '*.cuh')
fi
((${#files[@]})) || { say "no files"; exit 0; }

if ((FIX)); then
  "$CF" -i --style=file "${files[@]}" || exit 1
  say "formatted ${#files[@]} files with $CF ($version)"
  exit 0
fi

bad=()
for f in "${files[@]}"; do
  "$CF" --dry-run -Werror --style=file "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  say "${#bad[@]} of ${#files[@]} files are not formatted ($CF $version):"
  printf '  %s\n' "${bad[@]}"
  say "first differences:"
  for f in "${bad[@]:0:3}"; do
    "$CF" --style=file "$f" | diff -u "$f" - --label "$f" --label "$f (formatted)" | head -n 20
  done
  say "FAILED: run scripts/checks/format.sh --fix"
  exit 1
fi
say "all ${#files[@]} files formatted ($CF $version)"
