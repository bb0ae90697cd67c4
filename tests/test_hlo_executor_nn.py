"""The HLO executor's neural-network kernels against independent oracles.

Each test builds a one-op HLO model, runs it with opconv's HLO executor and
compares the outputs with onnxruntime running the equivalent ONNX operator
(Conv, pools, Gemm, Resize, RoiAlign, NMS, GridSample, the normalizations,
Gelu...) or with a formula written here from the dialect specification / XLA
semantics (direct-loop convolution, gather/scatter, windowed reductions,
CTC by enumerating alignments...).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from onnx import TensorProto, helper

from opconv.dialects.hlo.build import OPSETS, hlo_node
from opconv.dialects.hlo.executor import run_model
from opconv.errors import ExecutionError
from opconv.ir import Graph, Model
from opconv.types import TensorType, from_numpy

from .runtimes import run_ort

RNG = np.random.default_rng(20261123)


def rand(*shape, dtype=np.float32, low=-2.0, high=2.0):
    return RNG.uniform(low, high, shape).astype(dtype)


def run_hlo(op, *inputs, outputs=1, **attrs):
    """Run one HLO ``op`` on ``inputs`` (arrays or None); returns the list of outputs."""
    g = Graph("t")
    values, feeds = [], {}
    for i, a in enumerate(inputs):
        if a is None:
            values.append(None)
            continue
        a = np.asarray(a)
        values.append(g.add_input(f"in{i}", TensorType(from_numpy(a.dtype).name, tuple(a.shape))))
        feeds[f"in{i}"] = a
    out = hlo_node(g, op, *values, _outputs=outputs, **attrs)
    g.outputs = out if isinstance(out, list) else [out]
    result = run_model(Model(g, "hlo", dict(OPSETS)), feeds)
    return [result[v.name] for v in g.outputs]


def hlo1(op, *inputs, **attrs):
    return run_hlo(op, *inputs, **attrs)[0]


_ONNX_TYPES = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.float16): TensorProto.FLOAT16,
}


def ort(op, inputs, attrs=None, outputs=1, opset=21, constants=None):
    """onnxruntime's result of one ONNX ``op`` (``inputs``: arrays, or None for an absent input)."""
    names, graph_inputs, feeds = [], [], {}
    for i, a in enumerate(inputs):
        if a is None:
            names.append("")
            continue
        a = np.asarray(a)
        names.append(f"x{i}")
        graph_inputs.append(helper.make_tensor_value_info(f"x{i}", _ONNX_TYPES[a.dtype], a.shape))
        feeds[f"x{i}"] = a
    outs = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    graph = helper.make_graph([node], "g", graph_inputs, [helper.make_empty_tensor_value_info(o) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return run_ort(model, feeds)


def close(actual, expected, rtol=1e-5, atol=1e-5):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol)


# ---------------------------------------------------------------- activations (spec formulas)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


_ERF = np.vectorize(math.erf)


def _gelu(x, approximate):
    if approximate:
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + _ERF(x / math.sqrt(2)))


ACTIVATIONS = [
    ("Relu", {}, lambda x: np.maximum(0, x)),
    ("Relu6", {}, lambda x: np.minimum(np.maximum(0, x), 6)),
    ("LeakyRelu", {}, lambda x: np.where(x < 0, 0.01 * x, x)),
    ("LeakyRelu", {"alpha": 0.3}, lambda x: np.where(x < 0, 0.3 * x, x)),
    ("Elu", {}, lambda x: np.where(x < 0, np.exp(x) - 1, x)),
    ("Elu", {"alpha": 0.5}, lambda x: np.where(x < 0, 0.5 * (np.exp(x) - 1), x)),
    ("Sigmoid", {}, _sigmoid),
    ("HardSigmoid", {}, lambda x: np.maximum(0, np.minimum(1, 0.2 * x + 0.5))),
    ("HardSigmoid", {"slope": 0.3, "offset": 0.4}, lambda x: np.maximum(0, np.minimum(1, 0.3 * x + 0.4))),
    ("HardSwish", {}, lambda x: x * np.maximum(0, np.minimum(1, x / 6 + 0.5))),
    ("Silu", {}, lambda x: x * _sigmoid(x)),
    ("Swish", {}, lambda x: x / (1 + np.exp(-x))),
    ("Mish", {}, lambda x: x * np.tanh(np.log(1 + np.exp(x)))),
    ("Softplus", {}, lambda x: np.log(np.exp(x) + 1)),
    ("Softplus", {"beta": 2.0, "threshold": 3.0}, lambda x: np.where(2 * x > 3, x, 0.5 * np.log(np.exp(2 * x) + 1))),
    ("Gelu", {"approximate": False}, lambda x: _gelu(x, False)),
    ("Gelu", {"approximate": True}, lambda x: _gelu(x, True)),
]


