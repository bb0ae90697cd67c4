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


def single_node_model(op: str, inputs: dict, outputs, *, domain: str = MS, opset: int = 17, output_types=None, **attrs):
    """A model of one ``domain::op`` node; ``inputs`` maps names to arrays (None: the optional input is absent).

    Outputs are untyped (onnxruntime infers them) unless ``output_types`` maps a name to a TensorProto type.
    """
    names = [name if value is not None else "" for name, value in inputs.items()]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node(
        op, names, list(outputs), domain=domain, **{k: v for k, v in attrs.items() if v is not None}
    )
    graph_inputs = [
        helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
        for name, value in inputs.items()
        if value is not None
    ]
    output_types = output_types or {}
    graph_outputs = [
        helper.make_tensor_value_info(o, output_types[o], None)
        if o in output_types
        else helper.make_empty_tensor_value_info(o)
        for o in outputs
        if o
    ]
    graph = helper.make_graph([node], op, graph_inputs, graph_outputs)
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=imports)


def assert_matches_ort(
    op: str,
    inputs: dict,
    outputs=("Y",),
    *,
    domain: str = MS,
    opset: int = 17,
    rtol=None,
    atol=None,
    output_types=None,
    **attrs,
):
    """Run the node in onnxruntime and in opconv; every output must agree."""
    model = single_node_model(op, inputs, outputs, domain=domain, opset=opset, output_types=output_types, **attrs)
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
@pytest.mark.parametrize(
    "skip_shape,with_beta,with_bias",
    [((2, 5, 8), True, True), ((2, 5, 8), False, False), ((1, 5, 8), True, False), ((5, 8), False, True)],
)
def test_skip_layer_normalization(dtype, skip_shape, with_beta, with_bias):
    inputs = {
        "input": rand(2, 5, 8, dtype=dtype),
        "skip": rand(*skip_shape, dtype=dtype),
        "gamma": rand(8, dtype=dtype),
        "beta": rand(8, dtype=dtype) if with_beta else None,
        "bias": rand(8, dtype=dtype) if with_bias else None,
    }
    outputs = ("Y", "mean", "inv_std_var", "sum") if dtype == np.float32 else ("Y", "", "", "sum")
    assert_matches_ort("SkipLayerNormalization", inputs, outputs, epsilon=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("with_bias", [True, False])
def test_skip_simplified_layer_normalization(dtype, with_bias):
    inputs = {
        "input": rand(2, 3, 16, dtype=dtype),
        "skip": rand(2, 3, 16, dtype=dtype),
        "gamma": rand(16, dtype=dtype),
        "bias": rand(16, dtype=dtype) if with_bias else None,
    }
    outputs = ("Y", "", "inv_std_var", "sum") if dtype == np.float32 else ("Y", "", "", "sum")
    assert_matches_ort("SkipSimplifiedLayerNormalization", inputs, outputs, epsilon=1e-6)


@pytest.mark.parametrize(
    "with_segment,with_mask,with_position_ids",
    [(True, True, False), (False, False, False), (True, False, True), (False, True, True)],
)
def test_embed_layer_normalization(with_segment, with_mask, with_position_ids):
    batch, seq, hidden = 2, 6, 8
    mask = np.ones((batch, seq), np.int32)
    mask[1, 4:] = 0
    inputs = {
        "input_ids": RNG.integers(0, 20, (batch, seq)).astype(np.int32),
        "segment_ids": RNG.integers(0, 2, (batch, seq)).astype(np.int32) if with_segment else None,
        "word_embedding": rand(20, hidden),
        "position_embedding": rand(16, hidden),
        "segment_embedding": rand(2, hidden) if with_segment else None,
        "gamma": rand(hidden),
        "beta": rand(hidden),
        "mask": mask if with_mask else None,
        "position_ids": RNG.integers(0, 16, (batch, seq)).astype(np.int32) if with_position_ids else None,
    }
    assert_matches_ort("EmbedLayerNormalization", inputs, ("Y", "mask_index", "embedding_sum"), epsilon=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_normalization_1_of_the_ai_onnx_domain(dtype, axis):
    x = rand(2, 3, 4, dtype=dtype)
    scale_shape = x.shape[axis % 3 :]
    inputs = {"X": x, "Scale": rand(*scale_shape, dtype=dtype), "B": rand(*scale_shape, dtype=dtype)}
    assert_matches_ort("LayerNormalization", inputs, ("Y", "Mean", "InvStdDev"), domain="", opset=16, axis=axis)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_simplified_layer_normalization_1(dtype):
    inputs = {"X": rand(3, 4, 10, dtype=dtype), "scale": rand(10, dtype=dtype)}
    assert_matches_ort("SimplifiedLayerNormalization", inputs, ("Y", "inv_std_var"), domain="", opset=16, epsilon=1e-6)


def test_check_accepts_onnx_runtime_ai_onnx_domain_schemas(tmp_path):
    model = single_node_model(
        "SimplifiedLayerNormalization", {"X": rand(2, 4), "scale": rand(4)}, ["Y"], domain="", opset=16
    )
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


@pytest.mark.parametrize(
    "a_shape,b_shape,attrs",
    [
        ((3, 4), (4, 5), {}),
        ((2, 3, 4), (2, 5, 4), {"transB": 1, "alpha": 0.5}),
        ((2, 4, 3), (4, 5), {"transA": 1}),
        ((2, 2, 4, 3), (2, 2, 5, 4), {"transA": 1, "transB": 1, "alpha": 2.0}),
        ((3, 2, 4), (2, 4, 5), {"transBatchA": 1}),
        ((3, 2, 2, 4), (2, 2, 5, 4), {"transBatchA": 1, "transB": 1}),
        ((2, 3, 4), (4, 2, 5), {"transBatchB": 1}),
        ((4, 2, 3), (5, 2, 4), {"transBatchA": 1, "transA": 1, "transBatchB": 1, "transB": 1}),
    ],
)
def test_fused_matmul(a_shape, b_shape, attrs):
    assert_matches_ort("FusedMatMul", {"A": rand(*a_shape), "B": rand(*b_shape)}, **attrs)


def test_transpose_matmul():
    assert_matches_ort("TransposeMatMul", {"A": rand(2, 4, 3), "B": rand(2, 5, 4)}, transA=1, transB=1, alpha=0.7)


@pytest.mark.parametrize(
    "activation,params",
    [
        ("Relu", {}),
        ("LeakyRelu", {"activation_alpha": 0.2}),
        ("Elu", {"activation_alpha": 0.7}),
        ("Sigmoid", {}),
        ("Tanh", {}),
        ("HardSigmoid", {"activation_alpha": 0.3, "activation_beta": 0.4}),
    ],
)
def test_fused_gemm(activation, params):
    inputs = {"A": rand(4, 3), "B": rand(5, 3), "C": rand(5)}
    assert_matches_ort("FusedGemm", inputs, activation=activation, transB=1, alpha=1.5, beta=0.5, **params)


@pytest.mark.parametrize(
    "activation,params,with_z",
    [
        ("Relu", None, False),
        ("Relu", None, True),
        ("LeakyRelu", [0.1], False),
        ("Clip", [-0.3, 0.4], True),
        ("Sigmoid", None, False),
        ("Tanh", None, False),
        ("HardSigmoid", [0.25, 0.5], False),
    ],
)
def test_fused_conv(activation, params, with_z):
    inputs = {"X": rand(1, 4, 7, 7), "W": rand(6, 2, 3, 3), "B": rand(6), "Z": rand(1, 6, 4, 4) if with_z else None}
    assert_matches_ort(
        "FusedConv", inputs, activation=activation, activation_params=params, group=2, strides=[2, 2], pads=[1, 1, 1, 1]
    )


# ---------------------------------------------------------------- attention

BATCH, SEQ, HEADS, HEAD_SIZE = 2, 4, 2, 8
HIDDEN = HEADS * HEAD_SIZE


def mask_of(kind: str, total: int, seq: int = SEQ):
    """ORT's mask layouts, int32: lengths (B), lengths and starts (2B), 0/1 (B, T), 0/1 (B, S, T)."""
    if kind == "none":
        return None
    if kind == "1d":
        return np.array([total, total - 2], np.int32)
    if kind == "1d-start":
        return np.array([total, total - 1, 0, 1], np.int32)
    if kind == "2d":
        mask = np.ones((BATCH, total), np.int32)
        mask[1, -2:] = 0
        return mask
    mask = (RNG.uniform(size=(BATCH, seq, total)) > 0.3).astype(np.int32)
    mask[:, :, 0] = 1
    return mask


@pytest.mark.parametrize("mask", ["none", "1d", "1d-start", "2d", "3d"])
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_attention(mask, unidirectional):
    inputs = {
        "input": rand(BATCH, SEQ, HIDDEN),
        "weights": rand(HIDDEN, 3 * HIDDEN),
        "bias": rand(3 * HIDDEN),
        "mask_index": mask_of(mask, SEQ),
    }
    assert_matches_ort("Attention", inputs, ("Y",), num_heads=HEADS, unidirectional=unidirectional)


@pytest.mark.parametrize("mask", ["none", "2d", "1d"])
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_attention_with_past(mask, unidirectional):
    past_len = 3
    inputs = {
        "input": rand(BATCH, SEQ, HIDDEN),
        "weights": rand(HIDDEN, 3 * HIDDEN),
        "bias": rand(3 * HIDDEN),
        "mask_index": mask_of(mask, past_len + SEQ),
        "past": rand(2, BATCH, HEADS, past_len, HEAD_SIZE),
    }
    assert_matches_ort("Attention", inputs, ("Y", "present"), num_heads=HEADS, unidirectional=unidirectional)


@pytest.mark.parametrize("bias_shape", [(1, HEADS, SEQ, SEQ), (BATCH, 1, SEQ, SEQ)])
def test_attention_with_attention_bias(bias_shape):
    inputs = {
        "input": rand(BATCH, SEQ, HIDDEN),
        "weights": rand(HIDDEN, 3 * HIDDEN),
        "bias": rand(3 * HIDDEN),
        "mask_index": mask_of("2d", SEQ),
        "past": None,
        "attention_bias": rand(*bias_shape),
    }
    assert_matches_ort("Attention", inputs, ("Y", "present"), num_heads=HEADS)


def test_attention_qkv_hidden_sizes_scale_and_filter_value():
    sizes = [HIDDEN, HIDDEN, 2 * HIDDEN]
    inputs = {
        "input": rand(BATCH, SEQ, 12),
        "weights": rand(12, sum(sizes)),
        "bias": rand(sum(sizes)),
        "mask_index": mask_of("2d", SEQ),
    }
    assert_matches_ort(
        "Attention", inputs, ("Y",), num_heads=HEADS, qkv_hidden_sizes=sizes, scale=0.3, mask_filter_value=-50.0
    )


def mha_inputs(layout: str, seq: int = SEQ, kv_seq: int = 5):
    q = rand(BATCH, seq, HIDDEN)
    if layout == "separate":
        return {"query": q, "key": rand(BATCH, kv_seq, HIDDEN), "value": rand(BATCH, kv_seq, HIDDEN)}
    return {"query": q, "key": rand(BATCH, HEADS, kv_seq, HEAD_SIZE), "value": rand(BATCH, HEADS, kv_seq, HEAD_SIZE)}


@pytest.mark.parametrize("layout", ["separate", "split-kv"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_multi_head_attention_layouts(layout, with_bias):
    inputs = mha_inputs(layout)
    inputs["bias"] = rand(3 * HIDDEN) if with_bias else None
    assert_matches_ort("MultiHeadAttention", inputs, ("Y",), num_heads=HEADS)


@pytest.mark.parametrize("packing", ["kv", "qkv"])
def test_multi_head_attention_packed_layouts_match_onnxruntime_unpacked(packing):
    # ORT's CPU kernel refuses packed K/V and Q/K/V (CUDA only): opconv's packed run is compared with ORT's run of
    # the same data in separate tensors.
    separate = mha_inputs("separate", kv_seq=SEQ)
    separate["bias"] = rand(3 * HIDDEN)
    expected = run_ort(
        single_node_model("MultiHeadAttention", separate, ["Y"], num_heads=HEADS),
        {k: v for k, v in separate.items() if v is not None},
    )[0]

    def heads(x):  # (B, S, N * H) -> (B, S, N, 1, H)
        return x.reshape(BATCH, SEQ, HEADS, 1, HEAD_SIZE)

    if packing == "kv":
        packed = {
            "query": separate["query"],
            "key": np.concatenate([heads(separate["key"]), heads(separate["value"])], axis=3),
            "value": None,
        }
    else:
        packed = {
            "query": np.concatenate([heads(separate[n]) for n in ("query", "key", "value")], axis=3),
            "key": None,
            "value": None,
        }
    packed["bias"] = separate["bias"]
    model = single_node_model("MultiHeadAttention", packed, ["Y"], num_heads=HEADS)
    actual = opconv.run(opconv.load(model), {k: v for k, v in packed.items() if v is not None})["Y"]
    report = compare_arrays("Y", expected, actual)
    assert report.ok, report.message


@pytest.mark.parametrize("mask", ["none", "1d", "2d", "3d"])
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_multi_head_attention_masks_and_cache(mask, unidirectional):
    past_len, kv_seq = 3, SEQ
    total = past_len + kv_seq
    inputs = mha_inputs("separate", kv_seq=kv_seq)
    inputs.update(
        {
            "bias": rand(3 * HIDDEN),
            "key_padding_mask": mask_of(mask, total),
            "attention_bias": rand(BATCH, 1, SEQ, total),
            "past_key": rand(BATCH, HEADS, past_len, HEAD_SIZE),
            "past_value": rand(BATCH, HEADS, past_len, HEAD_SIZE),
        }
    )
    assert_matches_ort(
        "MultiHeadAttention",
        inputs,
        ("Y", "present_key", "present_value"),
        num_heads=HEADS,
        unidirectional=unidirectional,
        scale=0.25,
    )


def rotary_caches(max_pos: int, rotary_dim: int):
    angles = np.arange(max_pos)[:, None] * (10000.0 ** (-np.arange(0, rotary_dim, 2) / rotary_dim))
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("layout,positions", [("3d", "offset"), ("3d", "ids"), ("4d", "ids"), ("partial", "ids")])
def test_rotary_embedding(dtype, interleaved, layout, positions):
    rotary_dim = HEAD_SIZE // 2 if layout == "partial" else HEAD_SIZE
    cos, sin = rotary_caches(16, rotary_dim)
    x = rand(BATCH, HEADS, SEQ, HEAD_SIZE, dtype=dtype) if layout == "4d" else rand(BATCH, SEQ, HIDDEN, dtype=dtype)
    ids = np.array([3], np.int64) if positions == "offset" else RNG.integers(0, 16, (BATCH, SEQ)).astype(np.int64)
    attrs = {"num_heads": HEADS, "rotary_embedding_dim": rotary_dim} if layout == "partial" else {}
    inputs = {"input": x, "position_ids": ids, "cos_cache": cos.astype(dtype), "sin_cache": sin.astype(dtype)}
    assert_matches_ort("RotaryEmbedding", inputs, interleaved=interleaved, **attrs)


KV_HEADS = 1  # grouped-query: GQA_HEADS query heads share each K/V head
GQA_HEADS = 4
GQA_HEAD_SIZE = 16  # ORT's CPU kernel rotates heads of a multiple of 16 only


def gqa_inputs(stage: str, *, packed=False, dtype=np.float32, rotary=False):
    """Inputs of a GroupQueryAttention step: a first prompt, a token generated after ragged pasts, or a chunk."""
    # ORT's CPU kernel takes a chunk after a past for a batch of one only
    seq, past_buffer, seqlens = {"prompt": (4, None, [3, 3]), "token": (1, 6, [4, 2]), "chunk": (2, 5, [6])}[stage]
    batch, total = len(seqlens), max(seqlens) + 1
    q_hidden, kv_hidden = GQA_HEADS * GQA_HEAD_SIZE, KV_HEADS * GQA_HEAD_SIZE
    if packed:
        inputs = {"query": rand(batch, seq, q_hidden + 2 * kv_hidden, dtype=dtype), "key": None, "value": None}
    else:
        inputs = {
            "query": rand(batch, seq, q_hidden, dtype=dtype),
            "key": rand(batch, seq, kv_hidden, dtype=dtype),
            "value": rand(batch, seq, kv_hidden, dtype=dtype),
        }
    cache = None if past_buffer is None else (batch, KV_HEADS, past_buffer, GQA_HEAD_SIZE)
    inputs.update(
        {
            "past_key": None if cache is None else rand(*cache, dtype=dtype),
            "past_value": None if cache is None else rand(*cache, dtype=dtype),
            "seqlens_k": np.array(seqlens, np.int32),
            "total_sequence_length": np.array(total, np.int32),
        }
    )
    if rotary:
        cos, sin = rotary_caches(16, GQA_HEAD_SIZE)
        inputs.update({"cos_cache": cos.astype(dtype), "sin_cache": sin.astype(dtype)})
    return inputs


GQA_OUTPUTS = ("Y", "present_key", "present_value")


@pytest.mark.parametrize("stage", ["prompt", "token", "chunk"])
@pytest.mark.parametrize("packed", [False, True])
def test_group_query_attention(stage, packed):
    assert_matches_ort(
        "GroupQueryAttention", gqa_inputs(stage, packed=packed), GQA_OUTPUTS, num_heads=GQA_HEADS, kv_num_heads=KV_HEADS
    )


@pytest.mark.parametrize("stage", ["prompt", "token"])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("packed", [False, True])
def test_group_query_attention_rotary(stage, interleaved, packed):
    assert_matches_ort(
        "GroupQueryAttention",
        gqa_inputs(stage, rotary=True, packed=packed),
        GQA_OUTPUTS,
        num_heads=GQA_HEADS,
        kv_num_heads=KV_HEADS,
        do_rotary=1,
        rotary_interleaved=interleaved,
    )


@pytest.mark.parametrize("stage", ["prompt", "chunk"])
@pytest.mark.parametrize("attrs", [{"local_window_size": 2}, {"softcap": 2.0}, {"smooth_softmax": 1}, {"scale": 0.2}])
def test_group_query_attention_options(stage, attrs):
    assert_matches_ort(
        "GroupQueryAttention", gqa_inputs(stage), GQA_OUTPUTS, num_heads=GQA_HEADS, kv_num_heads=KV_HEADS, **attrs
    )


def test_group_query_attention_bias_and_head_sink():
    inputs = gqa_inputs("chunk")
    seq, total = 2, int(inputs["total_sequence_length"])
    inputs.update(
        {
            "cos_cache": None,
            "sin_cache": None,
            "position_ids": None,
            "attention_bias": rand(1, 1, seq, total),
            "head_sink": rand(GQA_HEADS),
        }
    )
    assert_matches_ort("GroupQueryAttention", inputs, GQA_OUTPUTS, num_heads=GQA_HEADS, kv_num_heads=KV_HEADS)


@pytest.mark.parametrize("stage", ["prompt", "token"])
def test_group_query_attention_float16(stage):
    assert_matches_ort(
        "GroupQueryAttention",
        gqa_inputs(stage, dtype=np.float16, rotary=True),
        GQA_OUTPUTS,
        num_heads=GQA_HEADS,
        kv_num_heads=KV_HEADS,
        do_rotary=1,
    )


# ---------------------------------------------------------------- small tensor ops


@pytest.mark.parametrize("axis", [0, -1, 2])
def test_expand_dims(axis):
    assert_matches_ort("ExpandDims", {"X": rand(2, 3), "axis": np.array(axis, np.int32)})


@pytest.mark.parametrize(
    "start,limit,delta,dtype", [(0, 10, 3, np.int32), (1.5, -2.0, -0.5, np.float32), (2, 9, None, np.int64)]
)
def test_range(start, limit, delta, dtype):
    inputs = {
        "start": np.array(start, dtype),
        "limit": np.array(limit, dtype),
        "delta": None if delta is None else np.array(delta, dtype),
    }
    assert_matches_ort("Range", inputs)


@pytest.mark.parametrize("upper,k", [(1, None), (0, 1), (1, -1)])
def test_trilu(upper, k):
    inputs = {"X": rand(2, 4, 5), "k": None if k is None else np.array(k, np.int64)}
    assert_matches_ort("Trilu", inputs, upper=upper)


def test_unique():
    x = np.array([2.0, 1.0, 1.0, 3.0, 4.0, 3.0, 2.0], np.float32)
    assert_matches_ort("Unique", {"x": x}, ("y", "idx", "counts"))


def test_inverse():
    x = rand(3, 4, 4) + 4 * np.eye(4, dtype=np.float32)
    assert_matches_ort("Inverse", {"X": x})


@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean"])
def test_cdist(metric):
    assert_matches_ort("CDist", {"A": rand(5, 3), "B": rand(4, 3)}, metric=metric)


def test_gather_nd():
    indices = np.array([[[0, 1], [1, 0]], [[1, 1], [0, 0]]], np.int64)
    assert_matches_ort("GatherND", {"data": rand(2, 2, 3), "indices": indices})


@pytest.mark.parametrize("mode,pads_shape", [("constant", (8,)), ("reflect", (1, 8)), ("edge", (8,))])
def test_pad(mode, pads_shape):
    pads = np.array([0, 1, 2, 0, 0, 2, 1, 0], np.int64).reshape(pads_shape)
    value = np.array([0.5], np.float32) if mode == "constant" else None
    assert_matches_ort("Pad", {"data": rand(1, 3, 4, 5), "pads": pads, "value": value}, mode=mode)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode,align_corners", [("zeros", 0), ("border", 1), ("reflection", 0)])
def test_grid_sample(mode, padding_mode, align_corners):
    inputs = {"X": rand(1, 2, 5, 6), "Grid": rand(1, 3, 4, 2, low=-1.2, high=1.2)}
    assert_matches_ort("GridSample", inputs, mode=mode, padding_mode=padding_mode, align_corners=align_corners)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("crop", [(3, 4), (1, 1)])
def test_crop_and_resize(mode, crop):
    rois = np.array([[0.1, 0.2, 0.8, 0.9], [0.0, 0.0, 1.0, 1.0], [-0.2, 0.3, 0.6, 1.3]], np.float32)
    inputs = {
        "X": rand(2, 3, 6, 7),
        "rois": rois,
        "batch_indices": np.array([0, 1, 1], np.int32),
        "crop_size": np.array(crop, np.int32),
    }
    assert_matches_ort("CropAndResize", inputs, mode=mode, extrapolation_value=-1.0)


@pytest.mark.parametrize("dim,size,step", [(-1, 3, 1), (1, 2, 2), (0, 2, 1)])
def test_unfold_tensor(dim, size, step):
    assert_matches_ort("UnfoldTensor", {"input": rand(3, 5, 6)}, dim=dim, size=size, step=step)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("with_scale", [False, True])
def test_scaled_silu(dtype, with_scale):
    inputs = {"X": rand(2, 3, 8, dtype=dtype, low=-4, high=4), "scale": np.array(1.7, dtype) if with_scale else None}
    assert_matches_ort("ScaledSiLU", inputs, alpha=0.5)


# ---------------------------------------------------------------- ORT's ai.onnx-domain legacy ops


@pytest.mark.parametrize(
    "op,attrs",
    [
        ("Affine", {"alpha": 2.0, "beta": -0.5}),
        ("ScaledTanh", {"alpha": 1.5, "beta": 0.7}),
        ("ParametricSoftplus", {"alpha": 1.3, "beta": 0.8}),
        ("Scale", {"scale": 3.0}),
        ("ThresholdedRelu", {"alpha": 0.2}),
        ("MemcpyFromHost", {}),
        ("MemcpyToHost", {}),
    ],
)
def test_legacy_elementwise(op, attrs):
    assert_matches_ort(op, {"X": rand(2, 3, 4, 5, low=-3, high=3)}, domain="", opset=9, **attrs)


def test_image_scaler():
    assert_matches_ort("ImageScaler", {"input": rand(2, 3, 4, 5)}, domain="", opset=9, scale=2.0, bias=[0.1, -0.2, 0.3])


@pytest.mark.parametrize("scale", [None, [2, 3]])
def test_crop(scale):
    assert_matches_ort("Crop", {"input": rand(1, 2, 6, 7)}, domain="", opset=9, border=[1, 2, 2, 1], scale=scale)


@pytest.mark.parametrize("with_axes", [False, True])
def test_dynamic_slice(with_axes):
    inputs = {
        "data": rand(4, 5, 6),
        "starts": np.array([1, 0], np.int64),
        "ends": np.array([3, 4], np.int64),
        "axes": np.array([2, 0], np.int64) if with_axes else None,
    }
    assert_matches_ort("DynamicSlice", inputs, domain="", opset=9)


@pytest.mark.parametrize("across_channels,normalize_variance", [(0, 1), (1, 1), (0, 0)])
def test_mean_variance_normalization_1(across_channels, normalize_variance):
    assert_matches_ort(
        "MeanVarianceNormalization",
        {"input": rand(2, 3, 4, 5)},
        domain="",
        opset=8,
        across_channels=across_channels,
        normalize_variance=normalize_variance,
    )


# ---------------------------------------------------------------- recent-model blocks


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("layout", ["grouped", "flattened"])
@pytest.mark.parametrize("scale_shape", [None, (3, 4), (4,), (12,)])
def test_branchwise_rms_norm(dtype, layout, scale_shape):
    x = rand(2, 5, 3, 4, dtype=dtype) if layout == "grouped" else rand(2, 5, 12, dtype=dtype)
    inputs = {"X": x, "scale": None if scale_shape is None else rand(*scale_shape, dtype=dtype)}
    attrs = {"num_branches": 3} if layout == "flattened" else {}
    assert_matches_ort("BranchwiseRMSNorm", inputs, epsilon=1e-5, **attrs)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("activation", ["silu", "sigmoid"])
def test_gated_rms_norm(dtype, activation):
    inputs = {"X": rand(2, 3, 16, dtype=dtype), "scale": rand(8, dtype=dtype), "gate": rand(2, 3, 16, dtype=dtype)}
    assert_matches_ort("GatedRMSNorm", inputs, activation=activation)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_gated_add(dtype):
    inputs = {"X": rand(2, 3, 8, dtype=dtype), "Y": rand(2, 3, 8, dtype=dtype), "gate": rand(2, 3, 1, dtype=dtype)}
    assert_matches_ort("GatedAdd", inputs, ("output",))


@pytest.mark.parametrize("layout", ["grouped", "flattened"])
@pytest.mark.parametrize("gates", ["C", "C1", "CH"])
def test_hyper_connections(layout, gates):
    c, h = 3, 4
    streams = rand(2, 5, c, h) if layout == "grouped" else rand(2, 5, c * h)
    attrs = {"num_branches": c} if layout == "flattened" else {}
    gate_shape = {"C": (2, 5, c), "C1": (2, 5, c, 1), "CH": (2, 5, c, h)}[gates]
    assert_matches_ort(
        "HyperConnectionPreMix", {"streams": streams, "pre_mix": rand(*gate_shape)}, reduction_scale=0.5, **attrs
    )
    inputs = {
        "streams": streams,
        "block_output": rand(2, 5, h),
        "post_mix": rand(*gate_shape),
        "stream_mix": rand(2, 5, c, c),
    }
    assert_matches_ort("HyperConnectionPostMix", inputs, **attrs)
    inputs["stream_mix"] = None
    assert_matches_ort("HyperConnectionPostMix", inputs, **attrs)


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
def test_linear_attention(rule):
    batch, steps, q_heads, kv_heads, dk, dv = 2, 3, 2, 1, 4, 5
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    key = rand(batch, steps, kv_heads, dk)
    key /= np.linalg.norm(key, axis=-1, keepdims=True)
    inputs = {
        "query": rand(batch, steps, q_heads * dk),
        "key": key.reshape(batch, steps, -1),
        "value": rand(batch, steps, kv_heads * dv),
        "past_state": rand(batch, kv_heads, dk, dv),
        "decay": rand(batch, steps, kv_heads * dk, low=-1, high=0) if gated else None,
        "beta": rand(batch, steps, kv_heads, low=0, high=1) if delta else None,
    }
    assert_matches_ort(
        "LinearAttention", inputs, ("Y", "present_state"), q_num_heads=q_heads, kv_num_heads=kv_heads, update_rule=rule
    )


@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("activation", ["none", "silu"])
def test_causal_conv_with_state(channels_last, activation):
    batch, channels, length, kernel = 2, 3, 5, 4
    x, state = rand(batch, channels, length), rand(batch, channels, kernel - 1)
    if channels_last:
        x, state = x.transpose(0, 2, 1).copy(), state.transpose(0, 2, 1).copy()
    inputs = {"input": x, "weight": rand(channels, 1, kernel), "bias": rand(channels), "past_state": state}
    assert_matches_ort(
        "CausalConvWithState", inputs, ("Y", "present_state"), activation=activation, channels_last=channels_last
    )


def test_sample_op():
    assert_matches_ort("SampleOp", {"X": rand(2, 3)})


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize(
    "attrs",
    [
        {"kernel_shape": [2, 2], "strides": [2, 2]},
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "ceil_mode": 1, "strides": [2, 2]},
    ],
)
def test_nhwc_max_pool(dtype, attrs):
    x = RNG.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, (1, 7, 6, 3)).astype(dtype)
    assert_matches_ort("NhwcMaxPool", {"x": x}, **attrs)


@pytest.mark.parametrize("pads", [[0, 0, 0, 0], [1, 0, 1, 1]])
def test_conv_transpose_with_dynamic_pads(pads):
    inputs = {"X": rand(1, 2, 4, 4), "W": rand(2, 3, 3, 3), "Pads": np.array(pads, np.int64), "B": rand(3)}
    assert_matches_ort("ConvTransposeWithDynamicPads", inputs, strides=[2, 2])


@pytest.mark.parametrize("ngram_size", [1, 2, 3])
def test_ngram_repeat_block(ngram_size):
    ids = np.array([[1, 2, 3, 1, 2], [4, 4, 4, 5, 4]], np.int64)
    assert_matches_ort("NGramRepeatBlock", {"input_ids": ids, "scores": rand(2, 8)}, ngram_size=ngram_size)


@pytest.mark.parametrize("shape", [(5, 7), (6, 3), (1, 4)])
def test_dynamic_time_warping(shape):
    cost = RNG.integers(0, 4, shape).astype(np.float32)  # small integers: ties to break
    assert_matches_ort("DynamicTimeWarping", {"input": cost})


@pytest.mark.parametrize(
    "values",
    [
        np.array([0, 1, -7, 123456789], np.int32),
        np.array([[3, -(2**40)]], np.int64),
        np.array([0.5, -1.25, 3e7], np.float32),
        np.array([1.5, -2.0], np.float64),
        np.array(["", "a", "hello", "ONNX Runtime"], object),
    ],
)
@pytest.mark.parametrize("positive,seed", [(1, 0), (0, 42)])
def test_murmur_hash3(values, positive, seed):
    out_type = onnx.TensorProto.UINT32 if positive else onnx.TensorProto.INT32
    node = helper.make_node("MurmurHash3", ["X"], ["Y"], domain=MS, positive=positive, seed=seed)
    x_type = onnx.TensorProto.STRING if values.dtype == object else helper.np_dtype_to_tensor_dtype(values.dtype)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("X", x_type, values.shape)],
        [helper.make_tensor_value_info("Y", out_type, values.shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    expected = run_ort(model, {"X": values})[0]
    actual = opconv.run(opconv.load(model), {"X": values})["Y"]
    report = compare_arrays("Y", expected, actual)
    assert report.ok, report.message


def dmmha_self_inputs(with_mask: bool, with_bias: bool):
    max_len, past_len = 8, 5
    mask = np.ones((BATCH, past_len + 1), np.int32)
    mask[1, :2] = 0
    return {
        "query": rand(BATCH, 1, HIDDEN),
        "key": rand(BATCH, 1, HIDDEN),
        "value": rand(BATCH, 1, HIDDEN),
        "mask_index": mask if with_mask else None,
        "attention_bias": None,
        "past_key": rand(BATCH, HEADS, max_len, HEAD_SIZE),
        "past_value": rand(BATCH, HEADS, max_len, HEAD_SIZE),
        "past_sequence_length": np.array([past_len], np.int32),
        "beam_width": None,
        "cache_indirection": None,
        "bias": rand(3 * HIDDEN) if with_bias else None,
    }


DMMHA_OUTPUTS = ("Y", "present_key", "present_value")


@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_decoder_masked_multi_head_attention_self(with_mask, with_bias):
    assert_matches_ort(
        "DecoderMaskedMultiHeadAttention",
        dmmha_self_inputs(with_mask, with_bias),
        DMMHA_OUTPUTS,
        num_heads=HEADS,
        past_present_share_buffer=1,
    )


def test_decoder_masked_multi_head_attention_packed_matches_onnxruntime_unpacked():
    # ORT's CPU kernel fails on packed Q/K/V: opconv's packed run is compared with ORT's unpacked one.
    inputs = dmmha_self_inputs(True, True)
    attrs = {"num_heads": HEADS, "past_present_share_buffer": 1}
    feeds = {k: v for k, v in inputs.items() if v is not None}
    expected = run_ort(single_node_model("DecoderMaskedMultiHeadAttention", inputs, DMMHA_OUTPUTS, **attrs), feeds)
    packed = dict(
        inputs, query=np.concatenate([inputs[n] for n in ("query", "key", "value")], axis=2), key=None, value=None
    )
    model = single_node_model("DecoderMaskedMultiHeadAttention", packed, DMMHA_OUTPUTS, **attrs)
    actual = opconv.run(opconv.load(model), {k: v for k, v in packed.items() if v is not None})
    for name, want in zip(DMMHA_OUTPUTS, expected):
        report = compare_arrays(name, want, actual[name])
        assert report.ok, f"{name}: {report.message}"


@pytest.mark.parametrize("with_mask", [False, True])
def test_decoder_masked_multi_head_attention_cross(with_mask):
    kv_len = 6
    mask = np.ones((BATCH, kv_len), np.int32)
    mask[0, -2:] = 0
    inputs = {
        "query": rand(BATCH, 1, HIDDEN),
        "key": rand(BATCH, HEADS, kv_len, HEAD_SIZE),
        "value": rand(BATCH, HEADS, kv_len, HEAD_SIZE),
        "mask_index": mask if with_mask else None,
    }
    assert_matches_ort("DecoderMaskedMultiHeadAttention", inputs, ("Y",), num_heads=HEADS)


def test_attention_scores_outputs():
    # The scaled Q.K^T scores MultiHeadAttention and DecoderMaskedMultiHeadAttention can return.
    inputs = mha_inputs("separate", kv_seq=SEQ)
    inputs.update({"bias": None, "key_padding_mask": mask_of("2d", SEQ), "attention_bias": rand(1, HEADS, SEQ, SEQ)})
    assert_matches_ort(
        "MultiHeadAttention",
        inputs,
        ("Y", "", "", "qk"),
        num_heads=HEADS,
        scale=0.3,
        output_types={"qk": onnx.TensorProto.FLOAT},
    )
    assert_matches_ort(
        "DecoderMaskedMultiHeadAttention",
        dmmha_self_inputs(True, True),
        DMMHA_OUTPUTS + ("qk",),
        num_heads=HEADS,
        past_present_share_buffer=1,
        output_qk=1,
        output_types={"qk": onnx.TensorProto.FLOAT},
    )


# ---------------------------------------------------------------- mixture of experts

EXPERTS, MOE_HIDDEN, MOE_INTER = 4, 6, 10


@pytest.mark.parametrize("k,normalize", [(1, 0), (2, 0), (2, 1)])
@pytest.mark.parametrize("activation", ["relu", "gelu", "silu", "identity"])
def test_moe(k, normalize, activation):
    inputs = {
        "input": rand(2, 3, MOE_HIDDEN),
        "router_probs": rand(6, EXPERTS, low=-2, high=2),
        "fc1_experts_weights": rand(EXPERTS, MOE_INTER, MOE_HIDDEN),
        "fc1_experts_bias": rand(EXPERTS, MOE_INTER),
        "fc2_experts_weights": rand(EXPERTS, MOE_HIDDEN, MOE_INTER),
        "fc2_experts_bias": rand(EXPERTS, MOE_HIDDEN),
    }
    assert_matches_ort("MoE", inputs, k=k, normalize_routing_weights=normalize, activation_type=activation)


def moe_swiglu_inputs(limit_rows: int = 5):
    # fc1 interleaves gate and linear rows (swiglu_fusion=1), the only layout ORT's CPU kernel takes
    return {
        "input": rand(limit_rows, MOE_HIDDEN),
        "router_probs": rand(limit_rows, EXPERTS, low=-2, high=2),
        "fc1_experts_weights": rand(EXPERTS, 2 * MOE_INTER, MOE_HIDDEN),
        "fc1_experts_bias": rand(EXPERTS, 2 * MOE_INTER),
        "fc2_experts_weights": rand(EXPERTS, MOE_HIDDEN, MOE_INTER),
        "fc2_experts_bias": None,
    }


SWIGLU = {
    "k": 2,
    "normalize_routing_weights": 1,
    "activation_type": "swiglu",
    "activation_alpha": 1.702,
    "activation_beta": 1.0,
}


@pytest.mark.parametrize("limit", [None, 0.5])
def test_moe_swiglu(limit):
    assert_matches_ort("MoE", moe_swiglu_inputs(), swiglu_fusion=1, swiglu_limit=limit, **SWIGLU)


@pytest.mark.parametrize("fusion", [0, 2])
def test_moe_swiglu_other_layouts_match_onnxruntime_interleaved(fusion):
    # ORT's CPU kernel takes interleaved gate/linear rows only: opconv's run of the same weights laid out as
    # halves (2) or as separate FC1/FC3 (0) is compared with ORT's interleaved run.
    inputs = moe_swiglu_inputs()
    expected = run_ort(
        single_node_model("MoE", inputs, ["Y"], swiglu_fusion=1, swiglu_limit=0.5, **SWIGLU),
        {k: v for k, v in inputs.items() if v is not None},
    )[0]
    gate_w, linear_w = inputs["fc1_experts_weights"][:, 0::2], inputs["fc1_experts_weights"][:, 1::2]
    gate_b, linear_b = inputs["fc1_experts_bias"][:, 0::2], inputs["fc1_experts_bias"][:, 1::2]
    relaid = dict(inputs)
    if fusion == 2:
        relaid.update(
            fc1_experts_weights=np.concatenate([gate_w, linear_w], axis=1),
            fc1_experts_bias=np.concatenate([gate_b, linear_b], axis=1),
        )
    else:
        relaid.update(
            fc1_experts_weights=gate_w.copy(),
            fc1_experts_bias=gate_b.copy(),
            fc3_experts_weights=linear_w.copy(),
            fc3_experts_bias=linear_b.copy(),
        )
    model = single_node_model("MoE", relaid, ["Y"], swiglu_fusion=fusion, swiglu_limit=0.5, **SWIGLU)
    actual = opconv.run(opconv.load(model), {k: v for k, v in relaid.items() if v is not None})["Y"]
    report = compare_arrays("Y", expected, actual)
    assert report.ok, report.message


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("layout,sections", [(0, [1, 2, 1]), (1, [2, 1, 1]), (0, [4, 0, 0])])
@pytest.mark.parametrize("interleaved,shape", [(0, "3d"), (1, "4d")])
def test_m_rotary_embedding(dtype, layout, sections, interleaved, shape):
    cos, sin = rotary_caches(16, HEAD_SIZE)
    x = rand(BATCH, HEADS, SEQ, HEAD_SIZE, dtype=dtype) if shape == "4d" else rand(BATCH, SEQ, HIDDEN, dtype=dtype)
    inputs = {
        "input": x,
        "position_ids": RNG.integers(0, 16, (3, BATCH, SEQ)).astype(np.int64),
        "cos_cache": cos.astype(dtype),
        "sin_cache": sin.astype(dtype),
    }
    assert_matches_ort(
        "MRotaryEmbedding",
        inputs,
        interleaved=interleaved,
        mrope_layout=layout,
        mrope_section=sections,
        num_heads=HEADS,
    )


def csr_block_layouts(dense):
    rows = np.array([np.concatenate([[0], np.cumsum(layout.sum(axis=1))]) for layout in dense], np.int32)
    width = max(int(layout.sum()) for layout in dense)
    cols = np.full((len(dense), width), -1, np.int32)
    for i, layout in enumerate(dense):
        nonzero = np.nonzero(layout)[1]
        cols[i, : nonzero.size] = nonzero
    return rows, cols


@pytest.mark.parametrize("stage", ["prompt", "token"])
@pytest.mark.parametrize(
    "rotary,packed,dtype",
    [(0, False, np.float32), (1, False, np.float32), (0, True, np.float32), (1, False, np.float16)],
)
def test_sparse_attention(stage, rotary, packed, dtype):
    block, blocks, heads, kv_heads, head_size = 16, 4, 4, 2, 16
    max_len = block * blocks
    dense = np.array(
        [
            np.tril(np.ones((blocks, blocks), bool)),
            np.tril(np.ones((blocks, blocks), bool)) & ~np.eye(blocks, k=-1, dtype=bool),
        ]
    )
    rows, cols = csr_block_layouts(dense)
    # one length for the whole batch: ORT's CPU kernel reads past the keys of a shorter entry (garbage results)
    seq, valid = (40, [40, 40]) if stage == "prompt" else (1, [50, 50])
    q_hidden, kv_hidden = heads * head_size, kv_heads * head_size
    if packed:
        qkv = {"query": rand(BATCH, seq, q_hidden + 2 * kv_hidden, dtype=dtype), "key": None, "value": None}
    else:
        qkv = {
            "query": rand(BATCH, seq, q_hidden, dtype=dtype),
            "key": rand(BATCH, seq, kv_hidden, dtype=dtype),
            "value": rand(BATCH, seq, kv_hidden, dtype=dtype),
        }
    cos, sin = rotary_caches(max_len, head_size)
    inputs = dict(
        qkv,
        past_key=rand(BATCH, kv_heads, max_len, head_size, dtype=dtype),
        past_value=rand(BATCH, kv_heads, max_len, head_size, dtype=dtype),
        block_row_indices=rows,
        block_col_indices=cols,
        total_sequence_length=np.array(max(valid), np.int32),
        key_total_sequence_lengths=np.array(valid, np.int32),
        cos_cache=cos.astype(dtype) if rotary else None,
        sin_cache=sin.astype(dtype) if rotary else None,
    )
    outputs = ("Y", "present_key", "present_value")
    attrs = {"num_heads": heads, "kv_num_heads": kv_heads, "sparse_block_size": block, "do_rotary": rotary}
    model = single_node_model("SparseAttention", inputs, outputs, **attrs)
    feeds = {k: v for k, v in inputs.items() if v is not None}
    expected = run_ort_sharing_buffers(model, feeds, {"past_key": "present_key", "past_value": "present_value"})
    actual = opconv.run(opconv.load(model), feeds)
    for name in outputs:
        report = compare_arrays(name, expected[name], actual[name])
        assert report.ok, f"{name}: {report.message}"


def run_ort_sharing_buffers(model, feeds: dict, shared: dict) -> dict:
    """Run in onnxruntime with each ``shared`` input's buffer bound as its output too (ORT's in-place KV cache)."""
    import onnxruntime as ort

    from tests.runtimes import ort_session

    session = ort_session(model)
    binding = session.io_binding()
    buffers = {}
    for name, value in feeds.items():
        if name in shared:
            buffers[shared[name]] = ort.OrtValue.ortvalue_from_numpy(np.array(value, copy=True))
            binding.bind_ortvalue_input(name, buffers[shared[name]])
        else:
            binding.bind_cpu_input(name, value)
    names = [o.name for o in model.graph.output]
    for name in names:
        if name in buffers:
            binding.bind_ortvalue_output(name, buffers[name])
        else:
            binding.bind_output(name)
    session.run_with_iobinding(binding)
    return dict(zip(names, binding.copy_outputs_to_cpu()))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("with_b", [False, True])
def test_linear_attention_gate(dtype, with_b):
    inputs = {
        "a": rand(2, 3, 4, dtype=dtype, low=-3, high=3),
        "dt_bias": rand(4),
        "decay_scale": rand(4, low=-2, high=0),
        "b": rand(2, 3, 4, dtype=dtype) if with_b else None,
    }
    assert_matches_ort("LinearAttentionGate", inputs, ("decay", "beta") if with_b else ("decay",))


@pytest.mark.parametrize("groups", [(1, 1, 2), (4, 2, 2), (4, 3, 3)])
def test_moe_group_router(groups):
    n_group, topk_group, group_topk = groups
    inputs = {"logits": rand(5, 16, low=-3, high=3), "expert_bias": rand(16, low=-0.2, high=0.2)}
    assert_matches_ort(
        "MoEGroupRouter",
        inputs,
        ("router_probs",),
        n_group=n_group,
        topk_group=topk_group,
        group_topk=group_topk,
        top_k=4,
    )


def test_moe_group_router_full_scores():
    inputs = {"logits": rand(5, 16, low=-3, high=3), "expert_bias": rand(16, low=-0.2, high=0.2)}
    assert_matches_ort("MoEGroupRouter", inputs, ("", "selection_scores", "router_weights"), top_k=4)


def test_word_conv_embedding():
    # (inside a word the nonzero ids count; a word starting with id 0 is skipped by onnxruntime, which leaves its
    # output as the buffer held it, so no such word is compared)
    words = np.array(
        [[3, 5, 2, 7, 0, 0], [1, 4, 0, 0, 0, 0], [6, 6, 6, 6, 6, 6], [2, 0, 0, 0, 0, 0], [3, 0, 4, 5, 0, 0]], np.int32
    )
    inputs = {"Sequence": words, "W": rand(5, 1, 2, 3), "B": rand(5), "C": rand(8, 3)}
    assert_matches_ort("WordConvEmbedding", inputs, conv_window_size=2, embedding_size=5, char_embedding_size=3)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("normed", [False, True])
def test_engram_gate(dtype, normed):
    hc, hidden = 3, 8
    inputs = {
        "key": rand(2, 4, hc, hidden, dtype=dtype),
        "query": rand(2, 4, hc, hidden, dtype=dtype),
        "value": rand(2, 4, hidden, dtype=dtype),
        "key_norm_scale": rand(hc, hidden, dtype=dtype),
        "query_norm_scale": rand(hc, hidden, dtype=dtype),
        "conv_norm_scale": rand(hc, hidden, dtype=dtype) if normed else None,
    }
    assert_matches_ort("EngramGate", inputs, ("output", "gated_value_normed") if normed else ("output",))


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
@pytest.mark.parametrize(
    "with_past,with_offsets,with_eos", [(False, False, False), (True, True, False), (False, False, True)]
)
def test_ngram_hash_mapping(dtype, with_past, with_offsets, with_eos):
    max_n, heads = 3, 2
    inputs = {
        "input_ids": RNG.integers(0, 50000, (2, 5)).astype(dtype),
        "multipliers": np.array([1, 2654435761, 40503], np.int64).astype(dtype),
        "vocab_sizes": np.array([101, 211, 307, 401], dtype),
        "past_ids": RNG.integers(0, 50000, (2, max_n - 1)).astype(dtype) if with_past else None,
        "head_offsets": np.array([0, 101, 312, 619], dtype) if with_offsets else None,
        "eos_token_id": np.array(7, dtype) if with_eos else None,
    }
    assert_matches_ort(
        "NGramHashMapping", inputs, ("hash_ids", "present_ids"), max_ngram_size=max_n, n_head_per_ngram=heads, pad_id=3
    )


@pytest.mark.parametrize("with_past", [False, True])
def test_varlen_ngram_hash_mapping(with_past):
    max_n, heads = 3, 2
    inputs = {
        "input_ids": RNG.integers(0, 50000, 9).astype(np.int64),
        "multipliers": np.array([1, 2654435761, 40503], np.int64),
        "vocab_sizes": np.array([101, 211, 307, 401], np.int64),
        "cumulative_sequence_length": np.array([0, 4, 5, 9], np.int32),
        "past_ids": RNG.integers(0, 50000, (3, max_n - 1)).astype(np.int64) if with_past else None,
    }
    assert_matches_ort(
        "VarlenNGramHashMapping",
        inputs,
        ("hash_ids", "present_ids"),
        max_ngram_size=max_n,
        n_head_per_ngram=heads,
        pad_id=3,
    )


@pytest.mark.parametrize("rule", ["gated_delta", "delta", "gated", "linear"])
@pytest.mark.parametrize("variant", ["uniform", "cu_seqlens", "rank4", "packed"])
def test_gated_delta_net(rule, variant):
    batch, steps, hq, hv, dk, dv = 2, 3, 1, 2, 4, 5
    tokens = batch * steps
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    q, k, v = rand(tokens, hq, dk), rand(tokens, hq, dk), rand(tokens, hv, dv)
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    inputs = {
        "query": q,
        "key": k,
        "value": v,
        "cu_seqlens": np.array([0, 2, tokens], np.int32) if variant == "cu_seqlens" else None,
        "decay": rand(tokens, hv, low=-1, high=0) if gated else None,
        "beta": rand(tokens, hv, low=0, high=1) if delta else None,
        "initial_state": rand(batch, hv, dv, dk),
    }
    if variant == "rank4":
        inputs.update({n: inputs[n].reshape((batch, steps) + inputs[n].shape[1:]) for n in ("query", "key", "value")})
        for n in ("decay", "beta"):
            if inputs[n] is not None:
                inputs[n] = inputs[n].reshape(batch, steps, -1)
    if variant == "packed":
        inputs.update(
            query=np.concatenate([q.reshape(tokens, -1), k.reshape(tokens, -1), v.reshape(tokens, -1)], axis=1),
            key=None,
            value=None,
        )
    assert_matches_ort("GatedDeltaNet", inputs, ("Y", "final_state"), update_rule=rule)


@pytest.mark.parametrize("gate_activation", ["softplus", "sigmoid"])
@pytest.mark.parametrize("qk_l2_norm,beta_activation", [(1, "sigmoid"), (0, "none")])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_gated_delta_net_gates(gate_activation, qk_l2_norm, beta_activation, dtype):
    tokens, hq, hv, dk, dv = 4, 2, 2, 4, 3
    inputs = {
        "query": rand(tokens, hq, dk, dtype=dtype),
        "key": rand(tokens, hq, dk, dtype=dtype),
        "value": rand(tokens, hv, dv, dtype=dtype),
        "cu_seqlens": np.array([0, tokens], np.int32),
        "decay": rand(tokens, hv),
        "beta": rand(tokens, hv, low=-2, high=2 if beta_activation == "sigmoid" else 0.9),
        "initial_state": None,
        "a_log": rand(hv),
        "dt_bias": rand(hv),
    }
    if beta_activation == "none":
        inputs["beta"] = rand(tokens, hv, low=0, high=1)
    assert_matches_ort(
        "GatedDeltaNet",
        inputs,
        ("Y", "final_state"),
        gate_activation=gate_activation,
        qk_l2_norm=qk_l2_norm,
        beta_activation=beta_activation,
        scale=0.4,
    )


@pytest.mark.parametrize("activation", ["none", "silu"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_varlen_causal_conv_with_state(activation, with_bias):
    channels, kernel = 3, 4
    inputs = {
        "input": rand(9, channels),
        "weight": rand(channels, 1, kernel),
        "cumulative_sequence_length": np.array([0, 4, 5, 9], np.int32),
        "bias": rand(channels) if with_bias else None,
        "initial_state": rand(3, channels, kernel - 1),
    }
    assert_matches_ort("VarlenCausalConvWithState", inputs, ("Y", "final_state"), activation=activation)


@pytest.mark.parametrize(
    "src,cur,prev,pred",
    [
        ([5, 6, 7, 8, 9, 6, 7], [1, 5, 6], 2, [7, 8, 3, 0, 0, 0]),
        ([5, 6, 7, 8, 9, 6, 7], [1, 5, 6, 7], 0, None),
        ([1, 2, 3, 4, 5], [9, 2, 3], 3, [4, 5, 8]),
        ([4, 4, 4, 4], [4], 1, [4, 4, 4, 4]),
    ],
)
def test_bifurcation_detector(src, cur, prev, pred):
    inputs = {
        "src_tokens": np.array(src, np.int64),
        "cur_tokens": np.array(cur, np.int64),
        "prev_suffix_match_idx": np.array(prev, np.int64),
        "pred_tokens": None if pred is None else np.array(pred, np.int64),
    }
    assert_matches_ort(
        "BifurcationDetector", inputs, ("tokens", "suffix_match_idx"), min_ngram_size=1, max_ngram_size=3
    )


@pytest.mark.parametrize(
    "attrs",
    [
        {"separators": [" "]},
        {"separators": [" ", ","], "mincharnum": 2},
        {"separators": [""]},
        {"tokenexp": "[a-zA-Z]+", "mark": 1},
        {"tokenexp": "."},
        {"separators": ["o"], "mark": 1, "mincharnum": 1},
    ],
)
@pytest.mark.parametrize("shape", [(3,), (1, 3)])
def test_tokenizer(attrs, shape):
    texts = np.array(["Hello World", "I love,computer science !", "a"], dtype=object).reshape(shape)
    attrs = {"mark": 0, "mincharnum": 1, "pad_value": "#", **attrs}
    node = helper.make_node("Tokenizer", ["X"], ["Y"], domain=MS, **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("X", onnx.TensorProto.STRING, shape)],
        [helper.make_tensor_value_info("Y", onnx.TensorProto.STRING, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    expected = run_ort(model, {"X": texts})[0]
    actual = opconv.run(opconv.load(model), {"X": texts})["Y"]
    assert expected.shape == actual.shape and expected.tolist() == actual.tolist(), (expected, actual)


# ---------------------------------------------------------------- generation


def tiny_gpt_decoder(vocab: int = 11, heads: int = 2, head_size: int = 4):
    """A GPT-2-shaped decoder subgraph for the generation loops: logits from the token and position embeddings,
    the average of the KV cache (so pasts matter) and the mask's length (so the mask matters)."""
    from onnx import numpy_helper

    hidden = heads * head_size
    consts = {
        "E": rand(vocab, hidden, low=-2, high=2),
        "P": rand(16, hidden),
        "W": rand(hidden, vocab, low=-2, high=2),
        "kv_shape": np.array([0, 0, heads, head_size], np.int64),
        "half": np.array(0.5, np.float32),
        "flat": np.array([0, 1, hidden], np.int64),
        "tenth": np.array(0.1, np.float32),
    }
    nodes = [
        helper.make_node("Gather", ["E", "input_ids"], ["emb"]),
        helper.make_node("Gather", ["P", "position_ids"], ["pos"]),
        helper.make_node("Add", ["emb", "pos"], ["x"]),
        helper.make_node("Reshape", ["x", "kv_shape"], ["x4"]),
        helper.make_node("Transpose", ["x4"], ["k"], perm=[0, 2, 1, 3]),
        helper.make_node("Mul", ["k", "half"], ["v"]),
        helper.make_node("Unsqueeze", ["k", "zero_axis"], ["k5"]),
        helper.make_node("Unsqueeze", ["v", "zero_axis"], ["v5"]),
        helper.make_node("Concat", ["k5", "v5"], ["kv"], axis=0),
        helper.make_node("Concat", ["past_0", "kv"], ["present_0"], axis=3),
        helper.make_node("ReduceMean", ["present_0"], ["summary"], axes=[0, 3], keepdims=0),
        helper.make_node("Reshape", ["summary", "flat"], ["context"]),
        helper.make_node("Cast", ["attention_mask"], ["maskf"], to=onnx.TensorProto.FLOAT),
        helper.make_node("ReduceSum", ["maskf", "one_axis"], ["length"], keepdims=1),
        helper.make_node("Unsqueeze", ["length", "last_axis"], ["length3"]),
        helper.make_node("Mul", ["length3", "tenth"], ["shift"]),
        helper.make_node("Add", ["x", "context"], ["h0"]),
        helper.make_node("Add", ["h0", "shift"], ["h"]),
        helper.make_node("MatMul", ["h", "W"], ["logits"]),
    ]
    consts.update(
        {
            "zero_axis": np.array([0], np.int64),
            "one_axis": np.array([1], np.int64),
            "last_axis": np.array([2], np.int64),
        }
    )
    int32, f32 = onnx.TensorProto.INT32, onnx.TensorProto.FLOAT
    inputs = [
        helper.make_tensor_value_info("input_ids", int32, ["B", "S"]),
        helper.make_tensor_value_info("position_ids", int32, ["B", "S"]),
        helper.make_tensor_value_info("attention_mask", int32, ["B", "T"]),
        helper.make_tensor_value_info("past_0", f32, [2, "B", heads, "P", head_size]),
    ]
    outputs = [
        helper.make_tensor_value_info("logits", f32, ["B", "S", vocab]),
        helper.make_tensor_value_info("present_0", f32, [2, "B", heads, "T", head_size]),
    ]
    initializers = [numpy_helper.from_array(v, k) for k, v in consts.items()]
    return helper.make_graph(nodes, "decoder", inputs, outputs, initializer=initializers)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"min_length": 7, "repetition_penalty": 1.5},
        {"no_repeat_ngram_size": 2},
        {"vocab_mask": "every-third", "prefix_vocab_mask": "first-half"},
        {"padded": True},
    ],
)
def test_greedy_search(options):
    vocab = 11
    ids = RNG.integers(2, vocab, (2, 3)).astype(np.int32)
    if options.get("padded"):
        ids[1, 0] = 0  # a left pad
    inputs = {
        "input_ids": ids,
        "max_length": np.array([9], np.int32),
        "min_length": np.array([options["min_length"]], np.int32) if "min_length" in options else None,
        "repetition_penalty": np.array([options["repetition_penalty"]], np.float32)
        if "repetition_penalty" in options
        else None,
        "vocab_mask": (np.arange(vocab) % 3 != 0).astype(np.int32) if "vocab_mask" in options else None,
        "prefix_vocab_mask": np.tile(np.arange(vocab) < vocab // 2, (2, 1)).astype(np.int32)
        if "prefix_vocab_mask" in options
        else None,
    }
    attrs = {
        "decoder": tiny_gpt_decoder(vocab),
        "eos_token_id": 1,
        "pad_token_id": 0,
        "model_type": 0,
        "no_repeat_ngram_size": options.get("no_repeat_ngram_size"),
    }
    model = single_node_model("GreedySearch", inputs, ["sequences"], **attrs)
    feeds = {k: v for k, v in inputs.items() if v is not None}
    expected = run_ort(model, feeds)[0]
    actual = opconv.run(opconv.load(model), feeds)["sequences"]
    # When every sequence ends before max_length, onnxruntime leaves the rest of its output uninitialized: compare
    # up to the step that ended the last one (its end token is written as padding), and opconv's padding after.
    written = np.nonzero((actual != 0).any(axis=0))[0]
    length = min(int(written[-1]) + 2, actual.shape[1])
    assert expected.shape == actual.shape
    np.testing.assert_array_equal(actual[:, :length], expected[:, :length])
    assert (actual[:, length:] == 0).all()


@pytest.mark.parametrize(
    "beams,returned,length_penalty,early_stopping", [(2, 1, 1.0, 0), (3, 2, 0.6, 0), (3, 3, 1.2, 1)]
)
@pytest.mark.parametrize("eos", [1, 3])
def test_beam_search(beams, returned, length_penalty, early_stopping, eos):
    vocab = 11
    inputs = {
        "input_ids": RNG.integers(2, vocab, (2, 3)).astype(np.int32),
        "max_length": np.array([8], np.int32),
        "min_length": np.array([5], np.int32),
        "num_beams": np.array([beams], np.int32),
        "num_return_sequences": np.array([returned], np.int32),
        "length_penalty": np.array([length_penalty], np.float32),
        "repetition_penalty": np.array([1.1], np.float32),
    }
    attrs = {
        "decoder": tiny_gpt_decoder(vocab),
        "eos_token_id": eos,
        "pad_token_id": 0,
        "model_type": 0,
        "early_stopping": early_stopping,
    }
    assert_matches_ort("BeamSearch", inputs, ("sequences", "sequences_scores"), **attrs)


def test_attention_share_buffer_flag_without_past():
    # The flag only matters with a past; onnxruntime's CPU kernel runs the node as plain attention.
    inputs = {"input": rand(BATCH, SEQ, HIDDEN), "weights": rand(HIDDEN, 3 * HIDDEN), "bias": rand(3 * HIDDEN)}
    assert_matches_ort("Attention", inputs, ("Y",), num_heads=HEADS, past_present_share_buffer=1)


@pytest.mark.parametrize(
    "x_shape,mask_shape,attrs",
    [
        ((2, 3, 9), (2, 3, 9), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
        ((2, 3, 6, 7), (2, 3, 6, 7), {"kernel_shape": [3, 3], "strides": [1, 2], "pads": [1, 0, 1, 1]}),
        ((2, 3, 6, 7), (1, 2, 6, 7), {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER"}),
        ((1, 2, 4, 5, 3), (1, 2, 4, 5, 3), {"kernel_shape": [2, 3, 2], "strides": [2, 1, 1]}),
    ],
)
def test_maxpool_with_mask(x_shape, mask_shape, attrs):
    """onnxruntime's internal pooling: a 0 in the mask cuts the scan of a window's innermost axis short, and each
    channel reads the mask from (channel * spatial size) % (mask N * mask C) on."""
    mask_rng = np.random.default_rng(31)  # its own generator: the shared one's later draws stay as they were
    mask = (mask_rng.random(mask_shape) > 0.25).astype(np.int32)
    assert_matches_ort("MaxpoolWithMask", {"X": rand(*x_shape), "M": mask}, **attrs)
