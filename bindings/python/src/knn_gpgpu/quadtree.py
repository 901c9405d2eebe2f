"""Point in polygon over a quadtree (2-D).

Polygons are passed in the library's flat form (numpy offsets):

* ``vertices_xy``: ``(v, 2)`` float vertices of every ring,
* ``ring_offsets``: ``n_rings + 1`` int64; ring ``r`` is vertices
  ``[ring_offsets[r], ring_offsets[r+1])``,
* ``polygon_offsets``: ``n_polygons + 1`` int64; polygon ``p`` is rings
  ``[polygon_offsets[p], polygon_offsets[p+1])``, the first its outer boundary,
  the others holes.

:func:`pack_polygons` builds these arrays from nested lists.

Precision: the dtype picks it, and nothing is rounded. float32 points build a
float32 tree (``knn_quadtree_build``), float64 points (and integers, converted
to float64) a float64 one (``knn_quadtree_build_f64``); float32 vertices go to
``knn_points_in_polygons*``, float64 (or integer) vertices to their ``_f64``
twins. Trees and polygons of either precision combine: the library decides on
the exact values (a float32 converts to float64 exactly), with robust
orientation tests. Rings may be open
or closed, in any orientation, concave. Inside rule (the header's): even-odd
crossings of a ray towards +x over all rings of the polygon, half-open edges;
a point exactly on an edge belongs to the polygon to its right (above it on a
horizontal edge), so a point on an edge or vertex shared by polygons that tile
a region belongs to exactly one of them: the unit square holds (0, 0),
(0, 0.5) and (0.5, 0) but not (1, 0.5), (0.5, 1) or (1, 1).

Results: :meth:`Quadtree.points_in_polygons_count` (counts),
:meth:`Quadtree.points_in_polygons` (offsets and one flat index array) and
:meth:`Quadtree.points_in_each_polygon` (one ascending index array per polygon).
"""

from __future__ import annotations

import ctypes
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from . import _arrays
from ._library import check, native
from ._types import QuadtreeHandle
from ._handle import NativeHandle
from .options import Options, byref, resolve

__all__ = ["Quadtree", "pack_polygons", "points_in_polygons_count", "points_in_polygons",
           "points_in_each_polygon"]


