"""ONNX ``Scan`` and ``Loop`` (static trip count) -> opset1 ``TensorIterator``; ``If`` -> its branches inlined.

opset1 has no conditional layer.  An ``If`` whose condition is a constant (after
folding, i.e. once input shapes are fixed) becomes the taken branch's nodes; one
whose condition is known only at run time becomes both branches and a ``Select``
per output, when each output has one element type and static shape in both
branches (see :func:`if_branches`).  The rest of this docstring is about the
TensorIterator.

The rewrite engine converts a node's body before the node, so the body these
translators see is already opset1; they turn it into a TensorIterator body in place
(the converter works on a copy of the model).  A TensorIterator body reads
only its own Parameters, so:

* a **scan input** is a sliced input (``part_size`` 1, stride +1 or -1).  The
  body receives the slice *with* a size-1 axis where ONNX's body sees it
  without: a Reshape after the Parameter drops it;
* a **state** (Scan) or **carried value** (Loop) is a back edge from its body
  output to its Parameter; its last value is a layer output;
* a **scan output** is concatenated over the iterations: a Reshape before its
  Result inserts the size-1 axis (axis 0 for Loop, which stacks);
* Loop's **iteration number** is a sliced ``Range``-like constant
  ``[0, 1, ..., M-1]``, which also gives the TensorIterator its count;
* a value the ONNX body reads from an enclosing scope becomes an invariant
  input.

OpenVINO drops body Parameters nothing reads, and with the last sliced one
the iteration count; when no sliced Parameter is read (a Loop ignoring its
iteration number), a Result outside the port map reads one, which OpenVINO
keeps.  It reads no TensorIterator nested in another: a Scan or Loop in a
body is refused.

Slices always cover the whole axis (start 0, end -1; reversed start -1,
end 0), the bounds OpenVINO's CPU plugin honours.  Opset-8 Scan (leading batch
axis) converts when the batch is 1 and ``sequence_lens``, if given, is a
constant equal to the full length.  A Loop converts only when its trip count
is a constant and its condition stays true: the initial condition omitted or
a constant true, the body's condition output its condition input or a
constant true.
"""

from __future__ import annotations

import numpy as np

from ...errors import ExecutionError
from ...ir import Graph, Model, Value, outer_references
from ...types import TensorType, element_type, from_numpy
from ..lowering import lower
from ..rewrite import Builder, Match, branch_outputs_differ, same_domain
from ._common import OPSET, Refuse, attr, constant_value, np_dtype, ov, static_shape

#: the longest static trip count converted: the iteration numbers are a constant of this many int64
MAX_TRIP_COUNT = 1 << 20


