"""The dialect-neutral pattern-rewrite engine every converter uses.

A conversion or an optimisation is an ordered list of **rules**.  Each rule is

* a **pattern**: a small DAG of source nodes, written as a Python function over
  a pattern builder (the function's parameters are the captured inputs);
* an optional **check** ``check(match) -> None | str``: a string is the reason
  the rule must not fire on this match, and ends up in the report;
* a **replacement** ``replacement(b, match) -> Value | list[Value]`` that builds
  the new nodes with a :class:`Builder` and returns the values that take the
  place of the pattern's outputs.

One-to-one maps, decompositions (one node to many) and fusions (many to one)
are all written the same way.  Writing a rule::

    def matmul_add(op, x, w, b):                     # x, w, b: captured values
        return op.Add(op.MatMul(x, w, _name="mm"), b, _commute=True)

    def bias_is_vector(m: Match) -> str | None:
        if m["b"].shape is None or len(m["b"].shape) != 1:
            return f"bias {m['b'].name!r} is not 1-D"   # reported when refused
        return None

    def gemm(b: Builder, m: Match):
        return b.Gemm(m["x"], m["w"], m["b"])          # domain/version set by the builder

    FUSE = RuleSet([Rule("matmul-add-to-gemm", matmul_add, gemm, check=bias_is_vector)])
    report = apply(graph, FUSE)

Pattern vocabulary (keywords start with ``_`` so they never clash with an
operator's attribute names):

=====================  =========================================================
``op.Relu(x)``         a node with op ``Relu`` whose only input is ``x``
``op.any(x, y)``       a node of any op with exactly these inputs
``_name="mm"``         capture the node as ``match.node("mm")``
``_domain="x.y"``      domain of the node (default ``""``; ``"ai.onnx"`` is the same)
``_version=13``        version: an int or a predicate ``lambda v: v >= 13``
``_outputs=2``         the node has two outputs; returns a list of pattern values
``_commute=True``      a binary node also matches with its inputs swapped
``_shared=True``       the node's outputs may have consumers outside the match
                       (the node is then kept); by default intermediate nodes
                       must be used only inside the match, so removing them
                       after the rewrite cannot change any other result
``axis=1``             attribute predicate: equal to 1, or a callable given the
                       attribute's value (``None`` when the node omits it)
``None`` as an input   matches an omitted optional input
``_any_inputs=True``   the node may have any inputs (none are captured; the
                       replacement reads ``match.root.inputs``): for ops with
                       many optional inputs, e.g. LSTM
=====================  =========================================================

The pattern's **root** is the node whose outputs the function returns; the
match is anchored there and the other pattern nodes are found by walking
inputs backwards.  Trailing omitted inputs of a node are ignored when counting
its inputs.

How :func:`apply` walks a graph: nodes are visited **consumers first** (reverse
topological order), and at each node the rules whose root op matches are tried
in list order; the first one whose pattern matches and whose check passes
fires.  Visiting consumers first lets a fusion anchored at ``Add`` claim its
``MatMul`` before a one-to-one rule for ``MatMul`` rewrites it away; among
rules anchored at the same op, list order is the priority.  Nodes built by a
replacement are not matched again in the same call, so a rule set can never
loop.  After a rewrite the matched nodes are removed, as are nodes and
constants that the rewrite left unused; a replaced graph output keeps its name
(the new value is renamed).  Subgraphs (If/Loop bodies, regions) are rewritten
before the node that owns them.

:func:`convert_graph` is the cross-dialect entry point: it applies a rule set
with the builder targeting one dialect and raises
:class:`~opconv.errors.ConversionError` listing *every* node left outside the
target dialect with the reasons each rule gave.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..attributes import text_value
from ..errors import BudgetError, ConversionError, GraphError
from ..ir import Attr, Graph, Node, Value, infer_attr
from ..types import TensorType, element_type

# Domains that name the same operator set (ONNX spells its default domain both ways).
_DOMAIN_ALIASES = {"ai.onnx": ""}


def same_domain(a: str | None, b: str | None) -> bool:
    """Whether two domain strings name the same operator set."""
    return _DOMAIN_ALIASES.get(a or "", a or "") == _DOMAIN_ALIASES.get(b or "", b or "")


# ---------------------------------------------------------------------------
# Patterns
# ---------------------------------------------------------------------------

# The classes of this module are plain slotted classes, not dataclasses: defining a dataclass costs about a
# millisecond of every fresh process that imports this module, and hundreds of patterns are built at import.


class _Capture:
    """A pattern input: matches any value, bound under ``name`` (the same name must bind the same value)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


