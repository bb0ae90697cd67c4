"""HLO ops with StableHLO regions: reductions (the ``computation`` enum becomes the body), arg-reductions,
reduce_window, select_and_scatter, sort and top-k, map, while and if."""

from __future__ import annotations

import math

import numpy as np

from ....kernels.conv import auto_pad
from ....types import element_type
from ._writer import FunctionWriter, Operand, emitter, ints

# The computation enum's associative combiners; SUB, DIV and UPDATE are scatter-only (current op update).
COMBINERS = {
    "ADD": "stablehlo.add",
    "MUL": "stablehlo.multiply",
    "MIN": "stablehlo.minimum",
    "MAX": "stablehlo.maximum",
    "AND": "stablehlo.and",
    "OR": "stablehlo.or",
    "XOR": "stablehlo.xor",
}
_SCATTER_ONLY = {"SUB": "stablehlo.subtract", "DIV": "stablehlo.divide"}


def combiner_region(w: FunctionWriter, computation: str, dtype: str, *, scatter: bool = False) -> str:
    """The (a, b) -> a OP b region of a ``computation`` enum value."""
    if scatter and computation == "UPDATE":
        return w.region([(dtype, ()), (dtype, ())], lambda a: [a[1]])
    name = COMBINERS.get(computation) or (_SCATTER_ONLY.get(computation) if scatter else None)
    if name is None:
        raise w.error(f"computation {computation} has no StableHLO {'scatter' if scatter else 'reduction'} body")
    return w.scalar_region(dtype, name)


def identity(w: FunctionWriter, computation: str, dtype: str):
    """The identity element of an associative computation, as a Python number."""
    et = element_type(dtype)
    if computation in ("ADD", "OR", "XOR"):
        return 0
    if computation == "MUL":
        return 1
    if computation == "AND":
        return True if dtype == "bool" else -1 if not dtype.startswith("uint") else np.iinfo(et.numpy).max
    if computation in ("MIN", "MAX"):
        sign = 1 if computation == "MIN" else -1
        if et.is_float:
            return sign * np.inf
        if dtype == "bool":
            return computation == "MIN"
        info = np.iinfo(et.numpy)
        return info.max if computation == "MIN" else info.min
    raise w.error(f"computation {computation} has no identity element")


def linear_index(w: FunctionWriter, shape) -> Operand:
    """Row-major position of every element of ``shape`` (int64)."""
    total, stride = None, 1
    for axis in reversed(range(len(shape))):
        term = w.iota("int64", shape, axis)
        if stride != 1:
            term = w.mul(term, w.constant(stride, "int64", shape))
        total = term if total is None else w.add(total, term)
        stride *= shape[axis]
    return total if total is not None else w.constant(0, "int64", ())


def _wins(w: FunctionWriter, a: Operand, b: Operand, larger: bool) -> tuple[Operand, Operand]:
    """(a strictly better than b, a ties b) for max/min selection; NaN beats numbers, as numpy's argmax does."""
    better = w.compare(a, b, "GT" if larger else "LT")
    tie = w.compare(a, b, "EQ")
    if a.is_float:
        a_nan, b_nan = w.compare(a, a, "NE"), w.compare(b, b, "NE")
        b_num = w.unary("stablehlo.not", b_nan)
        better = w.binary("stablehlo.or", better, w.binary("stablehlo.and", a_nan, b_num))
        tie = w.binary("stablehlo.or", tie, w.binary("stablehlo.and", a_nan, b_nan))
    return better, tie


def extreme_with_index(
    w: FunctionWriter,
    values: list[Operand],
    index: Operand,
    dims,
    larger: bool,
    last: bool,
    inits: list[Operand] | None = None,
) -> list[Operand]:
    """Reduce ``values[0]`` over ``dims`` to its max/min, carrying the other values and ``index`` from its
    position; ties go to the smallest index (the largest with ``last``)."""
    dtypes = [v.dtype for v in values] + [index.dtype]
    if inits is None:
        inits = [w.scalar(identity(w, "MAX" if larger else "MIN", values[0].dtype), values[0].dtype)]
        inits += [w.scalar(0, v.dtype) for v in values[1:]]
    inits = list(inits) + [w.scalar(-1 if last else np.iinfo(np.int64).max, index.dtype)]
    return w.reduce(list(values) + [index], inits, dims, selection_region(w, dtypes, larger, last))


