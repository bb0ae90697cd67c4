"""AvgPool and MaxPool (opset1: no dilations, no indices output)."""

from __future__ import annotations

import numpy as np

from ....kernels import pool as kp
from ..executor import ov_op
from ._common import explicit_pads


def _pool(x, mode, strides, pads_begin, pads_end, kernel, rounding_type, auto_pad, count_include_pad=False):
    begin, end = explicit_pads(auto_pad, x.shape[2:], kernel, strides, None, pads_begin, pads_end)
    # Unlike onnxruntime, the runtime keeps a ceil-mode window that starts in the end padding.
    geometry = dict(
        kernel=kernel,
        strides=strides,
        pads_begin=begin,
        pads_end=end,
        ceil_mode=(rounding_type or "floor").lower() == "ceil",
        keep_pad_windows=True,
    )
    y = kp.pool(x, mode, count_include_pad=count_include_pad, **geometry)
    if mode == "max" and np.issubdtype(y.dtype, np.floating):
        y = _lowest_finite_in_padding_only_windows(y, x.shape[2:], geometry)
    return y


def _lowest_finite_in_padding_only_windows(y, spatial, geometry):
    # The runtime pads max pooling with the lowest *finite* value, which a window of padding only returns.
    real = kp.pool(np.ones((1, 1, *spatial), y.dtype), "max", **geometry)  # -inf where no real element
    return np.where(np.isneginf(real), np.finfo(y.dtype).min, y)


@ov_op("AvgPool")
def avg_pool(ctx, x, *, strides, pads_begin, pads_end, kernel, exclude_pad, rounding_type="floor", auto_pad="explicit"):
    return _pool(
        x, "avg", strides, pads_begin, pads_end, kernel, rounding_type, auto_pad, count_include_pad=not exclude_pad
    )


@ov_op("MaxPool")
def max_pool(ctx, x, *, strides, pads_begin, pads_end, kernel, rounding_type="floor", auto_pad="explicit"):
    return _pool(x, "max", strides, pads_begin, pads_end, kernel, rounding_type, auto_pad)
