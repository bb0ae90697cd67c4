"""Reductions: ReduceL1/L2/LogSum/LogSumExp/Max/Mean/Min/Prod/Sum/SumSquare, ArgMax, ArgMin.

The ``axes`` of a reduction moved from an attribute to an optional second input (ReduceSum at
opset 13, the others at 18), and the input form added ``noop_with_empty_axes``: with it set, an
omitted or empty ``axes`` reduces nothing (the element-wise part still applies, e.g. ReduceL1 gives
``|x|``); without it, every axis.  In the attribute form an absent ``axes`` always means every axis.
Versions within one form only added types or negative axes, so each op has two functions.
The numerics, empty-set identities included, are :func:`opconv.kernels.reduce.reduce`.

ArgMax/ArgMin return int64 indices; opset 12 added ``select_last_index`` (ties pick the last).
"""

from __future__ import annotations

import numpy as np

from ....kernels import reduce
from ..executor import onnx_op

#: op -> (kernel reduction name, attribute-form versions, input-form versions)
_REDUCTIONS = {
    "ReduceL1": ("l1", [1, 11, 13], [18]),
    "ReduceL2": ("l2", [1, 11, 13], [18]),
    "ReduceLogSum": ("log_sum", [1, 11, 13], [18, 28]),
    "ReduceLogSumExp": ("log_sum_exp", [1, 11, 13], [18, 28]),
    "ReduceMax": ("max", [1, 11, 12, 13], [18, 20]),
    "ReduceMean": ("mean", [1, 11, 13], [18]),
    "ReduceMin": ("min", [1, 11, 12, 13], [18, 20]),
    "ReduceProd": ("prod", [1, 11, 13], [18]),
    "ReduceSum": ("sum", [1, 11], [13]),
    "ReduceSumSquare": ("sum_square", [1, 11, 13], [18]),
}


def _register(op: str, kind: str, attribute_form: list[int], input_form: list[int]) -> None:
    def axes_attribute(ctx, data, *, axes, keepdims):
        return reduce.reduce(data, kind, axes, bool(keepdims))  # None: every axis

    def axes_input(ctx, data, axes=None, *, keepdims, noop_with_empty_axes):
        axes = None if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]
        return reduce.reduce(data, kind, axes, bool(keepdims), bool(noop_with_empty_axes))

    axes_attribute.__name__ = f"{op.lower()}_{attribute_form[0]}"
    axes_input.__name__ = f"{op.lower()}_{input_form[0]}"
    onnx_op(op, since=attribute_form)(axes_attribute)
    onnx_op(op, since=input_form)(axes_input)


for _op, (_kind, _attribute_form, _input_form) in _REDUCTIONS.items():
    _register(_op, _kind, _attribute_form, _input_form)


@onnx_op("ArgMax", since=[1, 11])
def argmax_1(ctx, data, *, axis, keepdims):
    return reduce.argmax(data, axis, bool(keepdims))


@onnx_op("ArgMax", since=[12, 13])
def argmax_12(ctx, data, *, axis, keepdims, select_last_index):
    return reduce.argmax(data, axis, bool(keepdims), bool(select_last_index))


@onnx_op("ArgMin", since=[1, 11])
def argmin_1(ctx, data, *, axis, keepdims):
    return reduce.argmin(data, axis, bool(keepdims))


@onnx_op("ArgMin", since=[12, 13])
def argmin_12(ctx, data, *, axis, keepdims, select_last_index):
    return reduce.argmin(data, axis, bool(keepdims), bool(select_last_index))
