"""Status codes of libknn_gpgpu and the exceptions that carry them.

Every library function that fails returns a status; the binding turns it into
an instance of a :class:`KnnError` subclass that carries

* ``status``: the :class:`Status` (an ``int``; its ``name`` is e.g.
  ``"NONFINITE_INPUT"``),
* ``status_name``: that name as a string,
* ``message``: the library's ``knn_last_error()`` text, which says what and
  where (``"buildKdTree: point 3 has a NaN coordinate (dimension 1)"``),
* ``function``: the C function that failed.

Some subclasses also derive from the builtin exception that fits
(``InvalidArgumentError`` is a ``ValueError``, the out-of-memory errors are
``MemoryError``), so generic handlers keep working. Mistakes that the binding
catches before calling the library (wrong shapes, wrong dtypes of outputs)
raise plain ``ValueError``/``TypeError``, never a ``KnnError``.
"""

from __future__ import annotations

import enum
from typing import Any, Dict, Optional, Tuple, Type, Union


class Status(enum.IntEnum):
    """The library's status codes (``enum knn_status``); values never change."""

    OK = 0
    INVALID_ARGUMENT = 1
    NONFINITE_INPUT = 2
    HOST_OUT_OF_MEMORY = 3
    DEVICE_OUT_OF_MEMORY = 4
    NO_DEVICE = 5
    DEVICE = 6
    INVALID_TREE = 7
    UNSUPPORTED = 8
    CANCELLED = 9
    INTERNAL = 10


def status_name(status: int) -> str:
    """Name of a status without the ``KNN_ERR_`` prefix (``"UNKNOWN(42)"`` for unknown codes)."""
    try:
        return Status(status).name
    except ValueError:
        return "UNKNOWN(%d)" % status


class KnnError(Exception):
    """A libknn_gpgpu call returned an error status.

    Attributes:
        status: the status code (a :class:`Status` when the code is known).
        status_name: the status name without the ``KNN_ERR_`` prefix.
        message: ``knn_last_error()`` of the failed call (may be empty).
        function: the C function that failed, when known.
    """

    status: Union[Status, int]
    status_name: str
    message: str
    function: Optional[str]

    def __init__(self, status: int, message: str = "", function: Optional[str] = None) -> None:
        try:
            self.status = Status(status)
        except ValueError:
            self.status = int(status)
        self.status_name = status_name(status)
        self.message = message
        self.function = function
        super().__init__(status, message, function)

    def __str__(self) -> str:
        text = "KNN_ERR_%s" % self.status_name if self.status != Status.OK else "KNN_OK"
        if self.message:
            text += ": " + self.message
        elif self.function:
            text += " (from %s)" % self.function
        return text

    def __reduce__(self) -> Tuple[Any, Tuple[int, str, Optional[str]]]:  # keeps subclasses picklable (multiprocessing)
        return (self.__class__, (int(self.status), self.message, self.function))


class InvalidArgumentError(KnnError, ValueError):
    """KNN_ERR_INVALID_ARGUMENT: a NULL pointer, a bad count, k, dimension or offsets."""


class NonfiniteInputError(KnnError, ValueError):
    """KNN_ERR_NONFINITE_INPUT: a NaN or infinite coordinate; the message names the index."""


class HostOutOfMemoryError(KnnError, MemoryError):
    """KNN_ERR_HOST_OUT_OF_MEMORY: a host allocation failed."""


class DeviceOutOfMemoryError(KnnError, MemoryError):
    """KNN_ERR_DEVICE_OUT_OF_MEMORY: a device allocation failed."""


class NoDeviceError(KnnError):
    """KNN_ERR_NO_DEVICE: no usable GPU, or the library was built without CUDA."""


class DeviceError(KnnError):
    """KNN_ERR_DEVICE: a CUDA call or kernel failed."""


class InvalidTreeError(KnnError, ValueError):
    """KNN_ERR_INVALID_TREE: a Node array that is not a valid kd-tree."""


class UnsupportedError(KnnError):
    """KNN_ERR_UNSUPPORTED: a valid request that this build of the library cannot serve."""


class CancelledError(KnnError):
    """KNN_ERR_CANCELLED: the caller cancelled a long call."""


class InternalError(KnnError):
    """KNN_ERR_INTERNAL: a bug in the library; please report the message."""


class LibraryNotFoundError(OSError):
    """The shared library could not be found or loaded, or it does not match this binding."""


_CLASSES: Dict[int, Type[KnnError]] = {
    Status.INVALID_ARGUMENT: InvalidArgumentError,
    Status.NONFINITE_INPUT: NonfiniteInputError,
    Status.HOST_OUT_OF_MEMORY: HostOutOfMemoryError,
    Status.DEVICE_OUT_OF_MEMORY: DeviceOutOfMemoryError,
    Status.NO_DEVICE: NoDeviceError,
    Status.DEVICE: DeviceError,
    Status.INVALID_TREE: InvalidTreeError,
    Status.UNSUPPORTED: UnsupportedError,
    Status.CANCELLED: CancelledError,
    Status.INTERNAL: InternalError,
}


def error_class(status: int) -> Type[KnnError]:
    """The :class:`KnnError` subclass raised for ``status`` (``KnnError`` for unknown codes)."""
    return _CLASSES.get(int(status), KnnError)


def make_error(status: int, message: str = "", function: Optional[str] = None) -> KnnError:
    """Build (do not raise) the exception for a failed call."""
    return error_class(status)(status, message, function)
