"""Neural-network HLO ops -> ONNX: dot products, convolution, pooling, normalizations, softmax, reductions."""

from __future__ import annotations

import string

import numpy as np

from ...types import TensorType
from ..lowering import fusion
from ._common import INT64_MIN, Ctx, Refuse, constant_value, lower, shape_of

# ---------------------------------------------------------------------------
# Dot products
# ---------------------------------------------------------------------------


def dot_general(c: Ctx, lhs, rhs):
    lb, rb = (
        [int(d) for d in c.a["lhs_batching_dimensions"] or []],
        [int(d) for d in c.a["rhs_batching_dimensions"] or []],
    )
    lc, rc = [int(d) for d in c.a["lhs_contracting_dimensions"]], [int(d) for d in c.a["rhs_contracting_dimensions"]]
    lr, rr = len(shape_of(lhs)), len(shape_of(rhs))
    for dims, rank, side in ((lb + lc, lr, "lhs"), (rb + rc, rr, "rhs")):
        if any(not 0 <= d < rank for d in dims) or len(set(dims)) != len(dims):
            raise Refuse(
                f"{side} batching/contracting dimensions {dims} are not distinct dims of a rank-{rank} operand"
            )
    if len(lb) != len(rb) or len(lc) != len(rc):
        raise Refuse("lhs and rhs name different numbers of batching or contracting dimensions")
    if not lc and lb == list(range(lr)) and rb == list(range(rr)) and lr == rr:
        return c.onnx("Mul", lhs, rhs)  # every dim batched, none contracted: the element-wise product
    if not lb and lc == [lr - 1] and rc == [0] and rr == 2:
        return c.onnx("MatMul", lhs, rhs)
    # The general form as an Einsum: batch letters, then lhs free, then rhs free (DotGeneral's result order).
    letters = iter(string.ascii_letters)
    lhs_l = [""] * lr
    rhs_l = [""] * rr
    for a, b in zip(lb + lc, rb + rc):
        lhs_l[a] = rhs_l[b] = next(letters)
    lhs_l = [ch or next(letters) for ch in lhs_l]
    rhs_l = [ch or next(letters) for ch in rhs_l]
    out = (
        [lhs_l[d] for d in lb]
        + [lhs_l[d] for d in range(lr) if d not in lb + lc]
        + [rhs_l[d] for d in range(rr) if d not in rb + rc]
    )
    return c.onnx("Einsum", lhs, rhs, equation=f"{''.join(lhs_l)},{''.join(rhs_l)}->{''.join(out)}")


lower("DotGeneral", inputs=2)(dot_general)


@lower("DotGeneralBias", inputs=3)
def dot_general_bias(c: Ctx, lhs, rhs, bias):
    return c.onnx("Add", dot_general(c, lhs, rhs), bias)


@lower("Dot", inputs=2)
def dot(c: Ctx, lhs, rhs):
    return c.onnx("MatMul", lhs, rhs)


@lower("Gemm", inputs=[2, 3])
def gemm(c: Ctx, a, b, bias=None):
    return c.onnx("Gemm", a, b, bias, alpha=c.a["alpha"], beta=c.a["beta"], transA=c.a["transA"], transB=c.a["transB"])


# ---------------------------------------------------------------------------
# Convolution and pooling
# ---------------------------------------------------------------------------


