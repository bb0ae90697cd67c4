"""Move every ai.onnx node of a model, one schema version at a time, to a target opset.

Each node walks the versions its operator's schemas define between the
model's opset and the target.  At each step the adapter registered for
(op, version, direction) runs (``registry.py``); without one, the generic
adapter below checks, from the two schemas, that the node uses nothing the
other version lacks, drops attributes the other version does not know when
they hold their default, and (downgrading) inserts Casts around a node whose
element type the older version does not accept yet.  Nodes an adapter builds
continue from the version they were built at, so a decomposition into older
ops is itself downgraded further.  Runs of steps that no adapter claims and
that change nothing a node could use (only wider type sets, on upgrade) are
taken as one step (``_next_step``, cached per operator and versions).

Refusals are collected for every node; when there is any, nothing is returned
and one :class:`~opconv.errors.ConversionError` names them all with the opset
range that each node would need.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from ...attributes import text_value
from ...errors import ConversionError, OpconvError
from ...ir import Attr, Graph, Model, Node, Tensor, Value, infer_attr
from ...schemas import OpSchema, dialect_schemas
from ...types import TensorType, element_type, from_numpy, type_signature
from ..rewrite import MALFORMED, Refuse, constant_value
from .registry import SEMANTIC_CHANGES, UPGRADE_NEEDS_TYPES, find_adapter, upgrade_versions

ONNX_DOMAINS = ("", "ai.onnx")
_GRAPH_KINDS = ("graph", "graphs")
#: attributes that older versions carried for memory optimisation or training; meaningless on upgrade
_OBSOLETE_ATTRS = frozenset({"consumed_inputs", "is_test"})
#: ops whose operands are never cast to a wider type (the cast would itself change meaning)
_NO_CAST = frozenset(
    {
        "Cast",
        "CastLike",
        "BitShift",
        "QuantizeLinear",
        "DequantizeLinear",
        "Constant",
        "ConstantOfShape",
        "EyeLike",
        "RandomNormalLike",
        "RandomUniformLike",
        "Bernoulli",
        "Multinomial",
        "Shape",
        "Size",
        "Identity",
        "If",
        "Loop",
        "Scan",
    }
)
#: exact replacement element types, nearest first, for a downgrade to a version that lacks a type
_WIDER = {
    "bool": (),
    "int8": ("int32", "int16", "int64"),
    "int16": ("int32", "int64"),
    "int32": ("int64",),
    "uint8": ("int32", "uint16", "uint32", "int64"),
    "uint16": ("int32", "uint32", "int64"),
    "uint32": ("int64", "uint64"),
    "float16": ("float32", "float64"),
    "bfloat16": ("float32", "float64"),
    "float32": ("float64",),
}


@cache
def _upgrade_steps(op: str) -> tuple[int, ...]:
    """The versions an upgrade of ``op`` stops at: its schemas' and any registered in between."""
    return tuple(sorted({s.version for s in schemas(op)} | set(upgrade_versions(op))))


@cache
def newest_opset() -> int:
    """The newest ai.onnx opset the schemas (this onnx) define."""
    return max(s.version for s in dialect_schemas("onnx") if s.domain == "")


@cache
def schemas(op: str) -> tuple[OpSchema, ...]:
    return tuple(dialect_schemas("onnx").versions(op, ""))


@cache
def _next_step(op: str, current: int, target: int, up: bool):
    """The next step of ``op`` from opset ``current`` toward ``target``, computed once per key.

    Returns None when the node has arrived, else ``(version, have, new, adapter, plan)``: the
    node's version after the step, the schemas in force before and after it (``new`` None: a
    downgrade below the op's first version), the registered adapter, and for a plain step (see
    ``_plain_step``) its :class:`StepPlan`, else None.  Consecutive steps that no adapter
    or semantic change claims and that leave the signature alone (same attributes and operands;
    on upgrade the type sets may only widen, on downgrade they must not change) are taken as one:
    the generic adapter does the same for the run as for its first step.
    """
    versions = schemas(op)
    in_force = [s for s in versions if s.version <= current]
    if not in_force:
        raise Refuse(f"{op} does not exist before opset {versions[0].version}")
    have = in_force[-1]
    if up:
        steps = [v for v in _upgrade_steps(op) if current < v <= target]
        if not steps:
            return None
        version = steps[0]
        new = [s for s in versions if s.version <= version][-1]
        step_adapter = find_adapter(op, version, up=True)
        plain = _plain_step(op, have, new, version, step_adapter, up=True)
        if plain:
            for later in steps[1:]:
                candidate = [s for s in versions if s.version <= later][-1]
                if not _plain_step(op, have, candidate, later, find_adapter(op, later, up=True), up=True):
                    break
                version, new = later, candidate
        return version, have, new, step_adapter, step_plan(op, have.version, new.version) if plain else None
    if have.version <= target:
        return None
    chain = [have]  # have, then each older schema that plain steps reach
    while chain[-1] is have or chain[-1].version > target:
        last = chain[-1]
        older = [s for s in versions if s.version < last.version]
        if not _plain_step(
            op, last, older[-1] if older else None, last.version, find_adapter(op, last.version, up=False), up=False
        ):
            break
        chain.append(older[-1])
    if len(chain) > 1:
        return chain[-2].version - 1, have, chain[-1], None, step_plan(op, have.version, chain[-1].version)
    older = [s for s in versions if s.version < have.version]
    return have.version - 1, have, older[-1] if older else None, find_adapter(op, have.version, up=False), None


