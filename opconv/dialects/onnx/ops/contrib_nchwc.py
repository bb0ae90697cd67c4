"""ONNX Runtime's blocked-layout operators (com.microsoft.nchwc): ReorderInput, ReorderOutput, Conv, MaxPool,
AveragePool, GlobalMaxPool, GlobalAveragePool, Upsample.

onnxruntime's level-3 optimizer (``ORT_ENABLE_ALL``) rewrites a CNN's 4-D float convolutions and pools into these
when it saves the optimized model.  Their tensors are in the blocked NCHWc layout of
:mod:`opconv.kernels.nchwc` (which also says how the block size is found).  Each kernel here unblocks its input,
runs opconv's own ai.onnx kernel, and blocks the result again, so that every value (padding channels included)
is stored as onnxruntime stores it:

* ReorderInput blocks an NCHW (or, with ``channels_last``, NHWC) tensor; ReorderOutput unblocks it, keeping
  ``channels`` channels.
* Conv is FusedConv's ``activation(Conv(X, W, B) + Sum)``; its input is blocked unless it has fewer channels than
  a block (the model's first convolution reads the plain image), and depthwise when ``group`` > 1.
* Upsample scales H and W by whole factors (``scales``, 4 ints), ``nearest`` (repeat) or ``linear``.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import nchwc as B
from ..executor import onnx_op
from .contrib_linalg import fused_conv
from .pool import average_pool, global_average_pool, global_max_pool, max_pool
from .resize import resize_11

NCHWC = B.NCHWC


def _model(ctx):
    """The block sizes the node's graph allows (see :func:`opconv.kernels.nchwc.fits_graph`)."""
    graph = ctx.node.graph if ctx is not None else None
    return B.fits_graph(graph) if graph is not None else (lambda b: True)


@onnx_op("ReorderInput", since=1, domain=NCHWC)
def reorder_input(ctx, x, *, channels_last):
    return B.block(np.asarray(x), B.block_size(_model(ctx)), bool(channels_last))


@onnx_op("ReorderOutput", since=1, domain=NCHWC)
def reorder_output(ctx, x, *, channels, channels_last):
    cp = np.shape(x)[1]
    channels = int(channels) or cp
    b = B.block_size(_model(ctx), lambda b: cp % b == 0 and B.padded(channels, b) == cp)
    return B.unblock(np.asarray(x), b, channels, bool(channels_last))


@onnx_op("Conv", since=1, domain=NCHWC)
def conv(
    ctx,
    x,
    w,
    bias=None,
    sum_=None,
    *,
    activation,
    activation_params,
    auto_pad,
    dilations,
    group,
    kernel_shape,
    pads,
    strides,
):
    x, w = np.asarray(x), np.asarray(w)
    c, o = x.shape[1], w.shape[0]
    depthwise = group > 1

    def reads_blocked(b):  # the model's first convolution reads a plain NCHW input of fewer channels than a block
        return depthwise or c >= b

    size = B.block_size(_model(ctx), lambda b: o % b == 0 and (c % b == 0 if reads_blocked(b) else True))
    input_blocked = reads_blocked(size)
    nchw = B.unblock(x, size) if input_blocked else x
    filters = B.unblock_filter(w, size, input_blocked and not depthwise)
    total = None if sum_ is None else B.unblock(np.asarray(sum_), size)
    y = fused_conv(
        ctx,
        nchw,
        filters,
        bias,
        total,
        activation=activation,
        activation_params=activation_params,
        auto_pad=auto_pad,
        dilations=dilations,
        group=group,
        kernel_shape=kernel_shape,
        pads=pads,
        strides=strides,
    )
    return B.block(y, size)


def _blocked(kernel, ctx, x, **attrs):
    """``kernel`` (an ai.onnx pool or resize) run on the unblocked channels of ``x``."""
    x = np.asarray(x)
    size = B.block_size(_model(ctx), lambda b: x.shape[1] % b == 0)
    return B.block(kernel(ctx, B.unblock(x, size), **attrs), size)


@onnx_op("MaxPool", since=1, domain=NCHWC)
def nchwc_max_pool(ctx, x, **attrs):
    return _blocked(max_pool, ctx, x, **attrs)


@onnx_op("AveragePool", since=1, domain=NCHWC)
def nchwc_average_pool(ctx, x, **attrs):
    return _blocked(average_pool, ctx, x, **attrs)


@onnx_op("GlobalMaxPool", since=1, domain=NCHWC)
def nchwc_global_max_pool(ctx, x):
    return _blocked(global_max_pool, ctx, x)


@onnx_op("GlobalAveragePool", since=1, domain=NCHWC)
def nchwc_global_average_pool(ctx, x):
    return _blocked(global_average_pool, ctx, x)


def _upsample(ctx, x, *, coordinate_transformation_mode, mode, scales):
    if mode not in ("nearest", "linear"):
        raise ExecutionError(f"unknown Upsample mode {mode!r}; expected 'nearest' or 'linear'")
    factors = np.asarray([float(s) for s in scales] if scales is not None else [1.0] * x.ndim, np.float32)
    # Whole factors: nearest repeats each element (the floor of x / scale).
    return resize_11(
        ctx,
        x,
        None,
        factors,
        None,
        mode=mode,
        nearest_mode="floor",
        cubic_coeff_a=-0.75,
        coordinate_transformation_mode="asymmetric" if mode == "nearest" else coordinate_transformation_mode,
        exclude_outside=0,
        extrapolation_value=0.0,
    )


@onnx_op("Upsample", since=1, domain=NCHWC)
def nchwc_upsample(ctx, x, *, coordinate_transformation_mode, mode, scales):
    return _blocked(
        _upsample, ctx, x, coordinate_transformation_mode=coordinate_transformation_mode, mode=mode, scales=scales
    )
