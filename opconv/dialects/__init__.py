"""The dialects opconv knows, and how a model file is recognised.

Each dialect package registers a :class:`Dialect` here (name, file suffixes,
load/save functions, a content sniffer).  The rest of opconv asks this module
to load a path and never switches on file formats itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ModelReadError, ModelWriteError
from ..ir import Model


@dataclass(frozen=True)
class Dialect:
    name: str
    suffixes: tuple[str, ...]
    load: Callable[..., Model]
    save: Callable[..., None]
    sniff: Callable[[bytes], bool]  # True when a file's first bytes look like this dialect
    prepare: Callable[..., Any] | None = None  # the reference executor: prepare(model, seed=0).run(feeds)


_DIALECTS: dict[str, Dialect] = {}


def register(dialect: Dialect) -> None:
    _DIALECTS[dialect.name] = dialect


def get(name: str) -> Dialect:
    _ensure_loaded()
    try:
        return _DIALECTS[name]
    except KeyError:
        raise ModelReadError(f"unknown dialect {name!r}; known: {', '.join(sorted(_DIALECTS))}") from None


def names() -> list[str]:
    _ensure_loaded()
    return sorted(_DIALECTS)


def detect(path: str) -> Dialect:
    """The dialect of a model file, by suffix, then by content."""
    _ensure_loaded()
    lower = path.lower()
    for d in _DIALECTS.values():
        if lower.endswith(d.suffixes):
            return d
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except FileNotFoundError:
        raise ModelReadError("no such file", where=path) from None
    except OSError as e:
        raise ModelReadError(f"cannot read: {e.strerror}", where=path) from None
    for d in _DIALECTS.values():
        if d.sniff(head):
            return d
    raise ModelReadError("cannot tell the model's dialect from its name or content", where=path)


def read_model_file(path: str) -> bytes:
    """A model file's bytes, or a one-line ModelReadError naming the file."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise ModelReadError("no such file", where=path) from None
    except IsADirectoryError:
        raise ModelReadError("is a directory, not a model file", where=path) from None
    except OSError as e:
        raise ModelReadError(f"cannot read: {e.strerror}", where=path) from None


#: slices below this many bytes are read into memory instead of mapped: every mapping holds a file descriptor
#: until its array is freed, and a model's graph (a cycle of nodes and values) is freed only when the garbage
#: collector runs, so thousands of small mapped constants could exhaust the process's descriptors
MAP_AT_BYTES = 1 << 20


def read_slice(path: str, dtype: Any, offset: int, shape: tuple[int, ...]) -> Any:
    """The read-only array of ``shape`` stored at ``offset`` of ``path``: mapped when large, read when small."""
    import numpy as np

    dtype = np.dtype(dtype)
    count = 1
    for d in shape:
        count *= int(d)
    if count == 0:
        return np.zeros(shape, dtype)
    if count * dtype.itemsize >= MAP_AT_BYTES:
        return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=tuple(shape))
    array = np.fromfile(path, dtype=dtype, count=count, offset=offset).reshape(shape)
    array.flags.writeable = False
    return array


def load_model(path: str | os.PathLike, dialect: str | None = None, **options) -> Model:
    path = os.fspath(path)
    d = get(dialect) if dialect else detect(path)
    return d.load(path, **options)


def save_model(model: Model, path: str | os.PathLike, **options) -> None:
    d = get(model.dialect)
    path = os.fspath(path)
    if not path.lower().endswith(d.suffixes) and not _is_stream(path):
        from ..api import DIALECT_NAMES

        raise ModelWriteError(
            f"this is {DIALECT_NAMES.get(model.dialect, model.dialect)}, whose file is {' or '.join(d.suffixes)}; "
            f"to write another format, convert the model first (opconv.convert(model, to=...))",
            where=path,
        )
    d.save(model, path, **options)


def _is_stream(path: str) -> bool:
    """``-``, /dev/stdout or a device: written as the model's own format, whatever the name says."""
    from ..atomic import check_output

    return check_output(path) == "stream"


_loaded = False


def _ensure_loaded() -> None:
    # Dialect packages register themselves on import; import them once, lazily,
    # so that `import opconv` stays cheap.
    global _loaded
    if _loaded:
        return
    _loaded = True
    from . import onnx as _onnx  # noqa: F401

    for optional in ("openvino", "hlo"):
        try:
            __import__(f"{__name__}.{optional}")
        except ImportError:
            pass
