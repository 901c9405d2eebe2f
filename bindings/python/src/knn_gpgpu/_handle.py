"""Ownership of one object the library allocated (``knn_index*``, ``knn_quadtree*``)."""

from __future__ import annotations

import threading
from typing import Any, Optional, TypeVar

from ._library import check, native

_Self = TypeVar("_Self", bound="NativeHandle")


class NativeHandle:
    """Frees its library object exactly once: by :meth:`close`, at the end of a
    ``with`` block, or when garbage-collected. Subclasses name the library's
    free function and what the object is called in messages."""

    _free_function = ""
    _what = ""

    def _own(self, handle: Optional[Any]) -> None:
        self._handle = handle
        self._lock = threading.Lock()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._handle is None

    def close(self) -> None:
        """Free the object; calling it again does nothing. Do not close it while
        other threads still use it."""
        with self._lock:
            handle, self._handle = self._handle, None
        if handle:
            check(getattr(native(), self._free_function)(handle), self._free_function)

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def _live(self) -> Any:
        handle = getattr(self, "_handle", None)
        if not handle:
            raise ValueError("the %s is closed" % self._what)
        return handle
