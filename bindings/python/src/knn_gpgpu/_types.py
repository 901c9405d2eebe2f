"""C types of knn_gpgpu.h as ctypes structures and numpy dtypes.

The layouts match the header exactly (natural alignment):

========================  ======  ==========================================
type                      bytes   fields (offset)
========================  ======  ==========================================
``struct Point``          12      p[3] (0)
``struct Node``           24      p[3] (0), left (12), right (16), id (20)
``knn_options`` (64-bit)  40      struct_size (0), backend (8), device (12),
                                  structure (16), leaf_size (20), threads
                                  (24), device_memory_limit (32)
``knn_deviation_report``  104     struct_size (0), eight int64 counts (8 ..
                                  64), min (72), max (80), mean (88), rms (96)
``knn_align_params``      48      struct_size (0), max_correspondence (8),
                                  max_iterations (16), coarse_start (20),
                                  kept_fraction (24), tolerance_rotation
                                  (32), tolerance_translation (40)
``knn_align_result``      168     struct_size (0), transform[16] (8), rms
                                  (136), n_kept (144), iterations (152),
                                  converged (156), degenerate_directions
                                  (160), n_degenerate (164)
========================  ======  ==========================================

The test suite compiles a C program against the header and compares every
size and offset with these definitions.
"""

from __future__ import annotations

import ctypes
import enum
from typing import Any

import numpy as np

#: numpy dtype of ``struct Point`` (12 bytes): one field ``p`` of 3 float32.
POINT_DTYPE = np.dtype({"names": ["p"], "formats": [(np.float32, (3,))],
                        "offsets": [0], "itemsize": 12})

#: numpy dtype of ``struct Node`` (24 bytes): ``p`` (3 float32), ``left``,
#: ``right``, ``id`` (int32). A tree is a 1-D array of this dtype.
NODE_DTYPE = np.dtype({"names": ["p", "left", "right", "id"],
                       "formats": [(np.float32, (3,)), np.int32, np.int32, np.int32],
                       "offsets": [0, 12, 16, 20], "itemsize": 24})


class Point(ctypes.Structure):
    """``struct Point { float p[3]; }``"""

    _fields_ = [("p", ctypes.c_float * 3)]


class Node(ctypes.Structure):
    """``struct Node { float p[3]; int left; int right; int id; }``"""

    _fields_ = [("p", ctypes.c_float * 3),
                ("left", ctypes.c_int),
                ("right", ctypes.c_int),
                ("id", ctypes.c_int)]


class Backend(enum.IntEnum):
    """``enum knn_backend``."""

    AUTO = 0
    CUDA = 1
    OPENMP = 2


class IndexStructure(enum.IntEnum):
    """``enum knn_structure`` (named so to stay apart from ``ctypes.Structure``)."""

    AUTO = 0
    KDTREE = 1
    GRID = 2
    BRUTE_FORCE = 3


#: ``enum knn_scalar``: what ``knn_index_scalar`` writes.
SCALAR_FLOAT32 = 0
SCALAR_FLOAT64 = 1


class _Opaque(ctypes.Structure):
    """Base of the opaque handle types; never instantiated."""

    _fields_ = []  # no fields: an opaque handle


class IndexHandle(_Opaque):
    """``struct knn_index`` (opaque); the binding passes ``POINTER(IndexHandle)``."""


class QuadtreeHandle(_Opaque):
    """``struct knn_quadtree`` (opaque); the binding passes ``POINTER(QuadtreeHandle)``."""


class MeshHandle(_Opaque):
    """``struct knn_mesh`` (opaque); the binding passes ``POINTER(MeshHandle)``."""


class OptionsStruct(ctypes.Structure):
    """Raw ``knn_options`` layout. Use :class:`knn_gpgpu.Options`, which fills the
    defaults through ``knn_options_init``."""

    # The fields, for type checkers (ctypes sets them from _fields_).
    struct_size: int
    backend: int
    device: int
    structure: int
    leaf_size: int
    threads: int
    device_memory_limit: int

    _fields_ = [("struct_size", ctypes.c_size_t),
                ("backend", ctypes.c_int),
                ("device", ctypes.c_int),
                ("structure", ctypes.c_int),
                ("leaf_size", ctypes.c_int),
                ("threads", ctypes.c_int),
                ("device_memory_limit", ctypes.c_size_t)]