class _Body:
    """Rebuilds a converted ONNX body as a TensorIterator body and collects the layer's inputs and port map."""

    def __init__(self, body: Graph):
        left = [n.label for n in body.walk() if not (same_domain(n.domain, OPSET) and n.version == 1)]
        if left:
            raise Refuse(f"its body keeps {len(left)} node(s) outside opset1 ({', '.join(left[:3])})")
        if any(n.op == "TensorIterator" for n in body.nodes):
            raise Refuse("its body has a Scan or Loop of its own: OpenVINO reads no TensorIterator inside another")
        for value in outer_references(body):  # checked before the body is changed
            static_shape(value)
            np_dtype(value)
        self.body = body
        self.b = Builder(body, None, domain=OPSET, version=1)
        self.old_inputs = list(body.inputs)
        self.old_outputs = list(body.outputs)
        self.rebound: dict[int, Value] = {}  # id(ONNX body input) -> what the body reads instead
        self.outer: list[Value] = []  # the layer's inputs
        self.params: list[Value] = []  # the new body inputs
        body.inputs = self.params  # the ONNX body's inputs are all rebound before anything reads the list
        self.results: list[Value] = []  # the new body outputs
        self.port_inputs: list[dict] = []
        self.port_outputs: list[dict] = []
        self.back_edges: list[dict] = []

    # -- inputs -------------------------------------------------------------
    def _param(self, old: Value, outer: Value, shape: tuple, body_shape: tuple) -> int:
        """A new Parameter of ``shape`` fed from ``outer``; what read ``old`` reads it reshaped to ``body_shape``."""
        param = Value(self.body.unique_name(old.name), TensorType(outer.dtype, tuple(shape)))
        self.params.append(param)
        seen = param if tuple(body_shape) == tuple(shape) else self._reshape(param, body_shape)
        old.replace_all_uses_with(seen)
        self.rebound[id(old)] = seen
        self.outer.append(outer)
        return len(self.params) - 1

    def sliced(self, old: Value, outer: Value, axis: int, reverse: bool, body_shape: tuple) -> int:
        shape = list(static_shape(outer))
        shape[axis] = 1
        k = self._param(old, outer, tuple(shape), body_shape)
        self.port_inputs.append({"external": len(self.outer) - 1, "internal": k, **_full_range(axis, reverse)})
        return k

    def carried(self, old: Value, outer: Value, body_shape: tuple) -> int:
        k = self._param(old, outer, static_shape(outer), body_shape)
        self.port_inputs.append({"external": len(self.outer) - 1, "internal": k})
        return k

    def condition_true(self, old: Value) -> None:
        """The body's condition input, always true here: a constant."""
        true = self.body.const(np.array(True), "condition")
        old.replace_all_uses_with(true)
        self.rebound[id(old)] = true

    def invariants(self) -> None:
        """Values the body reads from enclosing scopes become invariant inputs."""
        for value in outer_references(self.body):
            if id(value) in self.rebound:  # an ONNX body input returned as an output: not from outside
                continue
            param = Value(self.body.unique_name(value.name), TensorType(value.dtype, tuple(value.shape)))
            for user, i in list(value.uses):
                if user.graph is self.body:  # (a body holds no nested body: refused above)
                    user.set_input(i, param)
            self.rebound[id(value)] = param
            self.params.append(param)
            self.outer.append(value)
            self.port_inputs.append({"external": len(self.outer) - 1, "internal": len(self.params) - 1})

    # -- outputs ------------------------------------------------------------
    def value_of(self, k: int) -> Value:
        """ONNX body output ``k`` as the rebuilt body computes it."""
        v = self.old_outputs[k]
        return self.rebound.get(id(v), v)

    def _result(self, value: Value) -> int:
        if value.producer is None:  # a Parameter or constant: the Result reads a copy, as in the main graph
            value = self._copy(value)
        self.results.append(value)
        return len(self.results) - 1

    def last_value(self, k: int, external: int, shape: tuple, body_shape: tuple, back_to: int) -> None:
        """Body output ``k``: carried back to Parameter ``back_to`` (``shape``, the outer one) and returned last."""
        value = self.value_of(k)
        param = self.params[back_to]
        if tuple(static_shape(value)) != tuple(body_shape) or value.dtype != param.dtype:
            # Refused after the body was changed: no other translator converts the node, so the conversion fails.
            raise Refuse(
                f"body output {self.old_outputs[k].name!r} is {value.type}, its input "
                f"{param.dtype}{list(body_shape)}: a carried value must keep its type and shape"
            )
        if tuple(body_shape) != tuple(shape):
            value = self._reshape(value, shape)
        r = self._result(value)
        self.port_outputs.append({"external": external, "internal": r})
        self.back_edges.append({"from": r, "to": back_to})

    def concatenated(self, k: int, external: int, axis: int, reverse: bool, part_shape: tuple) -> None:
        r = self._result(self._reshape(self.value_of(k), part_shape))
        self.port_outputs.append({"external": external, "internal": r, **_full_range(axis, reverse)})

    def body_shape(self, k: int) -> tuple:
        return tuple(static_shape(self.value_of(k)))

    # -- building -----------------------------------------------------------
    def _reshape(self, value: Value, shape) -> Value:
        target = self.b.const(np.asarray(shape, np.int64).reshape(-1), "shape")
        out = ov(self.b, "Reshape", value, target, special_zero=False, _name=f"{value.name}/reshaped")
        out.type = TensorType(value.dtype, tuple(int(d) for d in shape))
        return out

    def _copy(self, value: Value) -> Value:
        out = ov(self.b, "Convert", value, destination_type=value.dtype, _name=f"{value.name}/copy")
        out.type = value.type
        return out

    def infer_types(self, outputs: list[Value]) -> None:
        """Types of every body value, from one run of the opset1 executor (as for the main graph).

        Floating inputs are ones, as for the main graph; integer and boolean ones are zeros, the first
        iteration number, so that a body indexing with it reads in range whatever the trip count.
        """
        from . import TypeRun  # the package imports this module

        body = self.body
        body.inputs = list(self.params)
        body.outputs = list(outputs)
        body.topological_sort()
        produced = [v for n in body.nodes for v in n.outputs if v is not None]
        body.outputs = list(outputs) + [v for v in produced if all(v is not o for o in outputs)]
        feeds = {}
        for v in body.inputs:
            dtype = element_type(v.dtype).numpy
            feeds[v.name] = (np.ones if np.dtype(dtype).kind == "f" else np.zeros)(v.shape, dtype)
        try:
            with np.errstate(all="ignore"):
                results = TypeRun(Model(body, "openvino", {OPSET: 1})).run(feeds)
        except ExecutionError as e:
            raise Refuse(f"its converted body does not run on inputs of its shapes ({e})") from None
        finally:
            body.outputs = list(outputs)
        for v in produced:
            array = np.asarray(results[v.name])
            v.type = TensorType(from_numpy(array.dtype).name, tuple(array.shape))

    def layer(self, b: Builder, n_outputs: int) -> list[Value]:
        """The TensorIterator running the finished body."""
        self.body.outputs = list(self.results)
        _remove_unused(self.body)
        sliced = [self.params[entry["internal"]] for entry in self.port_inputs if "axis" in entry]
        if not any(p.uses or any(p is r for r in self.results) for p in sliced):
            # OpenVINO drops unread Parameters, and with the last sliced one the iteration count: a Result
            # outside the port map reads one (it keeps Results the port map does not name).
            self.results.append(self._copy(sliced[0]))
        self.infer_types(self.results)
        self.body.meta = {
            "port_map": {"inputs": self.port_inputs, "outputs": self.port_outputs, "back_edges": self.back_edges}
        }
        result = ov(b, "TensorIterator", *self.outer, body=self.body, _outputs=n_outputs)
        return result if isinstance(result, list) else [result]


