"""Detection kernels: box decoding, anchor generation, score ordering and greedy non-maximum suppression.

Conventions
-----------
Boxes are corner rows ``(x0, y0, x1, y1)`` on the last axis.  Everything is
computed in the inputs' compute dtype (float32 for float32 inputs), in the
order of operations the OpenVINO CPU plugin uses, so that threshold decisions
(IoU against ``nms_threshold``, sizes against ``min_size``) land on the same
side as the runtime's.

* :func:`decode_boxes` applies predicted offsets to prior (anchor) boxes:
  ``corner`` adds them to the corners; ``center_size`` shifts the centre by
  ``delta * size`` and scales the size by ``exp(delta)`` (SSD and Faster
  R-CNN).  ``offset`` is 1 for pixel-inclusive coordinates (a box from 0 to 9
  is 10 wide) and 0 for continuous ones.
* :func:`box_iou` is the overlap of one box with many: boxes that neither
  overlap nor touch give 0, as do empty intersections.
* :func:`greedy_nms` visits boxes in a given order and keeps a box unless its
  IoU with an already kept box exceeds the threshold.
* :func:`descending` orders scores from high to low, ties by lower index.
* :func:`generate_anchors` is Faster R-CNN's anchor enumeration: one box per
  (ratio, scale) pair, ratio-major, centred on a ``base_size`` square.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import sort as sort_kernels
from ._common import upcast


def decode_boxes(
    priors: np.ndarray,
    deltas: np.ndarray,
    variances: np.ndarray | None = None,
    center_size: bool = False,
    offset: float = 0.0,
) -> np.ndarray:
    """Boxes ``(..., 4)`` from prior boxes and predicted deltas (each delta scaled by its variance first)."""
    priors, deltas = upcast(priors), upcast(deltas)
    dtype = np.result_type(priors, deltas)
    if variances is not None:
        deltas = upcast(variances).astype(dtype) * deltas
    if not center_size:
        return priors + deltas
    one, half = dtype.type(offset), dtype.type(0.5)
    size = priors[..., 2:] - priors[..., :2] + one
    center = priors[..., :2] + half * size
    new_center = deltas[..., :2] * size + center
    new_half = half * (np.exp(deltas[..., 2:]) * size)
    return np.concatenate([new_center - new_half, new_center + new_half], axis=-1)


def clip_boxes(boxes: np.ndarray, width: float, height: float) -> np.ndarray:
    """Corner boxes clamped into ``[0, width] x [0, height]``."""
    boxes = np.asarray(boxes)
    high = np.array([width, height, width, height], dtype=boxes.dtype)
    return np.maximum(np.minimum(boxes, high), boxes.dtype.type(0))


def box_iou(box: np.ndarray, boxes: np.ndarray, offset: float = 0.0) -> np.ndarray:
    """IoU of corner box ``(4,)`` with each of ``boxes`` ``(n, 4)``; ``offset`` is added to every side length."""
    dtype = boxes.dtype
    one, zero = dtype.type(offset), dtype.type(0)
    x0, y0, x1, y1 = box
    bx0, by0, bx1, by1 = boxes.T
    touching = (x0 <= bx1) & (y0 <= by1) & (bx0 <= x1) & (by0 <= y1)
    width = np.maximum(zero, np.minimum(x1, bx1) - np.maximum(x0, bx0) + one)
    height = np.maximum(zero, np.minimum(y1, by1) - np.maximum(y0, by0) + one)
    intersection = width * height
    area = (x1 - x0 + one) * (y1 - y0 + one)
    areas = (bx1 - bx0 + one) * (by1 - by0 + one)
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = intersection / (area + areas - intersection)
    return np.where(touching & (intersection > 0), iou, zero)


def greedy_nms(
    boxes: np.ndarray,
    order: Sequence[int] | np.ndarray,
    threshold: float,
    limit: int | None = None,
    offset: float = 0.0,
) -> np.ndarray:
    """Indices into ``boxes`` kept by greedy NMS over ``order``, in visiting order (at most ``limit``)."""
    order = np.asarray(order, dtype=np.int64)
    if order.size == 0 or (limit is not None and limit <= 0):
        return order[:0]
    candidates = np.asarray(boxes)[order]
    threshold = candidates.dtype.type(threshold)
    alive = np.ones(order.size, dtype=bool)
    kept: list[int] = []
    for i in range(order.size):
        if not alive[i]:
            continue
        kept.append(i)
        if limit is not None and len(kept) >= limit:
            break
        later = slice(i + 1, None)
        alive[later] &= ~(box_iou(candidates[i], candidates[later], offset) > threshold)
    return order[kept]


def descending(scores: np.ndarray) -> np.ndarray:
    """Indices ordering a 1-D ``scores`` from high to low; equal scores keep index order."""
    return sort_kernels.sort(np.asarray(scores), 0, descending=True)[1]


def generate_anchors(
    base_size: int,
    ratios: Sequence[float],
    scales: Sequence[float],
    offset: float = 1.0,
    round_sizes: bool = True,
    centered: bool = False,
) -> np.ndarray:
    """``(len(ratios) * len(scales), 4)`` float32 anchors ``(x0, y0, x1, y1)``, ratio-major.

    Each ratio (height / width) reshapes the ``base_size`` square keeping its
    area (sizes rounded half away from zero with ``round_sizes``), each scale
    multiplies both sides; ``centered`` moves the centre to the origin.
    """
    f = np.float32
    area = f(base_size * base_size)
    center = f(0.5) * (f(base_size) - f(offset))
    anchors = []
    for ratio in np.asarray(ratios, dtype=f):
        width = np.sqrt(area / ratio)
        if round_sizes:
            width = np.floor(width + f(0.5))
        height = width * ratio
        if round_sizes:
            height = np.floor(height + f(0.5))
        for scale in np.asarray(scales, dtype=f):
            half_w = f(0.5) * (width * scale - f(offset))
            half_h = f(0.5) * (height * scale - f(offset))
            anchors.append([center - half_w, center - half_h, center + half_w, center + half_h])
    out = np.asarray(anchors, dtype=f).reshape(-1, 4)
    if centered:
        out = out - f(0.5) * f(base_size)
    return out
