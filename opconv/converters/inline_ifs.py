"""ONNX ``If`` nodes whose condition is a constant, replaced by their taken branch before any conversion.

Part of the fixed point of :func:`.static_inputs.static_copy`: exported models often choose shape arithmetic by
an ``If`` on a shape, which becomes a constant once input shapes are fixed; inlining the taken branch lets that
arithmetic fold in turn, and the untaken branch (which may hold ops no target has) disappears.
"""

from __future__ import annotations

import numpy as np

from ..ir import Graph
from .rewrite import Builder, constant_value, same_domain


def inline_constant_ifs(graph: Graph) -> int:
    """Before the rules: replace each ONNX ``If`` of ``graph`` whose condition is a constant by its taken branch.

    Done on the ONNX graph, so that what the branch computes from constants folds too (an If on a shape
    often chooses the shape arithmetic that follows); the pipeline folds again while this finds any.
    Returns how many were inlined."""
    count = 0
    for node in list(graph.nodes):
        if node.op != "If" or not same_domain(node.domain, "") or node.graph is not graph:
            continue
        data = constant_value(node.inputs[0])
        if data is None or np.asarray(data).size != 1:
            continue
        taken = bool(np.asarray(data).reshape(()))
        branch, other = node.attr("then_branch"), node.attr("else_branch")
        branch, other = (branch, other) if taken else (other, branch)
        if (
            branch is None
            or branch.inputs
            or len(branch.outputs) != len(node.outputs)
            or any(v in graph.outputs for v in branch.outputs)
        ):
            continue
        b = Builder(graph, node, domain="", version=None)
        values = b.inline(branch)
        for old, new in zip(node.outputs, values):
            if old is None:
                continue
            if (
                new.producer is not None
                and new.producer.graph is graph
                and old in graph.outputs
                and not any(new is o for o in graph.outputs)
            ):
                new.name, new.type = old.name, old.type or new.type  # the moved node now makes the output
                graph.outputs[graph.outputs.index(old)] = new
            elif old in graph.outputs:
                copy = graph.op("Identity", new, name=graph.unique_name(f"{old.name}/taken"), before=node)
                copy.type = old.type
                copy.name = old.name
                graph.outputs[graph.outputs.index(old)] = copy
            old.replace_all_uses_with(new)
        for gone in list(other.walk()) if other is not None else ():
            gone.detach()  # the untaken branch: its reads of enclosing values go with it
            gone.graph = None
        graph.remove_node(node)
        count += 1
    return count
