"""ONNX CausalConvWithState (opset 27) decomposed into opset1 Concat / GroupConvolution / StridedSlice.

The operator left-pads the input with the carried state (zeros without one),
runs a depthwise 1-D convolution with no padding over the result, adds the
optional bias, applies the optional SiLU (``x * sigmoid(x)``) and returns the
last ``k - 1`` time steps of the padded sequence as the next state.
"""

from __future__ import annotations

import numpy as np

from ..lowering import lower
from ._common import Refuse, attr, const, i64, np_dtype, ov, static_shape

ACTIVATIONS = ("none", "silu", "swish")  # swish is the same function as silu here (beta = 1)


@lower("onnx", "openvino", "CausalConvWithState", inputs=(2, 3, 4), names=("x", "w", "bias", "past"))
def _causal_conv(b, m):
    node = m.root
    x, weight, bias, past = (list(node.inputs) + [None] * 4)[:4]
    activation = attr(node, "activation", "none")
    if activation not in ACTIVATIONS:
        raise Refuse(f"activation {activation!r} (expected one of {', '.join(ACTIVATIONS)})")
    x_shape, w_shape = static_shape(x), static_shape(weight)
    if len(x_shape) != 3 or len(w_shape) != 3 or w_shape[1] != 1 or w_shape[0] != x_shape[1]:
        raise Refuse(f"input {x_shape} and weight {w_shape} are not (B, C, L) and (C, 1, k)")
    batch, channels, length = x_shape
    k = w_shape[2]
    if k == 1:
        raise Refuse("a kernel of size 1 carries an empty (B, C, 0) state, and opset1 has no empty tensors")
    dtype = np_dtype(x)
    if past is None:
        past = const(b, np.zeros((batch, channels, k - 1)), dtype, "zero_state")
    padded = ov(b, "Concat", past, x, axis=2)

    data = m.constant("w")
    grouped = (
        b.const(np.asarray(data).reshape(channels, 1, 1, k), f"{weight.name}/grouped")
        if data is not None
        else ov(b, "Reshape", weight, i64(b, [channels, 1, 1, k], "grouped_shape"), special_zero=False)
    )
    y = ov(
        b,
        "GroupConvolution",
        padded,
        grouped,
        strides=[1],
        pads_begin=[0],
        pads_end=[0],
        dilations=[1],
        auto_pad="explicit",
    )
    if bias is not None:
        column = ov(b, "Reshape", bias, i64(b, [1, channels, 1], "bias_shape"), special_zero=False)
        y = ov(b, "Add", y, column, auto_broadcast="numpy")
    if activation != "none":
        y = ov(b, "Multiply", y, ov(b, "Sigmoid", y), auto_broadcast="numpy")

    state = ov(
        b,
        "StridedSlice",
        padded,
        i64(b, [0, 0, length], "begin"),
        i64(b, [batch, channels, length + k - 1], "end"),
        i64(b, [1, 1, 1], "stride"),
        begin_mask=[0, 0, 0],
        end_mask=[0, 0, 0],
        new_axis_mask=[],
        shrink_axis_mask=[],
        ellipsis_mask=[],
    )
    return [y, state]
