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

import math
from typing import Sequence

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
    dim_strides = [math.prod(spatial[d + 1:]) for d in range(len(spatial))]
    out = np.zeros((b, c, indices[0].shape[1]), dtype=x.dtype)
    for taps in np.ndindex(*(i.shape[2] for i in indices)):
        flat = sum(idx[..., t] * s for idx, t, s in zip(indices, taps, dim_strides))
        w = math.prod(wt[..., t] for wt, t in zip(weights, taps))
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


def grid_sample(x: np.ndarray, grid: np.ndarray, mode: str = "linear", padding_mode: str = "zeros",
                align_corners: bool = False) -> np.ndarray:
    """Sample ``x`` ``(N, C, *S)`` at ``grid`` ``(N, *out, n)`` (see the module docstring)."""
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
        if padding_mode == "border":
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


def roi_align(x: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, output_height: int = 1,
              output_width: int = 1, sampling_ratio: int = 0, spatial_scale: float = 1.0, mode: str = "avg",
              half_pixel: bool = True) -> np.ndarray:
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


def max_roi_pool(x: np.ndarray, rois: np.ndarray, pooled_shape: Sequence[int],
                 spatial_scale: float = 1.0) -> np.ndarray:
    """ONNX ``MaxRoiPool``: ``(num_rois, C, ph, pw)`` maxima over each roi's bins (empty bins give 0)."""
    x, rois = np.asarray(x), np.asarray(rois)
    ph, pw = (int(v) for v in pooled_shape)
    _, c, height, width = x.shape
    out = np.zeros((rois.shape[0], c, ph, pw), dtype=x.dtype)
    for r, roi in enumerate(rois.astype(np.float64)):
        image = int(roi[0])
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
        empty = ~(rows.any(axis=1)[:, None] & cols.any(axis=1)[None, :])
        out[r] = np.where(empty, 0, bin_max)
    return out