def _plain_step(op: str, have: OpSchema, new: OpSchema | None, version: int, adapter, *, up: bool) -> bool:
    """A step the generic adapter passes through unchanged for any node ``have`` accepts (see ``_next_step``)."""
    if new is None or adapter is not None or (op, version) in SEMANTIC_CHANGES:
        return False
    if have is new:
        return True
    if not up and (have.version == 11 or new.version == 11 or version == 11):
        return False  # the opset-11 downgrade normalises negative axes
    if not _same_signature(have, new):
        return False
    cover = step_plan(op, have.version, new.version).types_cover
    return cover if up else cover and step_plan(op, new.version, have.version).types_cover


def _has_subgraph(graph: Graph) -> bool:
    return any(a.type in _GRAPH_KINDS for n in graph.nodes for a in n.attrs.values())


def _all_nodes(graph: Graph) -> list[Node]:
    """``graph.walk()`` as a list, without a generator step per node of a graph free of subgraphs."""
    if any(a.type in _GRAPH_KINDS or isinstance(a.value, Graph) for n in graph.nodes for a in n.attrs.values()):
        return list(graph.walk())
    return graph.nodes


def _passes_plainly(node: Node, plan: StepPlan) -> bool:
    """Whether the generic adapter would leave ``node`` as it is on the plain step ``plan``.

    On a plain step the generic adapter only refuses a node that breaks the schemas (unknown or
    mistyped attributes, a required one missing, inputs or outputs out of range); a node that
    clearly breaks none goes through untouched, anything else takes the full generic adapter.
    """
    new, attrs, inputs = plan.new, node.attrs, node.inputs
    if not new.min_inputs <= len(inputs) <= new.max_inputs or len(node.outputs) > new.max_outputs or None in inputs:
        return False
    if attrs:
        kinds = plan.plain_kinds
        for name, attr in attrs.items():
            if kinds.get(name) != attr.type:
                return False
    for name in plan.required:
        if name not in attrs:
            return False
    return True


@cache
def unchanged_form(op: str, source: int, target: int, inputs: tuple, outputs: int, attrs: tuple):
    """Whether :meth:`VersionConverter.advance` leaves every node of this form exactly as it is.

    A node's form is what the driver's decisions depend on short of attribute values and operand
    types: its op, which inputs are given (``inputs``: True, or False for an omitted one), how many
    outputs it lists and its attributes' ``(name, kind)``.  Returns None when a node of this form
    may change or be refused (it needs the converter), else the versions of the schemas whose type
    constraints its operand types must meet for it to pass unchanged (empty: whatever its types).
    """
    if not schemas(op):
        return None
    names = frozenset(name for name, _ in attrs)
    type_checks: list[int] = []
    current = source
    while True:
        up = current < target
        try:
            step = _next_step(op, current, target, up)
        except Refuse:
            return None
        if step is None:
            return tuple(type_checks)
        version, have, new, adapter, plain = step
        if plain is None or not _form_passes_plainly(plain, inputs, outputs, attrs, names):
            if adapter is not None or new is None:
                return None
            if not _generic_keeps_form(op, have, new, up, inputs, outputs, attrs, names, type_checks):
                return None
        current = version


def _form_passes_plainly(plan: StepPlan, inputs: tuple, outputs: int, attrs: tuple, names: frozenset) -> bool:
    """:func:`_passes_plainly` for a node form."""
    new = plan.new
    if not new.min_inputs <= len(inputs) <= new.max_inputs or outputs > new.max_outputs or not all(inputs):
        return False
    kinds = plan.plain_kinds
    for name, kind in attrs:
        if kinds.get(name) != kind:
            return False
    return all(name in names for name in plan.required)


def _generic_keeps_form(
    op: str,
    have: OpSchema,
    new: OpSchema,
    up: bool,
    inputs: tuple,
    outputs: int,
    attrs: tuple,
    names: frozenset,
    type_checks: list,
) -> bool:
    """Whether :meth:`VersionConverter.generic` leaves a node of this form alone (see ``unchanged_form``).

    Any attribute it would drop, add or question, any arity it would trim or refuse, and axes it
    would normalise count as a change; type sets that do not cover the old ones add ``new``'s
    version to ``type_checks`` (the node passes if its operand types fit, as :func:`fix_types` decides).
    """
    if have is new:
        return True
    if SEMANTIC_CHANGES.get((op, max(have.version, new.version))):
        return False
    plan = step_plan(op, have.version, new.version)
    kinds = plan.plain_kinds
    for name, kind in attrs:
        if kinds.get(name) != kind:
            return False
    if any(name not in names for name, _, _ in plan.changed_defaults) or any(
        name not in names for name in plan.required
    ):
        return False
    given = _trimmed(list(inputs))
    if not new.min_inputs <= len(given) <= new.max_inputs or outputs > new.max_outputs:
        return False
    for i, present in enumerate(given):
        p = _param_at(new.inputs, i)
        if not present and p is not None and p.option == "single":
            return False
    if not up and have.version == 11 and names & {"axis", "axes"}:
        return False
    if not plan.types_cover:
        type_checks.append(new.version)
    return True


