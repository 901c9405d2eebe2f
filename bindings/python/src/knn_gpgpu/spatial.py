"""A ``scipy.spatial.KDTree`` / ``cKDTree``-shaped interface over the index API.

::

    tree = knn_gpgpu.KDTree(points)                 # (n, m) floats, any m
    d, i = tree.query(x, k=8)                       # distances first, (..., 8)
    lists = tree.query_ball_point(x, r=0.1)         # object array of index lists
    pairs = tree.query_pairs(0.1)                   # {(i, j), i < j}
    box = knn_gpgpu.KDTree(points, boxsize=1.0)     # periodic, as scipy's

The class takes scipy's constructor arguments and has its methods (``query``,
``query_ball_point``, ``query_ball_tree``, ``query_pairs``,
``count_neighbors``, ``sparse_distance_matrix``), attributes (``data``, ``n``,
``m``, ``maxes``, ``mins``, ``size``, ``leafsize``, ``boxsize``) and return
types: ``x`` of shape ``(..., m)`` or one point of shape ``(m,)``; ``k`` an
int (``k = 1`` drops the last axis) or a list of 1-based ranks; float64
distances, missing neighbours as ``inf`` with index ``n``; ``np.intp``
indices; Python scalars for one point; ``distance_upper_bound`` strict;
``workers`` (``-1`` = all cores). Trees pickle (through
:meth:`Index.serialize`), and :meth:`KDTree.from_index` makes a tree of an
:class:`~knn_gpgpu.Index` (a deserialized one included).

Distances: ``p`` is any Minkowski order >= 1 (``1``, ``2``, ``inf``, ...).
The library searches in Euclidean distance; for ``p != 2`` (and for periodic
trees) the binding asks it for a superset (the Euclidean ball holding the
``p``-ball, the images of each query across the box) and settles each
candidate with scipy's own arithmetic: per dimension ``u - v`` (wrapped into
``[-L/2, L/2]`` in a periodic dimension as scipy wraps it), summed as
``|d0|^p + |d1|^p + ...`` in that order (the maximum for ``p = inf``) and
compared with ``r^p``. ``p = 2`` without a box needs no second pass: the
library's float64 squared distance ``((d0*d0 + d1*d1) + d2*d2) + ...`` is
scipy's, and a point is within ``r`` when it is ``<= r * r``.

Periodic boxes (``boxsize``): a scalar or one length per dimension, ``0`` (or
less) meaning not periodic there, as scipy: data must lie in ``[0, L)`` in
the periodic dimensions (``ValueError`` otherwise), queries are wrapped into
the box first (scipy's ``x - floor(x / L) * L``), and every query (``query``,
``query_ball_point``, ``query_ball_tree``, ``query_pairs``,
``count_neighbors``, ``sparse_distance_matrix``) measures the periodic
distance. A periodic tree holds its points in float64 (float32 data is
converted exactly) and takes host arrays only.

Precision without a box: the data's dtype picks it (see
:class:`~knn_gpgpu.Index`). float64 data (also integers) builds a float64
index and answers as scipy's, on data far from the origin too (UTM). float32
data builds a float32 index: queries must then be float32 values (float64
queries that are not raise ``TypeError``; nothing is rounded silently), a
Euclidean distance is ``sqrt`` (in float64) of the exact float32 squared
distance, and a point is within ``r`` when that squared distance is ``<= r *
r`` (in float64).

Accepted without effect: ``compact_nodes``, ``balanced_tree`` (the library
chooses its structure; answers do not depend on it), ``return_sorted``
(lists are always sorted by index). ``copy_data``: the index always owns a
copy of the points; ``data`` is the caller's array (as scipy's, when it is
C-contiguous in the index's dtype) unless ``copy_data`` is true, and the
binding reads it for ``p != 2`` and periodic distances, so it must stay
unchanged, as scipy asks. ``eps``: ``query`` is exact (which satisfies every
``eps``); the radius functions (``query_ball_point``, ``query_ball_tree``,
``query_pairs``) answer exactly at ``r * (1 + eps)``, the widest answer
scipy's approximate search allows (its tests expect pairs at ``r`` that
rounding puts just beyond it).

What differs from scipy, by design:
  * Ties are ordered by the smaller index (scipy leaves their order open).
  * ``workers=None`` (the default) means the library's default: all cores.
  * No ``tree`` attribute (the nodes live in the library, in its own layout)
    and no ``_build_weights``; ``size`` is the node count of a balanced tree
    of ``leafsize``-point buckets (``2 * ceil(n / leafsize) - 1``), which the
    library's structure need not have.
"""

from __future__ import annotations

import importlib
import math
import operator
import os
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple, Union

import numpy as np
import numpy.typing as npt

from . import _arrays
from .errors import InternalError, NonfiniteInputError, Status
from .index import Index
from .options import Options
from .stats import KDTreeStats

__all__ = ["KDTree", "cKDTree"]

KSpec = Union[int, Sequence[int]]
IntArray = npt.NDArray[np.intp]
FloatArray = npt.NDArray[np.float64]

# Most (query, neighbour) slots one fixed-row radius call may fill while the
# binding gathers unbounded lists of device queries (see _radius_lists): 2^22
# slots, 32 MiB of indices and distances.
_ROW_SLOT_BUDGET = 1 << 22

# Per-point radii are answered a group at a time: rows whose radii are within
# this factor of the group's smallest share one library call at the group's
# largest radius, and the rows are then settled at their own. The factor
# bounds the points a group reads beyond its rows' balls (1.2^3 = 1.7x in
# 3-D) while the calls stay few (18 for radii spanning a factor of 25).
_RADIUS_GROUP_FACTOR = 1.2

# Relative slack of the Euclidean radius the library is asked for where the
# binding settles the candidates itself (p != 2, periodic images, float32
# indexes): the library's rounding may not drop a point scipy's keeps.
_COVER_SLACK = 1e-6


# Up to this many points the library's "auto" serves by brute force, right for
# one kNN batch but not for what scipy users also ask (radius lists, pairs,
# counts): on 1,000 points, one thread, a kd-tree took 0.64 / 1.84 / 1.12 /
# 1.45 ms for all-kNN k = 8, per-point balls, query_pairs and a 4-radius
# count_neighbors against brute force's 2.11 / 10.2 / 4.46 / 9.60 ms. A
# KDTree given no structure (nor options) is a kd-tree there.
_SMALL_TREE = 2048