def selection_region(w: FunctionWriter, dtypes, larger: bool, last: bool) -> str:
    """Body picking, of two (value, ..., index) tuples, the one with the larger (smaller) first value;
    ties go to the smaller index (the larger with ``last``): associative and commutative, so exact."""

    def body(args):
        n = len(dtypes)
        a, b = args[:n], args[n:]
        better, tie = _wins(w, a[0], b[0], larger)
        earlier = w.compare(a[-1], b[-1], "GT" if last else "LT")
        take_a = w.binary("stablehlo.or", better, w.binary("stablehlo.and", tie, earlier))
        return [w.select(take_a, x, y) for x, y in zip(a, b)]

    return w.region([(d, ()) for d in dtypes] * 2, body)


@emitter("Reduce")
def reduce(w, *operands, dimensions, type=None, computation):
    n = len(operands) // 2
    inputs, inits = list(operands[:n]), list(operands[n:])
    dims = [d % inputs[0].rank for d in dimensions]
    if n == 1:
        x, init = inputs[0], inits[0]
        if computation in COMBINERS:
            return w.reduce(inputs, inits, dims, combiner_region(w, computation, x.dtype))
        return _fold_reduce(w, x, init, dims, computation)
    if computation not in ("MIN", "MAX"):
        raise w.error(f"Reduce of {n} inputs needs MIN or MAX, got {computation}")
    index = linear_index(w, inputs[0].shape)
    return extreme_with_index(w, inputs, index, dims, computation == "MAX", False, inits)[:n]


def _fold_reduce(w: FunctionWriter, x: Operand, init: Operand, dims, computation: str) -> Operand:
    """The non-associative computations, folded from ``init`` in order, in closed form:
    SUB init - sum, DIV init / prod, L2 sqrt(init**2 + sum x**2), COUNT init + n, UPDATE the last element."""
    count = math.prod(x.shape[d] for d in dims)
    if computation == "UPDATE":
        if count == 0:
            return w.broadcast_to(init, [s for i, s in enumerate(x.shape) if i not in dims])
        last = w.slice(x, [s - 1 if i in dims else 0 for i, s in enumerate(x.shape)], x.shape)
        return w.reshape(last, [s for i, s in enumerate(x.shape) if i not in dims])
    if computation == "COUNT":
        out_shape = [s for i, s in enumerate(x.shape) if i not in dims]
        return w.add(w.broadcast_to(init, out_shape), w.constant(count, x.dtype, out_shape))
    if computation == "SUB":
        total = w.sum(x, dims)
        return w.sub(w.broadcast_to(init, total.shape), total)
    if computation == "DIV" and x.is_float:
        product = w.reduce_simple(x, dims, "stablehlo.multiply", 1)
        return w.div(w.broadcast_to(init, product.shape), product)
    if computation == "L2" and x.is_float:
        squares = w.sum(w.mul(x, x), dims)
        start = w.broadcast_to(w.mul(init, init), squares.shape)
        return w.unary("stablehlo.sqrt", w.add(start, squares))
    raise w.error(f"Reduce with computation {computation} of {x.dtype} has no StableHLO form")


def _arg_extreme(w, x, axis, keepdims, select_last_index, larger):
    dtype, shape = w.out()
    axis %= x.rank
    index = w.iota("int64", x.shape, axis)
    best = extreme_with_index(w, [x], index, [axis], larger, bool(select_last_index))[1]
    return w.convert(w.reshape(best, shape), dtype)


@emitter("ArgMax")
def argmax(w, x, *, axis, keepdims, select_last_index):
    return _arg_extreme(w, x, axis, keepdims, select_last_index, True)


@emitter("ArgMin")
def argmin(w, x, *, axis, keepdims, select_last_index):
    return _arg_extreme(w, x, axis, keepdims, select_last_index, False)


def padding_attr(pairs) -> str:
    pairs = [[int(lo), int(hi)] for lo, hi in pairs]
    body = ", ".join(f"[{lo}, {hi}]" for lo, hi in pairs)
    return f"dense<[{body}]> : tensor<{len(pairs)}x2xi64>" if pairs else "dense<> : tensor<0x2xi64>"


