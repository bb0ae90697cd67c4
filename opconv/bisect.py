"""``opconv verify --bisect``: the first node of model A whose output B no longer reproduces.

When two models' outputs differ, the interesting question is where the difference starts.  The values of A are
paired with B's by the names conversions keep (:func:`map_values`), then compared in A's topological order, a
chunk of values per run of each side (so a large model never holds all its intermediates at once); the first
pair outside tolerance is the divergence.  The comparison uses :func:`opconv.compare.compare_arrays`, with
the same tolerances as the final outputs.

How names survive a conversion:

- ONNX -> ONNX (upgrade, downgrade, decompose): every node output keeps its value name.
- An IR written by OpenVINO's own converter keeps ONNX tensor names in its ports' ``names``.
- opconv's rewrite rules name each node they make ``<source node>/<Op>`` (``conv2/Convolution_6``), so every
  node of B whose name is A's node name, or starts with it and a ``/``, was converted from that node (the
  longest such name wins: ``/layer1/conv`` and ``/layer1/conv/Conv`` are different nodes).  The value that
  leaves that group of B's nodes (read by a node outside the group, or a graph output) is A's node output.
- Graph outputs pair as ``verify`` pairs them.

A node of A with no counterpart in B (folded away, fused into the next node, or unnamed) is not compared; the
divergence then lists the unchecked nodes between the last agreeing value and the first diverging one, since
the difference may have started in any of them.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .compare import OutputComparison, compare_arrays
from .ir import Model, Node, Value
from .types import TensorType, element_type

#: intermediates one run of one side may return at once; the chunks are packed to stay below it
DEFAULT_CHUNK_BYTES = 256 * 2**20

#: a value whose size its type does not tell is counted at the largest size seen so far, this at first
_UNKNOWN_SIZE_GUESS = 4 * 2**20


@dataclass
class ValuePair:
    """A value of A (the output of ``node``) and the value of B that should hold the same data."""

    node: Node  # A's node
    a: Value
    b: Value
    by: str  # 'name', 'output' or 'node name'
    b_nodes: list[Node]  # B's nodes converted from ``node`` (just the producer when paired by name)


@dataclass
class Divergence:
    """The first value of A (in topological order) whose counterpart in B is outside tolerance."""

    node: str
    op: str
    output: str  # A's value
    index: int  # the node's position in A's topological order
    b_value: str
    b_node: str  # the node of B that computes ``b_value``
    b_op: str
    b_nodes: list[str]  # every node of B converted from ``node``
    paired_by: str
    comparison: OutputComparison
    #: A's nodes between the last agreeing value and this node: none of their outputs was compared (no counterpart
    #: in B, or one of another shape), so the difference may have started in any of them
    unchecked_before: list[str] = field(default_factory=list)
    histogram: Any = None  # the ErrorHistogram of |B - A| over the value (opconv.html_report draws it)

    def describe(self) -> str:
        """One line: ``first divergence: node 'conv2' (Conv) output 'c2' ... B's 'conv2/Add_7' (Add)``."""
        c = self.comparison
        figures = (
            c.message
            if not c.total or c.expected_shape != c.actual_shape
            else (
                f"max abs error {c.max_abs_error:.3g}, max rel error {c.max_rel_error:.3g}, "
                f"{c.mismatches} of {c.total} elements outside tolerance"
            )
        )
        line = (
            f"first divergence: node {self.node!r} ({self.op}, #{self.index} in A's order), output "
            f"{self.output!r} vs B's {self.b_value!r} from {self.b_node!r} ({self.b_op}): {figures}"
        )
        if len(self.b_nodes) > 1:
            line += f"; B's nodes converted from it: {_some(self.b_nodes)}"
        if self.unchecked_before:
            line += (
                f"; it may have started in the {len(self.unchecked_before)} unchecked node(s) before it: "
                f"{_some(self.unchecked_before)}"
            )
        return line

    def to_json(self) -> dict:
        return {
            "node": self.node,
            "op": self.op,
            "output": self.output,
            "index": self.index,
            "b_value": self.b_value,
            "b_node": self.b_node,
            "b_op": self.b_op,
            "b_nodes": list(self.b_nodes),
            "paired_by": self.paired_by,
            "unchecked_before": list(self.unchecked_before),
            **{k: v for k, v in self.comparison.to_json().items() if k != "name"},
        }


def _some(names: list[str], shown: int = 6) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


@dataclass
class BisectReport:
    """What :func:`first_divergence` found and what it took."""

    divergence: Divergence | None
    values: int  # node outputs of A's top graph
    paired: int  # of them with a counterpart in B
    compared: int  # compared before stopping
    runs: int  # runs of each side
    seconds: float = 0.0

    def summary(self) -> str:
        if self.divergence is not None:
            return self.divergence.describe()
        return (
            f"bisect: no paired intermediate value differs ({self.compared} of {self.paired} paired values "
            f"compared, {self.values} values in A)"
        )

    def to_json(self) -> dict:
        return {
            "values": self.values,
            "paired": self.paired,
            "compared": self.compared,
            "runs": self.runs,
            "seconds": round(self.seconds, 6),
        }


