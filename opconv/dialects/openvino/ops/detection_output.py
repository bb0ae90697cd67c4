"""DetectionOutput-1 (SSD post-processing) and Proposal-1 (Faster R-CNN region proposals).

Both follow OpenVINO's CPU plugin where the specification leaves details open:
which entries of the flattened inputs mean what, how score ties are ordered
(higher score first, then lower prior index; the plugin leaves Proposal's ties
in no particular order, here they go by lower anchor index too), and how the
fixed-size output is padded (zero rows after the results, the first of them
marked with image id -1).
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import detection as kd
from ....kernels._common import downcast, upcast
from ..executor import ov_op

_CENTER_SIZE = {"caffe.priorboxparameter.corner": False, "caffe.priorboxparameter.center_size": True}


def _detection_rows(keep_top_k: int, top_k: int, images: int, classes: int, priors: int) -> int:
    # The output shape OpenVINO infers for DetectionOutput-1.
    if keep_top_k > 0:
        return images * keep_top_k
    if keep_top_k == -1 and top_k > 0:
        return images * top_k * classes
    return images * priors * classes


class _Priors:
    """One image's prior boxes (normalized corners), their variances and how many are valid."""

    def __init__(
        self, data: np.ndarray, count: int, normalized: bool, variance_encoded: bool, width: float, height: float
    ):
        rows = data[0].reshape(count, 4 if normalized else 5)
        self.boxes = rows[:, -4:]
        self.variances = None if variance_encoded else data[1][: count * 4].reshape(count, 4)
        self.valid = count
        if not normalized:
            # Unnormalized priors carry an image id first; -1 ends the list.
            ends = np.flatnonzero(rows[:, 0] == -1)
            self.valid = int(ends[0]) if ends.size else count
        self.scale = None if normalized else np.array([width, height, width, height], dtype=rows.dtype)

    def decode(self, priors: np.ndarray, deltas: np.ndarray, center_size: bool, clip: bool) -> np.ndarray:
        if self.scale is not None:
            priors = priors / self.scale
        boxes = kd.decode_boxes(priors, deltas, self.variances, center_size)
        return kd.clip_boxes(boxes, 1, 1) if clip else boxes


@ov_op("DetectionOutput")
def detection_output(
    ctx,
    box_logits,
    class_preds,
    proposals,
    aux_class_preds=None,
    aux_box_preds=None,
    *,
    num_classes,
    background_label_id=0,
    top_k=-1,
    variance_encoded_in_target=False,
    keep_top_k,
    code_type="caffe.PriorBoxParameter.CORNER",
    share_location=True,
    nms_threshold,
    confidence_threshold=0.0,
    clip_after_nms=False,
    clip_before_nms=False,
    decrease_label_id=False,
    normalized=False,
    input_height=1,
    input_width=1,
    objectness_score=0.0,
):
    center_size = _CENTER_SIZE.get(str(code_type).lower())
    if center_size is None:
        raise ExecutionError(
            f"unsupported code_type {code_type!r}; expected one of "
            "caffe.PriorBoxParameter.CORNER, caffe.PriorBoxParameter.CENTER_SIZE"
        )
    if (aux_class_preds is None) != (aux_box_preds is None):
        raise ExecutionError("DetectionOutput takes 3 or 5 inputs (aux_class_preds and aux_box_preds go together)")
    if keep_top_k is None or nms_threshold is None or num_classes is None:
        raise ExecutionError("num_classes, keep_top_k and nms_threshold are required")
    if decrease_label_id and background_label_id != 0:
        raise ExecutionError("decrease_label_id needs background_label_id 0")
    dtype = np.asarray(class_preds).dtype
    loc, conf, prior_data = upcast(box_logits), upcast(class_preds), upcast(proposals)
    images, prior_len, classes = conf.shape[0], 4 if normalized else 5, int(num_classes)
    prior_rows = 1 if variance_encoded_in_target else 2  # the priors, then their variances
    if prior_data.ndim != 3 or prior_data.shape[1] != prior_rows or prior_data.shape[2] % prior_len:
        raise ExecutionError(
            f"proposals must be [1 or N, {prior_rows}, priors * {prior_len}], got {list(prior_data.shape)}"
        )
    count = prior_data.shape[2] // prior_len
    loc_classes = 1 if share_location else classes
    if conf.shape[1] != count * classes or loc.shape[1] != count * loc_classes * 4:
        raise ExecutionError(
            f"{count} priors and {classes} classes need class_preds [N, {count * classes}] and "
            f"box_logits [N, {count * loc_classes * 4}], got {list(conf.shape)} and "
            f"{list(loc.shape)}"
        )
    # (N, L, P, 4) offsets; (N, C, P) scores.
    loc = loc.reshape(images, count, loc_classes, 4).transpose(0, 2, 1, 3)
    scores = conf.reshape(images, count, classes).transpose(0, 2, 1)
    arm_loc = None
    if aux_class_preds is not None:
        # Priors the auxiliary objectness rejects count as background only.
        rejected = upcast(aux_class_preds).reshape(images, count, 2)[..., 1] < objectness_score
        background = (np.arange(classes) == background_label_id).astype(scores.dtype)
        scores = np.where(rejected[:, None, :], background[None, :, None], scores)
        arm_loc = upcast(aux_box_preds).reshape(images, count, loc_classes, 4).transpose(0, 2, 1, 3)

    limit = int(keep_top_k[0])
    rows = _detection_rows(limit, top_k, images, classes, count)
    out = np.zeros((rows, 7), dtype=scores.dtype)
    written = 0
    for n in range(images):
        priors = _Priors(
            prior_data[n if prior_data.shape[0] > 1 else 0],
            count,
            normalized,
            variance_encoded_in_target,
            input_width,
            input_height,
        )
        if arm_loc is None:
            boxes = priors.decode(priors.boxes, loc[n], center_size, clip_before_nms)
        else:
            # Two-stage (RefineDet): the auxiliary offsets refine the priors, then the offsets apply to those;
            # the runtime (and OpenVINO's reference) divides the refined priors by input_width/height again
            # when not normalized.
            refined = priors.decode(priors.boxes, arm_loc[n], center_size, clip_before_nms)
            boxes = priors.decode(refined, loc[n], center_size, clip_before_nms)
        select = _select_mxnet if decrease_label_id else _select_caffe
        kept = select(
            scores[n, :, : priors.valid], boxes, background_label_id, top_k, confidence_threshold, nms_threshold
        )
        kept = _keep_best(kept, scores[n], limit)
        for c in sorted(kept):
            picked = kept[c]
            box = _class_boxes(boxes, c)[picked]
            if clip_after_nms:
                box = kd.clip_boxes(box, 1, 1)
            block = out[written : written + len(picked)]
            label = c - 1 if decrease_label_id else c
            block[:, 0], block[:, 1], block[:, 2], block[:, 3:] = n, label, scores[n, c, picked], box
            written += len(picked)
    if written < rows:
        out[written, 0] = -1
    return downcast(out.reshape(1, 1, rows, 7), dtype)


