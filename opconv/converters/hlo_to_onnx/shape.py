"""Data-movement HLO ops -> ONNX: reshapes, broadcasts, slices, padding, gathers and scatters, constants.

HLO result shapes are static and carried by the result types, so targets
(Reshape's shape, Expand's shape, Iota's values) become ONNX constants.
"""

from __future__ import annotations

import numpy as np

from ...ir import Tensor
from ...types import element_type
from ._common import INT64_MIN, Ctx, Refuse, lower, place_dims, shape_of


def _reshape_to_output(c: Ctx, x, *_):
    return c.onnx("Reshape", x, c.i64(c.out_shape()))


lower("Reshape", inputs=1)(_reshape_to_output)
lower("Squeeze", inputs=[1, 2])(_reshape_to_output)
lower("Unsqueeze", inputs=2)(_reshape_to_output)


@lower("Transpose", inputs=1)
def transpose(c: Ctx, x):
    return c.onnx("Transpose", x, perm=[int(p) for p in c.a["permutation"]])


@lower("BroadcastInDim", inputs=1)
def broadcast_in_dim(c: Ctx, x):
    out = c.out_shape()
    dims = [int(d) for d in c.a["broadcast_dimensions"]]
    x, target = place_dims(c, x, dims, len(out))
    if target == out:
        return x if x is not c.node.inputs[0] else c.onnx("Identity", x)
    return c.onnx("Expand", x, c.i64(out))


@lower("Broadcast", inputs=1)
def broadcast(c: Ctx, x):
    return c.onnx("Expand", x, c.i64(c.out_shape()))


@lower("Concatenate", inputs=range(1, 65))
def concatenate(c: Ctx, *xs):
    return c.onnx("Concat", *xs, axis=c.a["dimension"])


@lower("Slice", inputs=1)
def slice_(c: Ctx, x):
    starts, limits = c.a["start_indices"], c.a["limit_indices"]
    strides = c.a.get("strides") or [1] * len(starts)
    return c.onnx("Slice", x, c.i64(starts), c.i64(limits), c.i64(range(len(starts))), c.i64(strides))


@lower("SliceInDim", inputs=1)
def slice_in_dim(c: Ctx, x):
    a = c.a
    return c.onnx(
        "Slice",
        x,
        c.i64([a["start_index"]]),
        c.i64([a["limit_index"]]),
        c.i64([a["dim"]]),
        c.i64([a.get("stride") or 1]),
    )


@lower("Reverse", inputs=1)
def reverse(c: Ctx, x):
    dims = [int(d) for d in c.a["dimensions"]]
    if not dims:
        return c.onnx("Identity", x)
    return c.onnx(
        "Slice", x, c.i64([-1] * len(dims)), c.i64([INT64_MIN] * len(dims)), c.i64(dims), c.i64([-1] * len(dims))
    )


PAD_MODES = {"PAD_VALUE": "constant", "PAD_EDGE": "edge", "PAD_REFLECT": "reflect"}


@lower("Pad", inputs=2)
def pad(c: Ctx, x, value):
    a = c.a
    mode = a.get("mode") or "PAD_VALUE"
    if mode not in PAD_MODES:
        raise Refuse(f"Pad mode {mode} has no ONNX form")
    if any(int(i) for i in a.get("interior_padding") or []):
        raise Refuse("interior padding has no ONNX Pad form")
    low, high = [int(v) for v in a["edge_padding_low"]], [int(v) for v in a["edge_padding_high"]]
    if mode != "PAD_VALUE" and (min(low + high, default=0) < 0):
        raise Refuse("negative padding with a non-constant mode")
    scalar = value if not shape_of(value) else c.onnx("Reshape", value, c.i64([]))
    return c.onnx("Pad", x, c.i64(low + high), scalar if mode == "PAD_VALUE" else None, mode=PAD_MODES[mode])


@lower("Iota", inputs=0)
def iota(c: Ctx):
    t = c.out_type()
    dim = int(c.a["iota_dimension"])
    shape = c.out_shape()
    values = np.arange(shape[dim]).reshape([-1 if i == dim else 1 for i in range(len(shape))])
    data = np.broadcast_to(values, shape).astype(element_type(t.dtype).numpy)
    return c.onnx("Constant", value=Tensor.from_array(np.ascontiguousarray(data)))


@lower("Constant", inputs=0)
def constant(c: Ctx):
    return c.onnx("Constant", value=c.node.attr("value"))


@lower("Tile", inputs=2)
def tile(c: Ctx, x, repeats):
    return c.onnx("Tile", x, c.as_i64(repeats))


@lower("Trilu", inputs=1)
def trilu(c: Ctx, x):
    k = c.b.const(np.asarray(int(c.a["k"]), np.int64), "k")
    return c.onnx("Trilu", x, k, upper=int(bool(c.a["upper"])))


@lower("DepthToSpace", inputs=1)
def depth_to_space(c: Ctx, x):
    if list(c.a["space_dims"]) != [2, 3] or int(c.a["depth_dim"]) != 1:
        raise Refuse("only NCHW DepthToSpace is mapped")
    return c.onnx("DepthToSpace", x, blocksize=c.a["blocksize"], mode=c.a.get("mode") or "DCR")


