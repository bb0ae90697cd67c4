"""Conv and ConvBias: XLA's general dilated convolution with dimension numbers.

The dimension-number attributes name where batch, feature and spatial dims
live in lhs, rhs and the output; they become the layouts of
:func:`opconv.kernels.conv.conv_general`, which transposes to channels-first,
runs the im2col/BLAS convolution (feature or batch grouping, lhs and rhs
dilation, negative padding crops) and transposes the result to the output's
dimension numbers.  ``padding`` is ``[x1_begin, x2_begin, ..., x1_end,
x2_end, ...]``; ``auto_pad`` SAME_UPPER/SAME_LOWER/VALID replaces it, computed
on the lhs-dilated input so that ``out = ceil(in / stride)``.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import conv as K
from ....kernels._common import accumulator_dtype, downcast, per_dim
from ..executor import hlo_op


def split_padding(padding, n: int, name: str = "padding") -> list[tuple[int, int]]:
    """``[x1_begin, ..., xn_begin, x1_end, ..., xn_end]`` as n ``(low, high)`` pairs (zeros when absent)."""
    if padding is None:
        return [(0, 0)] * n
    padding = [int(p) for p in padding]
    if len(padding) != 2 * n:
        raise ExecutionError(f"{name} has {len(padding)} values, expected {2 * n} for {n} dims")
    return list(zip(padding[:n], padding[n:]))


def _convolve(lhs, rhs, a) -> np.ndarray:
    lhs_layout = (a["input_batch_dimension"], a["input_feature_dimension"], *a["input_spatial_dimensions"])
    rhs_layout = (
        a["kernel_output_feature_dimension"],
        a["kernel_input_feature_dimension"],
        *a["kernel_spatial_dimensions"],
    )
    out_layout = (a["output_batch_dimension"], a["output_feature_dimension"], *a["output_spatial_dimensions"])
    for what, layout, rank in (
        ("lhs", lhs_layout, np.ndim(lhs)),
        ("rhs", rhs_layout, np.ndim(rhs)),
        ("output", out_layout, np.ndim(lhs)),
    ):
        if sorted(int(d) for d in layout) != list(range(rank)):
            raise ExecutionError(f"{what} dimension numbers {list(layout)} are not a permutation of {rank} dims")
    n = np.ndim(lhs) - 2
    strides = per_dim(a["window_strides"], n, "window_strides")
    lhs_dilation = per_dim(a["lhs_dilation"], n, "lhs_dilation")
    rhs_dilation = per_dim(a["rhs_dilation"], n, "rhs_dilation")
    auto_pad = (a["auto_pad"] or "NOTSET").upper()
    if auto_pad == "NOTSET":
        padding = split_padding(a["padding"], n)
    else:
        sizes = [(np.shape(lhs)[d] - 1) * f + 1 for d, f in zip(lhs_layout[2:], lhs_dilation)]
        kernel = [np.shape(rhs)[d] for d in rhs_layout[2:]]
        begin, end = K.auto_pad(sizes, kernel, strides, rhs_dilation, auto_pad)
        padding = list(zip(begin, end))
    return K.conv_general(
        lhs,
        rhs,
        strides,
        padding,
        lhs_dilation,
        rhs_dilation,
        int(a["feature_group_count"]),
        int(a["batch_group_count"]),
        lhs_layout,
        rhs_layout,
        out_layout,
    )


@hlo_op("Conv")
def conv(ctx, lhs, rhs, **attrs):
    return _convolve(lhs, rhs, attrs)


@hlo_op("ConvBias")
def conv_bias(ctx, lhs, rhs, bias, **attrs):
    y = _convolve(lhs, rhs, attrs)
    feature = int(attrs["output_feature_dimension"])
    bias = np.asarray(bias)
    if bias.ndim != 1 or bias.shape[0] != y.shape[feature]:
        raise ExecutionError(f"bias of shape {list(bias.shape)} does not match the {y.shape[feature]} output features")
    acc = accumulator_dtype(y.dtype)
    shape = [-1 if d == feature else 1 for d in range(y.ndim)]
    return downcast(y.astype(acc) + bias.astype(acc).reshape(shape), y.dtype)
