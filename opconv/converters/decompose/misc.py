"""Small operators of onnxruntime with a standard counterpart or a one-line formula: com.microsoft Range, Trilu,
GatherND, ExpandDims, MatMulInteger16, Pad, GridSample, Unique, NhwcMaxPool, ConvTransposeWithDynamicPads,
SampleOp, ScaledSiLU, GatedAdd, CDist, UnfoldTensor, HyperConnectionPreMix/PostMix, CropAndResize, MurmurHash3,
WordConvEmbedding, NGramRepeatBlock, LinearAttentionGate, CausalConvWithState, and its ai.onnx-domain Affine,
ScaledTanh, ParametricSoftplus, Scale,
ImageScaler, DynamicSlice, ThresholdedRelu-1 (ONNX's experimental operators, which onnxruntime keeps)."""

from __future__ import annotations

import numpy as np

from .registry import Emitter, Refusal, decomposes, standard


@decomposes("Range")
def range_ms(e: Emitter):
    e.require_opset(11, "Range")
    start, limit, delta = e.input(0), e.input(1), e.input(2)
    if delta is None:
        delta = e.scalar(1, e.dtype(start))
    return [e("Range", start, limit, delta)]


@decomposes("Trilu")
def trilu_ms(e: Emitter):
    e.require_opset(14, "Trilu")
    return [e("Trilu", *[v for v in (e.input(0), e.input(1)) if v is not None], upper=int(e.attr("upper", 1)))]


@decomposes("GatherND")
def gather_nd_ms(e: Emitter):
    e.require_opset(11, "GatherND")
    return [e("GatherND", e.input(0), e.cast(e.input(1), "int64"))]


@decomposes("ExpandDims")
def expand_dims(e: Emitter):
    axis = e.input(1)
    if axis.const is None:
        raise Refusal("the axis must be a constant")
    return [e.unsqueeze(e.input(0), [int(axis.const.numpy().reshape(-1)[0])])]


@decomposes("MatMulInteger16")
def matmul_integer_16(e: Emitter):
    # int16 x int16 products summed in int32, as onnxruntime's kernel does
    return [e("MatMul", e.cast(e.input(0), "int32"), e.cast(e.input(1), "int32"))]


def _scaled(e: Emitter, x, factor: float):
    return x if factor == 1.0 else e("Mul", x, e.scalar(factor, e.dtype(x)))


@decomposes("Affine", domain="")
def affine(e: Emitter):
    x = e.input(0)
    return [e("Add", _scaled(e, x, float(e.attr("alpha", 1.0))), e.scalar(float(e.attr("beta", 0.0)), e.dtype(x)))]


@decomposes("ScaledTanh", domain="")
def scaled_tanh(e: Emitter):
    x = e.input(0)
    return [_scaled(e, e("Tanh", _scaled(e, x, float(e.attr("beta", 1.0)))), float(e.attr("alpha", 1.0)))]


@decomposes("ParametricSoftplus", domain="")
def parametric_softplus(e: Emitter):
    x = e.input(0)
    return [_scaled(e, e("Softplus", _scaled(e, x, float(e.attr("beta", 1.0)))), float(e.attr("alpha", 1.0)))]


@decomposes("Scale", domain="")
def scale(e: Emitter):
    return [_scaled(e, e.input(0), float(e.attr("scale", 1.0)))]


@decomposes("ImageScaler", domain="")
def image_scaler(e: Emitter):
    x = e.input(0)
    bias = np.asarray(e.attr("bias", []) or [], np.dtype(e.dtype(x)))
    y = _scaled(e, x, float(e.attr("scale", 1.0)))
    return [y if bias.size == 0 else e("Add", y, e.const(bias.reshape(-1, 1, 1)))]


@decomposes("ThresholdedRelu", domain="")
def thresholded_relu_1(e: Emitter):
    x = e.input(0)
    kept = e.cast(e("Greater", x, e.scalar(float(e.attr("alpha", 1.0)), e.dtype(x))), e.dtype(x))
    return [e("Mul", x, kept)]


