"""Reductions over axes, arg-reductions and cumulative sums and products.

Conventions
-----------
:func:`reduce` takes the reduction by name (see :data:`REDUCTIONS`), the axes
(negative allowed), ``keepdims``, and ONNX's ``noop_with_empty_axes``:

* ``axes=None`` or empty reduces over every axis, unless
  ``noop_with_empty_axes`` is set, in which case it reduces over *no* axis:
  the per-element part of the reduction still applies (``l1`` gives
  ``|x|``, ``sum_square`` gives ``x * x``, ``log_sum`` gives ``log(x)``),
  which is what onnxruntime computes;
* reducing an empty set gives the identity: 0 for sums, 1 for ``prod``,
  -inf (or the type's minimum) for ``max``, ``log_sum`` and
  ``log_sum_exp``, +inf (or the maximum) for ``min``; NaN for ``mean``;
* integer ``mean`` divides with truncation toward zero, like C;
* NaN propagates through ``max``/``min`` (IEEE, numpy), and
  ``argmax``/``argmin`` return the first NaN.

Integers accumulate in int64 and wrap back to the input type; narrow floats
are computed in float32.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import ExecutionError
from ._common import accumulator_dtype, downcast, highest, is_int_dtype, lowest, normalize_axes, normalize_axis, upcast


def _sum(x, axes, keepdims):
    return np.sum(x, axis=axes, keepdims=keepdims, dtype=accumulator_dtype(x.dtype))


def _mean(x, axes, keepdims):
    count = math.prod(x.shape[a] for a in axes)
    total = _sum(x, axes, keepdims)
    if is_int_dtype(x.dtype):
        return np.sign(total) * (np.abs(total) // max(count, 1))
    if count:  # nothing to warn about (and np.errstate costs more than a small mean)
        return total / np.asarray(count, dtype=total.dtype)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / np.asarray(count, dtype=total.dtype)


def _max(x, axes, keepdims):
    return np.max(x, axis=axes, keepdims=keepdims, initial=lowest(x.dtype))


def _min(x, axes, keepdims):
    return np.min(x, axis=axes, keepdims=keepdims, initial=highest(x.dtype))


def _prod(x, axes, keepdims):
    return np.prod(x, axis=axes, keepdims=keepdims, dtype=accumulator_dtype(x.dtype))


def _l1(x, axes, keepdims):
    return _sum(np.abs(x), axes, keepdims)


def _sum_square(x, axes, keepdims):
    return _sum(x * x, axes, keepdims)


def _l2(x, axes, keepdims):
    return np.sqrt(_sum_square(x, axes, keepdims))


def _log_sum(x, axes, keepdims):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(_sum(x, axes, keepdims))


def _log_sum_exp(x, axes, keepdims):
    # Shift by the max so exp cannot overflow; an infinite max shifts by 0.
    peak = _max(x, axes, True)
    peak = np.where(np.isfinite(peak), peak, 0)
    with np.errstate(divide="ignore"):
        result = np.log(_sum(np.exp(x - peak), axes, True)) + peak
    return result if keepdims else np.squeeze(result, axis=axes)


#: Reduction name -> ``f(x, axes, keepdims)`` on an already upcast array.
REDUCTIONS: dict[str, Callable] = {
    "sum": _sum,
    "mean": _mean,
    "max": _max,
    "min": _min,
    "prod": _prod,
    "l1": _l1,
    "l2": _l2,
    "sum_square": _sum_square,
    "log_sum": _log_sum,
    "log_sum_exp": _log_sum_exp,
}


def reduce(
    x: np.ndarray,
    kind: str,
    axes: Sequence[int] | None = None,
    keepdims: bool = True,
    noop_with_empty_axes: bool = False,
) -> np.ndarray:
    """Reduce ``x`` over ``axes`` with the reduction named ``kind``."""
    try:
        reduction = REDUCTIONS[kind]
    except KeyError:
        raise ExecutionError(f"unknown reduction {kind!r}; expected one of {sorted(REDUCTIONS)}") from None
    x = np.asarray(x)
    if axes is None or len(axes) == 0:
        axes = () if noop_with_empty_axes else tuple(range(x.ndim))
    else:
        axes = normalize_axes(axes, x.ndim)
    return downcast(reduction(upcast(x), axes, bool(keepdims)), x.dtype)


def argmax(x: np.ndarray, axis: int = 0, keepdims: bool = True, select_last_index: bool = False) -> np.ndarray:
    """Index (int64) of the maximum along ``axis``; ties pick the first (or last) one."""
    return _arg_reduce(np.argmax, x, axis, keepdims, select_last_index)


def argmin(x: np.ndarray, axis: int = 0, keepdims: bool = True, select_last_index: bool = False) -> np.ndarray:
    """Index (int64) of the minimum along ``axis``; ties pick the first (or last) one."""
    return _arg_reduce(np.argmin, x, axis, keepdims, select_last_index)


def _arg_reduce(function, x, axis, keepdims, select_last_index):
    x = upcast(x)
    axis = normalize_axis(axis, x.ndim)
    if x.shape[axis] == 0:
        raise ExecutionError("arg-reduction over an empty axis")
    if select_last_index:
        # The first hit in the reversed axis is the last hit in the original.
        index = x.shape[axis] - 1 - function(np.flip(x, axis), axis=axis, keepdims=keepdims)
    else:
        index = function(x, axis=axis, keepdims=keepdims)
    return index.astype(np.int64)


def cumsum(x: np.ndarray, axis: int, exclusive: bool = False, reverse: bool = False) -> np.ndarray:
    """Cumulative sum along ``axis``.

    ``exclusive`` leaves the current element out (the first output is 0);
    ``reverse`` sums from the end of the axis toward its start.
    """
    return _cumulative(np.cumsum, 0, x, axis, exclusive, reverse)


def cumprod(x: np.ndarray, axis: int, exclusive: bool = False, reverse: bool = False) -> np.ndarray:
    """Cumulative product along ``axis``; ``exclusive`` and ``reverse`` as for :func:`cumsum` (the identity is 1)."""
    return _cumulative(np.cumprod, 1, x, axis, exclusive, reverse)


def _cumulative(function, identity, x, axis, exclusive, reverse):
    x = np.asarray(x)
    xc = upcast(x)
    axis = normalize_axis(axis, xc.ndim)
    if reverse:
        xc = np.flip(xc, axis)
    total = function(xc, axis=axis, dtype=accumulator_dtype(xc.dtype))
    if exclusive:
        # Shift by one: prepend the identity and drop the last running total.
        first = np.full_like(np.take(total, [0], axis=axis), identity)
        total = np.concatenate([first, np.take(total, np.arange(total.shape[axis] - 1), axis=axis)], axis=axis)
    if reverse:
        total = np.flip(total, axis)
    return downcast(total, x.dtype)
