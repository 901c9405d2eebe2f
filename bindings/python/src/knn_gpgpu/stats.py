"""Neighbourhood statistics of an index's own 3-D points (``knn_gpgpu_stats.h``):
normals and curvature, outlier scores and the inliers they keep, neighbour
counts within a radius, the distance to the k-th neighbour.

::

    with knn_gpgpu.Index(scan) as index:                    # (n, 3)
        normals, curvature = index.normals(30, viewpoint=(0, 0, 10))
        scores = index.outlier_scores(16)                   # mean distance to 16 others
        kept = index.statistical_inliers(16, std_ratio=2.0).ids
        kept = index.radius_inliers(0.05, min_neighbors=4).ids

    normals, curvature = knn_gpgpu.normals(scan, 30)        # a temporary index

Every definition is the header's (section 7 of the contract): the k nearest
of a point include itself (normals), the k nearest others do not (scores,
k-th distances); normals are unit vectors oriented towards ``viewpoint``
when one is given, else consistently over the cloud (propagation over the
kNN graph); degenerate neighbourhoods give a documented normal, never NaN.
The lists never leave the index's device; results come back in the index's
dtype (counts int64, kept ids int32) and are bit-identical on every backend.

Arrays: the outputs are host numpy arrays the binding allocates, or device
arrays the caller gives (``out_*``: ``__cuda_array_interface__`` objects,
exact dtype and shape, C order), all host or all device in one call. A
:class:`~knn_gpgpu.KDTree` built from CuPy or torch device data allocates its
outputs on that device the same way. Progress (:class:`~knn_gpgpu.Progress`)
and cancellation (:class:`~knn_gpgpu.CancelFlag`) registered on the calling
thread apply as to queries: the search is one ``QUERY`` stage of ``n``
points (normals without a viewpoint add the orientation's two).
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _arrays
from ._library import check, native
from ._types import SCALAR_FLOAT64
from .options import Options, byref

if TYPE_CHECKING:
    from .index import Index

__all__ = ["NormalsResult", "Inliers", "estimate_stats_bytes", "normals", "outlier_scores",
           "statistical_inliers", "kth_distances", "neighbor_counts", "radius_inliers"]

OptionValue = Union[int, str, None]


class NormalsResult(NamedTuple):
    """:meth:`Index.normals`: ``(normals, curvature)``, ``(n, 3)`` unit normals and
    ``(n,)`` surface variation ``l0 / (l0 + l1 + l2)`` (None when not asked for)."""

    normals: Any
    curvature: Optional[Any]


class Inliers(NamedTuple):
    """The points an outlier rule keeps: ``ids`` their indices in ascending order
    (host: an ``(n_kept,)`` int32 array; device: the caller's ``(n,)`` int32
    array, -1 after the first ``n_kept``) and ``n_kept`` how many."""

    ids: Any
    n_kept: int


def _calls() -> Any:
    """The index module's call helpers (imported here: index.py imports this module)."""
    from . import index
    return index


def _one_memory_kind(**outputs: Any) -> None:
    device = [name for name, a in outputs.items() if isinstance(a, _arrays.DeviceArray)]
    host = [name for name, a in outputs.items()
            if a is not None and not isinstance(a, _arrays.DeviceArray)]
    if device and host:
        raise ValueError("%s in device memory, %s in host memory: a call's outputs are all host "
                         "or all device arrays (give every output as a device array)"
                         % (", ".join(device), ", ".join(host)))


