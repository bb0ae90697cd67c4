"""opconv.kernels.resize against onnxruntime's Resize (opset 19) and the area mode
against a direct overlap formula."""

from __future__ import annotations

import numpy as np
import pytest

from opconv.kernels import resize as K

from .test_kernels_helpers import assert_close, rng, run_ort

CTMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"]
SCALES = [[1, 1, 2.0, 1.5], [1, 1, 0.5, 0.75], [1, 1, 1.7, 0.6], [1, 1, 0.35, 3.0]]


def _ort_resize(x, attrs, scales=None, sizes=None, roi=None, axes=None):
    if axes is not None:
        attrs = {**attrs, "axes": axes}
    inputs = [
        x,
        None if roi is None else np.array(roi, np.float32),
        None if scales is None else np.array(scales, np.float32),
        None if sizes is None else np.array(sizes, np.int64),
    ]
    (out,) = run_ort("Resize", inputs, attrs, opset=19)
    return out


def _kernel_resize(x, attrs, scales=None, sizes=None, roi=None, axes=None):
    """Map ONNX Resize attributes/inputs onto the neutral kernel."""
    rank = x.ndim
    roi_pairs = None
    if roi is not None:
        n = len(roi) // 2
        full = [(0.0, 1.0)] * rank
        for axis, start, end in zip(axes or range(rank), roi[:n], roi[n:]):
            full[axis] = (float(np.float32(start)), float(np.float32(end)))
        roi_pairs = full
    shape, full_scales = K.resize_output_shape(
        x.shape,
        None if scales is None else np.float32(scales),
        sizes,
        axes,
        attrs.get("keep_aspect_ratio_policy", "stretch"),
    )
    return K.resize(
        x,
        shape,
        attrs.get("mode", "nearest"),
        attrs.get("coordinate_transformation_mode", "half_pixel"),
        full_scales,
        attrs.get("nearest_mode", "round_prefer_floor"),
        attrs.get("cubic_coeff_a", -0.75),
        bool(attrs.get("exclude_outside", 0)),
        roi_pairs,
        attrs.get("extrapolation_value", 0.0),
        bool(attrs.get("antialias", 0)),
    )


