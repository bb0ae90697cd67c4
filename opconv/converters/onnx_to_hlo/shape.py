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
from ._common import (Refuse, attr, binary, broadcast, broadcast_in_dim, compare, concat, const_input, const_ints,
                      convert, dtype_of, full, hlo, iota, normalize_axis, optional_input, out_type, reshape,
                      op_rules, rules_for_arities, scalar, select, shape_of, slice_, static_type, transpose)
from .nn import pad_value


def _to_out_shape(b, m):
    return reshape(b, m.root.inputs[0], out_type(m).shape)


def _reshape_like_output(b, m):
    """Reshape, Flatten, Squeeze, Unsqueeze: only the (static) output shape matters."""
    x = m.root.inputs[0]
    t = out_type(m)
    if shape_of(x) == t.shape:
        return hlo(b, "Copy", x, type=t)
    return reshape(b, x, t.shape)


def _transpose(b, m):
    x = m.root.inputs[0]
    rank = len(shape_of(x))
    perm = list(attr(m.root, "perm", list(range(rank))[::-1]))
    y = transpose(b, x, perm)
    return y if y is not x else hlo(b, "Copy", x, type=static_type(x))


def _concat(b, m):
    values = [v for v in m.root.inputs if v is not None]
    rank = len(shape_of(values[0]))
    axis = normalize_axis(int(attr(m.root, "axis", 1)), rank)
    values = [v for v in values if shape_of(v)[axis] != 0] or values[:1]
    y = concat(b, values, axis)
    return y if len(values) > 1 else hlo(b, "Copy", y, type=static_type(y))


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
    return (outs + [None] * m.n_outputs)[:m.n_outputs]


