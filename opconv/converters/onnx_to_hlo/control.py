"""Control flow: ONNX If -> HLO If with the (already converted) branches as regions (the taken branch inlined
when the condition is a constant); Loop -> While.

The engine rewrites subgraphs before the node that owns them, so when the If
rule runs its branches are HLO graphs already; they read enclosing values
directly, as HLO regions may.  The region graphs are shared with the ONNX
node until the engine removes it.
"""

from __future__ import annotations

import numpy as np

from ...ir import Graph
from ...types import TensorType
from ..lowering import lower
from ..rewrite import branch_outputs_differ, constant_value
from ._common import Refuse, concat, convert, full, hlo, out_type, reshape, shape_of, static_type


@lower("onnx", "hlo", "If", inputs=1)
def _if_(b, m):
    """A constant condition (after folding: once input shapes are fixed) inlines the taken branch, whose outputs
    may then differ from the other's; a run-time one needs both branches to give the If's one type."""
    node = m.root
    cond = node.inputs[0]
    then_branch, else_branch = node.attr("then_branch"), node.attr("else_branch")
    for branch in (then_branch, else_branch):
        if branch is None or branch.inputs:
            raise Refuse("a branch is missing or takes inputs")
    data = constant_value(cond)
    if data is not None and np.asarray(data).size == 1:
        taken = bool(np.asarray(data).reshape(()))
        b.discard(else_branch if taken else then_branch)
        return b.inline(then_branch if taken else else_branch)
    if static_type(cond).dtype != "bool":
        raise Refuse("the If condition is not boolean")
    if int(np.prod(shape_of(cond))) != 1:
        raise Refuse("the If condition has more than one element")
    why = branch_outputs_differ(then_branch, else_branch)
    if why:
        raise Refuse(why)
    types = [out_type(m, i) for i in range(len(node.outputs))]
    pred = reshape(b, cond, ())
    outs = hlo(b, "If", pred, types=types, true_branch=then_branch, false_branch=else_branch)
    return outs if isinstance(outs, list) else [outs]


@lower("onnx", "hlo", "Loop")
def _loop(b, m):
    """Loop -> While carrying (iteration, condition, values..., scan buffers...); the bound M is read by the cond
    region.  A scan output (stacked per iteration) needs the count fixed, so that its shape is: a constant M and
    a condition that stays true; it is carried as a (M, ...) buffer written at row i with DynamicUpdateSlice."""
    node = m.root
    body = node.attr("body")
    inputs = list(node.inputs) + [None] * (2 - len(node.inputs))
    trip, cond0, initial = inputs[0], inputs[1], inputs[2:]
    if body is None or len(body.inputs) != 2 + len(initial):
        raise Refuse("the body does not take (iteration, condition, values...)")
    n_scan = len(body.outputs) - 1 - len(initial)
    if n_scan < 0 or len(node.outputs) != len(initial) + n_scan:
        raise Refuse("its outputs, carried values and body outputs do not agree")
    for v in list(body.inputs) + list(body.outputs) + initial:
        static_type(v)
    parts = [static_type(v) for v in body.outputs[1 + len(initial) :]]
    count = _fixed_trip_count(trip, cond0, body) if n_scan else None
    graph = m.graph
    i0 = b.const(np.asarray(0, np.int64), "iteration")
    c0 = reshape(b, cond0, ()) if cond0 is not None else b.const(np.asarray(True), "condition")
    bound = None if trip is None else reshape(b, convert(b, trip, "int64"), ())
    buffer_types = [TensorType(t.dtype, (count, *t.shape)) for t in parts]
    buffers = [full(b, 0, t.dtype, t.shape, "scan_output") for t in buffer_types]
    types = [TensorType("int64", ()), TensorType("bool", ())] + [static_type(v) for v in initial] + buffer_types
    cond = Graph("cond", parent=graph)
    params = [cond.add_input(f"cond_arg{i}", t) for i, t in enumerate(types)]
    keep_going = params[1]
    if bound is not None:
        below = hlo(cond, "Compare", params[0], bound, type=TensorType("bool", ()), comparison_direction="LT")
        keep_going = hlo(cond, "And", params[1], below, type=TensorType("bool", ()))
    elif keep_going is params[1]:
        keep_going = hlo(cond, "Copy", params[1], type=TensorType("bool", ()))
    cond.outputs = [keep_going]
    iteration = body.inputs[0]
    step = hlo(body, "Add", iteration, body.const(np.asarray(1, np.int64), "one"), type=TensorType("int64", ()))
    written = []
    for t, part in zip(buffer_types, body.outputs[1 + len(initial) :]):
        buffer = body.add_input(body.unique_name("scan_buffer"), t)
        row = reshape(body, iteration, (1,))
        start = (
            concat(body, [row, body.const(np.zeros(len(t.shape) - 1, np.int64), "zeros")], 0)
            if len(t.shape) > 1
            else row
        )
        written.append(hlo(body, "DynamicUpdateSlice", buffer, reshape(body, part, (1, *t.shape[1:])), start, type=t))
    body.outputs = [step] + list(body.outputs[: 1 + len(initial)]) + written
    outs = hlo(b, "While", i0, c0, *initial, *buffers, types=types, cond=cond, body=body)
    return outs[2:]


def _fixed_trip_count(trip, cond0, body) -> int:
    """The number of iterations when it is known before the loop runs (scan outputs' shapes depend on it)."""
    data = None if trip is None else constant_value(trip)
    if data is None:
        raise Refuse(
            "scan outputs need a constant trip count (their first dim); "
            + ("it has none" if trip is None else f"{trip.name!r} is computed at run time")
        )
    start = None if cond0 is None else constant_value(cond0)
    if cond0 is not None and (start is None or not np.all(start)):
        raise Refuse(
            f"scan outputs need a loop that runs its whole trip count; its condition ({cond0.name!r}) "
            "is not a constant true"
        )
    out = body.outputs[0]
    while out is not body.inputs[1] and out.producer is not None and out.producer.op in ("Copy", "Reshape"):
        out = out.producer.inputs[0]
    stays = out is body.inputs[1] or (constant_value(out) is not None and bool(np.all(constant_value(out))))
    if not stays:
        raise Refuse(
            f"scan outputs need a loop that runs its whole trip count; its body's condition output "
            f"({body.outputs[0].name!r}) may become false"
        )
    return max(int(np.asarray(data).reshape(())), 0)
