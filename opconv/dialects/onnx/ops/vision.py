"""Vision ops: GridSample, AffineGrid, NonMaxSuppression.

Numerics in :mod:`opconv.kernels.vision` and :mod:`opconv.kernels.sort`.
GridSample-16 is 4-D only and names its modes ``bilinear`` / ``bicubic``;
GridSample-20 is N-d with the modes renamed ``linear`` / ``cubic``.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import sort as S
from ....kernels import vision as V
from ..executor import onnx_op

_MODES_16 = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}


@onnx_op("GridSample", since=16)
def grid_sample_16(ctx, x, grid, *, align_corners, mode, padding_mode):
    if x.ndim != 4:
        raise ExecutionError(f"GridSample-16 takes a 4-D input, got rank {x.ndim}")
    if mode not in _MODES_16:
        raise ExecutionError(f"unknown mode {mode!r}; expected one of {sorted(_MODES_16)}")
    return V.grid_sample(x, grid, _MODES_16[mode], padding_mode, bool(align_corners))


@onnx_op("GridSample", since=[20, 22])
def grid_sample_20(ctx, x, grid, *, align_corners, mode, padding_mode):
    return V.grid_sample(x, grid, mode, padding_mode, bool(align_corners))


@onnx_op("AffineGrid", since=20)
def affine_grid_20(ctx, theta, size, *, align_corners):
    return V.affine_grid(theta, np.asarray(size).reshape(-1).tolist(), bool(align_corners))


def _scalar(t, default):
    return default if t is None or np.size(t) == 0 else np.asarray(t).reshape(-1)[0].item()


@onnx_op("NonMaxSuppression", since=[10, 11])
def non_max_suppression_10(
    ctx, boxes, scores, max_output_boxes_per_class=None, iou_threshold=None, score_threshold=None, *, center_point_box
):
    return S.non_max_suppression(
        boxes,
        scores,
        int(_scalar(max_output_boxes_per_class, 0)),
        float(_scalar(iou_threshold, 0.0)),
        _scalar(score_threshold, None),
        bool(center_point_box),
    )