def _threads(workers: Optional[int]) -> Optional[int]:
    """``workers`` as ``knn_options.threads``: None -> the library's default, -1 ->
    os.cpu_count() (as scipy, which refuses -1 where it is unknown), else the count."""
    if workers is None:
        return None
    w = operator.index(workers)
    if w == -1:
        cpus = os.cpu_count()
        if cpus is None:
            raise NotImplementedError("Cannot determine the number of cpus using "
                                      "os.cpu_count(), cannot use -1 for the number of workers")
        return cpus
    if w < 1:
        raise ValueError("workers = %d: must be -1 (all cores) or >= 1" % w)
    return w


def _minkowski(p: Any) -> float:
    q = float(p)
    if not q >= 1.0:
        raise ValueError("Only p-norms with 1<=p<=infinity permitted")
    return q


def _eps_factor(eps: float) -> float:
    """``1 + eps``: the radius functions answer at ``r * (1 + eps)``, the widest
    answer scipy's approximate search allows (module documentation)."""
    if not float(eps) >= 0.0:
        raise ValueError("eps = %r: must be >= 0" % (eps,))
    return 1.0 + float(eps)


class _Metric:
    """scipy's distance between rows: Minkowski ``p``, periodic where ``box > 0``.

    Distances are kept "powered" (``sum |d|^p``; the maximum for ``p = inf``),
    as scipy compares them, and taken to the ``1/p`` power only for output."""

    def __init__(self, p: float, box: Optional[FloatArray]) -> None:
        self.p = p
        self.box = box
        self.half = None if box is None else 0.5 * box

    def powered(self, u: FloatArray, v: FloatArray) -> FloatArray:
        """Row-wise powered distances of ``u`` and ``v`` (same shape, ``(..., m)``),
        summed dimension after dimension as scipy does."""
        diff = np.asarray(u, dtype=np.float64) - np.asarray(v, dtype=np.float64)
        if self.box is not None:  # scipy's wrap: one box length, where it passes half of one
            assert self.half is not None
            diff = np.where(diff < -self.half, diff + self.box,
                            np.where(diff > self.half, diff - self.box, diff))
        a = np.abs(diff)
        if self.p == math.inf:
            return np.asarray(a.max(axis=-1) if a.shape[-1] else a.sum(axis=-1))
        terms = a * a if self.p == 2.0 else a if self.p == 1.0 else a ** self.p
        acc = np.zeros(terms.shape[:-1])
        for d in range(terms.shape[-1]):
            acc = acc + terms[..., d]
        return acc

    def limit(self, r: Any) -> Any:
        """The powered bound of distance ``r`` (``r * r`` for ``p = 2``)."""
        r = np.asarray(r, dtype=np.float64)
        with np.errstate(over="ignore"):
            if self.p == 2.0:
                return r * r
            if self.p in (1.0, math.inf):
                return r
            return r ** self.p

    def root(self, powered: FloatArray) -> FloatArray:
        if self.p == 2.0:
            return np.sqrt(powered)
        if self.p in (1.0, math.inf):
            return powered
        return np.asarray(powered ** (1.0 / self.p))

    def cover(self, r: FloatArray, m: int) -> FloatArray:
        """A Euclidean radius whose ball holds the ``p``-ball of radius ``r`` (for
        p > 2, |x|_2 <= m^(1/2 - 1/p) |x|_p; else |x|_2 <= |x|_p), with slack."""
        factor = m ** (0.5 - 1.0 / self.p) if self.p > 2.0 else 1.0
        slack = 0.0 if self.box is None else _COVER_SLACK * float(self.box.max())
        with np.errstate(over="ignore"):
            return r * (factor * (1 + _COVER_SLACK)) + slack


