"""Data-movement ONNX ops: reshapes, transposes, concatenation, slicing, padding, gathers and scatters, constants.

HLO shapes are static, so shape operands (Reshape's shape, Slice's starts,
Pad's pads ...) must be constants after the pipeline's constant folding; the
result shapes come from the ONNX node's inferred output types.
"""

from __future__ import annotations

import numpy as np

from ... import budget
from ...ir import Tensor
from ...types import TensorType
from ..lowering import lower
from ._common import (
    Refuse,
    attr,
    binary,
    broadcast,
    broadcast_in_dim,
    compare,
    concat,
    const_input,
    const_ints,
    convert,
    dtype_of,
    full,
    hlo,
    iota,
    normalize_axis,
    out_type,
    reshape,
    scalar,
    select,
    shape_of,
    slice_,
    static_type,
    text_attr,
    transpose,
)
from .nn import pad_value


@lower("onnx", "hlo", ("Reshape", "Flatten", "Squeeze", "Unsqueeze"), inputs=(1, 2))
def _reshape_like_output(b, m):
    """Reshape, Flatten, Squeeze, Unsqueeze: only the (static) output shape matters."""
    x = m.root.inputs[0]
    t = out_type(m)
    if shape_of(x) == t.shape:
        return hlo(b, "Copy", x, type=t)
    return reshape(b, x, t.shape)


@lower("onnx", "hlo", "Transpose", inputs=1)
def _transpose(b, m):
    x = m.root.inputs[0]
    rank = len(shape_of(x))
    perm = list(attr(m.root, "perm", list(range(rank))[::-1]))
    y = transpose(b, x, perm)
    return y if y is not x else hlo(b, "Copy", x, type=static_type(x))


@lower("onnx", "hlo", "Concat", inputs=None)
def _concat(b, m):
    values = [v for v in m.root.inputs if v is not None]
    rank = len(shape_of(values[0]))
    axis = normalize_axis(int(attr(m.root, "axis", 1)), rank)
    values = [v for v in values if shape_of(v)[axis] != 0] or values[:1]
    y = concat(b, values, axis)
    return y if len(values) > 1 else hlo(b, "Copy", y, type=static_type(y))


@lower("onnx", "hlo", "Split", inputs=(1, 2))
def _split(b, m):
    node = m.root
    x = node.inputs[0]
    xs = shape_of(x)
    axis = normalize_axis(int(attr(node, "axis", 0)), len(xs))
    sizes = [static_type(v).shape[axis] if v is not None else None for v in node.outputs]
    if any(s is None for s in sizes):
        raise Refuse("an output of Split is omitted")
    outs, start = [], 0
    for size in sizes:
        starts = [0] * len(xs)
        limits = list(xs)
        starts[axis], limits[axis] = start, start + size
        y = slice_(b, x, starts, limits)
        outs.append(y if y is not x else hlo(b, "Copy", x, type=static_type(x)))
        start += size
    if start != xs[axis]:
        raise Refuse(f"Split sizes add up to {start}, not {xs[axis]}")
    return outs


@lower("onnx", "hlo", "Slice", since=1, inputs=1)
def _slice_1(b, m):
    """Slice-1: the bounds are attributes."""
    starts, ends = list(attr(m.root, "starts")), list(attr(m.root, "ends"))
    return _slice(b, m, starts, ends, list(attr(m.root, "axes", range(len(starts)))), [1] * len(starts))


@lower("onnx", "hlo", "Slice", since=10, inputs=range(3, 6), names=("data", "starts", "ends", "axes", "steps"))
def _slice_10(b, m):
    """Slice-10 on: the bounds are (constant) inputs."""
    starts, ends = const_ints(m, "starts"), const_ints(m, "ends")
    axes = const_ints(m, "axes") if m["axes"] is not None else list(range(len(starts)))
    steps = const_ints(m, "steps") if m["steps"] is not None else [1] * len(starts)
    return _slice(b, m, starts, ends, axes, steps)


