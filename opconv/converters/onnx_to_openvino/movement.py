"""Data-movement ONNX ops: Expand, Slice, Gather, Split, Pad, CenterCropPad, Tile, Shape, EyeLike,
ReverseSequence, depth/space shuffles, Trilu.

opset1 wants static shapes, so every translator here reads its input's shape
(known after the converter's shape inference) and states the output's
geometry with constants.
"""

from __future__ import annotations

import numpy as np

from ... import budget
from ...types import from_onnx_code
from ..lowering import lower
from ._common import (
    Refuse,
    attr,
    const,
    const_input,
    constant_list,
    constant_value,
    i64,
    np_dtype,
    ov,
    rank_of,
    static_shape,
    text_attr,
)


@lower("onnx", "openvino", "Expand", inputs=2, names=("x", "shape"))
def _expand(b, m):
    shape = static_shape(m["x"])
    target = [int(d) for d in const_input(m, "shape", "the target shape").reshape(-1)]
    try:
        out = np.broadcast_shapes(shape, tuple(target))
    except ValueError:
        raise Refuse(f"shape {list(shape)} does not broadcast with {target}") from None
    return ov(b, "Broadcast", m["x"], i64(b, out, "target_shape"), mode="numpy")


# ---------------------------------------------------------------------------
# Slice -> StridedSlice
# ---------------------------------------------------------------------------


@lower("onnx", "openvino", "Slice", inputs=1, names=("x",))
def _slice_1(b, m):
    node, shape = m.root, static_shape(m["x"])
    return _slice(b, m, shape, list(attr(node, "starts", [])), list(attr(node, "ends", [])), attr(node, "axes"), None)


@lower("onnx", "openvino", "Slice", since=10, inputs=(3, 4, 5), names=("x", "starts", "ends", "axes", "steps"))
def _slice_10(b, m):
    shape = static_shape(m["x"])
    return _slice(
        b,
        m,
        shape,
        constant_list(m, "starts"),
        constant_list(m, "ends"),
        constant_list(m, "axes"),
        constant_list(m, "steps"),
    )


