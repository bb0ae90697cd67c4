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
``sliding_window_view`` (no copy), copied once into an im2col matrix per group
laid out ``(channel x kernel offset, output position)``, and multiplied by one
batched matmul ``W (groups, og, cg*K) @ cols (N, groups, cg*K, positions)``
(BLAS for floats) whose result already is the channels-first output, so
nothing is transposed afterwards.  When one image's column matrix would be large
(early layers of image models), it is built and multiplied one band of output rows at a time,
each band small enough to stay in cache.  1x1 kernels skip im2col: the
input is the column matrix; depthwise convolutions (one input channel per
group) are one vectorized multiply-add per kernel offset instead.  float32 stays float32 throughout; integer inputs
accumulate exactly in int64 and wrap back to the input type.

Weights a caller runs many times (a session's constant weights) can be packed
once with their bias (:func:`pack_conv_weights`, passed to :func:`conv` in
place of ``w``): the bias becomes one more column of the weight matrix and the
columns get a row of ones, so the product adds it.  Packed 3x3 stride-1
convolutions with enough channels and positions run as Winograd F(2x2, 3x3)
(16 multiplications per 2x2 outputs instead of 36), or F(4x4, 3x3) on large
images (36 per 4x4 outputs instead of 144; see ``_winograd_3x3``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import ExecutionError
from ._common import accumulator_dtype, dilate, downcast, pad_or_crop, per_dim, window_output_size, window_view

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


def split_pads(pads, n: int, name: str = "pads") -> tuple[list[int], list[int]]:
    """Flat pads ``[b_1..b_n, e_1..e_n]`` (ONNX ``pads``, HLO pooling's ``padding``) as ``(begins, ends)``;
    zeros when absent."""
    if pads is None:
        return [0] * n, [0] * n
    pads = [int(p) for p in pads]
    if len(pads) != 2 * n:
        raise ExecutionError(f"{name} has {len(pads)} values, expected {2 * n} for {n} spatial dims")
    return pads[:n], pads[n:]


def conv_output_size(
    size: int, kernel: int, stride: int = 1, dilation: int = 1, pad_begin: int = 0, pad_end: int = 0
) -> int:
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

    ``x``: ``(N, C, *S)``; ``w``: ``(O, C / groups, *K)``, or :class:`ConvWeights` packed with their
    bias (then ``bias`` is None); ``bias``: ``(O,)``.  Returns ``(N, O, *out)``.
    """
    n = np.ndim(x) - 2
    return _conv_channels_first(
        x,
        w,
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
        for layout in (lhs_layout, rhs_layout, out_layout)
    )
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
        x,
        w_conv,
        strides=(1,) * n,
        pads_begin=tuple(f - pb for f, pb in zip(full, pads_begin)),
        pads_end=tuple(f - pe + op for f, pe, op in zip(full, pads_end, output_padding)),
        lhs_dilation=strides,
        rhs_dilation=dilations,
        feature_groups=groups,
        batch_groups=1,
        bias=bias,
    )


def conv_transpose_output_size(
    size: int,
    kernel: int,
    stride: int = 1,
    dilation: int = 1,
    pad_begin: int = 0,
    pad_end: int = 0,
    output_padding: int = 0,
) -> int:
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


@dataclass(eq=False)
class ConvWeights:
    """Weights and bias of :func:`conv` arranged once for many calls (see :func:`pack_conv_weights`).

    ``matrix`` is ``(groups, O / groups, C / groups * prod(K) + 1)``: the weights as the im2col product
    multiplies them, and the bias as one more column.  That column meets a row of ones appended to the
    columns, so the product itself adds the bias instead of one more pass over the output.
    """

    shape: tuple[int, ...]  # of the weights: (O, C / groups, *K)
    groups: int
    matrix: np.ndarray
    _winograd: dict[int, np.ndarray] = field(default_factory=dict, init=False, repr=False)  # made when needed

    def winograd(self, m: int) -> np.ndarray:
        """The ``((m + 2)^2, O, C + 1)`` weights of the Winograd F(m x m, 3x3) path, bias in the last column."""
        if m not in self._winograd:
            self._winograd[m] = _winograd_weights(self.weights, self.bias, m)
        return self._winograd[m]

    @property
    def weights(self) -> np.ndarray:
        """The ``(O, C / groups, *K)`` weights (a view of ``matrix``)."""
        return self.matrix[..., :-1].reshape(self.shape)

    @property
    def bias(self) -> np.ndarray:
        """The ``(O,)`` bias (a view of ``matrix``)."""
        return self.matrix[..., -1].reshape(-1)


def pack_conv_weights(w: np.ndarray, bias: np.ndarray, groups: int = 1) -> ConvWeights | None:
    """Weights and bias of a convolution run many times, arranged once; ``None`` for types that
    :func:`conv` does not compute in their own precision (pass those as they are)."""
    w, bias = np.asarray(w), np.asarray(bias)
    if w.dtype not in (np.float32, np.float64) or bias.dtype != w.dtype or w.ndim < 3:
        return None
    o = w.shape[0]
    if groups < 1 or o % groups or bias.shape != (o,):
        raise ExecutionError(f"weights {list(w.shape)} and bias {list(bias.shape)} do not fit {groups} groups")
    depth = math.prod(w.shape[1:])
    matrix = np.empty((groups, o // groups, depth + 1), dtype=w.dtype)
    matrix[..., :depth] = w.reshape(groups, o // groups, depth)
    matrix[..., depth] = bias.reshape(groups, o // groups)
    return ConvWeights(tuple(w.shape), groups, matrix)


def _conv_channels_first(
    x, w, strides, pads_begin, pads_end, lhs_dilation, rhs_dilation, feature_groups, batch_groups, bias=None
):
    """The one convolution all entry points reduce to (channels-first layouts); ``w`` may be
    :class:`ConvWeights` (then ``bias`` is in it)."""
    x = np.asarray(x)
    packed = w if isinstance(w, ConvWeights) else None
    w = packed.weights if packed is not None else np.asarray(w)
    if packed is not None and bias is not None:
        raise ExecutionError("packed convolution weights carry their bias; pass no other")
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
            f"input has {c} channels; kernel expects {c_per_group} per group x {feature_groups} groups"
        )
    if o % groups or n % batch_groups:
        raise ExecutionError(f"{o} output features / batch {n} do not split into {groups} groups")
    if packed is not None and (packed.groups != groups or packed.matrix.dtype != acc):
        packed, bias = None, packed.bias  # arranged for another product: use the plain arrays

    spatial = tuple(range(2, x.ndim))
    x = _pad(dilate(x.astype(acc, copy=False), spatial, lhs_dilation), pads_begin, pads_end)
    nb, cg, og = n // batch_groups, c // feature_groups, o // groups
    depth = cg * math.prod(kernel)
    if packed is not None:
        w_mat, bias = packed.matrix, packed.bias
    else:
        w_mat = w.astype(acc, copy=False).reshape(groups, og, depth)

    out = tuple(window_output_size(size, k, s, d) for size, k, s, d in zip(x.shape[2:], kernel, strides, rhs_dilation))
    positions = math.prod(out)
    bias_in_product = False
    if cg == 1 and batch_groups == 1 and groups > 1:
        bias_in_product = True
        y = _depthwise(
            x,
            w_mat[..., :depth],
            kernel,
            strides,
            rhs_dilation,
            og,
            None if bias is None else np.asarray(bias).astype(acc, copy=False).reshape(groups, og),
        )
    elif packed is not None and groups == 1 and (tile := _winograd_tile(kernel, strides, rhs_dilation, c, o, out)):
        bias_in_product = True
        y = _winograd_3x3(x, packed.winograd(tile), out)
    elif batch_groups == 1 and any(k > 1 for k in kernel) and depth * positions * x.itemsize > _TILED_IM2COL_BYTES:
        bias_in_product = packed is not None
        y = _conv_tiled(x, w_mat, kernel, strides, rhs_dilation, out, ones_row=bias_in_product)
    elif all(k == 1 for k in kernel) and all(s == 1 for s in strides) and (packed is None or c >= o):
        # A 1x1 kernel needs no im2col: the input already is the column matrix.  (When the output has
        # more channels than the input, copying the input beside a row of ones costs less than a
        # pass adding the bias to the output, so that case takes the im2col path below.)
        cols = x.reshape((batch_groups, nb, feature_groups, depth, positions)).swapaxes(0, 1)
        y = np.matmul(w_mat[..., :depth], cols.reshape(nb, groups, depth, positions))
    else:
        bias_in_product = packed is not None
        cols = _im2col(x, kernel, strides, rhs_dilation, out, batch_groups, feature_groups, bias_in_product)
        y = np.matmul(w_mat, cols)  # (nb, groups, og, positions): output feature group * og + j
    y = y.reshape((nb, o) + out)
    if bias is not None and not bias_in_product:
        y += np.asarray(bias).astype(acc, copy=False).reshape((1, o) + (1,) * n_sp)
    return downcast(y, out_dtype)


def _im2col(x, kernel, strides, dilations, out, batch_groups, feature_groups, ones_row):
    """The column matrix ``(N / batch_groups, groups, cg * prod(K) [+ 1], prod(out))`` of padded ``x``.

    Rows are (channel, kernel offset), columns output positions, so that ``W (og, cg*K) @ cols`` lands
    directly in the channels-first output layout; ``ones_row`` appends a row of ones (for a bias column).
    """
    n_sp = len(kernel)
    (n, c), spatial = x.shape[:2], tuple(range(2, x.ndim))
    nb, cg = n // batch_groups, c // feature_groups
    depth = cg * math.prod(kernel)
    if all(k == 1 for k in kernel):  # the (strided) input itself, viewed with unit kernel axes
        source = x[(Ellipsis,) + tuple(slice(None, None, s) for s in strides)].reshape(x.shape[:2] + out + kernel)
    else:
        source = window_view(x, spatial, kernel, strides, dilations)  # (N, C, *out, *K)
    # (batch group, image, feature group, channel, *out, *K) -> (image, batch group, feature group, channel, *K, *out)
    source = source.reshape((batch_groups, nb, feature_groups, cg) + out + kernel)
    order = (1, 0, 2, 3) + tuple(range(4 + n_sp, 4 + 2 * n_sp)) + tuple(range(4, 4 + n_sp))
    cols = np.empty((nb, batch_groups * feature_groups, depth + ones_row, math.prod(out)), dtype=x.dtype)
    # at most one of the two group counts exceeds 1, so the two group axes are one axis of `cols`
    target = cols[:, :, :depth].reshape((nb, batch_groups, feature_groups, cg) + kernel + out)
    np.copyto(target, source.transpose(order))
    if ones_row:
        cols[:, :, depth] = 1
    return cols


#: above this size, one image's im2col matrix is built and multiplied a band of output rows at a time
_TILED_IM2COL_BYTES = 16 << 20
#: the size of one band's columns: small enough to stay in cache between the copy and the product
_TILE_BYTES = 2 << 20
#: but at least this many output positions per band, so that each product stays BLAS-efficient
_TILE_MIN_POSITIONS = 512


def _conv_tiled(x, w_mat, kernel, strides, dilations, out, ones_row=False):
    """im2col convolution in bands of output rows (first spatial dim), for large column matrices.

    ``x``: padded ``(N, C, *S)``; ``w_mat``: ``(G, og, cg * prod(K) [+ 1 bias column when ones_row])``.
    Returns ``(N, G, og, prod(out))``.  A whole im2col matrix of a large early layer is many times the
    cache: writing it and reading it back for the product costs more than the product.  A band's
    columns are reused while still cached.
    """
    n_sp = len(kernel)
    groups, og, depth = w_mat.shape
    depth -= ones_row
    cg = depth // math.prod(kernel)
    patches = window_view(x, tuple(range(2, x.ndim)), kernel, strides, dilations)  # (N, C, *out, *K)
    row = math.prod(out[1:])  # positions per output row
    rows = max(1, _TILE_BYTES // (depth * row * x.itemsize), -(-_TILE_MIN_POSITIONS // row))
    rows = min(rows, out[0])
    # patches (cg, r, *out[1:], *K) -> columns (cg, *K, r, *out[1:])
    order = (0,) + tuple(range(1 + n_sp, 1 + 2 * n_sp)) + tuple(range(1, 1 + n_sp))
    y = np.empty((x.shape[0], groups, og, math.prod(out)), dtype=x.dtype)
    band = np.empty((depth + ones_row, rows * row), dtype=x.dtype)
    if ones_row:
        band[depth] = 1
    for image in range(x.shape[0]):
        for g in range(groups):
            planes = patches[image, g * cg : (g + 1) * cg]
            for r0 in range(0, out[0], rows):
                r1 = min(out[0], r0 + rows)
                cols = band[:, : (r1 - r0) * row]
                np.copyto(
                    cols[:depth].reshape((cg,) + tuple(kernel) + (r1 - r0,) + tuple(out[1:])),
                    planes[:, r0:r1].transpose(order),
                )
                np.matmul(w_mat[g], cols, out=y[image, g, :, r0 * row : r1 * row])
    return y


# Winograd F(m x m, 3x3) (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2016): each m x m
# block of outputs comes from an (m + 2) x (m + 2) input tile d as  Y = A^T [(G g G^T) * (B^T d B)] A,  so
# (m + 2)^2 products per block and channel pair instead of 9 m^2 (F2: 16 instead of 36; F4: 36 instead of 144).
# The products over channels become (m + 2)^2 matrix products (O x C) @ (C x tiles); the tile transforms are
# matrix products too, on flattened tiles with the Kronecker products of B^T and A^T.  F2's transforms hold
# 0, +-1 and +-1/2 and add little rounding (float32 errors ~2e-7 of the output's scale, like the direct sum's);
# F4's reach 5 and 8: ~5e-6 of the scale (tests/test_kernels_conv.py bounds both against a float64 direct sum).
@dataclass(frozen=True)
class _Winograd:
    """One variant, F(m x m, 3x3): its transform matrices."""

    m: int  # outputs per tile side
    bt: np.ndarray  # B^T, (m + 2, m + 2)
    g: np.ndarray  # G, (m + 2, 3)
    at: np.ndarray  # A^T, (m, m + 2)

    @property
    def bias_component(self) -> int:
        """The transformed-tile component that the output transform adds to every output (A^T's column of
        ones, the interpolation point 1): it carries the bias."""
        return 1 * (self.m + 2) + 1


_WINOGRAD = {
    2: _Winograd(
        2,
        bt=np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=np.float64),
        g=np.array([[1, 0, 0], [1 / 2, 1 / 2, 1 / 2], [1 / 2, -1 / 2, 1 / 2], [0, 0, 1]]),
        at=np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=np.float64),
    ),
    # interpolation points 0, 1, -1, 2, -2 and infinity
    4: _Winograd(
        4,
        bt=np.array(
            [
                [4, 0, -5, 0, 1, 0],
                [0, -4, -4, 1, 1, 0],
                [0, 4, -4, -1, 1, 0],
                [0, -2, -1, 2, 1, 0],
                [0, 2, -1, -2, 1, 0],
                [0, 4, 0, -5, 0, 1],
            ],
            dtype=np.float64,
        ),
        g=np.array(
            [
                [1 / 4, 0, 0],
                [-1 / 6, -1 / 6, -1 / 6],
                [-1 / 6, 1 / 6, -1 / 6],
                [1 / 24, 1 / 12, 1 / 6],
                [1 / 24, -1 / 12, 1 / 6],
                [0, 0, 1],
            ]
        ),
        at=np.array(
            [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]], dtype=np.float64
        ),
    ),
}
#: where the saved multiplications outweigh the transforms (measured with one BLAS thread): enough channels
#: for the products to be BLAS-efficient, and enough output positions (tiles) for each of them
_WINOGRAD_MIN_CHANNELS = 64
_WINOGRAD_MIN_POSITIONS = 196
#: F4 from this many output positions on (on 14x14 outputs it was ~10% slower than F2: 16 tiles, a quarter of
#: them padding, make small and slow products)
_WINOGRAD_F4_MIN_POSITIONS = 784


def _winograd_tile(kernel, strides, dilations, c, o, out) -> int:
    """The Winograd variant that pays for this convolution: outputs per tile side (2 or 4), or 0 for none."""
    if not (
        tuple(kernel) == (3, 3)
        and tuple(strides) == (1, 1)
        and tuple(dilations) == (1, 1)
        and min(c, o) >= _WINOGRAD_MIN_CHANNELS
    ):
        return 0
    positions = math.prod(out)
    return 4 if positions >= _WINOGRAD_F4_MIN_POSITIONS else 2 if positions >= _WINOGRAD_MIN_POSITIONS else 0


def _winograd_weights(w: np.ndarray, bias: np.ndarray, m: int) -> np.ndarray:
    """``((m + 2)^2, O, C + 1)``: component ``(a, b)`` of ``G g G^T`` for every (output, input) channel pair,
    computed in float64, and the bias in the last column of the component that reaches every output."""
    f = _WINOGRAD[m]
    o, c = w.shape[:2]
    # G g G^T of every 3x3 kernel g at once: flattened, u = g (G (x) G)^T
    u = w.astype(np.float64).reshape(o * c, 9) @ np.kron(f.g, f.g).T  # (O * C, a * (m + 2) + b)
    packed = np.zeros((u.shape[1], o, c + 1), dtype=w.dtype)
    packed[:, :, :c] = u.T.reshape(-1, o, c)
    packed[f.bias_component, :, c] = bias
    return packed


@functools.cache
def _winograd_transforms(m: int, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """``B^T (x) B^T`` and ``A^T (x) A^T``: the tile transforms on flattened tiles."""
    f = _WINOGRAD[m]
    transforms = (np.kron(f.bt, f.bt).astype(dtype), np.kron(f.at, f.at).astype(dtype))
    for t in transforms:
        t.flags.writeable = False  # shared by every call
    return transforms


def _winograd_3x3(x: np.ndarray, u: np.ndarray, out) -> np.ndarray:
    """A 3x3, stride-1 convolution of the padded ``x (N, C, H, W)`` with :func:`_winograd_weights` ``u``
    (whose first axis says the variant).  Returns ``(N, O, *out)`` with the bias added."""
    n, c = x.shape[:2]
    o = u.shape[1]
    size = math.isqrt(u.shape[0])  # of an input tile
    m = size - 2
    th, tw = -(-out[0] // m), -(-out[1] // m)  # m x m output blocks (tiles)
    tiles = n * th * tw
    # output sizes that are no multiple of m: more zero rows / columns of input
    x = _pad(x, (0, 0), (m * th + 2 - x.shape[2], m * tw + 2 - x.shape[3]))
    d = np.empty((size, size, c, n, th, tw), dtype=x.dtype)  # input tiles, element (i, j) in row i * size + j
    np.copyto(d, window_view(x, (2, 3), (size, size), (m, m), (1, 1)).transpose(4, 5, 1, 0, 2, 3))
    v = np.empty((size * size, c + 1, tiles), dtype=x.dtype)  # B^T d B, and a row of ones for the bias
    v[:, c] = 1
    input_transform, output_transform = _winograd_transforms(m, x.dtype)
    np.matmul(
        input_transform, d.reshape(size * size, c * tiles), out=v.reshape(size * size, (c + 1) * tiles)[:, : c * tiles]
    )
    products = np.matmul(u, v)  # (size^2, O, tiles)
    blocks = np.matmul(output_transform, products.reshape(size * size, o * tiles)).reshape(m, m, o, n, th, tw)
    y = np.empty((n, o, m * th, m * tw), dtype=x.dtype)
    for r in range(m):  # output row m * tile row + r, column m * tile column + s
        for s in range(m):  # (one copy per (r, s) is ~4x faster than one whose innermost axis is s)
            np.copyto(y[:, :, r::m, s::m], blocks[r, s].swapaxes(0, 1))
    return y if (m * th, m * tw) == tuple(out) else y[:, :, : out[0], : out[1]]


def _depthwise(x, w_mat, kernel, strides, dilations, og, bias=None):
    """Depthwise convolution (one input channel per group): float32/float64 with one output per channel as
    a small matrix product per channel over its kernel offsets' windows (:func:`_depthwise_products`),
    otherwise one multiply-add per kernel offset.

    ``x``: padded ``(N, G, *S)``; ``w_mat``: ``(G, og, prod(K))``; ``bias``: ``(G, og)`` or None.
    Returns ``(N, G, og, *out)``, contiguous.
    With stride 1, each pass reads one contiguous run of the flattened image per channel (SIMD-friendly,
    where a window view loops row by row): output position ``i`` (per dim) is computed on a grid with the
    image's row pitch, and the columns past the output's width are cut off by a last pass adding the bias.
    Strided windows are read as views (gathering the stride phases first would copy the input).
    """
    out = tuple(window_output_size(size, k, s, d) for size, k, s, d in zip(x.shape[2:], kernel, strides, dilations))
    n, groups = x.shape[:2]
    spatial_ones = (1,) * len(out)
    if any(o == 0 for o in out):
        return np.zeros((n, groups, og) + out, dtype=x.dtype)
    flat = all(s == 1 for s in strides)
    if flat:
        pitch = [math.prod(x.shape[3 + d :]) for d in range(len(out))]
        length = sum((o - 1) * p for o, p in zip(out, pitch)) + 1  # flat index of the last output, + 1
        source = x.reshape(n, groups, 1, -1)
        full = np.empty((n, groups, og, out[0] * pitch[0]), dtype=x.dtype)
        y = full[..., :length]
        parts = (
            source[..., shift : shift + length]
            for shift in (sum(k * d * p for k, d, p in zip(offset, dilations, pitch)) for offset in np.ndindex(*kernel))
        )
        weights = w_mat[:, :, :, None]
    else:
        y = np.empty((n, groups, og) + out, dtype=x.dtype)
        parts = (
            x[
                (slice(None), slice(None), None)
                + tuple(slice(k * d, k * d + (o - 1) * s + 1, s) for k, d, o, s in zip(offset, dilations, out, strides))
            ]
            for offset in np.ndindex(*kernel)
        )
        weights = w_mat.reshape(w_mat.shape + spatial_ones)
    parts = list(parts)
    if len(parts) > 1 and og == 1 and x.dtype in _BLAS_DTYPES:
        _depthwise_products(parts, w_mat, y)
    else:
        term = np.empty_like(y)
        for i, part in enumerate(parts):  # summed in offset order, as a window sum would
            if i == 0:
                np.multiply(part, weights[:, :, i], out=y)
            else:
                np.multiply(part, weights[:, :, i], out=term)
                y += term
        del term
    if not flat:
        if bias is not None:
            y += bias.reshape(bias.shape + spatial_ones)
        return y
    result = full.reshape((n, groups, og, out[0]) + x.shape[3:])[(Ellipsis,) + tuple(slice(0, o) for o in out[1:])]
    if bias is None:
        return np.ascontiguousarray(result)
    return np.add(result, bias.reshape(bias.shape + spatial_ones), dtype=x.dtype)


_BLAS_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_DEPTHWISE_COLUMN_BYTES = 1 << 20  # the kernel offsets' windows of a block of channels, kept in cache


def _depthwise_products(parts: list, w_mat: np.ndarray, y: np.ndarray) -> None:
    """``y[n, g, 0] = sum_k w_mat[g, 0, k] * parts[k][n, g, 0]``: per block of channels, the kernel offsets'
    windows copied side by side, then one small matrix product per channel (3x faster than a multiply and an
    add per offset on MobileNet's and ShuffleNet's 28x28 and 14x14 layers; blocks keep the copies in cache)."""
    n, groups = y.shape[:2]
    positions = math.prod(y.shape[3:])
    k = len(parts)
    block = max(1, _DEPTHWISE_COLUMN_BYTES // (n * k * positions * y.itemsize))
    cols = np.empty((n, min(block, groups), k) + y.shape[3:], dtype=y.dtype)
    for start in range(0, groups, block):
        stop = min(start + block, groups)
        window = cols[:, : stop - start]
        for i, part in enumerate(parts):
            window[:, :, i] = part[:, start:stop, 0]
        product = np.matmul(w_mat[start:stop], window.reshape(n, stop - start, k, positions))
        y[:, start:stop] = product.reshape(y[:, start:stop].shape)


def _pad(x: np.ndarray, pads_begin, pads_end) -> np.ndarray:
    """Zero-pad (or, for negative pads, crop) the spatial dims of ``(N, C, *S)``.

    Non-negative pads, the common case, allocate once and copy once (faster than ``np.pad``).
    """
    if any(p < 0 for p in (*pads_begin, *pads_end)):
        spatial = tuple(range(2, x.ndim))
        return pad_or_crop(x, spatial, pads_begin, pads_end)
    if not any(pads_begin) and not any(pads_end):
        return x
    shape = x.shape[:2] + tuple(s + b + e for s, b, e in zip(x.shape[2:], pads_begin, pads_end))
    y = np.zeros(shape, dtype=x.dtype)
    y[(Ellipsis,) + tuple(slice(b, b + s) for b, s in zip(pads_begin, x.shape[2:]))] = x
    return y


def qlinear_conv(
    x: np.ndarray,
    x_scale,
    x_zero_point,
    w: np.ndarray,
    w_scale,
    w_zero_point,
    y_scale,
    y_zero_point,
    bias: np.ndarray | None = None,
    strides: Sequence[int] | None = None,
    pads_begin: Sequence[int] | None = None,
    pads_end: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    groups: int = 1,
) -> np.ndarray:
    """Quantized convolution (ONNX ``QLinearConv``), output in ``y_zero_point``'s integer type.

    The exact int32 accumulation of :func:`conv_integer` plus the int32 ``bias``
    is requantized as ``round_half_even(acc * x_scale * w_scale / y_scale) + y_zero_point``,
    saturated to the output type; ``w_scale`` / ``w_zero_point`` may be per output channel.
    """
    y_zero_point = np.asarray(y_zero_point)
    acc = conv_integer(x, w, x_zero_point, w_zero_point, strides, pads_begin, pads_end, dilations, groups).astype(
        np.int64
    )
    n_sp = acc.ndim - 2
    if bias is not None:
        acc = acc + np.asarray(bias).astype(np.int64).reshape((1, -1) + (1,) * n_sp)
    w_scale = np.asarray(w_scale, dtype=np.float32)
    if w_scale.ndim == 1:
        w_scale = w_scale.reshape((1, -1) + (1,) * n_sp)
    # The multiplier in float32, as the quantized runtimes compute it.
    multiplier = np.float32(x_scale) * w_scale / np.float32(y_scale)
    y = np.rint(acc.astype(np.float64) * multiplier.astype(np.float64)) + y_zero_point.astype(np.int64)
    info = np.iinfo(y_zero_point.dtype)
    return np.clip(y, info.min, info.max).astype(y_zero_point.dtype)


def deform_conv(
    x: np.ndarray,
    w: np.ndarray,
    offset: np.ndarray,
    bias: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    strides: Sequence[int] | None = None,
    pads_begin: Sequence[int] | None = None,
    pads_end: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    groups: int = 1,
    offset_groups: int = 1,
) -> np.ndarray:
    """N-d deformable convolution (ONNX ``DeformConv``, OpenVINO ``DeformableConvolution``).

    Kernel tap ``k`` of output position ``o`` reads the input at
    ``o * stride - pad_begin + k * dilation + offset`` by N-linear interpolation
    (zero outside the input), times ``mask``.  ``offset``: ``(N, offset_groups
    * prod(K) * n, *out)`` with the n per-dim displacements of each tap
    adjacent; ``mask``: ``(N, offset_groups * prod(K), *out)``.  Channels
    split into ``offset_groups`` contiguous blocks, each with its own offsets.
    """
    from .vision import sample_linear

    x, w, offset = np.asarray(x), np.asarray(w), np.asarray(offset)
    n_sp = x.ndim - 2
    strides, dilations = per_dim(strides, n_sp, "strides"), per_dim(dilations, n_sp, "dilations")
    pads_begin = per_dim(pads_begin, n_sp, "pads_begin", 0)
    pads_end = per_dim(pads_end, n_sp, "pads_end", 0)
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    kernel = w.shape[2:]
    if c % offset_groups or c % groups or o % groups or c // groups != cg:
        raise ExecutionError(
            f"input channels {c}, output channels {o} and weight {w.shape} do not fit "
            f"group={groups}, offset_group={offset_groups}"
        )
    out = tuple(
        conv_output_size(s, k, st, d, pb, pe)
        for s, k, st, d, pb, pe in zip(x.shape[2:], kernel, strides, dilations, pads_begin, pads_end)
    )
    n_k, n_pos = math.prod(kernel), math.prod(out)
    xc = x.astype(accumulator_dtype(x.dtype), copy=False)

    # Regular sampling grid (K, positions, n), then displaced per image and offset group.
    taps = np.stack(np.meshgrid(*[np.arange(k) * d for k, d in zip(kernel, dilations)], indexing="ij"), -1)
    starts = np.stack(
        np.meshgrid(*[np.arange(m) * s - pb for m, s, pb in zip(out, strides, pads_begin)], indexing="ij"), -1
    )
    base = taps.reshape(n_k, 1, n_sp) + starts.reshape(1, n_pos, n_sp)
    displacement = offset.reshape(n, offset_groups, n_k, n_sp, n_pos).swapaxes(3, 4)
    positions = (base + displacement).reshape(n * offset_groups, n_k * n_pos, n_sp)
    planes = xc.reshape((n * offset_groups, c // offset_groups) + x.shape[2:])
    samples = sample_linear(planes, positions.astype(np.float64))  # (N * offset_groups, C / og, K * positions)
    samples = samples.reshape(n, offset_groups, c // offset_groups, n_k, n_pos)
    if mask is not None:
        samples = samples * np.asarray(mask).astype(xc.dtype).reshape(n, offset_groups, 1, n_k, n_pos)
    cols = samples.reshape(n, groups, cg * n_k, n_pos)
    y = np.matmul(w.astype(xc.dtype).reshape(groups, o // groups, cg * n_k), cols).reshape((n, o) + out)
    if bias is not None:
        y = y + np.asarray(bias).astype(xc.dtype).reshape((1, o) + (1,) * n_sp)
    return downcast(y, x.dtype)
