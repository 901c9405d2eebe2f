"""Triangle meshes: exact closest point, signed distance and the deviation
report of a scan against a design (``knn_gpgpu_mesh.h``).

::

    with knn_gpgpu.Mesh(vertices, faces) as design:          # (n, 3), (t, 3)
        sq_d, tri, closest = design.closest(scan)            # igl.point_mesh_squared_distance
        sd = design.signed_distance(scan)                    # < 0 inside
        report = design.deviation_report(scan, tolerance=0.05)
        print(report.n_within_tolerance, report.percentile_values)

Precision: the vertices' dtype picks it, as for :class:`~knn_gpgpu.Index`:
float32 vertices build a float32 mesh (``knn_mesh_build``), any other real
dtype a float64 one (``knn_mesh_build_f64``), unless ``dtype`` is given, which
converts the vertices deliberately (float64 vertices with
``dtype=numpy.float32`` are rounded once, here). Queries take the mesh's
precision under the Index's rules: a float64 mesh widens float32 points
exactly; a float32 mesh accepts float64 points only when every value is a
float32 already (``TypeError`` otherwise). Distances, closest points and
barycentric weights come back in the mesh's dtype.

Every definition (closest point, ties to the smaller triangle id,
``max_distance``, signs, the report's statistics) is the header's; a point
beyond ``max_distance`` gets triangle id -1, distance +inf and NaN closest
point and weights.

Arrays: ``vertices`` and ``faces`` are host arrays (numpy, or DLPack host
tensors); the mesh owns a copy of both. Query points and ``out_*`` arrays may
also be device arrays (``__cuda_array_interface__`` or DLPack: CuPy, torch,
JAX), read and written in place by a CUDA mesh as the Index does (exact dtype,
C order, ready when the call starts); the OpenMP engine refuses them with
:class:`InvalidArgumentError`. A call's outputs are all host or all device
arrays: device outputs are given all (``out_*``), the binding allocates host
ones.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from typing import Any, Dict, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _arrays
from ._handle import NativeHandle
from ._library import check, native
from ._types import (SCALAR_FLOAT32, SCALAR_FLOAT64, AlignParamsStruct, AlignResultStruct, Backend,
                     DeviationReportStruct, MeshHandle)
from .index import _ctype, _entry, _enum_or_int, _require_device_support, _unwrap
from .options import Options, byref, resolve

__all__ = ["Mesh", "MeshInfo", "ClosestResult", "ClosestBarycentricResult", "DeviationReport",
           "AlignResult", "estimate_mesh_bytes", "DEFAULT_PERCENTILES"]

OptionValue = Union[int, str, None]

#: The percentiles :meth:`Mesh.deviation_report` computes unless told otherwise.
DEFAULT_PERCENTILES = (0.0, 1.0, 5.0, 25.0, 50.0, 75.0, 95.0, 99.0, 100.0)

_INT32_MIN, _INT32_MAX = -(2 ** 31), 2 ** 31 - 1


class MeshInfo(NamedTuple):
    """What ``knn_mesh_info`` reports."""

    n_vertices: int
    n_triangles: int
    dtype: np.dtype
    backend: Union[Backend, int]
    closed_oriented: bool


class ClosestResult(NamedTuple):
    """:meth:`Mesh.closest`, in the order of libigl's
    ``point_mesh_squared_distance``: ``(sq_distances (m,), triangle_ids (m,)
    int32, closest_points (m, 3))``."""

    sq_distances: Any
    triangle_ids: Any
    closest_points: Any


class ClosestBarycentricResult(NamedTuple):
    """:meth:`Mesh.closest_barycentric`: :class:`ClosestResult` plus the
    ``(m, 3)`` barycentric weights of the closest point."""

    sq_distances: Any
    triangle_ids: Any
    closest_points: Any
    barycentric: Any


class AlignResult(NamedTuple):
    """:meth:`Mesh.align` (``knn_mesh_align_ex``) and
    :meth:`knn_gpgpu.Index.align` (``knn_index_align``): ``transform`` the ``(4, 4)``
    float64 rigid transform that maps the points onto the mesh, ``rms`` the
    root mean square distance of the ``kept`` correspondences at it (NaN when
    none), ``iterations`` the steps taken, ``converged`` whether the last step
    was within the tolerances (False at the iteration cap or with too few
    points kept: never a fit that did not converge), ``degenerate_directions``
    the ``KNN_ALIGN_*`` bits of the directions the surface did not observe
    (1, 2, 4: rotations about x, y, z through the scan's centroid;
    8, 16, 32: translations along x, y, z) and ``n_degenerate`` how many of
    the six there were."""

    transform: np.ndarray
    rms: float
    kept: int
    iterations: int
    converged: bool
    degenerate_directions: int
    n_degenerate: int


@dataclass(frozen=True)
class DeviationReport:
    """What ``knn_mesh_deviation_report`` computes (definitions in the header):
    counts over the ``n_points`` points, of which ``n_measured`` lie within
    ``max_distance``; statistics of their signed distances (NaN when none is
    measured); ``percentile_values[i]`` is the nearest-rank percentile
    ``percentiles[i]``; ``bin_counts[b]`` counts ``bin_edges[b] <= d <
    bin_edges[b + 1]`` (the last bin closed); ``signed_distances`` holds the
    per-point values when asked for (``return_distances=True``), else None."""

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
    tolerance: float
    percentiles: np.ndarray
    percentile_values: np.ndarray
    bin_edges: np.ndarray
    bin_counts: np.ndarray
    signed_distances: Optional[Any] = None

    def as_dict(self) -> Dict[str, Any]:
        """The fields as a plain dict (arrays kept as arrays)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def _faces(obj: Any) -> np.ndarray:
    """``(t, 3)`` int32 vertex indices, C-contiguous; integers that int32 cannot
    hold are refused here rather than wrapped."""
    arr = _arrays.dlpack_host_array(obj, "faces") if _arrays.has_dlpack(obj) else np.asarray(obj)
    if arr.dtype.kind not in "iu":
        raise TypeError("faces: vertex indices must be integers, not dtype %s" % arr.dtype)
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise ValueError("faces: expected shape (n_triangles, 3), got %s" % (arr.shape,))
    if arr.size and (int(arr.min()) < _INT32_MIN or int(arr.max()) > _INT32_MAX):
        bad = np.argwhere((arr < _INT32_MIN) | (arr > _INT32_MAX))[0]
        raise OverflowError("faces: triangle %d has vertex index %d, which int32 cannot hold"
                            % (int(bad[0]), int(arr[tuple(bad)])))
    return np.ascontiguousarray(arr, dtype=np.int32)


