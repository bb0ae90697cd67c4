"""Session-time rewrite of the IR executor's plan: a Convolution followed by a per-channel Multiply (a folded
BatchNormalization's scale) and a per-channel Add (the bias or shift), each the only reader of the value
before it, runs as the ONNX session's packed convolution (``kernels.conv.pack_conv_weights``: the scale
folded into the weights in float64, the shift a column of the weight matrix the product adds, 3x3 stride-1
layers as Winograd); the Multiply and Add steps hand its result on.  The results differ from the three
steps' by float rounding only, as the ONNX session's folded BatchNormalization does.
"""

from __future__ import annotations

import numpy as np

from ...executor import BoundNode
from ...ir import Graph
from ...kernels import conv as K
from ...plan_fusion import Uses, constant_value, pass_through
from .ops._common import explicit_pads
from .ops.conv import convolution

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def pack_conv_scale_shift(graph: Graph, plan) -> int:
    """Rewrite ``plan``'s Convolution [-> Multiply] -> Add chains that qualify; returns how many."""
    uses = Uses(graph, plan)
    initializers = {id(v): v for v in graph.initializers.values()}
    reader = {}  # value id -> the step reading it, for values read by one step
    for k, ids in enumerate(plan.inputs):
        for vid in ids:
            reader[vid] = None if vid in reader else k
    packed = 0
    for i, step in enumerate(plan.steps):
        if step.node.op != "Convolution" or step.fn is not convolution or plan.foldable[i] or None in plan.inputs[i]:
            continue
        w = constant_value(plan.inputs[i][1], initializers, plan)
        if not isinstance(w, np.ndarray) or w.dtype not in _FLOATS or w.ndim < 3:
            continue
        channels = w.shape[0]
        chain, factors, vid = [], {}, plan.outputs[i][0]
        for op in ("Multiply", "Add"):
            j = reader.get(vid) if uses.readers.get(vid) == 1 and vid not in uses.outputs else None
            if j is None or plan.steps[j].node.op != op or plan.steps[j].attrs.get("auto_broadcast") != "numpy":
                continue  # a Multiply is optional; the Add is checked below
            other = [u for u in plan.inputs[j] if u != vid]
            c = constant_value(other[0], initializers, plan) if len(other) == 1 else None
            if not isinstance(c, np.ndarray) or c.dtype != w.dtype or not _per_channel(c.shape, channels, w.ndim):
                break
            chain.append(j)
            factors[op] = c.reshape(-1).astype(np.float64)
            vid = plan.outputs[j][0]
        if "Add" not in factors:
            continue
        scale = factors.get("Multiply", np.ones(channels))
        folded = (w.astype(np.float64) * scale.reshape((channels,) + (1,) * (w.ndim - 1))).astype(w.dtype)
        weights = K.pack_conv_weights(folded, factors["Add"].astype(w.dtype))
        if weights is None:
            continue
        conv_out = plan.outputs[i][0]
        plan.steps[i] = BoundNode(
            step.node,
            _PackedConvolution(weights),
            step.attrs,
            step.label + " with " + " and ".join(plan.steps[j].label for j in chain),
        )
        plan.inputs[i] = [plan.inputs[i][0], None]
        for j in chain:  # each hands the convolution's result on, which lives until the last of them
            plan.steps[j] = BoundNode(plan.steps[j].node, pass_through, {}, plan.steps[j].label)
            plan.inputs[j] = [conv_out]
            plan.donors[j] = ()
            plan.drops[j] = [d for d in plan.drops[j] if d != conv_out]
        plan.drops[chain[-1]].append(conv_out)
        packed += 1
    plan.changed()
    return packed


def _per_channel(shape: tuple, channels: int, rank: int) -> bool:
    """Whether a constant of ``shape`` broadcasts as one value per output channel of a (N, C, ...) result."""
    dims = (1,) * (rank - len(shape)) + tuple(shape)
    return len(dims) == rank and dims[0] == 1 and dims[1] == channels and all(d == 1 for d in dims[2:])


class _PackedConvolution:
    """A Convolution with its scale and shift folded into packed weights, computed once."""

    def __init__(self, weights):
        self.weights = weights

    def __call__(self, ctx, x, _w=None, *, strides, pads_begin, pads_end, dilations, auto_pad="explicit"):
        begin, end = explicit_pads(
            auto_pad, x.shape[2:], self.weights.shape[2:], strides, dilations, pads_begin, pads_end
        )
        return K.conv(x, self.weights, None, strides, begin, end, dilations)
