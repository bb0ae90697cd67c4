"""TensorIterator -> ONNX ``Loop``.

The rewrite engine converts a layer's body before the layer itself, so the
body reaching :func:`tensor_iterator` is already ai.onnx; the rule turns it
into the Loop's body in place (the converter works on a copy of the model):

* the trip count is the iteration count the sliced inputs' static shapes and
  port map give (the kernel's own slice arithmetic,
  :mod:`opconv.dialects.openvino.ops.tensor_iterator`);
* a **sliced** input becomes a ``Slice`` inside the body, reading the outer
  value at ``base + iteration * stride`` (``part_size`` wide), so reversed and
  strided slicing need no copy of the input;
* an **invariant** input is read from the outer scope directly;
* a **back edge** is a loop-carried value, initialised from its input;
* a **last-value** output is a carried value (initialised with zeros when no
  back edge carries it: at least one iteration runs, so they are never seen);
* a **concatenated** output is a scan output, which Loop stacks on a new
  leading axis: reversed (``Slice`` with step -1) for a negative stride, that
  axis moved beside the concatenation axis and merged into it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...dialects.openvino.ops.tensor_iterator import port_map_rules
from ...errors import ExecutionError
from ...ir import Graph, Tensor, Value
from ...types import TensorType
from ..rewrite import np_dtype, same_domain
from ._common import INT64_MIN, Ctx, Refuse, lower, static_shape


@dataclass
class _Plan:
    """How each body input is fed and each layer output made; computed before anything is changed."""

    count: int
    outputs: list  # the port map's output rules, in the layer's output order
    sliced: dict[int, object] = field(default_factory=dict)  # body input -> its port map rule
    invariant: dict[int, Value] = field(default_factory=dict)  # body input -> outer value
    # (body input or None, body output, initial value or None for zeros), in the Loop's order
    carried: list[tuple[int | None, int, Value | None]] = field(default_factory=list)
    scanned: list[int] = field(default_factory=list)  # body outputs stacked over the iterations


@lower("TensorIterator", inputs=None, outputs=None)
def tensor_iterator(c: Ctx, *inputs: Value):
    body: Graph = c.a["body"]
    plan = _plan(c, body, list(inputs))
    parts = list(body.outputs)  # the body's results, before they become the Loop body's
    loop_body = _loop_body(c, body, plan)
    initials = [v if v is not None else _zeros(c, parts[out]) for _, out, v in plan.carried]
    n_out = len(plan.carried) + len(plan.scanned)
    results = c.onnx(
        "Loop", c.const(np.int64(plan.count), name="trip_count"), None, *initials, body=loop_body, _outputs=n_out
    )
    results = results if isinstance(results, list) else [results]
    finals = {out: v for (_, out, _), v in zip(plan.carried, results)}
    stacked = dict(zip(plan.scanned, results[len(plan.carried) :]))
    outputs = []
    for rule in plan.outputs:
        if rule.axis is None:
            outputs.append(finals[rule.internal])
        else:
            outputs.append(_concatenated(c, stacked[rule.internal], parts[rule.internal], rule, plan.count))
    return outputs


def _plan(c: Ctx, body: Graph, inputs: list[Value]) -> _Plan:
    left = [n.label for n in body.walk() if not (same_domain(n.domain, "") and n.version == c.opset)]
    if left:
        raise Refuse(f"its body keeps {len(left)} layer(s) with no ONNX form ({', '.join(left[:3])})")
    port_map = body.meta.get("port_map")
    if not isinstance(port_map, dict):
        raise Refuse("its body has no port map")
    try:
        in_rules = port_map_rules(port_map.get("inputs", ()), "input")
        out_rules = port_map_rules(port_map.get("outputs", ()), "output")
    except ExecutionError as e:
        raise Refuse(str(e)) from None
    back_edges = {edge["to"]: edge["from"] for edge in port_map.get("back_edges", ())}
    plan = _Plan(_count(in_rules, inputs), sorted(out_rules, key=lambda r: r.external))
    for r in in_rules:
        if r.axis is not None:
            if r.internal in back_edges:
                raise Refuse(f"body input {r.internal} is both sliced and fed by a back edge")
            plan.sliced[r.internal] = r
        elif r.internal in back_edges:
            plan.carried.append((r.internal, back_edges[r.internal], inputs[r.external]))
        else:
            plan.invariant[r.internal] = inputs[r.external]
    fed = set(plan.sliced) | set(plan.invariant) | {to for to, _, _ in plan.carried}
    missing = [k for k in range(len(body.inputs)) if k not in fed]
    if missing:
        raise Refuse(f"body input(s) {missing} have no port map entry")
    if sorted(r.external for r in out_rules) != list(range(len(c.node.outputs))):
        raise Refuse("the port map does not give every output of the layer exactly once")
    carried_outputs = {out for _, out, _ in plan.carried}
    for r in out_rules:
        if r.axis is None and r.internal not in carried_outputs:
            static_shape(body.outputs[r.internal])  # its zero initial value needs the shape and type
            np_dtype(body.outputs[r.internal])
            plan.carried.append((None, r.internal, None))
            carried_outputs.add(r.internal)
        elif r.axis is not None and r.internal not in plan.scanned:
            static_shape(body.outputs[r.internal])  # merging the stacked axis needs the shape
            plan.scanned.append(r.internal)
    return plan


def _count(in_rules, inputs: list[Value]) -> int:
    """The number of iterations, from the sliced inputs' static shapes."""
    counts = set()
    for r in in_rules:
        if r.axis is None:
            continue
        shape = static_shape(inputs[r.external])
        try:
            counts.add(r.iterations(shape[r.axis % len(shape)]))
        except ExecutionError as e:
            raise Refuse(f"input {r.external}: {e}") from None
    if not counts:
        raise Refuse("no input is sliced, so the number of iterations is unknown")
    if len(counts) > 1:
        raise Refuse(f"the sliced inputs disagree on the number of iterations: {sorted(counts)}")
    count = counts.pop()
    if count < 1:
        raise Refuse("it runs no iteration")
    return count


