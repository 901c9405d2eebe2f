"""``knn_options`` as a ctypes structure filled by ``knn_options_init``."""

from __future__ import annotations

import ctypes
from typing import Any, Optional, Union

from ._library import native
from ._types import INT_MAX, INT_MIN, Backend, IndexStructure, OptionsStruct

# knn_options_init writes sizeof(knn_options) of the *loaded* library, which a
# newer library may have grown. Initialising into a scratch buffer this large
# and copying our prefix keeps a newer library from writing past our struct.
_SCRATCH_BYTES = 1024


_SIZE_MAX = 2 ** (8 * ctypes.sizeof(ctypes.c_size_t)) - 1
_SIZE_FIELDS = frozenset({"struct_size", "device_memory_limit"})
_INT_FIELDS = frozenset({"backend", "device", "structure", "leaf_size", "threads"})


def _field_value(name: str, value: Any) -> int:
    """``value`` as field ``name`` holds it, refused where ctypes would wrap it
    (``leaf_size = 2**32 + 1`` stored as 1, ``device_memory_limit = -1`` as SIZE_MAX)."""
    v = int(value)
    if name in _SIZE_FIELDS:
        if v < 0:
            raise ValueError("%s = %d: must be >= 0 (a size_t)" % (name, v))
        if v > _SIZE_MAX:
            raise OverflowError("%s = %d does not fit a size_t (at most %d)" % (name, v, _SIZE_MAX))
    elif not INT_MIN <= v <= INT_MAX:
        raise OverflowError("%s = %d does not fit a C int (%d .. %d)" % (name, v, INT_MIN, INT_MAX))
    return v


def _enum(value: Union[int, str], kind: Any, name: str) -> int:
    if isinstance(value, str):
        try:
            return int(kind[value.upper()])
        except KeyError:
            raise ValueError("%s: unknown value %r; one of %s"
                             % (name, value, ", ".join(m.name.lower() for m in kind))) from None
    return int(value)


class Options(OptionsStruct):
    """Options of the index and quadtree API (``knn_options``).

    ``Options()`` holds the library's defaults (``knn_options_init``), with
    ``struct_size`` set by the library; keyword arguments then override fields::

        opt = Options(backend="openmp", threads=4)
        opt = Options(backend=Backend.CUDA, device_memory_limit=256 << 20)

    Fields: ``backend`` (:class:`Backend` or "auto"/"cuda"/"openmp"),
    ``device`` (-1 = current), ``structure`` (:class:`IndexStructure` or
    "auto"/"kdtree"/"grid"/"brute_force"), ``leaf_size`` (0 = default),
    ``threads`` (0 = all cores), ``device_memory_limit`` (bytes per device;
    0 = KNN_DEVICE_MEMORY_LIMIT, else the free memory less a margin).
    ``struct_size`` is never larger than this binding's structure, so a newer
    library reads only the fields the binding knows (and defaults the rest).
    Every field is range-checked when it is set (here, by attribute or by
    :func:`resolve`): a value its C type cannot hold raises ``OverflowError``
    (``ValueError`` for a negative size), naming the field, instead of
    reaching the library wrapped to another number.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SIZE_FIELDS or name in _INT_FIELDS:
            value = _field_value(name, value)
        super().__setattr__(name, value)

    def __init__(self, *, backend: Optional[Union[int, str]] = None,
                 device: Optional[int] = None,
                 structure: Optional[Union[int, str]] = None,
                 leaf_size: Optional[int] = None, threads: Optional[int] = None,
                 device_memory_limit: Optional[int] = None) -> None:
        super().__init__()
        scratch = (ctypes.c_char * _SCRATCH_BYTES)()
        native().knn_options_init(ctypes.cast(scratch, ctypes.POINTER(OptionsStruct)))
        ctypes.memmove(ctypes.addressof(self), scratch, ctypes.sizeof(OptionsStruct))
        ours = ctypes.sizeof(OptionsStruct)
        if self.struct_size == 0 or self.struct_size > ours:
            self.struct_size = ours
        if backend is not None:
            self.backend = _enum(backend, Backend, "backend")
        if device is not None:
            self.device = int(device)
        if structure is not None:
            self.structure = _enum(structure, IndexStructure, "structure")
        if leaf_size is not None:
            self.leaf_size = int(leaf_size)
        if threads is not None:
            self.threads = int(threads)
        if device_memory_limit is not None:
            self.device_memory_limit = int(device_memory_limit)

    def __repr__(self) -> str:
        def name(kind: Any, v: int) -> str:
            try:
                return str(kind(v).name.lower())
            except ValueError:
                return str(v)
        return ("Options(struct_size=%d, backend=%s, device=%d, structure=%s, leaf_size=%d, "
                "threads=%d, device_memory_limit=%d)"
                % (self.struct_size, name(Backend, self.backend), self.device,
                   name(IndexStructure, self.structure), self.leaf_size, self.threads,
                   self.device_memory_limit))


def resolve(options: Optional[Options], **overrides: Any) -> Optional[Options]:
    """The options to pass: ``None`` (library defaults) when nothing is given,
    else a copy of ``options`` (or the defaults) with the keyword overrides applied."""
    fields = {field[0] for field in OptionsStruct._fields_} - {"struct_size"}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise TypeError("unknown option field(s): %s; known: %s"
                        % (", ".join(unknown), ", ".join(sorted(fields))))
    given = {k: v for k, v in overrides.items() if v is not None}
    if options is None and not given:
        return None
    if options is not None and not isinstance(options, OptionsStruct):
        raise TypeError("options must be a knn_gpgpu.Options, not %s" % type(options).__name__)
    result = Options()
    if options is not None:
        ctypes.memmove(ctypes.addressof(result), ctypes.addressof(options),
                       ctypes.sizeof(OptionsStruct))
    for key, value in given.items():
        if key == "backend":
            value = _enum(value, Backend, "backend")
        elif key == "structure":
            value = _enum(value, IndexStructure, "structure")
        setattr(result, key, int(value))
    return result


def byref(options: Optional[OptionsStruct]) -> Any:
    """``byref(options)``, or NULL for ``None``."""
    return None if options is None else ctypes.byref(options)
