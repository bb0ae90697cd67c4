"""Pooling: AveragePool, MaxPool, LpPool, the global pools, MaxUnpool, MaxRoiPool, RoiAlign.

Numerics in :mod:`opconv.kernels.pool` and :mod:`opconv.kernels.vision`.
The windowed pools gained attributes over the versions (``count_include_pad``
at 7, ``ceil_mode`` at 10, ``dilations`` at 10/18/19, ``storage_order`` and the
``Indices`` output at 8) but never changed what an existing attribute means,
so one function per op serves every version: an attribute the node's version
does not have takes the value that reproduces that version's behaviour.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import pool as P
from ....kernels import vision as V
from ....kernels.conv import split_pads
from ..executor import onnx_op
from .conv import conv_pads


def pool_window(x, kernel_shape, strides, dilations, pads, auto_pad):
    if kernel_shape is None:
        raise ExecutionError("kernel_shape is required")
    kernel = [int(k) for k in kernel_shape]
    if len(kernel) != x.ndim - 2:
        raise ExecutionError(f"kernel_shape {kernel} does not fit input of rank {x.ndim}")
    begin, end = conv_pads(x.shape, kernel, strides, dilations, pads, auto_pad)
    return kernel, begin, end


@onnx_op("AveragePool", since=[1, 7, 10, 11, 19, 22])
def average_pool(ctx, x, *, auto_pad, kernel_shape, pads, strides, count_include_pad=0, ceil_mode=0, dilations=None):
    kernel, begin, end = pool_window(x, kernel_shape, strides, dilations, pads, auto_pad)
    return P.pool(x, "avg", kernel, strides, begin, end, dilations, bool(ceil_mode), bool(count_include_pad))


@onnx_op("MaxPool", since=[1, 8, 10, 11, 12, 22])
def max_pool(ctx, x, *, auto_pad, kernel_shape, pads, strides, storage_order=0, ceil_mode=0, dilations=None):
    kernel, begin, end = pool_window(x, kernel_shape, strides, dilations, pads, auto_pad)
    if ctx.output_used(1):
        return P.max_pool_with_indices(x, kernel, strides, begin, end, dilations, bool(ceil_mode), storage_order)
    y = P.pool(x, "max", kernel, strides, begin, end, dilations, bool(ceil_mode))
    return (y, None) if ctx.num_outputs > 1 else y


@onnx_op("LpPool", since=[1, 2, 11, 18, 22])
def lp_pool(ctx, x, *, auto_pad, kernel_shape, p, pads, strides, ceil_mode=0, dilations=None):
    kernel, begin, end = pool_window(x, kernel_shape, strides, dilations, pads, auto_pad)
    return P.pool(x, "lp", kernel, strides, begin, end, dilations, bool(ceil_mode), p=float(p))


@onnx_op("GlobalAveragePool", since=[1, 22])
def global_average_pool(ctx, x):
    return P.global_pool(x, "avg")


@onnx_op("GlobalMaxPool", since=[1, 22])
def global_max_pool(ctx, x):
    return P.global_pool(x, "max")


@onnx_op("GlobalLpPool", since=[1, 2, 22])
def global_lp_pool(ctx, x, *, p):
    return P.global_pool(x, "lp", float(p))


@onnx_op("MaxUnpool", since=[9, 11, 22])
def max_unpool(ctx, x, indices, output_shape=None, *, kernel_shape, pads, strides):
    begin, end = split_pads(pads, x.ndim - 2)
    shape = None if output_shape is None else [int(d) for d in np.asarray(output_shape).reshape(-1)]
    # The ONNX specification counts the indices in the tensor of the default (attribute-derived) shape and
    # places it at the origin of output_shape; onnxruntime counts them in the output instead.
    return P.max_unpool(x, indices, kernel_shape, strides, begin, end, shape, indices_of="default")


@onnx_op("MaxRoiPool", since=[1, 22])
def max_roi_pool(ctx, x, rois, *, pooled_shape, spatial_scale):
    return V.max_roi_pool(x, rois, pooled_shape, spatial_scale)


@onnx_op("RoiAlign", since=10)
def roi_align_10(ctx, x, rois, batch_indices, *, mode, output_height, output_width, sampling_ratio, spatial_scale):
    # Version 10 had no half-pixel shift (what version 16 calls "output_half_pixel").
    return V.roi_align(
        x, rois, batch_indices, output_height, output_width, sampling_ratio, spatial_scale, mode, half_pixel=False
    )


@onnx_op("RoiAlign", since=[16, 22])
def roi_align_16(
    ctx,
    x,
    rois,
    batch_indices,
    *,
    coordinate_transformation_mode,
    mode,
    output_height,
    output_width,
    sampling_ratio,
    spatial_scale,
):
    if coordinate_transformation_mode not in ("half_pixel", "output_half_pixel"):
        raise ExecutionError(f"unknown coordinate_transformation_mode {coordinate_transformation_mode!r}")
    return V.roi_align(
        x,
        rois,
        batch_indices,
        output_height,
        output_width,
        sampling_ratio,
        spatial_scale,
        mode,
        half_pixel=coordinate_transformation_mode == "half_pixel",
    )
