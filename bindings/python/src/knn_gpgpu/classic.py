"""The classic 3-D API: kd-tree build and all-kNN query, memory helpers,
device selection, and brute force in any dimension.

Points are ``(n, 3)`` float arrays (or 1-D arrays of :data:`POINT_DTYPE`); a
tree is a 1-D array of :data:`NODE_DTYPE` that the host may save
(``tree.tofile``) and load (``np.fromfile(path, dtype=NODE_DTYPE)``).
C-contiguous float32 inputs are passed without a copy. Counts are C ``int``:
more than 2**31 - 1 points raise ``OverflowError`` (use the index API).
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional, Tuple

import numpy as np

from . import _arrays
from ._library import check, native
from ._types import NODE_DTYPE, Node, Point

__all__ = [
    "build_kdtree", "cu_build_kdtree", "mp_build_kdtree",
    "query_all", "cu_query_all", "mp_query_all",
    "tree_size", "needed_bytes_for_building_kdtree", "needed_bytes_for_query_all",
    "needed_bytes_in_search", "free_bytes_on_gpu",
    "set_device", "get_device", "get_device_count", "brute_force",
]


def _build(function: str, points: Any, out: Optional[np.ndarray]) -> np.ndarray:
    pts = _arrays.host_rows(points, "points", 3)
    n = _arrays.c_int(pts.shape[0], "n")
    tree = _arrays.output(out, (n,), NODE_DTYPE, "out")
    status = getattr(native(), function)(_arrays.pointer(pts, Point), n,
                                         _arrays.pointer(tree, Node))
    check(status, function)
    return tree


def build_kdtree(points: Any, *, out: Optional[np.ndarray] = None) -> np.ndarray:
    """Build the kd-tree of ``points`` (``buildKdTree``: GPU when usable, else CPU).

    Args:
        points: ``(n, 3)`` coordinates or a 1-D :data:`POINT_DTYPE` array.
        out: optional ``(n,)`` :data:`NODE_DTYPE` array to build into.

    Returns:
        The tree, ``(n,)`` of :data:`NODE_DTYPE`; identical from every backend.

    Raises:
        NonfiniteInputError: a NaN/Inf coordinate (the message names the point).
        ValueError: ``points`` is not of shape ``(n, 3)`` (raised before the call).
    """
    return _build("buildKdTree", points, out)


def cu_build_kdtree(points: Any, *, out: Optional[np.ndarray] = None) -> np.ndarray:
    """:func:`build_kdtree` on the GPU only (``cuBuildKdTree``); ``NoDeviceError`` without one."""
    return _build("cuBuildKdTree", points, out)


def mp_build_kdtree(points: Any, *, out: Optional[np.ndarray] = None) -> np.ndarray:
    """:func:`build_kdtree` on the CPU only (``mpBuildKdTree``, OpenMP, all cores)."""
    return _build("mpBuildKdTree", points, out)


def _tree(tree: Any) -> np.ndarray:
    if not isinstance(tree, np.ndarray) or tree.dtype != NODE_DTYPE:
        raise TypeError("tree must be a numpy array of NODE_DTYPE (what build_kdtree returns; "
                        "np.frombuffer(data, dtype=NODE_DTYPE) for saved bytes)")
    if tree.ndim != 1:
        raise ValueError("tree must be 1-D, got shape %s" % (tree.shape,))
    return np.ascontiguousarray(tree)


def _query(function: str, queries: Any, tree: Any, k: int, out: Optional[np.ndarray]) -> np.ndarray:
    q = _arrays.host_rows(queries, "queries", 3)
    t = _tree(tree)
    n_qp = _arrays.c_int(q.shape[0], "n_qp")
    n_tree = _arrays.c_int(t.shape[0], "n_tree")
    k = _arrays.c_int(k, "k")
    result = _arrays.output(out, _arrays.nonneg_shape(n_qp, k), np.intc, "out")
    status = getattr(native(), function)(_arrays.pointer(q, Point), _arrays.pointer(t, Node),
                                         n_qp, n_tree, k, _arrays.pointer(result, ctypes.c_int))
    check(status, function)
    return result


def query_all(queries: Any, tree: Any, k: int, *, out: Optional[np.ndarray] = None) -> np.ndarray:
    """The ``k`` nearest tree points of every query (``queryAll``: GPU and/or CPU).

    Args:
        queries: ``(m, 3)`` coordinates or a 1-D :data:`POINT_DTYPE` array.
        tree: a tree from :func:`build_kdtree` (the queries check its layout).
        k: neighbours per query (>= 1; the library refuses 0 with InvalidArgumentError).
        out: optional ``(m, k)`` C int array to write into.

    Returns:
        ``(m, k)`` int32 original point indices, nearest first, ties by index;
        -1 where the tree has fewer than ``k`` points.

    Raises:
        InvalidArgumentError, NonfiniteInputError, InvalidTreeError; ValueError/TypeError
        for wrong shapes or dtypes (before the call).
    """
    return _query("queryAll", queries, tree, k, out)


def cu_query_all(queries: Any, tree: Any, k: int, *, out: Optional[np.ndarray] = None) -> np.ndarray:
    """:func:`query_all` on the GPU only (``cuQueryAll``); ``NoDeviceError`` without one,
    ``DeviceOutOfMemoryError`` when the whole call does not fit."""
    return _query("cuQueryAll", queries, tree, k, out)


def mp_query_all(queries: Any, tree: Any, k: int, *, out: Optional[np.ndarray] = None) -> np.ndarray:
    """:func:`query_all` on the CPU only (``mpQueryAll``)."""
    return _query("mpQueryAll", queries, tree, k, out)


def tree_size(n_tree: int) -> int:
    """Bytes of the Node array of an ``n_tree``-node tree (``getTreeSize``; 0 if negative)."""
    return int(native().getTreeSize(_arrays.c_int(n_tree, "n_tree")))


def needed_bytes_for_building_kdtree(n_tree: int) -> int:
    """Device bytes ``cuBuildKdTree`` needs for ``n_tree`` points (no device needed)."""
    return int(native().getNeededBytesForBuildingKdTree(_arrays.c_int(n_tree, "n_tree")))


def needed_bytes_for_query_all(n_qp: int, k: int, n_tree: int) -> int:
    """Device bytes ``cuQueryAll`` needs to run the whole call at once."""
    return int(native().getNeededBytesForQueryAll(_arrays.c_int(n_qp, "n_qp"),
                                                  _arrays.c_int(k, "k"),
                                                  _arrays.c_int(n_tree, "n_tree")))


def needed_bytes_in_search(n_qp: int, k: int, n_tree: int, thread_num: int = 0,
                           block_num: int = 0) -> int:
    """Device bytes of the search kernels' own storage (``getNeededBytesInSearch``);
    0 for ``thread_num``/``block_num`` lets the library choose the launch shape."""
    return int(native().getNeededBytesInSearch(
        _arrays.c_int(n_qp, "n_qp"), _arrays.c_int(k, "k"), _arrays.c_int(n_tree, "n_tree"),
        _arrays.c_int(thread_num, "thread_num"), _arrays.c_int(block_num, "block_num")))


def free_bytes_on_gpu() -> int:
    """Free bytes on the calling thread's current device, counting the device
    memory the library keeps idle for its next call; 0 when there is none."""
    return int(native().getFreeBytesOnGpu())


def set_device(device: int) -> None:
    """Select the calling thread's CUDA device (``cuSetDevice``).

    Raises:
        NoDeviceError: no usable device (or a library built without CUDA).
        InvalidArgumentError: ``device`` out of range.
    """
    check(native().cuSetDevice(_arrays.c_int(device, "device")), "cuSetDevice")


def get_device() -> int:
    """The calling thread's current device; -1 when there is none."""
    return int(native().cuGetDevice())