class _PNode:
    """One node of a pattern."""

    __slots__ = ("op", "inputs", "domain", "version", "attrs", "n_outputs", "name", "commute", "shared", "any_inputs")

    def __init__(
        self,
        op: str | None,
        inputs: list[_Capture | _POut | None],
        domain: str | None,
        version: Any,
        attrs: dict[str, Any],
        n_outputs: int,
        name: str | None,
        commute: bool,
        shared: bool,
        any_inputs: bool = False,
    ):
        self.op = op  # None: any op
        self.inputs = inputs  # of _Capture | _POut | None
        self.domain = domain
        self.version = version
        self.attrs = attrs
        self.n_outputs = n_outputs
        self.name = name
        self.commute = commute
        self.shared = shared
        self.any_inputs = any_inputs

    def describe(self) -> str:
        return self.op or "<any op>"


class _POut:
    """Output ``index`` of pattern node ``node``."""

    __slots__ = ("node", "index")

    def __init__(self, node: _PNode, index: int):
        self.node = node
        self.index = index


class _PatternOps:
    """The ``op`` object handed to a pattern function: ``op.Add(a, b)`` records a pattern node."""

    def __init__(self) -> None:
        self.nodes: list[_PNode] = []

    def node(
        self,
        op: str | None,
        *inputs: Any,
        _domain: str | None = "",
        _version: Any = None,
        _outputs: int = 1,
        _name: str | None = None,
        _commute: bool = False,
        _shared: bool = False,
        _any_inputs: bool = False,
        **attrs: Any,
    ) -> _POut | list[_POut]:
        for i, v in enumerate(inputs):
            if v is not None and not isinstance(v, (_Capture, _POut)):
                raise GraphError(f"pattern {op or 'any'}: input {i} is {v!r}, not a pattern value")
        if _commute and len(inputs) != 2:
            raise GraphError(f"pattern {op}: _commute needs exactly two inputs")
        if _any_inputs and inputs:
            raise GraphError(f"pattern {op or 'any'}: _any_inputs takes no pattern inputs")
        pn = _PNode(op, list(inputs), _domain, _version, attrs, _outputs, _name, _commute, _shared, _any_inputs)
        self.nodes.append(pn)
        outs = [_POut(pn, i) for i in range(_outputs)]
        return outs[0] if _outputs == 1 else outs

    def any(self, *inputs: Any, **options: Any) -> _POut | list[_POut]:
        """A node of any op with exactly these inputs."""
        return self.node(None, *inputs, **options)

    def __getattr__(self, op: str) -> Callable[..., _POut | list[_POut]]:
        if op.startswith("_"):
            raise AttributeError(op)
        return lambda *inputs, **options: self.node(op, *inputs, **options)


def _capture_names(fn: Callable[..., Any]) -> list[str]:
    """The names of ``fn``'s parameters after ``op`` (read from its code: inspect.signature is slow at import).

    A generated pattern function (``def fn(op, *xs)``) lists them in its ``capture_names`` attribute.
    """
    named = getattr(fn, "capture_names", None)
    if named is not None:
        return list(named)
    code = getattr(fn, "__code__", None)
    if getattr(fn, "__signature__", None) is not None or code is None or code.co_flags & inspect.CO_VARARGS:
        return list(inspect.signature(fn).parameters)[1:]
    return list(code.co_varnames[1 : code.co_argcount])


class Pattern:
    """A small DAG of source nodes, built by calling ``fn(op, *captures)``.

    The parameters of ``fn`` after ``op`` name the captured input values; the
    function returns the output(s) of the root node.
    """

    def __init__(self, fn: Callable[..., Any]):
        params = _capture_names(fn)
        ops = _PatternOps()
        captures = [_Capture(p) for p in params]
        result = fn(ops, *captures)
        outs = list(result) if isinstance(result, (list, tuple)) else [result]
        if not outs or not all(isinstance(o, _POut) for o in outs):
            raise GraphError(f"pattern {fn.__name__}: must return the output(s) of a pattern node")
        root = outs[0].node
        if any(o.node is not root for o in outs):
            raise GraphError(f"pattern {fn.__name__}: all returned values must be outputs of one (root) node")
        self.name = fn.__name__
        self.root: _PNode = root
        self.nodes = ops.nodes
        self.captures = params
        self._check_names()

    def _check_names(self) -> None:
        names = [n.name for n in self.nodes if n.name] + self.captures
        if len(set(names)) == len(names):
            return
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise GraphError(f"pattern {self.name}: names used twice: {', '.join(sorted(dup))}")

    @property
    def root_op(self) -> str | None:
        return self.root.op

    def __repr__(self) -> str:
        return f"Pattern({self.name}, root={self.root.describe()}, {len(self.nodes)} nodes)"


