"""Neural-network ONNX ops: convolution, pooling, normalization, matrix products, softmax."""

from __future__ import annotations

import numpy as np

from ._common import Refuse, Rule, attr, const, const_input, dtype_of, i64, ov, pattern, rank_of, static_shape

# ONNX auto_pad -> opset1 auto_pad ("NOTSET" means the explicit `pads`).
AUTO_PAD = {"NOTSET": "explicit", "SAME_UPPER": "same_upper", "SAME_LOWER": "same_lower", "VALID": "valid"}


def _window(node, spatial: int) -> dict:
    """strides / pads_begin / pads_end / auto_pad of a Conv or pooling node with ``spatial`` dims."""
    auto = attr(node, "auto_pad", "NOTSET")
    if isinstance(auto, bytes):
        auto = auto.decode()
    if auto not in AUTO_PAD:
        raise Refuse(f"auto_pad={auto!r} is not an ONNX padding mode")
    pads = list(attr(node, "pads", [0] * (2 * spatial)))
    if len(pads) != 2 * spatial:
        raise Refuse(f"pads has {len(pads)} values for {spatial} spatial dims")
    if auto != "NOTSET":
        pads = [0] * (2 * spatial)  # OpenVINO computes them; the attributes must still be present
    return dict(strides=list(attr(node, "strides", [1] * spatial)), pads_begin=pads[:spatial],
                pads_end=pads[spatial:], auto_pad=AUTO_PAD[auto])


# ---------------------------------------------------------------------------
# Convolution
# ---------------------------------------------------------------------------

