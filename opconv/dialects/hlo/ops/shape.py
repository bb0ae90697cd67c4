"""Shape and data-movement operations: broadcasts, reshapes, slices, pads, iota, concatenation, splits.

Ops whose result shape or element type is not an attribute (Reshape,
BroadcastInDim, Iota...) read it from the node's result type; :func:`result_type`
and friends do that for every HLO kernel, with an error naming the op when the
model leaves the type out.

XLA conventions kept here: DynamicSlice and DynamicUpdateSlice *clamp* their
start indices so the slice lies inside the operand; Pad's interior padding is
inserted before edge padding, and negative edge padding crops.
SetDimensionSize, which marks the run-time size of a bounded dim, is realised
by cutting the array to that size: a reference executor has no padded buffers.
"""

from __future__ import annotations

import math

import numpy as np

from ....errors import ExecutionError
from ....kernels import gather_scatter as gs
from ....kernels._common import dilate, fill_reshape_wildcard, normalize_axes, normalize_axis
from ....types import TensorType, element_type
from ..executor import hlo_op

# ---------------------------------------------------------------- result types


def result_type(ctx, i: int = 0) -> TensorType:
    """The declared :class:`TensorType` of output ``i``; an error when the model leaves it out."""
    outputs = ctx.node.outputs
    t = outputs[i].type if i < len(outputs) and outputs[i] is not None else None
    if not isinstance(t, TensorType):
        raise ExecutionError(
            f"{ctx.node.op} takes its result's element type/shape from the result type, "
            f"but output #{i} has no tensor type"
        )
    return t


def result_dtype(ctx, i: int = 0, default=None) -> np.dtype:
    """The numpy dtype of output ``i`` (``default`` when undeclared; an error when there is no default)."""
    outputs = ctx.node.outputs
    t = outputs[i].type if i < len(outputs) and outputs[i] is not None else None
    if isinstance(t, TensorType) and t.dtype is not None:
        et = element_type(t.dtype)
        if et.numpy is None:
            raise ExecutionError(f"{ctx.node.op}: result element type {t.dtype} has no numpy dtype")
        return et.numpy
    if default is None:
        result_type(ctx, i)  # raises with the message
        raise ExecutionError(f"{ctx.node.op}: output #{i} declares no element type")
    return np.dtype(default)


def result_shape(ctx, i: int = 0) -> tuple[int, ...]:
    """The static shape of output ``i``; an error when it is unknown or symbolic."""
    t = result_type(ctx, i)
    if not t.is_static:
        raise ExecutionError(f"{ctx.node.op} needs a static result shape, the result type is {t}")
    return tuple(d for d in t.shape or () if isinstance(d, int))  # all of them: the shape is static


def _ints(x) -> list[int]:
    """A run-time 1-d integer tensor (or scalar) as a list of Python ints."""
    return [int(v) for v in np.asarray(x).reshape(-1)]


# ---------------------------------------------------------------- constants, copies, iota


@hlo_op("Constant")
def constant(ctx, *, value):
    return np.array(value)


@hlo_op("Copy")
def copy(ctx, x):
    return list(x) if isinstance(x, list) else np.array(x, copy=True)


def _iota(shape, dimension: int, dtype) -> np.ndarray:
    shape = tuple(shape)
    dimension = normalize_axis(dimension, len(shape))
    line = np.arange(shape[dimension]).astype(dtype)
    view = [1] * len(shape)
    view[dimension] = shape[dimension]
    return np.ascontiguousarray(np.broadcast_to(line.reshape(view), shape))


@hlo_op("Iota")
def iota(ctx, *, iota_dimension):
    return _iota(result_shape(ctx), iota_dimension, result_dtype(ctx))


@hlo_op("DynamicIota")
def dynamic_iota(ctx, shape, *, iota_dimension):
    return _iota(_ints(shape), iota_dimension, result_dtype(ctx))


# ---------------------------------------------------------------- broadcasts and reshapes


def broadcast_in_dim(x: np.ndarray, shape, dims) -> np.ndarray:
    """XLA BroadcastInDim: input dim ``i`` becomes result dim ``dims[i]`` (size equal, or 1 to replicate)."""
    x = np.asarray(x)
    shape, dims = tuple(int(d) for d in shape), [int(d) for d in dims]
    if len(dims) != x.ndim:
        raise ExecutionError(f"broadcast_dimensions {dims} must name one result dim per input dim ({x.ndim})")
    if len(set(dims)) != len(dims) or any(not 0 <= d < len(shape) for d in dims):
        raise ExecutionError(f"broadcast_dimensions {dims} must be distinct dims of the rank-{len(shape)} result")
    placed = [1] * len(shape)
    for i, d in enumerate(dims):
        if x.shape[i] not in (1, shape[d]):
            raise ExecutionError(
                f"input dim {i} of size {x.shape[i]} cannot broadcast to result dim {d} of size {shape[d]}"
            )
        placed[d] = x.shape[i]
    # An increasing dims list keeps the input's memory order; otherwise move the dims first.
    order = np.argsort(dims, kind="stable")
    return np.ascontiguousarray(np.broadcast_to(np.transpose(x, order).reshape(placed), shape))


