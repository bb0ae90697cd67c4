"""opconv.kernels.norm against onnxruntime (BatchNormalization, InstanceNormalization,
LayerNormalization, GroupNormalization, LRN, MeanVarianceNormalization,
LpNormalization, Softmax, LogSoftmax, Hardmax)."""

from __future__ import annotations

import numpy as np
import pytest

from opconv.kernels import norm as K

from .test_kernels_helpers import assert_close, rng, run_ort


def _params(c, seed=0):
    r = rng(seed)
    return (
        r.standard_normal(c).astype(np.float32),
        r.standard_normal(c).astype(np.float32),
        r.standard_normal(c).astype(np.float32),
        r.uniform(0.5, 2, c).astype(np.float32),
    )


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (1, 4, 3, 3), (2, 2, 2, 3, 2)])
def test_batch_norm_matches_ort(shape):
    x = rng(1).standard_normal(shape).astype(np.float32)
    scale, bias, mean, var = _params(shape[1])
    (expected,) = run_ort("BatchNormalization", [x, scale, bias, mean, var], {"epsilon": 1e-3}, opset=15)
    assert_close(K.batch_norm(x, scale, bias, mean, var, 1e-3), expected)


@pytest.mark.parametrize("momentum", [0.9, 0.5])
def test_batch_norm_training_matches_ort(momentum):
    x = rng(2).standard_normal((4, 3, 5)).astype(np.float32)
    scale, bias, mean, var = _params(3, 1)
    expected = run_ort(
        "BatchNormalization",
        [x, scale, bias, mean, var],
        {"training_mode": 1, "momentum": momentum},
        n_outputs=3,
        opset=15,
    )
    got = K.batch_norm_training(x, scale, bias, mean, var, 1e-5, momentum)
    for g, e in zip(got[:3], expected):
        assert_close(g, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 4, 3, 3), (2, 2, 2, 3, 2)])
def test_instance_norm_matches_ort(shape):
    x = rng(3).standard_normal(shape).astype(np.float32)
    scale, bias, _, _ = _params(shape[1], 2)
    (expected,) = run_ort("InstanceNormalization", [x, scale, bias], {"epsilon": 1e-4})
    assert_close(K.instance_norm(x, scale, bias, 1e-4), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("axis", [-1, 1, 2, -3])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float16, 3e-3)])
def test_layer_norm_matches_ort(axis, with_bias, dtype, tol):
    x = rng(4).standard_normal((2, 3, 4, 5)).astype(dtype)
    normalized = x.shape[axis % 4 :]
    scale = rng(5).standard_normal(normalized).astype(dtype)
    bias = rng(6).standard_normal(normalized).astype(dtype) if with_bias else None
    expected = run_ort("LayerNormalization", [x, scale, bias], {"axis": axis, "epsilon": 1e-4}, n_outputs=3, opset=17)
    got = K.layer_norm(x, scale, bias, axis, 1e-4)
    for g, e in zip(got, expected):
        assert_close(g, e, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((1, 4, 3, 3), 2), ((2, 4, 3), 4), ((1, 6, 2, 2, 2), 1)])
def test_group_norm_matches_ort(shape, groups):
    x = rng(7).standard_normal(shape).astype(np.float32)
    scale, bias, _, _ = _params(shape[1], 3)
    (expected,) = run_ort("GroupNormalization", [x, scale, bias], {"num_groups": groups, "epsilon": 1e-4}, opset=21)
    assert_close(K.group_norm(x, scale, bias, groups, 1e-4), expected, rtol=1e-5, atol=1e-5)


def test_group_norm_per_group_scale():
    x = rng(8).standard_normal((2, 4, 3)).astype(np.float32)
    per_group = K.group_norm(x, np.array([2.0, 3.0], np.float32), np.array([1.0, -1.0], np.float32), 2)
    per_channel = K.group_norm(x, np.array([2, 2, 3, 3], np.float32), np.array([1, 1, -1, -1], np.float32), 2)
    assert_close(per_group, per_channel)


