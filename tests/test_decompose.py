"""``opconv decompose``: each contrib operator's decomposition against onnxruntime running the original node.

Every case builds a one-node model, runs it in onnxruntime, decomposes it at one or two ai.onnx opsets (the
standard-op form and the primitive form below it), and requires the decomposed model to hold only standard
operators and to give onnxruntime's outputs both in onnxruntime and in opconv's executor."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

import opconv
from opconv.cli import cli
from opconv.compare import compare_arrays
from opconv.converters.decompose import decompose
from opconv.dialects.onnx import io as onnx_io

pytest.importorskip("onnxruntime")
from tests.runtimes import run_ort  # noqa: E402
from tests.test_contrib_kernels_nn import DMMHA_OUTPUTS, dmmha_self_inputs, single_node_model  # noqa: E402

MS = "com.microsoft"
RNG = np.random.default_rng(19)


def rand(*shape, dtype=np.float32, low=-1.0, high=1.0):
    return RNG.uniform(low, high, shape).astype(dtype)


def as_initializers(model: onnx.ModelProto, inputs: dict, names) -> None:
    """Make the graph inputs ``names`` initializers (the weights onnxruntime's quantizers write as constants)."""
    names = {name for name in names if inputs.get(name) is not None}
    model.graph.initializer.extend(onnx.numpy_helper.from_array(inputs[name], name) for name in sorted(names))
    kept = [i for i in model.graph.input if i.name not in names]
    del model.graph.input[:]
    model.graph.input.extend(kept)


def assert_decomposes(
    op: str,
    inputs: dict,
    outputs=("Y",),
    *,
    domain: str = MS,
    opsets=(13, 20),
    rtol=None,
    atol=None,
    output_types=None,
    opconv_atol=None,
    node_attrs=None,
    constants=(),
    **attrs,
):
    feeds = {k: v for k, v in inputs.items() if v is not None and k not in constants}
    names = [o for o in outputs if o]
    for opset in opsets:
        model = single_node_model(op, inputs, outputs, domain=domain, opset=opset, output_types=output_types, **attrs)
        as_initializers(model, inputs, constants)
        model.graph.node[0].attribute.extend(helper.make_attribute(k, v) for k, v in (node_attrs or {}).items())
        expected = run_ort(model, feeds)
        decomposed = decompose(model)
        ops = {(n.domain or "", n.op) for n in decomposed.graph.walk()}
        assert all(d in ("", "ai.onnx") for d, _ in ops), ops
        proto = onnx_io.to_proto(decomposed)
        onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True)  # standard and well typed
        problems = []
        for runner, got, tolerance in (
            ("onnxruntime", dict(zip(names, run_ort(proto, feeds))), atol),
            ("opconv", opconv.run(decomposed, feeds), opconv_atol or atol),
        ):
            for name, want in zip(names, expected):
                if tolerance and np.issubdtype(want.dtype, np.integer):  # integers within `tolerance` steps
                    steps = np.abs(want.astype(np.int64) - np.asarray(got[name]).astype(np.int64))
                    if steps.max() > tolerance:
                        problems.append(f"opset {opset} {runner} {name}: {steps.max()} steps away")
                    continue
                report = compare_arrays(name, want, got[name], rtol, tolerance)
                if not report.ok:
                    problems.append(f"opset {opset} {runner} {name}: {report.message}")
        assert not problems, "\n".join(problems)


B, S, H = 2, 5, 16


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_skip_layer_normalization(dtype):
    assert_decomposes(
        "SkipLayerNormalization",
        {
            "x": rand(B, S, H, dtype=dtype),
            "skip": rand(B, S, H, dtype=dtype),
            "gamma": rand(H, dtype=dtype),
            "beta": rand(H, dtype=dtype),
            "bias": rand(H, dtype=dtype),
        },
        ("Y", "mean", "inv_std", "sum"),
        epsilon=1e-5,
    )


def test_skip_layer_normalization_without_beta_bias():
    assert_decomposes(
        "SkipLayerNormalization", {"x": rand(B, S, H), "skip": rand(S, H), "gamma": rand(H)}, epsilon=1e-12
    )


def test_skip_simplified_layer_normalization():
    assert_decomposes(
        "SkipSimplifiedLayerNormalization",
        {"x": rand(B, S, H), "skip": rand(B, S, H), "gamma": rand(H), "bias": rand(H)},
        ("Y", "", "inv", "sum"),
        epsilon=1e-6,
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_ai_onnx_layer_normalization_1(dtype):
    # onnxruntime's own ai.onnx LayerNormalization below opset 17; at 17 it is ONNX's and stays as it is
    assert_decomposes(
        "LayerNormalization",
        {"x": rand(B, S, H, dtype=dtype), "scale": rand(H, dtype=dtype), "b": rand(H, dtype=dtype)},
        domain="",
        opsets=(13, 16),
        epsilon=1e-5,
    )


def test_ai_onnx_simplified_layer_normalization_1():
    assert_decomposes(
        "SimplifiedLayerNormalization",
        {"x": rand(B, S, H), "scale": rand(H)},
        ("Y", "inv"),
        domain="",
        opsets=(13, 17),
        axis=-1,
        epsilon=1e-5,
    )


@pytest.mark.parametrize("with_mask,with_positions", [(True, False), (False, True), (True, True)])
def test_embed_layer_normalization(with_mask, with_positions):
    vocab, positions = 30, 12
    inputs = {
        "ids": RNG.integers(0, vocab, (B, S)).astype(np.int32),
        "segments": RNG.integers(0, 2, (B, S)).astype(np.int32),
        "word": rand(vocab, H),
        "pos": rand(positions, H),
        "seg": rand(2, H),
        "gamma": rand(H),
        "beta": rand(H),
        "mask": np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32) if with_mask else None,
        "position_ids": RNG.integers(0, positions, (B, S)).astype(np.int32) if with_positions else None,
    }
    assert_decomposes("EmbedLayerNormalization", inputs, ("Y", "mask_index", "sum"), epsilon=1e-12)