def _conv(b, m):
    x, w = m["x"], m["w"]
    node = m.root
    w_rank = rank_of(w)
    spatial = w_rank - 2
    group = int(attr(node, "group", 1))
    window = _window(node, spatial)
    window["dilations"] = list(attr(node, "dilations", [1] * spatial))
    if group == 1:
        y = ov(b, "Convolution", x, w, **window)
    else:
        data = const_input(m, "w", "the weights of a grouped Conv")
        out_channels = data.shape[0]
        if out_channels % group:
            raise Refuse(f"{out_channels} output channels do not divide into {group} groups")
        grouped = data.reshape((group, out_channels // group) + data.shape[1:])
        y = ov(b, "GroupConvolution", x, b.const(grouped, f"{w.name}/grouped"), **window)
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


# ---------------------------------------------------------------------------
# Pooling
# ---------------------------------------------------------------------------

def _pool_attrs(m) -> dict:
    node = m.root
    kernel = list(attr(node, "kernel_shape", []))
    if not kernel:
        raise Refuse("kernel_shape is missing")
    if any(d != 1 for d in attr(node, "dilations", [])):
        raise Refuse("opset1 pooling has no dilations")
    window = _window(node, len(kernel))
    window["kernel"] = kernel
    window["rounding_type"] = "ceil" if attr(node, "ceil_mode", 0) else "floor"
    _check_ceil_windows(m, window)
    return window


def _check_ceil_windows(m, window: dict) -> None:
    """Refuse ceil rounding when a last window would start inside the end padding.

    ONNX drops such a window (its output would average or max over padding
    only); opset1 rounding_type="ceil" keeps it, so the output sizes differ.
    """
    if window["rounding_type"] != "ceil" or window["auto_pad"] != "explicit":
        return
    x = m["x"]
    dims = static_shape(x)[2:]
    for i, (size, k, s, pb, pe) in enumerate(zip(dims, window["kernel"], window["strides"], window["pads_begin"],
                                                 window["pads_end"])):
        out = -(-(size + pb + pe - k) // s) + 1
        if (out - 1) * s >= size + pb:
            raise Refuse(f"ceil_mode=1: the last window along spatial axis {i} starts in the padding, which "
                         "ONNX drops and opset1 keeps")


def _max_pool(b, m):
    if attr(m.root, "storage_order", 0):
        raise Refuse("storage_order=1 only changes the Indices output, which opset1 MaxPool does not have")
    return ov(b, "MaxPool", m["x"], **_pool_attrs(m))


def _avg_pool(b, m):
    return ov(b, "AvgPool", m["x"], exclude_pad=not attr(m.root, "count_include_pad", 0), **_pool_attrs(m))


def _global_pool(reduce_op: str):
    def replace(b, m):
        rank = rank_of(m["x"])
        return ov(b, reduce_op, m["x"], i64(b, list(range(2, rank)), "spatial_axes"), keep_dims=True)
    return replace


# ---------------------------------------------------------------------------
# Normalization
# ---------------------------------------------------------------------------

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
    dtype = dtype_of(x)
    y = ov(b, "Multiply", x, b.const(k.astype(dtype).reshape(shape), f"{node.name}/scale"), auto_broadcast="numpy")
    return ov(b, "Add", y, b.const(shift.astype(dtype).reshape(shape), f"{node.name}/shift"), auto_broadcast="numpy")


def _layer_norm(b, m):
    """(x - mean) / sqrt(var + eps) * scale + bias over the axes from ``axis`` on (opset1 MVN has no axes)."""
    x = m["x"]
    rank = rank_of(x)
    axis = int(attr(m.root, "axis", -1))
    axes = i64(b, list(range(axis % rank, rank)), "norm_axes")
    mean = ov(b, "ReduceMean", x, axes, keep_dims=True)
    centred = ov(b, "Subtract", x, mean, auto_broadcast="numpy")
    var = ov(b, "ReduceMean", ov(b, "Multiply", centred, centred, auto_broadcast="numpy"), axes, keep_dims=True)
    eps = const(b, float(attr(m.root, "epsilon", 1e-5)), dtype_of(x), "epsilon")
    std = ov(b, "Sqrt", ov(b, "Add", var, eps, auto_broadcast="numpy"))
    y = ov(b, "Multiply", ov(b, "Divide", centred, std, auto_broadcast="numpy"), m["scale"], auto_broadcast="numpy")
    bias = m.values.get("bias")
    return y if bias is None else ov(b, "Add", y, bias, auto_broadcast="numpy")


# ---------------------------------------------------------------------------
# Matrix products and softmax
# ---------------------------------------------------------------------------

def _matmul(b, m):
    return ov(b, "MatMul", m["a"], m["b"], transpose_a=False, transpose_b=False)


def _gemm(b, m):
    node = m.root
    a = m["a"]
    dtype = dtype_of(a)
    y = ov(b, "MatMul", a, m["b"], transpose_a=bool(attr(node, "transA", 0)),
           transpose_b=bool(attr(node, "transB", 0)))
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


def _softmax(b, m):
    x = m["x"]
    rank = rank_of(x)
    version = m.root.version or 13
    axis = int(attr(m.root, "axis", -1 if version >= 13 else 1)) % max(rank, 1)
    if version < 13 and axis != rank - 1:
        # Before opset 13 Softmax flattens to 2-D at `axis`; only the last axis gives the same result.
        raise Refuse(f"opset {version} Softmax with axis={axis} normalises over all axes from {axis} on "
                     f"(rank {rank}); opset1 SoftMax normalises over one axis")
    return ov(b, "SoftMax", x, axis=axis)


# ONNX reductions -> opset1; the opset from which `axes` is an input instead of an attribute.
REDUCTIONS = {
    "ReduceSum": ("ReduceSum", 13),
    "ReduceMean": ("ReduceMean", 18),
    "ReduceMax": ("ReduceMax", 18),
    "ReduceMin": ("ReduceMin", 18),
    "ReduceProd": ("ReduceProd", 18),
}


def _reduce(ov_op: str, axes_input_since: int):
    def replace(b, m):
        node, x = m.root, m["x"]
        rank = rank_of(x)
        if (node.version or axes_input_since) < axes_input_since:
            axes = attr(node, "axes")
        else:
            axes = None if m.values.get("axes") is None else const_input(m, "axes", "axes").reshape(-1).tolist()
        if not axes:
            if attr(node, "noop_with_empty_axes", 0):
                raise Refuse("noop_with_empty_axes=1 with no axes (an identity) is not mapped")
            axes = list(range(rank))
        axes = sorted(int(a) % max(rank, 1) for a in axes)
        return ov(b, ov_op, x, i64(b, axes, "axes"), keep_dims=bool(attr(node, "keepdims", 1)))
    return replace


def _reduce_rules():
    rules = []
    for onnx_op, (ov_op, since) in REDUCTIONS.items():
        rules.append(Rule(f"{onnx_op}-to-{ov_op}", pattern(onnx_op, ["x"]), _reduce(ov_op, since)))
        rules.append(Rule(f"{onnx_op}-axes-to-{ov_op}", pattern(onnx_op, ["x", "axes"]), _reduce(ov_op, since)))
    return rules


RULES = _reduce_rules() + [
    Rule("Conv-to-Convolution", pattern("Conv", ["x", "w"]), _conv),
    Rule("Conv-bias-to-Convolution", pattern("Conv", ["x", "w", "bias"]), _conv),
    Rule("MaxPool-to-MaxPool", pattern("MaxPool", ["x"]), _max_pool),
    Rule("AveragePool-to-AvgPool", pattern("AveragePool", ["x"]), _avg_pool),
    Rule("GlobalAveragePool-to-ReduceMean", pattern("GlobalAveragePool", ["x"]), _global_pool("ReduceMean")),
    Rule("GlobalMaxPool-to-ReduceMax", pattern("GlobalMaxPool", ["x"]), _global_pool("ReduceMax")),
    Rule("BatchNormalization-to-Multiply-Add",
         pattern("BatchNormalization", ["x", "scale", "bias", "mean", "var"]), _batch_norm),
    Rule("LayerNormalization-decomposed", pattern("LayerNormalization", ["x", "scale"]), _layer_norm),
    Rule("LayerNormalization-bias-decomposed", pattern("LayerNormalization", ["x", "scale", "bias"]), _layer_norm),
    Rule("MatMul-to-MatMul", pattern("MatMul", ["a", "b"]), _matmul),
    Rule("Gemm-to-MatMul", pattern("Gemm", ["a", "b"]), _gemm),
    Rule("Gemm-bias-to-MatMul-Add", pattern("Gemm", ["a", "b", "c"]), _gemm),
    Rule("Softmax-to-SoftMax", pattern("Softmax", ["x"]), _softmax),
]
