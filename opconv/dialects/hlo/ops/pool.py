"""Pooling and windowed reductions: AveragePool, MaxPool, GlobalAveragePool, GlobalMaxPool,
ReduceWindow, SelectAndScatter.

AveragePool pools over the dims listed in ``dims`` (any layout); MaxPool
has ONNX's channels-first layout.  Both take ``padding`` as ``[x1_begin,
x2_begin, ..., x1_end, x2_end, ...]`` or an ``auto_pad`` mode.

ReduceWindow is XLA's, except that padding comes from ``auto_pad`` (SAME_*
pads so that ``out = ceil(in / stride)``) and ``ceil_mode`` (a last partial
window is kept); padding and base-dilation holes are skipped by the
reduction.  Its variadic operand holds the inputs then as many init values.
Several inputs are allowed only for MIN/MAX (ARGMIN/ARGMAX): the first input
selects, with the init values taking part in the fold, and every input's
value at the selected position is returned, as Reduce does.  A single-input
ARGMIN/ARGMAX returns the row-major position of the first extreme inside
each window.  Numerics: :mod:`opconv.kernels.pool`.
"""

from __future__ import annotations

import math

import numpy as np

from ....errors import ExecutionError
from ....kernels import conv as C
from ....kernels import pool as K
from ....kernels._common import downcast, normalize_axes, normalize_axis, per_dim, upcast
from ..executor import hlo_op
from ._computation import combiner
from .shape import result_dtype


def _pads(shape, kernel, strides, dilations, padding, auto_pad):
    n = len(kernel)
    mode = (auto_pad or "NOTSET").upper()
    if mode != "NOTSET":
        return C.auto_pad(shape, kernel, strides, dilations, mode)
    return C.split_pads(padding, n, "padding")


def _pooled_dims(dims, rank: int) -> list[int]:
    """The pooled dims in the order given (per-dim attributes follow that order)."""
    normalized = [normalize_axis(int(d), rank) for d in dims]
    if len(set(normalized)) != len(normalized):
        raise ExecutionError(f"dims {list(dims)} repeat a dim")
    return normalized


def _pool_dims(x: np.ndarray, dims, function):
    """Run ``function`` on ``x`` viewed as ``(1, rest, *pooled dims)``; the result goes back in place."""
    dims = _pooled_dims(dims, x.ndim)
    rest = [d for d in range(x.ndim) if d not in dims]
    moved = np.transpose(x, rest + dims)
    lead = moved.shape[: len(rest)]
    y = function(moved.reshape((1, math.prod(lead)) + moved.shape[len(rest) :]))
    y = y.reshape(lead + y.shape[2:])
    return np.transpose(y, np.argsort(rest + dims))


@hlo_op("AveragePool")
def average_pool(ctx, x, *, dims, kernel_shape, ceil_mode, count_include_pad, strides, padding, auto_pad):
    spatial = [x.shape[d] for d in _pooled_dims(dims, x.ndim)]
    begin, end = _pads(spatial, kernel_shape, strides, None, padding, auto_pad)
    return _pool_dims(
        x,
        dims,
        lambda v: K.pool(v, "avg", kernel_shape, strides, begin, end, None, bool(ceil_mode), bool(count_include_pad)),
    )


@hlo_op("MaxPool")
def max_pool(ctx, x, *, kernel_shape, strides, dilations, padding, auto_pad, ceil_mode, return_indices, storage_order):
    begin, end = _pads(x.shape[2:], kernel_shape, strides, dilations, padding, auto_pad)
    if return_indices or ctx.num_outputs > 1:
        return K.max_pool_with_indices(
            x, kernel_shape, strides, begin, end, dilations, bool(ceil_mode), int(storage_order)
        )
    return K.pool(x, "max", kernel_shape, strides, begin, end, dilations, bool(ceil_mode))


@hlo_op("GlobalAveragePool")
def global_average_pool(ctx, x, *, dims):
    return downcast(upcast(x).mean(axis=normalize_axes(dims, x.ndim), keepdims=True), x.dtype)


