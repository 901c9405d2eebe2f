#!/usr/bin/env python3
"""The NuGet package of the C# binding without dotnet: lays it out and checks it.

    nupkg.py pack  --csproj bindings/csharp/KnnGpgpu.csproj --managed KnnGpgpu.dll \
                   --tfm net462 --native-dir DIR --readme README.md --out DIR
    nupkg.py check PACKAGE.nupkg [--cmake CMakeLists.txt]
    nupkg.py selftest PACKAGE.nupkg --scratch DIR [--cmake CMakeLists.txt]

A .nupkg is a zip: the .nuspec (the metadata, here read from the .csproj's
properties so that `dotnet pack` and this script describe one package),
[Content_Types].xml, _rels/.rels, lib/<tfm>/ and runtimes/<rid>/native/.
`check` reads any .nupkg, this script's or `dotnet pack`'s, and refuses one
whose metadata, managed assembly or native libraries are missing or wrong:
each native library must be a shared library of its platform (ELF x86-64
exporting knn_version; PE32+ x86-64 exporting knn_version) and the managed one
a .NET assembly. `selftest` feeds `check` broken copies of a good package
(each must be refused). scripts/release/pack-nuget.sh runs all three.
"""

import argparse
import re
import struct
import sys
import xml.etree.ElementTree as ET
import zipfile
from typing import Dict, List, Optional, Tuple

NUSPEC_NS = "http://schemas.microsoft.com/packaging/2013/05/nuspec.xsd"
# The runtime identifiers and the file names .NET probes for DllImport("knn_gpgpu").
NATIVES = {
    "linux-x64": "libknn_gpgpu.so",
    "win-x64": "knn_gpgpu.dll",
}
# Target framework folder -> the nuspec's name for it.
TFM_NAMES = {"netstandard2.0": ".NETStandard2.0", "net462": ".NETFramework4.6.2"}
METADATA = ("PackageId", "Version", "Authors", "Description", "PackageLicenseExpression", "PackageTags")


def csproj_properties(path: str) -> Dict[str, str]:
    props: Dict[str, str] = {}
    for group in ET.parse(path).getroot().iter("PropertyGroup"):
        for element in group:
            if element.tag in METADATA and element.text:
                props[element.tag] = element.text.strip()
    missing = [name for name in METADATA if name not in props]
    if missing:
        sys.exit("%s: no %s" % (path, ", ".join(missing)))
    return props


def nuspec(props: Dict[str, str], tfm: str) -> bytes:
    package = ET.Element("package", xmlns=NUSPEC_NS)
    meta = ET.SubElement(package, "metadata")
    for tag, key in (("id", "PackageId"), ("version", "Version"), ("authors", "Authors")):
        ET.SubElement(meta, tag).text = props[key]
    ET.SubElement(meta, "license", type="expression").text = props["PackageLicenseExpression"]
    ET.SubElement(meta, "readme").text = "README.md"
    ET.SubElement(meta, "description").text = props["Description"]
    ET.SubElement(meta, "tags").text = props["PackageTags"]
    dependencies = ET.SubElement(meta, "dependencies")
    ET.SubElement(dependencies, "group", targetFramework=TFM_NAMES[tfm])
    return b"<?xml version=\"1.0\" encoding=\"utf-8\"?>\n" + bytes(ET.tostring(package, encoding="utf-8"))


CONTENT_TYPES = b"""<?xml version="1.0" encoding="utf-8"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
  <Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml" />
  <Default Extension="nuspec" ContentType="application/octet" />
  <Default Extension="dll" ContentType="application/octet" />
  <Default Extension="so" ContentType="application/octet" />
  <Default Extension="md" ContentType="application/octet" />
</Types>
"""


def rels(nuspec_name: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">\n'
        '  <Relationship Type="http://schemas.microsoft.com/packaging/2010/07/manifest" '
        'Target="/%s" Id="R0" />\n'
        "</Relationships>\n" % nuspec_name
    ).encode()


