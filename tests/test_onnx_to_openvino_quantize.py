"""ONNX quantization ops -> opset1 (QuantizeLinear, DynamicQuantizeLinear, MatMulInteger, ConvInteger).

The converted IR runs in OpenVINO's CPU plugin and in opconv's IR executor and must give, bit for bit, what the
ONNX formula gives computed here with numpy (``rint(float32(x / scale))``: a correctly rounded float32 quotient,
ties to even) and what onnxruntime gives.  The inputs include quotients that are exact ties ``k + 1/2`` (which a
half-up rounding gets wrong), quotients one float32 step either side of a tie, values far beyond both ends of
the output range, negative values and scales spread over many binades.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import opconv
from opconv.errors import ConversionError

from .runtimes import convert_and_run_ir

INFO = {
    np.uint8: TensorProto.UINT8,
    np.int8: TensorProto.INT8,
    np.uint16: TensorProto.UINT16,
    np.int16: TensorProto.INT16,
}


def _model(op, inputs: dict, outputs: dict, opset: int = 21, **attrs):
    """A one-node model over graph inputs ``{name: array}`` with outputs ``{name: (onnx type, shape)}``."""
    node = helper.make_node(op, list(inputs), list(outputs), **attrs)
    info = helper.make_tensor_value_info
    graph = helper.make_graph(
        [node],
        op.lower(),
        [info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in inputs.items()],
        [info(n, t, s) for n, (t, s) in outputs.items()],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    proto.ir_version = 10
    return proto


def _run_converted(tmp_path, proto, feeds: dict) -> dict:
    """``{runtime: [outputs]}`` of the converted IR in OpenVINO's CPU plugin and in opconv's executor."""
    _, runs = convert_and_run_ir(tmp_path, proto, feeds)
    return {who: list(named.values()) for who, named in runs.items()}


def _onnxruntime(proto, feeds: dict) -> list:
    return ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _assert_same(expected, got, who: str, what: str, x=None, scale=None):
    got = np.asarray(got).astype(expected.dtype)  # OpenVINO reports IR v10 outputs in legacy types
    bad = np.flatnonzero(got.ravel() != expected.ravel())
    if bad.size:
        i = bad[0]
        where = "" if x is None else f" (x={x.ravel()[i]!r}, scale={np.broadcast_to(scale, x.shape).ravel()[i]!r})"
        raise AssertionError(
            f"{who}: {bad.size} of {expected.size} {what} differ, first at {i}: "
            f"{got.ravel()[i]} instead of {expected.ravel()[i]}{where}"
        )


def _tricky_quotients(rng, scale: np.ndarray, n: int, span: int) -> np.ndarray:
    """float32 x whose float32 quotient by ``scale`` is a tie k + 1/2, one step either side of it, or random."""
    k = rng.integers(-span, span, n).astype(np.float64) + 0.5
    s = np.broadcast_to(scale, (n,)).astype(np.float64)
    x = (k * s).astype(np.float32)
    kind = rng.integers(0, 4, n)
    x = np.where(kind == 1, np.nextafter(x, np.float32(np.inf)), x)
    x = np.where(kind == 2, np.nextafter(x, np.float32(-np.inf)), x)
    x = np.where(kind == 3, (rng.uniform(-span, span, n) * s).astype(np.float32), x)
    return x.astype(np.float32)


def _formula(x, scale, zero_point, dtype):
    info = np.iinfo(dtype)
    with np.errstate(over="ignore"):
        q = np.rint((x / scale).astype(np.float32)).astype(np.float64)
    return np.clip(q + zero_point.astype(np.float64), info.min, info.max).astype(dtype)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16])
def test_quantize_linear_ties_and_saturation(tmp_path, dtype):
    rng = np.random.default_rng(7)
    info = np.iinfo(dtype)
    width = int(info.max) - int(info.min)
    channels = 4
    # Scales over many binades, one per channel (axis 1); exact ties need scales with short significands.
    scale = np.ldexp(
        rng.integers(1, 1 << rng.integers(1, 24), channels).astype(np.float64), rng.integers(-40, 30, channels)
    ).astype(np.float32)
    scale[0] = np.float32(0.0196078431372549)  # 1/51: the tie -127.5 of an onnx case is near
    zero_point = rng.integers(info.min, int(info.max) + 1, channels).astype(dtype)
    per = 600
    x = np.stack([_tricky_quotients(rng, scale[c], per, width + 3) for c in range(channels)], axis=1)
    x[:3] = np.array([3e38, -3e38, 0.0], np.float32)[:, None]  # saturation at both ends, zero
    x = x.reshape(per // 20, 20, channels).transpose(0, 2, 1).copy()
    feeds = {"x": x, "scale": scale, "zero_point": zero_point}
    proto = _model("QuantizeLinear", feeds, {"y": (INFO[dtype], x.shape)}, axis=1)
    column = (1, channels, 1)
    expected = _formula(x, scale.reshape(column), zero_point.reshape(column), dtype)
    with np.errstate(over="ignore"):
        quotient = (x / scale.reshape(column)).astype(np.float32)
    ties = quotient == np.floor(quotient) + np.float32(0.5)
    assert ties.sum() > 100 and np.any(expected == info.min) and np.any(expected == info.max)
    # The formula is the ONNX one: half-up rounding would differ on the ties (so this test can fail).
    assert np.any(np.floor(quotient[ties] + 0.5) != np.rint(quotient[ties]))
    _assert_same(expected, _onnxruntime(proto, feeds)[0], "onnxruntime", "values")
    for who, got in _run_converted(tmp_path, proto, feeds).items():
        _assert_same(expected, got[0], who, "values", x, scale.reshape(column))


def test_quantize_linear_blocked_per_tensor_and_default_type(tmp_path):
    rng = np.random.default_rng(3)
    scale = np.float32(0.75)
    x = _tricky_quotients(rng, scale, 240, 300).reshape(4, 60)
    feeds = {"x": x, "scale": np.array(scale)}
    proto = _model("QuantizeLinear", feeds, {"y": (TensorProto.UINT8, x.shape)})
    expected = _formula(x, scale, np.zeros((), np.uint8), np.uint8)
    for who, got in _run_converted(tmp_path, proto, feeds).items():
        _assert_same(expected, got[0], who, "values", x, scale)
    # blocked: a scale and zero point per block of 3 along axis 1, signed output chosen by output_dtype
    block_scale = np.ldexp(rng.integers(1, 64, (4, 20)).astype(np.float64), -3).astype(np.float32)
    x = (np.repeat(block_scale, 3, axis=1) * (rng.integers(-150, 150, (4, 60)) + 0.5)).astype(np.float32)  # ties
    feeds = {"x": x, "scale": block_scale}
    proto = _model(
        "QuantizeLinear", feeds, {"y": (TensorProto.INT8, x.shape)}, axis=1, block_size=3, output_dtype=TensorProto.INT8
    )
    expected = _formula(x, np.repeat(block_scale, 3, axis=1), np.zeros((), np.int8), np.int8)
    _assert_same(expected, _onnxruntime(proto, feeds)[0], "onnxruntime", "values")
    for who, got in _run_converted(tmp_path, proto, feeds).items():
        _assert_same(expected, got[0], who, "values")


def test_quantize_linear_long_significand_scales(tmp_path):
    """Scales with full 24-bit significands over many binades (the split of the scale into 12-bit halves is
    not trivial), x at and one or two float32 steps around fl((k + 1/2) * scale), near 0 and near the range's
    ends; int16 so that quotients reach 2**15."""
    rng = np.random.default_rng(21)
    channels, per = 48, 200
    scale = (rng.uniform(1, 2, channels) * np.exp2(rng.integers(-60, 60, channels))).astype(np.float32)
    scale[:4] = np.float32([1 / 3, 1 / 255, 2**-20 * 1.9999999, 7.0])
    k = np.concatenate([rng.integers(-32770, 32770, per - 40), rng.integers(-3, 3, 40)]) + 0.5
    x = (k[:, None] * scale.astype(np.float64)).astype(np.float32)
    steps = rng.integers(-2, 3, x.shape)
    x = np.where(
        steps > 0, np.nextafter(x, np.float32(np.inf)), np.where(steps < 0, np.nextafter(x, np.float32(-np.inf)), x)
    )
    x = np.where(
        np.abs(steps) == 2, np.nextafter(x, np.where(steps > 0, np.float32(np.inf), np.float32(-np.inf))), x
    ).astype(np.float32)
    x = x.reshape(per // 10, 10, channels).transpose(0, 2, 1).copy()
    zero_point = rng.integers(-100, 100, channels).astype(np.int16)
    feeds = {"x": x, "scale": scale, "zero_point": zero_point}
    proto = _model("QuantizeLinear", feeds, {"y": (TensorProto.INT16, x.shape)}, axis=1)
    column = (1, channels, 1)
    expected = _formula(x, scale.reshape(column), zero_point.reshape(column), np.int16)
    _assert_same(expected, _onnxruntime(proto, feeds)[0], "onnxruntime", "values")
    for who, got in _run_converted(tmp_path, proto, feeds).items():
        _assert_same(expected, got[0], who, "values", x, scale.reshape(column))


def test_dynamic_quantize_linear_scales(tmp_path):
    """Many DynamicQuantizeLinear nodes, each over [0, spread]: spreads whose quotient by 255 lies within a
    float32 step of a midpoint between two floats (where a division by 255 to within one ulp goes wrong)."""
    rng = np.random.default_rng(8)
    count = 12
    midpoints = (rng.uniform(1, 2, count) * np.exp2(rng.integers(-30, 30, count))).astype(np.float32)
    midpoints = midpoints.astype(np.float64) + np.spacing(midpoints).astype(np.float64) / 2
    spreads = (midpoints * 255).astype(np.float32)
    spreads = np.where(rng.integers(0, 2, count) == 1, np.nextafter(spreads, np.float32(np.inf)), spreads)
    feeds = {f"x{i}": np.array([0.0, spread, spread / 3], np.float32) for i, spread in enumerate(spreads)}
    nodes = [helper.make_node("DynamicQuantizeLinear", [f"x{i}"], [f"y{i}", f"s{i}", f"z{i}"]) for i in range(count)]
    info = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "scales",
        [info(n, TensorProto.FLOAT, [3]) for n in feeds],
        [info(f"s{i}", TensorProto.FLOAT, []) for i in range(count)]
        + [info(f"y{i}", TensorProto.UINT8, [3]) for i in range(count)],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    proto.ir_version = 10
    expected_scales = (spreads / np.float32(255)).astype(np.float32)
    assert np.sum(expected_scales != (spreads * np.float32(1 / 255)).astype(np.float32)) >= 4
    expected = [np.asarray(v) for v in expected_scales] + [
        _formula(feeds[f"x{i}"], expected_scales[i], np.zeros((), np.uint8), np.uint8) for i in range(count)
    ]
    for who, got in [("onnxruntime", _onnxruntime(proto, feeds))] + list(
        _run_converted(tmp_path, proto, feeds).items()
    ):
        for i, (e, g) in enumerate(zip(expected, got)):
            _assert_same(e, np.asarray(g), who, f"output {i}")


def test_quantize_dynamic_model_stays_compact(tmp_path):
    """A 4-layer MLP after onnxruntime's quantize_dynamic (DynamicQuantizeLinear + MatMulInteger per layer):
    the IR stays within 40 layers per source node (it was about 300) and gives onnxruntime's outputs exactly."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    rng = np.random.default_rng(2)
    width, nodes, initializers, x = 32, [], [], "x"
    for i in range(4):
        initializers += [
            helper.make_tensor(
                f"w{i}", TensorProto.FLOAT, (width, width), (rng.standard_normal((width, width)) * 0.2).ravel().tolist()
            ),
            helper.make_tensor(f"b{i}", TensorProto.FLOAT, (width,), rng.standard_normal(width).tolist()),
        ]
        nodes += [
            helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"]),
            helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]),
            helper.make_node("Relu", [f"a{i}"], [f"r{i}"]),
        ]
        x = f"r{i}"
    info = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "mlp", [info("x", TensorProto.FLOAT, [3, width])], [info(x, TensorProto.FLOAT, [3, width])], initializers
    )
    source = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    source.ir_version = 8
    float_path, quantized_path = tmp_path / "mlp.onnx", tmp_path / "mlp_q.onnx"
    float_path.write_bytes(source.SerializeToString())
    quantize_dynamic(str(float_path), str(quantized_path), weight_type=QuantType.QInt8)
    proto = onnx.load(str(quantized_path))
    assert sum(n.op_type == "DynamicQuantizeLinear" for n in proto.graph.node) == 4
    feeds = {"x": rng.standard_normal((3, width)).astype(np.float32)}
    expected = _onnxruntime(proto, feeds)[0]
    converted, runs = convert_and_run_ir(tmp_path, proto, feeds)
    layers = len(converted.graph.nodes)
    assert layers <= 40 * len(proto.graph.node), f"{layers} layers for {len(proto.graph.node)} nodes"
    for who, named in runs.items():
        np.testing.assert_allclose(np.asarray(list(named.values())[0]), expected, rtol=1e-5, atol=1e-5, err_msg=who)


