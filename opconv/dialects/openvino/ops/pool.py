"""AvgPool and MaxPool (opset1: no dilations, no indices output)."""

from __future__ import annotations

from ....kernels import pool as kp
from ..executor import ov_op
from ._common import explicit_pads


def _pool(x, mode, strides, pads_begin, pads_end, kernel, rounding_type, auto_pad, count_include_pad=False):
    begin, end = explicit_pads(auto_pad, x.shape[2:], kernel, strides, None, pads_begin, pads_end)
    return kp.pool(x, mode, kernel, strides, begin, end, ceil_mode=(rounding_type or "floor").lower() == "ceil",
                   count_include_pad=count_include_pad)


@ov_op("AvgPool")
def avg_pool(ctx, x, *, strides, pads_begin, pads_end, kernel, exclude_pad, rounding_type="floor",
             auto_pad="explicit"):
    return _pool(x, "avg", strides, pads_begin, pads_end, kernel, rounding_type, auto_pad,
                 count_include_pad=not exclude_pad)


@ov_op("MaxPool")
def max_pool(ctx, x, *, strides, pads_begin, pads_end, kernel, rounding_type="floor", auto_pad="explicit"):
    return _pool(x, "max", strides, pads_begin, pads_end, kernel, rounding_type, auto_pad)
