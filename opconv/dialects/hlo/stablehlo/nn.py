"""Neural-network HLO ops: dot products, convolution, normalisations, softmax, pooling, losses."""

from __future__ import annotations

import itertools
import math

import numpy as np

from ....kernels.conv import auto_pad as auto_pad_amounts
from ._writer import FunctionWriter, Operand, emitter, int_list, ints
from .regions import explicit_padding, identity, linear_index, padding_attr, selection_region, window_reduce


def _compute_type(x: Operand) -> str:
    """Half-precision inputs are normalised in float32, as the reference kernels do."""
    return "float32" if x.dtype in ("float16", "bfloat16") else x.dtype


def dot_general(
    w: FunctionWriter, lhs: Operand, rhs: Operand, lhs_batch, rhs_batch, lhs_contract, rhs_contract, dtype: str
) -> Operand:
    lhs_batch, rhs_batch = list(lhs_batch or []), list(rhs_batch or [])
    lhs_contract, rhs_contract = list(lhs_contract or []), list(rhs_contract or [])
    shape = [lhs.shape[d] for d in lhs_batch]
    shape += [s for d, s in enumerate(lhs.shape) if d not in lhs_batch and d not in lhs_contract]
    shape += [s for d, s in enumerate(rhs.shape) if d not in rhs_batch and d not in rhs_contract]
    numbers = (
        f"#stablehlo.dot<lhs_batching_dimensions = {int_list(lhs_batch)}, "
        f"rhs_batching_dimensions = {int_list(rhs_batch)}, "
        f"lhs_contracting_dimensions = {int_list(lhs_contract)}, "
        f"rhs_contracting_dimensions = {int_list(rhs_contract)}>"
    )
    return w.op1("stablehlo.dot_general", [lhs, rhs], dtype, shape, {"dot_dimension_numbers": numbers})


@emitter("Dot")
def dot(w, lhs, rhs):
    dtype, _ = w.out()
    return dot_general(w, lhs, rhs, [], [], [lhs.rank - 1], [0], dtype)


@emitter("DotGeneral")
def dot_general_op(
    w,
    lhs,
    rhs,
    *,
    lhs_batching_dimensions,
    rhs_batching_dimensions,
    lhs_contracting_dimensions,
    rhs_contracting_dimensions,
):
    dtype, _ = w.out()
    return dot_general(
        w,
        lhs,
        rhs,
        lhs_batching_dimensions,
        rhs_batching_dimensions,
        lhs_contracting_dimensions,
        rhs_contracting_dimensions,
        dtype,
    )


@emitter("DotGeneralBias")
def dot_general_bias(
    w,
    lhs,
    rhs,
    bias,
    *,
    lhs_batching_dimensions,
    rhs_batching_dimensions,
    lhs_contracting_dimensions,
    rhs_contracting_dimensions,
):
    dtype, shape = w.out()
    product = dot_general(
        w,
        lhs,
        rhs,
        lhs_batching_dimensions,
        rhs_batching_dimensions,
        lhs_contracting_dimensions,
        rhs_contracting_dimensions,
        dtype,
    )
    return w.add(product, w.broadcast_to(w.convert(bias, dtype), shape))


@emitter("Gemm")
def gemm(w, a, b, c=None, *, alpha, beta, transA, transB):
    dtype, shape = w.out()
    product = dot_general(w, a, b, [], [], [0 if transA else 1], [1 if transB else 0], dtype)
    if alpha != 1:
        product = w.mul(product, w.full(alpha, product))
    if c is None or beta == 0:
        return product
    c = w.broadcast_to(c, shape)
    if beta != 1:
        c = w.mul(c, w.full(beta, c))
    return w.add(product, c)


def convolution(w: FunctionWriter, lhs: Operand, rhs: Operand, attrs: dict) -> Operand:
    dtype, shape = w.out()
    spatial = list(attrs["input_spatial_dimensions"])
    kernel_spatial = list(attrs["kernel_spatial_dimensions"])
    n = len(spatial)
    strides = list(attrs["window_strides"] or [1] * n)
    lhs_dilation = list(attrs["lhs_dilation"] or [1] * n)
    rhs_dilation = list(attrs["rhs_dilation"] or [1] * n)
    mode = (attrs["auto_pad"] or "NOTSET").upper()
    if mode.startswith("SAME"):
        if any(d != 1 for d in lhs_dilation):
            raise w.error("auto_pad SAME with lhs_dilation has no defined padding")
        low, high = auto_pad_amounts(
            [lhs.shape[d] for d in spatial], [rhs.shape[d] for d in kernel_spatial], strides, rhs_dilation, mode
        )
    elif mode == "VALID":
        low, high = [0] * n, [0] * n
    else:
        flat = list(attrs["padding"] or [0] * (2 * n))
        low, high = flat[:n], flat[n:]
    numbers = (
        "#stablehlo.conv<raw "
        f"input_batch_dimension = {attrs['input_batch_dimension']}, "
        f"input_feature_dimension = {attrs['input_feature_dimension']}, "
        f"input_spatial_dimensions = {int_list(spatial)}, "
        f"kernel_input_feature_dimension = {attrs['kernel_input_feature_dimension']}, "
        f"kernel_output_feature_dimension = {attrs['kernel_output_feature_dimension']}, "
        f"kernel_spatial_dimensions = {int_list(kernel_spatial)}, "
        f"output_batch_dimension = {attrs['output_batch_dimension']}, "
        f"output_feature_dimension = {attrs['output_feature_dimension']}, "
        f"output_spatial_dimensions = {int_list(attrs['output_spatial_dimensions'])}>"
    )
    op_attrs = {
        "dimension_numbers": numbers,
        "window_strides": ints(strides),
        "padding": padding_attr(zip(low, high)),
        "lhs_dilation": ints(lhs_dilation),
        "rhs_dilation": ints(rhs_dilation),
        "feature_group_count": f"{int(attrs['feature_group_count'] or 1)} : i64",
        "batch_group_count": f"{int(attrs['batch_group_count'] or 1)} : i64",
    }
    return w.op1("stablehlo.convolution", [lhs, rhs], dtype, shape, op_attrs)