# ---------------------------------------------------------------------------
# pairing A's values with B's
# ---------------------------------------------------------------------------


def map_values(model_a: Model, model_b: Model, output_pairs: Mapping[str, str] | None = None) -> list[ValuePair]:
    """A's node outputs with a counterpart in B, in A's topological order (see the module's docstring).

    ``output_pairs`` maps A's graph output names to B's (by position when the names differ, as ``verify`` pairs
    them); by default outputs pair by name.
    """
    graph_b = model_b.graph
    b_by_name: dict[str, Value] = {}
    for node in graph_b.nodes:
        for v in node.outputs:
            if v is not None:
                for name in (v.name, *v.meta.get("tensor_names", ())):
                    b_by_name.setdefault(name, v)
    b_outputs = {v.name: v for v in graph_b.outputs}
    output_pairs = dict(output_pairs or {})
    groups = _groups_of(model_a, model_b)
    pairs = []
    for node in model_a.graph.nodes:
        group = groups.get(node.name, [])
        leaving = _leaving_values(group, graph_b) if group else []
        outputs = [v for v in node.outputs if v is not None]
        for v in outputs:
            b = b_by_name.get(v.name)
            if b is not None and b.producer is not None:
                pairs.append(ValuePair(node, v, b, "name", group or [b.producer]))
                continue
            b = b_outputs.get(output_pairs.get(v.name, v.name)) if _is_output(v, model_a) else None
            if b is not None and b.producer is not None:
                pairs.append(ValuePair(node, v, b, "output", group or [b.producer]))
                continue
            b = _pick_leaving(v, leaving, single=len(outputs) == 1)
            if b is not None:
                pairs.append(ValuePair(node, v, b, "node name", group))
    return pairs


def _groups_of(model_a: Model, model_b: Model) -> dict[str, list[Node]]:
    """A's node name -> B's nodes named after it (``name`` or ``name/...``, the longest A name winning)."""
    names_a = {n.name for n in model_a.graph.nodes if n.name}
    groups: dict[str, list[Node]] = {}
    for node in model_b.graph.nodes:
        name = node.name or ""
        owner = name if name in names_a else None
        cut = name.rfind("/")
        while owner is None and cut > 0:
            if name[:cut] in names_a:
                owner = name[:cut]
            cut = name.rfind("/", 0, cut)
        if owner is not None:
            groups.setdefault(owner, []).append(node)
    return groups


def _leaving_values(group: list[Node], graph_b) -> list[Value]:
    """The outputs of ``group``'s nodes that something outside the group reads (or that are graph outputs)."""
    inside = {id(n) for n in group}
    outputs = {id(v) for v in graph_b.outputs}
    return [
        v
        for n in group
        for v in n.outputs
        if v is not None and (id(v) in outputs or any(id(c) not in inside for c in v.consumers()))
    ]


def _pick_leaving(v: Value, leaving: list[Value], *, single: bool) -> Value | None:
    """The leaving value that holds ``v``: the only one that may have ``v``'s shape (a value whose shape is not
    declared may), or the last of them when ``v`` is its node's only output."""
    shape = v.shape if isinstance(v.type, TensorType) and v.type.is_static else None
    fits = [
        b
        for b in leaving
        if shape is None
        or not (isinstance(b.type, TensorType) and b.type.is_static)
        or tuple(b.shape or ()) == tuple(shape)
    ]
    return fits[-1] if len(fits) == 1 or (fits and single) else None


def _is_output(v: Value, model: Model) -> bool:
    return any(v is o for o in model.graph.outputs)


# ---------------------------------------------------------------------------
# finding the divergence
# ---------------------------------------------------------------------------