def _slice(b, m, starts, ends, axes, steps):
    x = m.root.inputs[0]
    xs = shape_of(x)
    rank = len(xs)
    lo, hi, st = [0] * rank, list(xs), [1] * rank
    flips = []
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = normalize_axis(axis, rank)
        size = xs[axis]
        if step == 0:
            raise Refuse("Slice step 0")
        if step > 0:
            s = min(max(start + size if start < 0 else start, 0), size)
            e = min(max(end + size if end < 0 else end, 0), size)
            lo[axis], hi[axis], st[axis] = s, max(e, s), step
        else:
            # Negative step: slice the reversed dim. Index i of the input is size-1-i of the reversed one.
            s = min(max(start + size if start < 0 else start, -1), size - 1)
            e = min(max(end + size if end < 0 else end, -1), size - 1)
            lo[axis], hi[axis], st[axis] = size - 1 - s, max(size - 1 - e, size - 1 - s), -step
            flips.append(axis)
    if flips:
        x = hlo(b, "Reverse", x, type=static_type(x), dimensions=sorted(flips))
    y = slice_(b, x, lo, hi, st)
    return y if y is not m.root.inputs[0] else hlo(b, "Copy", y, type=static_type(y))


PAD_MODES = {"constant": "PAD_VALUE", "edge": "PAD_EDGE", "reflect": "PAD_REFLECT"}


def _pad_mode(m) -> str | None:
    mode = text_attr(m.root, "mode", "constant")
    return None if mode in PAD_MODES else f"Pad mode {mode!r} has no HLO form"


@lower("onnx", "hlo", "Pad", since=1, inputs=1, check=_pad_mode)
def _pad_1(b, m):
    """Pad-1 and -2: the amounts (``paddings`` in version 1, ``pads`` from 2) and the value are attributes."""
    node = m.root
    pads = list(attr(node, "pads" if (node.version or 2) >= 2 else "paddings"))
    return _pad(b, m, pads, float(attr(node, "value", 0.0)), list(range(len(shape_of(node.inputs[0])))))


@lower(
    "onnx",
    "hlo",
    "Pad",
    since=11,
    inputs=range(2, 5),
    names=("data", "pads", "constant_value", "axes"),
    check=_pad_mode,
)
def _pad_11(b, m):
    """Pad-11 on: amounts, value and (from 18) axes are (constant) inputs."""
    pads = const_ints(m, "pads")
    value = 0 if m["constant_value"] is None else np.asarray(const_input(m, "constant_value", "constant_value"))
    value = value if isinstance(value, int) else (value.reshape(-1)[0] if value.size else 0)
    axes = const_ints(m, "axes") if m["axes"] is not None else list(range(len(shape_of(m.root.inputs[0]))))
    return _pad(b, m, pads, value, axes)


def _pad(b, m, pads, value, axes):
    node = m.root
    x = node.inputs[0]
    xs = shape_of(x)
    rank = len(xs)
    mode = text_attr(node, "mode", "constant")  # a PAD_MODES key (the check ran)
    axes = [normalize_axis(a, rank) for a in axes]
    low, high = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        low[a], high[a] = pads[i], pads[i + len(axes)]
    if mode == "constant":
        return (
            pad_value(b, x, low, high, np.asarray(value).astype(np.dtype(_np(x))).item())
            if any(low) or any(high)
            else hlo(b, "Copy", x, type=static_type(x))
        )
    out = tuple(d + lo + hi for d, lo, hi in zip(xs, low, high))
    return hlo(
        b,
        "Pad",
        x,
        scalar(b, 0, dtype_of(x)),
        type=TensorType(dtype_of(x), out),
        mode=PAD_MODES[mode],
        edge_padding_low=low,
        edge_padding_high=high,
        interior_padding=[0] * rank,
    )


def _np(x):
    from ...types import element_type

    return element_type(dtype_of(x)).numpy


@lower("onnx", "hlo", "Expand", inputs=2)
def _expand(b, m):
    x = m.root.inputs[0]
    t = out_type(m)
    y = broadcast(b, x, t.shape)
    return y if y is not x else hlo(b, "Copy", x, type=t)


@lower("onnx", "hlo", "Tile", inputs=2, names=("x", "repeats"))
def _tile(b, m):
    x = m.root.inputs[0]
    xs = shape_of(x)
    repeats = const_ints(m, "repeats")
    # [d] -> broadcast to [r, d] -> reshape to [r*d], for every dim at once.
    expanded = tuple(v for r, d in zip(repeats, xs) for v in (r, d))
    y = broadcast_in_dim(b, x, expanded, [2 * i + 1 for i in range(len(xs))])
    return reshape(b, y, out_type(m).shape)


# ---------------------------------------------------------------------------
# Gathers and scatters (XLA general forms)
# ---------------------------------------------------------------------------


