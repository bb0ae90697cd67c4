"""Helpers shared by the kernel modules: precision policy, axis handling, windows.

Precision policy (every kernel follows it):

* float16, bfloat16 and the 8/6/4-bit float types are computed in float32 and
  the result is cast back to the input type, as the runtimes we compare with do;
* float32 stays float32 and float64 stays float64;
* integers are computed exactly (accumulations in int64 where a product could
  overflow the input type) and cast back with two's-complement wrap-around.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import ml_dtypes
import numpy as np

from ..errors import ExecutionError

# Float types numpy has no arithmetic for (or too little precision to
# accumulate in): computed in float32.
_NARROW_FLOATS = frozenset(
    np.dtype(t)
    for t in (
        np.float16,
        ml_dtypes.bfloat16,
        ml_dtypes.float8_e4m3fn,
        ml_dtypes.float8_e4m3fnuz,
        ml_dtypes.float8_e5m2,
        ml_dtypes.float8_e5m2fnuz,
        ml_dtypes.float8_e8m0fnu,
        ml_dtypes.float6_e2m3fn,
        ml_dtypes.float6_e3m2fn,
        ml_dtypes.float4_e2m1fn,
    )
)
_NARROW_INTS = frozenset(np.dtype(t) for t in (ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2))


def is_float_dtype(dtype) -> bool:
    """True for numpy floats and the ml_dtypes float types."""
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype in _NARROW_FLOATS


def is_int_dtype(dtype) -> bool:
    """True for numpy integers (not bool) and ml_dtypes' int4/int2 families."""
    dtype = np.dtype(dtype)
    return dtype.kind in "iu" or dtype in _NARROW_INTS


def compute_dtype(dtype) -> np.dtype:
    """The dtype a kernel computes in for inputs of ``dtype``."""
    dtype = np.dtype(dtype)
    if dtype in _NARROW_FLOATS:
        return np.dtype(np.float32)
    if dtype in _NARROW_INTS:
        return np.dtype(np.int64)
    return dtype


def computes_natively(dtype) -> bool:
    """Whether kernels compute numbers of ``dtype`` in ``dtype`` itself (so a result may overwrite an input)."""
    if dtype in _NATIVE:
        return dtype != np.bool_
    dtype = np.dtype(dtype)
    return dtype.kind in "fiu" and compute_dtype(dtype) == dtype


# The dtypes computed as they are, e.g. float32: upcast/downcast hand such arrays back untouched without
# asking numpy (a few microseconds per kernel call, which small models make thousands of).
_NATIVE = frozenset(
    np.dtype(t)
    for t in (
        np.float32,
        np.float64,
        np.int8,
        np.int16,
        np.int32,
        np.int64,
        np.uint8,
        np.uint16,
        np.uint32,
        np.uint64,
        np.bool_,
    )
)


def upcast(x) -> np.ndarray:
    """``x`` as an array in its compute dtype (a view when nothing changes)."""
    if type(x) is np.ndarray and x.dtype in _NATIVE:
        return x
    x = np.asarray(x)
    return x.astype(compute_dtype(x.dtype), copy=False)


def downcast(y, dtype) -> np.ndarray:
    """Cast a computed result back to the caller's ``dtype``."""
    if type(y) is np.ndarray and y.dtype == dtype:
        return y
    return np.asarray(y).astype(dtype, copy=False)


def accumulator_dtype(dtype) -> np.dtype:
    """Dtype for sums of products: int64 for integers, else the compute dtype."""
    dtype = np.dtype(dtype)
    if is_int_dtype(dtype) or dtype == np.bool_:
        return np.dtype(np.int64)
    return compute_dtype(dtype)