standard("ThresholdedRelu", since=10)  # ONNX's, with the same meaning


@decomposes("DynamicSlice", domain="")
def dynamic_slice(e: Emitter):
    bounds = [e.input(i) for i in range(1, 4)]
    if e.opset >= 10:
        return [e("Slice", e.input(0), *[v for v in bounds if v is not None])]
    if any(v is not None and v.const is None for v in bounds):
        raise Refusal("bounds computed at run time need ai.onnx opset 10 (Slice with inputs)")
    starts, ends, axes = (None if v is None else v.const.numpy().astype(np.int64).tolist() for v in bounds)
    return [e("Slice", e.input(0), starts=starts, ends=ends, axes=axes)]


@decomposes("Pad")
def pad_ms(e: Emitter):
    e.require_opset(11, "Pad with pads as an input")
    x, pads, value = e.input(0), e.input(1), e.input(2)
    extra = [] if value is None else [e("Reshape", value, e.ints([]))]  # onnxruntime's may be [1]
    return [e("Pad", x, e("Reshape", e.cast(pads, "int64"), e.ints([-1])), *extra, mode=e.attr("mode", "constant"))]


@decomposes("GridSample")
def grid_sample_ms(e: Emitter):
    e.require_opset(16, "GridSample")
    mode, padding = e.attr("mode", "bilinear"), e.attr("padding_mode", "zeros")
    if mode == "bicubic" and padding == "border":
        raise Refusal("bicubic with border padding clamps its taps, not its sample position, unlike ONNX's")
    if e.opset >= 20:
        mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    return [
        e(
            "GridSample",
            e.input(0),
            e.input(1),
            mode=mode,
            padding_mode=padding,
            align_corners=int(e.attr("align_corners", 0)),
        )
    ]


@decomposes("Unique")
def unique_ms(e: Emitter):
    e.require_opset(11, "Unique")
    # values in order of first appearance, each element's position among them, the counts
    values, _, inverse, counts = e("Unique", e.input(0), outputs=4, sorted=0)
    return [values, inverse, counts]


@decomposes("NhwcMaxPool")
def nhwc_max_pool(e: Emitter):
    x = e.input(0)
    rank = e.rank(x)
    if rank is None:
        raise Refusal("the rank of the input is unknown")
    if e.dtype(x) in ("int8", "uint8"):
        e.require_opset(12, "MaxPool of 8-bit integers")
    attrs = e.copy_attrs(["auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides"])
    channels_first = e("Transpose", x, perm=[0, rank - 1, *range(1, rank - 1)])
    pooled = e("MaxPool", channels_first, **attrs)
    return [e("Transpose", pooled, perm=[0, *range(2, rank), 1])]


@decomposes("ConvTransposeWithDynamicPads")
def conv_transpose_with_dynamic_pads(e: Emitter):
    x, w, pads, bias = (e.input(i) for i in range(4))
    if pads is not None and pads.const is None:
        raise Refusal("pads computed at run time (ConvTranspose takes them as an attribute)")
    attrs = e.copy_attrs(["auto_pad", "dilations", "group", "kernel_shape", "output_padding", "strides"])
    if pads is not None:
        attrs["pads"] = [int(p) for p in pads.const.numpy().reshape(-1)]
    return [e("ConvTranspose", x, w, *([bias] if bias is not None else []), **attrs)]


@decomposes("SampleOp")
def sample_op(e: Emitter):
    return [e("Identity", e.input(0))]  # onnxruntime's example kernel: an echo


