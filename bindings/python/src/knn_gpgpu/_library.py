"""Finding and loading libknn_gpgpu, and the ctypes prototype of every function.

Search order (the first that loads wins):

1. the environment variable ``KNN_GPGPU_LIBRARY``: the full path of the shared
   library (when set, nothing else is tried, so a wrong path is an error, not a
   silent fallback);
2. the library bundled in this package (``knn_gpgpu/libknn_gpgpu.so.1``,
   ``knn_gpgpu.dll``): what ``pip install ./bindings/python`` builds and puts
   there, so a wheel needs nothing else;
3. an install prefix: the Python prefix's ``lib/`` (``cmake --install build
   --prefix "$VIRTUAL_ENV"`` or a conda prefix) and CMake's default prefix
   ``/usr/local/lib`` (which the dynamic loader searches only once ``ldconfig``
   has run);
4. ``ctypes.util.find_library("knn_gpgpu")`` (ldconfig cache, and on Linux
   ``LD_LIBRARY_PATH``);
5. the plain file names (``libknn_gpgpu.so.1``...), which the dynamic loader
   resolves with its own search path (``LD_LIBRARY_PATH``, ``DYLD_LIBRARY_PATH``,
   ``PATH`` and ``os.add_dll_directory`` on Windows).

The library is loaded on first use (importing the package never fails for a
missing library) or explicitly with :func:`load_library`; when nothing loads,
:class:`~knn_gpgpu.errors.LibraryNotFoundError` says what to install or set.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
from ctypes import POINTER, c_char_p, c_double, c_float, c_int, c_int32, c_int64, c_size_t, c_void_p
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._types import (AlignParamsStruct, AlignResultStruct, DeviationReportStruct, IndexHandle,
                     MeshHandle, Node, OptionsStruct, OptionsV2Struct, Point, ProgressStruct,
                     QuadtreeHandle)
from .errors import LibraryNotFoundError, make_error

#: Major version of the C ABI this binding is written for.
ABI_MAJOR = 1

ENV_VAR = "KNN_GPGPU_LIBRARY"

_P_FLOAT = POINTER(c_float)
_P_DOUBLE = POINTER(c_double)
_P_INT = POINTER(c_int)
_P_INT32 = POINTER(c_int32)
_P_INT64 = POINTER(c_int64)
_P_POINT = POINTER(Point)
_P_NODE = POINTER(Node)
_P_OPT = POINTER(OptionsStruct)
_P_INDEX = POINTER(IndexHandle)
_P_QUAD = POINTER(QuadtreeHandle)
_P_MESH = POINTER(MeshHandle)
_P_REPORT = POINTER(DeviationReportStruct)
_P_ALIGN_PARAMS = POINTER(AlignParamsStruct)
_P_ALIGN_RESULT = POINTER(AlignResultStruct)

# name -> (restype, argtypes). Every function of include/knn_gpgpu.h (and of
# knn_gpgpu_mesh.h and knn_gpgpu_stats.h, which it includes).
PROTOTYPES: Dict[str, Tuple[Any, List[Any]]] = {
    # status, errors, version
    "knn_status_string": (c_char_p, [c_int]),
    "knn_last_error": (c_char_p, []),
    "knn_version": (c_int, []),
    "knn_set_cancel_flag": (c_int, [POINTER(c_int)]),
    "knn_set_progress": (c_int, [POINTER(ProgressStruct)]),
    # classic 3-D API
    "buildKdTree": (c_int, [_P_POINT, c_int, _P_NODE]),
    "cuBuildKdTree": (c_int, [_P_POINT, c_int, _P_NODE]),
    "mpBuildKdTree": (c_int, [_P_POINT, c_int, _P_NODE]),
    "queryAll": (c_int, [_P_POINT, _P_NODE, c_int, c_int, c_int, _P_INT]),
    "cuQueryAll": (c_int, [_P_POINT, _P_NODE, c_int, c_int, c_int, _P_INT]),
    "mpQueryAll": (c_int, [_P_POINT, _P_NODE, c_int, c_int, c_int, _P_INT]),
    "getTreeSize": (c_size_t, [c_int]),
    "getNeededBytesForBuildingKdTree": (c_size_t, [c_int]),
    "getNeededBytesForQueryAll": (c_size_t, [c_int, c_int, c_int]),
    "getNeededBytesInSearch": (c_size_t, [c_int, c_int, c_int, c_int, c_int]),
    "getFreeBytesOnGpu": (c_size_t, []),
    "cuSetDevice": (c_int, [c_int]),
    "cuGetDevice": (c_int, []),
    "cuGetDeviceCount": (c_int, []),
    "knn_brute_force": (c_int, [_P_FLOAT, c_int, _P_FLOAT, c_int, c_int, c_int, _P_FLOAT,
                                _P_INT]),
    # index API
    "knn_options_init": (None, [_P_OPT]),
    "knn_options_init_v2": (None, [POINTER(OptionsV2Struct)]),
    "knn_index_build": (c_int, [_P_FLOAT, c_int64, c_int, _P_OPT, POINTER(_P_INDEX)]),
    "knn_index_free": (c_int, [_P_INDEX]),
    "knn_index_info": (c_int, [_P_INDEX, _P_INT64, _P_INT, _P_INT, _P_INT]),
    "knn_index_query": (c_int, [_P_INDEX, _P_FLOAT, c_int64, c_int, _P_INT32, _P_FLOAT,
                                _P_OPT]),
    "knn_index_align": (c_int, [_P_INDEX, _P_FLOAT, c_int64, _P_FLOAT, _P_DOUBLE,
                                _P_ALIGN_PARAMS, _P_ALIGN_RESULT, _P_OPT]),
    "knn_index_align_f64": (c_int, [_P_INDEX, _P_DOUBLE, c_int64, _P_DOUBLE, _P_DOUBLE,
                                    _P_ALIGN_PARAMS, _P_ALIGN_RESULT, _P_OPT]),
    "knn_index_query_self": (c_int, [_P_INDEX, c_int, c_int, _P_INT32, _P_FLOAT]),
    "knn_index_radius": (c_int, [_P_INDEX, _P_FLOAT, c_int64, c_float, c_int, _P_INT32,
                                 _P_FLOAT, _P_INT32, _P_OPT]),
    "knn_index_radius_count": (c_int, [_P_INDEX, _P_FLOAT, c_int64, c_float, _P_INT64, _P_OPT]),
    "knn_offsets_from_counts": (c_int, [_P_INT64, c_int64, _P_INT64]),
    "knn_index_radius_fill": (c_int, [_P_INDEX, _P_FLOAT, c_int64, c_float, _P_INT64, _P_INT32,
                                      _P_FLOAT, _P_OPT]),
    "knn_index_serialized_size": (c_int, [_P_INDEX, POINTER(c_size_t)]),
    "knn_index_serialize": (c_int, [_P_INDEX, c_void_p, c_size_t]),
    "knn_index_deserialize": (c_int, [c_void_p, c_size_t, _P_OPT, POINTER(_P_INDEX)]),
    "knn_estimate_build_bytes": (c_size_t, [c_int64, c_int, _P_OPT]),
    "knn_estimate_query_bytes": (c_size_t, [c_int64, c_int, c_int64, c_int, _P_OPT]),
    # index API, float64 (the float calls with double arrays)
    "knn_index_build_f64": (c_int, [_P_DOUBLE, c_int64, c_int, _P_OPT, POINTER(_P_INDEX)]),
    "knn_index_scalar": (c_int, [_P_INDEX, _P_INT]),
    "knn_index_query_f64": (c_int, [_P_INDEX, _P_DOUBLE, c_int64, c_int, _P_INT32, _P_DOUBLE,
                                    _P_OPT]),
    "knn_index_query_self_f64": (c_int, [_P_INDEX, c_int, c_int, _P_INT32, _P_DOUBLE]),
    "knn_index_radius_f64": (c_int, [_P_INDEX, _P_DOUBLE, c_int64, c_double, c_int, _P_INT32,
                                     _P_DOUBLE, _P_INT32, _P_OPT]),
    "knn_index_radius_count_f64": (c_int, [_P_INDEX, _P_DOUBLE, c_int64, c_double, _P_INT64,
                                           _P_OPT]),
    "knn_index_radius_fill_f64": (c_int, [_P_INDEX, _P_DOUBLE, c_int64, c_double, _P_INT64,
                                          _P_INT32, _P_DOUBLE, _P_OPT]),
    # pairs within a radius, neighbour counts (both precisions)
    "knn_index_radius_pairs": (c_int, [_P_INDEX, c_double, _P_INT64, c_int64, _P_INT64, _P_INT64,
                                       _P_OPT]),
    "knn_index_count_neighbors": (c_int, [_P_INDEX, _P_FLOAT, c_int64, _P_DOUBLE, c_int64,
                                          _P_DOUBLE, _P_DOUBLE, _P_INT64, _P_DOUBLE, _P_OPT]),
    "knn_index_count_neighbors_f64": (c_int, [_P_INDEX, _P_DOUBLE, c_int64, _P_DOUBLE, c_int64,
                                              _P_DOUBLE, _P_DOUBLE, _P_INT64, _P_DOUBLE,
                                              _P_OPT]),
    "knn_estimate_build_bytes_f64": (c_size_t, [c_int64, c_int, _P_OPT]),
    "knn_estimate_query_bytes_f64": (c_size_t, [c_int64, c_int, c_int64, c_int, _P_OPT]),
    # quadtree / point in polygon
    "knn_quadtree_build": (c_int, [_P_FLOAT, c_int64, _P_OPT, POINTER(_P_QUAD)]),
    "knn_quadtree_free": (c_int, [_P_QUAD]),
    "knn_points_in_polygons_count": (c_int, [_P_QUAD, _P_FLOAT, _P_INT64, c_int64, _P_INT64,
                                             c_int64, _P_INT64, _P_OPT]),
    "knn_points_in_polygons": (c_int, [_P_QUAD, _P_FLOAT, _P_INT64, c_int64, _P_INT64, c_int64,
                                       _P_INT64, _P_INT64, _P_OPT]),
    "knn_quadtree_build_f64": (c_int, [_P_DOUBLE, c_int64, _P_OPT, POINTER(_P_QUAD)]),
    "knn_points_in_polygons_count_f64": (c_int, [_P_QUAD, _P_DOUBLE, _P_INT64, c_int64, _P_INT64,
                                                 c_int64, _P_INT64, _P_OPT]),
    "knn_points_in_polygons_f64": (c_int, [_P_QUAD, _P_DOUBLE, _P_INT64, c_int64, _P_INT64,
                                           c_int64, _P_INT64, _P_INT64, _P_OPT]),
    # triangle meshes (knn_gpgpu_mesh.h)
    "knn_mesh_build": (c_int, [_P_FLOAT, c_int64, _P_INT32, c_int64, _P_OPT, POINTER(_P_MESH)]),
    "knn_mesh_build_f64": (c_int, [_P_DOUBLE, c_int64, _P_INT32, c_int64, _P_OPT,
                                   POINTER(_P_MESH)]),
    "knn_mesh_free": (c_int, [_P_MESH]),
    "knn_mesh_info": (c_int, [_P_MESH, _P_INT64, _P_INT64, _P_INT, _P_INT, _P_INT]),
    "knn_mesh_closest": (c_int, [_P_MESH, _P_FLOAT, c_int64, c_float, _P_INT32, _P_FLOAT,
                                 _P_FLOAT, _P_FLOAT, _P_OPT]),
    "knn_mesh_closest_f64": (c_int, [_P_MESH, _P_DOUBLE, c_int64, c_double, _P_INT32, _P_DOUBLE,
                                     _P_DOUBLE, _P_DOUBLE, _P_OPT]),
    "knn_mesh_signed_distance": (c_int, [_P_MESH, _P_FLOAT, c_int64, c_float, _P_FLOAT, _P_INT32,
                                         _P_OPT]),
    "knn_mesh_signed_distance_f64": (c_int, [_P_MESH, _P_DOUBLE, c_int64, c_double, _P_DOUBLE,
                                             _P_INT32, _P_OPT]),
    "knn_mesh_deviation_report": (c_int, [_P_MESH, _P_FLOAT, c_int64, c_float, c_double,
                                          _P_DOUBLE, c_int, _P_DOUBLE, _P_DOUBLE, c_int, _P_INT64,
                                          _P_FLOAT, _P_REPORT, _P_OPT]),
    "knn_mesh_deviation_report_f64": (c_int, [_P_MESH, _P_DOUBLE, c_int64, c_double, c_double,
                                              _P_DOUBLE, c_int, _P_DOUBLE, _P_DOUBLE, c_int,
                                              _P_INT64, _P_DOUBLE, _P_REPORT, _P_OPT]),
    "knn_mesh_serialized_size": (c_int, [_P_MESH, POINTER(c_size_t)]),
    "knn_mesh_serialize": (c_int, [_P_MESH, c_void_p, c_size_t]),
    "knn_mesh_deserialize": (c_int, [c_void_p, c_size_t, _P_OPT, POINTER(_P_MESH)]),
    "knn_estimate_mesh_bytes": (c_size_t, [c_int64, c_int64, c_int, _P_OPT]),
    "knn_mesh_align": (c_int, [_P_MESH, _P_FLOAT, c_int64, _P_DOUBLE, c_double, c_int, _P_DOUBLE,
                               _P_DOUBLE, _P_OPT]),
    "knn_mesh_align_f64": (c_int, [_P_MESH, _P_DOUBLE, c_int64, _P_DOUBLE, c_double, c_int,
                                   _P_DOUBLE, _P_DOUBLE, _P_OPT]),
    "knn_mesh_align_ex": (c_int, [_P_MESH, _P_FLOAT, c_int64, _P_DOUBLE, _P_ALIGN_PARAMS,
                                  _P_ALIGN_RESULT, _P_OPT]),
    "knn_mesh_align_ex_f64": (c_int, [_P_MESH, _P_DOUBLE, c_int64, _P_DOUBLE, _P_ALIGN_PARAMS,
                                      _P_ALIGN_RESULT, _P_OPT]),
    # neighbourhood statistics (knn_gpgpu_stats.h)
    "knn_index_normals": (c_int, [_P_INDEX, c_int, _P_FLOAT, _P_FLOAT, _P_FLOAT, _P_OPT]),
    "knn_index_normals_f64": (c_int, [_P_INDEX, c_int, _P_DOUBLE, _P_DOUBLE, _P_DOUBLE, _P_OPT]),
    "knn_index_outlier_scores": (c_int, [_P_INDEX, c_int, _P_FLOAT, _P_OPT]),
    "knn_index_outlier_scores_f64": (c_int, [_P_INDEX, c_int, _P_DOUBLE, _P_OPT]),
    "knn_index_statistical_inliers": (c_int, [_P_INDEX, c_int, c_double, _P_INT32, _P_INT64,
                                              _P_OPT]),
    "knn_index_statistical_inliers_f64": (c_int, [_P_INDEX, c_int, c_double, _P_INT32, _P_INT64,
                                                  _P_OPT]),
    "knn_index_kth_distances": (c_int, [_P_INDEX, c_int, _P_FLOAT, _P_OPT]),
    "knn_index_kth_distances_f64": (c_int, [_P_INDEX, c_int, _P_DOUBLE, _P_OPT]),
    "knn_index_neighbor_counts": (c_int, [_P_INDEX, c_float, _P_INT64, _P_OPT]),
    "knn_index_neighbor_counts_f64": (c_int, [_P_INDEX, c_double, _P_INT64, _P_OPT]),
    "knn_index_radius_inliers": (c_int, [_P_INDEX, c_float, c_int64, _P_INT32, _P_INT64, _P_OPT]),
    "knn_index_radius_inliers_f64": (c_int, [_P_INDEX, c_double, c_int64, _P_INT32, _P_INT64,
                                             _P_OPT]),
    "knn_estimate_stats_bytes": (c_size_t, [c_int64, c_int, _P_OPT]),
    "knn_estimate_stats_bytes_f64": (c_size_t, [c_int64, c_int, _P_OPT]),
}


def _file_names() -> List[str]:
    if sys.platform.startswith("win") or sys.platform == "cygwin":
        return ["knn_gpgpu.dll", "libknn_gpgpu.dll"]
    if sys.platform == "darwin":
        return ["libknn_gpgpu.%d.dylib" % ABI_MAJOR, "libknn_gpgpu.dylib"]
    return ["libknn_gpgpu.so.%d" % ABI_MAJOR, "libknn_gpgpu.so"]


#: CMake's default install prefix, whose lib/ the dynamic loader may not search.
DEFAULT_INSTALL_LIBDIR = "/usr/local/lib"


def _search_dirs() -> List[str]:
    """Folders of steps 2 and 3 of the search, in order."""
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = [here]
    if sys.platform.startswith("win"):
        dirs += [os.path.join(sys.prefix, "Library", "bin"), os.path.join(sys.prefix, "bin")]
    else:
        dirs += [os.path.join(sys.prefix, "lib"), os.path.join(sys.prefix, "lib64"),
                 DEFAULT_INSTALL_LIBDIR]
    return dirs


def candidates() -> List[str]:
    """The paths or names :func:`load_library` tries, in order."""
    env = os.environ.get(ENV_VAR)
    if env:
        return [env]
    found: List[str] = []
    for folder in _search_dirs():
        for name in _file_names():
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                found.append(path)
    located = ctypes.util.find_library("knn_gpgpu")
    if located:
        found.append(located)
    found.extend(_file_names())
    seen = set()
    return [c for c in found if not (c in seen or seen.add(c))]


def _not_found_advice(path: Optional[str]) -> str:
    if path:
        return "the path given to load_library() cannot be loaded"
    if os.environ.get(ENV_VAR):
        return "%s=%s cannot be loaded; set it to the full path of libknn_gpgpu" % (
            ENV_VAR, os.environ[ENV_VAR])
    return ("no library is bundled in %s and none is installed: install the package with "
            "`pip install ./bindings/python` from the knn_gpgpu repository (it builds and "
            "bundles the library), or install the C library (`cmake --install build`, into "
            "%s or /usr/local), or set %s to the library's full path"
            % (os.path.dirname(os.path.abspath(__file__)), sys.prefix, ENV_VAR))


class Native:
    """The loaded library: one attribute per C function, with its prototype set."""

    def __init__(self, cdll: ctypes.CDLL, path: str) -> None:
        self.cdll = cdll
        self.path = path
        self._untyped: Dict[str, Any] = {}
        missing = [name for name in PROTOTYPES if not hasattr(cdll, name)]
        if missing:
            raise LibraryNotFoundError(
                "%s lacks the knn_gpgpu functions %s; it is not a compatible libknn_gpgpu"
                % (path, ", ".join(missing)))
        for name, (restype, argtypes) in PROTOTYPES.items():
            fn = getattr(cdll, name)
            fn.restype = restype
            fn.argtypes = argtypes
            setattr(self, name, fn)
        version = self.knn_version()
        if version // 10000 != ABI_MAJOR:
            raise LibraryNotFoundError(
                "%s is knn_gpgpu version %d.%d.%d; this binding needs major version %d"
                % (path, version // 10000, version // 100 % 100, version % 100, ABI_MAJOR))

    def untyped(self, name: str) -> Any:
        """``name`` again, with every pointer argument a ``c_void_p``: the
        binding's fast paths pass addresses (``ndarray.ctypes.data``) as ints,
        skipping the typed conversion (microseconds a call) for arrays it has
        checked itself."""
        cached = self._untyped.get(name)
        if cached is None:
            restype, argtypes = PROTOTYPES[name]
            cached = self.cdll[name]
            cached.restype = restype
            cached.argtypes = [c_void_p if hasattr(t, "contents") else t for t in argtypes]
            self._untyped[name] = cached
        return cached

    def __getattr__(self, name: str) -> Any:  # only reached for unknown names
        raise AttributeError("knn_gpgpu has no function %r" % name)


_lock = threading.Lock()
_native: Optional[Native] = None


def load_library(path: Optional[str] = None) -> Native:
    """Load the library (once) and return it.

    Args:
        path: an explicit path; ``None`` uses ``KNN_GPGPU_LIBRARY`` or the search
            described in the module documentation. Loading a second, different
            path after the first load replaces the binding's handle.

    Raises:
        LibraryNotFoundError: nothing loadable was found, a symbol is missing,
            or the library's major version differs from the binding's.
    """
    global _native
    with _lock:
        if _native is not None and (path is None or path == _native.path):
            return _native
        tried: List[str] = []
        for candidate in ([path] if path else candidates()):
            try:
                cdll = ctypes.CDLL(candidate)
            except OSError as exc:
                tried.append("%s (%s)" % (candidate, exc))
                continue
            _native = Native(cdll, candidate)
            return _native
        raise LibraryNotFoundError("cannot load libknn_gpgpu: %s. Tried: %s"
                                   % (_not_found_advice(path), "; ".join(tried)))


def native() -> Native:
    """The loaded library, loading it on first use."""
    lib = _native
    return lib if lib is not None else load_library()


def library_path() -> str:
    """Path or name the library was loaded from."""
    return native().path


def last_error() -> str:
    """``knn_last_error()`` of the calling thread, decoded."""
    raw = native().knn_last_error()
    return raw.decode("utf-8", "replace") if raw else ""


def status_string(status: int) -> str:
    """``knn_status_string(status)``: the library's static text for a status."""
    raw = native().knn_status_string(int(status))
    return raw.decode("utf-8", "replace") if raw else ""


def check(status: int, function: str) -> None:
    """Raise the :class:`~knn_gpgpu.errors.KnnError` subclass for a non-zero status.

    Must run on the thread that made the call, right after it (the message is
    thread-local and valid until the thread's next call into the library).
    """
    if status != 0:
        raise make_error(status, last_error(), function)


def call(function: str, *args: Any) -> None:
    """Call a status-returning function by name and raise on failure."""
    check(getattr(native(), function)(*args), function)


def names() -> Sequence[str]:
    """Names of every bound C function."""
    return tuple(PROTOTYPES)