def _class_boxes(boxes: np.ndarray, c: int) -> np.ndarray:
    """Class ``c``'s decoded boxes: its own, or the shared ones (``share_location``)."""
    return boxes[0] if boxes.shape[0] == 1 else boxes[c]


def _best_first(scores: np.ndarray, candidates: np.ndarray, top_k: int) -> np.ndarray:
    """``candidates`` ordered by descending score (ties: lower index first), cut to ``top_k`` when >= 0."""
    ordered = candidates[kd.descending(scores)]
    return ordered[:top_k] if top_k >= 0 else ordered


def _select_caffe(scores, boxes, background, top_k, threshold, nms_threshold) -> dict[int, np.ndarray]:
    """Per class: priors scoring above the threshold, best ``top_k``, then NMS."""
    kept = {}
    for c in range(scores.shape[0]):
        if c == background:
            continue
        candidates = np.flatnonzero(scores[c] > threshold)
        order = _best_first(scores[c, candidates], candidates, top_k)
        kept[c] = kd.greedy_nms(_class_boxes(boxes, c), order, nms_threshold)
    return kept


def _select_mxnet(scores, boxes, background, top_k, threshold, nms_threshold) -> dict[int, np.ndarray]:
    """Per prior: its best non-background class (if at or above the threshold); best ``top_k`` of the image,
    then NMS within each class."""
    foreground = np.where((scores[1:] >= threshold) & (scores[1:] > -1), scores[1:], -np.inf)
    priors = np.flatnonzero(np.isfinite(foreground).any(axis=0))
    if priors.size == 0:
        return {}
    labels = foreground[:, priors].argmax(axis=0) + 1
    by_index = np.lexsort((priors, labels))  # class-major, as the runtime breaks score ties
    priors, labels = priors[by_index], labels[by_index]
    order = _best_first(scores[labels, priors], np.arange(priors.size), top_k)
    kept = {}
    for c in range(1, scores.shape[0]):
        in_class = priors[order[labels[order] == c]]
        kept[c] = kd.greedy_nms(_class_boxes(boxes, c), in_class, nms_threshold)
    return kept


def _keep_best(kept: dict[int, np.ndarray], scores: np.ndarray, limit: int) -> dict[int, np.ndarray]:
    """At most ``limit`` detections over all classes (-1: all), the highest scores; each class keeps its order."""
    total = sum(len(v) for v in kept.values())
    if limit <= -1 or total <= limit:
        return kept
    classes = np.concatenate([np.full(len(v), c) for c, v in kept.items()]).astype(np.int64)
    priors = np.concatenate(list(kept.values())).astype(np.int64)
    # Descending score; ties by prior index, then class.
    best = np.lexsort((classes, priors, -scores[classes, priors]))[:limit]
    return {c: priors[best][classes[best] == c] for c in kept}


