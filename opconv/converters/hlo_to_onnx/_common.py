"""Helpers shared by the HLO -> ONNX translator modules.

A module registers one translator per HLO operation with :func:`lower`, beside its code::

    @lower("Elu", inputs=1)
    def elu(c: Ctx, x):
        return c.onnx("Elu", x, alpha=c.a["alpha"])

The translator gets a :class:`Ctx` (the context of both directions into ONNX, :mod:`opconv.converters.to_onnx`:
the builder, the operation, its attributes decoded once from the *HLO* schema with defaults, the target opset,
and ``c.onnx`` which types ONNX attributes from the ONNX schema) and the operation's inputs (``None`` for an
omitted one); it returns the value(s) replacing the outputs or raises :class:`Refuse` with the reason.
HLO values carry static types, so translators read shapes freely.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ...ir import Value
from ...types import element_type
from .. import lowering
from ..rewrite import Match, constant_value, np_dtype
from ..to_onnx import INT64_MAX, INT64_MIN, MIN_OPSET, Refuse, const_ints, const_scalar
from ..to_onnx import Ctx as _OnnxCtx


class Ctx(_OnnxCtx):
    """The translator context, attributes decoded from the HLO schema, with the node's output types."""

    source = ("hlo", "")

    def out_type(self, index: int = 0):
        return self.node.outputs[index].type

    def out_shape(self, index: int = 0) -> tuple[int, ...]:
        return tuple(self.node.outputs[index].shape)

    def onnx_type(self, dtype: str) -> int:
        return element_type(dtype).onnx


def lower(
    ops: str | Iterable[str],
    inputs: int | Iterable[int] | None,
    outputs: int | Iterable[int] | None = 1,
    check: Callable[[Match], str | None] | None = None,
):
    """Register ``fn(c, *inputs)`` as the HLO -> ONNX translator of ``ops`` nodes with ``inputs`` inputs and
    ``outputs`` outputs (each a count, the allowed counts, or None for any)."""
    return lowering.lower("hlo", "onnx", ops, inputs=inputs, outputs=outputs, check=check)


def shape_of(v: Value) -> tuple[int, ...]:
    if v.shape is None or not all(isinstance(d, int) for d in v.shape):
        raise Refuse(f"the shape of {v.name!r} is not static ({v.type})")
    return tuple(v.shape)


def place_dims(c: Ctx, v: Value, dims: list[int], rank: int) -> tuple[Value, tuple[int, ...]]:
    """``v`` with its dim ``i`` at position ``dims[i]`` of a rank-``rank`` shape and 1 elsewhere (an HLO
    ``broadcast_dimensions`` map made ONNX-broadcastable), with that shape; ``v`` itself when nothing moves."""
    vs = shape_of(v)
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    if order != list(range(len(dims))):
        v = c.onnx("Transpose", v, perm=order)
        vs, dims = tuple(vs[i] for i in order), sorted(dims)
    target = [1] * rank
    for size, d in zip(vs, dims):
        target[d] = size
    return (v if tuple(target) == vs else c.onnx("Reshape", v, c.i64(target))), tuple(target)


__all__ = [
    "MIN_OPSET",
    "INT64_MAX",
    "INT64_MIN",
    "Ctx",
    "lower",
    "Refuse",
    "shape_of",
    "place_dims",
    "np_dtype",
    "const_ints",
    "const_scalar",
    "constant_value",
]