class NeighbourhoodStats:
    """The statistics calls of :class:`~knn_gpgpu.Index` (a mixin: the index
    supplies its handle, size, dimension and dtype)."""

    _n: int
    _dim: int
    _scalar: np.dtype

    if TYPE_CHECKING:
        def _use(self) -> Any: ...

    def _stat_output(self, out: Any, shape: Tuple[int, ...], dtype: Any, name: str) -> Any:
        return _arrays.output(out, shape, dtype, name, allow_device=True)

    def _run(self, function: str, *args: Any, outputs: Sequence[Any] = ()) -> None:
        """Calls ``function`` (or its ``_f64`` twin) on the live handle."""
        calls = _calls()
        calls._require_device_support(*outputs)
        name = calls._entry(function, self._scalar)
        with self._use() as handle:
            check(getattr(native(), name)(handle, *args), name)

    def normals(self, k: int, viewpoint: Optional[Sequence[float]] = None, *,
                curvature: bool = True, options: Optional[Options] = None,
                out_normals: Any = None, out_curvature: Any = None) -> NormalsResult:
        """Unit normals (and curvature) of the indexed 3-D points by principal
        components of their ``k`` nearest, themselves included
        (``knn_index_normals``, or ``_f64``).

        Args:
            k: neighbourhood size (>= 1; more than ``n`` takes all points).
            viewpoint: 3 numbers: every normal ``n_i`` then has
                ``dot(n_i, viewpoint - p_i) >= 0``. None: oriented
                consistently over the cloud (the header's propagation: all
                outward or all inward on a closed surface).
            curvature: also compute ``l0 / (l0 + l1 + l2)`` per point.
            options: per-call options (threads, memory limit, devices).
            out_normals, out_curvature: optional outputs, ``(n, 3)`` and
                ``(n,)`` of the index's dtype (host or device).

        Returns:
            :class:`NormalsResult` ``(normals, curvature)``.
        """
        n = self._n
        real = _calls()._ctype(self._scalar)
        k = _arrays.c_int(k, "k", "knn_index_normals")
        vp = None
        if viewpoint is not None:
            vp = np.ascontiguousarray(np.asarray(viewpoint, dtype=np.float64).reshape(-1),
                                      dtype=self._scalar)
            if vp.shape != (3,):
                raise ValueError("viewpoint: expected 3 numbers, got %d" % vp.size)
        nrm = self._stat_output(out_normals, (n, 3), self._scalar, "out_normals")
        cur = (self._stat_output(out_curvature, (n,), self._scalar, "out_curvature")
               if curvature or out_curvature is not None else None)
        _one_memory_kind(out_normals=nrm, out_curvature=cur)
        self._run("knn_index_normals", k, _arrays.pointer(vp, real), _arrays.pointer(nrm, real),
                  _arrays.pointer(cur, real), byref(options), outputs=(nrm, cur))
        unwrap = _calls()._unwrap
        return NormalsResult(unwrap(nrm), unwrap(cur))

    def _per_point(self, function: str, k: int, out: Any, options: Optional[Options]) -> Any:
        real = _calls()._ctype(self._scalar)
        k = _arrays.c_int(k, "k", function)
        values = self._stat_output(out, (self._n,), self._scalar, "out")
        self._run(function, k, _arrays.pointer(values, real), byref(options), outputs=(values,))
        return _calls()._unwrap(values)

    def outlier_scores(self, k: int, *, options: Optional[Options] = None,
                       out: Any = None) -> Any:
        """The mean Euclidean distance from each indexed point to its ``k``
        nearest others (``knn_index_outlier_scores``): ``(n,)`` in the
        index's dtype (0 for a lone point)."""
        return self._per_point("knn_index_outlier_scores", k, out, options)

    def kth_distances(self, k: int, *, options: Optional[Options] = None, out: Any = None) -> Any:
        """The distance from each indexed point to its ``k``-th nearest other
        (``knn_index_kth_distances``): ``(n,)`` in the index's dtype, +inf
        where fewer than ``k`` others exist."""
        return self._per_point("knn_index_kth_distances", k, out, options)

    def neighbor_counts(self, radius: float, *, options: Optional[Options] = None,
                        out: Any = None) -> Any:
        """The number of other indexed points within ``radius`` of each
        (``knn_index_neighbor_counts``; squared distance <= radius * radius
        in the index's dtype, equal points counted, the point itself not):
        ``(n,)`` int64."""
        counts = self._stat_output(out, (self._n,), np.int64, "out")
        self._run("knn_index_neighbor_counts", float(radius),
                  _arrays.pointer(counts, ctypes.c_int64), byref(options), outputs=(counts,))
        return _calls()._unwrap(counts)

    def _inliers(self, function: str, first: Any, second: Any, out: Any,
                 options: Optional[Options]) -> Inliers:
        kept = self._stat_output(out, (self._n,), np.int32, "out")
        count = ctypes.c_int64(0)
        self._run(function, first, second, _arrays.pointer(kept, ctypes.c_int32),
                  ctypes.byref(count), byref(options), outputs=(kept,))
        if isinstance(kept, _arrays.DeviceArray):
            return Inliers(kept.owner, count.value)
        return Inliers(kept[:count.value], count.value)

    def statistical_inliers(self, k: int, std_ratio: float = 2.0, *,
                            options: Optional[Options] = None, out: Any = None) -> Inliers:
        """Statistical outlier removal (``knn_index_statistical_inliers``):
        the points whose :meth:`outlier_scores` ``s_i`` satisfy ``s_i <=
        mean + std_ratio * std`` (mean and sample standard deviation over
        the cloud, float64), as PCL's ``StatisticalOutlierRemoval`` with
        ``setMeanK(k)`` keeps them (Open3D's ``remove_statistical_outlier``
        counts the point itself: its ``nb_neighbors`` is ``k + 1`` here).

        Returns:
            :class:`Inliers` ``(ids, n_kept)``; ``out``: an ``(n,)`` int32
            host or device array to write the ids into.
        """
        k = _arrays.c_int(k, "k", "knn_index_statistical_inliers")
        return self._inliers("knn_index_statistical_inliers", k, float(std_ratio), out, options)

    def radius_inliers(self, radius: float, min_neighbors: int, *,
                       options: Optional[Options] = None, out: Any = None) -> Inliers:
        """Radius outlier removal (``knn_index_radius_inliers``): the points
        with at least ``min_neighbors`` others within ``radius`` (as
        :meth:`neighbor_counts` counts them). Returns :class:`Inliers`."""
        return self._inliers("knn_index_radius_inliers", float(radius),
                             _arrays.c_int64(min_neighbors, "min_neighbors"), out, options)