def _remove_unused(body: Graph) -> None:
    """Remove the body's nodes and constants that no output needs (what computed the dropped condition)."""
    needed = {id(v) for v in body.outputs}
    for node in reversed(list(body.nodes)):
        if any(v is not None and (v.uses or id(v) in needed) for v in node.outputs):
            continue
        body.remove_node(node)
    used = needed | {id(v) for n in body.nodes for v in n.inputs if v is not None}
    body.initializers = {k: v for k, v in body.initializers.items() if id(v) in used}


def _full_range(axis: int, reverse: bool) -> dict:
    """Port-map slicing over a whole axis, one element at a time, forwards or backwards."""
    if reverse:
        return {"axis": axis, "start": -1, "end": 0, "stride": -1, "part_size": 1}
    return {"axis": axis, "start": 0, "end": -1, "stride": 1, "part_size": 1}


def _without(shape, axis: int) -> tuple:
    return tuple(d for i, d in enumerate(shape) if i != axis)


def _with_unit(shape, axis: int) -> tuple:
    shape = list(shape)
    shape.insert(axis, 1)
    return tuple(shape)


# ---------------------------------------------------------------------------
# Scan
# ---------------------------------------------------------------------------


@lower("onnx", "openvino", "Scan")
def scan(b: Builder, m: Match):
    node = m.root
    version = node.version or 1
    inputs = list(node.inputs)
    batched = version < 9  # opset 8: a leading batch axis on every input and output, sequence_lens first
    if batched:
        _check_sequence_lens(inputs[0], inputs[1:], node)
        inputs = inputs[1:]
    body_graph: Graph = node.attr("body")
    n_scan = int(attr(node, "num_scan_inputs"))
    n_state = len(inputs) - n_scan
    n_scan_out = len(node.outputs) - n_state
    if (
        n_state < 0
        or n_scan_out < 0
        or len(body_graph.inputs) != len(inputs)
        or len(body_graph.outputs) != len(node.outputs)
    ):
        raise Refuse("its inputs, outputs and body do not agree on the number of states and scan values")
    _require_typed(inputs, "an input")
    scan_inputs = inputs[n_state:]
    if batched:
        batch = {static_shape(v)[0] for v in inputs}
        if batch != {1}:
            raise Refuse(f"opset-8 Scan converts with a batch of 1 only, the inputs have batch {sorted(batch)}")
        in_axes = [1] * n_scan
        in_reverse = [bool(d) for d in (attr(node, "directions") or [0] * n_scan)]
        out_axes, out_reverse = [1] * n_scan_out, [False] * n_scan_out
    else:
        in_axes = [a % len(static_shape(v)) for a, v in zip(attr(node, "scan_input_axes") or [0] * n_scan, scan_inputs)]
        in_reverse = [bool(d) for d in (attr(node, "scan_input_directions") or [0] * n_scan)]
        out_axes = list(attr(node, "scan_output_axes") or [0] * n_scan_out)
        out_reverse = [bool(d) for d in (attr(node, "scan_output_directions") or [0] * n_scan_out)]
    lengths = {static_shape(v)[a] for v, a in zip(scan_inputs, in_axes)}
    if len(lengths) != 1:
        raise Refuse(f"its scan inputs have different lengths {sorted(lengths)}")
    if lengths.pop() < 1:
        raise Refuse("it scans no element (a TensorIterator runs at least once)")

    _check_kept(body_graph, 0, [static_shape(v)[1:] if batched else static_shape(v) for v in inputs[:n_state]])
    body = _Body(body_graph)
    params = []
    for k, v in enumerate(inputs[:n_state]):
        shape = static_shape(v)
        params.append(body.carried(body.old_inputs[k], v, shape[1:] if batched else shape))
    for j, v in enumerate(scan_inputs):
        shape = static_shape(v)
        body_shape = _without(shape, in_axes[j])[1:] if batched else _without(shape, in_axes[j])
        body.sliced(body.old_inputs[n_state + j], v, in_axes[j], in_reverse[j], body_shape)
    body.invariants()
    body.infer_types([body.value_of(k) for k in range(len(node.outputs))])

    for k, v in enumerate(inputs[:n_state]):
        shape = static_shape(v)
        body.last_value(k, k, shape, shape[1:] if batched else shape, params[k])
    for j in range(n_scan_out):
        part = body.body_shape(n_state + j)
        rank = len(part) + 1
        axis = out_axes[j] % rank
        shape = (1, 1, *part) if batched else _with_unit(part, axis)
        body.concatenated(n_state + j, n_state + j, axis, out_reverse[j], shape)
    return body.layer(b, len(node.outputs))


