"""Turning Python arrays into the pointers the C functions take.

Host arrays: a C-contiguous, aligned numpy array of the right dtype is passed
as is (zero copy); anything else goes through ``np.ascontiguousarray`` (one
copy). Outputs the caller passes (``out=``) must already have the exact dtype,
shape and C order, because the library writes into them.

Device arrays: objects that expose ``__cuda_array_interface__`` (CuPy, Numba,
PyTorch CUDA tensors...) are passed as their device pointer, for the functions
whose contract accepts device memory (the index API). The binding checks dtype,
shape and C order from the interface, and does not synchronise streams: the
data must be ready when the call starts.

DLPack: inputs that export ``__dlpack__`` (torch, CuPy, JAX, numpy) are read
in place through their capsule (see :mod:`knn_gpgpu._dlpack`): CUDA tensors
as device arrays (the producer is asked to order its work before the legacy
default stream), host tensors as numpy views. ``__cuda_array_interface__`` is
preferred where an object has both.
"""

from __future__ import annotations

import ctypes
import operator
from typing import Any, Literal, Optional, Sequence, Tuple, Union, overload

import numpy as np

from . import _dlpack
from ._types import INT64_MAX, INT_MAX, INT_MIN, POINT_DTYPE

CAI = "__cuda_array_interface__"


class DeviceArray:
    """A device buffer described by ``__cuda_array_interface__`` (kept alive by ``owner``)."""

    __slots__ = ("owner", "ptr", "shape", "dtype")

    def __init__(self, owner: Any, ptr: int, shape: Tuple[int, ...], dtype: np.dtype) -> None:
        self.owner = owner
        self.ptr = ptr
        self.shape = shape
        self.dtype = dtype

    def as_pointer(self, ctype: Any) -> Any:
        return ctypes.cast(ctypes.c_void_p(self.ptr), ctypes.POINTER(ctype))


Array = Union[np.ndarray, DeviceArray]


def is_device_array(obj: Any) -> bool:
    """True for objects that expose ``__cuda_array_interface__``."""
    return hasattr(obj, CAI) and not isinstance(obj, np.ndarray)


def is_dlpack_device_array(obj: Any) -> bool:
    """True for DLPack tensors in device memory (and no ``__cuda_array_interface__``)."""
    return not is_device_array(obj) and _dlpack.is_device(obj)


has_dlpack = _dlpack.has_dlpack


def dlpack_host_array(obj: Any, name: str = "array") -> np.ndarray:
    """A numpy view of a DLPack host tensor (zero copy)."""
    return _dlpack.host_array(obj, name)


def _check_layout(shape: Tuple[int, ...], strides: Optional[Sequence[int]], got: np.dtype,
                  want: np.dtype, name: str) -> None:
    """Device arrays are used in place: exact dtype and C order (strides in bytes)."""
    if got != want:
        raise ValueError("%s: device array of dtype %s; it must be %s (device arrays are "
                         "passed in place, never converted)" % (name, got, want))
    if strides is not None:
        expected = []
        step = want.itemsize
        for extent in reversed(shape):
            expected.append(step)
            step *= extent
        if tuple(int(s) for s in strides) != tuple(reversed(expected)) and int(np.prod(shape)) > 1:
            raise ValueError("%s: device array must be C-contiguous" % name)


def dlpack_device_array(obj: Any, dtype: Any, name: str) -> DeviceArray:
    """Describe a DLPack device tensor (read only), checking dtype (``None``: its
    own) and C order."""
    tensor = _dlpack.export(obj, name)
    want = tensor.dtype if dtype is None else np.dtype(dtype)
    _check_layout(tensor.shape, tensor.strides, tensor.dtype, want, name)
    return DeviceArray(tensor, tensor.ptr, tensor.shape, want)


def device_array(obj: Any, dtype: Any, name: str, writable: bool = False) -> DeviceArray:
    """Describe a ``__cuda_array_interface__`` object, checking dtype (``None``: its
    own) and C order."""
    cai = getattr(obj, CAI)
    if not isinstance(cai, dict) or "shape" not in cai or "typestr" not in cai:
        raise TypeError("%s: malformed __cuda_array_interface__" % name)
    shape = tuple(int(s) for s in cai["shape"])
    want = np.dtype(cai["typestr"]) if dtype is None else np.dtype(dtype)
    if cai.get("mask") is not None:
        raise ValueError("%s: masked device arrays are not supported" % name)
    _check_layout(shape, cai.get("strides"), np.dtype(cai["typestr"]), want, name)
    data = cai.get("data")
    if not data:
        raise TypeError("%s: __cuda_array_interface__ has no data pointer" % name)
    ptr, readonly = int(data[0]), bool(data[1])
    if writable and readonly:
        raise ValueError("%s: device array is read-only" % name)
    return DeviceArray(obj, ptr, shape, want)


FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)


def host_rows(obj: Any, name: str, dim: Optional[int] = None) -> np.ndarray:
    """A 2-D float32 C-contiguous view of rows of coordinates (zero copy when possible),
    for the float32-only APIs (classic, MPI), which round other dtypes to float32.

    Accepts array-likes of shape (n, dim), and for dim 3 also 1-D arrays of
    :data:`~knn_gpgpu.POINT_DTYPE`.
    """
    if isinstance(obj, np.ndarray) and obj.dtype == POINT_DTYPE:
        obj = np.ascontiguousarray(obj).view(np.float32).reshape(-1, 3)
    return np.ascontiguousarray(_real_2d(obj, name, dim), dtype=np.float32)


def _real_2d(obj: Any, name: str, dim: Optional[int]) -> np.ndarray:
    """A host array-like as a 2-D numpy array of real numbers (not converted)."""
    arr = dlpack_host_array(obj, name) if has_dlpack(obj) else np.asarray(obj)
    if arr.dtype.kind not in "biuf":
        raise TypeError("%s: coordinates must be real numbers, not dtype %s" % (name, arr.dtype))
    if arr.ndim != 2:
        raise ValueError("%s: expected a 2-D array of shape (n, %s), got shape %s"
                         % (name, dim if dim is not None else "dim", arr.shape))
    if dim is not None and arr.shape[1] != dim:
        raise ValueError("%s: expected shape (n, %d), got %s" % (name, dim, arr.shape))
    return arr


def scalar_of(dtype: Any) -> np.dtype:
    """The precision that coordinates of ``dtype`` are computed in: float32 stays
    float32; float64 and every other real dtype (integers, bool, float16) are
    float64. (Wider floats, long double, are refused by :func:`to_scalar`.)"""
    return FLOAT32 if np.dtype(dtype) == FLOAT32 else FLOAT64


#: What each object that holds coordinates was built from, for messages.
_BUILT_FROM = {"index": "points", "mesh": "vertices"}


def to_scalar(arr: np.ndarray, scalar: np.dtype, name: str, holder: str = "index") -> np.ndarray:
    """``arr`` as a C-contiguous array of ``scalar`` (float32 or float64), never rounded.

    Widening (anything to float64) is what :func:`scalar_of` defines. Narrowing
    to float32 happens only when every value is a float32 already (so nothing is
    lost); otherwise ``TypeError`` names the first value that would round.
    ``holder`` names the object the rows are for ("index", "mesh") in messages.
    """
    if arr.dtype.kind == "f" and arr.dtype.itemsize > FLOAT64.itemsize:
        raise TypeError("%s: dtype %s is wider than float64, the library's widest; convert "
                        "it to numpy.float64 deliberately" % (name, arr.dtype))
    if arr.dtype == scalar or scalar == FLOAT64:
        return np.ascontiguousarray(arr, dtype=scalar)
    with np.errstate(over="ignore", invalid="ignore"):
        narrow = np.ascontiguousarray(arr, dtype=FLOAT32)
        wide = arr.astype(FLOAT64, copy=False)
        lost = ~((narrow == wide) | (np.isnan(narrow) & np.isnan(wide)))
    if lost.any():
        where = tuple(int(i) for i in np.argwhere(lost)[0])
        source = _BUILT_FROM.get(holder, "points")
        raise TypeError(
            "%s: %s value %r at %s is not a float32, and this %s holds float32 (it was "
            "built from float32 %s); knn_gpgpu rounds nothing silently: build the %s "
            "from float64 %s to compute in float64, or pass %s.astype(numpy.float32) to "
            "round deliberately" % (name, arr.dtype, arr[where].item(), list(where), holder,
                                    source, holder, source, name))
    return narrow


def coords(obj: Any, name: str, dim: Optional[int] = None,
           scalar: Optional[np.dtype] = None, holder: str = "index") -> np.ndarray:
    """Host rows of coordinates in float32 or float64, C-contiguous (zero copy when
    possible). ``scalar`` None: the data picks (:func:`scalar_of`); else the
    rows take ``scalar`` (:func:`to_scalar`: exact, or ``TypeError``)."""
    arr = _real_2d(obj, name, dim)
    return to_scalar(arr, scalar_of(arr.dtype) if scalar is None else scalar, name, holder)


