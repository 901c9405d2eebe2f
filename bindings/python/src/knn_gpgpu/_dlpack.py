"""DLPack input: tensors that export ``__dlpack__`` (torch, CuPy, JAX, numpy...).

The binding is a DLPack consumer written with ctypes. It asks the producer for
a capsule (``obj.__dlpack__(stream=...)``), reads the ``DLManagedTensor``
inside, and uses the data in place:

* device tensors (``kDLCUDA``, ``kDLCUDAManaged``) become a
  :class:`~knn_gpgpu._arrays.DeviceArray` whose pointer the library reads;
* host tensors (``kDLCPU``, ``kDLCUDAHost``) become a numpy array over the
  same memory.

Either way nothing is copied, and the capsule is kept alive for as long as
that view: the binding never renames the capsule to ``used_dltensor``, so the
producer's capsule destructor releases the tensor (calls its ``deleter``)
when the view is gone. The unversioned capsule ("dltensor") is asked for,
which every producer exports.

Streams: for CUDA tensors the binding passes ``stream=1`` (the legacy default
stream), so the producer orders its pending work before any work the
library then queues on its own blocking streams.
"""

from __future__ import annotations

import ctypes
from typing import Any, Tuple

import numpy as np

# DLDeviceType values (dlpack.h).
KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_CUDA_MANAGED = 13
DEVICE_TYPES = (KDL_CUDA, KDL_CUDA_MANAGED)
HOST_TYPES = (KDL_CPU, KDL_CUDA_HOST)

# DLDataTypeCode values.
_KDL_INT = 0
_KDL_UINT = 1
_KDL_FLOAT = 2

_LEGACY_STREAM = 1
_CAPSULE_NAME = b"dltensor"


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def has_dlpack(obj: Any) -> bool:
    """True for objects that export DLPack (numpy arrays are taken directly)."""
    return (hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__")
            and not isinstance(obj, np.ndarray))


def device_type(obj: Any, name: str) -> int:
    """The producer's ``__dlpack_device__()[0]`` (a DLDeviceType)."""
    dev = obj.__dlpack_device__()
    try:
        return int(dev[0])
    except (TypeError, IndexError, ValueError):
        raise TypeError("%s: __dlpack_device__() returned %r, not (device_type, device_id)"
                        % (name, dev)) from None


def is_device(obj: Any, name: str = "array") -> bool:
    """True for a DLPack tensor in device memory."""
    return has_dlpack(obj) and device_type(obj, name) in DEVICE_TYPES


class Tensor:
    """One exported tensor: the capsule (kept alive here) and what it describes."""

    __slots__ = ("capsule", "ptr", "shape", "strides", "dtype", "device_type")

    def __init__(self, capsule: Any, ptr: int, shape: Tuple[int, ...],
                 strides: Tuple[int, ...], dtype: np.dtype, device: int) -> None:
        self.capsule = capsule
        self.ptr = ptr
        self.shape = shape
        self.strides = strides  # in bytes, C order filled in when the producer gave none
        self.dtype = dtype
        self.device_type = device


def export(obj: Any, name: str) -> Tensor:
    """Ask ``obj`` for its DLPack capsule and describe the tensor in it."""
    kind = device_type(obj, name)
    if kind not in DEVICE_TYPES + HOST_TYPES:
        raise ValueError("%s: DLPack device type %d is neither host nor CUDA memory"
                         % (name, kind))
    capsule = (obj.__dlpack__(stream=_LEGACY_STREAM) if kind in DEVICE_TYPES
               else obj.__dlpack__())
    if not _capsule_is_valid(capsule, _CAPSULE_NAME):
        raise TypeError("%s: __dlpack__() did not return an unused 'dltensor' capsule" % name)
    managed = _DLManagedTensor.from_address(_capsule_pointer(capsule, _CAPSULE_NAME))
    t = managed.dl_tensor
    ndim = int(t.ndim)
    shape = tuple(int(t.shape[i]) for i in range(ndim))
    dtype = _numpy_dtype(t.dtype, name)
    if t.strides:
        strides = tuple(int(t.strides[i]) * dtype.itemsize for i in range(ndim))
    else:
        strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) * dtype.itemsize
                        for i in range(ndim))
    ptr = int(t.data or 0) + int(t.byte_offset)
    return Tensor(capsule, ptr, shape, strides, dtype, int(t.device.device_type))


def host_array(obj: Any, name: str) -> np.ndarray:
    """A numpy view of a DLPack host tensor (zero copy; it keeps the capsule alive)."""
    t = export(obj, name)
    if t.device_type not in HOST_TYPES:
        raise ValueError("%s: a DLPack device tensor where host memory is needed" % name)
    holder = _Holder(t)
    return np.asarray(holder)


class _Holder:
    """Exposes a host tensor through ``__array_interface__`` and owns its capsule,
    so that numpy's view keeps the tensor alive."""

    def __init__(self, tensor: Tensor) -> None:
        self._tensor = tensor
        self.__array_interface__ = {
            "shape": tensor.shape, "typestr": tensor.dtype.str,
            "data": (tensor.ptr, True),  # read-only: the binding only reads inputs
            "strides": tensor.strides, "version": 3,
        }


def _numpy_dtype(dt: _DLDataType, name: str) -> np.dtype:
    if int(dt.lanes) != 1:
        raise TypeError("%s: vector DLPack dtypes (lanes = %d) are not supported"
                        % (name, dt.lanes))
    kinds = {_KDL_INT: "i", _KDL_UINT: "u", _KDL_FLOAT: "f"}
    code = int(dt.code)
    bits = int(dt.bits)
    if code not in kinds or bits % 8 != 0:
        raise TypeError("%s: DLPack dtype (code %d, %d bits) is not an integer or float type"
                        % (name, code, bits))
    return np.dtype("%s%d" % (kinds[code], bits // 8))
