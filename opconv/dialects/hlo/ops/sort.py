"""Sort (several operands ordered by the first), Topk, and sorting by a comparator region.

Sorting is always stable (equal keys keep their order), which is also a
valid answer when ``is_stable`` is false; NaN sorts after every number when
ascending.  :func:`order_by_comparator` sorts by an XLA comparator region
(PartialReduce): a bitonic network whose every stage evaluates the region once
in each direction on whole arrays, with the original index breaking ties.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import sort as ksort
from ....kernels._common import normalize_axis
from ..executor import hlo_op
from .shape import result_dtype


@hlo_op("Sort")
def sort(ctx, *inputs, dimension=-1, descending, is_stable=False):
    if not inputs:
        raise ExecutionError("Sort needs at least one input")
    keys = inputs[0]
    if any(x.shape != keys.shape for x in inputs):
        raise ExecutionError(f"Sort inputs must share one shape, got {[list(x.shape) for x in inputs]}")
    axis = normalize_axis(int(dimension), keys.ndim)
    _, order = ksort.sort(keys, axis, descending=bool(descending))
    return tuple(np.take_along_axis(x, order, axis=axis) for x in inputs)


@hlo_op("Topk")
def topk(ctx, x, k, *, axis=-1, sorted=True, largest=True):
    # The k elements always come out in order, which is valid for sorted=false too.
    count = np.asarray(k).reshape(-1)
    if count.size != 1:
        raise ExecutionError(f"k must hold one count, got {count.tolist()}")
    values, indices = ksort.top_k(x, int(count[0]), axis=int(axis), largest=bool(largest))
    return values, indices.astype(result_dtype(ctx, 1, default=np.int64))


def order_by_comparator(ctx, comparator, operands, axis: int) -> np.ndarray:
    """Indices along ``axis`` that sort ``operands`` by ``comparator``, stably.

    ``comparator`` is a region over 2N scalars ``(lhs_0, rhs_0, lhs_1, rhs_1, ...)``
    returning true when lhs comes strictly before rhs (XLA's convention).
    """
    first = operands[0]
    axis = normalize_axis(axis, first.ndim)
    n = first.shape[axis]
    if n <= 1 or first.size == 0:
        shape = [1] * first.ndim
        shape[axis] = n
        return np.broadcast_to(np.arange(n).reshape(shape), first.shape).copy()
    rows = [np.moveaxis(x, axis, -1).reshape(-1, n) for x in operands]
    size = 1 << max(0, (n - 1).bit_length())  # the network needs a power of two; extra slots sort last
    order = np.broadcast_to(np.arange(size), (rows[0].shape[0], size)).copy()

    def before(u, v):
        """Whether slot indices u come before v (arrays of original positions; >= n are padding)."""
        pad_u, pad_v = u >= n, v >= n
        su, sv = np.where(pad_u, 0, u), np.where(pad_v, 0, v)
        lhs = [np.take_along_axis(r, su, axis=1) for r in rows]
        rhs = [np.take_along_axis(r, sv, axis=1) for r in rows]
        forward = _as_bool(ctx.run_graph(comparator, [a for pair in zip(lhs, rhs) for a in pair]))
        backward = _as_bool(ctx.run_graph(comparator, [a for pair in zip(rhs, lhs) for a in pair]))
        real = forward | (~backward & (u < v))
        return np.where(pad_u | pad_v, ~pad_u & pad_v | (pad_u & pad_v & (u < v)), real)

    slots = np.arange(size)
    block = 2
    while block <= size:
        step = block // 2
        while step >= 1:
            lo = slots[(slots & step) == 0]
            hi = lo | step
            ascending = (lo & block) == 0
            u, v = order[:, lo], order[:, hi]
            u_first = before(u, v)
            swap = np.where(ascending, ~u_first, u_first)
            order[:, lo], order[:, hi] = np.where(swap, v, u), np.where(swap, u, v)
            step //= 2
        block *= 2
    order = order[:, :n]
    return np.moveaxis(order.reshape(np.moveaxis(first, axis, -1).shape), -1, axis)


def _as_bool(results) -> np.ndarray:
    return np.asarray(results[0], dtype=bool)
