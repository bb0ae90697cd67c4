"""MatMulInteger, ConvInteger, DynamicQuantizeLinear and onnxruntime's MatMulNBits / MatMulIntegerToFloat /
DynamicQuantizeMatMul converted to HLO: run by opconv's HLO executor and by IREE (its StableHLO export), each
against onnxruntime.  Integer results and DynamicQuantizeLinear's outputs must be equal; float products agree to
float32 tolerance (accumulation orders differ)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import opconv
from opconv.converters.onnx_to_hlo import onnx_to_hlo
from opconv.dialects.hlo.stablehlo import export_function, module_text

from .runtimes import run_ort

iree_runtime = pytest.importorskip("tests.iree_runtime")
RNG = np.random.default_rng(31)


def _q(shape, dtype):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, int(info.max) + 1, shape).astype(dtype)


def _model(nodes, feeds: dict, outputs: list[str], initializers: dict, opset: int = 17):
    graph = helper.make_graph(
        nodes,
        "q",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in feeds.items()],
        [helper.make_empty_tensor_value_info(n) for n in outputs],
        [numpy_helper.from_array(v, n) for n, v in initializers.items()],
    )
    proto = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)]
    )
    proto.ir_version = 8
    return proto


# Every case's HLO form goes into one IREE module (compiling costs seconds per module, not per function).
CASES: dict = {}


def _case(name, proto, feeds, *, rtol=0.0, atol=0.0):
    CASES[name] = (proto, feeds, rtol, atol)


@pytest.fixture(scope="module")
def iree_module():
    functions = [export_function(onnx_to_hlo(opconv.load(proto)), name) for name, (proto, _, _, _) in CASES.items()]
    # two modules, compiled in parallel
    return iree_runtime.IreeModule([module_text(functions[0::2], "even"), module_text(functions[1::2], "odd")])


def _check(name, iree_module):
    """The HLO form in opconv's executor and in IREE against onnxruntime."""
    proto, feeds, rtol, atol = CASES[name]
    expected = run_ort(proto, feeds)
    hlo = onnx_to_hlo(opconv.load(proto))
    mine = list(opconv.run(hlo, feeds).values())
    iree = iree_module.call(name, *[feeds[v.name] for v in hlo.graph.inputs if v.const is None])
    for who, got in (("opconv HLO executor", mine), ("IREE", iree)):
        assert len(got) == len(expected), who
        for i, (e, g) in enumerate(zip(expected, got)):
            g = np.asarray(g)
            assert g.shape == e.shape and g.dtype == e.dtype, f"{who} output {i}: {g.shape} {g.dtype}"
            np.testing.assert_allclose(
                g.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol, err_msg=f"{who} output {i}"
            )


for a_dtype, b_dtype in [(np.uint8, np.int8), (np.int8, np.int8), (np.uint8, np.uint8)]:
    _feeds = {"a": _q((2, 3, 16), a_dtype)}
    _init = {"b": _q((16, 5), b_dtype), "az": np.asarray(9, a_dtype), "bz": _q((5,), b_dtype)}
    _case(
        f"matmul_integer_{a_dtype.__name__}_{b_dtype.__name__}",
        _model([helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])], _feeds, ["y"], _init),
        _feeds,
    )

# ConvInteger: padding (with the zero point, as centred zeros), strides (onnxruntime takes per-tensor zero points)
_feeds = {"x": _q((1, 3, 7, 7), np.uint8)}
_init = {"w": _q((4, 3, 3, 3), np.int8), "xz": np.asarray(130, np.uint8), "wz": np.asarray(-3, np.int8)}
_case(
    "conv_integer",
    _model(
        [helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 0, 1, 2], strides=[2, 1])],
        _feeds,
        ["y"],
        _init,
        opset=10,
    ),
    _feeds,
)

# quantize_dynamic's pattern: DynamicQuantizeLinear feeding MatMulInteger, rescaled in float
_feeds = {"x": (RNG.standard_normal((4, 24)) * 3).astype(np.float32)}
_init = {"w": _q((24, 6), np.int8), "wz": np.asarray(0, np.int8), "ws": np.asarray(0.01, np.float32)}
_case(
    "dynamic_quantize_then_matmul_integer",
    _model(
        [
            helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
            helper.make_node("MatMulInteger", ["q", "w", "z", "wz"], ["acc"]),
            helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["s", "ws"], ["scale"]),
            helper.make_node("Mul", ["accf", "scale"], ["y"]),
        ],
        _feeds,
        ["q", "s", "z", "y"],
        _init,
    ),
    _feeds,
    rtol=1e-6,
    atol=1e-6,
)