def _vertices(obj: Any, dtype: Any) -> np.ndarray:
    if dtype is None:
        return _arrays.coords(obj, "vertices", 3)
    scalar = np.dtype(dtype)
    if scalar not in (_arrays.FLOAT32, _arrays.FLOAT64):
        raise TypeError("dtype = %s: a mesh holds float32 or float64" % scalar)
    # An explicit dtype is the caller's deliberate conversion (rounding included).
    arr = _arrays._real_2d(obj, "vertices", 3)
    return np.ascontiguousarray(arr, dtype=scalar)


def _one_memory_kind(**outputs: Any) -> None:
    """The library takes a call's outputs all in host or all in device memory,
    and the binding allocates only host arrays: device outputs must all be given."""
    device = [name for name, a in outputs.items() if isinstance(a, _arrays.DeviceArray)]
    host = [name for name, a in outputs.items()
            if a is not None and not isinstance(a, _arrays.DeviceArray)]
    if device and host:
        raise ValueError("%s %s device memory, %s host memory: a call's outputs are all host "
                         "or all device arrays (give every output as a device array)"
                         % (", ".join(device), "is" if len(device) == 1 else "are",
                            ", ".join(host)))


def _scalar_of_code(code: int) -> np.dtype:
    return _arrays.FLOAT64 if code == SCALAR_FLOAT64 else _arrays.FLOAT32