def test_dynamic_quantize_linear(tmp_path):
    rng = np.random.default_rng(5)
    for x in [
        rng.normal(0, 3, (8, 25)).astype(np.float32),
        np.abs(rng.normal(0, 1e-3, (200,))).astype(np.float32),  # min 0: zero point 0
        -np.abs(rng.normal(0, 1e4, (10, 20))).astype(np.float32),  # max 0: zero point 255
        np.zeros((3, 4), np.float32),
    ]:  # no range: onnxruntime's scale 1
        feeds = {"x": x}
        proto = _model(
            "DynamicQuantizeLinear",
            feeds,
            {
                "y": (TensorProto.UINT8, x.shape),
                "y_scale": (TensorProto.FLOAT, ()),
                "y_zero_point": (TensorProto.UINT8, ()),
            },
            opset=11,
        )
        high, low = np.float32(max(x.max(), 0)), np.float32(min(x.min(), 0))
        scale = np.float32((high - low) / np.float32(255)) if high > low else np.float32(1)
        zero_point = np.clip(np.rint(np.float32(0) - (low / scale).astype(np.float32)), 0, 255)
        expected = [_formula(x, scale, zero_point, np.uint8), np.array(scale), np.array(zero_point, np.uint8)]
        for who, got in [("onnxruntime", _onnxruntime(proto, feeds))] + list(
            _run_converted(tmp_path, proto, feeds).items()
        ):
            for e, g, what in zip(expected, got, ("values", "scales", "zero points")):
                _assert_same(e, np.asarray(g), who, what)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_matmul_integer_and_conv_integer(tmp_path, dtype):
    rng = np.random.default_rng(11)
    info = np.iinfo(dtype)
    draw = lambda *shape: rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)
    a, b = draw(3, 5, 64), draw(64, 7)
    feeds = {"a": a, "b": b, "a_zero_point": draw(), "b_zero_point": draw(7)}  # b's zero point per column
    proto = _model("MatMulInteger", feeds, {"y": (TensorProto.INT32, (3, 5, 7))}, opset=10)
    expected = _onnxruntime(proto, feeds)[0]
    wide = lambda v: v.astype(np.int64)
    assert np.array_equal(expected, (wide(a) - wide(feeds["a_zero_point"])) @ (wide(b) - wide(feeds["b_zero_point"])))
    for who, got in _run_converted(tmp_path, proto, feeds).items():
        _assert_same(expected, got[0], who, "values")

    x, w = draw(2, 3, 9, 9), draw(4, 3, 3, 3)
    feeds = {"x": x, "w": w, "x_zero_point": draw(), "w_zero_point": draw(4)}
    proto = _model(
        "ConvInteger", feeds, {"y": (TensorProto.INT32, (2, 4, 5, 5))}, opset=10, pads=[1, 1, 1, 1], strides=[2, 2]
    )
    expected = ReferenceEvaluator(proto).run(None, feeds)[0]  # onnxruntime has no per-channel weight zero point
    for who, got in _run_converted(tmp_path, proto, feeds).items():
        _assert_same(expected, got[0], who, "values")