class KDTree(KDTreeStats):
    """Exact nearest neighbours of ``n`` points in ``m`` dimensions with the
    constructor, methods and attributes of :class:`scipy.spatial.KDTree`
    (see the module documentation for the arguments without effect), and the
    neighbourhood statistics of its points (:mod:`knn_gpgpu.stats`:
    ``normals``, ``outlier_scores``, ``statistical_inliers``,
    ``radius_inliers``, ``kth_distances``, ``neighbor_counts``).

    It wraps an :class:`~knn_gpgpu.Index` (``self.index``) built with the given
    backend and structure; any structure gives the same answers.

    Args:
        data: ``(n, m)`` array-like, a ``__cuda_array_interface__`` or DLPack
            device array (float32 or float64, used in place), or a DLPack host
            tensor. float32 data builds a float32 index, any other real dtype
            a float64 one (periodic trees: always float64, host data).
        leafsize: points per kd-tree bucket (``None``: the library's default).
        compact_nodes, copy_data, balanced_tree: accepted, without effect.
        boxsize: periodic box lengths (scalar or ``(m,)``; ``0``: not
            periodic in that dimension), as scipy's.
        backend: ``"auto"`` (the GPU when usable), ``"cuda"`` or ``"openmp"``.
        structure: ``"auto"``, ``"kdtree"``, ``"grid"`` (3-D) or ``"brute_force"``
            (``None``: ``"kdtree"`` up to 2048 points, else ``"auto"``).
        device: CUDA device number (``None``: the current one).
        options: an :class:`~knn_gpgpu.Options` to start from.

    Attributes:
        data: the points as ``(n, m)`` float32 or float64, the index's dtype (a
            copy for host input, the caller's object for device input, which
            must then stay unchanged).
        n, m: number of points and dimension.
        maxes, mins: ``(m,)`` float64 bounds of the points (host data).
        leafsize: as given (``16`` reported for ``None``).
        size: ``2 * ceil(n / leafsize) - 1`` (see the module documentation).
        boxsize: ``(m,)`` float64 box lengths, or ``None``.
        index: the underlying :class:`~knn_gpgpu.Index`.
    """

    #: The leaf size reported when none is given (scipy's default for this name).
    default_leafsize = 10
    #: One point's k = 1 index: scipy's KDTree gives a numpy integer, cKDTree an int.
    _index_scalar: Any = np.intp

    def __init__(self, data: Any, leafsize: Optional[int] = None,
                 compact_nodes: bool = True, copy_data: bool = False,
                 balanced_tree: bool = True, boxsize: Any = None, *,
                 backend: Union[str, int, None] = None,
                 structure: Union[str, int, None] = None, device: Optional[int] = None,
                 options: Optional[Options] = None) -> None:
        del compact_nodes, balanced_tree  # no effect (module documentation)
        if leafsize is not None and operator.index(leafsize) < 1:
            raise ValueError("leafsize must be at least 1")
        if getattr(data, "dtype", None) is not None and np.dtype(data.dtype).kind == "c" or (
                isinstance(data, (list, tuple)) and np.asarray(data).dtype.kind == "c"):
            raise TypeError("KDTree does not work with complex data")
        if boxsize is not None:
            data = np.asarray(data, dtype=np.float64)
        points = _arrays.rows(data, "data")
        if copy_data and isinstance(points, np.ndarray) and (points is data
                                                            or not points.flags.owndata):
            points = points.copy()
        box = None if boxsize is None else self._box(points, boxsize)
        if structure is None and options is None and points.shape[0] <= _SMALL_TREE:
            structure = "kdtree"
        try:
            index = Index(points, options=options, backend=backend, structure=structure,
                          device=device, leaf_size=leafsize)
        except NonfiniteInputError as exc:
            raise _finite_error(exc, "data") from None
        self._setup(index, points if isinstance(points, np.ndarray) else data, points, leafsize,
                    box)

    def _setup(self, index: Index, data: Any, points: _arrays.Array, leafsize: Optional[int],
               box: Optional[FloatArray]) -> None:
        self.index = index
        self._points: _arrays.Array = points
        self.data: Any = data
        self.n: int = index.n
        self.m: int = index.dim
        self.leafsize: int = self.default_leafsize if leafsize is None else int(leafsize)
        self._leafsize_given = leafsize
        self.size: int = max(1, 2 * -(-self.n // self.leafsize) - 1)
        self.boxsize: Optional[FloatArray] = box
        self._euclid = _Metric(2.0, box)
        # query_pairs: the number of pairs its last call found, by radius.
        self._pair_counts: Dict[float, int] = {}
        if isinstance(points, np.ndarray) and self.n:
            self.maxes: FloatArray = np.amax(points, axis=0).astype(np.float64)
            self.mins: FloatArray = np.amin(points, axis=0).astype(np.float64)
        else:
            self.maxes = np.full(self.m, math.nan) if self.n else np.empty(0)
            self.mins = self.maxes.copy()

    @staticmethod
    def _box(points: _arrays.Array, boxsize: Any) -> FloatArray:
        if not isinstance(points, np.ndarray):
            raise ValueError("boxsize: a periodic tree takes host data")
        box = np.empty(int(points.shape[1]), dtype=np.float64)
        box[:] = boxsize
        periodic = box > 0
        box[~periodic] = 0.0
        if (points[:, periodic] >= box[periodic]).any():
            raise ValueError("Some input data are greater than the size of the periodic box.")
        if (points[:, periodic] < 0).any():
            raise ValueError("Negative input data are outside of the periodic box.")
        return box

    @classmethod
    def from_index(cls, index: Index, boxsize: Any = None,
                   leafsize: Optional[int] = None) -> "KDTree":
        """A tree over an existing :class:`~knn_gpgpu.Index` (built, or loaded
        with :meth:`Index.deserialize`), which it takes over; ``data`` is read
        back from the index's serialized form (:meth:`Index.points`)."""
        points = index.points()
        box = None if boxsize is None else cls._box(points, boxsize)
        if box is not None and index.dtype != np.float64:
            raise ValueError("boxsize: a periodic tree needs a float64 index")
        self = cls.__new__(cls)
        self._setup(index, points, points, leafsize, box)
        return self

    def __reduce__(self) -> Any:
        """Pickling through :meth:`Index.serialize` (multiprocessing, joblib)."""
        return (_tree_from_bytes, (type(self), self.index.serialize(), self.boxsize,
                                   self._leafsize_given))

    def close(self) -> None:
        """Free the index now (else it is freed when garbage-collected)."""
        self.index.close()

    def __enter__(self) -> "KDTree":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "<knn_gpgpu.KDTree n=%d, m=%d%s>" % (self.n, self.m,
                                                     ", closed" if self.index.closed else "")

    # ---- inputs ----------------------------------------------------------------
    def _queries(self, x: Any) -> Tuple[_arrays.Array, Tuple[int, ...]]:
        """Query rows ``(q, m)`` and the leading shape the results take (periodic
        trees: wrapped into the box)."""
        scalar = self.index.dtype
        if isinstance(x, np.ndarray):
            arr = x
        elif _arrays.is_device_array(x) or _arrays.is_dlpack_device_array(x):
            if self.boxsize is not None:
                raise ValueError("x: a periodic tree takes host queries")
            q = _arrays.rows(x, "x", self.m, scalar)
            return q, (int(q.shape[0]),)
        else:
            arr = _arrays.dlpack_host_array(x) if _arrays.has_dlpack(x) else np.asarray(x)
        if arr.dtype.kind == "c":
            raise TypeError("KDTree does not work with complex data")
        if arr.dtype.kind not in "biuf":
            raise TypeError("x: coordinates must be real numbers, not dtype %s" % arr.dtype)
        if arr.ndim == 0 or arr.shape[-1] != self.m:
            raise ValueError("x must consist of vectors of length %d but has shape %s"
                             % (self.m, arr.shape))
        lead = arr.shape[:-1]
        q = _arrays.to_scalar(arr.reshape(-1, self.m), scalar, "x")
        if self.boxsize is not None:
            q = _wrap(q, self.boxsize)
        return q, lead

    def _other_points(self, other: Any, name: str) -> _arrays.Array:
        """Another tree's points (or rows), as queries of this one."""
        pts = other._points if isinstance(other, KDTree) else other
        if self.boxsize is not None:
            return _wrap(_arrays.coords(pts, name, self.m, np.dtype(np.float64)), self.boxsize)
        return _arrays.rows(pts, name, self.m, self.index.dtype)

    def _exact(self, metric: _Metric) -> bool:
        """Whether the library's squared distances are the answer (no second pass)."""
        return metric.p == 2.0 and metric.box is None

    def _metric(self, p: Any) -> _Metric:
        q = _minkowski(p)
        return self._euclid if q == 2.0 else _Metric(q, self.boxsize)

    # ---- k nearest -------------------------------------------------------------
    def query(self, x: Any, k: KSpec = 1, eps: float = 0.0, p: float = 2.0,
              distance_upper_bound: float = math.inf,
              workers: Optional[int] = None) -> Tuple[Any, Any]:
        """The ``k`` nearest points of each query, as ``KDTree.query``.

        Returns:
            ``(d, i)``: float64 distances and ``intp`` indices of shape
            ``x.shape[:-1] + (k,)`` (``k`` an int > 1), ``x.shape[:-1] +
            (len(k),)`` (``k`` a list of 1-based ranks) or ``x.shape[:-1]``
            (``k = 1``); Python scalars for one point and ``k = 1``. Nearest
            first, ties by index; missing neighbours (fewer than ``k`` points,
            or none closer than ``distance_upper_bound``) are ``inf`` / ``n``.
            ``k`` (every rank) must fit a C int (``OverflowError`` before
            anything is allocated).
        """
        metric = self._euclid if p == 2 else self._metric(p)
        if eps != 0:
            _eps_factor(eps)
        bound = float(distance_upper_bound)
        if not bound >= 0.0:
            raise ValueError("distance_upper_bound = %r: must be >= 0" % (distance_upper_bound,))
        ranks, width, squeeze = _ranks(k)
        kmax = width if ranks is None else int(ranks.max())
        q, lead = self._queries(x)
        opt = _call_options(workers)
        searched = max(1, min(kmax, self.n))
        if self._exact(metric):
            try:
                found = (self.index._query_host(q, searched, opt) if isinstance(q, np.ndarray)
                         else self.index.query(q, searched, options=opt))
            except NonfiniteInputError as exc:
                raise _finite_error(exc, "x") from None
            sq, ind = np.asarray(found.sq_distances), np.asarray(found.indices)
            if squeeze and not lead and self.n and bound == math.inf:  # one point, k = 1
                return math.sqrt(float(sq[0, 0])), self._index_scalar(ind[0, 0])
            d, i = _euclidean(sq, ind, self.n, bound)
        else:
            d, i = self._nearest_general(_host(q), searched, metric, bound, opt)
        if width > searched or ranks is not None:
            d, i = _widen(d, i, ranks, width, self.n)
        if squeeze:
            d, i = d[:, 0], i[:, 0]
        shape = lead + (() if squeeze else (width,))
        d, i = d.reshape(shape), i.reshape(shape)
        if d.ndim == 0:
            return float(d), self._index_scalar(i)
        return d, i

    def _nearest_general(self, q: np.ndarray, k: int, metric: _Metric, bound: float,
                         opt: Optional[Options]) -> Tuple[FloatArray, IntArray]:
        """k nearest in ``metric`` (p != 2 or periodic): the Euclidean k nearest of
        every image bound each query's k-th distance; the points within that
        bound (a radius call) are then ranked in ``metric``."""
        rows = int(q.shape[0])
        limit = np.full(rows, math.inf)
        if rows and self.n >= k:  # any k points bound the k-th distance: the Euclidean k nearest
            cand = np.asarray(self.index._query_host(q, k, opt).indices, dtype=np.intp)
            pw = metric.powered(q[:, None, :], _host(self._points)[cand])
            limit = np.max(pw, axis=1)
        bound_pw = float(metric.limit(bound))
        limit = np.minimum(limit, bound_pw)
        row, idx, pw = self._within(q, metric.root(limit), metric, opt, strict=bound_pw,
                                    limits=limit)
        return _top_k(row, idx, metric.root(pw), rows, k, self.n)

    # ---- radius ----------------------------------------------------------------
    def _within(self, q: _arrays.Array, radii: FloatArray, metric: _Metric,
                options: Optional[Options], strict: float = math.inf,
                limits: Optional[FloatArray] = None) -> Tuple[IntArray, IntArray, FloatArray]:
        """Every (query row, point) pair within ``radii[row]`` in ``metric``, sorted
        by (row, point), with its powered distance; ``limits``: the powered
        bounds themselves where the caller has them (``radii`` then only
        guides the search); pairs at ``strict`` (a powered distance) or beyond
        are dropped (kNN's strict upper bound)."""
        rows = int(q.shape[0])
        if isinstance(q, _arrays.DeviceArray):
            r = float(radii[0]) if rows else 0.0
            if rows and not np.all(radii == r):
                raise ValueError("per-point radii need host queries (device queries take one r)")
            offsets, indices, sq = _radius_lists(self.index, q, r, options)
            row = np.repeat(np.arange(rows, dtype=np.intp), np.diff(offsets))
            return row, indices.astype(np.intp), sq.astype(np.float64)
        exact = self._exact(metric)
        if exact:
            ask = radii if self.index.dtype == np.float64 else radii * (1 + _COVER_SLACK)
        else:
            ask = metric.cover(radii, self.m)
        images, of, reach = _images(q, self.boxsize)
        copies = images.shape[0] // max(rows, 1)
        if copies > 1:  # only the images whose ball reaches into the box
            useful = np.flatnonzero(reach <= ask[of])
            images, of = images[useful], of[useful]
        ask = ask[of]
        pieces_row, pieces_idx, pieces_sq = [], [], []
        width = None  # the row width the next group is asked with (None: count first)
        for group, radius in _radius_groups(ask):
            part = images[group] if group.size != images.shape[0] else images
            if width is None or group.size * width > _ROW_SLOT_BUDGET:
                sq, found, counts = self._radius_csr(part, radius, options)
            else:
                sq, found, counts = _rows_within(self.index, part, radius, width, options)
            # The next group's balls are wider: its rows, by this group's
            # mean grown with the volume, with room for the spread.
            grow = (_RADIUS_GROUP_FACTOR if radius > 0 else 1.0) ** self.m
            width = int(2 * grow * counts.mean()) + 8 if counts.size else None
            pieces_row.append(np.repeat(of[group], counts))
            pieces_idx.append(found.astype(np.intp))
            pieces_sq.append(np.asarray(sq, dtype=np.float64))
        row = np.concatenate(pieces_row) if pieces_row else np.empty(0, np.intp)
        idx = np.concatenate(pieces_idx) if pieces_idx else np.empty(0, np.intp)
        if exact:
            pw = np.concatenate(pieces_sq) if pieces_sq else np.empty(0)
        else:
            pw = metric.powered(q[row], _host(self._points)[idx])
        keep = pw <= (metric.limit(radii) if limits is None else limits)[row]
        if strict != math.inf:
            keep &= pw < strict
        row, idx, pw = row[keep], idx[keep], pw[keep]
        key = row.astype(np.int64) * max(self.n, 1) + idx
        order = np.argsort(key, kind="stable")
        key, row, idx, pw = key[order], row[order], idx[order], pw[order]
        if copies > 1:  # one point seen through two images: once
            first = np.ones(key.shape[0], dtype=bool)
            first[1:] = key[1:] != key[:-1]
            row, idx, pw = row[first], idx[first], pw[first]
        return row, idx, pw

    def _radius_csr(self, q: np.ndarray, radius: float, options: Optional[Options]
                    ) -> Tuple[Any, Any, npt.NDArray[np.int64]]:
        """:meth:`Index.radius_csr` as (sq_distances, indices, counts)."""
        found = self.index.radius_csr(q, radius, options=options)
        return found.sq_distances, found.indices, np.diff(found.offsets)

    def query_ball_point(self, x: Any, r: Any, p: float = 2.0, eps: float = 0.0,
                         workers: Optional[int] = None, return_sorted: Optional[bool] = None,
                         return_length: bool = False) -> Any:
        """The points within distance ``r`` of each query, as
        ``KDTree.query_ball_point``.

        ``r`` is a scalar or an array broadcast against ``x.shape[:-1]``.
        Returns, for one point, a list of indices (an ``intp`` with
        ``return_length``); else an object array of lists (an ``intp`` array of
        counts with ``return_length``) of shape ``x.shape[:-1]``. Lists are
        sorted by index whatever ``return_sorted`` says.
        """
        metric = self._metric(p)
        grow = _eps_factor(eps)
        del return_sorted  # always sorted, which every setting allows
        q, lead = self._queries(x)
        if isinstance(q, np.ndarray) and not np.isfinite(q).all():
            raise NonfiniteInputError(Status.NONFINITE_INPUT, "x must be finite, check for nan "
                                      "or inf values", "knn_gpgpu (binding)")
        radii = np.broadcast_to(np.asarray(r, dtype=np.float64), lead).reshape(-1)
        if radii.size and not np.all(radii >= 0):
            raise ValueError("r must be >= 0 (got %r)" % (r,))
        if grow != 1.0:
            radii = radii * grow
        opt = _call_options(workers)
        rows = radii.shape[0]
        if return_length and self._exact(metric) and rows and np.all(radii == radii[0]):
            counts = _count_within(self.index, q, float(radii[0]), opt).astype(np.intp)
        else:
            row, idx, _ = self._within(q, radii, metric, opt)
            if return_length:
                counts = np.bincount(row, minlength=rows).astype(np.intp)
        if return_length:
            out_counts = counts.reshape(lead)
            return out_counts[()] if out_counts.ndim == 0 else out_counts
        lists = _split(idx, np.bincount(row, minlength=rows))
        out = np.empty(rows, dtype=object)
        for slot, members in enumerate(lists):
            out[slot] = members
        out_lists = out.reshape(lead)
        return out_lists[()] if out_lists.ndim == 0 else out_lists

    def query_ball_tree(self, other: "KDTree", r: float, p: float = 2.0,
                        eps: float = 0.0) -> List[List[int]]:
        """For each point of ``self``, the (sorted) indices of the points of
        ``other`` within ``r``, as ``KDTree.query_ball_tree`` (``other``'s box)."""
        metric = other._metric(p)
        grow = _eps_factor(eps)
        queries = other._other_points(self, "self")
        row, idx, _ = other._within(queries, _radii(r, int(queries.shape[0])) * grow, metric,
                                    None)
        return _split(idx, np.bincount(row, minlength=self.n))

    def query_pairs(self, r: float, p: float = 2.0, eps: float = 0.0,
                    output_type: str = "set") -> Any:
        """All pairs ``(i, j)``, ``i < j``, of points within distance ``r``, as
        ``KDTree.query_pairs``: a set of tuples, or with ``output_type =
        "ndarray"`` an ``(npairs, 2)`` ``intp`` array in lexicographic order."""
        metric = self._metric(p)
        grow = _eps_factor(eps)
        if output_type not in ("set", "ndarray"):
            raise ValueError("Invalid output type")
        radius = float(_radii(r, 1)[0] * grow)
        plan = _radius_plan(radius, self.index.dtype)
        if self._exact(metric) and plan.exact:
            # The library's pairs: its test at plan.below is scipy's (module
            # documentation), and they come as (i, j), i < j, in order. The
            # last call's number at this radius is the room asked for: a
            # repeated call is one search (one the OpenMP kd-tree makes
            # once per pair), a first one a size query, then the pairs.
            guess = self._pair_counts.get(plan.below)
            pairs = self.index.radius_pairs(plan.below, capacity=guess).astype(np.intp,
                                                                               copy=False)
            self._pair_counts = {plan.below: int(pairs.shape[0])}
            if output_type == "ndarray":
                return pairs
            return set(zip(pairs[:, 0].tolist(), pairs[:, 1].tolist()))
        if self._exact(metric):
            # A float32 index whose float32 test differs from scipy's near r:
            # every row, settled at r (_radius_lists); rows come by (distance,
            # index), so only the ndarray needs sorting.
            offsets, found, _ = _radius_lists(self.index, self._points, radius, None)
            row = np.repeat(np.arange(self.n, dtype=np.intp), np.diff(offsets))
            idx = found.astype(np.intp)
            keep = row < idx
            row, idx = row[keep], idx[keep]
            if output_type == "ndarray":
                order = np.argsort(row * max(self.n, 1) + idx, kind="stable")
                row, idx = row[order], idx[order]
        else:
            row, idx, _ = self._within(self._points, np.full(self.n, radius), metric, None)
            keep = row < idx
            row, idx = row[keep], idx[keep]
        pairs = np.stack([row, idx], axis=1)
        if output_type == "ndarray":
            return pairs
        result: Set[Tuple[int, int]] = set(zip(pairs[:, 0].tolist(), pairs[:, 1].tolist()))
        return result

    def count_neighbors(self, other: Any, r: Any, p: float = 2.0, weights: Any = None,
                        cumulative: bool = True) -> Any:
        """The number of pairs ``(a, b)``, ``a`` a point of ``self`` and ``b`` of
        ``other`` (a :class:`KDTree` or an ``(n2, m)`` array-like), within
        distance ``r``, as ``KDTree.count_neighbors``. ``r`` a scalar gives a
        scalar, a 1-D array an array: ``intp`` counts, or float64 sums of
        ``w_self[a] * w_other[b]`` with ``weights`` (a pair ``(w_self,
        w_other)``, either ``None``, or one array when ``other is self``);
        ``cumulative=False`` counts the pairs with ``r[i-1] < d <= r[i]``
        (``r`` non-decreasing)."""
        metric = self._metric(p)
        radii = np.asarray(r, dtype=np.float64)
        if radii.ndim > 1:
            raise ValueError("r must be either a single value or a one-dimensional array "
                             "of values")
        flat = radii.reshape(-1)
        if not cumulative and np.any(np.diff(flat) < 0):
            raise ValueError("r must be non-decreasing for non-cumulative counting")
        own_w, other_w = _weights(self, other, weights)
        queries = self._other_points(other, "other")
        nq = int(queries.shape[0])
        if own_w is not None and own_w.shape[0] != self.n or (
                other_w is not None and other_w.shape[0] != nq):
            raise ValueError("weights must have the same length as the points of their tree")
        weighted = own_w is not None or other_w is not None
        if self._exact(metric) and not np.isnan(flat).any():
            # One search at the largest radius, counted into every radius in
            # the library (scipy's d * d <= r * r in float64, weights too).
            totals: Any = self.index.count_neighbors(queries, flat, query_weights=other_w,
                                                     point_weights=own_w, weighted=weighted)
            if not weighted:
                totals = totals.astype(np.intp, copy=False)
        else:
            top = max(0.0, float(np.max(flat))) if flat.size else 0.0
            row, idx, pw = self._within(queries, np.full(nq, top), metric, None)
            w = np.ones(row.shape[0])
            if other_w is not None:
                w = w * other_w[row]
            if own_w is not None:
                w = w * own_w[idx]
            order = np.argsort(pw, kind="stable")
            sums = np.concatenate([[0.0], np.cumsum(w[order])])
            at = np.searchsorted(pw[order], metric.limit(flat), side="right")
            at[flat < 0] = 0
            totals = sums[at] if weighted else at.astype(np.intp)
        if not cumulative:
            totals = np.diff(totals, prepend=0)
        if radii.ndim == 0:
            return totals[0].item() if not weighted else totals[0]
        return totals

    def sparse_distance_matrix(self, other: "KDTree", max_distance: float, p: float = 2.0,
                               output_type: str = "dok_matrix") -> Any:
        """The distances of the pairs (point ``i`` of ``self``, ``j`` of
        ``other``) within ``max_distance``, as ``KDTree.sparse_distance_matrix``:
        ``output_type`` ``"dok_matrix"``, ``"coo_matrix"`` (scipy.sparse, zeros
        kept), ``"dict"`` ``{(i, j): d}`` or ``"ndarray"`` (fields ``i``, ``j``,
        ``v``)."""
        metric = self._metric(p)
        if output_type not in ("dok_matrix", "coo_matrix", "dict", "ndarray"):
            raise ValueError("Invalid output type")
        queries = self._other_points(other, "other")
        nq = int(queries.shape[0])
        col, row, pw = self._within(queries, _radii(max_distance, nq), metric, None)
        order = np.lexsort((col, row))
        i, j, v = row[order], col[order], metric.root(pw[order])
        if output_type == "ndarray":
            out = np.empty(i.shape[0], dtype=np.dtype([("i", np.intp), ("j", np.intp),
                                                       ("v", np.float64)], align=True))
            out["i"], out["j"], out["v"] = i, j, v
            return out
        if output_type == "dict":
            return dict(zip(zip(i.tolist(), j.tolist()), v.tolist()))
        sparse = importlib.import_module("scipy.sparse")  # only these two outputs need scipy
        coo = sparse.coo_matrix((v, (i, j)), shape=(self.n, nq))
        if output_type == "coo_matrix":
            return coo
        dok = sparse.dok_matrix((self.n, nq))
        # scipy's own way, which keeps zero distances (setting an entry to 0
        # would drop it): the dict under the matrix (scipy >= 1.12), or the
        # matrix itself (a dict subclass before).
        store = getattr(dok, "_dict", None)
        entries = zip(zip(i.tolist(), j.tolist()), v.tolist())
        if store is None:
            dict.update(dok, entries)
        else:
            store.update(entries)
        return dok

    @property
    def tree(self) -> Any:
        raise AttributeError("knn_gpgpu.KDTree has no 'tree': its nodes live in the library, "
                             "in its own layout")


class cKDTree(KDTree):
    """scipy's other name for :class:`KDTree`: the same class but for what
    scipy's cKDTree differs in (a ``leafsize`` of 16 reported by default, a
    Python ``int`` index for one point and ``k = 1``), and its own
    ``__name__``."""

    default_leafsize = 16
    _index_scalar = int


def _tree_from_bytes(cls: Any, data: bytes, boxsize: Optional[FloatArray],
                     leafsize: Optional[int]) -> KDTree:
    tree: KDTree = cls.from_index(Index.deserialize(data), boxsize, leafsize)
    return tree


# ---- helpers ------------------------------------------------------------------------

def _ranks(k: KSpec) -> Tuple[Optional[npt.NDArray[np.intp]], int, bool]:
    """The 1-based ranks to return (``None`` for an int ``k``: ranks 1..k, never
    materialised), how many, and whether the rank axis is dropped (k = 1)."""
    if isinstance(k, (int, np.integer)):
        kk = operator.index(k)
        if kk < 1:
            raise ValueError("k = %d: must be >= 1" % kk)
        _arrays.c_int(kk, "k", "knn_index_query")
        return None, kk, kk == 1
    ranks = np.asarray(k)
    if ranks.ndim != 1 or ranks.size == 0 or ranks.dtype.kind not in "iu":
        raise ValueError("k must be an integer or a sequence of integers, got %r" % (k,))
    if ranks.min() < 1:
        raise ValueError("k = %r: every rank must be >= 1" % (k,))
    _arrays.c_int(int(ranks.max()), "k", "knn_index_query")
    return ranks.astype(np.intp), int(ranks.size), False


def _host(rows: _arrays.Array) -> np.ndarray:
    """Rows the binding reads itself (``p != 2``, periodic boxes): host only."""
    if not isinstance(rows, np.ndarray):
        raise ValueError("p != 2 needs host points and queries (device arrays take p = 2)")
    return rows


def _finite_error(exc: NonfiniteInputError, what: str) -> NonfiniteInputError:
    """The library's error with scipy's words in front (code matching on them)."""
    return NonfiniteInputError(exc.status, "%s must be finite, check for nan or inf values: %s"
                               % (what, exc.message), exc.function)


def _wrap(q: np.ndarray, box: FloatArray) -> np.ndarray:
    """Queries moved into the box as scipy moves them (periodic dimensions only)."""
    periodic = box > 0
    if not periodic.any():
        return q
    out = np.array(q, dtype=np.float64)
    L = box[periodic]
    x = out[:, periodic]
    x = x - np.floor(x / L) * L
    x = np.where(x >= L, x - L, x)
    x = np.where(x < 0, x + L, x)
    out[:, periodic] = x
    return out


def _images(q: np.ndarray, box: Optional[FloatArray]
            ) -> Tuple[np.ndarray, IntArray, FloatArray]:
    """The queries, then their images across the box: per periodic dimension
    the copy one box length towards the far side (``x + L`` below ``L/2``,
    ``x - L`` from it), every combination: ``2^p`` blocks of rows. A point's
    periodic distance is its plain distance to one of them. Returns the rows,
    the query each is an image of, and how far each image is from the box at
    least (the largest distance from its query to a face it crossed; no point
    closer than that is found through it)."""
    rows = q.shape[0]
    of = np.arange(rows, dtype=np.intp)
    if box is None or not (box > 0).any():
        return q, of, np.zeros(rows)
    blocks, owners, reaches = [q], [of], [np.zeros(rows)]
    for d in np.flatnonzero(box > 0):
        low = q[:, d] < 0.5 * box[d]
        face = np.where(low, q[:, d], box[d] - q[:, d])
        count = len(blocks)
        for b in range(count):
            image = blocks[b].copy()
            image[:, d] = np.where(low, q[:, d] + box[d], q[:, d] - box[d])
            blocks.append(image)
            owners.append(of)
            reaches.append(np.maximum(reaches[b], face))
    return (np.ascontiguousarray(np.concatenate(blocks)), np.concatenate(owners),
            np.concatenate(reaches))


def _radius_groups(radii: FloatArray) -> List[Tuple[IntArray, float]]:
    """Rows grouped by radius (within _RADIUS_GROUP_FACTOR of the group's
    smallest; zeros and infinities apart): each group's rows and its largest
    radius. Linear after one sort, however many distinct radii."""
    if radii.size == 0:
        return []
    order = np.argsort(radii, kind="stable")
    ordered = radii[order]
    groups = []
    start = 0
    while start < ordered.shape[0]:
        low = float(ordered[start])
        top = low * _RADIUS_GROUP_FACTOR if 0 < low < math.inf else low
        stop = int(np.searchsorted(ordered, top, side="right"))
        groups.append((order[start:stop], float(ordered[stop - 1])))
        start = stop
    return groups


def _radii(r: Any, rows: int) -> FloatArray:
    radius = float(r)
    if not radius >= 0.0:
        raise ValueError("r must be >= 0 (got %r)" % (r,))
    return np.full(rows, radius)


def _split(values: IntArray, counts: npt.NDArray[np.int64]) -> List[List[int]]:
    """Python lists of consecutive runs of ``values``, ``counts`` long each."""
    flat = values.tolist()
    ends = np.cumsum(counts).tolist()
    starts = [0] + ends[:-1]
    return [flat[a:b] for a, b in zip(starts, ends)]


def _top_k(row: IntArray, idx: IntArray, dist: FloatArray, rows: int, k: int,
           n: int) -> Tuple[FloatArray, IntArray]:
    """Per row, the k (distance, index)-smallest of the pairs; inf / n beyond."""
    d = np.full((rows, k), math.inf)
    i = np.full((rows, k), n, dtype=np.intp)
    order = np.lexsort((idx, dist, row))
    row, idx, dist = row[order], idx[order], dist[order]
    starts = np.searchsorted(row, np.arange(rows))
    rank = np.arange(row.shape[0]) - starts[row]
    keep = rank < k
    d[row[keep], rank[keep]] = dist[keep]
    i[row[keep], rank[keep]] = idx[keep]
    return d, i


def _widen(d: FloatArray, i: IntArray, ranks: Optional[IntArray], width: int,
           n: int) -> Tuple[FloatArray, IntArray]:
    """Columns for ranks 1..width (or the given ranks) from the searched ones;
    ranks beyond those searched are missing (inf / n)."""
    searched = d.shape[1]
    want = np.arange(1, width + 1) if ranks is None else ranks
    out_d = np.full((d.shape[0], want.shape[0]), math.inf)
    out_i = np.full((d.shape[0], want.shape[0]), n, dtype=np.intp)
    have = want <= searched
    out_d[:, have] = d[:, want[have] - 1]
    out_i[:, have] = i[:, want[have] - 1]
    return out_d, out_i


def _weights(tree: KDTree, other: Any, weights: Any
             ) -> Tuple[Optional[FloatArray], Optional[FloatArray]]:
    """scipy's ``weights``: None, a pair (self's, other's), or one array for both
    (only when ``other is tree``)."""
    if weights is None:
        return None, None
    if isinstance(weights, tuple):
        own, theirs = weights
    else:
        if other is not tree:
            raise ValueError("Two different trees are used. Specify weights for both in a "
                             "tuple.")
        own = theirs = weights
    return (None if own is None else np.asarray(own, dtype=np.float64).reshape(-1),
            None if theirs is None else np.asarray(theirs, dtype=np.float64).reshape(-1))


def _call_options(workers: Optional[int]) -> Optional[Options]:
    threads = _threads(workers)
    return None if threads is None else Options(threads=threads)


def _euclidean(sq: npt.NDArray[np.floating[Any]], ind: npt.NDArray[np.int32], n: int,
               bound: float) -> Tuple[npt.NDArray[np.float64], npt.NDArray[np.intp]]:
    """scipy's outputs from the library's: sqrt of the squared distances, inf / n
    for missing slots and for neighbours not strictly within ``bound``."""
    sq64 = sq.astype(np.float64)
    missing = ind < 0
    if bound != math.inf:
        missing |= ~(sq64 < bound * bound)
    d = np.sqrt(sq64)
    i = ind.astype(np.intp)
    d[missing] = math.inf
    i[missing] = n
    return d, i


class _RadiusPlan(NamedTuple):
    """How scipy's test ``d * d <= r * r`` (float64) maps onto the library's
    ``sq <= float32(radius * radius)`` (float32): ``limit`` is the largest float32
    squared distance within ``r``; ``below`` is the largest float32 radius the
    library bounds by ``limit`` or less, ``above`` the next float32 (its bound
    is more). ``exact``: the library's bound at ``below`` is ``limit`` itself,
    so one call at ``below`` answers; else the rows whose answers at ``below``
    and ``above`` differ are settled by their squared distances. A float64
    index compares ``sq <= r * r`` in float64, scipy's test itself: one call
    at ``r``."""

    below: float
    above: float
    limit: np.floating[Any]
    exact: bool


def _radius_plan(r: float, scalar: np.dtype) -> _RadiusPlan:
    if scalar == _arrays.FLOAT64:
        with np.errstate(over="ignore"):
            return _RadiusPlan(r, r, np.float64(r) * np.float64(r), True)
    if r == math.inf:
        return _RadiusPlan(math.inf, math.inf, np.float32(math.inf), True)
    with np.errstate(over="ignore"):
        square = r * r
        limit = np.float32(square)
        if float(limit) > square:
            limit = np.nextafter(limit, np.float32(0))
        if limit == 0:  # r below the smallest float32 distance: only exact matches
            return _RadiusPlan(0.0, 0.0, limit, True)
        c = np.float32(math.sqrt(float(limit)))
        while c > 0 and np.float32(c * c) > limit:
            c = np.nextafter(c, np.float32(0))
        while True:
            up = np.nextafter(c, np.float32(math.inf))
            if np.float32(up * up) > limit:
                break
            c = up
        return _RadiusPlan(float(c), float(up), limit, bool(np.float32(c * c) == limit))


def _count_within(index: Index, queries: _arrays.Array, r: float,
                  options: Optional[Options]) -> npt.NDArray[np.int64]:
    """Per query, the number of points within distance ``r`` (scipy's test)."""
    plan = _radius_plan(r, index.dtype)
    counts: npt.NDArray[np.int64] = np.asarray(
        index.radius(queries, plan.below, 0, options=options, distances_first=True).counts,
        dtype=np.int64)
    if plan.exact:
        return counts
    more = np.asarray(index.radius(queries, plan.above, 0, options=options,
                                   distances_first=True).counts, dtype=np.int64)
    unsettled = np.flatnonzero(more != counts)
    if unsettled.size == 0:
        return counts
    if isinstance(queries, _arrays.DeviceArray):  # device rows cannot be gathered here: all
        offsets, _, _ = _radius_lists(index, queries, r, options)
        return np.diff(offsets)
    offsets, _, _ = _radius_lists(index, queries[unsettled], r, options)
    counts[unsettled] = np.diff(offsets)
    return counts


def _radius_lists(index: Index, queries: _arrays.Array, r: float,
                  options: Optional[Options]
                  ) -> Tuple[npt.NDArray[np.int64], npt.NDArray[np.int32],
                             npt.NDArray[np.floating[Any]]]:
    """Every point within distance ``r`` of each query, as CSR rows: ``offsets``
    ((q + 1,) int64) and, for query ``j``, ``indices[offsets[j]:offsets[j+1]]``
    with their squared distances, by (distance, index).

    The library's fixed-row radius call is run twice: a counting call, then
    filling calls over runs of consecutive queries whose rows (as wide as the
    run's largest count) fit _ROW_SLOT_BUDGET slots. A count-then-fill CSR
    function in the C API would replace both passes (one place: here).
    """
    plan = _radius_plan(r, index.dtype)
    radius = plan.below if plan.exact else plan.above
    counts = index.radius(queries, radius, 0, options=options,
                          distances_first=True).counts.astype(np.int64)
    q = counts.shape[0]
    offsets = np.zeros(q + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    indices = np.empty(int(offsets[-1]), dtype=np.int32)
    sq = np.empty(int(offsets[-1]), dtype=index.dtype)
    start = 0
    while start < q:
        # The longest run [start, stop) whose padded rows fit the budget (at least one query).
        window = counts[start:start + _ROW_SLOT_BUDGET]
        widths = np.maximum(np.maximum.accumulate(window), 1)
        fits = np.arange(1, window.shape[0] + 1) * widths <= _ROW_SLOT_BUDGET
        run = max(1, int(np.argmin(fits)) if not fits.all() else window.shape[0])
        stop = start + run
        width = int(widths[run - 1])
        if counts[start:stop].max() > 0:
            part = _row_range(queries, start, stop)
            rows = index.radius(part, radius, width, options=options, distances_first=True)
            dist, ind, got = (np.asarray(rows.sq_distances), np.asarray(rows.indices),
                              rows.counts)
            if not np.array_equal(got, counts[start:stop]):
                raise InternalError(Status.INTERNAL, "radius counts changed between two calls "
                                    "on the same index", "knn_gpgpu (binding)")
            valid = np.arange(width)[None, :] < counts[start:stop, None]
            lo, hi = int(offsets[start]), int(offsets[stop])
            indices[lo:hi] = ind[valid]
            sq[lo:hi] = dist[valid]
        start = stop
    if plan.exact:
        return offsets, indices, sq
    # Rows are sorted by distance: the points beyond the limit end each row.
    keep = sq <= plan.limit
    row = np.repeat(np.arange(q), np.diff(offsets))
    kept = np.zeros(q + 1, dtype=np.int64)
    np.cumsum(np.bincount(row[keep], minlength=q), out=kept[1:])
    return kept, indices[keep], sq[keep]


def _rows_within(index: Index, q: np.ndarray, radius: float, width: int,
                 options: Optional[Options]) -> Tuple[Any, Any, npt.NDArray[np.int64]]:
    """Every point within ``radius`` of each host query, as consecutive rows
    (squared distances, indices, counts; by distance, then index), from one
    fixed-row radius call of ``width`` slots a query, which also gives the
    true counts: only the rows longer than ``width`` are searched again, at
    their own width. A good width spares the counting search of
    :meth:`Index.radius_csr` (a third less time at 10^5 points)."""
    rows = index.radius(q, radius, width, options=options)
    counts = np.asarray(rows.counts, dtype=np.int64)
    rows_sq, rows_ind = np.asarray(rows.sq_distances), np.asarray(rows.indices)
    kept = np.minimum(counts, width)
    valid = np.arange(width)[None, :] < kept[:, None]
    long_rows = np.flatnonzero(counts > width)
    if long_rows.size == 0:
        return rows_sq[valid], rows_ind[valid], counts
    redo = index.radius(q[long_rows], radius, int(counts[long_rows].max()), options=options)
    if not np.array_equal(np.asarray(redo.counts, dtype=np.int64), counts[long_rows]):
        raise InternalError(Status.INTERNAL, "radius counts changed between two calls on the "
                            "same index", "knn_gpgpu (binding)")
    redo_sq, redo_ind = np.asarray(redo.sq_distances), np.asarray(redo.indices)
    redo_valid = np.arange(redo_ind.shape[1])[None, :] < counts[long_rows][:, None]
    # Row by row: the first `width` slots of the short rows' call, the rest of a
    # long row from its own call (the long rows' slots replace theirs whole).
    valid[long_rows] = False
    offsets = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    ind = np.empty(int(offsets[-1]), dtype=np.int32)
    sq = np.empty(int(offsets[-1]), dtype=rows_sq.dtype)
    short_at = np.flatnonzero(np.repeat(counts <= width, counts))
    long_at = np.flatnonzero(np.repeat(counts > width, counts))
    ind[short_at], sq[short_at] = rows_ind[valid], rows_sq[valid]
    ind[long_at], sq[long_at] = redo_ind[redo_valid], redo_sq[redo_valid]
    return sq, ind, counts


def _row_range(queries: _arrays.Array, start: int, stop: int) -> _arrays.Array:
    """Rows ``start:stop`` of host or device queries, without copying."""
    if isinstance(queries, _arrays.DeviceArray):
        row_bytes = int(queries.shape[1]) * queries.dtype.itemsize
        return _arrays.DeviceArray(queries.owner, queries.ptr + start * row_bytes,
                                   (stop - start, int(queries.shape[1])), queries.dtype)
    return queries[start:stop]

