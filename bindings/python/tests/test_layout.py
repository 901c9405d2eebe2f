"""The binding's types against the C compiler's view of knn_gpgpu.h, and the
binding's function table against the header's list of exported functions."""

from __future__ import annotations

import ctypes
import re

import numpy as np

import knn_gpgpu as knn
from knn_gpgpu import _library
from knn_gpgpu._types import (SCALAR_FLOAT32, SCALAR_FLOAT64, MAX_DEVICES, AlignParamsStruct,
                              AlignResultStruct, DeviationReportStruct, OptionsStruct,
                              OptionsV2Struct, ProgressStruct)

from conftest import header_text

# The documented values (x86-64 / aarch64): checked against the C compiler
# below, and the same table the C# and Lisp tests hold.
EXPECTED = {
    "sizeof.Point": 12, "offsetof.Point.p": 0,
    "sizeof.Node": 24, "offsetof.Node.p": 0, "offsetof.Node.left": 12,
    "offsetof.Node.right": 16, "offsetof.Node.id": 20,
    "sizeof.knn_options": 40, "offsetof.knn_options.struct_size": 0,
    "offsetof.knn_options.backend": 8, "offsetof.knn_options.device": 12,
    "offsetof.knn_options.structure": 16, "offsetof.knn_options.leaf_size": 20,
    "offsetof.knn_options.threads": 24, "offsetof.knn_options.device_memory_limit": 32,
    "sizeof.knn_deviation_report": 104, "offsetof.knn_deviation_report.struct_size": 0,
    "offsetof.knn_deviation_report.n_points": 8, "offsetof.knn_deviation_report.n_above_bins": 64,
    "offsetof.knn_deviation_report.min": 72, "offsetof.knn_deviation_report.rms": 96,
    "sizeof.knn_align_params": 48, "offsetof.knn_align_params.max_iterations": 16,
    "offsetof.knn_align_params.kept_fraction": 24,
    "offsetof.knn_align_params.tolerance_translation": 40,
    "sizeof.knn_align_result": 168, "offsetof.knn_align_result.transform": 8,
    "offsetof.knn_align_result.rms": 136, "offsetof.knn_align_result.n_kept": 144,
    "offsetof.knn_align_result.n_degenerate": 164,
}


def python_layout():
    table = {
        "sizeof.Point": ctypes.sizeof(knn.Point), "offsetof.Point.p": knn.Point.p.offset,
        "sizeof.Node": ctypes.sizeof(knn.Node),
        "sizeof.knn_options": ctypes.sizeof(OptionsStruct),
        "sizeof.size_t": ctypes.sizeof(ctypes.c_size_t), "sizeof.int": ctypes.sizeof(ctypes.c_int),
    }
    for field in ("p", "left", "right", "id"):
        table["offsetof.Node." + field] = getattr(knn.Node, field).offset
    for field, _ in OptionsStruct._fields_:
        table["offsetof.knn_options." + field] = getattr(OptionsStruct, field).offset
    table["sizeof.knn_deviation_report"] = ctypes.sizeof(DeviationReportStruct)
    for field, _ in DeviationReportStruct._fields_:
        table["offsetof.knn_deviation_report." + field] = getattr(DeviationReportStruct,
                                                                  field).offset
    for name, struct in (("knn_align_params", AlignParamsStruct),
                         ("knn_align_result", AlignResultStruct)):
        table["sizeof." + name] = ctypes.sizeof(struct)
        for field, _ in struct._fields_:
            table["offsetof.%s.%s" % (name, field)] = getattr(struct, field).offset
    table["sizeof.knn_progress"] = ctypes.sizeof(ProgressStruct)
    for field, _ in ProgressStruct._fields_:
        table["offsetof.knn_progress." + field] = getattr(ProgressStruct, field).offset
    return table


def test_ctypes_layout_equals_c(c_layout):
    ours = python_layout()
    for name, value in ours.items():
        assert c_layout[name] == value, name
    c_fields = {k for k in c_layout if k.startswith(("sizeof.", "offsetof."))}
    assert c_fields == set(ours), "abi_layout.c and the binding list different fields"


def test_documented_table_on_this_platform(c_layout):
    if c_layout["sizeof.size_t"] == 8:
        for name, value in EXPECTED.items():
            assert c_layout[name] == value, name