def _slice(b, m):
    node = m.root
    x = node.inputs[0]
    xs = shape_of(x)
    rank = len(xs)
    if (node.version or 10) < 10:
        starts, ends = list(attr(node, "starts")), list(attr(node, "ends"))
        axes = list(attr(node, "axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = const_ints(m, "x1", "starts"), const_ints(m, "x2", "ends")
        axes = const_ints(m, "x3", "axes") if optional_input(m, 3) is not None else list(range(len(starts)))
        steps = const_ints(m, "x4", "steps") if optional_input(m, 4) is not None else [1] * len(starts)
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


def _pad(b, m):
    node = m.root
    x = node.inputs[0]
    xs = shape_of(x)
    rank = len(xs)
    mode = attr(node, "mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in PAD_MODES:
        raise Refuse(f"Pad mode {mode!r} has no HLO form")
    if (node.version or 11) < 11:
        pads = list(attr(node, "pads" if (node.version or 2) >= 2 else "paddings"))
        value = float(attr(node, "value", 0.0))
        axes = list(range(rank))
    else:
        pads = const_ints(m, "x1", "pads")
        value_input = optional_input(m, 2)
        value = 0 if value_input is None else np.asarray(const_input(m, "x2", "constant_value")).reshape(-1)
        value = value if isinstance(value, int) else (value[0] if value.size else 0)
        axes = const_ints(m, "x3", "axes") if optional_input(m, 3) is not None else list(range(rank))
    axes = [normalize_axis(a, rank) for a in axes]
    low, high = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        low[a], high[a] = pads[i], pads[i + len(axes)]
    if mode == "constant":
        return pad_value(b, x, low, high, np.asarray(value).astype(np.dtype(_np(x))).item()) \
            if any(low) or any(high) else hlo(b, "Copy", x, type=static_type(x))
    out = tuple(d + lo + hi for d, lo, hi in zip(xs, low, high))
    return hlo(b, "Pad", x, scalar(b, 0, dtype_of(x)), type=TensorType(dtype_of(x), out), mode=PAD_MODES[mode],
               edge_padding_low=low, edge_padding_high=high, interior_padding=[0] * rank)


def _np(x):
    from ...types import element_type
    return element_type(dtype_of(x)).numpy


def _expand(b, m):
    x = m.root.inputs[0]
    t = out_type(m)
    y = broadcast(b, x, t.shape)
    return y if y is not x else hlo(b, "Copy", x, type=t)


def _tile(b, m):
    x = m.root.inputs[0]
    xs = shape_of(x)
    repeats = const_ints(m, "x1", "repeats")
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


def _gather(b, m):
    node = m.root
    x, indices = node.inputs[:2]
    xs, qs = shape_of(x), shape_of(indices)
    r, q = len(xs), len(qs)
    axis = normalize_axis(int(attr(node, "axis", 0)), r)
    idx = _wrapped_indices(b, m, "x1", indices, xs[axis])
    slice_sizes = list(xs)
    slice_sizes[axis] = 1
    return hlo(b, "Gather", x, idx, type=out_type(m), index_vector_dim=q, start_index_map=[axis],
               collapsed_slice_dims=[axis], offset_dims=list(range(axis)) + list(range(axis + q, r - 1 + q)),
               slice_sizes=slice_sizes, indices_are_sorted=False)


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


def _gather_elements(b, m):
    node = m.root
    x, indices = node.inputs[:2]
    xs = shape_of(x)
    r = len(xs)
    axis = normalize_axis(int(attr(node, "axis", 0)), r)
    idx = _wrapped_indices(b, m, "x1", indices, xs[axis])
    vectors = _full_index_vectors(b, idx, r, axis)
    return hlo(b, "Gather", x, vectors, type=out_type(m), index_vector_dim=r, start_index_map=list(range(r)),
               collapsed_slice_dims=list(range(r)), offset_dims=[], slice_sizes=[1] * r, indices_are_sorted=False)


def _gather_nd(b, m):
    node = m.root
    x, indices = node.inputs[:2]
    if int(attr(node, "batch_dims", 0)):
        raise Refuse("GatherND with batch_dims > 0 is not mapped")
    xs, qs = shape_of(x), shape_of(indices)
    k = qs[-1]
    idx = _wrapped_indices(b, m, "x1", indices, list(xs[:k]))
    q = len(qs)
    return hlo(b, "Gather", x, idx, type=out_type(m), index_vector_dim=q - 1, start_index_map=list(range(k)),
               collapsed_slice_dims=list(range(k)), offset_dims=list(range(q - 1, q - 1 + len(xs) - k)),
               slice_sizes=[1] * k + list(xs[k:]), indices_are_sorted=False)


SCATTER_REDUCTIONS = {"none": "UPDATE", "add": "ADD", "mul": "MUL", "min": "MIN", "max": "MAX"}


def _reduction(node) -> str:
    red = attr(node, "reduction", "none")
    red = red.decode() if isinstance(red, bytes) else red
    if red not in SCATTER_REDUCTIONS:
        raise Refuse(f"reduction {red!r} has no HLO combiner")
    return SCATTER_REDUCTIONS[red]


def _scatter_nd(b, m):
    node = m.root
    x, indices, updates = node.inputs[:3]
    xs, qs = shape_of(x), shape_of(indices)
    k, q = qs[-1], len(qs)
    idx = _wrapped_indices(b, m, "x1", indices, list(xs[:k]))
    return hlo(b, "ScatterND", x, idx, updates, type=out_type(m), computation=_reduction(node),
               index_vector_dim=q - 1, update_window_dims=list(range(q - 1, q - 1 + len(xs) - k)),
               inserted_window_dims=list(range(k)), scatter_dims_to_operand_dims=list(range(k)))


def _scatter_elements(b, m):
    node = m.root
    x, indices, updates = node.inputs[:3]
    xs = shape_of(x)
    r = len(xs)
    axis = normalize_axis(int(attr(node, "axis", 0)), r)
    idx = _wrapped_indices(b, m, "x1", indices, xs[axis])
    vectors = _full_index_vectors(b, idx, r, axis)
    return hlo(b, "ScatterND", x, vectors, updates, type=out_type(m), computation=_reduction(node),
               index_vector_dim=r, update_window_dims=[], inserted_window_dims=list(range(r)),
               scatter_dims_to_operand_dims=list(range(r)))


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


def _constant(b, m):
    data = _constant_value(m.root)
    if data is None or data.dtype.kind in "OUS":
        raise Refuse("Constant holds no numeric tensor")
    t = Tensor.from_array(data)
    return hlo(b, "Constant", type=t.type, value=t)


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


def _constant_of_shape(b, m):
    t = out_type(m)
    value = m.root.attr("value")
    fill = 0 if value is None else value.numpy().reshape(-1)[0]
    return full(b, fill, t.dtype, t.shape)


def _range(b, m):
    start, limit, delta = (np.asarray(const_input(m, f"x{i}", n)).reshape(()) for i, n in
                           enumerate(("start", "limit", "delta")))
    t = out_type(m)
    budget.check_range(start, limit, delta, np.dtype(_np_dtype(t.dtype)).itemsize, where=m.root.label)
    data = np.arange(start, limit, delta).astype(_np_dtype(t.dtype))
    return hlo(b, "Constant", type=TensorType(t.dtype, data.shape), value=Tensor.from_array(data))


def _np_dtype(name):
    from ...types import element_type
    return element_type(name).numpy


def _depth_to_space(b, m):
    node = m.root
    x = node.inputs[0]
    n, c, h, w = shape_of(x)
    bs = int(attr(node, "blocksize"))
    mode = attr(node, "mode", "DCR")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode == "DCR":
        y = reshape(b, x, (n, bs, bs, c // (bs * bs), h, w))
        y = transpose(b, y, [0, 3, 4, 1, 5, 2])
    else:
        y = reshape(b, x, (n, c // (bs * bs), bs, bs, h, w))
        y = transpose(b, y, [0, 1, 4, 2, 5, 3])
    return reshape(b, y, (n, c // (bs * bs), h * bs, w * bs))


def _space_to_depth(b, m):
    x = m.root.inputs[0]
    n, c, h, w = shape_of(x)
    bs = int(attr(m.root, "blocksize"))
    mode = attr(m.root, "mode", "DCR")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    y = reshape(b, x, (n, c, h // bs, bs, w // bs, bs))
    y = transpose(b, y, [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4])
    return reshape(b, y, (n, c * bs * bs, h // bs, w // bs))


def _trilu(b, m):
    node = m.root
    x = node.inputs[0]
    k = const_ints(m, "x1", "k")[0] if optional_input(m, 1) is not None else 0
    return hlo(b, "Trilu", x, type=out_type(m), upper=bool(attr(node, "upper", 1)), k=k)


def _one_hot(b, m):
    node = m.root
    indices, depth, values = node.inputs[:3]
    d = int(np.asarray(const_input(m, "x1", "depth")).reshape(-1)[0])
    t = out_type(m)
    axis = normalize_axis(int(attr(node, "axis", -1)), len(t.shape))
    idx = convert(b, indices, "int64")
    idx = select(b, compare(b, idx, scalar(b, 0, "int64"), "LT"), binary(b, "Add", idx, scalar(b, d, "int64")), idx)
    dims = [i for i in range(len(t.shape)) if i != axis]
    hot = compare(b, iota(b, "int64", t.shape, axis), broadcast_in_dim(b, idx, t.shape, dims), "EQ")
    off = reshape(b, slice_(b, values, [0], [1]), ())
    on = reshape(b, slice_(b, values, [1], [2]), ())
    return select(b, hot, broadcast_in_dim(b, on, t.shape, []), broadcast_in_dim(b, off, t.shape, []))


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


def _cumulative(computation: str, identity: int):
    return lambda b, m: _cumulative_window(b, m, computation, identity)


def _cumulative_window(b, m, computation: str, identity: int):
    """CumSum / CumProd: a ReduceWindow as long as the axis over the input padded in front."""
    node = m.root
    x = node.inputs[0]
    xs = shape_of(x)
    axis = normalize_axis(const_ints(m, "x1", "axis")[0], len(xs))
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
    y = hlo(b, "ReduceWindow", padded, scalar(b, identity, dtype_of(x)), type=static_type(x),
            computation=computation, window_dimensions=window)
    return hlo(b, "Reverse", y, type=static_type(y), dimensions=[axis]) if reverse else y


def _reverse_sequence(b, m):
    node = m.root
    x, lengths = node.inputs[:2]
    return hlo(b, "ReverseSequence", x, lengths, type=out_type(m), batch_axis=int(attr(node, "batch_axis", 1)),
               time_axis=int(attr(node, "time_axis", 0)))


def _rules():
    rules = []
    for op in ("Reshape", "Flatten", "Squeeze", "Unsqueeze"):
        rules += rules_for_arities(f"{op}-to-Reshape", op, _reshape_like_output, [1, 2])
    rules += rules_for_arities("Transpose-to-Transpose", "Transpose", _transpose, [1])
    rules += rules_for_arities("Concat-to-Concatenate", "Concat", _concat, range(1, 65))
    for n_out in range(1, 17):
        rules += rules_for_arities(f"Split-{n_out}-to-Slice", "Split", _split, [1, 2], _outputs=n_out)
    rules += op_rules("Slice-to-Slice", "Slice", _slice, 5)
    rules += op_rules("Pad-to-Pad", "Pad", _pad, 4)
    rules += rules_for_arities("Expand-to-BroadcastInDim", "Expand", _expand, [2])
    rules += rules_for_arities("Tile-to-BroadcastInDim", "Tile", _tile, [2])
    rules += rules_for_arities("Gather-to-Gather", "Gather", _gather, [2])
    rules += rules_for_arities("GatherElements-to-Gather", "GatherElements", _gather_elements, [2])
    rules += rules_for_arities("GatherND-to-Gather", "GatherND", _gather_nd, [2])
    rules += rules_for_arities("ScatterND-to-ScatterND", "ScatterND", _scatter_nd, [3])
    rules += rules_for_arities("ScatterElements-to-ScatterND", "ScatterElements", _scatter_elements, [3])
    rules += rules_for_arities("Scatter-to-ScatterND", "Scatter", _scatter_elements, [3])
    rules += rules_for_arities("Constant-to-Constant", "Constant", _constant, [0])
    rules += rules_for_arities("Shape-to-Constant", "Shape", _shape_constant, [1])
    rules += rules_for_arities("Size-to-Constant", "Size", _shape_constant, [1])
    rules += rules_for_arities("ConstantOfShape-to-BroadcastInDim", "ConstantOfShape", _constant_of_shape, [1])
    rules += rules_for_arities("Range-to-Constant", "Range", _range, [3])
    rules += rules_for_arities("DepthToSpace-to-Transpose", "DepthToSpace", _depth_to_space, [1])
    rules += rules_for_arities("SpaceToDepth-to-Transpose", "SpaceToDepth", _space_to_depth, [1])
    rules += rules_for_arities("Trilu-to-Trilu", "Trilu", _trilu, [1, 2])
    rules += rules_for_arities("OneHot-to-Compare", "OneHot", _one_hot, [3])
    rules += rules_for_arities("EyeLike-to-Iota", "EyeLike", _eye_like, [1])
    rules += rules_for_arities("CumSum-to-ReduceWindow", "CumSum", _cumulative("ADD", 0), [2])
    rules += rules_for_arities("CumProd-to-ReduceWindow", "CumProd", _cumulative("MUL", 1), [2])
    rules += rules_for_arities("ReverseSequence-to-ReverseSequence", "ReverseSequence", _reverse_sequence, [2])
    return rules


RULES = _rules()
