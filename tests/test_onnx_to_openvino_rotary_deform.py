"""ONNX RotaryEmbedding and DeformConv -> opset1: the converted IR computes what onnxruntime computes, in OpenVINO's
CPU plugin and in opconv's IR executor, on random data over several shapes and attribute combinations.

DeformConv's offsets are large enough that many taps land outside the input or between its last row and the
border, where ONNX and DeformableConvolution-1 sample differently: a test checks that a bare
DeformableConvolution-1 (built with OpenVINO's own API) does differ from onnxruntime on these inputs, so the
border handling of the conversion is what the other tests exercise."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import openvino as ov
import pytest
from onnx import helper

import opconv
import opconv.errors
from opconv.compare import compare_arrays, tolerance

from .runtimes import convert_and_run_ir


def _model(op, inputs, opset, **attrs):
    """A one-node model with output ``y``; ``inputs``: [(name, array)], ("", None) for an omitted input."""

    def info(name, dtype, shape):
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape)

    node = helper.make_node(op, [n for n, _ in inputs], ["y"], **attrs)
    dtype = inputs[0][1].dtype
    graph = helper.make_graph(
        [node], op.lower(), [info(n, v.dtype, list(v.shape)) for n, v in inputs if n], [info("y", dtype, None)]
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    proto.ir_version = 10
    return proto, {n: v for n, v in inputs if n}


def _onnxruntime(proto, feeds):
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _check(tmp_path, proto, feeds, gone):
    expected = _onnxruntime(proto, feeds)
    converted, outputs = convert_and_run_ir(tmp_path, proto, feeds)
    assert gone not in {n.op for n in converted.graph.nodes}
    runs = {who: named["y"] for who, named in outputs.items()}
    rtol, atol = tolerance(str(expected.dtype))
    for who, actual in runs.items():
        cmp = compare_arrays("y", expected, np.asarray(actual).astype(expected.dtype), rtol=rtol, atol=atol)
        assert cmp.ok, f"{who}: {cmp.message}"


# ---------------------------------------------------------------------------
# RotaryEmbedding (opset 23)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape,num_heads,rotary_dim,interleaved,position_ids,dtype",
    [
        ((2, 3, 5, 8), 0, 0, 0, True, np.float32),
        ((1, 2, 4, 12), 0, 8, 1, True, np.float32),
        ((2, 4, 8), 2, 0, 1, False, np.float32),
        ((3, 2, 20), 4, 2, 0, True, np.float32),
        ((2, 2, 3, 6), 0, 4, 0, False, np.float32),
        ((2, 3, 4, 8), 0, 6, 1, False, np.float16),
        ((1, 5, 24), 3, 0, 0, True, np.float16),
    ],
)
def test_rotary_embedding(tmp_path, shape, num_heads, rotary_dim, interleaved, position_ids, dtype):
    rng = np.random.default_rng(len(shape) * 10 + rotary_dim + interleaved)
    batch, seq = shape[0], shape[-2] if len(shape) == 4 else shape[1]
    head_size = shape[-1] if len(shape) == 4 else shape[-1] // num_heads
    half = (rotary_dim or head_size) // 2
    angles = rng.uniform(-np.pi, np.pi, (11, half) if position_ids else (batch, seq, half))
    inputs = [
        ("x", rng.standard_normal(shape).astype(dtype)),
        ("cos", np.cos(angles).astype(dtype)),
        ("sin", np.sin(angles).astype(dtype)),
    ]
    if position_ids:
        inputs.append(("position_ids", rng.integers(0, 11, (batch, seq)).astype(np.int64)))
    attrs = {
        "interleaved": interleaved,
        **({"num_heads": num_heads} if num_heads else {}),
        **({"rotary_embedding_dim": rotary_dim} if rotary_dim else {}),
    }
    proto, feeds = _model("RotaryEmbedding", inputs, 23, **attrs)
    _check(tmp_path, proto, feeds, "RotaryEmbedding")


# ---------------------------------------------------------------------------
# DeformConv (opset 22)
# ---------------------------------------------------------------------------

# (x shape, w shape, group, offset_group, strides, pads, dilations, bias, mask)
DEFORM = [
    ((2, 4, 5, 6), (6, 2, 3, 3), 2, 2, [1, 2], [1, 0, 2, 1], [1, 1], True, False),
    ((1, 3, 4, 4), (4, 3, 2, 2), 1, 3, [1, 1], [0, 0, 0, 0], [2, 1], True, True),
    ((1, 4, 6, 5), (4, 1, 3, 2), 4, 2, [2, 2], [0, 1, 0, 1], [1, 1], False, True),
    ((2, 2, 3, 3), (3, 2, 2, 2), 1, 1, [1, 1], [2, 2, 2, 2], [1, 2], False, False),
]


def _deform_inputs(x_shape, w_shape, offset_group, strides, pads, dilations, bias, mask, seed):
    rng = np.random.default_rng(seed)
    kernel = w_shape[2:]
    out = [
        (s + pb + pe - (k - 1) * d - 1) // st + 1
        for s, k, st, d, pb, pe in zip(x_shape[2:], kernel, strides, dilations, pads[:2], pads[2:])
    ]
    taps = offset_group * kernel[0] * kernel[1]
    # Offsets of up to ~3 pixels: many taps fall outside the input or within one pixel of its border.
    inputs = [
        ("x", rng.standard_normal(x_shape).astype(np.float32)),
        ("w", rng.standard_normal(w_shape).astype(np.float32)),
        ("offset", (rng.standard_normal((x_shape[0], taps * 2, *out)) * 1.7).astype(np.float32)),
        ("bias", rng.standard_normal(w_shape[0]).astype(np.float32)) if bias else ("", None),
    ]
    if mask:
        inputs.append(("mask", rng.uniform(-1, 2, (x_shape[0], taps, *out)).astype(np.float32)))
    return inputs


def _deform_attrs(group, offset_group, strides, pads, dilations):
    return dict(group=group, offset_group=offset_group, strides=strides, pads=pads, dilations=dilations)


@pytest.mark.parametrize("case", range(len(DEFORM)))
def test_deform_conv(tmp_path, case):
    x_shape, w_shape, group, offset_group, strides, pads, dilations, bias, mask = DEFORM[case]
    inputs = _deform_inputs(x_shape, w_shape, offset_group, strides, pads, dilations, bias, mask, case)
    proto, feeds = _model("DeformConv", inputs, 22, **_deform_attrs(group, offset_group, strides, pads, dilations))
    _check(tmp_path, proto, feeds, "DeformConv")


@pytest.mark.parametrize("case", [0, 3])
def test_bare_deformable_convolution_differs_at_the_border(case):
    """DeformableConvolution-1 on the unpadded input, in OpenVINO itself, differs from onnxruntime on these inputs:
    the conversion's border handling is needed, and the tests above would catch its absence."""
    from openvino import opset1

    x_shape, w_shape, group, offset_group, strides, pads, dilations, bias, mask = DEFORM[case]
    inputs = dict(_deform_inputs(x_shape, w_shape, offset_group, strides, pads, dilations, bias, mask, case))
    proto, feeds = _model(
        "DeformConv",
        [(n, inputs[n]) for n in ("x", "w", "offset")],
        22,
        **_deform_attrs(group, offset_group, strides, pads, dilations),
    )
    params = [opset1.parameter(inputs[n].shape, np.float32, name=n) for n in ("x", "offset")]
    y = opset1.deformable_convolution(
        params[0],
        params[1],
        opset1.constant(inputs["w"]),
        strides,
        pads[:2],
        pads[2:],
        dilations,
        group=group,
        deformable_group=offset_group,
    )
    compiled = ov.Core().compile_model(ov.Model([y], params), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    bare = list(compiled({"x": inputs["x"], "offset": inputs["offset"]}).values())[0]
    assert np.abs(bare - _onnxruntime(proto, feeds)).max() > 1e-2


# ---------------------------------------------------------------------------
# What RotaryEmbedding's function body needs: a Split with an empty output that only a Concat reads
# ---------------------------------------------------------------------------


def _split_concat_model(empty_is_output: bool):
    x = helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(np.dtype(np.float32)), [2, 3, 4])
    y = helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(np.dtype(np.float32)), [2, 3, 4])
    nodes = [
        helper.make_node("Constant", [], ["lengths"], value=helper.make_tensor("l", 7, [2], [4, 0])),
        helper.make_node("Split", ["x", "lengths"], ["kept", "empty"], axis=-1),
        helper.make_node("Neg", ["kept"], ["negated"]),
        helper.make_node("Concat", ["negated", "empty"], ["y"], axis=-1),
    ]
    outputs = [y] + ([helper.make_tensor_value_info("empty", 1, [2, 3, 0])] if empty_is_output else [])
    proto = helper.make_model(
        helper.make_graph(nodes, "split_concat", [x], outputs), opset_imports=[helper.make_opsetid("", 18)]
    )
    proto.ir_version = 10
    return proto


def test_split_with_an_unread_empty_output(tmp_path):
    feeds = {"x": np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)}
    _check(tmp_path, _split_concat_model(False), feeds, "Split")


def test_split_with_a_read_empty_output_is_refused():
    with pytest.raises(opconv.errors.ConversionError, match="a split output would be empty"):
        opconv.convert(opconv.load(_split_concat_model(True)), to="openvino")
