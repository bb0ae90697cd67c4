"""Normalizations: onnxruntime's LayerNormalization-1 / SimplifiedLayerNormalization-1 (ai.onnx domain),
SkipLayerNormalization, SkipSimplifiedLayerNormalization, EmbedLayerNormalization, GatedRMSNorm,
BranchwiseRMSNorm and EngramGate (com.microsoft); the ai.onnx composites RMSNormalization,
MeanVarianceNormalization and LpNormalization.

Layer norms become ai.onnx LayerNormalization from opset 17 (computing in float32 for float16 inputs, as
onnxruntime's kernels do), else ReduceMean/Sub/Mul/Sqrt arithmetic in float32; RMS norms are always that
arithmetic (RMSNormalization is an opset-23 operator, itself decomposed by the same function for every target,
and by the version converter below opset 23; LayerNormalization-17 keeps its targets' own forms, HLO having a
fused LayerNorm, and only the version converter's downgrade below 17 uses :func:`layer_norm`).  The optional
statistics outputs are float32.  MeanVarianceNormalization (ONNX's function body, with the variance taken as the
mean of the squared deviations) and LpNormalization are computed in the input type, as ONNX defines them.
"""

from __future__ import annotations

import numpy as np

from ...types import TensorType
from .registry import Emitter, Refusal, decomposes, standard

_WIDE = "float32"  # onnxruntime's statistics type, and the type narrower inputs are normalized in


def _axes(e: Emitter, x, axis: int) -> list[int]:
    rank = e.rank(x)
    if rank is not None:
        return list(range(axis + rank if axis < 0 else axis, rank))
    if axis < 0:
        return list(range(axis, 0))
    raise Refusal(f"axis={axis} needs the input's rank, which is unknown")


def _widen(e: Emitter, x):
    dtype = e.dtype(x)
    return (x, dtype) if dtype in ("float32", "float64") else (e.cast(x, _WIDE), dtype)


def layer_norm(e: Emitter, x, scale, bias, axis: int, epsilon: float, stash_type: int = 1):
    """(normalized, mean, inv_std_dev) of ``x`` over ``axis`` onwards; before opset 17 (the version converter's
    downgrade of LayerNormalization-17 too) ``(x - mean) / sqrt(var + epsilon) * scale + bias``, computed in
    float32 for narrower inputs unless ``stash_type`` is 0."""
    if e.opset >= 17:
        y, mean, inv_std = e(
            "LayerNormalization",
            *([x, scale, bias] if bias is not None else [x, scale]),
            outputs=3,
            axis=axis,
            epsilon=float(epsilon),
            stash_type=stash_type,
        )
        return y, mean, inv_std
    wide, dtype = _widen(e, x) if stash_type == 1 else (x, e.dtype(x))
    work = dtype if wide is x else _WIDE
    axes = _axes(e, x, axis)
    mean = e.reduce("ReduceMean", wide, axes)
    centred = e("Sub", wide, mean)
    variance = e.reduce("ReduceMean", e("Mul", centred, centred), axes)
    inv_std = e("Reciprocal", e("Sqrt", e("Add", variance, e.scalar(epsilon, work))))
    y = e("Mul", centred, inv_std)
    if dtype != work:
        y = e.cast(y, dtype)
    y = e("Mul", y, scale)
    if bias is not None:
        y = e("Add", y, bias)
    return y, mean, inv_std


def layer_normalization_17(e: Emitter):
    """ai.onnx LayerNormalization-17 in older operators: the version converter's downgrade below opset 17."""
    return list(
        layer_norm(
            e,
            e.input(0),
            e.input(1),
            e.input(2),
            int(e.attr("axis", -1)),
            float(e.attr("epsilon", 1e-5)),
            int(e.attr("stash_type", 1)),
        )
    )