@decomposes("ScaledSiLU")
def scaled_silu(e: Emitter):
    # z = scale * x, then z * sigmoid(z), each rounded to the input type (as the schema says: separate nodes do)
    x, scale_input = e.input(0), e.input(1)
    dtype = e.dtype(x)
    if scale_input is None:
        z = e("Mul", x, e.scalar(float(e.attr("alpha", 1.0)), dtype))
    elif e.dtype(scale_input) == dtype:
        z = e("Mul", x, scale_input)
    else:  # a scale of another type: the product in float32, then rounded to the input's
        z = e.cast(e("Mul", e.cast(x, "float32"), e.cast(scale_input, "float32")), dtype)
    return [e("Mul", z, e("Sigmoid", z))]


@decomposes("GatedAdd")
def gated_add(e: Emitter):
    if e.input(3) is not None:
        raise Refusal("gate_weight (projected gates) has no CPU kernel in onnxruntime to match")
    return [e("Add", e.input(0), e("Mul", e.input(1), e.input(2)))]


@decomposes("CDist")
def cdist(e: Emitter):
    metric = e.attr("metric", "sqeuclidean")
    if metric not in ("sqeuclidean", "euclidean"):
        raise Refusal(f"metric {metric!r}")
    a, b = e.input(0), e.input(1)
    difference = e("Sub", e.unsqueeze(a, [1]), e.unsqueeze(b, [0]))  # (N, M, K)
    squared = e.reduce("ReduceSum", e("Mul", difference, difference), [2], keepdims=0)
    return [e("Sqrt", squared) if metric == "euclidean" else squared]


@decomposes("UnfoldTensor")
def unfold_tensor(e: Emitter):
    """The windows of ``size`` every ``step`` along ``dim``: a Gather of the windows' positions (a constant, so
    the dim's size must be known), whose window axis then moves last."""
    x = e.input(0)
    rank = e.rank(x)
    if rank is None:
        raise Refusal("the rank of the input is unknown")
    axis = int(e.attr("dim", -1)) % rank
    shape = x.const.shape if x.const is not None else x.shape
    length = shape[axis]
    if not isinstance(length, (int, np.integer)):
        raise Refusal(f"the size of axis {axis} is unknown")
    size, step = int(e.attr("size")), int(e.attr("step", 1))
    starts = np.arange(0, int(length) - size + 1, step, dtype=np.int64)
    windows = e("Gather", x, e.const(starts[:, None] + np.arange(size, dtype=np.int64)), axis=axis)
    if axis == rank - 1:
        return [windows]
    perm = [*range(axis + 1), *range(axis + 2, rank + 1), axis + 1]
    return [e("Transpose", windows, perm=perm)]


# hyper-connections: C residual streams, grouped (..., C, H) or flattened (..., C * H) when num_branches gives C;
# computed in float32 (float64 stays), rounded to the streams' type once


def _wide(e: Emitter, x):
    return x if e.dtype(x) in ("float32", "float64") else e.cast(x, "float32")


