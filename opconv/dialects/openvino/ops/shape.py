"""Shape and data-movement ops: Reshape, Transpose, Concat, splits, (Un)Squeeze, StridedSlice, Gather,
Tile, Broadcast, Pad, ShapeOf, Range, OneHot, Depth/Space, ShuffleChannels, Reverse, ReverseSequence."""

from __future__ import annotations

import math

import numpy as np

from ....errors import ExecutionError
from ....kernels import gather_scatter as gs
from ..executor import ov_op
from ._common import axes_of, ints, scalar


@ov_op("Reshape")
def reshape(ctx, x, shape, *, special_zero):
    dims = ints(shape)
    if special_zero:
        # With special_zero a 0 copies the input's dim at the same position.
        dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    if dims.count(-1) > 1:
        raise ExecutionError(f"Reshape target {dims} has more than one -1")
    return np.reshape(x, dims)


@ov_op("Transpose")
def transpose(ctx, x, order):
    perm = ints(order)
    return np.transpose(x, perm or None).copy()  # an empty order reverses the dims


@ov_op("Concat")
def concat(ctx, *inputs, axis):
    return np.concatenate(inputs, axis=axis)


@ov_op("Split")
def split(ctx, x, axis, *, num_splits):
    axis = axes_of(axis, x.ndim)[0]
    if x.shape[axis] % num_splits:
        raise ExecutionError(f"dim {x.shape[axis]} of axis {axis} does not split into {num_splits} parts")
    return tuple(np.split(x, num_splits, axis=axis))


@ov_op("VariadicSplit")
def variadic_split(ctx, x, axis, split_lengths):
    axis = axes_of(axis, x.ndim)[0]
    lengths = ints(split_lengths)
    if lengths.count(-1) == 1:  # one -1 takes whatever the others leave
        lengths[lengths.index(-1)] = x.shape[axis] - (sum(lengths) + 1)
    if sum(lengths) != x.shape[axis]:
        raise ExecutionError(f"split lengths {lengths} do not add up to dim {x.shape[axis]}")
    return tuple(np.split(x, np.cumsum(lengths)[:-1], axis=axis))


@ov_op("Squeeze")
def squeeze(ctx, x, axes=None):
    if axes is None or np.size(axes) == 0:
        return np.reshape(x, [d for d in x.shape if d != 1])
    axes = axes_of(axes, x.ndim)
    bad = [a for a in axes if x.shape[a] != 1]
    if bad:
        raise ExecutionError(f"Squeeze: axes {bad} of shape {list(x.shape)} are not 1")
    return np.reshape(x, [d for i, d in enumerate(x.shape) if i not in axes])


@ov_op("Unsqueeze")
def unsqueeze(ctx, x, axes):
    rank = x.ndim + np.size(axes)
    shape = list(x.shape)
    for a in sorted(axes_of(axes, rank)):
        shape.insert(a, 1)
    return np.reshape(x, shape)


def _mask(bits, i: int) -> bool:
    return bool(bits) and i < len(bits) and bits[i] == 1


@ov_op("StridedSlice")
def strided_slice(
    ctx,
    x,
    begin,
    end,
    stride=None,
    *,
    begin_mask,
    end_mask,
    new_axis_mask=None,
    shrink_axis_mask=None,
    ellipsis_mask=None,
):
    """TensorFlow-style slicing: each position of begin/end/stride is one item of a numpy index.

    A mask bit set to 1 means: begin/end ignored (the whole range), a new
    axis of size 1, the dim taken at ``begin`` and dropped, or an ellipsis.
    """
    begin, end = ints(begin), ints(end)
    strides = ints(stride) if stride is not None else [1] * len(begin)
    index = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        if _mask(ellipsis_mask, i):
            index.append(Ellipsis)
        elif _mask(new_axis_mask, i):
            index.append(np.newaxis)
        elif _mask(shrink_axis_mask, i):
            index.append(b)
        else:
            if s == 0:
                raise ExecutionError("StridedSlice stride must not be 0")
            index.append(slice(None if _mask(begin_mask, i) else b, None if _mask(end_mask, i) else e, s))
    return np.array(np.asarray(x)[tuple(index)])


