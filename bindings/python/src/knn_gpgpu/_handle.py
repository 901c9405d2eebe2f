"""Ownership of one object a library allocated (``knn_index*``, ``knn_quadtree*``,
``knn_dindex*``)."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Dict, Iterator, Optional, TypeVar

from ._library import check, native

_Self = TypeVar("_Self", bound="NativeHandle")


class NativeHandle:
    """Frees its library object exactly once: by :meth:`close`, at the end of a
    ``with`` block, or when garbage-collected. Subclasses name the library's
    free function and what the object is called in messages, and override
    :meth:`_native_library` / :meth:`_check_status` for another library than
    libknn_gpgpu.

    Every method that calls the library on the object holds it for the whole
    method (:meth:`_use`), from before it reads the handle until the library
    call has returned. :meth:`close` while other threads are inside such
    methods closes the object at once (methods called afterwards raise
    ``ValueError``), lets the running ones finish with their full results,
    and frees the library object when the last of them returns, as the
    library itself does for its own calls. Holding the handle in Python too
    closes the gap between reading the handle and entering the library: a
    handle freed in that gap could be reused by another object's build, and
    the call would then run on that object with this one's array sizes."""

    _free_function = ""
    _what = ""

    def _own(self, handle: Optional[Any]) -> None:
        self._handle = handle
        self._lock = threading.Lock()
        self._calls = 0                      # methods inside _use
        self._freed_by_last_call: Optional[Any] = None

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._handle is None

    def close(self) -> None:
        """Free the object; calling it again does nothing. Safe while other
        threads use it: their calls finish, and the object is freed when the
        last of them returns."""
        with self._lock:
            handle, self._handle = self._handle, None
            if handle and self._calls:
                self._freed_by_last_call = handle
                return
        if handle:
            self._check_status(getattr(self._native_library(), self._free_function)(handle),
                               self._free_function)

    def __enter__(self: _Self) -> _Self:
        return self

    # The object is immutable but for close(), so a copy is the object itself,
    # as for a tuple: one handle, one count of calls in flight, one free. A
    # field-by-field copy would share the handle but not the count, and each
    # copy would free it.
    def __copy__(self: _Self) -> _Self:
        return self

    def __deepcopy__(self: _Self, memo: Dict[int, Any]) -> _Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        # Never during a method: a running method holds a reference to self.
        try:
            self.close()
        except Exception:
            pass

    @contextmanager
    def _use(self) -> Iterator[Any]:
        """The live handle, held until the block ends; ``ValueError`` when closed."""
        handle = self._acquire()
        try:
            yield handle
        finally:
            self._release()

    def _acquire(self) -> Any:
        """:meth:`_use`'s entry, for fast paths that pair it with :meth:`_release`
        in a ``try``/``finally`` themselves (a generator costs microseconds)."""
        with self._lock:
            handle = self._handle
            if not handle:
                raise ValueError("the %s is closed" % self._what)
            self._calls += 1
        return handle

    def _release(self) -> None:
        with self._lock:
            self._calls -= 1
            doomed = self._freed_by_last_call if self._calls == 0 else None
            if doomed:
                self._freed_by_last_call = None
        if doomed:
            # The library frees a live handle without fail; the status has
            # no caller to go to (close() returned long ago).
            getattr(self._native_library(), self._free_function)(doomed)

    def _native_library(self) -> Any:
        """The library holding :attr:`_free_function`."""
        return native()

    def _check_status(self, status: int, function: str) -> None:
        """Raise the error of ``function``'s non-zero ``status``."""
        check(status, function)
