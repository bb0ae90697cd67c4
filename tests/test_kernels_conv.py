"""opconv.kernels.conv against onnxruntime (Conv, ConvTranspose, ConvInteger) and,
for XLA-only features, against a slow direct-formula convolution."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from opconv.errors import ExecutionError
from opconv.kernels import conv as K

from .test_kernels_conv_tiled import direct_conv
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
    # depthwise (one channel per group), taken over flattened rows of the stride phases
    ((2, 5, 11, 9), (5, 1, 3, 3), {"group": 5, "pads": [1, 1, 1, 1]}),
    ((1, 6, 12, 13), (6, 1, 5, 3), {"group": 6, "pads": [2, 0, 1, 1], "strides": [3, 2]}),
    ((1, 3, 8, 8), (3, 1, 2, 2), {"group": 3, "strides": [2, 1]}),
    ((2, 3, 9, 10), (6, 1, 3, 3), {"group": 3, "dilations": [2, 1], "strides": [1, 2], "pads": [1, 2, 0, 1]}),
    ((1, 2, 5, 7, 6), (2, 1, 2, 3, 3), {"group": 2, "strides": [2, 1, 3], "pads": [0, 1, 1, 1, 0, 2]}),
    # enough channels for the depthwise products to take several blocks of channels
    ((1, 64, 40, 40), (64, 1, 3, 3), {"group": 64, "pads": [1, 1, 1, 1]}),
    ((2, 96, 31, 31), (96, 1, 3, 3), {"group": 96, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
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
@pytest.mark.parametrize(
    "mode,strides,dilations",
    [(mode, strides, [1, 1]) for mode in ("SAME_UPPER", "SAME_LOWER", "VALID") for strides in ([1, 1], [2, 3])]
    + [("VALID", [2, 1], [2, 2])],
)
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
    expected = slow_conv_general(
        x, w, [1, 2], [(1, 1), (0, 1)], [1, 1], [1, 1], 1, 1, (0, 1, 2, 3), (0, 1, 2, 3), (0, 1, 2, 3)
    )
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
    got = K.conv_transpose(
        x, w, b, attrs.get("strides"), pads[:n], pads[n:], attrs.get("dilations"), group, attrs.get("output_padding")
    )
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
    begin, end = K.conv_transpose_pads(
        x.shape[2:], w.shape[2:], [2, 2], output_size=output_shape, extra_at_end=(mode == "SAME_UPPER")
    )
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
    out = [
        (b + lo + hi - (k - 1) * d - 1) // st + 1
        for b, (lo, hi), k, d, st in zip(base, padding, w.shape[2:], rhs_dil, strides)
    ]
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
    (
        (1, 5, 6, 2),
        (3, 2, 2, 4),
        dict(
            padding=[(-1, 1), (2, -1)],
            lhs_dilation=[2, 1],
            rhs_dilation=[1, 2],
            lhs_layout=(0, 3, 1, 2),
            rhs_layout=(3, 2, 0, 1),
            out_layout=(0, 3, 1, 2),
        ),
    ),
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
        lhs,
        rhs,
        kwargs.get("window_strides", [1] * n),
        kwargs.get("padding", [(0, 0)] * n),
        kwargs.get("lhs_dilation", [1] * n),
        kwargs.get("rhs_dilation", [1] * n),
        kwargs.get("feature_group_count", 1),
        kwargs.get("batch_group_count", 1),
        kwargs.get("lhs_layout", ident),
        kwargs.get("rhs_layout", ident),
        kwargs.get("out_layout", ident),
    )
    got = K.conv_general(lhs, rhs, **kwargs)
    assert_close(got, expected.astype(np.float32), rtol=1e-4, atol=1e-5)


def test_auto_pad_values():
    assert K.auto_pad([5], [3], [2], None, "SAME_UPPER") == ([1], [1])
    assert K.auto_pad([6], [4], [1], None, "same_upper") == ([1], [2])
    assert K.auto_pad([6], [4], [1], None, "SAME_LOWER") == ([2], [1])
    assert K.auto_pad([6, 6], [4, 2], None, None, "VALID") == ([0, 0], [0, 0])
    assert K.conv_output_size(7, 3, 2, 1, 1, 1) == 4


# Weights packed once with their bias (what a session does with constant weights): every path of the kernel.
PACKED_CASES = [
    # x shape, w shape, attrs
    ((1, 8, 6, 7), (4, 8, 1, 1), {}),  # 1x1, fewer outputs than inputs: bias added to the output
    ((2, 4, 6, 7), (12, 4, 1, 1), {}),  # 1x1, more outputs than inputs: bias in the product
    ((1, 6, 9, 8), (10, 6, 1, 1), {"strides": [2, 2]}),  # strided 1x1
    ((1, 6, 9, 8), (10, 3, 3, 3), {"pads": [1, 1, 1, 1], "group": 2}),
    ((1, 4, 7, 7), (8, 1, 3, 3), {"group": 4, "pads": [1, 0, 1, 2]}),  # depthwise, two outputs per group
    ((2, 3, 11), (5, 3, 4), {"strides": [2], "dilations": [2], "pads": [2, 1]}),
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", PACKED_CASES)
def test_packed_weights_match_ort(x_shape, w_shape, attrs):
    r = rng(8)
    x = r.standard_normal(x_shape).astype(np.float32)
    w = r.standard_normal(w_shape).astype(np.float32)
    b = r.standard_normal(w_shape[0]).astype(np.float32)
    (expected,) = run_ort("Conv", [x, w, b], attrs)
    n = len(x_shape) - 2
    pads = attrs.get("pads", [0] * 2 * n)
    group = attrs.get("group", 1)
    packed = K.pack_conv_weights(w, b, group)
    np.testing.assert_array_equal(packed.weights, w)
    np.testing.assert_array_equal(packed.bias, b)
    got = K.conv(x, packed, None, attrs.get("strides"), pads[:n], pads[n:], attrs.get("dilations"), group)
    assert_close(got, expected, rtol=1e-4, atol=1e-5)


def test_packed_weights_follow_the_input_type():
    r = rng(9)
    w, b = r.standard_normal((3, 2, 2, 2)), r.standard_normal(3)
    x = r.standard_normal((1, 2, 4, 4))
    packed = K.pack_conv_weights(w, b)
    expected = slow_conv_general(x, w, [1, 1], [(0, 0)] * 2, [1, 1], [1, 1], 1, 1, *[(0, 1, 2, 3)] * 3)
    assert_close(K.conv(x, packed), expected + b.reshape(1, 3, 1, 1), rtol=1e-12, atol=1e-12)
    # float32 input, float64 weights: computed in float64, as with the unpacked arrays
    x32 = x.astype(np.float32)
    expected = slow_conv_general(x32, w, [1, 1], [(0, 0)] * 2, [1, 1], [1, 1], 1, 1, *[(0, 1, 2, 3)] * 3)
    assert_close(K.conv(x32, packed), expected + b.reshape(1, 3, 1, 1), rtol=1e-12, atol=1e-12)
    # float64 input, float32 packed weights: computed in float64 from the unpacked arrays
    packed32 = K.pack_conv_weights(w.astype(np.float32), b.astype(np.float32))
    expected = slow_conv_general(
        x, w.astype(np.float32), [1, 1], [(0, 0)] * 2, [1, 1], [1, 1], 1, 1, *[(0, 1, 2, 3)] * 3
    ) + b.astype(np.float32).reshape(1, 3, 1, 1)
    assert_close(K.conv(x, packed32), expected, rtol=1e-12, atol=1e-12)
    # float16 weights are computed in float32: nothing to pack
    assert K.pack_conv_weights(w.astype(np.float16), b.astype(np.float16)) is None


def test_packed_weights_carry_their_bias():
    w = np.ones((2, 1, 1, 1), np.float32)
    with pytest.raises(ExecutionError, match="carry their bias"):
        K.conv(
            np.ones((1, 1, 2, 2), np.float32), K.pack_conv_weights(w, np.ones(2, np.float32)), np.ones(2, np.float32)
        )
    with pytest.raises(ExecutionError, match="do not fit"):
        K.pack_conv_weights(np.ones((3, 1, 1, 1), np.float32), np.ones(3, np.float32), groups=2)


@pytest.mark.parametrize(
    "x_shape,o,pads,tile",
    [
        ((1, 64, 14, 14), 64, [1, 1, 1, 1], 2),
        ((2, 64, 15, 17), 72, [1, 1, 1, 1], 2),  # odd output sizes, two images
        ((1, 80, 16, 15), 64, [2, 0, 1, 1], 2),  # asymmetric pads
        ((1, 64, 16, 16), 64, [0, 0, 0, 0], 2),
        ((1, 64, 28, 28), 64, [1, 1, 1, 1], 4),  # from 784 output positions on: F(4x4, 3x3)
        ((2, 72, 29, 30), 64, [1, 1, 1, 0], 4),  # output sizes no multiple of 4, two images
    ],
)
def test_winograd_path_matches_ort(monkeypatch, x_shape, o, pads, tile):
    # Packed 3x3 stride-1 weights with enough channels and positions take a Winograd path.
    calls = []
    original = K._winograd_3x3
    monkeypatch.setattr(K, "_winograd_3x3", lambda x, u, out: calls.append(u.shape[0]) or original(x, u, out))
    r = rng(10)
    c = x_shape[1]
    x = r.standard_normal(x_shape).astype(np.float32)
    w = (r.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    b = r.standard_normal(o).astype(np.float32)
    (expected,) = run_ort("Conv", [x, w, b], {"pads": pads})
    got = K.conv(x, K.pack_conv_weights(w, b), None, None, pads[:2], pads[2:])
    assert calls == [(tile + 2) ** 2], "not the expected Winograd path"
    # F(4x4, 3x3)'s larger transform entries add rounding: its error is bounded relative to the output's scale
    scale = np.abs(expected).max()
    assert_close(got, expected, rtol=1e-4, atol=1e-5 if tile == 2 else 1e-5 * scale)
    # against a direct sum in float64: F(2x2, 3x3) stays near float32's own rounding, F(4x4, 3x3) within
    # 1e-5 of the output's scale
    direct = direct_conv(
        np.pad(x, [(0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])]), w, (1, 1), (0, 0), (1, 1), 1
    ) + b.astype(np.float64).reshape(1, -1, 1, 1)
    error = np.abs(got - direct).max() / np.abs(direct).max()
    assert error < (1e-6 if tile == 2 else 1e-5), error
    # float64: a direct sum over kernel offsets in float64 is the oracle
    x64, w64, b64 = x.astype(np.float64), w.astype(np.float64), b.astype(np.float64)
    direct = direct_conv(x64, w64, (1, 1), (1, 1), (1, 1), 1) + b64.reshape(1, -1, 1, 1)
    got64 = K.conv(x64, K.pack_conv_weights(w64, b64), None, None, [1, 1], [1, 1])
    assert_close(got64, direct, rtol=1e-12, atol=1e-12)
