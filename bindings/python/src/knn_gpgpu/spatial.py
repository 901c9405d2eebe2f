"""A ``scipy.spatial.cKDTree``-shaped interface over the index API.

::

    tree = knn_gpgpu.KDTree(points)                 # (n, m) floats, any m
    d, i = tree.query(x, k=8)                       # Euclidean distances, (..., 8)
    lists = tree.query_ball_point(x, r=0.1)         # object array of index lists
    pairs = tree.query_pairs(0.1)                   # {(i, j), i < j}

The methods take and return what scipy's do: ``x`` of shape ``(..., m)`` or
one point of shape ``(m,)``; ``k`` an int (``k = 1`` drops the last axis) or
a list of 1-based ranks; distances as float64 Euclidean distances, missing
neighbours as ``inf`` with index ``n``; ``distance_upper_bound`` (strict, as
in scipy); ``workers`` (``-1`` = all cores).

Precision: the data's dtype picks it (see :class:`~knn_gpgpu.Index`). float64
data (what scipy users hold; also integers, converted to float64) builds a
float64 index: coordinates are used as they are, a distance is ``sqrt`` of the
library's exact float64 squared distance ``((d0*d0 + d1*d1) + d2*d2) + ...``,
and a point is within ``r`` when that squared distance is ``<= r * r`` (in
float64, as scipy compares), so results match scipy's on data far from the
origin too (UTM coordinates). float32 data builds a float32 index: queries
must then be float32 values (float64 queries that are not float32 values raise
``TypeError``, nothing is rounded silently), a distance is ``sqrt`` (in
float64) of the exact float32 squared distance, and a point is within ``r``
when that squared distance is ``<= r * r`` (in float64), also where ``r * r``
is no float32 (the binding then asks the library for the float32 radii on
either side and settles the rows between).

What differs from scipy, by design:
  * Ties are ordered by the smaller index (scipy leaves their order open).
  * Only ``p = 2``; ``eps`` is accepted and ignored (exact answers satisfy
    any ``eps``); ``count_neighbors`` takes no ``weights``.
  * ``workers=None`` (the default) means the library's default: all cores.
"""

from __future__ import annotations

import math
import operator
from typing import Any, List, NamedTuple, Optional, Sequence, Set, Tuple, Union

import numpy as np
import numpy.typing as npt

from . import _arrays
from .errors import InternalError, Status
from .index import Index
from .options import Options
from .stats import KDTreeStats

__all__ = ["KDTree", "cKDTree"]

KSpec = Union[int, Sequence[int]]

# Most (query, neighbour) slots one fixed-row radius call may fill while the
# binding gathers unbounded lists (see _radius_lists): 2^22 slots, 32 MiB of
# indices and distances.
_ROW_SLOT_BUDGET = 1 << 22


def _threads(workers: Optional[int]) -> Optional[int]:
    """``workers`` as ``knn_options.threads``: None/-1 -> all cores, else the count."""
    if workers is None:
        return None
    w = operator.index(workers)
    if w == -1:
        return 0
    if w < 1:
        raise ValueError("workers = %d: must be -1 (all cores) or >= 1" % w)
    return w


def _p_is_euclidean(p: float) -> None:
    if float(p) != 2.0:
        raise ValueError("p = %r: knn_gpgpu computes Euclidean distances only (p = 2)" % (p,))


def _eps_ok(eps: float) -> None:
    if not float(eps) >= 0.0:
        raise ValueError("eps = %r: must be >= 0" % (eps,))