class Match:
    """A successful match: captured values by name, captured nodes by ``_name``, the root node."""

    __slots__ = ("graph", "root", "values", "nodes", "matched", "removable", "n_outputs")

    def __init__(
        self,
        graph: Graph,
        root: Node,
        values: dict[str, Value | None],
        nodes: dict[str, Node],
        matched: list[Node],
        removable: list[Node],
        n_outputs: int,
    ):
        self.graph = graph
        self.root = root
        self.values = values
        self.nodes = nodes
        self.matched = matched  # every matched node, producers before consumers (root last)
        self.removable = removable  # matched nodes to remove after the rewrite (not _shared), same order
        self.n_outputs = n_outputs

    def __getitem__(self, name: str) -> Value | None:
        return self.values[name]

    def node(self, name: str) -> Node:
        return self.nodes[name]

    @property
    def outputs(self) -> list[Value | None]:
        """The root node's outputs that the replacement must provide."""
        return self.root.outputs[: self.n_outputs]

    def constant(self, name: str) -> np.ndarray | None:
        """The data of captured value ``name`` when it is a constant, else ``None``."""
        return constant_value(self.values[name])


def constant_value(value: Value | None) -> np.ndarray | None:
    """The data of an initializer, or of a ``Constant`` node's ``value`` attribute; ``None`` otherwise."""
    if value is None:
        return None
    if value.const is not None:
        return value.const.numpy()
    p = value.producer
    if p is not None and p.op == "Constant" and hasattr(p.attr("value"), "numpy"):
        data: np.ndarray = p.attr("value").numpy()
        return data
    return None


def _attr_matches(expected: Any, actual: Any) -> bool:
    if callable(expected):
        return bool(expected(actual))
    return actual is not None and actual == expected


def _version_matches(expected: Any, actual: int | None) -> bool:
    if expected is None:
        return True
    if callable(expected):
        return actual is not None and bool(expected(actual))
    return bool(actual == expected)


def _trimmed(values: list[Value | None]) -> list[Value | None]:
    """``values`` without trailing ``None`` (omitted optional inputs/outputs)."""
    end = len(values)
    while end and values[end - 1] is None:
        end -= 1
    return values[:end]


class _Binding:
    """Partial match state; copied on extension so that backtracking needs no undo."""

    __slots__ = ("values", "nodes")

    def __init__(self, values: dict[str, Value], nodes: dict[int, Node]):
        self.values = values
        self.nodes = nodes  # id(_PNode) -> Node

    def bind_value(self, name: str, value: Value) -> _Binding:
        return _Binding({**self.values, name: value}, self.nodes)

    def bind_node(self, pn: _PNode, node: Node) -> _Binding:
        return _Binding(self.values, {**self.nodes, id(pn): node})


