"""Convolution kernels: N-d (1 to 3 spatial dims, more work too), grouped, transposed.

Conventions
-----------
``conv`` and ``conv_transpose`` use the channels-first layout ONNX and OpenVINO
share: input ``(N, C, *spatial)``; ``conv`` weights ``(O, C / groups, *kernel)``;
``conv_transpose`` weights ``(C, O / groups, *kernel)``.  Every per-dimension
parameter (strides, dilations, pads) lists one int per spatial dim, in order;
``None`` means all ones (all zeros for pads).  Pads are given explicitly as
``pads_begin`` / ``pads_end``; use :func:`auto_pad` or
:func:`conv_transpose_pads` to turn an ``auto_pad`` mode into explicit pads.

``conv_general`` follows XLA's ``Convolution``: ``padding`` is a list of
``(low, high)`` pairs (negative values crop), ``lhs_dilation`` is base
dilation (zeros inserted between input elements), ``rhs_dilation`` is kernel
dilation, and the layouts say where each logical dim lives:

* ``lhs_layout = (batch, feature, *spatial)`` dims of the input,
* ``rhs_layout = (output_feature, input_feature, *spatial)`` dims of the kernel,
* ``out_layout = (batch, feature, *spatial)`` dims of the result.

With ``feature_group_count = G`` the input features are split into G
contiguous groups, the kernel's output features likewise, and group g of the
output is the convolution of input group g with kernel group g.  With
``batch_group_count = B`` it is the *batch* of the input that is split into B
contiguous groups (kernel output features again split into B groups); the
result has batch ``N / B``.  These are the StableHLO definitions; at most one
of the two counts may exceed 1.

Implementation: the padded (and base-dilated) input is viewed as windows with
``sliding_window_view`` (no copy), regrouped into an im2col matrix and
multiplied with the kernel by one batched matmul (BLAS for floats).
Integer inputs accumulate exactly in int64 and wrap back to the input type.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..errors import ExecutionError
from ._common import accumulator_dtype, dilate, downcast, pad_or_crop, per_dim, window_view

_AUTO_PAD_MODES = ("NOTSET", "EXPLICIT", "VALID", "SAME_UPPER", "SAME_LOWER")


def _auto_pad_mode(mode: str) -> str:
    mode = mode.upper()
    if mode not in _AUTO_PAD_MODES:
        raise ExecutionError(f"unknown auto_pad mode {mode!r}")
    return mode


def auto_pad(
    input_size: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    mode: str = "SAME_UPPER",
) -> tuple[list[int], list[int]]:
    """Explicit ``(pads_begin, pads_end)`` for an ``auto_pad`` mode (case-insensitive).

    ``SAME_*`` pads so that ``output = ceil(input / stride)``; an odd total goes
    to the end for ``SAME_UPPER`` and to the beginning for ``SAME_LOWER``.
    ``VALID`` (and ``NOTSET``/``EXPLICIT``, whose pads the caller already has)
    return zeros.  Pooling uses the same rule.
    """
    mode = _auto_pad_mode(mode)
    n = len(input_size)
    strides, dilations = per_dim(strides, n, "strides"), per_dim(dilations, n, "dilations")
    begin, end = [0] * n, [0] * n
    if not mode.startswith("SAME"):
        return begin, end
    for i, (size, k, s, d) in enumerate(zip(input_size, kernel, strides, dilations)):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        begin[i], end[i] = (small, large) if mode == "SAME_UPPER" else (large, small)
    return begin, end


def conv_output_size(size: int, kernel: int, stride: int = 1, dilation: int = 1,
                     pad_begin: int = 0, pad_end: int = 0) -> int:
    """Output length of one spatial dim of a (floor-mode) convolution."""
    return (size + pad_begin + pad_end - (kernel - 1) * dilation - 1) // stride + 1


def conv(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None = None,
    strides: Sequence[int] | None = None,
    pads_begin: Sequence[int] | None = None,
    pads_end: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    groups: int = 1,
) -> np.ndarray:
    """Channels-first grouped convolution (ONNX ``Conv``, OpenVINO ``(Group)Convolution``).

    ``x``: ``(N, C, *S)``; ``w``: ``(O, C / groups, *K)``; ``bias``: ``(O,)``.
    Returns ``(N, O, *out)``.
    """
    n = np.ndim(x) - 2
    return _conv_channels_first(
        x, w,
        strides=per_dim(strides, n, "strides"),
        pads_begin=per_dim(pads_begin, n, "pads_begin", 0),
        pads_end=per_dim(pads_end, n, "pads_end", 0),
        lhs_dilation=(1,) * n,
        rhs_dilation=per_dim(dilations, n, "dilations"),
        feature_groups=groups,
        batch_groups=1,
        bias=bias,
    )


def conv_general(
    lhs: np.ndarray,
    rhs: np.ndarray,
    window_strides: Sequence[int] | None = None,
    padding: Sequence[tuple[int, int]] | None = None,
    lhs_dilation: Sequence[int] | None = None,
    rhs_dilation: Sequence[int] | None = None,
    feature_group_count: int = 1,
    batch_group_count: int = 1,
    lhs_layout: Sequence[int] | None = None,
    rhs_layout: Sequence[int] | None = None,
    out_layout: Sequence[int] | None = None,
) -> np.ndarray:
    """XLA ``Convolution`` with explicit dimension numbers (see the module docstring).

    Layouts default to channels-first ``(0, 1, 2, ...)``.
    """
    rank = np.ndim(lhs)
    n = rank - 2
    lhs_layout, rhs_layout, out_layout = (
        tuple(range(rank)) if layout is None else tuple(int(d) for d in layout)
        for layout in (lhs_layout, rhs_layout, out_layout))
    pads = list(padding) if padding is not None else [(0, 0)] * n
    if len(pads) != n:
        raise ExecutionError(f"padding has {len(pads)} pairs, expected {n}")
    y = _conv_channels_first(
        np.transpose(lhs, lhs_layout),
        np.transpose(rhs, rhs_layout),
        strides=per_dim(window_strides, n, "window_strides"),
        pads_begin=tuple(int(lo) for lo, _ in pads),
        pads_end=tuple(int(hi) for _, hi in pads),
        lhs_dilation=per_dim(lhs_dilation, n, "lhs_dilation"),
        rhs_dilation=per_dim(rhs_dilation, n, "rhs_dilation"),
        feature_groups=feature_group_count,
        batch_groups=batch_group_count,
    )
    # y is channels-first; out_layout[j] names where logical dim j must go.
    return np.transpose(y, np.argsort(out_layout))


def conv_transpose(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None = None,
    strides: Sequence[int] | None = None,
    pads_begin: Sequence[int] | None = None,
    pads_end: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    groups: int = 1,
    output_padding: Sequence[int] | None = None,
) -> np.ndarray:
    """Channels-first transposed convolution (ONNX ``ConvTranspose``, OpenVINO
    ``(Group)ConvolutionBackpropData``).

    ``x``: ``(N, C, *S)``; ``w``: ``(C, O / groups, *K)``.  Output length per dim
    is ``stride * (S - 1) + output_padding + (K - 1) * dilation + 1 - pads``
    (see :func:`conv_transpose_output_size`).

    It is computed as the convolution of the stride-dilated input with the
    spatially flipped kernel whose in/out features are swapped per group;
    the transposed-conv pads become crops of that convolution's full padding.
    """
    n = np.ndim(x) - 2
    w = np.asarray(w)
    strides = per_dim(strides, n, "strides")
    dilations = per_dim(dilations, n, "dilations")
    pads_begin = per_dim(pads_begin, n, "pads_begin", 0)
    pads_end = per_dim(pads_end, n, "pads_end", 0)
    output_padding = per_dim(output_padding, n, "output_padding", 0)
    c_in, o_per_group = w.shape[:2]
    if c_in % groups:
        raise ExecutionError(f"{c_in} weight input channels do not split into {groups} groups")
    kernel = w.shape[2:]
    w_conv = (
        w.reshape((groups, c_in // groups, o_per_group) + kernel)
        .swapaxes(1, 2)
        .reshape((groups * o_per_group, c_in // groups) + kernel)
    )
    w_conv = w_conv[(slice(None), slice(None)) + (slice(None, None, -1),) * n]
    full = [(k - 1) * d for k, d in zip(kernel, dilations)]
    return _conv_channels_first(
        x, w_conv,
        strides=(1,) * n,
        pads_begin=tuple(f - pb for f, pb in zip(full, pads_begin)),
        pads_end=tuple(f - pe + op for f, pe, op in zip(full, pads_end, output_padding)),
        lhs_dilation=strides,
        rhs_dilation=dilations,
        feature_groups=groups,
        batch_groups=1,
        bias=bias,
    )


def conv_transpose_output_size(size: int, kernel: int, stride: int = 1, dilation: int = 1,
                               pad_begin: int = 0, pad_end: int = 0, output_padding: int = 0) -> int:
    """Output length of one spatial dim of a transposed convolution."""
    return stride * (size - 1) + output_padding + (kernel - 1) * dilation + 1 - pad_begin - pad_end


def conv_transpose_pads(
    input_size: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    output_padding: Sequence[int] | None = None,
    output_size: Sequence[int] | None = None,
    extra_at_end: bool = True,
) -> tuple[list[int], list[int]]:
    """Pads that make a transposed convolution produce ``output_size``.

    ``output_size=None`` asks for ``input * stride`` (the ``SAME_*`` auto_pad
    target).  The total is split in half; ``extra_at_end`` says which side
    receives the odd element (onnxruntime: ``SAME_UPPER`` -> end, otherwise
    beginning).  When the output is larger than the full convolution the
    whole (negative) total goes to ``pads_end``, so the extra elements are
    zeros at the end, as in onnxruntime.
    """
    n = len(input_size)
    strides, dilations = per_dim(strides, n, "strides"), per_dim(dilations, n, "dilations")
    output_padding = per_dim(output_padding, n, "output_padding", 0)
    if output_size is None:
        output_size = [i * s for i, s in zip(input_size, strides)]
    begin, end = [], []
    for i, k, s, d, op, o in zip(input_size, kernel, strides, dilations, output_padding, output_size):
        total = conv_transpose_output_size(i, k, s, d, 0, 0, op) - o
        if total < 0:  # a larger output than the full convolution: zeros at the end
            begin.append(0)
            end.append(total)
            continue
        small, large = total // 2, total - total // 2
        begin.append(small if extra_at_end else large)
        end.append(large if extra_at_end else small)
    return begin, end


def conv_integer(
    x: np.ndarray,
    w: np.ndarray,
    x_zero_point=0,
    w_zero_point=0,
    strides: Sequence[int] | None = None,
    pads_begin: Sequence[int] | None = None,
    pads_end: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    groups: int = 1,
) -> np.ndarray:
    """Integer convolution of ``(x - x_zero_point)`` and ``(w - w_zero_point)`` to int32.

    ``w_zero_point`` may be a scalar or one value per output channel.  Padding
    is with ``x_zero_point`` (i.e. zero after subtracting it), as ONNX
    ``ConvInteger`` specifies.
    """
    x = np.asarray(x).astype(np.int64) - np.asarray(x_zero_point, dtype=np.int64)
    w = np.asarray(w).astype(np.int64)
    w_zp = np.asarray(w_zero_point, dtype=np.int64)
    if w_zp.ndim == 1:
        w_zp = w_zp.reshape((-1,) + (1,) * (w.ndim - 1))
    y = conv(x, w - w_zp, None, strides, pads_begin, pads_end, dilations, groups)
    return y.astype(np.int32)


def _conv_channels_first(x, w, strides, pads_begin, pads_end, lhs_dilation, rhs_dilation,
                         feature_groups, batch_groups, bias=None):
    """The one convolution all entry points reduce to (channels-first layouts)."""
    x, w = np.asarray(x), np.asarray(w)
    if x.ndim < 3 or w.ndim != x.ndim:
        raise ExecutionError(f"convolution needs input and kernel of equal rank >= 3, got {x.shape} and {w.shape}")
    out_dtype = np.result_type(x.dtype, w.dtype) if x.dtype != w.dtype else x.dtype
    acc = accumulator_dtype(out_dtype)
    n_sp = x.ndim - 2
    n, c = x.shape[:2]
    o, c_per_group = w.shape[:2]
    kernel = w.shape[2:]
    groups = feature_groups * batch_groups
    if feature_groups > 1 and batch_groups > 1:
        raise ExecutionError("feature_group_count and batch_group_count cannot both exceed 1")
    if c % feature_groups or c // feature_groups != c_per_group:
        raise ExecutionError(
            f"input has {c} channels; kernel expects {c_per_group} per group x {feature_groups} groups")
    if o % groups or n % batch_groups:
        raise ExecutionError(f"{o} output features / batch {n} do not split into {groups} groups")

    spatial = tuple(range(2, x.ndim))
    x = pad_or_crop(dilate(x.astype(acc, copy=False), spatial, lhs_dilation), spatial, pads_begin, pads_end)
    patches = window_view(x, spatial, kernel, strides, rhs_dilation)  # (N, C, *out, *K)
    out = patches.shape[2:2 + n_sp]
    nb, cg, og = n // batch_groups, c // feature_groups, o // groups
    n_pos, n_k = math.prod(out), math.prod(kernel)

    # im2col: rows are (group, image, output position), columns (channel, kernel offset).
    p = patches.reshape((batch_groups, nb, feature_groups, cg) + out + kernel)
    order = (0, 2, 1) + tuple(range(4, 4 + n_sp)) + (3,) + tuple(range(4 + n_sp, 4 + 2 * n_sp))
    cols = p.transpose(order).reshape(groups, nb * n_pos, cg * n_k)
    w_mat = w.astype(acc, copy=False).reshape(groups, og, cg * n_k).transpose(0, 2, 1)
    y = np.matmul(cols, w_mat)  # (groups, nb * positions, og)

    # Output feature index is group * og + j, for feature and batch groups alike.
    y = y.reshape((groups, nb) + out + (og,))
    y = y.transpose((1, 0, y.ndim - 1) + tuple(range(2, 2 + n_sp))).reshape((nb, o) + out)
    if bias is not None:
        y = y + np.asarray(bias).astype(acc).reshape((1, o) + (1,) * n_sp)
    return downcast(y, out_dtype)