@lower("SpaceToDepth", inputs=1)
def space_to_depth(c: Ctx, x):
    if list(c.a["space_dims"]) != [2, 3] or int(c.a["depth_dim"]) != 1:
        raise Refuse("only NCHW SpaceToDepth is mapped")
    return c.onnx("SpaceToDepth", x, blocksize=c.a["blocksize"])


@lower("ReverseSequence", inputs=2)
def reverse_sequence(c: Ctx, x, lengths):
    return c.onnx("ReverseSequence", x, c.as_i64(lengths), batch_axis=c.a["batch_axis"], time_axis=c.a["time_axis"])


@lower("Shape", inputs=1)
def shape(c: Ctx, x):
    return c.onnx("Shape", x, start=c.a["start"], end=c.a["end"] if c.a["end"] < 1024 else None)


@lower("Size", inputs=1)
def size(c: Ctx, x):
    return c.onnx("Size", x)


@lower("GeneralSplit", inputs=2, outputs=range(1, 17))
def general_split(c: Ctx, x, split):
    n = len(c.node.outputs)
    outs = c.onnx("Split", x, c.as_i64(split), axis=c.a["axis"], _outputs=n)
    return outs if n > 1 else [outs]


# ---------------------------------------------------------------------------
# Gather / scatter (the XLA general forms ONNX has an op for)
# ---------------------------------------------------------------------------


@lower("Gather", inputs=2)
def gather(c: Ctx, x, indices):
    a = c.a
    xs, qs = shape_of(x), shape_of(indices)
    r, q = len(xs), len(qs)
    ivd = int(a["index_vector_dim"])
    start_map = [int(d) for d in a["start_index_map"]]
    collapsed = [int(d) for d in a["collapsed_slice_dims"]]
    offset = [int(d) for d in a["offset_dims"]]
    sizes = [int(d) for d in a["slice_sizes"]]
    # ONNX Gather(axis): one index per position, the slice is everything but `axis`.
    if ivd == q and len(start_map) == 1 and collapsed == start_map:
        axis = start_map[0]
        full = [1 if d == axis else xs[d] for d in range(r)]
        if sizes == full and offset == list(range(axis)) + list(range(axis + q, r - 1 + q)):
            return c.onnx("Gather", x, indices, axis=axis)
    # ONNX GatherND: index vectors in the last dim address the leading k dims; the rest are slices.
    if ivd == q - 1:
        k = qs[-1]
        if (
            start_map == list(range(k))
            and collapsed == list(range(k))
            and sizes == [1] * k + list(xs[k:])
            and offset == list(range(q - 1, q - 1 + r - k))
        ):
            return c.onnx("GatherND", x, c.as_i64(indices))
    raise Refuse("this general gather has no ONNX Gather / GatherND form")


SCATTER_REDUCTIONS = {"UPDATE": "none", "ADD": "add", "MUL": "mul", "MIN": "min", "MAX": "max"}


@lower("ScatterND", inputs=3)
def scatter(c: Ctx, x, indices, updates):
    a = c.a
    xs, qs = shape_of(x), shape_of(indices)
    r, q = len(xs), len(qs)
    if int(a["index_vector_dim"]) != q - 1:
        raise Refuse("the index vectors are not in the last dim")
    k = qs[-1]
    ok = (
        [int(d) for d in a["inserted_window_dims"]] == list(range(k))
        and [int(d) for d in a["scatter_dims_to_operand_dims"]] == list(range(k))
        and [int(d) for d in a["update_window_dims"]] == list(range(q - 1, q - 1 + r - k))
    )
    if not ok:
        raise Refuse("this general scatter has no ONNX ScatterND form")
    reduction = SCATTER_REDUCTIONS.get(a["computation"])
    if reduction is None or reduction in ("min", "max") and c.opset < 18 or reduction != "none" and c.opset < 16:
        raise Refuse(f"combiner {a['computation']} has no ScatterND form at opset {c.opset}")
    return c.onnx("ScatterND", x, c.as_i64(indices), updates, reduction=reduction if reduction != "none" else None)


@lower("Resize", inputs=range(1, 5))
def resize(c: Ctx, x, roi=None, scales=None, sizes=None):
    a = c.a
    lowered = {
        k: (a[k].lower() if isinstance(a.get(k), str) else a.get(k))
        for k in ("mode", "coordinate_transformation_mode", "nearest_mode")
    }
    return c.onnx(
        "Resize",
        x,
        roi,
        scales,
        sizes,
        mode=lowered["mode"],
        coordinate_transformation_mode=lowered["coordinate_transformation_mode"],
        nearest_mode=lowered["nearest_mode"],
        exclude_outside=int(bool(a["exclude_outside"])),
        extrapolation_value=a["extrapolation_value"],
        cubic_coeff_a=a["cubic_coeff_a"],
    )


