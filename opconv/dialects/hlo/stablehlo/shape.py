"""Data-movement HLO ops: constants, reshapes, broadcasts, slices, padding, gather/scatter, tuples.

Ops whose result shape is given at run time (DynamicReshape, DynamicIota, Squeeze
with an axes tensor, ...) take it from the node's static output type: a model
whose run-time shape disagreed with its declared type would be invalid anyway.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._writer import FunctionWriter, Operand, emitter, int_list, ints
from .regions import combiner_region


@dataclass(frozen=True)
class TupleOperand:
    """A tuple value: its elements stay separate SSA values (StableHLO folds tuple/get_tuple_element away)."""

    elements: tuple


@emitter("Tuple")
def tuple_(w, *elements):
    return TupleOperand(tuple(elements))


@emitter("GetTupleElement")
def get_tuple_element(w, tup, *, index):
    if not isinstance(tup, TupleOperand):
        raise w.error("the input is not a tuple built in this function (tuple arguments are not exported)")
    return tup.elements[index]


@emitter("Constant")
def constant(w, *, value):
    dtype, shape = w.out()
    return w.constant(np.asarray(value).reshape(shape), dtype, shape)


@emitter("Reshape", "DynamicReshape", "Squeeze", "Unsqueeze")
def reshape(w, x, *_shape_or_axes, **_attrs):
    _, shape = w.out()
    return w.reshape(x, shape)


@emitter("Transpose")
def transpose(w, x, *, permutation):
    return w.transpose(x, permutation)


@emitter("Broadcast")
def broadcast(w, x, *, broadcast_sizes):
    _, shape = w.out()
    return w.broadcast_in_dim(x, shape, range(len(broadcast_sizes), len(shape)))


@emitter("BroadcastInDim", "DynamicBroadcastInDim")
def broadcast_in_dim(w, x, *_shape, broadcast_dimensions):
    _, shape = w.out()
    return w.broadcast_in_dim(x, shape, broadcast_dimensions)


@emitter("Concatenate")
def concatenate(w, *inputs, dimension):
    return w.concatenate(inputs, dimension % inputs[0].rank)


@emitter("Slice")
def slice_(w, x, *, start_indices, limit_indices, strides):
    return w.slice(x, start_indices, limit_indices, strides or [1] * x.rank)


@emitter("SliceInDim")
def slice_in_dim(w, x, *, start_index, limit_index, stride, dim):
    return w.slice_axis(x, dim % x.rank, start_index, limit_index, stride)


def _scalars(w: FunctionWriter, vector: Operand) -> list[Operand]:
    """The elements of a 1-d tensor as scalar tensors."""
    return [w.reshape(w.slice(vector, [i], [i + 1]), ()) for i in range(vector.shape[0])]


@emitter("DynamicSlice")
def dynamic_slice(w, x, start_indices, *, slice_sizes):
    return w.op1(
        "stablehlo.dynamic_slice",
        [x] + _scalars(w, start_indices),
        x.dtype,
        slice_sizes,
        {"slice_sizes": ints(slice_sizes)},
    )


@emitter("DynamicUpdateSlice")
def dynamic_update_slice(w, x, update, start_indices):
    return w.op1("stablehlo.dynamic_update_slice", [x, update] + _scalars(w, start_indices), x.dtype, x.shape)


@emitter("Reverse")
def reverse(w, x, *, dimensions):
    return w.op1("stablehlo.reverse", [x], x.dtype, x.shape, {"dimensions": ints(d % x.rank for d in dimensions)})


@emitter("Iota", "DynamicIota")
def iota(w, *_shape, iota_dimension):
    dtype, shape = w.out()
    return w.iota(dtype, shape, iota_dimension)


@emitter("Shape")
def shape_(w, x, *, start, end):
    dtype, _ = w.out()
    return w.constant(np.asarray(list(x.shape)[start:end], dtype=np.int64), dtype)


@emitter("Size")
def size(w, x):
    dtype, shape = w.out()
    return w.constant(math.prod(x.shape), dtype, shape)


def pad_edges(w: FunctionWriter, x: Operand, low, high, mode: str) -> Operand:
    """Edge, reflect or symmetric padding of every dim (negative amounts crop first)."""
    starts = [max(0, -lo) for lo in low]
    limits = [s - max(0, -hi) for s, hi in zip(x.shape, high)]
    x = w.slice(x, starts, limits)
    for axis, (lo, hi) in enumerate(zip(low, high)):
        lo, hi, n = max(0, lo), max(0, hi), x.shape[axis]
        if not lo and not hi:
            continue
        limit = n - 1 if mode == "PAD_REFLECT" else n
        if max(lo, hi) > limit or n == 0:
            raise w.error(f"{mode} padding of {max(lo, hi)} exceeds what dim {axis} of size {n} can mirror")
        parts = []
        if lo:
            if mode == "PAD_EDGE":
                edge = w.slice_axis(x, axis, 0, 1)
                parts.append(
                    w.broadcast_to(edge, [lo if d == axis else s for d, s in enumerate(x.shape)], list(range(x.rank)))
                )
            else:
                begin = 1 if mode == "PAD_REFLECT" else 0
                parts.append(_reverse(w, w.slice_axis(x, axis, begin, begin + lo), axis))
        parts.append(x)
        if hi:
            if mode == "PAD_EDGE":
                edge = w.slice_axis(x, axis, n - 1, n)
                parts.append(
                    w.broadcast_to(edge, [hi if d == axis else s for d, s in enumerate(x.shape)], list(range(x.rank)))
                )
            else:
                end = n - 1 if mode == "PAD_REFLECT" else n
                parts.append(_reverse(w, w.slice_axis(x, axis, end - hi, end), axis))
        x = w.concatenate(parts, axis)
    return x


def _reverse(w, x, axis):
    return w.op1("stablehlo.reverse", [x], x.dtype, x.shape, {"dimensions": ints([axis])})


def pad_value(w: FunctionWriter, x: Operand, value: Operand, low, high, interior) -> Operand:
    shape = [lo + hi + s + max(0, s - 1) * i for s, lo, hi, i in zip(x.shape, low, high, interior)]
    return w.op1(
        "stablehlo.pad",
        [x, w.reshape(value, ())],
        x.dtype,
        shape,
        {"edge_padding_low": ints(low), "edge_padding_high": ints(high), "interior_padding": ints(interior)},
    )


@emitter("Pad")
def pad(w, x, padding_value, *, mode, edge_padding_low, edge_padding_high, interior_padding):
    interior = interior_padding or [0] * x.rank
    if mode == "PAD_VALUE":
        return pad_value(w, x, padding_value, edge_padding_low, edge_padding_high, interior)
    if any(interior):
        raise w.error(f"interior padding with mode {mode} has no StableHLO form")
    return pad_edges(w, x, edge_padding_low, edge_padding_high, mode)


@emitter("DynamicPad")
def dynamic_pad(w, x, pads, padding_value=None, *, mode):
    amounts = [int(p) for p in w.constant_input(1, "pads").reshape(-1)]
    low, high = amounts[: x.rank], amounts[x.rank :]
    if mode == "PAD_VALUE":
        value = padding_value if padding_value is not None else w.scalar(0, x.dtype)
        return pad_value(w, x, value, low, high, [0] * x.rank)
    return pad_edges(w, x, low, high, mode)


@emitter("Tile")
def tile(w, x, repeats):
    _, shape = w.out()
    counts = [o // s if s else 1 for o, s in zip(shape, x.shape)]
    # (d0, d1, ...) -> (r0, d0, r1, d1, ...) -> (r0 * d0, r1 * d1, ...)
    expanded = [v for pair in zip(counts, x.shape) for v in pair]
    spread = w.broadcast_in_dim(x, expanded, [2 * i + 1 for i in range(x.rank)])
    return w.reshape(spread, shape)


@emitter("GeneralSplit")
def general_split(w, x, split, *, axis):
    axis %= x.rank
    pieces, start = [], 0
    for i in range(len(w.node.outputs)):
        _, shape = w.out(i)
        pieces.append(w.slice_axis(x, axis, start, start + shape[axis]))
        start += shape[axis]
    if start != x.shape[axis]:
        raise w.error(f"the outputs' sizes along axis {axis} sum to {start}, not {x.shape[axis]}")
    return pieces


def _to_channels_last3(x: Operand, depth: int, space) -> list[int]:
    """Permutation putting the other dims first, then depth, height, width."""
    special = [depth % x.rank, space[0] % x.rank, space[1] % x.rank]
    return [d for d in range(x.rank) if d not in special] + special


def _inverse(perm):
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[p] = i
    return out


@emitter("DepthToSpace")
def depth_to_space(w, x, *, space_dims, depth_dim, blocksize, mode):
    perm = _to_channels_last3(x, depth_dim, space_dims)
    y = w.transpose(x, perm)
    lead, (c, h, width), b = list(y.shape[:-3]), y.shape[-3:], blocksize
    k = len(lead)
    if mode == "DCR":
        y = w.reshape(y, lead + [b, b, c // (b * b), h, width])
        order = [k + 2, k + 3, k, k + 4, k + 1]
    else:
        y = w.reshape(y, lead + [c // (b * b), b, b, h, width])
        order = [k, k + 3, k + 1, k + 4, k + 2]
    y = w.transpose(y, list(range(k)) + order)
    y = w.reshape(y, lead + [c // (b * b), h * b, width * b])
    return w.transpose(y, _inverse(perm))


@emitter("SpaceToDepth")
def space_to_depth(w, x, *, space_dims, blocksize, depth_dim):
    perm = _to_channels_last3(x, depth_dim, space_dims)
    y = w.transpose(x, perm)
    lead, (c, h, width), b = list(y.shape[:-3]), y.shape[-3:], blocksize
    k = len(lead)
    y = w.reshape(y, lead + [c, h // b, b, width // b, b])
    y = w.transpose(y, list(range(k)) + [k + 2, k + 4, k, k + 1, k + 3])
    y = w.reshape(y, lead + [c * b * b, h // b, width // b])
    return w.transpose(y, _inverse(perm))


@emitter("Trilu")
def trilu(w, x, *, upper, k):
    rows = w.iota("int64", x.shape, x.rank - 2)
    cols = w.iota("int64", x.shape, x.rank - 1)
    offset = w.sub(cols, rows)
    keep = w.compare(offset, w.full(k, offset), "GE" if upper else "LE")
    return w.select(keep, x, w.full(0, x))


@emitter("Gather")
def gather(
    w,
    x,
    start_indices,
    *,
    index_vector_dim,
    start_index_map,
    collapsed_slice_dims,
    offset_dims,
    slice_sizes,
    indices_are_sorted,
):
    dtype, shape = w.out()
    numbers = (
        f"#stablehlo.gather<offset_dims = {int_list(offset_dims or [])}, "
        f"collapsed_slice_dims = {int_list(collapsed_slice_dims or [])}, "
        f"start_index_map = {int_list(start_index_map)}, index_vector_dim = {int(index_vector_dim)}>"
    )
    attrs = {
        "dimension_numbers": numbers,
        "slice_sizes": ints(slice_sizes),
        "indices_are_sorted": "true" if indices_are_sorted else "false",
    }
    return w.op1("stablehlo.gather", [x, start_indices], dtype, shape, attrs)


@emitter("ScatterND")
def scatter(
    w,
    x,
    scatter_indices,
    updates,
    *,
    computation,
    index_vector_dim,
    update_window_dims,
    inserted_window_dims,
    scatter_dims_to_operand_dims,
    indices_are_sorted,
    unique_indices,
):
    numbers = (
        f"#stablehlo.scatter<update_window_dims = {int_list(update_window_dims or [])}, "
        f"inserted_window_dims = {int_list(inserted_window_dims or [])}, "
        f"scatter_dims_to_operand_dims = {int_list(scatter_dims_to_operand_dims)}, "
        f"index_vector_dim = {int(index_vector_dim)}>"
    )
    attrs = {
        "scatter_dimension_numbers": numbers,
        "indices_are_sorted": "true" if indices_are_sorted else "false",
        "unique_indices": "true" if unique_indices else "false",
    }
    body = combiner_region(w, computation, x.dtype, scatter=True)
    return w.op1("stablehlo.scatter", [x, scatter_indices, updates], x.dtype, x.shape, attrs, [body])


@emitter("RealDynamicSlice")
def real_dynamic_slice(w, x, start_indices, limit_indices, strides, axes=None):
    """Constant bounds only: with them the ONNX-style clamping resolves to a static slice."""
    starts = [int(v) for v in w.constant_input(1, "start_indices").reshape(-1)]
    limits = [int(v) for v in w.constant_input(2, "limit_indices").reshape(-1)]
    steps = [int(v) for v in w.constant_input(3, "strides").reshape(-1)]
    dims = list(range(x.rank))
    if axes is not None:
        dims = [int(a) % x.rank for a in w.constant_input(4, "axes").reshape(-1)] or dims
    begin, end, stride = [0] * x.rank, list(x.shape), [1] * x.rank
    for d, lo, hi, step in zip(dims, starts, limits, steps):
        if step <= 0:
            raise w.error(f"stride {step} of dim {d} must be positive")
        lo, hi, _ = slice(lo, hi, step).indices(x.shape[d])  # negative counts from the back; clamped
        begin[d], end[d], stride[d] = lo, max(lo, hi), step
    return w.slice(x, begin, end, stride)


@emitter("SetDimensionSize")
def set_dimension_size(w, x, size, *, dimension):
    """The declared static output shape is the dim's run-time size (a constant size must agree)."""
    _, shape = w.out()
    dim = dimension % x.rank
    known = w.constant_input(1, "size", required=False)
    if known is not None and int(np.asarray(known).reshape(-1)[0]) != shape[dim]:
        raise w.error(f"size {int(np.asarray(known).reshape(-1)[0])} disagrees with the output type's {shape[dim]}")
    return w.slice_axis(x, dim, 0, shape[dim])


@emitter("ReverseSequence")
def reverse_sequence(w, x, sequence_lens, *, batch_axis, time_axis):
    """out[t, b] = x[len[b] - 1 - t, b] for t < len[b], else x[t, b]: one select per source time step."""
    steps = x.shape[time_axis]
    lens = w.broadcast_to(w.convert(sequence_lens, "int64"), x.shape, [batch_axis])
    times = w.iota("int64", x.shape, time_axis)
    reversed_time = w.sub(w.sub(lens, w.full(1, lens)), times)
    source = w.select(w.compare(times, lens, "LT"), reversed_time, times)
    out = x
    for k in range(steps):
        plane = w.broadcast_to(w.slice_axis(x, time_axis, k, k + 1), x.shape, list(range(x.rank)))
        out = w.select(w.compare(source, w.full(k, source), "EQ"), plane, out)
    return out
