"""Convolution, GroupConvolution and their BackpropData (transposed) forms.

OpenVINO lays group filters out as ``(G, O/G, C/G, *K)`` for GroupConvolution
and ``(G, C/G, O/G, *K)`` for GroupConvolutionBackpropData; the shared kernels
take the groups folded into the first axis, so the kernels here only reshape.
"""

from __future__ import annotations

from ....kernels import conv as kc
from ..executor import ov_op
from ._common import explicit_pads, ints


def _forward(x, w, groups, strides, pads_begin, pads_end, dilations, auto_pad):
    begin, end = explicit_pads(auto_pad, x.shape[2:], w.shape[2:], strides, dilations, pads_begin, pads_end)
    return kc.conv(x, w, strides=strides, pads_begin=begin, pads_end=end, dilations=dilations, groups=groups)


@ov_op("Convolution")
def convolution(ctx, x, w, *, strides, pads_begin, pads_end, dilations, auto_pad="explicit"):
    return _forward(x, w, 1, strides, pads_begin, pads_end, dilations, auto_pad)


@ov_op("GroupConvolution")
def group_convolution(ctx, x, w, *, strides, pads_begin, pads_end, dilations, auto_pad="explicit"):
    groups = w.shape[0]
    return _forward(x, w.reshape((-1,) + w.shape[2:]), groups, strides, pads_begin, pads_end, dilations, auto_pad)


def _backward(x, w, groups, output_shape, strides, pads_begin, pads_end, dilations, output_padding, auto_pad):
    n = x.ndim - 2
    mode = (auto_pad or "explicit").lower()
    kernel = w.shape[2:]
    if output_shape is not None:
        # The requested output size decides the pads; an odd total puts the extra element at the end
        # except under same_lower.
        begin, end = kc.conv_transpose_pads(
            x.shape[2:],
            kernel,
            strides,
            dilations,
            output_padding,
            ints(output_shape),
            extra_at_end=mode != "same_lower",
        )
        output_padding = None  # already part of the pads
    elif mode != "explicit":
        # Without output_shape, the runtime gives same_upper/same_lower/valid the full (unpadded) output.
        begin, end = [0] * n, [0] * n
    else:
        begin, end = pads_begin, pads_end
    return kc.conv_transpose(
        x,
        w,
        strides=strides,
        pads_begin=begin,
        pads_end=end,
        dilations=dilations,
        groups=groups,
        output_padding=output_padding,
    )


@ov_op("ConvolutionBackpropData")
def convolution_backprop_data(
    ctx, x, w, output_shape=None, *, strides, pads_begin, pads_end, dilations, output_padding=None, auto_pad="explicit"
):
    return _backward(x, w, 1, output_shape, strides, pads_begin, pads_end, dilations, output_padding, auto_pad)


@ov_op("GroupConvolutionBackpropData")
def group_convolution_backprop_data(
    ctx, x, w, output_shape=None, *, strides, pads_begin, pads_end, dilations, output_padding=None, auto_pad="explicit"
):
    groups = w.shape[0]
    return _backward(
        x,
        w.reshape((-1,) + w.shape[2:]),
        groups,
        output_shape,
        strides,
        pads_begin,
        pads_end,
        dilations,
        output_padding,
        auto_pad,
    )
