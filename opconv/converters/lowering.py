"""The one lowering registry: how each op is translated, for every route, registered beside its code.

A **route** is a ``(source, target)`` pair of names.  The dialect directions are ``("onnx", "openvino")``,
``("openvino", "onnx")``, ``("onnx", "hlo")`` and ``("hlo", "onnx")``; the other routes of opconv use the same
registry with these names:

=========================  ====================================================================
``("onnx", "onnx:up")``    version adapters, one per step ``since`` = the version that changed
``("onnx", "onnx:down")``  the same steps taken back (at an op's first version: a decomposition)
``("onnx", "standard")``   decompositions of composite and contrib ops into standard ai.onnx ops
``("hlo", "stablehlo")``   StableHLO emitters of HLO ops
=========================  ====================================================================

A **translator** handles one source op from version ``since`` on, until the next registration of the same op
on the same route; a node is translated by the registration with the highest ``since`` not above its version
(as kernels are dispatched).  It is registered with :func:`lower` beside its code::

    @lower("onnx", "openvino", "Softmax", since=13, inputs=1)
    def softmax_13(b: Builder, m: Match):
        ...

The calling convention of ``fn`` is the route's own (each converter package says which in its docstring):
the registry stores, dispatches and counts translators; the converter of a route calls them.  For the
dialect directions :func:`rule_set` turns a route into the rewrite engine's :class:`RuleSet`: one rule per
(domain, op) that dispatches on the node's version, preceded by the route's **fusions** -- multi-node
patterns registered with :func:`fusion`, the only place where a pattern is more than one node.

Each converter package calls :func:`discover` on itself, which imports every module of the package so that
their registrations run: nothing lists the modules by hand, and registration order never decides which
translator fires (versions do, and fusions come before single-node translators).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Callable, Iterable, Sequence

from ..errors import GraphError
from ..ir import Graph, Node
from .rewrite import Builder, Check, Match, Pattern, Rule, RuleSet, same_domain

Route = tuple[str, str]

#: how a route's converter calls a translator inside a rewrite: ``call(translator, builder, match)``
Call = Callable[["Translator", Builder, Match], Any]


class Translator:
    """One registration: ``fn`` translates ``domain::op`` nodes of versions ``since``.. on ``route``.

    ``inputs``/``outputs``: the allowed counts (trailing omitted inputs do not count), or None for any;
    ``names``: names of the inputs by position, bound in the match (``m["x"]``) for translators that read
    their inputs by name; ``check(match)``: a reason not to translate this node, or None.
    """

    __slots__ = ("route", "domain", "op", "since", "fn", "inputs", "outputs", "names", "check")

    def __init__(self, route: Route, domain: str, op: str, since: int, fn: Callable[..., Any],
                 inputs: frozenset[int] | None, outputs: frozenset[int] | None, names: tuple[str, ...] | None,
                 check: Check | None):
        self.route = route
        self.domain = domain
        self.op = op
        self.since = since
        self.fn = fn
        self.inputs = inputs
        self.outputs = outputs
        self.names = names
        self.check = check

    @property
    def label(self) -> str:
        return f"{self.domain + '::' if self.domain else ''}{self.op}-{self.since}"

    def refusal(self, node: Node) -> str | None:
        """Why this translator does not take ``node`` (its input or output count), or None."""
        if self.inputs is not None:
            inputs = list(node.inputs)
            while inputs and inputs[-1] is None:
                inputs.pop()
            if len(inputs) not in self.inputs:
                return f"{node.label} has {len(inputs)} inputs; {self.label} takes {_counts(self.inputs)}"
        if self.outputs is not None and len(node.outputs) not in self.outputs:
            return f"{node.label} has {len(node.outputs)} outputs; {self.label} gives {_counts(self.outputs)}"
        return None

    def __repr__(self) -> str:
        return f"Translator({self.route[0]}->{self.route[1]} {self.label}: {self.fn.__module__}.{self.fn.__name__})"


class Fusion:
    """A multi-node pattern rule of a route, tried before the single-node translators of its root op."""

    __slots__ = ("route", "rule")

    def __init__(self, route: Route, rule: Rule):
        self.route = route
        self.rule = rule


#: route -> (domain, op) -> since -> translator
_TRANSLATORS: dict[Route, dict[tuple[str, str], dict[int, Translator]]] = {}
#: route -> fusions, in registration order (fusions of one root op that compete live in one module)
_FUSIONS: dict[Route, list[Fusion]] = {}


def _counts(counts: frozenset[int]) -> str:
    return " or ".join(str(c) for c in sorted(counts))


def _count_set(counts: int | Iterable[int] | None) -> frozenset[int] | None:
    if counts is None:
        return None
    return frozenset([counts] if isinstance(counts, int) else counts)


def _domain(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


def lower(source: str, target: str, ops: str | Sequence[str], *, since: int = 1, domain: str = "",
          inputs: int | Iterable[int] | None = None, outputs: int | Iterable[int] | None = None,
          names: Sequence[str] | None = None, check: Check | None = None) -> Callable[[Callable], Callable]:
    """Register the decorated function as the ``source`` -> ``target`` translator of ``ops`` (an op or several
    sharing one function) from version ``since`` on.  Two registrations of one (route, op, since) are an error."""
    route = (source, target)
    op_names = (ops,) if isinstance(ops, str) else tuple(ops)
    in_counts, out_counts = _count_set(inputs), _count_set(outputs)
    bound = tuple(names) if names is not None else None

    def register(fn: Callable) -> Callable:
        for op in op_names:
            versions = _TRANSLATORS.setdefault(route, {}).setdefault((_domain(domain), op), {})
            if since in versions:
                raise GraphError(f"two {source}->{target} translators for {op}-{since}: "
                                 f"{versions[since].fn.__qualname__} and {fn.__qualname__}")
            versions[since] = Translator(route, _domain(domain), op, since, fn, in_counts, out_counts, bound, check)
        return fn

    return register


def fusion(source: str, target: str, name: str, pattern: Pattern | Callable[..., Any], *,
           check: Check | None = None) -> Callable[[Callable], Callable]:
    """Register the decorated ``replacement(b, match)`` of a multi-node ``pattern`` on a route."""
    def register(replacement: Callable) -> Callable:
        add_rules(source, target, [Rule(name, pattern, replacement, check=check)])
        return replacement

    return register


def add_rules(source: str, target: str, rules: Iterable[Rule]) -> None:
    """Register ready-made pattern rules (fusions) on a route, in order."""
    route = (source, target)
    _FUSIONS.setdefault(route, []).extend(Fusion(route, r) for r in rules)


def find(source: str, target: str, op: str, version: int | None, domain: str = "") -> Translator | None:
    """The translator in force for ``domain::op`` at ``version`` (the highest ``since`` not above it)."""
    versions = _TRANSLATORS.get((source, target), {}).get((_domain(domain), op))
    if not versions:
        return None
    if version is None:
        return versions[max(versions)]
    usable = [v for v in versions if v <= version]
    return versions[max(usable)] if usable else None


def find_exact(source: str, target: str, op: str, since: int, domain: str = "") -> Translator | None:
    """The translator registered for exactly ``op``-``since`` (version adapters are per step)."""
    return _TRANSLATORS.get((source, target), {}).get((_domain(domain), op), {}).get(since)


def translators(source: str, target: str) -> list[Translator]:
    """Every translator of a route, sorted by (domain, op, since)."""
    table = _TRANSLATORS.get((source, target), {})
    return [table[key][since] for key in sorted(table) for since in sorted(table[key])]


def fusions(source: str, target: str) -> list[Fusion]:
    return list(_FUSIONS.get((source, target), []))


def ops(source: str, target: str) -> set[tuple[str, str]]:
    """The (domain, op) pairs a route has a translator for."""
    return set(_TRANSLATORS.get((source, target), {}))


def routes() -> list[Route]:
    return sorted(set(_TRANSLATORS) | set(_FUSIONS))


def discover(package: str) -> None:
    """Import every module of ``package`` (a converter package's ``__name__``) so its registrations run."""
    pkg = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        importlib.import_module(f"{package}.{info.name}")


class _OpAnchor(Pattern):
    """The one-node "pattern" of a dispatching rule: any node of ``domain::op``, any inputs, all outputs."""

    def __init__(self, op: str, domain: str):  # noqa: no pattern function to build
        self.name = op
        self.root = None
        self.nodes = []
        self.captures = []
        self.op = op
        self.domain = domain

    @property
    def root_op(self) -> str | None:
        return self.op

    def __repr__(self) -> str:
        return f"OpAnchor({self.domain + '::' if self.domain else ''}{self.op})"


class DispatchRule(Rule):
    """The rule of one (domain, op) of a route: picks the translator for the node's version and calls it."""

    __slots__ = ("route", "op", "domain", "call")

    def __init__(self, route: Route, domain: str, op: str, call: Call):
        self.route = route
        self.op = op
        self.domain = domain
        self.call = call
        super().__init__(f"{route[0]}->{route[1]}:{domain + '::' if domain else ''}{op}",
                         _OpAnchor(op, domain), self._replace, check=self._check)

    def translator(self, node: Node) -> Translator | None:
        return find(self.route[0], self.route[1], self.op, node.version, self.domain)

    def match(self, graph: Graph, root: Node, outputs: set[int]) -> tuple[Match | None, str]:
        """Match ``root`` alone (no pattern to walk), binding the translator's input names."""
        if root.op != self.op or not same_domain(root.domain, self.domain):
            return None, f"{root.label} is not {self.op}"
        t = self.translator(root)
        values: dict = {}
        if t is not None and t.names is not None:
            values = {name: (root.inputs[i] if i < len(root.inputs) else None) for i, name in enumerate(t.names)}
        return Match(graph, root, values, {}, [root], [root], len(root.outputs)), ""

    def _check(self, m: Match) -> str | None:
        t = self.translator(m.root)
        if t is None:
            known = sorted(_TRANSLATORS[self.route][(self.domain, self.op)])
            return f"no translator for version {m.root.version} (registered from version {known[0]} on)"
        why = t.refusal(m.root)
        if why is None and t.check is not None:
            why = t.check(m)
        return why

    def _replace(self, b: Builder, m: Match):
        t = self.translator(m.root)
        assert t is not None  # _check ran first
        return self.call(t, b, m)


def call_with_match(t: Translator, b: Builder, m: Match):
    """The calling convention ``fn(builder, match)``."""
    return t.fn(b, m)


def rule_set(source: str, target: str, call: Call = call_with_match) -> RuleSet:
    """The rewrite engine's rules for a route: its fusions, then one dispatching rule per (domain, op)."""
    route = (source, target)
    rules: list[Rule] = [f.rule for f in _FUSIONS.get(route, [])]
    rules += [DispatchRule(route, domain, op, call) for domain, op in sorted(_TRANSLATORS.get(route, {}))]
    return RuleSet(rules)


__all__ = ["Translator", "Fusion", "DispatchRule", "lower", "fusion", "add_rules", "find", "find_exact",
           "translators", "fusions", "ops", "routes", "discover", "rule_set", "call_with_match"]
