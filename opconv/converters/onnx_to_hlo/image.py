"""Image ops the dialect has in ONNX form: Resize (and Upsample), RoiAlign, MaxRoiPool, GridSample.

Their enum attributes are spelled in upper case in the HLO dialect; the
scales / sizes / roi operands must be constants (static shapes).
"""

from __future__ import annotations

import numpy as np

from ..lowering import lower
from ._common import Refuse, attr, const_input, hlo, out_type, shape_of, text_attr


def _upper_text(node, name: str, default: str) -> str:
    """A STRING attribute upper-cased, as HLO spells its modes."""
    return str(text_attr(node, name, default)).upper()


COORDINATE_MODES = {
    "HALF_PIXEL",
    "ASYMMETRIC",
    "PYTORCH_HALF_PIXEL",
    "TF_HALF_PIXEL_FOR_NN",
    "ALIGN_CORNERS",
    "TF_CROP_AND_RESIZE",
}


def _given(m, name: str):
    """The constant optional input bound as ``name``, ``None`` when omitted or empty."""
    if m[name] is None:
        return None
    data = np.asarray(const_input(m, name, name))
    return None if data.size == 0 else data


def _scales_input(m) -> list[float]:
    return [float(s) for s in np.asarray(const_input(m, "scales", "scales")).reshape(-1)]


def _legacy_scales(b, m, scales):
    """Upsample / Resize-10: asymmetric coordinates, floor when enlarging and ceil when shrinking."""
    node = m.root
    mode = _upper_text(node, "mode", "nearest")
    mode = "LINEAR" if mode in ("LINEAR", "BILINEAR") else mode
    if mode not in ("NEAREST", "LINEAR"):
        raise Refuse(f"mode {mode!r} is not a legacy resize mode")
    changed = [s for s in scales if s != 1.0]
    if changed and not (all(s > 1 for s in changed) or all(s < 1 for s in changed)):
        raise Refuse("scales both enlarge and shrink (per-axis nearest rounding)")
    nearest = "CEIL" if changed and changed[0] < 1 else "FLOOR"
    scales_c = b.const(np.asarray(scales, np.float32), "scales")
    return hlo(
        b,
        "Resize",
        node.inputs[0],
        None,
        scales_c,
        None,
        type=out_type(m),
        mode=mode,
        coordinate_transformation_mode="ASYMMETRIC",
        nearest_mode=nearest,
    )


@lower("onnx", "hlo", "Upsample", since=1, inputs=1)
def _upsample_1(b, m):
    scales = [1.0, 1.0, float(attr(m.root, "height_scale")), float(attr(m.root, "width_scale"))]
    return _legacy_scales(b, m, scales)


@lower("onnx", "hlo", "Upsample", since=7, inputs=1)
def _upsample_7(b, m):
    return _legacy_scales(b, m, [float(s) for s in attr(m.root, "scales")])


@lower("onnx", "hlo", "Upsample", since=9, inputs=2, names=("x", "scales"))
def _upsample_9(b, m):
    return _legacy_scales(b, m, _scales_input(m))


@lower("onnx", "hlo", "Resize", since=10, inputs=2, names=("x", "scales"))
def _resize_10(b, m):
    return _legacy_scales(b, m, _scales_input(m))