def conv(c: Ctx, lhs, rhs, bias=None):
    a = c.a
    n = len(a["input_spatial_dimensions"])
    if a.get("batch_group_count", 1) not in (None, 1):
        raise Refuse("batch_group_count > 1 has no ONNX form")
    auto = a.get("auto_pad") or "NOTSET"
    padding = [int(p) for p in (a.get("padding") or [0] * (2 * n))]
    in_perm = [a["input_batch_dimension"], a["input_feature_dimension"]] + list(a["input_spatial_dimensions"])
    k_perm = [a["kernel_output_feature_dimension"], a["kernel_input_feature_dimension"]] + list(
        a["kernel_spatial_dimensions"]
    )
    out_order = [a["output_batch_dimension"], a["output_feature_dimension"]] + list(a["output_spatial_dimensions"])
    x = lhs if in_perm == list(range(n + 2)) else c.onnx("Transpose", lhs, perm=in_perm)
    w = rhs if k_perm == list(range(n + 2)) else c.onnx("Transpose", rhs, perm=k_perm)
    if any(int(d) != 1 for d in a.get("lhs_dilation") or []):
        y = _conv_transpose(c, x, w, [shape_of(rhs)[d] for d in k_perm], bias, padding, auto)
    else:
        if any(p < 0 for p in padding):
            raise Refuse("negative padding has no ONNX Conv form")
        y = c.onnx(
            "Conv",
            x,
            w,
            bias,
            strides=list(a.get("window_strides") or [1] * n),
            dilations=list(a.get("rhs_dilation") or [1] * n),
            group=int(a.get("feature_group_count") or 1),
            auto_pad=auto,
            pads=padding if auto == "NOTSET" else None,
        )
    if out_order == list(range(n + 2)):
        return y
    return c.onnx("Transpose", y, perm=list(np.argsort(out_order)))