@cache
def types_fit(op: str, type_checks: tuple, input_types: tuple, output_types: tuple) -> bool:
    """Whether operands of these type signatures (None: unknown) meet ``op``'s schemas of ``type_checks``."""
    by_version = {s.version: s for s in schemas(op)}
    return not any(misfits(by_version[v], input_types, output_types) for v in type_checks)


def misfits(schema: OpSchema, input_types, output_types) -> dict[str, str]:
    """Type constraint -> the first operand type signature ``schema`` does not accept under it."""
    bad: dict[str, str] = {}
    for params, sigs in ((schema.inputs, input_types), (schema.outputs, output_types)):
        for i, sig in enumerate(sigs):
            p = _param_at(params, i)
            if sig is None or p is None:
                continue
            allowed = schema.allowed_types(p)
            if allowed is None or sig in allowed:
                continue
            bad.setdefault(p.type, sig)
    return bad


def _same_signature(a: OpSchema, b: OpSchema) -> bool:
    return _signature(a.name, a.version) == _signature(b.name, b.version)


@cache
def _signature(op: str, version: int) -> tuple:
    """Attributes and operand forms of one schema (not its type sets), for comparing versions."""
    s = {s.version: s for s in schemas(op)}[version]
    attrs = frozenset((a.name, a.type, a.required, repr(a.default), a.allowed) for a in s.attributes)
    operands = tuple((p.option, p.type) for p in s.inputs), tuple((p.option, p.type) for p in s.outputs)
    return attrs, operands, s.min_inputs, s.max_inputs, s.min_outputs, s.max_outputs


@dataclass
class Problem:
    """A node that cannot reach the target: where, what, and the opsets it would need."""

    label: str
    op: str
    reason: str
    needs: str
    node: str = ""  # the node's name, else its first output's (with the subgraph path, if any)
    domain: str = ""
    version: int | None = None  # the operator's version when it was refused

    def __str__(self) -> str:
        return f"{self.label}: {self.reason} ({self.op} as used here needs opset {self.needs})"


#: how many node names a grouped refusal lists before "..."
_NAMES_SHOWN = 5


def grouped_problems(problems: Sequence[Problem], target: int) -> str:
    """One line per distinct refusal: ``Op-v -> target: reason (needs) (N nodes: a, b, ...)``.

    A real model repeats its layers, so one reason often holds for hundreds of nodes.
    """
    groups: dict[tuple, list[Problem]] = {}
    for p in problems:
        groups.setdefault((p.op, p.version, p.reason, p.needs), []).append(p)
    lines = []
    for (op, version, reason, needs), members in groups.items():
        names = [m.node or m.label for m in members]
        shown = ", ".join(names[:_NAMES_SHOWN]) + (", ..." if len(names) > _NAMES_SHOWN else "")
        head = f"{op}-{version} -> {target}" if version is not None else op
        count = f"{len(members)} nodes" if len(members) > 1 else "node"
        lines.append(f"{head}: {reason} (needs opset {needs}) ({count}: {shown})")
    return " | ".join(lines)


