"""Scatter and GatherND families, and Col2Im, -> opset1, which has Gather but no scatter operation.

Every index tuple is first turned into a flat offset (negative indices counted from the end, strides from
the static shape).  GatherND is then one Gather from the flattened data.  A scatter compares the N update
offsets with the M positions of the flattened data (an ``[N, M]`` one-hot), selects each update onto the
positions it hits and reduces over the updates: a sum places them (reduction ``none``/``add``), a product,
maximum or minimum combines them; positions no update hits keep the data.  Select, not multiplication by the
one-hot, keeps infinities and NaN of other updates out.  The one-hot costs ``N * M * row`` elements, so large
scatters are refused rather than built.

Col2Im adds column blocks back into an image: with static shapes, where each column element lands is known,
so it is one MatMul with a constant 0/1 placement matrix.
"""

from __future__ import annotations

import numpy as np

from ..lowering import lower
from ._common import Refuse, attr, const, const_input, i64, np_dtype, ov, static_shape, text_attr

MAX_ONE_HOT_ELEMENTS = 1 << 24


def _non_negative(b, indices, dims):
    """int64 ``indices`` with negative entries counted from the end of ``dims`` (broadcast on the last axis)."""
    indices = ov(b, "Convert", indices, destination_type="int64")
    dims = b.const(np.asarray(dims, np.int64), "dims")
    wrapped = ov(b, "Add", indices, dims, auto_broadcast="numpy")
    negative = ov(b, "Less", indices, i64(b, [0], "zero"), auto_broadcast="numpy")
    return ov(b, "Select", negative, wrapped, indices, auto_broadcast="numpy")


def _tuple_offsets(b, indices, dims):
    """Flat offsets of the index tuples on ``indices``' last axis into a tensor of shape ``dims``."""
    strides = np.cumprod((1,) + tuple(dims[:0:-1]))[::-1].astype(np.int64)
    scaled = ov(b, "Multiply", _non_negative(b, indices, dims), b.const(strides, "strides"), auto_broadcast="numpy")
    return ov(b, "ReduceSum", scaled, i64(b, [-1], "last"), keep_dims=False)


def _element_offsets(b, indices, index_shape, shape, axis: int):
    """ScatterElements' flat offsets: the index along ``axis``, each element's own coordinate elsewhere."""
    strides = np.cumprod((1,) + tuple(shape[:0:-1]))[::-1].astype(np.int64)
    along = ov(
        b,
        "Multiply",
        _non_negative(b, indices, [shape[axis]]),
        i64(b, [strides[axis]], "stride"),
        auto_broadcast="numpy",
    )
    grid = np.indices(index_shape, dtype=np.int64)
    others = sum((grid[d] * strides[d] for d in range(len(shape)) if d != axis), np.zeros(index_shape, np.int64))
    return ov(b, "Add", along, b.const(others, "offsets"), auto_broadcast="numpy")


# reduction -> (how updates to one position combine, its identity, how the result meets the data); "none"
# places the (single) update with a sum and then selects it over the data.
_COMBINE = {
    "none": ("ReduceSum", 0, None),
    "add": ("ReduceSum", 0, "Add"),
    "mul": ("ReduceProd", 1, "Multiply"),
    "max": ("ReduceMax", "lowest", "Maximum"),
    "min": ("ReduceMin", "highest", "Minimum"),
}


def _fill(dtype: np.dtype, which):
    if not isinstance(which, str):
        return which
    if dtype.kind == "f":
        return -np.inf if which == "lowest" else np.inf
    info = np.iinfo(dtype)
    return info.min if which == "lowest" else info.max


def _scatter_rows(b, data, shape, offsets, count: int, updates, row: int, reduction: str):
    """``data`` (shape ``shape``) with ``count`` rows of ``row`` updates placed at flat row ``offsets``."""
    dtype = np_dtype(data)
    slots = int(np.prod(shape, dtype=np.int64)) // row
    if count * slots * row > MAX_ONE_HOT_ELEMENTS:
        raise Refuse(
            f"{count} updates into {slots} positions: the one-hot scatter would build {count * slots * row} elements"
        )
    flat = ov(b, "Reshape", offsets, i64(b, [count, 1], "column"), special_zero=False)
    hit = ov(b, "Equal", flat, b.const(np.arange(slots, dtype=np.int64)[None], "positions"), auto_broadcast="numpy")
    hit3 = ov(b, "Unsqueeze", hit, i64(b, [2], "row_axis"))
    rows = ov(b, "Reshape", updates, i64(b, [count, 1, row], "update_rows"), special_zero=False)
    table = ov(b, "Reshape", data, i64(b, [slots, row], "data_rows"), special_zero=False)
    if reduction not in _COMBINE:
        raise Refuse(f"reduction {reduction!r}")
    reduce_op, identity, combine = _COMBINE[reduction]
    placed = ov(b, "Select", hit3, rows, const(b, _fill(dtype, identity), dtype, "identity"), auto_broadcast="numpy")
    merged = ov(b, reduce_op, placed, i64(b, [0], "update_axis"), keep_dims=False)
    if combine is None:
        touched = ov(b, "ReduceLogicalOr", hit, i64(b, [0], "update_axis"), keep_dims=False)
        touched = ov(b, "Reshape", touched, i64(b, [slots, 1], "column"), special_zero=False)
        out = ov(b, "Select", touched, merged, table, auto_broadcast="numpy")
    else:
        out = ov(b, combine, table, merged, auto_broadcast="numpy")
    return ov(b, "Reshape", out, i64(b, list(shape), "shape"), special_zero=False)