class KDTree(KDTreeStats):
    """Exact nearest neighbours of ``n`` points in ``m`` dimensions, with the
    methods of :class:`scipy.spatial.cKDTree` (``query``, ``query_ball_point``,
    ``query_pairs``, ``count_neighbors``), and the neighbourhood statistics
    of its points (:mod:`knn_gpgpu.stats`: ``normals``, ``outlier_scores``,
    ``statistical_inliers``, ``radius_inliers``, ``kth_distances``,
    ``neighbor_counts``).

    It wraps an :class:`~knn_gpgpu.Index` (``self.index``) built with the given
    backend and structure; any structure gives the same answers.

    Args:
        data: ``(n, m)`` array-like, a ``__cuda_array_interface__`` or DLPack
            device array (float32 or float64, used in place), or a DLPack host
            tensor. float32 data builds a float32 index, any other real dtype
            a float64 one.
        leafsize: points per kd-tree bucket (``None``: the library's default).
        backend: ``"auto"`` (the GPU when usable), ``"cuda"`` or ``"openmp"``.
        structure: ``"auto"``, ``"kdtree"``, ``"grid"`` (3-D) or ``"brute_force"``.
        device: CUDA device number (``None``: the current one).
        options: an :class:`~knn_gpgpu.Options` to start from.

    Attributes:
        data: the points as ``(n, m)`` float32 or float64, the index's dtype (a
            copy for host input, the caller's object for device input, which
            must then stay unchanged).
        n, m: number of points and dimension.
        leafsize: as given.
        index: the underlying :class:`~knn_gpgpu.Index`.
    """

    def __init__(self, data: Any, leafsize: Optional[int] = None, *,
                 backend: Union[str, int, None] = None,
                 structure: Union[str, int, None] = None, device: Optional[int] = None,
                 options: Optional[Options] = None) -> None:
        points = _arrays.rows(data, "data")
        if isinstance(points, np.ndarray) and (points is data or not points.flags.owndata):
            points = points.copy()  # the caller's memory: keep a copy, as scipy does
        self._points: _arrays.Array = points
        self.index = Index(points, options=options, backend=backend, structure=structure,
                           device=device, leaf_size=leafsize)
        self.n: int = self.index.n
        self.m: int = self.index.dim
        self.leafsize = leafsize
        self.data: Any = points if isinstance(points, np.ndarray) else data

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
        """Query rows ``(q, m)`` and the leading shape the results take."""
        scalar = self.index.dtype
        if _arrays.is_device_array(x) or _arrays.is_dlpack_device_array(x):
            q = _arrays.rows(x, "x", self.m, scalar)
            return q, (int(q.shape[0]),)
        arr = _arrays.dlpack_host_array(x) if _arrays.has_dlpack(x) else np.asarray(x)
        if arr.dtype.kind not in "biuf":
            raise TypeError("x: coordinates must be real numbers, not dtype %s" % arr.dtype)
        if arr.ndim == 0 or arr.shape[-1] != self.m:
            raise ValueError("x must consist of vectors of length %d but has shape %s"
                             % (self.m, arr.shape))
        lead = tuple(int(s) for s in arr.shape[:-1])
        return _arrays.to_scalar(arr.reshape(-1, self.m), scalar, "x"), lead

    # ---- k nearest -------------------------------------------------------------
    def query(self, x: Any, k: KSpec = 1, eps: float = 0.0, p: float = 2.0,
              distance_upper_bound: float = math.inf,
              workers: Optional[int] = None) -> Tuple[Any, Any]:
        """The ``k`` nearest points of each query, as ``cKDTree.query``.

        Returns:
            ``(d, i)``: float64 Euclidean distances and ``intp`` indices of
            shape ``x.shape[:-1] + (k,)`` (``k`` an int > 1), ``x.shape[:-1] +
            (len(k),)`` (``k`` a list of 1-based ranks) or ``x.shape[:-1]``
            (``k = 1``); Python scalars for one point and ``k = 1``. Nearest
            first, ties by index; missing neighbours (fewer than ``k`` points,
            or none closer than ``distance_upper_bound``) are ``inf`` / ``n``.
            The library is asked for at most ``n`` neighbours: ranks beyond
            ``n`` are missing without a search. ``k`` (every rank) must fit
            a C int (``OverflowError`` before anything is allocated); the
            ``m * len(ranks)`` results are allocated before the search
            (``MemoryError`` from numpy where they do not fit).
        """
        _p_is_euclidean(p)
        _eps_ok(eps)
        bound = float(distance_upper_bound)
        if not bound >= 0.0:
            raise ValueError("distance_upper_bound = %r: must be >= 0" % (distance_upper_bound,))
        ranks, width, squeeze = _ranks(k)
        kmax = width if ranks is None else int(ranks.max())
        q, lead = self._queries(x)
        m = int(q.shape[0])
        # The results first: numpy refuses m * k beyond memory before any search.
        d = np.full((m, width), math.inf)
        i = np.full((m, width), self.n, dtype=np.intp)
        searched = max(1, min(kmax, self.n))
        opt = _call_options(workers)
        found = self.index.query(q, searched, options=opt, distances_first=True)
        sq, ind = np.asarray(found.sq_distances), np.asarray(found.indices)
        if ranks is None:
            cols = min(width, searched)
            d[:, :cols], i[:, :cols] = _euclidean(sq[:, :cols], ind[:, :cols], self.n, bound)
        else:
            have = ranks <= searched
            d[:, have], i[:, have] = _euclidean(sq[:, ranks[have] - 1], ind[:, ranks[have] - 1],
                                                self.n, bound)
        if squeeze:
            d, i = d[:, 0], i[:, 0]
        shape = lead + (() if squeeze else (width,))
        d, i = d.reshape(shape), i.reshape(shape)
        if d.ndim == 0:
            return float(d), int(i)
        return d, i

    # ---- radius ----------------------------------------------------------------
    def query_ball_point(self, x: Any, r: Any, p: float = 2.0, eps: float = 0.0,
                         workers: Optional[int] = None, return_sorted: Optional[bool] = None,
                         return_length: bool = False) -> Any:
        """The points within distance ``r`` of each query, as
        ``cKDTree.query_ball_point``.

        ``r`` is a scalar or an array broadcast against ``x.shape[:-1]``.
        Returns, for one point, a list of indices (an int with
        ``return_length``); else an object array of lists (an ``intp`` array of
        counts with ``return_length``) of shape ``x.shape[:-1]``. Lists are
        sorted by index whatever ``return_sorted`` says (scipy allows any order
        when it is false).
        """
        _p_is_euclidean(p)
        _eps_ok(eps)
        del return_sorted  # always sorted, which every setting allows
        q, lead = self._queries(x)
        radii = np.broadcast_to(np.asarray(r, dtype=np.float64), lead).reshape(-1)
        if radii.size and not np.all(radii >= 0):
            raise ValueError("r must be >= 0 (got %r)" % (r,))
        opt = _call_options(workers)
        if return_length:
            counts = np.empty(radii.shape[0], dtype=np.intp)
            for radius, rows in _same_radius_groups(radii):
                counts[rows] = _count_within(self.index, _take(q, rows), radius, opt)
            out_counts = counts.reshape(lead)
            return int(out_counts) if out_counts.ndim == 0 else out_counts
        lists = np.empty(radii.shape[0], dtype=object)
        for radius, rows in _same_radius_groups(radii):
            offsets, indices, _ = _radius_lists(self.index, _take(q, rows), radius, opt)
            ordered = _sort_within_rows(offsets, indices.astype(np.intp))
            for slot, lo, hi in zip(rows.tolist(), offsets[:-1].tolist(), offsets[1:].tolist()):
                lists[slot] = ordered[lo:hi].tolist()
        out_lists = lists.reshape(lead)
        return out_lists[()] if out_lists.ndim == 0 else out_lists

    def query_pairs(self, r: float, p: float = 2.0, eps: float = 0.0,
                    output_type: str = "set") -> Any:
        """All pairs ``(i, j)``, ``i < j``, of points within distance ``r``, as
        ``cKDTree.query_pairs``: a set of tuples, or with ``output_type =
        "ndarray"`` an ``(npairs, 2)`` ``intp`` array in lexicographic order."""
        _p_is_euclidean(p)
        _eps_ok(eps)
        if output_type not in ("set", "ndarray"):
            raise ValueError("output_type = %r: 'set' or 'ndarray'" % (output_type,))
        if not float(r) >= 0.0:
            raise ValueError("r must be >= 0 (got %r)" % (r,))
        offsets, indices, _ = _radius_lists(self.index, self._points, float(r), None)
        first = np.repeat(np.arange(self.n, dtype=np.intp), np.diff(offsets))
        second = indices.astype(np.intp)
        keep = first < second
        pairs = np.stack([first[keep], second[keep]], axis=1)
        pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
        if output_type == "ndarray":
            return pairs
        result: Set[Tuple[int, int]] = {(a, b) for a, b in pairs.tolist()}
        return result

    def count_neighbors(self, other: Any, r: Any, p: float = 2.0, weights: Any = None,
                        cumulative: bool = True) -> Any:
        """The number of pairs ``(a, b)``, ``a`` a point of ``self`` and ``b`` of
        ``other`` (a :class:`KDTree` or an ``(n2, m)`` array-like), within
        distance ``r``, as ``cKDTree.count_neighbors`` (``weights`` must be
        None). ``r`` a scalar gives an int; a 1-D array gives an ``intp``
        array; ``cumulative=False`` counts the pairs with ``r[i-1] < d <= r[i]``
        (``r`` non-decreasing)."""
        _p_is_euclidean(p)
        if weights is not None:
            raise NotImplementedError("count_neighbors: weights are not supported")
        radii = np.asarray(r, dtype=np.float64)
        if radii.ndim > 1:
            raise ValueError("r must be either a single value or a one-dimensional array "
                             "of values")
        if radii.size and not np.all(radii >= 0):
            raise ValueError("r must be >= 0 (got %r)" % (r,))
        if not cumulative and np.any(np.diff(radii.reshape(-1)) < 0):
            raise ValueError("r must be non-decreasing for non-cumulative counting")
        queries = _arrays.rows(other._points if isinstance(other, KDTree) else other, "other",
                               self.m, self.index.dtype)
        totals = np.array([int(np.sum(_count_within(self.index, queries, float(radius), None)))
                           for radius in radii.reshape(-1)], dtype=np.intp)
        if not cumulative:
            totals = np.diff(totals, prepend=0)
        return int(totals[0]) if radii.ndim == 0 else totals


