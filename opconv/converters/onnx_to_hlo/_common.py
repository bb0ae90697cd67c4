"""Helpers shared by the ONNX -> HLO translator modules.

Translators (registered with :func:`opconv.converters.lowering.lower`) and fusions are called as
``fn(builder, match)``.  Every HLO value carries a static :class:`~opconv.types.TensorType`, so rules
build nodes with :func:`hlo`, which types the attributes from the HLO schema
(through :func:`~opconv.dialects.hlo.build.hlo_node`) and sets the type of
every output.  The small builders below (:func:`broadcast`, :func:`reshape`,
:func:`reduce` ...) compute their result types themselves; a rule whose last
node produces the ONNX node's output takes that output's type with
:func:`out_type`, which ONNX shape inference (and the pipeline's type
completion) filled in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...dialects.hlo.build import hlo_node
from ...ir import Value
from ...types import TensorType, element_type, from_numpy
from ..rewrite import Builder, Match, Refuse, Rule, attr, const_input, text_attr

Shape = tuple[int, ...]


# ---------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------


def static_type(value: Value | None, what: str = "") -> TensorType:
    """The static tensor type of ``value``; refuses the rewrite when it is not known."""
    if value is None:
        raise Refuse(f"{what or 'an input'} is missing")
    t = value.type
    if not isinstance(t, TensorType) or t.dtype is None or not t.is_static or any(d < 0 for d in t.shape):
        raise Refuse(f"the type of {value.name!r} is not a static tensor type ({t})")
    return TensorType(t.dtype, tuple(int(d) for d in t.shape))


def shape_of(value: Value) -> Shape:
    return static_type(value).shape


def dtype_of(value: Value) -> str:
    return static_type(value).dtype


def np_dtype(value: Value) -> np.dtype:
    return np.dtype(element_type(dtype_of(value)).numpy)


def out_type(m: Match, index: int = 0) -> TensorType:
    """The static type of the matched root's output ``index``."""
    return static_type(m.root.outputs[index], f"output {index}")


def is_float(value: Value) -> bool:
    return element_type(dtype_of(value)).is_float


def normalize_axis(axis: int, rank: int) -> int:
    if not -max(rank, 1) <= axis < max(rank, 1):
        raise Refuse(f"axis {axis} is out of range for rank {rank}")
    return axis % max(rank, 1)


# ---------------------------------------------------------------------------
# Building typed HLO nodes
# ---------------------------------------------------------------------------


def hlo(
    b: Builder,
    op: str,
    *inputs: Value | None,
    type: TensorType | None = None,
    types: Sequence[TensorType | None] | None = None,
    **attrs: Any,
) -> Value | list[Value]:
    """Build HLO ``op`` with schema-typed attributes; ``type`` (one output) or ``types`` (several) set the results."""
    n = 1 if types is None else len(types)
    result = hlo_node(b, op, *inputs, _outputs=n, **attrs)
    outs = [result] if n == 1 else list(result)
    for v, t in zip(outs, [type] if types is None else types):
        v.type = t
    return result


def const(b: Builder, array, dtype=None, name: str = "const") -> Value:
    """A constant (an initializer) of ``dtype`` (numpy dtype or canonical name; default: the array's)."""
    if isinstance(dtype, str):
        dtype = element_type(dtype).numpy
    return b.const(np.asarray(array, dtype=dtype), name)


def scalar(b: Builder, value, dtype, name: str = "scalar") -> Value:
    """A rank-0 constant of ``dtype`` (a canonical name)."""
    return const(b, np.asarray(value).astype(element_type(dtype).numpy), name=name)


def full(b: Builder, value, dtype: str, shape: Shape, name: str = "fill") -> Value:
    """A tensor of ``shape`` filled with ``value``: a scalar constant broadcast (no large initializer)."""
    s = scalar(b, value, dtype, name)
    return s if tuple(shape) == () else broadcast_in_dim(b, s, shape, [])


def broadcast_in_dim(b: Builder, v: Value, shape: Shape, dims: Sequence[int]) -> Value:
    return hlo(
        b, "BroadcastInDim", v, type=TensorType(dtype_of(v), tuple(shape)), broadcast_dimensions=[int(d) for d in dims]
    )