class Context:
    """What an adapter sees: the node's graph, helpers to build and read values, and type knowledge."""

    __slots__ = ("converter", "graph", "node", "version", "created", "replaced")

    def __init__(self, converter: VersionConverter, graph: Graph, node: Node, version: int):
        self.converter = converter
        self.graph = graph
        self.node = node
        self.version = version  # the opset new nodes are built at
        self.created: list[Node] = []
        self.replaced = False

    # -- reading ------------------------------------------------------------
    def static(self, value: Value | None, what: str) -> np.ndarray:
        """The constant data of ``value``; refuses when it is computed at run time."""
        data = constant_value(value)
        if data is None:
            raise Refuse(f"{what} ({value.name!r}) is computed at run time; an attribute needs a constant")
        return data

    @staticmethod
    def constant(value: Value | None) -> np.ndarray | None:
        """The constant data of ``value``, or None when it is computed at run time (no refusal)."""
        return constant_value(value)

    def dtype(self, value: Value | None) -> str | None:
        return self.converter.dtype_of(value)

    def shape(self, value: Value | None) -> tuple | None:
        shape = getattr(self.converter.type_of(value), "shape", None)
        return None if shape is None else tuple(shape)

    def rank(self, value: Value | None, what: str = "input") -> int:
        shape = self.shape(value)
        if shape is None:
            raise Refuse(f"the rank of {what} {getattr(value, 'name', '?')!r} is unknown")
        return len(shape)

    # -- building -----------------------------------------------------------
    def op(
        self, op: str, *inputs: Value | None, _outputs: int = 1, _version: int | None = None, **attrs
    ) -> Value | list[Value]:
        """A new node before the adapted one, at this step's opset (or ``_version``)."""
        typed = {k: v if isinstance(v, Attr) else infer_attr(k, v) for k, v in attrs.items()}
        hint = f"{self.node.name}/{op}" if self.node.name else op
        # Appended, not inserted before the node (a list insert per node is quadratic on big graphs):
        # the driver sorts each graph it changed once, at the end.
        out = self.graph.op(
            op,
            *inputs,
            version=self.version if _version is None else _version,
            outputs=_outputs,
            name=hint,
            attrs=typed,
        )
        self.converter.changed.add(self.graph)
        first = out if isinstance(out, Value) else out[0]
        self.created.append(first.producer)
        return out

    def const(self, array, name: str = "const") -> Value:
        array = np.asarray(array)
        graph = self.graph
        if id(graph) in self.converter.function_graphs:  # a function body has no initializers
            out = self.op("Constant", value=array)
            out.type = TensorType(element_type_of(array), array.shape)
            return out
        # Graph.const, without working out again what the array already knows
        unique = graph.unique_name(f"{self.node.name or self.node.op}_{name}")
        return graph.add_initializer(
            unique, Tensor(element_type_of(array), array.shape, array=array, nbytes=array.nbytes)
        )

    def branch(self, label: str, op: str, *inputs: Value | None, out_type=None, **attrs) -> Graph:
        """A one-node subgraph (an If branch) reading ``inputs`` from this graph, at this step's opset.

        Its node is stepped to the target at once (the walk over the model's subgraphs is past)."""
        hint = f"{self.node.name or self.node.op}/{label}"
        sub = Graph(hint, parent=self.graph)
        typed = {k: v if isinstance(v, Attr) else infer_attr(k, v) for k, v in attrs.items()}
        out = sub.op(op, *inputs, version=self.version, name=hint, attrs=typed)
        out.type = out_type
        sub.outputs = [out]
        self.converter.graph(sub, f"{self.node.label} / {label}: ")
        sub.nodes = [n for n in sub.nodes if n.graph is sub]  # as tidy() does (the protobuf path skips it)
        sub.topological_sort()
        return sub

    def cast(self, value: Value, dtype: str) -> Value:
        out = self.op("Cast", value, to=element_type(dtype).onnx)
        shape = self.shape(value)
        out.type = TensorType(dtype, shape) if shape is not None or value.type is not None else None
        return out

    # -- editing the node ---------------------------------------------------
    @staticmethod
    def pop_attr(node: Node, name: str, default: Any = None) -> Any:
        a = node.attrs.pop(name, None)
        return default if a is None else a.value

    @staticmethod
    def set_attr(node: Node, name: str, value: Any) -> None:
        node.attrs[name] = infer_attr(name, value)

    @staticmethod
    def set_inputs(node: Node, values: Sequence[Value | None]) -> None:
        """Replace the node's input list (trailing omitted inputs are dropped)."""
        values = list(values)
        while values and values[-1] is None:
            values.pop()
        node.detach()
        node.inputs = []
        for v in values:
            node.append_input(v)

    def replace(self, node: Node, values: Sequence[Value | None]) -> None:
        """Let ``values`` take the place of ``node``'s outputs, then remove ``node``.

        A value built in this step takes over the old output's name (graph outputs and
        value_info keep their names); any other value is forwarded through Identity
        when the old output was a graph output.
        """
        graph = self.graph
        created = {id(n) for n in self.created}
        outputs = node.outputs
        node.outputs = []
        for old, new in zip(outputs, values):
            if old is None:
                continue
            if new is None:
                if old.uses or old in graph.outputs:
                    raise Refuse(f"output {old.name!r} has no equivalent")
                continue
            if new.producer is not None and id(new.producer) in created and new not in graph.outputs:
                producer, index = new.producer, new.index
                new.replace_all_uses_with(old)
                producer.outputs[index] = old
                old.producer, old.index = producer, index
                if old.type is None:
                    old.type = new.type
            elif any(old is o for o in graph.outputs):
                forwarded = self.op("Identity", new)
                self.replace_output(forwarded, old)
            else:
                old.replace_all_uses_with(new)
        for v in outputs[len(values) :]:
            if v is not None and (v.uses or v in graph.outputs):
                raise Refuse(f"output {v.name!r} has no equivalent")
        node.detach()
        node.graph = None  # dropped from graph.nodes with the final sort
        self.converter.changed.add(graph)
        self.replaced = True

    @staticmethod
    def replace_output(new: Value, old: Value) -> None:
        producer, index = new.producer, new.index
        new.replace_all_uses_with(old)
        producer.outputs[index] = old
        old.producer, old.index = producer, index


