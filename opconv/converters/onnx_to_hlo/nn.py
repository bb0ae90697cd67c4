"""Neural-network ONNX ops: convolution, pooling, matrix products, normalizations, softmax, reductions, top-k."""

from __future__ import annotations

import numpy as np

from ...kernels.conv import conv_transpose_pads
from ...types import TensorType
from ..lowering import lower
from ..rewrite import reduce_axes
from ._common import (
    Refuse,
    attr,
    binary,
    broadcast,
    broadcast_in_dim,
    compare,
    const_ints,
    convert,
    dropped,
    dtype_of,
    full,
    hlo,
    iota,
    is_float,
    normalize_axis,
    optional_input,
    out_type,
    reduce,
    reshape,
    scalar,
    shape_of,
    static_type,
    text_attr,
    transpose,
    unary,
)


def conv_padding(low, high) -> list[int]:
    """The Conv ``padding`` attribute: [x1_begin, x2_begin, ..., x1_end, x2_end, ...] like the dialect's pools."""
    return [int(v) for v in low] + [int(v) for v in high]


def explicit_pads(node, in_spatial, kernel, strides, dilations) -> tuple[list[int], list[int]]:
    """Begin/end pads of a Conv or pool window from ``pads`` or ``auto_pad`` (static shapes)."""
    n = len(in_spatial)
    auto = text_attr(node, "auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = list(attr(node, "pads", [0] * (2 * n)))
        return pads[:n], pads[n:]
    if auto == "VALID":
        return [0] * n, [0] * n
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise Refuse(f"auto_pad={auto!r} is not an ONNX padding mode")
    low, high = [], []
    for size, k, s, d in zip(in_spatial, kernel, strides, dilations):
        total = max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        low.append(small if auto == "SAME_UPPER" else large)
        high.append(large if auto == "SAME_UPPER" else small)
    return low, high


def _conv_dims(spatial: int) -> dict:
    """NCHW / OIHW dimension numbers."""
    dims = list(range(2, 2 + spatial))
    return dict(
        input_batch_dimension=0,
        input_feature_dimension=1,
        input_spatial_dimensions=dims,
        kernel_output_feature_dimension=0,
        kernel_input_feature_dimension=1,
        kernel_spatial_dimensions=dims,
        output_batch_dimension=0,
        output_feature_dimension=1,
        output_spatial_dimensions=dims,
    )


# ---------------------------------------------------------------------------
# Convolution
# ---------------------------------------------------------------------------


def conv_attrs(node, x_shape, w_shape) -> dict:
    spatial = len(w_shape) - 2
    kernel = list(attr(node, "kernel_shape", w_shape[2:]))
    strides = list(attr(node, "strides", [1] * spatial))
    dilations = list(attr(node, "dilations", [1] * spatial))
    low, high = explicit_pads(node, x_shape[2:], kernel, strides, dilations)
    return dict(
        window_strides=strides,
        padding=conv_padding(low, high),
        rhs_dilation=dilations,
        lhs_dilation=[1] * spatial,
        feature_group_count=int(attr(node, "group", 1)),
        batch_group_count=1,
        **_conv_dims(spatial),
    )


@lower("onnx", "hlo", "Conv", inputs=(2, 3))
def _conv(b, m):
    node = m.root
    x, w = node.inputs[:2]
    bias = optional_input(m, 2)
    attrs = conv_attrs(node, shape_of(x), shape_of(w))
    t = out_type(m)
    if bias is None:
        return hlo(b, "Conv", x, w, type=t, **attrs)
    return hlo(b, "ConvBias", x, w, bias, type=t, **attrs)


@lower("onnx", "hlo", "ConvTranspose", inputs=(2, 3))
def _conv_transpose(b, m):
    node = m.root
    x, w = node.inputs[:2]
    bias = optional_input(m, 2)
    xs, ws = shape_of(x), shape_of(w)
    spatial = len(ws) - 2
    group = int(attr(node, "group", 1))
    kernel = list(attr(node, "kernel_shape", ws[2:]))
    strides = list(attr(node, "strides", [1] * spatial))
    dilations = list(attr(node, "dilations", [1] * spatial))
    out_pad = list(attr(node, "output_padding", [0] * spatial))
    auto = text_attr(node, "auto_pad", "NOTSET")
    output_shape = attr(node, "output_shape")
    if output_shape is not None:
        begin, end = conv_transpose_pads(
            xs[2:],
            kernel,
            strides,
            dilations,
            out_pad,
            list(output_shape)[-spatial:],
            extra_at_end=auto == "SAME_UPPER",
        )
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = conv_transpose_pads(
            xs[2:], kernel, strides, dilations, out_pad, None, extra_at_end=auto == "SAME_UPPER"
        )
    elif auto == "VALID":
        begin, end = [0] * spatial, [0] * spatial
    else:
        pads = list(attr(node, "pads", [0] * (2 * spatial)))
        begin, end = pads[:spatial], pads[spatial:]
    # A transposed convolution is a convolution of the stride-dilated input with the flipped kernel.
    low = [d * (k - 1) - p for d, k, p in zip(dilations, kernel, begin)]
    high = [d * (k - 1) - p + o for d, k, p, o in zip(dilations, kernel, end, out_pad)]
    c_in, c_out_g = ws[0], ws[1]
    if group > 1:  # [G*Ci/G, Co/G, k] -> [Ci/G, G*Co/G, k]: the groups become contiguous output features
        w = reshape(b, w, (group, c_in // group, c_out_g) + tuple(ws[2:]))
        w = transpose(b, w, [1, 0, 2] + list(range(3, 3 + spatial)))
        w = reshape(b, w, (c_in // group, group * c_out_g) + tuple(ws[2:]))
    w = hlo(b, "Reverse", w, type=static_type(w), dimensions=list(range(2, 2 + spatial)))
    dims = _conv_dims(spatial)
    dims.update(kernel_input_feature_dimension=0, kernel_output_feature_dimension=1)
    attrs = dict(
        window_strides=[1] * spatial,
        padding=conv_padding(low, high),
        lhs_dilation=strides,
        rhs_dilation=dilations,
        feature_group_count=group,
        batch_group_count=1,
        **dims,
    )
    t = out_type(m)
    if bias is None:
        return hlo(b, "Conv", x, w, type=t, **attrs)
    return hlo(b, "ConvBias", x, w, bias, type=t, **attrs)


# ---------------------------------------------------------------------------
# Pooling
# ---------------------------------------------------------------------------


def _pool_common(node, rank: int) -> dict:
    spatial = rank - 2
    kernel = list(attr(node, "kernel_shape", []))
    if len(kernel) != spatial:
        raise Refuse(f"kernel_shape {kernel} does not fit an input of rank {rank}")
    auto = text_attr(node, "auto_pad", "NOTSET")
    out = dict(
        kernel_shape=kernel,
        strides=list(attr(node, "strides", [1] * spatial)),
        auto_pad="NOTSET" if auto == "" else auto,
        ceil_mode=bool(attr(node, "ceil_mode", 0)),
    )
    if out["auto_pad"] == "NOTSET":
        out["padding"] = list(attr(node, "pads", [0] * (2 * spatial)))
    return out


@lower("onnx", "hlo", "MaxPool", inputs=1)
def _max_pool(b, m):
    node = m.root
    x = node.inputs[0]
    attrs = _pool_common(node, len(shape_of(x)))
    attrs["dilations"] = list(attr(node, "dilations", [1] * (len(shape_of(x)) - 2)))
    attrs["storage_order"] = int(attr(node, "storage_order", 0))
    with_indices = len(node.outputs) > 1 and node.outputs[1] is not None
    if with_indices:
        return hlo(b, "MaxPool", x, types=[out_type(m, 0), out_type(m, 1)], return_indices=True, **attrs)
    return [hlo(b, "MaxPool", x, type=out_type(m), **attrs)] + [None] * (len(node.outputs) - 1)


@lower("onnx", "hlo", "AveragePool", inputs=1)
def _avg_pool(b, m):
    node = m.root
    x = node.inputs[0]
    rank = len(shape_of(x))
    if any(d != 1 for d in attr(node, "dilations", [])):
        raise Refuse("AveragePool with dilations has no HLO AveragePool form")
    attrs = _pool_common(node, rank)
    return hlo(
        b,
        "AveragePool",
        x,
        type=out_type(m),
        dims=list(range(2, rank)),
        count_include_pad=bool(attr(node, "count_include_pad", 0)),
        **attrs,
    )


@lower("onnx", "hlo", ("GlobalAveragePool", "GlobalMaxPool"), inputs=1)
def _global_pool(b, m):
    x = m.root.inputs[0]
    return hlo(b, m.root.op, x, type=out_type(m), dims=list(range(2, len(shape_of(x)))))


@lower("onnx", "hlo", "LpPool", inputs=1)
def _lp_pool(b, m):
    node = m.root
    x = node.inputs[0]
    xs = shape_of(x)
    spatial = len(xs) - 2
    p = float(attr(node, "p", 2))
    if attr(node, "ceil_mode", 0):
        raise Refuse("LpPool with ceil_mode=1 is not mapped")
    kernel = list(attr(node, "kernel_shape"))
    strides = list(attr(node, "strides", [1] * spatial))
    dilations = list(attr(node, "dilations", [1] * spatial))
    low, high = explicit_pads(node, xs[2:], kernel, strides, dilations)
    powered = binary(b, "Pow", unary(b, "Abs", x), scalar(b, p, dtype_of(x)))
    padded = pad_value(b, powered, [0, 0] + low, [0, 0] + high, 0)
    t = out_type(m)
    summed = hlo(
        b,
        "ReduceWindow",
        padded,
        scalar(b, 0, dtype_of(x)),
        type=t,
        computation="ADD",
        window_dimensions=[1, 1] + kernel,
        window_strides=[1, 1] + strides,
        window_dilations=[1, 1] + dilations,
    )
    return binary(b, "Pow", summed, scalar(b, 1.0 / p, dtype_of(x)))


@lower("onnx", "hlo", "GlobalLpPool", inputs=1)
def _global_lp_pool(b, m):
    x = m.root.inputs[0]
    p = float(attr(m.root, "p", 2))
    powered = binary(b, "Pow", unary(b, "Abs", x), scalar(b, p, dtype_of(x)))
    summed = reduce(b, powered, range(2, len(shape_of(x))), "ADD", keepdims=True)
    return binary(b, "Pow", summed, scalar(b, 1.0 / p, dtype_of(x)))


def pad_value(b, x, low, high, value, interior=None):
    """HLO Pad with a constant (negative amounts crop)."""
    xs = shape_of(x)
    interior = [0] * len(xs) if interior is None else list(interior)
    if not any(low) and not any(high) and not any(interior):
        return x
    out = tuple(d + lo + hi + max(d - 1, 0) * i for d, lo, hi, i in zip(xs, low, high, interior))
    return hlo(
        b,
        "Pad",
        x,
        scalar(b, value, dtype_of(x)),
        type=TensorType(dtype_of(x), out),
        mode="PAD_VALUE",
        edge_padding_low=[int(v) for v in low],
        edge_padding_high=[int(v) for v in high],
        interior_padding=interior,
    )


# ---------------------------------------------------------------------------
# Matrix products
# ---------------------------------------------------------------------------


def dot(b, a, c, bias=None):
    """numpy ``matmul(a, c)`` as DotGeneral (DotGeneralBias with a bias on the last dim)."""
    sa, sc = shape_of(a), shape_of(c)
    if not sa or not sc:
        raise Refuse("MatMul of a scalar")
    a2 = reshape(b, a, (1,) + sa) if len(sa) == 1 else a
    c2 = reshape(b, c, sc + (1,)) if len(sc) == 1 else c
    sa2, sc2 = shape_of(a2), shape_of(c2)
    if len(sc2) == 2:  # weights: contract a's last dim, no batch (lhs free dims come first in the result)
        dims = dict(
            lhs_contracting_dimensions=[len(sa2) - 1],
            rhs_contracting_dimensions=[0],
            lhs_batching_dimensions=[],
            rhs_batching_dimensions=[],
        )
        out = sa2[:-1] + sc2[1:]
    else:
        batch = tuple(np.broadcast_shapes(sa2[:-2], sc2[:-2]))
        a2 = broadcast(b, a2, batch + sa2[-2:])
        c2 = broadcast(b, c2, batch + sc2[-2:])
        nb = len(batch)
        dims = dict(
            lhs_batching_dimensions=list(range(nb)),
            rhs_batching_dimensions=list(range(nb)),
            lhs_contracting_dimensions=[nb + 1],
            rhs_contracting_dimensions=[nb],
        )
        out = batch + (sa2[-2], sc2[-1])
    dt = dtype_of(a)
    final = out  # numpy drops the dims it added to 1-D operands
    if len(sc) == 1:
        final = final[:-1]
    if len(sa) == 1:
        final = final[:-1] if len(sc) == 1 else final[:-2] + final[-1:]
    if bias is not None and final == out:
        return hlo(b, "DotGeneralBias", a2, c2, bias, type=TensorType(dt, out), **dims)
    y = hlo(b, "DotGeneral", a2, c2, type=TensorType(dt, out), **dims)
    y = reshape(b, y, final)
    if bias is not None:
        y = binary(b, "Add", y, bias)
    return y


@lower("onnx", "hlo", "MatMul", inputs=2)
def _matmul(b, m):
    a, c = m.root.inputs[:2]
    return dot(b, a, c)


def gemm_bias_vector(b, c, n: int):
    """Gemm's C as a rank-1 [N] bias when it broadcasts along the rows only, else ``None``."""
    sc = shape_of(c)
    if sc in ((n,), (1, n)):
        return reshape(b, c, (n,))
    if sc in ((), (1,), (1, 1)):
        return broadcast_in_dim(b, reshape(b, c, ()), (n,), [])
    return None


@lower("onnx", "hlo", "Gemm", inputs=(2, 3))
def _gemm(b, m):
    node = m.root
    a, w = node.inputs[:2]
    c = optional_input(m, 2)
    ta, tb = int(attr(node, "transA", 0)), int(attr(node, "transB", 0))
    alpha, beta = float(attr(node, "alpha", 1.0)), float(attr(node, "beta", 1.0))
    sa, sw = shape_of(a), shape_of(w)
    if len(sa) != 2 or len(sw) != 2:
        raise Refuse("Gemm needs 2-D A and B")
    rows, cols = sa[1] if ta else sa[0], sw[0] if tb else sw[1]
    dt = dtype_of(a)
    dims = dict(
        lhs_contracting_dimensions=[0 if ta else 1],
        rhs_contracting_dimensions=[1 if tb else 0],
        lhs_batching_dimensions=[],
        rhs_batching_dimensions=[],
    )
    t = TensorType(dt, (rows, cols))
    if c is not None and beta != 0.0 and alpha == 1.0 and beta == 1.0:
        bias = gemm_bias_vector(b, c, cols)
        if bias is not None:
            return hlo(b, "DotGeneralBias", a, w, bias, type=t, **dims)
    y = hlo(b, "DotGeneral", a, w, type=t, **dims)
    if alpha != 1.0:
        y = binary(b, "Mul", y, scalar(b, alpha, dt))
    if c is None or beta == 0.0:
        return y
    if beta != 1.0:
        c = binary(b, "Mul", c, scalar(b, beta, dt))
    return binary(b, "Add", y, c)


# ---------------------------------------------------------------------------
# Normalization
# ---------------------------------------------------------------------------


@lower("onnx", "hlo", "BatchNormalization", inputs=5)
def _batch_norm(b, m):
    node = m.root
    version = node.version or 15
    if attr(node, "training_mode", 0):
        raise Refuse("training_mode=1 (batch statistics and running-stat outputs) is not mapped")
    if version < 7 and not attr(node, "is_test", 0):
        raise Refuse("is_test=0 (training) is not mapped")
    if not attr(node, "spatial", 1):
        raise Refuse("spatial=0 (per-element statistics) is not mapped")
    x, scale, bias, mean, var = node.inputs[:5]
    c = shape_of(x)[1]
    params = [reshape(b, convert(b, v, dtype_of(x)), (c,)) for v in (scale, bias, mean, var)]
    y = hlo(
        b,
        "BatchNormInference",
        x,
        *params,
        type=out_type(m),
        epsilon=float(attr(node, "epsilon", 1e-5)),
        feature_index=1,
    )
    return [y] + [dropped(m, i, x) for i in range(1, m.n_outputs)]


@lower("onnx", "hlo", "InstanceNormalization", inputs=3)
def _instance_norm(b, m):
    x, scale, bias = m.root.inputs[:3]
    return hlo(b, "InstanceNorm", x, scale, bias, type=out_type(m), epsilon=float(attr(m.root, "epsilon", 1e-5)))


@lower("onnx", "hlo", "LayerNormalization", inputs=(2, 3))
def _layer_norm(b, m):
    node = m.root
    x, scale = node.inputs[:2]
    bias = optional_input(m, 2)
    xs = shape_of(x)
    axis = normalize_axis(int(attr(node, "axis", -1)), len(xs))
    if int(attr(node, "stash_type", 1)) != 1 and dtype_of(x) != "float64":
        raise Refuse("stash_type other than float32 is not mapped")
    norm_shape = xs[axis:]
    scale = broadcast(b, scale, norm_shape)
    bias = full(b, 0, dtype_of(x), norm_shape) if bias is None else broadcast(b, bias, norm_shape)
    present = [v for v in node.outputs if v is not None]
    attrs = dict(axis=axis, epsilon=float(attr(node, "epsilon", 1e-5)))
    if len(present) == 1 and node.outputs[0] is not None:
        y = hlo(b, "LayerNorm", x, scale, bias, type=out_type(m), **attrs)
        return [y] + [None] * (m.n_outputs - 1)
    n = len(node.outputs)
    types = [out_type(m, i) if node.outputs[i] is not None else TensorType(dtype_of(x), None) for i in range(n)]
    outs = hlo(b, "LayerNorm", x, scale, bias, types=types, **attrs)
    return (list(outs) + [None] * m.n_outputs)[: m.n_outputs]


@lower("onnx", "hlo", "GroupNormalization", inputs=3)
def _group_norm(b, m):
    node = m.root
    x, scale, bias = node.inputs[:3]
    groups = int(attr(node, "num_groups"))
    c = shape_of(x)[1]
    if (node.version or 21) < 21 and c != groups:  # opset 18: scale and bias are per group
        scale, bias = (
            reshape(b, broadcast_in_dim(b, reshape(b, v, (groups,)), (groups, c // groups), [0]), (c,))
            for v in (scale, bias)
        )
    if int(attr(node, "stash_type", 1)) != 1 and dtype_of(x) != "float64":
        raise Refuse("stash_type other than float32 is not mapped")
    return hlo(
        b, "GroupNorm", x, scale, bias, type=out_type(m), num_groups=groups, epsilon=float(attr(node, "epsilon", 1e-5))
    )


@lower("onnx", "hlo", "LRN", inputs=1)
def _lrn(b, m):
    node = m.root
    x = node.inputs[0]
    xs = shape_of(x)
    size = int(attr(node, "size"))
    alpha, beta, bias = (
        float(attr(node, "alpha", 1e-4)),
        float(attr(node, "beta", 0.75)),
        float(attr(node, "bias", 1.0)),
    )
    dt = dtype_of(x)
    square = binary(b, "Mul", x, x)
    low = (size - 1) // 2
    padded = pad_value(b, square, [0, low] + [0] * (len(xs) - 2), [0, size - 1 - low] + [0] * (len(xs) - 2), 0)
    window = hlo(
        b,
        "ReduceWindow",
        padded,
        scalar(b, 0, dt),
        type=TensorType(dt, xs),
        computation="ADD",
        window_dimensions=[1, size] + [1] * (len(xs) - 2),
    )
    base = binary(b, "Add", binary(b, "Mul", window, scalar(b, alpha / size, dt)), scalar(b, bias, dt))
    return binary(b, "Div", x, binary(b, "Pow", base, scalar(b, beta, dt)))


# ---------------------------------------------------------------------------
# Einsum (two operands or one; no ellipsis, no repeated letters within an operand)
# ---------------------------------------------------------------------------


def _sum_out(b, x, letters: str, keep: set):
    """Sum away the letters of ``x`` not in ``keep``."""
    gone = [i for i, c in enumerate(letters) if c not in keep]
    if not gone:
        return x, letters
    return reduce(b, x, gone, "ADD"), "".join(c for c in letters if c in keep)


@lower("onnx", "hlo", "Einsum", inputs=(1, 2))
def _einsum(b, m):
    node = m.root
    equation = str(text_attr(node, "equation")).replace(" ", "")
    if "..." in equation or "->" not in equation:
        raise Refuse("Einsum with an ellipsis or an implicit output is not mapped")
    lhs, out = equation.split("->")
    terms = lhs.split(",")
    values = list(node.inputs)
    if len(terms) != len(values) or len(terms) not in (1, 2) or any(len(set(t)) != len(t) for t in terms):
        raise Refuse("only one- and two-operand Einsum without repeated letters is mapped")
    if len(terms) == 1:
        y, letters = _sum_out(b, values[0], terms[0], set(out))
        return transpose(b, y, [letters.index(c) for c in out]) if letters != out else unary(b, "Copy", y)
    (ta, tb), (a, c) = terms, values
    a, ta = _sum_out(b, a, ta, set(tb) | set(out))
    c, tb = _sum_out(b, c, tb, set(ta) | set(out))
    batch = [ch for ch in ta if ch in tb and ch in out]
    contract = [ch for ch in ta if ch in tb and ch not in out]
    free_a = [ch for ch in ta if ch not in tb]
    free_b = [ch for ch in tb if ch not in ta]
    sa, sc = shape_of(a), shape_of(c)
    dims = {ch: sa[ta.index(ch)] for ch in ta} | {ch: sc[tb.index(ch)] for ch in tb}
    letters = batch + free_a + free_b
    y = hlo(
        b,
        "DotGeneral",
        a,
        c,
        type=TensorType(dtype_of(a), tuple(dims[ch] for ch in letters)),
        lhs_batching_dimensions=[ta.index(ch) for ch in batch],
        rhs_batching_dimensions=[tb.index(ch) for ch in batch],
        lhs_contracting_dimensions=[ta.index(ch) for ch in contract],
        rhs_contracting_dimensions=[tb.index(ch) for ch in contract],
    )
    return transpose(b, y, [letters.index(ch) for ch in out])


# ---------------------------------------------------------------------------
# Softmax family
# ---------------------------------------------------------------------------


def _float_input(m) -> str | None:
    return None if is_float(m.root.inputs[0]) else "Softmax of a non-float tensor"


def _softmax_along(b, x, axis: int, logarithmic: bool):
    return hlo(b, "Softmax", x, type=static_type(x), axis=axis, accurate=True, logarithmic=logarithmic)


def _as_rows(b, x, axis: int):
    """``x`` coerced to 2-D at ``axis``, as the softmax family did before opset 13."""
    xs = shape_of(x)
    return reshape(b, x, (int(np.prod(xs[:axis], dtype=np.int64)), int(np.prod(xs[axis:], dtype=np.int64))))


@lower("onnx", "hlo", ("Softmax", "LogSoftmax"), since=1, inputs=1, check=_float_input)
def _softmax_1(b, m):
    """Softmax and LogSoftmax before opset 13: normalise the flattened trailing block from ``axis`` (default 1)."""
    x = m.root.inputs[0]
    xs = shape_of(x)
    axis = normalize_axis(int(attr(m.root, "axis", 1)), len(xs))
    logarithmic = m.root.op == "LogSoftmax"
    if axis == len(xs) - 1:
        return _softmax_along(b, x, axis, logarithmic)
    return reshape(b, _softmax_along(b, _as_rows(b, x, axis), 1, logarithmic), xs)


@lower("onnx", "hlo", ("Softmax", "LogSoftmax"), since=13, inputs=1, check=_float_input)
def _softmax_13(b, m):
    x = m.root.inputs[0]
    axis = normalize_axis(int(attr(m.root, "axis", -1)), len(shape_of(x)))
    return _softmax_along(b, x, axis, m.root.op == "LogSoftmax")


@lower("onnx", "hlo", "Hardmax", since=1, inputs=1)
def _hardmax_1(b, m):
    """Hardmax before opset 13: one-hot of the flattened trailing block from ``axis`` (default 1)."""
    x = m.root.inputs[0]
    return _hardmax(b, x, _as_rows(b, x, normalize_axis(int(attr(m.root, "axis", 1)), len(shape_of(x)))), 1)


@lower("onnx", "hlo", "Hardmax", since=13, inputs=1)
def _hardmax_13(b, m):
    x = m.root.inputs[0]
    return _hardmax(b, x, x, normalize_axis(int(attr(m.root, "axis", -1)), len(shape_of(x))))


def _hardmax(b, x, work, axis: int):
    """One-hot (in ``x``'s type and shape) of the first maximum of ``work`` (``x`` or its 2-D view) along ``axis``."""
    xs = shape_of(x)
    ws = shape_of(work)
    arg = hlo(
        b,
        "ArgMax",
        work,
        type=TensorType("int64", ws[:axis] + (1,) + ws[axis + 1 :]),
        axis=axis,
        keepdims=True,
        select_last_index=False,
    )
    hot = compare(b, iota(b, "int64", ws, axis), arg, "EQ")
    return reshape(b, convert(b, hot, dtype_of(x)), xs)


# ---------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------


def _sum(b, x, axes, keep):
    return reduce(b, x, axes, "ADD", keep)


def _mean(b, x, axes, keep):
    count = int(np.prod([shape_of(x)[a] for a in axes], dtype=np.int64))
    return binary(b, "Div", reduce(b, x, axes, "ADD", keep), scalar(b, count, dtype_of(x)))


def _log_sum_exp(b, x, axes, keep):
    if not shape_of(x) or any(shape_of(x)[a] == 0 for a in axes):
        return unary(b, "Log", reduce(b, unary(b, "Exp", x), axes, "ADD", keep))
    peak = reduce(b, x, axes, "MAX", True)
    finite = hlo(
        b,
        "Select",
        unary(b, "IsFinite", peak, "bool"),
        peak,
        full(b, 0, dtype_of(x), shape_of(peak)),
        type=static_type(peak),
    )
    shifted = unary(b, "Exp", binary(b, "Sub", x, finite))
    total = unary(b, "Log", reduce(b, shifted, axes, "ADD", True))
    y = binary(b, "Add", total, finite)
    return y if keep else reshape(b, y, tuple(d for i, d in enumerate(shape_of(x)) if i not in axes))


# ONNX reduction -> builder of the reduced value.
REDUCTIONS = {
    "ReduceSum": _sum,
    "ReduceMean": _mean,
    "ReduceMax": lambda b, x, axes, keep: reduce(b, x, axes, "MAX", keep),
    "ReduceMin": lambda b, x, axes, keep: reduce(b, x, axes, "MIN", keep),
    "ReduceProd": lambda b, x, axes, keep: reduce(b, x, axes, "MUL", keep),
    "ReduceL1": lambda b, x, axes, keep: reduce(b, unary(b, "Abs", x), axes, "ADD", keep),
    "ReduceL2": lambda b, x, axes, keep: unary(b, "Sqrt", reduce(b, binary(b, "Mul", x, x), axes, "ADD", keep)),
    "ReduceSumSquare": lambda b, x, axes, keep: reduce(b, binary(b, "Mul", x, x), axes, "ADD", keep),
    "ReduceLogSum": lambda b, x, axes, keep: unary(b, "Log", reduce(b, x, axes, "ADD", keep)),
    "ReduceLogSumExp": _log_sum_exp,
}


@lower("onnx", "hlo", tuple(REDUCTIONS), inputs=(1, 2))
def _reduction(b, m):
    """Every version: the axes are an attribute or a constant input (``reduce_axes``)."""
    node = m.root
    x = node.inputs[0]
    axes = reduce_axes(node)
    rank = len(shape_of(x))
    if not axes:
        if attr(node, "noop_with_empty_axes", 0):
            return unary(b, "Copy", x)
        axes = list(range(rank))
    axes = sorted({normalize_axis(int(a), rank) for a in axes})
    if node.op in ("ReduceMax", "ReduceMin") and dtype_of(x) == "bool":
        raise Refuse("boolean ReduceMax/ReduceMin is not mapped")
    y = REDUCTIONS[node.op](b, x, axes, bool(attr(node, "keepdims", 1)))
    if shape_of(y) != out_type(m).shape:
        raise Refuse(f"reduced shape {shape_of(y)} differs from the ONNX output {out_type(m).shape}")
    return y


@lower("onnx", "hlo", ("ArgMax", "ArgMin"), inputs=1)
def _arg_max_min(b, m):
    node = m.root
    x = node.inputs[0]
    axis = normalize_axis(int(attr(node, "axis", 0)), len(shape_of(x)))
    return hlo(
        b,
        node.op,
        x,
        type=out_type(m),
        axis=axis,
        keepdims=bool(attr(node, "keepdims", 1)),
        select_last_index=bool(attr(node, "select_last_index", 0)),
    )


def _topk(b, m, k: int):
    node = m.root
    x = node.inputs[0]
    axis = normalize_axis(int(attr(node, "axis", -1)), len(shape_of(x)))
    k_value = b.const(np.asarray([k], np.int64), "k")
    return hlo(
        b,
        "Topk",
        x,
        k_value,
        types=[out_type(m, 0), out_type(m, 1)],
        axis=axis,
        largest=bool(attr(node, "largest", 1)),
        sorted=bool(attr(node, "sorted", 1)),
    )


@lower("onnx", "hlo", "TopK", since=1, inputs=1)
def _topk_1(b, m):
    return _topk(b, m, int(attr(m.root, "k")))


@lower("onnx", "hlo", "TopK", since=10, inputs=2, names=("x", "k"))
def _topk_10(b, m):
    return _topk(b, m, const_ints(m, "k")[0])


__all__ = ["dot", "conv_attrs", "conv_padding", "pad_value", "explicit_pads", "gemm_bias_vector"]