class _Matcher:
    """Matches one pattern at one root node; ``why`` keeps the last reason a candidate failed."""

    def __init__(self, pattern: Pattern, graph: Graph, outputs: set[int]):
        self.pattern = pattern
        self.graph = graph
        self.graph_outputs = outputs  # ids of the graph's output values
        self.why = ""
        self._depth = -1.0

    def fail(self, why: str, b: _Binding | None = None) -> Iterator[_Binding]:
        """Record why a candidate failed; the failure that got furthest (most bindings) explains best."""
        depth = float("inf") if b is None else len(b.values) + len(b.nodes)
        if depth >= self._depth:
            self.why, self._depth = why, depth
        return iter(())

    def match(self, root: Node) -> Match | None:
        for b in self._node(self.pattern.root, root, _Binding({}, {})):
            why = self._uses_outside(b, root)
            if why is None:
                return self._result(b, root)
            self.fail(why)
        return None

    def _node(self, pn: _PNode, node: Node, b: _Binding) -> Iterator[_Binding]:
        bound = b.nodes.get(id(pn))
        if bound is not None:
            return iter((b,)) if bound is node else self.fail(f"{pn.describe()} bound to two nodes", b)
        if any(n is node for n in b.nodes.values()):
            return self.fail(f"{node.label} would match two pattern nodes", b)
        why = self._node_mismatch(pn, node)
        if why:
            return self.fail(why, b)
        if pn.any_inputs:
            return iter((b.bind_node(pn, node),))
        inputs = _trimmed(node.inputs)
        if len(inputs) != len(pn.inputs):
            return self.fail(f"{node.label} has {len(inputs)} inputs, the pattern {len(pn.inputs)}", b)
        orders = [inputs, inputs[::-1]] if pn.commute else [inputs]
        b = b.bind_node(pn, node)
        return (r for order in orders for r in self._inputs(pn.inputs, order, b))

    def _node_mismatch(self, pn: _PNode, node: Node) -> str | None:
        if pn.op is not None and node.op != pn.op:
            return f"{node.label} is not {pn.op}"
        if pn.domain is not None and not same_domain(pn.domain, node.domain):
            return f"{node.label} is in domain {node.domain!r}, not {pn.domain!r}"
        if not _version_matches(pn.version, node.version):
            return f"{node.label} has version {node.version}"
        for name, expected in pn.attrs.items():
            if not _attr_matches(expected, node.attr(name)):
                return f"{node.label}: attribute {name}={node.attr(name)!r} does not match"
        return None

    def _inputs(
        self, pvs: list[_Capture | _POut | None], values: list[Value | None], b: _Binding
    ) -> Iterator[_Binding]:
        if not pvs:
            yield b
            return
        for b1 in self._value(pvs[0], values[0], b):
            yield from self._inputs(pvs[1:], values[1:], b1)

    def _value(self, pv: _Capture | _POut | None, value: Value | None, b: _Binding) -> Iterator[_Binding]:
        if pv is None or value is None:
            return iter((b,)) if pv is None and value is None else self.fail("optional input mismatch", b)
        if isinstance(pv, _Capture):
            if pv.name not in b.values:
                return iter((b.bind_value(pv.name, value),))
            same = b.values[pv.name] is value
            return iter((b,)) if same else self.fail(f"{pv.name!r} would bind two different values", b)
        node = value.producer
        if node is None or node.graph is not self.graph:
            return self.fail(f"value {value.name!r} is not produced by a node of this graph", b)
        if value.index != pv.index:
            return self.fail(f"value {value.name!r} is output {value.index}, not {pv.index}", b)
        return self._node(pv.node, node, b)

    def _uses_outside(self, b: _Binding, root: Node) -> str | None:
        """Why the match cannot be replaced safely (a value escapes the match), or ``None``."""
        matched = {id(n) for n in b.nodes.values()}
        for pn in self.pattern.nodes:
            node = b.nodes[id(pn)]
            if pn.shared:
                continue
            # The root's own pattern outputs are rewired; its other outputs, and all of an
            # intermediate node's outputs, must stay inside the match.
            escaping = node.outputs[self.pattern.root.n_outputs :] if node is root else node.outputs
            for v in escaping:
                if v is None:
                    continue
                if id(v) in self.graph_outputs:
                    return f"value {v.name!r} of {node.label} is a graph output"
                outside = [u for u, _ in v.uses if id(u) not in matched]
                if outside:
                    return f"value {v.name!r} of {node.label} has other consumers ({outside[0].label})"
        return None

    def _result(self, b: _Binding, root: Node) -> Match:
        # A pattern function builds producers before consumers, so pattern.nodes is a topological
        # order of the match: no need to look positions up in the (possibly huge) graph.
        pns = self.pattern.nodes
        names = {pn.name: b.nodes[id(pn)] for pn in pns if pn.name}
        matched = [b.nodes[id(pn)] for pn in pns]
        removable = [b.nodes[id(pn)] for pn in pns if not pn.shared or pn is self.pattern.root]
        return Match(self.graph, root, dict(b.values), names, matched, removable, self.pattern.root.n_outputs)


# ---------------------------------------------------------------------------
# Rules and rule sets
# ---------------------------------------------------------------------------

#: what a rule raises when it meets a node its op's schema would not allow (see RuleSet.rewrite)
MALFORMED = (IndexError, KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError, AttributeError)


class Refuse(Exception):
    """Raised by a replacement that finds, while building, that it cannot map the match; carries the reason."""


def rank_of(value: Value | None) -> int:
    """The static rank of ``value``; refuses the rewrite when it is unknown."""
    shape = value.shape if value is not None else None
    if shape is None:
        raise Refuse(f"the rank of {value.name!r} is unknown" if value is not None else "missing input")
    return len(shape)


def static_shape(value: Value) -> tuple[int, ...]:
    """The fully static shape of ``value``; refuses the rewrite otherwise."""
    shape = value.shape
    dims = tuple(d for d in shape if isinstance(d, int) and d >= 0) if shape is not None else ()
    if shape is None or len(dims) != len(shape):
        raise Refuse(f"the shape of {value.name!r} is not static ({shape})")
    return dims


def np_dtype(value: Value) -> np.dtype:
    """The numpy dtype of ``value``; refuses the rewrite when unknown."""
    if value.dtype is None:
        raise Refuse(f"the element type of {value.name!r} is unknown")
    return np.dtype(element_type(value.dtype).numpy)


def attr(node: Node, name: str, default: Any = None) -> Any:
    """An ONNX attribute's plain value, or ``default`` when the node omits it."""
    value = node.attr(name)
    return default if value is None else value


def text_attr(node: Node, name: str, default: str | None = None) -> Any:
    """A STRING (or STRINGS) attribute as ``str`` (:func:`~opconv.attributes.text_value`), or ``default`` when
    omitted."""
    return text_value(attr(node, name, default))