@pytest.mark.parametrize("op,attrs,formula", ACTIVATIONS, ids=[f"{a[0]}-{i}" for i, a in enumerate(ACTIVATIONS)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_activation_matches_spec_formula(op, attrs, formula, dtype):
    x = rand(3, 4, 5, dtype=dtype, low=-8, high=8)
    y = hlo1(op, x, **attrs)
    assert y.dtype == dtype
    close(y, formula(x.astype(np.float64)), rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)


def test_activation_float16_is_computed_in_float32():
    x = rand(50, dtype=np.float16, low=-4, high=4)
    y = hlo1("Mish", x)
    assert y.dtype == np.float16
    close(
        y,
        (x.astype(np.float64) * np.tanh(np.log1p(np.exp(x.astype(np.float64))))).astype(np.float16),
        rtol=1e-3,
        atol=1e-3,
    )


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_integer_relus(dtype):
    x = np.arange(-10, 10, dtype=dtype).reshape(4, 5)
    assert np.array_equal(hlo1("Relu", x), np.maximum(x, 0))
    assert np.array_equal(hlo1("Relu6", x), np.clip(x, 0, 6))
    assert hlo1("Relu6", x).dtype == dtype


def test_prelu_broadcasts_slope():
    x = rand(2, 3, 4)
    slope = rand(3, 1)
    close(hlo1("PRelu", x, slope), np.where(x < 0, slope * x, x))
    xi = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    assert np.array_equal(hlo1("PRelu", xi, np.full((4,), 2, np.int32)), np.where(xi < 0, 2 * xi, xi))


def test_gelu_matches_onnxruntime():
    x = rand(4, 7, low=-5, high=5)
    for approximate, mode in ((False, "none"), (True, "tanh")):
        close(hlo1("Gelu", x, approximate=approximate), ort("Gelu", [x], {"approximate": mode}, opset=20)[0])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gated_units(dim):
    x = rand(4, 6, 8).astype(np.float64)
    a, b = np.split(x, 2, axis=dim)
    close(hlo1("Glu", x, dim=dim), a * _sigmoid(b), rtol=1e-12)
    close(hlo1("Gtu", x, dim=dim), np.tanh(a) * _sigmoid(b), rtol=1e-12)
    for approximate in (False, True):
        close(hlo1("GeGlu", x, dim=dim, approximate=approximate), a * _gelu(b, approximate), rtol=1e-12)


def test_gated_unit_needs_even_dim():
    with pytest.raises(ExecutionError, match="two equal halves"):
        hlo1("Glu", rand(3, 5), dim=1)


# ---------------------------------------------------------------- softmax


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("accurate", [False, True])
@pytest.mark.parametrize("logarithmic", [False, True])
def test_softmax_formula(axis, accurate, logarithmic):
    x = rand(3, 4, 5, low=-5, high=5).astype(np.float64)
    shifted = x - x.max(axis=axis, keepdims=True) if accurate else x
    s = np.exp(shifted) / np.exp(shifted).sum(axis=axis, keepdims=True)
    expected = np.log(s) if logarithmic else s
    close(hlo1("Softmax", x, axis=axis, accurate=accurate, logarithmic=logarithmic), expected, rtol=1e-12)


def test_softmax_epsilon_bounds_the_denominator():
    x = np.array([[-30.0, -31.0, -29.0], [1.0, 2.0, 3.0]])
    e = np.exp(x)
    expected = e / np.maximum(e.sum(axis=1, keepdims=True), 1e-3)
    close(hlo1("Softmax", x, epsilon=1e-3), expected, rtol=1e-12, atol=0)
    close(hlo1("Softmax", x.astype(np.float32)), ort("Softmax", [x.astype(np.float32)], {"axis": -1})[0])


# ---------------------------------------------------------------- convolution


def direct_conv(
    lhs, rhs, lhs_layout, rhs_layout, out_layout, strides, padding, lhs_dilation, rhs_dilation, fgc=1, bgc=1
):
    """XLA convolution written from the StableHLO definition, one output position at a time."""
    x = np.transpose(lhs, lhs_layout).astype(np.float64 if lhs.dtype.kind == "f" else np.int64)
    w = np.transpose(rhs, rhs_layout).astype(x.dtype)
    n_sp = x.ndim - 2
    # Base dilation: d - 1 zeros between elements.
    dil = np.zeros(x.shape[:2] + tuple((s - 1) * d + 1 for s, d in zip(x.shape[2:], lhs_dilation)), x.dtype)
    dil[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in lhs_dilation)] = x
    # Padding: positive pads with zeros, negative crops.
    for i, (lo, hi) in enumerate(padding):
        axis = 2 + i
        if lo < 0:
            dil = np.take(dil, range(-lo, dil.shape[axis]), axis=axis)
        if hi < 0:
            dil = np.take(dil, range(0, dil.shape[axis] + hi), axis=axis)
        widths = [(0, 0)] * dil.ndim
        widths[axis] = (max(lo, 0), max(hi, 0))
        dil = np.pad(dil, widths)

    def plain(xg, wg):
        kernel = wg.shape[2:]
        eff = [(k - 1) * d + 1 for k, d in zip(kernel, rhs_dilation)]
        out = [(s - e) // st + 1 for s, e, st in zip(xg.shape[2:], eff, strides)]
        y = np.zeros((xg.shape[0], wg.shape[0]) + tuple(out), x.dtype)
        for pos in itertools.product(*[range(o) for o in out]):
            window = xg[
                (slice(None), slice(None))
                + tuple(slice(p * st, p * st + e, d) for p, st, e, d in zip(pos, strides, eff, rhs_dilation))
            ]
            y[(slice(None), slice(None)) + pos] = np.tensordot(
                window, wg, axes=([1] + list(range(2, 2 + n_sp)), [1] + list(range(2, 2 + n_sp)))
            )
        return y

    if fgc > 1:
        y = np.concatenate([plain(xg, wg) for xg, wg in zip(np.split(dil, fgc, 1), np.split(w, fgc, 0))], axis=1)
    elif bgc > 1:
        y = np.concatenate([plain(xg, wg) for xg, wg in zip(np.split(dil, bgc, 0), np.split(w, bgc, 0))], axis=1)
    else:
        y = plain(dil, w)
    return np.transpose(y, np.argsort(out_layout))


def conv_attrs(lhs_layout, rhs_layout, out_layout, **extra):
    return dict(
        input_batch_dimension=lhs_layout[0],
        input_feature_dimension=lhs_layout[1],
        input_spatial_dimensions=list(lhs_layout[2:]),
        kernel_output_feature_dimension=rhs_layout[0],
        kernel_input_feature_dimension=rhs_layout[1],
        kernel_spatial_dimensions=list(rhs_layout[2:]),
        output_batch_dimension=out_layout[0],
        output_feature_dimension=out_layout[1],
        output_spatial_dimensions=list(out_layout[2:]),
        **extra,
    )


NCHW, OIHW = (0, 1, 2, 3), (0, 1, 2, 3)
NHWC, HWIO = (0, 3, 1, 2), (3, 2, 0, 1)

ORT_CONVS = [  # x shape, w shape, ONNX attrs
    ((1, 3, 9, 9), (4, 3, 3, 3), {}),
    ((2, 4, 10, 8), (6, 2, 3, 2), {"group": 2, "strides": [2, 1], "pads": [1, 0, 2, 1]}),
    ((1, 2, 11, 11), (3, 2, 3, 3), {"dilations": [2, 3], "pads": [2, 2, 2, 2]}),
    ((2, 6, 7, 7), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}),
    ((1, 4, 6, 6), (5, 4, 1, 1), {"strides": [2, 2]}),
    ((1, 2, 12), (3, 2, 4), {"strides": [3], "pads": [1, 2]}),
    ((1, 2, 5, 6, 4), (2, 2, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1]}),
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", ORT_CONVS)
@pytest.mark.parametrize("layout", ["channels_first", "channels_last"])
def test_conv_matches_onnxruntime(x_shape, w_shape, attrs, layout):
    x, w = rand(*x_shape), rand(*w_shape)
    expected = ort("Conv", [x, w], attrs)[0]
    n = x.ndim - 2
    pads = attrs.get("pads", [0] * 2 * n)
    hlo_attrs = dict(
        window_strides=attrs.get("strides"),
        padding=pads,
        rhs_dilation=attrs.get("dilations"),
        feature_group_count=attrs.get("group", 1),
    )
    if layout == "channels_first":
        dims = tuple(range(n + 2))
        y = hlo1("Conv", x, w, **conv_attrs(dims, dims, dims, **hlo_attrs))
        close(y, expected, rtol=1e-4, atol=1e-4)
    else:
        # NHWC input, HWIO kernel, NHWC output: the same convolution, transposed.
        act = (0,) + tuple(range(2, n + 2)) + (1,)
        ker = tuple(range(2, n + 2)) + (1, 0)
        lhs_layout = (0, n + 1) + tuple(range(1, n + 1))
        rhs_layout = (n + 1, n) + tuple(range(n))
        y = hlo1(
            "Conv", x.transpose(act), w.transpose(ker), **conv_attrs(lhs_layout, rhs_layout, lhs_layout, **hlo_attrs)
        )
        close(y, expected.transpose(act), rtol=1e-4, atol=1e-4)


def test_conv_bias_matches_onnxruntime():
    x, w, b = rand(2, 4, 8, 8), rand(6, 2, 3, 3), rand(6)
    expected = ort("Conv", [x, w, b], {"group": 2, "pads": [1, 1, 1, 1]})[0]
    y = hlo1(
        "ConvBias",
        x.transpose(0, 2, 3, 1),
        w.transpose(2, 3, 1, 0),
        b,
        **conv_attrs(NHWC, HWIO, NHWC, padding=[1, 1, 1, 1], feature_group_count=2),
    )
    close(y, expected.transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_conv_auto_pad_matches_onnxruntime(mode):
    x, w = rand(1, 2, 10, 9), rand(3, 2, 4, 3)
    expected = ort("Conv", [x, w], {"auto_pad": mode, "strides": [3, 2]})[0]
    y = hlo1("Conv", x, w, **conv_attrs(NCHW, OIHW, NCHW, window_strides=[3, 2], auto_pad=mode))
    close(y, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("stride,pad,out_pad,group", [(2, 0, 0, 1), (2, 1, 1, 1), (3, 1, 0, 2), (1, 0, 0, 1)])
def test_conv_lhs_dilation_is_transposed_convolution(stride, pad, out_pad, group):
    # ConvTranspose(x, W) = Conv(x dilated by the stride, W flipped with in/out features swapped per group,
    # padding (k - 1) - pad low and (k - 1) - pad + output_padding high).
    c_in, o_per_group, k = 4, 3, 3
    x, w = rand(1, c_in, 5, 6), rand(c_in, o_per_group, k, k)
    expected = ort(
        "ConvTranspose",
        [x, w],
        {"strides": [stride, stride], "pads": [pad] * 4, "output_padding": [out_pad] * 2, "group": group},
    )[0]
    kernel = (
        w.reshape(group, c_in // group, o_per_group, k, k)
        .swapaxes(1, 2)
        .reshape(group * o_per_group, c_in // group, k, k)[:, :, ::-1, ::-1]
    )
    lo, hi = k - 1 - pad, k - 1 - pad + out_pad
    y = hlo1(
        "Conv",
        x,
        np.ascontiguousarray(kernel),
        **conv_attrs(
            NCHW, OIHW, NCHW, lhs_dilation=[stride, stride], padding=[lo, lo, hi, hi], feature_group_count=group
        ),
    )
    close(y, expected, rtol=1e-4, atol=1e-4)


DIRECT_CONVS = [  # lhs shape, rhs shape, layouts, attrs
    ((4, 3, 7, 6), (4, 3, 2, 2), (NCHW, OIHW, NCHW), dict(batch_group_count=2)),
    ((6, 7, 5, 2), (2, 3, 2, 6), (NHWC, HWIO, NHWC), dict(batch_group_count=3, window_strides=[2, 1])),
    ((2, 4, 9, 8), (3, 4, 3, 3), (NCHW, OIHW, NCHW), dict(padding=[-1, 2, -2, 1])),
    (
        (1, 9, 9, 4),
        (3, 3, 2, 6),
        (NHWC, HWIO, NHWC),
        dict(feature_group_count=2, lhs_dilation=[2, 1], rhs_dilation=[1, 2], padding=[1, 0, 2, -1]),
    ),
    (
        (2, 5, 4, 3),
        (3, 2, 3, 2),
        ((3, 0, 1, 2), (1, 3, 0, 2), (2, 3, 0, 1)),
        dict(window_strides=[1, 2], padding=[1, 1, 0, 2], lhs_dilation=[2, 2]),
    ),
]


@pytest.mark.parametrize("lhs_shape,rhs_shape,layouts,attrs", DIRECT_CONVS)
def test_conv_matches_direct_formula(lhs_shape, rhs_shape, layouts, attrs):
    lhs, rhs = rand(*lhs_shape, dtype=np.float64), rand(*rhs_shape, dtype=np.float64)
    n = lhs.ndim - 2
    pads = attrs.get("padding", [0] * 2 * n)
    expected = direct_conv(
        lhs,
        rhs,
        *layouts,
        attrs.get("window_strides", [1] * n),
        list(zip(pads[:n], pads[n:])),
        attrs.get("lhs_dilation", [1] * n),
        attrs.get("rhs_dilation", [1] * n),
        attrs.get("feature_group_count", 1),
        attrs.get("batch_group_count", 1),
    )
    close(hlo1("Conv", lhs, rhs, **conv_attrs(*layouts, **attrs)), expected, rtol=1e-12, atol=1e-12)


def test_conv_float16_matches_onnxruntime():
    x, w = rand(1, 3, 8, 8, dtype=np.float16), rand(4, 3, 3, 3, dtype=np.float16)
    expected = ort("Conv", [x, w], {"pads": [1, 1, 1, 1]})[0]
    y = hlo1("Conv", x, w, **conv_attrs(NCHW, OIHW, NCHW, padding=[1, 1, 1, 1]))
    assert y.dtype == np.float16
    close(y, expected, rtol=2e-2, atol=2e-2)


def test_conv_integers_are_exact():
    lhs = RNG.integers(-50, 50, (2, 3, 6, 6)).astype(np.int32)
    rhs = RNG.integers(-50, 50, (4, 3, 3, 3)).astype(np.int32)
    y = hlo1("Conv", lhs, rhs, **conv_attrs(NCHW, OIHW, NCHW, padding=[1, 0, 1, 0]))
    assert y.dtype == np.int32
    assert np.array_equal(y, direct_conv(lhs, rhs, NCHW, OIHW, NCHW, [1, 1], [(1, 1), (0, 0)], [1, 1], [1, 1]))


# ---------------------------------------------------------------- dot, gemm, cholesky


@pytest.mark.parametrize("lhs_shape,rhs_shape", [((5,), (5,)), ((3, 5), (5,)), ((5,), (5, 4)), ((3, 5), (5, 4))])
def test_dot_shapes(lhs_shape, rhs_shape):
    lhs, rhs = rand(*lhs_shape, dtype=np.float64), rand(*rhs_shape, dtype=np.float64)
    expected = np.einsum(
        {1: "k", 2: "mk"}[lhs.ndim]
        + ","
        + {1: "k", 2: "kn"}[rhs.ndim]
        + "->"
        + {1: "", 2: "m"}[lhs.ndim]
        + {1: "", 2: "n"}[rhs.ndim],
        lhs,
        rhs,
    )
    close(hlo1("Dot", lhs, rhs), expected, rtol=1e-12)


DOT_GENERAL = [  # lhs, rhs, lb, rb, lc, rc, einsum
    ((2, 3, 4), (2, 4, 5), [0], [0], [2], [1], "bmk,bkn->bmn"),
    ((3, 4), (5, 4), [], [], [1], [1], "mk,nk->mn"),
    ((4, 2, 3, 6), (6, 3, 2, 5), [1], [2], [3, 2], [0, 1], "kbmc,cmbn->bkn"),
    ((2, 7, 3), (3, 2), [0], [1], [2], [0], "bmk,kb->bm"),
]


@pytest.mark.parametrize("ls,rs,lb,rb,lc,rc,equation", DOT_GENERAL)
def test_dot_general_matches_einsum(ls, rs, lb, rb, lc, rc, equation):
    lhs, rhs = rand(*ls, dtype=np.float64), rand(*rs, dtype=np.float64)
    dims = dict(
        lhs_batching_dimensions=lb,
        rhs_batching_dimensions=rb,
        lhs_contracting_dimensions=lc,
        rhs_contracting_dimensions=rc,
    )
    expected = np.einsum(equation, lhs, rhs)
    close(hlo1("DotGeneral", lhs, rhs, **dims), expected, rtol=1e-12)
    bias = rand(expected.shape[-1], dtype=np.float64)
    close(hlo1("DotGeneralBias", lhs, rhs, bias, **dims), expected + bias, rtol=1e-12)


def test_dot_general_integers_are_exact():
    lhs = RNG.integers(-100, 100, (2, 3, 4)).astype(np.int32)
    rhs = RNG.integers(-100, 100, (2, 4, 5)).astype(np.int32)
    y = hlo1(
        "DotGeneral",
        lhs,
        rhs,
        lhs_batching_dimensions=[0],
        rhs_batching_dimensions=[0],
        lhs_contracting_dimensions=[2],
        rhs_contracting_dimensions=[1],
    )
    assert y.dtype == np.int32 and np.array_equal(y, np.einsum("bmk,bkn->bmn", lhs, rhs))


@pytest.mark.parametrize(
    "trans_a,trans_b,alpha,beta,c_shape",
    [(0, 0, 1.0, 1.0, (3, 5)), (1, 0, 0.5, 2.0, (5,)), (0, 1, 1.5, 0.0, (1, 5)), (1, 1, 1.0, 1.0, None)],
)
def test_gemm_matches_onnxruntime(trans_a, trans_b, alpha, beta, c_shape):
    a = rand(*((4, 3) if trans_a else (3, 4)))
    b = rand(*((5, 4) if trans_b else (4, 5)))
    c = rand(*c_shape) if c_shape else None
    attrs = dict(alpha=alpha, beta=beta, transA=trans_a, transB=trans_b)
    close(hlo1("Gemm", a, b, c, **attrs), ort("Gemm", [a, b, c], attrs)[0])


@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_factors(lower):
    m = rand(2, 3, 4, 4, dtype=np.float64)
    spd = m @ m.swapaxes(-1, -2) + 4 * np.eye(4)
    # XLA reads only the requested triangle: garbage in the other one must not matter.
    noisy = np.where(
        np.tril(np.ones((4, 4)), -1 if not lower else 0).astype(bool)
        if lower
        else np.triu(np.ones((4, 4))).astype(bool),
        spd,
        99.0,
    )
    f = hlo1("Cholesky", noisy, lower=lower)
    if lower:
        assert np.allclose(np.triu(f, 1), 0)
        close(f @ f.swapaxes(-1, -2), spd, rtol=1e-10)
    else:
        assert np.allclose(np.tril(f, -1), 0)
        close(f.swapaxes(-1, -2) @ f, spd, rtol=1e-10)
    assert np.all(np.diagonal(f, axis1=-2, axis2=-1) > 0)


# ---------------------------------------------------------------- normalization


def test_batch_norm_inference_matches_onnxruntime():
    x, scale, bias, mean, var = rand(2, 3, 4, 5), rand(3), rand(3), rand(3), rand(3, low=0.1, high=2)
    expected = ort("BatchNormalization", [x, scale, bias, mean, var], {"epsilon": 1e-3}, opset=15)[0]
    close(hlo1("BatchNormInference", x, scale, bias, mean, var, epsilon=1e-3, feature_index=1), expected)
    # Channels last: the feature dim is named.
    y = hlo1("BatchNormInference", x.transpose(0, 2, 3, 1), scale, bias, mean, var, epsilon=1e-3, feature_index=3)
    close(y, expected.transpose(0, 2, 3, 1))


@pytest.mark.parametrize("feature_index", [0, 1, 2])
def test_batch_norm_training_formula(feature_index):
    x, scale, bias = rand(3, 4, 5, dtype=np.float64), rand(4, dtype=np.float64), rand(4, dtype=np.float64)
    x = np.moveaxis(x, 1, feature_index)
    y, mean, var = run_hlo("BatchNormTraining", x, scale, bias, outputs=3, epsilon=1e-4, feature_index=feature_index)
    xs = np.moveaxis(x, feature_index, -1).reshape(-1, 4)
    mu, v = xs.sum(0) / len(xs), ((xs - xs.sum(0) / len(xs)) ** 2).sum(0) / len(xs)
    shape = [-1 if d == feature_index else 1 for d in range(3)]
    close(mean, mu, rtol=1e-12)
    close(var, v, rtol=1e-12)
    close(
        y,
        (x - mu.reshape(shape)) / np.sqrt(v.reshape(shape) + 1e-4) * scale.reshape(shape) + bias.reshape(shape),
        rtol=1e-10,
    )


@pytest.mark.parametrize("feature_index", [1, 3])
def test_batch_norm_grad_matches_finite_differences(feature_index):
    eps = 1e-3
    x = rand(2, 3, 3, 3, dtype=np.float64)
    scale, grad_out = rand(3, dtype=np.float64), rand(2, 3, 3, 3, dtype=np.float64)
    x, grad_out = np.moveaxis(x, 1, feature_index), np.moveaxis(grad_out, 1, feature_index)
    axes = tuple(d for d in range(4) if d != feature_index)
    shape = [-1 if d == feature_index else 1 for d in range(4)]

    def objective(x_, scale_, bias_):  # sum(grad_out * batch_norm_training(x))
        mu, var = x_.mean(axis=axes, keepdims=True), x_.var(axis=axes, keepdims=True)
        return float(
            ((x_ - mu) / np.sqrt(var + eps) * scale_.reshape(shape) + bias_.reshape(shape) * 1.0)
            .__mul__(grad_out)
            .sum()
        )

    bias = np.zeros(3)
    h = 1e-6
    numeric_x = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        d = np.zeros_like(x)
        d[i] = h
        numeric_x[i] = (objective(x + d, scale, bias) - objective(x - d, scale, bias)) / (2 * h)
    numeric_scale = np.array(
        [(objective(x, scale + h * e, bias) - objective(x, scale - h * e, bias)) / (2 * h) for e in np.eye(3)]
    )
    numeric_bias = np.array(
        [(objective(x, scale, bias + h * e) - objective(x, scale, bias - h * e)) / (2 * h) for e in np.eye(3)]
    )
    gx, gs, gb = run_hlo(
        "BatchNormGrad",
        x,
        scale,
        x.mean(axis=axes),
        x.var(axis=axes),
        grad_out,
        outputs=3,
        epsilon=eps,
        feature_index=feature_index,
    )
    close(gx, numeric_x, rtol=1e-5, atol=1e-6)
    close(gs, numeric_scale, rtol=1e-5, atol=1e-6)
    close(gb, numeric_bias, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis", [-1, 1, 2])
def test_layer_norm_matches_onnxruntime(axis):
    x = rand(2, 3, 4, 5)
    scale, bias = rand(*x.shape[axis:]), rand(*x.shape[axis:])
    expected = ort("LayerNormalization", [x, scale, bias], {"axis": axis, "epsilon": 1e-4}, outputs=3, opset=17)
    y, mean, rstd = run_hlo("LayerNorm", x, scale, bias, outputs=3, axis=axis, epsilon=1e-4)
    close(y, expected[0], rtol=1e-4, atol=1e-5)
    close(mean, expected[1], rtol=1e-5, atol=1e-6)
    close(rstd, expected[2], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("groups", [1, 2, 6])
def test_group_norm_matches_onnxruntime(groups):
    x, scale, bias = rand(2, 6, 4, 3), rand(6), rand(6)
    expected = ort("GroupNormalization", [x, scale, bias], {"num_groups": groups, "epsilon": 1e-3}, opset=21)[0]
    close(hlo1("GroupNorm", x, scale, bias, num_groups=groups, epsilon=1e-3), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5)])
def test_instance_norm_matches_onnxruntime(shape):
    x, scale, bias = rand(*shape), rand(shape[1]), rand(shape[1])
    expected = ort("InstanceNormalization", [x, scale, bias], {"epsilon": 1e-4})[0]
    close(hlo1("InstanceNorm", x, scale, bias, epsilon=1e-4), expected, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- pooling

POOLS = [  # x shape, ONNX attrs
    ((1, 2, 9, 9), {"kernel_shape": [3, 3]}),
    ((2, 3, 10, 7), {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]}),
    ((1, 2, 8, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 1, 7, 6), {"kernel_shape": [2, 3], "strides": [1, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 1, 7, 6), {"kernel_shape": [4, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 11), {"kernel_shape": [4], "strides": [3], "pads": [2, 1]}),
]


def _hlo_pool_attrs(attrs):
    out = {
        "kernel_shape": attrs["kernel_shape"],
        "strides": attrs.get("strides"),
        "padding": attrs.get("pads"),
        "ceil_mode": bool(attrs.get("ceil_mode", 0)),
    }
    if "auto_pad" in attrs:
        out["auto_pad"] = attrs["auto_pad"]
    return out


@pytest.mark.parametrize("shape,attrs", POOLS)
@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool_matches_onnxruntime(shape, attrs, count_include_pad):
    x = rand(*shape)
    expected = ort("AveragePool", [x], {**attrs, "count_include_pad": count_include_pad}, opset=19)[0]
    spatial = list(range(2, x.ndim))
    y = hlo1("AveragePool", x, dims=spatial, count_include_pad=bool(count_include_pad), **_hlo_pool_attrs(attrs))
    close(y, expected)
    # Channels last: pool over dims 1..n.
    last = (0,) + tuple(range(2, x.ndim)) + (1,)
    y = hlo1(
        "AveragePool",
        x.transpose(last),
        dims=list(range(1, x.ndim - 1)),
        count_include_pad=bool(count_include_pad),
        **_hlo_pool_attrs(attrs),
    )
    close(y, expected.transpose(last))


def test_average_pool_dims_order_gives_the_attribute_order():
    # dims=[3, 2]: kernel_shape, strides and padding list dim 3 first.
    x = rand(1, 2, 9, 7)
    attrs = {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 0, 1]}
    expected = ort("AveragePool", [x], attrs, opset=19)[0]
    y = hlo1("AveragePool", x.transpose(0, 1, 3, 2), dims=[3, 2], **_hlo_pool_attrs(attrs))
    close(y, expected.transpose(0, 1, 3, 2))


@pytest.mark.parametrize("shape,attrs", POOLS + [((1, 2, 9, 9), {"kernel_shape": [2, 2], "dilations": [2, 3]})])
def test_max_pool_matches_onnxruntime(shape, attrs):
    x = rand(*shape)
    values, indices = ort("MaxPool", [x], attrs, outputs=2, opset=12)
    hlo_attrs = dict(_hlo_pool_attrs(attrs), dilations=attrs.get("dilations"))
    close(hlo1("MaxPool", x, **hlo_attrs), values)
    y, idx = run_hlo("MaxPool", x, outputs=2, return_indices=True, **hlo_attrs)
    close(y, values)
    assert idx.dtype == np.int64 and np.array_equal(idx, indices)


def test_max_pool_column_major_indices_match_onnxruntime():
    x = rand(1, 2, 6, 5)
    _, indices = ort("MaxPool", [x], {"kernel_shape": [2, 2], "storage_order": 1}, outputs=2, opset=12)
    _, idx = run_hlo("MaxPool", x, outputs=2, kernel_shape=[2, 2], return_indices=True, storage_order=1)
    assert np.array_equal(idx, indices)


def test_global_pools():
    x = rand(2, 3, 5, 4)
    close(hlo1("GlobalAveragePool", x, dims=[2, 3]), ort("GlobalAveragePool", [x])[0])
    close(hlo1("GlobalMaxPool", x, dims=[2, 3]), ort("GlobalMaxPool", [x])[0])
    nhwc = x.transpose(0, 2, 3, 1)
    close(hlo1("GlobalAveragePool", nhwc, dims=[1, 2]), x.mean(axis=(2, 3)).reshape(2, 1, 1, 3))
    close(hlo1("GlobalMaxPool", nhwc, dims=[1, 2]), x.max(axis=(2, 3)).reshape(2, 1, 1, 3))


# ---------------------------------------------------------------- ReduceWindow / SelectAndScatter


def direct_reduce_window(x, init, window, strides, base, wdil, pads, fold):
    """Each output element folds ``fold`` over the real (not padding, not hole) elements of its window."""
    rank = x.ndim
    dilated_shape = [(s - 1) * b + 1 for s, b in zip(x.shape, base)]
    padded = [d + lo + hi for d, (lo, hi) in zip(dilated_shape, pads)]
    out_shape = [(p - ((w - 1) * d + 1)) // s + 1 for p, w, d, s in zip(padded, window, wdil, strides)]
    y = np.empty(out_shape, dtype=np.float64)
    for o in np.ndindex(*out_shape):
        acc = init
        for k in np.ndindex(*window):
            pos = [o[d] * strides[d] + k[d] * wdil[d] - pads[d][0] for d in range(rank)]
            if all(0 <= p < dilated_shape[d] and p % base[d] == 0 for d, p in enumerate(pos)):
                acc = fold(acc, float(x[tuple(p // b for p, b in zip(pos, base))]))
        y[o] = acc
    return y


REDUCE_WINDOWS = [  # computation, init, fold
    ("ADD", 0.0, lambda a, v: a + v),
    ("MAX", -np.inf, max),
    ("MIN", np.inf, min),
    ("MUL", 1.0, lambda a, v: a * v),
    ("L2", 0.0, lambda a, v: math.sqrt(a * a + v * v)),
    ("COUNT", 0.0, lambda a, v: a + 1),
    ("ADD", 10.0, lambda a, v: a + v),
    ("SUB", 0.0, lambda a, v: a - v),
    ("DIV", 1.0, lambda a, v: a / v),
]

WINDOW_GEOMETRIES = [  # shape, window, strides, base dilations, window dilations, auto_pad, ceil_mode
    ((6, 7), [2, 3], [2, 1], None, None, "NOTSET", False),
    ((2, 8, 10), [1, 3, 2], [1, 2, 3], None, [1, 2, 1], "NOTSET", True),
    ((5, 6), [3, 2], [2, 2], [2, 1], None, "SAME_UPPER", False),
    ((1, 9), [1, 4], [1, 3], None, None, "SAME_LOWER", False),
]


@pytest.mark.parametrize("computation,init,fold", REDUCE_WINDOWS)
@pytest.mark.parametrize("geometry", WINDOW_GEOMETRIES)
def test_reduce_window_matches_direct_fold(computation, init, fold, geometry):
    shape, window, strides, base, wdil, auto_pad, ceil_mode = geometry
    rank = len(shape)
    x = rand(*shape, dtype=np.float64, low=0.5, high=1.5)
    base_, wdil_ = base or [1] * rank, wdil or [1] * rank
    # Padding written out from the auto_pad / ceil_mode rules.
    pads = []
    for size, w, s, b, d in zip(shape, window, strides, base_, wdil_):
        size = (size - 1) * b + 1
        eff = (w - 1) * d + 1
        if auto_pad.startswith("SAME"):
            total = max(0, (math.ceil(size / s) - 1) * s + eff - size)
            lo = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            pads.append((lo, total - lo))
        elif ceil_mode:
            out = math.ceil((size - eff) / s) + 1
            pads.append((0, max(0, (out - 1) * s + eff - size)))
        else:
            pads.append((0, 0))
    expected = direct_reduce_window(x, init, window, strides, base_, wdil_, pads, fold)
    y = run_hlo(
        "ReduceWindow",
        x,
        np.array(init),
        computation=computation,
        window_dimensions=window,
        window_strides=strides,
        base_dilations=base,
        window_dilations=wdil,
        auto_pad=auto_pad,
        ceil_mode=ceil_mode,
    )[0]
    close(y, expected, rtol=1e-12)


def test_reduce_window_integer_and_bool_combiners():
    x = RNG.integers(0, 16, (4, 6)).astype(np.int32)
    attrs = dict(window_dimensions=[2, 3], window_strides=[2, 3])
    blocks = x.reshape(2, 2, 2, 3).transpose(0, 2, 1, 3).reshape(2, 2, 6)
    xor = np.bitwise_xor.reduce(blocks, axis=-1)
    assert np.array_equal(hlo1("ReduceWindow", x, np.int32(0), computation="XOR", **attrs), xor)
    assert np.array_equal(hlo1("ReduceWindow", x, np.int32(0), computation="ADD", **attrs), blocks.sum(-1))
    b = x > 7
    assert np.array_equal(hlo1("ReduceWindow", b, np.bool_(True), computation="AND", **attrs), (blocks > 7).all(-1))
    assert np.array_equal(hlo1("ReduceWindow", b, np.bool_(False), computation="OR", **attrs), (blocks > 7).any(-1))


@pytest.mark.parametrize("computation", ["ARGMAX", "ARGMIN"])
def test_reduce_window_arg_selects_first_extreme_and_its_companions(computation):
    x = RNG.integers(0, 4, (5, 6)).astype(np.float32)  # many ties
    iota = np.arange(30, dtype=np.float32).reshape(5, 6)
    init = np.float32(-np.inf if computation == "ARGMAX" else np.inf)
    values, where = run_hlo(
        "ReduceWindow",
        x,
        iota,
        init,
        np.float32(-1),
        outputs=2,
        computation=computation,
        window_dimensions=[2, 3],
        window_strides=[1, 2],
    )
    for o in np.ndindex(*values.shape):
        block = x[o[0] : o[0] + 2, 2 * o[1] : 2 * o[1] + 3]
        flat = block.argmax() if computation == "ARGMAX" else block.argmin()  # first in row-major order
        r, c = np.unravel_index(flat, block.shape)
        assert values[o] == block[r, c]
        assert where[o] == iota[o[0] + r, 2 * o[1] + c]
    # One input: the position of that element inside its window.
    position = hlo1("ReduceWindow", x, init, computation=computation, window_dimensions=[2, 3], window_strides=[1, 2])
    assert position.dtype == np.int64
    for o in np.ndindex(*values.shape):
        block = x[o[0] : o[0] + 2, 2 * o[1] : 2 * o[1] + 3]
        assert position[o] == (block.argmax() if computation == "ARGMAX" else block.argmin())


def test_reduce_window_two_inputs_max_lets_the_init_win():
    x = np.array([[-3.0, -1.0, 5.0, 2.0]])
    payload = np.array([[10.0, 11.0, 12.0, 13.0]])
    values, carried = run_hlo(
        "ReduceWindow",
        x,
        payload,
        np.float64(0.0),
        np.float64(-7.0),
        outputs=2,
        computation="MAX",
        window_dimensions=[1, 2],
        window_strides=[1, 2],
    )
    # First window: both elements are below the init 0, so the init pair is kept.
    assert values.tolist() == [[0.0, 5.0]] and carried.tolist() == [[-7.0, 12.0]]


def direct_select_and_scatter(x, source, init, window, strides, pads, select, combine):
    """XLA's definition: walk each window, keep the current choice while select(current, candidate) holds."""
    out = np.full(x.shape, init, dtype=np.float64)
    for o in np.ndindex(*source.shape):
        best = None
        for k in np.ndindex(*window):
            pos = tuple(o[d] * strides[d] + k[d] - pads[d] for d in range(x.ndim))
            if not all(0 <= p < s for p, s in zip(pos, x.shape)):
                continue
            if best is None or not select(x[best], x[pos]):
                best = pos
        if best is not None:
            out[best] = combine(out[best], source[o])
    return out


@pytest.mark.parametrize(
    "select_type,select",
    [("GE", lambda a, b: a >= b), ("GT", lambda a, b: a > b), ("LE", lambda a, b: a <= b), ("LT", lambda a, b: a < b)],
)
@pytest.mark.parametrize(
    "computation,combine",
    [("ADD", lambda a, b: a + b), ("MAX", max), ("UPDATE", lambda a, b: b), ("MUL", lambda a, b: a * b)],
)
def test_select_and_scatter_matches_definition(select_type, select, computation, combine):
    x = RNG.integers(0, 3, (5, 6)).astype(np.float64)  # ties exercise the select rule
    window, strides, pads = [2, 3], [1, 2], [1, 0, 0, 1]
    out_shape = [(5 + 1 - 2) // 1 + 1, (6 + 1 - 3) // 2 + 1]
    source = rand(*out_shape, dtype=np.float64)
    expected = direct_select_and_scatter(x, source, 1.0, window, strides, [1, 0], select, combine)
    y = hlo1(
        "SelectAndScatter",
        x,
        source,
        np.float64(1.0),
        select_type=select_type,
        computation=computation,
        window_dimensions=window,
        window_strides=strides,
        padding=pads,
    )
    close(y, expected, rtol=1e-12)


def test_select_and_scatter_is_the_max_pool_gradient():
    # Non-overlapping 2x2 max pooling: the gradient lands on each window's maximum.
    x = rand(1, 1, 4, 6)
    grad = rand(1, 1, 2, 3)
    _, indices = ort("MaxPool", [x], {"kernel_shape": [2, 2], "strides": [2, 2]}, outputs=2, opset=12)
    expected = np.zeros(x.size, np.float32)
    expected[indices.ravel()] = grad.ravel()
    y = hlo1(
        "SelectAndScatter",
        x,
        grad,
        np.float32(0),
        select_type="GE",
        computation="ADD",
        window_dimensions=[1, 1, 2, 2],
        window_strides=[1, 1, 2, 2],
        padding=[0] * 8,
    )
    close(y, expected.reshape(x.shape))


# ---------------------------------------------------------------- gather / scatter


def direct_gather(operand, indices, offset_dims, collapsed, start_index_map, index_vector_dim, slice_sizes):
    """XLA Gather, one output element at a time, from the operation semantics."""
    if index_vector_dim == indices.ndim:
        indices = indices[..., None]
    batch_shape = [s for d, s in enumerate(indices.shape) if d != index_vector_dim]
    kept = [d for d in range(operand.ndim) if d not in collapsed]
    out_rank = len(batch_shape) + len(kept)
    batch_out = [d for d in range(out_rank) if d not in offset_dims]
    out_shape = [0] * out_rank
    for d, s in zip(batch_out, batch_shape):
        out_shape[d] = s
    for d, k in zip(sorted(offset_dims), kept):
        out_shape[d] = slice_sizes[k]
    out = np.zeros(out_shape, operand.dtype)
    for o in np.ndindex(*out_shape):
        g = [o[d] for d in batch_out]
        vec_index = g[:index_vector_dim] + [slice(None)] + g[index_vector_dim:]
        vector = indices[tuple(vec_index)]
        start = [0] * operand.ndim
        for k, d in enumerate(start_index_map):
            start[d] = int(vector[k])
        start = [min(max(s, 0), operand.shape[d] - slice_sizes[d]) for d, s in enumerate(start)]
        offset = [0] * operand.ndim
        for d, k in zip(sorted(offset_dims), kept):
            offset[k] = o[d]
        out[o] = operand[tuple(s + f for s, f in zip(start, offset))]
    return out


GATHERS = [  # operand shape, indices, offset_dims, collapsed, start_index_map, index_vector_dim, slice_sizes
    ((5, 4), np.array([3, 0, 4]), [1], [0], [0], 1, [1, 4]),  # rows: ONNX Gather axis 0
    ((5, 4), np.array([[1, 3], [2, 2]]), [0], [1], [1], 2, [5, 1]),  # columns, batch dims after the offset dim
    ((4, 5, 6), np.array([[0, 1], [3, 4], [2, 9]]), [1, 2], [0], [0, 2], 1, [1, 3, 2]),  # clamped windows
    ((3, 4, 5), np.array([[2, 1], [0, 3]]).T, [0, 2], [1], [1, 2], 0, [2, 1, 2]),  # index vectors along dim 0
]


@pytest.mark.parametrize("shape,indices,offset_dims,collapsed,start_index_map,ivd,slice_sizes", GATHERS)
def test_gather_matches_definition(shape, indices, offset_dims, collapsed, start_index_map, ivd, slice_sizes):
    operand = rand(*shape)
    expected = direct_gather(operand, indices, offset_dims, collapsed, start_index_map, ivd, slice_sizes)
    y = hlo1(
        "Gather",
        operand,
        indices.astype(np.int64),
        index_vector_dim=ivd,
        start_index_map=start_index_map,
        collapsed_slice_dims=collapsed,
        offset_dims=offset_dims,
        slice_sizes=slice_sizes,
    )
    assert np.array_equal(y, expected)


def test_gather_rows_is_numpy_take():
    operand, idx = rand(6, 3, 2), np.array([[5, 0], [2, 2]], dtype=np.int32)
    y = hlo1(
        "Gather",
        operand,
        idx,
        index_vector_dim=2,
        start_index_map=[0],
        collapsed_slice_dims=[0],
        offset_dims=[2, 3],
        slice_sizes=[1, 3, 2],
    )
    assert np.array_equal(y, np.take(operand, idx, axis=0))


def direct_scatter(operand, indices, updates, update_window_dims, inserted, to_operand, ivd, combine):
    """XLA Scatter, one update element at a time; windows outside the operand are skipped whole."""
    out = operand.astype(np.float64).copy()
    if ivd == indices.ndim:
        indices = indices[..., None]
    scatter_dims = [d for d in range(updates.ndim) if d not in update_window_dims]
    window_operand_dims = [d for d in range(operand.ndim) if d not in inserted]
    window_shape = [updates.shape[d] for d in update_window_dims]
    for u in np.ndindex(*updates.shape):
        g = [u[d] for d in scatter_dims]
        vector = indices[tuple(g[:ivd] + [slice(None)] + g[ivd:])]
        start = [0] * operand.ndim
        for k, d in enumerate(to_operand):
            start[d] = int(vector[k])
        extent = [1] * operand.ndim
        full_window = [0] * operand.ndim
        for d, wd, size in zip(window_operand_dims, update_window_dims, window_shape):
            full_window[d], extent[d] = u[wd], size
        if not all(0 <= s and s + e <= n for s, e, n in zip(start, extent, operand.shape)):
            continue
        target = tuple(s + w for s, w in zip(start, full_window))
        out[target] = combine(out[target], updates[u])
    return out


SCATTERS = [  # operand shape, indices, updates shape, update_window_dims, inserted, to_operand, ivd
    ((6, 3), np.array([[4], [1], [4]]), (3, 3), [1], [0], [0], 1),  # rows, with a repeated row
    ((4, 5), np.array([[0, 1], [2, 3], [3, 4], [1, 0]]), (4,), [], [0, 1], [0, 1], 1),  # elements, one out of range
    ((3, 6, 4), np.array([[1, 2], [0, 5]]), (2, 3, 2), [1, 2], [0], [0, 1], 1),  # windows, the second clipped
    ((5, 4), np.array([2, 0, 2]), (4, 3), [0], [1], [1], 1),  # columns, window dim first
]


@pytest.mark.parametrize("shape,indices,updates_shape,uwd,inserted,to_operand,ivd", SCATTERS)
@pytest.mark.parametrize(
    "computation,combine",
    [
        ("UPDATE", lambda a, b: b),
        ("ADD", lambda a, b: a + b),
        ("MUL", lambda a, b: a * b),
        ("MAX", max),
        ("MIN", min),
        ("SUB", lambda a, b: a - b),
    ],
)
def test_scatter_matches_definition(
    shape, indices, updates_shape, uwd, inserted, to_operand, ivd, computation, combine
):
    operand, updates = rand(*shape, dtype=np.float64), rand(*updates_shape, dtype=np.float64)
    expected = direct_scatter(operand, indices, updates, uwd, inserted, to_operand, ivd, combine)
    y = hlo1(
        "ScatterND",
        operand,
        indices.astype(np.int64),
        updates,
        computation=computation,
        index_vector_dim=ivd,
        update_window_dims=uwd,
        inserted_window_dims=inserted,
        scatter_dims_to_operand_dims=to_operand,
    )
    close(y, expected, rtol=1e-12)


def test_scatter_rows_matches_onnx_scatter_nd():
    data, idx, upd = rand(5, 4), np.array([[3], [0]], dtype=np.int64), rand(2, 4)
    expected = ort("ScatterND", [data, idx, upd], {"reduction": "add"}, opset=18)[0]
    y = hlo1(
        "ScatterND",
        data,
        idx,
        upd,
        computation="ADD",
        index_vector_dim=1,
        update_window_dims=[1],
        inserted_window_dims=[0],
        scatter_dims_to_operand_dims=[0],
    )
    close(y, expected)


# ---------------------------------------------------------------- vision

RESIZES = [  # input shape, mode, coordinate mode, scales or sizes
    ((1, 2, 4, 5), "NEAREST", "HALF_PIXEL", [1, 1, 2, 1.5], None),
    ((1, 2, 4, 5), "NEAREST", "ASYMMETRIC", None, [1, 2, 7, 3]),
    ((1, 1, 5, 4), "LINEAR", "HALF_PIXEL", [1, 1, 0.6, 2], None),
    ((2, 1, 4, 4), "LINEAR", "ALIGN_CORNERS", None, [2, 1, 7, 5]),
    ((1, 1, 4, 6), "LINEAR", "PYTORCH_HALF_PIXEL", None, [1, 1, 1, 9]),
    ((1, 2, 5, 5), "CUBIC", "HALF_PIXEL", [1, 1, 1.6, 0.8], None),
]


@pytest.mark.parametrize("shape,mode,transform,scales,sizes", RESIZES)
def test_resize_matches_onnxruntime(shape, mode, transform, scales, sizes):
    x = rand(*shape)
    s = None if scales is None else np.array(scales, np.float32)
    z = None if sizes is None else np.array(sizes, np.int64)
    expected = ort(
        "Resize", [x, None, s, z], {"mode": mode.lower(), "coordinate_transformation_mode": transform.lower()}, opset=19
    )[0]
    y = hlo1("Resize", x, None, s, z, mode=mode, coordinate_transformation_mode=transform)
    close(y, expected, rtol=1e-5, atol=1e-5)


def test_resize_tf_crop_and_resize_matches_onnxruntime():
    x = rand(1, 1, 6, 6)
    roi = np.array([0, 0, 0.2, 0.1, 1, 1, 0.9, 1.2], np.float32)
    attrs = {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 7.0}
    expected = ort("Resize", [x, roi, None, np.array([1, 1, 4, 5], np.int64)], attrs, opset=19)[0]
    y = hlo1(
        "Resize",
        x,
        roi,
        None,
        np.array([1, 1, 4, 5], np.int64),
        mode="LINEAR",
        coordinate_transformation_mode="TF_CROP_AND_RESIZE",
        extrapolation_value=7.0,
    )
    close(y, expected)


@pytest.mark.parametrize("mode", ["NEAREST", "LINEAR"])
@pytest.mark.parametrize(
    "padding_mode,onnx_padding", [("PAD_VALUE", "zeros"), ("PAD_EDGE", "border"), ("PAD_REFLECT", "reflection")]
)
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_matches_onnxruntime(mode, padding_mode, onnx_padding, align_corners):
    x = rand(2, 3, 5, 6)
    grid = rand(2, 4, 3, 2, low=-1.3, high=1.3)
    expected = ort(
        "GridSample",
        [x, grid],
        {
            "mode": "bilinear" if mode == "LINEAR" else "nearest",
            "padding_mode": onnx_padding,
            "align_corners": int(align_corners),
        },
        opset=16,
    )[0]
    y = hlo1("GridSample", x, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    close(y, expected)


@pytest.mark.parametrize("mode", ["ROIALIGN_AVG", "ROIALIGN_MAX"])
@pytest.mark.parametrize("transform", ["ROIALIGN_HALF_PIXEL", "ROIALIGN_OUTPUT_HALF_PIXEL"])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_roi_align_matches_onnxruntime(mode, transform, sampling_ratio):
    x = rand(2, 3, 10, 8)
    rois = np.array([[0, 0, 7, 9], [1.5, 2.2, 6.1, 8.8], [3, 1, 5, 4]], np.float32)
    batch = np.array([0, 1, 1], np.int64)
    attrs = {
        "mode": "avg" if mode == "ROIALIGN_AVG" else "max",
        "output_height": 3,
        "output_width": 2,
        "sampling_ratio": sampling_ratio,
        "spatial_scale": 0.8,
        "coordinate_transformation_mode": "half_pixel" if transform == "ROIALIGN_HALF_PIXEL" else "output_half_pixel",
    }
    expected = ort("RoiAlign", [x, rois, batch], attrs, opset=16)[0]
    y = hlo1(
        "RoiAlign",
        x,
        rois,
        batch,
        mode=mode,
        coordinate_transformation_mode=transform,
        output_height=3,
        output_width=2,
        sampling_ratio=sampling_ratio,
        spatial_scale=0.8,
    )
    close(y, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_max_roi_pool_matches_onnxruntime(layout):
    x = rand(2, 3, 9, 8)
    rois = np.array([[0, 1, 1, 6, 7], [1, 0, 2, 7, 5], [1, 3.2, 3.7, 4.4, 8.1]], np.float32)
    expected = ort("MaxRoiPool", [x, rois], {"pooled_shape": [3, 2], "spatial_scale": 1.0})[0]
    data = x if layout == "NCHW" else x.transpose(0, 2, 3, 1)
    close(hlo1("MaxRoiPool", data, rois, layout=layout, pooled_shape=[3, 2]), expected)


@pytest.mark.parametrize("center_point_box", [0, 1])
@pytest.mark.parametrize("max_boxes,iou,score", [(3, 0.5, None), (10, 0.3, 0.4), (0, 0.5, None)])
def test_nms_matches_onnxruntime(center_point_box, max_boxes, iou, score):
    corners = RNG.uniform(0, 10, (2, 12, 2, 2)).astype(np.float32)
    boxes = np.concatenate([corners.min(axis=2), corners.max(axis=2)], axis=-1)
    if center_point_box:
        boxes = np.concatenate([(boxes[..., :2] + boxes[..., 2:]) / 2, boxes[..., 2:] - boxes[..., :2]], axis=-1)
    scores = RNG.uniform(0, 1, (2, 3, 12)).astype(np.float32)
    inputs = [boxes, scores, np.array([max_boxes], np.int64), np.array([iou], np.float32)]
    if score is not None:
        inputs.append(np.array([score], np.float32))
    expected = ort("NonMaxSuppression", inputs, {"center_point_box": center_point_box}, opset=11)[0]
    y = hlo1(
        "NMS",
        boxes,
        scores,
        max_output_boxes_per_class=max_boxes,
        iou_threshold=iou,
        score_threshold=score,
        center_point_box=center_point_box,
    )
    assert y.dtype == np.int64 and np.array_equal(y, expected)


# ---------------------------------------------------------------- random


def test_rng_normal_statistics_and_seeding():
    shape = np.array([200, 100], np.int64)
    a = hlo1("RngNormal", np.float32(2.0), np.float32(0.5), shape, seed=7)
    assert a.shape == (200, 100) and a.dtype == np.float32
    assert abs(a.mean() - 2.0) < 0.02 and abs(a.std() - 0.5) < 0.02
    assert np.array_equal(a, hlo1("RngNormal", np.float32(2.0), np.float32(0.5), shape, seed=7))
    assert not np.array_equal(a, hlo1("RngNormal", np.float32(2.0), np.float32(0.5), shape, seed=8))


def test_rng_uniform_range_and_types():
    f = hlo1("RngUniform", np.float64(-1.0), np.float64(3.0), np.array([20000], np.int32), seed=3)
    assert f.dtype == np.float64 and f.min() >= -1 and f.max() < 3 and abs(f.mean() - 1) < 0.05
    i = hlo1("RngUniform", np.int32(2), np.int32(6), np.array([50, 40], np.int64))
    assert i.dtype == np.int32 and set(np.unique(i)) == {2, 3, 4, 5}


def test_dropout_inference_is_identity():
    x = rand(4, 5)
    y, mask = run_hlo("Dropout", x, outputs=2, ratio=0.5, training_mode=False)
    assert np.array_equal(y, x) and mask.all()


@pytest.mark.parametrize("noise_shape", [None, [1, 300]])
def test_dropout_training_scales_kept_elements(noise_shape):
    x = rand(40, 300, low=0.5, high=1.5)
    y, mask = run_hlo("Dropout", x, outputs=2, ratio=0.25, seed=11, noise_shape=noise_shape)
    assert mask.dtype == np.bool_ and mask.shape == x.shape
    close(y, np.where(mask, x / 0.75, 0))
    decisions = mask[:1].size if noise_shape else mask.size
    assert abs(mask.mean() - 0.75) < 4 * math.sqrt(0.75 * 0.25 / decisions)
    if noise_shape:  # one keep decision per column, shared by every row
        assert (mask == mask[:1]).all()
    y2, _ = run_hlo("Dropout", x, outputs=2, ratio=0.25, seed=11, noise_shape=noise_shape)
    assert np.array_equal(y, y2)


# ---------------------------------------------------------------- losses


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_bce_loss_formula(reduction, weighted):
    p = rand(3, 4, dtype=np.float64, low=0.01, high=0.99)
    p[0, 0], p[0, 1] = 0.0, 1.0  # PyTorch clamps each log at -100
    t = RNG.uniform(0, 1, (3, 4))
    w = rand(3, 4, dtype=np.float64, low=0.5, high=2) if weighted else None
    with np.errstate(divide="ignore"):
        loss = -(t * np.maximum(np.log(p), -100) + (1 - t) * np.maximum(np.log(1 - p), -100))
    if weighted:
        loss = loss * w
    expected = {"none": loss, "mean": loss.mean(), "sum": loss.sum()}[reduction]
    close(hlo1("BCELoss", p, t, w, reduction=reduction), expected, rtol=1e-12)


def ctc_by_enumeration(log_probs, target, length, blank):
    """-log of the total probability of every frame labelling that collapses to ``target``."""
    total = 0.0
    for path in itertools.product(range(log_probs.shape[1]), repeat=length):
        collapsed = [c for i, c in enumerate(path) if c != blank and (i == 0 or c != path[i - 1])]
        if collapsed == list(target):
            total += math.exp(sum(log_probs[t, c] for t, c in enumerate(path)))
    return -math.log(total) if total > 0 else math.inf


@pytest.mark.parametrize("blank", [0, 2])
@pytest.mark.parametrize("concatenated", [False, True])
def test_ctc_loss_matches_enumeration(blank, concatenated):
    steps, batch, classes = 5, 3, 4
    logits = rand(steps, batch, classes, dtype=np.float64)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    labels = [c for c in range(classes) if c != blank]
    targets = np.array([[labels[0], labels[1], labels[1]], [labels[2], labels[0], 0], [labels[1], 0, 0]])
    target_lengths = np.array([3, 2, 1])
    input_lengths = np.array([5, 4, 5])
    if concatenated:
        targets = np.concatenate([targets[n, : target_lengths[n]] for n in range(batch)])
    loss, alpha = run_hlo(
        "CTCLoss",
        log_probs,
        targets.astype(np.int64),
        input_lengths.astype(np.int64),
        target_lengths.astype(np.int64),
        outputs=2,
        blank=blank,
    )
    padded = np.array([[labels[0], labels[1], labels[1]], [labels[2], labels[0], 0], [labels[1], 0, 0]])
    expected = [
        ctc_by_enumeration(log_probs[:, n], padded[n, : target_lengths[n]], input_lengths[n], blank)
        for n in range(batch)
    ]
    close(loss, expected, rtol=1e-10)
    assert alpha.shape == (batch, steps, 2 * 3 + 1)
    # The forward variables end in the loss: the last label or the trailing blank at the last frame.
    for n in range(batch):
        end = 2 * target_lengths[n]
        final = alpha[n, input_lengths[n] - 1]
        close(-np.logaddexp(final[end], final[end - 1]), expected[n], rtol=1e-10)


def test_ctc_loss_unbatched_input():
    logits = rand(4, 3, dtype=np.float64)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    loss, alpha = run_hlo("CTCLoss", log_probs, np.array([1, 2]), np.array(4), np.array(2), outputs=2)
    assert loss.shape == () and alpha.shape == (4, 5)
    close(loss, ctc_by_enumeration(log_probs, [1, 2], 4, 0), rtol=1e-10)


def test_ctc_loss_impossible_alignment_is_infinite():
    log_probs = np.log(np.full((2, 1, 3), 1 / 3))
    loss, _ = run_hlo("CTCLoss", log_probs, np.array([[1, 1]]), np.array([2]), np.array([2]), outputs=2)
    assert np.isinf(loss).all()
