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
the registry stores, dispatches and counts translators; the converter of a route calls them.

This module is the registry alone and imports nothing of opconv but its errors, so that dialects (the
StableHLO writer) register here without importing the converters.  The rewrite engine's side -- fusions
(multi-node patterns), the dispatching rule of an op and the rule set of a route -- is
:mod:`opconv.converters.lowering`, which also re-exports everything defined here: converters import that one.
Each converter package calls :func:`discover` on itself, which imports every module of the package so that
their registrations run: nothing lists the modules by hand, and registration order never decides which
translator fires (versions do).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .errors import GraphError

Route = tuple[str, str]
#: ``check(match)``: a reason not to translate the matched node, or None
Check = Callable[[Any], "str | None"]


class Translator:
    """One registration: ``fn`` translates ``domain::op`` nodes of versions ``since``.. on ``route``.

    ``inputs``/``outputs``: the allowed counts (trailing omitted inputs do not count), or None for any;
    ``names``: names of the inputs by position, bound in the match (``m["x"]``) for translators that read
    their inputs by name; ``check(match)``: a reason not to translate this node, or None.
    """

    __slots__ = ("route", "domain", "op", "since", "fn", "inputs", "outputs", "names", "check")

    def __init__(
        self,
        route: Route,
        domain: str,
        op: str,
        since: int,
        fn: Callable[..., Any],
        inputs: frozenset[int] | None,
        outputs: frozenset[int] | None,
        names: tuple[str, ...] | None,
        check: Check | None,
    ):
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

    def refusal(self, node: Any) -> str | None:
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


#: route -> (domain, op) -> since -> translator
_TRANSLATORS: dict[Route, dict[tuple[str, str], dict[int, Translator]]] = {}


def _counts(counts: frozenset[int]) -> str:
    """``1 or 3``, ``1 to 64`` (a run of counts is written as its ends)."""
    runs: list[list[int]] = []
    for c in sorted(counts):
        if runs and c == runs[-1][-1] + 1:
            runs[-1].append(c)
        else:
            runs.append([c])
    return " or ".join(
        str(r[0]) if len(r) == 1 else f"{r[0]} to {r[-1]}" if len(r) > 2 else f"{r[0]} or {r[1]}" for r in runs
    )


def _count_set(counts: int | Iterable[int] | None) -> frozenset[int] | None:
    if counts is None:
        return None
    return frozenset([counts] if isinstance(counts, int) else counts)


def _domain(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


def lower(
    source: str,
    target: str,
    ops: str | Sequence[str],
    *,
    since: int = 1,
    domain: str = "",
    inputs: int | Iterable[int] | None = None,
    outputs: int | Iterable[int] | None = None,
    names: Sequence[str] | None = None,
    check: Check | None = None,
) -> Callable[[Callable], Callable]:
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
                raise GraphError(
                    f"two {source}->{target} translators for {op}-{since}: "
                    f"{versions[since].fn.__qualname__} and {fn.__qualname__}"
                )
            versions[since] = Translator(route, _domain(domain), op, since, fn, in_counts, out_counts, bound, check)
        return fn

    return register


def withdraw(source: str, target: str, op: str, since: int, domain: str = "") -> Translator:
    """Remove and return the registration of ``op``-``since`` (for a test that registers one of its own)."""
    versions = _TRANSLATORS[(source, target)][(_domain(domain), op)]
    t = versions.pop(since)
    if not versions:
        del _TRANSLATORS[(source, target)][(_domain(domain), op)]
    return t


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


def versions(source: str, target: str, op: str, domain: str = "") -> list[int]:
    """The ``since`` versions registered for ``domain::op`` on a route, ascending."""
    return sorted(_TRANSLATORS.get((source, target), {}).get((_domain(domain), op), {}))


def translators(source: str, target: str) -> list[Translator]:
    """Every translator of a route, sorted by (domain, op, since)."""
    table = _TRANSLATORS.get((source, target), {})
    return [table[key][since] for key in sorted(table) for since in sorted(table[key])]


def ops(source: str, target: str) -> set[tuple[str, str]]:
    """The (domain, op) pairs a route has a translator for."""
    return set(_TRANSLATORS.get((source, target), {}))


def translator_routes() -> list[Route]:
    """The routes with at least one translator."""
    return sorted(_TRANSLATORS)


def discover(package: str) -> None:
    """Import every module of ``package`` (a converter package's ``__name__``) so its registrations run."""
    pkg = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        importlib.import_module(f"{package}.{info.name}")


__all__ = [
    "Route",
    "Check",
    "Translator",
    "lower",
    "withdraw",
    "find",
    "find_exact",
    "versions",
    "translators",
    "ops",
    "translator_routes",
    "discover",
]
