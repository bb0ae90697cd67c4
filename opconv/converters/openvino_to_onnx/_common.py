"""Helpers shared by the OpenVINO opset1 -> ONNX translator modules.

A module registers one translator per opset1 operation with :func:`lower`, beside its code::

    @lower("Elu", inputs=1)
    def elu(c: Ctx, x):
        return c.onnx("Elu", x, alpha=c.a["alpha"])

The translator receives a :class:`Ctx` (the builder, the IR layer, its attributes decoded once from the
opset1 schema with defaults, and the target ONNX opset; see :mod:`opconv.converters.to_onnx`) and the
layer's inputs; it returns the value(s) that replace the layer's outputs, or raises :class:`Refuse` with the
reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .. import lowering
from ..rewrite import Match, constant_value, np_dtype, rank_of, static_shape
from ..to_onnx import INT64_MAX, INT64_MIN, MIN_OPSET, Refuse, const_ints, const_scalar
from ..to_onnx import Ctx as _OnnxCtx

#: the domain of IR layers in the graph core
OPSET = "opset1"


class Ctx(_OnnxCtx):
    """The translator context, attributes decoded from the opset1 schema."""

    source = ("openvino", OPSET)


def lower(
    ops: str | Iterable[str],
    inputs: int | Iterable[int] | None,
    outputs: int | Iterable[int] | None = 1,
    check: Callable[[Match], str | None] | None = None,
):
    """Register ``fn(c, *inputs)`` as the OpenVINO -> ONNX translator of opset1 ``ops`` layers with ``inputs``
    inputs and ``outputs`` outputs (each a count, the allowed counts, or None for any)."""
    return lowering.lower("openvino", "onnx", ops, domain=OPSET, inputs=inputs, outputs=outputs, check=check)


__all__ = [
    "OPSET",
    "MIN_OPSET",
    "INT64_MAX",
    "INT64_MIN",
    "Ctx",
    "lower",
    "Refuse",
    "rank_of",
    "static_shape",
    "np_dtype",
    "const_ints",
    "const_scalar",
    "constant_value",
]
