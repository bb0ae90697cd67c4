"""TensorIterator: runs its ``body`` graph once per slice of its sliced inputs.

The graph core keeps the IR's ``<port_map>`` and ``<back_edges>`` on the body
graph, as ``body.meta["port_map"]`` (see :mod:`opconv.dialects.openvino.io`)::

    {"inputs":  [{"external": 0, "internal": 0, "axis": 1, "start": 0, "end": -1, "stride": 1, "part_size": 1},
                 {"external": 1, "internal": 1}, ...],
     "outputs": [{"external": 0, "internal": 0}, {"external": 1, "internal": 1, "axis": 1, ...}],
     "back_edges": [{"from": 0, "to": 1}]}

``external`` is a position among the layer's inputs (outputs), ``internal`` a
position among the body's inputs (outputs).  An entry with an ``axis`` is
sliced (inputs) or concatenated over the iterations (outputs); an input
without one is passed whole to every iteration unless a back edge feeds its
body input from a body output of the previous iteration; an output without
one is the body's value after the last iteration.

Slice bounds follow OpenVINO: a negative ``start``/``end`` counts from the end
with -1 meaning past the last element, the iterations cover ``[start, end)``
in steps of ``|stride|``, from the back when ``stride`` is negative.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ....errors import ExecutionError
from ....ir import Graph
from ..executor import ov_op


class _Rule(NamedTuple):  # not a dataclass: defining one costs ~1 ms of every conversion's process
    external: int
    internal: int
    axis: int | None = None
    start: int = 0
    end: int = -1
    stride: int = 1
    part_size: int = 1

    def bounds(self, size: int) -> tuple[int, int]:
        """``(first, stop)``: the elements the iterations cover, after resolving negative bounds."""
        start = self.start + (size + 1 if self.start < 0 else 0)
        end = self.end + (size + 1 if self.end < 0 else 0)
        return (end, start) if self.stride < 0 else (start, end)

    def iterations(self, size: int) -> int:
        first, stop = self.bounds(size)
        if not 0 <= first < stop <= size or self.stride == 0:
            raise ExecutionError(
                f"slice start={self.start} end={self.end} stride={self.stride} does not fit an axis of size {size}"
            )
        return (stop - first) // abs(self.stride)

    def offset(self, size: int, iteration: int) -> int:
        first, stop = self.bounds(size)
        step = abs(self.stride)
        return first + iteration * step if self.stride > 0 else stop - (iteration + 1) * step


def port_map_rules(entries, kind: str) -> list[_Rule]:
    """The slicing rule of each ``port_map`` entry (``kind``: "input" or "output", for messages)."""
    try:
        return [_Rule(**entry) for entry in entries]
    except TypeError as e:
        raise ExecutionError(f"TensorIterator body has a malformed {kind} port map entry ({e})") from None


def _iteration_count(sliced, inputs) -> int:
    """The number of iterations the sliced inputs agree on."""
    counts = set()
    for r in sliced:
        x = np.asarray(inputs[r.external])
        counts.add(r.iterations(x.shape[r.axis % x.ndim]))
    if len(counts) > 1:
        raise ExecutionError(f"TensorIterator's sliced inputs disagree on the number of iterations: {sorted(counts)}")
    if not counts:
        raise ExecutionError("TensorIterator has no sliced input, so its number of iterations is unknown")
    return counts.pop()


@ov_op("TensorIterator")
def tensor_iterator(ctx, *inputs, body: Graph):
    if not isinstance(body, Graph):
        raise ExecutionError("TensorIterator has no body graph")
    port_map = body.meta.get("port_map") or {}
    in_rules = port_map_rules(port_map.get("inputs", ()), "input")
    out_rules = port_map_rules(port_map.get("outputs", ()), "output")
    back_edges = {edge["to"]: edge["from"] for edge in port_map.get("back_edges", ())}

    sliced = [r for r in in_rules if r.axis is not None]
    count = _iteration_count(sliced, inputs)

    feeds: list = [None] * len(body.inputs)
    for r in in_rules:
        if r.axis is None:
            feeds[r.internal] = inputs[r.external]
    parts: dict[int, list] = {r.internal: [] for r in out_rules if r.axis is not None}
    results: list = []
    for i in range(count):
        for r in sliced:
            x = np.asarray(inputs[r.external])
            axis = (r.axis or 0) % x.ndim  # set: a sliced rule
            at = r.offset(x.shape[axis], i)
            feeds[r.internal] = np.take(x, np.arange(at, at + r.part_size), axis=axis)
        missing = [k for k, f in enumerate(feeds) if f is None]
        if missing:
            raise ExecutionError(f"TensorIterator body input(s) {missing} have no port map entry")
        results = ctx.run_graph(body, feeds)
        for internal, out in parts.items():
            out.append(results[internal])
        for to, frm in back_edges.items():
            feeds[to] = results[frm]

    outputs: list = [None] * len(ctx.node.outputs)
    for r in out_rules:
        if r.axis is None:
            if not count:
                raise ExecutionError("TensorIterator ran no iteration, so it has no last value to return")
            outputs[r.external] = results[r.internal]
        else:
            pieces = parts[r.internal] if r.stride > 0 else parts[r.internal][::-1]
            if not pieces:
                raise ExecutionError("TensorIterator ran no iteration, so it has nothing to concatenate")
            outputs[r.external] = np.concatenate(pieces, axis=r.axis % np.ndim(pieces[0]))
    return tuple(outputs)