@hlo_op("Broadcast")
def broadcast(ctx, x, *, broadcast_sizes):
    sizes = tuple(int(s) for s in broadcast_sizes or ())
    return np.ascontiguousarray(np.broadcast_to(x, sizes + x.shape))


@hlo_op("BroadcastInDim")
def broadcast_in_dim_op(ctx, x, *, broadcast_dimensions):
    return broadcast_in_dim(x, result_shape(ctx), broadcast_dimensions or [])


@hlo_op("DynamicBroadcastInDim")
def dynamic_broadcast_in_dim(ctx, x, shape, *, broadcast_dimensions):
    return broadcast_in_dim(x, _ints(shape), broadcast_dimensions or [])


@hlo_op("Reshape")
def reshape(ctx, x):
    shape = result_shape(ctx)
    if math.prod(shape) != x.size:
        raise ExecutionError(f"cannot reshape {list(x.shape)} ({x.size} elements) to {list(shape)}")
    return np.reshape(x, shape)


@hlo_op("DynamicReshape")
def dynamic_reshape(ctx, x, shape, *, allowzero=0):
    target = _ints(shape)
    if not allowzero:
        # A 0 copies the input's dim at that position.
        target = [x.shape[i] if d == 0 and i < x.ndim else d for i, d in enumerate(target)]
    if target.count(-1) > 1:
        raise ExecutionError(f"shape {target} has more than one -1")
    target = fill_reshape_wildcard(target, x.size)
    if math.prod(target) != x.size or any(d < 0 for d in target):
        raise ExecutionError(f"cannot reshape {list(x.shape)} ({x.size} elements) to {target}")
    return np.reshape(x, target)


@hlo_op("Squeeze")
def squeeze(ctx, x, axes=None):
    if axes is None:
        return np.reshape(x, [d for d in x.shape if d != 1])
    axes = normalize_axes(_ints(axes), x.ndim)
    bad = [a for a in axes if x.shape[a] != 1]
    if bad:
        raise ExecutionError(f"cannot squeeze dims {bad} of shape {list(x.shape)}: their size is not 1")
    return np.squeeze(x, axis=axes)


@hlo_op("Unsqueeze")
def unsqueeze(ctx, x, axes):
    axes = _ints(axes)
    return np.expand_dims(x, normalize_axes(axes, x.ndim + len(axes)))


@hlo_op("Transpose")
def transpose(ctx, x, *, permutation):
    perm = [int(p) for p in permutation]
    if sorted(perm) != list(range(x.ndim)):
        raise ExecutionError(f"permutation {perm} is not a permutation of the {x.ndim} dims")
    return np.ascontiguousarray(np.transpose(x, perm))


@hlo_op("Reverse")
def reverse(ctx, x, *, dimensions):
    return np.flip(x, normalize_axes(dimensions or [], x.ndim)).copy()


@hlo_op("ReverseSequence")
def reverse_sequence(ctx, x, sequence_lens, *, batch_axis=1, time_axis=0):
    return gs.reverse_sequence(x, sequence_lens, time_axis=time_axis, batch_axis=batch_axis)


@hlo_op("Tile")
def tile(ctx, x, repeats):
    return gs.tile(x, _ints(repeats))


@hlo_op("Trilu")
def trilu(ctx, x, *, upper=True, k=0):
    if x.ndim < 2:
        raise ExecutionError(f"Trilu needs rank >= 2, got shape {list(x.shape)}")
    return np.triu(x, int(k)) if upper else np.tril(x, int(k))


# ---------------------------------------------------------------- concatenation and splits


@hlo_op("Concatenate")
def concatenate(ctx, *inputs, dimension):
    if not inputs:
        raise ExecutionError("Concatenate needs at least one input")
    return np.concatenate(inputs, axis=normalize_axis(int(dimension), inputs[0].ndim))


