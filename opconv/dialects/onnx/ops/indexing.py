"""Indexing and selection: Gather*, Scatter*, TensorScatter, Where, NonZero, Compress, OneHot, TopK, Unique.

Index inputs may be negative (counted from the end of the indexed dim) from opset 11 on; accepting them
in earlier versions too changes nothing for valid models, so those versions share a function.  The
numerics are :mod:`opconv.kernels.gather_scatter` and :mod:`opconv.kernels.sort`.
"""

from __future__ import annotations

import numpy as np

from .... import budget
from ....errors import ExecutionError
from ....kernels import gather_scatter, sort
from ....kernels._common import normalize_axis
from ..executor import onnx_op


def _scalar_int(t, what: str) -> int:
    """A scalar or one-element input (such as TopK's K or OneHot's depth) as an int."""
    a = np.asarray(t).reshape(-1)
    if a.size != 1:
        raise ExecutionError(f"{what} must hold exactly one value, got {a.size}")
    return int(a[0])


# ---------------------------------------------------------------- Gather


@onnx_op("Gather", since=[1, 11, 13])
def gather_1(ctx, data, indices, *, axis):
    return gather_scatter.gather(data, indices, axis)


@onnx_op("GatherElements", since=[11, 13])
def gather_elements_11(ctx, data, indices, *, axis):
    return gather_scatter.gather_elements(data, indices, axis)


@onnx_op("GatherND", since=11)
def gather_nd_11(ctx, data, indices):
    return gather_scatter.gather_nd(data, indices, 0)


@onnx_op("GatherND", since=[12, 13])
def gather_nd_12(ctx, data, indices, *, batch_dims):
    return gather_scatter.gather_nd(data, indices, batch_dims)


# ---------------------------------------------------------------- Scatter


@onnx_op("Scatter", since=[9, 11])
def scatter_9(ctx, data, indices, updates, *, axis):
    # Deprecated in opset 11 in favour of ScatterElements, with the same meaning.
    return gather_scatter.scatter_elements(data, indices, updates, axis)


@onnx_op("ScatterElements", since=[11, 13])
def scatter_elements_11(ctx, data, indices, updates, *, axis):
    return gather_scatter.scatter_elements(data, indices, updates, axis)


@onnx_op("ScatterElements", since=[16, 18])
def scatter_elements_16(ctx, data, indices, updates, *, axis, reduction):
    # 16 added reduction add/mul, 18 max/min.
    return gather_scatter.scatter_elements(data, indices, updates, axis, reduction)


@onnx_op("ScatterND", since=[11, 13])
def scatter_nd_11(ctx, data, indices, updates):
    return gather_scatter.scatter_nd(data, indices, updates)


@onnx_op("ScatterND", since=[16, 18])
def scatter_nd_16(ctx, data, indices, updates, *, reduction):
    return gather_scatter.scatter_nd(data, indices, updates, reduction)


@onnx_op("TensorScatter", since=24)
def tensor_scatter_24(ctx, past_cache, update, write_indices=None, *, axis, mode):
    """Write ``update`` into a copy of the cache along ``axis``, batch ``b`` starting at ``write_indices[b]``."""
    cache, update = np.array(past_cache), np.asarray(update)
    axis = normalize_axis(axis, cache.ndim)
    if axis == 0:
        raise ExecutionError("TensorScatter: axis must not be the batch axis 0")
    batch, seq, capacity = cache.shape[0], update.shape[axis], cache.shape[axis]
    starts = np.zeros(batch, np.int64) if write_indices is None else np.asarray(write_indices).astype(np.int64)
    positions = starts.reshape(batch, 1) + np.arange(seq)  # (batch, seq)
    if mode == "circular":
        positions %= capacity
    elif mode != "linear":
        raise ExecutionError(f"TensorScatter: unknown mode {mode!r}")
    elif positions.size and (positions.min() < 0 or positions.max() >= capacity):
        raise ExecutionError(f"TensorScatter: writes at {starts.tolist()} + {seq} overflow the cache of {capacity}")
    shape = [1] * cache.ndim
    shape[0], shape[axis] = batch, seq
    np.put_along_axis(cache, positions.reshape(shape), update, axis)
    return cache


# ---------------------------------------------------------------- Where, NonZero, Compress


@onnx_op("Where", since=[9, 16])
def where_9(ctx, condition, X, Y):
    return np.where(np.asarray(condition, dtype=bool), X, Y)


@onnx_op("NonZero", since=[9, 13])
def non_zero_9(ctx, X):
    # (rank, count) int64 coordinates of the non-zero elements in row-major order.  A scalar counts as
    # a one-element vector, as numpy.nonzero (which the spec follows) and onnxruntime treat it.
    return np.argwhere(np.atleast_1d(X)).T.astype(np.int64)


@onnx_op("Compress", since=[9, 11, 28])
def compress_9(ctx, input, condition, *, axis):
    x = np.asarray(input)
    condition = np.asarray(condition, dtype=bool).reshape(-1)
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = normalize_axis(axis, x.ndim)
    if condition.size > x.shape[axis]:
        raise ExecutionError(
            f"Compress: condition of length {condition.size} is longer than dim {axis} ({x.shape[axis]})"
        )
    return np.compress(condition, x, axis=axis)


# ---------------------------------------------------------------- OneHot


def _one_hot(indices, depth, values, axis) -> np.ndarray:
    values = np.asarray(values).reshape(-1)
    if values.size != 2:
        raise ExecutionError(f"OneHot: values must be [off_value, on_value], got {values.size} elements")
    # Non-integer indices and depth are truncated to int64, as the spec says.
    budget.check((*np.shape(indices), _scalar_int(depth, "OneHot depth")), values.dtype.itemsize, "OneHot's output")
    out = gather_scatter.one_hot(
        np.asarray(indices).astype(np.int64), _scalar_int(depth, "OneHot depth"), values[0], values[1], axis
    )
    return out.astype(values.dtype, copy=False)


@onnx_op("OneHot", since=9)
def one_hot_9(ctx, indices, depth, values, *, axis):
    # OneHot-9 gives negative indices an all-off row (11 counts them from the end): move them out of range.
    indices = np.asarray(indices).astype(np.int64)
    out_of_range = _scalar_int(depth, "OneHot depth")
    return _one_hot(np.where(indices < 0, out_of_range, indices), depth, values, axis)


@onnx_op("OneHot", since=[11, 28])
def one_hot_11(ctx, indices, depth, values, *, axis):
    return _one_hot(indices, depth, values, axis)


# ---------------------------------------------------------------- TopK, Unique


@onnx_op("TopK", since=1)
def top_k_1(ctx, X, *, axis, k):
    return sort.top_k(X, k, axis)


@onnx_op("TopK", since=10)
def top_k_10(ctx, X, K, *, axis):
    return sort.top_k(X, _scalar_int(K, "TopK K"), axis)


@onnx_op("TopK", since=[11, 24])
def top_k_11(ctx, X, K, *, axis, largest, sorted):
    # sorted=0 leaves the order unspecified; the kernel's sorted order is a valid answer.
    return sort.top_k(X, _scalar_int(K, "TopK K"), axis, largest=bool(largest))


@onnx_op("Unique", since=[11, 28])
def unique_11(ctx, X, *, axis, sorted):
    return sort.unique(X, axis, bool(sorted))