@lower("onnx", "hlo", "Resize", since=11, inputs=range(1, 5), names=("x", "roi", "scales", "sizes"))
def _resize_11(b, m):
    node = m.root
    x = node.inputs[0]
    rank = len(shape_of(x))
    if attr(node, "antialias", 0):
        raise Refuse("antialias=1 is not mapped")
    coord = _upper_text(node, "coordinate_transformation_mode", "half_pixel")
    if coord not in COORDINATE_MODES:
        raise Refuse(f"coordinate_transformation_mode {coord.lower()!r} has no HLO form")
    axes = attr(node, "axes")
    axes = list(range(rank)) if axes is None else [int(a) % rank for a in axes]
    roi, scales, sizes = _given(m, "roi"), _given(m, "scales"), _given(m, "sizes")
    if sizes is not None and _upper_text(node, "keep_aspect_ratio_policy", "stretch") != "STRETCH":
        raise Refuse("keep_aspect_ratio_policy other than stretch is not mapped")
    full_scales, full_sizes, full_roi = None, None, None
    if scales is not None:
        full_scales = np.ones(rank, np.float32)
        full_scales[axes] = scales.astype(np.float32).reshape(-1)
        full_scales = b.const(full_scales, "scales")
    elif sizes is not None:
        full_sizes = np.asarray(shape_of(x), np.int64)
        full_sizes[axes] = sizes.astype(np.int64).reshape(-1)
        full_sizes = b.const(full_sizes, "sizes")
    else:
        raise Refuse("neither scales nor sizes is given")
    if coord == "TF_CROP_AND_RESIZE":
        if roi is None:
            raise Refuse("tf_crop_and_resize without roi")
        values = np.zeros(2 * rank, roi.dtype)
        values[rank:] = 1
        values[axes] = roi.reshape(-1)[: len(axes)]
        values[[rank + a for a in axes]] = roi.reshape(-1)[len(axes) :]
        full_roi = b.const(values, "roi")
    return hlo(
        b,
        "Resize",
        x,
        full_roi,
        full_scales,
        full_sizes,
        type=out_type(m),
        mode=_upper_text(node, "mode", "nearest"),
        coordinate_transformation_mode=coord,
        exclude_outside=bool(attr(node, "exclude_outside", 0)),
        nearest_mode=_upper_text(node, "nearest_mode", "round_prefer_floor"),
        extrapolation_value=float(attr(node, "extrapolation_value", 0.0)),
        cubic_coeff_a=float(attr(node, "cubic_coeff_a", -0.75)),
    )


@lower("onnx", "hlo", "RoiAlign", inputs=3)
def _roi_align(b, m):
    node = m.root
    x, rois, batch = node.inputs[:3]
    default_coord = "half_pixel" if (node.version or 16) >= 16 else "output_half_pixel"
    coord = _upper_text(node, "coordinate_transformation_mode", default_coord)
    return hlo(
        b,
        "RoiAlign",
        x,
        rois,
        batch,
        type=out_type(m),
        mode="ROIALIGN_" + _upper_text(node, "mode", "avg"),
        coordinate_transformation_mode="ROIALIGN_" + coord,
        output_height=int(attr(node, "output_height", 1)),
        output_width=int(attr(node, "output_width", 1)),
        sampling_ratio=int(attr(node, "sampling_ratio", 0)),
        spatial_scale=float(attr(node, "spatial_scale", 1.0)),
    )


@lower("onnx", "hlo", "MaxRoiPool", inputs=2)
def _max_roi_pool(b, m):
    node = m.root
    x, rois = node.inputs[:2]
    return hlo(
        b,
        "MaxRoiPool",
        x,
        rois,
        type=out_type(m),
        layout="NCHW",
        pooled_shape=[int(d) for d in attr(node, "pooled_shape")],
        spatial_scale=float(attr(node, "spatial_scale", 1.0)),
    )


GRID_MODES = {"BILINEAR": "LINEAR", "LINEAR": "LINEAR", "NEAREST": "NEAREST"}
GRID_PADDING = {"ZEROS": "PAD_VALUE", "BORDER": "PAD_EDGE", "REFLECTION": "PAD_REFLECT"}


@lower("onnx", "hlo", "GridSample", inputs=2)
def _grid_sample(b, m):
    node = m.root
    x, grid = node.inputs[:2]
    mode = _upper_text(node, "mode", "bilinear" if (node.version or 20) < 20 else "linear")
    padding = _upper_text(node, "padding_mode", "zeros")
    if mode not in GRID_MODES or padding not in GRID_PADDING:
        raise Refuse(f"mode {mode.lower()!r} / padding_mode {padding.lower()!r} has no HLO form")
    return hlo(
        b,
        "GridSample",
        x,
        grid,
        type=out_type(m),
        mode=GRID_MODES[mode],
        align_corners=bool(attr(node, "align_corners", 0)),
        padding_mode=GRID_PADDING[padding],
    )
