"""ONNX Runtime's float contrib operators (com.microsoft and its ai.onnx-domain additions): opconv's kernels
against onnxruntime's CPU execution provider, one single-node model per case, compared with the tolerances of
opconv/compare.py.  The quantized family is tested in tests/test_contrib_kernels_quant.py."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

import opconv
from opconv.compare import compare_arrays

pytest.importorskip("onnxruntime")
from tests.runtimes import run_ort  # noqa: E402

MS = "com.microsoft"
RNG = np.random.default_rng(14)


def rand(*shape, dtype=np.float32, low=-1.0, high=1.0):
    return RNG.uniform(low, high, shape).astype(dtype)


def single_node_model(op: str, inputs: dict, outputs, *, domain: str = MS, opset: int = 17, **attrs):
    """A model of one ``domain::op`` node; ``inputs`` maps names to arrays (None: the optional input is absent)."""
    names = [name if value is not None else "" for name, value in inputs.items()]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node(op, names, list(outputs), domain=domain,
                            **{k: v for k, v in attrs.items() if v is not None})
    graph_inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
                    for name, value in inputs.items() if value is not None]
    graph_outputs = [helper.make_empty_tensor_value_info(o) for o in outputs if o]
    graph = helper.make_graph([node], op, graph_inputs, graph_outputs)
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=imports)


def assert_matches_ort(op: str, inputs: dict, outputs=("Y",), *, domain: str = MS, opset: int = 17,
                       rtol=None, atol=None, **attrs):
    """Run the node in onnxruntime and in opconv; every output must agree."""
    model = single_node_model(op, inputs, outputs, domain=domain, opset=opset, **attrs)
    feeds = {k: v for k, v in inputs.items() if v is not None}
    expected = run_ort(model, feeds)
    with np.errstate(all="ignore"):
        actual = opconv.run(opconv.load(model), feeds)
    names = [o for o in outputs if o]
    problems = []
    for name, want in zip(names, expected):
        report = compare_arrays(name, want, actual[name], rtol, atol)
        if not report.ok:
            problems.append(f"{name}: {report.message}")
    assert not problems, f"{op} {attrs}: " + "; ".join(problems)
    return expected


# ---------------------------------------------------------------- normalization


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("skip_shape,with_beta,with_bias", [
    ((2, 5, 8), True, True), ((2, 5, 8), False, False), ((1, 5, 8), True, False), ((5, 8), False, True)])
def test_skip_layer_normalization(dtype, skip_shape, with_beta, with_bias):
    inputs = {"input": rand(2, 5, 8, dtype=dtype), "skip": rand(*skip_shape, dtype=dtype),
              "gamma": rand(8, dtype=dtype), "beta": rand(8, dtype=dtype) if with_beta else None,
              "bias": rand(8, dtype=dtype) if with_bias else None}
    outputs = ("Y", "mean", "inv_std_var", "sum") if dtype == np.float32 else ("Y", "", "", "sum")
    assert_matches_ort("SkipLayerNormalization", inputs, outputs, epsilon=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("with_bias", [True, False])
def test_skip_simplified_layer_normalization(dtype, with_bias):
    inputs = {"input": rand(2, 3, 16, dtype=dtype), "skip": rand(2, 3, 16, dtype=dtype),
              "gamma": rand(16, dtype=dtype), "bias": rand(16, dtype=dtype) if with_bias else None}
    outputs = ("Y", "", "inv_std_var", "sum") if dtype == np.float32 else ("Y", "", "", "sum")
    assert_matches_ort("SkipSimplifiedLayerNormalization", inputs, outputs, epsilon=1e-6)


@pytest.mark.parametrize("with_segment,with_mask,with_position_ids", [
    (True, True, False), (False, False, False), (True, False, True), (False, True, True)])
def test_embed_layer_normalization(with_segment, with_mask, with_position_ids):
    batch, seq, hidden = 2, 6, 8
    mask = np.ones((batch, seq), np.int32)
    mask[1, 4:] = 0
    inputs = {
        "input_ids": RNG.integers(0, 20, (batch, seq)).astype(np.int32),
        "segment_ids": RNG.integers(0, 2, (batch, seq)).astype(np.int32) if with_segment else None,
        "word_embedding": rand(20, hidden), "position_embedding": rand(16, hidden),
        "segment_embedding": rand(2, hidden) if with_segment else None,
        "gamma": rand(hidden), "beta": rand(hidden), "mask": mask if with_mask else None,
        "position_ids": RNG.integers(0, 16, (batch, seq)).astype(np.int32) if with_position_ids else None,
    }
    assert_matches_ort("EmbedLayerNormalization", inputs, ("Y", "mask_index", "embedding_sum"), epsilon=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_normalization_1_of_the_ai_onnx_domain(dtype, axis):
    x = rand(2, 3, 4, dtype=dtype)
    scale_shape = x.shape[axis % 3:]
    inputs = {"X": x, "Scale": rand(*scale_shape, dtype=dtype), "B": rand(*scale_shape, dtype=dtype)}
    assert_matches_ort("LayerNormalization", inputs, ("Y", "Mean", "InvStdDev"), domain="", opset=16, axis=axis)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_simplified_layer_normalization_1(dtype):
    inputs = {"X": rand(3, 4, 10, dtype=dtype), "scale": rand(10, dtype=dtype)}
    assert_matches_ort("SimplifiedLayerNormalization", inputs, ("Y", "inv_std_var"), domain="", opset=16,
                       epsilon=1e-6)


def test_check_accepts_onnx_runtime_ai_onnx_domain_schemas(tmp_path):
    model = single_node_model("SimplifiedLayerNormalization", {"X": rand(2, 4), "scale": rand(4)}, ["Y"],
                              domain="", opset=16)
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    assert opconv.check(str(path)) == []


# ---------------------------------------------------------------- activations


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_gelu_family(dtype):
    x, bias = rand(3, 4, 16, dtype=dtype, low=-4, high=4), rand(16, dtype=dtype)
    assert_matches_ort("Gelu", {"X": x})
    assert_matches_ort("BiasGelu", {"A": x, "B": bias})
    assert_matches_ort("FastGelu", {"X": x, "bias": bias})
    assert_matches_ort("FastGelu", {"X": x})


@pytest.mark.parametrize("alpha", [None, 1.0, -0.5])
def test_quick_gelu(alpha):
    assert_matches_ort("QuickGelu", {"X": rand(2, 3, 8, low=-6, high=6)}, alpha=alpha)


# ---------------------------------------------------------------- fused products


@pytest.mark.parametrize("a_shape,b_shape,attrs", [
    ((3, 4), (4, 5), {}),
    ((2, 3, 4), (2, 5, 4), {"transB": 1, "alpha": 0.5}),
    ((2, 4, 3), (4, 5), {"transA": 1}),
    ((2, 2, 4, 3), (2, 2, 5, 4), {"transA": 1, "transB": 1, "alpha": 2.0}),
    ((3, 2, 4), (2, 4, 5), {"transBatchA": 1}),
    ((3, 2, 2, 4), (2, 2, 5, 4), {"transBatchA": 1, "transB": 1}),
    ((2, 3, 4), (4, 2, 5), {"transBatchB": 1}),
    ((4, 2, 3), (5, 2, 4), {"transBatchA": 1, "transA": 1, "transBatchB": 1, "transB": 1}),
])
def test_fused_matmul(a_shape, b_shape, attrs):
    assert_matches_ort("FusedMatMul", {"A": rand(*a_shape), "B": rand(*b_shape)}, **attrs)


def test_transpose_matmul():
    assert_matches_ort("TransposeMatMul", {"A": rand(2, 4, 3), "B": rand(2, 5, 4)}, transA=1, transB=1, alpha=0.7)


@pytest.mark.parametrize("activation,params", [
    ("Relu", {}), ("LeakyRelu", {"activation_alpha": 0.2}), ("Elu", {"activation_alpha": 0.7}), ("Sigmoid", {}), ("Tanh", {}),
    ("HardSigmoid", {"activation_alpha": 0.3, "activation_beta": 0.4})])
def test_fused_gemm(activation, params):
    inputs = {"A": rand(4, 3), "B": rand(5, 3), "C": rand(5)}
    assert_matches_ort("FusedGemm", inputs, activation=activation, transB=1, alpha=1.5, beta=0.5, **params)


@pytest.mark.parametrize("activation,params,with_z", [
    ("Relu", None, False), ("Relu", None, True), ("LeakyRelu", [0.1], False), ("Clip", [-0.3, 0.4], True),
    ("Sigmoid", None, False), ("Tanh", None, False), ("HardSigmoid", [0.25, 0.5], False)])
def test_fused_conv(activation, params, with_z):
    inputs = {"X": rand(1, 4, 7, 7), "W": rand(6, 2, 3, 3), "B": rand(6),
              "Z": rand(1, 6, 4, 4) if with_z else None}
    assert_matches_ort("FusedConv", inputs, activation=activation, activation_params=params, group=2,
                       strides=[2, 2], pads=[1, 1, 1, 1])
