"""Adapters of neural-network operators: Softmax's axis, Dropout, BatchNormalization, Gemm, pooling,
and decompositions of LayerNormalization / GroupNormalization for opsets that lack them.
"""

from __future__ import annotations

import numpy as np

from ...ir import Attr
from ...types import TensorType, element_type
from ..rewrite import Refuse
from .registry import downgrade, needs_types, semantic_change, text, upgrade

_SOFTMAX = ("Softmax", "LogSoftmax", "Hardmax")

semantic_change("GroupNormalization", 21, "scale and bias became per channel instead of per group")
needs_types(_SOFTMAX + ("Scan", "Gemm", "BatchNormalization", "GroupNormalization", "MeanVarianceNormalization"))


# -- Softmax, LogSoftmax, Hardmax -----------------------------------------------------------


@upgrade(_SOFTMAX, 13)
def softmax_single_axis(ctx, node):
    """Before 13 the input was coerced to 2-D at ``axis``; from 13 only ``axis`` is normalised."""
    axis = int(ctx.pop_attr(node, "axis", 1))
    shape = ctx.shape(node.inputs[0])
    if shape is not None and (axis == -1 or axis == len(shape) - 1):
        ctx.set_attr(node, "axis", -1)
        return
    x = node.inputs[0]
    flat = ctx.op("Flatten", x, axis=axis)
    y = ctx.op(node.op, flat, axis=1)
    ctx.replace(node, [ctx.op("Reshape", y, ctx.op("Shape", x))])


@downgrade(_SOFTMAX, 13)
def softmax_coerced_axis(ctx, node):
    axis = int(ctx.pop_attr(node, "axis", -1))
    if axis == -1 and ctx.shape(node.inputs[0]) is None and ctx.converter.target >= 11:
        # Coercing to 2-D at the last axis is the same as the last axis alone, whatever the rank (which
        # inference may not know past ops it cannot type); from 11 the attribute may say -1
        ctx.set_attr(node, "axis", -1)
        return
    rank = ctx.rank(node.inputs[0], "input")
    axis = axis + rank if axis < 0 else axis
    if axis == rank - 1:
        ctx.set_attr(node, "axis", axis)  # coercing at the last axis is the same as one axis
        return
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    x = node.inputs[0]
    moved = ctx.op("Transpose", x, perm=perm)
    y = ctx.op(node.op, moved, axis=rank - 1)
    shape = ctx.shape(x)
    for v in (moved, y):
        v.type = TensorType(x.dtype, tuple(shape[p] for p in perm)) if x.dtype else None
    ctx.replace(node, [ctx.op("Transpose", y, perm=perm)])


# -- Dropout -----------------------------------------------------------------------------------


@downgrade("Dropout", 7)
def dropout_test_mode(ctx, node):
    ctx.set_attr(node, "is_test", 1)  # before 7 the default was training mode


@upgrade("Dropout", 12)
def dropout_ratio_to_input(ctx, node):
    ratio = ctx.pop_attr(node, "ratio")
    if ratio is not None:
        ctx.set_inputs(node, [node.inputs[0], ctx.const(np.array(ratio, np.float32), "ratio")])


@downgrade("Dropout", 12)
def dropout_ratio_to_attribute(ctx, node):
    ctx.pop_attr(node, "seed")
    training = node.inputs[2] if len(node.inputs) > 2 else None
    if training is not None and bool(np.asarray(ctx.static(training, "input 'training_mode'")).reshape(())):
        raise Refuse("training_mode=true needs Dropout-12 or later")
    ratio = node.inputs[1] if len(node.inputs) > 1 else None
    if ratio is not None:
        node.attrs["ratio"] = Attr("ratio", "float", float(np.asarray(ctx.static(ratio, "input 'ratio'"))))
    ctx.set_inputs(node, [node.inputs[0]])
    if (
        len(node.outputs) > 1
        and node.outputs[1] is not None
        and not node.outputs[1].uses
        and node.outputs[1] not in node.graph.outputs
    ):
        node.outputs.pop()  # Dropout-10's mask is bool, like 12's; an unused one can go either way


# -- BatchNormalization ------------------------------------------------------------------------


