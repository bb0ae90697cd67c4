"""Element types, shapes and value types shared by every dialect.

Element types have one canonical lower-case name each (``float32``, ``int64``,
``bfloat16``, ``float8e4m3fn`` ...).  Dialects map their own spellings (ONNX's
``TensorProto.FLOAT``, OpenVINO's ``f32``, HLO's ``f32``) to these names in
their I/O modules; everything inside opconv uses the canonical name.

A shape is a tuple of dims, each an ``int`` (static), a ``str`` (a symbolic
dim such as ``"batch"``) or ``None`` (unknown).  A value whose rank is unknown
has ``shape=None``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, SupportsInt

import ml_dtypes
import numpy as np
from numpy.typing import DTypeLike

from .errors import OpconvError

Dim = int | str | None
Shape = tuple[Dim, ...] | None  # None for unknown rank


@dataclass(frozen=True)
class ElementType:
    """One element type: its canonical name, numpy dtype and storage width."""

    name: str
    numpy: np.dtype[Any] | None  # None for types numpy cannot hold (string is object)
    bits: int  # storage bits per element (4 for int4, 0 for string)
    onnx: int  # TensorProto.DataType code

    @property
    def is_float(self) -> bool:
        return self.name.startswith(("float", "bfloat"))

    @property
    def is_int(self) -> bool:
        return self.name.startswith(("int", "uint"))

    @property
    def is_complex(self) -> bool:
        return self.name.startswith("complex")


def _et(name: str, dtype: DTypeLike, bits: int, onnx_code: int) -> ElementType:
    return ElementType(name, np.dtype(dtype) if dtype is not None else None, bits, onnx_code)


_ELEMENT_TYPES = [
    _et("float32", np.float32, 32, 1),
    _et("uint8", np.uint8, 8, 2),
    _et("int8", np.int8, 8, 3),
    _et("uint16", np.uint16, 16, 4),
    _et("int16", np.int16, 16, 5),
    _et("int32", np.int32, 32, 6),
    _et("int64", np.int64, 64, 7),
    _et("string", object, 0, 8),
    _et("bool", np.bool_, 8, 9),
    _et("float16", np.float16, 16, 10),
    _et("float64", np.float64, 64, 11),
    _et("uint32", np.uint32, 32, 12),
    _et("uint64", np.uint64, 64, 13),
    _et("complex64", np.complex64, 64, 14),
    _et("complex128", np.complex128, 128, 15),
    _et("bfloat16", ml_dtypes.bfloat16, 16, 16),
    _et("float8e4m3fn", ml_dtypes.float8_e4m3fn, 8, 17),
    _et("float8e4m3fnuz", ml_dtypes.float8_e4m3fnuz, 8, 18),
    _et("float8e5m2", ml_dtypes.float8_e5m2, 8, 19),
    _et("float8e5m2fnuz", ml_dtypes.float8_e5m2fnuz, 8, 20),
    _et("uint4", ml_dtypes.uint4, 4, 21),
    _et("int4", ml_dtypes.int4, 4, 22),
    _et("float4e2m1", ml_dtypes.float4_e2m1fn, 4, 23),
    _et("float8e8m0", ml_dtypes.float8_e8m0fnu, 8, 24),
    _et("uint2", ml_dtypes.uint2, 2, 25),
    _et("int2", ml_dtypes.int2, 2, 26),
    _et("float6e2m3", ml_dtypes.float6_e2m3fn, 6, 27),
    _et("float6e3m2", ml_dtypes.float6_e3m2fn, 6, 28),
]

ELEMENT_TYPES: dict[str, ElementType] = {t.name: t for t in _ELEMENT_TYPES}
_BY_ONNX = {t.onnx: t for t in _ELEMENT_TYPES}
_BY_NUMPY = {t.numpy: t for t in _ELEMENT_TYPES if t.numpy is not None and t.name != "string"}

# ONNX type-string spellings (``tensor(float)``) that differ from the canonical names.
ONNX_TYPE_NAMES = {"float": "float32", "double": "float64"}
ONNX_TYPE_NAMES.update(
    {
        "float8e4m3fn": "float8e4m3fn",
        "float8e4m3fnuz": "float8e4m3fnuz",
        "float8e5m2": "float8e5m2",
        "float8e5m2fnuz": "float8e5m2fnuz",
        "float4e2m1": "float4e2m1",
        "float8e8m0": "float8e8m0",
    }
)


def element_type(name: str) -> ElementType:
    """Look up an element type by canonical name."""
    try:
        return ELEMENT_TYPES[name]
    except KeyError:
        raise OpconvError(f"unknown element type {name!r}") from None


def from_onnx_code(code: int) -> ElementType:
    try:
        return _BY_ONNX[code]
    except KeyError:
        raise OpconvError(f"unknown ONNX element type code {code}") from None


def from_numpy(dtype_like: DTypeLike) -> ElementType:
    dtype = np.dtype(dtype_like)
    if dtype.kind in "OUS":
        return ELEMENT_TYPES["string"]
    try:
        return _BY_NUMPY[dtype]
    except KeyError:
        raise OpconvError(f"numpy dtype {dtype} has no opconv element type") from None


@dataclass(frozen=True)
class TensorType:
    """A tensor of ``dtype`` (canonical name; None = unknown) and ``shape`` (None = unknown rank)."""

    dtype: str | None
    shape: Shape = None

    def __str__(self) -> str:
        if self.shape is None:
            return f"{self.dtype}[?]"
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.dtype}[{dims}]"

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)


@dataclass(frozen=True)
class SequenceType:
    elem: ValueType | None  # None: unknown

    def __str__(self) -> str:
        return f"seq({self.elem})"


@dataclass(frozen=True)
class OptionalType:
    elem: ValueType | None  # None: unknown

    def __str__(self) -> str:
        return f"optional({self.elem})"


@dataclass(frozen=True)
class MapType:
    key: str | None
    value: ValueType | None

    def __str__(self) -> str:
        return f"map({self.key},{self.value})"


@dataclass(frozen=True)
class SparseTensorType:
    dtype: str | None
    shape: Shape = None

    def __str__(self) -> str:
        return f"sparse({TensorType(self.dtype, self.shape)})"


@dataclass(frozen=True)
class TupleType:
    """An HLO tuple of ``elements`` (value types); a Python list of arrays at run time."""

    elements: tuple[ValueType | None, ...] = ()  # None: unknown

    def __str__(self) -> str:
        return "(" + ", ".join(map(str, self.elements)) + ")"


ValueType = TensorType | SequenceType | OptionalType | MapType | SparseTensorType | TupleType


def type_signature(t: ValueType | None) -> str | None:
    """The schema type string of a value type: ``tensor(float32)``, ``seq(tensor(int64))``..."""
    if t is None:
        return None
    if isinstance(t, (TensorType, SparseTensorType)) and t.dtype is None:
        return None
    if isinstance(t, TensorType):
        return f"tensor({t.dtype})"
    if isinstance(t, SparseTensorType):
        return f"sparse_tensor({t.dtype})"
    if isinstance(t, SequenceType):
        inner = type_signature(t.elem)
        return None if inner is None else f"seq({inner})"
    if isinstance(t, OptionalType):
        inner = type_signature(t.elem)
        return None if inner is None else f"optional({inner})"
    if isinstance(t, MapType):
        inner = type_signature(t.value)
        return None if inner is None else f"map({t.key},{inner})"
    if isinstance(t, TupleType):
        inners = [type_signature(e) for e in t.elements]
        known = [s for s in inners if s is not None]
        return None if len(known) < len(inners) else f"tuple({','.join(known)})"
    raise TypeError(t)


def shape_size(shape: Iterable[SupportsInt | str]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n