def _device_empty_like(like: Any, shape: Tuple[int, ...], dtype: Any) -> Any:
    """An empty device array on ``like``'s device, from ``like``'s own library
    (CuPy or torch), or None when that library is neither."""
    module = type(like).__module__.split(".")[0]
    if module == "cupy":
        import cupy  # type: ignore[import-not-found]
        with like.device:
            return cupy.empty(shape, dtype=dtype)
    if module == "torch":
        import torch  # type: ignore[import-not-found]
        return torch.empty(shape, dtype=getattr(torch, np.dtype(dtype).name), device=like.device)
    return None


class KDTreeStats:
    """The statistics calls of :class:`~knn_gpgpu.KDTree`: those of its index,
    with outputs on the device of device data (CuPy, torch), else numpy."""

    if TYPE_CHECKING:
        index: Index
        data: Any
        n: int

    def _like_data(self, shape: Tuple[int, ...], dtype: Any) -> Any:
        if _arrays.is_device_array(self.data) or _arrays.is_dlpack_device_array(self.data):
            return _device_empty_like(self.data, shape, dtype)
        return None

    def normals(self, k: int, viewpoint: Optional[Sequence[float]] = None, *,
                curvature: bool = True, options: Optional[Options] = None) -> NormalsResult:
        """:meth:`Index.normals` of the tree's points."""
        scalar = self.index.dtype
        return self.index.normals(
            k, viewpoint, curvature=curvature, options=options,
            out_normals=self._like_data((self.n, 3), scalar),
            out_curvature=self._like_data((self.n,), scalar) if curvature else None)

    def outlier_scores(self, k: int, *, options: Optional[Options] = None) -> Any:
        """:meth:`Index.outlier_scores` of the tree's points."""
        return self.index.outlier_scores(k, options=options,
                                         out=self._like_data((self.n,), self.index.dtype))

    def kth_distances(self, k: int, *, options: Optional[Options] = None) -> Any:
        """:meth:`Index.kth_distances` of the tree's points."""
        return self.index.kth_distances(k, options=options,
                                        out=self._like_data((self.n,), self.index.dtype))

    def neighbor_counts(self, radius: float, *, options: Optional[Options] = None) -> Any:
        """:meth:`Index.neighbor_counts` of the tree's points."""
        return self.index.neighbor_counts(radius, options=options,
                                          out=self._like_data((self.n,), np.int64))

    def statistical_inliers(self, k: int, std_ratio: float = 2.0, *,
                            options: Optional[Options] = None) -> Inliers:
        """:meth:`Index.statistical_inliers` of the tree's points."""
        return self.index.statistical_inliers(k, std_ratio, options=options,
                                              out=self._like_data((self.n,), np.int32))

    def radius_inliers(self, radius: float, min_neighbors: int, *,
                       options: Optional[Options] = None) -> Inliers:
        """:meth:`Index.radius_inliers` of the tree's points."""
        return self.index.radius_inliers(radius, min_neighbors, options=options,
                                         out=self._like_data((self.n,), np.int32))


