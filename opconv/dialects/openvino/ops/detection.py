"""Detection-head layers: ROI pooling (plain, position-sensitive, deformable), YOLO region/reorg, prior boxes.

The numerics are the shared kernels of :mod:`opconv.kernels.vision`; this
module adds OpenVINO's conventions: ``pooled_h``/``pooled_w`` and ``method``
names, ``mode`` spellings, the output size of PS ROI pooling (``group_size``
squared bins), RegionYolo's flattening of ``axis..end_axis`` and its
``mask``, and prior-box sizes read from the ``output_size``/``image_size``
inputs.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import vision
from ..executor import ov_op
from ._common import ints


def _until_terminator(kernel, data, rois, *args):
    """``kernel`` on the rois before the first batch index -1 (Caffe's end-of-list mark); zeros after it."""
    rois = np.asarray(rois)
    ends = np.flatnonzero(rois[:, 0].astype(np.int64) == -1)
    if not ends.size:
        return kernel(data, rois, *args)
    head = kernel(data, rois[: ends[0]], *args)
    return np.concatenate([head, np.zeros((rois.shape[0] - ends[0],) + head.shape[1:], head.dtype)])


@ov_op("ROIPooling")
def roi_pooling(ctx, data, rois, *, pooled_h, pooled_w, spatial_scale, method="max", output_size=None, output_roi=None):
    method = (method or "max").lower()
    if method == "max":  # Caffe's ROI max pooling, as ONNX MaxRoiPool
        return _until_terminator(vision.max_roi_pool, data, rois, (pooled_h, pooled_w), spatial_scale)
    if method == "bilinear":  # rois normalized to [0, 1]; spatial_scale plays no part
        return _until_terminator(vision.roi_pool_bilinear, data, rois, (pooled_h, pooled_w))
    raise ExecutionError(f"unknown ROIPooling method {method!r}; expected 'max' or 'bilinear'")


@ov_op("PSROIPooling")
def psroi_pooling(
    ctx, data, rois, *, output_dim, group_size=1, spatial_scale, mode="average", spatial_bins_x=1, spatial_bins_y=1
):
    mode = (mode or "average").lower()
    if mode == "average":
        return _until_terminator(vision.ps_roi_pool_average, data, rois, output_dim, group_size, spatial_scale)
    if mode == "bilinear":
        return _until_terminator(
            vision.ps_roi_pool_bilinear,
            data,
            rois,
            output_dim,
            group_size,
            spatial_scale,
            spatial_bins_x,
            spatial_bins_y,
        )
    raise ExecutionError(f"unknown PSROIPooling mode {mode!r}; expected 'average' or 'bilinear'")


@ov_op("DeformablePSROIPooling")
def deformable_psroi_pooling(
    ctx,
    data,
    rois,
    offsets=None,
    *,
    output_dim,
    spatial_scale,
    group_size=1,
    mode="bilinear_deformable",
    spatial_bins_x=1,
    spatial_bins_y=1,
    trans_std=1.0,
    part_size=1,
):
    if (mode or "bilinear_deformable").lower() != "bilinear_deformable":
        raise ExecutionError(f"unknown DeformablePSROIPooling mode {mode!r}; expected 'bilinear_deformable'")
    return _until_terminator(
        lambda d, r: vision.deformable_ps_roi_pool(
            d,
            r,
            None if offsets is None else offsets[: len(r)],
            output_dim,
            group_size,
            spatial_scale,
            spatial_bins_x,
            spatial_bins_y,
            trans_std,
            part_size,
        ),
        data,
        rois,
    )


@ov_op("ReorgYolo")
def reorg_yolo(ctx, data, *, stride):
    return vision.reorg(data, stride)


@ov_op("RegionYolo")
def region_yolo(ctx, data, *, axis, coords, classes, end_axis, num, do_softmax=True, mask=(), anchors=()):
    if do_softmax:  # YOLO v2: every region, then axis..end_axis flattened into one
        y = vision.region_yolo(data, coords, classes, num, True)
        rank = y.ndim
        first, last = axis % rank, end_axis % rank
        return y.reshape(y.shape[:first] + (int(np.prod(y.shape[first : last + 1])),) + y.shape[last + 1 :])
    return vision.region_yolo(data, coords, classes, len(mask or ()), False)  # YOLO v3: the masked regions


@ov_op("PriorBox")
def prior_box(
    ctx,
    output_size,
    image_size,
    *,
    offset,
    min_size=(),
    max_size=(),
    aspect_ratio=(),
    flip=False,
    clip=False,
    step=0.0,
    variance=(),
    scale_all_sizes=True,
    fixed_ratio=(),
    fixed_size=(),
    density=(),
):
    return vision.prior_boxes(
        ints(output_size),
        ints(image_size),
        min_size=min_size or (),
        max_size=max_size or (),
        aspect_ratio=aspect_ratio or (),
        flip=bool(flip),
        clip=bool(clip),
        step=step or 0.0,
        offset=offset,
        variance=variance or (),
        scale_all_sizes=scale_all_sizes,
        fixed_ratio=fixed_ratio or (),
        fixed_size=fixed_size or (),
        density=density or (),
    )


@ov_op("PriorBoxClustered")
def prior_box_clustered(
    ctx,
    output_size,
    image_size,
    *,
    offset,
    width=(1.0,),
    height=(1.0,),
    clip=True,
    step=0.0,
    step_w=0.0,
    step_h=0.0,
    variance=(),
):
    step = step or 0.0
    return vision.clustered_prior_boxes(
        ints(output_size),
        ints(image_size),
        widths=width,
        heights=height,
        clip=bool(clip),
        step_w=step_w or step,
        step_h=step_h or step,
        offset=offset,
        variance=variance or (),
    )