def window_reduce(
    w: FunctionWriter,
    x: Operand,
    init: Operand,
    computation: str,
    window,
    strides,
    window_dilations,
    low,
    high,
    base_dilations=None,
    out_shape=None,
) -> Operand:
    """reduce_window of ``x`` padded (and base-dilated) with the computation's identity, starting from ``init``."""
    rank = x.rank
    strides = list(strides or [1] * rank)
    window_dilations = list(window_dilations or [1] * rank)
    base = list(base_dilations or [1] * rank)
    if any(low) or any(high) or any(b != 1 for b in base):
        fill = w.scalar(identity(w, computation, x.dtype), x.dtype)
        shape = [lo + hi + s + max(0, s - 1) * (b - 1) for s, lo, hi, b in zip(x.shape, low, high, base)]
        x = w.op1(
            "stablehlo.pad",
            [x, fill],
            x.dtype,
            shape,
            {
                "edge_padding_low": ints(low),
                "edge_padding_high": ints(high),
                "interior_padding": ints(b - 1 for b in base),
            },
        )
    if out_shape is None:
        out_shape = [
            (s - ((k - 1) * d + 1)) // st + 1 for s, k, d, st in zip(x.shape, window, window_dilations, strides)
        ]
    attrs = {
        "window_dimensions": ints(window),
        "window_strides": ints(strides),
        "window_dilations": ints(window_dilations),
    }
    return w.op1(
        "stablehlo.reduce_window",
        [x, w.reshape(init, ())],
        x.dtype,
        out_shape,
        attrs,
        [combiner_region(w, computation, x.dtype)],
    )


def explicit_padding(sizes, window, strides, dilations, out_sizes, mode: str, pads_low=None):
    """(low, high) padding giving ``out_sizes`` windows: ``mode``'s low padding (SAME_* or the explicit
    ``pads_low``), and the high padding the last window needs (negative when the tail is never read)."""
    n = len(sizes)
    strides, dilations = list(strides or [1] * n), list(dilations or [1] * n)
    if mode.startswith("SAME"):
        low, _ = auto_pad(sizes, window, strides, dilations, mode)
    else:
        low = list(pads_low or [0] * n)
    high = [
        (o - 1) * s + (k - 1) * d + 1 - size - lo
        for o, s, k, d, size, lo in zip(out_sizes, strides, window, dilations, sizes, low)
    ]
    return list(low), high


@emitter("ReduceWindow")
def reduce_window(
    w, *operands, computation, window_dimensions, window_strides, base_dilations, window_dilations, auto_pad, ceil_mode
):
    if len(operands) != 2:
        raise w.error(f"ReduceWindow of {len(operands) // 2} inputs ({computation}) has no StableHLO form here")
    x, init = operands
    _, out_shape = w.out()
    base = list(base_dilations or [1] * x.rank)
    sizes = [(s - 1) * b + 1 if s else 0 for s, b in zip(x.shape, base)]
    low, high = explicit_padding(
        sizes, window_dimensions, window_strides, window_dilations, out_shape, (auto_pad or "NOTSET").upper()
    )
    return window_reduce(
        w, x, init, computation, window_dimensions, window_strides, window_dilations, low, high, base, out_shape
    )


@emitter("SelectAndScatter")
def select_and_scatter(
    w, x, source, init_value, *, select_type, computation, window_dimensions, window_strides, padding
):
    rank = x.rank
    flat = list(padding or [0] * (2 * rank))
    pairs = list(zip(flat[:rank], flat[rank:]))
    select = w.region([(x.dtype, ())] * 2, lambda a: [w.compare(a[0], a[1], select_type)])
    scatter = combiner_region(w, computation, x.dtype, scatter=True)
    attrs = {
        "window_dimensions": ints(window_dimensions),
        "window_strides": ints(window_strides or [1] * rank),
        "padding": padding_attr(pairs),
    }
    return w.op1(
        "stablehlo.select_and_scatter",
        [x, source, w.reshape(init_value, ())],
        x.dtype,
        x.shape,
        attrs,
        [select, scatter],
    )