@lower("RoiAlign", inputs=3)
def roi_align(c: Ctx, x, rois, batch):
    a = c.a
    strip = lambda s: s.replace("ROIALIGN_", "").lower()  # noqa: E731
    coord = strip(a["coordinate_transformation_mode"])
    return c.onnx(
        "RoiAlign",
        x,
        rois,
        batch,
        mode=strip(a["mode"]),
        coordinate_transformation_mode=coord if c.opset >= 16 else None,
        output_height=a["output_height"],
        output_width=a["output_width"],
        sampling_ratio=a["sampling_ratio"],
        spatial_scale=a["spatial_scale"],
    )


@lower("NonZero", inputs=1)
def non_zero(c: Ctx, x):
    return c.onnx("Transpose", c.onnx("NonZero", x), perm=[1, 0])


@lower("DynamicReshape", inputs=2)
def dynamic_reshape(c: Ctx, x, target):
    return c.onnx("Reshape", x, c.as_i64(target), allowzero=int(c.a.get("allowzero") or 0))


@lower("DynamicBroadcastInDim", inputs=2)
def dynamic_broadcast_in_dim(c: Ctx, x, target):
    dims = [int(d) for d in c.a["broadcast_dimensions"]]
    rank = len(c.out_shape())
    if dims != list(range(rank - len(dims), rank)):
        raise Refuse("only trailing broadcast_dimensions (numpy broadcasting) are mapped")
    return c.onnx("Expand", x, c.as_i64(target))


@lower("DynamicSlice", inputs=2)
def dynamic_slice(c: Ctx, x, starts):
    """XLA clamps each start so that the slice fits: clamp, then a Slice of slice_sizes."""
    sizes = [int(s) for s in c.a["slice_sizes"]]
    xs = shape_of(x)
    lo = c.onnx("Max", c.as_i64(starts), c.i64([0] * len(xs)))
    lo = c.onnx("Min", lo, c.i64([d - s for d, s in zip(xs, sizes)]))
    return c.onnx("Slice", x, lo, c.onnx("Add", lo, c.i64(sizes)), c.i64(range(len(xs))))


@lower("DynamicUpdateSlice", inputs=3)
def dynamic_update_slice(c: Ctx, x, update, starts):
    """XLA clamps each start so that the update fits (as for DynamicSlice), then a ScatterND writes the update:
    its index tuples address the leading dims up to the last one the update does not cover whole (the rest are
    the scattered slices), so the index constant stays the size of those dims."""
    xs, us = shape_of(x), shape_of(update)
    partial = [d for d in range(len(xs)) if us[d] != xs[d]]
    if not partial:
        return c.onnx("Identity", update)
    k = partial[-1] + 1
    lo = c.onnx("Max", c.as_i64(starts), c.i64([0] * len(xs)))
    lo = c.onnx("Min", lo, c.i64([d - s for d, s in zip(xs, us)]))
    if k < len(xs):
        lo = c.onnx("Slice", lo, c.i64([0]), c.i64([k]))
    grid = np.moveaxis(np.indices(us[:k], dtype=np.int64), 0, -1)  # (*us[:k], k): every position's index tuple
    indices = c.onnx("Add", c.b.const(grid, "positions"), lo)
    return c.onnx("ScatterND", x, indices, update)


@lower("DynamicPad", inputs=[2, 3])
def dynamic_pad(c: Ctx, x, pads, value=None):
    mode = c.a.get("mode") or "PAD_VALUE"
    if mode not in PAD_MODES:
        raise Refuse(f"Pad mode {mode} has no ONNX form")
    if value is not None and shape_of(value):
        value = c.onnx("Reshape", value, c.i64([]))
    return c.onnx("Pad", x, c.as_i64(pads), value if mode == "PAD_VALUE" else None, mode=PAD_MODES[mode])


@lower("DynamicIota", inputs=1)
def dynamic_iota(c: Ctx, target):
    return iota(c)


GRID_PADDING = {"PAD_VALUE": "zeros", "PAD_EDGE": "border", "PAD_REFLECT": "reflection"}


@lower("GridSample", inputs=2)
def grid_sample(c: Ctx, x, grid):
    a = c.a
    if a["padding_mode"] not in GRID_PADDING or c.opset < 16:
        raise Refuse(f"GridSample padding_mode {a['padding_mode']} at opset {c.opset}")
    mode = a["mode"].lower()
    if c.opset < 20:
        mode = {"linear": "bilinear", "cubic": "bicubic"}.get(mode, mode)
    return c.onnx(
        "GridSample",
        x,
        grid,
        mode=mode,
        align_corners=int(bool(a["align_corners"])),
        padding_mode=GRID_PADDING[a["padding_mode"]],
    )


@lower("NMS", inputs=2)
def nms(c: Ctx, boxes, scores):
    a = c.a
    return c.onnx(
        "NonMaxSuppression",
        boxes,
        scores,
        c.i64([a["max_output_boxes_per_class"]]),
        c.b.const(np.asarray([a["iou_threshold"]], np.float32), "iou_threshold"),
        c.b.const(
            np.asarray([a["score_threshold"] if a.get("score_threshold") is not None else -np.inf], np.float32),
            "score_threshold",
        ),
        center_point_box=a["center_point_box"],
    )