def get_device_count() -> int:
    """Number of usable CUDA devices; 0 when none (not an error)."""
    return int(native().cuGetDeviceCount())


def brute_force(ref: Any, queries: Any, k: int, *, distances: bool = True,
                indices: bool = True) -> Tuple[Optional[np.ndarray], Optional[np.ndarray]]:
    """Exact kNN by brute force in any dimension, on the CPU (``knn_brute_force``).

    Args:
        ref: ``(n_ref, dim)`` reference points.
        queries: ``(n_query, dim)`` queries (same ``dim``).
        k: neighbours per query (>= 1).
        distances, indices: which outputs to compute (the other is passed as NULL).

    Returns:
        ``(sq_dist, ind)``: ``(n_query, k)`` float32 squared distances and int32
        indices (``None`` for an output not asked for); missing slots hold
        +inf / -1 when ``n_ref < k``.
    """
    r = _arrays.host_rows(ref, "ref")
    dim = r.shape[1]
    q = _arrays.host_rows(queries, "queries", dim)
    n_ref = _arrays.c_int(r.shape[0], "n_ref")
    n_query = _arrays.c_int(q.shape[0], "n_query")
    dim = _arrays.c_int(dim, "dim")
    k = _arrays.c_int(k, "k")
    shape = _arrays.nonneg_shape(n_query, k)
    dist = np.empty(shape, dtype=np.float32) if distances else None
    ind = np.empty(shape, dtype=np.intc) if indices else None
    status = native().knn_brute_force(
        _arrays.pointer(r, ctypes.c_float), n_ref, _arrays.pointer(q, ctypes.c_float), n_query,
        dim, k, _arrays.pointer(dist, ctypes.c_float), _arrays.pointer(ind, ctypes.c_int))
    check(status, "knn_brute_force")
    return dist, ind
