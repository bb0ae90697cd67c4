"""Logical/bitwise operations, comparisons and Select.

And/Or/Xor/Not are logical on booleans and bitwise on integers, as in XLA.
Compare follows IEEE for floats: every comparison with NaN is false except NE.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ..executor import hlo_op
from .elementwise import broadcast_operands

#: Element-wise ops of this module (see :data:`.elementwise.ELEMENTWISE_OPS`).
ELEMENTWISE_OPS = frozenset({"And", "Or", "Xor", "Not", "Compare", "Select"})

_BITWISE = {"And": np.bitwise_and, "Or": np.bitwise_or, "Xor": np.bitwise_xor}


def _bitwise_kernel(function):
    def kernel(ctx, a, b, *, broadcast_dimensions=None):
        return function(*broadcast_operands(a, b, broadcast_dimensions))

    return kernel


for _name, _function in _BITWISE.items():
    hlo_op(_name)(_bitwise_kernel(_function))


@hlo_op("Not")
def not_(ctx, x):
    return np.invert(x)


_DIRECTIONS = {
    "EQ": np.equal,
    "NE": np.not_equal,
    "GE": np.greater_equal,
    "GT": np.greater,
    "LE": np.less_equal,
    "LT": np.less,
}


@hlo_op("Compare")
def compare(ctx, a, b, *, comparison_direction):
    try:
        function = _DIRECTIONS[str(comparison_direction).upper()]
    except KeyError:
        raise ExecutionError(
            f"unknown comparison_direction {comparison_direction!r}; expected one of {', '.join(_DIRECTIONS)}"
        ) from None
    return np.asarray(function(a, b))


@hlo_op("Select")
def select(ctx, pred, on_true, on_false):
    return np.where(np.asarray(pred, dtype=bool), on_true, on_false).astype(np.result_type(on_true), copy=False)