def _check_sequence_lens(lens: Value | None, inputs: list, node) -> None:
    if lens is None:
        return
    data = constant_value(lens)
    if data is None:
        raise Refuse(f"sequence_lens ({lens.name!r}) must be a constant")
    n_scan = int(attr(node, "num_scan_inputs"))
    full = {static_shape(v)[1] for v in inputs[len(inputs) - n_scan :] if v is not None}
    if len(full) != 1 or not np.all(np.asarray(data) == full.pop()):
        raise Refuse("sequence_lens must be the full length of every sequence (a TensorIterator runs a fixed count)")


# ---------------------------------------------------------------------------
# Loop
# ---------------------------------------------------------------------------


@lower("onnx", "openvino", "Loop")
def loop(b: Builder, m: Match):
    node = m.root
    inputs = list(node.inputs) + [None] * (2 - len(node.inputs))
    count = _trip_count(inputs[0])
    condition = inputs[1]
    if condition is not None:
        data = constant_value(condition)
        if data is None or not np.all(data):
            raise Refuse(
                f"its condition ({condition.name!r}) must be omitted or a constant true "
                "(a TensorIterator cannot stop early)"
            )
    carried = inputs[2:]
    body_graph: Graph = node.attr("body")
    n_carried = len(carried)
    n_scan_out = len(node.outputs) - n_carried
    if len(body_graph.inputs) != n_carried + 2 or len(body_graph.outputs) != n_carried + 1 + n_scan_out:
        raise Refuse("its inputs, outputs and body do not agree on the number of carried values")
    _require_typed(carried, "a carried value")
    _check_condition_kept(body_graph)
    _check_kept(body_graph, 1, [static_shape(v) for v in carried])

    body = _Body(body_graph)
    iteration, condition_in = body.old_inputs[:2]
    numbers = b.const(np.arange(count, dtype=np.int64), "iteration_numbers")
    body.sliced(iteration, numbers, 0, False, ())
    body.condition_true(condition_in)
    params = [body.carried(body.old_inputs[2 + k], v, static_shape(v)) for k, v in enumerate(carried)]
    body.invariants()
    body.infer_types([body.value_of(k) for k in range(1, len(body.old_outputs))])

    for k, v in enumerate(carried):
        body.last_value(1 + k, k, static_shape(v), static_shape(v), params[k])
    for j in range(n_scan_out):
        part = body.body_shape(1 + n_carried + j)
        body.concatenated(1 + n_carried + j, n_carried + j, 0, False, (1, *part))
    return body.layer(b, len(node.outputs))


