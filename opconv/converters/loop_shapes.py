"""Static types for ONNX Loops, which ONNX shape inference leaves open.

ONNX's Loop inference strips the dims of every loop-carried value (a body may change a state's shape) and of a
scan output's first axis (it ignores a constant trip count), so once input shapes are fixed a Loop still yields
values of unknown shape, and so does everything after it.  :class:`LoopTyping` closes the gap between inference
rounds of :func:`opconv.converters.static_inputs.static_copy`:

* a carried body input of unknown dims gets the static type of the value the Loop starts it from (a *pin*);
  the next inference round types the body from it, and the pin stays only if the body gives back that very type
  (else it is undone and never tried again: that state changes shape);
* a carried output whose body input and output agree on a static type gets it;
* a scan output gets ``(iterations, *body's scan output shape)`` when the Loop runs exactly its constant trip
  count (a constant true condition the body passes through unchanged).

The outputs' types reach the next inference round as value_info, which ONNX merges with what it infers (so
the consumers are typed too); ``with_inferred_types`` keeps them.
"""

from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, Value
from ..types import TensorType
from .rewrite import constant_value


def _static(value: Value | None) -> bool:
    t = None if value is None else value.type
    return isinstance(t, TensorType) and t.dtype is not None and t.is_static


def _open_dims(value: Value) -> bool:
    """A tensor type whose dims a pin may fix (unknown dims or rank, not already static)."""
    t = value.type
    return t is None or (isinstance(t, TensorType) and not t.is_static)


class LoopTyping:
    """The pins made so far, over the rounds of one ``static_copy``.  Each round reloads the model, so a state is
    known by its Loop's first output name and its position (two bodies may name their inputs alike)."""

    def __init__(self):
        self.pinned: dict[str, object] = {}  # state -> its body input's type before the pin
        self.unverified: set[str] = set()  # pinned in the last round, not yet checked against the body's output
        self.varying: set[str] = set()  # states whose shape the body changes: never pinned again

    def apply(self, graph: Graph) -> bool:
        """Type ``graph``'s Loops (nested ones too) as far as they can be now; whether anything changed."""
        changed = False
        for node in list(graph.walk()):
            if node.op == "Loop" and node.domain in ("", "ai.onnx") and node.attr("body") is not None:
                changed |= self._loop(node)
        return changed

    def _loop(self, node: Node) -> bool:
        body: Graph = node.attr("body")
        initial = list(node.inputs[2:])
        loop = next((v.name for v in node.outputs if v is not None and v.name), None)
        if loop is None or len(body.inputs) != 2 + len(initial) or len(body.outputs) < 1 + len(initial):
            return False
        states = [f"{loop}#{k}" for k in range(len(initial))]
        undone = set(self.varying)
        pinned = [
            self._state(state, start, body.inputs[2 + k], body.outputs[1 + k])
            for k, (state, start) in enumerate(zip(states, initial))
        ]
        if self.varying - undone:  # what the body inferred from a wrong pin goes: the next round infers afresh
            for inner in body.walk():
                for value in inner.outputs:
                    if value is not None:
                        value.type = None
        if any(pinned) or any(state in self.unverified for state in states):
            return True  # the body's types follow the pins only after the next inference round
        changed = False
        for k, out in enumerate(node.outputs[: len(initial)]):
            inside, back = body.inputs[2 + k], body.outputs[1 + k]
            if out is not None and _static(inside) and back.type == inside.type and out.type != inside.type:
                out.type = inside.type
                changed = True
        iterations = _iterations(node, body)
        if iterations is not None:
            for out, part in zip(node.outputs[len(initial) :], body.outputs[1 + len(initial) :]):
                if out is not None and _static(part) and not _static(out):
                    out.type = TensorType(part.type.dtype, (iterations, *part.type.shape))
                    changed = True
        return changed

    def _state(self, name: str, start: Value | None, inside: Value, back: Value) -> bool:
        if name in self.unverified:  # pinned last round: the body was inferred from the pin since
            self.unverified.discard(name)
            if _static(back) and back.type == inside.type:
                return False
            inside.type = self.pinned.pop(name)
            self.varying.add(name)
            return True
        if name in self.varying or name in self.pinned or not _static(start) or not _open_dims(inside):
            return False
        if inside.type is not None and (
            inside.type.dtype != start.type.dtype
            or (inside.type.shape is not None and len(inside.type.shape) != len(start.type.shape))
        ):
            return False
        self.pinned[name] = inside.type
        self.unverified.add(name)
        inside.type = start.type
        return True


def _iterations(node: Node, body: Graph) -> int | None:
    """The number of times the Loop runs when it is its constant trip count, else None."""
    trip = constant_value(node.inputs[0] if node.inputs else None)
    if trip is None or trip.size != 1:
        return None
    condition = node.inputs[1] if len(node.inputs) > 1 else None
    if condition is not None:
        start = constant_value(condition)
        if start is None or not np.all(start):
            return None
    back = body.outputs[0]
    while back is not body.inputs[1] and back.producer is not None and back.producer.op == "Identity":
        back = back.producer.inputs[0]
    stays = back is body.inputs[1] or (constant_value(back) is not None and bool(np.all(constant_value(back))))
    return max(int(trip.reshape(())), 0) if stays else None


def typed_loop_outputs(graph: Graph) -> set[str]:
    """Names of the top-level Loop outputs with a static type (kept as value_info for the next inference)."""
    return {v.name for n in graph.nodes if n.op == "Loop" for v in n.outputs if v is not None and _static(v)}