def broadcast(b: Builder, v: Value, shape: Shape) -> Value:
    """``v`` broadcast numpy-style to ``shape`` with an explicit BroadcastInDim (``v`` itself when it fits)."""
    vs = shape_of(v)
    shape = tuple(shape)
    if vs == shape:
        return v
    offset = len(shape) - len(vs)
    if offset < 0 or any(d not in (1, t) for d, t in zip(vs, shape[offset:])):
        raise Refuse(f"{v.name!r} of shape {list(vs)} does not broadcast to {list(shape)}")
    return broadcast_in_dim(b, v, shape, range(offset, len(shape)))


def broadcast_all(b: Builder, *values: Value) -> list[Value]:
    """The operands broadcast to their common numpy shape."""
    try:
        shape = np.broadcast_shapes(*(shape_of(v) for v in values))
    except ValueError as e:
        raise Refuse(f"operands do not broadcast: {e}") from None
    return [broadcast(b, v, shape) for v in values]


def binary(b: Builder, op: str, x: Value, y: Value, dtype: str | None = None, **attrs) -> Value:
    """Element-wise ``op`` after broadcasting both operands; the result has ``dtype`` (default: x's).

    ``"Mul"`` is not an operation of the dialect: :func:`multiply` builds it.
    """
    x, y = broadcast_all(b, x, y)
    if op == "Mul":
        return multiply(b, x, y)
    return hlo(b, op, x, y, type=TensorType(dtype or dtype_of(x), shape_of(x)), **attrs)


def multiply(b: Builder, x: Value, y: Value) -> Value:
    """Element-wise product of equal-shaped operands.

    The dialect has no multiply operation; a DotGeneral that batches every
    dim and contracts none computes exactly ``x[i] * y[i]`` for each index.
    """
    x, y = broadcast_all(b, x, y)
    dims = list(range(len(shape_of(x))))
    return hlo(
        b,
        "DotGeneral",
        x,
        y,
        type=static_type(x),
        lhs_batching_dimensions=dims,
        rhs_batching_dimensions=dims,
        lhs_contracting_dimensions=[],
        rhs_contracting_dimensions=[],
    )


def unary(b: Builder, op: str, x: Value, dtype: str | None = None, **attrs) -> Value:
    return hlo(b, op, x, type=TensorType(dtype or dtype_of(x), shape_of(x)), **attrs)


def compare(b: Builder, x: Value, y: Value, direction: str) -> Value:
    return binary(b, "Compare", x, y, "bool", comparison_direction=direction)


def select(b: Builder, pred: Value, on_true: Value, on_false: Value) -> Value:
    pred, on_true, on_false = broadcast_all(b, pred, on_true, on_false)
    return hlo(b, "Select", pred, on_true, on_false, type=static_type(on_true))


def convert(b: Builder, x: Value, dtype: str) -> Value:
    if dtype_of(x) == dtype:
        return x
    return unary(b, "Convert", x, dtype)


def reshape(b: Builder, x: Value, shape: Shape) -> Value:
    shape = tuple(int(d) for d in shape)
    if shape_of(x) == shape:
        return x
    if int(np.prod(shape, dtype=np.int64)) != int(np.prod(shape_of(x), dtype=np.int64)):
        raise Refuse(f"cannot reshape {list(shape_of(x))} to {list(shape)}")
    return hlo(b, "Reshape", x, type=TensorType(dtype_of(x), shape))


def transpose(b: Builder, x: Value, perm: Sequence[int]) -> Value:
    perm = [int(p) for p in perm]
    if perm == list(range(len(perm))):
        return x
    shape = shape_of(x)
    return hlo(b, "Transpose", x, type=TensorType(dtype_of(x), tuple(shape[p] for p in perm)), permutation=perm)


