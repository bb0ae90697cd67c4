"""Adapters of shape and data-movement operators, most of them attribute <-> input moves.

An upgrade turns the attribute into a constant input; a downgrade needs that
input to be a constant (an initializer or a Constant node) and refuses otherwise,
since an attribute cannot hold a value computed at run time.
"""

from __future__ import annotations

import numpy as np

from ... import budget
from ...dialects.onnx.proto import messages as pb
from ...ir import Attr
from ...types import TensorType, element_type
from ..rewrite import Refuse
from .registry import downgrade, needs_types, text, upgrade

needs_types(("Pad", "Tile", "Upsample"))


def ints_to_input(ctx, node, name: str, *, required: bool = False):
    """Pop attribute ``name`` and return it as an int64 constant (None when absent)."""
    value = ctx.pop_attr(node, name)
    if value is None:
        if required:
            raise Refuse(f"attribute {name!r} is missing")
        return None
    return ctx.const(np.array(value, dtype=np.int64), name)


def input_to_ints(ctx, node, index: int, name: str) -> None:
    """Make input ``index`` attribute ``name`` (a list of ints); refuses a run-time value."""
    v = node.inputs[index] if len(node.inputs) > index else None
    if v is not None:
        data = ctx.static(v, f"input {name!r}")
        node.attrs[name] = Attr(name, "ints", [int(x) for x in np.asarray(data).reshape(-1)])


def keep_inputs(ctx, node, count: int) -> None:
    ctx.set_inputs(node, node.inputs[:count])


# -- Reshape ------------------------------------------------------------------


@upgrade("Reshape", 5)
def reshape_shape_to_input(ctx, node):
    ctx.set_inputs(node, [node.inputs[0], ints_to_input(ctx, node, "shape", required=True)])


@downgrade("Reshape", 5)
def reshape_shape_to_attribute(ctx, node):
    input_to_ints(ctx, node, 1, "shape")
    keep_inputs(ctx, node, 1)


@downgrade("Reshape", 14)
def reshape_without_allowzero(ctx, node):
    """Before 14 a 0 in the shape always copies the input's dim; with allowzero=1 it is a real 0.

    Dropping allowzero is exact when no 0 can reach the shape: a constant shape without one, or an
    input with no zero dim (a 0 in the shape would then make Reshape-14 fail, not differ).  Otherwise
    the shape is tested at run time (see ``reshape_keeping_zeros``)."""
    if not int(ctx.pop_attr(node, "allowzero", 0)):
        return
    target = ctx.constant(node.inputs[1])
    if target is not None and not np.any(np.asarray(target) == 0):
        return
    dims = ctx.shape(node.inputs[0])
    if dims is not None and all(isinstance(d, int) and d > 0 for d in dims):
        return
    # Each output dim a positive number, or the input's dim at the same place (the same symbol): a 0
    # there is the input's own 0, which Reshape-13 copies
    out = ctx.shape(node.outputs[0])
    if out is not None and all(
        isinstance(d, int) and d > 0 or d is not None and dims is not None and i < len(dims) and d == dims[i]
        for i, d in enumerate(out)
    ):
        return
    length = ctx.shape(node.inputs[1])
    if length is not None and length[:1] == (0,):
        return  # an empty shape (a scalar) has no 0 in it
    dtype = ctx.dtype(node.inputs[0])
    if dtype is None:
        raise Refuse(
            "allowzero=1 with a 0 possible in the shape: the element type of the data must be known to "
            "build the empty tensor a 0 gives"
        )
    if target is not None:  # always empty (Reshape-14 fails on data that is not): a constant
        target = np.asarray(target).reshape(-1)
        if np.any(target < 0):
            raise Refuse(f"allowzero=1 with both 0 and -1 in the shape {target.tolist()} is invalid in Reshape-14")
        ctx.replace(node, [ctx.const(np.zeros(tuple(int(d) for d in target), element_type(dtype).numpy), "empty")])
    else:
        reshape_keeping_zeros(ctx, node, dtype)


