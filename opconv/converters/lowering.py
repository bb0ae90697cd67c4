"""The lowering registry as the rewrite engine runs it: fusions, dispatching rules, a route's rule set.

The registry itself (:func:`lower`, :func:`find`, :func:`find_exact`, :func:`translators`, :func:`discover`,
...) is :mod:`opconv.lowering`, which imports nothing of the converters so that a dialect (the StableHLO
writer) registers there too; this module re-exports it, and converters import this one.

For the dialect directions :func:`rule_set` turns a route into the rewrite engine's :class:`RuleSet`: one rule
per (domain, op) that dispatches on the node's version, preceded by the route's **fusions** -- multi-node
patterns registered with :func:`fusion`, the only place where a pattern is more than one node.  Fusions of
one root op are tried in registration order, before the single-node translator of that op.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..ir import Graph, Node, Value
from ..lowering import (  # noqa: F401
    Check,
    Route,
    Translator,
    discover,
    find,
    find_exact,
    lower,
    ops,
    translator_routes,
    translators,
    versions,
    withdraw,
)
from .rewrite import Builder, Match, Pattern, Refuse, Rule, RuleSet, same_domain

#: how a route's converter calls a translator inside a rewrite: ``call(translator, builder, match)``
Call = Callable[["Translator", Builder, Match], Any]


class Fusion:
    """A multi-node pattern rule of a route, tried before the single-node translators of its root op."""

    __slots__ = ("route", "rule")

    def __init__(self, route: Route, rule: Rule):
        self.route = route
        self.rule = rule


#: route -> fusions, in registration order (fusions of one root op that compete live in one module)
_FUSIONS: dict[Route, list[Fusion]] = {}


def fusion(
    source: str, target: str, name: str, pattern: Pattern | Callable[..., Any], *, check: Check | None = None
) -> Callable[[Callable], Callable]:
    """Register the decorated ``replacement(b, match)`` of a multi-node ``pattern`` on a route."""

    def register(replacement: Callable) -> Callable:
        add_rules(source, target, [Rule(name, pattern, replacement, check=check)])
        return replacement

    return register


def add_rules(source: str, target: str, rules: Iterable[Rule]) -> None:
    """Register ready-made pattern rules (fusions) on a route, in order."""
    route = (source, target)
    _FUSIONS.setdefault(route, []).extend(Fusion(route, r) for r in rules)


def fusions(source: str, target: str) -> list[Fusion]:
    return list(_FUSIONS.get((source, target), []))


def routes() -> list[Route]:
    """Every route with a translator or a fusion."""
    return sorted(set(translator_routes()) | set(_FUSIONS))


class _OpAnchor(Pattern):
    """The one-node "pattern" of a dispatching rule: any node of ``domain::op``, any inputs, all outputs."""

    def __init__(self, op: str, domain: str):
        def anchor(p):  # one node with any inputs: what the registries' readers (docs/coverage.md) see
            return p.node(op, _domain=domain, _any_inputs=True)

        anchor.__name__ = op
        super().__init__(anchor)
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
        super().__init__(
            f"{route[0]}->{route[1]}:{domain + '::' if domain else ''}{op}",
            _OpAnchor(op, domain),
            self._replace,
            check=self._check,
        )

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
            first = versions(self.route[0], self.route[1], self.op, self.domain)[0]
            return f"no translator for version {m.root.version} (registered from version {first} on)"
        why = t.refusal(m.root)
        if why is None and t.check is not None:
            why = t.check(m)
        return why

    def _replace(self, b: Builder, m: Match):
        t = self.translator(m.root)
        assert t is not None  # _check ran first
        return _fit_outputs(m, t, self.call(t, b, m))


def _fit_outputs(m: Match, t: Translator, result) -> list:
    """The translator's values, one per output of the node: values past the node's outputs (optional outputs
    it omits) are dropped; outputs the translator gives no value for must be unused, and go with the node."""
    values = [result] if isinstance(result, Value) or result is None else list(result)
    outputs = m.root.outputs
    if len(values) >= len(outputs):
        return values[: len(outputs)]
    graph_outputs = {id(v) for v in m.graph.outputs}
    for old in outputs[len(values) :]:
        if old is not None and (old.uses or id(old) in graph_outputs):
            raise Refuse(f"output {old.name!r} of {m.root.label} is used, and {t.label} does not compute it")
    return values + list(outputs[len(values) :])  # unused: removed with the node, nothing replaces them


def call_with_match(t: Translator, b: Builder, m: Match):
    """The calling convention ``fn(builder, match)``."""
    return t.fn(b, m)


def rule_set(source: str, target: str, call: Call = call_with_match) -> RuleSet:
    """The rewrite engine's rules for a route: its fusions, then one dispatching rule per (domain, op)."""
    route = (source, target)
    rules: list[Rule] = [f.rule for f in _FUSIONS.get(route, [])]
    rules += [DispatchRule(route, domain, op, call) for domain, op in sorted(ops(source, target))]
    return RuleSet(rules)


__all__ = [
    "Translator",
    "Fusion",
    "DispatchRule",
    "lower",
    "withdraw",
    "fusion",
    "add_rules",
    "find",
    "find_exact",
    "versions",
    "translators",
    "fusions",
    "ops",
    "routes",
    "discover",
    "rule_set",
    "call_with_match",
]
