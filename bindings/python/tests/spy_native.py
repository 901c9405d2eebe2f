"""A recording wrapper around the real library, for marshalling tests.

SpyNative forwards every call to the loaded library unchanged and records the
index and quadtree calls with the addresses of the pointers the binding
passed, so tests can check zero-copy passing, NULL outputs and options while
the real engines compute the answers. ``device_count`` optionally overrides
``cuGetDeviceCount`` so that host memory dressed up as a CUDA array
(FakeCudaArray) gets past the binding's "no device" guard: a library without
a usable device treats every pointer as host memory, so the real engine then
reads and writes that host memory. ``before[name]``, when set, runs once
just before the next call of ``name`` is recorded and forwarded (to act in
the gap between the binding's reading of a handle and the library call).
Only the test suite uses it.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

RECORDED = ("knn_index_build", "knn_index_free", "knn_index_query", "knn_index_query_self",
            "knn_index_radius", "knn_quadtree_build", "knn_quadtree_free",
            "knn_points_in_polygons_count", "knn_points_in_polygons", "knn_index_build_f64",
            "knn_index_query_f64", "knn_index_query_self_f64", "knn_index_radius_f64",
            "knn_quadtree_build_f64", "knn_points_in_polygons_count_f64",
            "knn_points_in_polygons_f64", "knn_index_radius_count", "knn_index_radius_fill",
            "knn_index_radius_count_f64", "knn_index_radius_fill_f64", "knn_index_radius_pairs",
            "knn_index_count_neighbors", "knn_index_count_neighbors_f64")


def address(arg: Any) -> Any:
    """The address a ctypes pointer argument holds (0 for NULL); the options
    structure for a byref(options); other arguments unchanged."""
    if arg is None:
        return 0
    if type(arg).__name__ == "CArgObject":          # ctypes.byref(...)
        return arg._obj
    if isinstance(arg, (ctypes._Pointer, ctypes.c_void_p)):
        return ctypes.cast(arg, ctypes.c_void_p).value or 0
    return arg


class SpyNative:
    def __init__(self, real: Any, device_count: Optional[int] = None) -> None:
        self._real = real
        self.path = real.path
        self.device_count = device_count
        self.calls: List[Tuple[Any, ...]] = []
        self.before: Dict[str, Callable[[], None]] = {}

    def __getattr__(self, name: str) -> Any:
        return self._recording(name, getattr(self._real, name))

    def untyped(self, name: str) -> Any:
        """The fast paths' variant (pointers as ints), recorded under the same name."""
        return self._recording(name, self._real.untyped(name))

    def _recording(self, name: str, fn: Any) -> Any:
        if name not in RECORDED:
            return fn

        def recorded(*args: Any) -> Any:
            hook = self.before.pop(name, None)
            if hook:
                hook()
            self.calls.append((name,) + tuple(address(a) for a in args))
            return fn(*args)

        return recorded

    def cuGetDeviceCount(self) -> int:
        if self.device_count is None:
            return self._real.cuGetDeviceCount()
        return self.device_count

    def named(self, name: str) -> List[Tuple[Any, ...]]:
        return [c for c in self.calls if c[0] == name]


class FakeCudaArray:
    """Host memory dressed up with __cuda_array_interface__ (for pointer plumbing only)."""

    def __init__(self, host: np.ndarray, strides: Any = None, readonly: bool = False) -> None:
        self.host = host
        self.__cuda_array_interface__ = {
            "shape": host.shape, "typestr": host.dtype.str, "strides": strides,
            "data": (host.ctypes.data, readonly), "version": 3,
        }
