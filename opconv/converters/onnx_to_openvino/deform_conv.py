"""ONNX DeformConv (opset 22) -> opset1 DeformableConvolution on an input padded by one zero.

Both ops read tap ``k`` of output ``j`` at ``j*stride - pad_begin + k*dilation
+ offset`` with the same offset layout (per offset group and tap, the per-axis
displacements adjacent) and the same channel groups.  They differ at the border:
ONNX interpolates bilinearly with every neighbour outside the input reading 0,
while DeformableConvolution-1 reads a position only if it lies inside the input
and clamps its upper neighbour to the last row / column (see the IR kernel
``opconv/dialects/openvino/ops/conv_variants.py``).  With one row / column of
zeros added on every side, every position whose ONNX value is not 0 lies
strictly inside the padded input with both neighbours unclamped, and every
other position reads only zeros (or is outside): the results agree.

The sampling positions move by +1 in the padded input, which the convolution's
own ``pads_begin`` absorbs (``pads_begin - 1``).  With ``pads_begin`` 0 that
would be negative: the convolution then starts ``t`` outputs earlier
(``pads_begin - 1 + t*stride``), the offsets get ``t`` leading rows of zeros,
and those outputs (and any extra at the end) are cut away again.

``mask`` (modulation per tap and output position) has no DeformableConvolution-1
input: each tap is then sampled on its own by a depthwise 1x1
DeformableConvolution of weight 1 (placed at the tap the same way), multiplied
by the tap's mask, and the taps, stacked im2col-style, are weighted by a 1x1
(Group)Convolution.  The bias is an Add.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..lowering import lower
from ._common import Refuse, attr, const, i64, np_dtype, ov, static_shape


def _output_size(size: int, kernel: int, stride: int, dilation: int, begin: int, end: int) -> int:
    return (size + begin + end - (kernel - 1) * dilation - 1) // stride + 1


def _placement(size: int, kernel: int, stride: int, dilation: int, pad_begin: int, shift: int, out: int):
    """(pads_begin, pads_end, lead, trail) along one axis of a DeformableConvolution on the input padded by one
    zero on each side, whose outputs ``lead .. lead + out`` sample where the ONNX node's ``out`` outputs do, with
    its taps moved by ``shift`` (the tap's own displacement when one tap is sampled by a 1x1 kernel)."""
    lead = max(0, math.ceil((shift + 1 - pad_begin) / stride))  # outputs in front keep pads_begin >= 0
    begin = pad_begin - shift - 1 + lead * stride
    reach = (kernel - 1) * dilation + 1
    end = max(0, (lead + out - 1) * stride + reach - size - 2 - begin)
    return begin, end, lead, _output_size(size + 2, kernel, stride, dilation, begin, end) - lead - out


def _sampling_conv(b, padded, offset, w, placements, out, dtype, **attrs):
    """DeformableConvolution of ``padded`` placed by ``placements`` (see :func:`_placement`), cut to ``out``;
    ``dtype``: the element type of the data and offsets."""
    begin, end, lead, trail = (list(column) for column in zip(*placements))
    cut = any(lead) or any(trail)
    if cut:
        offset = ov(
            b,
            "Pad",
            offset,
            i64(b, [0, 0, *lead], "lead"),
            i64(b, [0, 0, *trail], "trail"),
            const(b, 0, dtype, "zero"),
            pad_mode="constant",
        )
    y = ov(b, "DeformableConvolution", padded, offset, w, pads_begin=begin, pads_end=end, auto_pad="explicit", **attrs)
    if not cut:
        return y
    return ov(
        b,
        "StridedSlice",
        y,
        i64(b, [0, 0, *lead], "begin"),
        i64(b, [0, 0, *(t + n for t, n in zip(lead, out))], "end"),
        i64(b, [1, 1, 1, 1], "stride"),
        begin_mask=[1, 1, 0, 0],
        end_mask=[1, 1, 0, 0],
        new_axis_mask=[],
        shrink_axis_mask=[],
        ellipsis_mask=[],
    )


def _reshape(b, x, shape, name: str):
    return ov(b, "Reshape", x, i64(b, shape, name), special_zero=False)


def _modulated(b, m, padded, geometry):
    """Per tap: the bilinear samples of every channel (a depthwise 1x1 DeformableConvolution of weight 1 over the
    tap's offsets, placed at the tap), times the tap's mask; the taps stacked after each channel (im2col order)
    and weighted by a 1x1 (Group)Convolution."""
    x_shape, w_shape, kernel, strides, dilations, pads, out, group, offset_group = geometry
    batch, channels = x_shape[:2]
    taps = list(itertools.product(*(range(k) for k in kernel)))
    dtype = np_dtype(m["x"])
    offsets = _reshape(b, m["offset"], [batch, offset_group, len(taps), 2, *out], "offset_taps")
    masks = _reshape(b, m["mask"], [batch, offset_group, len(taps), 1, *out], "mask_taps")
    ones = const(b, np.ones((channels, 1, 1, 1)), dtype, "ones")
    per_group = [batch, offset_group, channels // offset_group, *out]
    columns = []
    for index, tap in enumerate(taps):
        pick = dict(
            begin_mask=[1, 1, 0], end_mask=[1, 1, 0], new_axis_mask=[], shrink_axis_mask=[0, 0, 1], ellipsis_mask=[]
        )
        first, last, step = i64(b, [0, 0, index], "tap"), i64(b, [0, 0, index + 1], "tap_end"), i64(b, [1] * 3)
        tap_offset = _reshape(
            b, ov(b, "StridedSlice", offsets, first, last, step, **pick), [batch, offset_group * 2, *out], "tap_offset"
        )
        placements = [
            _placement(size, 1, s, 1, pb, a * d, n)
            for size, s, d, pb, a, n in zip(x_shape[2:], strides, dilations, pads[:2], tap, out)
        ]
        samples = _sampling_conv(
            b,
            padded,
            tap_offset,
            ones,
            placements,
            out,
            dtype,
            strides=strides,
            dilations=[1, 1],
            group=channels,
            deformable_group=offset_group,
        )
        tap_mask = ov(b, "StridedSlice", masks, first, last, step, **pick)  # (N, og, 1, *out)
        weighted = ov(
            b, "Multiply", _reshape(b, samples, per_group, "per_offset_group"), tap_mask, auto_broadcast="numpy"
        )
        columns.append(_reshape(b, weighted, [batch, channels, 1, *out], "column"))
    stacked = _reshape(b, ov(b, "Concat", *columns, axis=2), [batch, channels * len(taps), *out], "im2col")
    out_channels = w_shape[0]
    window = dict(strides=[1, 1], pads_begin=[0, 0], pads_end=[0, 0], dilations=[1, 1], auto_pad="explicit")
    if group == 1:
        return ov(b, "Convolution", stacked, _reshape(b, m["w"], [out_channels, -1, 1, 1], "w_columns"), **window)
    w_grouped = _reshape(b, m["w"], [group, out_channels // group, -1, 1, 1], "w_columns")
    return ov(b, "GroupConvolution", stacked, w_grouped, **window)


@lower("onnx", "openvino", "DeformConv", inputs=(3, 4, 5), names=("x", "w", "offset", "bias", "mask"))
def _deform_conv(b, m):
    node = m.root
    x, w, offset = m["x"], m["w"], m["offset"]
    dtype = np.dtype(np_dtype(x))
    if dtype not in (np.float32, np.float16):
        raise Refuse(f"DeformConv on {x.dtype} (opset1 DeformableConvolution is checked on float32 and float16)")
    x_shape, w_shape, offset_shape = static_shape(x), static_shape(w), static_shape(offset)
    if len(x_shape) != 4 or len(w_shape) != 4:
        raise Refuse(f"DeformConv input of rank {len(x_shape)} (opset1 DeformableConvolution is 2-D)")
    spatial = 2
    kernel = list(w_shape[2:])
    if list(attr(node, "kernel_shape", kernel)) != kernel:
        raise Refuse(f"kernel_shape {list(attr(node, 'kernel_shape'))} differs from the weights' {kernel}")
    group, offset_group = int(attr(node, "group", 1)), int(attr(node, "offset_group", 1))
    channels, out_channels = x_shape[1], w_shape[0]
    if channels % group or out_channels % group or channels // group != w_shape[1] or channels % offset_group:
        raise Refuse(
            f"{channels} input channels, weights {w_shape}: do not fit group={group}, offset_group={offset_group}"
        )
    strides = list(attr(node, "strides", [1] * spatial))
    dilations = list(attr(node, "dilations", [1] * spatial))
    pads = list(attr(node, "pads", [0] * 2 * spatial))
    if len(strides) != spatial or len(dilations) != spatial or len(pads) != 2 * spatial:
        raise Refuse("strides, dilations or pads do not have one value per spatial axis")
    out = [_output_size(*args) for args in zip(x_shape[2:], kernel, strides, dilations, pads[:2], pads[2:])]
    if min(out) < 1:
        raise Refuse(f"the kernel {kernel} (dilations {dilations}) does not fit the padded input")
    expected = (x_shape[0], offset_group * math.prod(kernel) * spatial, *out)
    if offset_shape != expected:
        raise Refuse(f"offset of shape {offset_shape}, expected {expected}")
    mask = m.values.get("mask")
    if mask is not None and static_shape(mask) != (x_shape[0], offset_group * math.prod(kernel), *out):
        raise Refuse(
            f"mask of shape {static_shape(mask)}, expected {(x_shape[0], offset_group * math.prod(kernel), *out)}"
        )

    padded = ov(
        b,
        "Pad",
        x,
        i64(b, [0, 0, 1, 1], "pads_begin"),
        i64(b, [0, 0, 1, 1], "pads_end"),
        const(b, 0, dtype, "zero"),
        pad_mode="constant",
    )
    if mask is None:
        placements = [
            _placement(*args, 0, n) for args, n in zip(zip(x_shape[2:], kernel, strides, dilations, pads[:2]), out)
        ]
        y = _sampling_conv(
            b,
            padded,
            offset,
            w,
            placements,
            out,
            dtype,
            strides=strides,
            dilations=dilations,
            group=group,
            deformable_group=offset_group,
        )
    else:
        y = _modulated(b, m, padded, (x_shape, w_shape, kernel, strides, dilations, pads, out, group, offset_group))
    bias = m.values.get("bias")
    if bias is None:
        return y
    return ov(b, "Add", y, _reshape(b, bias, [1, out_channels, 1, 1], "bias_shape"), auto_broadcast="numpy")