class VersionConverter:
    """One conversion: the target, direction, and the problems found so far."""

    def __init__(
        self, model: Model, target: int, source_proto=None, inferred: dict | None = None, may_infer: bool | None = None
    ):
        self.model = model
        self.source_proto = source_proto  # the model as a ModelProto, when the caller has one (for inference)
        self.source = model.opsets.get("", model.opsets.get("ai.onnx", 1))
        self.target = target
        self.up = target >= self.source
        self.problems: list[Problem] = []
        self.function_graphs = {id(f.graph) for f in model.functions}
        self.changed: set[Graph] = set()  # graphs whose node list needs the final clean-up and sort
        self.inferred: dict | None = {}  # value name -> inferred ValueInfoProto (None: not run yet)
        self.given_types = inferred  # shape inference already run by the caller (its result, as infer_types')
        self.may_infer = may_infer  # whether adapters may read inferred types (None: decide from the nodes)
        self._nested = False  # whether the model has subgraphs, whose types inference collects too
        self._reader = None
        self._converted: dict[bytes, object] = {}  # serialized TypeProto -> its type

    def type_of(self, value: Value | None):
        """The value's type, completed from shape inference when the model did not record it."""
        if value is None:
            return None
        t = value.type
        if t is not None and not (isinstance(t, TensorType) and t.shape is None):
            return t
        value.type = self.completed(value.name, t)
        return value.type

    def dtype_of(self, value: Value | None) -> str | None:
        """The element type of :meth:`type_of` (what ``Context.dtype`` reads)."""
        return getattr(self.type_of(value), "dtype", None)

    def completed(self, name: str, declared, *, keep: bool = False):
        """What :meth:`type_of` makes of a value ``name`` whose recorded type ``declared`` is incomplete.

        The inferred type is taken (popped) for the one value of that name, unless ``keep``: a
        look-up for a value not in the graph (yet).  (Sibling subgraphs may reuse a name.)
        """
        if self.inferred is None:  # first need: run it now, on the source (which conversion leaves alone)
            self.inferred = infer_types(self.model, self.source_proto, nested=self._nested)
        found = self.inferred.get(name) if keep else self.inferred.pop(name, None)
        if found is None:
            return declared
        found = found.type
        # Types are immutable: one conversion per distinct TypeProto (repeated layers repeat them).
        key = found.SerializeToString()
        t = self._converted.get(key, self)
        if t is self:
            if self._reader is None:
                from ...dialects.onnx.io import ProtoReader

                self._reader = ProtoReader(None, None)
            t = self._converted[key] = self._reader.value_type(found)
        return t or declared

    # -- driving --------------------------------------------------------------
    def run(self) -> None:
        if self.source != self.target:
            self.start()
            self.graph(self.model.graph, "")
            for f in self._functions():
                self.graph(f.graph, f"function {f.name!r}: ")
        self.conclude()

    def start(self) -> None:
        """Decide where types come from, before the first node moves."""
        may_infer = self.may_infer
        if may_infer is None:
            may_infer = not self.up or any(n.op in UPGRADE_NEEDS_TYPES for n in _all_nodes(self.model.graph))
        if self.given_types is not None:
            self.inferred = self.given_types
        elif may_infer:
            # From the caller's protobuf, inference waits until an adapter asks for a type.
            self._nested = _has_subgraph(self.model.graph)
            self.inferred = None if self.source_proto is not None else infer_types(self.model)

    def conclude(self) -> None:
        """Tidy the changed graphs, then refuse with every problem found, or set the model's opset."""
        self.tidy()
        if self.problems:
            where = self.model.path
            raise ConversionError(
                f"{len(self.problems)} node(s) cannot be converted from opset {self.source} to "
                f"{self.target}: " + grouped_problems(self.problems, self.target),
                self.problems,
                where=where,
            )
        self.finish()

    def tidy(self) -> None:
        """Drop the nodes adapters replaced, and order each graph that changed topologically again."""
        for graph in self.changed:
            graph.nodes = [n for n in graph.nodes if n.graph is graph]
            graph.topological_sort()

    def graph(self, graph: Graph, where: str) -> None:
        for node in list(graph.nodes):
            if node.graph is not graph:
                continue
            if node.attrs and any(a.type in _GRAPH_KINDS for a in node.attrs.values()):
                for name, sub in _subgraphs(node):
                    self.graph(sub, f"{where}{node.label} / {name}: ")
            if node.domain in ONNX_DOMAINS:
                self.node(graph, node, where)

    def node(self, graph: Graph, node: Node, where: str) -> None:
        pending = [node]
        while pending:
            n = pending.pop()
            try:
                pending.extend(self.advance(graph, n))
            except (Refuse, OpconvError) as e:
                self.problems.append(self.problem(n, where, e.message if isinstance(e, OpconvError) else str(e)))
            except MALFORMED as e:  # an adapter meeting a node its schema would not allow
                self.problems.append(self.problem(n, where, f"cannot take this node ({type(e).__name__}: {e})"))

    def problem(self, node: Node, where: str, reason: str) -> Problem:
        first = next((v.name for v in node.outputs if v is not None), "?")
        name = where + (node.name or f"<{node.op} -> {first}>")
        opset = node.version if node.version is not None else self.source
        version = max((s.version for s in schemas(node.op) if s.version <= opset), default=None)
        return Problem(where + node.label, node.op, reason, self.valid_range(node), name, node.domain or "", version)

    def valid_range(self, node: Node) -> str:
        """The opsets the node, as it stands when refused, is valid in, on the side of the move."""
        versions = [s.version for s in schemas(node.op)]
        if not versions:
            return "(unknown operator)"
        now = node.version or self.source
        lower = [v for v in versions if v <= now]
        if node.version is not None and node.version < self.target:  # refused on the way up
            higher = [v for v in _upgrade_steps(node.op) if v > now]
            return f"<= {higher[0] - 1}" if higher else f">= {lower[-1] if lower else versions[0]}"
        return f">= {lower[-1] if lower else versions[0]}"

    def advance(self, graph: Graph, node: Node) -> list[Node]:
        """Step ``node`` toward the target; returns nodes built by a replacing adapter (still to step)."""
        if not schemas(node.op):
            raise Refuse(f"{node.op} is not an ai.onnx operator")
        while True:
            current = node.version if node.version is not None else self.source
            # Nodes an adapter built at an older opset than the target (e.g. a decomposition that needs
            # attribute forms) go up from there, whatever the model's direction.
            up = current < self.target
            step = _next_step(node.op, current, self.target, up)
            if step is None:
                node.version = self.target
                return []
            step_version, have, new, adapter, plain = step
            if plain is not None and _passes_plainly(node, plain):
                node.version = step_version  # what the generic adapter would conclude, without its checks
                continue
            ctx = Context(self, graph, node, step_version)
            if adapter is not None:
                adapter(ctx, node)
            if not ctx.replaced:
                if new is None:
                    raise Refuse(
                        f"{node.op} exists from opset {have.version} and no decomposition "
                        f"into older operators is defined"
                    )
                self.generic(ctx, node, have, new, up=up, adapted=adapter is not None)
            if ctx.replaced:
                return ctx.created
            node.version = step_version
            # Casts and helper nodes built around a node that stays continue on their own.
            for made in ctx.created:
                if made.graph is graph:
                    self.node(graph, made, "")

    # -- the generic adapter ----------------------------------------------------
    def generic(self, ctx: Context, node: Node, have: OpSchema, new: OpSchema, *, up: bool, adapted: bool) -> None:
        """A step whose signature is unchanged, or whose changed parts the node does not use.

        After a hand-written adapter (``adapted``) the same checks prove its result legal in ``new``.
        """
        if have is new:
            return  # a registered step where the schema did not change (e.g. a function body's opset)
        changed = SEMANTIC_CHANGES.get((node.op, max(have.version, new.version)))
        if changed and not adapted:
            raise Refuse(
                f"{node.op}-{max(have.version, new.version)} changed meaning ({changed}) "
                f"and no adapter handles this node"
            )
        plan = step_plan(node.op, have.version, new.version)
        self.attributes(node, plan, up)
        self.arity(node, have, new)
        if not up and have.version == 11:
            normalize_negative_axes(ctx, node)
        if not plan.types_cover:
            fix_types(ctx, node, new, may_cast=not up)

    def attributes(self, node: Node, plan: StepPlan, up: bool) -> None:
        new, have = plan.new, plan.have
        new_attrs = plan.new_attrs
        for name, attr in list(node.attrs.items()):
            spec = new_attrs.get(name)
            if spec is None:
                old = have.attribute(name)
                if up and name in _OBSOLETE_ATTRS:
                    del node.attrs[name]
                elif (
                    old is not None
                    and old.default is not None
                    and attr.ref is None
                    and _same_value(attr.value, old.default)
                ):
                    del node.attrs[name]  # set to the default of the version that knows it: no effect
                else:
                    raise Refuse(f"attribute {name!r} does not exist in {node.op}-{new.version}")
            elif spec.type != attr.type:
                raise Refuse(
                    f"attribute {name!r} is {attr.type} in {node.op}-{have.version} "
                    f"but {spec.type} in {node.op}-{new.version}"
                )
            elif spec.allowed is not None and attr.ref is None and attr.value not in spec.allowed:
                raise Refuse(f"attribute {name}={attr.value!r} is not allowed in {node.op}-{new.version}")
        for name, kind, default in plan.changed_defaults:
            if name not in node.attrs:
                node.attrs[name] = Attr(name, kind, default)
        for name in plan.required:
            if name not in node.attrs:
                if name == "consumed_inputs":
                    # required by a few opset-1 ops; zeros say no input is updated in place
                    node.attrs[name] = Attr(name, "ints", [0] * len(_trimmed(node.inputs)))
                else:
                    raise Refuse(f"attribute {name!r} is required by {node.op}-{new.version}")

    def arity(self, node: Node, have: OpSchema, new: OpSchema) -> None:
        inputs = node.inputs
        if None in inputs:
            inputs = _trimmed(inputs)
        if len(inputs) > new.max_inputs:
            extra = _param_at(have.inputs, new.max_inputs)
            raise Refuse(f"input {extra.name if extra else new.max_inputs!r} does not exist in {node.op}-{new.version}")
        if None in inputs:
            for i, v in enumerate(inputs):
                p = _param_at(new.inputs, i)
                if v is None and p is not None and p.option == "single":
                    raise Refuse(f"input {p.name!r} is required by {node.op}-{new.version}")
        if len(inputs) < new.min_inputs:
            raise Refuse(f"{node.op}-{new.version} needs at least {new.min_inputs} inputs")
        # Outputs the older version lacks may go when nothing reads them.
        while len(node.outputs) > new.max_outputs:
            last = node.outputs[-1]
            if last is not None and (last.uses or last in self_graph_outputs(node)):
                raise Refuse(f"output {last.name!r} does not exist in {node.op}-{new.version}")
            node.outputs.pop()

    # -- finishing ---------------------------------------------------------------
    def finish(self) -> None:
        m = self.model
        key = "ai.onnx" if "ai.onnx" in m.opsets and "" not in m.opsets else ""
        m.opsets[key] = self.target
        needed = min_ir_version(self.target)
        if needed and int(m.meta.get("ir_version") or 0) < needed:
            m.meta["ir_version"] = needed
        for n in _all_nodes(m.graph):
            if n.domain in ONNX_DOMAINS:
                n.version = self.target
        for f in self._functions():
            f.opsets["ai.onnx" if "ai.onnx" in f.opsets and "" not in f.opsets else ""] = self.target
            for n in _all_nodes(f.graph):
                if n.domain in ONNX_DOMAINS:
                    n.version = self.target

    def _functions(self) -> list:
        """Model-local functions written against the model's own ai.onnx opset move with it."""
        return [f for f in self.model.functions if f.opsets.get("", f.opsets.get("ai.onnx")) == self.source]