class Mesh(NativeHandle):
    """A triangle mesh (``knn_mesh``) with its BVH, on the CUDA or the OpenMP
    engine, in float32 or float64 (see the module documentation).

    Args:
        vertices: ``(n_vertices, 3)`` host array-like of real numbers.
        faces: ``(n_triangles, 3)`` integers, vertex indices (int32 range).
        dtype: ``numpy.float32`` or ``numpy.float64``; None: from the vertices.
        options: an :class:`Options`; the keyword arguments override its fields.
        backend, device, threads, device_memory_limit: option fields (the
            structure and leaf size do not apply to meshes). The queries use
            the build's threads and memory limit unless their ``options`` say
            otherwise.

    Raises:
        InvalidArgumentError: no triangle, a vertex index out of range (the
            message names the triangle).
        NonfiniteInputError: a NaN or infinite coordinate (naming the vertex).
        NoDeviceError: ``backend="cuda"`` without a GPU.
        ValueError, TypeError, OverflowError: shapes and dtypes, before the call.

    The mesh is picklable (through ``knn_mesh_serialize``; it loads on the
    default backend), may be queried from many threads at once and is freed by
    :meth:`close`, a ``with`` block or the garbage collector.
    """

    _free_function = "knn_mesh_free"
    _what = "mesh"

    def __init__(self, vertices: Any, faces: Any, *, dtype: Any = None,
                 options: Optional[Options] = None, backend: OptionValue = None,
                 device: Optional[int] = None, threads: Optional[int] = None,
                 device_memory_limit: Optional[int] = None) -> None:
        self._own(None)
        verts = _vertices(vertices, dtype)
        tris = _faces(faces)
        scalar = verts.dtype
        opt = resolve(options, backend=backend, device=device, threads=threads,
                      device_memory_limit=device_memory_limit)
        handle = ctypes.POINTER(MeshHandle)()
        build = _entry("knn_mesh_build", scalar)
        status = getattr(native(), build)(_arrays.pointer(verts, _ctype(scalar)),
                                          verts.shape[0], _arrays.pointer(tris, ctypes.c_int32),
                                          tris.shape[0], byref(opt), ctypes.byref(handle))
        check(status, build)
        self._adopt(handle)

    def _adopt(self, handle: Any) -> None:
        """Own ``handle`` and read what it is (``knn_mesh_info``)."""
        self._own(handle)
        info = self.info()
        self._info = info

    @classmethod
    def deserialize(cls, data: Union[bytes, bytearray, memoryview], *,
                    options: Optional[Options] = None, backend: OptionValue = None,
                    device: Optional[int] = None, threads: Optional[int] = None,
                    device_memory_limit: Optional[int] = None) -> "Mesh":
        """A mesh from :meth:`serialize`'s bytes (``knn_mesh_deserialize``),
        on the backend the options choose, in the precision it was built in.
        Corrupted or truncated bytes raise :class:`InvalidArgumentError`."""
        view = memoryview(data).cast("B")
        raw = np.frombuffer(view, dtype=np.uint8) if view.nbytes else np.empty(0, np.uint8)
        opt = resolve(options, backend=backend, device=device, threads=threads,
                      device_memory_limit=device_memory_limit)
        handle = ctypes.POINTER(MeshHandle)()
        check(native().knn_mesh_deserialize(raw.ctypes.data if raw.size else None, raw.size,
                                            byref(opt), ctypes.byref(handle)),
              "knn_mesh_deserialize")
        self = cls.__new__(cls)
        try:
            self._adopt(handle)
        except BaseException:
            self.close()
            raise
        return self

    def serialize(self) -> bytes:
        """The mesh as bytes (``knn_mesh_serialize``): a versioned, checksummed
        format that :meth:`deserialize` loads on either backend."""
        with self._use() as handle:
            size = ctypes.c_size_t()
            check(native().knn_mesh_serialized_size(handle, ctypes.byref(size)),
                  "knn_mesh_serialized_size")
            buffer = ctypes.create_string_buffer(size.value)
            check(native().knn_mesh_serialize(handle, buffer, size), "knn_mesh_serialize")
            return buffer.raw

    def __reduce__(self) -> Tuple[Any, Tuple[bytes]]:
        return (_mesh_from_bytes, (self.serialize(),))

    def __repr__(self) -> str:
        if self.closed:
            return "<knn_gpgpu.Mesh closed>"
        i = self._info
        return ("<knn_gpgpu.Mesh n_vertices=%d, n_triangles=%d, dtype=%s, backend=%s, "
                "closed_oriented=%s>" % (i.n_vertices, i.n_triangles, i.dtype,
                                         getattr(i.backend, "name", i.backend), i.closed_oriented))

    # ---- what it is ------------------------------------------------------------
    def info(self) -> MeshInfo:
        """``knn_mesh_info``: counts, precision, backend, and whether signs come
        from pseudonormals (closed and oriented) or the winding number."""
        nv = ctypes.c_int64()
        nt = ctypes.c_int64()
        scalar = ctypes.c_int()
        backend = ctypes.c_int()
        closed = ctypes.c_int()
        with self._use() as handle:
            check(native().knn_mesh_info(handle, ctypes.byref(nv), ctypes.byref(nt),
                                         ctypes.byref(scalar), ctypes.byref(backend),
                                         ctypes.byref(closed)), "knn_mesh_info")
        return MeshInfo(nv.value, nt.value, _scalar_of_code(scalar.value),
                        _enum_or_int(Backend, backend.value), bool(closed.value))

    @property
    def n_vertices(self) -> int:
        return self._info.n_vertices

    @property
    def n_triangles(self) -> int:
        return self._info.n_triangles

    @property
    def dtype(self) -> np.dtype:
        """``numpy.float32`` or ``numpy.float64``: what the mesh holds and answers in."""
        return self._info.dtype

    @property
    def backend(self) -> Union[Backend, int]:
        return self._info.backend

    @property
    def closed_oriented(self) -> bool:
        """True: signs from the angle-weighted pseudonormals; False: from the
        generalized winding number (see the header)."""
        return self._info.closed_oriented

    # ---- queries ---------------------------------------------------------------
    def _points(self, points: Any) -> _arrays.Array:
        return _arrays.rows(points, "points", 3, self.dtype, holder="mesh")

    def _closest(self, points: Any, max_distance: float, barycentric: bool,
                 options: Optional[Options], out_sq_distances: Any, out_triangle_ids: Any,
                 out_closest_points: Any, out_barycentric: Any
                 ) -> Tuple[Any, Any, Any, Any]:
        with self._use() as handle:
            scalar = self.dtype
            q = self._points(points)
            m = int(q.shape[0])
            ids = _arrays.output(out_triangle_ids, (m,), np.int32, "out_triangle_ids",
                                 allow_device=True)
            sq = _arrays.output(out_sq_distances, (m,), scalar, "out_sq_distances",
                                allow_device=True)
            cl = _arrays.output(out_closest_points, (m, 3), scalar, "out_closest_points",
                                allow_device=True)
            bc = (_arrays.output(out_barycentric, (m, 3), scalar, "out_barycentric",
                                 allow_device=True)
                  if barycentric or out_barycentric is not None else None)
            _one_memory_kind(out_sq_distances=sq, out_triangle_ids=ids, out_closest_points=cl,
                             out_barycentric=bc)
            _require_device_support(q, ids, sq, cl, bc)
            real = _ctype(scalar)
            call = _entry("knn_mesh_closest", scalar)
            check(getattr(native(), call)(handle, _arrays.pointer(q, real), m,
                                          float(max_distance),
                                          _arrays.pointer(ids, ctypes.c_int32),
                                          _arrays.pointer(sq, real), _arrays.pointer(cl, real),
                                          _arrays.pointer(bc, real), byref(options)), call)
            return _unwrap(sq), _unwrap(ids), _unwrap(cl), _unwrap(bc)

    def closest(self, points: Any, max_distance: float = math.inf, *,
                options: Optional[Options] = None, out_sq_distances: Any = None,
                out_triangle_ids: Any = None, out_closest_points: Any = None
                ) -> ClosestResult:
        """The closest point of the mesh to each point (``knn_mesh_closest``),
        as libigl's ``point_mesh_squared_distance(P, V, F)`` returns it.

        Args:
            points: ``(m, 3)`` host or device array, in the mesh's dtype.
            max_distance: points farther than this get id -1, +inf, NaN.
            options: per-call options (threads, memory limit, devices).
            out_*: optional outputs (exact dtype and shape, host or device).

        Returns:
            :class:`ClosestResult` ``(sq_distances, triangle_ids, closest_points)``:
            ``(m,)`` mesh dtype, ``(m,)`` int32, ``(m, 3)`` mesh dtype.
        """
        sq, ids, cl, _ = self._closest(points, max_distance, False, options, out_sq_distances,
                                       out_triangle_ids, out_closest_points, None)
        return ClosestResult(sq, ids, cl)

    def closest_barycentric(self, points: Any, max_distance: float = math.inf, *,
                            options: Optional[Options] = None, out_sq_distances: Any = None,
                            out_triangle_ids: Any = None, out_closest_points: Any = None,
                            out_barycentric: Any = None) -> ClosestBarycentricResult:
        """:meth:`closest` plus the ``(m, 3)`` barycentric weights (w0, w1, w2)
        of each closest point on its triangle (w0 a + w1 b + w2 c)."""
        sq, ids, cl, bc = self._closest(points, max_distance, True, options, out_sq_distances,
                                        out_triangle_ids, out_closest_points, out_barycentric)
        return ClosestBarycentricResult(sq, ids, cl, bc)

    def compute_closest_points(self, points: Any, max_distance: float = math.inf, *,
                               options: Optional[Options] = None) -> Dict[str, Any]:
        """The closest points as Open3D's ``RaycastingScene.compute_closest_points``
        returns them: a dict of ``points`` ``(m, 3)``, ``primitive_ids`` ``(m,)``
        (int32 here, -1 beyond ``max_distance``, where Open3D has uint32) and
        ``primitive_uvs`` ``(m, 2)``, the barycentric weights of vertices 1 and
        2 (Open3D's u, v), all in the mesh's dtype."""
        sq, ids, cl, bc = self._closest(points, max_distance, True, options, None, None, None,
                                        None)
        return {"points": cl, "primitive_ids": ids, "primitive_uvs": bc[:, 1:]}

    def signed_distance(self, points: Any, max_distance: float = math.inf, *,
                        return_triangle_ids: bool = False, options: Optional[Options] = None,
                        out: Any = None, out_triangle_ids: Any = None) -> Any:
        """The signed distance of each point (``knn_mesh_signed_distance``):
        the Euclidean distance, negative inside, +inf beyond ``max_distance``.

        Returns:
            ``(m,)`` in the mesh's dtype; with ``return_triangle_ids`` a tuple
            ``(signed_distances, triangle_ids)``.
        """
        with self._use() as handle:
            scalar = self.dtype
            q = self._points(points)
            m = int(q.shape[0])
            sd = _arrays.output(out, (m,), scalar, "out", allow_device=True)
            ids = (_arrays.output(out_triangle_ids, (m,), np.int32, "out_triangle_ids",
                                  allow_device=True)
                   if return_triangle_ids or out_triangle_ids is not None else None)
            _one_memory_kind(out=sd, out_triangle_ids=ids)
            _require_device_support(q, sd, ids)
            real = _ctype(scalar)
            call = _entry("knn_mesh_signed_distance", scalar)
            check(getattr(native(), call)(handle, _arrays.pointer(q, real), m,
                                          float(max_distance), _arrays.pointer(sd, real),
                                          _arrays.pointer(ids, ctypes.c_int32), byref(options)),
                  call)
            if return_triangle_ids:
                return _unwrap(sd), _unwrap(ids)
            return _unwrap(sd)

    def deviation_report(self, points: Any, tolerance: float,
                         percentiles: Sequence[float] = DEFAULT_PERCENTILES,
                         bins: Optional[Sequence[float]] = None,
                         max_distance: float = math.inf, *, return_distances: bool = False,
                         options: Optional[Options] = None) -> DeviationReport:
        """The deviation report of a scan against this design
        (``knn_mesh_deviation_report``), computed where the mesh lives.

        Args:
            points: the scan, ``(m, 3)`` host or device array.
            tolerance: ``t >= 0``; counts within ``[-t, t]``, above and below.
            percentiles: values in [0, 100] (nearest rank over the sorted
                measured distances: position ``ceil(p / 100 * n) - 1``).
            bins: histogram edges, strictly ascending and finite (``n_bins +
                1`` values), or None for no histogram.
            max_distance: points farther than this are not measured.
            return_distances: also return the per-point signed distances
                (host numpy array, mesh dtype).
        """
        pct = np.ascontiguousarray(np.asarray(percentiles, dtype=np.float64).reshape(-1))
        edges = (np.empty(0, np.float64) if bins is None
                 else np.ascontiguousarray(np.asarray(bins, dtype=np.float64).reshape(-1)))
        if bins is not None and edges.size < 2:
            raise ValueError("bins: at least two edges (one bin), got %d" % edges.size)
        n_bins = max(0, int(edges.size) - 1)
        n_pct = _arrays.c_int(pct.size, "len(percentiles)", "knn_mesh_deviation_report")
        n_bins = _arrays.c_int(n_bins, "len(bins) - 1", "knn_mesh_deviation_report")
        values = np.empty(pct.size, np.float64)
        counts = np.empty(n_bins, np.int64)
        with self._use() as handle:
            scalar = self.dtype
            q = self._points(points)
            m = int(q.shape[0])
            sd = np.empty(m, scalar) if return_distances else None
            _require_device_support(q)
            report = DeviationReportStruct()
            report.struct_size = ctypes.sizeof(DeviationReportStruct)
            real = _ctype(scalar)
            call = _entry("knn_mesh_deviation_report", scalar)
            check(getattr(native(), call)(
                handle, _arrays.pointer(q, real), m, float(max_distance),
                float(tolerance), _arrays.pointer(pct if pct.size else None, ctypes.c_double),
                n_pct, _arrays.pointer(values if pct.size else None, ctypes.c_double),
                _arrays.pointer(edges if n_bins else None, ctypes.c_double), n_bins,
                _arrays.pointer(counts if n_bins else None, ctypes.c_int64),
                _arrays.pointer(sd, real), ctypes.byref(report), byref(options)), call)
        return DeviationReport(
            n_points=report.n_points, n_measured=report.n_measured, n_beyond=report.n_beyond,
            n_within_tolerance=report.n_within_tolerance,
            n_above_tolerance=report.n_above_tolerance,
            n_below_tolerance=report.n_below_tolerance, n_below_bins=report.n_below_bins,
            n_above_bins=report.n_above_bins, min=report.min, max=report.max, mean=report.mean,
            rms=report.rms, tolerance=float(tolerance), percentiles=pct, percentile_values=values,
            bin_edges=edges, bin_counts=counts, signed_distances=sd)

    def align(self, points: Any, initial: Any = None, max_correspondence: float = math.inf,
              max_iterations: int = 50, *, kept_fraction: float = 1.0,
              tolerance_rotation: Optional[float] = None,
              tolerance_translation: Optional[float] = None, coarse_start: bool = False,
              options: Optional[Options] = None) -> AlignResult:
        """The best fit of a scan to this mesh (``knn_mesh_align_ex``): ICP point
        to plane, summed in float64 where the mesh lives, the same transform
        bit for bit on every backend (definitions in the header).

        Args:
            points: the scan, ``(m, 3)`` host or device array, in the mesh's dtype.
            initial: a ``(4, 4)`` rigid transform to start from (None: identity).
            max_correspondence: points farther than this from the mesh (once
                moved) are left out of a step (> 0; inf: every point).
            max_iterations: the most steps (>= 1).
            kept_fraction: in (0, 1]: each step keeps this fraction of the
                correspondences within ``max_correspondence``, the nearest
                (trims outliers).
            tolerance_rotation, tolerance_translation: the fit has converged
                when a step turns by at most the first (radians) and moves the
                scan's centroid by at most the second (None: 1e-6
                and 1e-6 of the box's diagonal; 1e-5 and 1e-5 for a float32
                mesh, whose steps stall near 1e-6).
            coarse_start: also start from the principal axes of the scan
                matched to the mesh's (the four sign choices), keep the best.
        """
        params, start = _align_params(initial, max_correspondence, max_iterations,
                                      kept_fraction, tolerance_rotation,
                                      tolerance_translation, coarse_start)
        result = AlignResultStruct()
        result.struct_size = ctypes.sizeof(AlignResultStruct)
        with self._use() as handle:
            scalar = self.dtype
            q = self._points(points)
            _require_device_support(q)
            call = _entry("knn_mesh_align_ex", scalar)
            check(getattr(native(), call)(handle, _arrays.pointer(q, _ctype(scalar)),
                                          int(q.shape[0]),
                                          _arrays.pointer(start, ctypes.c_double),
                                          ctypes.byref(params), ctypes.byref(result),
                                          byref(options)), call)
        return _align_result(result)

    # ---- estimates -------------------------------------------------------------
    @staticmethod
    def estimate_bytes(n_vertices: int, n_triangles: int, options: Optional[Options] = None, *,
                       dtype: Any = np.float32) -> int:
        """See :func:`estimate_mesh_bytes`."""
        return estimate_mesh_bytes(n_vertices, n_triangles, options, dtype=dtype)


