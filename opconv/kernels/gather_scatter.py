"""Indexing kernels: gather / scatter (ONNX and XLA flavours), one_hot,
depth_to_space / space_to_depth, tile, pad, strided slices, col2im and
reverse_sequence.

Conventions
-----------
ONNX-style functions (:func:`gather`, :func:`gather_elements`,
:func:`gather_nd`, :func:`scatter_elements`, :func:`scatter_nd`) accept
negative indices (counted from the end of the indexed dim) and raise
:class:`~opconv.errors.ExecutionError` on an index out of range.  Scatter
``reduction`` is ``"none"`` (the last update to an element wins),
``"add"``, ``"mul"``, ``"max"`` or ``"min"``.

XLA-style :func:`xla_gather` / :func:`xla_scatter` take the dimension numbers
of XLA's ``Gather`` / ``Scatter`` as plain lists, including the batching dims
added by StableHLO.  As XLA does, gather *clamps* each start index so the
whole slice lies inside the operand, while scatter *skips* any update window
that does not lie entirely inside the operand.  ``index_vector_dim`` may equal
the rank of the indices, meaning an implicit trailing dim of size 1.  The
scatter combiner is a name (``"replace"``, ``"add"``, ``"mul"``, ``"max"``,
``"min"``) or any vectorized ``f(current, update)``; updates to the same
element are applied in row-major order of the update tensor.

:func:`depth_to_space` / :func:`space_to_depth` work on ``(N, C, *spatial)``
with any number of spatial dims.  ``mode="DCR"`` (OpenVINO
``blocks_first``) orders the channel dim as (block offsets, depth);
``"CRD"`` (``depth_first``) as (depth, block offsets).

:func:`pad` takes per-dim begin/end amounts; a negative amount crops that
side first, then the remaining positive amounts pad with ``mode``
(``"constant"``, ``"reflect"``, ``"edge"``, ``"wrap"`` or ``"symmetric"``).
:func:`strided_slice` follows ONNX ``Slice``: starts/ends are clamped into
the dim (negatives count from the end) and steps may be negative.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from .. import budget
from ..errors import ExecutionError
from ._common import accumulator_dtype, normalize_axis, per_dim, window_output_size

# ---------------------------------------------------------------- helpers


def _wrap_indices(indices, size, what: str) -> np.ndarray:
    """int64 indices with negatives counted from ``size``; raise if out of range."""
    indices = np.asarray(indices)
    if type(size) is int and indices.dtype.kind in "iu":
        # The common cases in fewer numpy calls (a few microseconds each on the small index arrays of
        # shape computations): one index in Python, or indices already within [0, size).
        if indices.ndim == 0:
            i = int(indices)
            i = i + size if i < 0 else i
            if not 0 <= i < size:
                raise ExecutionError(f"{what}: index out of range")
            return np.array(i, dtype=np.int64)
        if indices.size and indices.min() >= 0 and indices.max() < size:
            return indices.astype(np.int64)
    indices = indices.astype(np.int64)
    size = np.asarray(size, dtype=np.int64)
    wrapped = np.where(indices < 0, indices + size, indices)
    if wrapped.size and ((wrapped < 0) | (wrapped >= size)).any():
        raise ExecutionError(f"{what}: index out of range")
    return wrapped


def apply_at(flat: np.ndarray, targets: np.ndarray, values: np.ndarray, combine) -> None:
    """``flat[t] = combine(flat[t], v)`` for each (t, v) pair, duplicates in order."""
    if combine is None:  # replace: keep the last update of each target
        reversed_targets = targets[::-1]
        unique, first_in_reversed = np.unique(reversed_targets, return_index=True)
        flat[unique] = values[::-1][first_in_reversed]
    elif isinstance(combine, np.ufunc):
        combine.at(flat, targets, values)
    else:
        # Arbitrary function: apply in rounds, round r handling the r-th update
        # of every target, so each round is one vectorized call.
        order = np.argsort(targets, kind="stable")
        t, v = targets[order], values[order]
        position = np.arange(t.size)
        group_start = np.maximum.accumulate(np.where(np.r_[True, t[1:] != t[:-1]], position, 0))
        rank = position - group_start
        for r in range(int(rank.max(initial=-1)) + 1):
            selected = rank == r
            flat[t[selected]] = combine(flat[t[selected]], v[selected])


_ONNX_REDUCTIONS: dict[str, np.ufunc | None] = {
    "none": None,
    "add": np.add,
    "mul": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
}

_XLA_COMBINERS: dict[str, np.ufunc | None] = {"replace": None, **{k: v for k, v in _ONNX_REDUCTIONS.items() if v}}


def _onnx_reduction(name: str):
    try:
        return _ONNX_REDUCTIONS[name]
    except KeyError:
        raise ExecutionError(f"unknown scatter reduction {name!r}") from None


def _scatter(data, flat_targets, updates, combine) -> np.ndarray:
    data = np.asarray(data)
    out = data.copy().reshape(-1)
    apply_at(out, np.asarray(flat_targets).reshape(-1), np.asarray(updates).astype(data.dtype).reshape(-1), combine)
    return out.reshape(data.shape)


# ---------------------------------------------------------------- ONNX-style


def gather(data: np.ndarray, indices: np.ndarray, axis: int = 0) -> np.ndarray:
    """``data`` indexed along ``axis`` by ``indices`` (output: the indices' shape in place of ``axis``)."""
    data = np.asarray(data)
    axis = normalize_axis(axis, data.ndim)
    return np.take(data, _wrap_indices(indices, data.shape[axis], "gather"), axis=axis)


def gather_elements(data: np.ndarray, indices: np.ndarray, axis: int = 0) -> np.ndarray:
    """``out[p] = data[p with p[axis] replaced by indices[p]]`` (output: the indices' shape)."""
    data, indices = np.asarray(data), np.asarray(indices)
    axis = normalize_axis(axis, data.ndim)
    # `indices` may be smaller than `data` in the other dims, so index explicitly.
    coords: list[np.ndarray] = list(np.indices(indices.shape, sparse=True))
    coords[axis] = _wrap_indices(indices, data.shape[axis], "gather_elements")
    return data[tuple(coords)]


def gather_nd(data: np.ndarray, indices: np.ndarray, batch_dims: int = 0) -> np.ndarray:
    """Gather slices addressed by the last dim of ``indices`` (ONNX ``GatherND``).

    The first ``batch_dims`` dims are shared by ``data`` and ``indices``; the
    output is ``indices.shape[:-1] + data.shape[batch_dims + k:]`` where ``k`` is
    ``indices.shape[-1]``.
    """
    data, indices = np.asarray(data), np.asarray(indices)
    b, k = batch_dims, int(indices.shape[-1])
    batch_shape = data.shape[:b]
    indexed_shape = data.shape[b : b + k]
    idx = _wrap_indices(indices, indexed_shape, "gather_nd")
    flat_data = data.reshape((math.prod(batch_shape),) + data.shape[b:])
    flat_idx = idx.reshape(math.prod(batch_shape), -1, k)
    batch = np.arange(len(flat_data)).reshape(-1, 1)
    gathered = flat_data[(batch,) + tuple(flat_idx[..., j] for j in range(k))]
    return gathered.reshape(indices.shape[:-1] + data.shape[b + k :])


def scatter_elements(
    data: np.ndarray, indices: np.ndarray, updates: np.ndarray, axis: int = 0, reduction: str = "none"
) -> np.ndarray:
    """Inverse of :func:`gather_elements`: ``out[p with p[axis] = indices[p]] (op)= updates[p]``."""
    data, updates = np.asarray(data), np.asarray(updates)
    axis = normalize_axis(axis, data.ndim)
    coords: list[np.ndarray] = list(np.indices(updates.shape, sparse=True))
    coords[axis] = _wrap_indices(indices, data.shape[axis], "scatter_elements")
    targets = np.ravel_multi_index(tuple(np.broadcast_arrays(*coords)), data.shape)
    return _scatter(data, targets, updates, _onnx_reduction(reduction))


def scatter_nd(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, reduction: str = "none") -> np.ndarray:
    """Inverse of :func:`gather_nd` (no batch dims): slices of ``updates`` go to the
    positions addressed by the last dim of ``indices``."""
    data, indices = np.asarray(data), np.asarray(indices)
    k = indices.shape[-1]
    idx = _wrap_indices(indices, data.shape[:k], "scatter_nd").reshape(-1, k)
    slice_size = math.prod(data.shape[k:])
    starts = np.ravel_multi_index(tuple(idx.T), data.shape[:k]) * slice_size
    targets = starts[:, None] + np.arange(slice_size)
    return _scatter(data, targets, updates, _onnx_reduction(reduction))


# ---------------------------------------------------------------- XLA-style


def _index_vectors(indices, index_vector_dim: int) -> np.ndarray:
    """Move the index-vector dim of XLA start/scatter indices last."""
    indices = np.asarray(indices).astype(np.int64)
    if index_vector_dim == indices.ndim:
        return indices[..., None]
    return np.moveaxis(indices, index_vector_dim, -1)


def _full_starts(vectors, operand_rank, index_map, operand_batching, indices_batching, index_vector_dim):
    """Per batch position, the start index in every operand dim."""
    batch_shape = vectors.shape[:-1]
    starts = np.zeros(batch_shape + (operand_rank,), dtype=np.int64)
    for k, operand_dim in enumerate(index_map):
        starts[..., operand_dim] = vectors[..., k]
    for operand_dim, indices_dim in zip(operand_batching, indices_batching):
        # Batching dims pair operand dim i with indices dim j: start = position along j.
        position = indices_dim - (indices_dim > index_vector_dim)
        iota = np.arange(batch_shape[position]).reshape((-1,) + (1,) * (len(batch_shape) - position - 1))
        starts[..., operand_dim] = iota
    return starts


def xla_gather(
    operand: np.ndarray,
    start_indices: np.ndarray,
    offset_dims: Sequence[int],
    collapsed_slice_dims: Sequence[int],
    start_index_map: Sequence[int],
    index_vector_dim: int,
    slice_sizes: Sequence[int],
    operand_batching_dims: Sequence[int] = (),
    start_indices_batching_dims: Sequence[int] = (),
) -> np.ndarray:
    """XLA ``Gather`` (see the module docstring for index clamping)."""
    operand = np.asarray(operand)
    rank = operand.ndim
    slice_sizes = [int(s) for s in slice_sizes]
    vectors = _index_vectors(start_indices, index_vector_dim)
    batch_shape = vectors.shape[:-1]
    starts = _full_starts(
        vectors, rank, start_index_map, operand_batching_dims, start_indices_batching_dims, index_vector_dim
    )
    starts = np.clip(starts, 0, np.array(operand.shape) - np.array(slice_sizes))

    # gathered[batch..., s_0, ..., s_{rank-1}] = operand[starts + s]
    nb = len(batch_shape)
    index = []
    for d in range(rank):
        offset = np.arange(slice_sizes[d]).reshape((1,) * nb + tuple(-1 if e == d else 1 for e in range(rank)))
        index.append(starts[..., d].reshape(batch_shape + (1,) * rank) + offset)
    gathered = operand[tuple(index)]

    dropped = set(collapsed_slice_dims) | set(operand_batching_dims)
    kept = [d for d in range(rank) if d not in dropped]
    gathered = gathered.reshape(batch_shape + tuple(slice_sizes[d] for d in kept))

    # Offset dims go to the output positions `offset_dims`; batch dims fill the rest, in order.
    offset_dims = sorted(offset_dims)
    out_rank = nb + len(kept)
    if (
        len(offset_dims) != len(kept)
        or len(set(offset_dims)) != len(offset_dims)
        or any(not 0 <= d < out_rank for d in offset_dims)
    ):
        raise ExecutionError(
            f"gather: offset_dims {offset_dims} are not {len(kept)} distinct dims of the rank-{out_rank} result"
        )
    batch_axes = iter(range(nb))
    perm = [nb + offset_dims.index(p) if p in offset_dims else next(batch_axes) for p in range(out_rank)]
    return np.transpose(gathered, perm)


def xla_scatter(
    operand: np.ndarray,
    scatter_indices: np.ndarray,
    updates: np.ndarray,
    update_window_dims: Sequence[int],
    inserted_window_dims: Sequence[int],
    scatter_dims_to_operand_dims: Sequence[int],
    index_vector_dim: int,
    combiner: str | Callable = "replace",
    input_batching_dims: Sequence[int] = (),
    scatter_indices_batching_dims: Sequence[int] = (),
) -> np.ndarray:
    """XLA ``Scatter`` (see the module docstring for out-of-bounds windows)."""
    operand, updates = np.asarray(operand), np.asarray(updates)
    rank = operand.ndim
    combine = _XLA_COMBINERS[combiner] if isinstance(combiner, str) else combiner
    vectors = _index_vectors(scatter_indices, index_vector_dim)
    batch_shape = vectors.shape[:-1]
    starts = _full_starts(
        vectors,
        rank,
        scatter_dims_to_operand_dims,
        input_batching_dims,
        scatter_indices_batching_dims,
        index_vector_dim,
    )

    # Updates as (scatter batch..., window...).
    window_dims = list(update_window_dims)
    scatter_dims = [d for d in range(updates.ndim) if d not in window_dims]
    updates = np.transpose(updates, scatter_dims + window_dims)
    window_shape = updates.shape[len(scatter_dims) :]
    if updates.shape[: len(scatter_dims)] != batch_shape:
        raise ExecutionError(
            f"scatter updates batch {updates.shape[: len(scatter_dims)]} != indices batch {batch_shape}"
        )

    # Operand dims covered by the update window; inserted and batching dims have extent 1.
    absent = set(inserted_window_dims) | set(input_batching_dims)
    window_operand_dims = [d for d in range(rank) if d not in absent]
    extent = np.ones(rank, dtype=np.int64)
    extent[window_operand_dims] = window_shape
    in_bounds = ((starts >= 0) & (starts + extent <= np.array(operand.shape))).all(axis=-1)

    nb = len(batch_shape)
    coords = []
    for d in range(rank):
        coord = starts[..., d].reshape(batch_shape + (1,) * len(window_shape))
        if d in window_operand_dims:
            j = window_operand_dims.index(d)
            coord = coord + np.arange(window_shape[j]).reshape(
                (1,) * nb + tuple(-1 if e == j else 1 for e in range(len(window_shape)))
            )
        coords.append(coord)
    full_shape = batch_shape + tuple(window_shape)
    coords = [np.broadcast_to(c, full_shape)[in_bounds] for c in coords]
    targets = np.ravel_multi_index(coords, operand.shape) if coords else np.zeros(0, np.int64)
    return _scatter(operand, targets, updates[in_bounds], combine)


# ---------------------------------------------------------------- layout ops


def one_hot(indices: np.ndarray, depth: int, off_value, on_value, axis: int = -1) -> np.ndarray:
    """One-hot encode along a new ``axis``; indices in ``[-depth, depth)`` (negatives
    count from ``depth``), anything else gives an all-``off_value`` row."""
    indices = np.asarray(indices).astype(np.int64)
    depth = int(depth)
    axis = normalize_axis(axis, indices.ndim + 1)
    wrapped = np.where(indices < 0, indices + depth, indices)
    hot = wrapped[..., None] == np.arange(depth)
    values = np.asarray([off_value, on_value])
    return np.moveaxis(np.where(hot, values[1], values[0]), -1, axis)


_DEPTH_MODES = {"DCR": "DCR", "BLOCKS_FIRST": "DCR", "CRD": "CRD", "DEPTH_FIRST": "CRD"}


def _depth_mode(mode: str) -> str:
    try:
        return _DEPTH_MODES[mode.upper()]
    except KeyError:
        raise ExecutionError(f"unknown depth/space mode {mode!r}") from None


def depth_to_space(x: np.ndarray, block_size: int, mode: str = "DCR") -> np.ndarray:
    """``(N, C * b**k, *S)`` -> ``(N, C, *(S * b))`` for ``k`` spatial dims."""
    x = np.asarray(x)
    n, channels, spatial = x.shape[0], x.shape[1], x.shape[2:]
    k, b = len(spatial), int(block_size)
    depth = channels // b**k
    if depth * b**k != channels:
        raise ExecutionError(f"{channels} channels do not divide by block_size**{k} = {b**k}")
    if _depth_mode(mode) == "DCR":
        split = x.reshape((n,) + (b,) * k + (depth,) + spatial)
        block_axes, depth_axis = list(range(1, 1 + k)), 1 + k
    else:
        split = x.reshape((n, depth) + (b,) * k + spatial)
        block_axes, depth_axis = list(range(2, 2 + k)), 1
    spatial_axes = range(2 + k, 2 + 2 * k)
    interleaved = [a for pair in zip(spatial_axes, block_axes) for a in pair]
    out = split.transpose([0, depth_axis] + interleaved)
    return out.reshape((n, depth) + tuple(s * b for s in spatial))


def space_to_depth(x: np.ndarray, block_size: int, mode: str = "DCR") -> np.ndarray:
    """``(N, C, *(S * b))`` -> ``(N, C * b**k, *S)``, the inverse of :func:`depth_to_space`."""
    x = np.asarray(x)
    n, depth, spatial = x.shape[0], x.shape[1], x.shape[2:]
    k, b = len(spatial), int(block_size)
    if any(s % b for s in spatial):
        raise ExecutionError(f"spatial dims {spatial} do not divide by block_size {b}")
    outer = tuple(s // b for s in spatial)
    split = x.reshape((n, depth) + tuple(v for s in outer for v in (s, b)))
    spatial_axes = [2 + 2 * i for i in range(k)]
    block_axes = [3 + 2 * i for i in range(k)]
    if _depth_mode(mode) == "DCR":
        order = [0] + block_axes + [1] + spatial_axes
    else:
        order = [0, 1] + block_axes + spatial_axes
    return split.transpose(order).reshape((n, depth * b**k) + outer)


def tile(x: np.ndarray, repeats: Sequence[int]) -> np.ndarray:
    """Repeat ``x`` ``repeats[d]`` times along each dim ``d`` (one entry per dim)."""
    x = np.asarray(x)
    repeats = [int(r) for r in np.asarray(repeats).reshape(-1)]
    if len(repeats) != x.ndim or any(r < 0 for r in repeats):
        raise ExecutionError(f"tile needs {x.ndim} non-negative repeats, got {repeats}")
    budget.check([d * r for d, r in zip(x.shape, repeats)], x.dtype.itemsize, "Tile's output")
    return np.tile(x, repeats)


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap", "symmetric": "symmetric"}


def pad(
    x: np.ndarray, pads_begin: Sequence[int], pads_end: Sequence[int], mode: str = "constant", value=None
) -> np.ndarray:
    """Pad every dim of ``x`` by ``pads_begin[d]`` / ``pads_end[d]`` elements (negative: crop).

    ``value`` fills constant padding; ``None`` means zero (the empty string for string tensors).
    """
    x = np.asarray(x)
    np_mode = _PAD_MODES.get(mode)
    if np_mode is None:
        raise ExecutionError(f"unknown pad mode {mode!r}")
    begin, end = [int(p) for p in pads_begin], [int(p) for p in pads_end]
    if len(begin) != x.ndim or len(end) != x.ndim:
        raise ExecutionError(f"pad needs {x.ndim} begin and end amounts, got {len(begin)} and {len(end)}")
    budget.check([max(d + b + e, 0) for d, b, e in zip(x.shape, begin, end)], x.dtype.itemsize, "Pad's output")
    if any(max(-lo, 0) + max(-hi, 0) > n for n, lo, hi in zip(x.shape, begin, end)):
        raise ExecutionError(f"pad: negative pads {begin} / {end} crop more than the shape {list(x.shape)}")
    x = x[tuple(slice(max(-lo, 0), n - max(-hi, 0)) for n, lo, hi in zip(x.shape, begin, end))]
    width = [(max(lo, 0), max(hi, 0)) for lo, hi in zip(begin, end)]
    if not any(lo or hi for lo, hi in width):
        return x.copy()
    if np_mode == "constant":
        if value is None:
            value = "" if x.dtype == object else 0
        # np.pad casts constant_values to x's dtype itself; doing it first keeps narrow floats exact.
        out = np.full(tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, width)), value, dtype=x.dtype)
        out[tuple(slice(lo, lo + n) for n, (lo, _) in zip(x.shape, width))] = x
        return out
    if any(n == 0 and (lo or hi) for n, (lo, hi) in zip(x.shape, width)):
        raise ExecutionError(f"pad mode {mode!r} cannot pad an empty dim")
    return np.pad(x, width, mode=np_mode)  # type: ignore[call-overload]  # numpy's stubs want a literal mode


