"""Sampling kernels for vision ops: grid sampling, affine grids, RoI pooling and alignment.

Conventions
-----------
Images are channels-first ``(N, C, *spatial)``.  A sampling position is given
in input index units per spatial dim (``0`` is the first element's centre).

* :func:`grid_sample` is ONNX ``GridSample`` in N-d: ``grid`` holds normalized
  coordinates in ``[-1, 1]`` with the *last* spatial dim first (``x, y, z``);
  modes ``nearest`` (round half to even), ``linear`` and ``cubic`` (Keys,
  ``a = -0.75``); ``padding_mode`` ``zeros`` / ``border`` / ``reflection``.
  A coordinate outside the border (``[-0.5, size - 0.5]``, or ``[0, size - 1]``
  with ``align_corners``) is first clamped into the image (``border``) or
  reflected about the border (``reflection``); then every interpolation tap
  outside the image reads 0 (``zeros``), the nearest edge (``border``) or its
  reflection (``reflection``).  This is PyTorch's and onnxruntime's rule.
* :func:`affine_grid` is ONNX ``AffineGrid`` (PyTorch ``affine_grid``).
* :func:`roi_align` is ONNX ``RoiAlign``: rois ``(x1, y1, x2, y2)`` in input
  image coordinates times ``spatial_scale``; each output bin averages (or takes
  the max of) ``sampling_ratio`` x ``sampling_ratio`` bilinear samples
  (adaptive ``ceil(roi_size / output_size)`` when 0).
* :func:`max_roi_pool` is ONNX ``MaxRoiPool`` (Caffe's ROI pooling): rois
  ``(batch, x1, y1, x2, y2)`` rounded to integer cells, max over each bin.
* :func:`sample_linear` samples ``(B, C, *S)`` at arbitrary positions with
  N-linear interpolation, reading zero outside (used by deformable convolution).

Everything is vectorized over output positions; loops run over interpolation
taps (at most ``4 ** n``) and, for the RoI kernels, over regions of interest.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence

import numpy as np

from ..errors import ExecutionError
from ._common import downcast, upcast

# ---------------------------------------------------------------- gathering


def _gather_taps(x: np.ndarray, indices: list[np.ndarray], weights: list[np.ndarray]) -> np.ndarray:
    """``sum over tap combinations of prod(weights) * x[b, :, idx_0, idx_1, ...]``.

    ``x``: ``(B, C, *S)``; ``indices[d]`` / ``weights[d]``: ``(B, M, T_d)``, indices
    already inside ``[0, S_d)``.  Returns ``(B, C, M)``.
    """
    b, c = x.shape[:2]
    spatial = x.shape[2:]
    flat_x = x.reshape(b, c, -1)
    dim_strides = [math.prod(spatial[d + 1 :]) for d in range(len(spatial))]
    out = np.zeros((b, c, indices[0].shape[1]), dtype=x.dtype)
    for taps in np.ndindex(*(i.shape[2] for i in indices)):
        flat = functools.reduce(operator.add, (idx[..., t] * s for idx, t, s in zip(indices, taps, dim_strides)))
        w = functools.reduce(operator.mul, (wt[..., t] for wt, t in zip(weights, taps)))
        out += np.take_along_axis(flat_x, flat[:, None, :], axis=2) * w[:, None, :].astype(x.dtype)
    return out


def _linear_taps(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two taps ``floor(p), floor(p) + 1`` and their linear weights, stacked on a last axis."""
    low = np.floor(p)
    frac = p - low
    return np.stack([low, low + 1], axis=-1), np.stack([1 - frac, frac], axis=-1)


def _cubic_taps(p: np.ndarray, a: float = -0.75) -> tuple[np.ndarray, np.ndarray]:
    """The four taps ``floor(p) - 1 .. floor(p) + 2`` and Keys' cubic weights."""
    low = np.floor(p)
    taps = low[..., None] + np.arange(-1, 3)
    t = np.abs(p[..., None] - taps)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return taps, np.where(t <= 1, near, far)