def pack_polygons(polygons: Sequence[Sequence[Any]]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flatten ``[[outer_ring, hole, ...], ...]`` (each ring ``(v, 2)``) into
    ``(vertices_xy, ring_offsets, polygon_offsets)``. The vertices are float32
    when every ring is a float32 array, else float64 (Python floats are
    doubles; integers convert exactly)."""
    vertices = []
    ring_offsets = [0]
    polygon_offsets = [0]
    for polygon in polygons:
        for ring in polygon:
            r = np.asarray(ring)
            if r.dtype.kind not in "biuf":
                raise TypeError("pack_polygons: vertices must be real numbers, not dtype %s"
                                % r.dtype)
            r = r.reshape(-1, 2)
            vertices.append(r)
            ring_offsets.append(ring_offsets[-1] + r.shape[0])
        polygon_offsets.append(len(ring_offsets) - 1)
    scalar = (_arrays.FLOAT32 if vertices and all(v.dtype == _arrays.FLOAT32 for v in vertices)
              else _arrays.FLOAT64)
    xy = np.concatenate(vertices) if vertices else np.empty((0, 2), scalar)
    return (np.ascontiguousarray(xy, dtype=scalar), np.asarray(ring_offsets, np.int64),
            np.asarray(polygon_offsets, np.int64))


def _entry(function: str, xy: np.ndarray) -> Tuple[str, Any]:
    """The C function for coordinates ``xy`` (``function`` or its ``_f64`` twin) and
    their ctypes element type."""
    if xy.dtype == _arrays.FLOAT64:
        return function + "_f64", ctypes.c_double
    return function, ctypes.c_float


def _polygons(vertices_xy: Any, ring_offsets: Any, polygon_offsets: Any
              ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """Convert and bounds-check the polygon arrays.

    The C functions receive no vertex count, so the binding checks that every
    offset stays inside the arrays it passes (memory safety); the library checks
    the rest (decreasing offsets, short rings, NaN vertices).
    """
    xy = _arrays.coords(vertices_xy, "vertices_xy", 2)
    rings = _arrays.offsets(ring_offsets, "ring_offsets")
    polys = _arrays.offsets(polygon_offsets, "polygon_offsets")
    n_rings = rings.shape[0] - 1
    n_polygons = polys.shape[0] - 1
    if rings.min() < 0 or rings.max() > xy.shape[0]:
        raise ValueError("ring_offsets must lie in [0, %d] (the number of vertices)" % xy.shape[0])
    if polys.min() < 0 or polys.max() > n_rings:
        raise ValueError("polygon_offsets must lie in [0, %d] (the number of rings)" % n_rings)
    return xy, rings, polys, n_rings, n_polygons


class Quadtree(NativeHandle):
    """A quadtree over ``n`` 2-D points (``knn_quadtree``), for point-in-polygon queries.

    Args:
        xy: ``(n, 2)`` points (the tree keeps its own copy): float32 builds a
            float32 tree, any other real dtype a float64 one.
        options: an :class:`Options`; keyword ``backend``/``threads``/``leaf_size``/...
            override it. ``backend="auto"`` builds on the CUDA engine when a device
            is usable, else on OpenMP; the queries run on the tree's engine.

    Raises:
        NonfiniteInputError: a NaN/Inf point (the message names it);
        InvalidArgumentError, NoDeviceError (``backend="cuda"`` without a GPU).
        The queries raise InvalidArgumentError for polygon arrays the library
        refuses (offsets that decrease, a polygon without a ring, a ring of
        fewer than 3 distinct vertices, out_offsets that disagree with the
        counts) and NonfiniteInputError for a NaN/Inf vertex, each with
        ``knn_last_error()`` naming the element; ``ValueError``/``TypeError``
        for shapes and offsets outside the arrays (before the call).

    Use as a context manager or call :meth:`close`.
    """

    def __init__(self, xy: Any, *, options: Optional[Options] = None, **option_fields: Any) -> None:
        self._own(None)
        pts = _arrays.coords(xy, "xy", 2)
        opt = resolve(options, **option_fields)
        handle = ctypes.POINTER(QuadtreeHandle)()
        build, real = _entry("knn_quadtree_build", pts)
        status = getattr(native(), build)(_arrays.pointer(pts, real),
                                          _arrays.c_int64(pts.shape[0], "n"), byref(opt),
                                          ctypes.byref(handle))
        check(status, build)
        self._own(handle)
        self._n = int(pts.shape[0])

    @classmethod
    def _from_handle(cls, handle: Any, n: int) -> "Quadtree":
        """Wrap an existing ``knn_quadtree*`` (taking ownership). For advanced hosts and tests."""
        self = cls.__new__(cls)
        self._own(handle)
        self._n = int(n)
        return self

    _free_function = "knn_quadtree_free"
    _what = "quadtree"

    @property
    def n(self) -> int:
        """Number of points in the tree."""
        return self._n

    def points_in_polygons_count(self, vertices_xy: Any, ring_offsets: Any, polygon_offsets: Any,
                                 *, options: Optional[Options] = None) -> np.ndarray:
        """Number of tree points inside each polygon (``knn_points_in_polygons_count``).

        Returns:
            ``(n_polygons,)`` int64 counts.
        """
        with self._use() as handle:
            xy, rings, polys, n_rings, n_polygons = _polygons(vertices_xy, ring_offsets,
                                                              polygon_offsets)
            counts = np.empty(n_polygons, dtype=np.int64)
            count, real = _entry("knn_points_in_polygons_count", xy)
            status = getattr(native(), count)(
                handle, _arrays.pointer(xy, real), _arrays.pointer(rings, ctypes.c_int64),
                n_rings, _arrays.pointer(polys, ctypes.c_int64), n_polygons,
                _arrays.pointer(counts, ctypes.c_int64), byref(options))
            check(status, count)
            return counts

    def points_in_polygons(self, vertices_xy: Any, ring_offsets: Any, polygon_offsets: Any, *,
                           out_offsets: Any = None, options: Optional[Options] = None
                           ) -> Tuple[np.ndarray, np.ndarray]:
        """The tree points inside each polygon (``knn_points_in_polygons``).

        Args:
            out_offsets: ``n_polygons + 1`` int64 offsets from the counts (the
                exclusive prefix sum); computed with :meth:`points_in_polygons_count`
                when ``None``.

        Returns:
            ``(out_offsets, point_indices)``: polygon ``p``'s points are
            ``point_indices[out_offsets[p]:out_offsets[p+1]]``, ascending.
        """
        with self._use() as handle:
            xy, rings, polys, n_rings, n_polygons = _polygons(vertices_xy, ring_offsets,
                                                              polygon_offsets)
            if out_offsets is None:
                counts = self.points_in_polygons_count(xy, rings, polys, options=options)
                offs = np.zeros(n_polygons + 1, dtype=np.int64)
                np.cumsum(counts, out=offs[1:])
            else:
                offs = _arrays.offsets(out_offsets, "out_offsets")
                if offs.shape[0] != n_polygons + 1:
                    raise ValueError("out_offsets must have n_polygons + 1 = %d entries, got %d"
                                     % (n_polygons + 1, offs.shape[0]))
                if offs.min() < 0:
                    raise ValueError("out_offsets must not be negative")
            # Sized to the largest offset so that no offset the library accepts can
            # point outside it; the library checks that the offsets match the counts.
            indices = np.empty(int(offs.max()), dtype=np.int64)
            fill, real = _entry("knn_points_in_polygons", xy)
            status = getattr(native(), fill)(
                handle, _arrays.pointer(xy, real), _arrays.pointer(rings, ctypes.c_int64),
                n_rings, _arrays.pointer(polys, ctypes.c_int64), n_polygons,
                _arrays.pointer(offs, ctypes.c_int64), _arrays.pointer(indices, ctypes.c_int64),
                byref(options))
            check(status, fill)
            return offs, indices[: int(offs[-1])]

    def points_in_each_polygon(self, vertices_xy: Any, ring_offsets: Any, polygon_offsets: Any,
                               *, options: Optional[Options] = None) -> List[np.ndarray]:
        """The tree points inside each polygon, as one array per polygon.

        Returns:
            a list of ``n_polygons`` int64 arrays (views of one buffer), polygon
            ``p``'s point indices ascending.
        """
        offs, indices = self.points_in_polygons(vertices_xy, ring_offsets, polygon_offsets,
                                                options=options)
        return [indices[int(offs[p]):int(offs[p + 1])] for p in range(offs.shape[0] - 1)]


def points_in_polygons_count(tree: Quadtree, vertices_xy: Any, ring_offsets: Any,
                             polygon_offsets: Any, *, options: Optional[Options] = None
                             ) -> np.ndarray:
    """Function form of :meth:`Quadtree.points_in_polygons_count`."""
    return tree.points_in_polygons_count(vertices_xy, ring_offsets, polygon_offsets,
                                         options=options)


def points_in_polygons(tree: Quadtree, vertices_xy: Any, ring_offsets: Any, polygon_offsets: Any,
                       *, out_offsets: Any = None, options: Optional[Options] = None
                       ) -> Tuple[np.ndarray, np.ndarray]:
    """Function form of :meth:`Quadtree.points_in_polygons`."""
    return tree.points_in_polygons(vertices_xy, ring_offsets, polygon_offsets,
                                   out_offsets=out_offsets, options=options)


def points_in_each_polygon(tree: Quadtree, vertices_xy: Any, ring_offsets: Any,
                           polygon_offsets: Any, *, options: Optional[Options] = None
                           ) -> List[np.ndarray]:
    """Function form of :meth:`Quadtree.points_in_each_polygon`."""
    return tree.points_in_each_polygon(vertices_xy, ring_offsets, polygon_offsets,
                                       options=options)
