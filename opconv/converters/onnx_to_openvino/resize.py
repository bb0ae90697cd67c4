"""ONNX Resize / Upsample -> opset1 Interpolate, where Interpolate-1 computes the same coordinates.

Interpolate-1 has no coordinate-transformation attribute; the runtime picks
one per mode (see ``opconv/dialects/openvino/ops/resize.py``): ``align_corners``
when set, else ``asymmetric`` -- except ``linear``, which is ``half_pixel``
unless it resizes axes 2 and 3 of a 4-D input.  ``nearest`` rounds down when
a dim grows and up when it shrinks; ``cubic`` uses a = -0.75.  A Resize is
mapped only when its attributes select exactly that behaviour; a half-pixel
linear resize of a 4-D input's spatial axes is run on a 3-D view so that the
runtime picks half_pixel.  Anything else is refused with the reason.
"""

from __future__ import annotations

import numpy as np

from ._common import Refuse, Rule, attr, captures, constant_value, i64, ov, static_shape


def _text(node, name: str, default: str) -> str:
    value = attr(node, name, default)
    return value.decode() if isinstance(value, bytes) else value


def _output_shape(node, shape) -> list[int]:
    """The output shape from constant scales or sizes; scales must give whole sizes (ONNX maps by the scale)."""
    inputs = list(node.inputs) + [None] * 4
    version = node.version or 19
    if node.op == "Upsample" or version < 11:
        scales = attr(node, "scales") if (node.op == "Upsample" and version < 9) else constant_value(inputs[1])
        sizes = None
    else:
        scales, sizes = constant_value(inputs[2]), constant_value(inputs[3])
        if inputs[2] is not None and scales is None or inputs[3] is not None and sizes is None:
            raise Refuse("Resize scales/sizes must be constants")
        scales = None if scales is not None and np.asarray(scales).size == 0 else scales
    axes = attr(node, "axes")
    rank = len(shape)
    axes = list(range(rank)) if axes is None else [int(a) % rank for a in axes]
    out = list(shape)
    if sizes is not None:
        if _text(node, "keep_aspect_ratio_policy", "stretch") != "stretch":
            raise Refuse("keep_aspect_ratio_policy other than stretch")
        for axis, size in zip(axes, np.asarray(sizes).reshape(-1)):
            out[axis] = int(size)
        return out
    if scales is None:
        raise Refuse("Resize needs constant scales or sizes")
    for axis, scale in zip(axes, np.asarray(scales, np.float64).reshape(-1)):
        size = shape[axis] * scale
        if abs(size - round(size)) > 1e-6:
            raise Refuse(f"scale {scale} gives a fractional size on axis {axis} (ONNX maps by the scale)")
        out[axis] = int(round(size))
    return out


def _resize(b, m):
    node = m.root
    x = node.inputs[0]
    shape = static_shape(x)
    out = _output_shape(node, shape)
    if 0 in out:
        raise Refuse("an empty output")
    axes = [i for i, (a, c) in enumerate(zip(shape, out)) if a != c]
    if not axes:
        return ov(b, "Convert", x, destination_type=x.dtype)
    legacy = node.op == "Upsample" or (node.version or 19) < 11
    mode = _text(node, "mode", "nearest")
    transform = "asymmetric" if legacy else _text(node, "coordinate_transformation_mode", "half_pixel")
    if attr(node, "antialias", 0):
        raise Refuse("antialias (the CPU plugin ignores it for Interpolate-1)")
    if attr(node, "exclude_outside", 0):
        raise Refuse("exclude_outside=1")
    if transform == "pytorch_half_pixel" and all(out[a] > 1 for a in axes):
        transform = "half_pixel"
    aligned = transform == "align_corners"
    view = None
    if mode == "nearest":
        rounding = "floor" if legacy else _text(node, "nearest_mode", "round_prefer_floor")
        wanted = ["floor" if out[a] >= shape[a] else "ceil" for a in axes]
        if transform not in ("asymmetric", "align_corners") or any(rounding != w for w in wanted):
            raise Refuse(f"nearest with {transform}/{rounding}: Interpolate-1 rounds asymmetric coordinates down "
                         "when growing and up when shrinking")
    elif mode == "linear":
        four_d_image = len(shape) == 4 and axes == [2, 3]
        if transform == "half_pixel" and four_d_image:
            view = [shape[0] * shape[1], shape[2], shape[3]]  # a 3-D view makes the runtime use half_pixel
        elif not aligned and transform != ("asymmetric" if four_d_image else "half_pixel"):
            raise Refuse(f"linear with coordinate_transformation_mode={transform}")
    elif mode == "cubic":
        if float(attr(node, "cubic_coeff_a", -0.75)) != -0.75 or transform not in ("asymmetric", "align_corners"):
            raise Refuse(f"cubic with {transform} / a={attr(node, 'cubic_coeff_a', -0.75)}")
    else:
        raise Refuse(f"mode {mode!r}")
    if view is not None:
        squeezed = ov(b, "Reshape", x, i64(b, view, "view"), special_zero=False)
        y = ov(b, "Interpolate", squeezed, i64(b, [out[2], out[3]], "sizes"), axes=[1, 2], mode="linear",
               align_corners=False, antialias=False, pads_begin=[0, 0, 0], pads_end=[0, 0, 0])
        return ov(b, "Reshape", y, i64(b, out, "shape"), special_zero=False)
    return ov(b, "Interpolate", x, i64(b, [out[a] for a in axes], "sizes"), axes=axes, mode=mode,
              align_corners=aligned, antialias=False, pads_begin=[0] * len(shape), pads_end=[0] * len(shape))


# Input arrangements: (x), (x, scales), (x, [roi], scales), (x, [roi], "", sizes), all four.
_ARRANGEMENTS = ([True], [True, True], [True, True, True], [True, False, True], [True, False, False, True],
                 [True, True, False, True], [True, True, True, True])


def _pattern(op: str, given: list[bool]):
    names = [f"x{i}" for i, g in enumerate(given) if g]

    def fn(p, *captured):
        values = iter(captured)
        return p.node(op, *[next(values) if g else None for g in given])

    fn = captures(fn, names)
    fn.__name__ = op
    return fn


RULES = [Rule(f"{op}-{''.join('1' if g else '0' for g in given)}-to-Interpolate", _pattern(op, given), _resize)
         for op in ("Resize", "Upsample") for given in _ARRANGEMENTS]