def reshape_keeping_zeros(ctx, node, dtype: str):
    """``If(ReduceProd(shape) == 0, ConstantOfShape(shape), Reshape(data, shape))``: Reshape-14's result.

    With a 0 in the shape, Reshape-14 succeeds only on empty data (the sizes must match) and gives
    an empty tensor of exactly that shape, which ConstantOfShape makes; without one, Reshape-13 does
    the same as 14.  The product is 0 exactly when an element is (a product of dims that wraps to 0
    in int64 would describe 2**64 elements, which no tensor has)."""
    data, shape = node.inputs[0], node.inputs[1]
    out_type = TensorType(dtype, None)
    empty = ctx.branch(
        "empty", "ConstantOfShape", shape, out_type=out_type, value=np.zeros(1, element_type(dtype).numpy)
    )
    reshaped = ctx.branch("reshaped", "Reshape", data, shape, out_type=out_type)
    size = ctx.op("ReduceProd", shape, keepdims=0)
    has_zero = ctx.op("Equal", size, ctx.const(np.array(0, np.int64), "zero"))
    ctx.replace(node, [ctx.op("If", has_zero, then_branch=empty, else_branch=reshaped)])


# -- Shape ------------------------------------------------------------------------


@downgrade("Shape", 15)
def shape_start_end_as_slice(ctx, node):
    """Shape-15's start/end keep a range of the dims: the whole shape, then Slice on axis 0."""
    start = int(ctx.pop_attr(node, "start", 0))
    end = ctx.pop_attr(node, "end")
    if start == 0 and end is None:
        return
    whole = ctx.op("Shape", node.inputs[0])
    last = np.iinfo(np.int64).max if end is None else int(end)  # Slice clamps like Shape-15 does
    kept = ctx.op(
        "Slice",
        whole,
        ctx.const(np.array([start], np.int64), "start"),
        ctx.const(np.array([last], np.int64), "end"),
        ctx.const(np.array([0], np.int64), "axes"),
    )
    ctx.replace(node, [kept])


# -- ConstantOfShape, Expand: constants before they existed --------------------------------


@downgrade("ConstantOfShape", 9)
def constant_of_shape_as_expand(ctx, node):
    """The shape filled with ``value``: Expand of the one value at opset 8, the constant itself below (a constant
    shape)."""
    value = node.attr("value")
    fill = value.numpy().reshape(-1)[:1].reshape(()) if value is not None else np.zeros((), np.float32)
    if ctx.converter.target < 8:
        dims = ctx.static(node.inputs[0], "input 'input' (the shape; Expand is from opset 8)")
        shape = tuple(int(d) for d in np.asarray(dims).reshape(-1))
        ctx.replace(node, [ctx.const(np.full(shape, fill, fill.dtype), "filled")])
    else:  # the shape stays the node's own operand (an overridable input in old models)
        ctx.replace(node, [ctx.op("Expand", ctx.const(fill, "value"), node.inputs[0])])


@downgrade("Expand", 8)
def expand_of_constants(ctx, node):
    """Below 8 there is no Expand: a constant input broadcast to a constant shape is a constant."""
    data = ctx.static(node.inputs[0], "input 'input' (Expand has no form before opset 8)")
    dims = np.asarray(ctx.static(node.inputs[1], "input 'shape' (Expand has no form before opset 8)"), np.int64)
    data = np.asarray(data)
    shape = np.broadcast_shapes(data.shape, tuple(int(d) for d in dims.reshape(-1)))
    ctx.replace(node, [ctx.const(np.broadcast_to(data, shape).copy(), "expanded")])


# -- Slice ----------------------------------------------------------------------


@upgrade("Slice", 10)
def slice_attributes_to_inputs(ctx, node):
    starts = ints_to_input(ctx, node, "starts", required=True)
    ends = ints_to_input(ctx, node, "ends", required=True)
    axes = ints_to_input(ctx, node, "axes")
    ctx.set_inputs(node, [node.inputs[0], starts, ends, axes])


@downgrade("Slice", 10)
def slice_inputs_to_attributes(ctx, node):
    if len(node.inputs) > 4 and node.inputs[4] is not None:
        steps = ctx.static(node.inputs[4], "input 'steps'")
        if np.any(np.asarray(steps) != 1):
            raise Refuse(f"steps {np.asarray(steps).tolist()} need Slice-10 or later")
    for i, name in ((1, "starts"), (2, "ends"), (3, "axes")):
        input_to_ints(ctx, node, i, name)
    keep_inputs(ctx, node, 1)


@downgrade("Slice", 11)
def slice_positive_axes(ctx, node):
    axes = node.inputs[3] if len(node.inputs) > 3 else None
    if axes is not None:
        data = np.asarray(ctx.static(axes, "input 'axes'"))
        if np.any(data < 0):
            rank = ctx.rank(node.inputs[0], "input")
            node.set_input(3, ctx.const(np.where(data < 0, data + rank, data).astype(data.dtype), "axes"))


