"""Constant and ConstantOfShape.

Tensor attributes arrive decoded: ``value`` as a numpy array and ``sparse_value`` already densified by
the binder.  The scalar and list forms of Constant-12 get ONNX's fixed types: float32 for
``value_float(s)``, int64 for ``value_int(s)`` and strings (dtype object) for ``value_string(s)``.
"""

from __future__ import annotations

import numpy as np

from .... import budget
from ....errors import ExecutionError
from ..executor import onnx_op


def _constant(**forms) -> np.ndarray:
    """The one attribute that is set, as an array."""
    given = {name: v for name, v in forms.items() if v is not None}
    if len(given) != 1:
        raise ExecutionError(f"Constant needs exactly one value attribute, got {sorted(given) or 'none'}")
    ((name, value),) = given.items()
    return np.asarray(value, dtype=_ATTRIBUTE_DTYPES.get(name))


# Attribute -> element type (tensor attributes keep their own).
_ATTRIBUTE_DTYPES = {
    "value_float": np.float32,
    "value_floats": np.float32,
    "value_int": np.int64,
    "value_ints": np.int64,
    "value_string": object,
    "value_strings": object,
}


@onnx_op("Constant", since=[1, 9])
def constant_1(ctx, *, value):
    return _constant(value=value)


@onnx_op("Constant", since=11)
def constant_11(ctx, *, sparse_value, value):
    return _constant(sparse_value=sparse_value, value=value)


@onnx_op("Constant", since=[12, 13, 19, 21, 23, 24, 25])
def constant_12(
    ctx, *, sparse_value, value, value_float, value_floats, value_int, value_ints, value_string, value_strings
):
    return _constant(
        sparse_value=sparse_value,
        value=value,
        value_float=value_float,
        value_floats=value_floats,
        value_int=value_int,
        value_ints=value_ints,
        value_string=value_string,
        value_strings=value_strings,
    )


@onnx_op("ConstantOfShape", since=[9, 20, 21, 23, 24, 25])
def constant_of_shape_9(ctx, input, *, value):
    # `value` is a one-element tensor giving the fill and the element type; absent means float32 zero.
    fill = np.zeros(1, dtype=np.float32) if value is None else np.asarray(value)
    if fill.size != 1:
        raise ExecutionError(f"ConstantOfShape: value must hold one element, got {fill.size}")
    shape = [int(d) for d in np.asarray(input).reshape(-1)]
    if any(d < 0 for d in shape):
        raise ExecutionError(f"ConstantOfShape: negative dim in shape {shape}")
    budget.check(shape, fill.dtype.itemsize, "ConstantOfShape's output")
    return np.full(shape, fill.reshape(()), dtype=fill.dtype)