def _wrapped_indices(b, m, name: str, indices, size_of):
    """Indices with ONNX's negative values wrapped (XLA would clamp them); int64."""
    data = m.constant(name)
    if data is not None:
        data = np.asarray(data).astype(np.int64)
        sizes = np.broadcast_to(np.asarray(size_of, np.int64), data.shape) if np.ndim(size_of) else size_of
        return b.const(np.where(data < 0, data + sizes, data), "indices")
    idx = convert(b, indices, "int64")
    sizes = b.const(np.asarray(size_of, np.int64), "dim_sizes")
    negative = compare(b, idx, scalar(b, 0, "int64"), "LT")
    return select(b, negative, binary(b, "Add", idx, sizes), idx)


@lower("onnx", "hlo", "Gather", inputs=2, names=("data", "indices"))
def _gather(b, m):
    node = m.root
    x, indices = node.inputs[:2]
    xs, qs = shape_of(x), shape_of(indices)
    r, q = len(xs), len(qs)
    axis = normalize_axis(int(attr(node, "axis", 0)), r)
    idx = _wrapped_indices(b, m, "indices", indices, xs[axis])
    slice_sizes = list(xs)
    slice_sizes[axis] = 1
    return hlo(
        b,
        "Gather",
        x,
        idx,
        type=out_type(m),
        index_vector_dim=q,
        start_index_map=[axis],
        collapsed_slice_dims=[axis],
        offset_dims=list(range(axis)) + list(range(axis + q, r - 1 + q)),
        slice_sizes=slice_sizes,
        indices_are_sorted=False,
    )


def _full_index_vectors(b, idx, rank: int, axis: int):
    """For indices of shape S (rank = data rank), the [S..., rank] vectors (i0, ..., idx, ..., i_{r-1})."""
    s = shape_of(idx)
    parts = []
    for d in range(rank):
        if d == axis:
            parts.append(reshape(b, idx, s + (1,)))
        else:
            parts.append(iota(b, "int64", s + (1,), d))
    return concat(b, parts, rank)


@lower("onnx", "hlo", "GatherElements", inputs=2, names=("data", "indices"))
def _gather_elements(b, m):
    node = m.root
    x, indices = node.inputs[:2]
    xs = shape_of(x)
    r = len(xs)
    axis = normalize_axis(int(attr(node, "axis", 0)), r)
    idx = _wrapped_indices(b, m, "indices", indices, xs[axis])
    vectors = _full_index_vectors(b, idx, r, axis)
    return hlo(
        b,
        "Gather",
        x,
        vectors,
        type=out_type(m),
        index_vector_dim=r,
        start_index_map=list(range(r)),
        collapsed_slice_dims=list(range(r)),
        offset_dims=[],
        slice_sizes=[1] * r,
        indices_are_sorted=False,
    )


@lower("onnx", "hlo", "GatherND", inputs=2, names=("data", "indices"))
def _gather_nd(b, m):
    node = m.root
    x, indices = node.inputs[:2]
    if int(attr(node, "batch_dims", 0)):
        raise Refuse("GatherND with batch_dims > 0 is not mapped")
    xs, qs = shape_of(x), shape_of(indices)
    k = qs[-1]
    idx = _wrapped_indices(b, m, "indices", indices, list(xs[:k]))
    q = len(qs)
    return hlo(
        b,
        "Gather",
        x,
        idx,
        type=out_type(m),
        index_vector_dim=q - 1,
        start_index_map=list(range(k)),
        collapsed_slice_dims=list(range(k)),
        offset_dims=list(range(q - 1, q - 1 + len(xs) - k)),
        slice_sizes=[1] * k + list(xs[k:]),
        indices_are_sorted=False,
    )


SCATTER_REDUCTIONS = {"none": "UPDATE", "add": "ADD", "mul": "MUL", "min": "MIN", "max": "MAX"}


def _reduction(node) -> str:
    red = text_attr(node, "reduction", "none")
    if red not in SCATTER_REDUCTIONS:
        raise Refuse(f"reduction {red!r} has no HLO combiner")
    return SCATTER_REDUCTIONS[red]