@dataclass(frozen=True)
class StepPlan:
    """What the generic adapter needs to know of one step, computed once per (op, from, to)."""

    have: OpSchema
    new: OpSchema
    new_attrs: dict
    changed_defaults: tuple  # (name, type, default): a default that differs in ``new``, numeric ones
    required: tuple  # attributes ``new`` requires
    types_cover: bool  # every operand type ``have`` accepts, ``new`` accepts too
    plain_kinds: dict  # name -> kind of ``new``'s attributes that accept any value of their kind


@cache
def step_plan(op: str, have_version: int, new_version: int) -> StepPlan:
    by_version = {s.version: s for s in schemas(op)}
    have, new = by_version[have_version], by_version[new_version]
    new_attrs = {a.name: a for a in new.attributes}
    changed = tuple(
        (old.name, old.type, old.default)
        for old in have.attributes
        if old.name in new_attrs
        and old.default is not None
        and old.type in ("int", "float", "ints", "floats")
        and not _same_value(old.default, new_attrs[old.name].default)
    )
    required = tuple(a.name for a in new.attributes if a.required)
    cover = True
    for params_have, params_new in ((have.inputs, new.inputs), (have.outputs, new.outputs)):
        for i in range(max(len(params_have), len(params_new))):
            ph, pn = _param_at(params_have, i), _param_at(params_new, i)
            if ph is None or pn is None:
                continue
            a, b = have.allowed_types(ph), new.allowed_types(pn)
            if a is None or b is None or not set(a) <= set(b):
                cover = False
    plain_kinds = {a.name: a.type for a in new.attributes if a.allowed is None}
    return StepPlan(have, new, new_attrs, changed, required, cover, plain_kinds)