@pytest.mark.parametrize("op,with_bias", [("Gelu", False), ("BiasGelu", True), ("FastGelu", True), ("FastGelu", False)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_gelus(op, with_bias, dtype):
    inputs = {"x": rand(B, S, H, dtype=dtype, low=-4, high=4)}
    if with_bias:
        inputs["bias"] = rand(H, dtype=dtype)
    assert_decomposes(op, inputs)


def test_quick_gelu():
    assert_decomposes("QuickGelu", {"x": rand(B, S, H, low=-4, high=4)}, alpha=1.5)


@pytest.mark.parametrize("op", ["FusedMatMul", "TransposeMatMul"])
@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_fused_matmul(op, trans_a, trans_b):
    a = rand(2, 3, 4) if not trans_a else rand(2, 4, 3)
    b = rand(4, 6) if not trans_b else rand(6, 4)
    assert_decomposes(op, {"a": a, "b": b}, alpha=0.5, transA=trans_a, transB=trans_b)


@pytest.mark.parametrize(
    "activation,extra", [("Relu", {}), ("LeakyRelu", {"activation_alpha": 0.2}), ("Tanh", {}), ("Sigmoid", {})]
)
def test_fused_gemm(activation, extra):
    assert_decomposes(
        "FusedGemm",
        {"a": rand(4, 3), "b": rand(5, 3), "c": rand(5)},
        transB=1,
        alpha=0.7,
        beta=1.3,
        activation=activation,
        **extra,
    )


@pytest.mark.parametrize("activation,params", [("Relu", None), ("Clip", [-0.2, 0.3]), ("LeakyRelu", [0.1])])
@pytest.mark.parametrize("with_z", [False, True])
def test_fused_conv(activation, params, with_z):
    inputs = {"x": rand(1, 3, 6, 6), "w": rand(4, 3, 3, 3), "b": rand(4)}
    if with_z:
        inputs["z"] = rand(1, 4, 6, 6)
    assert_decomposes(
        "FusedConv", inputs, activation=activation, activation_params=params, pads=[1, 1, 1, 1], kernel_shape=[3, 3]
    )


NUM_HEADS, HEAD = 2, 4


def _attention_inputs(mask=None, past=0, dtype=np.float32):
    hidden = NUM_HEADS * HEAD
    inputs = {
        "x": rand(B, S, hidden, dtype=dtype),
        "w": rand(hidden, 3 * hidden, dtype=dtype),
        "bias": rand(3 * hidden, dtype=dtype),
        "mask": mask,
    }
    if past:
        inputs["past"] = rand(2, B, NUM_HEADS, past, HEAD, dtype=dtype)
    return inputs


@pytest.mark.parametrize("mask_kind", [None, "2d", "1d", "3d"])
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_attention(mask_kind, unidirectional):
    masks = {
        None: None,
        "2d": np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32),
        "1d": np.array([3, 5], np.int32),
        "3d": RNG.integers(0, 2, (B, S, S)).astype(np.int32),
    }
    mask = masks[mask_kind]
    if mask is not None and mask_kind == "3d":
        mask[:, :, 0] = 1  # no fully hidden row
    assert_decomposes("Attention", _attention_inputs(mask), num_heads=NUM_HEADS, unidirectional=unidirectional)


def test_attention_with_past_and_present():
    inputs = _attention_inputs(np.ones((B, S + 3), np.int32), past=3)
    assert_decomposes("Attention", inputs, ("Y", "present"), num_heads=NUM_HEADS, unidirectional=1)


def test_attention_float16():
    assert_decomposes("Attention", _attention_inputs(dtype=np.float16), num_heads=NUM_HEADS, unidirectional=1)


def test_attention_bias_and_scale():
    inputs = _attention_inputs()
    inputs["past"] = None
    inputs["attention_bias"] = rand(1, NUM_HEADS, S, S)
    assert_decomposes("Attention", inputs, num_heads=NUM_HEADS, scale=0.3)


@pytest.mark.parametrize("with_bias,mask_kind", [(False, None), (True, "2d"), (True, "bias")])
def test_multi_head_attention(with_bias, mask_kind):
    hidden, kv_len = NUM_HEADS * HEAD, 7
    inputs = {
        "q": rand(B, S, hidden),
        "k": rand(B, kv_len, hidden),
        "v": rand(B, kv_len, hidden),
        "bias": rand(3 * hidden) if with_bias else None,
        "key_padding_mask": np.array([[1] * 5 + [0, 0], [1] * 7], np.int32) if mask_kind == "2d" else None,
        "attention_bias": rand(B, NUM_HEADS, S, kv_len) if mask_kind == "bias" else None,
    }
    assert_decomposes("MultiHeadAttention", inputs, num_heads=NUM_HEADS)


def test_multi_head_attention_past_present():
    hidden, past = NUM_HEADS * HEAD, 3
    inputs = {
        "q": rand(B, S, hidden),
        "k": rand(B, S, hidden),
        "v": rand(B, S, hidden),
        "bias": None,
        "key_padding_mask": None,
        "attention_bias": None,
        "past_key": rand(B, NUM_HEADS, past, HEAD),
        "past_value": rand(B, NUM_HEADS, past, HEAD),
    }
    assert_decomposes(
        "MultiHeadAttention", inputs, ("Y", "present_key", "present_value"), num_heads=NUM_HEADS, unidirectional=1
    )


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("layout,positions", [("bsd", "full"), ("bnsh", "full"), ("bsd", "start")])
@pytest.mark.parametrize("rotary_dim", [0, 4])
def test_rotary_embedding(interleaved, layout, positions, rotary_dim):
    heads, head, max_pos = 2, 8, 16
    half = (rotary_dim or head) // 2
    x = rand(B, S, heads * head) if layout == "bsd" else rand(B, heads, S, head)
    pos = (RNG.integers(0, max_pos, (B, S)) if positions == "full" else np.array([3])).astype(np.int64)
    angles = RNG.uniform(0, 6, (max_pos, half)).astype(np.float32)
    # onnxruntime wants num_heads with a rotary_embedding_dim even for 4-D inputs
    attrs = {
        "interleaved": interleaved,
        "num_heads": heads if layout == "bsd" or rotary_dim else None,
        "rotary_embedding_dim": rotary_dim or None,
    }
    assert_decomposes("RotaryEmbedding", {"x": x, "pos": pos, "cos": np.cos(angles), "sin": np.sin(angles)}, **attrs)


def test_dynamic_quantize_matmul():
    inputs = {
        "a": rand(3, 8),
        "b": RNG.integers(-128, 127, (8, 5)).astype(np.int8),
        "b_scale": np.array([0.02], np.float32),
        "b_zero": np.array([0], np.int8),
        "bias": rand(5),
    }
    assert_decomposes("DynamicQuantizeMatMul", inputs)


def test_matmul_integer_to_float():
    inputs = {
        "a": RNG.integers(0, 255, (3, 8)).astype(np.uint8),
        "b": RNG.integers(0, 255, (8, 5)).astype(np.uint8),
        "a_scale": np.array(0.03, np.float32),
        "b_scale": rand(5, low=0.01, high=0.05),
        "a_zero": np.array(128, np.uint8),
        "b_zero": RNG.integers(100, 150, (5,)).astype(np.uint8),
        "bias": rand(5),
    }
    assert_decomposes("MatMulIntegerToFloat", inputs)


def _lstm_inputs(directions: int, per_column: bool, w_dtype, states: bool, peepholes: bool):
    # a generator of its own: the shared one's later draws (which the QLinear cases' rounding ties depend on)
    # stay as they were
    rng = np.random.default_rng(23)
    steps, batch, inputs, hidden = 4, 3, 5, 6
    scales = (directions, 4 * hidden) if per_column else (directions,)
    info = np.iinfo(w_dtype)
    zero = 128 if w_dtype == np.uint8 else 0

    def floats(*shape, low=-1.0, high=1.0):
        return rng.uniform(low, high, shape).astype(np.float32)

    def weights(*shape):
        return rng.integers(info.min, int(info.max) + 1, shape).astype(w_dtype)

    return {
        "x": floats(steps, batch, inputs, low=-2, high=2),
        "w": weights(directions, inputs, 4 * hidden),
        "r": weights(directions, hidden, 4 * hidden),
        "b": floats(directions, 8 * hidden),
        "lens": None,
        "h0": floats(directions, batch, hidden) if states else None,
        "c0": floats(directions, batch, hidden) if states else None,
        "p": floats(directions, 3 * hidden) if peepholes else None,
        "w_scale": floats(*scales, low=0.002, high=0.012),
        "w_zero": np.full(scales, zero, w_dtype),
        "r_scale": floats(*scales, low=0.002, high=0.012),
        "r_zero": np.full(scales, zero, w_dtype),
    }


LSTM_WEIGHTS = ("w", "r", "w_scale", "w_zero", "r_scale", "r_zero")


@pytest.mark.parametrize(
    "direction,per_column,w_dtype,states,peepholes",
    [
        ("forward", False, np.int8, False, False),
        ("reverse", True, np.uint8, True, False),
        ("bidirectional", True, np.int8, True, True),
        ("bidirectional", False, np.uint8, False, False),
    ],
)
def test_dynamic_quantize_lstm(direction, per_column, w_dtype, states, peepholes):
    """X and every step's H are rounded to uint8 over their range as onnxruntime's kernel does (a plain LSTM on
    the dequantized weights is ~3e-3 away): a Loop over the steps, exact to float32 rounding."""
    inputs = _lstm_inputs(2 if direction == "bidirectional" else 1, per_column, w_dtype, states, peepholes)
    assert_decomposes(
        "DynamicQuantizeLSTM",
        inputs,
        ("Y", "Y_h", "Y_c"),
        opsets=(11, 20),
        constants=LSTM_WEIGHTS,
        direction=direction,
        hidden_size=6,
    )


@pytest.mark.parametrize(
    "attrs",
    [
        {"clip": 0.4, "input_forget": 1},
        {
            "activations": ["HardSigmoid", "LeakyRelu", "Softsign"],
            "activation_alpha": [0.3, 0.2],
            "activation_beta": [0.4],
        },
        {"activations": ["Sigmoid", "Tanh", "Tanh", "Sigmoid", "Relu", "Tanh"], "direction": "bidirectional"},
    ],
)
def test_dynamic_quantize_lstm_gate_options(attrs):
    inputs = _lstm_inputs(2 if attrs.get("direction") == "bidirectional" else 1, False, np.int8, True, False)
    assert_decomposes(
        "DynamicQuantizeLSTM", inputs, ("Y", "Y_h", "Y_c"), opsets=(13,), constants=LSTM_WEIGHTS, hidden_size=6, **attrs
    )


def test_dynamic_quantize_lstm_with_sequence_lengths_is_refused():
    inputs = _lstm_inputs(1, False, np.int8, False, False)
    inputs["lens"] = np.array([4, 2, 3], np.int32)
    model = single_node_model("DynamicQuantizeLSTM", inputs, ("Y",), opset=13, hidden_size=6)
    as_initializers(model, inputs, LSTM_WEIGHTS)
    with pytest.raises(opconv.ConversionError, match="DynamicQuantizeLSTM: sequence_lens is not decomposed"):
        decompose(model)


def test_refusals_name_every_node_and_reason():
    inputs = {
        "q": rand(1, 2, 8),
        "key": None,
        "value": None,
        "past_key": None,
        "past_value": None,
        "seqlens_k": np.array([1], np.int32),
        "total_sequence_length": np.array(2, np.int32),
    }
    model = single_node_model("GroupQueryAttention", inputs, ("Y",), num_heads=2, kv_num_heads=1, smooth_softmax=1)
    with pytest.raises(opconv.ConversionError, match="1 node\\(s\\): GroupQueryAttention: smooth_softmax=1 .*"):
        decompose(model)


# ------------------------------------------------------------------ models made by onnxruntime's optimizer

ORT_TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "ort_tools")
OPTIMIZED = [
    "bert_opt1",
    "bert_opt2",
    "bert_opt2_fp16",
    "bert_opt1_quantized",
    "gpt2_opt1",
    "gpt2_opt2",
    "gpt2_opt2_fp16",
    "vit_opt1",
    "vit_opt2",
    "vit_opt2_fp16",
]  # fixtures/ort_tools/make.py
#: the float16 variants compute in float16 (float32 inputs and outputs): compared at float16's tolerance
TOLERANCE = {name: (1e-2, 1e-2) for name in OPTIMIZED if name.endswith("_fp16")}


def _fixture(name: str):
    data = np.load(os.path.join(ORT_TOOLS, f"{name}.npz"))
    feeds = {k.split(":", 1)[1]: data[k] for k in data.files if k.startswith("input:")}
    expected = {k.split(":", 1)[1]: data[k] for k in data.files if k.startswith("output:")}
    return os.path.join(ORT_TOOLS, f"{name}.onnx"), feeds, expected


