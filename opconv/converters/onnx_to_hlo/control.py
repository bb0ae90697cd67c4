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
from ..rewrite import branch_outputs_differ, constant_value
from ._common import Refuse, Rule, captures, convert, hlo, out_type, reshape, rules_for_arities, shape_of, static_type


def _if(b, m):
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
        return b.inline(then_branch if bool(np.asarray(data).reshape(())) else else_branch)
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
    outs = outs if isinstance(outs, list) else [outs]
    return (outs + [None] * m.n_outputs)[:m.n_outputs]


RULES = []
for _n in range(1, 9):
    RULES += rules_for_arities(f"If-{_n}-to-If", "If", _if, [1], _outputs=_n)


def _loop(b, m):
    """Loop -> While carrying (iteration, condition, values...); the bound M is read by the cond region."""
    node = m.root
    body = node.attr("body")
    inputs = list(node.inputs)
    trip, cond0, initial = inputs[0], inputs[1] if len(inputs) > 1 else None, inputs[2:]
    if body is None or len(body.inputs) != 2 + len(initial):
        raise Refuse("the body does not take (iteration, condition, values...)")
    if len(body.outputs) != 1 + len(initial):
        raise Refuse("scan outputs (stacked per iteration) are not mapped")
    for v in list(body.inputs) + list(body.outputs) + initial:
        static_type(v)
    graph = m.graph
    i0 = b.const(np.asarray(0, np.int64), "iteration")
    c0 = reshape(b, cond0, ()) if cond0 is not None else b.const(np.asarray(True), "condition")
    bound = None if trip is None else reshape(b, convert(b, trip, "int64"), ())
    types = [TensorType("int64", ()), TensorType("bool", ())] + [static_type(v) for v in initial]
    cond = Graph("cond", parent=graph)
    params = [cond.add_input(f"cond_arg{i}", t) for i, t in enumerate(types)]
    keep_going = params[1]
    if bound is not None:
        below = hlo(cond, "Compare", params[0], bound, type=TensorType("bool", ()), comparison_direction="LT")
        keep_going = hlo(cond, "And", params[1], below, type=TensorType("bool", ()))
    elif keep_going is params[1]:
        keep_going = hlo(cond, "Copy", params[1], type=TensorType("bool", ()))
    cond.outputs = [keep_going]
    step = hlo(body, "Add", body.inputs[0], body.const(np.asarray(1, np.int64), "one"), type=TensorType("int64", ()))
    body.outputs = [step] + list(body.outputs)
    outs = hlo(b, "While", i0, c0, *initial, types=types, cond=cond, body=body)
    values = outs[2:]
    return (values + [None] * m.n_outputs)[:m.n_outputs]


def _loop_pattern(k: int, with_trip: bool, with_cond: bool):
    """Loop(M?, cond?, v1..vk) with k outputs (no scan outputs)."""
    names = (["trip"] if with_trip else []) + (["cond"] if with_cond else []) + [f"v{i}" for i in range(k)]

    def fn(p, *xs):
        bound = dict(zip(names, xs))
        return p.node("Loop", bound.get("trip"), bound.get("cond"), *xs[len(names) - k:], _outputs=k)

    return captures(fn, names)


for _k in range(1, 7):
    for _trip in (True, False):
        for _cond in (True, False):
            RULES.append(Rule(f"Loop-to-While/{_k}{'-M' if _trip else ''}{'-cond' if _cond else ''}",
                              _loop_pattern(_k, _trip, _cond), _loop))