def _align_params(initial: Any, max_correspondence: float, max_iterations: int,
                  kept_fraction: float, tolerance_rotation: Optional[float],
                  tolerance_translation: Optional[float], coarse_start: bool
                  ) -> Tuple[AlignParamsStruct, Optional[np.ndarray]]:
    """The checked ``knn_align_params`` and initial transform of
    :meth:`Mesh.align` and :meth:`knn_gpgpu.Index.align`."""
    if not max_correspondence > 0:
        raise ValueError("max_correspondence must be > 0 (inf: every point), got %r"
                         % (max_correspondence,))
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or \
            not 1 <= max_iterations <= _INT32_MAX:
        raise ValueError("max_iterations must be an int in [1, 2**31 - 1], got %r"
                         % (max_iterations,))
    if not 0 < kept_fraction <= 1:
        raise ValueError("kept_fraction must lie in (0, 1], got %r" % (kept_fraction,))
    for name, value in (("tolerance_rotation", tolerance_rotation),
                        ("tolerance_translation", tolerance_translation)):
        if value is not None and not value > 0:
            raise ValueError("%s must be > 0 (None: the default), got %r" % (name, value))
    start = None
    if initial is not None:
        start = np.ascontiguousarray(np.asarray(initial, dtype=np.float64))
        if start.shape != (4, 4):
            raise ValueError("initial: expected a (4, 4) transform, got shape %s"
                             % (start.shape,))
    params = AlignParamsStruct()
    params.struct_size = ctypes.sizeof(AlignParamsStruct)
    params.max_correspondence = float(max_correspondence)
    params.max_iterations = max_iterations
    params.coarse_start = 1 if coarse_start else 0
    params.kept_fraction = float(kept_fraction)
    params.tolerance_rotation = float(tolerance_rotation or 0.0)
    params.tolerance_translation = float(tolerance_translation or 0.0)
    return params, start


