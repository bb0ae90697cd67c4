"""Resize and Upsample.

Numerics in :mod:`opconv.kernels.resize`.  Versions:

* Upsample-1/7/9/10 and Resize-10 share one meaning: output size
  ``floor(size * scale)``, source coordinate ``x / scale`` (``asymmetric``);
  ``nearest`` takes the floor when a dim grows and the ceiling when it shrinks
  (as onnxruntime does), ``linear``/``bilinear`` clamps at the edges.
* Resize-11/13 add ``roi``, ``sizes`` and the coordinate / nearest / cubic
  attributes (13 only made inputs optional); Resize-18/19 add ``axes``,
  ``keep_aspect_ratio_policy`` and ``antialias`` (19 only added the
  ``half_pixel_symmetric`` mode).
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import resize as R
from ..executor import onnx_op


def _legacy_resize(x, scales, mode: str):
    """Upsample / Resize-10 (see the module docstring)."""
    if np.size(scales) != x.ndim:
        raise ExecutionError(f"scales has {np.size(scales)} values for an input of rank {x.ndim}")
    if mode not in R.ONNX_LEGACY_MODES:
        raise ExecutionError(f"unknown mode {mode!r}; expected one of {sorted(R.ONNX_LEGACY_MODES)}")
    shape, full_scales, nearest_modes = R.onnx_legacy_resize_geometry(x.shape, scales)
    return R.resize(x, shape, R.ONNX_LEGACY_MODES[mode], "asymmetric", full_scales, nearest_mode=nearest_modes)


@onnx_op("Upsample", since=1)
def upsample_1(ctx, x, *, height_scale, mode, width_scale):
    if x.ndim != 4:
        raise ExecutionError(f"Upsample-1 takes a 4-D input, got rank {x.ndim}")
    return _legacy_resize(x, [1.0, 1.0, height_scale, width_scale], mode)


@onnx_op("Upsample", since=7)
def upsample_7(ctx, x, *, mode, scales):
    return _legacy_resize(x, scales, mode)


@onnx_op("Upsample", since=[9, 10])
def upsample_9(ctx, x, scales, *, mode):
    return _legacy_resize(x, scales, mode)


@onnx_op("Resize", since=10)
def resize_10(ctx, x, scales, *, mode):
    return _legacy_resize(x, scales, mode)


def _given(t):
    """An optional tensor input: None when omitted or empty (ONNX's way of leaving one out)."""
    return None if t is None or np.size(t) == 0 else np.asarray(t)


def _resize(
    x,
    roi,
    scales,
    sizes,
    *,
    axes,
    coordinate_transformation_mode,
    cubic_coeff_a,
    exclude_outside,
    extrapolation_value,
    mode,
    nearest_mode,
    antialias=0,
    keep_aspect_ratio_policy="stretch",
):
    rank = x.ndim
    axes = list(range(rank)) if axes is None else [int(a) % rank for a in axes]
    scales, sizes, roi = _given(scales), _given(sizes), _given(roi)
    for name, t in (("scales", scales), ("sizes", sizes)):
        if t is not None and t.size != len(axes):
            raise ExecutionError(f"{name} has {t.size} values, expected {len(axes)}")
    shape, full_scales, full_roi, length_resized = R.onnx_resize_geometry(
        x.shape, scales, sizes, axes, keep_aspect_ratio_policy, roi, coordinate_transformation_mode
    )
    return R.resize(
        x,
        shape,
        mode,
        coordinate_transformation_mode,
        full_scales,
        nearest_mode,
        cubic_coeff_a,
        bool(exclude_outside),
        full_roi,
        extrapolation_value,
        bool(antialias),
        length_resized,
    )


@onnx_op("Resize", since=[11, 13])
def resize_11(
    ctx,
    x,
    roi=None,
    scales=None,
    sizes=None,
    *,
    coordinate_transformation_mode,
    cubic_coeff_a,
    exclude_outside,
    extrapolation_value,
    mode,
    nearest_mode,
):
    return _resize(
        x,
        roi,
        scales,
        sizes,
        axes=None,
        coordinate_transformation_mode=coordinate_transformation_mode,
        cubic_coeff_a=cubic_coeff_a,
        exclude_outside=exclude_outside,
        extrapolation_value=extrapolation_value,
        mode=mode,
        nearest_mode=nearest_mode,
    )


@onnx_op("Resize", since=[18, 19])
def resize_18(
    ctx,
    x,
    roi=None,
    scales=None,
    sizes=None,
    *,
    antialias,
    axes,
    coordinate_transformation_mode,
    cubic_coeff_a,
    exclude_outside,
    extrapolation_value,
    keep_aspect_ratio_policy,
    mode,
    nearest_mode,
):
    return _resize(
        x,
        roi,
        scales,
        sizes,
        axes=axes,
        coordinate_transformation_mode=coordinate_transformation_mode,
        cubic_coeff_a=cubic_coeff_a,
        exclude_outside=exclude_outside,
        extrapolation_value=extrapolation_value,
        mode=mode,
        nearest_mode=nearest_mode,
        antialias=antialias,
        keep_aspect_ratio_policy=keep_aspect_ratio_policy,
    )