def slice_(b: Builder, x: Value, starts, limits, strides=None) -> Value:
    shape = shape_of(x)
    strides = [1] * len(shape) if strides is None else list(strides)
    out = tuple(max(0, -(-(hi - lo) // s)) for lo, hi, s in zip(starts, limits, strides))
    if out == shape:
        return x
    return hlo(
        b,
        "Slice",
        x,
        type=TensorType(dtype_of(x), out),
        start_indices=[int(s) for s in starts],
        limit_indices=[int(s) for s in limits],
        strides=[int(s) for s in strides],
    )


def concat(b: Builder, values: Sequence[Value], axis: int) -> Value:
    if len(values) == 1:
        return values[0]
    shapes = [shape_of(v) for v in values]
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return hlo(b, "Concatenate", *values, type=TensorType(dtype_of(values[0]), tuple(out)), dimension=axis)


def iota(b: Builder, dtype: str, shape: Shape, dim: int) -> Value:
    return hlo(b, "Iota", type=TensorType(dtype, tuple(shape)), iota_dimension=dim)


# Reductions: computation -> init value (as a function of the numpy dtype).
def _lowest(dtype: np.dtype):
    return -np.inf if _floating(dtype) else (False if dtype.kind == "b" else np.iinfo(dtype).min)


def _highest(dtype: np.dtype):
    return np.inf if _floating(dtype) else (True if dtype.kind == "b" else np.iinfo(dtype).max)


def _floating(dtype: np.dtype) -> bool:
    return from_numpy(dtype).is_float


REDUCE_INIT = {
    "ADD": lambda dt: 0,
    "MUL": lambda dt: 1,
    "MAX": _lowest,
    "MIN": _highest,
    "AND": lambda dt: True,
    "OR": lambda dt: False,
}


def reduce(b: Builder, x: Value, axes: Sequence[int], computation: str, keepdims: bool = False) -> Value:
    """Reduce ``axes`` of ``x`` with ``computation`` (ADD, MUL, MAX, MIN ...), keeping them as 1 if asked."""
    shape = shape_of(x)
    axes = sorted({int(a) % max(len(shape), 1) for a in axes})
    dt = np_dtype(x)
    init = scalar(b, REDUCE_INIT[computation](dt), dtype_of(x), f"init_{computation.lower()}")
    reduced = tuple(d for i, d in enumerate(shape) if i not in axes)
    y = hlo(b, "Reduce", x, init, type=TensorType(dtype_of(x), reduced), dimensions=axes, computation=computation)
    if keepdims:
        y = reshape(b, y, tuple(1 if i in axes else d for i, d in enumerate(shape)))
    return y


def const_ints(m: Match, name: str, what: str | None = None) -> list[int]:
    """The constant integer input bound as ``name`` as a list (refuses when computed at run time)."""
    return [int(v) for v in np.asarray(const_input(m, name, what or name)).reshape(-1)]


def dropped(m: Match, index: int, stand_in: Value) -> Value | None:
    """What replaces the root's output ``index`` that the replacement does not compute.

    Refuses when that output is read; an unread one is given ``stand_in`` (the
    engine needs a value for every output the node declares, and nothing reads it).
    """
    outputs = m.root.outputs
    v = outputs[index] if index < len(outputs) else None
    if v is None:
        return None
    if v.uses or any(v is o for o in m.graph.outputs):
        raise Refuse(f"output {index} ({v.name!r}) is used and has no HLO counterpart here")
    return stand_in


def optional_input(m: Match, index: int) -> Value | None:
    inputs = m.root.inputs
    return inputs[index] if len(inputs) > index else None


__all__ = [
    "Builder",
    "Match",
    "Refuse",
    "Rule",
    "attr",
    "const_input",
    "text_attr",
    "static_type",
    "shape_of",
    "dtype_of",
    "np_dtype",
    "out_type",
    "is_float",
    "normalize_axis",
    "hlo",
    "const",
    "scalar",
    "full",
    "broadcast_in_dim",
    "broadcast",
    "broadcast_all",
    "binary",
    "unary",
    "multiply",
    "compare",
    "select",
    "convert",
    "reshape",
    "transpose",
    "slice_",
    "concat",
    "iota",
    "reduce",
    "REDUCE_INIT",
    "const_ints",
    "optional_input",
    "dropped",
    "from_numpy",
    "TensorType",
]