def test_long_integer_products_are_summed_exactly(tmp_path):
    """Reductions whose float32 sums would pass 2**24 (1000 products of 255 * 128; 3x3 over 128 channels) are
    computed by exact pieces added in int32: onnxruntime's results, bit for bit, at the extremes too."""
    rng = np.random.default_rng(12)
    a = np.full((3, 1000), 255, np.uint8)
    a[1] = rng.integers(0, 256, 1000)
    b = np.where(rng.random((1000, 4)) < 0.9, -128, 127).astype(np.int8)
    feeds = {"a": a, "b": b, "a_zero_point": np.asarray(0, np.uint8), "b_zero_point": np.asarray(0, np.int8)}
    proto = _model("MatMulInteger", feeds, {"y": (TensorProto.INT32, (3, 4))}, opset=10)
    expected = _onnxruntime(proto, feeds)[0]
    assert np.abs(expected).max() > 2**24
    for who, got in _run_converted(tmp_path, proto, feeds).items():
        _assert_same(expected, got[0], who, "values")
    x = np.full((1, 128, 6, 6), 255, np.uint8)
    x[0, :, 3:] = rng.integers(0, 256, (128, 3, 6))
    feeds = {"x": x, "w": np.full((2, 128, 3, 3), -128, np.int8), "x_zero_point": np.asarray(0, np.uint8)}
    proto = _model("ConvInteger", feeds, {"y": (TensorProto.INT32, (1, 2, 4, 4))}, opset=10)
    expected = _onnxruntime(proto, feeds)[0]
    assert np.abs(expected).max() > 2**24
    for who, got in _run_converted(tmp_path, proto, feeds).items():
        _assert_same(expected, got[0], who, "values")


