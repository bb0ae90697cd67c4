"""Neural-network ONNX ops: convolution, pooling, normalization, matrix products, softmax."""

from __future__ import annotations

import numpy as np

from ..lowering import lower
from ..rewrite import reduce_axes
from ._common import (
    Refuse,
    attr,
    const,
    const_input,
    i64,
    np_dtype,
    ov,
    rank_of,
    static_shape,
    text_attr,
)

# ONNX auto_pad -> opset1 auto_pad ("NOTSET" means the explicit `pads`).
AUTO_PAD = {"NOTSET": "explicit", "SAME_UPPER": "same_upper", "SAME_LOWER": "same_lower", "VALID": "valid"}


def window_attrs(node, spatial: int) -> dict:
    """strides / pads_begin / pads_end / auto_pad of a Conv or pooling node with ``spatial`` dims."""
    auto = text_attr(node, "auto_pad", "NOTSET")
    if auto not in AUTO_PAD:
        raise Refuse(f"auto_pad={auto!r} is not an ONNX padding mode")
    pads = list(attr(node, "pads", [0] * (2 * spatial)))
    if len(pads) != 2 * spatial:
        raise Refuse(f"pads has {len(pads)} values for {spatial} spatial dims")
    if auto != "NOTSET":
        pads = [0] * (2 * spatial)  # OpenVINO computes them; the attributes must still be present
    return dict(
        strides=list(attr(node, "strides", [1] * spatial)),
        pads_begin=pads[:spatial],
        pads_end=pads[spatial:],
        auto_pad=AUTO_PAD[auto],
    )


# ---------------------------------------------------------------------------
# Convolution
# ---------------------------------------------------------------------------