def sample_linear(x: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """N-linear samples of ``x`` ``(B, C, *S)`` at ``positions`` ``(B, M, n)``; taps outside read 0.

    Returns ``(B, C, M)``.
    """
    spatial = x.shape[2:]
    indices, weights = [], []
    for d, size in enumerate(spatial):
        taps, w = _linear_taps(positions[..., d])
        inside = (taps >= 0) & (taps <= size - 1)
        indices.append(np.clip(taps, 0, size - 1).astype(np.int64))
        weights.append(np.where(inside, w, 0))
    return _gather_taps(x, indices, weights)


# ---------------------------------------------------------------- grid sample

GRID_SAMPLE_MODES = ("nearest", "linear", "cubic")
GRID_PADDING_MODES = ("zeros", "border", "reflection")


def _reflect(v: np.ndarray, low: float, high: float) -> np.ndarray:
    """Reflect ``v`` about ``low``/``high`` (repeatedly) until it lies in ``[low, high]``."""
    span = high - low
    if span <= 0:
        return np.full_like(v, low)
    below, above = v < low, v > high
    distance = np.where(below, low - v, np.where(above, v - high, 0))
    folds = np.floor(distance / span)
    rest = distance - folds * span
    even = folds % 2 == 0
    from_low = np.where(even, low + rest, high - rest)  # coming from below
    from_high = np.where(even, high - rest, low + rest)
    return np.where(below, from_low, np.where(above, from_high, v))


def grid_sample(
    x: np.ndarray,
    grid: np.ndarray,
    mode: str = "linear",
    padding_mode: str = "zeros",
    align_corners: bool = False,
    cubic_border_taps_only: bool = False,
) -> np.ndarray:
    """Sample ``x`` ``(N, C, *S)`` at ``grid`` ``(N, *out, n)`` (see the module docstring).

    ``cubic_border_taps_only``: with cubic interpolation and border padding, clamp only the 16
    taps, not the sampling location first (PyTorch's bicubic, which onnxruntime follows).
    """
    x, grid = np.asarray(x), np.asarray(grid)
    if mode not in GRID_SAMPLE_MODES:
        raise ExecutionError(f"unknown grid sample mode {mode!r}; expected one of {GRID_SAMPLE_MODES}")
    if padding_mode not in GRID_PADDING_MODES:
        raise ExecutionError(f"unknown padding_mode {padding_mode!r}; expected one of {GRID_PADDING_MODES}")
    n_sp = x.ndim - 2
    if grid.ndim != x.ndim or grid.shape[-1] != n_sp or grid.shape[0] != x.shape[0]:
        raise ExecutionError(f"grid of shape {grid.shape} does not fit input of shape {x.shape}")
    xc = upcast(x)
    out_shape = grid.shape[1:-1]
    g = grid.reshape(grid.shape[0], -1, n_sp).astype(np.float64)
    indices, weights = [], []
    for d, size in enumerate(x.shape[2:]):
        norm = g[..., n_sp - 1 - d]  # the grid lists the last spatial dim first
        p = (norm + 1) / 2 * (size - 1) if align_corners else ((norm + 1) * size - 1) / 2
        low, high = (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)
        if mode == "nearest":
            p = np.rint(p)
        outside = (p < low) | (p > high)
        if padding_mode == "border" and not (cubic_border_taps_only and mode == "cubic"):
            p = np.where(outside, np.clip(p, 0, size - 1), p)
        elif padding_mode == "reflection":
            p = np.where(outside, _reflect(p, low, high), p)
        if mode == "nearest":
            taps, w = p[..., None], np.ones(p.shape + (1,))
        else:
            taps, w = (_linear_taps if mode == "linear" else _cubic_taps)(p)
        if padding_mode == "zeros":
            w = np.where((taps >= 0) & (taps <= size - 1), w, 0)
        elif padding_mode == "reflection":
            taps = np.trunc(_reflect(taps, low, high))
        indices.append(np.clip(taps, 0, size - 1).astype(np.int64))
        weights.append(w)
    y = _gather_taps(xc, indices, weights)
    return downcast(y.reshape(x.shape[:2] + out_shape), x.dtype)


# ---------------------------------------------------------------- affine grid


def affine_grid(theta: np.ndarray, size: Sequence[int], align_corners: bool = False) -> np.ndarray:
    """Normalized sampling grid ``(N, *S, n)`` of the affine maps ``theta`` ``(N, n, n + 1)``.

    ``size`` is the full ``(N, C, *S)`` output size; the grid's last axis lists
    the last spatial dim first (``x, y, z``), as :func:`grid_sample` expects.
    """
    theta = np.asarray(theta)
    size = [int(s) for s in size]
    spatial = size[2:]
    n_sp = len(spatial)
    if theta.shape[1:] != (n_sp, n_sp + 1):
        raise ExecutionError(f"theta of shape {theta.shape} does not fit output size {size}")
    tc = upcast(theta)

    def axis_coords(s):
        if align_corners:
            return np.linspace(-1, 1, s, dtype=tc.dtype) if s > 1 else np.zeros(s, tc.dtype)
        return ((2 * np.arange(s, dtype=tc.dtype) + 1) / s - 1).astype(tc.dtype)

    # Base grid (*S, n + 1): (x, y, [z], 1) with x along the last spatial dim.
    mesh = np.meshgrid(*[axis_coords(s) for s in spatial], indexing="ij")
    base = np.stack(list(mesh[::-1]) + [np.ones(spatial, tc.dtype)], axis=-1).reshape(-1, n_sp + 1)
    grid = np.einsum("pk,njk->npj", base, tc)
    return downcast(grid.reshape([theta.shape[0]] + spatial + [n_sp]), theta.dtype)


# ---------------------------------------------------------------- RoI kernels


def _bilinear_axis(coords: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """RoiAlign's bilinear taps along one axis: ``(low, high)`` indices and weights, and validity.

    A sample more than one cell outside the image is invalid (contributes 0);
    otherwise it is clamped to ``[0, size - 1]`` first.
    """
    valid = (coords >= -1.0) & (coords <= size)
    c = np.clip(coords, 0, None)
    low = np.floor(c).astype(np.int64)
    at_edge = low >= size - 1
    low = np.where(at_edge, size - 1, low)
    high = np.where(at_edge, size - 1, low + 1)
    c = np.where(at_edge, low, c)
    frac = c - low
    return np.stack([low, high], -1), np.stack([1 - frac, frac], -1), valid


def roi_align(
    x: np.ndarray,
    rois: np.ndarray,
    batch_indices: np.ndarray,
    output_height: int = 1,
    output_width: int = 1,
    sampling_ratio: int = 0,
    spatial_scale: float = 1.0,
    mode: str = "avg",
    half_pixel: bool = True,
) -> np.ndarray:
    """ONNX ``RoiAlign`` on ``(N, C, H, W)``; returns ``(num_rois, C, output_height, output_width)``.

    ``half_pixel=False`` is the legacy ``output_half_pixel`` mode: no half-pixel
    shift and every roi at least 1x1.  ``mode="max"`` takes, as onnxruntime
    does, the maximum over samples of the largest *weighted* bilinear tap
    (not of the interpolated value).
    """
    x, rois = np.asarray(x), np.asarray(rois)
    if mode not in ("avg", "max"):
        raise ExecutionError(f"unknown RoiAlign mode {mode!r}; expected 'avg' or 'max'")
    xc = upcast(x)
    _, c, height, width = x.shape
    out = np.zeros((rois.shape[0], c, output_height, output_width), dtype=xc.dtype)
    offset = 0.5 if half_pixel else 0.0
    for r, (box, image) in enumerate(zip(rois.astype(np.float64), np.asarray(batch_indices).astype(np.int64))):
        x1, y1, x2, y2 = box * spatial_scale - offset
        roi_w, roi_h = x2 - x1, y2 - y1
        if not half_pixel:
            roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
        bin_h, bin_w = roi_h / output_height, roi_w / output_width
        grid_h = sampling_ratio if sampling_ratio > 0 else int(math.ceil(roi_h / output_height))
        grid_w = sampling_ratio if sampling_ratio > 0 else int(math.ceil(roi_w / output_width))
        if grid_h <= 0 or grid_w <= 0:
            continue
        # Sample coordinates per (bin, sample) along each axis.
        ys = y1 + (np.arange(output_height)[:, None] + (np.arange(grid_h)[None, :] + 0.5) / grid_h) * bin_h
        xs = x1 + (np.arange(output_width)[:, None] + (np.arange(grid_w)[None, :] + 0.5) / grid_w) * bin_w
        y_idx, y_w, y_ok = _bilinear_axis(ys, height)
        x_idx, x_w, x_ok = _bilinear_axis(xs, width)
        y_w, x_w = y_w * y_ok[..., None], x_w * x_ok[..., None]
        plane = xc[image]
        if mode == "avg":
            # Bilinear weights are separable: one (out_h, H) and one (out_w, W) matrix, averaged over samples.
            wy = np.zeros((output_height, height))
            wx = np.zeros((output_width, width))
            np.add.at(wy, (np.arange(output_height)[:, None, None], y_idx), y_w)
            np.add.at(wx, (np.arange(output_width)[:, None, None], x_idx), x_w)
            wy, wx = (wy / grid_h).astype(xc.dtype), (wx / grid_w).astype(xc.dtype)
            out[r] = np.einsum("ph,chw,qw->cpq", wy, plane, wx)
        else:
            # (C, oh, gh, 2, ow, gw, 2) weighted taps, max over everything but (C, oh, ow).
            taps = plane[:, y_idx[:, :, :, None, None, None], x_idx[None, None, None, :, :, :]]
            weighted = taps * (y_w[:, :, :, None, None, None] * x_w[None, None, None, :, :, :]).astype(xc.dtype)
            out[r] = weighted.max(axis=(2, 3, 5, 6))
    return downcast(out, x.dtype)


def _round_half_away(v):
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def max_roi_pool(
    x: np.ndarray, rois: np.ndarray, pooled_shape: Sequence[int], spatial_scale: float = 1.0
) -> np.ndarray:
    """ONNX ``MaxRoiPool``: ``(num_rois, C, ph, pw)`` maxima over each roi's bins (empty bins give 0)."""
    x, rois = np.asarray(x), np.asarray(rois)
    ph, pw = (int(v) for v in pooled_shape)
    _, c, height, width = x.shape
    out = np.zeros((rois.shape[0], c, ph, pw), dtype=x.dtype)
    for r, roi in enumerate(rois.astype(np.float64)):
        image = _roi_image(roi, x.shape[0])  # a negative index would silently read the last image
        x1, y1, x2, y2 = (int(v) for v in _round_half_away(roi[1:] * spatial_scale))
        masks = []
        for start, end, bins, size in ((y1, y2, ph, height), (x1, x2, pw, width)):
            extent = max(end - start + 1, 1)
            b = np.arange(bins)
            lo = np.clip(np.floor(b * extent / bins).astype(np.int64) + start, 0, size)
            hi = np.clip(np.ceil((b + 1) * extent / bins).astype(np.int64) + start, 0, size)
            cells = np.arange(size)
            masks.append((cells >= lo[:, None]) & (cells < hi[:, None]))  # (bins, size)
        rows, cols = masks
        plane = x[image]
        low = np.asarray(-np.inf if plane.dtype.kind == "f" else np.iinfo(plane.dtype).min, dtype=plane.dtype)
        # Rectangular bins are separable: max over columns, then over rows.
        col_max = np.where(cols[None, None], plane[:, :, None, :], low).max(axis=3)  # (C, H, pw)
        bin_max = np.where(rows[None, :, :, None], col_max[:, None, :, :], low).max(axis=2)  # (C, ph, pw)
        empty = ~(np.asarray(rows.any(axis=1))[:, None] & np.asarray(cols.any(axis=1))[None, :])
        out[r] = np.where(empty, 0, bin_max)
    return out


# ---------------------------------------------------------------- Caffe / R-FCN / Darknet / SSD layers
#
# The kernels below are the detection-head layers of Caffe-era networks, as
# OpenVINO defines them (opset1).  Their rois are rows ``(batch, x1, y1, x2,
# y2)``; bin geometry is computed in float32, as the runtimes do, so that a bin
# edge landing on a cell boundary rounds the same way.


def _roi_image(roi: np.ndarray, batches: int) -> int:
    image = int(roi[0])
    if not 0 <= image < batches:
        raise ExecutionError(f"roi batch index {image} is outside [0, {batches})")
    return image


def _lerp_2d(gather, y: np.ndarray, x: np.ndarray, height: int, width: int) -> np.ndarray:
    """Bilinear value at ``(y, x)`` (inside the image) from its floor/ceil neighbours.

    ``gather(rows, cols)`` reads the plane(s) at integer index arrays shaped like ``y``.
    """
    top, left = np.floor(y), np.floor(x)
    fy, fx = (y - top), (x - left)
    top, left = top.astype(np.int64), left.astype(np.int64)
    bottom = np.minimum(np.ceil(y).astype(np.int64), height - 1)
    right = np.minimum(np.ceil(x).astype(np.int64), width - 1)
    upper = gather(top, left) + (gather(top, right) - gather(top, left)) * fx
    lower = gather(bottom, left) + (gather(bottom, right) - gather(bottom, left)) * fx
    return upper + (lower - upper) * fy


def roi_pool_bilinear(x: np.ndarray, rois: np.ndarray, pooled_shape: Sequence[int]) -> np.ndarray:
    """ROI pooling by bilinear sampling: ``(num_rois, C, ph, pw)``.

    The roi corners are normalized to ``[0, 1]``; the ``ph x pw`` samples span
    the roi corner to corner (its centre when a side has one sample), and a
    sample outside the image gives 0.
    """
    x, rois = np.asarray(x), np.asarray(rois)
    xc = upcast(x)
    ph, pw = (int(v) for v in pooled_shape)
    batches, c, height, width = x.shape
    out = np.zeros((rois.shape[0], c, ph, pw), dtype=xc.dtype)

    def positions(start, end, count, size):
        if count == 1:
            return np.float32([(start + end) * 0.5 * (size - 1)])
        scale = (end - start) * np.float32(size - 1) / np.float32(count - 1)
        p = np.arange(count, dtype=np.float32) * scale + start * np.float32(size - 1)
        p[-1] = end * np.float32(size - 1)  # the last sample sits exactly on the roi's far edge
        return p

    for r, roi in enumerate(rois.astype(np.float32)):
        plane = xc[_roi_image(roi, batches)]
        ys = positions(roi[2], roi[4], ph, height)[:, None].repeat(pw, 1)
        xs = positions(roi[1], roi[3], pw, width)[None, :].repeat(ph, 0)
        inside = (ys >= 0) & (ys <= height - 1) & (xs >= 0) & (xs <= width - 1)
        ys, xs = np.where(inside, ys, 0), np.where(inside, xs, 0)
        # _lerp_2d calls the sampler at once, inside this iteration.
        values = _lerp_2d(lambda i, j: plane[:, i, j], ys.astype(xc.dtype), xs.astype(xc.dtype), height, width)  # noqa: B023
        out[r] = np.where(inside, values, 0)
    return downcast(out, x.dtype)


def ps_roi_pool_average(
    x: np.ndarray, rois: np.ndarray, output_dim: int, group_size: int, spatial_scale: float
) -> np.ndarray:
    """Position-sensitive average ROI pooling (R-FCN): ``(num_rois, output_dim, G, G)``.

    Output bin ``(o, i, j)`` averages input channel ``(o * G + i) * G + j`` over
    the bin's cells; roi corners are rounded (half away from zero), the far
    corner is inclusive, and an empty bin gives 0.
    """
    x, rois = np.asarray(x), np.asarray(rois)
    xc = upcast(x)
    g = int(group_size)
    batches, c, height, width = x.shape
    if c != output_dim * g * g:
        raise ExecutionError(
            f"average PSROIPooling needs output_dim * group_size^2 = {output_dim * g * g} input channels, got {c}"
        )
    out = np.zeros((rois.shape[0], output_dim, g, g), dtype=xc.dtype)
    scale = np.float32(spatial_scale)
    cells = np.arange(g, dtype=np.float32)
    for r, roi in enumerate(rois.astype(np.float32)):
        planes = xc[_roi_image(roi, batches)].reshape(output_dim, g, g, height, width)
        # The far corner is rounded after the +1 (they differ for a corner at -0.5).
        corners = _round_half_away(roi[1:] + np.array([0, 0, 1, 1], np.float32)).astype(np.float32)
        x1, y1, x2, y2 = corners * scale
        masks = []
        for start, end, size in ((y1, y2, height), (x1, x2, width)):
            step = max(end - start, np.float32(0.1)) / np.float32(g)
            lo = np.clip(np.floor(cells * step + start), 0, size).astype(np.int64)
            hi = np.clip(np.ceil((cells + 1) * step + start), 0, size).astype(np.int64)
            index = np.arange(size)
            masks.append(((index >= lo[:, None]) & (index < hi[:, None])).astype(xc.dtype))  # (G, size)
        rows, cols = masks
        sums = np.einsum("oijhw,ih,jw->oij", planes, rows, cols)
        area = rows.sum(1)[:, None] * cols.sum(1)[None, :]
        out[r] = np.where(area > 0, sums / np.maximum(area, 1), 0)
    return downcast(out, x.dtype)


def ps_roi_pool_bilinear(
    x: np.ndarray,
    rois: np.ndarray,
    output_dim: int,
    group_size: int,
    spatial_scale: float,
    bins_x: int = 1,
    bins_y: int = 1,
) -> np.ndarray:
    """Position-sensitive bilinear ROI pooling: ``(num_rois, output_dim, G, G)``.

    The roi (corners times ``spatial_scale``, normalized to ``[0, 1]``) splits
    into ``bins_y x bins_x`` sub-boxes; sub-box ``(by, bx)`` reads input channel
    ``(by * bins_x + bx) * output_dim + o`` with :func:`roi_pool_bilinear`'s
    ``G x G`` sampling, and the output averages the sub-boxes.
    """
    x, rois = np.asarray(x), np.asarray(rois)
    xc = upcast(x)
    g = int(group_size)
    batches, c, height, width = x.shape
    if c != output_dim * bins_x * bins_y:
        raise ExecutionError(
            f"bilinear PSROIPooling needs output_dim * spatial_bins_x * spatial_bins_y = "
            f"{output_dim * bins_x * bins_y} input channels, got {c}"
        )
    out = np.zeros((rois.shape[0], output_dim, g, g), dtype=xc.dtype)
    scale = np.float32(spatial_scale)
    cells = np.arange(g, dtype=np.float32)

    def positions(low, high, size):
        # The runtime's float32 arithmetic, step by step: a sample on the far edge must not round past it.
        if g == 1:
            return np.float32([np.float32(0.5) * (low + high) * np.float32(size - 1)])
        step = (high - low) * np.float32(size - 1) / np.float32(g - 1)
        return cells * step + low * np.float32(size - 1)

    for r, roi in enumerate(rois.astype(np.float32)):
        planes = xc[_roi_image(roi, batches)].reshape(bins_y, bins_x, output_dim, height, width)
        x1, y1, x2, y2 = roi[1:] * scale
        bin_w, bin_h = (x2 - x1) / np.float32(bins_x), (y2 - y1) / np.float32(bins_y)
        for by in range(bins_y):
            ys = positions(y1 + np.float32(by) * bin_h, y1 + np.float32(by + 1) * bin_h, height)
            ys = ys[:, None].repeat(g, 1)
            for bx in range(bins_x):
                xs = positions(x1 + np.float32(bx) * bin_w, x1 + np.float32(bx + 1) * bin_w, width)
                xs = xs[None, :].repeat(g, 0)
                inside = (ys >= 0) & (ys <= height - 1) & (xs >= 0) & (xs <= width - 1)
                ysafe = np.where(inside, ys, 0).astype(xc.dtype)
                xsafe = np.where(inside, xs, 0).astype(xc.dtype)
                plane = planes[by, bx]
                values = _lerp_2d(lambda i, j: plane[:, i, j], ysafe, xsafe, height, width)  # noqa: B023 (called at once)
                out[r] += np.where(inside, values, 0)
    return downcast(out / (bins_x * bins_y), x.dtype)


def deformable_ps_roi_pool(
    x: np.ndarray,
    rois: np.ndarray,
    offsets: np.ndarray | None,
    output_dim: int,
    group_size: int,
    spatial_scale: float,
    bins_x: int = 1,
    bins_y: int = 1,
    trans_std: float = 1.0,
    part_size: int = 1,
) -> np.ndarray:
    """Deformable position-sensitive ROI pooling (Deformable ConvNets): ``(num_rois, output_dim, G, G)``.

    Like average :func:`ps_roi_pool_average` but each bin, shifted by
    ``offsets[roi, 2 * class + (x, y), part_y, part_x] * trans_std`` times the
    roi size, averages ``bins_y x bins_x`` bilinear samples taken at its
    sub-bins' top-left corners (samples over half a cell outside the image are
    skipped; the others are clamped into it).  A roi with a negative batch
    index gives zeros.
    """
    x, rois = np.asarray(x), np.asarray(rois)
    xc = upcast(x)
    g = int(group_size)
    batches, c, height, width = x.shape
    if c != output_dim * g * g:
        raise ExecutionError(
            f"DeformablePSROIPooling needs output_dim * group_size^2 = {output_dim * g * g} input channels, got {c}"
        )
    out = np.zeros((rois.shape[0], output_dim, g, g), dtype=xc.dtype)
    scale = np.float32(spatial_scale)
    cells = np.arange(g)
    o_idx, i_idx, j_idx = np.meshgrid(np.arange(output_dim), cells, cells, indexing="ij")  # (O, G, G) each
    if offsets is not None:
        offsets = np.asarray(offsets).astype(np.float32)
        classes = offsets.shape[1] // 2
        class_of = o_idx // max(output_dim // max(classes, 1), 1)
        part_y, part_x = i_idx * part_size // g, j_idx * part_size // g
    flat_channel = (o_idx * g + i_idx) * g + j_idx
    for r, roi in enumerate(rois.astype(np.float32)):
        if int(roi[0]) < 0:
            continue
        plane = xc[_roi_image(roi, batches)].reshape(c, height, width)
        corners = _round_half_away(roi[1:]).astype(np.float32)
        x1, y1 = corners[0] * scale - np.float32(0.5), corners[1] * scale - np.float32(0.5)
        x2, y2 = (corners[2] + 1) * scale - np.float32(0.5), (corners[3] + 1) * scale - np.float32(0.5)
        roi_w, roi_h = max(x2 - x1, np.float32(0.1)), max(y2 - y1, np.float32(0.1))
        bin_w, bin_h = roi_w / np.float32(g), roi_h / np.float32(g)
        left = x1 + j_idx.astype(np.float32) * bin_w
        top = y1 + i_idx.astype(np.float32) * bin_h
        if offsets is not None:
            left = left + offsets[r, 2 * class_of, part_y, part_x] * np.float32(trans_std) * roi_w
            top = top + offsets[r, 2 * class_of + 1, part_y, part_x] * np.float32(trans_std) * roi_h
        total = np.zeros((output_dim, g, g), dtype=xc.dtype)
        count = np.zeros((output_dim, g, g), dtype=np.int64)
        for sy in range(bins_y):
            ys = top + np.float32(sy) * (bin_h / np.float32(bins_y))
            for sx in range(bins_x):
                xs = left + np.float32(sx) * (bin_w / np.float32(bins_x))
                ok = (ys >= -0.5) & (ys <= height - 0.5) & (xs >= -0.5) & (xs <= width - 0.5)
                yc = np.clip(ys, 0, height - 1).astype(xc.dtype)
                xcl = np.clip(xs, 0, width - 1).astype(xc.dtype)
                values = _lerp_2d(lambda i, j: plane[flat_channel, i, j], yc, xcl, height, width)  # noqa: B023 (called at once)
                total += np.where(ok, values, 0)
                count += ok
        out[r] = np.where(count > 0, total / np.maximum(count, 1), 0)
    return downcast(out, x.dtype)


def reorg(x: np.ndarray, stride: int) -> np.ndarray:
    """Darknet's ``reorg``: ``(N, C, H, W)`` -> ``(N, C * s^2, H / s, W / s)``.

    Darknet reads the input's memory as ``(N, C / s^2, H * s, W * s)`` and
    moves each ``s x s`` block of that view into channels: output channel
    ``(dy * s + dx) * C / s^2 + c`` at ``(h, w)`` is the view's ``(c, h * s + dy,
    w * s + dx)``.
    """
    x = np.asarray(x)
    n, c, h, w = x.shape
    s = int(stride)
    if s < 1 or c % (s * s) or h % s or w % s:
        raise ExecutionError(
            f"reorg stride {s} does not divide the channels by stride^2 and the spatial dims of shape {list(x.shape)}"
        )
    view = x.reshape(n, c // (s * s), h, s, w, s)
    return np.ascontiguousarray(view.transpose(0, 3, 5, 1, 2, 4)).reshape(n, c * s * s, h // s, w // s)


def region_yolo(x: np.ndarray, coords: int, classes: int, regions: int, do_softmax: bool) -> np.ndarray:
    """Darknet's region (YOLO v2, ``do_softmax``) / yolo (v3) layer on ``(N, C, H, W)``.

    The first ``regions`` groups of ``coords + classes + 1`` channels are kept:
    x and y and the objectness go through a sigmoid, and the class scores
    through a softmax over the classes (v2) or a sigmoid (v3).  Returns
    ``(N, regions * (coords + classes + 1), H, W)``.
    """
    from .elementwise import sigmoid
    from .norm import softmax

    x = np.asarray(x)
    n, c, h, w = x.shape
    entry = coords + classes + 1
    if c < regions * entry:
        raise ExecutionError(
            f"region layer needs {regions} x (coords + classes + 1) = {regions * entry} channels, got {c}"
        )
    y = upcast(x)[:, : regions * entry].reshape(n, regions, entry, h, w).copy()
    y[:, :, :2] = sigmoid(y[:, :, :2])
    if do_softmax:
        y[:, :, coords] = sigmoid(y[:, :, coords])
        y[:, :, coords + 1 :] = softmax(y[:, :, coords + 1 :], 2)
    else:
        y[:, :, coords:] = sigmoid(y[:, :, coords:])
    return downcast(y.reshape(n, regions * entry, h, w), x.dtype)


def _prior_output(boxes: np.ndarray, variance: Sequence[float]) -> np.ndarray:
    """``(2, 4 * count)``: the boxes' ``(xmin, ymin, xmax, ymax)``, then each box's four variances."""
    variance = [float(v) for v in variance] or [0.1]
    if len(variance) not in (1, 4):
        raise ExecutionError(f"prior boxes need 1 or 4 variances, got {len(variance)}")
    boxes = boxes.reshape(-1).astype(np.float32)
    variances = np.tile(np.array(variance if len(variance) == 4 else variance * 4, np.float32), boxes.size // 4)
    return np.stack([boxes, variances])


def _prior_count(
    ratios: int, min_sizes: int, max_sizes: int, scale_all_sizes: bool, fixed_ratio, fixed_size, density
) -> int:
    """Boxes per cell as the layer's output shape counts them (OpenVINO's formula)."""
    count = ratios * min_sizes + max_sizes if scale_all_sizes else ratios + min_sizes - 1
    if fixed_size:
        count = ratios * len(fixed_size)
    for d in density:
        count += (len(fixed_ratio) if fixed_ratio else ratios) * (int(d) ** 2 - 1)
    return count


def _prior_aspect_ratios(aspect_ratio: Sequence[float], flip: bool) -> list[float]:
    """1, then each aspect ratio not within 1e-6 of one already taken (and its inverse with ``flip``)."""
    ratios = [1.0]
    for ar in aspect_ratio:
        if all(abs(ar - seen) >= 1e-6 for seen in ratios):
            ratios.append(ar)
            if flip:
                ratios.append(1.0 / ar)
    return ratios


PriorShape = tuple[float, float, float, float, bool]


def _fixed_size_priors(
    fixed_size: Sequence[float], fixed_ratio: Sequence[float], density: Sequence[float], non_square: list[float]
) -> list[PriorShape]:
    """The density grids of boxes of each fixed size, as :func:`prior_boxes` describes them.

    Each prior: (centre shift x, centre shift y, half width, half height, clipped on its own).
    """
    shapes: list[PriorShape] = []
    for s, size in enumerate(fixed_size):
        whole = int(size)
        grid = int(density[s])
        shift = int(size / grid)

        def dense(half_w, half_h, whole=whole, grid=grid, shift=shift):
            for r in range(grid):
                for col in range(grid):
                    shapes.append(
                        (
                            -(whole // 2) + shift / 2 + col * shift,
                            -(whole // 2) + shift / 2 + r * shift,
                            half_w,
                            half_h,
                            True,
                        )
                    )

        if fixed_ratio:
            for ar in fixed_ratio:
                dense(size * 0.5 * math.sqrt(ar), size * 0.5 / math.sqrt(ar))
        else:
            if density:
                dense(whole * 0.5, whole * 0.5)
            for root in non_square:
                dense(size * 0.5 * root, size * 0.5 / root)
    return shapes


def prior_boxes(
    layer_size: Sequence[int],
    image_size: Sequence[int],
    *,
    min_size: Sequence[float] = (),
    max_size: Sequence[float] = (),
    aspect_ratio: Sequence[float] = (),
    flip: bool = False,
    clip: bool = False,
    step: float = 0.0,
    offset: float = 0.5,
    variance: Sequence[float] = (),
    scale_all_sizes: bool = True,
    fixed_ratio: Sequence[float] = (),
    fixed_size: Sequence[float] = (),
    density: Sequence[float] = (),
) -> np.ndarray:
    """SSD prior boxes over an ``(H, W)`` feature map for an ``(IH, IW)`` image: ``(2, 4 * H * W * priors)``.

    Per cell, in order: for each fixed size, its density grid of boxes (for
    each fixed ratio, or square then one grid per aspect ratio); then for each
    min size its square box, the ``sqrt(min * max)`` box and its aspect-ratio
    boxes (all of them only after the last min size unless ``scale_all_sizes``).
    Aspect ratios start with 1, skip near-duplicates and add ``1 / ar`` with
    ``flip``.  Boxes are normalized by the image size; the fixed-size ones are
    always clipped to ``[0, 1]``, the others with ``clip``.
    """
    height, width = (int(v) for v in layer_size)
    image_h, image_w = (int(v) for v in image_size)
    ratios = _prior_aspect_ratios(aspect_ratio, flip)
    non_square = [math.sqrt(ar) for ar in ratios if abs(ar - 1.0) >= 1e-6]
    min_size = [float(v) for v in min_size]
    step = float(step)
    if not scale_all_sizes:  # MXNet's convention: sizes and step relative to the image height
        step = image_h / height if step == -1 else step * image_h
        min_size = [v * image_h for v in min_size]
    if fixed_size and len(density) < len(fixed_size):
        raise ExecutionError(
            f"prior boxes with {len(fixed_size)} fixed sizes need as many densities, got {len(density)}"
        )

    shapes = _fixed_size_priors(fixed_size, fixed_ratio, density, non_square)
    for k, size in enumerate(min_size):
        shapes.append((0.0, 0.0, size * 0.5, size * 0.5, False))
        if k < len(max_size):
            half = math.sqrt(size * max_size[k]) * 0.5
            shapes.append((0.0, 0.0, half, half, False))
        if scale_all_sizes or k == len(min_size) - 1:
            base = min_size[k if scale_all_sizes else 0]
            shapes.extend((0.0, 0.0, base * 0.5 * root, base * 0.5 / root, False) for root in non_square)

    expected = _prior_count(
        len(ratios), len(min_size), len(max_size), scale_all_sizes, fixed_ratio, fixed_size, density
    )
    if len(shapes) != expected:
        raise ExecutionError(
            f"these prior box attributes give {len(shapes)} boxes per cell but the layer's "
            f"output shape counts {expected} boxes per cell; the combination is ill-defined"
        )
    f32 = np.float32
    if step == 0:  # cell centres; this form ignores ``offset``
        cx = (np.arange(width, dtype=f32) + f32(0.5)) * f32(image_w / width)
        cy = (np.arange(height, dtype=f32) + f32(0.5)) * f32(image_h / height)
    else:
        cx = (f32(offset) + np.arange(width, dtype=f32)) * f32(step)
        cy = (f32(offset) + np.arange(height, dtype=f32)) * f32(step)
    table = np.array(shapes, dtype=np.float64).reshape(-1, 5)
    dx, dy, half_w, half_h = (table[:, k].astype(f32) for k in range(4))
    own_clip = table[:, 4].astype(bool)
    cx = cx[None, :, None] + dx  # (1, W, P)
    cy = cy[:, None, None] + dy  # (H, 1, P)
    inv_w, inv_h = f32(1.0) / f32(image_w), f32(1.0) / f32(image_h)
    xmin, xmax = (cx - half_w) * inv_w, (cx + half_w) * inv_w
    ymin, ymax = (cy - half_h) * inv_h, (cy + half_h) * inv_h
    xmin, ymin = np.where(own_clip, np.maximum(xmin, 0), xmin), np.where(own_clip, np.maximum(ymin, 0), ymin)
    xmax, ymax = np.where(own_clip, np.minimum(xmax, 1), xmax), np.where(own_clip, np.minimum(ymax, 1), ymax)
    boxes = np.stack(np.broadcast_arrays(xmin, ymin, xmax, ymax), axis=-1)  # (H, W, P, 4)
    if clip:
        boxes = np.clip(boxes, 0, 1)
    return _prior_output(boxes, variance)


def clustered_prior_boxes(
    layer_size: Sequence[int],
    image_size: Sequence[int],
    *,
    widths: Sequence[float],
    heights: Sequence[float],
    clip: bool = True,
    step_w: float = 0.0,
    step_h: float = 0.0,
    offset: float = 0.5,
    variance: Sequence[float] = (),
) -> np.ndarray:
    """Prior boxes of given widths and heights at every cell centre: ``(2, 4 * H * W * priors)``.

    Centres are ``(cell + offset) * step`` per axis, the step defaulting (when
    both are 0) to the image size over the feature map size; boxes are
    normalized by the image size and, with ``clip``, clipped to ``[0, 1]``.
    """
    height, width = (int(v) for v in layer_size)
    image_h, image_w = (int(v) for v in image_size)
    if len(widths) != len(heights):
        raise ExecutionError(
            f"clustered prior boxes need as many widths as heights, got {len(widths)} and {len(heights)}"
        )
    f32 = np.float32
    if step_w == 0 and step_h == 0:
        step_w, step_h = image_w / width, image_h / height
    cx = ((np.arange(width, dtype=f32) + f32(offset)) * f32(step_w))[None, :, None]
    cy = ((np.arange(height, dtype=f32) + f32(offset)) * f32(step_h))[:, None, None]
    half_w, half_h = np.array(widths, f32) / f32(2), np.array(heights, f32) / f32(2)
    boxes = np.stack(
        np.broadcast_arrays(
            (cx - half_w) / f32(image_w),
            (cy - half_h) / f32(image_h),
            (cx + half_w) / f32(image_w),
            (cy + half_h) / f32(image_h),
        ),
        axis=-1,
    )
    if clip:
        boxes = np.clip(boxes, 0, 1)
    return _prior_output(boxes, variance)