def element_type_of(array: np.ndarray) -> str:
    name = _ELEMENT_NAMES.get(array.dtype)
    if name is None:
        name = _ELEMENT_NAMES[array.dtype] = from_numpy(array.dtype).name
    return name


_ELEMENT_NAMES: dict = {}  # numpy dtype -> element type name


def self_graph_outputs(node: Node) -> list[Value]:
    return node.graph.outputs if node.graph is not None else []


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return abs(float(a) - float(b)) <= 1e-6 * max(1.0, abs(float(b)))
        except (TypeError, ValueError):
            return False
    return text_value(a) == b


def _trimmed(values: list) -> list:
    end = len(values)
    while end and values[end - 1] is None:
        end -= 1
    return values[:end]


def _param_at(params, i: int):
    if i < len(params):
        return params[i]
    if params and params[-1].option == "variadic":
        return params[-1]
    return None


def _subgraphs(node: Node):
    for name, a in node.attrs.items():
        items = a.value if isinstance(a.value, list) else [a.value]
        for g in items:
            if isinstance(g, Graph):
                yield name, g


def normalize_negative_axes(ctx: Context, node: Node) -> None:
    """Before opset 11, ``axis``/``axes`` attributes had to be non-negative: count from the input's rank."""
    for name in ("axis", "axes"):
        a = node.attrs.get(name)
        if a is None or a.ref is not None:
            continue
        values = a.value if isinstance(a.value, list) else [a.value]
        if all(v >= 0 for v in values):
            continue
        rank = ctx.rank(node.inputs[0], "input")
        fixed = [v + rank if v < 0 else v for v in values]
        node.attrs[name] = Attr(name, a.type, fixed if isinstance(a.value, list) else fixed[0])