cKDTree = KDTree
"""scipy's two names for one class."""


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
        raise ValueError("k must be an int or a non-empty list of ints, got %r" % (k,))
    if ranks.min() < 1:
        raise ValueError("k = %r: every rank must be >= 1" % (k,))
    _arrays.c_int(int(ranks.max()), "k", "knn_index_query")
    return ranks.astype(np.intp), int(ranks.size), False


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


def _same_radius_groups(radii: npt.NDArray[np.float64]
                        ) -> List[Tuple[float, npt.NDArray[np.intp]]]:
    """Rows that share a radius (one library call each), in row order."""
    if radii.size == 0:
        return []
    values, inverse = np.unique(radii, return_inverse=True)
    return [(float(v), np.flatnonzero(inverse.reshape(-1) == g)) for g, v in enumerate(values)]


def _take(q: _arrays.Array, rows: npt.NDArray[np.intp]) -> _arrays.Array:
    """The given query rows; all rows of a device array (which cannot be gathered here)."""
    if isinstance(q, _arrays.DeviceArray):
        if rows.size != q.shape[0]:
            raise ValueError("per-point radii need host queries (device queries take one r)")
        return q
    return q if rows.size == q.shape[0] else q[rows]


def _sort_within_rows(offsets: npt.NDArray[np.int64],
                      values: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    """``values`` sorted ascending inside each CSR row."""
    row = np.repeat(np.arange(offsets.shape[0] - 1), np.diff(offsets))
    return values[np.lexsort((values, row))]


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


def _row_range(queries: _arrays.Array, start: int, stop: int) -> _arrays.Array:
    """Rows ``start:stop`` of host or device queries, without copying."""
    if isinstance(queries, _arrays.DeviceArray):
        row_bytes = int(queries.shape[1]) * queries.dtype.itemsize
        return _arrays.DeviceArray(queries.owner, queries.ptr + start * row_bytes,
                                   (stop - start, int(queries.shape[1])), queries.dtype)
    return queries[start:stop]

