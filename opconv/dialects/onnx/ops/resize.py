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

_LEGACY_MODES = {"nearest": "nearest", "linear": "linear", "bilinear": "linear"}


def _legacy_resize(x, scales, mode: str):
    """Upsample / Resize-10 (see the module docstring)."""
    scales = [float(s) for s in np.asarray(scales, dtype=np.float32).reshape(-1)]
    if len(scales) != x.ndim:
        raise ExecutionError(f"scales has {len(scales)} values for an input of rank {x.ndim}")
    if mode not in _LEGACY_MODES:
        raise ExecutionError(f"unknown mode {mode!r}; expected one of {sorted(_LEGACY_MODES)}")
    shape, full_scales = R.resize_output_shape(x.shape, scales=scales)
    return R.resize(x, shape, _LEGACY_MODES[mode], "asymmetric", full_scales,
                    nearest_mode=["ceil" if s < 1 else "floor" for s in scales])


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


def _resize(x, roi, scales, sizes, *, axes, coordinate_transformation_mode, cubic_coeff_a, exclude_outside,
            extrapolation_value, mode, nearest_mode, antialias=0, keep_aspect_ratio_policy="stretch"):
    rank = x.ndim
    axes = list(range(rank)) if axes is None else [int(a) % rank for a in axes]
    scales, sizes, roi = _given(scales), _given(sizes), _given(roi)
    for name, t in (("scales", scales), ("sizes", sizes)):
        if t is not None and t.size != len(axes):
            raise ExecutionError(f"{name} has {t.size} values, expected {len(axes)}")
    shape, full_scales = R.resize_output_shape(
        x.shape, None if scales is None else scales.astype(np.float32).tolist(),
        None if sizes is None else sizes.astype(np.int64).tolist(), axes, keep_aspect_ratio_policy)
    full_roi = None
    if roi is not None and coordinate_transformation_mode == "tf_crop_and_resize":
        values = roi.astype(np.float64).reshape(-1)
        if values.size != 2 * len(axes):
            raise ExecutionError(f"roi has {values.size} values, expected {2 * len(axes)}")
        full_roi = [(0.0, 1.0)] * rank
        for i, axis in enumerate(axes):
            full_roi[axis] = (values[i], values[i + len(axes)])
    # The ONNX specification's coordinate transforms divide by the unrounded length input size * scale when
    # the output size comes from scales (onnxruntime uses the rounded output size instead).
    length_resized = None if scales is None else [float(np.float32(n) * s) for n, s in zip(x.shape, full_scales)]
    return R.resize(x, shape, mode, coordinate_transformation_mode, full_scales, nearest_mode, cubic_coeff_a,
                    bool(exclude_outside), full_roi, extrapolation_value, bool(antialias), length_resized)


@onnx_op("Resize", since=[11, 13])
def resize_11(ctx, x, roi=None, scales=None, sizes=None, *, coordinate_transformation_mode, cubic_coeff_a,
              exclude_outside, extrapolation_value, mode, nearest_mode):
    return _resize(x, roi, scales, sizes, axes=None, coordinate_transformation_mode=coordinate_transformation_mode,
                   cubic_coeff_a=cubic_coeff_a, exclude_outside=exclude_outside,
                   extrapolation_value=extrapolation_value, mode=mode, nearest_mode=nearest_mode)


@onnx_op("Resize", since=[18, 19])
def resize_18(ctx, x, roi=None, scales=None, sizes=None, *, antialias, axes, coordinate_transformation_mode,
              cubic_coeff_a, exclude_outside, extrapolation_value, keep_aspect_ratio_policy, mode, nearest_mode):
    return _resize(x, roi, scales, sizes, axes=axes, coordinate_transformation_mode=coordinate_transformation_mode,
                   cubic_coeff_a=cubic_coeff_a, exclude_outside=exclude_outside,
                   extrapolation_value=extrapolation_value, mode=mode, nearest_mode=nearest_mode,
                   antialias=antialias, keep_aspect_ratio_policy=keep_aspect_ratio_policy)