def test_numpy_dtypes_equal_c(c_layout):
    assert knn.POINT_DTYPE.itemsize == c_layout["sizeof.Point"] == 12
    assert knn.NODE_DTYPE.itemsize == c_layout["sizeof.Node"] == 24
    for field in ("p", "left", "right", "id"):
        assert knn.NODE_DTYPE.fields[field][1] == c_layout["offsetof.Node." + field]
    assert knn.NODE_DTYPE.fields["p"][0] == np.dtype((np.float32, (3,)))
    for field in ("left", "right", "id"):
        assert knn.NODE_DTYPE.fields[field][0] == np.dtype(np.int32)
    # A ctypes Node and a NODE_DTYPE element are the same bytes.
    node = knn.Node((ctypes.c_float * 3)(1.5, -2.0, 3.25), 7, -1, 42)
    arr = np.frombuffer(bytes(node), dtype=knn.NODE_DTYPE)
    assert arr["left"][0] == 7 and arr["right"][0] == -1 and arr["id"][0] == 42
    np.testing.assert_array_equal(arr["p"][0], [1.5, -2.0, 3.25])


def test_constants_equal_c(c_layout):
    for status in knn.Status:
        name = "KNN_OK" if status == knn.Status.OK else "KNN_ERR_" + status.name
        assert c_layout["const." + name] == status
    for backend in knn.Backend:
        assert c_layout["const.KNN_BACKEND_" + backend.name] == backend
    for structure in knn.IndexStructure:
        assert c_layout["const.KNN_STRUCTURE_" + structure.name] == structure
    assert c_layout["const.KNN_SCALAR_FLOAT32"] == SCALAR_FLOAT32
    assert c_layout["const.KNN_SCALAR_FLOAT64"] == SCALAR_FLOAT64


def test_library_version_matches_header(lib, c_layout):
    assert knn.version() == c_layout["const.KNN_VERSION_NUMBER"]
    assert knn.version_tuple()[0] == _library.ABI_MAJOR


def test_every_header_function_is_bound(lib):
    text = header_text()
    declared = set(re.findall(r"KNN_API\s+[\w\s\*]+?KNN_CALL\s+(\w+)\s*\(", text))
    assert len(declared) >= 30
    assert declared == set(_library.PROTOTYPES), (
        "header-only: %s; binding-only: %s"
        % (sorted(declared - set(_library.PROTOTYPES)), sorted(set(_library.PROTOTYPES) - declared)))
    for name in declared:
        assert callable(getattr(lib, name))


def test_options_defaults_from_library(lib):
    opt = knn.Options()
    assert opt.struct_size == ctypes.sizeof(OptionsStruct) == 40
    assert (opt.backend, opt.device, opt.structure) == (knn.Backend.AUTO, -1,
                                                        knn.IndexStructure.AUTO)
    assert (opt.leaf_size, opt.threads, opt.device_memory_limit) == (0, 0, 0)
    opt = knn.Options(backend="openmp", structure="brute_force", threads=3, leaf_size=16,
                      device=0, device_memory_limit=1 << 20)
    assert opt.backend == knn.Backend.OPENMP and opt.structure == knn.IndexStructure.BRUTE_FORCE
    assert (opt.threads, opt.leaf_size, opt.device, opt.device_memory_limit) == (3, 16, 0, 1 << 20)
    assert "openmp" in repr(opt)
    # the binding's own structure accepted where the prototypes want OptionsStruct
    assert lib.knn_estimate_build_bytes(1000, 3, ctypes.byref(opt)) > 0


def test_options_version_2_defaults_from_the_library(lib):
    # knn_options_init_v2 writes the whole version-2 struct: its own size, the
    # version-1 defaults and an empty device list (every entry -1).
    opt = OptionsV2Struct()
    ctypes.memset(ctypes.byref(opt), 0x5A, ctypes.sizeof(opt))
    lib.knn_options_init_v2(ctypes.byref(opt))
    assert opt.struct_size == ctypes.sizeof(OptionsV2Struct) == 112
    assert (opt.backend, opt.device, opt.structure, opt.leaf_size, opt.threads) == (0, -1, 0, 0, 0)
    assert opt.device_memory_limit == 0
    assert opt.device_count == 0
    assert list(opt.devices) == [-1] * MAX_DEVICES
