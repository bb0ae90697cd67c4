"""HLO model files: the text module (``model.hlo``) with its sidecar weights, and StableHLO export.

``save(model, "m.hlo")`` writes the module text (:mod:`.text`) and, when some
constant has more than ``inline_limit`` elements, ``m.hlo.weights`` beside it:
the constants' raw little-endian bytes, each aligned to 64 bytes, referenced
from the text as ``weights(offset=..., length=...)``.  Both files are written
under temporary names and renamed only when everything succeeded.
``save(model, "m.mlir")`` or ``format="stablehlo"`` writes StableHLO MLIR text
instead (:func:`opconv.dialects.hlo.stablehlo.export`).

``load`` is hostile-input safe: the sidecar must be a file inside the module's
folder (absolute paths, ``..`` and links leading outside are refused), every
offset and length is checked against its size and the constant's shape, and
absurd shapes are refused.  Sidecar constants are memory-mapped when first used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from ... import budget
from ...atomic import OutputFiles
from ...errors import ModelReadError, ModelWriteError, NotImplementedFeature
from ...ir import Model, Tensor
from ...types import element_type
from .. import read_model_file, read_slice
from .text import INLINE_LIMIT, parse_module, print_module

FORMATS = ("text", "stablehlo")
WEIGHTS_SUFFIX = ".weights"
_ALIGN = 64  # every sidecar constant starts at a multiple of this, for memory mapping
_CHUNK = 1 << 24  # bytes per read/write when streaming a constant


def load(path: str | os.PathLike) -> Model:
    """Read an HLO text module (and its sidecar weights, lazily)."""
    where = os.fspath(path)
    if where.lower().endswith(".mlir"):
        raise ModelReadError(
            "opconv writes StableHLO (.mlir) but does not read it; load the .hlo text module", where=where
        )
    data = read_model_file(where)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ModelReadError(f"not UTF-8 text (byte {e.start})", where=where) from None
    model = parse_module(text, where=where, weights=_SidecarReader(os.path.dirname(os.path.abspath(where))))
    model.path = where
    return model


def save(model: Model, path: str | os.PathLike, *, format: str | None = None, inline_limit: int = INLINE_LIMIT) -> None:
    """Write ``model`` atomically as HLO text (default) or, for ``format="stablehlo"`` or a ``.mlir``
    path, as StableHLO MLIR text.  Constants of more than ``inline_limit`` elements go to the sidecar."""
    path = os.fspath(path)
    if format is None:
        format = "stablehlo" if path.lower().endswith(".mlir") else "text"
    if format not in FORMATS:
        raise ModelWriteError(f"unknown HLO format {format!r}; expected one of {', '.join(FORMATS)}", where=path)
    if model.dialect != "hlo":
        raise ModelWriteError(f"a {model.dialect} model cannot be saved as HLO; convert it first", where=path)
    with OutputFiles(path) as files:
        if format == "stablehlo":
            text = _stablehlo_text(model, path)
        else:
            location = os.path.basename(path) + WEIGHTS_SUFFIX
            sidecar = os.path.join(os.path.dirname(os.path.abspath(path)), location)
            sink = _SidecarWriter(lambda: files.open(sidecar), location, path)
            try:
                try:
                    text = print_module(model, weights=sink, inline_limit=inline_limit)
                except ModelWriteError as e:
                    raise ModelWriteError(e.message, where=e.where or path) from None
            finally:
                sink.close()
        with files.open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)


def _stablehlo_text(model: Model, path: str) -> str:
    try:
        from .stablehlo import export
    except ImportError:
        raise NotImplementedFeature("StableHLO export") from None
    return export(model)


# ---------------------------------------------------------------------------
# the sidecar
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class WeightsSlice:
    """Where a sidecar constant's bytes are (checked at load): ``path``, ``offset``, ``length``."""

    path: str
    offset: int
    length: int


class _SidecarReader:
    """The parser's view of the sidecar: path checks once, then bounds checks per constant."""

    def __init__(self, base_dir: str):
        self.base_dir = base_dir
        self.path: str | None = None
        self.size = 0
        self.location = ""

    def open(self, location: str) -> None:
        if not location or os.path.isabs(location) or location.startswith(("/", "\\")) or ":" in location:
            raise ValueError(f"weights file {location!r} must be a relative path inside the module's folder")
        base = os.path.realpath(self.base_dir)
        path = os.path.realpath(os.path.join(base, location))
        if os.path.commonpath([base, path]) != base:
            raise ValueError(f"weights file {location!r} lies outside the module's folder")
        if not os.path.isfile(path):
            raise ValueError(f"weights file {location!r} does not exist")
        self.path, self.size, self.location = path, os.path.getsize(path), location

    def tensor(self, dtype: str, shape: tuple[int, ...], offset: int, length: int) -> Tensor:
        np_dtype = element_type(dtype).numpy
        if np_dtype is None:
            raise ValueError(f"{dtype} has no fixed-size binary form")
        expected = budget.elements(shape) * np_dtype.itemsize  # Python ints: no overflow
        if length != expected:
            raise ValueError(f"{length} bytes stored, {expected} expected for {dtype}{list(shape)}")
        if offset + length > self.size:
            raise ValueError(f"bytes {offset}..{offset + length} lie outside {self.location!r} ({self.size} bytes)")
        if self.path is None:
            raise ValueError("no weights file is open")
        where = WeightsSlice(self.path, offset, length)
        return Tensor(dtype, shape, loader=lambda: _map(where, np_dtype, shape), origin=where, nbytes=length)


def _map(where: WeightsSlice, np_dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    if where.length == 0:  # np.memmap cannot map zero bytes
        return np.zeros(shape, np_dtype)
    return read_slice(where.path, np.dtype(np_dtype).newbyteorder("<"), where.offset, shape)


class _SidecarWriter:
    """Appends constants to the sidecar (opened on first use); the printer's :class:`~.text.WeightsSink`."""

    def __init__(self, open_file, location: str, where: str):
        self.open_file = open_file  # the sidecar's file is made on the first constant it takes
        self.location = location
        self.where = where
        self.file: BinaryIO | None = None
        self.written = 0

    def add(self, tensor: Tensor, label: str) -> tuple[int, int]:
        if self.file is None:
            self.file = self.open_file()
        assert self.file is not None
        pad = (-self.written) % _ALIGN
        if pad:
            self.file.write(b"\0" * pad)
            self.written += pad
        offset = self.written
        for chunk in self.chunks(tensor, label):
            self.file.write(chunk)
            self.written += len(chunk)
        return offset, self.written - offset

    def chunks(self, tensor: Tensor, label: str):
        # A sidecar constant is memory-mapped, so the chunks below read it piece by piece; the mapping
        # also keeps its bytes readable when this save replaces the very file it came from.
        np_dtype = element_type(tensor.dtype).numpy
        assert np_dtype is not None  # the printer stores no string constant in the weights file
        budget.check(tensor.shape, np_dtype.itemsize, f"{label} in the weights file", where=self.where)
        array = np.asarray(tensor.numpy())
        if array.dtype != np_dtype:
            raise ModelWriteError(f"{label}: declared {tensor.dtype} but holds {array.dtype} data", where=self.where)
        flat = array.reshape(-1)
        per_chunk = max(1, _CHUNK // np_dtype.itemsize)
        for start in range(0, flat.size, per_chunk):
            part = np.ascontiguousarray(flat[start : start + per_chunk])
            yield part.astype(part.dtype.newbyteorder("<"), copy=False).tobytes()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