#: the ONNX reductions -> the opset from which ``axes`` is their optional second input instead of an attribute
REDUCE_AXES_INPUT_SINCE = {
    "ReduceSum": 13,
    **dict.fromkeys(
        (
            "ReduceL1",
            "ReduceL2",
            "ReduceLogSum",
            "ReduceLogSumExp",
            "ReduceMax",
            "ReduceMean",
            "ReduceMin",
            "ReduceProd",
            "ReduceSumSquare",
        ),
        18,
    ),
}


def reduce_axes(node: Node) -> list[int] | None:
    """The axes of an ONNX reduction whatever its version: its ``axes`` attribute, or its constant second input
    (:data:`REDUCE_AXES_INPUT_SINCE`; a valid node has only the one its version defines); None when it gives
    none.  Refuses axes computed at run time."""
    axes = node.attr("axes")
    if axes is not None:
        return [int(a) for a in axes]
    value = node.inputs[1] if len(node.inputs) > 1 else None
    if value is None:
        return None
    data = constant_value(value)
    if data is None:
        raise Refuse(f"axes ({value.name}) must be a constant")
    return [int(a) for a in np.asarray(data).reshape(-1)]


def const_input(m: Match, name: str, what: str) -> np.ndarray:
    """The constant data of captured input ``name``; refuses when it is computed at run time."""
    data = m.constant(name)
    if data is None:
        value = m[name]
        raise Refuse(f"{what} ({value.name if value is not None else name!r}) must be a constant")
    return data


Replacement = Callable[["Builder", Match], "Value | Sequence[Value | None]"]
Check = Callable[[Match], "str | None"]


def branch_outputs_differ(then_branch: Graph, else_branch: Graph) -> str | None:
    """Why the two branches of an ``If`` cannot be merged by computing both and selecting: the first output whose
    element type or static shape differs between them (or is unknown); None when they agree."""
    for k, (yes, no) in enumerate(zip(then_branch.outputs, else_branch.outputs)):
        for value in (yes, no):
            if value.type is not None and not isinstance(value.type, TensorType):
                return f"branch output {k} ({value.name!r}) is a {value.type}, not a tensor"
            shape = value.shape if value.type is not None else None
            if shape is None or not all(isinstance(d, int) for d in shape):
                return (
                    f"the shape of branch output {k} ({value.name!r}) is not static, so computing both "
                    "branches and selecting cannot be shown exact"
                )
        where = (
            f"in then_branch ({yes.name!r}) and {{}} in else_branch ({no.name!r}): with a condition known "
            f"only at run time, both branches must give one"
        )
        if yes.dtype != no.dtype:
            return f"branch output {k} is {yes.dtype} " + where.format(no.dtype) + " element type"
        yes_shape, no_shape = list(yes.shape or ()), list(no.shape or ())  # both static (checked above)
        if yes_shape != no_shape:
            return f"branch output {k} has shape {yes_shape} " + where.format(no_shape) + " shape"
    return None


class Rule:
    """``pattern`` (a :class:`Pattern` or a pattern function), ``replacement`` and an optional ``check``."""

    __slots__ = ("name", "pattern", "replacement", "check")

    def __init__(
        self, name: str, pattern: Pattern | Callable[..., Any], replacement: Replacement, check: Check | None = None
    ):
        self.name = name
        self.pattern = pattern if isinstance(pattern, Pattern) else Pattern(pattern)
        self.replacement = replacement
        self.check = check

    def match(self, graph: Graph, root: Node, outputs: set[int]) -> tuple[Match | None, str]:
        """The match of the pattern anchored at ``root`` (``outputs``: ids of the graph's output values), or
        None and why not."""
        matcher = _Matcher(self.pattern, graph, outputs)
        return matcher.match(root), matcher.why

    def __repr__(self) -> str:
        return f"Rule({self.name!r}, {self.pattern!r})"


class RuleSet:
    """An ordered list of rules; earlier rules win among those anchored at the same op."""

    def __init__(self, rules: Sequence[Rule]):
        self.rules = list(rules)
        names = [r.name for r in self.rules]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise GraphError(f"rule names used twice: {', '.join(dup)}")
        self._by_op: dict[str | None, list[tuple[int, Rule]]] = {}
        for i, r in enumerate(self.rules):
            self._by_op.setdefault(r.pattern.root_op, []).append((i, r))

    def for_node(self, node: Node) -> list[Rule]:
        """The rules whose root could match ``node``, in list order."""
        both = self._by_op.get(node.op, []) + self._by_op.get(None, [])
        return [r for _, r in sorted(both, key=lambda t: t[0])]

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)


# ---------------------------------------------------------------------------
# Building replacements
# ---------------------------------------------------------------------------