def strided_slice(
    x: np.ndarray,
    starts: Sequence[int],
    ends: Sequence[int],
    axes: Sequence[int] | None = None,
    steps: Sequence[int] | None = None,
) -> np.ndarray:
    """ONNX ``Slice``: ``x[start:end:step]`` along each of ``axes`` (default: the first ``len(starts)`` dims).

    Negative starts/ends count from the end of the dim; both are then clamped
    to ``[0, dim]`` for positive steps and to ``[-1, dim - 1]`` for negative
    ones, so out-of-range bounds (e.g. INT64_MAX) mean "to the end".
    """
    x = np.asarray(x)
    starts = [int(v) for v in np.asarray(starts).reshape(-1).tolist()]  # tolist: Python numbers at once
    ends = [int(v) for v in np.asarray(ends).reshape(-1).tolist()]
    axes = (
        list(range(len(starts)))
        if axes is None
        else [normalize_axis(int(a), x.ndim) for a in np.asarray(axes).reshape(-1).tolist()]
    )
    steps = [1] * len(starts) if steps is None else [int(v) for v in np.asarray(steps).reshape(-1).tolist()]
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ExecutionError(
            f"slice: starts, ends, axes and steps differ in length "
            f"({len(starts)}, {len(ends)}, {len(axes)}, {len(steps)})"
        )
    if len(set(axes)) != len(axes):
        raise ExecutionError(f"slice: duplicate axes {axes}")
    index = [slice(None)] * x.ndim
    for axis, start, end, step in zip(axes, starts, ends, steps):
        if step == 0:
            raise ExecutionError("slice: step must not be 0")
        n = x.shape[axis]
        start, end = start + n if start < 0 else start, end + n if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), n), min(max(end, 0), n)
        else:
            start, end = min(max(start, -1), n - 1), min(max(end, -1), n - 1)
        # For negative steps an end of -1 means "past index 0", which Python spells None.
        index[axis] = slice(start, None if end < 0 else end, step)
    return x[tuple(index)]