# all zeros (scale 1 as onnxruntime says), minimum 0 (zero point 0), maximum 0 (zero point 255)
for _name, _x in [
    ("zeros", np.zeros((3, 4), np.float32)),
    ("positive", np.abs(RNG.standard_normal((5,))).astype(np.float32)),
    ("negative", -np.abs(RNG.standard_normal((2, 7)) * 1e3).astype(np.float32)),
]:
    _case(
        f"dynamic_quantize_{_name}",
        _model([helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"])], {"x": _x}, ["q", "s", "z"], {}),
        {"x": _x},
    )

# MatMulNBits: 2, 4 and 8 bits, K a multiple of the block or not, zero points absent, packed or float (onnxruntime's
# CPU kernel takes float zero points with 4-bit weights only)
for bits, k, block_size, zero_points in [
    (4, 70, 32, None),
    (4, 70, 32, "packed"),
    (4, 64, 16, "float"),
    (8, 40, 16, None),
    (8, 40, 16, "packed"),
    (2, 96, 32, "packed"),
]:
    n = 6
    blocks = -(-k // block_size)
    _init = {
        "b": RNG.integers(0, 256, (n, blocks, block_size * bits // 8)).astype(np.uint8),
        "scales": (RNG.random(n * blocks) * 0.1 + 0.01).astype(np.float32),
    }
    if zero_points == "packed":
        _init["zp"] = RNG.integers(0, 256, n * -(-blocks * bits // 8)).astype(np.uint8)
    elif zero_points == "float":
        _init["zp"] = (RNG.random(n * blocks) * (1 << bits)).astype(np.float32)
    _init["bias"] = RNG.standard_normal(n).astype(np.float32)
    _node = helper.make_node(
        "MatMulNBits",
        ["a", "b", "scales", "zp" if zero_points else "", "", "bias"],
        ["y"],
        domain="com.microsoft",
        K=k,
        N=n,
        bits=bits,
        block_size=block_size,
    )
    _feeds = {"a": RNG.standard_normal((2, 3, k)).astype(np.float32)}
    _case(
        f"matmul_nbits_{bits}_{k}_{block_size}_{zero_points}",
        _model([_node], _feeds, ["y"], _init),
        _feeds,
        rtol=1e-4,
        atol=1e-4,
    )

_feeds = {"a": _q((3, 20), np.uint8), "x": RNG.standard_normal((3, 20)).astype(np.float32)}
_init = {
    "w": _q((20, 4), np.int8),
    "as": np.asarray(0.05, np.float32),
    "ws": np.linspace(0.01, 0.02, 4, dtype=np.float32),
    "az": np.asarray(7, np.uint8),
    "wz": np.zeros(4, np.int8),
    "bias": RNG.standard_normal(4).astype(np.float32),
}
_case(
    "matmul_integer_to_float_and_dynamic_quantize_matmul",
    _model(
        [
            helper.make_node(
                "MatMulIntegerToFloat", ["a", "w", "as", "ws", "az", "wz", "bias"], ["y"], domain="com.microsoft"
            ),
            helper.make_node("DynamicQuantizeMatMul", ["x", "w", "ws", "wz", "bias"], ["z"], domain="com.microsoft"),
        ],
        _feeds,
        ["y", "z"],
        _init,
    ),
    _feeds,
    rtol=1e-5,
    atol=1e-5,
)


def _quantize_dynamic_mlp():
    """A 3-layer MLP after onnxruntime's quantize_dynamic (built in memory through temporary files)."""
    import tempfile

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    width, nodes, initializers, x = 16, [], {}, "x"
    for i in range(3):
        initializers[f"w{i}"] = (RNG.standard_normal((width, width)) * 0.3).astype(np.float32)
        initializers[f"b{i}"] = RNG.standard_normal(width).astype(np.float32)
        nodes += [
            helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"]),
            helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]),
            helper.make_node("Relu", [f"a{i}"], [f"r{i}"]),
        ]
        x = f"r{i}"
    feeds = {"x": RNG.standard_normal((2, width)).astype(np.float32)}
    source = _model(nodes, feeds, [x], initializers)
    with tempfile.TemporaryDirectory() as folder:
        onnx.save(source, f"{folder}/mlp.onnx")
        quantize_dynamic(f"{folder}/mlp.onnx", f"{folder}/mlp_q.onnx", weight_type=QuantType.QInt8)
        quantized = onnx.load(f"{folder}/mlp_q.onnx")
    assert {n.op_type for n in quantized.graph.node} >= {"DynamicQuantizeLinear", "MatMulInteger"}
    return quantized, feeds


_case("quantize_dynamic_mlp", *_quantize_dynamic_mlp(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(CASES))
def test_hlo_form_matches_onnxruntime(name, iree_module):
    _check(name, iree_module)