def _assert_all_match(expected: dict, got: dict, what: str, fixture: str):
    rtol, atol = TOLERANCE.get(fixture, (None, None))
    problems = [
        f"{what} {name}: {report.message}"
        for name, want in expected.items()
        if not (report := compare_arrays(name, want, got[name], rtol, atol)).ok
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", OPTIMIZED)
def test_optimized_model_decomposes_and_runs_in_onnxruntime_and_opconv(name, tmp_path):
    path, feeds, expected = _fixture(name)
    assert run_ort(onnx.load(path), feeds)  # the committed outputs are onnxruntime's of this very model
    out = tmp_path / "standard.onnx"
    result = CliRunner().invoke(cli, ["decompose", path, "-o", str(out)])
    assert result.exit_code == 0, result.output
    proto = onnx.load(str(out))
    onnx.checker.check_model(proto, full_check=True)
    assert {n.domain for n in proto.graph.node} <= {""}
    assert "com.microsoft" not in {o.domain for o in proto.opset_import}
    _assert_all_match(
        expected, dict(zip([o.name for o in proto.graph.output], run_ort(proto, feeds))), "onnxruntime", name
    )
    _assert_all_match(expected, opconv.run(opconv.load(str(out)), feeds), "opconv", name)


# the float16 GPT-2 and ViT's own LayerNormalization-17 nodes (float16, stash_type=1) have no opset1 form onnx-to-ir
# accepts (it refuses to compute their statistics in float16)
@pytest.mark.parametrize("name", [name for name in OPTIMIZED if name not in ("gpt2_opt2_fp16", "vit_opt2_fp16")])
def test_optimized_model_converts_to_ir_verified_in_openvino(name, tmp_path):
    import openvino as ov

    path, feeds, expected = _fixture(name)
    shapes = {k: v.shape for k, v in feeds.items()}
    xml = str(tmp_path / "model.xml")
    opconv.save(opconv.convert(opconv.load(path), to="openvino", input_shapes=shapes), xml)
    core = ov.Core()
    compiled = core.compile_model(core.read_model(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    got = dict(zip(expected, compiled(feeds).values()))
    _assert_all_match(expected, got, "OpenVINO CPU", name)


# onnx-to-hlo has no rule yet for the standard DynamicQuantizeLinear / MatMulInteger that quantize_dynamic writes
@pytest.mark.parametrize("name", [name for name in OPTIMIZED if name != "bert_opt1_quantized"])
def test_optimized_model_converts_to_hlo_verified_in_the_hlo_executor(name):
    path, feeds, expected = _fixture(name)
    hlo = opconv.convert(opconv.load(path), to="hlo", input_shapes={k: v.shape for k, v in feeds.items()})
    got = opconv.run(hlo, feeds)
    _assert_all_match(expected, dict(zip(expected, got.values())), "HLO executor", name)


def test_refused_nodes_are_listed_by_reason_and_nothing_is_written(tmp_path):
    gqa = helper.make_node(
        "GroupQueryAttention",
        ["q", "", "", "", "", "lengths", "total"],
        ["y1"],
        domain=MS,
        name="gqa",
        num_heads=2,
        kv_num_heads=1,
        smooth_softmax=1,
    )
    gelu = helper.make_node("FusedMatMul", ["y1", "w"], ["y2"], domain=MS, name="fmm", transBatchA=1)
    graph = helper.make_graph(
        [gqa, gelu],
        "g",
        [
            helper.make_tensor_value_info("q", TensorProto.FLOAT, [1, 2, 8]),
            helper.make_tensor_value_info("w", TensorProto.FLOAT, [8, 8]),
            helper.make_tensor_value_info("lengths", TensorProto.INT32, [1]),
            helper.make_tensor_value_info("total", TensorProto.INT32, []),
        ],
        [helper.make_tensor_value_info("y2", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    result = CliRunner().invoke(cli, ["decompose", str(path)])
    assert result.exit_code == 2
    assert "1 node(s): GroupQueryAttention: " in result.output and "gqa" in result.output
    assert "1 node(s): FusedMatMul: transBatchA/transBatchB are not decomposed: fmm" in result.output
    assert not (tmp_path / "m.decomposed.onnx").exists()


def test_version_converter_keeps_contrib_nodes_unless_asked(tmp_path):
    path, feeds, expected = _fixture("bert_opt1")
    kept = opconv.convert_version(path, 17)
    assert any(n.domain == MS for n in kept.graph.walk())
    standard_17 = opconv.convert_version(path, 17, decompose=True)
    assert not any(n.domain == MS for n in standard_17.graph.walk())
    proto = onnx_io.to_proto(standard_17)
    imports = {imp.domain: imp.version for imp in proto.opset_import}
    assert imports[""] == 17 and MS not in imports
    _assert_all_match(
        expected, dict(zip([o.name for o in proto.graph.output], run_ort(proto, feeds))), "opset 17", "bert_opt1"
    )


def _gqa_inputs(seq, past, valid, *, packed=False, rotary=False, kv_heads=1, heads=4, head=8, dtype=np.float32):
    inputs = {
        "query": rand(B, seq, (heads + 2 * kv_heads) * head if packed else heads * head, dtype=dtype),
        "key": None if packed else rand(B, seq, kv_heads * head, dtype=dtype),
        "value": None if packed else rand(B, seq, kv_heads * head, dtype=dtype),
        "past_key": rand(B, kv_heads, past, head, dtype=dtype) if past else None,
        "past_value": rand(B, kv_heads, past, head, dtype=dtype) if past else None,
        "seqlens_k": np.asarray(valid, np.int32) - 1,
        "total_sequence_length": np.array([max(valid)], np.int32),
    }
    if rotary:
        angles = RNG.uniform(0, 6, (32, head // 2))
        inputs["cos_cache"] = np.cos(angles).astype(dtype)
        inputs["sin_cache"] = np.sin(angles).astype(dtype)
    return inputs


@pytest.mark.parametrize(
    "case", ["prompt", "prompt_padded", "packed", "decode", "decode_ragged", "rotary", "window", "float16"]
)
def test_group_query_attention(case):
    kv_heads = 2 if case in ("prompt", "decode") else 1
    if case.startswith("prompt") or case in ("packed", "window", "float16"):
        valid = [S, 3] if case == "prompt_padded" else [S, S]
        inputs = _gqa_inputs(
            S,
            0,
            valid,
            packed=case == "packed",
            kv_heads=kv_heads,
            dtype=np.float16 if case == "float16" else np.float32,
        )
    elif case == "rotary":
        inputs = _gqa_inputs(S, 0, [S, S], rotary=True, head=16)  # onnxruntime rotates heads of 16k features
    else:  # one new token after a cache of 6 (ragged: the second sequence had 4 real tokens)
        inputs = _gqa_inputs(1, 6, [7, 5] if case == "decode_ragged" else [7, 7], kv_heads=kv_heads)
    attrs = {
        "num_heads": 4,
        "kv_num_heads": kv_heads,
        "do_rotary": 1 if case == "rotary" else None,
        "local_window_size": 3 if case == "window" else None,
    }
    outputs = ("Y", "present_key", "present_value") if inputs["past_key"] is not None else ("Y",)
    assert_decomposes("GroupQueryAttention", inputs, outputs, opsets=(13, 20), **attrs)


def _matmul_n_bits_model(bits, with_zero_points, k):
    n, block = 6, 16
    blocks = -(-k // block)
    packed = RNG.integers(0, 256, (n, blocks, block * bits // 8)).astype(np.uint8)
    scales = rand(n * blocks, low=0.01, high=0.1)
    zero_bytes = -(-blocks * bits // 8)
    inputs = {
        "a": rand(3, k),
        "b": packed,
        "scales": scales,
        "zero_points": RNG.integers(0, 256, (n, zero_bytes)).astype(np.uint8) if with_zero_points else None,
        "g_idx": None,
        "bias": rand(n),
    }
    model = single_node_model("MatMulNBits", inputs, ("Y",), K=k, N=n, bits=bits, block_size=block)
    as_initializers(model, inputs, ("b", "scales", "zero_points"))
    return model, {"a": inputs["a"], "bias": inputs["bias"]}


@pytest.mark.parametrize("bits,with_zero_points,k", [(4, False, 32), (4, True, 40), (8, True, 32), (2, False, 32)])
def test_matmul_n_bits(bits, with_zero_points, k):
    model, feeds = _matmul_n_bits_model(bits, with_zero_points, k)
    expected = run_ort(model, feeds)
    decomposed = onnx_io.to_proto(decompose(model))
    assert {n.op_type for n in decomposed.graph.node} <= {"MatMul", "Add"}
    for runner, got in (
        ("onnxruntime", run_ort(decomposed, feeds)[0]),
        ("opconv", opconv.run(opconv.load(decomposed), feeds)["Y"]),
    ):
        report = compare_arrays("Y", expected[0], got, None, None)
        assert report.ok, f"{runner}: {report.message}"


def _quantized(shape, dtype=np.uint8):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype)


def _qparams(scale, zero, dtype=np.uint8):
    return np.array(scale, np.float32), np.array(zero, dtype)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_binary(op, dtype):
    zero = 3 if dtype == np.int8 else 120
    a_s, a_z = _qparams(0.05, zero, dtype)
    b_s, b_z = _qparams(0.03, zero - 2, dtype)
    c_s, c_z = _qparams(0.07 if op == "QLinearAdd" else 0.4, zero + 1, dtype)
    # onnxruntime runs the decomposition to its own QLinear op's integers exactly; opconv's QuantizeLinear
    # divides by the scale as ONNX specifies where onnxruntime's may not, so a tie can land one step away
    assert_decomposes(
        op,
        {
            "a": _quantized((B, S, H), dtype),
            "a_s": a_s,
            "a_z": a_z,
            "b": _quantized((H,), dtype),
            "b_s": b_s,
            "b_z": b_z,
            "c_s": c_s,
            "c_z": c_z,
        },
        opconv_atol=1,
    )


@pytest.mark.parametrize(
    "op,attrs", [("QLinearSigmoid", {}), ("QLinearLeakyRelu", {"alpha": 0.1}), ("QLinearGlobalAveragePool", {})]
)
def test_qlinear_unary(op, attrs):
    x_s, x_z = _qparams(0.05, 128)
    y_s, y_z = _qparams(0.004 if op == "QLinearSigmoid" else 0.03, 10 if op == "QLinearSigmoid" else 100)
    assert_decomposes(op, {"x": _quantized((2, 3, 4, 5)), "x_s": x_s, "x_z": x_z, "y_s": y_s, "y_z": y_z}, **attrs)


def test_qlinear_concat():
    y_s, y_z = _qparams(0.06, 127)
    inputs = {"y_s": y_s, "y_z": y_z}
    for i, (scale, zero) in enumerate([(0.05, 120), (0.02, 3)]):
        inputs.update(
            {
                f"x{i}": _quantized((2, 3 + i, 4)),
                f"s{i}": np.array(scale, np.float32),
                f"z{i}": np.array(zero, np.uint8),
            }
        )
    assert_decomposes("QLinearConcat", inputs, axis=1)


@pytest.mark.parametrize("op", ["QuantizeLinear", "DequantizeLinear"])
def test_ms_quantize_dequantize_linear(op):
    if op == "QuantizeLinear":
        inputs = {
            "x": rand(B, S, H, low=-3, high=3),
            "s": rand(H, low=0.01, high=0.05),
            "z": RNG.integers(0, 256, (H,)).astype(np.uint8),
        }
    else:
        inputs = {
            "x": _quantized((B, S, H)),
            "s": rand(H, low=0.01, high=0.05),
            "z": RNG.integers(0, 256, (H,)).astype(np.uint8),
        }
    assert_decomposes(op, inputs, axis=2)


@pytest.mark.parametrize(
    "op,attrs", [("QLinearAveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]}), ("QLinearSoftmax", {"axis": -1})]
)
def test_qlinear_pool_and_softmax(op, attrs):
    x_s, x_z = _qparams(0.05, 128)
    y_s, y_z = _qparams(1 / 256 if op == "QLinearSoftmax" else 0.05, 0 if op == "QLinearSoftmax" else 120)
    assert_decomposes(
        op,
        {"x": _quantized((2, 3, 4, 6)), "x_s": x_s, "x_z": x_z, "y_s": y_s, "y_z": y_z},
        opconv_atol=1,
        node_attrs={"opset": 13} if op == "QLinearSoftmax" else None,
        **attrs,
    )


@pytest.mark.parametrize("quantized_output", [True, False])
@pytest.mark.parametrize("per_column", [False, True])
def test_qgemm(quantized_output, per_column):
    n = 5
    a_s, a_z = _qparams(0.05, 120)
    b_s = rand(n, low=0.01, high=0.04) if per_column else np.array(0.02, np.float32)
    b_z = np.full(n, 3, np.int8) if per_column else np.array(3, np.int8)
    inputs = {
        "a": _quantized((4, 8)),
        "a_s": a_s,
        "a_z": a_z,
        "b": _quantized((n, 8), np.int8),
        "b_s": b_s,
        "b_z": b_z,
        "c": RNG.integers(-500, 500, (n,)).astype(np.int32),
    }
    if quantized_output:
        inputs["y_s"], inputs["y_z"] = _qparams(0.2, 128)
    assert_decomposes("QGemm", inputs, transB=1, alpha=1.0, opconv_atol=1)


def test_decomposition_coverage_of_onnxruntime_cpu_operators(capsys):
    """Prints how many of onnxruntime's CPU com.microsoft operators decompose; every registered decomposition is
    an operator onnxruntime knows and is exercised by a test above."""
    import json

    from opconv.converters.decompose import decompositions

    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ort_cpu_contrib_ops.json")) as f:
        listing = json.load(f)
    cpu_ops = {op["name"] for op in listing["ops"] if op["domain"] == MS}
    gpu_only = {op if isinstance(op, str) else op["name"] for op in listing["no_cpu_kernel"]}
    registered = {
        op
        for (domain, op), versions in decompositions().items()
        if domain == MS and any(fn is not None for fn in versions.values())
    }
    assert registered <= cpu_ops | gpu_only, registered - cpu_ops - gpu_only
    with open(__file__) as f:
        source = f.read()
    untested = sorted(op for op in registered if f'"{op}"' not in source and op != "BiasAdd")  # no CPU oracle
    assert not untested, untested
    with capsys.disabled():
        print(
            f"\ncom.microsoft decompositions: {len(registered & cpu_ops)} of {len(cpu_ops)} operators onnxruntime "
            f"runs on CPU (+ {len(registered - cpu_ops)} without a CPU kernel): {', '.join(sorted(registered))}"
        )


def test_small_ms_operators():
    assert_decomposes(
        "Range", {"start": np.array(2, np.int64), "limit": np.array(11, np.int64), "delta": np.array(3, np.int64)}
    )
    assert_decomposes("Range", {"start": np.array(0.5, np.float32), "limit": np.array(4, np.float32)})
    assert_decomposes("Trilu", {"x": rand(3, 4, 5), "k": np.array(1, np.int64)}, opsets=(14, 20), upper=0)
    assert_decomposes("GatherND", {"x": rand(3, 4, 5), "i": RNG.integers(0, 3, (2, 2)).astype(np.int64)})
    assert_decomposes(
        "MatMulInteger16",
        {
            "a": RNG.integers(-3000, 3000, (3, 4)).astype(np.int16),
            "b": RNG.integers(-3000, 3000, (4, 2)).astype(np.int16),
        },
    )


def test_expand_dims():
    model = single_node_model("ExpandDims", {"x": rand(3, 4)}, ("Y",))
    model.graph.node[0].input.append("axis")
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array(-1, np.int32), "axis"))
    feeds = {"x": rand(3, 4)}
    expected = run_ort(model, feeds)[0]
    got = run_ort(onnx_io.to_proto(decompose(model)), feeds)[0]
    assert got.shape == expected.shape == (3, 4, 1) and np.array_equal(got, expected)


@pytest.mark.parametrize(
    "op,attrs",
    [
        ("Affine", {"alpha": 1.5, "beta": -0.5}),
        ("ScaledTanh", {"alpha": 2.0, "beta": 0.7}),
        ("ParametricSoftplus", {"alpha": 1.3, "beta": 0.6}),
        ("Scale", {"scale": 3.0}),
        ("ImageScaler", {"scale": 0.5, "bias": [0.1, -0.2, 0.3]}),
    ],
)
def test_ai_onnx_experimental_operators(op, attrs):
    # onnxruntime runs them up to opset 9, as ONNX had them
    assert_decomposes(op, {"x": rand(2, 3, 4, 5, low=-3, high=3)}, domain="", opsets=(7, 9), **attrs)


def test_thresholded_relu_1_and_dynamic_slice():
    assert_decomposes("ThresholdedRelu", {"x": rand(3, 4, low=-3, high=3)}, domain="", opsets=(7, 9), alpha=0.5)
    model = single_node_model("DynamicSlice", {"x": rand(5, 6)}, ("Y",), domain="", opset=9)
    model.graph.node[0].input.extend(["starts", "ends", "axes"])
    model.graph.initializer.extend(
        onnx.numpy_helper.from_array(np.array(v, np.int64), name)
        for name, v in (("starts", [1, 0]), ("ends", [4, 5]), ("axes", [0, 1]))
    )
    feeds = {"x": rand(5, 6)}
    assert np.array_equal(run_ort(onnx_io.to_proto(decompose(model)), feeds)[0], run_ort(model, feeds)[0])


def test_qlinear_conv_and_where():
    x_s, x_z = _qparams(0.05, 120)
    y_s, y_z = _qparams(0.3, 128)
    assert_decomposes(
        "QLinearConv",
        {
            "x": _quantized((1, 3, 6, 6)),
            "x_s": x_s,
            "x_z": x_z,
            "w": _quantized((4, 3, 3, 3), np.int8),
            "w_s": rand(4, low=0.01, high=0.03),
            "w_z": np.zeros(4, np.int8),
            "y_s": y_s,
            "y_z": y_z,
            "bias": RNG.integers(-300, 300, (4,)).astype(np.int32),
        },
        pads=[1, 1, 1, 1],
        kernel_shape=[3, 3],
        opconv_atol=1,
    )
    assert_decomposes(
        "QLinearWhere",
        {
            "c": RNG.integers(0, 2, (B, S)).astype(bool),
            "x": _quantized((B, S)),
            "x_s": x_s,
            "x_z": x_z,
            "y": _quantized((B, S)),
            "y_s": np.array(0.02, np.float32),
            "y_z": np.array(7, np.uint8),
            "z_s": np.array(0.04, np.float32),
            "z_z": np.array(100, np.uint8),
        },
        opconv_atol=1,
    )


def test_hook_leaves_standard_models_alone_and_reaches_subgraphs():
    from opconv.converters.decompose import decompose_contrib

    plain = opconv.load(single_node_model("Relu", {"x": rand(2, 3)}, ("Y",), domain="", opset=17))
    assert decompose_contrib(plain) is plain
    gelu = helper.make_node("FastGelu", ["x"], ["inner"], domain=MS)
    branch = helper.make_graph([gelu], "then", [], [helper.make_tensor_value_info("inner", TensorProto.FLOAT, None)])
    other = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["same"])],
        "else",
        [],
        [helper.make_tensor_value_info("same", TensorProto.FLOAT, None)],
    )
    node = helper.make_node("If", ["c"], ["Y"], then_branch=branch, else_branch=other)
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
        ],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    feeds = {"c": np.array(True), "x": rand(2, 3, low=-3, high=3)}
    decomposed = onnx_io.to_proto(decompose_contrib(opconv.load(model)))
    assert all(n.domain == "" for n in decomposed.graph.node[0].attribute[0].g.node)
    _assert_all_match({"Y": run_ort(model, feeds)[0]}, {"Y": run_ort(decomposed, feeds)[0]}, "If branch", "")


def test_matmul_n_bits_converts_to_ir_and_hlo(tmp_path):
    import openvino as ov

    model, feeds = _matmul_n_bits_model(4, True, 40)
    expected = {"Y": run_ort(model, feeds)[0]}
    xml = str(tmp_path / "m.xml")
    opconv.save(opconv.convert(opconv.load(model), to="openvino"), xml)
    compiled = ov.Core().compile_model(xml, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    _assert_all_match(expected, {"Y": next(iter(compiled(feeds).values()))}, "OpenVINO CPU", "")
    hlo = opconv.convert(opconv.load(model), to="hlo")
    _assert_all_match(expected, {"Y": next(iter(opconv.run(hlo, feeds).values()))}, "HLO executor", "")


def test_too_old_an_opset_is_refused_with_the_opset_needed():
    model = single_node_model("Attention", _attention_inputs(), ("Y",), opset=10, num_heads=NUM_HEADS, unidirectional=1)
    with pytest.raises(
        opconv.ConversionError, match="a computed mask \\(Range\\) needs ai.onnx opset 11 \\(the model is at 10\\)"
    ):
        decompose(model)


@pytest.mark.parametrize("mask_kind,unidirectional", [(None, 0), ("2d", 0), ("1d", 1)])
def test_q_attention(mask_kind, unidirectional):
    hidden = NUM_HEADS * HEAD
    masks = {None: None, "2d": np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32), "1d": np.array([3, 5], np.int32)}
    inputs = {
        "x": _quantized((B, S, hidden)),
        "w": _quantized((hidden, 3 * hidden), np.int8),
        "bias": rand(3 * hidden),
        "x_s": np.array(0.02, np.float32),
        "w_s": np.array(0.01, np.float32),
        "mask": masks[mask_kind],
        "x_z": np.array(128, np.uint8),
        "w_z": np.array(0, np.int8),
    }
    assert_decomposes("QAttention", inputs, num_heads=NUM_HEADS, unidirectional=unidirectional)


def test_q_embed_layer_normalization():
    vocab, positions = 30, 12
    inputs = {
        "ids": RNG.integers(0, vocab, (B, S)).astype(np.int32),
        "segments": RNG.integers(0, 2, (B, S)).astype(np.int32),
    }
    tables = {"word": (vocab, H), "pos": (positions, H), "seg": (2, H), "gamma": (H,), "beta": (H,)}
    inputs.update({name: _quantized(shape) for name, shape in tables.items()})
    inputs["mask"] = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)
    inputs.update({f"{name}_scale": np.array(0.01 + 0.01 * i, np.float32) for i, name in enumerate(tables)})
    inputs.update({f"{name}_zero": np.array(100 + i, np.uint8) for i, name in enumerate(tables)})
    assert_decomposes("QEmbedLayerNormalization", inputs, ("Y", "mask_index"), epsilon=1e-12)


@pytest.mark.parametrize("packing", ["kv", "qkv"])
def test_multi_head_attention_packed(packing):
    # onnxruntime's CPU kernel refuses packed inputs: the oracle is its kernel on the same tensors unpacked
    hidden, kv_len = NUM_HEADS * HEAD, 7 if packing == "kv" else S
    q, k, v = rand(B, S, hidden), rand(B, kv_len, hidden), rand(B, kv_len, hidden)
    bias = rand(3 * hidden)
    heads = lambda x: x.reshape(x.shape[0], x.shape[1], NUM_HEADS, 1, HEAD)  # noqa: E731
    unpacked = single_node_model(
        "MultiHeadAttention", {"q": q, "k": k, "v": v, "bias": bias}, ("Y",), num_heads=NUM_HEADS
    )
    expected = run_ort(unpacked, {"q": q, "k": k, "v": v, "bias": bias})[0]
    if packing == "kv":
        inputs = {"q": q, "kv": np.concatenate([heads(k), heads(v)], axis=3), "v": None, "bias": bias}
    else:
        inputs = {"qkv": np.concatenate([heads(q), heads(k), heads(v)], axis=3), "k": None, "v": None, "bias": bias}
    model = single_node_model("MultiHeadAttention", inputs, ("Y",), num_heads=NUM_HEADS)
    feeds = {name: value for name, value in inputs.items() if value is not None}
    decomposed = decompose(model)
    for runner, got in (
        ("onnxruntime", run_ort(onnx_io.to_proto(decomposed), feeds)[0]),
        ("opconv", opconv.run(decomposed, feeds)["Y"]),
    ):
        report = compare_arrays("Y", expected, got, None, None)
        assert report.ok, f"{runner}: {report.message}"


# ---------------------------------------------------------------- ops with a standard counterpart or a formula
# (each its own generator: the shared one's draws stay as the earlier cases had them)


def _rng():
    return np.random.default_rng(29)


@pytest.mark.parametrize("mode,value", [("constant", 1.5), ("reflect", None), ("edge", None)])
def test_pad_ms(mode, value):
    rng = _rng()
    inputs = {
        "x": rng.standard_normal((2, 3, 4)).astype(np.float32),
        "pads": np.array([[0, 1, 2, 1, 0, 1]], np.int64),
        "value": None if value is None else np.array([value], np.float32),
    }
    assert_decomposes("Pad", inputs, opsets=(13,), constants=("pads",), mode=mode)


@pytest.mark.parametrize(
    "mode,padding,align", [("bilinear", "zeros", 0), ("nearest", "border", 1), ("bicubic", "reflection", 0)]
)
def test_grid_sample_ms(mode, padding, align):
    rng = _rng()
    inputs = {
        "x": rng.standard_normal((2, 3, 5, 6)).astype(np.float32),
        "grid": rng.uniform(-1.2, 1.2, (2, 4, 3, 2)).astype(np.float32),
    }
    assert_decomposes("GridSample", inputs, opsets=(16, 20), mode=mode, padding_mode=padding, align_corners=align)


def test_unique_ms():
    inputs = {"x": np.array([3, 1, 3, 7, 1, 1, 9.5, -2, 3], np.float32)}
    assert_decomposes("Unique", inputs, ("y", "idx", "counts"), opsets=(13,))


@pytest.mark.parametrize(
    "dtype,attrs",
    [
        (np.uint8, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        (np.uint8, {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER"}),
        (np.int8, {"kernel_shape": [2, 3], "dilations": [2, 1], "ceil_mode": 1, "strides": [2, 2]}),
    ],
)
def test_nhwc_max_pool(dtype, attrs):
    rng = _rng()
    x = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max + 1, (2, 7, 8, 3)).astype(dtype)
    assert_decomposes("NhwcMaxPool", {"x": x}, opsets=(13,), **attrs)


@pytest.mark.parametrize("pads", [[1, 0, 1, 2], [0, 0, 0, 0]])
def test_conv_transpose_with_dynamic_pads(pads):
    rng = _rng()
    inputs = {
        "x": rng.standard_normal((1, 4, 5, 5)).astype(np.float32),
        "w": rng.standard_normal((4, 2, 3, 3)).astype(np.float32),
        "pads": np.array(pads, np.int64),
        "b": rng.standard_normal(2).astype(np.float32),
    }
    assert_decomposes(
        "ConvTransposeWithDynamicPads", inputs, opsets=(13,), constants=("pads",), strides=[2, 2], kernel_shape=[3, 3]
    )


def test_sample_op():
    assert_decomposes("SampleOp", {"x": _rng().standard_normal((2, 3)).astype(np.float32)}, opsets=(13,))


@pytest.mark.parametrize(
    "dtype,scale_dtype",
    [(np.float32, None), (np.float32, np.float32), (np.float16, np.float16), (np.float16, np.float32)],
)
def test_scaled_silu(dtype, scale_dtype):
    rng = _rng()
    inputs = {
        "x": rng.uniform(-6, 6, (3, 8)).astype(dtype),
        "scale": None if scale_dtype is None else np.array(0.7, scale_dtype),
    }
    assert_decomposes("ScaledSiLU", inputs, opsets=(13,), alpha=1.3)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_gated_add(dtype):
    rng = _rng()
    inputs = {
        name: rng.standard_normal(shape).astype(dtype)
        for name, shape in (("x", (2, 3, 8)), ("y", (2, 3, 8)), ("gate", (2, 3, 1)))
    }
    assert_decomposes("GatedAdd", inputs, opsets=(13,))


@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean"])
def test_cdist(metric):
    rng = _rng()
    inputs = {"a": rng.standard_normal((4, 6)).astype(np.float32), "b": rng.standard_normal((5, 6)).astype(np.float32)}
    assert_decomposes("CDist", inputs, opsets=(13,), metric=metric)


# ---------------------------------------------------------------- packed constant weights, dequantized once


@pytest.mark.parametrize("quant_type,dtype", [(0, np.float32), (1, np.float32), (1, np.float16)])
def test_matmul_bnb4(quant_type, dtype):
    rng, k, n, block = _rng(), 40, 6, 16
    inputs = {
        "a": rng.standard_normal((3, k)).astype(dtype),
        "b": rng.integers(0, 256, (n * k + 1) // 2).astype(np.uint8),
        "absmax": (rng.random(-(-n * k // block)) + 0.5).astype(dtype),
    }
    assert_decomposes(
        "MatMulBnb4",
        inputs,
        opsets=(13,),
        constants=("b", "absmax"),
        rtol=1e-4,
        atol=1e-4,
        K=k,
        N=n,
        block_size=block,
        quant_type=quant_type,
    )


@pytest.mark.parametrize("blk_quant_type,k", [(0, 64), (1, 70)])
def test_matmul_fpq4(blk_quant_type, k):
    rng, n = _rng(), 4
    blob = bytearray()
    for _ in range(n * -(-k // 32)):  # MLAS's blocks: float32 scale, [zero point byte], 16 bytes of nibbles
        blob += np.float32(rng.random() * 0.1 + 0.01).tobytes()
        if blk_quant_type == 1:
            blob.append(int(rng.integers(0, 16)))
        blob += rng.integers(0, 256, 16).astype(np.uint8).tobytes()
    inputs = {
        "a": rng.standard_normal((3, k)).astype(np.float32),
        "b": np.frombuffer(bytes(blob), np.uint8).copy(),
        "shape": np.array([k, n], np.int64),
    }
    assert_decomposes(
        "MatMulFpQ4",
        inputs,
        opsets=(13,),
        constants=("b", "shape"),
        rtol=1e-4,
        atol=1e-4,
        blk_quant_type=blk_quant_type,
    )


@pytest.mark.parametrize(
    "bits,zero_points,scale_dtype,gather_axis",
    [(4, False, np.float32, 0), (4, True, np.float16, 0), (8, True, np.float32, 0)],
)
def test_gather_block_quantized(bits, zero_points, scale_dtype, gather_axis):
    rng, vocab, dim, block = _rng(), 10, 64, 16
    per_byte, blocks = 8 // bits, dim // block
    inputs = {
        "data": rng.integers(0, 256, (vocab, dim // per_byte)).astype(np.uint8),
        "ids": np.array([[0, 3, 9], [-1, 3, 5]], np.int64),
        "scales": (rng.random((vocab, blocks)) * 0.1 + 0.01).astype(scale_dtype),
        "zp": rng.integers(0, 256, (vocab, -(-blocks // per_byte))).astype(np.uint8) if zero_points else None,
    }
    assert_decomposes(
        "GatherBlockQuantized",
        inputs,
        opsets=(13,),
        constants=("data", "scales", "zp"),
        bits=bits,
        block_size=block,
        gather_axis=gather_axis,
        quantize_axis=1,
    )


@pytest.mark.parametrize("gather_axis,quantize_axis", [(0, 1), (1, 0)])
def test_gather_block_quantized_int4(gather_axis, quantize_axis):
    import ml_dtypes

    rng, block = _rng(), 16
    scale_shape = [32, 48]
    scale_shape[quantize_axis] //= block
    inputs = {
        "data": rng.integers(-8, 8, (32, 48)).astype(ml_dtypes.int4),
        "ids": np.array([2, -3, 0, 7], np.int32),
        "scales": (rng.random(scale_shape) * 0.1 + 0.01).astype(np.float32),
        "zp": rng.integers(-8, 8, scale_shape).astype(ml_dtypes.int4),
    }
    assert_decomposes(
        "GatherBlockQuantized",
        inputs,
        opsets=(21,),
        constants=("data", "scales", "zp"),
        bits=4,
        block_size=block,
        gather_axis=gather_axis,
        quantize_axis=quantize_axis,
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("activation", ["silu", "sigmoid"])
def test_gated_rms_norm(dtype, activation):
    rng = _rng()
    inputs = {
        name: rng.uniform(-1, 1, shape).astype(dtype)
        for name, shape in (("x", (2, 3, 16)), ("scale", (8,)), ("gate", (2, 3, 16)))
    }
    assert_decomposes("GatedRMSNorm", inputs, opsets=(13,), activation=activation, epsilon=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize(
    "layout,scale_shape", [("grouped", None), ("grouped", (3, 4)), ("flattened", (4,)), ("flattened", (12,))]
)
def test_branchwise_rms_norm(dtype, layout, scale_shape):
    rng = _rng()
    x = rng.uniform(-1, 1, (2, 5, 3, 4) if layout == "grouped" else (2, 5, 12)).astype(dtype)
    inputs = {"x": x, "scale": None if scale_shape is None else rng.uniform(-1, 1, scale_shape).astype(dtype)}
    attrs = {"num_branches": 3} if layout == "flattened" else {}
    assert_decomposes("BranchwiseRMSNorm", inputs, opsets=(13, 18), epsilon=1e-5, **attrs)


@pytest.mark.parametrize("dim,size,step", [(-1, 3, 1), (1, 2, 2), (0, 2, 1)])
def test_unfold_tensor(dim, size, step):
    assert_decomposes(
        "UnfoldTensor",
        {"x": _rng().standard_normal((3, 5, 6)).astype(np.float32)},
        opsets=(13,),
        dim=dim,
        size=size,
        step=step,
    )


@pytest.mark.parametrize("layout", ["grouped", "flattened"])
@pytest.mark.parametrize("gates", ["C", "C1", "CH"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_hyper_connections(layout, gates, dtype):
    rng, c, h = _rng(), 3, 4

    def floats(*shape):
        return rng.uniform(-1, 1, shape).astype(dtype)

    streams = floats(2, 5, c, h) if layout == "grouped" else floats(2, 5, c * h)
    attrs = {"num_branches": c} if layout == "flattened" else {}
    gate_shape = {"C": (2, 5, c), "C1": (2, 5, c, 1), "CH": (2, 5, c, h)}[gates]
    assert_decomposes(
        "HyperConnectionPreMix",
        {"streams": streams, "pre_mix": floats(*gate_shape)},
        opsets=(13,),
        reduction_scale=0.5,
        **attrs,
    )
    for stream_mix in (floats(2, 5, c, c), None):
        inputs = {
            "streams": streams,
            "block_output": floats(2, 5, h),
            "post_mix": floats(*gate_shape),
            "stream_mix": stream_mix,
        }
        assert_decomposes("HyperConnectionPostMix", inputs, opsets=(13,), **attrs)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("layout,sections", [(0, [1, 2, 1]), (1, [2, 1, 1]), (0, [4, 0, 0])])
@pytest.mark.parametrize("interleaved,shape", [(0, "3d"), (1, "4d")])
def test_m_rotary_embedding(dtype, layout, sections, interleaved, shape):
    rng, heads, head, max_pos = _rng(), 2, 8, 16
    angles = rng.uniform(0, 6, (max_pos, head // 2))
    x = rng.uniform(-1, 1, (B, heads, S, head) if shape == "4d" else (B, S, heads * head)).astype(dtype)
    inputs = {
        "x": x,
        "pos": rng.integers(0, max_pos, (3, B, S)).astype(np.int64),
        "cos": np.cos(angles).astype(dtype),
        "sin": np.sin(angles).astype(dtype),
    }
    assert_decomposes(
        "MRotaryEmbedding",
        inputs,
        opsets=(13,),
        interleaved=interleaved,
        mrope_layout=layout,
        mrope_section=sections,
        num_heads=heads,
    )


def _moe_inputs(rng, rows: int, inner: int, fc3: bool = False):
    experts, hidden = 4, 6

    def floats(*shape, low=-1.0, high=1.0):
        return rng.uniform(low, high, shape).astype(np.float32)

    return {
        "input": floats(rows, hidden),
        "router_probs": floats(rows, experts, low=-2, high=2),
        "fc1_experts_weights": floats(experts, inner, hidden),
        "fc1_experts_bias": floats(experts, inner),
        "fc2_experts_weights": floats(experts, hidden, inner if not fc3 else inner),
        "fc2_experts_bias": floats(experts, hidden),
        "fc3_experts_weights": floats(experts, inner, hidden) if fc3 else None,
        "fc3_experts_bias": floats(experts, inner) if fc3 else None,
    }


@pytest.mark.parametrize("k,normalize", [(1, 0), (2, 1)])
@pytest.mark.parametrize("activation", ["relu", "gelu", "silu", "identity"])
def test_moe(k, normalize, activation):
    """Every expert runs on every token; each token keeps its k routed experts' outputs, weighted."""
    assert_decomposes(
        "MoE",
        _moe_inputs(_rng(), 5, 10),
        opsets=(13, 20),
        rtol=1e-5,
        atol=1e-5,
        k=k,
        normalize_routing_weights=normalize,
        activation_type=activation,
    )


@pytest.mark.parametrize("limit", [None, 0.5])
def test_moe_swiglu(limit):
    inputs = _moe_inputs(_rng(), 5, 20)  # gate and linear rows interleaved (the layout onnxruntime's CPU takes)
    inputs["fc2_experts_weights"] = inputs["fc2_experts_weights"][:, :, :10].copy()
    inputs["fc2_experts_bias"] = None
    assert_decomposes(
        "MoE",
        inputs,
        opsets=(13,),
        rtol=1e-5,
        atol=1e-5,
        k=2,
        normalize_routing_weights=1,
        activation_type="swiglu",
        activation_alpha=1.702,
        activation_beta=1.0,
        swiglu_fusion=1,
        swiglu_limit=limit,
    )


@pytest.mark.parametrize("fusion", [0, 2])
def test_moe_swiglu_other_layouts(fusion):
    """onnxruntime's CPU kernel takes gate and linear rows interleaved only: the decomposition of the same weights
    laid out as halves (2) or as FC1 and FC3 (0) must give its interleaved run's outputs."""
    inputs = _moe_inputs(_rng(), 5, 20)
    inputs["fc2_experts_weights"] = inputs["fc2_experts_weights"][:, :, :10].copy()
    attrs = dict(
        k=2,
        normalize_routing_weights=1,
        activation_type="swiglu",
        activation_alpha=1.702,
        activation_beta=1.0,
        swiglu_limit=0.5,
    )
    feeds = {k: v for k, v in inputs.items() if v is not None}
    expected = run_ort(single_node_model("MoE", inputs, ("Y",), opset=13, swiglu_fusion=1, **attrs), feeds)[0]
    weights, bias = inputs["fc1_experts_weights"], inputs["fc1_experts_bias"]
    relaid = dict(inputs)
    if fusion == 2:
        relaid.update(
            fc1_experts_weights=np.concatenate([weights[:, 0::2], weights[:, 1::2]], axis=1),
            fc1_experts_bias=np.concatenate([bias[:, 0::2], bias[:, 1::2]], axis=1),
        )
    else:
        relaid.update(
            fc1_experts_weights=weights[:, 0::2].copy(),
            fc1_experts_bias=bias[:, 0::2].copy(),
            fc3_experts_weights=weights[:, 1::2].copy(),
            fc3_experts_bias=bias[:, 1::2].copy(),
        )
    decomposed = decompose(single_node_model("MoE", relaid, ("Y",), opset=13, swiglu_fusion=fusion, **attrs))
    feeds = {k: v for k, v in relaid.items() if v is not None}
    for runner, got in (
        ("onnxruntime", run_ort(onnx_io.to_proto(decomposed), feeds)[0]),
        ("opconv", opconv.run(decomposed, feeds)["Y"]),
    ):
        report = compare_arrays("Y", expected, got, 1e-5, 1e-5)
        assert report.ok, f"{runner}: {report.message}"


@pytest.mark.parametrize(
    "bits,block_size,zero_points,activation",
    [(4, 0, False, "relu"), (8, 0, True, "gelu"), (4, 16, True, "silu"), (4, 16, False, "swiglu")],
)
def test_qmoe(bits, block_size, zero_points, activation):
    rng, experts, hidden, inner, tokens = _rng(), 3, 32, 16, 5
    pack = 8 // bits
    fc1_out = 2 * inner if activation == "swiglu" else inner

    def layer(out, inputs):
        groups = (out, inputs // block_size) if block_size else (out,)
        return (
            rng.integers(0, 256, (experts, out, inputs // pack)).astype(np.uint8),
            (rng.random((experts,) + groups) * 0.05 + 0.01).astype(np.float32),
            rng.integers(0, 256, (experts,) + groups[:-1] + (-(-groups[-1] // pack),)).astype(np.uint8)
            if zero_points
            else None,
        )

    (w1, s1, z1), (w2, s2, z2) = layer(fc1_out, hidden), layer(hidden, inner)
    inputs = {
        "x": rng.standard_normal((tokens, hidden)).astype(np.float32),
        "router": rng.standard_normal((tokens, experts)).astype(np.float32),
        "w1": w1,
        "s1": s1,
        "b1": rng.standard_normal((experts, fc1_out)).astype(np.float32),
        "w2": w2,
        "s2": s2,
        "b2": None,
        "w3": None,
        "s3": None,
        "b3": None,
        "z1": z1,
        "z2": z2,
    }
    attrs = dict(k=2, activation_type=activation, expert_weight_bits=bits, normalize_routing_weights=1)
    if block_size:
        attrs["block_size"] = block_size
    if activation == "swiglu":
        attrs.update(swiglu_fusion=1, activation_alpha=1.702, activation_beta=1.0, swiglu_limit=7.0)
    assert_decomposes(
        "QMoE", inputs, opsets=(13,), constants=("w1", "s1", "w2", "s2", "z1", "z2"), rtol=1e-4, atol=1e-4, **attrs
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("normed", [False, True])
def test_engram_gate(dtype, normed):
    rng, hc, hidden = _rng(), 3, 8

    def floats(*shape):
        return rng.uniform(-1, 1, shape).astype(dtype)

    inputs = {
        "key": floats(2, 4, hc, hidden),
        "query": floats(2, 4, hc, hidden),
        "value": floats(2, 4, hidden),
        "key_norm_scale": floats(hc, hidden),
        "query_norm_scale": floats(hc, hidden),
        "conv_norm_scale": floats(hc, hidden) if normed else None,
    }
    assert_decomposes("EngramGate", inputs, ("output", "gated_value_normed") if normed else ("output",), opsets=(13,))


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("crop", [(3, 4), (1, 1)])
def test_crop_and_resize(mode, crop):
    rng = _rng()
    rois = np.array([[0.1, 0.2, 0.8, 0.9], [0.0, 0.0, 1.0, 1.0], [-0.2, 0.3, 0.6, 1.3]], np.float32)
    inputs = {
        "x": rng.uniform(-1, 1, (2, 3, 6, 7)).astype(np.float32),
        "rois": rois,
        "batch_indices": np.array([0, 1, 1], np.int32),
        "crop_size": np.array(crop, np.int32),
    }
    assert_decomposes(
        "CropAndResize", inputs, opsets=(13,), constants=("crop_size",), mode=mode, extrapolation_value=-1.0
    )


@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
@pytest.mark.parametrize("positive,seed", [(1, 0), (0, 42)])
def test_murmur_hash3(dtype, positive, seed):
    """uint32 products, sums and shifts wrap as the hash's do; onnxruntime hashes the same 4-byte keys."""
    info = np.iinfo(dtype)
    keys = np.concatenate([_rng().integers(info.min, int(info.max) + 1, 12), [0, info.min, info.max]]).astype(dtype)
    output_types = {"Y": onnx.TensorProto.UINT32 if positive else onnx.TensorProto.INT32}
    assert_decomposes("MurmurHash3", {"x": keys}, opsets=(18,), output_types=output_types, positive=positive, seed=seed)


@pytest.mark.parametrize("window", [2, 3])
def test_word_conv_embedding(window):
    rng = _rng()
    # (no word starts with id 0: onnxruntime skips such a word and leaves its output as the buffer held it)
    words = np.array(
        [
            [3, 5, 2, 7, 0, 0],
            [1, 4, 0, 0, 0, 0],
            [6, 6, 6, 6, 6, 6],
            [2, 0, 0, 0, 0, 0],
            [3, 0, 4, 5, 0, 0],
            [5, 3, 0, 0, 4, 0],
        ],
        np.int32,
    )
    inputs = {
        "Sequence": words,
        "W": rng.uniform(-1, 1, (5, 1, window, 3)).astype(np.float32),
        "B": rng.uniform(-1, 1, 5).astype(np.float32),
        "C": rng.uniform(-1, 1, (8, 3)).astype(np.float32),
    }
    assert_decomposes(
        "WordConvEmbedding", inputs, opsets=(13,), conv_window_size=window, embedding_size=5, char_embedding_size=3
    )


@pytest.mark.parametrize("ngram_size", [1, 2, 3, 7])
def test_ngram_repeat_block(ngram_size):
    ids = np.array([[1, 2, 3, 1, 2], [4, 4, 4, 5, 4]], np.int64)
    assert_decomposes(
        "NGramRepeatBlock",
        {"ids": ids, "scores": _rng().standard_normal((2, 8)).astype(np.float32)},
        opsets=(18,),
        ngram_size=ngram_size,
    )


@pytest.mark.parametrize("groups", [(1, 1, 2), (4, 2, 2), (4, 3, 3), "scores"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_moe_group_router(groups, dtype):
    """(onnxruntime gives either the routing probabilities or the two full score outputs, not both)"""
    rng = _rng()
    inputs = {
        "logits": rng.uniform(-3, 3, (5, 16)).astype(dtype),
        "expert_bias": rng.uniform(-0.2, 0.2, 16).astype(np.float32),
    }
    if groups == "scores":
        assert_decomposes("MoEGroupRouter", inputs, ("", "selection_scores", "router_weights"), opsets=(13,), top_k=4)
        return
    n_group, topk_group, group_topk = groups
    assert_decomposes(
        "MoEGroupRouter",
        inputs,
        ("router_probs",),
        opsets=(13,),
        n_group=n_group,
        topk_group=topk_group,
        group_topk=group_topk,
        top_k=4,
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("with_b", [False, True])
def test_linear_attention_gate(dtype, with_b):
    rng = _rng()
    inputs = {
        "a": rng.uniform(-3, 3, (2, 3, 4)).astype(dtype),
        "dt_bias": rng.uniform(-1, 1, 4).astype(np.float32),
        "decay_scale": rng.uniform(-2, 0, 4).astype(np.float32),
        "b": rng.uniform(-1, 1, (2, 3, 4)).astype(dtype) if with_b else None,
    }
    assert_decomposes("LinearAttentionGate", inputs, ("decay", "beta") if with_b else ("decay",), opsets=(13,))


@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("activation", ["none", "silu"])
def test_causal_conv_with_state(channels_last, activation):
    rng, batch, channels, length, kernel = _rng(), 2, 3, 5, 4

    def floats(*shape):
        return rng.uniform(-1, 1, shape).astype(np.float32)

    x, state = floats(batch, channels, length), floats(batch, channels, kernel - 1)
    if channels_last:
        x, state = x.transpose(0, 2, 1).copy(), state.transpose(0, 2, 1).copy()
    inputs = {"input": x, "weight": floats(channels, 1, kernel), "bias": floats(channels), "past_state": state}
    assert_decomposes(
        "CausalConvWithState",
        inputs,
        ("Y", "present_state"),
        opsets=(13,),
        activation=activation,
        channels_last=channels_last,
    )


@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_decoder_masked_multi_head_attention_self(with_mask, with_bias):
    """One decoding step over a shared past buffer: the new key/value written at past_sequence_length."""
    assert_decomposes(
        "DecoderMaskedMultiHeadAttention",
        dmmha_self_inputs(with_mask, with_bias),
        DMMHA_OUTPUTS,
        opsets=(13, 20),
        num_heads=2,
        past_present_share_buffer=1,
    )


def test_decoder_masked_multi_head_attention_packed():
    """onnxruntime's CPU kernel fails on packed Q/K/V: the decomposition of the packed node must give its
    unpacked run's outputs."""
    inputs = dmmha_self_inputs(True, True)
    attrs = {"num_heads": 2, "past_present_share_buffer": 1}
    feeds = {k: v for k, v in inputs.items() if v is not None}
    expected = run_ort(
        single_node_model("DecoderMaskedMultiHeadAttention", inputs, DMMHA_OUTPUTS, opset=13, **attrs), feeds
    )
    packed = dict(
        inputs, query=np.concatenate([inputs[n] for n in ("query", "key", "value")], axis=2), key=None, value=None
    )
    decomposed = decompose(
        single_node_model("DecoderMaskedMultiHeadAttention", packed, DMMHA_OUTPUTS, opset=13, **attrs)
    )
    feeds = {k: v for k, v in packed.items() if v is not None}
    for runner, got in (
        ("onnxruntime", run_ort(onnx_io.to_proto(decomposed), feeds)),
        ("opconv", [opconv.run(decomposed, feeds)[n] for n in DMMHA_OUTPUTS]),
    ):
        for name, want, value in zip(DMMHA_OUTPUTS, expected, got):
            report = compare_arrays(name, want, value, None, None)
            assert report.ok, f"{runner} {name}: {report.message}"


@pytest.mark.parametrize("with_mask", [False, True])
def test_decoder_masked_multi_head_attention_cross(with_mask):
    rng, batch, heads, head, kv_len = _rng(), 2, 2, 4, 6
    mask = np.ones((batch, kv_len), np.int32)
    mask[0, -2:] = 0
    inputs = {
        "query": rng.uniform(-1, 1, (batch, 1, heads * head)).astype(np.float32),
        "key": rng.uniform(-1, 1, (batch, heads, kv_len, head)).astype(np.float32),
        "value": rng.uniform(-1, 1, (batch, heads, kv_len, head)).astype(np.float32),
        "mask_index": mask if with_mask else None,
    }
    assert_decomposes("DecoderMaskedMultiHeadAttention", inputs, ("Y",), opsets=(13,), num_heads=heads)


# ---------------------------------------------------------------------------
# ai.onnx composites (--composites; the converters run the same pass) and the downgrades that share them
# ---------------------------------------------------------------------------


def _one_node(op, inputs: dict, outputs: dict, opset: int, initializers=(), **attrs):
    """A one-node ai.onnx model and its feeds; ``inputs``: name -> array, ``outputs``: name -> float shape."""
    node = helper.make_node(op, list(inputs), list(outputs), **attrs)
    graph = helper.make_graph(
        [node],
        op.lower(),
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for n, v in inputs.items()
            if n not in initializers
        ],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs.items()],
        [onnx.numpy_helper.from_array(inputs[n], n) for n in initializers],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model, {n: v for n, v in inputs.items() if n not in initializers}


COMPOSITE_CASES = {
    "LSTM": lambda: _one_node(
        "LSTM",
        {
            "X": rand(5, 2, 3),
            "W": rand(2, 16, 3),
            "R": rand(2, 16, 4),
            "B": rand(2, 32),
            "sequence_lens": np.array([5, 3], np.int32),
        },
        {"Y": [5, 2, 2, 4], "Y_h": [2, 2, 4], "Y_c": [2, 2, 4]},
        14,
        ("W", "R", "B"),
        hidden_size=4,
        direction="bidirectional",
        clip=2.0,
    ),
    "GRU": lambda: _one_node(
        "GRU",
        {"X": rand(4, 2, 3), "W": rand(1, 15, 3), "R": rand(1, 15, 5)},
        {"Y": [4, 1, 2, 5]},
        14,
        hidden_size=5,
        direction="reverse",
        linear_before_reset=1,
    ),
    "Attention": lambda: _one_node(
        "Attention",
        {"Q": rand(2, 4, 3, 8), "K": rand(2, 2, 5, 8), "V": rand(2, 2, 5, 8), "attn_mask": rand(3, 5)},
        {"Y": [2, 4, 3, 8]},
        23,
        is_causal=1,
        softcap=2.0,
    ),
    "RotaryEmbedding": lambda: _one_node(
        "RotaryEmbedding",
        {"X": rand(2, 3, 8), "cos": rand(16, 2), "sin": rand(16, 2), "ids": np.array([[0, 3, 5], [7, 1, 2]], np.int64)},
        {"Y": [2, 3, 8]},
        23,
        num_heads=2,
        rotary_embedding_dim=4,
        interleaved=1,
    ),
    "RMSNormalization": lambda: _one_node(
        "RMSNormalization", {"X": rand(2, 3, 4), "scale": rand(3, 4)}, {"Y": [2, 3, 4]}, 23, axis=1, epsilon=1e-3
    ),
    "MeanVarianceNormalization": lambda: _one_node(
        "MeanVarianceNormalization", {"X": rand(2, 3, 4, 5)}, {"Y": [2, 3, 4, 5]}, 13, axes=[0, -1]
    ),
    # a zero row (its norm is 0: it stays zero), at opset 10, where Equal takes no floats yet
    "LpNormalization": lambda: _one_node(
        "LpNormalization", {"X": rand(3, 4) * np.array([[1], [0], [1]], np.float32)}, {"Y": [3, 4]}, 10, axis=1
    ),
    "SoftmaxCrossEntropyLoss": lambda: _one_node(
        "SoftmaxCrossEntropyLoss",
        {"scores": rand(3, 5, 2), "labels": np.array([[0, 4], [2, -1], [1, 1]], np.int64)},
        {"loss": [], "log_prob": [3, 5, 2]},
        13,
        ignore_index=-1,
    ),
}


def _same_outputs(model, feeds, other) -> None:
    names = [o.name for o in model.graph.output]
    for name, want, got in zip(names, run_ort(model, feeds), run_ort(other, feeds)):
        cmp = compare_arrays(name, want, got)
        assert cmp.ok, cmp.message


@pytest.mark.parametrize("op", sorted(COMPOSITE_CASES))
def test_composites_decompose_on_request_as_onnxruntime_computes(op):
    """``decompose(composites=True)`` leaves standard ops only and gives onnxruntime's outputs of the original
    (both run in onnxruntime); without it the composite stays."""
    model, feeds = COMPOSITE_CASES[op]()
    assert op in {n.op_type for n in opconv.decompose(model).graph.node}
    decomposed = opconv.decompose(model, composites=True)
    assert op not in {n.op_type for n in decomposed.graph.node}
    _same_outputs(model, feeds, decomposed)


@pytest.mark.parametrize("across_channels, normalize_variance", [(0, 1), (1, 0)])
def test_onnxruntime_mean_variance_normalization_1_decomposes_as_it_runs(across_channels, normalize_variance):
    """onnxruntime's MeanVarianceNormalization-1 (ai.onnx domain, opset 8) and its attributes."""
    model, feeds = _one_node(
        "MeanVarianceNormalization",
        {"X": rand(2, 3, 4, 5)},
        {"Y": [2, 3, 4, 5]},
        8,
        across_channels=across_channels,
        normalize_variance=normalize_variance,
    )
    decomposed = opconv.decompose(model, composites=True)
    assert "MeanVarianceNormalization" not in {n.op_type for n in decomposed.graph.node}
    _same_outputs(model, feeds, decomposed)


@pytest.mark.parametrize("op", ["Attention", "RMSNormalization", "RotaryEmbedding"])
def test_downgrade_below_the_first_version_is_the_decomposition(op):
    """Attention-23, RMSNormalization-23 and RotaryEmbedding-23 taken to opset 22 are the composites'
    decompositions, which
    onnxruntime runs to the original's outputs."""
    model, feeds = COMPOSITE_CASES[op]()
    down = opconv.convert_version(model, 22)
    assert op not in {n.op_type for n in down.graph.node} and down.opset_import[0].version == 22
    _same_outputs(model, feeds, down)


def test_cli_decompose_composites(tmp_path):
    model, feeds = COMPOSITE_CASES["LSTM"]()
    path, out = tmp_path / "lstm.onnx", tmp_path / "standard.onnx"
    onnx.save(model, path)
    result = CliRunner().invoke(cli, ["decompose", str(path), "--composites", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "(1 node(s) decomposed" in result.output
    written = onnx.load(out)
    assert "LSTM" not in {n.op_type for n in written.graph.node}
    _same_outputs(model, feeds, written)
