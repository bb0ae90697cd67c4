"""Sorting and selection kernels: top_k, sort, unique, non_max_suppression.

Conventions
-----------
Indices are int64.  Ordering is stable: among equal values the lower index
comes first, whether sorting up or down (ONNX ``TopK``).  NaN sorts as larger
than every number (numpy's order).

* :func:`top_k` always returns its ``k`` elements sorted; that is a valid
  answer for ``sorted=False`` too, where the order is unspecified.
* :func:`unique` returns ONNX ``Unique``'s four outputs: the unique values
  (ascending, or in order of first occurrence when ``sorted=False``), the
  index of each one's first occurrence, the inverse indices and the counts.
  With ``axis`` it finds unique slices along that axis.
* :func:`non_max_suppression` is ONNX ``NonMaxSuppression``: per image and
  class, boxes scoring strictly above ``score_threshold`` are visited by
  decreasing score (ties: lower box index first), and a box is kept unless
  its IoU with an already kept box exceeds ``iou_threshold``.  Output rows
  are ``[image, class, box]`` in (image, class, selection) order.
"""

from __future__ import annotations

import numpy as np

from ..errors import ExecutionError
from ._common import normalize_axis


def _stable_order(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Indices that sort ``x`` along ``axis``; equal values keep index order."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    # Sort the reversed axis ascending, then reverse the result: values end up
    # descending while equal values come out in increasing original index.
    n = x.shape[axis]
    reversed_order = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return n - 1 - np.flip(reversed_order, axis)


def sort(x: np.ndarray, axis: int = -1, descending: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Stable sort along ``axis``; returns ``(values, indices)``."""
    x = np.asarray(x)
    axis = normalize_axis(axis, x.ndim)
    order = _stable_order(x, axis, descending)
    return np.take_along_axis(x, order, axis=axis), order.astype(np.int64)


def top_k(x: np.ndarray, k: int, axis: int = -1, largest: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest (or smallest) elements along ``axis``: ``(values, indices)``."""
    x = np.asarray(x)
    axis = normalize_axis(axis, x.ndim)
    k = int(k)
    if not 0 <= k <= x.shape[axis]:
        raise ExecutionError(f"top_k: k={k} is outside [0, {x.shape[axis]}]")
    values, indices = sort(x, axis, descending=largest)
    keep = np.arange(k)
    return np.take(values, keep, axis=axis), np.take(indices, keep, axis=axis)


def unique(x: np.ndarray, axis: int | None = None, sorted: bool = True):
    """ONNX ``Unique``: ``(values, first_indices, inverse_indices, counts)``."""
    x = np.asarray(x)
    if axis is not None:
        axis = normalize_axis(axis, x.ndim)
    values, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not sorted:
        # Renumber the unique values by first occurrence.
        by_occurrence = np.argsort(first, kind="stable")
        rank = np.empty_like(by_occurrence)
        rank[by_occurrence] = np.arange(by_occurrence.size)
        values = np.take(values, by_occurrence, axis=0 if axis is None else axis)
        first, counts, inverse = first[by_occurrence], counts[by_occurrence], rank[inverse]
    as_int64 = [a.astype(np.int64) for a in (first, inverse, counts)]
    return (values, *as_int64)


def _corners(boxes: np.ndarray, center_point_box: bool) -> np.ndarray:
    """``(..., 4)`` boxes as ``(y1, x1, y2, x2)`` with y1 <= y2 and x1 <= x2."""
    if center_point_box:
        xc, yc, w, h = np.moveaxis(boxes, -1, 0)
        return np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], axis=-1)
    y1, x1, y2, x2 = np.moveaxis(boxes, -1, 0)
    return np.stack([np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2), np.maximum(x1, x2)], axis=-1)


def _iou_matrix(corners: np.ndarray) -> np.ndarray:
    """Pairwise intersection-over-union of ``(n, 4)`` corner boxes (0 when degenerate)."""
    y1, x1, y2, x2 = corners.T
    area = (y2 - y1) * (x2 - x1)
    height = np.clip(np.minimum(y2[:, None], y2) - np.maximum(y1[:, None], y1), 0, None)
    width = np.clip(np.minimum(x2[:, None], x2) - np.maximum(x1[:, None], x1), 0, None)
    intersection = height * width
    union = area[:, None] + area - intersection
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = intersection / union
    return np.where((area[:, None] > 0) & (area > 0) & (union > 0), iou, 0.0)


def _select(corners, scores, max_boxes, iou_threshold, score_threshold):
    """Greedy NMS for one image and class; returns kept box indices in order."""
    candidates = np.flatnonzero(scores > score_threshold) if score_threshold is not None else np.arange(scores.size)
    candidates = candidates[_stable_order(scores[candidates], 0, descending=True)]
    iou = _iou_matrix(corners[candidates])
    kept: list[int] = []
    for i in range(candidates.size):
        if len(kept) >= max_boxes:
            break
        if not kept or np.all(iou[i, kept] <= iou_threshold):
            kept.append(i)
    return candidates[kept]


def non_max_suppression(
    boxes: np.ndarray,
    scores: np.ndarray,
    max_output_boxes_per_class: int = 0,
    iou_threshold: float = 0.0,
    score_threshold: float | None = None,
    center_point_box: bool = False,
) -> np.ndarray:
    """Selected ``[image, class, box]`` triples, int64 ``(n, 3)``.

    ``boxes``: ``(images, boxes, 4)``, corners ``(y1, x1, y2, x2)`` or, with
    ``center_point_box``, ``(x_center, y_center, width, height)``;
    ``scores``: ``(images, classes, boxes)``.
    """
    boxes, scores = np.asarray(boxes, dtype=np.float64), np.asarray(scores, dtype=np.float64)
    rows = []
    if max_output_boxes_per_class > 0:
        corners = _corners(boxes, center_point_box)
        for image in range(scores.shape[0]):
            for cls in range(scores.shape[1]):
                for box in _select(
                    corners[image],
                    scores[image, cls],
                    int(max_output_boxes_per_class),
                    float(iou_threshold),
                    score_threshold,
                ):
                    rows.append((image, cls, box))
    return np.array(rows, dtype=np.int64).reshape(-1, 3)
