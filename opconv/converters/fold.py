"""Constant folding on the ONNX side, before the rules run.

Exported models compute shapes at run time (``Shape -> Gather -> Concat ->
Reshape``).  Once the graph inputs have static shapes those computations are
constants, and opset1 wants them as constants (Reshape's target shape, axes).
Two steps:

1. ``Shape``/``Size`` of a value whose inferred shape is static become
   constants (ONNX shape inference ran before, with the static input shapes),
   and ``ConstantOfShape`` of a constant shape a broadcast view of its value;
2. every node the ONNX interpreter can compute from constants alone
   (deterministic, no subgraph) is evaluated by opconv's ONNX executor, and
   its consumers outside the constant subgraph read a new initializer.

Folding is a help, not a requirement: when the ONNX executor cannot bind the
graph (an op it has no kernel for), the graph is left as it was and the rules
report what they cannot convert.
"""

from __future__ import annotations

import numpy as np

from .. import budget
from ..errors import OpconvError
from ..ir import Graph, Model, Node, Value

# ONNX ops that only read their input's shape -> the constant they compute from a static shape.
_SHAPE_READERS = {
    "Shape": lambda node, shape: np.asarray(
        shape[_slice_bound(node.attr("start"), 0, len(shape)) : _slice_bound(node.attr("end"), len(shape), len(shape))],
        np.int64,
    ),
    "Size": lambda node, shape: np.asarray(int(np.prod(shape, dtype=np.int64)), np.int64),
}


def _slice_bound(value, default: int, rank: int) -> int:
    if value is None:
        return default
    value = int(value)
    return max(0, min(rank, value + rank if value < 0 else value))


def fold_constants(model: Model) -> int:
    """Fold ``model``'s constant subgraphs in place; returns how many values it replaced by initializers
    (0: the graph did not change, so folding again would not either)."""
    graph = model.graph
    count = _fold_shape_readers(graph) + _fold_uniform_fills(graph)
    folded = _evaluate_constants(model)
    return count + (_replace_with_constants(graph, folded) if folded else 0)


def _static(value: Value | None) -> tuple[int, ...] | None:
    shape = value.shape if value is not None else None
    if shape is None or not all(isinstance(d, int) and d >= 0 for d in shape):
        return None
    return tuple(shape)


def _fold_shape_readers(graph: Graph) -> int:
    count = 0
    for node in list(graph.nodes):
        reader = _SHAPE_READERS.get(node.op)
        if reader is None or node.domain not in ("", "ai.onnx") or len(node.outputs) != 1 or not node.inputs:
            continue
        shape = _static(node.inputs[0])
        if shape is None:
            continue
        out = node.outputs[0]
        if out.uses:  # a graph output nobody else reads keeps its producer: nothing to do
            count += _rewire(graph, node, out, graph.const(reader(node, shape), f"{out.name}/folded"))
    return count


def _fold_uniform_fills(graph: Graph) -> int:
    """ConstantOfShape of a constant shape -> an initializer that is a broadcast view of its one value.

    Exported models (the onnx package's light models, for one) rebuild whole weight tensors this way; the view
    costs no memory, and writers stream it without ever materialising it.  Ops that only move elements of a
    constant are folded here too (see :func:`_fold_element_mover`).  Returns how many values were replaced."""
    count = 0
    for node in list(graph.nodes):
        if node.op in _ELEMENT_MOVERS and node.domain in ("", "ai.onnx") and node.inputs:
            count += _fold_element_mover(graph, node)
        if node.op != "ConstantOfShape" or node.domain not in ("", "ai.onnx") or not node.inputs:
            continue
        shape_value = node.inputs[0]
        if shape_value is None or shape_value.const is None:
            continue
        shape = [int(d) for d in np.asarray(shape_value.const.numpy()).reshape(-1)]
        if any(d < 0 for d in shape):
            continue  # the executor reports it
        fill = node.attr("value")
        fill = np.zeros(1, np.float32) if fill is None else np.asarray(fill.numpy()).reshape(-1)
        if fill.size != 1:
            continue  # the executor reports it
        if budget.elements(shape) * fill.itemsize > budget.max_bytes():
            continue  # left to the rules, which refuse it with the budget's message
        out = node.outputs[0]
        if out.uses:
            view = np.broadcast_to(fill[:1].reshape(()), shape)
            count += _rewire(graph, node, out, graph.const(view, f"{out.name}/folded"))
    return count


# ONNX ops whose output is their first input's elements in the same (C) order, only shaped anew
_RESHAPERS = frozenset({"Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity"})
# ONNX ops whose output holds only elements of their first input
_ELEMENT_MOVERS = _RESHAPERS | {"Expand", "Transpose", "Tile"}