MAX_DEVICES = 16  # KNN_MAX_DEVICES


class OptionsV2Struct(OptionsStruct):
    """Raw ``knn_options`` version 2 layout (112 bytes on 64-bit): version 1
    plus the device list of a call (``device_count``, ``devices``), filled by
    ``knn_options_init_v2``. :class:`knn_gpgpu.Options` keeps version 1; the
    ``KNN_DEVICES`` environment variable chooses devices for it."""

    device_count: int
    devices: Any

    _fields_ = [("device_count", ctypes.c_int),
                ("devices", ctypes.c_int * MAX_DEVICES)]


class ProgressStage(enum.IntEnum):
    """``enum knn_progress_stage``."""

    IDLE = 0
    BUILD = 1
    QUERY = 2


class ProgressStruct(ctypes.Structure):
    """Raw ``knn_progress`` layout (see :class:`knn_gpgpu.Progress`)."""

    _fields_ = [("done", ctypes.c_int64),
                ("total", ctypes.c_int64),
                ("stage", ctypes.c_int32),
                ("sequence", ctypes.c_int32)]


class DeviationReportStruct(ctypes.Structure):
    """Raw ``knn_deviation_report`` layout (104 bytes on 64-bit): what
    ``knn_mesh_deviation_report`` writes (see :class:`knn_gpgpu.DeviationReport`)."""

    struct_size: int
    n_points: int
    n_measured: int
    n_beyond: int
    n_within_tolerance: int
    n_above_tolerance: int
    n_below_tolerance: int
    n_below_bins: int
    n_above_bins: int
    min: float
    max: float
    mean: float
    rms: float

    _fields_ = [("struct_size", ctypes.c_size_t),
                ("n_points", ctypes.c_int64),
                ("n_measured", ctypes.c_int64),
                ("n_beyond", ctypes.c_int64),
                ("n_within_tolerance", ctypes.c_int64),
                ("n_above_tolerance", ctypes.c_int64),
                ("n_below_tolerance", ctypes.c_int64),
                ("n_below_bins", ctypes.c_int64),
                ("n_above_bins", ctypes.c_int64),
                ("min", ctypes.c_double),
                ("max", ctypes.c_double),
                ("mean", ctypes.c_double),
                ("rms", ctypes.c_double)]



class AlignParamsStruct(ctypes.Structure):
    """Raw ``knn_align_params`` layout (48 bytes on 64-bit): what
    ``knn_mesh_align_ex`` reads (0 in a field: its default)."""

    _fields_ = [("struct_size", ctypes.c_size_t),
                ("max_correspondence", ctypes.c_double),
                ("max_iterations", ctypes.c_int),
                ("coarse_start", ctypes.c_int),
                ("kept_fraction", ctypes.c_double),
                ("tolerance_rotation", ctypes.c_double),
                ("tolerance_translation", ctypes.c_double)]


class AlignResultStruct(ctypes.Structure):
    """Raw ``knn_align_result`` layout (168 bytes on 64-bit): what
    ``knn_mesh_align_ex`` writes (see :class:`knn_gpgpu.AlignResult`)."""

    _fields_ = [("struct_size", ctypes.c_size_t),
                ("transform", ctypes.c_double * 16),
                ("rms", ctypes.c_double),
                ("n_kept", ctypes.c_int64),
                ("iterations", ctypes.c_int),
                ("converged", ctypes.c_int),
                ("degenerate_directions", ctypes.c_int),
                ("n_degenerate", ctypes.c_int)]

INT_MIN = -(2 ** 31)
INT_MAX = 2 ** 31 - 1
INT64_MAX = 2 ** 63 - 1