def sort_along(
    w: FunctionWriter,
    inputs: list[Operand],
    axis: int,
    descending: bool,
    stable: bool,
    key: int = 0,
    ties_by: int | None = None,
):
    """stablehlo.sort of ``inputs`` ordered by ``inputs[key]`` (equal keys ascending by ``inputs[ties_by]``)."""

    def compare(args):
        a, b = args[2 * key], args[2 * key + 1]
        first = w.compare(a, b, "GT" if descending else "LT")
        if ties_by is None:
            return [first]
        later = w.compare(args[2 * ties_by], args[2 * ties_by + 1], "LT")
        tie = w.op1("stablehlo.and", [w.compare(a, b, "EQ"), later], "bool", ())
        return [w.op1("stablehlo.or", [first, tie], "bool", ())]

    params = [(x.dtype, ()) for x in inputs for _ in (0, 1)]
    region = w.region(params, compare)
    attrs = {"dimension": f"{axis} : i64", "is_stable": "true" if stable else "false"}
    return w.op("stablehlo.sort", inputs, [(x.dtype, x.shape) for x in inputs], attrs, [region])


@emitter("Sort")
def sort(w, *inputs, dimension, descending, is_stable):
    return sort_along(w, list(inputs), dimension % inputs[0].rank, bool(descending), bool(is_stable))


@emitter("Topk")
def topk(w, x, k, *, axis, sorted, largest):
    _, shape = w.out(0)
    index_dtype, _ = w.out(1)
    axis %= x.rank
    # int32 positions: IREE rewrites a sort of (keys, iota) followed by slices into chlo.top_k, which only
    # yields int32 indices (and ignores the comparator's tie-break, see tests/known_failures.json).
    index = w.iota("int32", x.shape, axis)
    values, indices = sort_along(w, [x, index], axis, bool(largest), True, ties_by=1)
    count = shape[axis]
    return w.slice_axis(values, axis, 0, count), w.convert(w.slice_axis(indices, axis, 0, count), index_dtype)


@emitter("PartialReduce")
def partial_reduce(w, *operands, size, comparator, reduction_dim, recall_target, aggregate_to_topk, op_name):
    """The exact top-k, as the reference kernel computes it (a valid answer at any recall target): a stable
    stablehlo.sort of the operands by the comparator region, then the first k along the reduced dim (k is
    the declared result's extent: ``size``, or the candidate count when not aggregated to top-k)."""
    if not operands or len(operands) % 2:
        raise w.error(f"PartialReduce takes N operands then N init values, got {len(operands)} operands")
    inputs = list(operands[: len(operands) // 2])
    axis = int(reduction_dim) % inputs[0].rank
    _, shape = w.out(0)
    keep = shape[axis]
    count = inputs[0].shape[axis]
    if keep > count or (aggregate_to_topk and keep != min(int(size), count)):
        raise w.error(f"the result keeps {keep} elements along dim {axis}, size is {size} of {count}")
    if (
        comparator is None
        or len(comparator.outputs) != 1
        or getattr(comparator.outputs[0].type, "dtype", None) != "bool"
    ):
        raise w.error("PartialReduce needs a comparator region returning one boolean")
    region = w.emit_region(comparator)
    attrs = {"dimension": f"{axis} : i64", "is_stable": "true"}
    ordered = w.op("stablehlo.sort", inputs, [(x.dtype, x.shape) for x in inputs], attrs, [region])
    return [w.slice_axis(x, axis, 0, keep) for x in ordered]


@emitter("Map")
def map_(w, *inputs, dimensions, computation):
    dtype, shape = w.out()
    region = w.emit_region(computation)
    return w.op1("stablehlo.map", list(inputs), dtype, shape, {"dimensions": ints(dimensions)}, [region])


@emitter("While")
def while_(w, *inputs, cond, body):
    cond_region = w.emit_region(cond)
    body_region = w.emit_region(body)
    return w.op("stablehlo.while", list(inputs), [(x.dtype, x.shape) for x in inputs], None, [cond_region, body_region])


@emitter("If")
def if_(w, pred, *, true_branch, false_branch):
    results = [w.out(i) for i in range(len(w.node.outputs))]
    regions = [w.emit_region(true_branch), w.emit_region(false_branch)]
    return w.op("stablehlo.if", [w.reshape(pred, ())], results, None, regions)
