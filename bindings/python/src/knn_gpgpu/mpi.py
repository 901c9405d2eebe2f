"""The distributed index (``knn_gpgpu_mpi.h``) through mpi4py.

::

    from mpi4py import MPI
    import knn_gpgpu.mpi as kmpi

    comm = MPI.COMM_WORLD
    with kmpi.DistributedIndex(comm, my_points, backend="openmp") as index:
        d2, ind = index.query(my_queries, k=8)       # global indices, int64
        d2, ind = index.query_self(k=8)              # my points' neighbours
        d2, ind, counts = index.radius(my_queries, 0.5, max_neighbors=32)

Results come distances first, as :class:`knn_gpgpu.Index` and scipy give
them, as named tuples (``result.indices``, ``result.sq_distances``); the 1.0
order, indices first, stays reachable through 1.1 with
``distances_first=False`` (with a DeprecationWarning).

Every method is collective: every rank of ``comm`` calls it, in the same order,
with the same ``k`` / ``radius`` / ``max_neighbors``; the point and query
counts may differ per rank, 0 included. Rank r's point i has the global index
``offset + i`` (``index.offset``: the points of the ranks before r). Answers
are bit-identical to :class:`knn_gpgpu.Index` over the union of all points.
Every rank raises the same :class:`~knn_gpgpu.KnnError` when any rank fails.

The communicator reaches the library as the address of its ``MPI_Comm``
handle (``MPI._addressof(comm)``), so mpi4py must be built on the same MPI as
libknn_gpgpu_mpi (Debian's python3-mpi4py and libopenmpi-dev, or ``pip install
mpi4py`` against them).

The library is found through ``KNN_GPGPU_MPI_LIBRARY`` (full path), next to
the loaded libknn_gpgpu, or the loader's search path.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from ctypes import POINTER, c_char_p, c_double, c_float, c_int, c_int64, c_size_t, c_void_p
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

import numpy as np

from ._arrays import c_int as _c_int
from ._arrays import host_rows
from ._handle import NativeHandle
from ._library import library_path, native
from ._types import OptionsStruct
from .cancel import CancelFlag
from .errors import LibraryNotFoundError, make_error
from .index import KnnResult, LegacyKnnResult, RadiusRows, _distances_first
from .options import Options

__all__ = ["DistributedIndex", "RadiusResult", "load_mpi_library", "ENV_VAR"]

_Knn = Union[KnnResult, LegacyKnnResult]

ENV_VAR = "KNN_GPGPU_MPI_LIBRARY"


class MpiOptionsStruct(ctypes.Structure):
    """Raw ``knn_mpi_options`` layout."""

    _fields_ = [("struct_size", c_size_t),
                ("local", POINTER(OptionsStruct)),
                ("time_limit_seconds", c_double),
                ("cancel_flag", POINTER(c_int)),
                ("sample_size", c_int64)]


class _DIndex(ctypes.Structure):
    """Opaque ``knn_dindex``."""


_P_D = POINTER(_DIndex)
_P_I64 = POINTER(c_int64)
_P_F = POINTER(c_float)
_PROTOTYPES = {
    "knn_mpi_options_init": (None, [POINTER(MpiOptionsStruct)]),
    "knn_mpi_last_error": (c_char_p, []),
    "knn_dindex_build": (c_int, [c_void_p, _P_F, c_int64, c_int, POINTER(MpiOptionsStruct),
                                 POINTER(_P_D)]),
    "knn_dindex_free": (c_int, [_P_D]),
    "knn_dindex_info": (c_int, [_P_D, _P_I64, _P_I64, _P_I64, POINTER(c_int), _P_I64,
                                POINTER(c_int), POINTER(c_int)]),
    "knn_dindex_query": (c_int, [_P_D, _P_F, c_int64, c_int, _P_I64, _P_F]),
    "knn_dindex_query_self": (c_int, [_P_D, c_int, c_int, _P_I64, _P_F]),
    "knn_dindex_radius": (c_int, [_P_D, _P_F, c_int64, c_float, c_int, _P_I64, _P_F, _P_I64]),
    "knn_dindex_last_stats": (c_int, [_P_D, _P_I64, _P_I64, POINTER(c_double)]),
}

_lock = threading.Lock()
_mpi_lib: Optional[ctypes.CDLL] = None


def _candidates() -> List[str]:
    env = os.environ.get(ENV_VAR)
    if env:
        return [env]
    names = ["libknn_gpgpu_mpi.so.1", "libknn_gpgpu_mpi.so"]
    found: List[str] = []
    core_dir = os.path.dirname(os.path.abspath(library_path()))
    for d in (core_dir, os.path.join(core_dir, "mpi")):  # installed, and a build tree
        found.extend(os.path.join(d, n) for n in names if os.path.isfile(os.path.join(d, n)))
    located = ctypes.util.find_library("knn_gpgpu_mpi")
    if located:
        found.append(located)
    return found + names


def load_mpi_library() -> ctypes.CDLL:
    """Load libknn_gpgpu_mpi (once), after libknn_gpgpu and MPI (mpi4py)."""
    global _mpi_lib
    with _lock:
        if _mpi_lib is not None:
            return _mpi_lib
        native()  # the core library first: libknn_gpgpu_mpi's dependency resolves to it
        tried = []
        for candidate in _candidates():
            try:
                lib = ctypes.CDLL(candidate, mode=ctypes.RTLD_GLOBAL)
            except OSError as exc:
                tried.append("%s (%s)" % (candidate, exc))
                continue
            for name, (restype, argtypes) in _PROTOTYPES.items():
                fn = getattr(lib, name)
                fn.restype, fn.argtypes = restype, argtypes
            _mpi_lib = lib
            return lib
        raise LibraryNotFoundError(
            "cannot load libknn_gpgpu_mpi; set %s to its full path. Tried: %s"
            % (ENV_VAR, "; ".join(tried)))


def _check(lib: ctypes.CDLL, status: int, function: str) -> None:
    if status != 0:
        raw = lib.knn_mpi_last_error()
        raise make_error(status, raw.decode("utf-8", "replace") if raw else "", function)


class RadiusResult(NamedTuple):
    """Result of :meth:`DistributedIndex.radius` in the 1.0 order
    (``distances_first=False``): rows of ``max_neighbors``."""

    indices: Optional[np.ndarray]
    sq_distances: Optional[np.ndarray]
    counts: np.ndarray


def _comm_address(comm: Any) -> int:
    from mpi4py import MPI  # imported here: the rest of knn_gpgpu needs no MPI
    if not isinstance(comm, MPI.Comm):
        raise TypeError("comm must be an mpi4py MPI.Comm, not %s" % type(comm).__name__)
    return int(MPI._addressof(comm))


def _prepare(prepare: Any, reject: Any) -> Any:
    """Runs a rank's local argument checks and allocations. When they fail, the
    C call is still made, with a count the library refuses (-1), so every rank
    fails together (no rank waits in a collective that another rank never
    joins); this rank then raises its own error."""
    try:
        return prepare()
    except (TypeError, ValueError, OverflowError, MemoryError) as exc:
        reject()
        raise exc


def _rows(rows: int, width: int) -> Tuple[np.ndarray, np.ndarray]:
    """Output rows: int64 indices and float32 squared distances."""
    ind = np.empty((rows, max(width, 0)), dtype=np.int64)
    return ind, np.empty(ind.shape, dtype=np.float32)


class DistributedIndex(NativeHandle):
    """An index over the union of every rank's points (``knn_dindex``).

    Args:
        comm: an mpi4py communicator (the library works on a duplicate).
        points: this rank's ``(n_local, dim)`` points (float32-convertible);
            ``n_local`` may be 0 (pass an ``(0, dim)`` array).
        backend, structure, leaf_size, threads, device: the local index's
            options on each rank (as :class:`knn_gpgpu.Options`).
        time_limit: seconds per call (0: none), checked at phase boundaries on
            every rank; a call past it raises ``CancelledError`` everywhere.
        cancel_flag: a :class:`knn_gpgpu.CancelFlag`; once set on any rank,
            the next phase boundary stops every rank with ``CancelledError``.
        sample_size: points sampled for the decomposition (0: the default).

    :meth:`close` (or the end of a ``with`` block) is collective too; an index
    left open is freed at garbage collection. A :meth:`close` on another
    thread while a call runs frees the index when that call returns (as for
    :class:`knn_gpgpu.Index`).
    """

    _free_function = "knn_dindex_free"
    _what = "distributed index"

    def __init__(self, comm: Any, points: Any, *, backend: Union[int, str, None] = None,
                 structure: Union[int, str, None] = None, leaf_size: Optional[int] = None,
                 threads: Optional[int] = None, device: Optional[int] = None,
                 time_limit: float = 0.0, cancel_flag: Optional[CancelFlag] = None,
                 sample_size: int = 0) -> None:
        self._lib = load_mpi_library()
        self._own(None)
        comm_address = _comm_address(comm)
        handle = _P_D()
        def prepare() -> Any:
            pts = host_rows(points, "points")
            opt = MpiOptionsStruct()
            self._lib.knn_mpi_options_init(ctypes.byref(opt))
            opt.struct_size = min(opt.struct_size, ctypes.sizeof(MpiOptionsStruct))
            local = Options(backend=backend, structure=structure, leaf_size=leaf_size,
                            threads=threads, device=device)
            opt.local = ctypes.cast(ctypes.pointer(local), POINTER(OptionsStruct))
            opt.time_limit_seconds = float(time_limit)
            if cancel_flag is not None:
                opt.cancel_flag = ctypes.pointer(cancel_flag._value)
            opt.sample_size = int(sample_size)
            return pts, opt, local
        # `local` stays referenced (opt points to it) until the build returns.
        pts, opt, local = _prepare(
            prepare, lambda: self._lib.knn_dindex_build(c_void_p(comm_address), None, -1, 1, None,
                                                        ctypes.byref(handle)))
        self._flag = cancel_flag  # kept alive: the index reads it in every call
        status = self._lib.knn_dindex_build(
            c_void_p(comm_address), pts.ctypes.data_as(_P_F), pts.shape[0], pts.shape[1],
            ctypes.byref(opt), ctypes.byref(handle))
        _check(self._lib, status, "knn_dindex_build")
        self._own(handle)
        self._comm = comm
        self._info()

    def _info(self) -> None:
        n_global, n_local, offset, n_region = c_int64(), c_int64(), c_int64(), c_int64()
        dim, rank, size = c_int(), c_int(), c_int()
        with self._use() as live:
            _check(self._lib, self._lib.knn_dindex_info(
                live, ctypes.byref(n_global), ctypes.byref(n_local), ctypes.byref(offset),
                ctypes.byref(dim), ctypes.byref(n_region), ctypes.byref(rank),
                ctypes.byref(size)), "knn_dindex_info")
        self.n_global, self.n_local, self.offset = n_global.value, n_local.value, offset.value
        self.dim, self.n_region = dim.value, n_region.value
        self.rank, self.size = rank.value, size.value

    def _native_library(self) -> Any:
        return self._lib

    def _check_status(self, status: int, function: str) -> None:
        _check(self._lib, status, function)

    def query(self, queries: Any, k: int, *, distances_first: bool = True) -> _Knn:
        """``(sq_distances, indices)`` of shape ``(m, k)``: float32 squared
        distances and int64 global indices of this rank's queries
        (``distances_first=False``: the 1.0 order, with a DeprecationWarning)."""
        first = _distances_first(distances_first, "DistributedIndex.query")
        def prepare() -> Any:
            q = host_rows(queries, "queries", self.dim)
            kk = _c_int(k, "k", "knn_dindex_query")
            return q, kk, _rows(q.shape[0], kk)
        with self._use() as live:
            q, k, (ind, d2) = _prepare(
                prepare, lambda: self._lib.knn_dindex_query(live, None, -1, 1, None, None))
            _check(self._lib, self._lib.knn_dindex_query(
                live, q.ctypes.data_as(_P_F), q.shape[0], k, ind.ctypes.data_as(_P_I64),
                d2.ctypes.data_as(_P_F)), "knn_dindex_query")
        return KnnResult(d2, ind) if first else LegacyKnnResult(ind, d2)

    def query_self(self, k: int, exclude_self: bool = True, *,
                   distances_first: bool = True) -> _Knn:
        """All-kNN of this rank's own points: ``(n_local, k)`` arrays, in the
        order of :meth:`query`."""
        first = _distances_first(distances_first, "DistributedIndex.query_self")
        def prepare() -> Any:
            kk = _c_int(k, "k", "knn_dindex_query_self")
            return kk, _rows(self.n_local, kk)
        with self._use() as live:
            k, (ind, d2) = _prepare(
                prepare, lambda: self._lib.knn_dindex_query_self(live, 0, 0, None, None))
            _check(self._lib, self._lib.knn_dindex_query_self(
                live, k, 1 if exclude_self else 0, ind.ctypes.data_as(_P_I64),
                d2.ctypes.data_as(_P_F)), "knn_dindex_query_self")
        return KnnResult(d2, ind) if first else LegacyKnnResult(ind, d2)

    def radius(self, queries: Any, radius: float, max_neighbors: int, *,
               distances_first: bool = True) -> Union[RadiusRows, RadiusResult]:
        """Points within ``radius`` (squared distance <= float32 radius*radius):
        ``(sq_distances, indices, counts)``, rows of ``max_neighbors`` by
        (distance, index) and the true counts over all ranks.
        ``max_neighbors = 0`` counts only (distances and indices are ``None``).
        ``distances_first=False``: :class:`RadiusResult`, the 1.0 order, with a
        DeprecationWarning."""
        first = _distances_first(distances_first, "DistributedIndex.radius", counts=True)
        def prepare() -> Any:
            q = host_rows(queries, "queries", self.dim)
            w = _c_int(max_neighbors, "max_neighbors", "knn_dindex_radius")
            return q, float(radius), w, _rows(q.shape[0], w), np.empty(q.shape[0], np.int64)
        with self._use() as live:
            q, r, w, (ind, d2), counts = _prepare(
                prepare, lambda: self._lib.knn_dindex_radius(live, None, -1, 0.0, 0, None,
                                                             None, None))
            _check(self._lib, self._lib.knn_dindex_radius(
                live, q.ctypes.data_as(_P_F), q.shape[0], c_float(r), w,
                ind.ctypes.data_as(_P_I64), d2.ctypes.data_as(_P_F),
                counts.ctypes.data_as(_P_I64)), "knn_dindex_radius")
        rows: Tuple[Optional[np.ndarray], Optional[np.ndarray]] = (ind, d2) if w else (None, None)
        return (RadiusRows(rows[1], rows[0], counts) if first
                else RadiusResult(rows[0], rows[1], counts))

    def last_stats(self) -> Dict[str, Any]:
        """This rank's traffic and phase times of the last call (see the header)."""
        sent, forwarded = c_int64(), c_int64()
        phases = (c_double * 4)()
        with self._use() as live:
            _check(self._lib, self._lib.knn_dindex_last_stats(
                live, ctypes.byref(sent), ctypes.byref(forwarded), phases),
                "knn_dindex_last_stats")
        return {"bytes_sent": sent.value, "forwarded_queries": forwarded.value,
                "phase_seconds": list(phases)}