class Builder:
    """Creates replacement nodes before the matched root, in the target ``domain``/``version``.

    ``b.Max(x, y, fmod=1)`` or ``b.op("Max", x, y)``; options ``_domain``,
    ``_version``, ``_outputs`` and ``_name`` override the defaults.  Every node
    and constant made is recorded so a refused rewrite can be undone.
    """

    def __init__(self, graph: Graph, before: Node, *, domain: str, version: int | None):
        self.graph = graph
        self.before = before
        self.domain = domain
        self.version = version
        self.nodes: list[Node] = []
        self.consts: list[Value] = []
        self.discarded: list[Graph] = []

    def op(
        self,
        op: str,
        *inputs: Value | None,
        _domain: str | None = None,
        _version: int | None = None,
        _outputs: int = 1,
        _name: str | None = None,
        **attrs: Any,
    ) -> Value | list[Value]:
        hint = _name or (f"{self.before.name}/{op}" if self.before.name else op)
        typed = {k: infer_attr(k, v) if not isinstance(v, Attr) else v for k, v in attrs.items()}
        result = self.graph.op(
            op,
            *inputs,
            domain=self.domain if _domain is None else _domain,
            version=self.version if _version is None else _version,
            outputs=_outputs,
            name=hint,
            attrs=typed,
            before=self.before,
        )
        first = result if isinstance(result, Value) else result[0]
        assert first.producer is not None  # the node just made
        self.nodes.append(first.producer)
        return result

    def const(self, array: ArrayLike, name: str = "const") -> Value:
        """A new constant (an initializer, which every dialect's graph uses for constants)."""
        v = self.graph.const(np.asarray(array), name)
        self.consts.append(v)
        return v

    def __getattr__(self, op: str) -> Callable[..., Value | list[Value]]:
        if op.startswith("_"):
            raise AttributeError(op)
        return lambda *inputs, **options: self.op(op, *inputs, **options)

    def inline(self, branch: Graph) -> list[Value]:
        """Move a converted subgraph's constants and nodes before the root (renamed where a name is taken).

        For an ``If`` branch, whose nodes read enclosing values directly; returns what its outputs are now.
        The subgraph is left empty.
        """
        graph = self.graph
        for name, value in list(branch.initializers.items()):
            del branch.initializers[name]
            value.name = graph.unique_name(name)
            if value.const is not None:
                value.const.name = value.name
            graph.initializers[value.name] = value
            self.consts.append(value)
        prefix = f"{self.before.name}/" if self.before.name else ""
        for node in list(branch.nodes):
            for out in node.outputs:
                if out is not None:
                    out.name = graph.unique_name(out.name)
            node.name = graph.unique_name(prefix + node.name) if node.name else node.name
            for sub in node.subgraphs():
                sub.parent = graph
            graph.add_node(node, before=self.before)
            self.nodes.append(node)
        branch.nodes = []
        branch._names = None
        return list(branch.outputs)

    def discard(self, branch: Graph) -> None:
        """Drop a subgraph the replacement does not use (an If's untaken branch), once the rewrite is certain:
        what it holds is no longer part of the model, so nodes in it that no rule converted are no concern."""
        self.discarded.append(branch)

    def undo(self) -> None:
        """Remove everything this builder made (the rewrite was refused)."""
        for node in reversed(self.nodes):
            self.graph.remove_node(node)
        for v in self.consts:
            if not v.uses:
                self.graph.initializers.pop(v.name, None)
        self.nodes.clear()
        self.consts.clear()


# ---------------------------------------------------------------------------
# Reports
# ---------------------------------------------------------------------------


class Unmatched:
    """A node that no rule rewrote: where it is and every rule's reason."""

    __slots__ = ("node", "label", "reasons")

    def __init__(self, node: Node, label: str, reasons: list[str]):
        self.node = node
        self.label = label
        self.reasons = reasons

    def __repr__(self) -> str:
        return f"Unmatched(label={self.label!r}, reasons={self.reasons!r})"

    def __str__(self) -> str:
        return f"{self.label}: {'; '.join(self.reasons) or 'no reason recorded'}"


class RewriteReport:
    """What :func:`apply` did: rules fired (counts) and the nodes left alone, with reasons."""

    __slots__ = ("fired", "unmatched")

    def __init__(self, fired: Counter[str] | None = None, unmatched: list[Unmatched] | None = None):
        self.fired: Counter[str] = Counter() if fired is None else fired
        self.unmatched = [] if unmatched is None else unmatched

    def reasons_for(self, node: Node) -> list[str]:
        for u in self.unmatched:
            if u.node is node:
                return u.reasons
        return []

    def __str__(self) -> str:
        lines = [f"{sum(self.fired.values())} rewrites"]
        lines += [f"  {name}: {count}" for name, count in sorted(self.fired.items())]
        if self.unmatched:
            lines.append(f"{len(self.unmatched)} nodes not rewritten")
            lines += [f"  {u}" for u in self.unmatched]
        return "\n".join(lines)