@hlo_op("GeneralSplit")
def general_split(ctx, x, split, *, axis=0):
    axis = normalize_axis(int(axis), x.ndim)
    sizes = _ints(split)
    if sum(sizes) != x.shape[axis] or any(s < 0 for s in sizes):
        raise ExecutionError(f"split sizes {sizes} do not add up to dim {axis} of size {x.shape[axis]}")
    if len(sizes) != ctx.num_outputs:
        raise ExecutionError(f"{len(sizes)} split sizes for {ctx.num_outputs} outputs")
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


# ---------------------------------------------------------------- slices


def _check_slice(x, starts, limits, strides):
    if not len(starts) == len(limits) == len(strides) == x.ndim:
        raise ExecutionError(f"slice bounds {starts} / {limits} / {strides} need one entry per dim ({x.ndim})")
    for d, (s, e, st) in enumerate(zip(starts, limits, strides)):
        if st <= 0 or not 0 <= s <= e <= x.shape[d]:
            raise ExecutionError(
                f"slice [{s}:{e}:{st}] of dim {d} (size {x.shape[d]}) needs 0 <= start <= limit <= size and stride > 0"
            )


@hlo_op("Slice")
def slice_(ctx, x, *, start_indices, limit_indices, strides=None):
    starts, limits = [int(v) for v in start_indices], [int(v) for v in limit_indices]
    steps = [1] * x.ndim if strides is None else [int(v) for v in strides]
    _check_slice(x, starts, limits, steps)
    return x[tuple(slice(s, e, st) for s, e, st in zip(starts, limits, steps))].copy()


@hlo_op("SliceInDim")
def slice_in_dim(ctx, x, *, start_index, limit_index, stride=1, dim):
    dim = normalize_axis(int(dim), x.ndim)
    starts, limits, steps = [0] * x.ndim, list(x.shape), [1] * x.ndim
    starts[dim], limits[dim], steps[dim] = int(start_index), int(limit_index), int(stride)
    _check_slice(x, starts, limits, steps)
    index = [slice(None)] * x.ndim
    index[dim] = slice(starts[dim], limits[dim], steps[dim])
    return x[tuple(index)].copy()


def _clamped_starts(starts, operand_shape, sizes) -> list[int]:
    """XLA's rule: each start is clamped into [0, dim - size] so the slice fits."""
    if len(starts) != len(operand_shape):
        raise ExecutionError(f"{len(starts)} start indices for a rank-{len(operand_shape)} operand")
    if any(not 0 <= z <= n for z, n in zip(sizes, operand_shape)):
        raise ExecutionError(f"slice sizes {list(sizes)} do not fit the operand shape {list(operand_shape)}")
    return [min(max(s, 0), n - z) for s, n, z in zip(starts, operand_shape, sizes)]


@hlo_op("DynamicSlice")
def dynamic_slice(ctx, x, start_indices, *, slice_sizes):
    sizes = [int(v) for v in slice_sizes]
    starts = _clamped_starts(_ints(start_indices), x.shape, sizes)
    return x[tuple(slice(s, s + z) for s, z in zip(starts, sizes))].copy()


@hlo_op("DynamicUpdateSlice")
def dynamic_update_slice(ctx, x, update, start_indices):
    if update.ndim != x.ndim:
        raise ExecutionError(f"update of rank {update.ndim} for a rank-{x.ndim} operand")
    starts = _clamped_starts(_ints(start_indices), x.shape, update.shape)
    out = x.copy()
    out[tuple(slice(s, s + z) for s, z in zip(starts, update.shape))] = update
    return out


@hlo_op("RealDynamicSlice")
def real_dynamic_slice(ctx, x, start_indices, limit_indices, strides, axes=None):
    starts, limits, steps = _ints(start_indices), _ints(limit_indices), _ints(strides)
    dims = list(range(x.ndim)) if axes is None or np.size(axes) == 0 else _ints(axes)
    if not len(starts) == len(limits) == len(steps) == len(dims):
        raise ExecutionError(
            f"start/limit/strides ({len(starts)}, {len(limits)}, {len(steps)}) need one entry "
            f"per sliced dim ({len(dims)})"
        )
    if any(st <= 0 for st in steps):
        raise ExecutionError(f"strides {steps} must be positive")
    # Negative bounds count from the back and bounds past the dim are clamped, as ONNX Slice does.
    return gs.strided_slice(x, starts, limits, dims, steps).copy()


# ---------------------------------------------------------------- padding

_PAD_MODES = {"PAD_VALUE": "constant", "PAD_EDGE": "edge", "PAD_REFLECT": "reflect", "PAD_SYMMETRIC": "symmetric"}