@emitter("Conv")
def conv(w, lhs, rhs, **attrs):
    return convolution(w, lhs, rhs, attrs)


@emitter("ConvBias")
def conv_bias(w, lhs, rhs, bias, **attrs):
    out = convolution(w, lhs, rhs, attrs)
    feature = attrs["output_feature_dimension"]
    return w.add(out, w.broadcast_to(w.convert(bias, out.dtype), out.shape, [feature]))


# -- normalisation -----------------------------------------------------------------


def _bn_attrs(epsilon, feature_index):
    return {"epsilon": f"{float(epsilon):.9e} : f32", "feature_index": f"{int(feature_index)} : i64"}


@emitter("BatchNormInference")
def batch_norm_inference(w, x, scale, bias, mean, variance, *, epsilon, feature_index):
    return w.op1(
        "stablehlo.batch_norm_inference",
        [x, scale, bias, mean, variance],
        x.dtype,
        x.shape,
        _bn_attrs(epsilon, feature_index),
    )


@emitter("BatchNormTraining")
def batch_norm_training(w, x, scale, bias, *, epsilon, feature_index):
    stats = (x.dtype, (x.shape[feature_index],))
    return w.op(
        "stablehlo.batch_norm_training",
        [x, scale, bias],
        [(x.dtype, x.shape), stats, stats],
        _bn_attrs(epsilon, feature_index),
    )


@emitter("BatchNormGrad")
def batch_norm_grad(w, x, scale, mean, variance, grad_output, *, epsilon, feature_index):
    """XLA's gradients, spelled out (IREE does not legalize stablehlo.batch_norm_grad):
    grad_bias = sum(dy), grad_scale = sum(dy * x_hat),
    grad_input = scale * rstd / n * (n * dy - grad_bias - x_hat * grad_scale)."""
    f = feature_index % x.rank
    others = [d for d in range(x.rank) if d != f]
    count = math.prod(x.shape[d] for d in others)

    def per_feature(v):
        return w.broadcast_to(v, x.shape, [f])

    rstd = w.unary("stablehlo.rsqrt", w.add(variance, w.full(epsilon, variance)))
    x_hat = w.mul(w.sub(x, per_feature(mean)), per_feature(rstd))
    grad_bias = w.sum(grad_output, others)
    grad_scale = w.sum(w.mul(grad_output, x_hat), others)
    inner = w.sub(
        w.sub(w.mul(grad_output, w.full(count, grad_output)), per_feature(grad_bias)),
        w.mul(x_hat, per_feature(grad_scale)),
    )
    factor = w.div(w.mul(scale, rstd), w.full(count, rstd))
    return w.mul(per_feature(factor), inner), grad_scale, grad_bias


def normalize(w: FunctionWriter, x: Operand, dims, epsilon: float) -> tuple[Operand, Operand, Operand]:
    """((x - mean) * rstd, mean, rstd) over ``dims`` (kept as size 1), in ``x``'s type."""
    mean = w.mean(x, dims, keepdims=True)
    centered = w.sub(x, w.broadcast_to(mean, x.shape))
    variance = w.mean(w.mul(centered, centered), dims, keepdims=True)
    rstd = w.unary("stablehlo.rsqrt", w.add(variance, w.full(epsilon, variance)))
    return w.mul(centered, w.broadcast_to(rstd, x.shape)), mean, rstd


@emitter("LayerNorm")
def layer_norm(w, x, scale, bias, *, axis, epsilon):
    dtype, shape = w.out()
    axis %= x.rank
    xc = w.convert(x, _compute_type(x))
    normed, mean, rstd = normalize(w, xc, range(axis, x.rank), epsilon)
    y = w.mul(normed, w.broadcast_to(w.convert(scale, xc.dtype), x.shape))
    if bias is not None:
        y = w.add(y, w.broadcast_to(w.convert(bias, xc.dtype), x.shape))
    outs = [w.convert(y, dtype)]
    for i, stat in ((1, mean), (2, rstd)):
        if w.has_output(i):
            stat_dtype, stat_shape = w.out(i)
            outs.append(w.convert(w.reshape(stat, stat_shape), stat_dtype))
        else:
            outs.append(None)
    return outs