def test_integer_products_too_long_for_one_float32_step_are_refused():
    feeds = {
        "x": np.zeros((1, 1, 20, 20), np.uint8),
        "w": np.zeros((1, 1, 17, 17), np.uint8),
        "x_zero_point": np.zeros((), np.uint8),
    }
    proto = _model("ConvInteger", feeds, {"y": (TensorProto.INT32, (1, 1, 4, 4))}, opset=10)
    with pytest.raises(ConversionError, match="2\\*\\*24"):
        opconv.convert(opconv.load(proto), to="openvino")


@pytest.mark.parametrize("dtype,scale_type", [(np.uint8, np.float32), (np.int8, np.float16)])
def test_qlinear_matmul_and_conv_requantize_exactly(tmp_path, dtype, scale_type):
    """QLinearMatMul / QLinearConv against onnx's reference (onnxruntime requantizes in float32, not as specified)."""
    rng = np.random.default_rng(13)
    info = np.iinfo(dtype)
    draw = lambda *shape: rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)
    wide = lambda v: v.astype(np.int64)
    # Scales with short significands make many sums land exactly on k + 1/2; random ones test the division.
    near = lambda zero_point, *shape: np.clip(
        wide(zero_point) + rng.integers(-9, 10, shape), info.min, info.max
    ).astype(dtype)
    # The second set: scale products below 2**-14 (float16 subnormals) and a negative scale.
    for scales in [
        (0.5, rng.integers(1, 8, 12) * 0.5, 1.0),
        (rng.uniform(1e-3, 3e-3), rng.uniform(1e-3, 3e-3, 12), -rng.uniform(1e-5, 1e-4)),
    ]:
        a_scale, b_scale, y_scale = (np.asarray(s, scale_type) for s in scales)
        a_zero_point, b_zero_point = draw(), draw(12)
        feeds = {
            "a": near(a_zero_point, 4, 16, 8),
            "a_scale": a_scale,
            "a_zero_point": a_zero_point,
            "b": near(b_zero_point, 8, 12),
            "b_scale": b_scale,
            "b_zero_point": b_zero_point,
            "y_scale": y_scale,
            "y_zero_point": np.asarray(draw() | 1, dtype),
        }  # odd: rint after adding it
        proto = _model("QLinearMatMul", feeds, {"y": (INFO[dtype], (4, 16, 12))})
        expected = ReferenceEvaluator(proto).run(None, feeds)[0]
        sums = (wide(feeds["a"]) - wide(feeds["a_zero_point"])) @ (wide(feeds["b"]) - wide(feeds["b_zero_point"]))
        before = sums * (a_scale * b_scale / y_scale).astype(np.float64) + wide(feeds["y_zero_point"])
        unsaturated = (before > info.min) & (before < info.max)
        if scales[0] == 0.5:  # ties that half-up rounding would get wrong, and saturation
            assert np.sum(unsaturated & (np.floor(before + 0.5) != np.rint(before))) >= 5
            assert np.any(~unsaturated)
        for who, got in _run_converted(tmp_path, proto, feeds).items():
            _assert_same(expected, got[0], who, "values")

    feeds = {
        "x": draw(1, 3, 6, 6),
        "x_scale": np.asarray(2.0**-4, scale_type),
        "x_zero_point": draw(),
        "w": draw(4, 3, 2, 2),
        "w_scale": (rng.integers(1, 8, 4) * 2.0**-5).astype(scale_type),
        "w_zero_point": draw(4),
        "y_scale": np.asarray(2.0**-1, scale_type),
        "y_zero_point": draw(),
    }
    proto = _model("QLinearConv", feeds, {"y": (INFO[dtype], (1, 4, 5, 5))})
    expected = ReferenceEvaluator(proto).run(None, feeds)[0]
    for who, got in _run_converted(tmp_path, proto, feeds).items():
        _assert_same(expected, got[0], who, "values")