# -- Pad -------------------------------------------------------------------------


@upgrade("Pad", 2)
def pad_paddings_renamed(ctx, node):
    pads = ctx.pop_attr(node, "paddings")
    if pads is not None:
        ctx.set_attr(node, "pads", list(pads))


@downgrade("Pad", 2)
def pad_pads_renamed(ctx, node):
    pads = ctx.pop_attr(node, "pads")
    if pads is not None:
        ctx.set_attr(node, "paddings", list(pads))


@upgrade("Pad", 11)
def pad_attributes_to_inputs(ctx, node):
    pads = ints_to_input(ctx, node, "pads", required=True)
    value = ctx.pop_attr(node, "value", 0.0)
    mode = text(node.attr("mode", "constant"))
    fill = None
    if mode == "constant" and value != 0.0:
        dtype = ctx.dtype(node.inputs[0])
        if dtype is None:
            raise Refuse("the element type of the data is unknown; constant_value must have it")
        fill = ctx.const(np.array(value, dtype=element_type(dtype).numpy), "constant_value")
    ctx.set_inputs(node, [node.inputs[0], pads, fill])


@downgrade("Pad", 11)
def pad_inputs_to_attributes(ctx, node):
    pads = ctx.static(node.inputs[1], "input 'pads'")
    node.attrs["pads"] = Attr("pads", "ints", [int(x) for x in np.asarray(pads).reshape(-1)])
    fill = node.inputs[2] if len(node.inputs) > 2 else None
    if fill is not None:
        data = np.asarray(ctx.static(fill, "input 'constant_value'"))
        if data.size:
            node.attrs["value"] = Attr("value", "float", float(data.reshape(-1)[0]))
    keep_inputs(ctx, node, 1)


@downgrade("Pad", 18)
def pad_without_axes(ctx, node):
    axes = node.inputs[3] if len(node.inputs) > 3 else None
    if axes is None:
        return
    data = np.asarray(ctx.static(axes, "input 'axes'")).reshape(-1)
    rank = ctx.rank(node.inputs[0], "input")
    pads = np.asarray(ctx.static(node.inputs[1], "input 'pads'")).reshape(-1)
    full = np.zeros(2 * rank, dtype=np.int64)
    for k, axis in enumerate(data):
        axis = int(axis) + rank if axis < 0 else int(axis)
        full[axis] = pads[k]
        full[axis + rank] = pads[k + len(data)]
    node.set_input(1, ctx.const(full, "pads"))
    keep_inputs(ctx, node, 3)


@downgrade("Pad", 19)
def pad_without_wrap(ctx, node):
    if text(node.attr("mode", "constant")) == "wrap":
        raise Refuse("mode 'wrap' needs Pad-19 or later")


# -- Split -------------------------------------------------------------------------


@upgrade("Split", 2)
def split_input_to_attribute(ctx, node):
    input_to_ints(ctx, node, 1, "split")
    keep_inputs(ctx, node, 1)


@upgrade("Split", 13)
def split_sizes_to_input(ctx, node):
    ctx.set_inputs(node, [node.inputs[0], ints_to_input(ctx, node, "split")])


@downgrade("Split", 13)
def split_sizes_to_attribute(ctx, node):
    input_to_ints(ctx, node, 1, "split")
    keep_inputs(ctx, node, 1)


