"""Interpolate-1: resize the given axes to a target spatial shape.

The runtime (which executes Interpolate-1 as an Interpolate-4 with
``shape_calculation_mode=sizes``) maps the opset1 attributes as follows,
checked against the CPU plugin:

* coordinates: ``align_corners`` when ``align_corners`` is set, otherwise
  ``asymmetric`` (``x_in = x_out * in / out``), except that ``linear``
  uses ``half_pixel`` unless it resizes exactly axes 2 and 3 of a 4-D input
  (the runtime's conversion keeps its legacy 2-D image behaviour only there);
* ``nearest`` rounds with Interpolate-4's ``simple`` rule: floor when a dim
  grows (or keeps its size), ceil when it shrinks;
* ``cubic`` uses Keys' kernel with ``a = -0.75``;
* ``pads_begin`` / ``pads_end`` (one per input dim) zero-pad the input
  before it is resized;
* ``area`` is the shared kernel's box filter; the CPU plugin refuses it for
  Interpolate-1, so it is not checked against the runtime.

``antialias`` is applied as the specification describes (linear/cubic
downscaling); the CPU plugin ignores it.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import resize as kr
from ..executor import ov_op
from ._common import ints

_MODES = ("nearest", "linear", "cubic", "area")


def _simple_rounding(in_size: int, out_size: int) -> str:
    """Interpolate-4's ``simple`` nearest rounding as a shared-kernel nearest_mode."""
    return "ceil" if out_size < in_size else "floor"


def _unaligned_transform(mode: str, rank: int, axes: list[int]) -> str:
    """The coordinate transformation without ``align_corners`` (see the module docstring)."""
    if mode == "linear" and not (rank == 4 and sorted(axes) == [2, 3]):
        return "half_pixel"
    return "asymmetric"


def _pad(x: np.ndarray, pads_begin, pads_end) -> np.ndarray:
    begin, end = list(pads_begin or []), list(pads_end or [])
    if len(begin) > x.ndim or len(end) > x.ndim:
        raise ExecutionError(f"Interpolate pads {begin} / {end} are longer than the input rank {x.ndim}")
    begin += [0] * (x.ndim - len(begin))
    end += [0] * (x.ndim - len(end))
    if not any(begin) and not any(end):
        return x
    if any(p < 0 for p in begin + end):
        raise ExecutionError(f"Interpolate pads must be non-negative, got {begin} / {end}")
    return np.pad(x, list(zip(begin, end)))


@ov_op("Interpolate")
def interpolate(
    ctx, x, target_spatial_shape, *, axes, mode, align_corners=True, antialias=False, pads_begin=None, pads_end=None
):
    mode = str(mode).lower()
    if mode not in _MODES:
        raise ExecutionError(f"unknown Interpolate mode {mode!r}; expected one of {', '.join(_MODES)}")
    x = _pad(np.asarray(x), pads_begin, pads_end)
    sizes = ints(target_spatial_shape)
    axes = [int(a) % x.ndim for a in (axes or [])]
    if len(sizes) != len(axes):
        raise ExecutionError(f"Interpolate has {len(axes)} axes but {len(sizes)} target sizes")
    output_shape = list(x.shape)
    for axis, size in zip(axes, sizes):
        output_shape[axis] = size
    transform = "align_corners" if align_corners else _unaligned_transform(mode, x.ndim, axes)
    rounding = [_simple_rounding(i, o) for i, o in zip(x.shape, output_shape)]
    return kr.resize(x, output_shape, mode, transform, nearest_mode=rounding, antialias=bool(antialias))