def _align_result(result: AlignResultStruct) -> AlignResult:
    return AlignResult(np.array(result.transform[:], dtype=np.float64).reshape(4, 4),
                       result.rms, result.n_kept, result.iterations, bool(result.converged),
                       result.degenerate_directions, result.n_degenerate)


def _mesh_from_bytes(data: bytes) -> Mesh:
    """Unpickling: the mesh on the default backend."""
    return Mesh.deserialize(data)


def estimate_mesh_bytes(n_vertices: int, n_triangles: int, options: Optional[Options] = None,
                        *, dtype: Any = np.float32) -> int:
    """Device bytes a CUDA mesh build of this size needs at its peak
    (``knn_estimate_mesh_bytes``; 0 for impossible sizes), no device needed."""
    scalar = np.dtype(dtype)
    if scalar not in (_arrays.FLOAT32, _arrays.FLOAT64):
        raise TypeError("dtype = %s: a mesh holds float32 or float64" % scalar)
    code = SCALAR_FLOAT64 if scalar == _arrays.FLOAT64 else SCALAR_FLOAT32
    return int(native().knn_estimate_mesh_bytes(_arrays.c_int64(n_vertices, "n_vertices"),
                                                _arrays.c_int64(n_triangles, "n_triangles"),
                                                code, byref(options)))