def _trip_count(value: Value | None) -> int:
    if value is None:
        raise Refuse("it has no trip count (a TensorIterator needs a static number of iterations)")
    data = constant_value(value)
    if data is None:
        raise Refuse(f"its trip count ({value.name!r}) is computed at run time; a TensorIterator needs a constant")
    count = int(np.asarray(data).reshape(()))
    if not 1 <= count <= MAX_TRIP_COUNT:
        raise Refuse(f"its trip count {count} is outside 1..{MAX_TRIP_COUNT}")
    return count


def _check_kept(body: Graph, first: int, shapes: list) -> None:
    """Refuse, before the body is changed, a carried value whose declared body output shape differs from its input's.

    (Undeclared shapes are checked once the body has been typed.)
    """
    for k, shape in enumerate(shapes):
        declared = body.outputs[first + k].shape
        if declared is not None and all(isinstance(d, int) for d in declared) and tuple(declared) != tuple(shape):
            raise Refuse(
                f"body output {body.outputs[first + k].name!r} is {list(declared)} where its initial value "
                f"is {list(shape)}: a carried value must keep its shape"
            )


def _require_typed(values, what: str) -> None:
    """Every value present, with a static shape and a known element type (else Refuse, saying which)."""
    for v in values:
        if v is None:
            raise Refuse(f"{what} is omitted")
        static_shape(v)
        np_dtype(v)


def _check_condition_kept(body: Graph) -> None:
    """Refuse unless the body's condition output is its condition input or a constant true."""
    out, condition_in = body.outputs[0], body.inputs[1]
    while (
        out is not condition_in
        and constant_value(out) is None
        and out.producer is not None
        and out.producer.op == "Convert"
        and out.producer.attr("destination_type") == "bool"
    ):
        out = out.producer.inputs[0]
    if out is condition_in:
        return
    data = constant_value(out)
    if data is not None and np.all(data):
        return
    raise Refuse(
        f"its body's condition output ({body.outputs[0].name!r}) may become false; only a condition "
        "that stays true converts"
    )


# ---------------------------------------------------------------------------
# If
# ---------------------------------------------------------------------------


@lower("onnx", "openvino", "If")
def if_branches(b: Builder, m: Match):
    """If -> the branch a constant condition takes, inlined; else both branches and a Select per output.

    opset1 has no conditional layer.  Computing both branches is exact when they give outputs of the same
    element type and shape (the untaken one's result is discarded) and have no side effects, which no opset1
    layer has.  The branches are opset1 already (bodies convert before their node) and read enclosing values
    directly: their nodes and constants move into the enclosing graph.
    """
    node = m.root
    cond = node.inputs[0]
    branches = {"then_branch": node.attr("then_branch"), "else_branch": node.attr("else_branch")}
    for name, branch in branches.items():
        if branch is None or branch.inputs:
            raise Refuse(f"its {name} is missing or takes inputs")
        if len(branch.outputs) != len(node.outputs):
            raise Refuse(f"its {name} gives {len(branch.outputs)} outputs for the node's {len(node.outputs)}")
    data = constant_value(cond)
    if data is not None:
        if np.asarray(data).size != 1:
            raise Refuse(f"its condition ({cond.name!r}) has {np.asarray(data).size} elements, not one")
        taken = "then_branch" if bool(np.asarray(data).reshape(())) else "else_branch"
        _require_opset1(taken, branches[taken])
        b.discard(branches["else_branch" if taken == "then_branch" else "then_branch"])
        return b.inline(branches[taken])
    for name, branch in branches.items():
        _require_opset1(name, branch)
    if np_dtype(cond) != np.bool_ or int(np.prod(static_shape(cond))) != 1:
        raise Refuse(f"its condition ({cond.name!r}) is not one boolean")
    why = branch_outputs_differ(branches["then_branch"], branches["else_branch"])
    if why:
        raise Refuse(why)
    taken, other = b.inline(branches["then_branch"]), b.inline(branches["else_branch"])
    flag = ov(b, "Reshape", cond, b.const(np.zeros(0, np.int64), "scalar"), special_zero=False)
    flag.type = TensorType("bool", ())
    chosen = []
    for yes, no in zip(taken, other):
        out = ov(b, "Select", flag, yes, no, auto_broadcast="numpy")
        out.type = yes.type
        chosen.append(out)
    return chosen


def _require_opset1(name: str, branch: Graph) -> None:
    left = [n.label for n in branch.walk() if not (same_domain(n.domain, OPSET) and n.version == 1)]
    if left:
        raise Refuse(f"its {name} keeps {len(left)} node(s) outside opset1 ({', '.join(left[:3])})")