# onnxruntime's LRN takes 4-D inputs and odd sizes only.
@pytest.mark.parametrize("size", [1, 3, 5])
@pytest.mark.parametrize("shape", [(2, 6, 3, 1), (1, 5, 3, 4)])
def test_lrn_matches_ort(size, shape):
    x = rng(9).standard_normal(shape).astype(np.float32)
    attrs = {"size": size, "alpha": 0.02, "beta": 0.6, "bias": 1.5}
    (expected,) = run_ort("LRN", [x], attrs)
    assert_close(K.lrn(x, size, 0.02, 0.6, 1.5), expected)


@pytest.mark.parametrize("size", [2, 4])
def test_lrn_even_size_window_matches_formula(size):
    x = rng(15).standard_normal((2, 6, 3))
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    squares = np.pad(x * x, [(0, 0), (before, after), (0, 0)])
    sums = sum(squares[:, i : i + 6] for i in range(size))
    assert_close(K.lrn(x, size, 0.02, 0.6, 1.5), x / (1.5 + 0.02 / size * sums) ** 0.6, rtol=1e-12, atol=1e-12)


def test_lrn_spatial_axes_matches_formula():
    x = rng(10).standard_normal((1, 2, 4, 4))
    got = K.lrn(x, 3, 0.1, 0.5, 2.0, axes=(2, 3))
    squares = np.pad(x * x, [(0, 0), (0, 0), (1, 1), (1, 1)])
    sums = sum(squares[:, :, i : i + 4, j : j + 4] for i in range(3) for j in range(3))
    assert_close(got, x / (2.0 + 0.1 / 9 * sums) ** 0.5, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("axes", [None, [0, 2, 3], [2, 3], [1], [1, 2, 3]])
def test_mvn_matches_ort(axes):
    x = rng(11).standard_normal((2, 3, 4, 5)).astype(np.float32)
    (expected,) = run_ort("MeanVarianceNormalization", [x], {} if axes is None else {"axes": axes})
    assert_close(K.mean_variance_normalization(x, (0, 2, 3) if axes is None else axes), expected, rtol=1e-4, atol=1e-5)


def test_mvn_variants():
    x = rng(12).standard_normal((2, 3, 4))
    centred = x - x.mean(axis=(1, 2), keepdims=True)
    assert_close(K.mean_variance_normalization(x, (1, 2), normalize_variance=False), centred)
    inside = K.mean_variance_normalization(x, (1, 2), epsilon=0.5, eps_inside_sqrt=True)
    assert_close(inside, centred / np.sqrt(centred.var(axis=(1, 2), keepdims=True) + 0.5))


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization_matches_ort(axis, p):
    x = rng(13).standard_normal((3, 4, 5)).astype(np.float32)
    (expected,) = run_ort("LpNormalization", [x], {"axis": axis, "p": p})
    assert_close(K.lp_normalization(x, axis, p), expected)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("axis", [-1, 0, 1, 2])
@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_family_matches_ort(op, axis, opset):
    x = rng(14).standard_normal((2, 3, 4)).astype(np.float32) * 5
    if op == "Hardmax":
        x = np.round(x)  # ties: first max wins
    (expected,) = run_ort(op, [x], {"axis": axis}, opset=opset)
    function = {"Softmax": K.softmax, "LogSoftmax": K.log_softmax, "Hardmax": K.hardmax}[op]
    assert_close(function(x, axis, coerce_2d=opset < 13), expected, rtol=1e-5, atol=1e-5)


def test_softmax_is_stable_and_keeps_dtype():
    x = np.array([[1000.0, 1000.0], [-1000.0, 0.0]], np.float16)
    got = K.softmax(x)
    assert got.dtype == np.float16
    assert_close(got, np.array([[0.5, 0.5], [0.0, 1.0]], np.float16))
