"""HLO -> ONNX on hand-built HLO modules: the ONNX model passes onnx.checker's full check and onnxruntime
computes what numpy computes from the HLO semantics (written out here independently); opconv's HLO executor
agrees too."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest

import opconv
from opconv.compare import compare_arrays
from opconv.converters.hlo_to_onnx import hlo_to_onnx
from opconv.dialects.hlo.build import OPSETS, hlo_node
from opconv.dialects.onnx.io import to_proto
from opconv.errors import ConversionError
from opconv.ir import Graph, Model
from opconv.types import TensorType
from tests.runtimes import run_ort

RNG = np.random.default_rng(0)


class Module:
    """A small HLO module under construction: typed inputs, typed nodes, one output."""

    def __init__(self):
        self.g = Graph("m")
        self.feeds = {}

    def input(self, name, array):
        array = np.asarray(array)
        self.feeds[name] = array
        return self.g.add_input(name, TensorType(str(array.dtype), array.shape))

    def const(self, array):
        return self.g.const(np.asarray(array))

    def op(self, op, *inputs, type, **attrs):
        out = hlo_node(self.g, op, *inputs, **attrs)
        out.type = TensorType(*type)
        return out

    def model(self, *outputs):
        self.g.outputs = list(outputs)
        return Model(self.g, "hlo", dict(OPSETS))


def _check(model: Model, feeds: dict, expected: list, opset: int | None = None) -> onnx.ModelProto:
    proto = to_proto(hlo_to_onnx(model, opset=opset))
    onnx.checker.check_model(proto, full_check=True)
    got = run_ort(proto, feeds)
    mine = opconv.run(model, feeds)
    for i, (e, a) in enumerate(zip(expected, got)):
        cmp = compare_arrays(f"out{i}", e, a)
        assert cmp.ok, "onnxruntime: " + cmp.message
        cmp = compare_arrays(f"out{i}", e, mine[model.graph.outputs[i].name])
        assert cmp.ok, "opconv HLO executor: " + cmp.message
    return proto


def _f(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _ops(proto):
    return [n.op_type for n in proto.graph.node]


def test_dot_general_batch_matmul_and_elementwise_product():
    m = Module()
    a, b = m.input("a", _f(2, 3, 4)), m.input("b", _f(2, 4, 5))
    y = m.op(
        "DotGeneral",
        a,
        b,
        type=("float32", (2, 3, 5)),
        lhs_batching_dimensions=[0],
        rhs_batching_dimensions=[0],
        lhs_contracting_dimensions=[2],
        rhs_contracting_dimensions=[1],
    )
    p = m.op(
        "DotGeneral",
        y,
        y,
        type=("float32", (2, 3, 5)),
        lhs_batching_dimensions=[0, 1, 2],
        rhs_batching_dimensions=[0, 1, 2],
        lhs_contracting_dimensions=[],
        rhs_contracting_dimensions=[],
    )
    mm = np.einsum("bij,bjk->bik", m.feeds["a"], m.feeds["b"])
    proto = _check(m.model(p), m.feeds, [mm * mm])
    assert "Mul" in _ops(proto)


def test_dot_general_with_contraction_first_and_bias():
    m = Module()
    a, b = m.input("a", _f(4, 3)), m.input("b", _f(5, 4))
    bias = m.const(_f(5))
    y = m.op(
        "DotGeneralBias",
        a,
        b,
        bias,
        type=("float32", (3, 5)),
        lhs_contracting_dimensions=[0],
        rhs_contracting_dimensions=[1],
    )
    expected = m.feeds["a"].T @ m.feeds["b"].T + bias.const.numpy()
    _check(m.model(y), m.feeds, [expected])


def _conv_nchw(x, w, stride, pads):
    """A direct convolution loop: x [N, C, H, W], w [O, C, kh, kw], symmetric pads."""
    x = np.pad(x, [(0, 0), (0, 0), (pads[0], pads[0]), (pads[1], pads[1])])
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, o, oh, ow), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride : i * stride + kh, j * stride : j * stride + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return out.astype(np.float32)


def test_conv_bias_in_nhwc_layout_transposes_around_onnx_conv():
    m = Module()
    x = m.input("x", _f(1, 7, 7, 3))  # NHWC
    w_hwio = _f(3, 3, 3, 4)
    w, bias = m.const(w_hwio), m.const(_f(4))
    y = m.op(
        "ConvBias",
        x,
        w,
        bias,
        type=("float32", (1, 4, 4, 4)),
        input_batch_dimension=0,
        input_feature_dimension=3,
        input_spatial_dimensions=[1, 2],
        kernel_input_feature_dimension=2,
        kernel_output_feature_dimension=3,
        kernel_spatial_dimensions=[0, 1],
        output_batch_dimension=0,
        output_feature_dimension=3,
        output_spatial_dimensions=[1, 2],
        window_strides=[2, 2],
        padding=[1, 1, 1, 1],
    )
    nchw = _conv_nchw(m.feeds["x"].transpose(0, 3, 1, 2), w_hwio.transpose(3, 2, 0, 1), 2, (1, 1))
    expected = nchw.transpose(0, 2, 3, 1) + bias.const.numpy()
    proto = _check(m.model(y), m.feeds, [expected])
    assert "Conv" in _ops(proto) and "Transpose" in _ops(proto)


def test_reduce_with_identity_and_non_identity_init():
    m = Module()
    x = m.input("x", _f(3, 4, 5))
    top = m.op("Reduce", x, m.const(np.float32(-np.inf)), type=("float32", (3, 5)), dimensions=[1], computation="MAX")
    total = m.op("Reduce", x, m.const(np.float32(1.5)), type=("float32", (4,)), dimensions=[0, 2], computation="ADD")
    _check(m.model(top, total), m.feeds, [m.feeds["x"].max(axis=1), m.feeds["x"].sum(axis=(0, 2)) + 1.5])


def test_reduce_window_over_the_channel_dim():
    m = Module()
    x = m.input("x", _f(2, 6, 3, 3))
    y = m.op(
        "ReduceWindow",
        x,
        m.const(np.float32(0)),
        type=("float32", (2, 4, 3, 3)),
        computation="ADD",
        window_dimensions=[1, 3, 1, 1],
    )
    z = m.op(
        "ReduceWindow",
        x,
        m.const(np.float32(-np.inf)),
        type=("float32", (2, 3, 3, 3)),
        computation="MAX",
        window_dimensions=[1, 2, 1, 1],
        window_strides=[1, 2, 1, 1],
    )
    v = m.feeds["x"]
    sums = np.stack([v[:, i : i + 3].sum(axis=1) for i in range(4)], axis=1)
    maxes = np.stack([v[:, i : i + 2].max(axis=1) for i in range(0, 6, 2)], axis=1)
    _check(m.model(y, z), m.feeds, [sums, maxes])


def test_broadcasts_and_xla_style_broadcast_dimensions():
    m = Module()
    x, v = m.input("x", _f(3, 2)), m.input("v", _f(4))
    big = m.op("BroadcastInDim", x, type=("float32", (2, 4, 3)), broadcast_dimensions=[2, 0])
    row = m.op("Add", big, v, type=("float32", (2, 4, 3)), broadcast_dimensions=[1])
    expected = np.broadcast_to(m.feeds["x"].T[:, None, :], (2, 4, 3)) + m.feeds["v"][None, :, None]
    _check(m.model(row), m.feeds, [expected])


def test_compare_select_clamp_rem_and_unary_decompositions():
    m = Module()
    x, y = m.input("x", _f(5, 4) * 3), m.input("y", _f(5, 4) * 3)
    ne = m.op("Compare", x, y, type=("bool", (5, 4)), comparison_direction="NE")
    lt = m.op("Compare", x, y, type=("bool", (5, 4)), comparison_direction="LT")
    sel = m.op("Select", lt, x, y, type=("float32", (5, 4)))
    lo, hi = m.input("lo", _f(5, 4) - 1), m.input("hi", _f(5, 4) + 1)
    clamped = m.op("Clamp", lo, sel, hi, type=("float32", (5, 4)))
    rem = m.op("Rem", x, y, type=("float32", (5, 4)))
    rounded = m.op("Round", x, type=("float32", (5, 4)))
    rsqrt = m.op("Rsqrt", m.op("Abs", x, type=("float32", (5, 4))), type=("float32", (5, 4)))
    e1 = m.op("Expm1", x, type=("float32", (5, 4)))
    finite = m.op("IsFinite", m.op("Log", x, type=("float32", (5, 4))), type=("bool", (5, 4)))
    a, b, lo_v, hi_v = m.feeds["x"], m.feeds["y"], m.feeds["lo"], m.feeds["hi"]
    with np.errstate(all="ignore"):
        expected = [
            a != b,
            np.minimum(np.maximum(np.where(a < b, a, b), lo_v), hi_v),
            np.fmod(a, b),
            np.sign(a) * np.floor(np.abs(a) + 0.5),
            1 / np.sqrt(np.abs(a)),
            np.expm1(a),
            np.isfinite(np.log(a)),
        ]
    _check(m.model(ne, clamped, rem, rounded, rsqrt, e1, finite), m.feeds, expected)


def test_gather_scatter_slice_reverse_pad_iota():
    m = Module()
    x = m.input("x", _f(5, 4))
    idx = m.input("idx", np.array([[4, 0], [2, 2]], np.int64))
    gathered = m.op(
        "Gather",
        x,
        idx,
        type=("float32", (2, 2, 4)),
        index_vector_dim=2,
        start_index_map=[0],
        collapsed_slice_dims=[0],
        offset_dims=[2],
        slice_sizes=[1, 4],
    )
    points = m.input("points", np.array([[1], [3], [1]], np.int64))
    updates = m.input("updates", _f(3, 4))
    scattered = m.op(
        "ScatterND",
        x,
        points,
        updates,
        type=("float32", (5, 4)),
        computation="ADD",
        index_vector_dim=1,
        update_window_dims=[1],
        inserted_window_dims=[0],
        scatter_dims_to_operand_dims=[0],
    )
    sliced = m.op("Slice", x, type=("float32", (2, 2)), start_indices=[1, 0], limit_indices=[5, 4], strides=[2, 3])
    reversed_ = m.op("Reverse", x, type=("float32", (5, 4)), dimensions=[0, 1])
    padded = m.op(
        "Pad",
        x,
        m.const(np.float32(0)),
        type=("float32", (6, 5)),
        mode="PAD_EDGE",
        edge_padding_low=[1, 0],
        edge_padding_high=[0, 1],
        interior_padding=[0, 0],
    )
    cropped = m.op(
        "Pad",
        x,
        m.const(np.float32(7)),
        type=("float32", (4, 6)),
        mode="PAD_VALUE",
        edge_padding_low=[-1, 2],
        edge_padding_high=[0, 0],
        interior_padding=[0, 0],
    )
    iota = m.op("Iota", type=("int32", (2, 3)), iota_dimension=1)
    v, u = m.feeds["x"], m.feeds["updates"]
    scatter_expected = v.copy()
    for row, i in zip(u, [1, 3, 1]):
        scatter_expected[i] += row
    expected = [
        v[[[4, 0], [2, 2]]],
        scatter_expected,
        v[1:5:2, 0:4:3],
        v[::-1, ::-1],
        np.pad(v, [(1, 0), (0, 1)], mode="edge"),
        np.pad(v[1:], [(0, 0), (2, 0)], constant_values=7),
        np.broadcast_to(np.arange(3, dtype=np.int32), (2, 3)),
    ]
    _check(m.model(gathered, scattered, sliced, reversed_, padded, cropped, iota), m.feeds, expected)


def _erf(x):
    return np.vectorize(math.erf)(x.astype(np.float64))


def test_fused_ops_softmax_gelu_layer_norm_batch_norm():
    m = Module()
    x = m.input("x", _f(2, 3, 4))
    logsm = m.op("Softmax", x, type=("float32", (2, 3, 4)), axis=1, accurate=True, logarithmic=True)
    gelu = m.op("Gelu", x, type=("float32", (2, 3, 4)), approximate=False)
    scale, bias = _f(4), _f(4)
    ln = m.op("LayerNorm", x, m.const(scale), m.const(bias), type=("float32", (2, 3, 4)), axis=-1, epsilon=1e-5)
    g, b, mu, var = _f(4), _f(4), _f(4), np.abs(_f(4)) + 0.5
    bn = m.op(
        "BatchNormInference",
        x,
        *(m.const(v) for v in (g, b, mu, var)),
        type=("float32", (2, 3, 4)),
        epsilon=1e-3,
        feature_index=2,
    )
    v = m.feeds["x"].astype(np.float64)
    shifted = v - v.max(axis=1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    centred = v - v.mean(axis=-1, keepdims=True)
    layer_norm = centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + 1e-5) * scale + bias
    expected = [log_softmax, 0.5 * v * (1 + _erf(v / np.sqrt(2))), layer_norm, (v - mu) / np.sqrt(var + 1e-3) * g + b]
    expected = [e.astype(np.float32) for e in expected]
    newest = _check(m.model(logsm, gelu, ln, bn), m.feeds, expected)
    assert {"LogSoftmax", "Gelu", "LayerNormalization", "BatchNormalization"} <= set(_ops(newest))
    old = _check(m.model(logsm, gelu, ln, bn), m.feeds, expected, opset=17)
    assert "Gelu" not in _ops(old) and "Erf" in _ops(old)  # Gelu arrived in opset 20: decomposed


def test_operations_without_onnx_form_are_all_listed():
    m = Module()
    x = m.input("x", np.eye(3, dtype=np.float32) * 2)
    c = m.op("Cholesky", x, type=("float32", (3, 3)), lower=True)
    p = m.op(
        "Pad",
        x,
        m.const(np.float32(0)),
        type=("float32", (5, 5)),
        mode="PAD_VALUE",
        edge_padding_low=[0, 0],
        edge_padding_high=[0, 0],
        interior_padding=[1, 1],
    )
    with pytest.raises(ConversionError) as info:
        hlo_to_onnx(m.model(c, p))
    assert len(info.value.problems) == 2 and "interior padding" in str(info.value)


def test_opset_out_of_range_is_refused():
    m = Module()
    x = m.input("x", _f(2))
    with pytest.raises(ConversionError, match="out of range"):
        hlo_to_onnx(m.model(m.op("Abs", x, type=("float32", (2,)))), opset=9)


def test_registered_for_convert():
    m = Module()
    x = m.input("x", _f(2))
    onnx_model = opconv.convert(m.model(m.op("Neg", x, type=("float32", (2,)))), to="onnx")
    assert onnx_model.dialect == "onnx" and onnx_model.opsets[""] == opconv.api.DEFAULT_ONNX_OPSET


def test_atan2_cbrt_and_dynamic_shape_ops():
    m = Module()
    y, x = m.input("y", _f(3, 4)), m.input("x", _f(3, 4))
    angle = m.op("Atan2", y, x, type=("float32", (3, 4)))
    root = m.op("Cbrt", y, type=("float32", (3, 4)))
    starts = m.input("starts", np.array([2, -1], np.int64))
    window = m.op("DynamicSlice", x, starts, type=("float32", (2, 3)), slice_sizes=[2, 3])
    target = m.input("target", np.array([0, 2, -1], np.int64))  # 0 copies the dim
    reshaped = m.op("DynamicReshape", x, target, type=("float32", (3, 2, 2)))
    a, b = m.feeds["y"], m.feeds["x"]
    expected = [np.arctan2(a, b), np.cbrt(a), b[1:3, 0:3], b.reshape(3, 2, 2)]
    _check(m.model(angle, root, window, reshaped), m.feeds, expected)


def test_if_regions_become_onnx_branches_reading_outer_values():
    m = Module()
    x, flag = m.input("x", _f(2, 3)), m.input("flag", np.array(False))
    branches = []
    for op in ("Neg", "Exp"):
        region = Graph(op, parent=m.g)
        out = hlo_node(region, op, x)
        out.type = TensorType("float32", (2, 3))
        region.outputs = [out]
        branches.append(region)
    y = m.op("If", flag, type=("float32", (2, 3)), true_branch=branches[0], false_branch=branches[1])
    proto = _check(m.model(y), m.feeds, [np.exp(m.feeds["x"])])
    assert _ops(proto) == ["If"]
    m.feeds["flag"] = np.array(True)
    cmp = compare_arrays("y", -m.feeds["x"], run_ort(proto, m.feeds)[0])
    assert cmp.ok, cmp.message


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def test_sorting_gated_units_activations_and_tiling():
    m = Module()
    x = m.input("x", _f(3, 6))
    values, indices = hlo_node(
        m.g, "Topk", x, m.const(np.array([2], np.int64)), _outputs=2, axis=1, largest=False, sorted=True
    )
    values.type, indices.type = TensorType("float32", (3, 2)), TensorType("int64", (3, 2))
    ordered = m.op("Sort", x, type=("float32", (3, 6)), dimension=1, descending=True)
    arg = m.op("ArgMax", x, type=("int64", (6,)), axis=0, keepdims=False)
    glu = m.op("Glu", x, type=("float32", (3, 3)), dim=1)
    gtu = m.op("Gtu", x, type=("float32", (3, 3)), dim=-1)
    soft = m.op("Softplus", x, type=("float32", (3, 6)), beta=2.0)
    hard = m.op("HardSigmoid", x, type=("float32", (3, 6)), slope=0.3, offset=0.4)
    leaky = m.op("LeakyRelu", x, type=("float32", (3, 6)), alpha=0.1)
    tiled = m.op("Tile", x, m.const(np.array([2, 1], np.int64)), type=("float32", (6, 6)))
    upper = m.op("Trilu", x, type=("float32", (3, 6)), upper=True, k=1)
    parts = hlo_node(m.g, "GeneralSplit", x, m.const(np.array([2, 4], np.int64)), _outputs=2, axis=1)
    parts[0].type, parts[1].type = TensorType("float32", (3, 2)), TensorType("float32", (3, 4))
    joined = m.op("Concatenate", parts[1], parts[0], type=("float32", (3, 6)), dimension=-1)
    v = m.feeds["x"]
    order = np.argsort(v, axis=1, kind="stable")[:, :2]
    expected = [
        np.take_along_axis(v, order, 1),
        order,
        -np.sort(-v, axis=1),
        v.argmax(axis=0),
        v[:, :3] * _sigmoid(v[:, 3:]),
        np.tanh(v[:, :3]) * _sigmoid(v[:, 3:]),
        np.log1p(np.exp(2 * v)) / 2,
        np.clip(0.3 * v + 0.4, 0, 1),
        np.where(v >= 0, v, 0.1 * v),
        np.tile(v, (2, 1)),
        np.triu(v, 1),
        np.concatenate([v[:, 2:], v[:, :2]], axis=1),
    ]
    _check(
        m.model(values, indices, ordered, arg, glu, gtu, soft, hard, leaky, tiled, upper, joined),
        m.feeds,
        [e.astype(np.float32) if e.dtype == np.float64 else e for e in expected],
    )


@pytest.mark.parametrize("starts", [[1, 0, 2], [5, -3, 9], [0, 0, 0]])
def test_dynamic_update_slice_clamps_its_starts(starts):
    """XLA moves a start that would put the update out of bounds back until it fits; ONNX gets a ScatterND whose
    index tuples cover only the dims the update does not span whole."""
    m = Module()
    x, update = m.input("x", _f(4, 3, 6)), m.input("update", _f(2, 3, 2))
    start = m.input("start", np.array(starts, np.int64))
    y = m.op("DynamicUpdateSlice", x, update, start, type=("float32", (4, 3, 6)))
    expected = m.feeds["x"].copy()
    lo = [min(max(s, 0), d - u) for s, d, u in zip(starts, (4, 3, 6), (2, 3, 2))]
    expected[lo[0] : lo[0] + 2, :, lo[2] : lo[2] + 2] = m.feeds["update"]
    proto = _check(m.model(y), m.feeds, [expected])
    assert "ScatterND" in _ops(proto)


@pytest.mark.parametrize(
    "low,high,reverse,exclusive",
    [(4, 0, False, False), (7, 0, False, False), (5, -1, False, True), (0, 4, True, False), (-1, 5, True, True)],
)
@pytest.mark.parametrize("dtype", ["int64", "float32"])
def test_window_sum_of_one_side_padded_axis_is_cumsum(low, high, reverse, exclusive, dtype):
    """How CumSum is lowered (and torch's position ids): Pad one side of the axis, sum windows as long as the
    output; the window reaching the start (or the end) of the axis makes it a (reverse, exclusive) cumsum."""
    m = Module()
    data = (RNG.integers(-50, 50, (2, 5)) if dtype == "int64" else _f(2, 5)).astype(dtype)
    x = m.input("x", data)
    padded = m.op(
        "Pad",
        x,
        m.const(np.zeros((), dtype)),
        type=(dtype, (2, 5 + low + high)),
        edge_padding_low=[0, low],
        edge_padding_high=[0, high],
        interior_padding=[0, 0],
    )
    y = m.op(
        "ReduceWindow",
        padded,
        m.const(np.zeros((), dtype)),
        type=(dtype, (2, 5)),
        computation="ADD",
        window_dimensions=[1, low + high + 1],
    )
    flipped = data[:, ::-1] if reverse else data
    sums = np.cumsum(flipped, axis=1)
    if exclusive:
        sums = np.concatenate([np.zeros((2, 1), dtype), sums[:, :-1]], axis=1)
    proto = _check(m.model(y), m.feeds, [sums[:, ::-1] if reverse else sums])
    [cumsum] = [n for n in proto.graph.node if n.op_type == "CumSum"]
    assert {a.name: a.i for a in cumsum.attribute} == {"exclusive": int(exclusive), "reverse": int(reverse)}


def test_window_sum_short_of_the_axis_is_no_cumsum():
    m = Module()
    x = m.input("x", _f(2, 5))
    padded = m.op(
        "Pad",
        x,
        m.const(np.float32(0)),
        type=("float32", (2, 7)),
        edge_padding_low=[0, 2],
        edge_padding_high=[0, 0],
        interior_padding=[0, 0],
    )
    y = m.op(
        "ReduceWindow",
        padded,
        m.const(np.float32(0)),
        type=("float32", (2, 5)),
        computation="ADD",
        window_dimensions=[1, 3],
    )
    with pytest.raises(ConversionError, match="the window does not reach an end of the axis"):
        hlo_to_onnx(m.model(y))


def _lhs_dilated_conv(x, k, stride, low, high, dilation, groups):
    """HLO convolution semantics written out: NCHW input dilated by ``stride``, padded (negative crops), then
    correlated with the OIHW kernel ``k`` at ``dilation``, in ``groups``."""
    n, c, h, w = x.shape
    big = np.zeros((n, c, (h - 1) * stride[0] + 1, (w - 1) * stride[1] + 1), x.dtype)
    big[:, :, :: stride[0], :: stride[1]] = x
    for axis, (lo, hi) in enumerate(zip(low, high), start=2):
        big = np.pad(big, [(0, 0)] * axis + [(max(lo, 0), max(hi, 0))] + [(0, 0)] * (3 - axis))
        big = big.take(range(max(-lo, 0), big.shape[axis] - max(-hi, 0)), axis=axis)
    o, cg, kh, kw = k.shape
    oh, ow = big.shape[2] - dilation[0] * (kh - 1), big.shape[3] - dilation[1] * (kw - 1)
    out = np.zeros((n, o, oh, ow), np.float64)
    for g in range(groups):
        og = o // groups
        for i in range(kh):
            for j in range(kw):
                patch = big[
                    :,
                    g * cg : (g + 1) * cg,
                    i * dilation[0] : i * dilation[0] + oh,
                    j * dilation[1] : j * dilation[1] + ow,
                ]
                out[:, g * og : (g + 1) * og] += np.einsum("nchw,oc->nohw", patch, k[g * og : (g + 1) * og, :, i, j])
    return out.astype(x.dtype)


@pytest.mark.parametrize(
    "stride,low,high,dilation,groups",
    [
        ((2, 2), (1, 1), (2, 2), (1, 1), 1),  # ConvTranspose(k=3, s=2, pads 1, output_padding 1): a UNet up block
        ((2, 3), (2, 0), (1, 3), (1, 1), 2),  # pads 0/1 and 2/0, high past k-1 on axis 1 (output_padding 1), 2 groups
        ((2, 2), (2, 4), (3, 4), (2, 2), 1),  # a dilated kernel: pads 2/1 and 0/0
    ],
)
def test_lhs_dilated_convolution_is_conv_transpose(stride, low, high, dilation, groups):
    m = Module()
    x = m.input("x", _f(2, 4, 3, 4))
    k_data = _f(6, 4 // groups, 3, 3)
    expected = _lhs_dilated_conv(m.feeds["x"], k_data, stride, low, high, dilation, groups)
    k = m.input("k", k_data)
    bias = m.input("bias", _f(6))
    y = m.op(
        "ConvBias",
        x,
        k,
        bias,
        type=("float32", expected.shape),
        window_strides=[1, 1],
        lhs_dilation=list(stride),
        rhs_dilation=list(dilation),
        padding=list(low) + list(high),
        feature_group_count=groups,
        batch_group_count=1,
        input_batch_dimension=0,
        input_feature_dimension=1,
        input_spatial_dimensions=[2, 3],
        kernel_output_feature_dimension=0,
        kernel_input_feature_dimension=1,
        kernel_spatial_dimensions=[2, 3],
        output_batch_dimension=0,
        output_feature_dimension=1,
        output_spatial_dimensions=[2, 3],
    )
    proto = _check(m.model(y), m.feeds, [expected + m.feeds["bias"].reshape(1, -1, 1, 1)])
    assert "ConvTranspose" in _ops(proto)


def test_lhs_dilated_convolution_beyond_conv_transpose_is_refused():
    m = Module()
    x, k = m.input("x", _f(1, 2, 3, 3)), m.input("k", _f(2, 2, 3, 3))
    y = m.op(
        "Conv",
        x,
        k,
        type=("float32", (1, 2, 7, 7)),
        window_strides=[1, 1],
        lhs_dilation=[2, 2],
        rhs_dilation=[1, 1],
        padding=[3, 3, 1, 1],
        feature_group_count=1,
        batch_group_count=1,
        input_batch_dimension=0,
        input_feature_dimension=1,
        input_spatial_dimensions=[2, 3],
        kernel_output_feature_dimension=0,
        kernel_input_feature_dimension=1,
        kernel_spatial_dimensions=[2, 3],
        output_batch_dimension=0,
        output_feature_dimension=1,
        output_spatial_dimensions=[2, 3],
    )
    with pytest.raises(ConversionError, match=r"padding \[3, 3, 1, 1\] is wider than a ConvTranspose can make"):
        hlo_to_onnx(m.model(y))


@pytest.mark.parametrize("given", ["scales", "sizes"])
def test_resize_with_the_inputs_before_scales_or_sizes_omitted(given):
    """Nearest, asymmetric, floor at twice the size: each element repeated twice along H and W."""
    m = Module()
    x = m.input("x", _f(1, 2, 3, 4))
    operand = m.const(np.array([1, 1, 2, 2], np.float32) if given == "scales" else np.array([1, 2, 6, 8], np.int64))
    inputs = [x, None, operand] if given == "scales" else [x, None, None, operand]
    y = m.op(
        "Resize",
        *inputs,
        type=("float32", (1, 2, 6, 8)),
        mode="NEAREST",
        coordinate_transformation_mode="ASYMMETRIC",
        nearest_mode="FLOOR",
    )
    _check(m.model(y), m.feeds, [m.feeds["x"].repeat(2, axis=2).repeat(2, axis=3)])
