"""TopK (modes max/min, sorts value/index/none) and NonMaxSuppression-1."""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import sort as ks
from ..executor import numpy_dtype, ov_op
from ._common import scalar

_LARGEST = {"max": True, "min": False}


@ov_op("TopK")
def top_k(ctx, x, k, *, axis, mode, sort, index_element_type="int32"):
    largest = _LARGEST.get(str(mode).lower())
    if largest is None:
        raise ExecutionError(f"unknown TopK mode {mode!r}; expected 'max' or 'min'")
    axis = axis % x.ndim
    values, indices = ks.top_k(x, scalar(k), axis, largest)
    if str(sort).lower() == "index":
        # The same k elements, listed by ascending index.
        order = np.argsort(indices, axis=axis, kind="stable")
        values, indices = np.take_along_axis(values, order, axis), np.take_along_axis(indices, order, axis)
    # "value" (and "none", whose order the specification leaves free) keeps the value order.
    return values, indices.astype(numpy_dtype(index_element_type))


_ENCODINGS = {"corner": False, "center": True}


@ov_op("NonMaxSuppression")
def non_max_suppression(
    ctx,
    boxes,
    scores,
    max_output_boxes_per_class=None,
    iou_threshold=None,
    score_threshold=None,
    *,
    box_encoding="corner",
    sort_result_descending=True,
):
    center = _ENCODINGS.get(str(box_encoding).lower())
    if center is None:
        raise ExecutionError(f"unknown box_encoding {box_encoding!r}")
    limit = 0 if max_output_boxes_per_class is None else scalar(max_output_boxes_per_class)
    iou = 0.0 if iou_threshold is None else float(np.asarray(iou_threshold).reshape(-1)[0])
    threshold = None if score_threshold is None else float(np.asarray(score_threshold).reshape(-1)[0])
    selected = ks.non_max_suppression(boxes, scores, limit, iou, threshold, center)
    if sort_result_descending and len(selected):
        # Across classes and images, by descending score (stable: ties keep image/class order).
        picked = np.asarray(scores)[selected[:, 0], selected[:, 1], selected[:, 2]]
        selected = selected[np.argsort(-picked, kind="stable")]
    return selected