def _conv_transpose(c: Ctx, x, w, w_shape: list[int], bias, padding: list[int], auto: str):
    """A convolution of the lhs-dilated input (x NCHW, w OIHW of ``w_shape``): ConvTranspose, strided by the dilation.

    ConvTranspose(W, strides s, pads b/e, output_padding o) is the stride-s-dilated input padded by
    d*(k-1) - b before and d*(k-1) - e + o after, correlated with W's kernel flipped and its two feature
    axes swapped (per group); so the HLO padding gives b and e (o takes what e cannot, being >= 0)."""
    a = c.a
    n = len(w_shape) - 2
    strides = [int(s) for s in a["lhs_dilation"]]
    dilations = [int(d) for d in (a.get("rhs_dilation") or [1] * n)]
    if any(int(s) != 1 for s in a.get("window_strides") or []) or auto != "NOTSET":
        raise Refuse("lhs_dilation with window strides or auto_pad has no ConvTranspose form")
    kernel = w_shape[2:]
    begin = [d * (k - 1) - p for d, k, p in zip(dilations, kernel, padding[:n])]
    end = [d * (k - 1) - p for d, k, p in zip(dilations, kernel, padding[n:])]
    extra = [max(-e, 0) for e in end]
    if any(b < 0 for b in begin) or any(o >= s for o, s in zip(extra, strides)):
        raise Refuse(
            f"padding {padding} is wider than a ConvTranspose can make (pads >= 0, output_padding < strides {strides})"
        )
    group = int(a.get("feature_group_count") or 1)
    out_f, in_per_group = w_shape[:2]
    if group > 1:  # (O, I/g, k) -> (g, O/g, I/g, k) -> (g, I/g, O/g, k) -> (I, O/g, k)
        w = c.onnx("Reshape", w, c.i64([group, out_f // group, in_per_group, *kernel]))
        w = c.onnx("Transpose", w, perm=[0, 2, 1] + list(range(3, 3 + n)))
        w = c.onnx("Reshape", w, c.i64([group * in_per_group, out_f // group, *kernel]))
    else:
        w = c.onnx("Transpose", w, perm=[1, 0] + list(range(2, 2 + n)))
    spatial = list(range(2, 2 + n))
    w = c.onnx("Slice", w, c.i64([-1] * n), c.i64([INT64_MIN] * n), c.i64(spatial), c.i64([-1] * n))
    return c.onnx(
        "ConvTranspose",
        x,
        w,
        bias,
        strides=strides,
        dilations=dilations,
        group=group,
        pads=begin + [max(e, 0) for e in end],
        output_padding=extra if any(extra) else None,
    )


lower("Conv", inputs=2)(conv)
lower("ConvBias", inputs=3)(conv)


def _nchw(c: Ctx, x, dims):
    if dims is not None and [int(d) for d in dims] != list(range(2, len(shape_of(x)))):
        raise Refuse(f"pooling over dims {list(dims)} (only NCHW-style trailing dims are mapped)")


@lower("MaxPool", inputs=1, outputs=[1, 2])
def max_pool(c: Ctx, x):
    a = c.a
    n_out = len(c.node.outputs)
    return c.onnx(
        "MaxPool",
        x,
        kernel_shape=a["kernel_shape"],
        strides=a.get("strides"),
        dilations=a.get("dilations"),
        pads=a.get("padding") if a["auto_pad"] == "NOTSET" else None,
        auto_pad=a["auto_pad"],
        ceil_mode=int(bool(a["ceil_mode"])),
        storage_order=a["storage_order"],
        _outputs=n_out,
    )


@lower("AveragePool", inputs=1)
def avg_pool(c: Ctx, x):
    a = c.a
    _nchw(c, x, a["dims"])
    return c.onnx(
        "AveragePool",
        x,
        kernel_shape=a["kernel_shape"],
        strides=a.get("strides"),
        pads=a.get("padding") if a["auto_pad"] == "NOTSET" else None,
        auto_pad=a["auto_pad"],
        ceil_mode=int(bool(a["ceil_mode"])),
        count_include_pad=int(bool(a["count_include_pad"])),
    )


@lower("GlobalAveragePool", inputs=1)
def global_avg_pool(c: Ctx, x):
    _nchw(c, x, c.a["dims"])
    return c.onnx("GlobalAveragePool", x)


@lower("GlobalMaxPool", inputs=1)
def global_max_pool(c: Ctx, x):
    _nchw(c, x, c.a["dims"])
    return c.onnx("GlobalMaxPool", x)


def _window_sum_of_padded(p, x, fill, init):
    return p.ReduceWindow(p.Pad(x, fill, _name="pad"), init)


@fusion("hlo", "onnx", "ReduceWindow(Pad)-to-CumSum", _window_sum_of_padded)
def cumulative_sum(b, m):
    """A sum over a window as long as the axis, of the input padded on one side: CumSum (how CumSum is lowered).

    With low + high = window - 1 padding on the one windowed axis (length n), output i sums the input from
    i - low to i + high, clipped to the axis: from the start when low >= n - 1, and to i (high 0) or i - 1
    (high -1, exclusive); the mirror image (low 0 or -1, high >= n - 1) is the reversed sum."""
    c = Ctx(b, m.root)
    x, pad = m.values["x"], m.node("pad")
    rank = len(shape_of(x))
    a = c.a
    if a["computation"] != "ADD" or c.opset < 11:
        raise Refuse("not a sum, or CumSum (opset 11) is not in the target")
    for value, what in ((m.values["init"], "init value"), (m.values["fill"], "padding value")):
        data = constant_value(value)
        if data is None or np.any(np.asarray(data) != 0):
            raise Refuse(f"the {what} is not a constant 0")
    if (pad.attr("mode") or "PAD_VALUE") != "PAD_VALUE" or any(int(i) for i in pad.attr("interior_padding") or []):
        raise Refuse("the padding is not a plain constant padding")
    ones = [1] * rank
    if (
        any(
            [int(v) for v in (a.get(k) or ones)] != ones
            for k in ("window_strides", "base_dilations", "window_dilations")
        )
        or (a.get("auto_pad") or "NOTSET") != "NOTSET"
    ):
        raise Refuse("strides, dilations or auto_pad other than 1 and NOTSET")
    window = [int(w) for w in a["window_dimensions"]]
    low, high = [int(v) for v in pad.attr("edge_padding_low")], [int(v) for v in pad.attr("edge_padding_high")]
    axes = [d for d in range(rank) if window[d] != 1 or low[d] or high[d]]
    if len(axes) != 1:
        raise Refuse("not one windowed axis")
    d = axes[0]
    n, lo, hi = shape_of(x)[d], low[d], high[d]
    if lo + hi != window[d] - 1:
        raise Refuse("the output is not as long as the axis")
    if hi in (0, -1) and lo >= n - 1:
        exclusive, reverse = hi == -1, 0
    elif lo in (0, -1) and hi >= n - 1:
        exclusive, reverse = lo == -1, 1
    else:
        raise Refuse("the window does not reach an end of the axis")
    return c.onnx("CumSum", x, b.const(np.asarray(d, np.int64), "axis"), exclusive=int(exclusive), reverse=reverse)


@lower("ReduceWindow", inputs=2)
def reduce_window(c: Ctx, x, init):
    """MAX -> MaxPool, ADD -> AveragePool(count_include_pad) x window size, the window dims moved last."""
    a = c.a
    computation = a["computation"]
    if computation not in ("MAX", "ADD"):
        raise Refuse(f"ReduceWindow {computation} has no ONNX pooling form")
    init_value = constant_value(init)
    v = None if init_value is None else np.asarray(init_value, np.float64)
    identity = -np.inf if computation == "MAX" else 0.0
    if v is None or not (np.all(v == identity) or computation == "MAX" and np.all(v <= np.finfo(np.float32).min)):
        raise Refuse("the init value is not the identity of the computation")
    if any(d != 1 for d in a.get("base_dilations") or []):
        raise Refuse("base_dilations has no ONNX pooling form")
    rank = len(shape_of(x))
    window = [int(w) for w in a["window_dimensions"]]
    strides = [int(s) for s in (a.get("window_strides") or [1] * rank)]
    dilations = [int(d) for d in (a.get("window_dilations") or [1] * rank)]
    pooled = [d for d in range(rank) if window[d] != 1 or strides[d] != 1 or dilations[d] != 1]
    kept = [d for d in range(rank) if d not in pooled]
    if len(kept) < 2:
        kept, pooled = kept + pooled[: 2 - len(kept)], pooled[2 - len(kept) :]
        if any(window[d] != 1 or strides[d] != 1 for d in kept):
            raise Refuse("fewer than two dims stay outside the window")
    spatial = kept[2:] + pooled
    perm = kept[:2] + spatial
    moved = x if perm == list(range(rank)) else c.onnx("Transpose", x, perm=perm)
    attrs = dict(
        kernel_shape=[window[d] for d in spatial],
        strides=[strides[d] for d in spatial],
        auto_pad=a.get("auto_pad") or "NOTSET",
        ceil_mode=int(bool(a.get("ceil_mode"))),
    )
    if any(dilations[d] != 1 for d in spatial):
        attrs["dilations"] = [dilations[d] for d in spatial]
    if computation == "MAX":
        y = c.onnx("MaxPool", moved, **attrs)
    else:
        if "dilations" in attrs and c.opset < 19:
            raise Refuse("AveragePool dilations need opset 19")
        y = c.onnx("AveragePool", moved, count_include_pad=1, **attrs)
        y = c.onnx("Mul", y, c.scalar_like(float(np.prod(window)), x))
    return y if perm == list(range(rank)) else c.onnx("Transpose", y, perm=list(np.argsort(perm)))


# ---------------------------------------------------------------------------
# Normalization and softmax
# ---------------------------------------------------------------------------


@lower("BatchNormInference", inputs=5)
def batch_norm(c: Ctx, x, scale, bias, mean, var):
    rank = len(shape_of(x))
    f = int(c.a["feature_index"]) % rank
    perm = [0, f] + [d for d in range(1, rank) if d != f] if f != 1 else None
    if f == 0 and rank > 1:
        perm = [1, 0] + list(range(2, rank))
    moved = x if perm is None else c.onnx("Transpose", x, perm=perm)
    y = c.onnx("BatchNormalization", moved, scale, bias, mean, var, epsilon=c.a["epsilon"])
    return y if perm is None else c.onnx("Transpose", y, perm=list(np.argsort(perm)))


@lower("LayerNorm", inputs=3, outputs=[1, 2, 3])
def layer_norm(c: Ctx, x, scale, bias):
    if c.opset < 17:
        raise Refuse("LayerNormalization needs opset 17")
    n = len(c.node.outputs)
    return c.onnx("LayerNormalization", x, scale, bias, axis=c.a["axis"], epsilon=c.a["epsilon"], _outputs=n)


@lower("InstanceNorm", inputs=3)
def instance_norm(c: Ctx, x, scale, bias):
    return c.onnx("InstanceNormalization", x, scale, bias, epsilon=c.a["epsilon"])


@lower("GroupNorm", inputs=3)
def group_norm(c: Ctx, x, scale, bias):
    if c.opset < 21:
        raise Refuse("per-channel GroupNormalization needs opset 21")
    return c.onnx("GroupNormalization", x, scale, bias, num_groups=c.a["num_groups"], epsilon=c.a["epsilon"])


@lower("Softmax", inputs=1)
def softmax(c: Ctx, x):
    if float(c.a.get("epsilon") or 0.0) != 0.0:
        raise Refuse("Softmax epsilon has no ONNX form")
    return c.onnx("LogSoftmax" if c.a["logarithmic"] else "Softmax", x, axis=c.a["axis"])


@lower("BatchNormTraining", inputs=3, outputs=3)
def batch_norm_training(c: Ctx, x, scale, bias):
    raise Refuse("batch statistics outputs (ONNX training_mode returns running statistics)")


# ---------------------------------------------------------------------------
# Reductions, arg-extremes, top-k, sort
# ---------------------------------------------------------------------------

REDUCE = {
    "ADD": ("ReduceSum", "Add", 0),
    "MUL": ("ReduceProd", "Mul", 1),
    "MAX": ("ReduceMax", "Max", -np.inf),
    "MIN": ("ReduceMin", "Min", np.inf),
}


@lower("Reduce", inputs=2)
def reduce(c: Ctx, x, init):
    computation = c.a["computation"]
    if computation not in REDUCE:
        raise Refuse(f"Reduce {computation} has no ONNX form")
    op, combine, identity = REDUCE[computation]
    dims = [int(d) for d in c.a["dimensions"]]
    if not dims:
        y = c.onnx("Identity", x)
    else:
        y = c.reduce(op, x, dims, keepdims=False)
    init_value = constant_value(init)
    if init_value is not None and np.all(np.asarray(init_value, np.float64) == identity):
        return y
    if (
        init_value is not None
        and computation in ("MAX", "MIN")
        and np.issubdtype(np.asarray(init_value).dtype, np.integer)
    ):
        info = np.iinfo(np.asarray(init_value).dtype)
        if int(np.asarray(init_value)) == (info.min if computation == "MAX" else info.max):
            return y
    return c.onnx(combine, y, init)


def _arg(op: str):
    def translate(c: Ctx, x):
        return c.onnx(
            op,
            x,
            axis=c.a["axis"],
            keepdims=int(bool(c.a["keepdims"])),
            select_last_index=int(bool(c.a["select_last_index"])),
        )

    return translate


lower("ArgMax", inputs=1)(_arg("ArgMax"))
lower("ArgMin", inputs=1)(_arg("ArgMin"))


@lower("Topk", inputs=2, outputs=2)
def topk(c: Ctx, x, k):
    values, indices = c.onnx(
        "TopK",
        x,
        c.as_i64(k),
        axis=c.a["axis"],
        largest=int(bool(c.a["largest"])),
        sorted=int(bool(c.a["sorted"])),
        _outputs=2,
    )
    if c.node.outputs[1].dtype != "int64":
        indices = c.onnx("Cast", indices, to=c.onnx_type(c.node.outputs[1].dtype))
    return [values, indices]


@lower("Sort", inputs=1)
def sort(c: Ctx, x):
    axis = int(c.a["dimension"]) % len(shape_of(x))
    k = c.i64([shape_of(x)[axis]])
    values, _ = c.onnx("TopK", x, k, axis=axis, largest=int(bool(c.a["descending"])), sorted=1, _outputs=2)
    return values


@lower("If", inputs=1, outputs=range(1, 17))
def if_(c: Ctx, pred):
    """The regions (already converted: the engine rewrites subgraphs first) become the branches."""
    n = len(c.node.outputs)
    for name in ("true_branch", "false_branch"):
        region = c.node.attr(name)
        if region.inputs:
            raise Refuse(f"the {name} region takes parameters")
    outs = c.onnx(
        "If", pred, then_branch=c.node.attr("true_branch"), else_branch=c.node.attr("false_branch"), _outputs=n
    )
    return outs if n > 1 else [outs]


def _inline(c: Ctx, region, args, target=None):
    """Clone the (already ONNX) nodes of ``region`` with its parameters bound to ``args``; returns its results.

    ``target`` is a Graph to append to (a Loop body), else the builder's graph before the matched node.
    """
    mapped = {id(p): a for p, a in zip(region.inputs, args)}
    for v in region.initializers.values():  # the region's constants, copied beside the clones
        data = v.const.numpy()
        mapped[id(v)] = c.b.const(data, v.name) if target is None else target.const(data, v.name)
    for node in region.nodes:
        inputs = [None if v is None else mapped.get(id(v), v) for v in node.inputs]
        n_out = len(node.outputs)
        if target is None:
            outs = c.b.op(node.op, *inputs, _domain=node.domain, _version=node.version, _outputs=n_out, **node.attrs)
        else:
            outs = target.op(
                node.op, *inputs, domain=node.domain, version=node.version, outputs=n_out, attrs=dict(node.attrs)
            )
        outs = outs if isinstance(outs, list) else [outs]
        for old, new in zip(node.outputs, outs):
            if old is not None:
                mapped[id(old)] = new
                new.type = old.type
    return [mapped.get(id(v), v) for v in region.outputs]


@lower("While", inputs=range(1, 17), outputs=range(1, 17))
def while_(c: Ctx, *init):
    """While -> Loop: the condition is evaluated once before the loop and again at the end of each body run."""
    from ...ir import Graph

    cond, body = c.node.attr("cond"), c.node.attr("body")
    if len(cond.inputs) != len(init) or len(body.inputs) != len(init):
        raise Refuse("the regions do not take the carried values")
    # the regions are cloned into new nodes, which the engine's final check would take for converted ones
    left = [n.label for region in (cond, body) for n in region.walk() if n.version != c.opset]
    if left:
        raise Refuse(f"its regions keep {len(left)} operation(s) with no ONNX form ({', '.join(left[:3])})")
    first = _inline(c, cond, init)[0]
    loop_body = Graph("body", parent=c.b.graph)
    loop_body.add_input(loop_body.unique_name("iteration"), TensorType("int64", ()))
    loop_body.add_input(loop_body.unique_name("condition"), TensorType("bool", ()))
    carried = [loop_body.add_input(loop_body.unique_name(f"{p.name}_in"), p.type) for p in body.inputs]
    nxt = _inline(c, body, carried, loop_body)
    again = _inline(c, cond, nxt, loop_body)[0]
    outs = [again] + [
        v if v.producer is not None and v.producer.graph is loop_body else loop_body.op("Identity", v, outputs=1)
        for v in nxt
    ]
    for v, p in zip(outs[1:], body.outputs):
        v.type = p.type
    loop_body.outputs = outs
    result = c.onnx("Loop", None, first, *init, body=loop_body, _outputs=len(init))
    return result if isinstance(result, list) else [result]
