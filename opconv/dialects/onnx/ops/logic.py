"""Logic and comparisons: And, Or, Xor, Not, Equal, Greater, GreaterOrEqual, Less, LessOrEqual.

Every result is a bool tensor.  Before opset 7 the binary forms took the legacy ``broadcast``/``axis``
attributes (:func:`._common.legacy_broadcast`); from opset 7 both sides broadcast numpy-style.
Later versions only widened the type sets (Equal-19 added strings), so each op has two functions at
most.  Narrow floats (bfloat16, float16) compare in float32, which orders them exactly alike.
"""

from __future__ import annotations

import numpy as np

from ....kernels._common import upcast
from ..executor import onnx_op
from ._common import legacy_broadcast


def _compare(function, a, b) -> np.ndarray:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "O" or b.dtype.kind == "O":  # strings compare as Python objects
        return np.asarray(function(a, b), dtype=bool)
    return function(upcast(a), upcast(b))


def _register(op: str, function, legacy: list[int], modern: list[int]) -> None:
    """Register ``op`` in its legacy-broadcast form (opset < 7) and numpy-broadcasting form."""

    def legacy_kernel(ctx, a, b, *, axis, broadcast):
        return _compare(function, a, legacy_broadcast(a, b, broadcast, axis))

    def kernel(ctx, a, b):
        return _compare(function, a, b)

    if legacy:
        legacy_kernel.__name__ = f"{op.lower()}_{legacy[0]}"
        onnx_op(op, since=legacy)(legacy_kernel)
    kernel.__name__ = f"{op.lower()}_{modern[0]}"
    onnx_op(op, since=modern)(kernel)


#: op -> (numpy function, legacy-broadcast versions, numpy-broadcasting versions)
_BINARY = {
    "And": (np.logical_and, [1], [7]),
    "Or": (np.logical_or, [1], [7]),
    "Xor": (np.logical_xor, [1], [7]),
    "Equal": (np.equal, [1], [7, 11, 13, 19]),
    "Greater": (np.greater, [1], [7, 9, 13]),
    "Less": (np.less, [1], [7, 9, 13]),
    "GreaterOrEqual": (np.greater_equal, [], [12, 16]),
    "LessOrEqual": (np.less_equal, [], [12, 16]),
}

for _op, (_function, _legacy, _modern) in _BINARY.items():
    _register(_op, _function, _legacy, _modern)


@onnx_op("Not", since=1)
def not_1(ctx, x):
    return np.logical_not(x)
