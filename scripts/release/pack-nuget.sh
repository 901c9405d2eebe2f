#!/usr/bin/env bash
# Packs the C# binding's NuGet package (bindings/csharp/KnnGpgpu.csproj) with
# the native libraries for linux-x64 and win-x64, checks it, and tests it.
#
#   scripts/release/pack-nuget.sh LINUX_LIBRARY WINDOWS_DLL [OUT_DIR]
#
#   LINUX_LIBRARY  libknn_gpgpu.so.1 of a Linux build (a CUDA build for the release)
#   WINDOWS_DLL    knn_gpgpu.dll of a Windows build (scripts/checks/windows.sh
#                  cross-builds the CPU engine's: build-win/stage/bin/knn_gpgpu.dll)
#   OUT_DIR        default: <repo>/build-nuget
#
# 1. lays the libraries out under the names .NET probes for DllImport("knn_gpgpu")
#    (runtimes/linux-x64/native/libknn_gpgpu.so, runtimes/win-x64/native/knn_gpgpu.dll);
# 2. packs: `dotnet pack` when dotnet is installed (lib/netstandard2.0), else mcs
#    builds KnnGpgpu.dll from the same sources (every .cs of bindings/csharp, as
#    the .csproj takes them) against Mono's .NET Framework profile, and
#    scripts/release/nupkg.py zips the package with the .csproj's metadata
#    (lib/net462; .NET 5 and later take it too, with NuGet's warning NU1701);
# 3. nupkg.py check: metadata, version = the library's, a .NET assembly, both
#    native libraries of the right platform exporting knn_version (and
#    nupkg.py selftest: check refuses broken copies of this package);
# 4. the C# tests (bindings/csharp/tests) built with mcs against the packaged
#    KnnGpgpu.dll and run under Mono with the packaged Linux library.
# Environment: KNN_NUGET_DOTNET=0 packs with mcs even when dotnet is installed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
(($# >= 2)) || { sed -n '2,12p' "$0"; exit 2; }
LINUX_LIB=$1
WIN_DLL=$2
OUT=${3:-$ROOT/build-nuget}
CSPROJ=$ROOT/bindings/csharp/KnnGpgpu.csproj

say() { printf '[nuget] %s\n' "$*"; }
die() { printf '[nuget] FAILED: %s\n' "$*" >&2; exit 1; }

[[ -f $LINUX_LIB ]] || die "no Linux library at $LINUX_LIB"
[[ -f $WIN_DLL ]] || die "no Windows DLL at $WIN_DLL"
rm -rf "$OUT"
mkdir -p "$OUT/native/linux-x64" "$OUT/native/win-x64" "$OUT/managed"
OUT=$(cd "$OUT" && pwd)
cp -L "$LINUX_LIB" "$OUT/native/linux-x64/libknn_gpgpu.so"
cp -L "$WIN_DLL" "$OUT/native/win-x64/knn_gpgpu.dll"

# The binding's sources as the .csproj globs them: this folder's .cs files, not tests/.
mapfile -t SOURCES < <(find "$ROOT/bindings/csharp" -maxdepth 1 -name '*.cs' | LC_ALL=C sort)

if [[ ${KNN_NUGET_DOTNET:-1} != 0 ]] && command -v dotnet >/dev/null; then
  say "dotnet pack $CSPROJ"
  dotnet pack "$CSPROJ" -c Release -o "$OUT" -p:KnnNativeDir="$OUT/native" \
    -p:BaseIntermediateOutputPath="$OUT/obj/" -p:OutputPath="$OUT/bin/"
else
  command -v mcs >/dev/null || die "neither dotnet nor mcs is installed (Debian: mono-mcs)"
  say "no dotnet: mcs builds KnnGpgpu.dll (${#SOURCES[@]} sources), nupkg.py packs"
  mcs -target:library -warn:4 -warnaserror -out:"$OUT/managed/KnnGpgpu.dll" "${SOURCES[@]}"
  python3 "$ROOT/scripts/release/nupkg.py" pack --csproj "$CSPROJ" --managed "$OUT/managed/KnnGpgpu.dll" \
    --tfm net462 --native-dir "$OUT/native" --readme "$ROOT/bindings/csharp/README.md" --out "$OUT" >/dev/null
fi
PACKAGE=$(ls "$OUT"/KnnGpgpu.*.nupkg) || die "no package in $OUT"
python3 "$ROOT/scripts/release/nupkg.py" check "$PACKAGE" --cmake "$ROOT/CMakeLists.txt" ||
  die "$PACKAGE is not right"
python3 "$ROOT/scripts/release/nupkg.py" selftest "$PACKAGE" --cmake "$ROOT/CMakeLists.txt" --scratch "$OUT" ||
  die "nupkg.py check accepts a broken package"

# ---- the package's own files, tested -------------------------------------------------
command -v mono >/dev/null && command -v mcs >/dev/null || die "mono and mcs are needed for the test"
EXTRACTED=$OUT/extracted
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$PACKAGE" "$EXTRACTED"
MANAGED=$(ls "$EXTRACTED"/lib/*/KnnGpgpu.dll)
mcs -warn:4 -warnaserror -r:"$MANAGED" -out:"$OUT/KnnGpgpuTests.exe" "$ROOT"/bindings/csharp/tests/*.cs
# Mono maps DllImport("knn_gpgpu") to libknn_gpgpu.so.1, the soname of the library
# that KNN_GPGPU_LIBRARY preloads (.NET takes runtimes/<rid>/native/ instead).
cp "$MANAGED" "$ROOT/bindings/csharp/KnnGpgpu.dll.config" "$OUT/"
# The header's layout as the C compiler sees it, for the tests' layout checks.
cc -std=c99 -I"$ROOT/include" "$ROOT/bindings/abi_layout.c" -o "$OUT/abi_layout" &&
  "$OUT/abi_layout" >"$OUT/abi_layout.txt" || die "bindings/abi_layout.c"
(cd "$OUT" && env -u LD_LIBRARY_PATH KNN_ABI_LAYOUT="$OUT/abi_layout.txt" KNN_GPGPU_INCLUDE="$ROOT/include" \
  KNN_GPGPU_LIBRARY="$EXTRACTED/runtimes/linux-x64/native/libknn_gpgpu.so" \
  mono --debug KnnGpgpuTests.exe) || die "the C# tests failed against the package's files"
say "$PACKAGE: packed, checked and tested"