def col2im(
    x: np.ndarray,
    image_shape: Sequence[int],
    block_shape: Sequence[int],
    strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
) -> np.ndarray:
    """Fold ``(N, C * prod(block), L)`` column blocks into ``(N, C, *image_shape)``, summing overlaps.

    The inverse layout of im2col (PyTorch ``fold``): block position ``l`` (row-major over the
    block grid) with offset ``k`` lands at ``l_d * stride_d + k_d * dilation_d - pad_begin_d``.
    ``pads`` is ``[begin..., end...]``.
    """
    x = np.asarray(x)
    image = [int(v) for v in np.asarray(image_shape).reshape(-1)]
    block = [int(v) for v in np.asarray(block_shape).reshape(-1)]
    k = len(image)
    strides = per_dim(strides, k, "strides")
    dilations = per_dim(dilations, k, "dilations")
    pads = per_dim(pads, 2 * k, "pads", default=0)
    n, cols, length = x.shape
    channels = cols // math.prod(block)
    if channels * math.prod(block) != cols:
        raise ExecutionError(f"col2im: {cols} columns do not divide by the block size {math.prod(block)}")
    padded = [i + pads[d] + pads[d + k] for d, i in enumerate(image)]
    grid = [window_output_size(p, b, s, dl) for p, b, s, dl in zip(padded, block, strides, dilations)]
    if math.prod(grid) != length:
        raise ExecutionError(f"col2im: {length} blocks given, the image holds {math.prod(grid)} ({grid})")
    # Padded-image coordinate of every (block offset, block position) pair, per spatial dim.
    coords = []
    for d in range(k):
        offset = np.arange(block[d]) * dilations[d]
        position = np.arange(grid[d]) * strides[d]
        shape_k = [1] * (2 * k)
        shape_k[d] = block[d]
        shape_l = [1] * (2 * k)
        shape_l[k + d] = grid[d]
        coords.append(offset.reshape(shape_k) + position.reshape(shape_l))
    target = np.ravel_multi_index(np.broadcast_arrays(*coords), padded).reshape(-1)  # (prod(block) * L,)
    values = x.reshape(n * channels, -1)
    acc = np.zeros((n * channels, math.prod(padded)), dtype=accumulator_dtype(x.dtype))
    np.add.at(acc, (slice(None), target), values)  # type: ignore[arg-type]  # stubs lack tuple indices
    out = acc.reshape((n, channels) + tuple(padded))
    crop = tuple(slice(pads[d], pads[d] + image[d]) for d in range(k))
    return out[(slice(None), slice(None)) + crop].astype(x.dtype)


def reverse_sequence(x: np.ndarray, lengths: Sequence[int], time_axis: int = 0, batch_axis: int = 1) -> np.ndarray:
    """Reverse the first ``lengths[b]`` elements along ``time_axis`` of each batch slice ``b``."""
    x = np.asarray(x)
    time_axis, batch_axis = normalize_axis(time_axis, x.ndim), normalize_axis(batch_axis, x.ndim)
    lengths = np.asarray(lengths).astype(np.int64).reshape(-1)
    steps, batch = x.shape[time_axis], x.shape[batch_axis]
    if lengths.size != batch or ((lengths < 0) | (lengths > steps)).any():
        raise ExecutionError(f"reverse_sequence: need {batch} lengths in [0, {steps}], got {lengths.tolist()}")
    t = np.arange(steps)[:, None]
    source = np.where(t < lengths, lengths - 1 - t, t)  # (time, batch)
    if time_axis > batch_axis:
        source = source.T
    shape = [1] * x.ndim
    shape[time_axis], shape[batch_axis] = steps, batch
    source = np.broadcast_to(source.reshape(shape), x.shape)
    return np.take_along_axis(x, source, axis=time_axis)