def _check(x, attrs, rtol=1e-5, atol=1e-5, **inputs):
    expected = _ort_resize(x, attrs, **inputs)
    assert_close(_kernel_resize(x, attrs, **inputs), expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("scales", SCALES)
def test_nearest_matches_ort(ctm, nearest_mode, scales):
    x = rng(1).standard_normal((1, 2, 5, 6)).astype(np.float32)
    _check(x, {"mode": "nearest", "coordinate_transformation_mode": ctm, "nearest_mode": nearest_mode}, scales=scales)


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("scales", SCALES)
def test_linear_matches_ort(ctm, scales):
    x = rng(2).standard_normal((2, 1, 5, 6)).astype(np.float32)
    _check(x, {"mode": "linear", "coordinate_transformation_mode": ctm}, scales=scales)


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("scales", SCALES)
@pytest.mark.parametrize("a,exclude_outside", [(-0.75, 0), (-0.5, 1), (-0.6, 0)])
def test_cubic_matches_ort(ctm, scales, a, exclude_outside):
    x = rng(3).standard_normal((1, 2, 5, 6)).astype(np.float32)
    attrs = {
        "mode": "cubic",
        "coordinate_transformation_mode": ctm,
        "cubic_coeff_a": a,
        "exclude_outside": exclude_outside,
    }
    _check(x, attrs, scales=scales)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("roi", [[0, 0, 0.2, 0.3, 1, 1, 0.8, 0.9], [0, 0, -0.2, 0.4, 1, 1, 0.9, 1.3]])
@pytest.mark.parametrize("sizes", [[1, 2, 4, 5], [1, 2, 7, 3], [1, 2, 1, 4]])
def test_tf_crop_and_resize_matches_ort(mode, roi, sizes):
    x = rng(4).standard_normal((1, 2, 5, 6)).astype(np.float32)
    attrs = {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": -3.5}
    _check(x, attrs, roi=roi, sizes=sizes)


def test_tf_crop_and_resize_with_scales_and_axes_matches_ort():
    x = rng(5).standard_normal((1, 2, 8, 6)).astype(np.float32)
    attrs = {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"}
    _check(x, attrs, roi=[0.1, 0.2, 0.6, 0.9], scales=[1.5, 0.8], axes=[2, 3])


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scales", [[1, 1, 0.5, 0.4], [1, 1, 0.3, 0.75], [1, 1, 0.6, 1.0]])
@pytest.mark.parametrize("ctm", ["half_pixel", "align_corners", "asymmetric"])
def test_antialias_matches_ort(mode, scales, ctm):
    x = rng(6).standard_normal((1, 2, 10, 12)).astype(np.float32)
    attrs = {"mode": mode, "antialias": 1, "coordinate_transformation_mode": ctm}
    _check(x, attrs, scales=scales)


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_sizes_with_aspect_policy_and_axes_match_ort(policy, mode):
    x = rng(7).standard_normal((1, 2, 6, 9)).astype(np.float32)
    _check(x, {"mode": mode, "keep_aspect_ratio_policy": policy}, sizes=[4, 13], axes=[2, 3])
    # (onnxruntime ignores the policy when axes are negative, so none here.)
    _check(x, {"mode": mode, "keep_aspect_ratio_policy": policy}, sizes=[13, 4], axes=[3, 2])


def test_trilinear_matches_ort():
    x = rng(8).standard_normal((1, 1, 4, 5, 6)).astype(np.float32)
    _check(x, {"mode": "linear"}, scales=[1, 1, 1.5, 0.6, 2.0])


def test_nearest_all_dims_and_uint8_match_ort():
    x = rng(9).integers(0, 255, (2, 3, 4, 5)).astype(np.uint8)
    _check(x, {"mode": "nearest", "coordinate_transformation_mode": "asymmetric"}, scales=[1.5, 2, 0.5, 1.4])


def test_float64_stays_float64():
    # onnxruntime has no double Resize: compare with its float32 result.
    x = rng(10).standard_normal((1, 1, 4, 5))
    expected = _ort_resize(x.astype(np.float32), {"mode": "cubic"}, scales=[1, 1, 2.5, 0.6])
    got = _kernel_resize(x, {"mode": "cubic"}, scales=[1, 1, 2.5, 0.6])
    assert got.dtype == np.float64
    assert_close(got.astype(np.float32), expected)


def slow_area(x, out_size, scale):
    y = np.zeros(out_size)
    for i in range(out_size):
        lo, hi = i / scale, min((i + 1) / scale, len(x))
        weights = [max(0.0, min(hi, j + 1) - max(lo, j)) for j in range(len(x))]
        y[i] = np.dot(weights, x) / sum(weights)
    return y


@pytest.mark.parametrize("in_size,out_size", [(8, 4), (7, 3), (5, 5), (3, 7), (10, 4)])
def test_area_matches_overlap_formula(in_size, out_size):
    x = rng(11).standard_normal((2, in_size))
    got = K.resize(x, [2, out_size], mode="area")
    expected = np.stack([slow_area(row, out_size, out_size / in_size) for row in x])
    assert_close(got, expected, rtol=1e-6, atol=1e-6)  # the default scale is float32


def test_area_integer_factor_is_block_mean():
    x = rng(12).standard_normal((1, 1, 6, 9)).astype(np.float32)
    got = K.resize(x, [1, 1, 2, 3], mode="area")
    assert_close(got, x.reshape(1, 1, 2, 3, 3, 3).mean(axis=(3, 5)))


def test_output_shape_helper():
    assert K.resize_output_shape([1, 3, 5, 7], scales=[1, 1, 1.5, 0.5]) == ([1, 3, 7, 3], [1, 1, 1.5, 0.5])
    assert K.resize_output_shape([5], scales=[1.4])[0] == [7]  # float32(1.4) * 5 rounds to 7.0
    shape, scales = K.resize_output_shape(
        [1, 3, 6, 9], sizes=[4, 4], axes=[2, 3], keep_aspect_ratio_policy="not_larger"
    )
    assert shape == [1, 3, 3, 4] and scales[2:] == [np.float32(4 / 9)] * 2


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "floor", "ceil"])
@pytest.mark.parametrize("scales", [[1, 1, 2.0, 1.5], [1, 1, 0.5, 0.75]])
def test_tf_half_pixel_for_nn_matches_ort_opset11(nearest_mode, scales):
    x = rng(13).standard_normal((1, 2, 5, 6)).astype(np.float32)
    attrs = {"mode": "nearest", "coordinate_transformation_mode": "tf_half_pixel_for_nn", "nearest_mode": nearest_mode}
    (expected,) = run_ort("Resize", [x, np.zeros(0, np.float32), np.array(scales, np.float32)], attrs, opset=11)
    assert_close(_kernel_resize(x, attrs, scales=scales), expected)