@lower("onnx", "openvino", ("ScatterElements", "Scatter"), inputs=3, names=("x", "indices", "updates"))
def _scatter_elements(b, m):
    shape = static_shape(m["x"])
    index_shape = static_shape(m["indices"])
    if static_shape(m["updates"]) != index_shape:
        raise Refuse("updates and indices differ in shape")
    axis = int(attr(m.root, "axis", 0)) % len(shape)
    offsets = _element_offsets(b, m["indices"], index_shape, shape, axis)
    count = int(np.prod(index_shape, dtype=np.int64))
    return _scatter_rows(b, m["x"], shape, offsets, count, m["updates"], 1, text_attr(m.root, "reduction", "none"))


@lower("onnx", "openvino", "ScatterND", inputs=3, names=("x", "indices", "updates"))
def _scatter_nd(b, m):
    shape = static_shape(m["x"])
    index_shape = static_shape(m["indices"])
    depth = index_shape[-1]
    if depth > len(shape):
        raise Refuse(f"index tuples of {depth} into rank {len(shape)}")
    offsets = _tuple_offsets(b, m["indices"], shape[:depth])
    count = int(np.prod(index_shape[:-1], dtype=np.int64))
    row = int(np.prod(shape[depth:], dtype=np.int64))
    return _scatter_rows(b, m["x"], shape, offsets, count, m["updates"], row, text_attr(m.root, "reduction", "none"))


@lower("onnx", "openvino", "GatherND", inputs=2, names=("x", "indices"))
def _gather_nd(b, m):
    shape = static_shape(m["x"])
    index_shape = static_shape(m["indices"])
    batch = int(attr(m.root, "batch_dims", 0))
    depth = index_shape[-1]
    if batch + depth > len(shape):
        raise Refuse(f"{batch} batch dims and index tuples of {depth} into rank {len(shape)}")
    offsets = _tuple_offsets(b, m["indices"], shape[batch : batch + depth])
    block = int(np.prod(shape[batch : batch + depth], dtype=np.int64))
    if batch:
        # Each index tuple reads inside its own batch entry: add the entry's start.
        grid = np.indices(index_shape[:-1], dtype=np.int64)[:batch]
        entry = np.ravel_multi_index(tuple(grid), shape[:batch])
        offsets = ov(
            b, "Add", offsets, b.const(np.asarray(entry * block, np.int64), "batch_offsets"), auto_broadcast="numpy"
        )
    rows = int(np.prod(shape[: batch + depth], dtype=np.int64))
    data = ov(b, "Reshape", m["x"], i64(b, [rows, *shape[batch + depth :]], "rows"), special_zero=False)
    return ov(b, "Gather", data, offsets, i64(b, [0], "axis"))


@lower("onnx", "openvino", "Col2Im", inputs=3, names=("x", "image_shape", "block_shape"))
def _col2im(b, m):
    cols = m["x"]
    batch, rows, count = static_shape(cols)
    image = [int(d) for d in np.asarray(const_input(m, "image_shape", "the image shape")).reshape(-1)]
    block = [int(d) for d in np.asarray(const_input(m, "block_shape", "the block shape")).reshape(-1)]
    spatial = len(image)
    dilations = list(attr(m.root, "dilations", [1] * spatial))
    strides = list(attr(m.root, "strides", [1] * spatial))
    pads = list(attr(m.root, "pads", [0] * 2 * spatial))
    per_block = int(np.prod(block))
    blocks = [
        (n + pads[d] + pads[d + spatial] - dilations[d] * (k - 1) - 1) // strides[d] + 1
        for d, (n, k) in enumerate(zip(image, block))
    ]
    if rows % per_block or int(np.prod(blocks)) != count:
        raise Refuse(f"columns {[batch, rows, count]} do not fit blocks {block} over image {image}")
    pixels = int(np.prod(image))
    if per_block * count * pixels > MAX_ONE_HOT_ELEMENTS:
        raise Refuse(f"the placement matrix would hold {per_block * count * pixels} elements")
    placement = np.zeros((per_block * count, pixels), np_dtype(cols))
    for k, offset in enumerate(np.ndindex(*block)):
        for position, start in enumerate(np.ndindex(*blocks)):
            where = [start[d] * strides[d] - pads[d] + offset[d] * dilations[d] for d in range(spatial)]
            if all(0 <= w < n for w, n in zip(where, image)):
                placement[k * count + position, np.ravel_multi_index(where, image)] = 1
    channels = rows // per_block
    columns = ov(b, "Reshape", cols, i64(b, [batch, channels, per_block * count], "columns"), special_zero=False)
    summed = ov(b, "MatMul", columns, b.const(placement, "placement"), transpose_a=False, transpose_b=False)
    return ov(b, "Reshape", summed, i64(b, [batch, channels, *image], "image"), special_zero=False)