def estimate_stats_bytes(n: int, k: int, options: Optional[Options] = None, *,
                         dtype: Any = np.float32) -> int:
    """Device bytes a statistics call with lists of ``k`` on a CUDA index of
    ``n`` 3-D points of ``dtype`` needs at most (``knn_estimate_stats_bytes``;
    pass ``k + 1`` for the calls over others). No device needed."""
    scalar = np.dtype(dtype)
    if scalar not in (_arrays.FLOAT32, _arrays.FLOAT64):
        raise TypeError("dtype = %s: the index holds float32 or float64" % scalar)
    call = _calls()._entry("knn_estimate_stats_bytes", scalar)
    return int(getattr(native(), call)(_arrays.c_int64(n, "n"), _arrays.c_int(k, "k", call),
                                       byref(options)))


# ---- module-level forms: a temporary index over the points ----------------------------

def _temporary_index(points: Any, backend: OptionValue, device: Optional[int],
                     structure: OptionValue, threads: Optional[int]) -> "Index":
    from .index import Index
    return Index(points, backend=backend, device=device, structure=structure, threads=threads)


def normals(points: Any, k: int, viewpoint: Optional[Sequence[float]] = None, *,
            curvature: bool = True, backend: OptionValue = None, device: Optional[int] = None,
            structure: OptionValue = None, threads: Optional[int] = None) -> NormalsResult:
    """:meth:`Index.normals` of ``points`` (``(n, 3)``, host or device), through
    an index built for the call and freed after it."""
    with _temporary_index(points, backend, device, structure, threads) as index:
        return index.normals(k, viewpoint, curvature=curvature)


def outlier_scores(points: Any, k: int, *, backend: OptionValue = None,
                   device: Optional[int] = None, structure: OptionValue = None,
                   threads: Optional[int] = None) -> Any:
    """:meth:`Index.outlier_scores` of ``points`` through a temporary index."""
    with _temporary_index(points, backend, device, structure, threads) as index:
        return index.outlier_scores(k)


def statistical_inliers(points: Any, k: int, std_ratio: float = 2.0, *,
                        backend: OptionValue = None, device: Optional[int] = None,
                        structure: OptionValue = None, threads: Optional[int] = None) -> Inliers:
    """:meth:`Index.statistical_inliers` of ``points`` through a temporary index."""
    with _temporary_index(points, backend, device, structure, threads) as index:
        return index.statistical_inliers(k, std_ratio)


def kth_distances(points: Any, k: int, *, backend: OptionValue = None,
                  device: Optional[int] = None, structure: OptionValue = None,
                  threads: Optional[int] = None) -> Any:
    """:meth:`Index.kth_distances` of ``points`` through a temporary index."""
    with _temporary_index(points, backend, device, structure, threads) as index:
        return index.kth_distances(k)


def neighbor_counts(points: Any, radius: float, *, backend: OptionValue = None,
                    device: Optional[int] = None, structure: OptionValue = None,
                    threads: Optional[int] = None) -> Any:
    """:meth:`Index.neighbor_counts` of ``points`` through a temporary index."""
    with _temporary_index(points, backend, device, structure, threads) as index:
        return index.neighbor_counts(radius)


def radius_inliers(points: Any, radius: float, min_neighbors: int, *,
                   backend: OptionValue = None, device: Optional[int] = None,
                   structure: OptionValue = None, threads: Optional[int] = None) -> Inliers:
    """:meth:`Index.radius_inliers` of ``points`` through a temporary index."""
    with _temporary_index(points, backend, device, structure, threads) as index:
        return index.radius_inliers(radius, min_neighbors)