def _fold_element_mover(graph: Graph, node: Node) -> int:
    """A reshaping op of constants -> its data in the inferred static shape (a view); an element-moving op of
    a broadcast view -> that view's value over the inferred shape.  No executor start-up, no copy."""
    data, out = node.inputs[0], node.outputs[0]
    shape = _static(out) if len(node.outputs) == 1 else None
    if (
        shape is None
        or data is None
        or data.const is None
        or out.dtype != data.const.dtype
        or not out.uses
        or not all(v is None or v.const is not None for v in node.inputs)
    ):
        return 0
    array = data.const.numpy()
    if array.size and not any(array.strides):  # one value broadcast over the shape
        if budget.elements(shape) * array.itemsize > budget.max_bytes():
            return  # left to the rules, which refuse it with the budget's message
        folded = np.broadcast_to(array[(0,) * array.ndim], shape)
    elif node.op in _RESHAPERS and array.size == int(np.prod(shape, dtype=np.int64)):
        folded = array.reshape(shape)
    else:
        return 0
    return _rewire(graph, node, out, graph.const(folded, f"{out.name}/folded"))


def _rewire(graph: Graph, node: Node, old: Value, new: Value) -> int:
    """Make readers of ``old`` read ``new``; a graph output keeps ``old`` (its name) and its producer.
    Returns 1, the count of values replaced, for the callers' tallies."""
    old.replace_all_uses_with(new)
    if all(old is not o for o in graph.outputs) and all(not v.uses for v in node.outputs if v is not None):
        graph.remove_node(node)
    return 1


def _evaluate_constants(model: Model) -> dict[int, np.ndarray]:
    """id(value) -> data for every value the ONNX interpreter computes from constants alone."""
    graph = model.graph
    nodes = _constant_nodes(graph)
    if not nodes:
        return {}
    import dataclasses

    from ..dialects.onnx.executor import Session

    # The executor binds every node of the graph it is given: give it only the constant part (binding
    # all of a big graph costs more than the rest of a small conversion).
    part = Graph(graph.name, parent=graph.parent)
    part.inputs, part.initializers, part.nodes = list(graph.inputs), graph.initializers, nodes
    try:
        session = Session(dataclasses.replace(model, graph=part), fuse=False)  # folds the constant subgraphs
    except OpconvError:
        return {}
    return session.folded_values()


def _constant_nodes(graph: Graph) -> list[Node]:
    """The nodes computed from initializers and other such nodes alone, in graph order.

    Whether a node is deterministic is the executor's to say (random ops are not folded); this only
    leaves out what can never be constant: nodes reading a graph input or a value computed from one,
    and nodes with subgraphs."""
    known = {id(v) for v in graph.initializers.values()}
    nodes = []
    for node in graph.nodes:
        if any(True for _ in node.subgraphs()) or not all(v is None or id(v) in known for v in node.inputs):
            continue
        nodes.append(node)
        known.update(id(v) for v in node.outputs if v is not None)
    return nodes


def _replace_with_constants(graph: Graph, folded: dict[int, object]) -> int:
    count = 0
    made: dict[int, Value] = {}
    for node in list(graph.nodes):
        if all(v is None or id(v) in folded for v in node.outputs):
            continue  # a constant node itself: it goes away once nobody reads it
        for i, v in enumerate(node.inputs):
            if v is None or id(v) not in folded or v.producer is None:
                continue
            data = folded[id(v)]
            if isinstance(data, np.generic):
                data = np.asarray(data)  # a 0-d result (Gather of one index) some kernels give as a numpy scalar
            if not isinstance(data, np.ndarray) or data.dtype.kind in "OUSV":
                continue  # sequences, strings: IR has no constant for them
            if id(v) not in made:
                made[id(v)] = graph.const(data, f"{v.name}/folded")
                count += 1
            node.set_input(i, made[id(v)])
    _remove_unused(graph)
    return count


def _remove_unused(graph: Graph) -> None:
    """Remove nodes whose outputs nobody reads (consumers first, so chains go in one pass)."""
    outputs = {id(v) for v in graph.outputs}
    for node in reversed(list(graph.nodes)):
        if any(v is not None and (v.uses or id(v) in outputs) for v in node.outputs):
            continue
        inputs = [v for v in node.inputs if v is not None]
        graph.remove_node(node)
        for v in inputs:
            if (
                v.const is not None
                and not v.uses
                and id(v) not in outputs
                and graph.initializers.get(v.name) is v
                and v not in graph.inputs
            ):
                del graph.initializers[v.name]