def first_divergence(
    model_a: Any,
    model_b: Any,
    feeds_a: Mapping[str, Any],
    feeds_b: Mapping[str, Any],
    *,
    backend_a: Any = "opconv",
    backend_b: Any = "opconv",
    rtol: float | None = None,
    atol: float | None = None,
    precision: str | None = None,
    seed: int = 0,
    output_pairs: Mapping[str, str] | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    loaded: tuple[Model, Model] | None = None,
    progress: Callable[[str, str, float | None], None] | None = None,
) -> BisectReport:
    """Run A and B on ``feeds_a``/``feeds_b`` chunk by chunk and find A's first value B does not reproduce.

    ``backend_a``/``backend_b`` are backend names or objects of :mod:`opconv.backends` (a name gets ``seed``
    for the opconv backend).  Each run asks a side for the next paired values whose sizes add up to at most
    ``chunk_bytes`` (at least one value), compares them in order and stops at the first outside tolerance
    (``rtol``/``atol``/``precision`` as for :func:`opconv.compare.compare_arrays`).  ``loaded`` gives the models
    already loaded from ``model_a``/``model_b`` (which runtimes then still read from their files).
    ``progress("bisect", what, seconds)`` hears when each chunk's runs start (seconds None) and end, as
    :func:`opconv.verify` tells its progress.
    """
    import opconv

    from .html_report import error_histogram

    start = time.perf_counter()
    source_a, source_b = model_a, model_b
    model_a, model_b = loaded or (opconv.load(source_a), opconv.load(source_b))
    run_a, run_b = _backend(backend_a, seed), _backend(backend_b, seed)
    pairs = map_values(model_a, model_b, output_pairs)
    values = sum(v is not None for n in model_a.graph.nodes for v in n.outputs)
    position = {id(n): i for i, n in enumerate(model_a.graph.nodes)}
    compared = runs = 0
    last_agreeing = -1
    largest_seen = [0]
    done = 0
    for chunk in _chunks(pairs, chunk_bytes, largest_seen):
        what = f"values {done + 1}-{done + len(chunk)} of {len(pairs)} paired, on both sides"
        if progress:
            progress("bisect", what, None)
        started = time.perf_counter()
        got_a = _run(run_a, source_a, model_a, feeds_a, [p.a for p in chunk])
        got_b = _run(run_b, source_b, model_b, feeds_b, [p.b for p in chunk])
        if progress:
            progress("bisect", what, time.perf_counter() - started)
        runs += 1
        done += len(chunk)
        for p in chunk:
            value_a, value_b = got_a[p.a.name], got_b[p.b.name]
            largest_seen[0] = max(largest_seen[0], _nbytes(value_a), _nbytes(value_b))
            if p.by == "node name" and not _comparable(value_a, value_b):
                continue  # the name pairing guessed wrong (another layout or type): no evidence either way
            compared += 1
            cmp = compare_arrays(p.a.name, value_a, value_b, rtol, atol, precision)
            if cmp.ok:
                last_agreeing = max(last_agreeing, position[id(p.node)])
                continue
            index = position[id(p.node)]
            unchecked = [n.name or n.op for n in model_a.graph.nodes[last_agreeing + 1 : index]]
            producer = p.b.producer
            divergence = Divergence(
                p.node.name,
                p.node.op,
                p.a.name,
                index,
                p.b.name,
                producer.name if producer else "",
                producer.op if producer else "",
                [n.name for n in p.b_nodes],
                p.by,
                cmp,
                unchecked,
                error_histogram(value_a, value_b),
            )
            return BisectReport(divergence, values, len(pairs), compared, runs, time.perf_counter() - start)
        del got_a, got_b
    return BisectReport(None, values, len(pairs), compared, runs, time.perf_counter() - start)


def _backend(backend: Any, seed: int):
    from .backends import get_backend

    if not isinstance(backend, str):
        return backend
    return get_backend(backend, seed=seed) if backend == "opconv" else get_backend(backend)


def _run(backend: Any, source: Any, model: Model, feeds: Mapping[str, Any], values: list[Value]) -> dict:
    """One run of one side returning ``values`` too.  A runtime reads the model's own files (what a deployment
    reads), opconv's executor the model already loaded; graph outputs come back anyway, so are not asked for."""
    given = source if getattr(backend, "reads_files", False) and isinstance(source, (str, os.PathLike)) else model
    outputs = {id(v) for v in model.graph.outputs}
    return backend.run(given, feeds, extra_outputs=[v.name for v in values if id(v) not in outputs])


def _chunks(pairs: list[ValuePair], limit: int, largest_seen: list[int]) -> Iterator[list[ValuePair]]:
    """``pairs`` in order, cut where the next value would take the chunk over ``limit`` bytes per side.
    ``largest_seen`` (updated by the caller as values come back) sizes values whose type does not say."""

    def size(p: ValuePair) -> int:
        declared = max(_declared_bytes(p.a), _declared_bytes(p.b))
        return declared if declared >= 0 else largest_seen[0] or _UNKNOWN_SIZE_GUESS

    chunk: list[ValuePair] = []
    total = 0
    for p in pairs:
        if chunk and total + size(p) > limit:
            yield chunk
            chunk, total = [], 0
        chunk.append(p)
        total += size(p)  # sized again: what the last chunk brought back may have taught the size
    if chunk:
        yield chunk


def _declared_bytes(v: Value) -> int:
    """The bytes ``v`` takes by its declared type, or -1 when the type does not say."""
    t = v.type
    if not isinstance(t, TensorType) or not t.is_static or t.dtype is None:
        return -1
    try:
        bits = element_type(t.dtype).bits
    except Exception:  # noqa: BLE001 - a type opconv cannot size is sized when it comes back
        return -1
    return math.prod(d for d in t.shape or () if isinstance(d, int)) * max(bits, 8) // 8  # static: checked above


def _nbytes(value: Any) -> int:
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    return int(getattr(value, "nbytes", 0))


def _comparable(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.shape == b.shape and a.dtype == b.dtype
    return type(a) is type(b)