def rows(obj: Any, name: str, dim: Optional[int] = None,
         scalar: Optional[np.dtype] = None, holder: str = "index") -> Array:
    """Host rows (see :func:`coords`) or a checked device array of shape (n, dim)
    (``__cuda_array_interface__`` or DLPack). Device arrays are used in place:
    float32 or float64, and exactly ``scalar`` when it is given."""
    if isinstance(obj, DeviceArray) or is_device_array(obj) or is_dlpack_device_array(obj):
        if isinstance(obj, DeviceArray):  # described already (by the binding itself)
            dev = obj
        else:
            dev = device_array(obj, None, name) if is_device_array(obj) else \
                dlpack_device_array(obj, None, name)
        if dev.dtype not in (FLOAT32, FLOAT64):
            raise ValueError("%s: device array of dtype %s; it must be float32 or float64 "
                             "(device arrays are passed in place, never converted)"
                             % (name, dev.dtype))
        if scalar is not None and dev.dtype != scalar:
            raise ValueError("%s: device array of dtype %s, and this %s holds %s (device "
                             "arrays are passed in place, never converted)"
                             % (name, dev.dtype, holder, scalar))
        if len(dev.shape) != 2:
            raise ValueError("%s: expected a 2-D device array, got shape %s" % (name, dev.shape))
        if dim is not None and dev.shape[1] != dim:
            raise ValueError("%s: expected shape (n, %d), got %s" % (name, dim, dev.shape))
        return dev
    if isinstance(obj, np.ndarray) and obj.dtype == POINT_DTYPE:
        obj = np.ascontiguousarray(obj).view(np.float32).reshape(-1, 3)
    return coords(obj, name, dim, scalar, holder)


@overload
def output(out: Any, shape: Tuple[int, ...], dtype: Any, name: str,
           allow_device: Literal[False] = False) -> np.ndarray: ...


@overload
def output(out: Any, shape: Tuple[int, ...], dtype: Any, name: str,
           allow_device: bool) -> Array: ...


def output(out: Any, shape: Tuple[int, ...], dtype: Any, name: str,
           allow_device: bool = False) -> Array:
    """Allocate an output array, or check the caller's ``out`` (exact dtype, shape, C order)."""
    if out is None:
        return np.empty(shape, dtype=dtype)
    if allow_device and is_device_array(out):
        dev = device_array(out, dtype, name, writable=True)
        if dev.shape != tuple(shape):
            raise ValueError("%s: expected shape %s, got %s" % (name, tuple(shape), dev.shape))
        return dev
    if not isinstance(out, np.ndarray):
        raise TypeError("%s: must be a numpy array%s" % (
            name, " or a __cuda_array_interface__ object" if allow_device else ""))
    if out.dtype != np.dtype(dtype):
        raise ValueError("%s: dtype must be %s, got %s" % (name, np.dtype(dtype), out.dtype))
    if out.shape != tuple(shape):
        raise ValueError("%s: expected shape %s, got %s" % (name, tuple(shape), out.shape))
    if not (out.flags.c_contiguous and out.flags.aligned and out.flags.writeable):
        raise ValueError("%s: must be C-contiguous, aligned and writeable" % name)
    return out


def offsets(obj: Any, name: str) -> np.ndarray:
    """A 1-D int64 C-contiguous array of offsets with at least one entry."""
    arr = np.asarray(obj)
    if arr.dtype.kind not in "iu":
        raise TypeError("%s: offsets must be integers, not dtype %s" % (name, arr.dtype))
    if arr.ndim != 1 or arr.shape[0] < 1:
        raise ValueError("%s: expected a 1-D array of at least one offset, got shape %s"
                         % (name, arr.shape))
    return np.ascontiguousarray(arr, dtype=np.int64)


def pointer(arr: Optional[Array], ctype: Any) -> Any:
    """A ``POINTER(ctype)`` to the array's first element (NULL for ``None``)."""
    if arr is None:
        return None
    if isinstance(arr, DeviceArray):
        return arr.as_pointer(ctype)
    return arr.ctypes.data_as(ctypes.POINTER(ctype))


def c_int(value: Any, name: str, call: Optional[str] = None) -> int:
    """An integer that fits a C ``int``, else ``OverflowError``: the classic
    API's counts, or (``call`` given) an int argument of that index call."""
    v = operator.index(value)
    if not INT_MIN <= v <= INT_MAX:
        if call is not None:
            raise OverflowError("%s = %d does not fit a C int (%s takes %s as an int, at most %d)"
                                % (name, v, call, name, INT_MAX))
        raise OverflowError("%s = %d does not fit a C int (the classic API counts in int; "
                            "use the index API for larger inputs)" % (name, v))
    return v


def c_int64(value: Any, name: str) -> int:
    v = operator.index(value)
    if not -INT64_MAX - 1 <= v <= INT64_MAX:
        raise OverflowError("%s = %d does not fit int64" % (name, v))
    return v


def nonneg_shape(*dims: int) -> Tuple[int, ...]:
    """Shape for an output allocation; negative sizes (which the library refuses) become 0."""
    return tuple(max(0, d) for d in dims)
