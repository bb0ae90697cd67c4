"""Adapters of the reductions: ``axes`` became an input (ReduceSum-13, the others at 18).

From those versions an absent or empty ``axes`` reduces everything unless
``noop_with_empty_axes=1``, in which case the op is the identity.
"""

from __future__ import annotations

import numpy as np

from ...ir import Attr
from ..rewrite import REDUCE_AXES_INPUT_SINCE
from .registry import downgrade, upgrade


def _axes_to_input(ctx, node):
    axes = ctx.pop_attr(node, "axes")
    value = None if axes is None else ctx.const(np.array(axes, np.int64), "axes")
    ctx.set_inputs(node, [node.inputs[0], value])


def _axes_to_attribute(ctx, node):
    noop = int(ctx.pop_attr(node, "noop_with_empty_axes", 0))
    axes = node.inputs[1] if len(node.inputs) > 1 else None
    data = None if axes is None else np.asarray(ctx.static(axes, "input 'axes'")).reshape(-1)
    if data is None or data.size == 0:
        if noop:
            ctx.replace(node, [ctx.op("Identity", node.inputs[0])])
            return
    else:
        node.attrs["axes"] = Attr("axes", "ints", [int(a) for a in data])
    ctx.set_inputs(node, [node.inputs[0]])


for _op, _since in REDUCE_AXES_INPUT_SINCE.items():
    upgrade(_op, _since)(_axes_to_input)
    downgrade(_op, _since)(_axes_to_attribute)
