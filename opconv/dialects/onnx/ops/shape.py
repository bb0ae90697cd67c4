"""Shape manipulation: Reshape, Transpose, Concat, Split, Slice, (Un)Squeeze, Flatten, Expand, Tile, Pad,
Shape, Size, SpaceToDepth, DepthToSpace, CenterCropPad, Col2Im, Trilu, EyeLike, Range, ReverseSequence.

These ops move elements without computing on them, so they work on any element type, strings (dtype
object) included, and return the input's dtype.  Several ops moved a parameter from an attribute to an
input over the opsets (Reshape-5, Slice-10, Split-13, Squeeze/Unsqueeze-13, Pad-11, TopK-10): each form
has its own function, the input form reading the values with :func:`_ints`.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from .... import budget
from ....errors import ExecutionError
from ....executor import reads_shape_only
from ....kernels import gather_scatter, linalg
from ....kernels._common import compute_dtype, fill_reshape_wildcard, is_int_dtype, normalize_axes, normalize_axis
from ..executor import onnx_dtype, onnx_op


def _ints(t) -> list[int]:
    """A shape-like input or attribute (any int tensor, scalar or list) as Python ints."""
    return [int(v) for v in np.asarray(t).reshape(-1).tolist()]  # tolist: Python numbers in one call


# ---------------------------------------------------------------- Reshape


def _reshape(x: np.ndarray, shape, allowzero: bool) -> np.ndarray:
    x = np.asarray(x)
    target = np.asarray(shape).reshape(-1).tolist()  # Python ints (shapes are int64 tensors)
    if not allowzero and 0 in target:
        # 0 copies the input's dim at the same position (allowzero=1 makes it a real 0).
        if any(d == 0 and i >= x.ndim for i, d in enumerate(target)):
            raise ExecutionError(f"reshape: shape {target} copies a dim (0) beyond the input rank {x.ndim}")
        target = [x.shape[i] if d == 0 else d for i, d in enumerate(target)]
    if target.count(-1) > 1 or min(target, default=0) < -1:
        raise ExecutionError(f"reshape: invalid target shape {target}")
    target = fill_reshape_wildcard(target, x.size)
    if math.prod(target) != x.size:
        raise ExecutionError(f"reshape: cannot reshape {list(x.shape)} ({x.size} elements) to {target}")
    return x.reshape(target)


@onnx_op("Reshape", since=1)
def reshape_1(ctx, data, *, shape, consumed_inputs):
    return _reshape(data, shape, allowzero=False)


@onnx_op("Reshape", since=[5, 13])
def reshape_5(ctx, data, shape):
    return _reshape(data, shape, allowzero=False)


@onnx_op("Reshape", since=[14, 19, 21, 23, 24, 25])
def reshape_14(ctx, data, shape, *, allowzero):
    return _reshape(data, shape, allowzero=bool(allowzero))


# ---------------------------------------------------------------- Transpose, Concat, Split


@onnx_op("Transpose", since=[1, 13, 21, 23, 24, 25])
def transpose_1(ctx, data, *, perm):
    return linalg.transpose(data, perm)


@onnx_op("Concat", since=1)
def concat_1(ctx, *inputs, axis):
    return np.concatenate(inputs, axis=1 if axis is None else axis)  # Concat-1 defaulted to axis 1


@onnx_op("Concat", since=[4, 11, 13])
def concat_4(ctx, *inputs, axis):
    if not inputs:
        raise ExecutionError("Concat needs at least one input")
    return np.concatenate(inputs, axis=normalize_axis(axis, np.ndim(inputs[0])))


def _split(x: np.ndarray, axis: int, sizes: list[int] | None, parts: int) -> tuple:
    """``x`` cut along ``axis`` into ``sizes`` (or ``parts`` equal pieces when no sizes are given)."""
    x = np.asarray(x)
    axis = normalize_axis(axis, x.ndim)
    n = x.shape[axis]
    if sizes is None:
        if parts <= 0 or n % parts:
            raise ExecutionError(f"split: dim {axis} of size {n} does not split into {parts} equal parts")
        sizes = [n // parts] * parts
    if sum(sizes) != n or any(s < 0 for s in sizes):
        raise ExecutionError(f"split: sizes {sizes} are not lengths adding up to dim {axis} of size {n}")
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


def _given(split) -> list[int] | None:
    return None if split is None else _ints(split)


@onnx_op("Split", since=1)
def split_1(ctx, input, split_input=None, *, axis, split):
    # The lengths come from the second input or the attribute; Split-1 named no default axis, 0 as later.
    sizes = _given(split_input) if split_input is not None else _given(split)
    return _split(input, 0 if axis is None else axis, sizes, ctx.num_outputs)


@onnx_op("Split", since=[2, 11])
def split_2(ctx, input, *, axis, split):
    return _split(input, axis, _given(split), ctx.num_outputs)


@onnx_op("Split", since=13)
def split_13(ctx, input, split=None, *, axis):
    return _split(input, axis, _given(split), ctx.num_outputs)


@onnx_op("Split", since=18)
def split_18(ctx, input, split=None, *, axis, num_outputs):
    if split is not None and num_outputs is not None:
        raise ExecutionError("Split: give either the split input or num_outputs, not both")
    if num_outputs is None:
        # With neither given (the spec asks for one), split equally over the node's outputs as Split-13 did.
        return _split(input, axis, _given(split), ctx.num_outputs)
    if num_outputs != ctx.num_outputs:
        raise ExecutionError(f"Split: num_outputs={num_outputs} but the node has {ctx.num_outputs} outputs")
    # Chunks of ceil(n / num_outputs), the last one smaller when n does not divide.
    n = np.shape(input)[normalize_axis(axis, np.ndim(input))]
    chunk = -(-n // num_outputs)
    sizes = [chunk] * (num_outputs - 1) + [n - chunk * (num_outputs - 1)]
    if sizes[-1] < 0:
        raise ExecutionError(f"Split: {n} elements cannot make {num_outputs} chunks of {chunk} with a smaller last one")
    return _split(input, axis, sizes, num_outputs)


# ---------------------------------------------------------------- Slice


@onnx_op("Slice", since=1)
def slice_1(ctx, data, *, axes, ends, starts):
    return gather_scatter.strided_slice(data, starts, ends, axes)


@onnx_op("Slice", since=[10, 11, 13])
def slice_10(ctx, data, starts, ends, axes=None, steps=None):
    return gather_scatter.strided_slice(data, starts, ends, axes, steps)


# ---------------------------------------------------------------- Squeeze, Unsqueeze, Flatten


def _squeeze(x: np.ndarray, axes) -> np.ndarray:
    x = np.asarray(x)
    if axes is None:
        return x.reshape([d for d in x.shape if d != 1])
    axes = normalize_axes(_ints(axes), x.ndim)
    if any(x.shape[a] != 1 for a in axes):
        raise ExecutionError(f"squeeze: axes {list(axes)} of shape {list(x.shape)} are not all 1")
    return x.reshape([d for i, d in enumerate(x.shape) if i not in axes])


def _unsqueeze(x: np.ndarray, axes) -> np.ndarray:
    x = np.asarray(x)
    # Axes index the output, whose rank is the input's plus one per axis.
    axes = _ints(axes)
    axes = normalize_axes(axes, x.ndim + len(axes))
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return x.reshape(shape)


@onnx_op("Squeeze", since=[1, 11])
def squeeze_1(ctx, data, *, axes):
    return _squeeze(data, axes)


@onnx_op("Squeeze", since=[13, 21, 23, 24, 25])
def squeeze_13(ctx, data, axes=None):
    return _squeeze(data, axes)


@onnx_op("Unsqueeze", since=[1, 11])
def unsqueeze_1(ctx, data, *, axes):
    return _unsqueeze(data, axes)


@onnx_op("Unsqueeze", since=[13, 21, 23, 24, 25])
def unsqueeze_13(ctx, data, axes):
    return _unsqueeze(data, axes)


@onnx_op("Flatten", since=[1, 9, 11, 13, 21, 23, 24, 25])
def flatten_1(ctx, input, *, axis):
    # axis is in [-r, r] (negative from opset 11): dims before it form the rows, the rest the columns.
    x = np.asarray(input)
    if not -x.ndim <= axis <= x.ndim:
        raise ExecutionError(f"flatten: axis {axis} is out of range for rank {x.ndim}")
    axis = axis + x.ndim if axis < 0 else axis
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


# ---------------------------------------------------------------- Expand, Tile


@onnx_op("Expand", since=[8, 13])
def expand_8(ctx, input, shape):
    # Bidirectional broadcast: a 1 in `shape` keeps the input's dim.
    x = np.asarray(input)
    try:
        out_shape = np.broadcast_shapes(x.shape, tuple(_ints(shape)))
    except ValueError:
        raise ExecutionError(f"expand: shape {_ints(shape)} does not broadcast with {list(x.shape)}") from None
    budget.check(out_shape, x.dtype.itemsize, "Expand's output")
    out = np.empty(out_shape, x.dtype)  # a copy into a new array: np.broadcast_to's view costs more
    np.copyto(out, x)
    return out


@onnx_op("Tile", since=1)
def tile_1(ctx, input, tiles, axis):
    # Tile-1 repeats along a single axis given as an input.
    x = np.asarray(input)
    (axis,), (tiles,) = _ints(axis), _ints(tiles)
    repeats = [1] * x.ndim
    repeats[normalize_axis(axis, x.ndim)] = tiles
    return gather_scatter.tile(x, repeats)


@onnx_op("Tile", since=[6, 13])
def tile_6(ctx, input, repeats):
    return gather_scatter.tile(input, repeats)


# ---------------------------------------------------------------- Pad


def _pad(x: np.ndarray, pads: list[int], mode: str, value, axes=None) -> np.ndarray:
    """ONNX pads ``[begin per axis..., end per axis...]`` over ``axes`` (default: all dims)."""
    x = np.asarray(x)
    axes = list(range(x.ndim)) if axes is None else [normalize_axis(a, x.ndim) for a in _ints(axes)]
    if len(pads) != 2 * len(axes):
        raise ExecutionError(f"pad: {len(pads)} pads given for {len(axes)} axes (need 2 per axis)")
    begin, end = [0] * x.ndim, [0] * x.ndim
    for i, a in enumerate(axes):
        begin[a], end[a] = pads[i], pads[i + len(axes)]
    return gather_scatter.pad(x, begin, end, mode, value)


@onnx_op("Pad", since=1)
def pad_1(ctx, data, *, mode, paddings, value):
    return _pad(data, list(paddings), mode, value)


@onnx_op("Pad", since=2)
def pad_2(ctx, data, *, mode, pads, value):
    return _pad(data, list(pads), mode, value)


@onnx_op("Pad", since=[11, 13, 18, 19, 21, 23, 24, 25])
def pad_11(ctx, data, pads, constant_value=None, axes=None, *, mode):
    # The axes input appeared in opset 18 and mode "wrap" in 19; earlier nodes simply never use them.
    # An empty constant_value (an omitted optional input some exporters write) means zero.
    given = constant_value is not None and np.size(constant_value) > 0
    value = np.asarray(constant_value).reshape(-1)[0] if given else None
    return _pad(data, _ints(pads), mode, value, axes)


# ---------------------------------------------------------------- Shape, Size


@onnx_op("Shape", since=[1, 13])
@reads_shape_only
def shape_1(ctx, data):
    return np.array(np.shape(data), dtype=np.int64)


@onnx_op("Shape", since=[15, 19, 21, 23, 24, 25])
@reads_shape_only
def shape_15(ctx, data, *, end, start):
    # Python slicing already clamps and counts negatives from the back, as Shape-15 specifies.
    return np.array(np.shape(data)[start:end], dtype=np.int64)


@onnx_op("Size", since=[1, 13, 19, 21, 23, 24, 25])
@reads_shape_only
def size_1(ctx, data):
    return np.array(np.size(data), dtype=np.int64)


# ---------------------------------------------------------------- SpaceToDepth, DepthToSpace


@onnx_op("SpaceToDepth", since=[1, 13])
def space_to_depth_1(ctx, input, *, blocksize):
    return gather_scatter.space_to_depth(input, blocksize, "DCR")


@onnx_op("SpaceToDepth", since=28)
def space_to_depth_28(ctx, input, *, blocksize, mode):
    return gather_scatter.space_to_depth(input, blocksize, mode)


@onnx_op("DepthToSpace", since=1)
def depth_to_space_1(ctx, input, *, blocksize):
    return gather_scatter.depth_to_space(input, blocksize, "DCR")


@onnx_op("DepthToSpace", since=[11, 13, 28])
def depth_to_space_11(ctx, input, *, blocksize, mode):
    return gather_scatter.depth_to_space(input, blocksize, mode)


# ---------------------------------------------------------------- CenterCropPad, Col2Im


@onnx_op("CenterCropPad", since=18)
def center_crop_pad_18(ctx, input_data, shape, *, axes):
    # Crop windows start at floor((size - target) / 2); odd padding puts the extra element at the end.
    x = np.asarray(input_data)
    axes = list(range(x.ndim)) if axes is None else [normalize_axis(a, x.ndim) for a in axes]
    target = _ints(shape)
    if len(target) != len(axes):
        raise ExecutionError(f"center_crop_pad: {len(target)} sizes for {len(axes)} axes")
    begin, end = [0] * x.ndim, [0] * x.ndim
    for a, t in zip(axes, target):
        diff = t - x.shape[a]
        if diff >= 0:
            begin[a], end[a] = diff // 2, diff - diff // 2
        else:
            begin[a], end[a] = -((-diff) // 2), -((-diff) - (-diff) // 2)
    return gather_scatter.pad(x, begin, end, "constant")


@onnx_op("Col2Im", since=18)
def col2im_18(ctx, input, image_shape, block_shape, *, dilations, pads, strides):
    return gather_scatter.col2im(input, image_shape, block_shape, strides, pads, dilations)


# ---------------------------------------------------------------- Trilu, EyeLike, Range


@onnx_op("Trilu", since=14)
def trilu_14(ctx, input, k=None, *, upper):
    # Keeps the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims.
    x = np.asarray(input)
    k = 0 if k is None else int(np.asarray(k).reshape(-1)[0])
    rows, cols = x.shape[-2:]
    offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    keep = offset >= k if upper else offset <= k
    zero = "" if x.dtype == object else np.zeros((), dtype=x.dtype)
    return np.where(keep, x, zero).astype(x.dtype, copy=False)


@onnx_op("EyeLike", since=[9, 22])
def eye_like_9(ctx, input, *, dtype, k):
    x = np.asarray(input)
    if x.ndim != 2:
        raise ExecutionError(f"EyeLike needs a 2-D input, got shape {list(x.shape)}")
    out_dtype = x.dtype if dtype is None else onnx_dtype(dtype)
    return np.eye(x.shape[0], x.shape[1], k, dtype=out_dtype)


def _range(start, limit, delta, compute_dtype) -> np.ndarray:
    """``start + i * delta`` for ``i < max(ceil((limit - start) / delta), 0)``, computed in ``compute_dtype``."""
    out_dtype = np.asarray(start).dtype
    start, limit, delta = (np.asarray(v).reshape(()).astype(compute_dtype) for v in (start, limit, delta))
    if delta == 0:
        raise ExecutionError("Range: delta must not be 0")
    if is_int_dtype(compute_dtype):
        span, step = int(limit) - int(start), int(delta)
        count = max(-(-span // step), 0)  # exact integer ceil division
    else:
        count = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
    budget.check_count(count, np.dtype(compute_dtype).itemsize, "Range's output")
    values = start + np.arange(count, dtype=compute_dtype) * delta
    return values.astype(out_dtype)


@onnx_op("Range", since=11)
def range_11(ctx, start, limit, delta):
    return _range(start, limit, delta, compute_dtype(np.asarray(start).dtype))


@onnx_op("Range", since=27)
def range_27(ctx, start, limit, delta, *, stash_type):
    # stash_type only matters for float16/bfloat16: 1 (float) computes in float32, else in the input type.
    dtype = np.asarray(start).dtype
    narrow = dtype in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
    return _range(start, limit, delta, onnx_dtype(stash_type) if narrow else dtype)


# ---------------------------------------------------------------- ReverseSequence


@onnx_op("ReverseSequence", since=[10, 28])
def reverse_sequence_10(ctx, input, sequence_lens, *, batch_axis, time_axis):
    return gather_scatter.reverse_sequence(input, sequence_lens, time_axis, batch_axis)