def _slice(b, m, shape: tuple[int, ...], starts: list, ends: list, axes: list | None, steps: list | None):
    rank = len(shape)
    axes = list(range(len(starts))) if axes is None else [int(a) % rank for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    if len(set(axes)) != len(axes):
        raise Refuse("Slice names an axis twice")
    begin, end, stride = [0] * rank, [0] * rank, [1] * rank
    begin_mask, end_mask = [1] * rank, [1] * rank  # 1: the whole axis
    for axis, start, stop, step in zip(axes, starts, ends, steps):
        if int(step) == 0:
            raise Refuse("Slice step 0")
        # Python's slice clamps exactly as ONNX does; a stop of -1 with a negative step means "through 0".
        lo, hi, st = slice(int(start), int(stop), int(step)).indices(shape[axis])
        if len(range(lo, hi, st)) == 0:
            raise Refuse(f"Slice is empty along axis {axis} (opset1 has no empty tensors)")
        begin[axis], stride[axis], begin_mask[axis] = lo, st, 0
        if hi >= 0:
            end[axis], end_mask[axis] = hi, 0
    return ov(
        b,
        "StridedSlice",
        m["x"],
        i64(b, begin, "begin"),
        i64(b, end, "end"),
        i64(b, stride, "stride"),
        begin_mask=begin_mask,
        end_mask=end_mask,
        new_axis_mask=[],
        shrink_axis_mask=[],
        ellipsis_mask=[],
    )


# ---------------------------------------------------------------------------
# Gather
# ---------------------------------------------------------------------------


def _non_negative_indices(b, m, dim: int):
    """Gather-1 indices: ONNX's negative indices count from the end."""
    indices = m["indices"]
    data = m.constant("indices")
    if data is not None:
        data = np.asarray(data)
        if ((data < -dim) | (data >= dim)).any():
            raise Refuse(f"an index is out of range for a dim of {dim}")
        return b.const(np.where(data < 0, data + dim, data), f"{indices.name}/normalized")
    kind = np_dtype(indices)
    negative = ov(b, "Less", indices, const(b, 0, kind, "zero"), auto_broadcast="numpy")
    wrapped = ov(b, "Add", indices, const(b, dim, kind, "dim"), auto_broadcast="numpy")
    return ov(b, "Select", negative, wrapped, indices, auto_broadcast="numpy")


@lower("onnx", "openvino", "Gather", inputs=2, names=("x", "indices"))
def _gather(b, m):
    shape = static_shape(m["x"])
    axis = int(attr(m.root, "axis", 0)) % len(shape)
    return ov(b, "Gather", m["x"], _non_negative_indices(b, m, shape[axis]), i64(b, [axis], "axis"))


# ---------------------------------------------------------------------------
# Split -> VariadicSplit
# ---------------------------------------------------------------------------


def _split_lengths(m, dim: int, count: int) -> list[int]:
    node = m.root
    version = node.version or 18
    given = None
    if m.values.get("split") is not None:
        given = const_input(m, "split", "split").reshape(-1).tolist()
    elif version < 13 and attr(node, "split") is not None:
        given = list(attr(node, "split"))
    if given:
        if len(given) != count or sum(given) != dim:
            raise Refuse(f"split {given} does not cut a dim of {dim} into {count} outputs")
        lengths = [int(v) for v in given]
    elif version >= 18:
        chunk = -(-dim // count)
        lengths = [chunk] * (count - 1) + [dim - chunk * (count - 1)]
    else:
        if dim % count:
            raise Refuse(f"a dim of {dim} does not split evenly into {count} outputs")
        lengths = [dim // count] * count
    # An empty output that nothing reads (Concat drops empty inputs) is left out; a read one cannot exist in opset1.
    if any(
        n < 0 or (n == 0 and out is not None and (out.uses or any(out is o for o in m.graph.outputs)))
        for n, out in zip(lengths, m.root.outputs)
    ) or not any(lengths):
        raise Refuse("a split output would be empty (opset1 has no empty tensors)")
    return lengths


@lower("onnx", "openvino", "Split", inputs=(1, 2), names=("x", "split"))
def _split(b, m):
    shape = static_shape(m["x"])
    axis = int(attr(m.root, "axis", 0)) % len(shape)
    outputs = m.root.outputs
    lengths = _split_lengths(m, shape[axis], len(outputs))
    kept = [n for n in lengths if n]
    parts = ov(
        b,
        "VariadicSplit",
        m["x"],
        b.const(np.asarray(axis, np.int64), "axis"),
        i64(b, kept, "lengths"),
        _outputs=len(kept),
    )
    parts = iter(parts if isinstance(parts, list) else [parts])
    for i, n in enumerate(lengths):
        if not n:
            outputs[i] = None  # unread and empty: no value replaces it
    return [next(parts) if n else None for n in lengths]


# ---------------------------------------------------------------------------
# Pad, Tile
# ---------------------------------------------------------------------------

PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge"}


@lower("onnx", "openvino", "Pad", inputs=1, names=("x",))
def _pad_1(b, m):
    """Pads and value from the attributes."""
    node, x = m.root, m["x"]
    rank, mode = rank_of(x), _pad_mode(node)
    pads = list(attr(node, "pads", attr(node, "paddings", [])))
    return _pad(
        b, m, mode, pads, const(b, float(attr(node, "value", 0.0)), np_dtype(x), "pad_value"), list(range(rank))
    )


@lower("onnx", "openvino", "Pad", since=11, inputs=range(2, 5), names=("x", "pads", "value", "axes"))
def _pad_11(b, m):
    """Pads, value and (from opset 18) axes from the inputs."""
    x, value = m["x"], m["value"]
    rank, mode = rank_of(x), _pad_mode(m.root)
    pads = constant_list(m, "pads")
    axes = list(range(rank)) if m["axes"] is None else [int(a) % rank for a in constant_list(m, "axes")]
    if value is not None and value.shape is not None and len(value.shape) == 1:
        value = ov(b, "Squeeze", value, i64(b, [0], "axes"))
    if value is None:
        value = const(b, 0, np_dtype(x), "pad_value")
    return _pad(b, m, mode, pads, value, axes)


def _pad_mode(node) -> str:
    mode = text_attr(node, "mode", "constant")
    if mode not in PAD_MODES:
        raise Refuse(f"Pad mode {mode!r} has no opset1 equivalent")
    return mode


def _pad(b, m, mode: str, pads: list, value, axes: list[int]):
    x = m["x"]
    rank = rank_of(x)
    if len(pads) != 2 * len(axes):
        raise Refuse(f"{len(pads)} pads for {len(axes)} axes")
    begin, end = [0] * rank, [0] * rank
    for i, axis in enumerate(axes):
        begin[axis], end[axis] = int(pads[i]), int(pads[i + len(axes)])
    if mode != "constant":
        if any(p < 0 for p in begin + end):
            raise Refuse("negative pads with a non-constant mode")
        return ov(b, "Pad", x, i64(b, begin, "pads_begin"), i64(b, end, "pads_end"), pad_mode=PAD_MODES[mode])
    if constant_value(value) is not None:
        return ov(b, "Pad", x, i64(b, begin, "pads_begin"), i64(b, end, "pads_end"), value, pad_mode="constant")
    # OpenVINO's CPU plugin pads with zeros when pad_value is not a constant: pad with zeros, then select the
    # runtime value on the (static) border.
    padded = ov(
        b,
        "Pad",
        x,
        i64(b, begin, "pads_begin"),
        i64(b, end, "pads_end"),
        const(b, 0, np_dtype(x), "pad_value"),
        pad_mode="constant",
    )
    return ov(b, "Select", b.const(_pad_border(static_shape(x), begin, end), "border"), value, padded)


def _pad_border(shape, begin, end) -> np.ndarray:
    """True where a constant Pad of a ``shape`` tensor by ``begin``/``end`` writes the pad value."""
    border = np.ones([n + lo + hi for n, lo, hi in zip(shape, begin, end)], bool)
    border[
        tuple(slice(max(lo, 0), max(lo, 0) + n + min(lo, 0) + min(hi, 0)) for n, lo, hi in zip(shape, begin, end))
    ] = False
    return border


@lower("onnx", "openvino", "Tile", inputs=2, names=("x", "repeats"))
def _tile(b, m):
    repeats = const_input(m, "repeats", "repeats").reshape(-1)
    if (repeats <= 0).any():
        raise Refuse("a repeat of 0 makes an empty tensor")
    return ov(b, "Tile", m["x"], i64(b, repeats, "repeats"))


# ---------------------------------------------------------------------------
# Shape readers, depth/space, Trilu
# ---------------------------------------------------------------------------


@lower("onnx", "openvino", "Shape", inputs=1, names=("x",))
def _shape(b, m):
    shape = static_shape(m["x"])
    start = int(attr(m.root, "start", 0))
    end = attr(m.root, "end")
    data = np.asarray(shape[slice(start, None if end is None else int(end))], np.int64)
    if data.size == 0:
        raise Refuse("an empty shape slice (opset1 has no empty tensors)")
    return b.const(data, m.root.outputs[0].name)


@lower("onnx", "openvino", "Size", inputs=1, names=("x",))
def _size(b, m):
    return b.const(np.asarray(int(np.prod(static_shape(m["x"]), dtype=np.int64)), np.int64), m.root.outputs[0].name)


@lower("onnx", "openvino", "DepthToSpace", inputs=1, names=("x",))
def _depth_to_space(b, m):
    mode = text_attr(m.root, "mode", "DCR")
    return ov(
        b,
        "DepthToSpace",
        m["x"],
        block_size=int(attr(m.root, "blocksize")),
        mode="blocks_first" if mode == "DCR" else "depth_first",
    )


@lower("onnx", "openvino", "SpaceToDepth", inputs=1, names=("x",))
def _space_to_depth(b, m):
    # ONNX SpaceToDepth (DCR, the only mode before opset 28) is opset1's "blocks_first".
    mode = text_attr(m.root, "mode", "DCR")
    return ov(
        b,
        "SpaceToDepth",
        m["x"],
        block_size=int(attr(m.root, "blocksize")),
        mode="blocks_first" if mode == "DCR" else "depth_first",
    )


@lower("onnx", "openvino", "Trilu", inputs=(1, 2), names=("x", "k"))
def _trilu(b, m):
    """x where the element is inside the triangle, else 0: a constant mask over the last two axes."""
    shape = static_shape(m["x"])
    if len(shape) < 2:
        raise Refuse("Trilu needs rank >= 2")
    rows, cols = shape[-2:]
    upper = bool(attr(m.root, "upper", 1))
    x = m["x"]
    k_value = m.values.get("k")
    k = 0 if k_value is None else m.constant("k")
    if k is not None:
        k = int(np.asarray(k).reshape(()))
        mask = b.const(
            np.triu(np.ones((rows, cols), bool), k) if upper else np.tril(np.ones((rows, cols), bool), k), "triangle"
        )
    else:  # k known at run time: compare each element's diagonal offset (column - row) with it
        offset = np.arange(cols, dtype=np.int64)[None, :] - np.arange(rows, dtype=np.int64)[:, None]
        k_scalar = (
            k_value if k_value.shape == () else ov(b, "Reshape", k_value, i64(b, [], "scalar"), special_zero=False)
        )
        k_scalar = ov(b, "Convert", k_scalar, destination_type="int64")
        mask = ov(
            b,
            "GreaterEqual" if upper else "LessEqual",
            b.const(offset, "diagonal_offset"),
            k_scalar,
            auto_broadcast="numpy",
        )
    zero = const(b, 0, np_dtype(x), "zero")
    return ov(b, "Select", mask, x, zero, auto_broadcast="numpy")


@lower("onnx", "openvino", "ConstantOfShape", inputs=1, names=("shape",))
def _constant_of_shape(b, m):
    shape = [int(d) for d in const_input(m, "shape", "the shape").reshape(-1)]
    if 0 in shape:
        raise Refuse("an empty result (opset1 has no empty tensors)")
    value = m.root.attr("value")
    fill = np.zeros(1, np.float32) if value is None else np.asarray(value.numpy()).reshape(-1)
    budget.check(shape, fill.dtype.itemsize, "ConstantOfShape's output", where=m.root.label)
    return b.const(np.full(shape, fill[0], fill.dtype), m.root.outputs[0].name)


@lower("onnx", "openvino", "EyeLike", inputs=1, names=("x",))
def _eye_like(b, m):
    """EyeLike depends on its input's shape only: a constant once the shape is static."""
    rows, cols = static_shape(m["x"])
    dtype = attr(m.root, "dtype")
    eye_dtype = np_dtype(m["x"]) if dtype is None else from_onnx_code(int(dtype)).numpy
    return b.const(np.eye(rows, cols, int(attr(m.root, "k", 0)), dtype=eye_dtype), m.root.outputs[0].name)


@lower("onnx", "openvino", "CenterCropPad", inputs=2, names=("x", "shape"))
def _center_crop_pad(b, m):
    """Crop (centred, the extra element on the end side) then zero-pad (centred, the extra element at the end)."""
    shape = static_shape(m["x"])
    rank = len(shape)
    sizes = [int(d) for d in const_input(m, "shape", "the target shape").reshape(-1)]
    axes = attr(m.root, "axes")
    axes = list(range(rank)) if axes is None else [int(a) % rank for a in axes]
    if len(axes) != len(sizes):
        raise Refuse(f"{len(sizes)} target sizes for {len(axes)} axes")
    begin, end = [0] * rank, list(shape)
    pad_begin, pad_end = [0] * rank, [0] * rank
    for axis, size in zip(axes, sizes):
        if size <= 0:
            raise Refuse(f"target size {size} on axis {axis} (opset1 has no empty tensors)")
        if size < shape[axis]:
            begin[axis] = (shape[axis] - size) // 2
            end[axis] = begin[axis] + size
        else:
            pad_begin[axis] = (size - shape[axis]) // 2
            pad_end[axis] = size - shape[axis] - pad_begin[axis]
    y = m["x"]
    if end != list(shape) or any(begin):
        y = ov(
            b,
            "StridedSlice",
            y,
            i64(b, begin, "begin"),
            i64(b, end, "end"),
            i64(b, [1] * rank, "stride"),
            begin_mask=[0] * rank,
            end_mask=[0] * rank,
            new_axis_mask=[],
            shrink_axis_mask=[],
            ellipsis_mask=[],
        )
    if any(pad_begin) or any(pad_end):
        y = ov(
            b,
            "Pad",
            y,
            i64(b, pad_begin, "pads_begin"),
            i64(b, pad_end, "pads_end"),
            const(b, 0, np_dtype(m["x"]), "pad_value"),
            pad_mode="constant",
        )
    return y


@lower("onnx", "openvino", "ReverseSequence", inputs=2, names=("x", "lengths"))
def _reverse_sequence(b, m):
    """Gather from the two leading axes flattened: position t of batch entry n reads ``len[n] - 1 - t`` while
    ``t < len[n]``, and itself after."""
    shape = static_shape(m["x"])
    batch_axis, time_axis = int(attr(m.root, "batch_axis", 1)), int(attr(m.root, "time_axis", 0))
    if sorted((batch_axis, time_axis)) != [0, 1]:
        raise Refuse(f"batch_axis={batch_axis}, time_axis={time_axis}")
    grid = np.indices(shape[:2], dtype=np.int64)
    steps = b.const(grid[time_axis], "steps")
    lengths = ov(b, "Convert", m["lengths"], destination_type="int64")
    lengths = ov(b, "Unsqueeze", lengths, i64(b, [time_axis], "time_axis"))  # broadcast along time
    reversed_step = ov(
        b,
        "Subtract",
        ov(b, "Subtract", lengths, i64(b, [1], "one"), auto_broadcast="numpy"),
        steps,
        auto_broadcast="numpy",
    )
    inside = ov(b, "Less", steps, lengths, auto_broadcast="numpy")
    source = ov(b, "Select", inside, reversed_step, steps, auto_broadcast="numpy")
    batch = b.const(grid[batch_axis], "entries")
    if time_axis == 0:
        flat = ov(
            b,
            "Add",
            ov(b, "Multiply", source, i64(b, [shape[1]], "width"), auto_broadcast="numpy"),
            batch,
            auto_broadcast="numpy",
        )
    else:
        flat = ov(
            b,
            "Add",
            ov(b, "Multiply", batch, i64(b, [shape[1]], "width"), auto_broadcast="numpy"),
            source,
            auto_broadcast="numpy",
        )
    rows = ov(b, "Reshape", m["x"], i64(b, [shape[0] * shape[1], *shape[2:]], "rows"), special_zero=False)
    return ov(b, "Gather", rows, flat, i64(b, [0], "axis"))


@lower("onnx", "openvino", "Range", inputs=3, names=("start", "limit", "delta"))
def _range(b, m):
    start, limit, delta = (const_input(m, n, n).reshape(()) for n in ("start", "limit", "delta"))
    budget.check_range(start, limit, delta, np.asarray(start).dtype.itemsize, where=m.root.label)
    data = np.arange(start, limit, delta, dtype=np.asarray(start).dtype)
    if data.size == 0:
        raise Refuse("an empty range (opset1 has no empty tensors)")
    return b.const(data, m.root.outputs[0].name)


@lower("onnx", "openvino", "GatherElements", inputs=2, names=("x", "indices"))
def _gather_elements(b, m):
    """Gather from the flattened data at flat offsets: the indices along ``axis``, the element's own elsewhere."""
    shape = static_shape(m["x"])
    index_shape = static_shape(m["indices"])
    axis = int(attr(m.root, "axis", 0)) % len(shape)
    strides = np.cumprod((1,) + shape[:0:-1])[::-1].astype(np.int64)
    flat = _non_negative_indices(b, m, shape[axis])
    flat = ov(b, "Convert", flat, destination_type="int64")
    flat = ov(b, "Multiply", flat, i64(b, [strides[axis]], "stride"), auto_broadcast="numpy")
    grid = np.indices(index_shape, dtype=np.int64)
    others = sum(grid[d] * strides[d] for d in range(len(shape)) if d != axis)
    flat = ov(b, "Add", flat, b.const(np.asarray(others, np.int64), "offsets"), auto_broadcast="numpy")
    data = ov(b, "Reshape", m["x"], i64(b, [-1], "flat"), special_zero=False)
    return ov(b, "Gather", data, flat, i64(b, [0], "axis"))
