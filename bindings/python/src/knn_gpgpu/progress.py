"""Progress of long calls (``knn_set_progress``).

::

    progress = knn_gpgpu.Progress()
    with progress:                  # registered for the calling thread
        ...                         # long calls on this thread; another thread
                                    # reads progress.done / progress.total meanwhile

The record is a C ``knn_progress`` owned by the :class:`Progress` object; the
library updates it per chunk of work of the calls the registering thread
makes. Within a stage ``done`` never decreases and ends at ``total``; a stage
begins at 0, or, when a GPU call's CPU fallback begins it again, at what the
stage had done before that call. ``sequence`` counts the stages begun (one
call may run several).
"""

from __future__ import annotations

import ctypes
from typing import Any, NamedTuple, Optional, Union

from ._library import check, native
from ._types import ProgressStage, ProgressStruct

__all__ = ["Progress", "ProgressSnapshot", "set_progress"]


class ProgressSnapshot(NamedTuple):
    """One reading of the record (``done <= total``)."""

    sequence: int
    stage: Union[ProgressStage, int]
    total: int
    done: int

    @property
    def fraction(self) -> float:
        """``done / total``, 0.0 while nothing has started."""
        return self.done / self.total if self.total > 0 else 0.0


class Progress:
    """A progress record for :func:`set_progress`; read it from any thread.

    Keep the object alive while it is registered (the ``with`` block does).
    """

    def __init__(self) -> None:
        self._record = ProgressStruct()

    def snapshot(self) -> ProgressSnapshot:
        """Sequence, stage, total, done, read in the order the header documents."""
        r = self._record
        sequence, stage, total, done = r.sequence, r.stage, r.total, r.done
        try:
            stage = ProgressStage(stage)
        except ValueError:
            pass
        return ProgressSnapshot(sequence, stage, total, done)

    @property
    def done(self) -> int:
        return int(self._record.done)

    @property
    def total(self) -> int:
        return int(self._record.total)

    def __enter__(self) -> "Progress":
        set_progress(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        set_progress(None)


def set_progress(progress: Optional[Progress]) -> None:
    """Register ``progress`` for the calling thread (``None`` unregisters); zeroes it."""
    if progress is not None and not isinstance(progress, Progress):
        raise TypeError("progress must be a knn_gpgpu.Progress or None, not %s"
                        % type(progress).__name__)
    pointer = None if progress is None else ctypes.pointer(progress._record)
    check(native().knn_set_progress(pointer), "knn_set_progress")
