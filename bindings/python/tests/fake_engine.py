"""A stand-in for the library's index and quadtree engines, for testing the
binding's marshalling while the real engines answer KNN_ERR_UNSUPPORTED.

FakeNative forwards everything to the real library except the index and
quadtree functions (and, optionally, the device count), which it implements
in numpy with the contract's semantics. It reads and writes through the very
pointers the binding passes, so shapes, NULLs, offsets and out-parameters are
exercised exactly as with the C library. Only the test suite uses it.
"""

from __future__ import annotations

import ctypes
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from conftest import oracle

OK, INVALID_ARGUMENT, NONFINITE = 0, 1, 2


def as_array(ptr: Any, shape: Tuple[int, ...], dtype: Any) -> Optional[np.ndarray]:
    """numpy view of the memory a ctypes pointer points at (None for NULL)."""
    if ptr is None or not ctypes.cast(ptr, ctypes.c_void_p).value:
        return None
    count = int(np.prod(shape))
    if count == 0:
        return np.empty(shape, dtype)
    raw = ctypes.cast(ptr, ctypes.POINTER(ctypes.c_char * (count * np.dtype(dtype).itemsize)))
    return np.frombuffer(raw.contents, dtype=dtype).reshape(shape)


def address(ptr: Any) -> int:
    return ctypes.cast(ptr, ctypes.c_void_p).value or 0


def inside(px: float, py: float, ring: np.ndarray) -> bool:
    """Even-odd crossing test with the half-open rule (exact in float64 for float32 input)."""
    result = False
    v = ring.astype(np.float64)
    for i in range(len(v)):
        (x1, y1), (x2, y2) = v[i], v[(i + 1) % len(v)]
        if (y1 > py) != (y2 > py):
            if px < x1 + (py - y1) * (x2 - x1) / (y2 - y1):
                result = not result
    return result


