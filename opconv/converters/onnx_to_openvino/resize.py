"""ONNX Resize / Upsample -> opset1 Interpolate, or one constant map per resized axis.

ONNX Resize is separable: along one axis, every mode is a fixed map of that
axis, known at conversion time once shapes, scales, sizes and roi are
constants.  ``nearest`` copies one source index per output index; ``linear``
and ``cubic`` (any coordinate transform, ``cubic_coeff_a``,
``exclude_outside``, ``antialias``) are an ``(out, in)`` weight matrix.  The
maps are computed by running the executor's own kernel
(:func:`opconv.kernels.resize.resize`) on a probe -- the indices
``0 .. in-1`` for nearest, the identity matrix otherwise -- so the converter
computes exactly what opconv's ONNX executor computes.

Two lowerings, the first that applies wins:

* ``Interpolate`` (one node), when Interpolate-1 computes the same maps.  It
  has no coordinate-transformation attribute; the runtime picks one per mode
  (see ``opconv/dialects/openvino/ops/resize.py``): ``align_corners`` when
  set, else ``asymmetric`` -- except ``linear``, which is ``half_pixel``
  unless it resizes axes 2 and 3 of a 4-D input (a 5-D view of such an input
  gets half_pixel); ``nearest`` rounds down when a dim grows and up when it
  shrinks; ``cubic`` uses a = -0.75.  Rather than matching attributes, each
  candidate's maps are computed with the same kernel and compared with ONNX's.
  Only spatial axes are left to Interpolate (see :data:`_SPATIAL_FROM`).
* otherwise, per resized axis, a ``Gather`` with constant indices (nearest,
  any element type) or a ``MatMul`` with the constant matrix (float types;
  float16 is computed in float32 as the executor does), on a 2-D/3-D view of
  the input so that no Transpose is needed.  ``tf_crop_and_resize`` outputs
  whose source lies outside the input become ``extrapolation_value`` through a
  ``Select`` with a constant mask.

Refused: runtime scales/sizes/roi, dynamic shapes, linear/cubic on integers
(the executor rounds the result), and matrices over :data:`MAX_MATRIX_BYTES`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...kernels import resize as R
from ...kernels._common import compute_dtype
from ..lowering import lower
from ._common import Refuse, attr, const, constant_value, i64, np_dtype, ov, static_shape, text_attr

#: The largest constant weight matrix (or probe) the MatMul lowering builds for one axis.
MAX_MATRIX_BYTES = 64 << 20

_MODES = ("nearest", "linear", "cubic")


def _given(value) -> np.ndarray | None:
    """An optional constant input: None when omitted or empty (ONNX's way of leaving one out)."""
    data = constant_value(value)
    if value is not None and data is None:
        raise Refuse(f"input {value.name!r} (scales / sizes / roi) must be a constant")
    return None if data is None or data.size == 0 else np.asarray(data)


class _Resize(NamedTuple):  # not a dataclass: defining one costs ~1 ms of every conversion's process
    """One Resize / Upsample decoded as the ONNX executor decodes it: full-rank, per-axis parameters."""

    in_shape: tuple[int, ...]
    out_shape: list[int]
    scales: list[float]
    mode: str
    transform: str = "asymmetric"
    nearest_modes: list[str] | None = None
    lengths: list[float] | None = None  # the unrounded output lengths the transforms divide by
    roi: list[tuple[float, float]] | None = None
    cubic_coeff_a: float = -0.75
    exclude_outside: bool = False
    antialias: bool = False
    extrapolation_value: float = 0.0

    def may_change(self, axis: int) -> bool:
        """Whether ``axis`` can differ from the input (else the kernel leaves it as it is)."""
        kept = self.in_shape[axis] == self.out_shape[axis] and self.scales[axis] == 1
        return not kept or (self.roi is not None and tuple(self.roi[axis]) != (0.0, 1.0))

    def axis_map(self, axis: int, dtype) -> np.ndarray:
        """The kernel's map along ``axis``: source indices (nearest, shape ``(out,)``) or the ``(out, in)`` weight
        matrix, in ``dtype``; NaN marks an output outside the input (tf_crop_and_resize)."""
        n, size = self.in_shape[axis], self.out_shape[axis]
        nearest = self.mode == "nearest"
        # Resize a 2-D probe along its first axis; its second axis (the probe's columns) is left as it is.
        probe = np.arange(n, dtype=dtype)[:, None] if nearest else np.eye(n, dtype=dtype)
        width = probe.shape[1]
        rank = len(self.in_shape)
        mapped = R.resize(
            probe,
            [size, width],
            self.mode,
            self.transform,
            [self.scales[axis], 1.0],
            [(self.nearest_modes or ["round_prefer_floor"] * rank)[axis], "floor"],
            self.cubic_coeff_a,
            self.exclude_outside,
            None if self.roi is None else [self.roi[axis], (0.0, 1.0)],
            np.nan,
            self.antialias,
            None if self.lengths is None else [self.lengths[axis], float(width)],
        )
        return mapped[:, 0] if nearest else mapped


def _decode(node, shape: tuple[int, ...]) -> _Resize:
    """The node as ``opconv/dialects/onnx/ops/resize.py`` decodes it (the shared geometry), on constant inputs."""
    inputs = list(node.inputs) + [None] * 4
    version = node.version or 19
    if node.op == "Upsample" or version < 11:
        mode = text_attr(node, "mode", "nearest")
        if mode not in R.ONNX_LEGACY_MODES:
            raise Refuse(f"mode {mode!r}")
        if node.op == "Upsample" and version < 7:
            scales = [1.0, 1.0, attr(node, "height_scale", 1.0), attr(node, "width_scale", 1.0)]
        elif node.op == "Upsample" and version < 9:
            scales = attr(node, "scales")
        else:
            scales = _given(inputs[1])
        if scales is None or np.size(scales) != len(shape):
            raise Refuse(f"{node.op} needs one constant scale per input dim")
        out, full, nearest_modes = R.onnx_legacy_resize_geometry(shape, scales)
        return _Resize(tuple(shape), out, full, R.ONNX_LEGACY_MODES[mode], nearest_modes=nearest_modes)
    rank = len(shape)
    axes = attr(node, "axes")
    axes = list(range(rank)) if axes is None else [int(a) % rank for a in axes]
    scales, sizes = _given(inputs[2]), _given(inputs[3])
    if (scales is None) == (sizes is None):
        raise Refuse("Resize needs exactly one of constant scales and sizes")
    given = scales if sizes is None else sizes
    if given.size != len(axes):
        raise Refuse(f"Resize has {given.size} scales/sizes for {len(axes)} axes")
    transform = text_attr(node, "coordinate_transformation_mode", "half_pixel")
    roi = None
    if transform == "tf_crop_and_resize":  # roi is ignored by every other transform
        roi = _given(inputs[1])
        if roi is None or roi.size != 2 * len(axes):
            raise Refuse(f"tf_crop_and_resize needs a constant roi of {2 * len(axes)} values")
    out, full, full_roi, lengths = R.onnx_resize_geometry(
        shape, scales, sizes, axes, text_attr(node, "keep_aspect_ratio_policy", "stretch"), roi, transform
    )
    mode = text_attr(node, "mode", "nearest")
    if mode not in _MODES:
        raise Refuse(f"mode {mode!r}")
    return _Resize(
        tuple(shape),
        out,
        full,
        mode,
        transform,
        [text_attr(node, "nearest_mode", "round_prefer_floor")] * rank,
        lengths,
        full_roi,
        float(attr(node, "cubic_coeff_a", -0.75)),
        bool(attr(node, "exclude_outside", 0)),
        bool(attr(node, "antialias", 0)),
        float(attr(node, "extrapolation_value", 0.0)),
    )


# Rank -> the first axis the CPU plugin's Interpolate resizes right: the spatial axes after batch and channel.
# The current plugin miscomputes cubic when batch / channel axes are resized along with others (checked on random
# shapes); older ones (OpenVINO 2023.0) refuse to compile any Interpolate over them, even of a 3-D input ("only
# supports resize on spatial dimensions").
_SPATIAL_FROM = {3: 2, 4: 2, 5: 2}


def _interpolate_semantics(spec: _Resize, align_corners: bool, rank: int, axes: list[int]) -> _Resize:
    """What Interpolate-1 (``axes`` of a rank-``rank`` input) computes, as a resize of ``spec``'s shapes."""
    if align_corners:
        transform = "align_corners"
    elif spec.mode == "linear" and not (rank == 4 and axes == [2, 3]):
        transform = "half_pixel"
    else:
        transform = "asymmetric"
    pairs = list(zip(spec.in_shape, spec.out_shape))
    return _Resize(
        spec.in_shape,
        spec.out_shape,
        [np.float32(o) / np.float32(i) for i, o in pairs],
        spec.mode,
        transform,
        ["ceil" if o < i else "floor" for i, o in pairs],
    )


def _same_maps(ours: np.ndarray, theirs: np.ndarray) -> bool:
    if np.isnan(ours).any():
        return False
    # Nearest maps are indices (exact); weights may differ by float32 rounding of the scale.
    return ours.shape == theirs.shape and bool(np.abs(ours - theirs).max(initial=0.0) <= 1e-6)


def _interpolate(b, x, spec: _Resize, maps: dict[int, np.ndarray], probe_dtype):
    """One Interpolate-1 whose maps equal ONNX's, or None."""
    rank, axes = len(spec.in_shape), sorted(maps)
    if rank not in _SPATIAL_FROM or axes[0] < _SPATIAL_FROM[rank]:
        return None
    sizes = [spec.out_shape[a] for a in axes]
    views = [(None, rank, axes)]
    if spec.mode == "linear" and rank == 4 and axes == [2, 3]:  # the runtime uses half_pixel on a 5-D view
        views.append(([*spec.in_shape[:2], 1, *spec.in_shape[2:]], 5, [3, 4]))
    for view, view_rank, view_axes in views:
        for aligned in (False, True):
            model = _interpolate_semantics(spec, aligned, view_rank, view_axes)
            if not all(_same_maps(maps[a], model.axis_map(a, probe_dtype)) for a in axes):
                continue
            source = x if view is None else ov(b, "Reshape", x, i64(b, view, "view"), special_zero=False)
            y = ov(
                b,
                "Interpolate",
                source,
                i64(b, sizes, "sizes"),
                axes=view_axes,
                mode=spec.mode,
                align_corners=aligned,
                antialias=False,
                pads_begin=[0] * view_rank,
                pads_end=[0] * view_rank,
            )
            return y if view is None else ov(b, "Reshape", y, i64(b, spec.out_shape, "shape"), special_zero=False)
    return None


class _View:
    """The value being resized and its shape; reshaped (free at run time) only when a step needs another view."""

    def __init__(self, b, value, shape):
        self.b, self.value, self.shape = b, value, list(shape)

    def as_shape(self, shape):
        shape = [int(d) for d in shape]
        if shape != self.shape:
            self.value = ov(self.b, "Reshape", self.value, i64(self.b, shape, "shape"), special_zero=False)
            self.shape = shape
        return self.value


def _apply_axis(view: _View, full: list[int], axis: int, matrix: np.ndarray, dtype, gather: bool) -> list[int]:
    """Resize ``axis`` of the tensor of shape ``full``; returns the new shape."""
    b = view.b
    out = [*full[:axis], matrix.shape[0], *full[axis + 1 :]]
    if gather:
        x = view.as_shape(full)
        view.value = ov(b, "Gather", x, i64(b, matrix, "indices"), i64(b, [axis], "axis"))
        view.shape = out
        return out
    outer, inner = math.prod(full[:axis]), math.prod(full[axis + 1 :])
    if inner == 1:  # the axis is innermost: rows @ matrix^T
        x = view.as_shape([outer, full[axis]])
        view.value = ov(b, "MatMul", x, const(b, matrix.T, dtype, "weights"), transpose_a=False, transpose_b=False)
        view.shape = [outer, matrix.shape[0]]
    else:  # matrix @ [outer, in, inner], the matrix broadcast over the outer batch
        x = view.as_shape([full[axis], inner] if outer == 1 else [outer, full[axis], inner])
        view.value = ov(b, "MatMul", const(b, matrix, dtype, "weights"), x, transpose_a=False, transpose_b=False)
        view.shape = [matrix.shape[0], inner] if outer == 1 else [outer, matrix.shape[0], inner]
    return out


def _by_axis(b, x, spec: _Resize, maps: dict[int, np.ndarray], dtype):
    """Gather / MatMul per resized axis, then extrapolation_value where tf_crop_and_resize leaves the input."""
    nearest = spec.mode == "nearest"
    work = dtype if nearest else compute_dtype(dtype)
    view = _View(b, x, spec.in_shape)
    if work != dtype:
        view.value = ov(b, "Convert", x, destination_type=str(work))
    full = list(spec.in_shape)
    outside = np.zeros([1] * len(full), dtype=bool)
    # Shrinking axes first keeps the intermediate tensors small.
    for axis in sorted(maps, key=lambda a: spec.out_shape[a] / spec.in_shape[a]):
        mapped = maps[axis]
        lost = np.isnan(mapped) if nearest else np.isnan(mapped).any(axis=1)
        outside = outside | lost.reshape([-1 if d == axis else 1 for d in range(len(full))])
        mapped = np.nan_to_num(mapped, nan=0.0)
        full = _apply_axis(view, full, axis, mapped.astype(np.int64) if nearest else mapped, work, nearest)
    y = view.as_shape(full)
    if outside.any():
        fill = const(b, np.full([1] * len(full), spec.extrapolation_value), work, "extrapolation_value")
        y = ov(b, "Select", const(b, outside, np.bool_, "outside"), fill, y, auto_broadcast="numpy")
    return y if work == dtype else ov(b, "Convert", y, destination_type=x.dtype)


def _is_identity(mapped: np.ndarray, n: int) -> bool:
    if mapped.shape[0] != n:
        return False
    if mapped.ndim == 1:  # nearest indices
        return bool(np.array_equal(mapped, np.arange(n)))
    return bool(np.all(np.diagonal(mapped) == 1)) and np.count_nonzero(mapped) == n


@lower("onnx", "openvino", ("Resize", "Upsample"), inputs=(1, 2, 3, 4))
def _resize(b, m):
    node = m.root
    x = node.inputs[0]
    shape = static_shape(x)
    dtype = np_dtype(x)
    spec = _decode(node, shape)
    if 0 in shape or 0 in spec.out_shape:
        raise Refuse("an empty input or output")
    floating = np.issubdtype(dtype, np.floating) or dtype.name == "bfloat16"
    if spec.mode != "nearest" and not floating:
        raise Refuse(f"{spec.mode} on {dtype.name} (the result is rounded to integers)")
    probe_dtype = np.float64 if dtype == np.float64 else np.float32
    changing = [axis for axis in range(len(shape)) if spec.may_change(axis)]
    for axis in changing:
        n, size = shape[axis], spec.out_shape[axis]
        if spec.mode != "nearest" and n * max(n, size) * np.dtype(probe_dtype).itemsize > MAX_MATRIX_BYTES:
            raise Refuse(f"axis {axis} ({n} -> {size}) needs a weight matrix over {MAX_MATRIX_BYTES >> 20} MiB")
    maps = {}
    for axis in changing:
        mapped = spec.axis_map(axis, probe_dtype)
        if not _is_identity(mapped, shape[axis]):
            maps[axis] = mapped
    if not maps:
        return ov(b, "Convert", x, destination_type=x.dtype)
    # The CPU plugin cannot load a boolean Interpolate.
    y = None if dtype == np.bool_ else _interpolate(b, x, spec, maps, probe_dtype)
    return y if y is not None else _by_axis(b, x, spec, maps, dtype)