@downgrade("BatchNormalization", 7)
def batchnorm_test_mode(ctx, node):
    ctx.set_attr(node, "is_test", 1)


@upgrade("BatchNormalization", 9)
def batchnorm_drop_spatial(ctx, node):
    if int(ctx.pop_attr(node, "spatial", 1)) != 1:
        raise Refuse("spatial=0 (per-element statistics) has no equivalent from BatchNormalization-9")


# -- Gemm ----------------------------------------------------------------------------------------


@upgrade("Gemm", 7)
def gemm_drop_broadcast(ctx, node):
    ctx.pop_attr(node, "broadcast")  # C broadcasting to (M, N) is always on from Gemm-7


@downgrade("Gemm", 7)
def gemm_broadcast_c(ctx, node):
    ctx.set_attr(node, "broadcast", 1)


@downgrade("Gemm", 11)
def gemm_required_c(ctx, node):
    if len(node.inputs) < 3 or node.inputs[2] is None:
        dtype = ctx.dtype(node.inputs[0])
        if dtype is None:
            raise Refuse("the element type is unknown; Gemm before 11 needs a C input of that type")
        ctx.set_inputs(node, [node.inputs[0], node.inputs[1], ctx.const(np.zeros((), element_type(dtype).numpy), "C")])


# -- pooling ---------------------------------------------------------------------------------------


@upgrade(("LpPool", "GlobalLpPool"), 2)
def lppool_integer_p(ctx, node):
    p = ctx.pop_attr(node, "p")
    if p is not None:
        if float(p) != int(p):
            raise Refuse(f"p={p} is not an integer; LpPool-2 takes an int")
        ctx.set_attr(node, "p", int(p))


@downgrade(("LpPool", "GlobalLpPool"), 2)
def lppool_float_p(ctx, node):
    p = ctx.pop_attr(node, "p")
    if p is not None:
        node.attrs["p"] = Attr("p", "float", float(p))


_GRID_MODES = {"bilinear": "linear", "bicubic": "cubic", "nearest": "nearest"}


@upgrade("GridSample", 20)
def gridsample_mode_names(ctx, node):
    mode = text(node.attr("mode", "bilinear"))
    ctx.set_attr(node, "mode", _GRID_MODES[mode])


@downgrade("GridSample", 20)
def gridsample_old_mode_names(ctx, node):
    mode = text(node.attr("mode", "linear"))
    back = {v: k for k, v in _GRID_MODES.items()}
    if ctx.rank(node.inputs[0], "X") != 4:
        raise Refuse("GridSample before 20 samples 4-D inputs only")
    ctx.set_attr(node, "mode", back[mode])


@upgrade("DFT", 20)
def dft_axis_to_input(ctx, node):
    axis = int(ctx.pop_attr(node, "axis", 1))
    inputs = list(node.inputs) + [None] * (2 - len(node.inputs))
    ctx.set_inputs(node, inputs[:2] + [ctx.const(np.array(axis, np.int64), "axis")])


@downgrade("DFT", 20)
def dft_axis_to_attribute(ctx, node):
    axis_input = node.inputs[2] if len(node.inputs) > 2 else None
    axis = -2 if axis_input is None else int(np.asarray(ctx.static(axis_input, "input 'axis'")))
    if axis < 0:
        axis += ctx.rank(node.inputs[0], "input")
    ctx.set_attr(node, "axis", axis)
    ctx.set_inputs(node, node.inputs[:2])


# -- normalizations decomposed -------------------------------------------------------------------


@downgrade("LayerNormalization", 17)
def layernorm_decomposed(ctx, node):
    from ..decompose import replace_in_step
    from ..decompose.norm import layer_normalization_17

    replace_in_step(ctx, node, layer_normalization_17)  # the decomposition's formula: one copy of it


@downgrade("RMSNormalization", 23)
def rms_normalization_decomposed(ctx, node):
    from ..decompose import replace_in_step
    from ..decompose.norm import rms_normalization_23

    replace_in_step(ctx, node, rms_normalization_23)  # the decomposition the converters use: one copy of it