@downgrade("Split", 18)
def split_without_num_outputs(ctx, node):
    count = ctx.pop_attr(node, "num_outputs")
    if count is None or len(node.inputs) > 1 and node.inputs[1] is not None:
        return
    shape = ctx.shape(node.inputs[0])
    axis = int(node.attr("axis", 0))
    dim = None if shape is None else shape[axis]
    if isinstance(dim, int) and dim % count == 0:
        return  # equal parts: Split-13 without `split` does the same
    if not isinstance(dim, int):
        raise Refuse("num_outputs with an unknown split dimension needs Split-18")
    size = -(-dim // count)
    sizes = [size] * (dim // size) + ([dim % size] if dim % size else [])
    if len(sizes) != len(node.outputs):
        raise Refuse(f"num_outputs={count} on a dimension of {dim} needs Split-18")
    ctx.set_inputs(node, [node.inputs[0], ctx.const(np.array(sizes, np.int64), "split")])


# -- Squeeze / Unsqueeze -------------------------------------------------------------


@upgrade(("Squeeze", "Unsqueeze"), 13)
def axes_to_input(ctx, node):
    ctx.set_inputs(node, [node.inputs[0], ints_to_input(ctx, node, "axes")])


@downgrade(("Squeeze", "Unsqueeze"), 13)
def axes_to_attribute(ctx, node):
    input_to_ints(ctx, node, 1, "axes")
    keep_inputs(ctx, node, 1)


@downgrade("Unsqueeze", 11)
def unsqueeze_positive_axes(ctx, node):
    axes = list(node.attr("axes", []))
    if any(a < 0 for a in axes):
        rank = ctx.rank(node.inputs[0], "input") + len(axes)
        ctx.set_attr(node, "axes", [a + rank if a < 0 else a for a in axes])


@downgrade("OneHot", 11)
def onehot_positive_axis(ctx, node):
    """Before 11, OneHot took neither a negative axis nor negative indices (counted from the depth)."""
    indices = np.asarray(ctx.static(node.inputs[0], "input 'indices' (negative values need OneHot-11)"))
    if np.any(indices < 0):
        raise Refuse("negative indices need OneHot-11 or later")
    axis = node.attr("axis", -1)
    if axis < 0:
        ctx.set_attr(node, "axis", axis + ctx.rank(node.inputs[0], "indices") + 1)


# -- TopK -------------------------------------------------------------------------------


@upgrade("TopK", 10)
def topk_k_to_input(ctx, node):
    k = ctx.pop_attr(node, "k")
    ctx.set_inputs(node, [node.inputs[0], ctx.const(np.array([k], np.int64), "k")])


@downgrade("TopK", 10)
def topk_k_to_attribute(ctx, node):
    k = np.asarray(ctx.static(node.inputs[1], "input 'K'")).reshape(-1)
    ctx.set_attr(node, "k", int(k[0]))
    keep_inputs(ctx, node, 1)


# -- Tile -------------------------------------------------------------------------------


@upgrade("Tile", 6)
def tile_repeats(ctx, node):
    tiles = int(np.asarray(ctx.static(node.inputs[1], "input 'tiles'")).reshape(-1)[0])
    axis = int(np.asarray(ctx.static(node.inputs[2], "input 'axis'")).reshape(-1)[0])
    repeats = np.ones(ctx.rank(node.inputs[0], "input"), np.int64)
    repeats[axis] = tiles
    ctx.set_inputs(node, [node.inputs[0], ctx.const(repeats, "repeats")])


@downgrade("Tile", 6)
def tile_one_axis(ctx, node):
    repeats = np.asarray(ctx.static(node.inputs[1], "input 'repeats'")).reshape(-1)
    tiled = [i for i, r in enumerate(repeats) if r != 1]
    if len(tiled) > 1:
        raise Refuse(f"repeats {repeats.tolist()} tile several axes; Tile-1 tiles one")
    axis = tiled[0] if tiled else 0
    ctx.set_inputs(
        node,
        [
            node.inputs[0],
            ctx.const(np.array(repeats[axis], np.int64), "tiles"),
            ctx.const(np.array(axis, np.int64), "axis"),
        ],
    )


# -- Concat, Cast -------------------------------------------------------------------------


@upgrade("Concat", 4)
def concat_explicit_axis(ctx, node):
    if "axis" not in node.attrs:
        ctx.set_attr(node, "axis", 1)  # Concat-1's documented default


_TYPE_NAMES = {v: k for k, v in pb.TensorProto.DataType.items()}


@upgrade("Cast", 6)
def cast_type_name_to_code(ctx, node):
    name = text(ctx.pop_attr(node, "to"))
    codes = dict(pb.TensorProto.DataType.items())
    if name.upper() not in codes:
        raise Refuse(f"unknown type name {name!r}")
    ctx.set_attr(node, "to", int(codes[name.upper()]))


@downgrade("Cast", 6)
def cast_type_code_to_name(ctx, node):
    code = int(ctx.pop_attr(node, "to"))
    node.attrs["to"] = Attr("to", "string", _TYPE_NAMES[code])


# -- Upsample / Resize ----------------------------------------------------------------------


@upgrade("Upsample", 7)
def upsample_scales_attribute(ctx, node):
    h, w = ctx.pop_attr(node, "height_scale"), ctx.pop_attr(node, "width_scale")
    rank = ctx.rank(node.inputs[0], "input")
    ctx.set_attr(node, "scales", [1.0] * (rank - 2) + [float(h), float(w)])


@upgrade("Upsample", 9)
def upsample_scales_to_input(ctx, node):
    scales = ctx.pop_attr(node, "scales")
    ctx.set_inputs(node, [node.inputs[0], ctx.const(np.array(scales, np.float32), "scales")])


@downgrade("Upsample", 9)
def upsample_scales_to_attribute(ctx, node):
    scales = np.asarray(ctx.static(node.inputs[1], "input 'scales'")).reshape(-1)
    node.attrs["scales"] = Attr("scales", "floats", [float(s) for s in scales])
    keep_inputs(ctx, node, 1)


@upgrade("Upsample", 10)
def upsample_to_resize(ctx, node):
    """Upsample is deprecated from opset 10; Resize-10 has its exact meaning."""
    mode = node.attr("mode", "nearest")
    y = ctx.op("Resize", node.inputs[0], node.inputs[1], mode=mode)
    ctx.replace(node, [y])


@downgrade("Resize", 10)
def resize_to_upsample(ctx, node):
    mode = node.attr("mode", "nearest")
    ctx.replace(node, [ctx.op("Upsample", node.inputs[0], node.inputs[1], mode=mode)])


@upgrade("Resize", 11)
def resize_explicit_modes(ctx, node):
    """Resize-10 samples like Upsample: asymmetric coordinates, nearest rounds down."""
    ctx.set_attr(node, "coordinate_transformation_mode", "asymmetric")
    if text(node.attr("mode", "nearest")) == "nearest":
        ctx.set_attr(node, "nearest_mode", "floor")
    ctx.set_inputs(node, [node.inputs[0], ctx.const(np.zeros(0, np.float32), "roi"), node.inputs[1]])


@downgrade("Resize", 11)
def resize_asymmetric_only(ctx, node):
    mode = text(ctx.pop_attr(node, "mode", "nearest"))
    ctm = text(ctx.pop_attr(node, "coordinate_transformation_mode", "half_pixel"))
    nearest = text(ctx.pop_attr(node, "nearest_mode", "round_prefer_floor"))
    exclude = ctx.pop_attr(node, "exclude_outside", 0)
    for unused_in_10 in ("cubic_coeff_a", "extrapolation_value"):  # meaningless for nearest/linear
        ctx.pop_attr(node, unused_in_10)
    if (
        mode not in ("nearest", "linear")
        or ctm != "asymmetric"
        or (mode == "nearest" and nearest != "floor")
        or exclude
    ):
        raise Refuse(
            f"mode={mode!r}, coordinate_transformation_mode={ctm!r}, nearest_mode={nearest!r} "
            f"need Resize-11 or later (Resize-10 is asymmetric with floor rounding)"
        )
    ctx.set_attr(node, "mode", mode)
    scales = node.inputs[2] if len(node.inputs) > 2 else None
    sizes = node.inputs[3] if len(node.inputs) > 3 else None
    if sizes is not None:
        shape = ctx.shape(node.inputs[0])
        size = np.asarray(ctx.static(sizes, "input 'sizes'")).reshape(-1)
        if shape is None or not all(isinstance(d, int) for d in shape):
            raise Refuse("sizes with an unknown input shape need Resize-11")
        scales = ctx.const(size.astype(np.float32) / np.array(shape, np.float32), "scales")
    if scales is None:
        raise Refuse("neither scales nor sizes given")
    ctx.set_inputs(node, [node.inputs[0], scales])


@downgrade("Resize", 13)
def resize_required_roi_scales(ctx, node):
    inputs = list(node.inputs) + [None] * (4 - len(node.inputs))
    if inputs[1] is None:
        inputs[1] = ctx.const(np.zeros(0, np.float32), "roi")
    if inputs[2] is None:
        inputs[2] = ctx.const(np.zeros(0, np.float32), "scales")
    ctx.set_inputs(node, inputs)


@downgrade("Resize", 19)
def resize_without_half_pixel_symmetric(ctx, node):
    if text(node.attr("coordinate_transformation_mode", "half_pixel")) == "half_pixel_symmetric":
        raise Refuse("coordinate_transformation_mode 'half_pixel_symmetric' needs Resize-19 or later")


@upgrade("Split", 18)
def split_num_outputs(ctx, node):
    if len(node.inputs) < 2 or node.inputs[1] is None:
        ctx.set_attr(node, "num_outputs", len(node.outputs))  # equal parts must now be said


@upgrade("Scatter", 11)
def scatter_to_scatter_elements(ctx, node):
    """Scatter is deprecated from opset 11; ScatterElements-11 has its meaning."""
    y = ctx.op("ScatterElements", *node.inputs, axis=int(node.attr("axis", 0)))
    ctx.replace(node, [y])


@downgrade("ScatterElements", 11)
def scatter_elements_to_scatter(ctx, node):
    axis = int(node.attr("axis", 0))
    if axis < 0:
        axis += ctx.rank(node.inputs[0], "data")
    ctx.replace(node, [ctx.op("Scatter", *node.inputs, axis=axis)])


def _scatter_reduction(ctx, node, allowed: tuple[str, ...], version: int) -> None:
    reduction = text(node.attr("reduction", "none"))
    if reduction not in allowed:
        raise Refuse(
            f"reduction={reduction!r} needs {node.op}-{version} or later (before it, "
            f"{' / '.join(repr(r) for r in allowed)} only)"
        )
    if version == 16:
        ctx.pop_attr(node, "reduction")  # "none", the only meaning before 16


@downgrade(("ScatterElements", "ScatterND"), 18)
def scatter_without_min_max(ctx, node):
    _scatter_reduction(ctx, node, ("none", "add", "mul"), 18)


@downgrade(("ScatterElements", "ScatterND"), 16)
def scatter_without_reduction(ctx, node):
    _scatter_reduction(ctx, node, ("none",), 16)


_FNUZ = (pb.TensorProto.FLOAT8E4M3FNUZ, pb.TensorProto.FLOAT8E5M2FNUZ)


@downgrade(("Cast", "CastLike"), 24)
def cast_fnuz_saturation(ctx, node):
    """From 24, saturating casts send +-inf to the largest FNUZ float8 value; before, to NaN."""
    to = node.attr("to") if node.op == "Cast" else None
    if to is None and node.op == "CastLike" and ctx.dtype(node.inputs[1]) is not None:
        to = element_type(ctx.dtype(node.inputs[1])).onnx
    if to in _FNUZ and int(node.attr("saturate", 1)):
        raise Refuse("saturating casts to FNUZ float8 treat infinities differently before Cast-24")
    if to is None and node.op == "CastLike":
        raise Refuse("the target element type is unknown")


@downgrade("Trilu", 14)
def trilu_as_mask(ctx, node):
    """Keep the upper (or lower) triangle from diagonal k: Where with a mask of the last two dims.

    The mask is a constant when those dims are known, else built at run time from two Ranges
    (column - row compared with k), which needs Range (opset 11)."""
    x = node.inputs[0]
    shape = ctx.shape(x)
    dtype = ctx.dtype(x)
    if dtype is None or shape is None or len(shape) < 2:
        raise Refuse("the element type and rank of the input must be known to build the mask")
    k = node.inputs[1] if len(node.inputs) > 1 else None
    upper = bool(int(node.attr("upper", 1)))
    rows, cols = shape[-2:]
    small = isinstance(rows, int) and isinstance(cols, int) and rows * cols <= budget.fold_bytes()
    if small and (k is None or ctx.constant(k) is not None):  # else built at run time, as folding would leave it
        diagonal = 0 if k is None else int(np.asarray(ctx.constant(k)).reshape(()))
        ones = np.ones((rows, cols), dtype=bool)
        mask = ctx.const(np.triu(ones, diagonal) if upper else np.tril(ones, diagonal), "mask")
    else:
        mask = _triangle_mask(ctx, x, k, upper)
    if dtype == "bool":  # the same as Where(mask, x, false), which onnxruntime lacks for bool before 16
        y = ctx.op("And", mask, x)
    else:
        y = ctx.op("Where", mask, x, ctx.const(np.zeros((), element_type(dtype).numpy), "zero"))
    y.type = x.type
    ctx.replace(node, [y])


def _triangle_mask(ctx, x, k, upper: bool):
    """(rows, cols) bool, true where column - row >= k (upper) or <= k (lower), sized at run time."""

    def scalar(v):
        return ctx.const(np.array(v, np.int64), "scalar")

    dims = ctx.op("Shape", x)
    row_ids = ctx.op("Range", scalar(0), ctx.op("Gather", dims, scalar(-2)), scalar(1))
    col_ids = ctx.op("Range", scalar(0), ctx.op("Gather", dims, scalar(-1)), scalar(1))
    column = ctx.op("Reshape", row_ids, ctx.const(np.array([-1, 1], np.int64), "column"))
    offset = ctx.op("Sub", col_ids, column)  # column - row, (rows, cols)
    k = scalar(0) if k is None else ctx.op("Reshape", k, ctx.const(np.zeros(0, np.int64), "scalar_shape"))
    return ctx.op("Not", ctx.op("Less" if upper else "Greater", offset, k))
