"""The index API: a resident index of points in any dimension.

::

    with knn_gpgpu.Index(points, backend="auto") as index:   # (n, dim) floats
        d2, ind = index.query(queries, k=8)                  # (m, 8) each
        d2, ind, counts = index.radius(queries, 0.5, max_neighbors=32)

Precision: the points' dtype picks it, and nothing is rounded silently.
float32 points build a float32 index (``knn_index_build``); float64 points,
and every other real dtype (integers, bool, float16), a float64 index
(``knn_index_build_f64``; integers convert to float64, exact up to 2^53).
:attr:`Index.dtype` says which; a deserialized index keeps the precision it
was built with. Queries take the index's precision: a float64 index converts
float32 or integer queries to float64 (exactly); a float32 index accepts
float64 (or integer) queries only when every value is a float32 already, and
raises ``TypeError`` otherwise (build the index from float64 points, or round
the queries yourself with ``astype(numpy.float32)``). Squared distances and
the ``radius`` come back and are compared in the index's precision: the
float64 contract is the float32 one in double (``((d0*d0 + d1*d1) + d2*d2)
+ ...``, every operation rounded to float64, no FMA, ties by index).

Device arrays: ``points``, ``queries`` and the ``out_*`` arrays may be objects
with ``__cuda_array_interface__`` (CuPy, Numba, PyTorch CUDA tensors). Their
device pointer is passed to the library, which detects device memory and uses
it in place; they must be C-contiguous float32 or float64 (the index's
dtype for queries and distances; int32 for indices and counts), and ready (the binding does not synchronise the producer's stream). A library
that sees no CUDA device cannot read device memory: the binding then raises
:class:`NoDeviceError` without calling it.
"""

from __future__ import annotations

import ctypes
import math
import threading
import warnings
from typing import TYPE_CHECKING, Any, NamedTuple, Optional, Union

import numpy as np

from . import _arrays
from ._library import check, native
from ._types import SCALAR_FLOAT64, AlignResultStruct, Backend, IndexHandle, IndexStructure
from .errors import NoDeviceError, Status
from ._handle import NativeHandle
from .options import Options, byref, resolve
from .stats import NeighbourhoodStats

if TYPE_CHECKING:
    from .mesh import AlignResult

__all__ = ["Index", "IndexInfo", "KnnResult", "LegacyKnnResult", "RadiusCsr", "RadiusResult",
           "RadiusRows", "estimate_build_bytes", "estimate_query_bytes"]

OptionValue = Union[int, str, None]


class IndexInfo(NamedTuple):
    """What ``knn_index_info`` reports: what actually serves the index."""

    n: int
    dim: int
    backend: Union[Backend, int]
    structure: Union[IndexStructure, int]


# Return order. The binding returns distances first, as scipy and brute_force
# do: Index.query, query_self and radius too (``distances_first=True``, the
# default). Their 1.0 order, indices first, stays reachable through 1.1 with
# ``distances_first=False`` (with a DeprecationWarning; 1.2 removes it). Every
# result is a named tuple, so ``result.indices`` / ``result.sq_distances``
# read the same in either order.

class KnnResult(NamedTuple):
    """kNN result, distances first: ``(sq_distances, indices)``, each ``(m, k)``."""

    sq_distances: Optional[Any]
    indices: Any


class LegacyKnnResult(NamedTuple):
    """kNN result in the 1.0 order, ``(indices, sq_distances)`` (``distances_first=False``)."""

    indices: Any
    sq_distances: Optional[Any]


class RadiusRows(NamedTuple):
    """Result of :meth:`Index.radius` with ``distances_first=True``: rows of
    ``max_neighbors`` per query, ``(sq_distances, indices, counts)``."""

    sq_distances: Optional[Any]
    indices: Optional[Any]
    counts: Any


class RadiusResult(NamedTuple):
    """Result of :meth:`Index.radius` in the 1.0 order, ``(indices, sq_distances, counts)``."""

    indices: Optional[Any]
    sq_distances: Optional[Any]
    counts: Any


_ORDER_WARNING = ("%s returns (indices, sq_distances%s) in the 1.0 order because "
                  "distances_first=False was passed; that order is removed in 1.2: drop the "
                  "argument for (sq_distances, indices%s), as scipy and brute_force return them, "
                  "or read the named fields (result.indices, result.sq_distances)")


