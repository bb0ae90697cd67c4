"""Reduce (computation named by an enum), ArgMax/ArgMin, and PartialReduce (approximate top-k).

Reduce folds every group of reduced elements into its init value
(``acc = acc OP x``; the document applies the computation "from the left,
starting with init_values").  The group order does not matter except for
UPDATE, DIV and SUB, whose folds are taken in row-major order:

======== ==================================================================
ADD      init + sum(x)                  SUB    init - sum(x)
MUL      init * prod(x)                 DIV    ((init / x0) / x1) / ...
MIN/MAX  min/max(init, x...) (NaN wins) L2     sqrt(init^2 + sum(x^2))
AND/OR/  bitwise (logical on bool)      COUNT  init + number of elements
XOR
UPDATE   the last element (init when the group is empty)
======== ==================================================================

With several inputs (N inputs then N init values) only MIN/MAX (and their
ARGMIN/ARGMAX names) apply: the first input is reduced and the others are
read at the position of its first extreme, or are their init values when the
first input's init is at least as extreme (the init comes first in the fold).
A single-input ARGMIN/ARGMAX gives the row-major position of the first
extreme within the reduced dims.

Integers accumulate in int64 and wrap back; float16 is computed in float32.
PartialReduce (XLA ApproxTopK) is computed exactly: the exact top-k is a
valid answer at any recall target.
"""

from __future__ import annotations

import math

import numpy as np

from ....errors import ExecutionError
from ....kernels import reduce as kreduce
from ....kernels._common import accumulator_dtype, downcast, is_float_dtype, normalize_axes, normalize_axis, upcast
from ....types import TensorType
from ..executor import hlo_op
from .elementwise import integer_divide
from .shape import result_dtype
from .sort import order_by_comparator


def _groups(x: np.ndarray, axes) -> np.ndarray:
    """``x`` with the reduced ``axes`` moved last and flattened into one: shape (*kept, group size)."""
    kept = [d for d in range(x.ndim) if d not in axes]
    moved = np.transpose(x, kept + list(axes))
    return moved.reshape(moved.shape[: len(kept)] + (math.prod(x.shape[a] for a in axes),))


def _sum(g):
    return np.sum(g, axis=-1, dtype=accumulator_dtype(g.dtype))


def _fold_divide(g, init):
    acc = np.broadcast_to(init, g.shape[:-1]).astype(g.dtype)
    for i in range(g.shape[-1]):
        if g.dtype.kind in "iu":
            acc = integer_divide(acc, g[..., i])
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                acc = acc / g[..., i]
    return acc


def _update(g, init):
    return g[..., -1] if g.shape[-1] else np.broadcast_to(init, g.shape[:-1])


_FOLDS = {
    "ADD": lambda g, init: init + _sum(g),
    "SUB": lambda g, init: init - _sum(g),
    "MUL": lambda g, init: init * np.prod(g, axis=-1, dtype=accumulator_dtype(g.dtype)),
    "DIV": _fold_divide,
    "MIN": lambda g, init: np.min(g, axis=-1, initial=init),
    "MAX": lambda g, init: np.max(g, axis=-1, initial=init),
    "AND": lambda g, init: np.bitwise_and(init, np.bitwise_and.reduce(g, axis=-1)),
    "OR": lambda g, init: np.bitwise_or(init, np.bitwise_or.reduce(g, axis=-1)),
    "XOR": lambda g, init: np.bitwise_xor(init, np.bitwise_xor.reduce(g, axis=-1)),
    "L2": lambda g, init: np.sqrt(init * init + _sum(g * g)),
    "COUNT": lambda g, init: init + np.full(g.shape[:-1], g.shape[-1], dtype=accumulator_dtype(g.dtype)),
    "UPDATE": _update,
}

_EXTREMES = {"MIN": False, "MAX": True, "ARGMIN": False, "ARGMAX": True}


def _scalar_init(init, dtype):
    init = np.asarray(init)
    if init.size != 1:
        raise ExecutionError(f"init values must be scalars, got shape {list(init.shape)}")
    return init.reshape(()).astype(dtype)