def rms_norm(e: Emitter, x, scale, axis: int, epsilon: float, stash_type: int = 1):
    """(normalized, inv_rms) of ``x`` over ``axis`` onwards: ``x / sqrt(mean(x^2) + epsilon) * scale``, computed in
    float32 for narrower inputs unless ``stash_type`` is 0."""
    wide, dtype = _widen(e, x) if stash_type == 1 else (x, e.dtype(x))
    work = dtype if wide is x else _WIDE
    mean_square = e.reduce("ReduceMean", e("Mul", wide, wide), _axes(e, x, axis))
    inv_rms = e("Reciprocal", e("Sqrt", e("Add", mean_square, e.scalar(epsilon, work))))
    y = e("Mul", wide, inv_rms)
    if dtype != work:
        y = e.cast(y, dtype)
    return e("Mul", y, scale), inv_rms


@decomposes("RMSNormalization", domain="", since=23, composite=True)
def rms_normalization_23(e: Emitter):
    """ai.onnx RMSNormalization, decomposed for every target (and the version converter's downgrade below 23)."""
    y, _ = rms_norm(
        e, e.input(0), e.input(1), int(e.attr("axis", -1)), float(e.attr("epsilon", 1e-5)), int(e.attr("stash_type", 1))
    )
    return [y]


def mean_variance(e: Emitter, x, axes, normalize_variance: bool = True):
    """``(x - mean) / (sqrt(variance) + 1e-9)`` over ``axes`` (ONNX's epsilon, outside the square root)."""
    centred = e("Sub", x, e.reduce("ReduceMean", x, axes))
    if not normalize_variance:
        return centred
    variance = e.reduce("ReduceMean", e("Mul", centred, centred), axes)
    return e("Div", centred, e("Add", e("Sqrt", variance), e.scalar(1e-9, e.dtype(x))))


@decomposes("MeanVarianceNormalization", domain="", since=1, composite=True)
def mean_variance_normalization_1(e: Emitter):
    """onnxruntime's version 1: each channel over (N, H, W), or everything with ``across_channels``."""
    axes = [0, 1, 2, 3] if int(e.attr("across_channels", 0)) else [0, 2, 3]
    return [mean_variance(e, e.input(0), axes, bool(int(e.attr("normalize_variance", 1))))]


@decomposes("MeanVarianceNormalization", domain="", since=9, composite=True)
def mean_variance_normalization_9(e: Emitter):
    """ai.onnx MeanVarianceNormalization-9/13 (and the version converter's upgrade to 18, whose function body
    would need ReduceMean-18)."""
    return [mean_variance(e, e.input(0), list(e.attr("axes", [0, 2, 3])))]


@decomposes("LpNormalization", domain="", since=1, composite=True)
def lp_normalization_1(e: Emitter):
    """``x / ||x||_p`` along ``axis`` (p is 1 or 2); a zero vector stays zero (divided by 1, not by 0)."""
    x, axis, p = e.input(0), int(e.attr("axis", -1)), int(e.attr("p", 2))
    if p == 1:
        norm = e.reduce("ReduceSum", e("Abs", x), [axis])
    elif p == 2:
        norm = e("Sqrt", e.reduce("ReduceSum", e("Mul", x, x), [axis]))
    else:
        raise Refusal(f"p={p} is not 1 or 2")
    e.require_opset(9, "LpNormalization's guard against a zero norm (Where)")
    dtype = e.dtype(x)
    zero = e.scalar(0, dtype)
    # Equal takes floats from opset 11; below it, "not above zero" is the same test for a norm (never negative)
    is_zero = e("Equal", norm, zero) if e.opset >= 11 else e("Not", e("Greater", norm, zero))
    return [e("Div", x, e("Where", is_zero, e.scalar(1, dtype), norm))]


@decomposes("LayerNormalization", domain="", since=1)
def layer_normalization_1(e: Emitter):
    return layer_norm(e, e.input(0), e.input(1), e.input(2), e.attr("axis", -1), e.attr("epsilon", 1e-5))


standard("LayerNormalization", since=17)  # ONNX's own, with the same meaning


@decomposes("SimplifiedLayerNormalization", domain="", since=1)
def simplified_layer_normalization_1(e: Emitter):
    y, inv_rms = rms_norm(e, e.input(0), e.input(1), e.attr("axis", -1), e.attr("epsilon", 1e-5))
    return [y, inv_rms]


def _skip_sum(e: Emitter, bias_index: int):
    total = e("Add", e.input(0), e.input(1))
    bias = e.input(bias_index)
    return total if bias is None else e("Add", total, bias)