_FRAMEWORKS = {"": False, "tensorflow": True}


@ov_op("Proposal")
def proposal(
    ctx,
    class_probs,
    bbox_deltas,
    image_shape,
    *,
    base_size,
    pre_nms_topn,
    post_nms_topn,
    nms_thresh,
    feat_stride,
    min_size,
    ratio,
    scale,
    clip_before_nms=True,
    clip_after_nms=False,
    normalize=False,
    box_size_scale=1.0,
    box_coordinate_scale=1.0,
    framework="",
):
    tensorflow = _FRAMEWORKS.get(str(framework or ""))
    if tensorflow is None:
        raise ExecutionError(f"unsupported framework {framework!r}; expected '' or 'tensorflow'")
    dtype = np.asarray(class_probs).dtype
    probs, deltas = upcast(class_probs), upcast(bbox_deltas)
    f = probs.dtype.type
    info = upcast(image_shape).reshape(-1).astype(probs.dtype)
    if info.size not in (3, 4):
        raise ExecutionError(
            f"image_shape holds [height, width, scale] or [height, width, scale_h, scale_w], got {info.size} values"
        )
    height, width = (info[1], info[0]) if tensorflow else (info[0], info[1])
    scale_h, scale_w = info[2], info[-1]
    if not (np.isfinite([height, width]).all() and height > 0 and width > 0):
        raise ExecutionError(f"image_shape needs a positive height and width, got {info[:2].tolist()}")
    if not (np.isfinite([scale_h, scale_w]).all() and scale_h >= 0 and scale_w >= 0):
        raise ExecutionError(f"image_shape needs non-negative scales, got {info[2:].tolist()}")
    # TensorFlow's convention: continuous coordinates, unrounded anchors centred on the cell, first axis as x.
    offset = 0.0 if tensorflow else 1.0
    anchors = kd.generate_anchors(
        base_size, ratio, scale, offset, round_sizes=not tensorflow, centered=tensorflow
    ).astype(probs.dtype)
    images, _, rows, cols = probs.shape
    a = anchors.shape[0]
    if probs.shape[1] != 2 * a or deltas.shape[:2] != (images, 4 * a) or deltas.shape[2:] != (rows, cols):
        raise ExecutionError(
            f"{a} anchors need class_probs [N, {2 * a}, H, W] and bbox_deltas [N, {4 * a}, H, W], "
            f"got {list(probs.shape)} and {list(deltas.shape)}"
        )

    # Every (row, col, anchor) in that order: anchor boxes shifted to their cell.
    grid_y, grid_x = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    if tensorflow:
        grid_x, grid_y = grid_y, grid_x
    shifts = (np.stack([grid_x, grid_y, grid_x, grid_y], axis=-1) * int(feat_stride)).astype(probs.dtype)
    starts = (shifts[:, :, None, :] + anchors).reshape(-1, 4)
    if tensorflow:
        starts = kd.clip_boxes(starts, width, height)
    delta_scale = np.array(
        [box_coordinate_scale, box_coordinate_scale, box_size_scale, box_size_scale], dtype=probs.dtype
    )
    min_w, min_h = f(min_size) * scale_w, f(min_size) * scale_h
    limit, topn = int(post_nms_topn), int(pre_nms_topn)
    out = np.zeros((images * limit, 5), dtype=probs.dtype)
    for n in range(images):
        d = deltas[n].reshape(a, 4, rows, cols).transpose(2, 3, 0, 1).reshape(-1, 4) / delta_scale
        boxes = kd.decode_boxes(starts, d, center_size=True, offset=offset)
        if clip_before_nms:
            boxes = kd.clip_boxes(boxes, width - f(offset), height - f(offset))
        sizes = boxes[:, 2:] - boxes[:, :2] + f(offset)
        # Boxes smaller than min_size (in the scaled image) score 0.
        large = (min_w <= sizes[:, 0]) & (min_h <= sizes[:, 1])
        score = probs[n, a:].transpose(1, 2, 0).reshape(-1) * large.astype(probs.dtype)
        order = kd.descending(score)[:topn]
        kept = kd.greedy_nms(boxes, order, nms_thresh, limit, offset)
        picked = boxes[kept]
        if clip_after_nms:
            picked = kd.clip_boxes(picked, width, height)
        if normalize:
            picked = picked / np.array([width, height, width, height], dtype=picked.dtype)
        block = out[n * limit : (n + 1) * limit]
        block[: len(kept), 0], block[: len(kept), 1:] = n, picked
        if len(kept) < limit:
            block[len(kept), 0] = -1
    return downcast(out, dtype)