def _pad_mode(mode) -> str:
    try:
        return _PAD_MODES[str(mode or "PAD_VALUE").upper()]
    except KeyError:
        raise ExecutionError(f"unknown pad mode {mode!r}; expected one of {', '.join(_PAD_MODES)}") from None


def _scalar(value, dtype):
    if value is None:
        return None
    value = np.asarray(value)
    if value.size != 1:
        raise ExecutionError(f"padding_value must be a scalar, got shape {list(value.shape)}")
    return value.reshape(()).astype(dtype)


@hlo_op("Pad")
def pad(ctx, x, padding_value, *, mode="PAD_VALUE", edge_padding_low, edge_padding_high, interior_padding=None):
    np_mode = _pad_mode(mode)
    low, high = [int(v) for v in edge_padding_low], [int(v) for v in edge_padding_high]
    interior = [0] * x.ndim if interior_padding is None else [int(v) for v in interior_padding]
    if not len(low) == len(high) == len(interior) == x.ndim:
        raise ExecutionError(f"Pad needs one low/high/interior amount per dim ({x.ndim})")
    if any(i < 0 for i in interior):
        raise ExecutionError(f"interior padding {interior} must not be negative")
    value = _scalar(padding_value, x.dtype)
    if any(interior):
        if np_mode != "constant":
            raise ExecutionError(f"interior padding is defined for mode PAD_VALUE only, not {mode}")
        x = dilate(x, range(x.ndim), [i + 1 for i in interior], value)
    return gs.pad(x, low, high, np_mode, value)


@hlo_op("DynamicPad")
def dynamic_pad(ctx, x, pads, padding_value=None, *, mode="PAD_VALUE"):
    amounts = _ints(pads)
    if len(amounts) != 2 * x.ndim:
        raise ExecutionError(f"pads has {len(amounts)} values, a rank-{x.ndim} input needs {2 * x.ndim}")
    return gs.pad(x, amounts[: x.ndim], amounts[x.ndim :], _pad_mode(mode), _scalar(padding_value, x.dtype))


# ---------------------------------------------------------------- depth/space


def _depth_space(x, function, space_dims, depth_dim, blocksize, mode):
    """Run an (N, C, *spatial) kernel on any layout: other dims flattened into N, depth as C."""
    space = [normalize_axis(int(d), x.ndim) for d in space_dims]
    depth = normalize_axis(int(depth_dim), x.ndim)
    if depth in space or len(set(space)) != len(space):
        raise ExecutionError(f"depth_dim {depth_dim} and space_dims {list(space_dims)} must be distinct dims")
    others = [d for d in range(x.ndim) if d != depth and d not in space]
    order = others + [depth] + space
    moved = np.transpose(x, order)
    lead = moved.shape[: len(others)]
    result = function(moved.reshape((math.prod(lead),) + moved.shape[len(others) :]), int(blocksize), mode)
    result = result.reshape(lead + result.shape[1:])
    return np.ascontiguousarray(np.transpose(result, np.argsort(order)))


@hlo_op("DepthToSpace")
def depth_to_space(ctx, x, *, space_dims, depth_dim, blocksize, mode="DCR"):
    return _depth_space(x, gs.depth_to_space, space_dims, depth_dim, blocksize, mode or "DCR")


@hlo_op("SpaceToDepth")
def space_to_depth(ctx, x, *, space_dims, blocksize, depth_dim):
    # ONNX SpaceToDepth's channel order: block offsets first, then the input channel (DCR).
    return _depth_space(x, gs.space_to_depth, space_dims, depth_dim, blocksize, "DCR")


# ---------------------------------------------------------------- shape queries


@hlo_op("Shape")
def shape(ctx, x, *, start=0, end=1024):
    # Python slicing counts negative bounds from the back and clamps bounds past the rank, as specified.
    return np.array(x.shape[int(start) : int(end)], dtype=np.int64)


@hlo_op("Size")
def size(ctx, x):
    return np.array(x.size, dtype=np.int64)


@hlo_op("NonZero")
def non_zero(ctx, x):
    return np.argwhere(x).astype(np.int64)


@hlo_op("SetDimensionSize")
def set_dimension_size(ctx, x, size, *, dimension):
    dim = normalize_axis(int(dimension), x.ndim)
    n = int(np.asarray(size).reshape(-1)[0])
    if not 0 <= n <= x.shape[dim]:
        raise ExecutionError(f"dynamic size {n} of dim {dim} exceeds its bound {x.shape[dim]}")
    index = [slice(None)] * x.ndim
    index[dim] = slice(0, n)
    return x[tuple(index)].copy()