def fix_types(ctx: Context, node: Node, schema: OpSchema, *, may_cast: bool) -> None:
    """Make the node's operand types legal in ``schema``: wider-type Casts on downgrade, else refuse."""
    type_of = ctx.converter.type_of
    bad = misfits(
        schema,
        *(
            [
                None if v is None or _param_at(params, i) is None else type_signature(type_of(v))
                for i, v in enumerate(values)
            ]
            for params, values in ((schema.inputs, node.inputs), (schema.outputs, node.outputs))
        ),
    )
    if not bad:
        return
    label = ", ".join(f"{sig}" for sig in bad.values())
    if not may_cast or node.op in _NO_CAST:
        raise Refuse(f"{node.op}-{schema.version} does not accept {label}")
    for constraint, sig in bad.items():
        allowed = schema.type_constraints.get(constraint)
        dtype = node_dtype(ctx, node, schema, constraint)
        wider = next((w for w in _WIDER.get(dtype or "", ()) if f"tensor({w})" in (allowed or ())), None)
        uses_input = any(
            _param_at(schema.inputs, i) is not None and _param_at(schema.inputs, i).type == constraint
            for i, v in enumerate(node.inputs)
            if v is not None
        )
        if allowed is None or wider is None or not uses_input:
            raise Refuse(f"{node.op}-{schema.version} does not accept {sig}")
        for i, v in enumerate(list(node.inputs)):
            p = _param_at(schema.inputs, i)
            if v is not None and p is not None and p.type == constraint:
                node.set_input(i, ctx.cast(v, wider))
        for i, v in enumerate(list(node.outputs)):
            p = _param_at(schema.outputs, i)
            if v is None or p is None or p.type != constraint:
                continue
            inner = Value(
                ctx.graph.unique_name(f"{v.name}_{wider}"), TensorType(wider, v.shape) if v.type is not None else None
            )
            node.outputs[i] = inner
            inner.producer, inner.index = node, i
            v.producer = None
            back = ctx.op("Cast", inner, to=element_type(dtype).onnx)
            ctx.replace_output(back, v)


def node_dtype(ctx: Context, node: Node, schema: OpSchema, constraint: str) -> str | None:
    for params, values in ((schema.inputs, node.inputs), (schema.outputs, node.outputs)):
        for i, v in enumerate(values):
            p = _param_at(params, i)
            dtype = ctx.dtype(v)
            if p is not None and p.type == constraint and dtype is not None:
                return dtype
    return None


def infer_types(model: Model | None, proto=None, nested: bool | None = None) -> dict:
    """ONNX shape inference, run once on the model as given: {value name: its ValueInfoProto}.

    Types are converted when an adapter asks for one (:meth:`VersionConverter.type_of`), not
    for every value of a big graph.  ``nested``: whether subgraphs' types are wanted too (None:
    whether ``model`` has any); ``model`` None: ``proto`` alone, a graph without subgraphs.
    """
    from ...dialects.onnx.io import to_proto
    from ...dialects.onnx.proto import infer_shapes, inference_failures

    try:
        inferred = infer_shapes(proto if proto is not None else to_proto(model), data_prop=True)
    except inference_failures():  # inference is best effort; adapters refuse without types
        return {}
    found: dict = {}
    if nested is None:
        nested = model is not None and _has_subgraph(model.graph)
    _collect_types(inferred.graph, found, nested)
    return found


def _collect_types(graph, found: dict, nested: bool = True) -> None:
    for infos in (graph.value_info, graph.input, graph.output):
        for vi in infos[:]:  # a slice of a upb repeated field is read at C speed, the field itself is not
            found.setdefault(vi.name, vi)  # (its .type is read for the few values adapters ask about)
    if not nested:  # no node holds a subgraph: skip reading every node's attributes
        return
    for n in graph.node:
        for a in n.attribute:
            if a.HasField("g"):
                _collect_types(a.g, found)
            for g in a.graphs:
                _collect_types(g, found)


#: (highest ai.onnx opset, the IR version that came with it), from onnx's release history; kept here because
#: importing onnx.helper for its table costs ~40 ms of every ``opconv upgrade`` (tests compare the two)
_IR_FOR_OPSET = (
    (8, 3),
    (9, 4),
    (10, 5),
    (11, 6),
    (14, 7),
    (18, 8),
    (20, 9),
    (22, 10),
    (23, 11),
    (24, 12),
    (27, 13),
    (28, 14),
)


def min_ir_version(opset: int) -> int | None:
    """The lowest IR version that knows ai.onnx ``opset``."""
    for highest, ir_version in _IR_FOR_OPSET:
        if opset <= highest:
            return ir_version
    try:  # an opset newer than the table: onnx's own version table
        from onnx.helper import VERSION_TABLE
    except ImportError:
        return None
    found = [row[1] for row in VERSION_TABLE if row[2] >= opset]
    return min(found) if found else None


def convert_version(model: Model, opset: int, *, source_proto=None) -> Model:
    """Convert ``model`` (modified in place: pass a copy) to ai.onnx ``opset``."""
    if model.dialect != "onnx":
        raise ConversionError(f"version conversion needs an ONNX model, not {model.dialect}", where=model.path)
    newest = newest_opset()
    if not 1 <= opset <= newest:
        raise ConversionError(
            f"opset {opset} is outside 1..{newest}, the ai.onnx opsets this onnx defines", where=model.path
        )
    VersionConverter(model, opset, source_proto).run()
    return model
