"""opconv.kernels.pool against onnxruntime (MaxPool, AveragePool, LpPool, Global*,
MaxUnpool) and ReduceWindow against a slow element-by-element formulation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from opconv.kernels import pool as K

from .test_kernels_helpers import assert_close, rng, run_ort

POOL_CASES = [
    # shape, attrs
    ((2, 3, 10), {"kernel_shape": [3]}),
    ((1, 2, 11), {"kernel_shape": [3], "strides": [2], "pads": [1, 2], "ceil_mode": 1}),
    ((1, 2, 7, 8), {"kernel_shape": [2, 3], "strides": [2, 2], "pads": [1, 1, 0, 1]}),
    ((1, 2, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 3], "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    ((1, 1, 9, 9), {"kernel_shape": [2, 2], "dilations": [2, 3], "strides": [1, 2], "ceil_mode": 1}),
    ((1, 1, 6), {"kernel_shape": [3], "strides": [2], "pads": [1, 1], "ceil_mode": 1}),
    ((1, 2, 4, 5, 6), {"kernel_shape": [2, 2, 3], "strides": [2, 1, 2], "pads": [1, 0, 1, 0, 1, 1]}),
]


@pytest.mark.parametrize("shape,attrs", POOL_CASES)
def test_max_pool_with_indices_matches_ort(shape, attrs):
    x = rng(1).standard_normal(shape).astype(np.float32)
    values, indices = run_ort("MaxPool", [x], attrs, n_outputs=2)
    got_values, got_indices = K.max_pool_with_indices(x, **_geometry(attrs, len(shape) - 2))
    assert_close(got_values, values)
    assert_close(got_indices, indices)
    assert_close(K.pool(x, "max", **_geometry(attrs, len(shape) - 2)), values)


@pytest.mark.parametrize("shape,attrs", [c for c in POOL_CASES if len(c[0]) == 4])
def test_max_pool_column_major_indices_match_ort(shape, attrs):
    x = rng(2).standard_normal(shape).astype(np.float32)
    _, indices = run_ort("MaxPool", [x], {**attrs, "storage_order": 1}, n_outputs=2)
    _, got = K.max_pool_with_indices(x, **_geometry(attrs, 2), storage_order=1)
    assert_close(got, indices)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.float16, np.float64])
def test_max_pool_dtypes(dtype):
    x = rng(3).integers(-100 if dtype == np.int8 else 0, 100, (1, 2, 6, 6)).astype(dtype)
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    (expected,) = run_ort("MaxPool", [x], attrs)
    assert_close(K.pool(x, "max", **_geometry(attrs, 2)), expected)


@pytest.mark.parametrize("shape,attrs", POOL_CASES)
@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool_matches_ort(shape, attrs, count_include_pad):
    x = rng(4).standard_normal(shape).astype(np.float32)
    (expected,) = run_ort("AveragePool", [x], {**attrs, "count_include_pad": count_include_pad})
    got = K.pool(x, "avg", **_geometry(attrs, len(shape) - 2), count_include_pad=bool(count_include_pad))
    assert_close(got, expected)


@pytest.mark.parametrize("shape,attrs", POOL_CASES)
@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_pool_matches_ort(shape, attrs, p):
    x = rng(5).standard_normal(shape).astype(np.float32)
    (expected,) = run_ort("LpPool", [x], {**attrs, "p": p})
    assert_close(K.pool(x, "lp", **_geometry(attrs, len(shape) - 2), p=p), expected, rtol=1e-5, atol=1e-5)


def test_average_pool_float16_matches_ort():
    x = rng(6).standard_normal((1, 3, 8, 8)).astype(np.float16)
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    (expected,) = run_ort("AveragePool", [x], attrs)
    assert_close(K.pool(x, "avg", **_geometry(attrs, 2)), expected, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("op,mode", [("GlobalMaxPool", "max"), ("GlobalAveragePool", "avg"), ("GlobalLpPool", "lp")])
@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 2, 4, 5), (1, 2, 3, 2, 4)])
def test_global_pool_matches_ort(op, mode, shape):
    x = rng(7).standard_normal(shape).astype(np.float32)
    (expected,) = run_ort(op, [x], {"p": 3} if mode == "lp" else {})
    assert_close(K.global_pool(x, mode, p=3), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "shape,attrs,output_shape",
    [
        ((1, 2, 6, 6), {"kernel_shape": [2, 2], "strides": [2, 2]}, None),
        ((1, 2, 7, 5), {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 0]}, [1, 2, 7, 5]),
        ((1, 1, 8, 6), {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 0, 0]}, None),
        ((2, 1, 7, 5), {"kernel_shape": [2, 2], "strides": [2, 2]}, [2, 1, 7, 5]),
    ],
)
def test_max_unpool_matches_ort(shape, attrs, output_shape):
    x = rng(8).standard_normal(shape).astype(np.float32)
    values, indices = run_ort("MaxPool", [x], attrs, n_outputs=2)
    extra = [np.array(output_shape, np.int64)] if output_shape else []
    (expected,) = run_ort("MaxUnpool", [values, indices] + extra, attrs)
    geometry = _geometry(attrs, 2)
    geometry.pop("dilations", None)
    geometry.pop("ceil_mode", None)
    got = K.max_unpool(values, indices, **geometry, output_shape=output_shape)
    assert_close(got, expected)


def slow_reduce_window(x, window, strides, base_dil, win_dil, padding, init, combine):
    base = [(s - 1) * d + 1 for s, d in zip(x.shape, base_dil)]
    padded = [b + lo + hi for b, (lo, hi) in zip(base, padding)]
    out = [max(0, (p - ((w - 1) * d + 1)) // s + 1) for p, w, d, s in zip(padded, window, win_dil, strides)]
    y = np.empty(out, dtype=x.dtype)
    for pos in itertools.product(*[range(o) for o in out]):
        acc = init
        for k in itertools.product(*[range(w) for w in window]):
            q = [p * s + kk * d - lo for p, s, kk, d, (lo, _) in zip(pos, strides, k, win_dil, padding)]
            if all(0 <= qq < b and qq % bd == 0 for qq, b, bd in zip(q, base, base_dil)):
                acc = combine(acc, x[tuple(qq // bd for qq, bd in zip(q, base_dil))])
        y[pos] = acc
    return y


RW_CASES = [
    dict(window=[2, 3], strides=[1, 2]),
    dict(window=[3, 2], strides=[2, 1], padding=[(1, 2), (0, 1)]),
    dict(window=[2, 2], base_dilations=[2, 3], padding=[(1, 0), (-1, 1)]),
    dict(window=[2, 2], window_dilations=[2, 1], base_dilations=[1, 2], strides=[1, 3]),
    dict(window=[1, 2, 2], strides=[1, 1, 2], base_dilations=[2, 1, 1], padding=[(0, 1), (1, 1), (0, 0)]),
]


@pytest.mark.parametrize("kwargs", RW_CASES)
@pytest.mark.parametrize("reducer,init", [("add", 0.0), ("max", -np.inf), ("add", 1.5), ("min", 0.25)])
def test_reduce_window_matches_loop(kwargs, reducer, init):
    rank = len(kwargs["window"])
    x = rng(9).standard_normal((5, 6, 4)[:rank] if rank == 2 else (3, 4, 5)).astype(np.float32)
    combine = {"add": lambda a, b: a + b, "max": max, "min": min}[reducer]
    expected = slow_reduce_window(
        x,
        kwargs["window"],
        kwargs.get("strides", [1] * rank),
        kwargs.get("base_dilations", [1] * rank),
        kwargs.get("window_dilations", [1] * rank),
        kwargs.get("padding", [(0, 0)] * rank),
        np.float32(init),
        combine,
    )
    got = K.reduce_window(x, init_value=init, reducer=reducer, **kwargs)
    assert_close(got, expected)


def test_reduce_window_custom_reducer():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    got = K.reduce_window(x, [1, 2], init_value=0, reducer=lambda a, b: a * 10 + b)
    assert_close(got, np.array([[1, 12], [34, 45]], dtype=np.int32))


def test_pool_output_size_drops_window_starting_in_padding():
    assert K.pool_output_size(5, 2, 2, 1, 1, 1, ceil_mode=True) == 3
    assert K.pool_output_size(6, 3, 2, 1, 1, 1, ceil_mode=True) == 4
    assert K.pool_output_size(6, 3, 2, 1, 1, 1, ceil_mode=False) == 3


def _geometry(attrs, n):
    pads = attrs.get("pads", [0] * 2 * n)
    return dict(
        kernel=attrs["kernel_shape"],
        strides=attrs.get("strides"),
        pads_begin=pads[:n],
        pads_end=pads[n:],
        dilations=attrs.get("dilations"),
        ceil_mode=bool(attrs.get("ceil_mode", 0)),
    )