def _distances_first(value: bool, method: str, counts: bool = False) -> bool:
    """The order to return; warns when the caller asks for the 1.0 order."""
    if not value:
        tail = ", counts" if counts else ""
        warnings.warn(_ORDER_WARNING % (method, tail, tail), DeprecationWarning, stacklevel=3)
        return False
    return True


class RadiusCsr(NamedTuple):
    """Result of :meth:`Index.radius_csr`: every neighbour of query ``i`` in
    ``indices[offsets[i]:offsets[i + 1]]`` (and ``sq_distances``), nearest first;
    distances first, as every new result of the binding."""

    sq_distances: Optional[Any]
    indices: Any
    offsets: Any


def _weights_of(weights: Any, count: int, name: str) -> Optional[np.ndarray]:
    """Per-point weights as the C calls read them: ``count`` float64, or None."""
    if weights is None:
        return None
    w = np.ascontiguousarray(weights, dtype=np.float64).reshape(-1)
    if w.shape[0] != count:
        raise ValueError("%s: %d weights for %d points" % (name, w.shape[0], count))
    return w


def _require_device_support(*arrays: Any) -> None:
    if any(isinstance(a, _arrays.DeviceArray) for a in arrays):
        if native().cuGetDeviceCount() <= 0:
            raise NoDeviceError(
                Status.NO_DEVICE,
                "a __cuda_array_interface__ array was given, but the loaded libknn_gpgpu sees "
                "no CUDA device (built without CUDA, or no usable GPU); it cannot read device "
                "memory", "knn_gpgpu (binding)")


def _enum_or_int(kind: Any, value: int) -> Any:
    try:
        return kind(value)
    except ValueError:
        return value


def _entry(function: str, scalar: np.dtype) -> str:
    """The C function of ``scalar``'s family: ``function`` or its ``_f64`` twin."""
    return function + "_f64" if scalar == _arrays.FLOAT64 else function


def _ctype(scalar: np.dtype) -> Any:
    return ctypes.c_double if scalar == _arrays.FLOAT64 else ctypes.c_float


