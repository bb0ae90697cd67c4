"""Validate a model against its dialect's schemas.

:func:`check_model` walks every node (subgraphs included) and lists every
problem it finds, each naming the node: unknown op or version, deprecated op,
input/output count, missing or unknown attributes, attribute types and values,
input types against the type constraints, names used but never defined, and
names defined twice.  It never stops at the first problem.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ir import Graph, Model, Node, Value
from .schemas import OpSchema, dialect_schemas
from .types import type_signature

#: ONNX spells the default domain two ways
_DEFAULT_DOMAINS = {"", "ai.onnx"}


@dataclass(frozen=True)
class Problem:
    """One finding: where (graph and node) and what."""

    code: str  # short machine-readable kind, e.g. 'unknown-op', 'missing-attribute'
    message: str
    node: str = ""  # the node's label, empty for graph-level problems
    graph: str = ""

    def __str__(self) -> str:
        where = self.node or (f"graph {self.graph!r}" if self.graph else "model")
        return f"{where}: {self.message}"

    def to_json(self) -> dict:
        return {"code": self.code, "message": self.message, "node": self.node, "graph": self.graph}


def check_model(model: Model) -> list[Problem]:
    """Every problem of ``model``; an empty list means it is valid."""
    checker = _Checker(model)
    checker.graph(model.graph, outer=set())
    for f in model.functions:
        checker.graph(f.graph, outer=set(), function=f.name)
    return checker.problems


class _Checker:
    def __init__(self, model: Model):
        self.model = model
        self.schemas = dialect_schemas(model.dialect)
        self.problems: list[Problem] = []
        self.functions = {(f.domain, f.name): f for f in model.functions}
        self.graph_name = ""

    def add(self, code: str, message: str, node: Node | None = None) -> None:
        self.problems.append(Problem(code, message, node.label if node else "", self.graph_name))

    # -- graph level ------------------------------------------------------
    def graph(self, g: Graph, outer: set[int], function: str | None = None) -> None:
        self.graph_name = function or g.name
        defined = set(outer)
        names: dict[str, Value] = {}
        for v in g.values():
            if v.name in names and names[v.name] is not v:
                producer = v.producer.label if v.producer else "a graph input or constant"
                self.add("duplicate-name", f"name {v.name!r} is defined twice (again by {producer})")
            names.setdefault(v.name, v)
            defined.add(id(v))
        for n in g.nodes:
            self.graph_name = function or g.name
            for i, v in enumerate(n.inputs):
                if v is not None and id(v) not in defined:
                    self.add("undefined-name", f"input {i} reads {v.name!r}, which is never defined", n)
            self.node(n)
            for sub in n.subgraphs():
                self.graph(sub, defined)
                self.graph_name = function or g.name
        for v in g.outputs:
            if id(v) not in defined:
                self.add("undefined-name", f"graph output {v.name!r} is never defined")

    # -- node level -------------------------------------------------------
    def node(self, n: Node) -> None:
        domain = "" if (self.model.dialect == "onnx" and n.domain in _DEFAULT_DOMAINS) else n.domain
        if (n.domain, n.op) in self.functions:
            self.function_call(n, self.functions[(n.domain, n.op)])
            return
        label = f"{domain}::{n.op}" if domain else n.op
        if n.version is None:
            self.add("domain-not-imported", f"op {label}: the model imports no version of domain "
                     f"{domain or 'ai.onnx'!r}", n)
            return
        schema = self.schemas.find(n.op, n.version, domain)
        if schema is None:
            known = self.schemas.versions(n.op, domain)
            if known:
                self.add("op-version", f"op {label} does not exist at version {n.version} "
                         f"(first defined at {known[0].version})", n)
            else:
                self.add("unknown-op", f"unknown op {label} at version {n.version}", n)
            return
        if schema.deprecated:
            self.add("deprecated-op", f"op {label} is deprecated at version {n.version}", n)
        self.arity(n, schema)
        self.attributes(n, schema)
        self.types(n, schema)

    def function_call(self, n: Node, f) -> None:
        if len(n.inputs) > len(f.graph.inputs):
            self.add("input-count", f"function {f.name} takes at most {len(f.graph.inputs)} inputs, "
                     f"got {len(n.inputs)}", n)
        if len(n.outputs) > len(f.graph.outputs):
            self.add("output-count", f"function {f.name} has {len(f.graph.outputs)} outputs, "
                     f"node declares {len(n.outputs)}", n)

    def arity(self, n: Node, s: OpSchema) -> None:
        count = len(n.inputs)
        if not s.min_inputs <= count <= s.max_inputs:
            self.add("input-count", f"{n.op}-{s.version} takes {_range(s.min_inputs, s.max_inputs)} inputs, "
                     f"got {count}", n)
        for i, p in enumerate(s.inputs):
            if p.option == "single" and i < count and n.inputs[i] is None:
                self.add("input-count", f"required input {i} ({p.name}) of {n.op} is missing", n)
        count = len(n.outputs)
        if not s.min_outputs <= count <= s.max_outputs:
            self.add("output-count", f"{n.op}-{s.version} has {_range(s.min_outputs, s.max_outputs)} outputs, "
                     f"node declares {count}", n)

    def attributes(self, n: Node, s: OpSchema) -> None:
        declared = {a.name: a for a in s.attributes}
        for a in s.attributes:
            if a.required and a.name not in n.attrs:
                self.add("missing-attribute", f"required attribute {a.name!r} of {n.op}-{s.version} is missing", n)
        for name, attr in n.attrs.items():
            spec = declared.get(name)
            if spec is None:
                self.add("unknown-attribute", f"{n.op}-{s.version} has no attribute {name!r}", n)
                continue
            if attr.type != spec.type:
                self.add("attribute-type", f"attribute {name!r} must be of type {spec.type}, got {attr.type}", n)
                continue
            if spec.allowed is not None and attr.ref is None and attr.value not in spec.allowed:
                allowed = ", ".join(map(repr, spec.allowed))
                self.add("attribute-value", f"attribute {name!r} is {attr.value!r}; expected one of {allowed}", n)

    def types(self, n: Node, s: OpSchema) -> None:
        bound: dict[str, str] = {}
        for i, v in enumerate(n.inputs):
            if v is None or v.type is None:
                continue
            p = s.inputs[min(i, len(s.inputs) - 1)] if s.inputs else None
            if p is None:
                continue
            sig = type_signature(v.type)
            allowed = s.allowed_types(p)
            if sig is None or allowed is None or "undefined" in sig:
                continue
            if sig not in allowed:
                self.add("input-type", f"input {i} ({p.name}) of {n.op} is {sig}; {p.type} allows "
                         f"{', '.join(allowed)}", n)
                continue
            if p.type in s.type_constraints and (p.option != "variadic" or p.homogeneous):
                first = bound.setdefault(p.type, sig)
                if first != sig:
                    self.add("input-type", f"inputs bound to {p.type} disagree: {first} and {sig} "
                             f"(input {i}, {p.name})", n)


def _range(lo: int, hi: int) -> str:
    if hi >= 2**31 - 1:
        return f"at least {lo}"
    return str(lo) if lo == hi else f"{lo} to {hi}"
