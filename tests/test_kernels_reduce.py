"""opconv.kernels.reduce against onnxruntime (Reduce*, ArgMax/ArgMin, CumSum)."""

from __future__ import annotations

import numpy as np
import pytest

from opconv.kernels import reduce as K

from .test_kernels_helpers import assert_close, rng, run_ort

ONNX_NAMES = {
    "sum": "ReduceSum",
    "mean": "ReduceMean",
    "max": "ReduceMax",
    "min": "ReduceMin",
    "prod": "ReduceProd",
    "l1": "ReduceL1",
    "l2": "ReduceL2",
    "sum_square": "ReduceSumSquare",
    "log_sum": "ReduceLogSum",
    "log_sum_exp": "ReduceLogSumExp",
}


@pytest.mark.parametrize("kind", sorted(ONNX_NAMES))
@pytest.mark.parametrize("axes", [None, [], [0], [-1], [0, 2], [1, -1]])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_matches_ort(kind, axes, keepdims):
    x = rng(1).uniform(0.1, 2.0, (3, 4, 5)).astype(np.float32)  # positive, so log_sum is defined
    x[0, 0, 0] = -0.5 if kind != "log_sum" else 0.5
    axes_input = None if axes is None else np.array(axes, np.int64)
    (expected,) = run_ort(ONNX_NAMES[kind], [x, axes_input], {"keepdims": keepdims}, opset=18)
    assert_close(K.reduce(x, kind, axes, bool(keepdims)), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", sorted(ONNX_NAMES))
def test_reduce_noop_with_empty_axes_matches_ort(kind):
    x = rng(2).uniform(0.1, 2.0, (2, 3)).astype(np.float32)
    (expected,) = run_ort(ONNX_NAMES[kind], [x, np.array([], np.int64)], {"noop_with_empty_axes": 1}, opset=18)
    assert_close(K.reduce(x, kind, [], noop_with_empty_axes=True), expected)


@pytest.mark.parametrize("kind", ["sum", "max", "min", "prod", "l1", "sum_square", "log_sum", "log_sum_exp"])
def test_reduce_empty_set_matches_ort(kind):
    x = np.zeros((2, 0, 3), np.float32)
    (expected,) = run_ort(ONNX_NAMES[kind], [x, np.array([1], np.int64)], {"keepdims": 0}, opset=18)
    assert_close(K.reduce(x, kind, [1], keepdims=False), expected)


@pytest.mark.parametrize("kind", ["sum", "mean", "max", "min", "prod", "l1", "sum_square"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_reduce_integers_match_ort(kind, dtype):
    x = rng(3).integers(-9, 9, (3, 4, 2)).astype(dtype)
    (expected,) = run_ort(ONNX_NAMES[kind], [x, np.array([1], np.int64)], {}, opset=18)
    assert_close(K.reduce(x, kind, [1]), expected)


@pytest.mark.parametrize("kind", ["sum", "mean", "max", "l2", "log_sum_exp"])
@pytest.mark.parametrize("dtype,tol", [(np.float16, 2e-3), (np.float64, 1e-12)])
def test_reduce_float_precision(kind, dtype, tol):
    x = rng(4).uniform(0.1, 2.0, (4, 6)).astype(dtype)
    (expected,) = run_ort(ONNX_NAMES[kind], [x, np.array([1], np.int64)], {}, opset=18)
    assert_close(K.reduce(x, kind, [1]), expected, rtol=tol, atol=tol)


def test_log_sum_exp_is_stable():
    x = np.array([[1000.0, 1000.0], [-np.inf, -np.inf]], np.float32)
    got = K.reduce(x, "log_sum_exp", [1], keepdims=False)
    assert_close(got, np.array([1000.0 + np.log(2.0), -np.inf], np.float32))


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("select_last_index", [0, 1])
def test_arg_reductions_match_ort(op, axis, keepdims, select_last_index):
    x = rng(5).integers(0, 3, (4, 5, 3)).astype(np.float32)  # many ties
    attrs = {"axis": axis, "keepdims": keepdims, "select_last_index": select_last_index}
    (expected,) = run_ort(op, [x], attrs)
    function = K.argmax if op == "ArgMax" else K.argmin
    assert_close(function(x, axis, bool(keepdims), bool(select_last_index)), expected)


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_cumsum_matches_ort(exclusive, reverse, axis, dtype):
    x = (rng(6).standard_normal((3, 5)) * 10).astype(dtype)
    (expected,) = run_ort("CumSum", [x, np.array(axis, np.int64)], {"exclusive": exclusive, "reverse": reverse})
    assert_close(K.cumsum(x, axis, bool(exclusive), bool(reverse)), expected)