@lower("onnx", "hlo", "ScatterND", inputs=3, names=("data", "indices"))
def _scatter_nd(b, m):
    node = m.root
    x, indices, updates = node.inputs[:3]
    xs, qs = shape_of(x), shape_of(indices)
    k, q = qs[-1], len(qs)
    idx = _wrapped_indices(b, m, "indices", indices, list(xs[:k]))
    return hlo(
        b,
        "ScatterND",
        x,
        idx,
        updates,
        type=out_type(m),
        computation=_reduction(node),
        index_vector_dim=q - 1,
        update_window_dims=list(range(q - 1, q - 1 + len(xs) - k)),
        inserted_window_dims=list(range(k)),
        scatter_dims_to_operand_dims=list(range(k)),
    )


@lower("onnx", "hlo", ("ScatterElements", "Scatter"), inputs=3, names=("data", "indices"))
def _scatter_elements(b, m):
    node = m.root
    x, indices, updates = node.inputs[:3]
    xs = shape_of(x)
    r = len(xs)
    axis = normalize_axis(int(attr(node, "axis", 0)), r)
    idx = _wrapped_indices(b, m, "indices", indices, xs[axis])
    vectors = _full_index_vectors(b, idx, r, axis)
    return hlo(
        b,
        "ScatterND",
        x,
        vectors,
        updates,
        type=out_type(m),
        computation=_reduction(node),
        index_vector_dim=r,
        update_window_dims=[],
        inserted_window_dims=list(range(r)),
        scatter_dims_to_operand_dims=list(range(r)),
    )


# ---------------------------------------------------------------------------
# Constants and shape queries
# ---------------------------------------------------------------------------


def _constant_value(node):
    for name in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        v = node.attr(name)
        if v is None:
            continue
        if isinstance(v, Tensor):
            return v.numpy()
        return np.asarray(v, np.float32 if name.startswith("value_float") else np.int64)
    return None


@lower("onnx", "hlo", "Constant", inputs=0)
def _constant(b, m):
    data = _constant_value(m.root)
    if data is None or data.dtype.kind in "OUS":
        raise Refuse("Constant holds no numeric tensor")
    t = Tensor.from_array(data)
    return hlo(b, "Constant", type=t.type, value=t)


@lower("onnx", "hlo", ("Shape", "Size"), inputs=1)
def _shape_constant(b, m):
    """Shape / Size of a static shape: a constant."""
    node = m.root
    xs = shape_of(node.inputs[0])
    if node.op == "Size":
        data = np.asarray(int(np.prod(xs, dtype=np.int64)), np.int64)
    else:
        rank = len(xs)
        start, end = int(attr(node, "start", 0)), int(attr(node, "end", rank))
        start = min(max(start + rank if start < 0 else start, 0), rank)
        end = min(max(end + rank if end < 0 else end, 0), rank)
        data = np.asarray(xs[start:end], np.int64)
    return hlo(b, "Constant", type=TensorType("int64", data.shape), value=Tensor.from_array(data))


@lower("onnx", "hlo", "ConstantOfShape", inputs=1)
def _constant_of_shape(b, m):
    t = out_type(m)
    value = m.root.attr("value")
    fill = 0 if value is None else value.numpy().reshape(-1)[0]
    return full(b, fill, t.dtype, t.shape)


@lower("onnx", "hlo", "Range", inputs=3, names=("start", "limit", "delta"))
def _range(b, m):
    start, limit, delta = (np.asarray(const_input(m, n, n)).reshape(()) for n in ("start", "limit", "delta"))
    t = out_type(m)
    budget.check_range(start, limit, delta, np.dtype(_np_dtype(t.dtype)).itemsize, where=m.root.label)
    data = np.arange(start, limit, delta).astype(_np_dtype(t.dtype))
    return hlo(b, "Constant", type=TensorType(t.dtype, data.shape), value=Tensor.from_array(data))


def _np_dtype(name):
    from ...types import element_type

    return element_type(name).numpy