@ov_op("Gather")
def gather(ctx, data, indices, axis):
    axis = axes_of(axis, data.ndim)[0]
    return gs.gather(data, indices, axis)


@ov_op("Tile")
def tile(ctx, x, repeats):
    # Repeats shorter than the rank repeat the trailing dims; longer ones add leading dims (numpy's tile).
    return np.tile(x, ints(repeats))


@ov_op("Broadcast")
def broadcast(ctx, x, target_shape, axes_mapping=None, *, mode="numpy"):
    target = ints(target_shape)
    if (mode or "numpy").lower() == "explicit":
        if axes_mapping is None:
            raise ExecutionError("Broadcast mode 'explicit' needs the axes_mapping input")
        # Each data dim lands on the target axis axes_mapping names; the other target axes are new.
        shape = [1] * len(target)
        for dim, axis in zip(x.shape, ints(axes_mapping)):
            shape[axis] = dim
        x = np.reshape(x, shape)
    return np.broadcast_to(x, target).copy()


@ov_op("Pad")
def pad(ctx, x, pads_begin, pads_end, pad_value=None, *, pad_mode):
    value = None if pad_value is None else np.asarray(pad_value).item()
    return gs.pad(x, ints(pads_begin), ints(pads_end), pad_mode, value)


@ov_op("ShapeOf")
def shape_of(ctx, x):
    return np.asarray(np.shape(x), dtype=np.int64)


@ov_op("Range")
def range_(ctx, start, stop, step):
    start, stop, step = (np.asarray(v).reshape(()) for v in (start, stop, step))
    dtype = np.result_type(start, stop, step)
    if step == 0:
        raise ExecutionError("Range step must not be 0")
    # Element i is start + i * step, for ceil((stop - start) / step) elements.
    count = max(0, math.ceil((float(stop) - float(start)) / float(step)))
    return (start + np.arange(count, dtype=np.float64 if dtype.kind == "f" else np.int64) * step).astype(dtype)


@ov_op("OneHot")
def one_hot(ctx, indices, depth, on_value, off_value, *, axis):
    depth = scalar(depth)
    on, off = np.asarray(on_value).reshape(()), np.asarray(off_value).reshape(())
    hot = np.asarray(indices)[..., None] == np.arange(depth)  # out-of-range indices give an all-off row
    axis = axis % (np.ndim(indices) + 1)
    return np.moveaxis(np.where(hot, on, off).astype(on.dtype), -1, axis)


@ov_op("DepthToSpace")
def depth_to_space(ctx, x, *, block_size=1, mode):
    return gs.depth_to_space(x, block_size, mode)


@ov_op("SpaceToDepth")
def space_to_depth(ctx, x, *, block_size=1, mode):
    return gs.space_to_depth(x, block_size, mode)


@ov_op("ShuffleChannels")
def shuffle_channels(ctx, x, *, axis=1, group=1):
    axis = axis % x.ndim
    channels = x.shape[axis]
    if channels % group:
        raise ExecutionError(f"{channels} channels do not split into {group} groups")
    split = x.reshape(x.shape[:axis] + (group, channels // group) + x.shape[axis + 1 :])
    return np.swapaxes(split, axis, axis + 1).reshape(x.shape)


@ov_op("Reverse")
def reverse(ctx, x, axis, *, mode):
    if mode == "mask":
        axes = [i for i, flag in enumerate(np.asarray(axis).reshape(-1)) if flag]
    else:
        axes = axes_of(axis, x.ndim)
    return np.flip(x, axes).copy() if axes else x.copy()


@ov_op("ReverseSequence")
def reverse_sequence(ctx, x, seq_lengths, *, batch_axis=0, seq_axis=1):
    return gs.reverse_sequence(x, seq_lengths, time_axis=seq_axis, batch_axis=batch_axis)
