"""Shape and data-movement opset1 layers -> ONNX: Reshape, Transpose, Concat, splits, (Un)Squeeze,
StridedSlice, Gather, Tile, Broadcast, Pad, ShapeOf, Range, OneHot, Depth/Space, ShuffleChannels, Reverse."""

from __future__ import annotations

import numpy as np

from ...types import element_type
from ._common import INT64_MAX, INT64_MIN, Ctx, Refuse, const_ints, constant_value, lower, rank_of, static_shape


@lower("Reshape", 2)
def reshape(c: Ctx, x, shape):
    special_zero = c.a.get("special_zero")
    target = constant_value(shape)
    if special_zero or (target is not None and 0 not in np.asarray(target).reshape(-1).tolist()):
        return c.onnx("Reshape", x, c.as_i64(shape))  # ONNX's 0 copies the input dim, as special_zero
    if c.opset < 14:
        raise Refuse("special_zero=false with a zero (or computed) target needs Reshape-14's allowzero")
    return c.onnx("Reshape", x, c.as_i64(shape), allowzero=1)


@lower("Transpose", 2)
def transpose(c: Ctx, x, order):
    perm = const_ints(order, "the Transpose order")
    return c.onnx("Transpose", x, perm=perm or None)  # an empty order reverses the dims, as ONNX's default


@lower("Concat", None)  # any count: the validation door holds them to the schema's (one or more)
def concat(c: Ctx, *inputs):
    return c.onnx("Concat", *inputs, axis=int(c.a["axis"]))


def _split_axis(x, axis) -> int:
    return const_ints(axis, "the split axis")[0] % rank_of(x)


def _split(c: Ctx, x, axis: int, lengths: list[int]):
    values = c.onnx("Split", x, c.i64(lengths), axis=axis, _outputs=len(lengths))
    return values if isinstance(values, list) else [values]


