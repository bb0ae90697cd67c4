"""Neural-network opset1 layers -> ONNX: convolutions, pooling, MatMul, normalizations, RNN cells, TopK,
Interpolate."""

from __future__ import annotations

import numpy as np

from ...kernels import conv as kc
from ...types import element_type
from ._common import Ctx, Refuse, const_ints, constant_value, lower, np_dtype, rank_of, static_shape

# opset1 auto_pad -> ONNX auto_pad ("explicit" means the layer's pads).
AUTO_PAD = {
    "explicit": "NOTSET",
    "notset": "NOTSET",
    "same_upper": "SAME_UPPER",
    "same_lower": "SAME_LOWER",
    "valid": "VALID",
}


def _auto_pad(c: Ctx) -> str:
    mode = str(c.a.get("auto_pad") or "explicit").lower()
    if mode not in AUTO_PAD:
        raise Refuse(f"auto_pad={mode!r} is not an opset1 padding mode")
    return AUTO_PAD[mode]


def _window(c: Ctx, spatial: int) -> dict:
    """strides / dilations / pads / auto_pad of an ONNX Conv for this layer."""
    auto = _auto_pad(c)
    pads = None
    if auto == "NOTSET":
        begin = list(c.a.get("pads_begin") or [0] * spatial)
        end = list(c.a.get("pads_end") or [0] * spatial)
        pads = begin + end
    return dict(strides=list(c.a.get("strides") or [1] * spatial), pads=pads, auto_pad=auto)


# ---------------------------------------------------------------------------
# Convolutions
# ---------------------------------------------------------------------------


@lower("Convolution", 2)
def convolution(c: Ctx, x, w):
    spatial = rank_of(w) - 2
    return c.onnx("Conv", x, w, dilations=list(c.a.get("dilations") or [1] * spatial), **_window(c, spatial))


def _fold_groups(c: Ctx, w, name: str):
    """Group filters ``(G, A, B, *K)`` as ONNX's ``(G*A, B, *K)``, and G."""
    shape = static_shape(w)
    folded = (shape[0] * shape[1],) + shape[2:]
    data = constant_value(w)
    if data is not None:
        return c.const(np.asarray(data).reshape(folded), name=f"{w.name}/{name}"), shape[0]
    return c.onnx("Reshape", w, c.i64(folded)), shape[0]


@lower("GroupConvolution", 2)
def group_convolution(c: Ctx, x, w):
    spatial = rank_of(w) - 3
    folded, groups = _fold_groups(c, w, "grouped")
    return c.onnx(
        "Conv", x, folded, group=groups, dilations=list(c.a.get("dilations") or [1] * spatial), **_window(c, spatial)
    )


def _transposed(c: Ctx, x, w, output_shape, groups: int, kernel: tuple[int, ...]):
    """ONNX ConvTranspose with the pads the runtime uses, always explicit."""
    spatial = len(kernel)
    mode = str(c.a.get("auto_pad") or "explicit").lower()
    strides = list(c.a.get("strides") or [1] * spatial)
    dilations = list(c.a.get("dilations") or [1] * spatial)
    output_padding = list(c.a.get("output_padding") or [0] * spatial)
    if output_shape is not None:
        # The requested size fixes the pads.  The CPU plugin crops an odd total's extra element from the
        # start under same_upper and from the end otherwise (checked in tests/test_openvino_to_onnx.py).
        size = static_shape(x)[2:]
        begin, end = kc.conv_transpose_pads(
            size,
            kernel,
            strides,
            dilations,
            output_padding,
            const_ints(output_shape, "output_shape"),
            extra_at_end=mode != "same_upper",
        )
        if any(p < 0 for p in begin + end):
            raise Refuse("output_shape is larger than the full transposed convolution")
        output_padding = [0] * spatial
    elif mode not in ("explicit", "notset"):
        begin, end = [0] * spatial, [0] * spatial  # without output_shape the runtime gives the full output
    else:
        begin = list(c.a.get("pads_begin") or [0] * spatial)
        end = list(c.a.get("pads_end") or [0] * spatial)
    return c.onnx(
        "ConvTranspose",
        x,
        w,
        strides=strides,
        dilations=dilations,
        pads=begin + end,
        output_padding=output_padding if any(output_padding) else None,
        group=groups if groups != 1 else None,
    )


