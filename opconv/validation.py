"""Validate a model against its dialect's schemas.

:func:`check_model` walks every node (subgraphs included) and lists every
problem it finds, each naming the node: unknown op or version, deprecated op,
input/output count, missing or unknown attributes, attribute types and values,
input types against the type constraints, names used but never defined, and
names defined twice.  It never stops at the first problem.

:func:`require_valid` is the door of every conversion, run and verification: the problems that
converters, version adapters and kernels rely on never meeting (operand counts, attribute presence,
types, names that exist) refuse the model with one error before any of them runs,
so that none of them has to check what the schemas already say.
"""

from __future__ import annotations

from typing import NamedTuple

from .errors import MalformedModelError
from .ir import Graph, Model, Node, Value
from .schemas import OpSchema, dialect_schemas
from .types import type_signature

#: ONNX spells the default domain two ways
_DEFAULT_DOMAINS = {"", "ai.onnx"}
#: attribute values a node's form holds (what an allowed-values check may read)
_SCALARS = (str, bytes, int, float, bool)


class Problem(NamedTuple):  # not a dataclass: every conversion imports this module, and defining one costs ~1 ms
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


#: the problems :func:`require_valid` refuses.  Unknown and deprecated ops, unknown attributes, operand types and
#: attribute values outside a schema's list are left to the converters, which refuse what they cannot map, and to
#: the executors: the lists are not exhaustive (OpenVINO writes Broadcast-1 with mode "none", which opset1's
#: specification does not name).
DOOR_CODES = frozenset(
    {
        "domain-not-imported",
        "input-count",
        "output-count",
        "missing-attribute",
        "attribute-type",
        "axis-range",
        "undefined-name",
        "negative-dim",
    }
)
#: attributes that name tensor axes: onnx's C++ shape inference reads them as 32-bit ints, and an axis past that
#: range wraps (2**31 became a negative index and crashed the process, onnx 1.23); no tensor has such a rank
_AXIS_ATTRIBUTES = frozenset({"axis", "axes"})
#: (op, attribute) pairs whose value is the node's number of outputs, which no schema can tie to the count:
#: onnx's C++ inference trusts it (ONNX Split-18 num_outputs=3 on a node of 4 outputs failed an assertion and
#: aborted the process; num_outputs=2**31-1 built a list that long); OpenVINO's Split says it as num_splits
_OUTPUT_COUNT_ATTRIBUTES = frozenset({("Split", "num_outputs"), ("Split", "num_splits")})


def check_model(model: Model, codes: frozenset | None = None) -> list[Problem]:
    """Every problem of ``model`` (only those of ``codes``, when given); an empty list means it is valid."""
    checker = _Checker(model, codes)
    checker.graph(model.graph, outer=set())
    for f in model.functions:
        checker.graph(f.graph, outer=set(), function=f.name)
    return checker.problems


def require_valid(model: Model) -> Model:
    """``model``, or a :class:`MalformedModelError` naming the file, each node and what its schema expects."""
    problems = check_model(model, DOOR_CODES)
    if problems:
        raise MalformedModelError(problems, where=model.path)
    return model


