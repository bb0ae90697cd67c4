"""Session-time rewrite of the HLO executor's plan: a ConvBias in the channels-first layout with constant
weights and bias runs as the ONNX session's packed convolution (``kernels.conv.pack_conv_weights``: the bias
is a column of the weight matrix, which the product adds, and 3x3 stride-1 layers run as Winograd), instead
of a convolution and then a pass adding the bias.  The results differ from the unpacked ones by float
rounding only (see opconv/kernels/conv.py).
"""

from __future__ import annotations

import numpy as np

from ...executor import BoundNode
from ...ir import Graph
from ...kernels import conv as K
from ...kernels._common import per_dim
from ...plan_fusion import constant_value
from .ops.conv import split_padding

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def pack_conv_bias(graph: Graph, plan) -> int:
    """Rewrite ``plan``'s ConvBias steps that qualify (see the module docstring); returns how many."""
    initializers = {id(v): v for v in graph.initializers.values()}
    packed = 0
    for i, step in enumerate(plan.steps):
        node, a = step.node, step.attrs
        if node.op != "ConvBias" or plan.foldable[i] or len(plan.inputs[i]) != 3 or None in plan.inputs[i]:
            continue
        n = len(a["input_spatial_dimensions"])
        layouts = [
            (a["input_batch_dimension"], a["input_feature_dimension"], *a["input_spatial_dimensions"]),
            (
                a["kernel_output_feature_dimension"],
                a["kernel_input_feature_dimension"],
                *a["kernel_spatial_dimensions"],
            ),
            (a["output_batch_dimension"], a["output_feature_dimension"], *a["output_spatial_dimensions"]),
        ]
        if (
            any([int(d) for d in layout] != list(range(n + 2)) for layout in layouts)
            or int(a["batch_group_count"]) != 1
            or (a["auto_pad"] or "NOTSET").upper() != "NOTSET"
            or any(f != 1 for f in per_dim(a["lhs_dilation"], n, "lhs_dilation"))
        ):
            continue
        w, b = (constant_value(vid, initializers, plan) for vid in plan.inputs[i][1:])
        groups = int(a["feature_group_count"])
        if (
            not isinstance(w, np.ndarray)
            or not isinstance(b, np.ndarray)
            or w.dtype not in _FLOATS
            or b.dtype != w.dtype
            or w.ndim != n + 2
            or b.shape != (w.shape[0],)
            or w.shape[0] % groups
        ):
            continue
        weights = K.pack_conv_weights(w, b, groups)
        if weights is None:
            continue
        pads = split_padding(a["padding"], n)
        plan.steps[i] = BoundNode(
            node,
            _PackedConv(
                weights,
                per_dim(a["window_strides"], n, "window_strides"),
                [lo for lo, _ in pads],
                [hi for _, hi in pads],
                per_dim(a["rhs_dilation"], n, "rhs_dilation"),
                groups,
            ),
            {},
            step.label,
            step.deterministic,
        )
        plan.inputs[i] = [plan.inputs[i][0], None, None]
        packed += 1
    plan.changed()
    return packed


class _PackedConv:
    """A ConvBias with its weights and bias packed once."""

    def __init__(self, weights, strides, pads_begin, pads_end, dilations, groups):
        self.weights = weights
        self.args = (strides, pads_begin, pads_end, dilations, groups)

    def __call__(self, ctx, x, _w=None, _b=None):
        return K.conv(x, self.weights, None, *self.args)