@decomposes("SkipLayerNormalization")
def skip_layer_normalization(e: Emitter):
    total = _skip_sum(e, 4)
    y, mean, inv_std = layer_norm(e, total, e.input(2), e.input(3), -1, e.attr("epsilon", 1e-12))
    return [y, mean, inv_std, total]


@decomposes("SkipSimplifiedLayerNormalization")
def skip_simplified_layer_normalization(e: Emitter):
    if e.output_used(1):
        raise Refusal("the mean output of an RMS norm is left unwritten by onnxruntime")
    total = _skip_sum(e, 3)
    y, inv_rms = rms_norm(e, total, e.input(2), -1, e.attr("epsilon", 1e-12))
    return [y, None, inv_rms, total]


@decomposes("EmbedLayerNormalization")
def embed_layer_normalization(e: Emitter):
    return embed(e, *(e.input(i) for i in range(9)))


@decomposes("QEmbedLayerNormalization")
def q_embed_layer_normalization(e: Emitter):
    """EmbedLayerNormalization over its tables and norm weights dequantized (DequantizeLinear of each)."""
    ids, segment_ids = e.input(0), e.input(1)
    tables = [
        None if e.input(i) is None else e("DequantizeLinear", e.input(i), e.input(i + 6), e.input(i + 11))
        for i in (2, 3, 4, 5, 6)
    ]
    words, positions, segments, gamma, beta = tables
    y, mask_index, _ = embed(e, ids, segment_ids, words, positions, segments, gamma, beta, e.input(7), None)
    return [y, mask_index]


def embed(e: Emitter, ids, segment_ids, words, positions, segments, gamma, beta, mask, position_ids):
    """(normalized sum of the embeddings, mask_index, the sum) of EmbedLayerNormalization."""
    total = e("Gather", words, ids, axis=0)
    if position_ids is None:  # positions 0..S-1: the first S rows, broadcast over the batch
        seq = e.unsqueeze(e.dim(ids, 1), [0])
        total = e("Add", total, e.slice(positions, [0], seq, [0]))
    else:
        total = e("Add", total, e("Gather", positions, position_ids, axis=0))
    if segment_ids is not None and segments is not None:
        total = e("Add", total, e("Gather", segments, segment_ids, axis=0))
    y, _, _ = layer_norm(e, total, gamma, beta, -1, e.attr("epsilon", 1e-12))
    if mask is not None:  # each sequence's end position: what Attention reads from a 1-D mask_index
        mask_index = e.cast(e.reduce("ReduceSum", e.cast(mask, "int64"), [1], keepdims=0), "int32")
    elif e.output_used(1):
        mask_index = e("ConstantOfShape", e.slice(e("Shape", ids), [0], [1], [0]), value=np.zeros(1, np.int32))
    else:
        mask_index = None
    batch = e.leading_dim(ids)
    if mask_index is not None:  # typed, so that the Attention after it knows a (batch,) vector of end positions
        mask_index.type = TensorType("int32", (batch,))
    y.type = TensorType(e.dtype(words), (batch, None, None))
    return [y, mask_index, total]


def _grouped(e: Emitter, x, last_dims: list[int]):
    """``x`` with its last axis split into ``last_dims`` (one may be -1)."""
    leading = e.slice(e("Shape", x), [0], [-1], [0])
    return e("Reshape", x, e("Concat", leading, e.ints(last_dims), axis=0))


def _rms_float32(e: Emitter, x, epsilon: float):
    """``x / sqrt(mean(x ** 2) + eps)`` over the last axis, in float32 (float64 stays), as the kernels compute."""
    wide, _ = _widen(e, x)
    mean_square = e.reduce("ReduceMean", e("Mul", wide, wide), [-1])
    return e("Div", wide, e("Sqrt", e("Add", mean_square, e.scalar(epsilon, e.dtype(wide)))))


_GATES = {
    "silu": lambda e, g: e("Mul", g, e("Sigmoid", g)),
    "swish": lambda e, g: e("Mul", g, e("Sigmoid", g)),
    "sigmoid": lambda e, g: e("Sigmoid", g),
}


