"""opset1 Reduce* layers -> ONNX reductions (axes as an input; an empty axes list reduces nothing)."""

from __future__ import annotations

import numpy as np

from ...types import element_type
from ._common import Ctx, constant_value, lower

_NUMERIC = {
    "ReduceSum": "ReduceSum",
    "ReduceMean": "ReduceMean",
    "ReduceMax": "ReduceMax",
    "ReduceMin": "ReduceMin",
    "ReduceProd": "ReduceProd",
}
# Logical reductions: all() is the minimum and any() the maximum of 0/1 values.
_LOGICAL = {"ReduceLogicalAnd": "ReduceMin", "ReduceLogicalOr": "ReduceMax"}


def _reduce(c: Ctx, onnx_op: str, x, axes):
    keep = bool(c.a.get("keep_dims"))
    data = constant_value(axes)
    if data is not None:
        values = [int(v) for v in np.asarray(data).reshape(-1)]
        if not values:
            return None  # nothing to reduce
        return c.reduce(onnx_op, x, values, keep)
    return c.reduce(onnx_op, x, c.as_i64(axes), keep)


def _numeric(onnx_op: str):
    def translate(c: Ctx, x, axes):
        y = _reduce(c, onnx_op, x, axes)
        return c.onnx("Identity", x) if y is None else y

    return translate


def _logical(onnx_op: str):
    def translate(c: Ctx, x, axes):
        as_int = c.onnx("Cast", x, to=element_type("int32").onnx)
        y = _reduce(c, onnx_op, as_int, axes)
        return c.onnx("Cast", as_int if y is None else y, to=element_type("bool").onnx)

    return translate


for _op, _onnx in _NUMERIC.items():
    lower(_op, 2)(_numeric(_onnx))
for _op, _onnx in _LOGICAL.items():
    lower(_op, 2)(_logical(_onnx))