def test_qlinear_matmul_requantization_ties(tmp_path):
    """Per-column multipliers m = fl(b_scale / 3) that are exact quotients j * 2**-e (j odd) and sums covering
    [-255, 255] (A has one nonzero per row), so that many sum * m are exact ties k + 1/2: a multiplier one step
    off or a rounding that is not half-to-even shows."""
    rng = np.random.default_rng(17)
    columns, k = 128, 16  # k * 255 * 255 < 2**20, the exact requantization's bound
    a = np.full((k, k), 100, np.uint8)
    np.fill_diagonal(a, 101)  # row i sums (b[i] - b_zero_point) once
    b = rng.integers(0, 256, (k, columns)).astype(np.uint8)
    multiplier = rng.choice([1, 3, 5, 7], columns) * np.exp2(-rng.integers(1, 5, columns))
    feeds = {
        "a": a,
        "a_scale": np.float32(1.0),
        "a_zero_point": np.uint8(100),
        "b": b,
        "b_scale": (3 * multiplier).astype(np.float32),
        "b_zero_point": rng.integers(0, 256, columns).astype(np.uint8),
        "y_scale": np.float32(3.0),
        "y_zero_point": np.uint8(127),
    }
    feeds = {k: np.asarray(v) for k, v in feeds.items()}
    proto = _model("QLinearMatMul", feeds, {"y": (TensorProto.UINT8, (k, columns))})
    expected = ReferenceEvaluator(proto).run(None, feeds)[0]
    scaled = (b.astype(np.int64) - feeds["b_zero_point"].astype(np.int64)) * multiplier + 127
    inside = (scaled > 0) & (scaled < 255)
    assert np.sum(inside & (scaled % 1 == 0.5)) > 200 and np.any(np.floor(scaled + 0.5) != expected)
    for who, got in _run_converted(tmp_path, proto, feeds).items():
        _assert_same(expected, got[0], who, "values")