@lower("onnx", "hlo", "DepthToSpace", inputs=1)
def _depth_to_space(b, m):
    node = m.root
    x = node.inputs[0]
    n, c, h, w = shape_of(x)
    bs = int(attr(node, "blocksize"))
    mode = text_attr(node, "mode", "DCR")
    if mode == "DCR":
        y = reshape(b, x, (n, bs, bs, c // (bs * bs), h, w))
        y = transpose(b, y, [0, 3, 4, 1, 5, 2])
    else:
        y = reshape(b, x, (n, c // (bs * bs), bs, bs, h, w))
        y = transpose(b, y, [0, 1, 4, 2, 5, 3])
    return reshape(b, y, (n, c // (bs * bs), h * bs, w * bs))


@lower("onnx", "hlo", "SpaceToDepth", inputs=1)
def _space_to_depth(b, m):
    x = m.root.inputs[0]
    n, c, h, w = shape_of(x)
    bs = int(attr(m.root, "blocksize"))
    mode = text_attr(m.root, "mode", "DCR")
    y = reshape(b, x, (n, c, h // bs, bs, w // bs, bs))
    y = transpose(b, y, [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4])
    return reshape(b, y, (n, c * bs * bs, h // bs, w // bs))


@lower("onnx", "hlo", "Trilu", inputs=(1, 2), names=("x", "k"))
def _trilu(b, m):
    node = m.root
    x = node.inputs[0]
    k = const_ints(m, "k")[0] if m["k"] is not None else 0
    return hlo(b, "Trilu", x, type=out_type(m), upper=bool(attr(node, "upper", 1)), k=k)


@lower("onnx", "hlo", "OneHot", inputs=3, names=("indices", "depth", "values"))
def _one_hot(b, m):
    node = m.root
    indices, depth, values = node.inputs[:3]
    d = int(np.asarray(const_input(m, "depth", "depth")).reshape(-1)[0])
    t = out_type(m)
    axis = normalize_axis(int(attr(node, "axis", -1)), len(t.shape))
    idx = convert(b, indices, "int64")
    idx = select(b, compare(b, idx, scalar(b, 0, "int64"), "LT"), binary(b, "Add", idx, scalar(b, d, "int64")), idx)
    dims = [i for i in range(len(t.shape)) if i != axis]
    hot = compare(b, iota(b, "int64", t.shape, axis), broadcast_in_dim(b, idx, t.shape, dims), "EQ")
    off = reshape(b, slice_(b, values, [0], [1]), ())
    on = reshape(b, slice_(b, values, [1], [2]), ())
    return select(b, hot, broadcast_in_dim(b, on, t.shape, []), broadcast_in_dim(b, off, t.shape, []))


@lower("onnx", "hlo", "EyeLike", inputs=1)
def _eye_like(b, m):
    node = m.root
    t = out_type(m)
    k = int(attr(node, "k", 0))
    rows = iota(b, "int64", t.shape, 0)
    cols = iota(b, "int64", t.shape, 1)
    diag = compare(b, binary(b, "Add", rows, scalar(b, k, "int64")), cols, "EQ")
    if t.dtype == "bool":
        return diag
    return convert(b, diag, t.dtype)


# cumulative op -> (ReduceWindow computation, its identity)
CUMULATIVE = {"CumSum": ("ADD", 0), "CumProd": ("MUL", 1)}


@lower("onnx", "hlo", tuple(CUMULATIVE), inputs=2, names=("x", "axis"))
def _cumulative(b, m):
    """CumSum / CumProd: a ReduceWindow as long as the axis over the input padded in front."""
    node = m.root
    computation, identity = CUMULATIVE[node.op]
    x = node.inputs[0]
    xs = shape_of(x)
    axis = normalize_axis(const_ints(m, "axis")[0], len(xs))
    exclusive, reverse = int(attr(node, "exclusive", 0)), int(attr(node, "reverse", 0))
    n = xs[axis]
    y = hlo(b, "Reverse", x, type=static_type(x), dimensions=[axis]) if reverse else x
    low = [0] * len(xs)
    high = [0] * len(xs)
    low[axis] = n if exclusive else n - 1
    if exclusive:
        high[axis] = -1
    padded = pad_value(b, y, low, high, identity)
    window = [1] * len(xs)
    window[axis] = n
    y = hlo(
        b,
        "ReduceWindow",
        padded,
        scalar(b, identity, dtype_of(x)),
        type=static_type(x),
        computation=computation,
        window_dimensions=window,
    )
    return hlo(b, "Reverse", y, type=static_type(y), dimensions=[axis]) if reverse else y


@lower("onnx", "hlo", "ReverseSequence", inputs=2)
def _reverse_sequence(b, m):
    node = m.root
    x, lengths = node.inputs[:2]
    return hlo(
        b,
        "ReverseSequence",
        x,
        lengths,
        type=out_type(m),
        batch_axis=int(attr(node, "batch_axis", 1)),
        time_axis=int(attr(node, "time_axis", 0)),
    )