def pack(args: argparse.Namespace) -> None:
    props = csproj_properties(args.csproj)
    if args.tfm not in TFM_NAMES:
        sys.exit("--tfm: one of %s" % ", ".join(TFM_NAMES))
    name = "%s.%s.nupkg" % (props["PackageId"], props["Version"])
    entries = {
        "[Content_Types].xml": CONTENT_TYPES,
        "_rels/.rels": rels(props["PackageId"] + ".nuspec"),
        props["PackageId"] + ".nuspec": nuspec(props, args.tfm),
        "README.md": open(args.readme, "rb").read(),
        "lib/%s/KnnGpgpu.dll" % args.tfm: open(args.managed, "rb").read(),
    }
    for rid, file_name in NATIVES.items():
        entries["runtimes/%s/native/%s" % (rid, file_name)] = open(
            "%s/%s/%s" % (args.native_dir, rid, file_name), "rb"
        ).read()
    path = "%s/%s" % (args.out, name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as package:
        for entry, data in entries.items():
            # A fixed date: the same inputs make the same package.
            info = zipfile.ZipInfo(entry, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            package.writestr(info, data)
    print(path)


# ---- checking -------------------------------------------------------------------------


def elf_exports(data: bytes) -> List[str]:
    """Names in the dynamic symbol table of a little-endian ELF64 x86-64 file."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a little-endian ELF64 file")
    e_type, e_machine = struct.unpack_from("<HH", data, 16)
    if e_type != 3 or e_machine != 0x3E:
        raise ValueError("not an x86-64 shared object (type %d, machine %#x)" % (e_type, e_machine))
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names: List[str] = []
    for _, sh_type, _, _, offset, size, link, _, _, entsize in sections:
        if sh_type != 11:  # SHT_DYNSYM
            continue
        strtab = sections[link]
        str_off = strtab[4]
        for k in range(size // entsize):
            st_name, st_info, _, st_shndx = struct.unpack_from("<IBBH", data, offset + k * entsize)
            if st_shndx != 0 and (st_info >> 4) in (1, 2):  # defined, GLOBAL or WEAK
                end = data.index(b"\0", str_off + st_name)
                names.append(data[str_off + st_name : end].decode())
    return names


def pe_headers(data: bytes) -> Tuple[int, List[Tuple[int, int, int, int]], int]:
    """(machine, sections as (va, vsize, raw offset, raw size), offset of the data directories)."""
    if data[:2] != b"MZ":
        raise ValueError("not a PE file (no MZ header)")
    pe, = struct.unpack_from("<I", data, 0x3C)
    if data[pe : pe + 4] != b"PE\0\0":
        raise ValueError("not a PE file (no PE signature)")
    machine, nsections = struct.unpack_from("<HH", data, pe + 4)
    opt_size, = struct.unpack_from("<H", data, pe + 20)
    opt = pe + 24
    magic, = struct.unpack_from("<H", data, opt)
    directories = opt + (112 if magic == 0x20B else 96)
    sections = []
    for i in range(nsections):
        vsize, va, raw_size, raw_off = struct.unpack_from("<IIII", data, opt + opt_size + i * 40 + 8)
        sections.append((va, vsize, raw_off, raw_size))
    return machine, sections, directories


def rva_offset(sections: List[Tuple[int, int, int, int]], rva: int) -> int:
    for va, vsize, raw_off, raw_size in sections:
        if va <= rva < va + max(vsize, raw_size):
            return raw_off + rva - va
    raise ValueError("RVA %#x is in no section" % rva)


def pe_exports(data: bytes) -> List[str]:
    machine, sections, directories = pe_headers(data)
    if machine != 0x8664:
        raise ValueError("not an x86-64 DLL (machine %#x)" % machine)
    export_rva, _ = struct.unpack_from("<II", data, directories)
    if export_rva == 0:
        return []
    table = rva_offset(sections, export_rva)
    count, = struct.unpack_from("<I", data, table + 24)
    names_rva, = struct.unpack_from("<I", data, table + 32)
    names = rva_offset(sections, names_rva)
    out = []
    for i in range(count):
        at = rva_offset(sections, struct.unpack_from("<I", data, names + 4 * i)[0])
        out.append(data[at : data.index(b"\0", at)].decode())
    return out


def is_dotnet_assembly(data: bytes) -> bool:
    _, _, directories = pe_headers(data)
    clr_rva, _ = struct.unpack_from("<II", data, directories + 14 * 8)  # the CLI header
    return bool(clr_rva != 0)


def problems_of(path: str, cmake: Optional[str]) -> Tuple[List[str], str]:
    """What is wrong with the package at path (nothing: []), and a one-line summary."""
    problems: List[str] = []
    with zipfile.ZipFile(path) as package:
        names = package.namelist()
        nuspecs = [n for n in names if "/" not in n and n.endswith(".nuspec")]
        if len(nuspecs) != 1:
            return ["%d .nuspec files at the root" % len(nuspecs)], ""
        meta = ET.fromstring(package.read(nuspecs[0])).find("{*}metadata")
        if meta is None:
            return ["the .nuspec has no <metadata>"], ""

        def field(tag: str) -> str:
            element = meta.find("{*}" + tag)
            return (element.text or "").strip() if element is not None else ""

        for entry in ("[Content_Types].xml", "_rels/.rels"):
            if entry not in names:
                problems.append("no %s" % entry)
        if field("id") != "KnnGpgpu":
            problems.append("id %r, not KnnGpgpu" % field("id"))
        if cmake:
            cmake_version = re.search(r"project\(knn_gpgpu VERSION ([0-9.]+)", open(cmake).read())
            if cmake_version is None or field("version") != cmake_version.group(1):
                problems.append("version %r is not the library's (%s)" % (field("version"), cmake))
        license_element = meta.find("{*}license")
        if (license_element is None or license_element.get("type") != "expression"
                or field("license") != "Apache-2.0"):
            problems.append("license is not the expression Apache-2.0")
        readme = field("readme")
        if not readme or readme not in names:
            problems.append("readme %r is not in the package" % readme)
        managed = [n for n in names if re.fullmatch(r"lib/[^/]+/KnnGpgpu\.dll", n)]
        if not managed:
            problems.append("no lib/<framework>/KnnGpgpu.dll")
        for entry in managed:
            try:
                if not is_dotnet_assembly(package.read(entry)):
                    problems.append("%s is not a .NET assembly" % entry)
            except (ValueError, struct.error) as e:
                problems.append("%s: %s" % (entry, e))
        exported = []
        for rid, file_name in NATIVES.items():
            entry = "runtimes/%s/native/%s" % (rid, file_name)
            if entry not in names:
                problems.append("no %s" % entry)
                continue
            reader = elf_exports if rid.startswith("linux") else pe_exports
            try:
                exports = reader(package.read(entry))
            except (ValueError, struct.error) as e:
                problems.append("%s: %s" % (entry, e))
                continue
            if "knn_version" not in exports:
                problems.append("%s exports no knn_version (%d exports)" % (entry, len(exports)))
            exported.append("%s (%d exports)" % (entry, len(exports)))
        problems += ["unexpected runtime %s" % n for n in names
                     if n.startswith("runtimes/") and n.split("/")[1] not in NATIVES]
    return problems, "%s %s: %s" % (field("id"), field("version"), ", ".join(managed + exported))


def check(args: argparse.Namespace) -> None:
    problems, summary = problems_of(args.package, args.cmake)
    if problems:
        sys.exit("%s:\n  %s" % (args.package, "\n  ".join(problems)))
    print("%s: %s" % (args.package, summary))


def selftest(args: argparse.Namespace) -> None:
    """`check` must refuse each broken copy of a good package: the check can fail."""
    with zipfile.ZipFile(args.package) as package:
        good = {name: package.read(name) for name in package.namelist()}
    nuspec_name = next(n for n in good if n.endswith(".nuspec"))
    linux = "runtimes/linux-x64/native/libknn_gpgpu.so"
    windows = "runtimes/win-x64/native/knn_gpgpu.dll"
    managed = next(n for n in good if n.startswith("lib/"))

    def without(name: str) -> Dict[str, bytes]:
        return {k: v for k, v in good.items() if k != name}

    def nuspec_with(old: bytes, new: bytes) -> Dict[str, bytes]:
        broken = dict(good)
        broken[nuspec_name] = good[nuspec_name].replace(old, new)
        return broken

    broken_copies = {
        "no Linux library": without(linux),
        "no Windows DLL": without(windows),
        "no managed assembly": without(managed),
        "natives swapped": dict(good, **{linux: good[windows], windows: good[linux]}),
        "a native library for the managed assembly": dict(good, **{managed: good[windows]}),
        "another license": nuspec_with(b">Apache-2.0<", b">MIT<"),
        "another version": nuspec_with(b"<version>", b"<version>9"),
        "a runtime nobody builds": dict(good, **{"runtimes/osx-arm64/native/libknn_gpgpu.dylib": b""}),
    }
    for what, entries in broken_copies.items():
        path = "%s/selftest.nupkg" % args.scratch
        with zipfile.ZipFile(path, "w") as package:
            for name, data in entries.items():
                package.writestr(name, data)
        problems, _ = problems_of(path, args.cmake)
        if not problems:
            sys.exit("nupkg.py check accepted a package with %s" % what)
        print("refused, %s: %s" % (what, problems[0]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--csproj", required=True)
    p.add_argument("--managed", required=True)
    p.add_argument("--tfm", required=True)
    p.add_argument("--native-dir", required=True)
    p.add_argument("--readme", required=True)
    p.add_argument("--out", required=True)
    c = sub.add_parser("check")
    c.add_argument("package")
    c.add_argument("--cmake")
    t = sub.add_parser("selftest")
    t.add_argument("package")
    t.add_argument("--cmake")
    t.add_argument("--scratch", required=True)
    args = parser.parse_args()
    {"pack": pack, "check": check, "selftest": selftest}[args.command](args)


if __name__ == "__main__":
    main()