class _Checker:
    def __init__(self, model: Model, codes: frozenset | None = None):
        self.model = model
        self.codes = codes
        self.forms: dict[tuple, tuple] = {}  # node form -> what :meth:`form` found
        self.schemas = dialect_schemas(model.dialect)
        self.problems: list[Problem] = []
        self.functions = {(f.domain, f.name): f for f in model.functions}
        self.graph_name = ""

    def wants(self, code: str) -> bool:
        return self.codes is None or code in self.codes

    def add(self, code: str, message: str, node: Node | None = None) -> None:
        if self.codes is not None and code not in self.codes:
            return
        self.problems.append(Problem(code, message, node.label if node else "", self.graph_name))

    # -- graph level ------------------------------------------------------
    def graph(self, g: Graph, outer: set[int], function: str | None = None) -> None:
        self.graph_name = function or g.name
        defined = set(outer)
        if self.wants("duplicate-name"):
            names: dict[str, Value] = {}
            for v in g.values():
                if v.name in names and names[v.name] is not v:
                    producer = v.producer.label if v.producer else "a graph input or constant"
                    self.add("duplicate-name", f"name {v.name!r} is defined twice (again by {producer})")
                names.setdefault(v.name, v)
                defined.add(id(v))
        else:  # the same values, without Graph.values' list look-ups (quadratic when initializers are inputs)
            defined.update(map(id, g.inputs))
            defined.update(map(id, g.initializers.values()))
            for n in g.nodes:
                defined.update(id(v) for v in n.outputs if v is not None)
        for n in g.nodes:
            for i, v in enumerate(n.inputs):
                if v is not None and id(v) not in defined:
                    self.add("undefined-name", f"input {i} reads {v.name!r}, which is never defined", n)
            self.node(n)
            if not n.attrs:
                continue
            for sub in n.subgraphs():
                self.graph(sub, defined)
                self.graph_name = function or g.name
        for v in g.outputs:
            if id(v) not in defined:
                self.add("undefined-name", f"graph output {v.name!r} is never defined")
        if self.wants("negative-dim"):
            self.declared_shapes(g)

    def declared_shapes(self, g: Graph) -> None:
        """A declared dim below 0 (onnx's C++ shape inference clamps with it: [2, 3, -2**63] failed an
        assertion and aborted the process); an unknown dim is left out or named instead."""
        values = [*g.inputs, *g.outputs, *(v for n in g.nodes for v in n.outputs if v is not None)]
        for v in values:
            shape = getattr(v.type, "shape", None)
            if shape and any(isinstance(d, int) and d < 0 for d in shape):
                self.add("negative-dim", f"value {v.name!r} is declared with a negative dim: {list(shape)}")

    # -- node level -------------------------------------------------------
    def node(self, n: Node) -> None:
        if (n.domain, n.op) in self.functions:
            self.function_call(n, self.functions[(n.domain, n.op)])
            return
        # Everything but the operand types depends on the node's form only: checked once per form (a
        # model repeats its layers; the door then costs ~1 us per node instead of ~8).
        attrs = (
            tuple((name, a.type, a.ref, a.value if type(a.value) in _SCALARS else None) for name, a in n.attrs.items())
            if n.attrs
            else ()
        )
        key = (n.domain, n.op, n.version, tuple(v is None for v in n.inputs), len(n.outputs), attrs)
        found = self.forms.get(key)
        if found is None:
            found = self.form(n)
            if found[2]:
                self.forms[key] = found
        schema, problems, _ = found
        for code, message in problems:
            self.add(code, message, n)
        if schema is not None and self.wants("input-type"):
            self.types(n, schema)

    def form(self, n: Node) -> tuple[OpSchema | None, list[tuple[str, str]], bool]:
        """(schema, [(code, message)], whether the verdict holds for every node of this form)."""
        domain = "" if (self.model.dialect == "onnx" and n.domain in _DEFAULT_DOMAINS) else n.domain
        label = f"{domain}::{n.op}" if domain else n.op
        if n.version is None:
            return (
                None,
                [
                    (
                        "domain-not-imported",
                        f"op {label}: the model imports no version of domain {domain or 'ai.onnx'!r}",
                    )
                ],
                True,
            )
        schema = self.schemas.find(n.op, n.version, domain)
        if schema is None:
            known = self.schemas.versions(n.op, domain)
            if known:
                return (
                    None,
                    [
                        (
                            "op-version",
                            f"op {label} does not exist at version {n.version} (first defined at {known[0].version})",
                        )
                    ],
                    True,
                )
            return None, [("unknown-op", f"unknown op {label} at version {n.version}")], True
        problems = [("deprecated-op", f"op {label} is deprecated at version {n.version}")] if schema.deprecated else []
        self.arity(n, schema, problems)
        return schema, problems, self.attributes(n, schema, problems)

    def function_call(self, n: Node, f) -> None:
        if len(n.inputs) > len(f.graph.inputs):
            self.add(
                "input-count", f"function {f.name} takes at most {len(f.graph.inputs)} inputs, got {len(n.inputs)}", n
            )
        if len(n.outputs) > len(f.graph.outputs):
            self.add(
                "output-count",
                f"function {f.name} has {len(f.graph.outputs)} outputs, node declares {len(n.outputs)}",
                n,
            )

    @staticmethod
    def arity(n: Node, s: OpSchema, problems: list) -> None:
        count = len(n.inputs)
        if not s.min_inputs <= count <= s.max_inputs:
            problems.append(
                ("input-count", f"{n.op}-{s.version} takes {_range(s.min_inputs, s.max_inputs)} inputs, got {count}")
            )
        for i, p in enumerate(s.inputs):
            if p.option == "single" and i < count and n.inputs[i] is None:
                problems.append(("input-count", f"required input {i} ({p.name}) of {n.op} is missing"))
        count = len(n.outputs)
        if not s.min_outputs <= count <= s.max_outputs:
            problems.append(
                (
                    "output-count",
                    f"{n.op}-{s.version} has {_range(s.min_outputs, s.max_outputs)} outputs, node declares {count}",
                )
            )

    @staticmethod
    def attributes(n: Node, s: OpSchema, problems: list) -> bool:
        """Appends the attributes' problems; returns False when a value the verdict read is not in the form."""
        declared = {a.name: a for a in s.attributes}
        same_for_the_form = True
        for a in s.attributes:
            if a.required and a.name not in n.attrs:
                problems.append(
                    ("missing-attribute", f"required attribute {a.name!r} of {n.op}-{s.version} is missing")
                )
        for name, attr in n.attrs.items():
            spec = declared.get(name)
            if spec is None:
                problems.append(("unknown-attribute", f"{n.op}-{s.version} has no attribute {name!r}"))
                continue
            if attr.type != spec.type:
                problems.append(("attribute-type", f"attribute {name!r} must be of type {spec.type}, got {attr.type}"))
                continue
            if name in _AXIS_ATTRIBUTES and attr.ref is None:
                values = attr.value if isinstance(attr.value, (list, tuple)) else [attr.value]
                same_for_the_form &= type(attr.value) in _SCALARS
                if any(isinstance(v, int) and not -(2**31) < v < 2**31 for v in values):
                    problems.append(
                        ("axis-range", f"attribute {name!r} is {attr.value!r}: an axis past any tensor's rank")
                    )
            if (n.op, name) in _OUTPUT_COUNT_ATTRIBUTES and attr.ref is None and attr.value != len(n.outputs):
                problems.append(
                    (
                        "output-count",
                        f"attribute {name!r} is {attr.value!r}, but the node declares {len(n.outputs)} outputs",
                    )
                )
            if spec.allowed is not None and attr.ref is None:
                same_for_the_form &= type(attr.value) in _SCALARS
                if attr.value not in spec.allowed:
                    allowed = ", ".join(map(repr, spec.allowed))
                    problems.append(
                        ("attribute-value", f"attribute {name!r} is {attr.value!r}; expected one of {allowed}")
                    )
        return same_for_the_form

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
                self.add(
                    "input-type", f"input {i} ({p.name}) of {n.op} is {sig}; {p.type} allows {', '.join(allowed)}", n
                )
                continue
            if p.type in s.type_constraints and (p.option != "variadic" or p.homogeneous):
                first = bound.setdefault(p.type, sig)
                if first != sig:
                    self.add(
                        "input-type", f"inputs bound to {p.type} disagree: {first} and {sig} (input {i}, {p.name})", n
                    )


def _range(lo: int, hi: int) -> str:
    if hi >= 2**31 - 1:
        return f"at least {lo}"
    return str(lo) if lo == hi else f"{lo} to {hi}"
