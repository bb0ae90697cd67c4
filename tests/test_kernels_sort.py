"""opconv.kernels.sort against onnxruntime (TopK, Unique, NonMaxSuppression)."""

from __future__ import annotations

import numpy as np
import pytest

from opconv.kernels import sort as K

from .test_kernels_helpers import assert_close, rng, run_ort


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("k", [1, 3, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float64])
def test_top_k_matches_ort(largest, axis, k, dtype):
    x = rng(1).integers(0, 4, (4, 5, 6)).astype(dtype)  # many ties
    attrs = {"axis": axis, "largest": largest, "sorted": 1}
    values, indices = run_ort("TopK", [x, np.array([k], np.int64)], attrs, n_outputs=2)
    got_values, got_indices = K.top_k(x, k, axis, bool(largest))
    assert_close(got_values, values)
    assert_close(got_indices, indices)


@pytest.mark.parametrize("descending", [False, True])
def test_sort_is_stable_both_ways(descending):
    x = np.array([3, 1, 3, 2, 1, 3])
    values, indices = K.sort(x, descending=descending)
    expected = [0, 2, 5, 3, 1, 4] if descending else [1, 4, 3, 0, 2, 5]
    assert indices.tolist() == expected
    assert_close(values, x[expected])


def test_top_k_uint8_largest():
    x = np.array([[0, 255, 7, 255]], np.uint8)
    values, indices = K.top_k(x, 2)
    assert values.tolist() == [[255, 255]] and indices.tolist() == [[1, 3]]


@pytest.mark.parametrize(
    "x",
    [
        np.array([2.0, 1.0, 1.0, 3.0, 4.0, 3.0], np.float32),
        np.array([[1, 3], [1, 3], [2, 0], [1, 3]], np.int64),
        np.array([5, 5, 5], np.int64),
    ],
)
@pytest.mark.parametrize("sorted_", [1, 0])
@pytest.mark.parametrize("axis", [None, 0])
def test_unique_matches_ort(x, sorted_, axis):
    attrs = {"sorted": sorted_}
    if axis is not None:
        attrs["axis"] = axis
    expected = run_ort("Unique", [x], attrs, n_outputs=4)
    got = K.unique(x, axis, bool(sorted_))
    for g, e in zip(got, expected):
        assert_close(g, e)


def test_unique_along_inner_axis_matches_ort():
    x = np.array([[1, 0, 1, 2], [3, 5, 3, 4]], np.float32)
    for sorted_ in (0, 1):
        expected = run_ort("Unique", [x], {"sorted": sorted_, "axis": 1}, n_outputs=4)
        for g, e in zip(K.unique(x, 1, bool(sorted_)), expected):
            assert_close(g, e)


def _random_boxes(r, images, n, center):
    centers = r.uniform(0, 10, (images, n, 2))
    sizes = r.uniform(0.5, 4, (images, n, 2))
    if center:
        return np.concatenate([centers, sizes], axis=-1).astype(np.float32)
    first, second = centers - sizes / 2, centers + sizes / 2
    boxes = np.concatenate([first, second], axis=-1)
    flip = r.random((images, n)) < 0.3  # some boxes given by the other diagonal
    boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]
    return boxes.astype(np.float32)


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize(
    "max_boxes,iou,score", [(3, 0.5, None), (10, 0.3, 0.2), (0, 0.5, None), (2, 0.0, 0.5), (20, 1.0, None)]
)
def test_nms_matches_ort(center, max_boxes, iou, score):
    r = rng(2)
    boxes = _random_boxes(r, 2, 12, center)
    scores = r.random((2, 3, 12)).astype(np.float32)
    scores[0, 0, 3] = scores[0, 0, 5]  # a tie
    inputs = [
        boxes,
        scores,
        np.array([max_boxes], np.int64),
        np.array([iou], np.float32),
        None if score is None else np.array([score], np.float32),
    ]
    (expected,) = run_ort("NonMaxSuppression", inputs, {"center_point_box": center})
    got = K.non_max_suppression(boxes, scores, max_boxes, iou, score, bool(center))
    assert_close(got, expected)
