"""opconv.kernels.conv against onnxruntime (Conv, ConvTranspose, ConvInteger) and,
for XLA-only features, against a slow direct-formula convolution."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from opconv.kernels import conv as K

from .test_kernels_helpers import assert_close, rng, run_ort

CONV_CASES = [
    # x shape, w shape, attrs
    ((2, 3, 9), (4, 3, 3), {}),
    ((1, 2, 10), (2, 1, 4), {"strides": [3], "pads": [2, 1], "dilations": [2], "group": 2}),
    ((2, 3, 7, 8), (5, 3, 3, 2), {"pads": [1, 0, 2, 1]}),
    ((1, 4, 9, 9), (6, 2, 3, 3), {"strides": [2, 1], "dilations": [1, 2], "group": 2}),
    ((1, 4, 6, 7), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((2, 2, 5, 6, 4), (3, 2, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1], "strides": [1, 2, 1]}),
    ((1, 6, 4, 5, 6), (3, 2, 2, 2, 3), {"group": 3, "dilations": [2, 1, 2]}),
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", CONV_CASES)
@pytest.mark.parametrize("with_bias", [False, True])
def test_conv_matches_ort(x_shape, w_shape, attrs, with_bias):
    r = rng(1)
    x = r.standard_normal(x_shape).astype(np.float32)
    w = r.standard_normal(w_shape).astype(np.float32)
    b = r.standard_normal(w_shape[0]).astype(np.float32) if with_bias else None
    (expected,) = run_ort("Conv", [x, w, b], attrs)
    n = len(x_shape) - 2
    pads = attrs.get("pads", [0] * 2 * n)
    got = K.conv(x, w, b, attrs.get("strides"), pads[:n], pads[n:], attrs.get("dilations"), attrs.get("group", 1))
    assert_close(got, expected, rtol=1e-4, atol=1e-5)


# onnxruntime rejects dilations with SAME_* auto_pad, so only VALID gets them.
@pytest.mark.parametrize("mode,strides,dilations", [
    (mode, strides, [1, 1]) for mode in ("SAME_UPPER", "SAME_LOWER", "VALID") for strides in ([1, 1], [2, 3])
] + [("VALID", [2, 1], [2, 2])])
def test_conv_auto_pad_matches_ort(mode, strides, dilations):
    r = rng(2)
    x = r.standard_normal((1, 2, 7, 8)).astype(np.float32)
    w = r.standard_normal((3, 2, 3, 2)).astype(np.float32)
    (expected,) = run_ort("Conv", [x, w], {"auto_pad": mode, "strides": strides, "dilations": dilations})
    begin, end = K.auto_pad(x.shape[2:], w.shape[2:], strides, dilations, mode)
    got = K.conv(x, w, None, strides, begin, end, dilations)
    assert_close(got, expected, rtol=1e-4, atol=1e-5)


def test_conv_float16_matches_ort():
    r = rng(3)
    x = r.standard_normal((1, 3, 6, 6)).astype(np.float16)
    w = r.standard_normal((2, 3, 3, 3)).astype(np.float16)
    (expected,) = run_ort("Conv", [x, w], {"pads": [1, 1, 1, 1]})
    got = K.conv(x, w, pads_begin=[1, 1], pads_end=[1, 1])
    assert_close(got, expected, rtol=2e-3, atol=2e-3)


def test_conv_float64_stays_float64():
    # onnxruntime has no double Conv: the direct formula is the oracle here.
    r = rng(3)
    x = r.standard_normal((1, 3, 5, 6))
    w = r.standard_normal((2, 3, 3, 2))
    expected = slow_conv_general(x, w, [1, 2], [(1, 1), (0, 1)], [1, 1], [1, 1], 1, 1, (0, 1, 2, 3), (0, 1, 2, 3),
                                 (0, 1, 2, 3))
    got = K.conv(x, w, strides=[1, 2], pads_begin=[1, 0], pads_end=[1, 1])
    assert_close(got, expected, rtol=1e-12, atol=1e-12)


CONV_T_CASES = [
    ((1, 2, 5), (2, 3, 3), {}),
    ((2, 2, 4), (2, 2, 3), {"strides": [2], "pads": [1, 0], "output_padding": [1]}),
    ((1, 4, 3, 4), (4, 2, 3, 3), {"strides": [2, 3], "group": 2, "pads": [1, 2, 0, 1]}),
    ((1, 2, 4, 3), (2, 3, 2, 3), {"strides": [3, 2], "dilations": [2, 1], "output_padding": [2, 1]}),
    ((1, 3, 3, 3), (3, 1, 3, 3), {"group": 3, "strides": [2, 2], "pads": [3, 3, 3, 3]}),
    ((1, 2, 3, 2, 3), (2, 2, 2, 2, 2), {"strides": [2, 1, 2], "pads": [0, 1, 1, 1, 0, 0]}),
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", CONV_T_CASES)
def test_conv_transpose_matches_ort(x_shape, w_shape, attrs):
    r = rng(4)
    x = r.standard_normal(x_shape).astype(np.float32)
    w = r.standard_normal(w_shape).astype(np.float32)
    group = attrs.get("group", 1)
    b = r.standard_normal(w_shape[1] * group).astype(np.float32)
    (expected,) = run_ort("ConvTranspose", [x, w, b], attrs)
    n = len(x_shape) - 2
    pads = attrs.get("pads", [0] * 2 * n)
    got = K.conv_transpose(x, w, b, attrs.get("strides"), pads[:n], pads[n:], attrs.get("dilations"), group,
                           attrs.get("output_padding"))
    assert_close(got, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize("output_shape", [None, [9, 8], [10, 10]])
def test_conv_transpose_output_shape_matches_ort(mode, output_shape):
    r = rng(5)
    x = r.standard_normal((1, 2, 4, 4)).astype(np.float32)
    w = r.standard_normal((2, 3, 3, 3)).astype(np.float32)
    attrs = {"strides": [2, 2], "auto_pad": mode}
    if output_shape is not None:
        attrs["output_shape"] = output_shape
    (expected,) = run_ort("ConvTranspose", [x, w], attrs)
    begin, end = K.conv_transpose_pads(x.shape[2:], w.shape[2:], [2, 2], output_size=output_shape,
                                       extra_at_end=(mode == "SAME_UPPER"))
    got = K.conv_transpose(x, w, strides=[2, 2], pads_begin=begin, pads_end=end)
    assert_close(got, expected, rtol=1e-4, atol=1e-5)


def test_conv_integer_matches_ort():
    r = rng(6)
    x = r.integers(0, 256, (1, 2, 5, 5), dtype=np.uint8)
    w = r.integers(0, 256, (3, 2, 2, 2), dtype=np.uint8)
    x_zp, w_zp = np.uint8(128), np.uint8(7)
    (expected,) = run_ort("ConvInteger", [x, w, x_zp, w_zp], {"pads": [1, 0, 0, 1]})
    got = K.conv_integer(x, w, x_zp, w_zp, pads_begin=[1, 0], pads_end=[0, 1])
    assert_close(got, expected)


def test_conv_int64_is_exact():
    x = np.full((1, 1, 3), 2**40, dtype=np.int64)
    w = np.ones((1, 1, 2), dtype=np.int64)
    assert_close(K.conv(x, w), np.full((1, 1, 2), 2**41, dtype=np.int64))


def slow_conv_general(lhs, rhs, strides, padding, lhs_dil, rhs_dil, fgc, bgc, lhs_layout, rhs_layout, out_layout):
    """Direct formula, one output element at a time (StableHLO semantics)."""
    x = np.transpose(lhs, lhs_layout).astype(np.float64)
    w = np.transpose(rhs, rhs_layout).astype(np.float64)
    n, c = x.shape[:2]
    o, c_per_group = w.shape[:2]
    base = [(s - 1) * d + 1 for s, d in zip(x.shape[2:], lhs_dil)]
    out = [(b + lo + hi - (k - 1) * d - 1) // st + 1
           for b, (lo, hi), k, d, st in zip(base, padding, w.shape[2:], rhs_dil, strides)]
    nb = n // bgc
    og = o // (fgc * bgc)
    y = np.zeros((nb, o, *out))
    for b, f, *pos in itertools.product(range(nb), range(o), *[range(v) for v in out]):
        group = f // og
        image = group * nb + b if bgc > 1 else b
        channels = range(c) if bgc > 1 else range(group * c_per_group, (group + 1) * c_per_group)
        total = 0.0
        for ci, ch in enumerate(channels):
            for k in itertools.product(*[range(v) for v in w.shape[2:]]):
                q = [p * st + kk * d - lo for p, st, kk, d, (lo, _) in zip(pos, strides, k, rhs_dil, padding)]
                if all(0 <= qq < bb and qq % ld == 0 for qq, bb, ld in zip(q, base, lhs_dil)):
                    src = tuple(qq // ld for qq, ld in zip(q, lhs_dil))
                    total += x[(image, ch) + src] * w[(f, ci) + k]
        y[(b, f, *pos)] = total
    return np.transpose(y, np.argsort(out_layout))


GENERAL_CASES = [
    # lhs shape (in lhs layout), rhs shape (in rhs layout), kwargs
    ((2, 3, 5, 6), (4, 3, 2, 2), dict(window_strides=[1, 2], padding=[(1, 0), (0, 2)])),
    ((1, 5, 6, 2), (3, 2, 2, 4), dict(padding=[(-1, 1), (2, -1)], lhs_dilation=[2, 1], rhs_dilation=[1, 2],
                                      lhs_layout=(0, 3, 1, 2), rhs_layout=(3, 2, 0, 1), out_layout=(0, 3, 1, 2))),
    ((1, 4, 7), (6, 2, 3), dict(feature_group_count=2, lhs_dilation=[3], padding=[(2, 2)])),
    ((4, 3, 5, 5), (6, 3, 2, 3), dict(batch_group_count=2, window_strides=[2, 1])),
    ((6, 2, 4), (6, 2, 2), dict(batch_group_count=3, padding=[(1, 1)], out_layout=(2, 1, 0))),
    ((2, 2, 3, 3, 3), (2, 2, 2, 1, 2), dict(lhs_dilation=[1, 2, 1], rhs_dilation=[2, 1, 1], padding=[(0, 1)] * 3)),
]


@pytest.mark.parametrize("lhs_shape,rhs_shape,kwargs", GENERAL_CASES)
def test_conv_general_matches_direct_formula(lhs_shape, rhs_shape, kwargs):
    r = rng(7)
    lhs = r.standard_normal(lhs_shape).astype(np.float32)
    rhs = r.standard_normal(rhs_shape).astype(np.float32)
    n = lhs.ndim - 2
    ident = tuple(range(lhs.ndim))
    expected = slow_conv_general(
        lhs, rhs, kwargs.get("window_strides", [1] * n), kwargs.get("padding", [(0, 0)] * n),
        kwargs.get("lhs_dilation", [1] * n), kwargs.get("rhs_dilation", [1] * n),
        kwargs.get("feature_group_count", 1), kwargs.get("batch_group_count", 1),
        kwargs.get("lhs_layout", ident), kwargs.get("rhs_layout", ident), kwargs.get("out_layout", ident))
    got = K.conv_general(lhs, rhs, **kwargs)
    assert_close(got, expected.astype(np.float32), rtol=1e-4, atol=1e-5)


def test_auto_pad_values():
    assert K.auto_pad([5], [3], [2], None, "SAME_UPPER") == ([1], [1])
    assert K.auto_pad([6], [4], [1], None, "same_upper") == ([1], [2])
    assert K.auto_pad([6], [4], [1], None, "SAME_LOWER") == ([2], [1])
    assert K.auto_pad([6, 6], [4, 2], None, None, "VALID") == ([0, 0], [0, 0])
    assert K.conv_output_size(7, 3, 2, 1, 1, 1) == 4