@downgrade("Attention", 23)
def attention_decomposed(ctx, node):
    from ..decompose import replace_in_step
    from ..decompose.onnx_attention import attention_23

    replace_in_step(ctx, node, attention_23)  # the decomposition the converters use: one copy of it


@downgrade("RotaryEmbedding", 23)
def rotary_embedding_decomposed(ctx, node):
    from ..decompose import replace_in_step
    from ..decompose.onnx_rotary import rotary_embedding_23

    replace_in_step(ctx, node, rotary_embedding_23)  # the decomposition the converters use: one copy of it


@downgrade("GroupNormalization", 18)
def groupnorm_decomposed(ctx, node):
    _groupnorm(ctx, node, per_channel=False)


@downgrade("GroupNormalization", 21)
def groupnorm_per_channel(ctx, node):
    _groupnorm(ctx, node, per_channel=True)


def _groupnorm(ctx, node, per_channel: bool):
    """Normalise each group of channels, then scale and shift per channel (21) or per group (18)."""
    ctx.version = min(ctx.version, 17)  # built with ReduceMean's axes attribute, then moved to the target
    x, scale, bias = node.inputs[0], node.inputs[1], node.inputs[2]
    shape = ctx.shape(x)
    if shape is None or not isinstance(shape[1], int):
        raise Refuse("the input rank and channel count must be known")
    groups = int(node.attr("num_groups"))
    eps = float(node.attr("epsilon", 1e-5))
    rank, channels = len(shape), shape[1]
    dtype = ctx.dtype(x) or "float32"
    stash = "float32" if int(node.attr("stash_type", 1)) == 1 and dtype in ("float16", "bfloat16") else dtype
    xs = ctx.cast(x, stash) if stash != dtype else x
    grouped = ctx.op("Reshape", xs, ctx.const(np.array([0, groups, -1], np.int64), "groups"))
    mean = ctx.op("ReduceMean", grouped, axes=[2], keepdims=1)
    d = ctx.op("Sub", grouped, mean)
    var = ctx.op("ReduceMean", ctx.op("Mul", d, d), axes=[2], keepdims=1)
    std = ctx.op("Sqrt", ctx.op("Add", var, ctx.const(np.array(eps, element_type(stash).numpy), "epsilon")))
    normed = ctx.op("Reshape", ctx.op("Div", d, std), ctx.op("Shape", x))
    if stash != dtype:
        normed = ctx.cast(normed, dtype)
    if per_channel:
        sc, bi = scale, bias
    else:  # one value per group, repeated over its channels
        sc_data = np.repeat(np.asarray(ctx.static(scale, "input 'scale'")), channels // groups)
        bi_data = np.repeat(np.asarray(ctx.static(bias, "input 'bias'")), channels // groups)
        sc, bi = ctx.const(sc_data, "scale"), ctx.const(bi_data, "bias")
    trailing = np.array([channels] + [1] * (rank - 2), np.int64)
    sc = ctx.op("Reshape", sc, ctx.const(trailing, "channel_shape"))
    bi = ctx.op("Reshape", bi, ctx.const(trailing, "channel_shape"))
    ctx.replace(node, [ctx.op("Add", ctx.op("Mul", normed, sc), bi)])


@upgrade("GroupNormalization", 21)
def groupnorm_scale_per_channel(ctx, node):
    """GroupNormalization-18's per-group scale and bias, repeated over each group's channels."""
    groups = int(node.attr("num_groups"))
    channels = (ctx.shape(node.inputs[0]) or (None, None))[1]
    if not isinstance(channels, int):
        raise Refuse("the channel count must be known to widen per-group scale and bias")
    for i, name in ((1, "scale"), (2, "bias")):
        data = np.asarray(ctx.static(node.inputs[i], f"input {name!r}"))
        node.set_input(i, ctx.const(np.repeat(data, channels // groups), name))


@upgrade("MeanVarianceNormalization", 18)
def mvn_decomposed(ctx, node):
    """MVN's function body uses ReduceMean's axes attribute, which opset 18 moved to an input: the converters'
    decomposition instead, built with the reductions of opset 17 (later steps move their axes)."""
    from ..decompose import replace_in_step
    from ..decompose.norm import mean_variance_normalization_9

    ctx.version = 17
    replace_in_step(ctx, node, mean_variance_normalization_9)  # the decomposition the converters use: one copy of it


@upgrade("RoiAlign", 16)
def roialign_output_half_pixel(ctx, node):
    ctx.set_attr(node, "coordinate_transformation_mode", "output_half_pixel")  # RoiAlign-10's behaviour


@downgrade("RoiAlign", 16)
def roialign_only_output_half_pixel(ctx, node):
    mode = text(ctx.pop_attr(node, "coordinate_transformation_mode", "half_pixel"))
    if mode != "output_half_pixel":
        raise Refuse(f"coordinate_transformation_mode={mode!r} needs RoiAlign-16 (RoiAlign-10 is 'output_half_pixel')")


def pool_without_dilations(ctx, node):
    """Dilations came to MaxPool at 10 and AveragePool at 19; dilations of 1 are the older meaning."""
    dilations = ctx.pop_attr(node, "dilations")
    if dilations is not None and any(int(d) != 1 for d in dilations):
        raise Refuse(f"dilations {list(dilations)} need {node.op}-{10 if node.op == 'MaxPool' else 19} or later")


downgrade("MaxPool", 10)(pool_without_dilations)
downgrade("AveragePool", 19)(pool_without_dilations)


@downgrade(("MaxPool", "AveragePool"), 22)
def pool_ceil_mode_before_22(ctx, node):
    if int(node.attr("ceil_mode", 0)):
        raise Refuse(
            "ceil_mode=1 output sizes follow the rule of opset 22 (a last window starting in "
            "the padding is dropped); older versions size the output differently"
        )


@downgrade("Dropout", 10)
def dropout_float_mask(ctx, node):
    if len(node.outputs) > 1 and node.outputs[1] is not None:
        mask = node.outputs[1]
        if mask.uses or mask in node.graph.outputs:
            raise Refuse("the mask output is bool from Dropout-10, of the data's type before")
        node.outputs.pop()


# -- Scan: opset 8 had a batch axis on every input and output, opset 9 has none ------------------


@upgrade("Scan", 9)
def scan_without_batch_axis(ctx, node):
    """A batch of one: squeeze it off the inputs, run Scan-9, put it back on the outputs."""
    if node.inputs and node.inputs[0] is not None:
        raise Refuse("sequence_lens has no equivalent from Scan-9")
    inputs = node.inputs[1:]
    for v in inputs:
        shape = ctx.shape(v)
        if shape is None or not shape or shape[0] != 1:
            raise Refuse(f"input {v.name!r} must have a batch of 1 (shape {shape}) to drop the batch axis")
    attrs = {"body": node.attrs["body"], "num_scan_inputs": node.attrs["num_scan_inputs"]}
    directions = node.attr("directions")
    if directions is not None:
        attrs["scan_input_directions"] = Attr("scan_input_directions", "ints", list(directions))
    squeezed = [ctx.op("Squeeze", v, axes=[0], _version=8) for v in inputs]
    scan = ctx.op("Scan", *squeezed, _outputs=len(node.outputs), **attrs)
    scan = scan if isinstance(scan, list) else [scan]
    ctx.replace(node, [ctx.op("Unsqueeze", v, axes=[0], _version=8) for v in scan])


@downgrade("Scan", 9)
def scan_with_batch_axis(ctx, node):
    for name in ("scan_input_axes", "scan_output_axes", "scan_output_directions"):
        if any(int(a) != 0 for a in node.attr(name, [])):
            raise Refuse(f"{name} other than 0 needs Scan-9 or later")
    attrs = {"body": node.attrs["body"], "num_scan_inputs": node.attrs["num_scan_inputs"]}
    directions = node.attr("scan_input_directions")
    if directions is not None:
        attrs["directions"] = Attr("directions", "ints", list(directions))
    batched = [ctx.op("Unsqueeze", v, axes=[0]) for v in node.inputs]
    scan = ctx.op("Scan", None, *batched, _outputs=len(node.outputs), **attrs)
    scan = scan if isinstance(scan, list) else [scan]
    ctx.replace(node, [ctx.op("Squeeze", v, axes=[0]) for v in scan])