def _loop_body(c: Ctx, body: Graph, plan: _Plan) -> Graph:
    """Turn the (converted) body into a Loop body in place: inputs rebound, outputs reordered."""
    body.parent = c.b.graph
    io = {id(v) for v in body.inputs} | {id(v) for v in body.outputs}
    for node in body.nodes:  # intermediate types are derived by ONNX shape inference, as in the main graph
        for v in node.outputs:
            if v is not None and id(v) not in io:
                v.type = None
    iteration = Value(body.unique_name("iteration"), TensorType("int64", ()))
    condition = Value(body.unique_name("condition"), TensorType("bool", ()))
    old_inputs = list(body.inputs)
    carried_in = []
    for to, out, _ in plan.carried:
        if to is None:
            carried_in.append(Value(body.unique_name(f"{body.outputs[out].name}_previous"), body.outputs[out].type))
        else:
            carried_in.append(old_inputs[to])
    rebound = {
        k: _slice(body, c.opset, iteration, c.node.inputs[rule.external], rule) for k, rule in plan.sliced.items()
    }
    rebound.update(plan.invariant)
    for k, value in rebound.items():
        old_inputs[k].replace_all_uses_with(value)
    results = [rebound.get(old_inputs.index(v), v) if any(v is i for i in old_inputs) else v for v in body.outputs]
    body.inputs = [iteration, condition] + carried_in

    outputs: list[Value] = []
    for v in [condition] + [results[out] for _, out, _ in plan.carried] + [results[k] for k in plan.scanned]:
        own = v.producer is not None and v.producer.graph is body
        if not own or any(v is o for o in outputs):
            v = _body_op(body, c.opset, "Identity", v)
        outputs.append(v)
    types = [TensorType("bool", ())] + [v.type for v in carried_in] + [body.outputs[k].type for k in plan.scanned]
    for v, t in zip(outputs, types):
        v.type = t
    body.outputs = outputs
    body.meta = {k: v for k, v in body.meta.items() if k not in ("port_map", "result_names")}
    body.topological_sort()
    _rename_clashes(body)
    return body


def _rename_clashes(body: Graph) -> None:
    """Give the body's values names no enclosing scope uses, and reserve them there.

    ONNX names are unique across nested scopes; reserving them in the enclosing graph keeps the names
    that later rewrites of that graph choose away from them too.
    """
    outer = body.parent
    for g in _nested(body):
        renamed = False
        for v in list(g.values()):
            if outer.unique_name(v.name) != v.name:  # a free name is reserved by asking
                v.name = outer.unique_name(g.unique_name(v.name))
                renamed = renamed or v.const is not None
        if renamed:  # initializers are keyed by name
            g.initializers = {v.name: v for v in g.initializers.values()}
            for name, v in g.initializers.items():
                v.const.name = name


def _nested(graph: Graph) -> list[Graph]:
    """``graph`` and every graph nested in it."""
    return [graph] + [sub for node in graph.nodes for g in node.subgraphs() for sub in _nested(g)]


def _body_op(body: Graph, opset: int, op: str, *inputs: Value | None, **attrs) -> Value:
    return body.op(op, *inputs, domain="", version=opset, name=op, **attrs)


def _slice(body: Graph, opset: int, iteration: Value, x: Value, rule) -> Value:
    """``x``'s part for this iteration: ``part_size`` elements along the axis from ``base + iteration * stride``."""
    size = static_shape(x)[rule.axis % len(static_shape(x))]
    first, stop = rule.bounds(size)
    base = first if rule.stride > 0 else stop - abs(rule.stride)
    i64 = lambda values, name: body.const(np.asarray(values, np.int64), name)  # noqa: E731
    at = _body_op(body, opset, "Unsqueeze", iteration, i64([0], "axes"))
    start = _body_op(
        body, opset, "Add", _body_op(body, opset, "Mul", at, i64([rule.stride], "stride")), i64([base], "base")
    )
    end = _body_op(body, opset, "Add", start, i64([rule.part_size], "part_size"))
    return _body_op(body, opset, "Slice", x, start, end, i64([rule.axis % len(static_shape(x))], "axis"))


def _zeros(c: Ctx, like: Value) -> Value:
    """A zero tensor of ``like``'s static shape and type (the initial value of a last-value-only output)."""
    zero = Tensor.from_array(np.zeros([1], dtype=np_dtype(like)))
    return c.onnx("ConstantOfShape", c.i64(static_shape(like)), value=zero)


def _concatenated(c: Ctx, stacked: Value, part: Value, rule, count: int) -> Value:
    """The iterations' parts joined along ``rule.axis`` (backwards for a negative stride) from Loop's stack."""
    shape = list(static_shape(part))
    axis = rule.axis % len(shape)
    if rule.stride < 0:
        stacked = c.onnx("Slice", stacked, c.i64([-1]), c.i64([INT64_MIN]), c.i64([0]), c.i64([-1]))
    if axis:  # the stacked axis goes just before the concatenation axis
        perm = list(range(1, axis + 1)) + [0] + list(range(axis + 1, len(shape) + 1))
        stacked = c.onnx("Transpose", stacked, perm=perm)
    shape[axis] *= count
    joined = c.onnx("Reshape", stacked, c.i64(shape))
    # The spec's count, which OpenVINO's own output shape misses when a stride skips elements.
    joined.type = TensorType(part.dtype, tuple(shape))
    return joined