# ---------------------------------------------------------------------------
# Applying rules
# ---------------------------------------------------------------------------

Identity = Callable[[Builder, Value], Value]


class _Rewriter:
    """One :func:`apply` call: the rule set, builder defaults, and the report being filled."""

    def __init__(
        self,
        rules: RuleSet,
        *,
        domain: str | None,
        version: int | None,
        recursive: bool,
        skip: Callable[[Node], bool] | None,
        identity: Identity | None,
    ):
        self.rules = rules
        self.domain = domain
        self.version = version
        self.recursive = recursive
        self.skip = skip
        self.identity = identity
        self.fired: Counter[str] = Counter()
        self.reasons: dict[int, Unmatched] = {}

    def graph(self, graph: Graph, where: str) -> None:
        graph.topological_sort()
        outputs = {id(v) for v in graph.outputs}
        for node in reversed(list(graph.nodes)):
            if node.graph is not graph:
                continue  # removed by an earlier rewrite
            if self.recursive:
                for attr, sub in _subgraphs(node):
                    self.graph(sub, f"{where}{node.label} / {attr}: ")
            if self.skip is not None and self.skip(node):
                continue
            reasons = self.node(graph, node, outputs)
            if reasons is not None:
                self.reasons[id(node)] = Unmatched(node, where + node.label, reasons)
            outputs = {id(v) for v in graph.outputs}

    def node(self, graph: Graph, node: Node, outputs: set[int]) -> list[str] | None:
        """Try the rules at ``node``; ``None`` when one fired, else the reasons each gave."""
        candidates = self.rules.for_node(node)
        if not candidates:
            return [f"no rule for {node.domain + '::' if node.domain else ''}{node.op}"]
        reasons = []
        for rule in candidates:
            match, mismatch = rule.match(graph, node, outputs)
            if match is None:
                reasons.append(f"{rule.name}: pattern does not match ({mismatch})")
                continue
            try:
                why = rule.check(match) if rule.check is not None else None
            except Refuse as e:  # a check may use the helpers the replacements use
                why = str(e)
            except MALFORMED as e:
                why = f"cannot take this node ({type(e).__name__}: {e})"
            if why is None:
                why = self.rewrite(rule, match)
            if why is None:
                self.fired[rule.name] += 1
                return None
            reasons.append(f"{rule.name}: {why}")
        return reasons

    def rewrite(self, rule: Rule, m: Match) -> str | None:
        """Build the replacement and rewire; returns a reason (and leaves the graph as it was) on refusal."""
        b = Builder(
            m.graph,
            m.root,
            domain=m.root.domain if self.domain is None else self.domain,
            version=m.root.version if self.version is None else self.version,
        )
        try:
            replaced = rule.replacement(b, m)
        except Refuse as e:
            b.undo()
            return str(e)
        except MemoryError:
            b.undo()
            raise BudgetError(
                f"out of memory while {rule.name} built the replacement; a smaller "
                "--max-tensor-bytes refuses such tensors earlier",
                where=m.root.label,
            ) from None
        except MALFORMED as e:
            # A rule that indexes an attribute, rank or operand list the node does not have: a malformed
            # model (a valid one would pass the schema checks), refused like any node the rule cannot take.
            b.undo()
            return f"cannot take this node ({type(e).__name__}: {e})"
        except Exception:
            b.undo()  # a buggy rule must not leave half a replacement in the graph
            raise
        new: list[Value | None] = [replaced] if isinstance(replaced, Value) or replaced is None else list(replaced)
        if len(new) != m.n_outputs:
            b.undo()
            raise GraphError(f"rule {rule.name}: replacement returned {len(new)} values for {m.n_outputs} outputs")
        missing = [old.name for old, value in zip(m.outputs, new) if old is not None and value is None]
        why = (
            f"replacement gives no value for {', '.join(map(repr, missing))}"
            if missing
            else self._fix_graph_outputs(b, m, new)
        )
        if why is not None:
            b.undo()
            return why
        for old, value in zip(m.outputs, new):
            if old is not None and value is not None and value is not old:
                if value.type is None:
                    value.type = old.type
                old.replace_all_uses_with(value)
        self._graph_outputs(m, new)
        _remove_dead(m.graph, m.removable)
        for branch in b.discarded:
            for node in list(branch.walk()):
                node.detach()  # its inputs' uses no longer name it
                node.graph = None  # what the report counts as still in the model
        return None

    def _fix_graph_outputs(self, b: Builder, m: Match, new: list[Value | None]) -> str | None:
        """Make each replacement value of a graph output renamable (a fresh value), copying when needed."""
        made = {id(n) for n in b.nodes}
        taken: set[int] = {id(v) for v in m.graph.outputs if all(v is not o for o in m.outputs)}
        for i, (old, value) in enumerate(zip(m.outputs, new)):
            if old is None or value is None or all(old is not o for o in m.graph.outputs):
                continue
            fresh = value.producer is not None and id(value.producer) in made and id(value) not in taken
            if not fresh:
                if self.identity is None:
                    return (
                        f"graph output {old.name!r} would be replaced by {value.name!r}, which cannot be "
                        f"renamed (it is a graph input, a constant or another output)"
                    )
                new[i] = value = self.identity(b, value)
            taken.add(id(value))
        return None

    @staticmethod
    def _graph_outputs(m: Match, new: list[Value | None]) -> None:
        """Point graph outputs at the new values, which take the old values' names."""
        for old, value in zip(m.outputs, new):
            for i, out in enumerate(m.graph.outputs):
                if out is old and value is not None and value is not old:
                    value.name = old.name
                    value.doc = value.doc or old.doc
                    m.graph.outputs[i] = value

    def report(self) -> RewriteReport:
        still = [u for u in self.reasons.values() if u.node.graph is not None]
        return RewriteReport(self.fired, still)