@emitter("GroupNorm")
def group_norm(w, x, scale, bias, *, num_groups, epsilon):
    xc = w.convert(x, _compute_type(x))
    n, c = x.shape[0], x.shape[1]
    grouped = w.reshape(xc, [n, num_groups, (c // num_groups) * math.prod(x.shape[2:])])
    normed, _, _ = normalize(w, grouped, [2], epsilon)
    normed = w.reshape(normed, x.shape)
    y = w.mul(normed, w.broadcast_to(w.convert(scale, xc.dtype), x.shape, [1]))
    y = w.add(y, w.broadcast_to(w.convert(bias, xc.dtype), x.shape, [1]))
    return w.convert(y, x.dtype)


@emitter("InstanceNorm")
def instance_norm(w, x, scale, bias, *, epsilon):
    channel = 1  # (N, C, D1, ...), as the reference kernel reads it
    xc = w.convert(x, _compute_type(x))
    spatial = [d for d in range(1, x.rank) if d != channel]
    normed, _, _ = normalize(w, xc, spatial, epsilon)
    y = w.mul(normed, w.broadcast_to(w.convert(scale, xc.dtype), x.shape, [channel]))
    y = w.add(y, w.broadcast_to(w.convert(bias, xc.dtype), x.shape, [channel]))
    return w.convert(y, x.dtype)


@emitter("Softmax")
def softmax(w, x, *, axis, accurate, logarithmic, epsilon):
    axis %= x.rank
    xc = w.convert(x, _compute_type(x))
    shifted = xc
    if accurate:
        peak = w.reduce_simple(xc, [axis], "stablehlo.maximum", identity(w, "MAX", xc.dtype), keepdims=True)
        shifted = w.sub(xc, w.broadcast_to(peak, x.shape))
    exp = w.unary("stablehlo.exponential", shifted)
    total = w.sum(exp, [axis], keepdims=True)
    if epsilon:
        total = w.binary("stablehlo.maximum", total, w.full(epsilon, total))
    total = w.broadcast_to(total, x.shape)
    if logarithmic:
        y = w.sub(shifted, w.unary("stablehlo.log", total))
    else:
        y = w.div(exp, total)
    return w.convert(y, x.dtype)


# -- pooling ------------------------------------------------------------------------


def _pool_geometry(w, x, dims, kernel_shape, strides, dilations, padding, auto_pad):
    """Full-rank window, strides, dilations and (low, high) padding for pooling over ``dims``."""
    _, out_shape = w.out()
    n = len(dims)
    strides = list(strides or [1] * n)
    dilations = list(dilations or [1] * n)
    flat = list(padding or [0] * (2 * n))
    low_p, _ = explicit_padding(
        [x.shape[d] for d in dims],
        kernel_shape,
        strides,
        dilations,
        [out_shape[d] for d in dims],
        (auto_pad or "NOTSET").upper(),
        flat[:n],
    )
    window, full_strides, full_dil = [1] * x.rank, [1] * x.rank, [1] * x.rank
    low, high = [0] * x.rank, [0] * x.rank
    explicit_high = [0] * x.rank
    mode = (auto_pad or "NOTSET").upper()
    if mode.startswith("SAME"):
        _, same_high = auto_pad_amounts([x.shape[d] for d in dims], kernel_shape, strides, dilations, mode)
    for i, d in enumerate(dims):
        window[d], full_strides[d], full_dil[d] = kernel_shape[i], strides[i], dilations[i]
        low[d] = low_p[i]
        high[d] = (out_shape[d] - 1) * strides[i] + (kernel_shape[i] - 1) * dilations[i] + 1 - x.shape[d] - low_p[i]
        if mode.startswith("SAME"):
            explicit_high[d] = same_high[i]
        elif mode != "VALID":
            explicit_high[d] = flat[n + i]
    return out_shape, window, full_strides, full_dil, low, high, explicit_high


@emitter("MaxPool")
def max_pool(w, x, *, kernel_shape, strides, dilations, padding, auto_pad, ceil_mode, return_indices, storage_order):
    dims = list(range(2, x.rank))
    out_shape, window, st, dil, low, high, _ = _pool_geometry(
        w, x, dims, kernel_shape, strides, dilations, padding, auto_pad
    )
    init = w.scalar(identity(w, "MAX", x.dtype), x.dtype)
    if not w.has_output(1):
        return window_reduce(w, x, init, "MAX", window, st, dil, low, high, out_shape=out_shape)
    return max_pool_with_indices(w, x, init, window, st, dil, low, high, out_shape, storage_order)


def max_pool_with_indices(w, x, init, window, strides, dilations, low, high, out_shape, storage_order):
    """A two-operand reduce_window over (value, row-major flat index); ties keep the first position."""
    top = np.iinfo(np.int64).max
    spatial = list(x.shape[2:])
    index = linear_index(w, x.shape)
    padding = {"edge_padding_low": ints(low), "edge_padding_high": ints(high), "interior_padding": ints([0] * x.rank)}
    padded_shape = [s + lo + hi for s, lo, hi in zip(x.shape, low, high)]
    x = w.op1("stablehlo.pad", [x, init], x.dtype, padded_shape, padding)
    index = w.op1("stablehlo.pad", [index, w.scalar(top, "int64")], "int64", padded_shape, padding)
    attrs = {"window_dimensions": ints(window), "window_strides": ints(strides), "window_dilations": ints(dilations)}
    values, flat = w.op(
        "stablehlo.reduce_window",
        [x, index, init, w.scalar(top, "int64")],
        [(x.dtype, out_shape), ("int64", out_shape)],
        attrs,
        [selection_region(w, [x.dtype, "int64"], True, False)],
    )
    if storage_order == 1:
        flat = _column_major(w, flat, spatial)
    index_dtype, _ = w.out(1)
    return values, w.convert(flat, index_dtype)


@emitter("AveragePool")
def average_pool(w, x, *, dims, kernel_shape, ceil_mode, count_include_pad, strides, padding, auto_pad):
    dims = [d % x.rank for d in (dims or range(2, x.rank))]
    out_shape, window, st, dil, low, high, explicit_high = _pool_geometry(
        w, x, dims, kernel_shape, strides, None, padding, auto_pad
    )
    xc = w.convert(x, _compute_type(x))
    zero = w.scalar(0, xc.dtype)
    total = window_reduce(w, xc, zero, "ADD", window, st, dil, low, high, out_shape=out_shape)
    # The divisor counts real elements, plus the explicit padding with count_include_pad (never the
    # extra cells a ceil-mode window reaches past it).
    ones = w.full(1, xc)
    if count_include_pad:
        covered = [max(0, min(h, e)) for h, e in zip(high, explicit_high)]
        ones = w.op1(
            "stablehlo.pad",
            [ones, w.scalar(1, xc.dtype)],
            xc.dtype,
            [s + lo + c for s, lo, c in zip(xc.shape, low, covered)],
            {
                "edge_padding_low": ints(low),
                "edge_padding_high": ints(covered),
                "interior_padding": ints([0] * xc.rank),
            },
        )
        low_rest, high_rest = [0] * xc.rank, [h - c for h, c in zip(high, covered)]
    else:
        low_rest, high_rest = low, high
    count = window_reduce(w, ones, zero, "ADD", window, st, dil, low_rest, high_rest, out_shape=out_shape)
    return w.convert(w.div(total, count), x.dtype)


@emitter("GlobalAveragePool")
def global_average_pool(w, x, *, dims):
    dims = [d % x.rank for d in (dims or range(2, x.rank))]
    xc = w.convert(x, _compute_type(x))
    return w.convert(w.mean(xc, dims, keepdims=True), x.dtype)


@emitter("GlobalMaxPool")
def global_max_pool(w, x, *, dims):
    dims = [d % x.rank for d in (dims or range(2, x.rank))]
    return w.reduce_simple(x, dims, "stablehlo.maximum", identity(w, "MAX", x.dtype), keepdims=True)


def _column_major(w: FunctionWriter, flat: Operand, spatial) -> Operand:
    """Flat indices plane * P + row-major spatial offset, with the offset made column-major instead."""
    total = math.prod(spatial)
    plane = w.div(flat, w.full(total, flat))
    offset = w.binary("stablehlo.remainder", flat, w.full(total, flat))
    column, row_stride, column_stride = None, total, 1
    for size in spatial:
        row_stride //= size
        coord = w.binary("stablehlo.remainder", w.div(offset, w.full(row_stride, offset)), w.full(size, offset))
        term = w.mul(coord, w.full(column_stride, coord))
        column = term if column is None else w.add(column, term)
        column_stride *= size
    return w.add(w.mul(plane, w.full(total, plane)), column)


# -- others -----------------------------------------------------------------------------


@emitter("Cholesky")
def cholesky(w, x, *, lower):
    """Column-by-column Cholesky-Banachiewicz, unrolled (IREE does not legalize stablehlo.cholesky).

    Column j of L is v / sqrt(v[j]) below the diagonal, where v = A[:, j] - L @ L[j, :]; only the
    lower triangle of A is read (the upper one, through a transpose, when ``lower`` is false)."""
    rank, n = x.rank, x.shape[-1]
    batch = list(range(rank - 2))
    swap = batch + [rank - 1, rank - 2]
    a = x if lower else w.transpose(x, swap)
    factor = w.full(0, a)
    column_shape = list(a.shape[:-1]) + [1]
    rows = w.iota("int64", column_shape, rank - 2)
    for j in range(n):
        row = w.slice_axis(factor, rank - 2, j, j + 1)
        product = dot_general(w, factor, row, batch, batch, [rank - 1], [rank - 1], a.dtype)
        v = w.sub(w.slice_axis(a, rank - 1, j, j + 1), product)
        pivot = w.unary("stablehlo.sqrt", w.slice_axis(v, rank - 2, j, j + 1))
        column = w.div(v, w.broadcast_to(pivot, column_shape))
        column = w.select(w.compare(rows, w.full(j, rows), "GE"), column, w.full(0, column))
        placed = w.op1(
            "stablehlo.pad",
            [column, w.scalar(0, a.dtype)],
            a.dtype,
            a.shape,
            {
                "edge_padding_low": ints([0] * (rank - 1) + [j]),
                "edge_padding_high": ints([0] * (rank - 1) + [n - 1 - j]),
                "interior_padding": ints([0] * rank),
            },
        )
        factor = w.add(factor, placed)
    return factor if lower else w.transpose(factor, swap)


@emitter("Dropout")
def dropout(w, x, *, ratio, training_mode, seed, noise_shape):
    if training_mode and ratio:
        raise w.error("Dropout in training mode draws random numbers; it has no reproducible StableHLO form")
    mask = w.constant(True, "bool", x.shape) if w.has_output(1) else None
    return x, mask


@emitter("BCELoss")
def bce_loss(w, x, target, weight=None, *, reduction):
    """-(t * log(x) + (1 - t) * log(1 - x)), each log clamped at -100 as PyTorch does."""
    floor = w.full(-100, x)
    log_x = w.binary("stablehlo.maximum", w.unary("stablehlo.log", x), floor)
    log_1mx = w.binary("stablehlo.maximum", w.unary("stablehlo.log_plus_one", w.unary("stablehlo.negate", x)), floor)
    loss = w.unary("stablehlo.negate", w.add(w.mul(target, log_x), w.mul(w.sub(w.full(1, target), target), log_1mx)))
    if weight is not None:
        loss = w.mul(loss, w.broadcast_to(weight, x.shape))
    if reduction == "none":
        return loss
    total = w.sum(loss, range(x.rank))
    return total if reduction == "sum" else w.div(total, w.full(math.prod(x.shape), total))


def _string_attr(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@emitter("CustomCall")
def custom_call(w, *args, call_target_name, backend_config, has_side_effect):
    """stablehlo.custom_call: the target is the consumer's to provide (IREE, for one, has none of them)."""
    results = [w.out(i) for i in range(len(w.node.outputs))]
    attrs = {
        "call_target_name": _string_attr(call_target_name or ""),
        "has_side_effect": "true" if has_side_effect else "false",
        "backend_config": _string_attr(backend_config or ""),
    }
    return w.op("stablehlo.custom_call", list(args), results, attrs)


@emitter("Resize")
def resize(
    w,
    x,
    roi=None,
    scales=None,
    sizes=None,
    *,
    mode,
    coordinate_transformation_mode,
    exclude_outside,
    nearest_mode,
    extrapolation_value,
    cubic_coeff_a,
):
    """Separable: per resized dim, a gather of constant indices (NEAREST) or a dot with a constant
    interpolation matrix (LINEAR, CUBIC), both computed by the shared resize kernel's helpers.

    TF_CROP_AND_RESIZE samples inside the constant roi; an output element whose source coordinate leaves
    the input along any dim is ``extrapolation_value``: the OR of the per-dim constant masks, broadcast,
    selects it over the separably resized result."""
    from ....kernels import resize as R

    transform = coordinate_transformation_mode.lower()
    crop = transform == "tf_crop_and_resize"
    roi_pairs = [(0.0, 1.0)] * x.rank
    if crop:
        roi_values = w.constant_input(1, "roi")
        if roi_values.size not in (0, 2 * x.rank):
            raise w.error(f"roi has {roi_values.size} values; expected 2 * rank = {2 * x.rank} (starts, then ends)")
        if roi_values.size:
            roi_values = roi_values.ravel().astype(np.float64)
            roi_pairs = list(zip(roi_values[: x.rank], roi_values[x.rank :]))
    scale_values = None if scales is None else w.constant_input(2, "scales")
    size_values = None if sizes is None else w.constant_input(3, "sizes")
    scale_values = None if scale_values is None or scale_values.size == 0 else [float(s) for s in scale_values.ravel()]
    size_values = None if size_values is None or size_values.size == 0 else [int(s) for s in size_values.ravel()]
    shape, full_scales = R.resize_output_shape(x.shape, scale_values, size_values)
    lengths = list(shape) if scale_values is None else [float(np.float32(n) * s) for n, s in zip(x.shape, full_scales)]
    mode = mode.lower()
    if mode != "nearest" and not x.is_float:
        raise w.error(f"Resize {mode.upper()} of {x.dtype} is only exported for floating types")
    y = x
    outside_per_axis = []  # (axis, constant out-of-range mask of its output indices)
    for axis, (in_size, out_size) in enumerate(zip(x.shape, shape)):
        args = (in_size, out_size, full_scales[axis])
        roi = roi_pairs[axis]
        coords = R.source_coordinates(*args, transform, roi, lengths[axis])
        if R._is_identity(mode, transform, coords, *args):
            continue
        outside = (coords < 0) | (coords > in_size - 1)
        if crop and outside.any():
            outside_per_axis.append((axis, outside))
        if mode == "nearest":
            picks = R.nearest_indices(*args, transform, nearest_mode.lower(), roi, lengths[axis])
            y = take_along(w, y, axis, w.constant(picks.reshape(-1, 1), "int64"))
        else:
            matrix = R.interpolation_matrix(
                *args, mode, transform, cubic_coeff_a, bool(exclude_outside), False, roi, lengths[axis]
            )
            weights = w.constant(matrix, y.dtype)
            moved = dot_general(w, y, weights, [], [], [axis], [1], y.dtype)  # resized dim last
            y = w.transpose(moved, [d for d in range(axis)] + [y.rank - 1] + [d for d in range(axis, y.rank - 1)])
    if outside_per_axis:
        # Outside the input along any dim: the OR of each dim's mask broadcast over the others.
        outside = None
        for axis, vector in outside_per_axis:
            mask = w.broadcast_to(w.constant(vector, "bool"), y.shape, [axis])
            outside = mask if outside is None else w.binary("stablehlo.or", outside, mask)
        fill = np.asarray(extrapolation_value).astype(np.float64 if x.is_float else np.int64)
        y = w.select(outside, w.constant(fill, y.dtype, list(y.shape)), y)
    return y


def take_along(w: FunctionWriter, x: Operand, axis: int, indices: Operand) -> Operand:
    """x indexed along ``axis`` by the (n, 1) ``indices``: a stablehlo.gather of whole slices."""
    n = indices.shape[0]
    others = [d for d in range(x.rank) if d != axis]
    numbers = (
        f"#stablehlo.gather<offset_dims = {int_list(others)}, collapsed_slice_dims = [{axis}], "
        f"start_index_map = [{axis}], index_vector_dim = 1>"
    )
    sizes = [1 if d == axis else s for d, s in enumerate(x.shape)]
    shape = [n if d == axis else s for d, s in enumerate(x.shape)]
    return w.op1(
        "stablehlo.gather",
        [x, indices],
        x.dtype,
        shape,
        {"dimension_numbers": numbers, "slice_sizes": ints(sizes), "indices_are_sorted": "false"},
    )


@emitter("GridSample")
def grid_sample(w, x, grid, *, mode, align_corners, padding_mode):
    """NEAREST/LINEAR sampling of an (N, C, *S) input: per spatial dim, the source coordinate (border or
    reflection padding applied) and its taps; then one gather of x[n, :, i1, i2, ...] per tap combination,
    weighted and summed."""
    if mode not in ("NEAREST", "LINEAR") or padding_mode not in ("PAD_VALUE", "PAD_EDGE", "PAD_REFLECT"):
        raise w.error(
            f"GridSample is exported for NEAREST/LINEAR and PAD_VALUE/PAD_EDGE/PAD_REFLECT only, "
            f"not {mode}, {padding_mode}"
        )
    dtype, _ = w.out()
    xc = w.convert(x, _compute_type(x))
    g = w.convert(grid, xc.dtype)
    c, k = x.shape[1], x.rank - 2
    sample_shape = list(grid.shape[:-1])
    taps_per_dim = []
    for d, size in enumerate(x.shape[2:]):
        norm = w.reshape(w.slice_axis(g, k + 1, k - 1 - d, k - d), sample_shape)  # the grid lists the last dim first
        if align_corners:
            p = w.mul(w.add(norm, w.full(1, norm)), w.full((size - 1) / 2, norm))
            low, high = 0.0, size - 1.0
        else:
            p = w.div(w.sub(w.mul(w.add(norm, w.full(1, norm)), w.full(size, norm)), w.full(1, norm)), w.full(2, norm))
            low, high = -0.5, size - 0.5
        if mode == "NEAREST":
            p = w.unary("stablehlo.round_nearest_even", p)
        if padding_mode == "PAD_EDGE":
            p = w.select(_outside(w, p, low, high), _clamp(w, p, 0, size - 1), p)
        elif padding_mode == "PAD_REFLECT":
            p = _reflect(w, p, low, high)
        if mode == "NEAREST":
            taps = [(p, w.full(1, p))]
        else:
            floor = w.unary("stablehlo.floor", p)
            frac = w.sub(p, floor)
            taps = [(floor, w.sub(w.full(1, frac), frac)), (w.add(floor, w.full(1, floor)), frac)]
        dim_taps = []
        for position, weight in taps:
            if padding_mode == "PAD_VALUE":
                weight = w.select(_outside(w, position, 0, size - 1), w.full(0, weight), weight)
            elif padding_mode == "PAD_REFLECT":
                position = _reflect(w, position, low, high)
            # The int conversion truncates toward zero, after the clamp into the dim.
            index = w.reshape(w.convert(_clamp(w, position, 0, size - 1), "int64"), sample_shape + [1])
            dim_taps.append((index, weight))
        taps_per_dim.append(dim_taps)
    channels_last = w.transpose(xc, [0] + list(range(2, x.rank)) + [1])
    batch = w.iota("int64", sample_shape + [1], 0)
    numbers = (
        f"#stablehlo.gather<offset_dims = [{k + 1}], collapsed_slice_dims = {int_list(range(k + 1))}, "
        f"start_index_map = {int_list(range(k + 1))}, index_vector_dim = {k + 1}>"
    )
    total = None
    for combination in itertools.product(*taps_per_dim):
        indices = w.concatenate([batch] + [index for index, _ in combination], k + 1)
        values = w.op1(
            "stablehlo.gather",
            [channels_last, indices],
            xc.dtype,
            sample_shape + [c],
            {"dimension_numbers": numbers, "slice_sizes": ints([1] * (k + 1) + [c]), "indices_are_sorted": "false"},
        )
        weight = combination[0][1]
        for _, other in combination[1:]:
            weight = w.mul(weight, other)
        term = w.mul(values, w.broadcast_to(weight, sample_shape + [c], list(range(k + 1))))
        total = term if total is None else w.add(total, term)
    return w.convert(w.transpose(total, [0, k + 1] + list(range(1, k + 1))), dtype)


def _outside(w, p, low, high):
    return w.binary("stablehlo.or", w.compare(p, w.full(low, p), "LT"), w.compare(p, w.full(high, p), "GT"))


def _clamp(w, p, low, high):
    return w.op1("stablehlo.clamp", [w.scalar(low, p.dtype), p, w.scalar(high, p.dtype)], p.dtype, p.shape)


def _reflect(w, v, low, high):
    """``v`` reflected about ``low`` and ``high`` (repeatedly) until it lies in ``[low, high]``."""
    span = high - low
    if span <= 0:
        return w.full(low, v)
    below, above = w.compare(v, w.full(low, v), "LT"), w.compare(v, w.full(high, v), "GT")
    zero = w.full(0, v)
    distance = w.select(below, w.sub(w.full(low, v), v), w.select(above, w.sub(v, w.full(high, v)), zero))
    folds = w.unary("stablehlo.floor", w.div(distance, w.full(span, v)))
    rest = w.sub(distance, w.mul(folds, w.full(span, v)))
    even = w.compare(w.binary("stablehlo.remainder", folds, w.full(2, v)), zero, "EQ")
    up, down = w.add(w.full(low, v), rest), w.sub(w.full(high, v), rest)
    return w.select(below, w.select(even, up, down), w.select(above, w.select(even, down, up), v))


@emitter("RoiAlign")
def roi_align(
    w,
    x,
    rois,
    batch_indices,
    *,
    mode,
    coordinate_transformation_mode,
    output_height,
    output_width,
    sampling_ratio,
    spatial_scale,
):
    """Fixed sampling_ratio only (0 makes the sample count depend on each roi's size).  Per roi and axis,
    each sample's two bilinear taps become one-hot (out, size) weight rows; ROIALIGN_AVG averages them into
    one matrix per axis and applies both with dot_general, ROIALIGN_MAX takes the largest weighted tap."""
    if sampling_ratio <= 0:
        raise w.error("RoiAlign with sampling_ratio 0 samples a data-dependent number of points; no static form")
    dtype, _ = w.out()
    xc = w.convert(x, _compute_type(x))
    count, height, width = rois.shape[0], x.shape[2], x.shape[3]
    boxes = w.convert(rois, xc.dtype)
    half_pixel = coordinate_transformation_mode == "ROIALIGN_HALF_PIXEL"
    offset = 0.5 if half_pixel else 0.0

    def corner(i):
        v = w.reshape(w.slice_axis(boxes, 1, i, i + 1), [count])
        return w.sub(w.mul(v, w.full(spatial_scale, v)), w.full(offset, v))

    def axis_taps(start, end, out, size):
        """[(one-hot weight rows (R, out, g, size)) for the low and high tap] of one axis."""
        extent = w.sub(end, start)
        if not half_pixel:
            extent = w.binary("stablehlo.maximum", extent, w.full(1, extent))
        step = w.div(extent, w.full(out, extent))
        g = sampling_ratio
        shape = [count, out, g]
        # start + bin * step + (sample + 0.5) * step / g, in onnxruntime's order of operations
        bins = w.broadcast_to(w.constant(np.arange(out, dtype=np.float64), xc.dtype), shape, [1])
        samples = w.broadcast_to(w.constant(np.arange(g) + 0.5, xc.dtype), shape, [2])
        step_b = w.broadcast_to(step, shape, [0])
        coords = w.add(
            w.add(w.broadcast_to(start, shape, [0]), w.mul(bins, step_b)),
            w.div(w.mul(samples, step_b), w.full(g, step_b)),
        )
        valid = w.binary(
            "stablehlo.and", w.compare(coords, w.full(-1, coords), "GE"), w.compare(coords, w.full(size, coords), "LE")
        )
        clipped = w.binary("stablehlo.maximum", coords, w.full(0, coords))
        low = w.unary("stablehlo.floor", clipped)
        at_edge = w.compare(low, w.full(size - 1, low), "GE")
        low = w.select(at_edge, w.full(size - 1, low), low)
        high = w.select(at_edge, low, w.add(low, w.full(1, low)))
        frac = w.sub(w.select(at_edge, low, clipped), low)
        zero = w.full(0, frac)
        weights = [w.select(valid, w.sub(w.full(1, frac), frac), zero), w.select(valid, frac, zero)]
        cells = w.iota(xc.dtype, shape + [size], 3)
        rows = []
        for tap, weight in zip((low, high), weights):
            hit = w.compare(cells, w.broadcast_to(tap, shape + [size], [0, 1, 2]), "EQ")
            rows.append(w.select(hit, w.broadcast_to(weight, shape + [size], [0, 1, 2]), w.full(0, cells)))
        return rows

    y_rows = axis_taps(corner(1), corner(3), output_height, height)
    x_rows = axis_taps(corner(0), corner(2), output_width, width)
    batch = w.reshape(w.convert(batch_indices, "int64"), [count, 1])
    planes = take_along(w, xc, 0, batch)  # (R, C, H, W)

    def apply(wy, wx):
        """(R, C, out_h, out_w) = wy (R, oh, H) . planes . wx (R, ow, W)^T."""
        t = dot_general(w, planes, wx, [0], [0], [3], [2], xc.dtype)  # (R, C, H, ow)
        t = dot_general(w, t, wy, [0], [0], [2], [2], xc.dtype)  # (R, C, ow, oh)
        return w.transpose(t, [0, 1, 3, 2])

    if mode == "ROIALIGN_AVG":

        def mean_matrix(rows, g):
            total = w.add(rows[0], rows[1])
            return w.div(w.sum(total, [2]), w.full(g, w.sum(total, [2])))

        out = apply(mean_matrix(y_rows, sampling_ratio), mean_matrix(x_rows, sampling_ratio))
    else:
        out = None
        for gy in range(sampling_ratio):
            for wy_full in y_rows:
                wy = w.reshape(w.slice_axis(wy_full, 2, gy, gy + 1), [count, output_height, height])
                for gx in range(sampling_ratio):
                    for wx_full in x_rows:
                        wx = w.reshape(w.slice_axis(wx_full, 2, gx, gx + 1), [count, output_width, width])
                        term = apply(wy, wx)
                        out = term if out is None else w.binary("stablehlo.maximum", out, term)
    return w.convert(out, dtype)


def _roi_bins(w: FunctionWriter, start: Operand, end: Operand, bins: int, size: int) -> tuple[Operand, Operand]:
    """(cells of each bin (R, bins, size), bin non-empty (R, bins)) of one axis of int64 roi bounds: bin b
    spans [floor(b * extent / bins), ceil((b + 1) * extent / bins)) + start clipped to [0, size), where
    extent = max(end - start + 1, 1); integer division is exact here, as every term is non-negative."""
    count = start.shape[0]
    extent = w.binary("stablehlo.maximum", w.add(w.sub(end, start), w.full(1, end)), w.full(1, end))
    shape = [count, bins]
    b = w.iota("int64", shape, 1)
    extent_b, start_b = w.broadcast_to(extent, shape, [0]), w.broadcast_to(start, shape, [0])
    bins_c = w.full(bins, b)
    lo = w.add(w.div(w.mul(b, extent_b), bins_c), start_b)
    hi = w.add(w.div(w.add(w.mul(w.add(b, w.full(1, b)), extent_b), w.full(bins - 1, b)), bins_c), start_b)
    zero, top = w.scalar(0, "int64"), w.scalar(size, "int64")
    lo, hi = (w.op1("stablehlo.clamp", [zero, v, top], "int64", shape) for v in (lo, hi))
    cells = w.iota("int64", shape + [size], 2)
    inside = w.binary(
        "stablehlo.and",
        w.compare(cells, w.broadcast_to(lo, cells.shape, [0, 1]), "GE"),
        w.compare(cells, w.broadcast_to(hi, cells.shape, [0, 1]), "LT"),
    )
    return inside, w.compare(lo, hi, "LT")


@emitter("MaxRoiPool")
def max_roi_pool(w, x, rois, *, layout, pooled_shape, spatial_scale):
    """Caffe's ROI pooling as the reference kernel computes it: each roi's corners (times spatial_scale, in
    float64, rounded half away from zero) give per-axis bin masks; the roi's image is gathered, then the max
    is taken over the masked columns and then over the masked rows (bins are rectangles); empty bins are 0."""
    dtype, _ = w.out()
    if layout == "NHWC":
        x = w.transpose(x, [0, 3, 1, 2])
    ph, pw = (int(v) for v in pooled_shape)
    count, channels, height, width = rois.shape[0], x.shape[1], x.shape[2], x.shape[3]
    boxes = w.convert(rois, "float64")

    def column(i, scale=None):
        v = w.reshape(w.slice_axis(boxes, 1, i, i + 1), [count])
        if scale is not None:
            v = w.unary("stablehlo.round_nearest_afz", w.mul(v, w.full(scale, v)))
        return w.convert(v, "int64")  # float -> int truncates toward zero, as int() does

    batch = column(0)
    x1, y1, x2, y2 = (column(i, spatial_scale) for i in range(1, 5))
    rows, rows_used = _roi_bins(w, y1, y2, ph, height)  # (R, ph, H), (R, ph)
    cols, cols_used = _roi_bins(w, x1, x2, pw, width)  # (R, pw, W), (R, pw)
    planes = take_along(w, x, 0, w.reshape(batch, [count, 1]))  # (R, C, H, W)
    low = w.scalar(-np.inf, x.dtype)
    wide = [count, channels, height, pw, width]
    picked = w.select(w.broadcast_to(cols, wide, [0, 3, 4]), w.broadcast_to(planes, wide, [0, 1, 2, 4]), low)
    col_max = w.reduce_simple(picked, [4], "stablehlo.maximum", -np.inf)  # (R, C, H, pw)
    tall = [count, channels, ph, pw, height]
    picked = w.select(w.broadcast_to(rows, tall, [0, 2, 4]), w.broadcast_to(col_max, tall, [0, 1, 4, 3]), low)
    bin_max = w.reduce_simple(picked, [4], "stablehlo.maximum", -np.inf)  # (R, C, ph, pw)
    used = w.binary(
        "stablehlo.and",
        w.broadcast_to(rows_used, [count, ph, pw], [0, 1]),
        w.broadcast_to(cols_used, [count, ph, pw], [0, 2]),
    )
    out = w.select(w.broadcast_to(used, bin_max.shape, [0, 2, 3]), bin_max, w.full(0, bin_max))
    return w.convert(out, dtype)
