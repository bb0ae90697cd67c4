"""Resize / interpolation, N-d and separable.

Conventions
-----------
:func:`resize` takes the *full* output shape and, optionally, one scale per
dim (``None`` means ``output / input``); the scale is what the coordinate
transformation divides by, so a caller whose scales do not equal
``output / input`` (ONNX ``scales`` input, keep_aspect_ratio_policy) passes
them explicitly.  :func:`resize_output_shape` computes both from ONNX-style
``scales`` / ``sizes`` / ``axes`` / ``keep_aspect_ratio_policy``.

Each resized dim is handled on its own (the interpolation is separable):
``x_in = transform(x_out)`` maps every output coordinate to a source
coordinate (:data:`COORDINATE_TRANSFORMS`), then

* ``nearest`` rounds it (:data:`NEAREST_ROUNDING`) and clamps it into range;
* ``linear`` clamps it into ``[0, size - 1]`` and blends the two neighbours;
* ``cubic`` blends the four neighbours ``floor(x) - 1 .. floor(x) + 2`` with
  Keys' kernel of parameter ``cubic_coeff_a``; neighbours beyond the edge
  repeat the edge value, or with ``exclude_outside`` get weight 0 and the
  rest are renormalized;
* ``area`` averages the input cells overlapped by the output cell
  ``[x / scale, (x + 1) / scale)``, weighting each by the overlap (a box
  filter; OpenVINO ``Interpolate`` ``area``);
* ``antialias`` (linear/cubic, downscaling only) stretches the kernel by
  ``1 / scale`` and renormalizes the weights to sum to 1 (edges repeat, as
  without antialias).

With ``tf_crop_and_resize`` the source coordinates are taken inside ``roi``
(one ``(start, end)`` pair per dim, normalized to ``[0, 1]``) and an output
element whose source coordinate falls outside the input in *any* dim is
``extrapolation_value``.

A dim whose size and scale are both unchanged is copied as it is (as
onnxruntime does), except under ``tf_crop_and_resize`` where the roi applies.

Pads (OpenVINO ``Interpolate``'s ``pads_begin``/``pads_end``) are not part of
this kernel: pad the input first, then resize the padded tensor.

Linear, cubic and area build a dense ``(out, in)`` weight matrix per dim and
apply it with ``tensordot``; nearest gathers with ``take``.  Integer inputs
are interpolated in float64, rounded half to even and clipped to the type.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from .. import budget
from ..errors import ExecutionError
from ._common import compute_dtype, is_int_dtype

# ---------------------------------------------------------------- coordinates
#
# Every transform takes (x_out, in_size, out_size, scale, roi, length): ``out_size`` is the integer output
# length, ``length`` the output length the formulas divide by ("length_resized"), which is ``out_size``
# unless the caller passes the unrounded ``in_size * scale`` (see :func:`resize`).


def _half_pixel(x, in_size, out_size, scale, roi, length):
    return (x + 0.5) / scale - 0.5


def _half_pixel_symmetric(x, in_size, out_size, scale, roi, length):
    # Like half_pixel, but centred so that rounding of the output size is
    # spread evenly over both edges.
    adjustment = out_size / (scale * in_size)
    offset = in_size / 2 * (1 - adjustment)
    return offset + (x + 0.5) / scale - 0.5


def _pytorch_half_pixel(x, in_size, out_size, scale, roi, length):
    return (x + 0.5) / scale - 0.5 if length > 1 else np.zeros_like(x)


def _align_corners(x, in_size, out_size, scale, roi, length):
    return x * (in_size - 1) / (length - 1) if length > 1 else np.zeros_like(x)


def _asymmetric(x, in_size, out_size, scale, roi, length):
    return x / scale


def _tf_half_pixel_for_nn(x, in_size, out_size, scale, roi, length):
    return (x + 0.5) / scale


def _tf_crop_and_resize(x, in_size, out_size, scale, roi, length):
    start, end = roi
    if length <= 1:
        return np.full_like(x, 0.5 * (start + end) * (in_size - 1))
    return start * (in_size - 1) + x * (end - start) * (in_size - 1) / (length - 1)


#: coordinate_transformation_mode -> f(x_out, in_size, out_size, scale, roi, length_resized) -> x_in
COORDINATE_TRANSFORMS: dict[str, Callable] = {
    "half_pixel": _half_pixel,
    "half_pixel_symmetric": _half_pixel_symmetric,
    "pytorch_half_pixel": _pytorch_half_pixel,
    "align_corners": _align_corners,
    "asymmetric": _asymmetric,
    "tf_half_pixel_for_nn": _tf_half_pixel_for_nn,
    "tf_crop_and_resize": _tf_crop_and_resize,
}

#: nearest_mode -> rounding of a source coordinate to an input index
NEAREST_ROUNDING: dict[str, Callable] = {
    "round_prefer_floor": lambda x: np.ceil(x - 0.5),
    "round_prefer_ceil": lambda x: np.floor(x + 0.5),
    "floor": np.floor,
    "ceil": np.ceil,
}


def _lookup(table: dict, key: str, what: str):
    try:
        return table[key]
    except KeyError:
        raise ExecutionError(f"unknown {what} {key!r}; expected one of {sorted(table)}") from None


def source_coordinates(
    in_size: int,
    out_size: int,
    scale: float,
    mode: str = "half_pixel",
    roi: tuple[float, float] = (0.0, 1.0),
    length_resized: float | None = None,
) -> np.ndarray:
    """Source coordinate of every output index along one dim.

    ``length_resized`` is the output length the transforms divide by (``align_corners``,
    ``tf_crop_and_resize``, and ``pytorch_half_pixel``'s test for a length-1 output); default ``out_size``.

    Computed in float32, the precision of ONNX/OpenVINO scales and of the
    runtimes: coordinates that land exactly on a rounding tie (``x.5`` for
    nearest) then round the same way they do.  Returned as float64.
    """
    transform = _lookup(COORDINATE_TRANSFORMS, mode, "coordinate_transformation_mode")
    f32 = np.float32
    x = np.arange(out_size, dtype=f32)
    length = f32(out_size if length_resized is None else length_resized)
    coords = transform(x, f32(in_size), f32(out_size), f32(scale), (f32(roi[0]), f32(roi[1])), length)
    return np.asarray(coords, dtype=f32).astype(np.float64)


# ---------------------------------------------------------------- kernels


def _linear_kernel(t, a):
    return np.maximum(0.0, 1.0 - np.abs(t))


def _cubic_kernel(t, a):
    """Keys' cubic convolution kernel with parameter ``a``."""
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


# mode -> (kernel, support radius in input cells at scale 1)
_FILTERS = {"linear": (_linear_kernel, 1), "cubic": (_cubic_kernel, 2)}


def _filter_matrix(x, in_size, mode, cubic_coeff_a, exclude_outside, antialias, scale):
    kernel, support = _FILTERS[mode]
    stretch = min(scale, 1.0) if antialias else 1.0  # antialias widens the kernel when shrinking
    radius = support / stretch
    if mode == "linear" and not antialias:
        x = np.clip(x, 0, in_size - 1)
    reach = math.ceil(radius)
    taps = np.floor(x)[:, None] + np.arange(1 - reach, reach + 1)[None, :]
    weights = kernel((x[:, None] - taps) * stretch, cubic_coeff_a)
    if exclude_outside:
        weights = np.where((taps < 0) | (taps > in_size - 1), 0.0, weights)
    if antialias or exclude_outside:
        # A stretched kernel sums to ~1/scale and excluded taps remove weight.
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    matrix = np.zeros((x.size, in_size))
    rows = np.broadcast_to(np.arange(x.size)[:, None], taps.shape)
    # Taps beyond the edge repeat the edge value (their weight is 0 if excluded).
    np.add.at(matrix, (rows, np.clip(taps, 0, in_size - 1).astype(np.int64)), weights)
    return matrix


def _area_matrix(in_size, out_size, scale):
    starts = np.arange(out_size) / scale
    ends = np.minimum((np.arange(out_size) + 1) / scale, in_size)
    cells = np.arange(in_size)
    overlap = np.clip(np.minimum(ends[:, None], cells + 1) - np.maximum(starts[:, None], cells), 0, None)
    total = overlap.sum(axis=1, keepdims=True)
    return overlap / np.where(total == 0, 1.0, total)


def interpolation_matrix(
    in_size: int,
    out_size: int,
    scale: float | None = None,
    mode: str = "linear",
    coordinate_transformation_mode: str = "half_pixel",
    cubic_coeff_a: float = -0.75,
    exclude_outside: bool = False,
    antialias: bool = False,
    roi: tuple[float, float] = (0.0, 1.0),
    length_resized: float | None = None,
) -> np.ndarray:
    """The ``(out_size, in_size)`` float64 matrix that resizes one dim (linear/cubic/area)."""
    scale = np.float32(out_size) / np.float32(in_size) if scale is None else scale
    if mode == "area":
        return _area_matrix(in_size, out_size, float(scale))
    if mode not in _FILTERS:
        raise ExecutionError(f"unknown interpolation mode {mode!r}")
    x = source_coordinates(in_size, out_size, scale, coordinate_transformation_mode, roi, length_resized)
    antialias = antialias and scale < 1
    return _filter_matrix(x, in_size, mode, cubic_coeff_a, exclude_outside, antialias, float(scale))


def nearest_indices(
    in_size: int,
    out_size: int,
    scale: float | None = None,
    coordinate_transformation_mode: str = "half_pixel",
    nearest_mode: str = "round_prefer_floor",
    roi: tuple[float, float] = (0.0, 1.0),
    length_resized: float | None = None,
) -> np.ndarray:
    """Input index (int64) each output index copies along one dim."""
    scale = np.float32(out_size) / np.float32(in_size) if scale is None else scale
    x = source_coordinates(in_size, out_size, scale, coordinate_transformation_mode, roi, length_resized)
    rounded = _lookup(NEAREST_ROUNDING, nearest_mode, "nearest_mode")(x)
    return np.clip(rounded, 0, in_size - 1).astype(np.int64)


# ---------------------------------------------------------------- resize


def resize(
    x: np.ndarray,
    output_shape: Sequence[int],
    mode: str = "nearest",
    coordinate_transformation_mode: str = "half_pixel",
    scales: Sequence[float] | None = None,
    nearest_mode: str | Sequence[str] = "round_prefer_floor",
    cubic_coeff_a: float = -0.75,
    exclude_outside: bool = False,
    roi: Sequence[tuple[float, float]] | None = None,
    extrapolation_value: float = 0.0,
    antialias: bool = False,
    length_resized: Sequence[float] | None = None,
) -> np.ndarray:
    """Resize every dim of ``x`` to ``output_shape`` (see the module docstring).

    ``nearest_mode`` is one mode, or one per dim (ONNX ``Upsample`` and
    ``Resize-10`` floor when enlarging a dim but ceil when shrinking it).

    ``length_resized`` (one per dim) is the output length the coordinate
    transforms divide by.  By default it is the integer output size, as
    onnxruntime computes; the ONNX specification uses the unrounded
    ``input size * scale`` when the sizes come from scales (it differs from
    the output size only when that product is not an integer).
    """
    x = np.asarray(x)
    output_shape = [int(d) for d in output_shape]
    if len(output_shape) != x.ndim:
        raise ExecutionError(f"output shape {output_shape} does not match input rank {x.ndim}")
    budget.check(output_shape, x.dtype.itemsize, "Resize's output")
    nearest_modes = [nearest_mode] * x.ndim if isinstance(nearest_mode, str) else list(nearest_mode)
    if scales is None:
        scales = [np.float32(o) / np.float32(i) if i else 1.0 for o, i in zip(output_shape, x.shape)]
    roi = [(0.0, 1.0)] * x.ndim if roi is None else [(float(a), float(b)) for a, b in roi]
    crop = coordinate_transformation_mode == "tf_crop_and_resize"
    exact = mode == "nearest"

    y = x if exact else x.astype(np.float64 if is_int_dtype(x.dtype) else compute_dtype(x.dtype))
    outside = np.zeros((1,) * x.ndim, dtype=bool)
    lengths = list(output_shape) if length_resized is None else [float(n) for n in length_resized]
    for axis, (in_size, out_size) in enumerate(zip(x.shape, output_shape)):
        args = (in_size, out_size, scales[axis])
        coords = source_coordinates(*args, coordinate_transformation_mode, roi[axis], lengths[axis])
        if _is_identity(mode, coordinate_transformation_mode, coords, *args):
            continue
        if crop:
            axis_outside = (coords < 0) | (coords > in_size - 1)
            outside = outside | axis_outside.reshape([-1 if d == axis else 1 for d in range(x.ndim)])
        if exact:
            y = np.take(
                y,
                nearest_indices(*args, coordinate_transformation_mode, nearest_modes[axis], roi[axis], lengths[axis]),
                axis=axis,
            )
        else:
            matrix = interpolation_matrix(
                *args,
                mode,
                coordinate_transformation_mode,
                cubic_coeff_a,
                exclude_outside,
                antialias,
                roi[axis],
                lengths[axis],
            )
            y = np.moveaxis(np.tensordot(y, matrix.astype(y.dtype), axes=([axis], [1])), -1, axis)
    if crop and outside.any():
        y = np.where(outside, np.asarray(extrapolation_value).astype(y.dtype), y)
    return _to_input_type(y, x.dtype)


def _is_identity(mode, transform, coords, in_size, out_size, scale) -> bool:
    """Whether this dim is left as it is.

    A dim whose size and scale do not change is not resized, as in
    onnxruntime, even under a transform that would shift it
    (``tf_half_pixel_for_nn``); only ``tf_crop_and_resize`` still crops it.
    Otherwise a dim is skipped when every output lands exactly on its own
    input index, where every kernel reproduces the input.
    """
    if in_size != out_size:
        return False
    if scale == 1 and transform != "tf_crop_and_resize":
        return True
    return mode != "area" and bool(np.array_equal(coords, np.arange(in_size)))


def _to_input_type(y, dtype):
    if is_int_dtype(dtype) and y.dtype != dtype:
        info = np.iinfo(dtype)
        y = np.clip(np.round(y), info.min, info.max)
    return y.astype(dtype, copy=False)


_ASPECT_POLICIES = {"not_larger": min, "not_smaller": max}


def resize_output_shape(
    input_shape: Sequence[int],
    scales: Sequence[float] | None = None,
    sizes: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    keep_aspect_ratio_policy: str = "stretch",
) -> tuple[list[int], list[float]]:
    """ONNX ``Resize`` output shape and per-dim scales, both full rank.

    Exactly one of ``scales`` / ``sizes`` is given, one value per entry of
    ``axes`` (default: every dim).  From scales, a dim's size is
    ``floor(size * scale)`` with the product rounded to float32 first, as
    onnxruntime computes it (``roi`` does not enter).  From sizes with
    ``keep_aspect_ratio_policy`` ``not_larger`` / ``not_smaller``, the
    smallest / largest ratio becomes the common scale and sizes are
    ``round(size * scale)`` (half up).
    """
    rank = len(input_shape)
    axes = list(range(rank)) if axes is None else [int(a) % rank for a in axes]
    out = [int(d) for d in input_shape]
    full_scales = [np.float32(1.0)] * rank
    if (scales is None) == (sizes is None):
        raise ExecutionError("resize needs exactly one of scales and sizes")
    if scales is not None:
        for axis, scale in zip(axes, scales):
            full_scales[axis] = np.float32(scale)
            out[axis] = int(np.floor(np.float32(input_shape[axis]) * np.float32(scale)))
        return out, full_scales
    assert sizes is not None  # exactly one of scales and sizes (checked above)
    ratios = [np.float32(size) / np.float32(input_shape[a]) for a, size in zip(axes, sizes)]
    if keep_aspect_ratio_policy == "stretch":
        for axis, size, ratio in zip(axes, sizes, ratios):
            out[axis], full_scales[axis] = int(size), ratio
        return out, full_scales
    common = _lookup(_ASPECT_POLICIES, keep_aspect_ratio_policy, "keep_aspect_ratio_policy")(ratios)
    for axis in axes:
        full_scales[axis] = common
        out[axis] = int(np.floor(np.float32(input_shape[axis]) * common + np.float32(0.5)))
    return out, full_scales


def onnx_resize_geometry(
    input_shape: Sequence[int],
    scales=None,
    sizes=None,
    axes: Sequence[int] | None = None,
    keep_aspect_ratio_policy: str = "stretch",
    roi=None,
    transform: str = "half_pixel",
) -> tuple[list[int], list[float], list[tuple[float, float]] | None, list[float] | None]:
    """What ONNX Resize-11..19 derives from its inputs before resampling, full rank:
    ``(output shape, scales, roi, lengths)``.

    ``roi`` (``2 * len(axes)`` values, starts then ends) counts only for ``tf_crop_and_resize``
    (else None).  ``lengths``: the unrounded ``size * scale`` the coordinate transforms divide by
    when the output size comes from scales, as the specification reads (onnxruntime uses the
    rounded output size); None from sizes.
    """
    rank = len(input_shape)
    axes = list(range(rank)) if axes is None else [int(a) % rank for a in axes]
    shape, full_scales = resize_output_shape(
        input_shape,
        None if scales is None else np.asarray(scales, np.float32).reshape(-1).tolist(),
        None if sizes is None else np.asarray(sizes, np.int64).reshape(-1).tolist(),
        axes,
        keep_aspect_ratio_policy,
    )
    full_roi = None
    if roi is not None and transform == "tf_crop_and_resize":
        values = np.asarray(roi, np.float64).reshape(-1)
        if values.size != 2 * len(axes):
            raise ExecutionError(f"roi has {values.size} values, expected {2 * len(axes)}")
        full_roi = [(0.0, 1.0)] * rank
        for i, axis in enumerate(axes):
            full_roi[axis] = (values[i], values[i + len(axes)])
    lengths = None if scales is None else [float(np.float32(n) * s) for n, s in zip(input_shape, full_scales)]
    return shape, full_scales, full_roi, lengths


#: Upsample / Resize-10 mode names -> the resize mode they select
ONNX_LEGACY_MODES = {"nearest": "nearest", "linear": "linear", "bilinear": "linear"}


def onnx_legacy_resize_geometry(input_shape: Sequence[int], scales) -> tuple[list[int], list[float], list[str]]:
    """Upsample-1..10 and Resize-10: ``(output shape, scales, nearest mode per dim)``: sizes
    ``floor(size * scale)``, and ``nearest`` takes the floor when a dim grows, the ceiling when it
    shrinks (as onnxruntime does)."""
    scales = [float(s) for s in np.asarray(scales, dtype=np.float32).reshape(-1)]
    shape, full_scales = resize_output_shape(input_shape, scales=scales)
    return shape, full_scales, ["ceil" if s < 1 else "floor" for s in scales]