@decomposes("GatedRMSNorm")
def gated_rms_norm(e: Emitter):
    """RMS norm of each group of ``len(scale)`` elements of the last axis, times scale and the activated gate,
    all in float32, rounded to the input type once at the end."""
    x, scale, gate = e.input(0), e.input(1), e.input(2)
    activation = e.attr("activation", "silu")
    if activation not in _GATES:
        raise Refusal(f"activation {activation!r}")
    shape = e.static_shape(scale)
    if shape is None:
        raise Refusal("the size of scale (the group size) is unknown")
    dtype = e.dtype(x)
    y = e(
        "Mul",
        _rms_float32(e, _grouped(e, x, [-1, int(np.prod(shape))]), float(e.attr("epsilon", 1e-5))),
        e("Reshape", _widen(e, scale)[0], e.ints([-1])),
    )
    gated = _GATES[activation](e, e("Reshape", _widen(e, gate)[0], e("Shape", y)))
    out = e("Reshape", e("Mul", y, gated), e("Shape", x))
    return [out if dtype in ("float32", "float64") else e.cast(out, dtype)]


@decomposes("BranchwiseRMSNorm")
def branchwise_rms_norm(e: Emitter):
    """Each of the C branches ``(..., C, H)`` (or ``(..., C * H)`` with ``num_branches`` = C) RMS-normalized on
    its own in float32, times scale (``(H,)``, or one row per branch)."""
    x, scale = e.input(0), e.input(1)
    branches = int(e.attr("num_branches", 0) or 0)
    last = e.last_dim(x)
    if last is None:
        raise Refusal("the size of the last axis is unknown")
    hidden = last // branches if branches else last
    dtype = e.dtype(x)
    grouped = _grouped(e, x, [branches, hidden]) if branches else x
    y = _rms_float32(e, grouped, float(e.attr("epsilon", 1e-5)))
    if scale is not None:
        shape = e.static_shape(scale)
        if shape is None:
            raise Refusal("the shape of scale is unknown")
        wide_scale = e.cast(scale, e.dtype(y)) if e.dtype(scale) != e.dtype(y) else scale
        y = e("Mul", y, e("Reshape", wide_scale, e.ints([-1] if int(np.prod(shape)) == hidden else [-1, hidden])))
    if branches:
        y = e("Reshape", y, e("Shape", x))
    return [y if dtype == e.dtype(y) else e.cast(y, dtype)]


@decomposes("EngramGate")
def engram_gate(e: Emitter):
    """``gate * value`` per hyper-connection, ``gate = Sigmoid(Sign(d) Sqrt(Max(|d|, 1e-6)))`` with
    ``d = ReduceSum(RMSNorm(key) * RMSNorm(query)) / sqrt(hidden)``, all in float32; the second output
    RMS-normalizes the gated value again."""
    key, query, value, key_scale, query_scale, conv_scale = (e.input(i) for i in range(6))
    e.require_opset(11, "Unsqueeze of a negative axis")
    hidden = e.last_dim(key)
    if hidden is None:
        raise Refusal("the size of the last axis of key is unknown")
    epsilon = float(e.attr("epsilon", 1e-5))
    dtype = e.dtype(value)

    def normed(x, scale):
        return e("Mul", _rms_float32(e, x, epsilon), _widen(e, scale)[0])

    dot = e(
        "Div",
        e.reduce("ReduceSum", e("Mul", normed(key, key_scale), normed(query, query_scale)), [-1]),
        e.scalar(float(np.float32(np.sqrt(hidden))), "float32"),
    )
    magnitude = e("Sqrt", e("Max", e("Abs", dot), e.scalar(1e-6, "float32")))
    gate = e("Sigmoid", e("Mul", e("Sign", dot), magnitude))
    gated = e("Mul", gate, e.unsqueeze(_widen(e, value)[0], [-2]))

    def narrowed(y):
        return y if dtype in ("float32", "float64") else e.cast(y, dtype)

    if not e.output_used(1):
        return [narrowed(gated)]
    if conv_scale is None:
        raise Refusal("the gated_value_normed output needs conv_norm_scale")
    return [narrowed(gated), narrowed(normed(gated, conv_scale))]