def _subgraphs(node: Node) -> Iterator[tuple[str, Graph]]:
    for name, a in node.attrs.items():
        items = a.value if isinstance(a.value, list) else [a.value]
        for i, g in enumerate(items):
            if isinstance(g, Graph):
                yield (name if len(items) == 1 else f"{name}[{i}]"), g


def _remove_dead(graph: Graph, matched: list[Node]) -> None:
    """Remove the matched nodes, then nodes and constants of ``graph`` that only they used.

    ``matched`` lists producers before consumers; popping from its end removes consumers first,
    so each matched node is already unused when its turn comes.
    """
    outputs = {id(v) for v in graph.outputs}
    dead = [n for n in matched if n.graph is graph]
    while dead:
        node = dead.pop()
        if node.graph is not graph or any(v is not None and (v.uses or id(v) in outputs) for v in node.outputs):
            continue
        inputs = [v for v in node.inputs if v is not None]
        graph.remove_node(node)
        for v in inputs:
            if v.uses or id(v) in outputs:
                continue
            if v.producer is not None and v.producer.graph is graph:
                dead.append(v.producer)
            elif v.const is not None and graph.initializers.get(v.name) is v and v not in graph.inputs:
                del graph.initializers[v.name]


def apply(
    graph: Graph,
    rules: RuleSet | Sequence[Rule],
    *,
    recursive: bool = True,
    domain: str | None = None,
    version: int | None = None,
    skip: Callable[[Node], bool] | None = None,
    identity: Identity | None = None,
) -> RewriteReport:
    """Rewrite ``graph`` in place with ``rules``; returns the report.

    ``domain``/``version`` are what the builder gives new nodes (default: the
    matched root's, for rewrites within one dialect).  Nodes for which
    ``skip(node)`` is true are left alone and not reported.  ``identity(b, v)``
    copies a value when a graph output would otherwise be replaced by a value
    that cannot take its name (a graph input, a constant); without it such a
    rewrite is refused with that reason.
    """
    if not isinstance(rules, RuleSet):
        rules = RuleSet(rules)
    rewriter = _Rewriter(rules, domain=domain, version=version, recursive=recursive, skip=skip, identity=identity)
    rewriter.graph(graph, "")
    return rewriter.report()


def convert_graph(
    graph: Graph,
    rules: RuleSet | Sequence[Rule],
    target_domain: str,
    target_version: int | None,
    *,
    is_target: Callable[[Node], bool] | None = None,
    identity: Identity | None = None,
    where: str | None = None,
) -> tuple[Graph, RewriteReport]:
    """Rewrite ``graph`` into the target dialect; every node must end up there.

    ``is_target(node)`` says whether a node already belongs to the target
    dialect (default: same domain and version).  Raises
    :class:`~opconv.errors.ConversionError` naming every node left over, with
    each rule's reason; ``where`` (a file name) prefixes the message.
    """
    if is_target is None:

        def is_target(node: Node) -> bool:
            return same_domain(node.domain, target_domain) and node.version == target_version

    report = apply(graph, rules, domain=target_domain, version=target_version, skip=is_target, identity=identity)
    left = [n for n in graph.walk() if not is_target(n)]
    if left:
        known = {id(u.node): u for u in report.unmatched}
        problems = [
            known.get(id(n)) or Unmatched(n, n.label, ["a rule produced it outside the target dialect"]) for n in left
        ]
        target = f"{target_domain or 'ai.onnx'}" + (f" version {target_version}" if target_version else "")
        raise ConversionError(
            f"{len(problems)} node(s) cannot be converted to {target}: " + " | ".join(str(p) for p in problems),
            problems,
            where=where,
        )
    return graph, report