@lower("ConvolutionBackpropData", (2, 3))
def convolution_backprop_data(c: Ctx, x, w, output_shape=None):
    return _transposed(c, x, w, output_shape, 1, static_shape(w)[2:])


@lower("GroupConvolutionBackpropData", (2, 3))
def group_convolution_backprop_data(c: Ctx, x, w, output_shape=None):
    folded, groups = _fold_groups(c, w, "grouped")
    return _transposed(c, x, folded, output_shape, groups, static_shape(w)[3:])


# ---------------------------------------------------------------------------
# Pooling
# ---------------------------------------------------------------------------


def _pool(c: Ctx, x) -> dict:
    kernel = list(c.a.get("kernel") or [])
    if not kernel:
        raise Refuse("kernel is missing")
    spatial = len(kernel)
    window = _window(c, spatial)
    ceil = str(c.a.get("rounding_type") or "floor").lower() == "ceil"
    if ceil and window["auto_pad"] == "NOTSET":
        dims = static_shape(x)[2:]
        pads = window["pads"]
        for i, (size, k, s, pb, pe) in enumerate(zip(dims, kernel, window["strides"], pads[:spatial], pads[spatial:])):
            out = -(-(size + pb + pe - k) // s) + 1
            if (out - 1) * s >= size + pb:
                raise Refuse(
                    f"rounding_type=ceil: the last window along spatial axis {i} starts in the padding, "
                    "which opset1 keeps and ONNX drops"
                )
    return dict(kernel_shape=kernel, ceil_mode=int(ceil) if window["auto_pad"] == "NOTSET" else None, **window)


@lower("MaxPool", 1)
def max_pool(c: Ctx, x):
    return c.onnx("MaxPool", x, **_pool(c, x))


@lower("AvgPool", 1)
def avg_pool(c: Ctx, x):
    return c.onnx("AveragePool", x, count_include_pad=int(not c.a.get("exclude_pad")), **_pool(c, x))


# ---------------------------------------------------------------------------
# MatMul, SoftMax, normalizations
# ---------------------------------------------------------------------------


@lower("MatMul", 2)
def matmul(c: Ctx, a, b):
    # A 1-D operand is never transposed (it is a row or column vector whatever the flag).  A transposed
    # matrix times a vector is the vector times the matrix: no Transpose (onnxruntime also miscomputes
    # Transpose -> MatMul with a 1-D operand, through its FusedMatMul rewrite).
    if c.a.get("transpose_a") and rank_of(a) >= 2 and rank_of(b) == 1:
        return c.onnx("MatMul", b, a)
    if c.a.get("transpose_b") and rank_of(b) >= 2 and rank_of(a) == 1:
        return c.onnx("MatMul", b, a)
    if c.a.get("transpose_a") and rank_of(a) >= 2:
        a = c.transpose_last_two(a)
    if c.a.get("transpose_b") and rank_of(b) >= 2:
        b = c.transpose_last_two(b)
    return c.onnx("MatMul", a, b)


@lower("SoftMax", 1)
def softmax(c: Ctx, x):
    return c.onnx("Softmax", x, axis=int(c.a.get("axis", 1)))


@lower("MVN", 1)
def mvn(c: Ctx, x):
    rank = rank_of(x)
    axes = c.a.get("reduction_axes")
    axes = [a % rank for a in axes] if axes else list(range(1 if c.a.get("across_channels") else 2, rank))
    centred = c.onnx("Sub", x, c.reduce("ReduceMean", x, axes, True))
    if not c.a.get("normalize_variance"):
        return centred
    variance = c.reduce("ReduceMean", c.onnx("Mul", centred, centred), axes, True)
    # The runtime adds eps inside the square root.
    return c.onnx("Div", centred, c.onnx("Sqrt", c.onnx("Add", variance, c.scalar_like(c.a["eps"], x, "eps"))))


@lower("NormalizeL2", 2)
def normalize_l2(c: Ctx, x, axes):
    data = constant_value(axes)
    if data is not None and np.size(data) == 0:
        raise Refuse("NormalizeL2 with empty axes")
    combine = {"add": "Add", "max": "Max"}.get(str(c.a.get("eps_mode")).lower())
    if combine is None:
        raise Refuse(f"unknown eps_mode {c.a.get('eps_mode')!r}")
    axes_value = c.i64(np.asarray(data).reshape(-1)) if data is not None else c.as_i64(axes)
    square_sum = c.onnx("ReduceSum", c.onnx("Mul", x, x), axes_value, keepdims=1)
    return c.onnx("Div", x, c.onnx("Sqrt", c.onnx(combine, square_sum, c.scalar_like(c.a["eps"], x, "eps"))))


@lower("GRN", 1)
def grn(c: Ctx, x):
    square_sum = c.onnx("ReduceSum", c.onnx("Mul", x, x), c.i64([1]), keepdims=1)
    return c.onnx("Div", x, c.onnx("Sqrt", c.onnx("Add", square_sum, c.scalar_like(c.a["bias"], x, "bias"))))


@lower("LRN", 2)
def lrn(c: Ctx, x, axes):
    rank = rank_of(x)
    if [a % rank for a in const_ints(axes, "LRN axes")] != [1]:
        raise Refuse("ONNX LRN normalizes across channels (axes [1]) only")
    size = int(c.a["size"])
    if size % 2 == 0:
        raise Refuse(f"an even size ({size}): opset1's window is symmetric, ONNX's is not")
    return c.onnx("LRN", x, alpha=c.a["alpha"], beta=c.a["beta"], bias=c.a["bias"], size=size)


@lower("BatchNormInference", 5)
def batch_norm_inference(c: Ctx, gamma, beta, x, mean, variance):
    # opset1's input order puts the data third.
    return c.onnx("BatchNormalization", x, gamma, beta, mean, variance, epsilon=c.a["epsilon"])


# ---------------------------------------------------------------------------
# RNN cells: one step of an ONNX RNN/LSTM over a sequence of length 1
# ---------------------------------------------------------------------------

_ACTIVATIONS = {
    "sigmoid": "Sigmoid",
    "tanh": "Tanh",
    "relu": "Relu",
    "hardsigmoid": "HardSigmoid",
    "elu": "Elu",
    "softsign": "Softsign",
    "softplus": "Softplus",
    "affine": "Affine",
    "leakyrelu": "LeakyRelu",
    "thresholdedrelu": "ThresholdedRelu",
    "scaledtanh": "ScaledTanh",
}


def _rnn_attrs(c: Ctx) -> dict:
    names = []
    for name in c.a.get("activations") or []:
        onnx_name = _ACTIVATIONS.get(str(name).lower())
        if onnx_name is None:
            raise Refuse(f"activation {name!r} has no ONNX RNN form")
        names.append(onnx_name)
    clip = c.a.get("clip") or 0.0
    return dict(
        hidden_size=int(c.a["hidden_size"]),
        activations=names,
        activation_alpha=list(c.a.get("activations_alpha") or []) or None,
        activation_beta=list(c.a.get("activations_beta") or []) or None,
        clip=float(clip) if clip else None,
    )


def _gate_blocks(c: Ctx, v, order: list[int], hidden: int, name: str):
    """``v`` with its gate blocks (each ``hidden`` rows of axis 0) in ``order``, with a leading direction axis."""
    rows = np.concatenate([np.arange(g * hidden, (g + 1) * hidden) for g in order])
    data = constant_value(v)
    if data is not None:
        return c.const(np.asarray(data)[rows][None], name=f"{v.name}/{name}")
    return c.unsqueeze(c.onnx("Gather", v, c.i64(rows), axis=0), [0])


def _bias(c: Ctx, b, order, hidden: int, like):
    """ONNX's ``[Wb, Rb]`` bias from opset1's single bias (``Rb`` zero)."""
    if b is None:
        return None
    wb = _gate_blocks(c, b, order, hidden, "bias")
    zeros = c.const(np.zeros((1, len(order) * hidden), np_dtype(like)), name=f"{b.name}/zeros")
    return c.onnx("Concat", wb, zeros, axis=1)


@lower("LSTMCell", (6, 7), outputs=2)
def lstm_cell(c: Ctx, x, h, cell, w, r, b, p=None):
    attrs = _rnn_attrs(c)
    hidden = attrs["hidden_size"]
    fmt = str(c.a.get("weights_format") or "fico").lower()
    if sorted(fmt) != sorted("fico"):
        raise Refuse(f"weights_format={fmt!r} is not an order of the gates f, i, c, o")
    order = [fmt.index(g) for g in "iofc"]  # ONNX stacks input, output, forget, cell
    peephole = None
    if p is not None:
        peephole = c.unsqueeze(p, [0])  # both use the order input, output, forget
    ys = c.onnx(
        "LSTM",
        c.unsqueeze(x, [0]),
        _gate_blocks(c, w, order, hidden, "iofc"),
        _gate_blocks(c, r, order, hidden, "iofc"),
        _bias(c, b, order, hidden, x),
        None,
        c.unsqueeze(h, [0]),
        c.unsqueeze(cell, [0]),
        peephole,
        _outputs=3,
        input_forget=int(bool(c.a.get("input_forget"))) or None,
        **attrs,
    )
    return [c.squeeze(ys[1], [0]), c.squeeze(ys[2], [0])]


@lower("RNNCell", 5)
def rnn_cell(c: Ctx, x, h, w, r, b):
    attrs = _rnn_attrs(c)
    hidden = attrs["hidden_size"]
    ys = c.onnx(
        "RNN",
        c.unsqueeze(x, [0]),
        _gate_blocks(c, w, [0], hidden, "dir"),
        _gate_blocks(c, r, [0], hidden, "dir"),
        _bias(c, b, [0], hidden, x),
        None,
        c.unsqueeze(h, [0]),
        _outputs=2,
        **attrs,
    )
    return c.squeeze(ys[1], [0])


# ---------------------------------------------------------------------------
# TopK
# ---------------------------------------------------------------------------


@lower("TopK", 2, outputs=2)
def top_k(c: Ctx, x, k):
    largest = {"max": 1, "min": 0}.get(str(c.a.get("mode")).lower())
    if largest is None:
        raise Refuse(f"unknown TopK mode {c.a.get('mode')!r}")
    axis = int(c.a["axis"]) % rank_of(x)
    k1 = c.onnx("Reshape", c.as_i64(k), c.i64([1]))
    values, indices = c.onnx("TopK", x, k1, axis=axis, largest=largest, sorted=1, _outputs=2)
    if str(c.a.get("sort")).lower() == "index":
        # The same k elements by ascending index: sort the indices, carry the values along.
        indices, order = c.onnx("TopK", indices, k1, axis=axis, largest=0, sorted=1, _outputs=2)
        values = c.onnx("GatherElements", values, order, axis=axis)
    index_type = c.a.get("index_element_type") or "int32"
    if index_type != "int64":
        indices = c.onnx("Cast", indices, to=element_type(index_type).onnx)
    return [values, indices]


# ---------------------------------------------------------------------------
# Interpolate -> Resize
# ---------------------------------------------------------------------------

_RESIZE_MODES = {"nearest": "nearest", "linear": "linear", "cubic": "cubic"}


@lower("Interpolate", 2)
def interpolate(c: Ctx, x, target):
    mode = str(c.a.get("mode")).lower()
    if mode not in _RESIZE_MODES:
        raise Refuse(f"mode={mode!r} has no ONNX Resize form")
    shape = list(static_shape(x))
    rank = len(shape)
    axes = [int(a) % rank for a in (c.a.get("axes") or [])]
    sizes = const_ints(target, "the target spatial shape")
    if len(sizes) != len(axes):
        raise Refuse(f"{len(axes)} axes but {len(sizes)} target sizes")
    begin = list(c.a.get("pads_begin") or []) + [0] * rank
    end = list(c.a.get("pads_end") or []) + [0] * rank
    begin, end = begin[:rank], end[:rank]
    if any(begin) or any(end):
        x = c.onnx("Pad", x, c.i64(begin + end))
        shape = [d + pb + pe for d, pb, pe in zip(shape, begin, end)]
    out = list(shape)
    for axis, size in zip(axes, sizes):
        out[axis] = size
    if c.a.get("align_corners"):
        transform = "align_corners"
    elif mode == "linear" and not (rank == 4 and sorted(axes) == [2, 3]):
        transform = "half_pixel"  # the runtime keeps its legacy 2-D image rule only for axes 2, 3 of 4-D
    else:
        transform = "asymmetric"
    attrs = dict(mode=_RESIZE_MODES[mode], coordinate_transformation_mode=transform)
    if mode == "cubic":
        attrs["cubic_coeff_a"] = -0.75
    if c.a.get("antialias") and mode != "nearest" and any(o < i for i, o in zip(shape, out)):
        if c.opset < 18:
            raise Refuse("antialias needs Resize-18 (target opset 18 or newer)")
        attrs["antialias"] = 1
    if mode != "nearest":
        return _resize(c, x, out, attrs)
    # Nearest rounds down where a dim grows (or keeps its size) and up where it shrinks: one Resize per rule.
    grow = [o if o >= i else i for i, o in zip(shape, out)]
    if grow != shape:
        x = _resize(c, x, grow, dict(attrs, nearest_mode="floor"))
    if grow != out:
        x = _resize(c, x, out, dict(attrs, nearest_mode="ceil"))
    if grow == shape == out:
        x = c.onnx("Identity", x)
    return x


def _resize(c: Ctx, x, sizes, attrs):
    return c.onnx("Resize", x, None, None, c.i64(sizes), **attrs)


# ---------------------------------------------------------------------------
# NonMaxSuppression
# ---------------------------------------------------------------------------


@lower("NonMaxSuppression", (2, 3, 4, 5))
def non_max_suppression(c: Ctx, boxes, scores, max_boxes=None, iou=None, score_threshold=None):
    center = {"corner": 0, "center": 1}.get(str(c.a.get("box_encoding") or "corner").lower())
    if center is None:
        raise Refuse(f"unknown box_encoding {c.a.get('box_encoding')!r}")
    if c.a.get("sort_result_descending", True):
        # opset1 sorts all selections by score; ONNX lists them per image and class, each class by score,
        # which is the same order only for one image with one class.
        shape = static_shape(scores)
        if shape[0] != 1 or shape[1] != 1:
            raise Refuse("sort_result_descending=true over several images or classes has no ONNX form")
    inputs = [boxes, scores]
    for value, kind in ((max_boxes, "int64"), (iou, "float32"), (score_threshold, "float32")):
        if value is None:
            break
        value = c.onnx("Reshape", value, c.i64([1]))
        if value.dtype != kind:
            value = c.onnx("Cast", value, to=element_type(kind).onnx)
        inputs.append(value)
    return c.onnx("NonMaxSuppression", *inputs, center_point_box=center)