@hlo_op("GlobalMaxPool")
def global_max_pool(ctx, x, *, dims):
    return np.max(x, axis=normalize_axes(dims, x.ndim), keepdims=True)


def _reduce_window_padding(shape, window, strides, base_dilations, window_dilations, auto_pad, ceil_mode):
    """(low, high) per dim from auto_pad, widened at the end by ceil_mode for a last partial window."""
    rank = len(shape)
    sizes = [(s - 1) * b + 1 if s else 0 for s, b in zip(shape, base_dilations)]
    begin, end = C.auto_pad(sizes, window, strides, window_dilations, (auto_pad or "NOTSET").upper())
    if ceil_mode:
        for d in range(rank):
            out = K.pool_output_size(sizes[d], window[d], strides[d], window_dilations[d], begin[d], end[d], True)
            reach = (out - 1) * strides[d] + (window[d] - 1) * window_dilations[d] + 1
            end[d] += max(0, reach - (sizes[d] + begin[d] + end[d]))
    return list(zip(begin, end))


@hlo_op("ReduceWindow")
def reduce_window(
    ctx,
    *operands,
    computation,
    window_dimensions,
    window_strides,
    base_dilations,
    window_dilations,
    auto_pad,
    ceil_mode,
):
    if len(operands) % 2:
        raise ExecutionError(f"ReduceWindow takes inputs then one init value each, got {len(operands)} operands")
    inputs, inits = operands[: len(operands) // 2], operands[len(operands) // 2 :]
    rank = np.ndim(inputs[0])
    window = per_dim(window_dimensions, rank, "window_dimensions")
    strides = per_dim(window_strides, rank, "window_strides")
    base = per_dim(base_dilations, rank, "base_dilations")
    dilations = per_dim(window_dilations, rank, "window_dilations")
    padding = _reduce_window_padding(np.shape(inputs[0]), window, strides, base, dilations, auto_pad, ceil_mode)
    name = str(computation).upper()
    if name in ("ARGMIN", "ARGMAX") and len(inputs) == 1:
        # One input: the row-major position of the first extreme inside each window (as Reduce does).
        _, offsets = K.reduce_window_select(
            inputs, inits, window, strides, base, dilations, padding, largest=name == "ARGMAX", fold_init=False
        )
        return np.maximum(offsets, 0).astype(result_dtype(ctx, default=np.int64))
    if len(inputs) > 1:
        if name not in ("MIN", "MAX", "ARGMIN", "ARGMAX"):
            raise ExecutionError(
                f"ReduceWindow with {len(inputs)} inputs supports MIN/MAX (ARGMIN/ARGMAX) only, not {name}"
            )
        values, _ = K.reduce_window_select(
            inputs, inits, window, strides, base, dilations, padding, largest=name in ("MAX", "ARGMAX")
        )
        return tuple(values)
    reducer = combiner(name, np.asarray(inputs[0]).dtype)
    return K.reduce_window(inputs[0], window, strides, base, dilations, padding, np.asarray(inits[0]).item(), reducer)


@hlo_op("SelectAndScatter")
def select_and_scatter(
    ctx, x, source, init_value, *, select_type, computation, window_dimensions, window_strides, padding
):
    rank = np.ndim(x)
    pads = [0] * (2 * rank) if padding is None else [int(p) for p in padding]
    if len(pads) != 2 * rank:
        raise ExecutionError(f"padding has {len(pads)} values, expected {2 * rank}")
    name = str(computation).upper()
    combine = None if name == "UPDATE" else combiner(name, np.asarray(x).dtype)
    return K.select_and_scatter(
        x,
        source,
        init_value,
        per_dim(window_dimensions, rank, "window_dimensions"),
        per_dim(window_strides, rank, "window_strides"),
        list(zip(pads[:rank], pads[rank:])),
        str(select_type).lower(),
        combine,
    )
