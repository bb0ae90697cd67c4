"""Vision ops: Resize, GridSample, RoiAlign, MaxRoiPool, NMS (numerics: :mod:`opconv.kernels.resize`,
:mod:`opconv.kernels.vision`, :mod:`opconv.kernels.sort`).

The dialect spells ONNX's string attributes in upper case (``HALF_PIXEL``,
``ROIALIGN_AVG``); GridSample names its padding after Pad's modes
(PAD_VALUE = zeros, PAD_EDGE = border, PAD_REFLECT = reflection).
MaxRoiPool accepts NCHW or NHWC input and returns ``[rois, C, ph, pw]``.
NMS takes its thresholds as attributes.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import resize as R
from ....kernels import sort as S
from ....kernels import vision as V
from ..executor import hlo_op


@hlo_op("Resize")
def resize(
    ctx,
    x,
    roi=None,
    scales=None,
    sizes=None,
    *,
    mode,
    coordinate_transformation_mode,
    exclude_outside,
    nearest_mode,
    extrapolation_value,
    cubic_coeff_a,
):
    scales = None if scales is None or np.size(scales) == 0 else [float(s) for s in np.ravel(scales)]
    sizes = None if sizes is None or np.size(sizes) == 0 else [int(s) for s in np.ravel(sizes)]
    shape, full_scales = R.resize_output_shape(x.shape, scales, sizes)
    transform = coordinate_transformation_mode.lower()
    pairs = None
    if roi is not None and np.size(roi) and transform == "tf_crop_and_resize":
        roi = np.ravel(roi).astype(np.float64)
        pairs = list(zip(roi[: x.ndim], roi[x.ndim :]))
    # ONNX's coordinate transforms divide by the unrounded length input * scale when scales are given.
    length_resized = None if scales is None else [float(np.float32(n) * s) for n, s in zip(x.shape, full_scales)]
    return R.resize(
        x,
        shape,
        mode.lower(),
        transform,
        full_scales,
        nearest_mode.lower(),
        cubic_coeff_a,
        bool(exclude_outside),
        pairs,
        extrapolation_value,
        False,
        length_resized,
    )


_GRID_PADDING = {"PAD_VALUE": "zeros", "PAD_EDGE": "border", "PAD_REFLECT": "reflection"}


@hlo_op("GridSample")
def grid_sample(ctx, x, grid, *, mode, align_corners, padding_mode):
    if padding_mode not in _GRID_PADDING:
        raise ExecutionError(
            f"GridSample padding_mode {padding_mode} is not supported; use one of {', '.join(_GRID_PADDING)}"
        )
    return V.grid_sample(x, grid, mode.lower(), _GRID_PADDING[padding_mode], bool(align_corners))


@hlo_op("RoiAlign")
def roi_align(
    ctx,
    x,
    rois,
    batch_indices,
    *,
    mode,
    coordinate_transformation_mode,
    output_height,
    output_width,
    sampling_ratio,
    spatial_scale,
):
    return V.roi_align(
        x,
        rois,
        batch_indices,
        output_height,
        output_width,
        sampling_ratio,
        spatial_scale,
        "max" if mode == "ROIALIGN_MAX" else "avg",
        half_pixel=coordinate_transformation_mode == "ROIALIGN_HALF_PIXEL",
    )


@hlo_op("MaxRoiPool")
def max_roi_pool(ctx, x, rois, *, layout, pooled_shape, spatial_scale):
    if layout == "NHWC":
        x = np.transpose(x, (0, 3, 1, 2))
    return V.max_roi_pool(x, rois, pooled_shape, spatial_scale)


@hlo_op("NMS")
def nms(ctx, boxes, scores, *, max_output_boxes_per_class, iou_threshold, score_threshold, center_point_box):
    return S.non_max_suppression(
        boxes, scores, int(max_output_boxes_per_class), iou_threshold, score_threshold, bool(center_point_box)
    )