class Index(NeighbourhoodStats, NativeHandle):
    """An index over ``n`` points of ``dim`` floats (``knn_index``), in float32
    or float64 as the points are (see the module documentation).

    The neighbourhood statistics of its points (3-D: normals, outlier
    scores and inliers, densities) are methods too (:mod:`knn_gpgpu.stats`).

    The index owns a copy of the points (on the device for the CUDA backend);
    the input array may be changed or freed after construction. Queries may run
    from any number of threads at once. Free it with :meth:`close` or a
    ``with`` block; a forgotten index is freed when garbage-collected.

    Args:
        points: ``(n, dim)`` host array-like or device array (float32 or
            float64, used in place). float32 builds a float32 index, any other
            real dtype a float64 one.
        options: an :class:`Options`; the keyword arguments override its fields.
        backend, device, structure, leaf_size, threads, device_memory_limit:
            option fields (see :class:`Options`).

    Raises:
        KnnError subclasses from ``knn_index_build`` (``NonfiniteInputError``
        naming the point, ``InvalidArgumentError``, ``NoDeviceError`` for
        ``backend="cuda"`` without a GPU), ``ValueError`` for shapes (before the call).
    """

    def __init__(self, points: Any, *, options: Optional[Options] = None,
                 backend: OptionValue = None, device: Optional[int] = None,
                 structure: OptionValue = None, leaf_size: Optional[int] = None,
                 threads: Optional[int] = None,
                 device_memory_limit: Optional[int] = None) -> None:
        self._own(None)
        pts = _arrays.rows(points, "points")
        n, dim = (int(s) for s in pts.shape)
        scalar = pts.dtype
        _require_device_support(pts)
        opt = resolve(options, backend=backend, device=device, structure=structure,
                      leaf_size=leaf_size, threads=threads,
                      device_memory_limit=device_memory_limit)
        handle = ctypes.POINTER(IndexHandle)()
        build = _entry("knn_index_build", scalar)
        status = getattr(native(), build)(_arrays.pointer(pts, _ctype(scalar)),
                                          _arrays.c_int64(n, "n"),
                                          _arrays.c_int(dim, "dim", build),
                                          byref(opt), ctypes.byref(handle))
        check(status, build)
        self._own(handle)
        self._n = n
        self._dim = dim
        self._scalar = scalar

    @classmethod
    def _from_handle(cls, handle: Any, n: int, dim: int) -> "Index":
        """Wrap an existing ``knn_index*`` (taking ownership; its precision from
        ``knn_index_scalar``). For advanced hosts and tests."""
        self = cls.__new__(cls)
        self._own(handle)
        self._n = int(n)
        self._dim = int(dim)
        scalar = ctypes.c_int()
        check(native().knn_index_scalar(handle, ctypes.byref(scalar)), "knn_index_scalar")
        self._scalar = _arrays.FLOAT64 if scalar.value == SCALAR_FLOAT64 else _arrays.FLOAT32
        return self

    _free_function = "knn_index_free"
    _what = "index"

    def __repr__(self) -> str:
        state = "closed" if self.closed else "n=%d, dim=%d, dtype=%s" % (self._n, self._dim,
                                                                      self._scalar)
        return "<knn_gpgpu.Index %s>" % state

    # ---- properties ----------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of indexed points."""
        return self._n

    @property
    def dim(self) -> int:
        """Dimension of the points."""
        return self._dim

    @property
    def dtype(self) -> np.dtype:
        """``numpy.float32`` or ``numpy.float64``: the precision the index holds its
        points in, computes in and returns squared distances in."""
        return self._scalar

    def info(self) -> IndexInfo:
        """Size, dimension, backend and structure that actually serve the index."""
        n = ctypes.c_int64()
        dim = ctypes.c_int()
        backend = ctypes.c_int()
        structure = ctypes.c_int()
        with self._use() as handle:
            check(native().knn_index_info(handle, ctypes.byref(n), ctypes.byref(dim),
                                          ctypes.byref(backend), ctypes.byref(structure)),
                  "knn_index_info")
        return IndexInfo(n.value, dim.value, _enum_or_int(Backend, backend.value),
                         _enum_or_int(IndexStructure, structure.value))

    # ---- queries -------------------------------------------------------------
    def query(self, queries: Any, k: int, *, distances: bool = True,
              options: Optional[Options] = None, out_indices: Any = None,
              out_distances: Any = None, distances_first: bool = True
              ) -> Union[KnnResult, LegacyKnnResult]:
        """The ``k`` nearest indexed points of each query (``knn_index_query``).

        Args:
            queries: ``(m, dim)`` host array-like or device array, taken in
                the index's dtype (see the module documentation).
            k: neighbours per query (>= 1).
            distances: also return squared distances (else NULL is passed).
            options: per-call options (``NULL`` when ``None``).
            out_indices, out_distances: optional ``(m, k)`` int32 / index-dtype
                outputs, host numpy arrays or device arrays.
            distances_first: True (the default): return :class:`KnnResult`
                ``(sq_distances, indices)``; False: :class:`LegacyKnnResult`
                ``(indices, sq_distances)``, the 1.0 order, with a
                DeprecationWarning (kept through 1.1, removed in 1.2).

        Returns:
            ``(m, k)`` int32 indices and squared distances in the index's dtype (``None``
            when ``distances`` is false), nearest first, ties by index, -1/+inf
            in missing slots.
        """
        first = _distances_first(distances_first, "Index.query")
        with self._use() as handle:
            q = _arrays.rows(queries, "queries", self._dim, self._scalar)
            m = int(q.shape[0])
            query = _entry("knn_index_query", self._scalar)
            k = _arrays.c_int(k, "k", query)
            shape = _arrays.nonneg_shape(m, k)
            ind = _arrays.output(out_indices, shape, np.int32, "out_indices", allow_device=True)
            dist = (_arrays.output(out_distances, shape, self._scalar, "out_distances",
                                   allow_device=True)
                    if distances or out_distances is not None else None)
            _require_device_support(q, ind, dist)
            real = _ctype(self._scalar)
            status = getattr(native(), query)(handle, _arrays.pointer(q, real),
                                              _arrays.c_int64(m, "m"), k,
                                              _arrays.pointer(ind, ctypes.c_int32),
                                              _arrays.pointer(dist, real), byref(options))
            check(status, query)
            return (KnnResult(_unwrap(dist), _unwrap(ind)) if first
                    else LegacyKnnResult(_unwrap(ind), _unwrap(dist)))

    def query_self(self, k: int, *, exclude_self: bool = False, distances: bool = True,
                   out_indices: Any = None, out_distances: Any = None,
                   distances_first: bool = True
                   ) -> Union[KnnResult, LegacyKnnResult]:
        """All-kNN of the indexed points, in input order (``knn_index_query_self``).

        ``exclude_self`` drops only each point's own index, not other points at
        distance 0. Returns indices and squared distances of shape ``(n, k)``
        in the order ``distances_first`` asks for (see :meth:`query`).
        """
        first = _distances_first(distances_first, "Index.query_self")
        with self._use() as handle:
            query_self = _entry("knn_index_query_self", self._scalar)
            k = _arrays.c_int(k, "k", query_self)
            shape = _arrays.nonneg_shape(self._n, k)
            ind = _arrays.output(out_indices, shape, np.int32, "out_indices", allow_device=True)
            dist = (_arrays.output(out_distances, shape, self._scalar, "out_distances",
                                   allow_device=True)
                    if distances or out_distances is not None else None)
            _require_device_support(ind, dist)
            status = getattr(native(), query_self)(handle, k, 1 if exclude_self else 0,
                                                   _arrays.pointer(ind, ctypes.c_int32),
                                                   _arrays.pointer(dist, _ctype(self._scalar)))
            check(status, query_self)
            return (KnnResult(_unwrap(dist), _unwrap(ind)) if first
                    else LegacyKnnResult(_unwrap(ind), _unwrap(dist)))

    def radius(self, queries: Any, radius: float, max_neighbors: int, *,
               distances: bool = True, options: Optional[Options] = None,
               out_indices: Any = None, out_distances: Any = None,
               out_counts: Any = None, distances_first: bool = True
               ) -> Union[RadiusRows, RadiusResult]:
        """Points within ``radius`` of each query (``knn_index_radius``).

        Rows of ``max_neighbors`` per query ordered by (distance, index); unused
        slots hold -1 / +inf; ``counts[i]`` is the true number within the radius
        (it may exceed ``max_neighbors``). ``max_neighbors=0`` is a counting call:
        ``indices`` and ``sq_distances`` are then ``None``.

        Returns:
            ``(m, max_neighbors)`` int32 indices and squared distances in the index's dtype
            and ``(m,)`` int32 counts: :class:`RadiusRows` ``(sq_distances,
            indices, counts)`` (``distances_first=True``, the default), else
            :class:`RadiusResult` ``(indices, sq_distances, counts)`` (the 1.0
            order, ``distances_first=False``, with a DeprecationWarning; kept
            through 1.1, removed in 1.2).
            Unbounded lists: :meth:`knn_gpgpu.KDTree.query_ball_point`.
        """
        first = _distances_first(distances_first, "Index.radius", counts=True)
        with self._use() as handle:
            q = _arrays.rows(queries, "queries", self._dim, self._scalar)
            m = int(q.shape[0])
            call = _entry("knn_index_radius", self._scalar)
            max_neighbors = _arrays.c_int(max_neighbors, "max_neighbors", call)
            shape = _arrays.nonneg_shape(m, max_neighbors)
            want_rows = max_neighbors != 0
            ind = (_arrays.output(out_indices, shape, np.int32, "out_indices", allow_device=True)
                   if want_rows or out_indices is not None else None)
            dist = (_arrays.output(out_distances, shape, self._scalar, "out_distances",
                                   allow_device=True)
                    if (want_rows and distances) or out_distances is not None else None)
            counts = _arrays.output(out_counts, (m,), np.int32, "out_counts", allow_device=True)
            _require_device_support(q, ind, dist, counts)
            real = _ctype(self._scalar)
            status = getattr(native(), call)(handle, _arrays.pointer(q, real),
                                             _arrays.c_int64(m, "m"), float(radius),
                                             max_neighbors, _arrays.pointer(ind, ctypes.c_int32),
                                             _arrays.pointer(dist, real),
                                             _arrays.pointer(counts, ctypes.c_int32),
                                             byref(options))
            check(status, call)
            return (RadiusRows(_unwrap(dist), _unwrap(ind), _unwrap(counts)) if first
                    else RadiusResult(_unwrap(ind), _unwrap(dist), _unwrap(counts)))

    def radius_counts(self, queries: Any, radius: float, *,
                      options: Optional[Options] = None) -> Any:
        """Number of points within ``radius`` of each query (``knn_index_radius_count``):
        ``(m,)`` int64."""
        with self._use() as handle:
            q = _arrays.coords(queries, "queries", self._dim, self._scalar)
            m = int(q.shape[0])
            counts = np.empty((m,), dtype=np.int64)
            call = _entry("knn_index_radius_count", self._scalar)
            check(getattr(native(), call)(handle, _arrays.pointer(q, _ctype(self._scalar)),
                                          _arrays.c_int64(m, "m"), float(radius),
                                          _arrays.pointer(counts, ctypes.c_int64), byref(options)),
                  call)
            return counts

    def radius_csr(self, queries: Any, radius: float, *, distances: bool = True,
                   options: Optional[Options] = None) -> RadiusCsr:
        """Every point within ``radius`` of each query, in CSR rows: count
        (``knn_index_radius_count``), offsets (``knn_offsets_from_counts``), fill
        (``knn_index_radius_fill``). No ``max_neighbors``: rows are as long as
        the counts, ordered by (distance, index).

        Returns:
            :class:`RadiusCsr` ``(sq_distances, indices, offsets)``: the
            index's dtype and int32 of length ``offsets[-1]`` (``sq_distances`` ``None`` unless
            ``distances``), and ``(m + 1,)`` int64 offsets.
        """
        with self._use() as handle:
            q = _arrays.coords(queries, "queries", self._dim, self._scalar)
            m = int(q.shape[0])
            counts = self.radius_counts(q, radius, options=options)
            offsets = np.empty((m + 1,), dtype=np.int64)
            check(native().knn_offsets_from_counts(_arrays.pointer(counts, ctypes.c_int64),
                                                   _arrays.c_int64(m, "m"),
                                                   _arrays.pointer(offsets, ctypes.c_int64)),
                  "knn_offsets_from_counts")
            total = int(offsets[-1])
            ind = np.empty((total,), dtype=np.int32)
            dist = np.empty((total,), dtype=self._scalar) if distances else None
            real = _ctype(self._scalar)
            fill = _entry("knn_index_radius_fill", self._scalar)
            check(getattr(native(), fill)(handle, _arrays.pointer(q, real), _arrays.c_int64(m, "m"),
                                          float(radius), _arrays.pointer(offsets, ctypes.c_int64),
                                          _arrays.pointer(ind, ctypes.c_int32),
                                          _arrays.pointer(dist, real), byref(options)),
                  fill)
            return RadiusCsr(dist, ind, offsets)

    def radius_pairs(self, radius: float, *, self_counts: Any = None,
                     capacity: Optional[int] = None,
                     options: Optional[Options] = None) -> np.ndarray:
        """Every pair ``(i, j)``, ``i < j``, of the indexed points within ``radius``
        (``knn_index_radius_pairs``: squared distance ``<= radius * radius`` in
        the index's precision, a float32 index taking ``radius`` rounded to
        float32): ``(npairs, 2)`` int64, ordered by ``i``, then ``j``.
        ``self_counts``: :meth:`radius_counts` of the indexed points themselves
        (in input order) at this radius, which spares the library a search.
        ``capacity``: a guess at the number of pairs (say, that of the last
        call at this radius): the call is made with that room and made again
        only when it is short (on the OpenMP kd-tree, which finds the pairs in
        one search, a right guess is one search). Without either, a size
        query comes first."""
        with self._use() as handle:
            count = ctypes.c_int64(-1)
            r = float(radius)
            counts = None
            if self_counts is not None:
                counts = np.ascontiguousarray(self_counts, dtype=np.int64).reshape(-1)
                if counts.shape[0] != self._n:
                    raise ValueError("self_counts: %d counts for %d points"
                                     % (counts.shape[0], self._n))
                total = max(0, (int(counts.sum()) - self._n) // 2)
            elif capacity is not None:
                total = max(0, int(capacity))
            else:
                check(native().knn_index_radius_pairs(handle, r, None, 0, None,
                                                      ctypes.byref(count), byref(options)),
                      "knn_index_radius_pairs")
                total = count.value
            while True:
                pairs = np.empty((total, 2), dtype=np.int64)
                if not (total or counts is not None or capacity is not None):
                    return pairs
                status = native().knn_index_radius_pairs(
                    handle, r, _arrays.pointer(counts, ctypes.c_int64), total,
                    _arrays.pointer(pairs, ctypes.c_int64) if total else None,
                    ctypes.byref(count), byref(options))
                # A short guess: *count holds the number of pairs, pairs is untouched.
                short = status in (0, Status.INVALID_ARGUMENT) and count.value > total
                if counts is None and short:
                    total, capacity = count.value, None
                    continue
                check(status, "knn_index_radius_pairs")
                found = count.value
                if found == total:
                    return pairs
                # A long guess: the pairs alone, copied where most of the room is unused.
                return pairs[:found].copy() if 2 * found < total else pairs[:found]

    def count_neighbors(self, queries: Any, radii: Any, *, query_weights: Any = None,
                        point_weights: Any = None, weighted: bool = False,
                        options: Optional[Options] = None) -> Any:
        """For each radius, the number of (query, indexed point) pairs within it
        (``knn_index_count_neighbors``: ``d * d <= r * r`` in float64, the index's
        own squared distance; one search at the largest radius): ``(len(radii),)``
        int64. With ``weighted``, float64 sums of ``query_weights[q] *
        point_weights[p]`` over the same pairs instead (``None``: all 1)."""
        with self._use() as handle:
            q = _arrays.coords(queries, "queries", self._dim, self._scalar)
            m = int(q.shape[0])
            r = np.ascontiguousarray(radii, dtype=np.float64).reshape(-1)
            qw = _weights_of(query_weights, m, "query_weights")
            pw = _weights_of(point_weights, self._n, "point_weights")
            counts = None if weighted else np.empty(r.shape[0], dtype=np.int64)
            sums = np.empty(r.shape[0], dtype=np.float64) if weighted else None
            call = _entry("knn_index_count_neighbors", self._scalar)
            p_double = ctypes.c_double
            check(getattr(native(), call)(handle, _arrays.pointer(q, _ctype(self._scalar)),
                                          _arrays.c_int64(m, "m"), _arrays.pointer(r, p_double),
                                          r.shape[0], _arrays.pointer(qw, p_double),
                                          _arrays.pointer(pw, p_double),
                                          _arrays.pointer(counts, ctypes.c_int64),
                                          _arrays.pointer(sums, p_double), byref(options)),
                  call)
            return sums if weighted else counts

    def align(self, points: Any, normals: Any = None, initial: Any = None,
              max_correspondence: float = math.inf, max_iterations: int = 50, *,
              kept_fraction: float = 1.0, tolerance_rotation: Optional[float] = None,
              tolerance_translation: Optional[float] = None, coarse_start: bool = False,
              options: Optional[Options] = None) -> "AlignResult":
        """The best fit of a scan to this index's 3-D points
        (``knn_index_align``): ICP against each moved point's nearest indexed
        point, point to plane along ``normals`` or point to point without
        them, summed in float64, the same transform bit for bit on every
        backend (definitions in the header).

        Args:
            points: the scan, ``(m, 3)`` host or device array, in the index's dtype.
            normals: ``(n, 3)`` normals of the indexed points (any length;
                e.g. from ``knn_index_normals``), host or device, in the
                index's dtype; None: point to point.
            initial, max_correspondence, max_iterations, kept_fraction,
            tolerance_rotation, tolerance_translation, coarse_start: as
                :meth:`knn_gpgpu.Mesh.align` (the default translation
                tolerance: 1e-6 of the indexed points' bounding-box diagonal,
                1e-5 for a float32 index;
                the coarse start matches the principal axes of the points).

        Returns:
            :class:`knn_gpgpu.AlignResult`.
        """
        from .mesh import _align_params, _align_result  # mesh imports this module
        params, start = _align_params(initial, max_correspondence, max_iterations,
                                      kept_fraction, tolerance_rotation,
                                      tolerance_translation, coarse_start)
        result = AlignResultStruct()
        result.struct_size = ctypes.sizeof(AlignResultStruct)
        with self._use() as handle:
            q = _arrays.rows(points, "points", 3, self._scalar)
            nrm = (None if normals is None
                   else _arrays.rows(normals, "normals", 3, self._scalar))
            if nrm is not None and int(nrm.shape[0]) != self._n:
                raise ValueError("normals: expected %d rows (one per indexed point), got %d"
                                 % (self._n, int(nrm.shape[0])))
            _require_device_support(q, nrm)
            call = _entry("knn_index_align", self._scalar)
            real = _ctype(self._scalar)
            check(getattr(native(), call)(handle, _arrays.pointer(q, real),
                                          _arrays.c_int64(int(q.shape[0]), "m"),
                                          _arrays.pointer(nrm, real),
                                          _arrays.pointer(start, ctypes.c_double),
                                          ctypes.byref(params), ctypes.byref(result),
                                          byref(options)), call)
        return _align_result(result)

    def _query_host(self, q: np.ndarray, k: int, options: Optional[Options]) -> KnnResult:
        """:meth:`query` for :class:`~knn_gpgpu.KDTree`'s small calls, without the
        conversions: ``q`` is a C-contiguous host ``(m, dim)`` array of the
        index's dtype and ``k`` a C int >= 1 (the caller checked both)."""
        m = q.shape[0]
        call = "knn_index_query_f64" if self._scalar == _arrays.FLOAT64 else "knn_index_query"
        one = m == 1 and k <= _ONE_POINT_K
        if one:  # the thread's buffers, whose addresses are known (ndarray.ctypes: 3 us each)
            scratch = self._one_point_buffers()
            scratch.q[0] = q[0]
            addresses = scratch.addresses
        else:
            ind = np.empty((m, k), np.int32)
            dist = np.empty((m, k), self._scalar)
            addresses = (q.ctypes.data, ind.ctypes.data, dist.ctypes.data)
        handle = self._acquire()
        try:
            status = native().untyped(call)(handle, addresses[0], m, k, addresses[1],
                                            addresses[2], byref(options))
        finally:
            self._release()
        check(status, call)
        if one:
            return KnnResult(scratch.dist[:k].reshape(1, k).copy(),
                             scratch.ind[:k].reshape(1, k).copy())
        return KnnResult(dist, ind)

    def _one_point_buffers(self) -> Any:
        """This thread's query and output buffers for one point (threads share
        an index, so each has its own)."""
        local = self.__dict__.get("_local")
        if local is None:
            local = self.__dict__.setdefault("_local", threading.local())
        scratch = getattr(local, "scratch", None)
        if scratch is None:
            scratch = _OnePoint(self._dim, self._scalar)
            local.scratch = scratch
        return scratch

    # ---- serialization -----------------------------------------------------------
    def points(self) -> np.ndarray:
        """The indexed points, ``(n, dim)`` in the index's dtype and input order,
        read from :meth:`serialize`'s bytes (whose layout knn_gpgpu_index.h
        documents: a header of ``header_bytes`` (a uint32 at byte 16), then the
        points)."""
        raw = self.serialize()
        header = int(np.frombuffer(raw, dtype=np.uint32, count=1, offset=16)[0])
        return np.frombuffer(raw, dtype=self._scalar, count=self._n * self._dim,
                             offset=header).reshape(self._n, self._dim).copy()

    def __reduce__(self) -> Any:
        """Pickling (multiprocessing, joblib) through :meth:`serialize`; the copy
        loads with the default options (the structure from the bytes)."""
        return (_index_from_bytes, (self.serialize(),))

    def serialize(self) -> bytes:
        """The index as bytes (``knn_index_serialize``): a versioned, checksummed
        format that :meth:`deserialize` loads on either backend."""
        with self._use() as handle:
            size = ctypes.c_size_t()
            check(native().knn_index_serialized_size(handle, ctypes.byref(size)),
                  "knn_index_serialized_size")
            buffer = ctypes.create_string_buffer(size.value)
            check(native().knn_index_serialize(handle, buffer, size), "knn_index_serialize")
            return buffer.raw

    @classmethod
    def deserialize(cls, data: Union[bytes, bytearray, memoryview], *,
                    options: Optional[Options] = None, backend: OptionValue = None,
                    device: Optional[int] = None, threads: Optional[int] = None,
                    device_memory_limit: Optional[int] = None) -> "Index":
        """An index from :meth:`serialize`'s bytes (``knn_index_deserialize``).

        The options choose where it loads (backend, device, threads); the
        structure, leaf size and precision (:attr:`dtype`) come from the bytes. A corrupted or truncated
        buffer raises :class:`InvalidArgumentError` saying what is wrong.
        """
        view = memoryview(data).cast("B")
        raw = np.frombuffer(view, dtype=np.uint8) if view.nbytes else np.empty(0, np.uint8)
        opt = resolve(options, backend=backend, device=device, threads=threads,
                      device_memory_limit=device_memory_limit)
        handle = ctypes.POINTER(IndexHandle)()
        status = native().knn_index_deserialize(raw.ctypes.data if raw.size else None,
                                                raw.size, byref(opt), ctypes.byref(handle))
        check(status, "knn_index_deserialize")
        n = ctypes.c_int64()
        dim = ctypes.c_int()
        native().knn_index_info(handle, ctypes.byref(n), ctypes.byref(dim), None, None)
        return cls._from_handle(handle, n.value, dim.value)

    # ---- estimates -------------------------------------------------------------
    @staticmethod
    def estimate_build_bytes(n: int, dim: int, options: Optional[Options] = None, *,
                             dtype: Any = np.float32) -> int:
        """See :func:`estimate_build_bytes`."""
        return estimate_build_bytes(n, dim, options, dtype=dtype)

    @staticmethod
    def estimate_query_bytes(m: int, k: int, n: int, dim: int,
                             options: Optional[Options] = None, *, dtype: Any = np.float32) -> int:
        """See :func:`estimate_query_bytes`."""
        return estimate_query_bytes(m, k, n, dim, options, dtype=dtype)


#: Largest k of the one-point fast path's preallocated rows.
_ONE_POINT_K = 16


class _OnePoint:
    """One query row and ``_ONE_POINT_K`` result slots, with their addresses."""

    def __init__(self, dim: int, scalar: np.dtype) -> None:
        self.q = np.empty((1, dim), scalar)
        self.ind = np.empty(_ONE_POINT_K, np.int32)
        self.dist = np.empty(_ONE_POINT_K, scalar)
        self.addresses = (self.q.ctypes.data, self.ind.ctypes.data, self.dist.ctypes.data)


def _index_from_bytes(data: bytes) -> Index:
    return Index.deserialize(data)


def _unwrap(arr: Any) -> Any:
    """Return the caller's own object for device outputs, the numpy array otherwise."""
    return arr.owner if isinstance(arr, _arrays.DeviceArray) else arr


def _estimate_scalar(dtype: Any) -> np.dtype:
    scalar: np.dtype = np.dtype(dtype)
    if scalar not in (_arrays.FLOAT32, _arrays.FLOAT64):
        raise TypeError("dtype = %s: the index holds float32 or float64" % scalar)
    return scalar


def estimate_build_bytes(n: int, dim: int, options: Optional[Options] = None, *,
                         dtype: Any = np.float32) -> int:
    """Device bytes an index build of ``n`` points of ``dim`` would need (no device
    needed), for an index of ``dtype`` (float32 or float64)."""
    call = _entry("knn_estimate_build_bytes", _estimate_scalar(dtype))
    return int(getattr(native(), call)(_arrays.c_int64(n, "n"), _arrays.c_int(dim, "dim", call),
                                       byref(options)))


def estimate_query_bytes(m: int, k: int, n: int, dim: int,
                         options: Optional[Options] = None, *, dtype: Any = np.float32) -> int:
    """Device bytes a query of ``m`` queries, ``k`` neighbours over ``n`` points would
    need, on an index of ``dtype`` (float32 or float64)."""
    call = _entry("knn_estimate_query_bytes", _estimate_scalar(dtype))
    return int(getattr(native(), call)(_arrays.c_int64(m, "m"), _arrays.c_int(k, "k", call),
                                       _arrays.c_int64(n, "n"), _arrays.c_int(dim, "dim", call),
                                       byref(options)))