def normalize_axis(axis: int, rank: int) -> int:
    """Map a possibly negative axis into ``[0, rank)``; raise if out of range."""
    if not -rank <= axis < max(rank, 1):
        raise ExecutionError(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def normalize_axes(axes: Sequence[int] | None, rank: int) -> tuple[int, ...]:
    """Normalized, sorted, duplicate-checked axes; ``None`` means all axes."""
    if axes is None:
        return tuple(range(rank))
    out = sorted(normalize_axis(int(a), rank) for a in axes)
    if len(set(out)) != len(out):
        raise ExecutionError(f"duplicate axes in {list(axes)}")
    return tuple(out)


def fill_reshape_wildcard(target: list[int], size: int) -> list[int]:
    """``target`` with its one -1 (if any) replaced by the dim that makes ``size`` elements (Reshape's rule)."""
    if -1 not in target:
        return target
    known = math.prod(d for d in target if d != -1)
    if known == 0 or size % known:
        raise ExecutionError(f"cannot infer the -1 of shape {target} for {size} elements")
    return [size // known if d == -1 else d for d in target]


def per_dim(value, n: int, name: str, default: int = 1) -> tuple[int, ...]:
    """Expand an int or a sequence into exactly ``n`` ints (``None`` -> ``default``)."""
    if value is None:
        return (default,) * n
    if np.ndim(value) == 0:
        return (int(value),) * n
    value = tuple(int(v) for v in value)
    if len(value) != n:
        raise ExecutionError(f"{name} has {len(value)} values, expected {n}")
    return value


def lowest(dtype):
    """The identity of ``max``: -inf for floats, the minimum for integers."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return False
    return -np.inf if is_float_dtype(dtype) else np.iinfo(dtype).min


def highest(dtype):
    """The identity of ``min``: +inf for floats, the maximum for integers."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return True
    return np.inf if is_float_dtype(dtype) else np.iinfo(dtype).max


def pad_or_crop(x: np.ndarray, axes, pads_begin, pads_end, value=0) -> np.ndarray:
    """Pad ``axes`` of ``x`` with ``value``; negative pads crop instead (as XLA allows)."""
    pad_width = [(0, 0)] * x.ndim
    crop = [slice(None)] * x.ndim
    for axis, lo, hi in zip(axes, pads_begin, pads_end):
        pad_width[axis] = (max(lo, 0), max(hi, 0))
        crop[axis] = slice(max(-lo, 0), x.shape[axis] - max(-hi, 0))
    x = x[tuple(crop)]
    if any(p != (0, 0) for p in pad_width):
        x = np.pad(x, pad_width, constant_values=value)
    return x


def dilate(x: np.ndarray, axes, factors, value=0) -> np.ndarray:
    """Insert ``factor - 1`` copies of ``value`` between neighbours along ``axes``.

    This is XLA's base (lhs) dilation: a size-n axis becomes ``(n - 1) * f + 1``.
    """
    if all(f == 1 for f in factors):
        return x
    shape = list(x.shape)
    index = [slice(None)] * x.ndim
    for axis, f in zip(axes, factors):
        if f < 1:
            raise ExecutionError(f"dilation must be >= 1, got {f}")
        shape[axis] = (x.shape[axis] - 1) * f + 1 if x.shape[axis] else 0
        index[axis] = slice(None, None, f)
    out = np.full(shape, value, dtype=x.dtype)
    out[tuple(index)] = x
    return out


def window_output_size(size: int, window: int, stride: int, dilation: int) -> int:
    """How many windows fit (floor) in an already padded axis of ``size``."""
    effective = (window - 1) * dilation + 1
    return max(0, (size - effective) // stride + 1)


def window_view(x: np.ndarray, axes, window, strides, dilations) -> np.ndarray:
    """A read-only view of all windows of ``x`` along ``axes`` (no copy).

    Returns an array of shape ``x.shape`` with each axis in ``axes`` replaced by
    its number of windows, followed by one trailing axis per window dimension:
    ``view[..., o_0, ..., k_0, ...] = x[..., o_0 * s_0 + k_0 * d_0, ...]``.
    Windows that do not fit entirely are dropped (callers pad first).
    """
    axes = tuple(axes)
    effective = tuple((k - 1) * d + 1 for k, d in zip(window, dilations))
    out = [window_output_size(x.shape[a], k, s, d) for a, k, s, d in zip(axes, window, strides, dilations)]
    if any(n == 0 for n in out):
        shape = list(x.shape)
        for a, n in zip(axes, out):
            shape[a] = n
        return np.zeros(shape + list(window), dtype=x.dtype)
    view = np.lib.stride_tricks.sliding_window_view(x, effective, axis=axes)
    index = [slice(None)] * x.ndim
    for a, s in zip(axes, strides):
        index[a] = slice(None, None, s)
    index += [slice(None, None, d) for d in dilations]
    # sliding_window_view yields every window that fits; keeping every s-th of
    # them leaves exactly floor((size - effective) / s) + 1 windows per axis.
    return view[tuple(index)]
