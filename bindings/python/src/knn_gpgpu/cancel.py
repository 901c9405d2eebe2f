"""Cancelling long calls (``knn_set_cancel_flag``).

::

    flag = knn_gpgpu.CancelFlag()
    with flag:                      # registered for the calling thread
        ...                         # long calls on this thread; another thread
                                    # may call flag.cancel() meanwhile
    # a cancelled call raises CancelledError; flag.reset() before reusing it

The flag is a C ``int`` owned by the :class:`CancelFlag` object; the library
polls it between chunks of work of the calls the registering thread makes
(point-in-polygon today, and the other long calls as their engines check it).
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional

from ._library import check, native

__all__ = ["CancelFlag", "set_cancel_flag"]


class CancelFlag:
    """A cancellation flag for :func:`set_cancel_flag`.

    Keep the object alive while it is registered (the ``with`` block does).
    ``cancel()`` may be called from any thread.
    """

    def __init__(self) -> None:
        self._value = ctypes.c_int(0)

    def cancel(self) -> None:
        """Set the flag: calls that poll it stop with ``CancelledError``."""
        self._value.value = 1

    def reset(self) -> None:
        """Clear the flag (do this before the next call)."""
        self._value.value = 0

    @property
    def cancelled(self) -> bool:
        return self._value.value != 0

    def __enter__(self) -> "CancelFlag":
        set_cancel_flag(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        set_cancel_flag(None)


def set_cancel_flag(flag: Optional[CancelFlag]) -> None:
    """Register ``flag`` for the calling thread (``None`` unregisters)."""
    if flag is not None and not isinstance(flag, CancelFlag):
        raise TypeError("flag must be a knn_gpgpu.CancelFlag or None, not %s"
                        % type(flag).__name__)
    pointer = None if flag is None else ctypes.pointer(flag._value)
    check(native().knn_set_cancel_flag(pointer), "knn_set_cancel_flag")