@lower("Split", 2, outputs=None)
def split(c: Ctx, x, axis):
    axis = _split_axis(x, axis)
    parts = int(c.a["num_splits"])
    dim = x.shape[axis]
    if not isinstance(dim, int):
        if c.opset >= 18:
            values = c.onnx("Split", x, axis=axis, num_outputs=parts, _outputs=parts)
        else:
            values = c.onnx("Split", x, axis=axis, _outputs=parts)  # equal parts without the split input
        return values if isinstance(values, list) else [values]
    if dim % parts:
        raise Refuse(f"dim {dim} of axis {axis} does not split into {parts} parts")
    return _split(c, x, axis, [dim // parts] * parts)


@lower("VariadicSplit", 3, outputs=None)
def variadic_split(c: Ctx, x, axis, split_lengths):
    axis = _split_axis(x, axis)
    lengths = const_ints(split_lengths, "split_lengths")
    if -1 in lengths:
        dim = static_shape(x)[axis]
        lengths[lengths.index(-1)] = dim - (sum(lengths) + 1)
    return _split(c, x, axis, lengths)


@lower("Squeeze", (1, 2))
def squeeze(c: Ctx, x, axes=None):
    if axes is None or (constant_value(axes) is not None and np.size(constant_value(axes)) == 0):
        return c.onnx("Squeeze", x)
    return c.onnx("Squeeze", x, c.as_i64(axes))


@lower("Unsqueeze", 2)
def unsqueeze(c: Ctx, x, axes):
    return c.onnx("Unsqueeze", x, c.as_i64(axes))


def _bit(mask, i: int) -> bool:
    return bool(mask) and i < len(mask) and mask[i] == 1


@lower("StridedSlice", (3, 4))
def strided_slice(c: Ctx, x, begin, end, stride=None):
    """One ONNX Slice over the sliced axes, then Squeeze (shrink_axis) and Unsqueeze (new_axis)."""
    begins, ends = const_ints(begin, "begin"), const_ints(end, "end")
    steps = const_ints(stride, "stride") if stride is not None else [1] * len(begins)
    rank = rank_of(x)
    masks = {
        k: c.a.get(k) or [] for k in ("begin_mask", "end_mask", "new_axis_mask", "shrink_axis_mask", "ellipsis_mask")
    }
    items = len(begins)
    consuming = sum(
        1 for i in range(items) if not _bit(masks["new_axis_mask"], i) and not _bit(masks["ellipsis_mask"], i)
    )
    axes, starts, stops, strides, shrink, new = [], [], [], [], [], []
    in_axis = out_axis = 0
    for i in range(items):
        b, e, s = begins[i], ends[i], steps[i]
        if _bit(masks["ellipsis_mask"], i):
            covered = rank - consuming
            in_axis += covered
            out_axis += covered
        elif _bit(masks["new_axis_mask"], i):
            new.append(out_axis)
            out_axis += 1
        elif _bit(masks["shrink_axis_mask"], i):
            axes.append(in_axis)
            starts.append(b)
            stops.append(b + 1 if b != -1 else INT64_MAX)
            strides.append(1)
            shrink.append(in_axis)
            in_axis += 1
        else:
            if s == 0:
                raise Refuse("a stride of 0")
            ignore_begin, ignore_end = _bit(masks["begin_mask"], i), _bit(masks["end_mask"], i)
            if not (ignore_begin and ignore_end and s == 1):
                axes.append(in_axis)
                starts.append((INT64_MAX if s < 0 else 0) if ignore_begin else b)
                stops.append((INT64_MIN if s < 0 else INT64_MAX) if ignore_end else e)
                strides.append(s)
            in_axis += 1
            out_axis += 1
    if in_axis > rank:
        raise Refuse(f"the slice spec addresses {in_axis} axes of a rank-{rank} input")
    y = x
    if axes:
        y = c.onnx("Slice", y, c.i64(starts), c.i64(stops), c.i64(axes), c.i64(strides))
    if shrink:
        y = c.squeeze(y, shrink)
    if new:
        y = c.unsqueeze(y, new)
    return y if y is not x else c.onnx("Identity", x)


@lower("Gather", 3)
def gather(c: Ctx, data, indices, axis):
    return c.onnx("Gather", data, indices, axis=const_ints(axis, "the Gather axis")[0])


@lower("Tile", 2)
def tile(c: Ctx, x, repeats):
    reps = const_ints(repeats, "repeats")
    rank = rank_of(x)
    if len(reps) > rank:  # more repeats than dims: leading dims of size 1 are added first (numpy's tile)
        x = c.unsqueeze(x, range(len(reps) - rank))
    reps = [1] * (rank - len(reps)) + reps
    return c.onnx("Tile", x, c.i64(reps))


@lower("Broadcast", (2, 3))
def broadcast(c: Ctx, x, target_shape, axes_mapping=None):
    mode = str(c.a.get("mode") or "numpy").lower()
    if mode in ("explicit", "none"):  # OpenVINO writes the explicit mode as "none"
        if axes_mapping is None:
            raise Refuse("mode 'explicit' needs the axes_mapping input")
        mapping = const_ints(axes_mapping, "axes_mapping")
        if mapping != sorted(mapping):
            raise Refuse(f"axes_mapping {mapping} is not increasing")
        target_rank = (
            len(const_ints(target_shape, "target_shape"))
            if constant_value(target_shape) is not None
            else static_shape(target_shape)[0]
        )
        others = [a for a in range(target_rank) if a not in mapping]
        if others:
            x = c.unsqueeze(x, others)
    elif mode != "numpy":
        raise Refuse(f"mode {mode!r} has no ONNX form")
    return c.onnx("Expand", x, c.as_i64(target_shape))


_PAD_MODES = {"constant": "constant", "edge": "edge", "reflect": "reflect"}


@lower("Pad", (3, 4))
def pad(c: Ctx, x, pads_begin, pads_end, pad_value=None):
    mode = str(c.a.get("pad_mode")).lower()
    if mode not in _PAD_MODES:
        raise Refuse(f"pad_mode={mode!r} has no ONNX Pad form")
    begin, end = constant_value(pads_begin), constant_value(pads_end)
    if begin is not None and end is not None:
        pads = c.i64(np.concatenate([np.asarray(begin).reshape(-1), np.asarray(end).reshape(-1)]))
    else:
        pads = c.onnx("Concat", c.as_i64(pads_begin), c.as_i64(pads_end), axis=0)
    value = pad_value if mode == "constant" else None
    if value is not None and value.shape not in ((), None):
        value = c.onnx("Reshape", value, c.i64([]))
    return c.onnx("Pad", x, pads, value, mode=_PAD_MODES[mode])


@lower("ShapeOf", 1)
def shape_of(c: Ctx, x):
    return c.onnx("Shape", x)


@lower("Range", 3)
def range_(c: Ctx, start, stop, step):
    out = c.node.outputs[0].dtype or start.dtype
    if out is None:
        raise Refuse("the element type of the Range output is unknown")
    code = element_type(out).onnx
    scalars = []
    for v in (start, stop, step):
        if v.shape not in ((), None):
            v = c.onnx("Reshape", v, c.i64([]))
        scalars.append(v if v.dtype == out else c.onnx("Cast", v, to=code))
    return c.onnx("Range", *scalars)


@lower("OneHot", 4)
def one_hot(c: Ctx, indices, depth, on_value, off_value):
    depth_i64 = c.onnx("Reshape", c.as_i64(depth), c.i64([]))
    idx = c.as_i64(indices)
    # ONNX counts negative indices from the end; opset1 gives them an all-off row, as an index of `depth` does.
    idx = c.onnx("Where", c.onnx("Less", idx, c.i64(0)), depth_i64, idx)
    values = c.onnx("Concat", c.onnx("Reshape", off_value, c.i64([1])), c.onnx("Reshape", on_value, c.i64([1])), axis=0)
    return c.onnx("OneHot", idx, depth_i64, values, axis=int(c.a["axis"]))


@lower("DepthToSpace", 1)
def depth_to_space(c: Ctx, x):
    if rank_of(x) != 4:
        raise Refuse("ONNX DepthToSpace takes 4-D input only")
    mode = {"blocks_first": "DCR", "depth_first": "CRD"}.get(str(c.a.get("mode")).lower())
    if mode is None:
        raise Refuse(f"unknown mode {c.a.get('mode')!r}")
    return c.onnx("DepthToSpace", x, blocksize=int(c.a.get("block_size") or 1), mode=mode)


@lower("SpaceToDepth", 1)
def space_to_depth(c: Ctx, x):
    block = int(c.a.get("block_size") or 1)
    mode = str(c.a.get("mode")).lower()
    if mode == "blocks_first" and rank_of(x) == 4:
        return c.onnx("SpaceToDepth", x, blocksize=block)
    if mode != "depth_first":
        raise Refuse(f"mode {mode!r} on a rank-{rank_of(x)} input has no ONNX form")
    # depth_first: each channel's block pixels become consecutive channels.
    n, ch, *spatial = static_shape(x)
    split = [n, ch] + [v for d in spatial for v in (d // block, block)]
    k = len(spatial)
    perm = [0, 1] + [3 + 2 * i for i in range(k)] + [2 + 2 * i for i in range(k)]
    y = c.onnx("Transpose", c.onnx("Reshape", x, c.i64(split)), perm=perm)
    return c.onnx("Reshape", y, c.i64([n, ch * block**k] + [d // block for d in spatial]))


@lower("ShuffleChannels", 1)
def shuffle_channels(c: Ctx, x):
    shape = static_shape(x)
    axis = int(c.a.get("axis", 1)) % len(shape)
    group = int(c.a.get("group") or 1)
    channels = shape[axis]
    if channels % group:
        raise Refuse(f"{channels} channels do not split into {group} groups")
    pre, post = int(np.prod(shape[:axis])), int(np.prod(shape[axis + 1 :]))
    y = c.onnx("Reshape", x, c.i64([pre, group, channels // group, post]))
    y = c.onnx("Transpose", y, perm=[0, 2, 1, 3])
    return c.onnx("Reshape", y, c.i64(shape))


@lower("Reverse", 2)
def reverse(c: Ctx, x, axis):
    if str(c.a.get("mode")).lower() == "mask":
        axes = [i for i, flag in enumerate(const_ints(axis, "the Reverse mask")) if flag]
    else:
        axes = [a % rank_of(x) for a in const_ints(axis, "the Reverse axes")]
    if not axes:
        return c.onnx("Identity", x)
    n = len(axes)
    return c.onnx("Slice", x, c.i64([-1] * n), c.i64([INT64_MIN] * n), c.i64(axes), c.i64([-1] * n))


@lower("ReverseSequence", 2)
def reverse_sequence(c: Ctx, x, seq_lengths):
    rank = rank_of(x)
    batch, seq = int(c.a.get("batch_axis", 0)) % rank, int(c.a.get("seq_axis", 1)) % rank
    if {batch, seq} != {0, 1}:
        raise Refuse(f"ONNX ReverseSequence needs batch and sequence axes 0 and 1, got {batch} and {seq}")
    return c.onnx("ReverseSequence", x, c.as_i64(seq_lengths), batch_axis=batch, time_axis=seq)
