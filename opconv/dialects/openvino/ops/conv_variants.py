"""DeformableConvolution and BinaryConvolution: convolutions with displaced taps or binarised operands.

DeformableConvolution-1 samples differently from ONNX ``DeformConv`` (whose
shared kernel reads zero for every interpolation tap outside the input): a
displaced position is read only if it lies in ``[0, size)`` along every axis
(otherwise the tap reads 0), and its upper interpolation neighbour is clamped
to the last row/column.  This is what the CPU plugin computes (the spec leaves
it open), so the sampling lives here; the weighting is the shared matmul.

BinaryConvolution-1 (``xnor-popcount``) reads bit 1 as +1 and bit 0 as -1;
``XNOR`` + ``popcount`` over a window of ``B`` taps, ``2 * P - B``, is the
ordinary convolution of those signs, so the kernel maps to signs and calls the
shared convolution.  The spec fills the inputs and filters with 0/1; other
inputs read as bit 1 when positive, as the CPU plugin binarises them.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ....errors import ExecutionError
from ....kernels import conv as kc
from ....kernels._common import accumulator_dtype, downcast, per_dim
from ..executor import ov_op
from ._common import explicit_pads


def _sample_inside(planes: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """N-linear samples of ``planes`` ``(B, C, *S)`` at ``positions`` ``(B, M, n)`` -> ``(B, C, M)``.

    Positions outside ``[0, S_d)`` read 0; the upper neighbour clamps to ``S_d - 1``.
    """
    spatial = planes.shape[2:]
    inside = np.all((positions >= 0) & (positions < np.array(spatial)), axis=-1)  # (B, M)
    low = np.floor(positions)
    frac = positions - low
    low = np.clip(low, 0, np.array(spatial) - 1).astype(np.int64)
    high = np.minimum(low + 1, np.array(spatial) - 1)
    flat = planes.reshape(planes.shape[:2] + (-1,))
    dim_strides = [math.prod(spatial[d + 1 :]) for d in range(len(spatial))]
    out = np.zeros(planes.shape[:2] + positions.shape[1:2], planes.dtype)
    for corner in itertools.product((0, 1), repeat=len(spatial)):
        index = sum((high if up else low)[..., d] * dim_strides[d] for d, up in enumerate(corner))
        weight = np.prod([frac[..., d] if up else 1 - frac[..., d] for d, up in enumerate(corner)], axis=0)
        out += np.take_along_axis(flat, index[:, None, :], axis=2) * np.where(inside, weight, 0)[:, None, :]
    return out


@ov_op("DeformableConvolution")
def deformable_convolution(
    ctx, x, offsets, w, *, strides, pads_begin, pads_end, dilations, group=1, deformable_group=1, auto_pad="explicit"
):
    n_sp = x.ndim - 2
    kernel = w.shape[2:]
    strides, dilations = per_dim(strides, n_sp, "strides"), per_dim(dilations, n_sp, "dilations")
    begin, end = explicit_pads(auto_pad, x.shape[2:], kernel, strides, dilations, pads_begin, pads_end)
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    if c % deformable_group or c % group or o % group or c // group != cg:
        raise ExecutionError(
            f"input channels {c}, output channels {o} and filters {list(w.shape)} do not fit "
            f"group={group}, deformable_group={deformable_group}"
        )
    out = tuple(
        kc.conv_output_size(s, k, st, d, pb, pe)
        for s, k, st, d, pb, pe in zip(x.shape[2:], kernel, strides, dilations, begin, end)
    )
    n_k, n_pos = math.prod(kernel), math.prod(out)
    expected = (n, deformable_group * n_k * n_sp) + out
    if offsets.shape != expected:
        raise ExecutionError(f"offsets must have shape {list(expected)}, got {list(offsets.shape)}")
    dtype = np.promote_types(accumulator_dtype(x.dtype), np.float32)  # interpolation weights are fractional
    # Undisplaced tap positions (K, P, n); the offsets hold one displacement per axis for each tap, adjacent.
    taps = np.stack(np.meshgrid(*[np.arange(k) * d for k, d in zip(kernel, dilations)], indexing="ij"), -1)
    starts = np.stack(np.meshgrid(*[np.arange(m) * s - b for m, s, b in zip(out, strides, begin)], indexing="ij"), -1)
    base = taps.reshape(n_k, 1, n_sp) + starts.reshape(1, n_pos, n_sp)
    shift = offsets.astype(np.float64).reshape(n, deformable_group, n_k, n_sp, n_pos).swapaxes(3, 4)
    positions = (base + shift).reshape(n * deformable_group, n_k * n_pos, n_sp)
    planes = x.astype(dtype).reshape((n * deformable_group, c // deformable_group) + x.shape[2:])
    cols = _sample_inside(planes, positions).reshape(n, group, cg * n_k, n_pos)
    y = np.matmul(w.astype(dtype).reshape(group, o // group, cg * n_k), cols)
    return downcast(y.reshape((n, o) + out), x.dtype)


def _signs(values, dtype) -> np.ndarray:
    """Bit 1 (any positive value) as +1, bit 0 as -1."""
    return np.where(np.asarray(values) > 0, 1, -1).astype(dtype)


@ov_op("BinaryConvolution")
def binary_convolution(ctx, x, w, *, strides, pads_begin, pads_end, dilations, mode, pad_value, auto_pad="explicit"):
    if (mode or "xnor-popcount") != "xnor-popcount":
        raise ExecutionError(f"BinaryConvolution mode {mode!r} is not supported (only 'xnor-popcount')")
    begin, end = explicit_pads(auto_pad, x.shape[2:], w.shape[2:], strides, dilations, pads_begin, pads_end)
    dtype = accumulator_dtype(x.dtype)
    # The pad area holds pad_value, binarised like the input (the CPU plugin instead skips the taps of a
    # pad_value of 0, which the spec's "0 means -1" does not allow).
    padded = np.pad(
        _signs(x, dtype), [(0, 0), (0, 0)] + list(zip(begin, end)), constant_values=_signs(pad_value or 0.0, dtype)
    )
    y = kc.conv(padded, _signs(w, dtype), strides=strides, dilations=dilations)
    return downcast(y, x.dtype)