def _first_extreme(g: np.ndarray, largest: bool) -> np.ndarray:
    """Position of the first maximum (minimum) of each group; a NaN counts as the extreme."""
    return (np.argmax if largest else np.argmin)(g, axis=-1)


def _reduce_with_payload(groups, inits, largest: bool):
    """MIN/MAX of the first input, the other inputs read where it is reached (init values if init wins)."""
    keys, key_init = groups[0], inits[0]
    if keys.shape[-1] == 0:
        return tuple(np.broadcast_to(i, keys.shape[:-1]).copy() for i in inits)
    where = _first_extreme(keys, largest)[..., None]
    best = np.take_along_axis(keys, where, axis=-1)[..., 0]
    beats = (best > key_init) if largest else (best < key_init)
    if is_float_dtype(keys.dtype):
        beats = beats | (np.isnan(best) & ~np.isnan(key_init))
    return tuple(np.where(beats, np.take_along_axis(g, where, axis=-1)[..., 0], i) for g, i in zip(groups, inits))


@hlo_op("Reduce")
def reduce_(ctx, *operands, dimensions, type=None, computation):
    if not operands or len(operands) % 2:
        raise ExecutionError(f"Reduce takes N inputs then N init values, got {len(operands)} operands")
    count = len(operands) // 2
    inputs, inits = operands[:count], operands[count:]
    shape = inputs[0].shape
    if any(x.shape != shape for x in inputs):
        raise ExecutionError(f"Reduce inputs must share one shape, got {[list(x.shape) for x in inputs]}")
    name = str(computation).upper()
    axes = normalize_axes(list(dimensions or []), len(shape))
    groups = [_groups(x, axes) for x in inputs]
    inits = [_scalar_init(i, x.dtype) for i, x in zip(inits, inputs)]
    if name in ("ARGMIN", "ARGMAX") and count == 1:
        position = _first_extreme(upcast(groups[0]), _EXTREMES[name])
        return position.astype(result_dtype(ctx, default=np.int64))
    if count > 1:
        if name not in _EXTREMES:
            raise ExecutionError(f"Reduce with {count} inputs supports MIN/MAX (ARGMIN/ARGMAX) only, not {name}")
        return _reduce_with_payload(groups, inits, _EXTREMES[name])
    try:
        fold = _FOLDS[name]
    except KeyError:
        raise ExecutionError(
            f"unknown Reduce computation {computation!r}; expected one of "
            f"{', '.join(sorted(_FOLDS) + ['ARGMAX', 'ARGMIN'])}"
        ) from None
    x = inputs[0]
    with np.errstate(over="ignore", invalid="ignore"):
        return downcast(fold(upcast(groups[0]), upcast(inits[0])), x.dtype)


@hlo_op("ArgMax")
def arg_max(ctx, x, *, axis=0, keepdims=True, select_last_index=False):
    return kreduce.argmax(x, int(axis), bool(keepdims), bool(select_last_index))


@hlo_op("ArgMin")
def arg_min(ctx, x, *, axis=0, keepdims=True, select_last_index=False):
    return kreduce.argmin(x, int(axis), bool(keepdims), bool(select_last_index))


@hlo_op("PartialReduce")
def partial_reduce(
    ctx, *operands, size, comparator, reduction_dim=-1, recall_target=0.95, aggregate_to_topk=True, op_name=None
):
    if not operands or len(operands) % 2:
        raise ExecutionError(f"PartialReduce takes N operands then N init values, got {len(operands)} operands")
    inputs = operands[: len(operands) // 2]
    axis = normalize_axis(int(reduction_dim), inputs[0].ndim)
    n = inputs[0].shape[axis]
    keep = int(size)
    if not aggregate_to_topk:
        # Without the final aggregation the result type says how many candidates are returned.
        declared = ctx.node.outputs[0].type
        if isinstance(declared, TensorType) and declared.is_static:
            keep = declared.shape[axis]
    keep = min(keep, n)
    order = np.take(order_by_comparator(ctx, comparator, inputs, axis), np.arange(keep), axis=axis)
    return tuple(np.take_along_axis(x, order, axis=axis) for x in inputs)