class FakeNative:
    def __init__(self, real: Any, device_count: int = 0) -> None:
        self._real = real
        self.path = real.path
        self.device_count = device_count
        self.calls: List[Tuple[Any, ...]] = []
        self.objects: Dict[int, Tuple[Any, Any]] = {}
        self.error = b""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    # errors and devices --------------------------------------------------------
    def knn_last_error(self) -> bytes:
        return self.error

    def _fail(self, status: int, text: str) -> int:
        self.error = text.encode()
        return status

    def _ok(self) -> int:
        self.error = b""
        return OK

    def cuGetDeviceCount(self) -> int:
        return self.device_count

    # handles -------------------------------------------------------------------
    def _new(self, out_ref: Any, payload: Any) -> None:
        cell = ctypes.create_string_buffer(16)
        self.objects[ctypes.addressof(cell)] = (cell, payload)
        ctypes.c_void_p.from_buffer(out_ref._obj).value = ctypes.addressof(cell)

    def _get(self, handle: Any) -> Any:
        entry = self.objects.get(address(handle))
        return None if entry is None else entry[1]

    @staticmethod
    def _options(opt: Any) -> Any:
        return None if opt is None else opt._obj

    # index API -----------------------------------------------------------------
    def knn_index_build(self, points, n, dim, opt, out):
        self.calls.append(("knn_index_build", n, dim, address(points), self._options(opt)))
        ctypes.c_void_p.from_buffer(out._obj).value = None
        if n < 0 or dim < 1:
            return self._fail(INVALID_ARGUMENT, "knn_index_build: bad n or dim")
        pts = as_array(points, (n, dim), np.float32)
        pts = np.empty((0, dim), np.float32) if pts is None else pts.copy()
        bad = np.nonzero(~np.isfinite(pts).all(axis=1))[0]
        if bad.size:
            return self._fail(NONFINITE, "knn_index_build: point %d has a NaN coordinate" % bad[0])
        self._new(out, {"points": pts, "opt": self._options(opt)})
        return self._ok()

    def knn_index_free(self, handle):
        self.calls.append(("knn_index_free", address(handle)))
        if handle and self.objects.pop(address(handle), None) is None:
            return self._fail(INVALID_ARGUMENT, "knn_index_free: not an index")
        return self._ok()

    def knn_index_info(self, handle, n, dim, backend, structure):
        index = self._get(handle)
        if index is None:
            return self._fail(INVALID_ARGUMENT, "knn_index_info: index is NULL")
        n._obj.value, dim._obj.value = index["points"].shape
        backend._obj.value = 2          # OPENMP
        structure._obj.value = 3        # BRUTE_FORCE
        return self._ok()

    def knn_index_query(self, handle, queries, m, k, indices, sq_distances, opt):
        index = self._get(handle)
        self.calls.append(("knn_index_query", m, k, address(queries), address(indices),
                           address(sq_distances), self._options(opt)))
        if index is None or k < 1:
            return self._fail(INVALID_ARGUMENT, "knn_index_query: k is %d" % k)
        pts = index["points"]
        q = as_array(queries, (m, pts.shape[1]), np.float32)
        d, i = oracle(pts, q if q is not None else np.empty((0, pts.shape[1])), k)
        as_array(indices, (m, k), np.int32)[...] = i
        out = as_array(sq_distances, (m, k), np.float32)
        if out is not None:
            out[...] = d
        return self._ok()

    def knn_index_query_self(self, handle, k, exclude_self, indices, sq_distances):
        index = self._get(handle)
        self.calls.append(("knn_index_query_self", k, exclude_self))
        if index is None or k < 1:
            return self._fail(INVALID_ARGUMENT, "knn_index_query_self: k is %d" % k)
        pts = index["points"]
        n = pts.shape[0]
        d, i = oracle(pts, pts, k + 1)
        if exclude_self:
            keep = i != np.arange(n)[:, None]
            keep[keep.sum(axis=1) > k, -1] = False   # self beyond the k+1 list: drop the last
            i = i[keep].reshape(n, k)
            d = d[keep].reshape(n, k)
        else:
            i, d = i[:, :k], d[:, :k]
        as_array(indices, (n, k), np.int32)[...] = i
        out = as_array(sq_distances, (n, k), np.float32)
        if out is not None:
            out[...] = d
        return self._ok()

    def knn_index_radius(self, handle, queries, m, radius, max_neighbors, indices, sq_distances,
                         counts, opt):
        index = self._get(handle)
        self.calls.append(("knn_index_radius", m, radius, max_neighbors, address(indices),
                           address(sq_distances), address(counts)))
        if index is None or max_neighbors < 0:
            return self._fail(INVALID_ARGUMENT, "knn_index_radius: bad argument")
        pts = index["points"]
        q = as_array(queries, (m, pts.shape[1]), np.float32)
        d, i = oracle(pts, q if q is not None else np.empty((0, pts.shape[1])), pts.shape[0])
        r2 = np.float32(radius) * np.float32(radius)
        within = d <= r2
        ind = as_array(indices, (m, max_neighbors), np.int32)
        dist = as_array(sq_distances, (m, max_neighbors), np.float32)
        cnt = as_array(counts, (m,), np.int32)
        for row in range(m):
            c = int(within[row].sum())
            if cnt is not None:
                cnt[row] = c
            take = min(c, max_neighbors)
            if ind is not None:
                ind[row] = -1
                ind[row, :take] = i[row, :take]
            if dist is not None:
                dist[row] = np.inf
                dist[row, :take] = d[row, :take]
        return self._ok()

    # quadtree ------------------------------------------------------------------
    def knn_quadtree_build(self, xy, n, opt, out):
        self.calls.append(("knn_quadtree_build", n, address(xy)))
        pts = as_array(xy, (n, 2), np.float32)
        self._new(out, {"xy": (np.empty((0, 2), np.float32) if pts is None else pts.copy())})
        return self._ok()

    def knn_quadtree_free(self, tree):
        self.calls.append(("knn_quadtree_free", address(tree)))
        if tree and self.objects.pop(address(tree), None) is None:
            return self._fail(INVALID_ARGUMENT, "knn_quadtree_free: not a quadtree")
        return self._ok()

    def _members(self, tree, vertices, rings, n_rings, polys, n_polygons):
        xy = self._get(tree)["xy"]
        r = as_array(rings, (n_rings + 1,), np.int64)
        p = as_array(polys, (n_polygons + 1,), np.int64)
        v = as_array(vertices, (int(r[-1]), 2), np.float32)
        result = []
        for poly in range(n_polygons):
            ring_ids = range(p[poly], p[poly + 1])
            members = []
            for idx, (x, y) in enumerate(xy):
                states = [inside(x, y, v[r[ri]:r[ri + 1]]) for ri in ring_ids]
                if states and states[0] and not any(states[1:]):
                    members.append(idx)
            result.append(members)
        return result

    def knn_points_in_polygons_count(self, tree, vertices, rings, n_rings, polys, n_polygons,
                                     counts, opt):
        self.calls.append(("knn_points_in_polygons_count", n_rings, n_polygons))
        members = self._members(tree, vertices, rings, n_rings, polys, n_polygons)
        as_array(counts, (n_polygons,), np.int64)[...] = [len(m) for m in members]
        return self._ok()

    def knn_points_in_polygons(self, tree, vertices, rings, n_rings, polys, n_polygons,
                               out_offsets, point_indices, opt):
        self.calls.append(("knn_points_in_polygons", n_rings, n_polygons))
        members = self._members(tree, vertices, rings, n_rings, polys, n_polygons)
        offs = as_array(out_offsets, (n_polygons + 1,), np.int64)
        want = np.concatenate([[0], np.cumsum([len(m) for m in members])])
        if not np.array_equal(offs, want):
            return self._fail(INVALID_ARGUMENT, "knn_points_in_polygons: out_offsets disagree")
        out = as_array(point_indices, (int(want[-1]),), np.int64)
        for poly, m in enumerate(members):
            out[offs[poly]:offs[poly + 1]] = m
        return self._ok()


class FakeCudaArray:
    """Host memory dressed up with __cuda_array_interface__ (for pointer plumbing only)."""

    def __init__(self, host: np.ndarray, strides: Any = None, readonly: bool = False) -> None:
        self.host = host
        self.__cuda_array_interface__ = {
            "shape": host.shape, "typestr": host.dtype.str, "strides": strides,
            "data": (host.ctypes.data, readonly), "version": 3,
        }