def _streams(e: Emitter, streams, branches: int):
    """(streams as (..., C, H) in the wide type, C, H)."""
    rank, last = e.rank(streams), e.last_dim(streams)
    if rank is None or last is None:
        raise Refusal("the rank and last dim of the streams must be known")
    wide = _wide(e, streams)
    if branches:
        leading = e.slice(e("Shape", streams), [0], [-1], [0])
        return (
            e("Reshape", wide, e("Concat", leading, e.ints([branches, last // branches]), axis=0)),
            branches,
            last // branches,
        )
    shape = streams.const.shape if streams.const is not None else streams.shape
    if not isinstance(shape[-2], (int, np.integer)):
        raise Refusal("the number of streams is unknown")
    return wide, int(shape[-2]), last


def _per_stream(e: Emitter, gates, grouped_rank: int, channels: int, features: int):
    """Gates (..., C), (..., C, 1), (..., C, H) or (..., C * H) as (..., C, 1 or H)."""
    rank, last = e.rank(gates), e.last_dim(gates)
    if rank is None or last is None:
        raise Refusal("the rank and last dim of the gates must be known")
    gates = _wide(e, gates)
    if rank == grouped_rank - 1 and last == channels:
        return e.unsqueeze(gates, [rank])
    if rank == grouped_rank - 1:
        leading = e.slice(e("Shape", gates), [0], [-1], [0])
        return e("Reshape", gates, e("Concat", leading, e.ints([channels, features]), axis=0))
    return gates


def _narrowed(e: Emitter, y, like):
    return y if e.dtype(like) == e.dtype(y) else e.cast(y, e.dtype(like))


@decomposes("HyperConnectionPreMix")
def hyper_connection_pre_mix(e: Emitter):
    streams = e.input(0)
    x, channels, features = _streams(e, streams, int(e.attr("num_branches", 0) or 0))
    rank = (e.rank(streams) or 0) + (1 if e.attr("num_branches") else 0)
    mixed = e.reduce("ReduceSum", e("Mul", x, _per_stream(e, e.input(1), rank, channels, features)), [-2], keepdims=0)
    scaled = e("Mul", mixed, e.scalar(float(e.attr("reduction_scale", 1.0)), e.dtype(mixed)))
    return [_narrowed(e, scaled, streams)]


@decomposes("HyperConnectionPostMix")
def hyper_connection_post_mix(e: Emitter):
    streams, block_output, post_mix, stream_mix = (e.input(i) for i in range(4))
    x, channels, features = _streams(e, streams, int(e.attr("num_branches", 0) or 0))
    rank = (e.rank(streams) or 0) + (1 if e.attr("num_branches") else 0)
    if stream_mix is not None:  # sum over c of stream_mix[..., c, k] * x[..., c, :]
        x = e("MatMul", e("Transpose", _wide(e, stream_mix), perm=[*range(rank - 2), rank - 1, rank - 2]), x)
    added = e(
        "Mul", _per_stream(e, post_mix, rank, channels, features), e.unsqueeze(_wide(e, block_output), [rank - 2])
    )
    y = e("Add", x, added)
    if e.attr("num_branches"):
        y = e("Reshape", y, e("Shape", streams))
    return [_narrowed(e, y, streams)]


@decomposes("CropAndResize")
def crop_and_resize(e: Emitter):
    """Each box ``(y1, x1, y2, x2)`` (normalized) of image ``batch_indices[i]`` sampled on a ``crop_size`` grid
    (from start to end inclusive; one sample sits in the middle) in pixel coordinates: the image rows, then
    columns, picked with GatherElements, interpolated bilinearly (or the nearest, half away from zero), and
    ``extrapolation_value`` where a sample falls outside the image."""
    x, rois, batch_indices, crop_size = (e.input(i) for i in range(4))
    mode = e.attr("mode", "bilinear")
    if mode not in ("bilinear", "nearest"):
        raise Refusal(f"mode {mode!r}")
    shape = e.static_shape(x)
    if shape is None or len(shape) != 4 or crop_size is None or crop_size.const is None:
        raise Refusal("the image shape and crop_size must be known")
    e.require_opset(11, "GatherElements")
    _, channels, height, width = shape
    crop_h, crop_w = (int(v) for v in crop_size.const.numpy().reshape(-1)[:2])
    dtype = e.dtype(x)
    y1, x1, y2, x2 = e.split(rois, [1, 1, 1, 1], axis=1)  # (R, 1) each
    images = e("Gather", x, e.cast(batch_indices, "int64"), axis=0)  # (R, C, H, W)

    def positions(start, end, count: int, size: int):
        if count == 1:
            middle = e("Mul", e("Add", start, end), e.scalar(0.5, dtype))
        else:
            steps = e.const((np.arange(count) / (count - 1)).astype(dtype)[None, :])
            middle = e("Add", start, e("Mul", e("Sub", end, start), steps))
        return e("Mul", middle, e.scalar(size - 1, dtype))  # (R, count)

    ys, xs = positions(y1, y2, crop_h, height), positions(x1, x2, crop_w, width)
    inside = e("And", e.unsqueeze(_within(e, ys, height - 1), [1, 3]), e.unsqueeze(_within(e, xs, width - 1), [1, 2]))

    def picked(rows, columns):
        """images[r, :, rows[r, i], columns[r, j]] as (R, C, crop_h, crop_w)."""
        by_row = e(
            "GatherElements",
            images,
            e("Expand", e.unsqueeze(rows, [1, 3]), e.ints([1, channels, crop_h, width])),
            axis=2,
        )
        return e(
            "GatherElements",
            by_row,
            e("Expand", e.unsqueeze(columns, [1, 2]), e.ints([1, channels, crop_h, crop_w])),
            axis=3,
        )

    def index(v, size: int, rounding: str):
        rounded = e("Floor", v if rounding == "floor" else e("Add", v, e.scalar(0.5, dtype)))
        return e.cast(e("Clip", rounded, e.scalar(0, dtype), e.scalar(size - 1, dtype)), "int64")

    if mode == "nearest":  # inside points are >= 0: half away from zero is floor(v + 0.5)
        values = picked(index(ys, height, "half"), index(xs, width, "half"))
    else:
        y0, x0 = index(ys, height, "floor"), index(xs, width, "floor")
        y_next = e("Min", e("Add", y0, e.ints(1)), e.ints(height - 1))
        x_next = e("Min", e("Add", x0, e.ints(1)), e.ints(width - 1))
        dy = e.unsqueeze(e("Sub", ys, e.cast(y0, dtype)), [1, 3])
        dx = e.unsqueeze(e("Sub", xs, e.cast(x0, dtype)), [1, 2])
        one = e.scalar(1.0, dtype)

        def across(row):
            return e("Add", e("Mul", picked(row, x0), e("Sub", one, dx)), e("Mul", picked(row, x_next), dx))

        values = e("Add", e("Mul", across(y0), e("Sub", one, dy)), e("Mul", across(y_next), dy))
    return [e("Where", inside, values, e.scalar(float(e.attr("extrapolation_value", 0.0)), dtype))]


def _within(e: Emitter, v, last: int):
    """``0 <= v <= last`` element-wise (false for NaN from opset 12, where the comparisons exist)."""
    low, high = e.scalar(0, e.dtype(v)), e.scalar(last, e.dtype(v))
    if e.opset >= 12:
        return e("And", e("GreaterOrEqual", v, low), e("LessOrEqual", v, high))
    return e("And", e("Not", e("Less", v, low)), e("Not", e("Greater", v, high)))


@decomposes("MurmurHash3")
def murmur_hash3(e: Emitter):
    """MurmurHash3 (x86, 32 bits) of each 4-byte key (int32/uint32): the one-block hash in uint32 arithmetic,
    whose products and sums wrap as the algorithm's do, with BitShift/BitwiseOr rotations."""
    x = e.input(0)
    if e.dtype(x) not in ("int32", "uint32"):
        raise Refusal(f"keys of {e.dtype(x)} (only 4-byte integer keys are decomposed)")
    e.require_opset(18, "BitwiseXor and BitwiseOr")

    def u32(v):
        return e.const(np.uint32(v))

    def rotl(v, r: int):
        return e(
            "BitwiseOr", e("BitShift", v, u32(r), direction="LEFT"), e("BitShift", v, u32(32 - r), direction="RIGHT")
        )

    def fold(h, shift: int):
        return e("BitwiseXor", h, e("BitShift", h, u32(shift), direction="RIGHT"))

    k = e("Mul", rotl(e("Mul", e.cast(x, "uint32"), u32(0xCC9E2D51)), 15), u32(0x1B873593))
    h = rotl(e("BitwiseXor", u32(int(e.attr("seed", 0)) & 0xFFFFFFFF), k), 13)
    h = e("BitwiseXor", e("Add", e("Mul", h, u32(5)), u32(0xE6546B64)), u32(4))  # then the key's length
    h = fold(e("Mul", fold(e("Mul", fold(h, 16), u32(0x85EBCA6B)), 13), u32(0xC2B2AE35)), 16)
    return [h if int(e.attr("positive", 1)) else e.cast(h, "int32")]


@decomposes("WordConvEmbedding")
def word_conv_embedding(e: Emitter):
    """Each word (a row of char ids, 0-padded) -> the max over its windows of ``tanh(conv(char embeddings) + B)``:
    the convolution as one MatMul per window offset over every window of the padded row, then a max over the
    windows a word has (its first ``max(nonzero ids, window)`` ids hold them; a word starting with id 0 gives
    zeros, as opconv's kernel: onnxruntime's skips it, leaving its output unwritten)."""
    sequence, w, b, c = (e.input(i) for i in range(4))
    seq_shape, w_shape = e.static_shape(sequence), e.static_shape(w)
    if seq_shape is None or w_shape is None:
        raise Refusal("the shapes of Sequence and W must be known")
    e.require_opset(13, "ReduceSum with axes as an input")
    length, embedding = seq_shape[-1], w_shape[0]
    window = int(e.attr("conv_window_size", 0) or 0) or w_shape[2]
    if length < window:
        raise Refusal(f"words of {length} chars are shorter than the window ({window})")
    dtype = e.dtype(c)
    words = e("Reshape", e.cast(sequence, "int64"), e.ints([-1, length]))
    embedded = e("Gather", c, words, axis=0)  # (words, length, char_embedding)
    kernel = e("Reshape", w, e.ints([embedding, window, -1]))  # (embedding, window, char_embedding)
    count = length - window + 1
    conv = None
    for offset in range(window):
        rows = e.slice(embedded, [offset], [offset + count], [1])
        taps = e("Transpose", e("Gather", kernel, e.const(np.int64(offset)), axis=1), perm=[1, 0])
        term = e("MatMul", rows, taps)  # (words, count, embedding)
        conv = term if conv is None else e("Add", conv, term)
    activated = e("Tanh", e("Add", conv, b))
    chars = e.reduce("ReduceSum", e.cast(e("Not", e("Equal", words, e.const(np.int64(0)))), "int64"), [1])
    windows_kept = e("Max", e("Sub", chars, e.const(np.int64(window - 1))), e.const(np.int64(1)))  # (words, 1)
    kept = e.unsqueeze(e("Less", e.const(np.arange(count, dtype=np.int64)[None, :]), windows_kept), [2])
    lowest = e.scalar(float(np.finfo(np.dtype(dtype)).min), dtype)
    best = e.reduce("ReduceMax", e("Where", kept, activated, lowest), [1], keepdims=0)
    has_chars = e("Not", e("Equal", e.slice(words, [0], [1], [1]), e.const(np.int64(0))))  # (words, 1)
    out = e("Where", has_chars, best, e.scalar(0.0, dtype))
    return [e("Reshape", out, e.ints(list(seq_shape[:-1]) + [embedding]))]


@decomposes("NGramRepeatBlock")
def ngram_repeat_block(e: Emitter):
    """A token that would repeat an n-gram already in the sequence gets a score of -inf: every (n-1)-gram of the
    ids (a Gather of constant window positions) equal to the last n-1 ids bans the id that followed it, written
    with ScatterElements' min (an unbanned position's update is +inf), so repeated bans agree."""
    ids, scores = e.input(0), e.input(1)
    shape = e.static_shape(ids)
    if shape is None or len(shape) != 2:
        raise Refusal("the shape of input_ids must be known")
    length, n = shape[1], int(e.attr("ngram_size", 0) or 0)
    if n < 1 or length + 1 < n:
        return [e("Identity", scores)]
    e.require_opset(18, "ScatterElements with reduction='min'")
    dtype = e.dtype(scores)
    starts = np.arange(length - n + 1, dtype=np.int64)
    followers = e("Gather", ids, e.const(starts + n - 1), axis=1)  # (B, windows): the id after each (n-1)-gram
    if n == 1:  # the empty prefix matches everywhere: every id in the sequence is banned
        banned = e("Expand", e.scalar(-np.inf, dtype), e("Shape", followers))
    else:
        grams = e("Gather", ids, e.const(starts[:, None] + np.arange(n - 1, dtype=np.int64)), axis=1)
        prefix = e.unsqueeze(e.slice(ids, [length - n + 1], [length], [1]), [1])  # (B, 1, n-1)
        differing = e.reduce("ReduceMax", e.cast(e("Not", e("Equal", grams, prefix)), "int32"), [2], keepdims=0)
        banned = e("Where", e.cast(differing, "bool"), e.scalar(np.inf, dtype), e.scalar(-np.inf, dtype))
    return [e("ScatterElements", scores, followers, banned, axis=1, reduction="min")]


@decomposes("LinearAttentionGate")
def linear_attention_gate(e: Emitter):
    """``decay = decay_scale * Softplus(a + dt_bias)`` and ``beta = Sigmoid(b)``, in float32, rounded once."""
    a, dt_bias, decay_scale, b = (e.input(i) for i in range(4))
    dtype = e.dtype(a)

    def wide(v):
        return v if e.dtype(v) == "float32" else e.cast(v, "float32")

    def narrow(v):
        return v if dtype == "float32" else e.cast(v, dtype)

    decay = narrow(e("Mul", wide(decay_scale), e("Softplus", e("Add", wide(a), wide(dt_bias)))))
    return [decay, None if b is None else narrow(e("Sigmoid", wide(b)))]


@decomposes("CausalConvWithState")
def causal_conv_with_state(e: Emitter):
    """The state (zeros by default) followed by the input, a depthwise Conv of the whole kernel over it (+ bias,
    SiLU when asked); the new state is the last ``k - 1`` steps of that sequence.  ``channels_last`` inputs and
    states are transposed around it.  The attributes of onnxruntime's newer forms (dilation, ndim, windows,
    offsets) must keep their defaults."""
    x, weight, bias, past = (e.input(i) for i in range(4))
    defaults = {
        "dilation": 1,
        "ndim": 1,
        "state_window": 0,
        "state_update_capacity": 0,
        "state_length": 0,
        "input_channels": 0,
        "input_channel_offset": 0,
        "state_channels_last": -1,
    }
    changed = [name for name, default in defaults.items() if e.attr(name, default) not in (None, default)]
    if changed:
        raise Refusal(f"{', '.join(changed)} other than the default")
    activation = str(e.attr("activation", "none")).lower()
    if activation not in ("none", "silu", "swish"):
        raise Refusal(f"activation {activation!r}")
    shape = e.static_shape(weight)
    if shape is None or len(shape) != 3:
        raise Refusal("the weight's shape must be known")
    channels, kernel = shape[0], shape[2]
    if kernel < 2:
        raise Refusal("a kernel of one step carries no state")
    channels_last = bool(e.attr("channels_last", 0))
    if channels_last:
        x = e("Transpose", x, perm=[0, 2, 1])
        past = None if past is None else e("Transpose", past, perm=[0, 2, 1])
    if past is None:
        batch = e.slice(e("Shape", x), [0], [1], [0])
        past = e("Expand", e.scalar(0.0, e.dtype(x)), e("Concat", batch, e.ints([channels, kernel - 1]), axis=0))
    sequence = e("Concat", past, x, axis=2)
    y = e("Conv", sequence, weight, *([bias] if bias is not None else []), group=channels, kernel_shape=[kernel])
    if activation != "none":
        y = e("Mul", y, e("Sigmoid", y))
    state = e.slice(sequence, [-(kernel - 1)], [np.iinfo(np.int64).max], [2])
    if channels_last:
        y, state = e("Transpose", y, perm=[0, 2, 1]), e("Transpose", state, perm=[0, 2, 1])
    return [y, state]