@lower("onnx", "openvino", "Conv", inputs=(2, 3), names=("x", "w", "bias"))
def _conv(b, m):
    x, w = m["x"], m["w"]
    node = m.root
    w_rank = rank_of(w)
    spatial = w_rank - 2
    group = int(attr(node, "group", 1))
    window = window_attrs(node, spatial)
    window["dilations"] = list(attr(node, "dilations", [1] * spatial))
    if group == 1:
        y = ov(b, "Convolution", x, w, **window)
    else:
        w_shape = static_shape(w)
        out_channels = w_shape[0]
        if out_channels % group:
            raise Refuse(f"{out_channels} output channels do not divide into {group} groups")
        grouped_shape = (group, out_channels // group) + tuple(w_shape[1:])
        data = m.constant("w")
        grouped = (
            b.const(np.asarray(data).reshape(grouped_shape), f"{w.name}/grouped")
            if data is not None
            else ov(b, "Reshape", w, i64(b, grouped_shape, "grouped_shape"), special_zero=False)
        )
        y = ov(b, "GroupConvolution", x, grouped, **window)
    bias = m.values.get("bias")
    if bias is None:
        return y
    return ov(b, "Add", y, _channel_vector(b, m, "bias", w_rank), auto_broadcast="numpy")


def _channel_vector(b, m, name: str, rank: int):
    """A per-channel vector reshaped to [1, C, 1, ...] so that it broadcasts over NC[spatial]."""
    data = m.constant(name)
    shape = [1, -1] + [1] * (rank - 2)
    if data is not None:
        return b.const(np.asarray(data).reshape(shape), f"{m[name].name}/reshaped")
    return ov(b, "Reshape", m[name], i64(b, shape), special_zero=False)


@lower("onnx", "openvino", "ConvTranspose", inputs=(2, 3), names=("x", "w", "bias"))
def _conv_transpose(b, m):
    x, w = m["x"], m["w"]
    node = m.root
    w_shape = static_shape(w)
    spatial = len(w_shape) - 2
    window = window_attrs(node, spatial)
    window["dilations"] = list(attr(node, "dilations", [1] * spatial))
    window["output_padding"] = list(attr(node, "output_padding", [0] * spatial))
    output_shape = attr(node, "output_shape")
    if output_shape is not None or window["auto_pad"] != "explicit":
        _transposed_pads(node, window, static_shape(x)[2:], w_shape[2:], output_shape)
    group = int(attr(node, "group", 1))
    if group == 1:
        y = ov(b, "ConvolutionBackpropData", x, w, **window)
    else:
        if w_shape[0] % group:
            raise Refuse(f"{w_shape[0]} input channels do not divide into {group} groups")
        grouped = ov(
            b,
            "Reshape",
            w,
            i64(b, (group, w_shape[0] // group) + tuple(w_shape[1:]), "grouped_shape"),
            special_zero=False,
        )
        y = ov(b, "GroupConvolutionBackpropData", x, grouped, **window)
    bias = m.values.get("bias")
    if bias is None:
        return y
    return ov(b, "Add", y, _channel_vector(b, m, "bias", len(w_shape)), auto_broadcast="numpy")


def _transposed_pads(node, window: dict, sizes, kernel, output_shape) -> None:
    """Explicit pads for a ConvTranspose sized by ``output_shape`` or SAME auto_pad, by ONNX's formula:
    the total padding is what the full transposed output exceeds the wanted size by; SAME_UPPER puts the
    smaller half first, the other modes the larger."""
    strides, dilations, extra = window["strides"], window["dilations"], window["output_padding"]
    if output_shape is None:
        output_shape = [n * s for n, s in zip(sizes, strides)]  # SAME: the input size times the stride
    output_shape = list(output_shape)[-len(sizes) :]
    upper = attr(node, "auto_pad", "NOTSET") in ("SAME_UPPER", b"SAME_UPPER")
    begin, end, padding = [], [], []
    for n, k, s, d, e, out in zip(sizes, kernel, strides, dilations, extra, output_shape):
        total = s * (n - 1) + e + (k - 1) * d + 1 - int(out)
        if total < 0:  # a larger output than the kernels reach: zeros added at the end (output padding)
            if e - total >= max(s, d):
                raise Refuse(f"output_shape {out} exceeds the transposed size by more than the stride")
            e, total = e - total, 0
        first = total // 2 if upper else total - total // 2
        begin.append(first)
        end.append(total - first)
        padding.append(e)
    window.update(pads_begin=begin, pads_end=end, auto_pad="explicit", output_padding=padding)


@lower("onnx", "openvino", "TopK", inputs=1, names=("x",))
def _top_k_1(b, m):
    return _top_k(b, m, lambda: int(attr(m.root, "k")))


@lower("onnx", "openvino", "TopK", since=10, inputs=2, names=("x", "k"))
def _top_k_10(b, m):
    return _top_k(b, m, lambda: int(const_input(m, "k", "k").reshape(-1)[0]))


def _top_k(b, m, read_k):
    """TopK of ``read_k()`` elements (read once the data's shape is known: the attribute, or from opset 10 the
    constant input)."""
    x = m["x"]
    shape = static_shape(x)
    node = m.root
    axis = int(attr(node, "axis", -1)) % len(shape)
    k = read_k()
    if not 0 < k <= shape[axis]:
        raise Refuse(f"k={k} for a dim of {shape[axis]}")
    if not attr(node, "sorted", 1):
        raise Refuse("sorted=0 leaves the order unspecified")
    values, indices = ov(
        b,
        "TopK",
        x,
        b.const(np.asarray(k, np.int64), "k"),
        axis=axis,
        mode="max" if attr(node, "largest", 1) else "min",
        sort="value",
        index_element_type="int64",
        _outputs=2,
    )
    return [values, indices]


# ---------------------------------------------------------------------------
# Pooling
# ---------------------------------------------------------------------------


def _pool_attrs(m) -> dict:
    node = m.root
    kernel = list(attr(node, "kernel_shape", []))
    if not kernel:
        raise Refuse("kernel_shape is missing")
    window = window_attrs(node, len(kernel))
    window["kernel"] = kernel
    window["rounding_type"] = "ceil" if attr(node, "ceil_mode", 0) else "floor"
    return window


def _needs_windows(m) -> bool:
    """Whether opset1 pooling cannot express the node: dilations, or ceil rounding whose last window starts
    inside the end padding (ONNX drops that window, opset1 rounding_type="ceil" keeps it)."""
    node = m.root
    if any(d != 1 for d in attr(node, "dilations", [])):
        return True
    if not attr(node, "ceil_mode", 0) or attr(node, "auto_pad", "NOTSET") not in ("NOTSET", b"NOTSET"):
        return False
    window = _pool_attrs(m)
    dims = static_shape(m["x"])[2:]
    for size, k, s, pb, pe in zip(dims, window["kernel"], window["strides"], window["pads_begin"], window["pads_end"]):
        out = -(-(size + pb + pe - k) // s) + 1
        if (out - 1) * s >= size + pb:
            return True
    return False


@lower("onnx", "openvino", "MaxPool", inputs=1, names=("x",))
def _max_pool(b, m):
    if attr(m.root, "storage_order", 0):
        raise Refuse("storage_order=1 only changes the Indices output, which opset1 MaxPool does not have")
    if _needs_windows(m):
        dtype = np.dtype(np_dtype(m["x"]))
        lowest = -np.inf if dtype.kind == "f" else np.iinfo(dtype).min
        return _pool_by_windows(b, m, m["x"], lowest, "Maximum")[0]
    return ov(b, "MaxPool", m["x"], **_pool_attrs(m))


@lower("onnx", "openvino", "AveragePool", inputs=1, names=("x",))
def _avg_pool(b, m):
    if _needs_windows(m):
        total, counts = _pool_by_windows(b, m, m["x"], 0, "Add")
        return ov(b, "Divide", total, b.const(counts.astype(np_dtype(m["x"])), "window_counts"), auto_broadcast="numpy")
    return ov(b, "AvgPool", m["x"], exclude_pad=not attr(m.root, "count_include_pad", 0), **_pool_attrs(m))


def _pool_by_windows(b, m, x, fill, combine: str):
    """Pooling window by window, for what opset1 pooling lacks (see _needs_windows): pad ``x`` with ``fill`` to cover
    every window, then
    combine one strided slice per kernel offset.  Also returns, per output position, how many elements the
    window averages over (inside the input, or inside input and explicit pads with count_include_pad).
    ``x`` is the node's input or an element-wise function of it (same shape)."""
    node = m.root
    shape = static_shape(m["x"])
    spatial = shape[2:]
    kernel = list(attr(node, "kernel_shape", []))
    n = len(spatial)
    if len(kernel) != n:
        raise Refuse("kernel_shape is missing")
    dilations = list(attr(node, "dilations", [1] * n))
    strides = list(attr(node, "strides", [1] * n))
    auto = text_attr(node, "auto_pad", "NOTSET")
    pads = list(attr(node, "pads", [0] * 2 * n))
    ceil = bool(attr(node, "ceil_mode", 0))
    outs, begins, ends = [], [], []
    for i, (size, k, d, st) in enumerate(zip(spatial, kernel, dilations, strides)):
        reach = d * (k - 1) + 1
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            out = -(-size // st)
            total = max((out - 1) * st + reach - size, 0)
            low = total // 2 if auto == "SAME_UPPER" else total - total // 2
            pb, pe = low, total - low
        else:
            pb, pe = (0, 0) if auto == "VALID" else (pads[i], pads[i + n])
            span = size + pb + pe - reach
            out = (-(-span // st) if ceil else span // st) + 1
            if ceil and (out - 1) * st >= size + pb:
                out -= 1  # ONNX drops a last window that starts in the end padding
        outs.append(out)
        begins.append(pb)
        ends.append(pe)
    counts = np.ones([1, 1], np.int64)
    for out, k, d, st, pb, pe, size in zip(outs, kernel, dilations, strides, begins, ends, spatial):
        starts = np.arange(out)[:, None] * st + np.arange(k)[None, :] * d - pb
        lo, hi = (-pb, size + pe) if attr(node, "count_include_pad", 0) else (0, size)
        per_axis = ((starts >= lo) & (starts < hi)).sum(axis=1)
        counts = counts[..., None] * per_axis
    needed = [(out - 1) * st + d * (k - 1) + 1 for out, st, d, k in zip(outs, strides, dilations, kernel)]
    after = [need - size - pb for need, size, pb in zip(needed, spatial, begins)]
    padded = ov(
        b,
        "Pad",
        x,
        i64(b, [0, 0] + begins, "pads_begin"),
        i64(b, [0, 0] + [max(a, 0) for a in after], "pads_end"),
        const(b, fill, np_dtype(m["x"]), "pad_value"),
        pad_mode="constant",
    )
    total = None
    for offset in np.ndindex(*kernel):
        start = [j * d for j, d in zip(offset, dilations)]
        stop = [s0 + (out - 1) * st + 1 for s0, out, st in zip(start, outs, strides)]
        part = ov(
            b,
            "StridedSlice",
            padded,
            i64(b, [0, 0] + start, "begin"),
            i64(b, [0, 0] + stop, "end"),
            i64(b, [1, 1] + strides, "stride"),
            begin_mask=[1, 1] + [0] * n,
            end_mask=[1, 1] + [0] * n,
            new_axis_mask=[],
            shrink_axis_mask=[],
            ellipsis_mask=[],
        )
        total = part if total is None else ov(b, combine, total, part, auto_broadcast="numpy")
    return total, counts


@lower("onnx", "openvino", "LpPool", inputs=1, names=("x",))
def _lp_pool(b, m):
    """(sum of |x|**p over the window) ** (1/p): an average over the whole window (padding counts as zero)
    times the window's size."""
    x = m["x"]
    dtype = np_dtype(x)
    p = float(attr(m.root, "p", 2))
    powered = ov(b, "Power", ov(b, "Abs", x), const(b, p, dtype, "p"), auto_broadcast="numpy")
    if _needs_windows(m):
        total = _pool_by_windows(b, m, powered, 0, "Add")[0]
    else:
        window = _pool_attrs(m)
        mean = ov(b, "AvgPool", powered, exclude_pad=False, **window)
        total = ov(
            b,
            "Multiply",
            mean,
            const(b, float(np.prod(window["kernel"])), dtype, "window_size"),
            auto_broadcast="numpy",
        )
    return ov(b, "Power", total, const(b, 1.0 / p, dtype, "inverse_p"), auto_broadcast="numpy")


GLOBAL_POOLS = {"GlobalAveragePool": "ReduceMean", "GlobalMaxPool": "ReduceMax"}


@lower("onnx", "openvino", tuple(GLOBAL_POOLS), inputs=1, names=("x",))
def _global_pool(b, m):
    rank = rank_of(m["x"])
    return ov(b, GLOBAL_POOLS[m.root.op], m["x"], i64(b, list(range(2, rank)), "spatial_axes"), keep_dims=True)


# ---------------------------------------------------------------------------
# Normalization
# ---------------------------------------------------------------------------


@lower("onnx", "openvino", "BatchNormalization", inputs=5, names=("x", "scale", "bias", "mean", "var"))
def _batch_norm(b, m):
    node = m.root
    if attr(node, "training_mode", 0):
        raise Refuse("training_mode=1 (batch statistics) has no opset1 equivalent")
    if not attr(node, "spatial", 1):
        raise Refuse("spatial=0 (per-element statistics) has no opset1 equivalent")
    if node.version is not None and node.version < 7 and not attr(node, "is_test", 0):
        raise Refuse("is_test=0 (training) has no opset1 equivalent")
    # Not BatchNormInference: OpenVINO's opset1 layer reads its inputs as (gamma, beta, data, mean, variance)
    # while opconv's schema and executor take data first, so the affine form below is what both agree on:
    # y = x * k + (beta - mean * k) with k = gamma / sqrt(var + eps), per channel.
    x = m["x"]
    rank = rank_of(x)
    eps = float(attr(node, "epsilon", 1e-5))
    names = ("scale", "bias", "mean", "var")
    data = [m.constant(n) for n in names]
    if any(d is None for d in data):
        raise Refuse("scale, bias, mean and var must be constants")
    gamma, beta, mean, var = (np.asarray(d, np.float64) for d in data)
    k = gamma / np.sqrt(var + eps)
    shift = beta - mean * k
    shape = [1, -1] + [1] * (rank - 2)
    dtype = np_dtype(x)
    y = ov(b, "Multiply", x, b.const(k.astype(dtype).reshape(shape), f"{node.name}/scale"), auto_broadcast="numpy")
    return ov(b, "Add", y, b.const(shift.astype(dtype).reshape(shape), f"{node.name}/shift"), auto_broadcast="numpy")


def _normalize(b, x, axes, eps: float):
    """(centred, 1 / sqrt(var + eps), mean) of ``x`` over constant ``axes`` (kept dims)."""
    mean = ov(b, "ReduceMean", x, axes, keep_dims=True)
    centred = ov(b, "Subtract", x, mean, auto_broadcast="numpy")
    var = ov(b, "ReduceMean", ov(b, "Multiply", centred, centred, auto_broadcast="numpy"), axes, keep_dims=True)
    std = ov(b, "Sqrt", ov(b, "Add", var, const(b, eps, np_dtype(x), "epsilon"), auto_broadcast="numpy"))
    inv_std = ov(b, "Divide", const(b, 1, np_dtype(x), "one"), std, auto_broadcast="numpy")
    return centred, inv_std, mean


def _float32_stash(m, x) -> None:
    """Refuse when ONNX would compute in float32 (stash_type=1) on a narrower type than opset1 would use."""
    if (
        np.dtype(np_dtype(x)) != np.float32
        and int(attr(m.root, "stash_type", 1)) == 1
        and np.dtype(np_dtype(x)).itemsize < 4
    ):
        raise Refuse(
            f"ONNX computes the statistics of {x.dtype} in float32 (stash_type=1); the opset1 "
            "decomposition would compute them in the narrower type"
        )


@lower("onnx", "openvino", "LayerNormalization", inputs=(2, 3), names=("x", "scale", "bias"))
def _layer_norm(b, m):
    """(x - mean) / sqrt(var + eps) * scale + bias over the axes from ``axis`` on (opset1 MVN has no axes)."""
    x = m["x"]
    rank = rank_of(x)
    _float32_stash(m, x)
    axis = int(attr(m.root, "axis", -1))
    axes = i64(b, list(range(axis % rank, rank)), "norm_axes")
    centred, inv_std, mean = _normalize(b, x, axes, float(attr(m.root, "epsilon", 1e-5)))
    y = ov(
        b, "Multiply", ov(b, "Multiply", centred, inv_std, auto_broadcast="numpy"), m["scale"], auto_broadcast="numpy"
    )
    bias = m.values.get("bias")
    y = y if bias is None else ov(b, "Add", y, bias, auto_broadcast="numpy")
    outputs = m.root.outputs
    return [y, mean if len(outputs) > 1 else None, inv_std if len(outputs) > 2 else None]


@lower("onnx", "openvino", "InstanceNormalization", inputs=3, names=("x", "scale", "bias"))
def _instance_norm(b, m):
    x = m["x"]
    rank = rank_of(x)
    axes = i64(b, list(range(2, rank)), "spatial_axes")
    centred, inv_std, _ = _normalize(b, x, axes, float(attr(m.root, "epsilon", 1e-5)))
    y = ov(b, "Multiply", centred, inv_std, auto_broadcast="numpy")
    y = ov(b, "Multiply", y, _channel_vector(b, m, "scale", rank), auto_broadcast="numpy")
    return ov(b, "Add", y, _channel_vector(b, m, "bias", rank), auto_broadcast="numpy")


@lower("onnx", "openvino", "GroupNormalization", inputs=3, names=("x", "scale", "bias"))
def _group_norm(b, m):
    x = m["x"]
    shape = static_shape(x)
    groups = int(attr(m.root, "num_groups"))
    channels = shape[1]
    if channels % groups:
        raise Refuse(f"{channels} channels do not divide into {groups} groups")
    if (m.root.version or 21) < 21:
        raise Refuse("GroupNormalization-18 (per-group scale) is not mapped")
    _float32_stash(m, x)
    grouped = ov(b, "Reshape", x, i64(b, [shape[0], groups, -1], "grouped"), special_zero=False)
    centred, inv_std, _ = _normalize(b, grouped, i64(b, [2], "group_axis"), float(attr(m.root, "epsilon", 1e-5)))
    y = ov(
        b,
        "Reshape",
        ov(b, "Multiply", centred, inv_std, auto_broadcast="numpy"),
        i64(b, shape, "shape"),
        special_zero=False,
    )
    y = ov(b, "Multiply", y, _channel_vector(b, m, "scale", len(shape)), auto_broadcast="numpy")
    return ov(b, "Add", y, _channel_vector(b, m, "bias", len(shape)), auto_broadcast="numpy")


@lower("onnx", "openvino", "LRN", inputs=1, names=("x",))
def _lrn(b, m):
    x = m["x"]
    node = m.root
    bias, alpha, beta = (
        float(attr(node, "bias", 1.0)),
        float(attr(node, "alpha", 1e-4)),
        float(attr(node, "beta", 0.75)),
    )
    if bias <= 0:
        raise Refuse(f"LRN bias {bias} (the decomposition divides by it)")
    size = int(attr(node, "size"))
    # ONNX divides alpha by size; opset1 LRN's alpha is per element of the window too.  The CPU plugin computes
    # opset1 LRN with bias 1, so another bias is factored out:
    # x / (k + a/n S)^b = x / (1 + (a/k)/n S)^b * k^-b.
    y = ov(b, "LRN", x, i64(b, [1], "axes"), alpha=alpha / bias, beta=beta, bias=1.0, size=size)
    if bias == 1.0:
        return y
    return ov(b, "Multiply", y, const(b, bias**-beta, np_dtype(x), "bias_scale"), auto_broadcast="numpy")


@lower("onnx", "openvino", "MaxRoiPool", inputs=2, names=("x", "rois"))
def _max_roi_pool(b, m):
    node = m.root
    pooled_h, pooled_w = (int(d) for d in attr(node, "pooled_shape"))
    # Both are Caffe's ROI max pooling: rois rows [batch, x1, y1, x2, y2], corners scaled and rounded.
    return ov(
        b,
        "ROIPooling",
        m["x"],
        m["rois"],
        pooled_h=pooled_h,
        pooled_w=pooled_w,
        spatial_scale=float(attr(node, "spatial_scale", 1.0)),
        method="max",
    )


# ---------------------------------------------------------------------------
# Matrix products and softmax
# ---------------------------------------------------------------------------


@lower("onnx", "openvino", "MatMul", inputs=2, names=("a", "b"))
def _matmul(b, m):
    return ov(b, "MatMul", m["a"], m["b"], transpose_a=False, transpose_b=False)


@lower("onnx", "openvino", "Gemm", inputs=(2, 3), names=("a", "b", "c"))
def _gemm(b, m):
    node = m.root
    a = m["a"]
    dtype = np_dtype(a)
    y = ov(b, "MatMul", a, m["b"], transpose_a=bool(attr(node, "transA", 0)), transpose_b=bool(attr(node, "transB", 0)))
    alpha, beta = float(attr(node, "alpha", 1.0)), float(attr(node, "beta", 1.0))
    if alpha != 1.0:
        y = ov(b, "Multiply", y, const(b, alpha, dtype, "alpha"), auto_broadcast="numpy")
    c = m.values.get("c")
    if c is None or beta == 0.0:
        return y
    data = m.constant("c")
    if data is not None:
        c = b.const((np.asarray(data) * beta).astype(dtype), f"{c.name}/scaled") if beta != 1.0 else c
    elif beta != 1.0:
        c = ov(b, "Multiply", c, const(b, beta, dtype, "beta"), auto_broadcast="numpy")
    return ov(b, "Add", y, c, auto_broadcast="numpy")


def _softmax_axis(m) -> int:
    x = m["x"]
    rank = rank_of(x)
    version = m.root.version or 13
    axis = int(attr(m.root, "axis", -1 if version >= 13 else 1)) % max(rank, 1)
    if version < 13 and axis != rank - 1:
        # Before opset 13 Softmax flattens to 2-D at `axis`; only the last axis gives the same result.
        raise Refuse(
            f"opset {version} {m.root.op} with axis={axis} normalises over all axes from {axis} on "
            f"(rank {rank}); opset1 SoftMax normalises over one axis"
        )
    return axis


def _over_softmax_axis(b, m, build):
    """``build(x, axis)`` over the node's softmax axis; before opset 13 a non-last axis means every axis from
    it on, so the input is flattened to 2-D around it and the result shaped back."""
    x = m["x"]
    rank = rank_of(x)
    version = m.root.version or 13
    axis = int(attr(m.root, "axis", -1 if version >= 13 else 1)) % max(rank, 1)
    if version >= 13 or axis == rank - 1:
        return build(x, axis)
    shape = static_shape(x)
    rows = int(np.prod(shape[:axis], dtype=np.int64))
    flat = ov(b, "Reshape", x, i64(b, [rows, -1], "as_2d"), special_zero=False)
    return ov(b, "Reshape", build(flat, 1), i64(b, shape, "shape"), special_zero=False)


@lower("onnx", "openvino", "Softmax", inputs=1, names=("x",))
def _softmax(b, m):
    return _over_softmax_axis(b, m, lambda x, axis: ov(b, "SoftMax", x, axis=axis))


@lower("onnx", "openvino", "LogSoftmax", inputs=1, names=("x",))
def _log_softmax(b, m):
    return _over_softmax_axis(b, m, lambda x, axis: _log_softmax_along(b, x, axis))


def _log_softmax_along(b, x, axis: int):
    """x - max - log(sum(exp(x - max))) along ``axis``."""
    axes = i64(b, [axis], "axis")
    shifted = ov(b, "Subtract", x, ov(b, "ReduceMax", x, axes, keep_dims=True), auto_broadcast="numpy")
    total = ov(b, "ReduceSum", ov(b, "Exp", shifted), axes, keep_dims=True)
    return ov(b, "Subtract", shifted, ov(b, "Log", total), auto_broadcast="numpy")


def _top1_index(b, x, axis: int, mode: str, dim: int, last: bool):
    """The index of the first (or last) max/min along ``axis``, as int64 with the axis kept."""
    if last:
        rank = rank_of(x)
        begin, stride = [0] * rank, [1] * rank
        mask = [1] * rank
        begin[axis], stride[axis] = -1, -1
        begin_mask = list(mask)
        begin_mask[axis] = 0
        x = ov(
            b,
            "StridedSlice",
            x,
            i64(b, begin, "begin"),
            i64(b, [0] * rank, "end"),
            i64(b, stride, "stride"),
            begin_mask=begin_mask,
            end_mask=mask,
            new_axis_mask=[],
            shrink_axis_mask=[],
            ellipsis_mask=[],
        )
    _, index = ov(
        b,
        "TopK",
        x,
        b.const(np.asarray(1, np.int64), "k"),
        axis=axis,
        mode=mode,
        sort="none",
        index_element_type="int64",
        _outputs=2,
    )
    if last:
        index = ov(b, "Subtract", i64(b, [dim - 1], "last"), index, auto_broadcast="numpy")
    return index


@lower("onnx", "openvino", ("ArgMax", "ArgMin"), inputs=1, names=("x",))
def _arg(b, m):
    x = m["x"]
    shape = static_shape(x)
    if not shape:
        raise Refuse("ArgMax/ArgMin of a scalar")
    axis = int(attr(m.root, "axis", 0)) % len(shape)
    mode = "max" if m.root.op == "ArgMax" else "min"
    index = _top1_index(b, x, axis, mode, shape[axis], bool(attr(m.root, "select_last_index", 0)))
    if attr(m.root, "keepdims", 1):
        return index
    return ov(b, "Squeeze", index, i64(b, [axis], "axis"))


@lower("onnx", "openvino", "OneHot", inputs=3, names=("indices", "depth", "values"))
def _one_hot(b, m):
    """opset1 OneHot, after ONNX's extras: any numeric indices (truncated), negative ones from the end, and the
    (off, on) pair as one input."""
    depth = int(np.asarray(const_input(m, "depth", "the depth")).reshape(-1)[0])
    rank = rank_of(m["indices"])
    axis = int(attr(m.root, "axis", -1))
    axis = axis + rank + 1 if axis < 0 else axis
    index = ov(b, "Convert", m["indices"], destination_type="int64")
    wrapped = ov(b, "Add", index, i64(b, [depth], "depth"), auto_broadcast="numpy")
    index = ov(
        b,
        "Select",
        ov(b, "Less", index, i64(b, [0], "zero"), auto_broadcast="numpy"),
        wrapped,
        index,
        auto_broadcast="numpy",
    )
    values = m["values"]
    off, on = (ov(b, "Gather", values, b.const(np.asarray(i, np.int64), "which"), i64(b, [0], "axis")) for i in (0, 1))
    return ov(b, "OneHot", index, b.const(np.asarray(depth, np.int64), "depth"), on, off, axis=axis)


@lower("onnx", "openvino", "Hardmax", inputs=1, names=("x",))
def _hardmax(b, m):
    x = m["x"]
    shape = static_shape(x)
    axis = _softmax_axis(m)
    index = ov(b, "Squeeze", _top1_index(b, x, axis, "max", shape[axis], False), i64(b, [axis], "axis"))
    dtype = np_dtype(x)
    return ov(
        b,
        "OneHot",
        index,
        b.const(np.asarray(shape[axis], np.int64), "depth"),
        const(b, 1, dtype, "on"),
        const(b, 0, dtype, "off"),
        axis=axis,
    )


# ONNX reductions -> how to build them from opset1 ops.
def _plain(ov_op: str):
    def build(b, x, axes, keep):
        if x.dtype == "bool":  # OpenVINO reduces numbers only; max/min over 0/1 is any/all
            if ov_op not in ("ReduceMax", "ReduceMin"):
                raise Refuse(f"{ov_op} of booleans")
            as_u8 = ov(b, "Convert", x, destination_type="uint8")
            return ov(b, "Convert", ov(b, ov_op, as_u8, axes, keep_dims=keep), destination_type="bool")
        y = ov(b, ov_op, x, axes, keep_dims=keep)
        if ov_op in _EMPTY_EXTREME and x.dtype is not None and np.dtype(np_dtype(x)).kind == "f":
            y = _all_infinite_fixed(b, x, y, axes, keep, _EMPTY_EXTREME[ov_op])
        return y

    return build


# The infinity a float max/min gives over an all -inf / +inf window.  OpenVINO's CPU plugin starts its
# max from the lowest finite float (and its min from the highest), so it returns -FLT_MAX there.
_EMPTY_EXTREME = {"ReduceMax": -np.inf, "ReduceMin": np.inf}


def _all_infinite_fixed(b, x, y, axes, keep: bool, infinity: float):
    """``y`` with the reduction of all-``infinity`` windows set to ``infinity``."""
    dtype = np_dtype(x)
    inf = const(b, infinity, dtype, "infinity")
    hits = ov(b, "Convert", ov(b, "Equal", x, inf, auto_broadcast="numpy"), destination_type=np.dtype(dtype).name)
    every = ov(b, "ReduceMin", hits, axes, keep_dims=keep)
    return ov(
        b,
        "Select",
        ov(b, "Equal", every, const(b, 1, dtype, "one"), auto_broadcast="numpy"),
        inf,
        y,
        auto_broadcast="numpy",
    )


def _sum_of(transform):
    return lambda b, x, axes, keep: ov(b, "ReduceSum", transform(b, x), axes, keep_dims=keep)


def _square(b, x):
    return ov(b, "Multiply", x, x, auto_broadcast="numpy")


def _log_sum_exp(b, x, axes, keep):
    """max + log(sum(exp(x - max))): the shift keeps exp from overflowing."""
    top = ov(b, "ReduceMax", x, axes, keep_dims=True)
    total = ov(b, "ReduceSum", ov(b, "Exp", ov(b, "Subtract", x, top, auto_broadcast="numpy")), axes, keep_dims=keep)
    top = top if keep else ov(b, "Squeeze", top, axes)
    return ov(b, "Add", ov(b, "Log", total), top, auto_broadcast="numpy")


REDUCTIONS = {
    "ReduceSum": _plain("ReduceSum"),
    "ReduceMean": _plain("ReduceMean"),
    "ReduceMax": _plain("ReduceMax"),
    "ReduceMin": _plain("ReduceMin"),
    "ReduceProd": _plain("ReduceProd"),
    "ReduceL1": _sum_of(lambda b, x: ov(b, "Abs", x)),
    "ReduceL2": lambda b, x, axes, keep: ov(b, "Sqrt", _sum_of(_square)(b, x, axes, keep)),
    "ReduceSumSquare": _sum_of(_square),
    "ReduceLogSum": lambda b, x, axes, keep: ov(b, "Log", _plain("ReduceSum")(b, x, axes, keep)),
    "ReduceLogSumExp": _log_sum_exp,
}


@lower("onnx", "openvino", tuple(REDUCTIONS), inputs=(1, 2), names=("x", "axes"))
def _reduce(b, m):
    """Every version: the axes are an attribute or a constant input (``reduce_axes``)."""
    node, x = m.root, m["x"]
    axes = reduce_axes(node)
    shape = static_shape(x)
    rank = len(shape)
    if 0 in shape:
        raise Refuse("reducing an empty tensor (opset1 has no empty tensors)")
    if not axes:
        if attr(node, "noop_with_empty_axes", 0):
            if node.op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"):
                return x  # reducing nothing: each element is its own sum, mean, extreme, product
            raise Refuse(f"noop_with_empty_axes=1 with no axes on {node.op} is not mapped")
        axes = list(range(rank))
    axes = sorted(int(a) % max(rank, 1) for a in axes)
    if rank == 0:
        raise Refuse("reducing a scalar")
    build = REDUCTIONS[node.op]
    return build(b, x, i64(b, axes, "axes"), bool(attr(node, "keepdims", 1)))
